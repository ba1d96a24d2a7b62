//! An operator's worst day (issue 20): crashes at every step boundary and
//! kill -9, concurrent commands on one state directory, one pod's failure
//! among many, hostile names, half-written manifests, QoS changes, and
//! symlinks swapped into the cgroup tree. Each test fails on the behaviour
//! it guards against.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use podpolicy::agent::{Agent, AgentOptions};
use podpolicy::apply::ApplyOptions;
use podpolicy::cgroupfs::{self, CgroupPath, CgroupRoot, CgroupValues, FileValue};
use podpolicy::metrics::Metrics;
use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use podpolicy::state_dir;
use podpolicy::swap::PolicySlot;

use crate::util::{cache_dir, podpolicy, temp_dir, workspace};

const STATIC_NODE: &str = "fixtures/nodes/dual-socket-static.yaml";
const SYSFS: &str = "fixtures/sysfs/topoDualSocketHT";
const PLAIN_NODE: &str = "fixtures/nodes/node-1000gi.yaml";

/// How the agent names a static pod of manifest name `name` on PLAIN_NODE
/// (`<name>-<node>`, as the kubelet does).
fn static_name(name: &str) -> String {
    format!("default/{name}-kep-node")
}

/// A Guaranteed pod with `cpus` exclusive CPUs in one container.
fn exclusive_pod(name: &str, cpus: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  uid: uid-{name}\nspec:\n  containers:\n  - name: app\n    resources:\n      requests: {{cpu: \"{cpus}\", memory: 256Mi}}\n      limits: {{cpu: \"{cpus}\", memory: 256Mi}}\n"
    )
}

/// A Burstable pod.
fn burstable_pod(name: &str, uid: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  uid: {uid}\nspec:\n  containers:\n  - name: app\n    resources:\n      requests: {{cpu: 100m, memory: 64Mi}}\n"
    )
}

struct Node {
    dir: PathBuf,
    pods: PathBuf,
    cgroups: PathBuf,
    state: PathBuf,
}

fn node_dirs(name: &str) -> Node {
    let dir = temp_dir(name);
    let n = Node {
        pods: dir.join("pods"),
        cgroups: dir.join("cgroup"),
        state: dir.join("state"),
        dir,
    };
    std::fs::create_dir_all(&n.pods).unwrap();
    std::fs::create_dir_all(&n.cgroups).unwrap();
    n
}

fn agent_options(n: &Node, node: &str) -> AgentOptions {
    AgentOptions {
        pods_dir: n.pods.clone(),
        node: podpolicy::node_input::read_node(&workspace().join(node)).unwrap(),
        apply: ApplyOptions {
            cgroup_root: n.cgroups.clone(),
            proc_root: n.dir.join("proc"),
            dry_run: false,
            pids: Vec::new(),
            kube_reserved_cgroup: None,
            system_reserved_cgroup: None,
        },
        state_dir: n.state.clone(),
        policy_dir: None,
        sysfs_root: workspace().join("fixtures/sysfs/topoDualSocketHT"),
        resync: Duration::from_millis(100),
        cache: Cache::Dir(cache_dir()),
        limits: Limits::default(),
    }
}

/// The embedded policy (its compiled code comes from the test cache).
fn embedded() -> PolicyRuntime {
    PolicyRuntime::embedded(&Cache::Dir(cache_dir()), Limits::default()).expect("policy loads")
}

fn start_agent(n: &Node, node: &str) -> Agent {
    Agent::start(
        agent_options(n, node),
        Arc::new(PolicySlot::new(embedded())),
        Arc::new(Metrics::new()),
        Instant::now(),
    )
    .expect("agent starts")
}

/// Every CPU assignment in the CPU checkpoint: (pod uid, container or
/// `(pod)`) -> CPUs.
pub(crate) fn cpu_assignments(state: &Path) -> BTreeMap<(String, String), BTreeSet<u32>> {
    let text = std::fs::read_to_string(state.join("cpu_manager_state")).unwrap_or_default();
    let mut out = BTreeMap::new();
    if text.is_empty() {
        return out;
    }
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (uid, containers) in json["entries"].as_object().into_iter().flatten() {
        for (name, set) in containers.as_object().unwrap() {
            let cpus = podpolicy::admit::parse_cpu_list(set.as_str().unwrap()).unwrap();
            out.insert((uid.clone(), name.clone()), cpus);
        }
    }
    for (uid, entry) in json["podEntries"].as_object().into_iter().flatten() {
        let cpus = podpolicy::admit::parse_cpu_list(entry["cpuSet"].as_str().unwrap()).unwrap();
        out.insert((uid.clone(), "(pod)".into()), cpus);
    }
    out
}

/// The pod uids the CPU and memory checkpoints hold anything for.
pub(crate) fn checkpoint_uids(state: &Path) -> BTreeSet<String> {
    let mut uids: BTreeSet<String> = cpu_assignments(state).into_keys().map(|(u, _)| u).collect();
    let text = std::fs::read_to_string(state.join("memory_manager_state")).unwrap_or_default();
    if !text.is_empty() {
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in ["entries", "podEntries"] {
            uids.extend(
                json[key]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone()),
            );
        }
    }
    uids
}

/// No CPU is held twice, and no default-set CPU is assigned.
pub(crate) fn assert_no_double_assignment(state: &Path, context: &str) {
    let mut seen: BTreeMap<u32, (String, String)> = BTreeMap::new();
    for (owner, cpus) in cpu_assignments(state) {
        if owner.1 == "(pod)" {
            continue; // a pod's set contains its containers' exclusive CPUs
        }
        for cpu in cpus {
            if let Some(other) = seen.insert(cpu, owner.clone()) {
                panic!("{context}: CPU {cpu} is held by {other:?} and {owner:?}");
            }
        }
    }
}

fn pod_cgroup_dirs(cgroups: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![cgroups.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().unwrap().is_dir() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with("pod") {
                    out.insert(name);
                }
                stack.push(entry.path());
            }
        }
    }
    out
}

pub(crate) fn leftovers(state: &Path) -> Vec<String> {
    std::fs::read_dir(state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp.") || n == state_dir::INTENT_FILE)
        .collect()
}

// ----------------------------------------------------------------------
// Crash consistency (item 4)
// ----------------------------------------------------------------------

/// One scenario: pods a and b run; then b's manifest goes and c's comes.
fn crash_scenario(n: &Node) -> Agent {
    std::fs::write(n.pods.join("a.yaml"), exclusive_pod("a", 2)).unwrap();
    std::fs::write(n.pods.join("b.yaml"), exclusive_pod("b", 2)).unwrap();
    let mut agent = start_agent(n, STATIC_NODE);
    let report = agent.reconcile().unwrap();
    assert!(
        report.errors.is_empty() && report.failed.is_empty(),
        "{report:?}"
    );
    std::fs::remove_file(n.pods.join("b.yaml")).unwrap();
    std::fs::write(n.pods.join("c.yaml"), exclusive_pod("c", 4)).unwrap();
    agent
}

/// After any crash and a restart: exactly the manifests' pods hold CPUs
/// and cgroups, no CPU twice, no leftovers.
fn assert_recovered(n: &Node, context: &str) {
    let mut agent = start_agent(n, STATIC_NODE);
    let report = agent.reconcile().unwrap();
    assert!(
        report.errors.is_empty() && report.failed.is_empty(),
        "{context}: {report:?}"
    );
    let want: BTreeSet<String> = ["uid-a", "uid-c"].map(String::from).into();
    assert_eq!(checkpoint_uids(&n.state), want, "{context}: checkpoint");
    assert_no_double_assignment(&n.state, context);
    let recorded: BTreeSet<String> = agent.state().pods.keys().cloned().collect();
    assert_eq!(recorded, want, "{context}: agent state");
    let dirs = pod_cgroup_dirs(&n.cgroups);
    assert_eq!(
        dirs,
        ["poduid-a", "poduid-c"].map(String::from).into(),
        "{context}: pod cgroups"
    );
    assert!(
        leftovers(&n.state).is_empty(),
        "{context}: {:?}",
        leftovers(&n.state)
    );
}

#[test]
fn a_crash_at_every_step_boundary_leaks_nothing_and_assigns_nothing_twice() {
    // The step boundaries of the pass under test.
    let n = node_dirs("crash-trace");
    let mut agent = crash_scenario(&n);
    state_dir::trace_crash_points();
    agent.reconcile().unwrap();
    let points = state_dir::traced_crash_points();
    drop(agent);
    let distinct: BTreeSet<&String> = points.iter().collect();
    assert!(
        distinct.len() >= 8,
        "too few step boundaries traced: {points:?}"
    );
    for point in distinct {
        let n = node_dirs("crash");
        let mut agent = crash_scenario(&n);
        state_dir::arm_crash_point(Some(point));
        let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.reconcile()));
        state_dir::arm_crash_point(None);
        assert!(crashed.is_err(), "{point}: the pass did not reach it");
        drop(agent);
        assert_recovered(&n, point);
    }
}

#[test]
fn kill_9_at_random_moments_then_restart_leaks_nothing() {
    use std::process::{Command, Stdio};
    let n = node_dirs("kill9");
    let node = workspace().join(STATIC_NODE);
    let sysfs = workspace().join("fixtures/sysfs/topoDualSocketHT");
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_podpolicy"))
            .args(["agent", "--pods"])
            .arg(&n.pods)
            .arg("--node")
            .arg(&node)
            .arg("--cgroup-root")
            .arg(&n.cgroups)
            .arg("--state-dir")
            .arg(&n.state)
            .arg("--sysfs")
            .arg(&sysfs)
            .args(["--resync-ms", "20", "--metrics-addr", "127.0.0.1:0"])
            .env("PODPOLICY_CACHE_DIR", cache_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("agent starts")
    };
    // Pods come and go while the agent is killed at varying moments.
    let names = ["a", "b", "c", "d"];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..12 {
        for name in names {
            let path = n.pods.join(format!("{name}.yaml"));
            if next() % 2 == 0 {
                std::fs::write(&path, exclusive_pod(name, 2)).unwrap();
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
        let mut child = spawn();
        std::thread::sleep(Duration::from_millis(30 + next() % 400));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let _ = round;
    }
    // A final clean run must converge on exactly the manifests.
    let mut agent = start_agent(&n, STATIC_NODE);
    let report = agent.reconcile().unwrap();
    assert!(
        report.errors.is_empty() && report.failed.is_empty(),
        "{report:?}"
    );
    let want: BTreeSet<String> = names
        .iter()
        .filter(|name| n.pods.join(format!("{name}.yaml")).exists())
        .map(|name| format!("uid-{name}"))
        .collect();
    assert_eq!(checkpoint_uids(&n.state), want);
    assert_no_double_assignment(&n.state, "after kill -9");
    let dirs = pod_cgroup_dirs(&n.cgroups);
    let want_dirs: BTreeSet<String> = want.iter().map(|u| format!("pod{u}")).collect();
    assert_eq!(dirs, want_dirs);
    assert!(leftovers(&n.state).is_empty(), "{:?}", leftovers(&n.state));
}

// ----------------------------------------------------------------------
// One lock per state directory (item 5)
// ----------------------------------------------------------------------

#[test]
fn concurrent_admits_never_share_an_exclusive_cpu_or_lose_an_entry() {
    let dir = temp_dir("concurrent-admit");
    let state = dir.join("state");
    let pods: Vec<PathBuf> = (0..8)
        .map(|i| {
            let path = dir.join(format!("p{i}.yaml"));
            std::fs::write(&path, exclusive_pod(&format!("p{i}"), 1)).unwrap();
            path
        })
        .collect();
    let handles: Vec<_> = pods
        .iter()
        .map(|pod| {
            let args: Vec<String> = vec![
                "admit".into(),
                "--node".into(),
                STATIC_NODE.into(),
                "--sysfs".into(),
                "fixtures/sysfs/topoDualSocketHT".into(),
                "--state".into(),
                state.display().to_string(),
                pod.display().to_string(),
            ];
            std::thread::spawn(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                podpolicy(&args)
            })
        })
        .collect();
    for handle in handles {
        let (code, out, err) = handle.join().unwrap();
        assert_eq!(code, 0, "{out}\n{err}");
    }
    let assignments = cpu_assignments(&state);
    assert_eq!(assignments.len(), 8, "{assignments:?}");
    assert_no_double_assignment(&state, "8 concurrent admits");
}

#[test]
fn a_second_agent_on_a_locked_state_directory_fails_clearly() {
    let n = node_dirs("agent-lock");
    let _first = start_agent(&n, PLAIN_NODE);
    let held = state_dir::StateDir::lock(&n.state, Duration::from_millis(100)).unwrap_err();
    let text = format!("{held:#}");
    assert!(
        text.contains("locked by another podpolicy process"),
        "{text}"
    );
}

#[test]
fn release_of_an_unknown_pod_or_container_is_an_error() {
    let dir = temp_dir("release-unknown");
    let state = dir.join("state");
    let pod = dir.join("p.yaml");
    std::fs::write(&pod, exclusive_pod("p", 2)).unwrap();
    let state_arg = state.display().to_string();
    let pod_arg = pod.display().to_string();
    let (code, out, err) = podpolicy(&[
        "admit",
        "--node",
        STATIC_NODE,
        "--sysfs",
        SYSFS,
        "--state",
        &state_arg,
        &pod_arg,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let release = |uid: &str, container: &str| {
        podpolicy(&[
            "release",
            "--node",
            STATIC_NODE,
            "--sysfs",
            SYSFS,
            "--state",
            &state_arg,
            uid,
            container,
        ])
    };
    let (code, _, err) = release("no-such-uid", "app");
    assert_ne!(code, 0);
    assert!(err.contains("holds no resource-manager state"), "{err}");
    let (code, _, err) = release("uid-p", "no-such-container");
    assert_ne!(code, 0);
    assert!(
        err.contains("has no container `no-such-container`"),
        "{err}"
    );
    let (code, out, err) = release("uid-p", "app");
    assert_eq!(code, 0, "{out}{err}");
    assert!(checkpoint_uids(&state).is_empty());
}

// ----------------------------------------------------------------------
// One pod never blocks the others (item 3), exact ownership (item 6)
// ----------------------------------------------------------------------

#[test]
fn pods_mapping_to_one_systemd_cgroup_fail_alone_and_the_rest_are_written() {
    // systemd turns `-` into `_`: uids `x-y` and `x_y` are one slice.
    let n = node_dirs("one-pod-blocks");
    std::fs::write(n.pods.join("a.yaml"), burstable_pod("a", "x-y")).unwrap();
    std::fs::write(n.pods.join("b.yaml"), burstable_pod("b", "x_y")).unwrap();
    std::fs::write(n.pods.join("c.yaml"), burstable_pod("c", "good-uid")).unwrap();
    let mut agent = start_agent(&n, PLAIN_NODE);
    let report = agent.reconcile().unwrap();
    assert_eq!(report.applied, vec![static_name("c")], "{report:?}");
    assert_eq!(report.failed.len(), 2, "{report:?}");
    assert!(
        report
            .failed
            .iter()
            .all(|f| f.contains("is also the cgroup of pod")),
        "{report:?}"
    );
    let c = n
        .cgroups
        .join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podgood_uid.slice");
    assert!(c.join("cpu.weight").is_file(), "pod c was not written");
    let shared = n
        .cgroups
        .join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podx_y.slice");
    assert!(!shared.exists(), "a conflicting pod was written");
}

#[test]
fn a_symlinked_pod_directory_fails_that_pod_only() {
    let n = node_dirs("symlinked-pod");
    std::fs::write(n.pods.join("a.yaml"), burstable_pod("a", "uid-a")).unwrap();
    std::fs::write(n.pods.join("b.yaml"), burstable_pod("b", "uid-b")).unwrap();
    let outside = n.dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let tier = n.cgroups.join("kubepods.slice/kubepods-burstable.slice");
    std::fs::create_dir_all(&tier).unwrap();
    std::os::unix::fs::symlink(&outside, tier.join("kubepods-burstable-poduid_a.slice")).unwrap();
    let metrics = Arc::new(Metrics::new());
    let mut agent = Agent::start(
        agent_options(&n, PLAIN_NODE),
        Arc::new(PolicySlot::new(embedded())),
        metrics.clone(),
        Instant::now(),
    )
    .unwrap();
    let report = agent.reconcile().unwrap();
    assert_eq!(report.applied, vec![static_name("b")], "{report:?}");
    assert_eq!(report.failed.len(), 1, "{report:?}");
    assert!(report.failed[0].contains("symbolic link"), "{report:?}");
    let text = metrics.render();
    for want in [
        format!("podpolicy_pod_applied{{pod=\"{}\"}} 0", static_name("a")),
        format!("podpolicy_pod_applied{{pod=\"{}\"}} 1", static_name("b")),
    ] {
        assert!(text.contains(&want), "{want} missing from:\n{text}");
    }
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "wrote through the link"
    );
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(n.state.join("agent_status.json")).unwrap()).unwrap();
    assert_eq!(status["applied"], serde_json::json!([static_name("b")]));
    assert_eq!(status["failed"].as_array().unwrap().len(), 1);
}

#[test]
fn a_pod_name_with_a_slash_is_refused_and_owns_no_other_pods_cgroups() {
    let n = node_dirs("ownership");
    std::fs::write(n.pods.join("web.yaml"), burstable_pod("web", "uid-web")).unwrap();
    std::fs::write(
        n.pods.join("evil.yaml"),
        burstable_pod("web/evil", "uid-evil"),
    )
    .unwrap();
    let mut agent = start_agent(&n, PLAIN_NODE);
    let report = agent.reconcile().unwrap();
    assert_eq!(report.applied, vec![static_name("web")], "{report:?}");
    assert!(
        report.rejected.iter().any(|r| r.contains("metadata.name")),
        "{report:?}"
    );
    let web = agent.state().pods["uid-web"].clone();
    assert!(
        web.cgroups.iter().all(|c| c.contains("poduid_web")),
        "web owns another pod's cgroup: {web:?}"
    );
}

// ----------------------------------------------------------------------
// Half-written manifests (item 7), QoS changes (item 8), no self-wakeups (item 2)
// ----------------------------------------------------------------------

#[test]
fn a_manifest_cut_short_removes_no_pod_until_it_is_stable() {
    let n = node_dirs("half-written");
    let both = format!(
        "{}---\n{}",
        burstable_pod("a", "uid-a"),
        burstable_pod("b", "uid-b")
    );
    std::fs::write(n.pods.join("pods.yaml"), &both).unwrap();
    let mut agent = start_agent(&n, PLAIN_NODE);
    let report = agent.reconcile().unwrap();
    assert_eq!(report.applied.len(), 2, "{report:?}");
    // A writer caught after the first document.
    let cut = both.split("---").next().unwrap().to_string();
    std::fs::write(n.pods.join("pods.yaml"), &cut).unwrap();
    let report = agent.reconcile().unwrap();
    assert!(
        report.removed.is_empty(),
        "removed on a cut file: {report:?}"
    );
    assert_eq!(agent.state().pods.len(), 2);
    // The writer finishes: nothing was lost.
    std::fs::write(n.pods.join("pods.yaml"), &both).unwrap();
    let report = agent.reconcile().unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    // A real edit that drops b, read twice unchanged, removes it.
    std::fs::write(n.pods.join("pods.yaml"), &cut).unwrap();
    let first = agent.reconcile().unwrap();
    assert!(first.removed.is_empty(), "{first:?}");
    let second = agent.reconcile().unwrap();
    assert_eq!(second.removed, vec![static_name("b")], "{second:?}");
}

#[test]
fn a_pod_without_containers_is_refused() {
    let n = node_dirs("no-containers");
    std::fs::write(
        n.pods.join("empty.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: empty, namespace: default, uid: u1}\nspec:\n  containers: []\n",
    )
    .unwrap();
    let mut agent = start_agent(&n, PLAIN_NODE);
    let report = agent.reconcile().unwrap();
    assert!(report.applied.is_empty(), "{report:?}");
    assert!(
        report
            .rejected
            .iter()
            .any(|r| r.contains("spec.containers")),
        "{report:?}"
    );
}

#[test]
fn a_qos_class_change_removes_the_old_pod_cgroup() {
    let n = node_dirs("qos-change");
    std::fs::write(n.pods.join("p.yaml"), burstable_pod("p", "uid-p")).unwrap();
    let mut agent = start_agent(&n, PLAIN_NODE);
    agent.reconcile().unwrap();
    let burstable = n
        .cgroups
        .join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-poduid_p.slice");
    assert!(burstable.is_dir());
    // The same pod, now Guaranteed.
    let guaranteed = burstable_pod("p", "uid-p").replace(
        "requests: {cpu: 100m, memory: 64Mi}",
        "requests: {cpu: 100m, memory: 64Mi}\n      limits: {cpu: 100m, memory: 64Mi}",
    );
    std::fs::write(n.pods.join("p.yaml"), guaranteed).unwrap();
    let report = agent.reconcile().unwrap();
    assert_eq!(report.applied, vec![static_name("p")], "{report:?}");
    assert!(
        n.cgroups
            .join("kubepods.slice/kubepods-poduid_p.slice")
            .is_dir()
    );
    assert!(!burstable.exists(), "the old pod cgroup is orphaned");
    let recorded = &agent.state().pods["uid-p"].cgroups;
    assert!(
        recorded.iter().all(|c| !c.contains("burstable")),
        "{recorded:?}"
    );
}

#[test]
fn the_agent_does_not_wake_itself_and_writes_nothing_when_nothing_changed() {
    let n = node_dirs("no-self-wakeup");
    for i in 0..50 {
        std::fs::write(
            n.pods.join(format!("p{i}.yaml")),
            burstable_pod(&format!("p{i}"), &format!("uid-{i}")),
        )
        .unwrap();
    }
    let mut options = agent_options(&n, PLAIN_NODE);
    options.resync = Duration::from_secs(3600);
    let metrics = Arc::new(Metrics::new());
    let mut agent = Agent::start(
        options,
        Arc::new(PolicySlot::new(embedded())),
        metrics.clone(),
        Instant::now(),
    )
    .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (wake_tx, wake_rx) = std::sync::mpsc::channel();
    let runner = {
        let stop = stop.clone();
        std::thread::spawn(move || agent.run(&stop, wake_rx))
    };
    let passes = || {
        metrics
            .reconciles
            .get_or_create(&podpolicy::metrics::ResultLabels {
                result: "ok".into(),
            })
            .get()
    };
    // Let the first passes (and any event their reads cause) settle.
    let deadline = Instant::now() + Duration::from_secs(30);
    while passes() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let status = n.state.join("agent_status.json");
    let (before, modified) = (
        passes(),
        std::fs::metadata(&status).unwrap().modified().unwrap(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let after = passes();
    assert_eq!(
        after,
        before,
        "{} passes in 2 s with nothing changed",
        after - before
    );
    assert_eq!(
        std::fs::metadata(&status).unwrap().modified().unwrap(),
        modified
    );
    // A real change still wakes it.
    std::fs::write(n.pods.join("new.yaml"), burstable_pod("new", "uid-new")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while passes() == after && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(passes() > after, "a new manifest did not wake the agent");
    // Stop as SIGTERM does: the flag, then a wake-up.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    wake_tx.send(()).unwrap();
    runner.join().unwrap().unwrap();
}

// ----------------------------------------------------------------------
// Writes and removals never leave the root (items 9, 14)
// ----------------------------------------------------------------------

fn values(path: &str, files: &[(&str, &str)]) -> CgroupValues {
    CgroupValues {
        path: CgroupPath::parse("test", path).unwrap(),
        files: files
            .iter()
            .map(|(f, v)| FileValue {
                file: f.to_string(),
                value: v.to_string(),
            })
            .collect(),
    }
}

#[test]
fn a_symlink_swapped_in_after_planning_is_never_followed() {
    let dir = temp_dir("symlink-race");
    let root_dir = dir.join("root");
    let outside = dir.join("outside");
    std::fs::create_dir_all(root_dir.join("kubepods/burstable/podA")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let root = CgroupRoot::open(&root_dir).unwrap();
    let desired = vec![
        values(
            "kubepods/burstable/podA",
            &[("cpu.weight", "10"), ("memory.max", "100")],
        ),
        values("kubepods/burstable/podA/app", &[("cpu.weight", "10")]),
    ];
    let changes = cgroupfs::plan(&root, &desired).unwrap();
    assert!(!changes.is_empty());
    // The race: the tier becomes a link to a directory outside the root.
    let tier = root_dir.join("kubepods/burstable");
    std::fs::rename(&tier, dir.join("moved")).unwrap();
    std::fs::create_dir_all(outside.join("podA")).unwrap();
    std::os::unix::fs::symlink(&outside, &tier).unwrap();
    let err = cgroupfs::apply(&root, &changes).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let written: Vec<_> = walk(&outside);
    assert_eq!(
        written,
        vec![outside.join("podA")],
        "files appeared outside the root"
    );

    // Removal through an intermediate symlink deletes nothing outside.
    std::fs::write(outside.join("podA/keep"), "x").unwrap();
    let err = cgroupfs::remove(
        &root,
        &CgroupPath::parse("t", "kubepods/burstable/podA").unwrap(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(outside.join("podA/keep").exists());
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        out.push(entry.path());
        if entry.file_type().unwrap().is_dir() {
            out.extend(walk(&entry.path()));
        }
    }
    out.sort();
    out
}

#[test]
fn system_directories_and_kernel_filesystems_are_refused_as_roots() {
    for bad in ["/", "/etc", "/usr/lib", "/proc", "/dev"] {
        let err = CgroupRoot::open(Path::new(bad)).unwrap_err().to_string();
        assert!(
            err.contains("refus") || err.contains("not a cgroup v2"),
            "{bad}: {err}"
        );
    }
    // sysfs by type: on this machine /sys is sysfs (cgroup v1 or hybrid
    // hosts have tmpfs or cgroup mounts below /sys/fs/cgroup).
    let err = CgroupRoot::open(Path::new("/sys/kernel"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("kernel filesystem"), "{err}");
}

#[test]
fn resize_apply_follows_no_symlink() {
    let dir = temp_dir("resize-apply-safe");
    let root = dir.join("cgroup");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(outside.join("kubepods.slice")).unwrap();
    // Every pod cgroup is below kubepods.slice: make it a link out.
    std::os::unix::fs::symlink(outside.join("kubepods.slice"), root.join("kubepods.slice"))
        .unwrap();
    let (code, out, err) = podpolicy(&[
        "resize",
        "--node",
        PLAIN_NODE,
        "fixtures/resize/web-old.yaml",
        "fixtures/resize/web-new.yaml",
        "--apply",
        "--cgroup-root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.contains("symbolic link") || err.contains("symbolic link"),
        "{out}{err}"
    );
    assert_eq!(
        walk(&outside),
        vec![outside.join("kubepods.slice")],
        "written through the link"
    );
}

#[test]
fn healthz_fails_when_the_reconcile_loop_stops_going_round() {
    use std::io::{Read as _, Write as _};
    let metrics = Arc::new(Metrics::new());
    let heartbeat = Arc::new(podpolicy::swap::Heartbeat::new());
    metrics.watch_liveness(heartbeat.clone(), Duration::from_millis(200));
    let addr = podpolicy::metrics::serve("127.0.0.1:0".parse().unwrap(), metrics).unwrap();
    let get = || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        text
    };
    heartbeat.beat();
    assert!(get().starts_with("HTTP/1.1 200"), "a fresh beat is alive");
    std::thread::sleep(Duration::from_millis(400));
    let stuck = get();
    assert!(stuck.starts_with("HTTP/1.1 503"), "{stuck}");
    assert!(stuck.contains("has not gone round"), "{stuck}");
    heartbeat.beat();
    assert!(get().starts_with("HTTP/1.1 200"));
}

#[test]
fn policy_status_of_a_missing_directory_is_an_error_and_creates_nothing() {
    let dir = temp_dir("policy-status-missing").join("no-such-dir");
    let (code, _, err) = podpolicy(&["policy", "status", "--policy-dir", dir.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("no-such-dir"), "{err}");
    assert!(!dir.exists(), "policy status created the directory");
}
