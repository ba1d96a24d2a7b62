//! Both managers' state ([`ManagerState`]): what a host keeps between
//! calls and the boundary decodes from and encodes to the `manager-state`
//! record.
//!
//! Mirrors the checkpoints upstream keeps: `cpumanager/state/checkpoint.go`
//! (policy name, default cpuset, per-container entries, KEP-5526's pod
//! entries) and `memorymanager/state/checkpoint.go` (policy name, machine
//! state, per-container and pod memory blocks). Decoding checks only the
//! shape; whether the state fits the configuration is `Start`'s question
//! (`container_manager`).

use crate::cpu_manager::CpuManagerState;
use crate::memory_manager::MemoryState;

/// Both managers' state (their checkpoints), passed in and returned, never held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagerState {
    /// The CPU manager checkpoint's policy name (empty in a new state).
    pub cpu_policy: String,
    /// The CPU manager's state.
    pub cpu: CpuManagerState,
    /// The memory manager checkpoint's policy name (empty in a new state).
    pub memory_policy: String,
    /// The memory manager's state.
    pub memory: MemoryState,
}
