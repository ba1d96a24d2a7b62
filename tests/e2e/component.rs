//! The embedded component: it imports nothing, implements the world, and
//! reports the versions the host expects.

use std::time::Duration;

use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime, WIT_VERSION};
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

use crate::util::policy;

/// Imports of a component, listed by wasmtime itself.
pub fn component_imports(bytes: &[u8]) -> Vec<String> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    let engine = Engine::new(&config).expect("engine");
    let component = Component::new(&engine, bytes).expect("a valid component");
    component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn embedded_component_imports_nothing() {
    assert_eq!(component_imports(EMBEDDED_POLICY), Vec::<String>::new());
}

#[test]
fn import_listing_sees_a_wasi_import() {
    // The check above must be able to fail: a component that imports WASI is listed.
    let hostile = wat::parse_str(crate::hostile::WASI_IMPORTING_COMPONENT).expect("valid WAT");
    assert_eq!(
        component_imports(&hostile),
        vec!["wasi:cli/environment@0.2.6".to_string()]
    );
}

#[test]
fn policy_info_reports_versions_and_gate_defaults() {
    let info = policy().info();
    assert_eq!(info.wit_version, WIT_VERSION);
    assert_eq!(info.kubernetes_version, "1.36");
    assert_eq!(info.policy_version, env!("CARGO_PKG_VERSION"));
    let gate = |name: &str| {
        info.feature_gates
            .iter()
            .find(|g| g.name == name)
            .map(|g| g.enabled)
    };
    assert_eq!(gate("PodLevelResources"), Some(true));
    assert_eq!(gate("PodLevelResourcesFixKubeletQOSClass"), Some(true));
    assert_eq!(gate("MemoryQoS"), Some(false));
}

#[test]
fn wit_package_version_matches_the_host() {
    let wit =
        std::fs::read_to_string(crate::util::workspace().join("wit/policy.wit")).expect("wit file");
    assert!(
        wit.contains(&format!("package podpolicy:policy@{WIT_VERSION};")),
        "wit/policy.wit and the host disagree on the version"
    );
}

#[test]
fn component_evaluates_a_pod_with_pod_level_limits() {
    let json = serde_json::json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "resources": {"limits": {"cpu": "2", "memory": "2Gi"}},
            "initContainers": [{"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"memory": "128Mi"}}}],
            "containers": [
                {"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "log"}
            ]
        }
    });
    let pod = podpolicy::pod_input::pod_from_json(&json).expect("pod parses");
    let node = node_with_16gi_memory();
    let eval = policy()
        .evaluate(&pod, &node)
        .expect("call works")
        .expect("pod evaluates");
    assert_eq!(eval.qos_class, podpolicy::bindings::QosClass::Burstable);
    // No pod-level request (not defaulted here), so no remainder share:
    // proxy 1000 - 1000*128Mi/16Gi = 993 (the sidecar cap from `log`, 1000, is higher),
    // app 1000 - 1000*1Gi/16Gi = 938, log 1000 -> 999 (1000 is BestEffort's).
    let scores: Vec<(&str, i32)> = eval
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.oom_score_adj))
        .collect();
    assert_eq!(scores, vec![("proxy", 993), ("app", 938), ("log", 999)]);
    let file = |files: &[podpolicy::bindings::CgroupFile], name: &str| {
        files
            .iter()
            .find(|f| f.file.to_string() == name)
            .map(|f| f.value.to_string())
    };
    assert_eq!(
        file(&eval.pod_cgroup_files, "memory.max").as_deref(),
        Some("2147483648")
    );
    assert_eq!(
        file(&eval.pod_cgroup_files, "cpu.max").as_deref(),
        Some("200000 100000")
    );
    // KEP-2837 row 7: a container without a limit gets the pod-level limit in its cgroup.
    let log = &eval.containers[2];
    assert_eq!(
        file(&log.cgroup_files, "memory.max").as_deref(),
        Some("2147483648")
    );
    assert_eq!(
        file(&log.cgroup_files, "cpu.max").as_deref(),
        Some("200000 100000")
    );
}

/// Resource lists reach the component in whatever order a host sends them.
/// Two containers of 20,000 extended resources each, every list in reverse
/// order and the two containers' names interleaved, are decoded, merged
/// and evaluated in less CPU time than the call's deadline (2 s): as one
/// insertion in the middle of a sorted list per name they took longer than
/// that (`policy-wasm/src/resource_map.rs`). The call's CPU time is what is
/// compared, not its wall-clock time, which the epoch deadline bounds and
/// which other processes on a loaded machine stretch (the call runs under
/// a 60 s deadline here).
#[test]
fn long_resource_lists_in_reverse_order_are_evaluated_within_the_deadline() {
    let names = |parity: usize| -> serde_json::Value {
        (0..20_000)
            .map(|i| {
                (
                    format!("example.com/r{:05}", 2 * i + parity),
                    serde_json::json!("1"),
                )
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let (even, odd) = (names(0), names(1));
    let json = serde_json::json!({
        "metadata": {"name": "many", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [
            {"name": "even", "resources": {"requests": even, "limits": even}},
            {"name": "odd", "resources": {"requests": odd, "limits": odd}}
        ]}
    });
    let mut pod = podpolicy::pod_input::pod_from_json(&json).expect("pod parses");
    for container in &mut pod.spec.containers {
        let resources = container.resources.as_mut().expect("resources");
        resources.requests.as_mut().expect("requests").reverse();
        resources.limits.as_mut().expect("limits").reverse();
    }
    let node = node_with_16gi_memory();
    let limits = Limits::default();
    let policy = PolicyRuntime::embedded(
        &Cache::Dir(crate::util::cache_dir()),
        Limits {
            deadline: Duration::from_secs(60),
            ..limits
        },
    )
    .expect("embedded policy loads");
    let before = thread_cpu_time();
    let eval = policy
        .evaluate(&pod, &node)
        .expect("answered")
        .expect("pod evaluates");
    let used = thread_cpu_time() - before;
    assert!(
        used < limits.deadline,
        "the call used {used:?} of CPU, more than the product's deadline {:?}",
        limits.deadline
    );
    let requests = &eval.effective.requests;
    assert_eq!(requests.len(), 40_000);
    assert!(
        requests.windows(2).all(|pair| pair[0].name < pair[1].name),
        "the pod's requests come back in name order"
    );
    assert_eq!(requests[0].name, "example.com/r00000");
    assert_eq!(requests[39_999].name, "example.com/r39999");
}

/// A node whose only capacity is 16 GiB of memory (what `oom_score_adj`
/// needs), every other setting the kubelet's default.
fn node_with_16gi_memory() -> podpolicy::bindings::NodeSettings {
    podpolicy::bindings::NodeSettings {
        capacity: vec![podpolicy::bindings::ResourceQuantity {
            name: "memory".into(),
            quantity: "16Gi".into(),
        }],
        ..podpolicy::empty_node()
    }
}

/// CPU time (user and system) this thread has used, from
/// `/proc/thread-self/stat` (utime and stime, fields 14 and 15, in
/// USER_HZ ticks: 100 a second on Linux).
fn thread_cpu_time() -> Duration {
    let stat =
        std::fs::read_to_string("/proc/thread-self/stat").expect("reading the thread's stat");
    // The command name may hold spaces; the fields after it start at 3.
    let rest = &stat[stat.rfind(')').expect("a command name") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |field: usize| -> u64 { fields[field - 3].parse().expect("a tick count") };
    Duration::from_millis((ticks(14) + ticks(15)) * 10)
}
