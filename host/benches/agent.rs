//! The node agent's figures (issue 9): agent RSS with 30 pods, time to first
//! decision on a cold and a warm (cached) start, hot swap time, and `apply`
//! of one pod to a tmpfs root. A plain bench binary (`harness = false`):
//! `cargo bench -p podpolicy --bench agent` prints one table.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use podpolicy::apply::{ApplyOptions, apply_pods};
use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime};
use podpolicy::swap::PolicySlot;

const PODS: usize = 30;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .to_path_buf()
}

fn scratch(name: &str) -> PathBuf {
    // The temporary directory: /dev/shm would be memory-backed as a node's
    // /sys/fs/cgroup is, but the agent refuses to write cgroup files under
    // /dev (a system directory that is not a cgroup mount).
    let dir = std::env::temp_dir().join(format!("podpolicy-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `PODS` copies of the KEP IDE pod with their own names.
fn write_pods(dir: &Path) {
    let ide = std::fs::read_to_string(workspace().join("fixtures/pods/kep-ide.yaml")).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..PODS {
        let pod = ide.replacen("name: myide", &format!("name: myide-{i}"), 1);
        std::fs::write(dir.join(format!("pod-{i}.yaml")), pod).unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Start the agent binary, wait for its first pass; returns (first decision
/// ms as it reports it, wall ms to the status file, VmRSS kB, VmHWM kB).
fn agent_run(dir: &Path, cache: &Path) -> (u64, u64, u64, u64) {
    let state = dir.join("state");
    let _ = std::fs::remove_dir_all(&state);
    let began = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_podpolicy"))
        .env("PODPOLICY_LOG", "error")
        .args(["--cache-dir", cache.to_str().unwrap()])
        .args([
            "agent",
            "--metrics-addr",
            "127.0.0.1:0",
            "--resync-ms",
            "60000",
        ])
        .arg("--node")
        .arg(workspace().join("fixtures/nodes/node-1000gi.yaml"))
        .arg("--pods-dir")
        .arg(dir.join("pods"))
        .arg("--cgroup-root")
        .arg(dir.join("cgroup"))
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the agent");
    let status = state.join("agent_status.json");
    while !status.exists() {
        assert!(began.elapsed() < Duration::from_secs(300), "no first pass");
        std::thread::sleep(Duration::from_millis(2));
    }
    let wall = began.elapsed().as_millis() as u64;
    // Let it settle into its idle loop before reading its memory.
    std::thread::sleep(Duration::from_millis(300));
    let (rss, hwm) = (
        status_kb(child.id(), "VmRSS:"),
        status_kb(child.id(), "VmHWM:"),
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&status).unwrap()).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        report["errors"].as_array().is_some_and(|e| e.is_empty()),
        "{report}"
    );
    assert_eq!(report["applied"].as_array().map(Vec::len), Some(PODS));
    (
        report["firstDecisionMs"].as_u64().unwrap_or(0),
        wall,
        rss,
        hwm,
    )
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would too: run either way.
    let dir = scratch("agent");
    write_pods(&dir.join("pods"));
    std::fs::create_dir_all(dir.join("cgroup")).unwrap();
    let cache = dir.join("cache");

    let (cold_ms, cold_wall, _, _) = agent_run(&dir, &cache);
    let _ = std::fs::remove_dir_all(dir.join("cgroup"));
    std::fs::create_dir_all(dir.join("cgroup")).unwrap();
    let mut warm = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..3 {
        let _ = std::fs::remove_dir_all(dir.join("cgroup"));
        std::fs::create_dir_all(dir.join("cgroup")).unwrap();
        let (ms, wall, r, hwm) = agent_run(&dir, &cache);
        warm.push((ms, wall));
        rss.push((r, hwm));
    }
    warm.sort();
    rss.sort();
    let (warm_ms, warm_wall) = warm[1];
    let (rss_kb, hwm_kb) = rss[1];

    // Hot swap: load a new version from the compiled cache, self-check,
    // shadow-evaluate the 30 pods, swap.
    let cache_arg = Cache::Dir(cache.clone());
    let node =
        podpolicy::node_input::read_node(&workspace().join("fixtures/nodes/node-1000gi.yaml"))
            .unwrap();
    let mut docs = Vec::new();
    for i in 0..PODS {
        let mut pods =
            podpolicy::pod_input::read_pods(&dir.join(format!("pods/pod-{i}.yaml"))).unwrap();
        for d in &mut pods {
            d.pod.uid = format!("00000000-0000-4000-8000-{i:012}");
        }
        docs.extend(pods);
    }
    let slot = PolicySlot::new(PolicyRuntime::embedded(&cache_arg, Limits::default()).unwrap());
    let versions: Vec<Vec<u8>> = (0..2)
        .map(|i| {
            let mut b = EMBEDDED_POLICY.to_vec();
            let tag = format!("bench-{i}");
            b.extend([0u8, (tag.len() + 1) as u8, tag.len() as u8]);
            b.extend(tag.as_bytes());
            b
        })
        .collect();
    for v in &versions {
        // Warm the compiled cache: a swap on a node reuses it too after the first time.
        PolicyRuntime::from_bytes(v, &cache_arg, Limits::default()).unwrap();
    }
    let mut swaps = Vec::new();
    let mut load_only = Vec::new();
    for round in 0..10 {
        let bytes = &versions[round % 2];
        let began = Instant::now();
        let candidate = PolicyRuntime::from_bytes(bytes, &cache_arg, Limits::default()).unwrap();
        load_only.push(began.elapsed());
        slot.activate(candidate, |c, serving| {
            podpolicy::policy_dir::vet(c, serving, &docs, &node).map(|_| ())
        })
        .unwrap();
        swaps.push(began.elapsed());
    }

    // apply of one pod: first time (mkdirs + every file), then unchanged.
    let policy = slot.current();
    let one = vec![docs[0].clone()];
    let mut first = Vec::new();
    let mut again = Vec::new();
    for i in 0..20 {
        let root = dir.join(format!("apply-{i}"));
        std::fs::create_dir_all(&root).unwrap();
        let options = ApplyOptions {
            cgroup_root: root,
            proc_root: dir.join("proc"),
            dry_run: false,
            pids: Vec::new(),
            kube_reserved_cgroup: None,
            system_reserved_cgroup: None,
        };
        let began = Instant::now();
        apply_pods(&policy, &one, &node, &options, None, None).unwrap();
        first.push(began.elapsed());
        let began = Instant::now();
        apply_pods(&policy, &one, &node, &options, None, None).unwrap();
        again.push(began.elapsed());
    }
    let _ = std::fs::remove_dir_all(&dir);

    println!("| node agent ({PODS} KEP IDE pods, 4 containers each) | median |");
    println!("|---|---:|");
    println!(
        "| agent RSS after the first pass (VmRSS) | {:.1} MiB |",
        rss_kb as f64 / 1024.0
    );
    println!(
        "| agent peak RSS (VmHWM) | {:.1} MiB |",
        hwm_kb as f64 / 1024.0
    );
    println!(
        "| time to first decision, cold cache (agent's own figure / wall to status file) | {cold_ms} ms / {cold_wall} ms |"
    );
    println!(
        "| time to first decision, restart with cache (agent / wall) | {warm_ms} ms / {warm_wall} ms |"
    );
    println!(
        "| hot swap: cached load + self-check + shadow of {PODS} pods + swap | {:.1} ms |",
        median(swaps).as_secs_f64() * 1e3
    );
    println!(
        "| of which the cached load | {:.2} ms |",
        median(load_only).as_secs_f64() * 1e3
    );
    println!(
        "| apply of one pod, fresh tmpfs root (validate, default, evaluate, plan, write) | {:.2} ms |",
        median(first).as_secs_f64() * 1e3
    );
    println!(
        "| apply of the same pod again (nothing to write) | {:.2} ms |",
        median(again).as_secs_f64() * 1e3
    );
}
