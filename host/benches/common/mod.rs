//! The pods and node the policy benchmarks share (`policy`, `evaluate_ratio`).
//! Each bench that includes this module also includes `fuzz/src/convert.rs`
//! as `convert`.

use std::path::{Path, PathBuf};

use podpolicy::bindings::{NodeSettings, Pod};
use podpolicy::runtime::PolicyRuntime;
use serde_json::{Value, json};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ is in the workspace")
        .to_path_buf()
}

/// The KEP-2837 example node (1000Gi, cgroup v2, kubelet defaults).
pub fn node() -> NodeSettings {
    podpolicy::node_input::read_node(&workspace().join("fixtures/nodes/node-1000gi.yaml"))
        .expect("the fixture node reads")
}

/// A pod of `count` containers, a quarter of them (rounded) sidecars, every
/// container with cpu and memory requests and limits, and pod-level limits.
pub fn pod_json(count: usize) -> Value {
    let sidecars = (count + 2) / 4;
    let container = |i: usize, sidecar: bool| {
        let mut c = json!({
            "name": format!("c{i}"),
            "image": "registry.example/app:1",
            "resources": {
                "requests": { "cpu": format!("{}m", 100 * (i % 5 + 1)), "memory": format!("{}Mi", 64 * (i % 4 + 1)) },
                "limits": { "cpu": "1", "memory": format!("{}Mi", 256 * (i % 4 + 1)) },
            },
        });
        if sidecar {
            c["restartPolicy"] = "Always".into();
        }
        c
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": format!("bench-{count}"), "namespace": "default" },
        "spec": {
            "initContainers": (0..sidecars).map(|i| container(i, true)).collect::<Vec<_>>(),
            "containers": (sidecars..count).map(|i| container(i, false)).collect::<Vec<_>>(),
            "resources": { "limits": { "cpu": count.to_string(), "memory": format!("{}Gi", count) } },
        },
    })
}

/// The pod as `explain` evaluates it: validated, then defaulted.
pub fn defaulted_pod(policy: &PolicyRuntime, node: &NodeSettings, count: usize) -> (Pod, Pod) {
    let pod = podpolicy::pod_input::pod_from_json(&pod_json(count)).expect("a valid pod");
    let errors = policy.validate_pod(&pod, node).expect("call");
    assert!(errors.is_empty(), "{errors:?}");
    let defaulted = policy
        .default_pod(&pod, node)
        .expect("call")
        .expect("defaults");
    (pod, defaulted.pod)
}

/// The defaulted `count`-container pod for the component and natively,
/// after checking that both evaluate it to the same answer.
pub fn agreed_pod(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    count: usize,
) -> (Pod, policy_wasm::wit::Pod) {
    let (_, pod) = defaulted_pod(policy, node, count);
    let native_pod = crate::convert::to_native(&pod);
    let component = policy
        .evaluate(&pod, node)
        .expect("call")
        .expect("evaluates");
    let native_node = crate::convert::to_native(node);
    let native = policy_wasm::evaluate::evaluate(&native_pod, &native_node).expect("evaluates");
    assert_eq!(format!("{component:?}"), format!("{native:?}"));
    (pod, native_pod)
}
