//! Builders shared by the managers' unit tests: WIT pods and containers,
//! a dual-socket topology and node settings with both static policies.

use super::managers::encode_state;
use crate::managers::ManagerState;
use crate::wit;

/// One GiB.
pub(super) const GIB: u64 = 1 << 30;

/// A WIT resource list from name and quantity pairs.
pub(super) fn list(pairs: &[(&str, &str)]) -> Vec<wit::ResourceQuantity> {
    pairs
        .iter()
        .map(|(name, quantity)| wit::ResourceQuantity {
            name: (*name).into(),
            quantity: (*quantity).into(),
        })
        .collect()
}

/// Requests equal to limits for `cpu` and `memory`.
pub(super) fn guaranteed(cpu: &str, memory: &str) -> Option<wit::ResourceRequirements> {
    let l = list(&[("cpu", cpu), ("memory", memory)]);
    Some(wit::ResourceRequirements {
        requests: Some(l.clone()),
        limits: Some(l),
    })
}

/// A container with `resources`.
pub(super) fn container(
    name: &str,
    resources: Option<wit::ResourceRequirements>,
) -> wit::Container {
    wit::Container {
        name: name.into(),
        resources,
        restart_policy: None,
        resize_policy: Vec::new(),
    }
}

/// A pod with a UID, optional pod-level `resources` and `containers`.
pub(super) fn pod(
    uid: &str,
    resources: Option<wit::ResourceRequirements>,
    containers: Vec<wit::Container>,
) -> wit::Pod {
    let mut pod = crate::boundary::pod::bare_pod(uid, containers);
    pod.uid = uid.into();
    pod.spec.resources = resources;
    pod
}

/// topoDualSocketHT with 8Gi per NUMA node.
pub(super) fn topology() -> wit::NodeTopology {
    wit::NodeTopology {
        cpus: (0..12)
            .map(|id| wit::TopologyCpu {
                id,
                core_id: id % 6,
                socket_id: id % 2,
                numa_node: id % 2,
                uncore_cache_id: None,
            })
            .collect(),
        numa_nodes: (0..2)
            .map(|id| wit::NumaNodeInfo {
                id,
                memory_bytes: 8 * GIB,
                hugepages: Vec::new(),
                distances: vec![10, 20],
            })
            .collect(),
    }
}

/// Static CPU and memory policies, restricted topology policy in `scope`
/// (`pod` or `container`), 1 CPU and 1Gi per NUMA node reserved, and
/// `PodLevelResourceManagers` on.
pub(super) fn node(scope: &str) -> wit::NodeSettings {
    wit::NodeSettings {
        system_reserved: list(&[("cpu", "1")]),
        cpu_manager_policy: Some(wit::CpuManagerPolicy::Static),
        memory_manager_policy: Some(wit::MemoryManagerPolicy::Static),
        reserved_memory: (0..2)
            .map(|numa_node| wit::NumaReservedMemory {
                numa_node,
                limits: list(&[("memory", "1Gi")]),
            })
            .collect(),
        topology_manager_policy: Some(wit::TopologyManagerPolicy::Restricted),
        topology_manager_scope: Some(match scope {
            "pod" => wit::TopologyManagerScope::Pod,
            _ => wit::TopologyManagerScope::Container,
        }),
        feature_gates: vec![wit::FeatureGate {
            name: "PodLevelResourceManagers".into(),
            enabled: true,
        }],
        ..crate::node::default_settings()
    }
}

/// The empty state, as a host starts.
pub(super) fn empty_state() -> wit::ManagerState {
    encode_state(&ManagerState::default())
}

/// `node` with topology `policy` and the CPU manager `options`.
pub(super) fn with_options(
    mut node: wit::NodeSettings,
    policy: &str,
    options: &[(&str, &str)],
) -> wit::NodeSettings {
    node.topology_manager_policy = Some(match policy {
        "best-effort" => wit::TopologyManagerPolicy::BestEffort,
        "restricted" => wit::TopologyManagerPolicy::Restricted,
        "single-numa-node" => wit::TopologyManagerPolicy::SingleNumaNode,
        _ => wit::TopologyManagerPolicy::None,
    });
    node.cpu_manager_policy_options = options
        .iter()
        .map(|(name, value)| wit::PolicyOption {
            name: (*name).into(),
            value: (*value).into(),
        })
        .collect();
    node
}
