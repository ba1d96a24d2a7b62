//! Issue 9's evaluation targets, measured so that a ratio compares like with
//! like. Criterion times each case in its own window of seconds; on this
//! 2-vCPU VM single-thread times drift by a third between such windows,
//! more than the ratios being checked. Here native, warm-instance and
//! fresh-instance evaluations of the same defaulted pod take turns in
//! rounds of a few milliseconds: per round and case, one untimed call (so
//! each side runs with its own code and data in cache, as in a loop), then
//! a timed block of [`BLOCK`] calls. Each figure is the median over rounds
//! of the per-call mean of a block. (Alternating single calls instead
//! favours the component: each call then starts with caches the other
//! side evicted, which costs the smaller native working set more.)
//!
//! `cargo bench -p podpolicy --bench evaluate_ratio [-- ROUNDS]` (default
//! 200). `BENCH_PROFILE=component-prepared-3:20000` (or `native-prepared-`,
//! `fresh-`; 3 or 20 containers; or `fresh-floor`, a fresh instance made and
//! dropped without a call) runs one case alone for a profiler. Pods and node
//! as in `benches/policy.rs`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime};

#[path = "../../fuzz/src/convert.rs"]
mod convert;
use convert::to_native;

mod common;
mod product_allocator;
mod profile_case;
mod targets;
use common::{agreed_pod, node};

/// Timed calls per case and round.
const BLOCK: u32 = 16;

/// Per-call mean of a timed block of `f`, after one untimed call.
fn block(mut f: impl FnMut()) -> Duration {
    f();
    let start = Instant::now();
    for _ in 0..BLOCK {
        f();
    }
    start.elapsed() / BLOCK
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(200, |n| n.parse().expect("ROUNDS is a number"));
    // A profiled run loads the compiled policy from the cache: mapped from
    // a file, its functions have names (`wasm[0]::function[N]`) in `perf`.
    let profile = profile_case::requested();
    let cache = if profile.is_some() {
        Cache::default_location()
    } else {
        Cache::Off
    };
    let policy = PolicyRuntime::from_bytes(EMBEDDED_POLICY, &cache, Limits::default())
        .expect("the policy loads");
    let node = node();
    let native_node = to_native(&node);
    let policy = std::sync::Arc::new(policy);
    let mut warm = policy.warm().expect("a warm instance");
    let native_prepared = policy_wasm::prepared::PreparedNode::prepare(&native_node, None)
        .unwrap_or_else(|e| panic!("the node prepares natively: {e:?}"));
    let mut prepared = podpolicy::runtime::PreparedPolicy::new(policy.clone(), node.clone(), None)
        .expect("call")
        .expect("the node prepares");

    // A pooled instance and its store made and dropped without a call.
    let instantiate_only = || policy.call(|_, _| Ok(())).expect("instantiates");

    println!("evaluate, cases interleaved in blocks of {BLOCK} calls, medians of {rounds} rounds");
    println!(
        "{:<14} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "pod",
        "native",
        "warm",
        "fresh",
        "warm/native",
        "fresh/native",
        "native prep",
        "warm prep",
        "prep/nat prep"
    );
    for count in [3, 20] {
        // Both sides agree before they are timed.
        let (pod, native_pod) = agreed_pod(&policy, &node, count);
        if profile_case::run_if(&format!("native-prepared-{count}"), &profile, || {
            black_box(native_prepared.evaluate(black_box(&native_pod))).expect("evaluates");
        }) || profile_case::run_if(&format!("component-prepared-{count}"), &profile, || {
            black_box(prepared.evaluate(black_box(&pod)).expect("call")).expect("evaluates");
        }) || profile_case::run_if(&format!("fresh-{count}"), &profile, || {
            black_box(policy.evaluate(black_box(&pod), &node).expect("call")).expect("evaluates");
        }) {
            return;
        }
        if profile.is_some() {
            continue;
        }

        let (mut native, mut warm_times, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
        let (mut native_prep, mut warm_prep) = (Vec::new(), Vec::new());
        let mut floor = Vec::new();
        for _ in 0..rounds {
            native_prep.push(block(|| {
                black_box(native_prepared.evaluate(black_box(&native_pod))).expect("evaluates");
            }));
            warm_prep.push(block(|| {
                black_box(prepared.evaluate(black_box(&pod)).expect("call")).expect("evaluates");
            }));
            native.push(block(|| {
                black_box(policy_wasm::evaluate::evaluate(
                    black_box(&native_pod),
                    &native_node,
                ))
                .expect("evaluates");
            }));
            warm_times.push(block(|| {
                black_box(
                    warm.call(|p, s| p.call_evaluate(s, black_box(&pod), &node))
                        .expect("call"),
                )
                .expect("evaluates");
            }));
            fresh.push(block(|| {
                black_box(policy.evaluate(black_box(&pod), &node).expect("call"))
                    .expect("evaluates");
            }));
            // The floor under `fresh`: a pooled instance and its store made
            // and dropped without a call (the slot's reset included), on
            // the slots the fresh calls of this pod size leave.
            floor.push(block(instantiate_only));
        }
        let (native, warm_time, fresh) = (median(native), median(warm_times), median(fresh));
        let (native_prep, warm_prep) = (median(native_prep), median(warm_prep));
        let ratio = |d: Duration| d.as_secs_f64() / native.as_secs_f64();
        let prepared_ratio = warm_prep.as_secs_f64() / native_prep.as_secs_f64();
        println!(
            "{:<14} {:>8.1}us {:>8.1}us {:>8.1}us {:>11.2}x {:>11.2}x {:>10.1}us {:>10.1}us {:>13.2}x",
            format!("{count} containers"),
            micros(native),
            micros(warm_time),
            micros(fresh),
            ratio(warm_time),
            ratio(fresh),
            micros(native_prep),
            micros(warm_prep),
            prepared_ratio,
        );
        println!(
            "{:<14} fresh pooled instance, no call (the floor under `fresh`): {:.1}us",
            "",
            micros(median(floor))
        );
        // The warm targets are for the long-lived hosts' path: a prepared
        // node in a warm instance, against the same work natively.
        if count == 3 {
            targets::ratio_at_most("warm-evaluate-3", prepared_ratio, targets::WARM_3_RATIO);
            targets::time_at_most("fresh-evaluate-3", fresh, targets::FRESH_EVALUATION);
        } else {
            targets::ratio_at_most("warm-evaluate-20", prepared_ratio, targets::WARM_20_RATIO);
        }
    }
    // The floor under `fresh` (see the loop): a case of its own for a profiler.
    if profile_case::run_if("fresh-floor", &profile, instantiate_only) {
        return;
    }
    profile_case::unknown(
        &profile,
        &[
            "{native,component}-prepared-{3,20}",
            "fresh-{3,20}",
            "fresh-floor",
        ],
    );
}
