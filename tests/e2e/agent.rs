//! The node agent: reconcile, removal, managers, restart, hot swap (also
//! under load), hostile modules, metrics.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use podpolicy::agent::{Agent, AgentOptions};
use podpolicy::apply::ApplyOptions;
use podpolicy::metrics::Metrics;
use podpolicy::policy_dir::{PolicyDir, PolicyDirServer};
use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime};
use podpolicy::swap::PolicySlot;

use crate::hostile_policy::{Hostility, component};
use crate::util::{cache_dir, embedded_variant, temp_dir, workspace};

const NODE: &str = "fixtures/nodes/node-1000gi.yaml";

/// Limits that stop a looping module quickly (a real call needs far less).
fn tight_limits() -> Limits {
    Limits {
        fuel: Some(200_000_000),
        deadline: Duration::from_millis(1_000),
        memory_bytes: 64 << 20,
    }
}

fn runtime(bytes: &[u8], limits: Limits) -> PolicyRuntime {
    PolicyRuntime::from_bytes(bytes, &Cache::Dir(cache_dir()), limits).expect("policy loads")
}

struct Setup {
    dir: PathBuf,
    pods: PathBuf,
    cgroups: PathBuf,
    state: PathBuf,
    policies: PathBuf,
}

fn setup(name: &str, pods: &[&str]) -> Setup {
    let dir = temp_dir(name);
    let s = Setup {
        pods: dir.join("pods"),
        cgroups: dir.join("cgroup"),
        state: dir.join("state"),
        policies: dir.join("policies"),
        dir,
    };
    for d in [&s.pods, &s.cgroups] {
        std::fs::create_dir_all(d).unwrap();
    }
    for pod in pods {
        let from = workspace().join(pod);
        std::fs::copy(&from, s.pods.join(from.file_name().unwrap())).unwrap();
    }
    s
}

fn options(s: &Setup, node: &str, limits: Limits) -> AgentOptions {
    AgentOptions {
        pods_dir: s.pods.clone(),
        node: podpolicy::node_input::read_node(&workspace().join(node)).unwrap(),
        apply: ApplyOptions {
            cgroup_root: s.cgroups.clone(),
            proc_root: s.dir.join("proc"),
            dry_run: false,
            pids: Vec::new(),
            kube_reserved_cgroup: None,
            system_reserved_cgroup: None,
        },
        state_dir: s.state.clone(),
        policy_dir: Some(s.policies.clone()),
        sysfs_root: workspace().join("fixtures/sysfs/topoDualSocketHT"),
        resync: Duration::from_millis(100),
        cache: Cache::Dir(cache_dir()),
        limits,
    }
}

fn start(s: &Setup, node: &str, policy: PolicyRuntime, limits: Limits) -> Agent {
    Agent::start(
        options(s, node, limits),
        Arc::new(PolicySlot::new(policy)),
        Arc::new(Metrics::new()),
        Instant::now(),
    )
    .expect("agent starts")
}

/// Every regular file below `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn reconcile_applies_pods_and_removes_deleted_ones() {
    let s = setup(
        "agent-reconcile",
        &[
            "fixtures/pods/kep-ide.yaml",
            "fixtures/pods/kep-row16-all-set.yaml",
        ],
    );
    let mut agent = start(
        &s,
        NODE,
        runtime(EMBEDDED_POLICY, Limits::default()),
        Limits::default(),
    );
    let report = agent.reconcile().unwrap();
    // Manifests are static pods: named `<name>-<node>` as the kubelet names them.
    assert_eq!(
        report.applied,
        ["dev/myide-kep-node", "default/row16-all-set-kep-node"]
    );
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.writes > 0);
    // The IDE pod (systemd driver on this node): pod memory.max = 1Gi as the KEP says.
    let ide_uid = agent
        .state()
        .pods
        .iter()
        .find(|(_, p)| p.pod == "dev/myide-kep-node")
        .map(|(uid, _)| uid.clone())
        .unwrap();
    let pod_dir = s.cgroups.join(format!(
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{ide_uid}.slice"
    ));
    assert_eq!(read(&pod_dir.join("memory.max")), "1073741824");
    assert!(pod_dir.join("ide/cpu.weight").exists());

    // A second pass with nothing changed writes nothing.
    assert_eq!(agent.reconcile().unwrap().writes, 0);

    // A half-written manifest keeps its pods; a deleted one goes.
    std::fs::write(s.pods.join("kep-row16-all-set.yaml"), "kind: Pod\nspec: [").unwrap();
    std::fs::remove_file(s.pods.join("kep-ide.yaml")).unwrap();
    let report = agent.reconcile().unwrap();
    assert_eq!(report.removed, ["dev/myide-kep-node"]);
    assert_eq!(report.applied, ["default/row16-all-set-kep-node"]);
    assert!(
        report.errors[0].contains("kep-row16-all-set.yaml"),
        "{:?}",
        report.errors
    );
    assert!(!pod_dir.exists(), "the removed pod's cgroups are gone");
    let state = read(&s.state.join("agent_state.json"));
    assert!(!state.contains(&ide_uid), "{state}");
}

#[test]
fn a_pod_with_processes_is_removed_only_once_they_are_gone() {
    let s = setup("agent-busy", &["fixtures/pods/kep-ide.yaml"]);
    let mut agent = start(
        &s,
        NODE,
        runtime(EMBEDDED_POLICY, Limits::default()),
        Limits::default(),
    );
    agent.reconcile().unwrap();
    let (uid, applied) = agent
        .state()
        .pods
        .iter()
        .next()
        .map(|(u, p)| (u.clone(), p.clone()))
        .unwrap();
    let container = s.cgroups.join(&applied.cgroups[1]);
    std::fs::write(container.join("cgroup.procs"), "4242\n").unwrap();
    std::fs::remove_file(s.pods.join("kep-ide.yaml")).unwrap();
    let report = agent.reconcile().unwrap();
    assert!(report.removed.is_empty());
    assert!(
        report.removal_pending[0].contains("processes still run"),
        "{report:?}"
    );
    assert!(container.is_dir());
    assert!(agent.state().pods.contains_key(&uid));
    std::fs::write(container.join("cgroup.procs"), "").unwrap();
    let report = agent.reconcile().unwrap();
    assert_eq!(report.removed, ["dev/myide-kep-node"]);
    assert!(!s.cgroups.join(&applied.cgroups[0]).exists());
}

#[test]
fn managed_pods_get_cpusets_and_release_them_on_removal() {
    let s = setup(
        "agent-managers",
        &["fixtures/pods/kep5526-pod-scope-mixed.yaml"],
    );
    let node = "fixtures/nodes/dual-socket-static.yaml";
    let metrics = Arc::new(Metrics::new());
    let mut agent = Agent::start(
        options(&s, node, Limits::default()),
        Arc::new(PolicySlot::new(runtime(EMBEDDED_POLICY, Limits::default()))),
        metrics.clone(),
        Instant::now(),
    )
    .unwrap();
    let report = agent.reconcile().unwrap();
    assert!(
        report.errors.is_empty() && report.rejected.is_empty(),
        "{report:?}"
    );
    let applied = agent.state().pods.values().next().unwrap().clone();
    assert!(applied.managed);
    let pod_dir = s.cgroups.join(&applied.cgroups[0]);
    let pod_cpus = read(&pod_dir.join("cpuset.cpus"));
    let cpus = podpolicy::admit::parse_cpu_list(&pod_cpus).unwrap();
    assert!(
        !cpus.is_empty() && cpus.iter().all(|c| *c < 12),
        "{pod_cpus}"
    );
    let checkpoint = read(&s.state.join("cpu_manager_state"));
    let uid = agent.state().pods.keys().next().unwrap().clone();
    assert!(checkpoint.contains(&uid), "{checkpoint}");
    let text = metrics.render();
    for want in [
        "resource_manager_allocations_total{resource_name=\"cpu\",source=\"pod\"} 1",
        "resource_manager_container_assignments{assignment_type=\"exclusive\"}",
        "topology_manager_admission_duration_seconds_count 1",
    ] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }

    // Restart: the checkpoint is reused and the same CPUs come back.
    drop(agent);
    let mut agent = start(
        &s,
        node,
        runtime(EMBEDDED_POLICY, Limits::default()),
        Limits::default(),
    );
    let report = agent.reconcile().unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(read(&pod_dir.join("cpuset.cpus")), pod_cpus);

    std::fs::remove_file(s.pods.join("kep5526-pod-scope-mixed.yaml")).unwrap();
    let report = agent.reconcile().unwrap();
    assert_eq!(report.removed.len(), 1);
    let checkpoint = read(&s.state.join("cpu_manager_state"));
    assert!(!checkpoint.contains(&uid), "released: {checkpoint}");
}

#[test]
fn restart_reuses_the_compiled_policy_and_reports_time_to_first_decision() {
    let s = setup("agent-restart", &["fixtures/pods/kep-ide.yaml"]);
    let cache = s.dir.join("cache");
    let load = || {
        PolicyRuntime::from_bytes(
            EMBEDDED_POLICY,
            &Cache::Dir(cache.clone()),
            Limits::default(),
        )
        .unwrap()
    };
    let first = load();
    assert!(!first.compiled_from_cache());
    let began = Instant::now();
    let second = load();
    assert!(second.compiled_from_cache(), "the restart compiles nothing");
    let mut agent = Agent::start(
        options(&s, NODE, Limits::default()),
        Arc::new(PolicySlot::new(second)),
        Arc::new(Metrics::new()),
        began,
    )
    .unwrap();
    let report = agent.reconcile().unwrap();
    assert!(report.policy_from_cache);
    let ms = report.first_decision_ms.expect("first decision recorded");
    eprintln!("time to first decision after a restart: {ms} ms");
    let status = read(&s.state.join("agent_status.json"));
    assert!(status.contains("\"firstDecisionMs\""), "{status}");
}

fn expect_contained(hostility: Hostility, want: &[&str]) {
    let s = setup(
        &format!("agent-hostile-{hostility:?}"),
        &["fixtures/pods/kep-ide.yaml"],
    );
    let hostile = runtime(&component(hostility), tight_limits());
    let mut agent = start(&s, NODE, hostile, tight_limits());
    let report = agent.reconcile();
    let text = match &report {
        Ok(r) => r.errors.join("\n"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        want.iter().any(|w| text.contains(w)),
        "{hostility:?}: want one of {want:?} in: {text}"
    );
    assert!(
        files_under(&s.cgroups).is_empty(),
        "{hostility:?} wrote {:?}",
        files_under(&s.cgroups)
    );
    // The agent keeps working: a good version swapped in applies the pod.
    agent
        .slot()
        .activate(runtime(EMBEDDED_POLICY, Limits::default()), |_, _| Ok(()))
        .unwrap();
    let report = agent.reconcile().unwrap();
    assert_eq!(report.applied, ["dev/myide-kep-node"], "{report:?}");
}

#[test]
fn an_infinite_loop_writes_nothing_and_the_agent_survives() {
    expect_contained(
        Hostility::InfiniteLoop,
        &["ran out of fuel", "exceeded its time budget"],
    );
}

#[test]
fn a_memory_bomb_writes_nothing_and_the_agent_survives() {
    expect_contained(Hostility::MemoryBomb, &["memory cap", "memory"]);
}

#[test]
fn a_trap_writes_nothing_and_the_agent_survives() {
    expect_contained(Hostility::Trap, &["the policy trapped"]);
}

#[test]
fn garbage_output_writes_nothing_and_the_agent_survives() {
    expect_contained(Hostility::Garbage, &["the policy call failed"]);
}

#[test]
fn empty_answers_fail_the_sanity_checks_and_write_nothing() {
    // The agent evaluates on a prepared node: an all-zero answer to
    // `prepare` is resource handle 0, which wasmtime refuses before the
    // host uses any answer. (The sanity checks on a well-formed empty
    // evaluation are `apply::check_pod_output`'s, tested in
    // kubelet_parity.rs.)
    expect_contained(
        Hostility::Zeros,
        &[
            "preparing the node: unknown handle index 0",
            "the policy answered for containers",
        ],
    );
}

#[test]
fn a_wrong_wit_version_is_refused_at_load() {
    let error = PolicyRuntime::from_bytes(
        &component(Hostility::WrongWitVersion),
        &Cache::Off,
        Limits::default(),
    )
    .err()
    .expect("refused");
    assert!(
        format!("{error:#}").contains("podpolicy:policy@9.9.9"),
        "{error:#}"
    );
}

/// Poll the policy directory until nothing is being vetted: candidates are
/// vetted on their own thread, and a poll does not wait for them.
fn poll_until_vetted(agent: &mut Agent, dir: &PolicyDir) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        agent.poll_policy_dir().unwrap();
        if dir.state().unwrap().vetting.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "vetting did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_policy_directory_swaps_good_versions_and_rejects_hostile_ones() {
    let s = setup("agent-policy-dir", &["fixtures/pods/kep-ide.yaml"]);
    let mut agent = start(
        &s,
        NODE,
        runtime(EMBEDDED_POLICY, Limits::default()),
        tight_limits(),
    );
    agent.reconcile().unwrap();
    let base = agent.slot().current().digest().to_string();
    let dir = PolicyDir::open(&s.policies).unwrap();

    // Each hostile candidate is rejected; the base keeps serving.
    for hostility in [
        Hostility::InfiniteLoop,
        Hostility::Trap,
        Hostility::Garbage,
        Hostility::Zeros,
    ] {
        std::fs::write(
            s.policies.join(format!("{hostility:?}.wasm")),
            component(hostility),
        )
        .unwrap();
        poll_until_vetted(&mut agent, &dir);
        assert_eq!(
            agent.slot().current().digest(),
            base,
            "{hostility:?} was swapped in"
        );
        let state = dir.state().unwrap();
        let verdict = state
            .seen
            .values()
            .find(|v| v.file == format!("{hostility:?}.wasm"))
            .unwrap();
        assert!(!verdict.accepted);
        assert!(verdict.detail.contains("self-check"), "{verdict:?}");
        assert!(agent.reconcile().unwrap().errors.is_empty());
    }

    // A good version goes in (and says how the shadow evaluation went).
    let good = embedded_variant("v2");
    let path = dir.submit(&good).unwrap();
    poll_until_vetted(&mut agent, &dir);
    let swapped = agent.slot().current().digest().to_string();
    assert_eq!(swapped, podpolicy::runtime::digest(&good));
    let state = dir.state().unwrap();
    assert_eq!(state.active.as_deref(), Some(swapped.as_str()));
    assert!(
        state.seen[&swapped]
            .detail
            .contains("shadow evaluation: 1 pods"),
        "{state:?}"
    );
    assert!(path.exists());

    // A restart serves the same version.
    drop(agent);
    let agent = start(
        &s,
        NODE,
        runtime(EMBEDDED_POLICY, Limits::default()),
        tight_limits(),
    );
    assert_eq!(agent.slot().current().digest(), swapped);
    drop(agent);

    // Rollback returns to the base.
    let mut agent = start(
        &s,
        NODE,
        runtime(EMBEDDED_POLICY, Limits::default()),
        tight_limits(),
    );
    dir.request_rollback().unwrap();
    agent.poll_policy_dir().unwrap();
    assert_eq!(agent.slot().current().digest(), base);
    assert!(dir.requests().unwrap().is_empty(), "requests are consumed");
}

#[test]
fn zero_evaluations_fail_across_swaps_under_load() {
    let slot = Arc::new(PolicySlot::new(runtime(EMBEDDED_POLICY, Limits::default())));
    let mut doc = podpolicy::pod_input::read_pods(&workspace().join("fixtures/pods/kep-ide.yaml"))
        .unwrap()
        .remove(0);
    doc.pod.uid = "3c1d5f1e-0000-4000-8000-000000000001".into();
    let node = podpolicy::node_input::read_node(&workspace().join(NODE)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (slot, stop, ok, failed) = (slot.clone(), stop.clone(), ok.clone(), failed.clone());
            let (pod, node) = (doc.pod.clone(), node.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let policy = slot.current();
                    match policy.evaluate(&pod, &node) {
                        Ok(Ok(e)) if !e.containers.is_empty() => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    let versions: Vec<Vec<u8>> = (0..3)
        .map(|i| embedded_variant(&format!("load-{i}")))
        .collect();
    let hostile = component(Hostility::Trap);
    let mut swaps = 0;
    for round in 0..3 {
        for bytes in &versions {
            let candidate = runtime(bytes, Limits::default());
            slot.activate(candidate, |c, serving| {
                podpolicy::policy_dir::vet(c, serving, std::slice::from_ref(&doc), &node)
                    .map(|_| ())
            })
            .unwrap();
            swaps += 1;
        }
        // A broken candidate is rejected mid-load.
        let bad = runtime(&hostile, tight_limits());
        assert!(
            slot.activate(bad, |c, _| podpolicy::policy_dir::self_check(c))
                .is_err()
        );
        if round % 2 == 0 {
            slot.rollback().unwrap();
            swaps += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("{ok} evaluations across {swaps} swaps, {failed} failed");
    assert_eq!(failed, 0);
    assert!(ok > 100, "only {ok} evaluations ran");
    assert_eq!(slot.swaps(), swaps);
}

#[test]
fn the_metrics_endpoint_serves_the_kep_names() {
    let s = setup("agent-metrics", &["fixtures/pods/kep-ide.yaml"]);
    let metrics = Arc::new(Metrics::new());
    let mut options = options(&s, NODE, Limits::default());
    options
        .node
        .feature_gates
        .push(podpolicy::bindings::FeatureGate {
            name: "MemoryQoS".into(),
            enabled: true,
        });
    options.node.memory_reservation_policy =
        Some(podpolicy::bindings::MemoryReservationPolicy::HardReservation);
    let mut agent = Agent::start(
        options,
        Arc::new(PolicySlot::new(runtime(EMBEDDED_POLICY, Limits::default()))),
        metrics.clone(),
        Instant::now(),
    )
    .unwrap();
    // memory.events as the kernel would have them for a throttled container.
    agent.reconcile().unwrap();
    let applied = agent.state().pods.values().next().unwrap().clone();
    std::fs::write(
        s.cgroups.join(&applied.cgroups[1]).join("memory.events"),
        "low 0\nhigh 17\nmax 0\noom 0\noom_kill 0\n",
    )
    .unwrap();
    agent.reconcile().unwrap();
    let addr = podpolicy::metrics::serve("127.0.0.1:0".parse().unwrap(), metrics).unwrap();
    let body = http_get(addr, "/metrics");
    for name in [
        "kubelet_memory_qos_memory_min_bytes",
        "kubelet_memory_qos_memory_high_bytes",
        "kubelet_memory_qos_throttle_events_total",
        "topology_manager_admission_duration_seconds",
        "podpolicy_policy_info{",
        "podpolicy_evaluations_total{result=\"ok\"} 2",
        "podpolicy_evaluation_duration_seconds_count 2",
        "podpolicy_reconciles_total{result=\"ok\"} 2",
    ] {
        assert!(body.contains(name), "{name} missing from:\n{body}");
    }
    let container = applied.cgroups[1].rsplit('/').next().unwrap();
    assert!(
        body.contains(&format!(
            "kubelet_memory_qos_throttle_events_total{{pod=\"dev/myide-kep-node\",container=\"{container}\"}} 17"
        )),
        "{body}"
    );
    assert!(http_get(addr, "/healthz").ends_with("ok"));
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

#[test]
fn the_agent_process_survives_a_hostile_policy_and_stops_on_sigterm() {
    let s = setup("agent-process", &["fixtures/pods/kep-ide.yaml"]);
    let hostile = s.dir.join("loop.wasm");
    std::fs::write(&hostile, component(Hostility::InfiniteLoop)).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_podpolicy"))
        .current_dir(workspace())
        .env("PODPOLICY_CACHE_DIR", cache_dir())
        .args([
            "--policy",
            hostile.to_str().unwrap(),
            "--fuel",
            "100000000",
            "--timeout-ms",
            "500",
        ])
        .args([
            "agent",
            "--node",
            NODE,
            "--metrics-addr",
            "off",
            "--resync-ms",
            "200",
        ])
        .arg("--pods-dir")
        .arg(&s.pods)
        .arg("--cgroup-root")
        .arg(&s.cgroups)
        .arg("--state-dir")
        .arg(&s.state)
        .arg("--policy-dir")
        .arg(&s.policies)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status_file = s.state.join("agent_status.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !status_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = read(&status_file);
    assert!(
        status.contains("ran out of fuel") || status.contains("time budget"),
        "{status}"
    );
    assert!(files_under(&s.cgroups).is_empty());
    // Still up after more passes; then a good version arrives and is applied.
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "the agent exited");
    PolicyDir::open(&s.policies)
        .unwrap()
        .submit(EMBEDDED_POLICY)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while files_under(&s.cgroups).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !files_under(&s.cgroups).is_empty(),
        "the good version was not applied"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_policy_server_restores_nothing_when_the_state_is_fresh() {
    let s = setup("agent-fresh-dir", &[]);
    let slot = PolicySlot::new(runtime(EMBEDDED_POLICY, Limits::default()));
    let server = PolicyDirServer::start(&s.policies, &slot, Cache::Off, Limits::default()).unwrap();
    assert_eq!(
        server.state().active.as_deref(),
        Some(slot.current().digest())
    );
    assert!(server.state().history.is_empty());
}
