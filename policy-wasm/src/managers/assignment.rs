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

use super::hints::encode_hint;
use super::pod::ManagedPod;
use super::state::{States, encode_blocks};
use crate::cpu_manager::{ResourceIsolationLevel, StaticPolicy};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::topology::TopologyHint;
use crate::wit;

fn isolation(level: ResourceIsolationLevel) -> wit::CpuIsolation {
    match level {
        ResourceIsolationLevel::Host => wit::CpuIsolation::Host,
        ResourceIsolationLevel::Pod => wit::CpuIsolation::Pod,
        ResourceIsolationLevel::Container => wit::CpuIsolation::Container,
    }
}

/// What the state says the pod got. `cpu` is the static CPU policy when the
/// CPU manager runs; `affinities` the topology manager's hint per container.
pub(super) fn pod_assignment(
    cpu: Option<&StaticPolicy>,
    gates: &FeatureGates,
    states: &States,
    pod: &ManagedPod,
    affinities: &BTreeMap<String, TopologyHint>,
    all_cpus: &CpuSet,
) -> wit::PodAssignment {
    let disable_quota = gates.disable_cpu_quota_with_exclusive_cpus;
    let memory_blocks = |name: &str| {
        states
            .memory
            .assignments
            .get(&pod.uid)
            .and_then(|c| c.get(name))
            .map(|blocks| encode_blocks(blocks))
            .unwrap_or_default()
    };
    let mut exclusive_long_running = CpuSet::new();
    let mut any_exclusive = false;
    let containers: Vec<wit::ContainerAssignment> = pod
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
                if *kind != wit::ContainerKind::Init
                    && let Some(cpus) = &cpuset
                {
                    exclusive_long_running = exclusive_long_running.union(cpus);
                }
            }
            wit::ContainerAssignment {
                name: name.clone(),
                kind: *kind,
                affinity: encode_hint(&affinities.get(name).copied().unwrap_or_default()),
                cpu_isolation: isolation(level),
                cpuset: cpuset.map(|c| c.to_string()),
                cfs_quota_disabled: disable_quota && level == ResourceIsolationLevel::Container,
                memory: memory_blocks(name),
            }
        })
        .collect();
    let pod_cpus = cpu.and(states.cpu.pod_cpuset(&pod.uid));
    wit::PodAssignment {
        pod_cpuset: pod_cpus.map(CpuSet::to_string),
        pod_shared_pool: pod_cpus.map(|set| set.difference(&exclusive_long_running).to_string()),
        pod_memory: states
            .memory
            .pod_assignments
            .get(&pod.uid)
            .map(|blocks| encode_blocks(blocks))
            .unwrap_or_default(),
        pod_cfs_quota_disabled: disable_quota && any_exclusive,
        node_shared_pool: if cpu.is_some() {
            states.cpu.default_cpuset.to_string()
        } else {
            all_cpus.to_string()
        },
        containers,
    }
}
