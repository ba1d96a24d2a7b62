//! Builders shared by the memory manager's unit tests.

use std::collections::BTreeMap;

use super::{
    HugePagesInfo, MEMORY, MemoryContainer, MemoryPod, MemoryState, NumaNodeMap, NumaNodeMemory,
    PodLevelGates, SystemReservedMemory, check_system_reserved, default_machine_state,
};
use crate::topology::{BitMask, TopologyHint};

/// One GiB.
pub(super) const GI: u64 = 1 << 30;

/// The mask of `bits`, which must be valid NUMA ids.
pub(super) fn mask(bits: &[usize]) -> BitMask {
    BitMask::new(bits).unwrap()
}

/// Both pod-level gates on (KEP-5526 managed).
pub(super) fn gates_on() -> PodLevelGates {
    PodLevelGates {
        pod_level_resources: true,
        pod_level_resource_managers: true,
    }
}

/// The Kubernetes 1.36 defaults: `PodLevelResources` on, `PodLevelResourceManagers` off.
pub(super) fn gates_default() -> PodLevelGates {
    PodLevelGates {
        pod_level_resources: true,
        pod_level_resource_managers: false,
    }
}

/// `n` NUMA nodes with 10Gi memory each (1Gi reserved) and four 1Gi hugepages.
pub(super) fn machine(n: usize) -> NumaNodeMap {
    let nodes: Vec<NumaNodeMemory> = (0..n)
        .map(|id| NumaNodeMemory {
            id,
            memory: 10 * GI,
            hugepages: vec![HugePagesInfo {
                page_size_kib: 1 << 20,
                num_pages: 4,
            }],
        })
        .collect();
    let reserved: SystemReservedMemory = (0..n)
        .map(|id| (id, BTreeMap::from([(MEMORY.to_string(), GI)])))
        .collect();
    check_system_reserved(&reserved).unwrap();
    default_machine_state(&nodes, &reserved).unwrap()
}

/// A state on [`machine`] with nothing allocated.
pub(super) fn state(n: usize) -> MemoryState {
    MemoryState {
        machine_state: machine(n),
        ..MemoryState::default()
    }
}

/// An app container requesting `memory` bytes; equivalent-Guaranteed when it requests any.
pub(super) fn container(name: &str, memory: u64) -> MemoryContainer {
    let requests = if memory == 0 {
        BTreeMap::new()
    } else {
        BTreeMap::from([(MEMORY.to_string(), memory)])
    };
    MemoryContainer {
        name: name.into(),
        restartable: false,
        equivalent_guaranteed: memory > 0,
        requests,
    }
}

/// A Guaranteed pod of these containers.
pub(super) fn pod(uid: &str, init: Vec<MemoryContainer>, apps: Vec<MemoryContainer>) -> MemoryPod {
    MemoryPod {
        uid: uid.into(),
        guaranteed: true,
        init_containers: init,
        containers: apps,
        ..MemoryPod::default()
    }
}

/// A hint on `bits`.
pub(super) fn hint(bits: &[usize], preferred: bool) -> TopologyHint {
    TopologyHint::new(mask(bits), preferred)
}

/// A pod with 4Gi pod-level memory: a shared and an exclusive regular init
/// container, an exclusive and a shared sidecar, an exclusive and a shared app container.
pub(super) fn pod_level_pod() -> MemoryPod {
    let mut sidecar = container("sidecar", GI);
    sidecar.restartable = true;
    let shared_sidecar = MemoryContainer {
        restartable: true,
        ..container("shared-sidecar", 0)
    };
    let mut p = pod(
        "pod1",
        vec![
            container("init-shared", 0),
            sidecar,
            container("init-excl", 2 * GI),
            shared_sidecar,
        ],
        vec![container("app", 2 * GI), container("app-shared", 0)],
    );
    p.pod_level_resources_set = true;
    p.pod_requests = BTreeMap::from([(MEMORY.to_string(), 4 * GI), ("cpu".to_string(), 4000)]);
    p
}
