//! The static Memory Manager core: per-NUMA memory accounting, topology hints
//! and exclusive memory allocation, as pure state-in, state-out functions.
//!
//! Mirrors upstream `pkg/kubelet/cm/memorymanager` in its KEP-5526 form
//! (`AllocatePod`, `validatePodScopeResources`, the pod entry of the state),
//! one submodule per concept:
//! - `state`: `state/state.go` ([`MemoryTable`], [`NumaNodeState`],
//!   [`Block`], [`MemoryState`]);
//! - `machine_state`: the machine as cAdvisor and `--reserved-memory` give
//!   it, and `policy_static.go`'s `getDefaultMachineState`
//!   ([`default_machine_state`]);
//! - `pod`: the pod and what it requests (`getPodRequestedResources`,
//!   [`validate_pod_scope_resources`]);
//! - `hints`: `policy_static.go`'s `GetTopologyHints` / `GetPodTopologyHints`
//!   ([`calculate_hints`]);
//! - `policy_static`: `policy_static.go`'s `Allocate`, `AllocatePod` and
//!   `RemoveContainer` ([`allocate`], [`allocate_pod`], [`remove_container`]);
//! - `start`: its `Start` / `validateState` ([`start`]: a loaded state
//!   against the blocks it holds);
//! - `errors`: [`MemoryError`], [`PodScopeError`] and the admission reasons.
//!
//! The submodules are private: every item is re-exported here, so
//! `memory_manager::X` is the one path callers (`managers`, the host,
//! fuzzing) use.
//!
//! Vocabulary, as upstream:
//! - **machine state**: per NUMA node and per resource (`memory`,
//!   `hugepages-<size>`) a [`MemoryTable`] with `total`, `system_reserved`,
//!   `allocatable` (= total - system reserved, minus all hugepages for
//!   `memory`), `reserved` (held by containers) and `free`.
//! - **cells**: the NUMA group a node belongs to. A multi-NUMA allocation ties
//!   its nodes into one group; a node with single-node allocations never joins
//!   a group, and a grouped node only serves masks equal to its group. The
//!   group dissolves when the node's `number_of_assignments` (one per block
//!   per node) drops to zero.
//! - **blocks**: what a container (or, with pod-level resources, the pod)
//!   holds: `{numa_affinity, resource, size}`.
//! - **init reuse**: memory of finished regular init containers is reused by
//!   later containers of the same pod; sidecars' memory is never reused.
//!
//! Everything a pod contributes is plain data ([`MemoryPod`]): the caller
//! computes the pod QoS, container eligibility (`IsContainerEquivalentQOSGuaranteed`)
//! and request sizes in bytes. Hints use [`crate::topology`] types; `None`
//! where upstream returns a nil map. Topology hints from the topology manager
//! come in as an argument instead of the affinity store.

mod errors;
mod hints;
mod machine_state;
mod pod;
mod policy_static;
mod start;
mod state;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod upstream_tests;

pub use errors::{
    ERROR_EMPTY_POD_SHARED_POOL, ERROR_UNEXPECTED_ADMISSION, MemoryError, PodScopeError,
};
pub use hints::{calculate_hints, get_pod_topology_hints, get_topology_hints};
pub use machine_state::{
    HugePagesInfo, NumaNodeMemory, SystemReservedMemory, check_system_reserved,
    default_machine_state, hugepage_resource_name,
};
pub use pod::{
    MemoryContainer, MemoryPod, PodLevelGates, get_container_requested_resources,
    get_pod_requested_resources, validate_pod_scope_resources,
};
pub use policy_static::{allocate, allocate_pod, remove_container};
pub use start::{StartError, expected_machine_state, start};
pub use state::{
    Block, MEMORY, MemoryState, MemoryTable, NumaNodeMap, NumaNodeState, ReusableMemory,
    is_memory_resource,
};
