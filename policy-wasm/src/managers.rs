//! The KEP-5526 resource managers through the WIT: decoding the node
//! topology, the manager state and the configuration (with field paths),
//! the `admit` / `release` orchestration, and the `manager-operation`
//! surface that runs one upstream manager function on explicit inputs.
//!
//! The decisions themselves live in the native modules: [`crate::topology`]
//! (topology manager), [`crate::cpu_manager`] (static CPU policy) and
//! [`crate::memory_manager`] (static memory policy). This module only
//! converts, orders the calls as the kubelet does, and reports.
//!
//! How `admit` runs, as the kubelet does (`pkg/kubelet/cm/topologymanager`):
//! 1. The configuration is built: `NewManager` (topology policy, scope,
//!    options over the NUMA nodes), `NewStaticPolicy` when
//!    `cpuManagerPolicy: static`, `NewPolicyStatic` when
//!    `memoryManagerPolicy: Static`. A configuration the kubelet would not
//!    start with is a field error.
//! 2. `Start` checks the state (the checkpoint) or initialises a new one; an
//!    inconsistent state is a field error under `state`.
//! 3. The topology manager's scope runs with the hint providers in kubelet
//!    order (CPU manager, then memory manager):
//!    - `none` policy: every container is allocated without a hint;
//!    - `container` scope: per container (init containers first), hints,
//!      merge, admit, then `Allocate` on every provider;
//!    - `pod` scope: one merge over the pod hints, then `AllocatePod` on
//!      every provider (KEP-5526: `PodLevelResourceManagers` and pod-level
//!      resources set), else `Allocate` per container with the pod's hint.
//! 4. A rejection (`TopologyAffinityError`, `SMTAlignmentError`,
//!    `EmptyPodSharedPoolError`, `UnexpectedAdmissionError`) returns the
//!    started state unchanged; an admission returns the new state and what
//!    each container gets.
//!
//! Nothing is kept between calls: the reusable CPUs and memory of finished
//! init containers (never checkpointed upstream) live inside one call.
//!
//! One submodule per upstream concept, after kubelet's `pkg/kubelet/cm`:
//! - `machine`: the node topology as cAdvisor gives it to
//!   `container_manager_linux.go` ([`Machine`], [`MAX_NUMA_NODES`]);
//! - `config`: the manager settings, decoded and checked as
//!   `ValidateKubeletConfiguration` and the managers' `NewManager` check
//!   them ([`validate_config`], [`places_pods`]);
//! - `container_manager`: the node's managers, built (`NewManager` of the
//!   topology, CPU and memory managers) and started (`Start`);
//! - `state`: both managers' checkpoints across the WIT;
//! - `pod`: a pod as both managers see it;
//! - `assignment`: what the state says a pod got;
//! - `admission`: [`admit`] and [`release`], the topology manager's scopes
//!   (`topologymanager/scope*.go`) over the hint providers;
//! - `operations`: [`manager_operation`], one upstream manager function on
//!   explicit inputs ([`OperationResult`]);
//! - `errors`: configuration errors, the WIT error of each upstream
//!   admission error type, and the refusal lines;
//! - `hints`: topology hints across the WIT ([`encode_hint`]);
//! - `decode`: the field-error and decoding helpers they share.
//!
//! The submodules are private: every public item is re-exported here, so
//! `managers::X` stays the one path callers (`evaluate`) use.

mod admission;
mod assignment;
mod config;
mod container_manager;
mod decode;
mod errors;
mod hints;
mod machine;
mod operations;
mod pod;
mod state;
#[cfg(test)]
mod test_support;

pub use self::admission::{PreparedManagers, admit, release};
pub use self::config::{places_pods, validate_config};
pub use self::hints::encode_hint;
pub use self::machine::{MAX_NUMA_NODES, Machine};
pub use self::operations::{OperationResult, manager_operation};

/// What decoding WIT input gives: the value, or every field error found
/// (so one call reports all of them).
type Result<T> = std::result::Result<T, Vec<crate::wit::FieldError>>;
