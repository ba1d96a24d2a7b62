//! Evaluates the benchmark pod natively in a loop, for instruction-level
//! profilers (valgrind cannot run wasmtime's pooling allocator, and this VM
//! has no hardware counters for perf). It builds only policy-wasm:
//!
//! ```sh
//! cargo build --release -p policy-wasm --example profile_evaluate
//! valgrind --tool=callgrind target/release/examples/profile_evaluate [CONTAINERS] [ITERATIONS]
//! ```
//!
//! The pod and node are those of `host/benches/policy.rs` (`evaluate/N
//! containers`): a quarter of the containers sidecars, cpu and memory
//! requests and limits on each, pod-level limits, a 1000Gi cgroup v2 node.
//! The pod is validated and defaulted first, as `explain` does.

use policy_wasm::evaluate;
use policy_wasm::wit::{
    CgroupDriver, Container, FeatureGate, Pod, PodSpec, PodStatus, ResourceQuantity,
    ResourceRequirements,
};

fn list(entries: &[(&str, String)]) -> Vec<ResourceQuantity> {
    entries
        .iter()
        .map(|(name, quantity)| ResourceQuantity {
            name: (*name).into(),
            quantity: quantity.clone(),
        })
        .collect()
}

fn container(i: usize, sidecar: bool) -> Container {
    Container {
        name: format!("c{i}"),
        resources: Some(ResourceRequirements {
            requests: Some(list(&[
                ("cpu", format!("{}m", 100 * (i % 5 + 1))),
                ("memory", format!("{}Mi", 64 * (i % 4 + 1))),
            ])),
            limits: Some(list(&[
                ("cpu", "1".into()),
                ("memory", format!("{}Mi", 256 * (i % 4 + 1))),
            ])),
        }),
        restart_policy: sidecar.then(|| "Always".into()),
        resize_policy: Vec::new(),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map_or(3, |n| n.parse().expect("a count"));
    let iterations: usize = args.next().map_or(1000, |n| n.parse().expect("a count"));
    let sidecars = (count + 2) / 4;
    let pod = Pod {
        name: format!("bench-{count}"),
        namespace: "default".into(),
        uid: String::new(),
        annotations: Vec::new(),
        spec: PodSpec {
            init_containers: (0..sidecars).map(|i| container(i, true)).collect(),
            containers: (sidecars..count).map(|i| container(i, false)).collect(),
            ephemeral_containers: Vec::new(),
            resources: Some(ResourceRequirements {
                requests: None,
                limits: Some(list(&[
                    ("cpu", count.to_string()),
                    ("memory", format!("{count}Gi")),
                ])),
            }),
            overhead: None,
            priority: None,
            priority_class_name: None,
            os_name: None,
            restart_policy: None,
            node_name: None,
        },
        status: PodStatus::default(),
    };
    let mut node = policy_wasm::node::default_settings();
    node.name = "kep-node".into();
    node.cgroup_driver = CgroupDriver::Systemd;
    node.capacity = list(&[
        ("cpu", "64".into()),
        ("memory", "1000Gi".into()),
        ("hugepages-2Mi", "4Gi".into()),
        ("hugepages-1Gi", "0".into()),
    ]);
    node.kube_reserved = list(&[("cpu", "1".into()), ("memory", "2Gi".into())]);
    node.system_reserved = list(&[("cpu", "500m".into()), ("memory", "1Gi".into())]);
    node.feature_gates = vec![FeatureGate {
        name: "PodLevelResources".into(),
        enabled: true,
    }];

    let errors = evaluate::validate_pod(&pod, &node);
    assert!(errors.is_empty(), "{errors:?}");
    let pod = evaluate::default_pod(&pod, &node).expect("defaults").pod;
    let mut ok = 0;
    for _ in 0..iterations {
        ok += usize::from(std::hint::black_box(evaluate::evaluate(&pod, &node)).is_ok());
    }
    assert_eq!(ok, iterations, "every evaluation succeeds");
    println!("{ok} of {iterations} evaluations of a {count}-container pod succeeded");
}
