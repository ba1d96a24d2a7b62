//! `podpolicy explain` of many pods, the whole command (issue 22): wall
//! time and peak resident memory of the release binary for 1,000 and 5,000
//! two-container Burstable pods on `node-1000gi`, as one multi-document
//! YAML file, table and JSON output to /dev/null. Sizes and formats are
//! interleaved round by round and medians reported, so the memory ratio
//! (5,000 / 1,000 pods) comes from one run.
//!
//! ```text
//! cargo bench -p podpolicy --bench explain_stream
//! cargo bench -p podpolicy --bench explain_stream -- --rounds 5
//! ```
//!
//! Peak memory is the child's `VmHWM` (`/proc/<pid>/status`), read every
//! 2 ms until it exits: the last reading is at most 2 ms before the end,
//! when the report's node part is written, which allocates next to
//! nothing.

mod targets;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const SIZES: [usize; 2] = [1_000, 5_000];
const FORMATS: [&str; 2] = ["table", "json"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// `count` two-container Burstable pods as one multi-document YAML file.
fn write_pods(dir: &Path, count: usize) -> Result<PathBuf> {
    let path = dir.join(format!("pods-{count}.yaml"));
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for i in 0..count {
        write!(
            file,
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web-{i}\n  namespace: default\n  uid: 00000000-0000-4000-8000-{i:012}\nspec:\n  containers:\n  - name: app\n    image: app\n    resources:\n      requests: {{cpu: 250m, memory: 256Mi}}\n      limits: {{cpu: \"1\", memory: 512Mi}}\n  - name: sidecar\n    image: sidecar\n    resources:\n      requests: {{cpu: 50m, memory: 64Mi}}\n"
        )?;
    }
    file.flush()?;
    Ok(path)
}

/// Peak resident memory (`VmHWM`) of a running process, in KiB.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// One `explain` run: wall time and peak memory (KiB).
fn run(pods: &Path, format: &str) -> Result<(Duration, u64)> {
    let node = workspace().join("fixtures/nodes/node-1000gi.yaml");
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_podpolicy"))
        .args(["explain", "-o", format, "--node"])
        .arg(&node)
        .arg(pods)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting podpolicy")?;
    let mut peak = 0;
    loop {
        if let Some(kib) = peak_kib(child.id()) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait()? {
            let took = start.elapsed();
            if !status.success() {
                let mut err = String::new();
                use std::io::Read as _;
                child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                bail!("explain of {} failed ({status}): {err}", pods.display());
            }
            return Ok((took, peak));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn median<T: Copy + Ord>(mut values: Vec<T>) -> T {
    values.sort_unstable();
    values[values.len() / 2]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse::<usize>())
        .transpose()
        .context("--rounds N")?
        .unwrap_or(3)
        .max(1);
    let dir = std::env::temp_dir().join(format!("podpolicy-explain-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let files: Vec<PathBuf> = SIZES
        .iter()
        .map(|&n| write_pods(&dir, n))
        .collect::<Result<_>>()?;
    // The policy's compiled code is cached on the first run.
    run(&files[0], "table")?;
    let mut results = vec![Vec::new(); SIZES.len() * FORMATS.len()];
    for _ in 0..rounds {
        for (f, format) in FORMATS.iter().enumerate() {
            for (s, file) in files.iter().enumerate() {
                results[f * SIZES.len() + s].push(run(file, format)?);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("explain, {rounds} rounds, medians (release binary, stdout to /dev/null)");
    println!(
        "{:<8} {:>6} {:>10} {:>10}",
        "format", "pods", "wall", "peak RSS"
    );
    for (f, format) in FORMATS.iter().enumerate() {
        let mut peaks = Vec::new();
        for (s, pods) in SIZES.iter().enumerate() {
            let runs = &results[f * SIZES.len() + s];
            let took = median(runs.iter().map(|r| r.0).collect());
            let peak = median(runs.iter().map(|r| r.1).collect());
            peaks.push(peak);
            println!(
                "{format:<8} {pods:>6} {:>8.0}ms {:>8.1}MB",
                took.as_secs_f64() * 1e3,
                peak as f64 / 1024.0
            );
            if *pods == 5_000 {
                targets::report(
                    &format!("explain-5000-{format}-time"),
                    took <= targets::EXPLAIN_5000,
                    format!("{:.0}ms", took.as_secs_f64() * 1e3),
                    format!("<= {}ms", targets::EXPLAIN_5000.as_millis()),
                );
            }
        }
        let growth = peaks[1] as f64 / peaks[0] as f64;
        targets::report(
            &format!("explain-{format}-memory-flat"),
            growth <= targets::EXPLAIN_MEMORY_GROWTH,
            format!("{growth:.2}x peak RSS for 5x the pods"),
            format!("<= {}x", targets::EXPLAIN_MEMORY_GROWTH),
        );
    }
    Ok(())
}
