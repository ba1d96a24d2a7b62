//! What the state says a pod got (`pod_assignment`): per container its
//! topology affinity, CPU isolation, cpuset, CFS quota switch and memory
//! blocks; for the pod its cpuset, pod shared pool and memory; and the
//! node's shared pool.
//!
//! Mirrors what upstream reads back from the managers when it creates a
//! container (`pkg/kubelet/cm/internal_container_lifecycle_linux.go`'s
//! `PreCreateContainer`: the CPU manager's cpuset, the memory manager's
//! NUMA nodes) and `DisableCPUQuotaWithExclusiveCPUs` (no CFS quota on
//! exclusive CPUs). It is computed from the state alone, so `admit` and
//! `manager-operation` answer the same way.

use std::collections::BTreeMap;

use super::machine::Machine;
use super::pod::ManagedPod;
use super::state::ManagerState;
use crate::cpu_manager::{ResourceIsolationLevel, StaticPolicy};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::memory_manager::Block;
use crate::model::ContainerKind;
use crate::topology::TopologyHint;

/// What one container got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerAssignment {
    /// The container name.
    pub name: String,
    /// Its kind (init, sidecar or regular).
    pub kind: ContainerKind,
    /// The topology manager's hint for it (don't-care without a decision).
    pub affinity: TopologyHint,
    /// How isolated its CPUs are (`GetResourceIsolationLevel`).
    pub cpu_isolation: ResourceIsolationLevel,
    /// Its CPUs, when the static CPU policy gave it a set.
    pub cpuset: Option<CpuSet>,
    /// Whether its CFS quota is disabled (`DisableCPUQuotaWithExclusiveCPUs`).
    pub cfs_quota_disabled: bool,
    /// Its memory blocks (Static memory policy).
    pub memory: Vec<Block>,
}

/// What the state says a pod got, per container and for the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodAssignment {
    /// Each init and app container, in admission order.
    pub containers: Vec<ContainerAssignment>,
    /// The KEP-5526 pod-level CPU set.
    pub pod_cpuset: Option<CpuSet>,
    /// The pod shared pool: the pod set without its long-running containers' exclusive CPUs.
    pub pod_shared_pool: Option<CpuSet>,
    /// The KEP-5526 pod-level memory blocks.
    pub pod_memory: Vec<Block>,
    /// Whether the pod's CFS quota is disabled (some container has exclusive CPUs).
    pub pod_cfs_quota_disabled: bool,
    /// The node's shared pool (every CPU without the static CPU policy).
    pub node_shared_pool: CpuSet,
}

/// What the state says the pod got. `cpu` is the static CPU policy when the
/// CPU manager runs; `affinities` the topology manager's hint per container;
/// `machine` gives the node's CPUs when no CPU manager keeps a shared pool.
pub(super) fn pod_assignment(
    cpu: Option<&StaticPolicy>,
    gates: &FeatureGates,
    states: &ManagerState,
    pod: &ManagedPod,
    affinities: &BTreeMap<String, TopologyHint>,
    machine: &Machine,
) -> PodAssignment {
    let disable_quota = gates.disable_cpu_quota_with_exclusive_cpus;
    let memory_blocks = |name: &str| {
        states
            .memory
            .assignments
            .get(&pod.uid)
            .and_then(|c| c.get(name))
            .cloned()
            .unwrap_or_default()
    };
    let mut exclusive_long_running = CpuSet::new();
    let mut any_exclusive = false;
    let containers: Vec<ContainerAssignment> = pod
        .containers
        .iter()
        .map(|(name, kind)| {
            let (level, cpuset) = match cpu {
                Some(policy) => (
                    policy.resource_isolation_level(&states.cpu, &pod.cpu, name, gates),
                    states.cpu.cpuset(&pod.uid, name).cloned(),
                ),
                None => (ResourceIsolationLevel::Host, None),
            };
            if level == ResourceIsolationLevel::Container {
                any_exclusive = true;
                if *kind != ContainerKind::Init
                    && let Some(cpus) = &cpuset
                {
                    exclusive_long_running = exclusive_long_running.union(cpus);
                }
            }
            ContainerAssignment {
                name: name.clone(),
                kind: *kind,
                affinity: affinities.get(name).copied().unwrap_or_default(),
                cpu_isolation: level,
                cpuset,
                cfs_quota_disabled: disable_quota && level == ResourceIsolationLevel::Container,
                memory: memory_blocks(name),
            }
        })
        .collect();
    let pod_cpus = cpu.and(states.cpu.pod_cpuset(&pod.uid));
    PodAssignment {
        pod_shared_pool: pod_cpus.map(|set| set.difference(&exclusive_long_running)),
        pod_cpuset: pod_cpus.cloned(),
        pod_memory: states
            .memory
            .pod_assignments
            .get(&pod.uid)
            .cloned()
            .unwrap_or_default(),
        pod_cfs_quota_disabled: disable_quota && any_exclusive,
        node_shared_pool: if cpu.is_some() {
            states.cpu.default_cpuset.clone()
        } else {
            machine.all_cpus()
        },
        containers,
    }
}
