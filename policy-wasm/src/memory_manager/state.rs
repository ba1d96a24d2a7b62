//! The static policy's state: per NUMA node accounting ([`NumaNodeMap`]),
//! the blocks containers and pods hold ([`Block`]) and the whole
//! [`MemoryState`] the exported functions take and return.
//!
//! Mirrors upstream `pkg/kubelet/cm/memorymanager/state/state.go`
//! (`MemoryTable`, `NUMANodeState`, `NUMANodeMap`, `Block`, `GetMemoryBlocks`,
//! `Delete`), plus the policy's `initContainersReusableMemory`.

use std::collections::BTreeMap;

use crate::topology::BitMask;

/// The regular memory resource name.
pub const MEMORY: &str = "memory";

/// Whether the memory manager accounts `name`: `memory` or `hugepages-<size>`.
pub fn is_memory_resource(name: &str) -> bool {
    name == MEMORY || name.starts_with("hugepages-")
}

/// One resource on one NUMA node, in bytes (upstream `MemoryTable`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryTable {
    /// Physical size (`total`).
    pub total: u64,
    /// Reserved for the system (`systemReserved`).
    pub system_reserved: u64,
    /// What containers may get (`allocatable`).
    pub allocatable: u64,
    /// Held by containers now (`reserved`).
    pub reserved: u64,
    /// Still free (`free`).
    pub free: u64,
}

/// One NUMA node's state (upstream `NUMANodeState`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaNodeState {
    /// Blocks placed on this node (`numberOfAssignments`); a Go int.
    pub number_of_assignments: i64,
    /// Per resource name.
    pub memory_map: BTreeMap<String, MemoryTable>,
    /// The node's group: `[id]` alone, or the nodes of its multi-NUMA group.
    pub cells: Vec<usize>,
}

/// NUMA node id to its state (upstream `NUMANodeMap`).
pub type NumaNodeMap = BTreeMap<usize, NumaNodeState>;

/// Memory held on a set of NUMA nodes (upstream `state.Block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The NUMA nodes, ascending.
    pub numa_affinity: Vec<usize>,
    /// The resource name (`type`).
    pub resource: String,
    /// Bytes.
    pub size: u64,
}

/// Reusable init-container memory of one pod: mask, resource, bytes.
pub type ReusableMemory = BTreeMap<BitMask, BTreeMap<String, u64>>;

/// Everything the static policy reads and writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryState {
    /// Per NUMA node accounting.
    pub machine_state: NumaNodeMap,
    /// Pod UID, container name, blocks (`entries`).
    pub assignments: BTreeMap<String, BTreeMap<String, Vec<Block>>>,
    /// Pod UID to the pod-level blocks (KEP-5526 `podEntries`).
    pub pod_assignments: BTreeMap<String, Vec<Block>>,
    /// Upstream `initContainersReusableMemory`: policy memory, not
    /// checkpointed; only the pod being admitted keeps an entry.
    pub init_reusable: BTreeMap<String, ReusableMemory>,
}

/// The `resource` table of NUMA node `node`, if the machine state has it.
pub(super) fn memory_table<'a>(
    machine: &'a NumaNodeMap,
    node: usize,
    resource: &str,
) -> Option<&'a MemoryTable> {
    machine
        .get(&node)
        .and_then(|state| state.memory_map.get(resource))
}

/// Whether a node's group (`cells`, in any order) is exactly `bits` (ascending).
pub(super) fn groups_equal(group: &[usize], bits: &[usize]) -> bool {
    let mut sorted = group.to_vec();
    sorted.sort_unstable();
    sorted == bits
}

/// The blocks a container holds (state `GetMemoryBlocks`).
pub(super) fn container_blocks<'a>(
    state: &'a MemoryState,
    pod_uid: &str,
    container: &str,
) -> Option<&'a Vec<Block>> {
    state
        .assignments
        .get(pod_uid)
        .and_then(|containers| containers.get(container))
}

/// State `Delete`: the container entry, and the pod entry once it is empty.
pub(super) fn delete_container(state: &mut MemoryState, pod_uid: &str, container_name: &str) {
    if let Some(containers) = state.assignments.get_mut(pod_uid) {
        containers.remove(container_name);
        if containers.is_empty() {
            state.assignments.remove(pod_uid);
        }
    }
}
