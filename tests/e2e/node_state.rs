//! The resource managers on a node: admission with crash-safe checkpoints,
//! restart from checkpoints, release back to the start state, refusal of
//! corrupt or mismatched checkpoints, and cpuset writes.

use std::path::PathBuf;

use podpolicy::admit::{admit, release, start_state};
use podpolicy::bindings::{NodeSettings, NodeTopology};
use podpolicy::checkpoint::{self, CPU_CHECKPOINT, MEMORY_CHECKPOINT};
use podpolicy::pod_input::read_pods;
use podpolicy::topology_input::read_node_topology;

use crate::util::{policy, temp_dir, workspace};

fn node() -> NodeSettings {
    podpolicy::node_input::read_node(&workspace().join("fixtures/nodes/dual-socket-static.yaml"))
        .expect("node file")
}

fn topology() -> NodeTopology {
    read_node_topology(&workspace().join("fixtures/sysfs/topoDualSocketHT"))
        .expect("fixture topology")
}

fn fixture_pod(name: &str) -> podpolicy::bindings::Pod {
    let mut docs = read_pods(&workspace().join("fixtures/pods").join(name)).expect("pod");
    docs.remove(0).pod
}

fn file(dir: &std::path::Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[test]
fn admit_persists_state_and_a_restart_sees_the_same_assignments() {
    let dir = temp_dir("state-restart");
    let (node, topology) = (node(), topology());
    let pod = fixture_pod("kep5526-pod-scope-mixed.yaml");
    let start = start_state(policy(), &topology, &node, Some(&dir)).expect("empty start");
    let admission = admit(policy(), &pod, &node, &topology, Some(&dir), None).expect("admit");
    assert!(admission.rejection.is_none(), "{:?}", admission.rejection);
    let a = &admission.assignment;
    // Example 2: 4 CPUs for the pod, 2 exclusive, the other two share the pod pool.
    assert_eq!(a.pod_cpuset.as_deref(), Some("2,4,8,10"));
    let exclusive = a
        .containers
        .iter()
        .find(|c| c.name == "container-1")
        .and_then(|c| c.cpuset.clone());
    assert_eq!(exclusive.as_deref(), Some("2,8"));
    for shared in ["container-2", "container-3"] {
        let c = a
            .containers
            .iter()
            .find(|c| c.name == shared)
            .expect("container");
        assert_eq!(
            c.cpuset, a.pod_shared_pool,
            "{shared} runs in the pod shared pool"
        );
    }
    assert!(file(&dir, CPU_CHECKPOINT).exists() && file(&dir, MEMORY_CHECKPOINT).exists());
    // No temp files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| e.file_name() != podpolicy::state_dir::LOCK_FILE)
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // "Restart": load the checkpoints and start the managers again.
    let restarted = start_state(policy(), &topology, &node, Some(&dir)).expect("restart");
    assert_eq!(restarted, admission.state);

    // Release every container: the node returns to its start state.
    let mut state = restarted;
    for c in ["container-1", "container-2", "container-3"] {
        state = release(policy(), &pod.uid, c, &node, &topology, &dir).expect("release");
    }
    assert_eq!(state, start);
    assert_eq!(
        start_state(policy(), &topology, &node, Some(&dir)).expect("reload"),
        start
    );
}

#[test]
fn a_corrupt_checkpoint_is_refused() {
    let dir = temp_dir("state-corrupt");
    let (node, topology) = (node(), topology());
    admit(
        policy(),
        &fixture_pod("kep5526-pod-scope-mixed.yaml"),
        &node,
        &topology,
        Some(&dir),
        None,
    )
    .expect("admit");
    let path = file(&dir, CPU_CHECKPOINT);
    let text = std::fs::read_to_string(&path).expect("checkpoint");
    std::fs::write(&path, text.replacen("2,8", "2,9", 1)).expect("tamper");
    let error = format!(
        "{:#}",
        start_state(policy(), &topology, &node, Some(&dir)).expect_err("corrupt")
    );
    assert!(
        error.contains("corrupt checkpoint") && error.contains("checksum mismatch"),
        "{error}"
    );
    assert!(error.contains(CPU_CHECKPOINT), "{error}");
    std::fs::write(&path, "{not json").expect("garbage");
    let error = format!(
        "{:#}",
        start_state(policy(), &topology, &node, Some(&dir)).expect_err("garbage")
    );
    assert!(error.contains("corrupt checkpoint"), "{error}");
}

#[test]
fn a_checkpoint_of_another_policy_is_refused() {
    let dir = temp_dir("state-policy");
    let (node, topology) = (node(), topology());
    admit(
        policy(),
        &fixture_pod("kep5526-pod-scope-mixed.yaml"),
        &node,
        &topology,
        Some(&dir),
        None,
    )
    .expect("admit");
    let mut other = node.clone();
    other.cpu_manager_policy = Some(podpolicy::bindings::CpuManagerPolicy::None);
    let error = format!(
        "{:#}",
        start_state(policy(), &topology, &other, Some(&dir)).expect_err("policy mismatch")
    );
    // The managers' start-up check (in the component) refuses it, with
    // the kubelet's words, and the host names the directory.
    assert!(
        error.contains(r#"configured policy "none" differs from state checkpoint policy "static""#)
            && error.contains(&dir.display().to_string()),
        "{error}"
    );
}

#[test]
fn admit_writes_cpusets_and_never_an_empty_one() {
    let dir = temp_dir("state-cpusets");
    let root = temp_dir("cgroup-cpusets");
    let (node, topology) = (node(), topology());
    let pod = fixture_pod("kep5526-pod-scope-mixed.yaml");
    let admission =
        admit(policy(), &pod, &node, &topology, Some(&dir), Some(&root)).expect("admit");
    let pod_dir = root.join(format!("kubepods/pod{}", pod.uid));
    let read = |p: PathBuf| {
        std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .trim()
            .to_string()
    };
    assert_eq!(read(pod_dir.join("cpuset.cpus")), "2,4,8,10");
    assert_eq!(read(pod_dir.join("container-1/cpuset.cpus")), "2,8");
    let shared = admission.assignment.pod_shared_pool.clone().expect("pool");
    assert_eq!(read(pod_dir.join("container-2/cpuset.cpus")), shared);
    assert!(!read(pod_dir.join("container-3/cpuset.mems")).is_empty());
    // An empty cpuset from a (broken) policy is refused before any write.
    let mut broken = admission.clone();
    for f in &mut broken.files.containers[1].files {
        if f.file.to_string() == "cpuset.cpus" {
            f.value = podpolicy::bindings::CgroupValue::IdList(String::new());
        }
    }
    let qos = podpolicy::bindings::QosClass::Guaranteed;
    let error = podpolicy::admit::cpuset_values(&broken, &pod, qos, &node, &topology)
        .expect_err("empty cpuset");
    assert!(format!("{error}").contains("empty cpuset"), "{error}");
    let _ = checkpoint::paths(&dir);
}

#[test]
fn admit_and_release_from_the_command_line() {
    use crate::util::podpolicy;
    let dir = temp_dir("state-cli");
    let state = dir.to_str().expect("utf-8");
    let common = [
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "--sysfs",
        "fixtures/sysfs/topoDualSocketHT",
        "--state",
        state,
    ];
    let mut args = vec![
        "admit",
        "-o",
        "json",
        "fixtures/pods/kep5526-pod-scope-mixed.yaml",
    ];
    args.extend(common);
    let (code, stdout, stderr) = podpolicy(&args);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["admitted"], true);
    assert_eq!(v["podCpuset"], "2,4,8,10");
    // Admitting the same pod again is idempotent (a kubelet restart re-admits running pods).
    let (code, stdout, _) = podpolicy(&args);
    assert!(code == 0 || code == 1, "{stdout}");
    for container in ["container-1", "container-2", "container-3"] {
        let mut release = vec!["release", "7a0c9d2e-1111-4a3b-9c5d-5526aa000002", container];
        release.extend(common);
        let (code, _, stderr) = podpolicy(&release);
        assert_eq!(code, 0, "{stderr}");
    }
    let checkpoint = std::fs::read_to_string(dir.join(CPU_CHECKPOINT)).expect("checkpoint");
    assert!(
        checkpoint.contains("\"defaultCpuSet\": \"0-11\""),
        "{checkpoint}"
    );
    assert!(checkpoint.contains("\"entries\": {}"), "{checkpoint}");
}
