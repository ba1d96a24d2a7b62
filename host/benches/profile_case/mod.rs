//! One case of a bench on its own, for a profiler: with
//! `BENCH_PROFILE=<case>:<calls>` in the environment, a bench runs only
//! that case, `calls` times, after its set-up (so the answers were already
//! checked to agree) and prints how many calls it made; without it, the
//! bench runs as usual. Instructions per call are then the difference of
//! two `perf stat -e instructions:u` runs with different call counts over
//! the difference of the counts, which cancels the set-up (BENCHMARKS.md,
//! "Profiles of the missed targets").
#![allow(dead_code)]

/// The case and call count asked for, if any. A malformed value stops the
/// bench: a profile of the wrong thing is worse than none.
pub fn requested() -> Option<(String, u64)> {
    let value = std::env::var("BENCH_PROFILE").ok()?;
    let (case, calls) = value
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("BENCH_PROFILE={value}: expected <case>:<calls>"));
    let calls = calls
        .parse()
        .unwrap_or_else(|_| panic!("BENCH_PROFILE={value}: <calls> is not a number"));
    Some((case.to_string(), calls))
}

/// Run `f` `calls` times if `case` is the one asked for; true when it ran.
pub fn run_if(case: &str, requested: &Option<(String, u64)>, mut f: impl FnMut()) -> bool {
    match requested {
        Some((wanted, calls)) if wanted == case => {
            for _ in 0..*calls {
                f();
            }
            println!("profiled case {case}: {calls} calls");
            true
        }
        _ => false,
    }
}

/// Stop a bench that was asked for a case it does not have.
pub fn unknown(requested: &Option<(String, u64)>, cases: &[&str]) {
    if let Some((wanted, _)) = requested {
        panic!(
            "BENCH_PROFILE: no case `{wanted}` here; cases: {}",
            cases.join(", ")
        );
    }
}
