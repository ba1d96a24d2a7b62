//! The KEP-5526 resource managers: the node topology, the manager state
//! and the configuration as the managers read them, the `admit` /
//! `release` orchestration, and the manager operations that run one
//! upstream manager function on explicit inputs. Nothing here names the
//! WIT: `crate::boundary` decodes the contract's records into these types
//! (with field paths) and encodes the answers.
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
//! - `config`: the manager settings and their checks as
//!   `ValidateKubeletConfiguration` and the managers' `NewManager` run them;
//! - `container_manager`: the node's managers, built (`NewManager` of the
//!   topology, CPU and memory managers) and started (`Start`);
//! - `state`: both managers' checkpoints ([`ManagerState`]);
//! - `pod`: a pod as both managers see it ([`ManagedPod`]);
//! - `assignment`: what the state says a pod got ([`PodAssignment`]);
//! - `admission`: admission and release ([`Admission`],
//!   [`PreparedManagers`]), the topology manager's scopes
//!   (`topologymanager/scope*.go`) over the hint providers;
//! - `operations`: one upstream manager function on explicit inputs
//!   ([`ManagerOperation`], [`Operations`]);
//! - `errors`: field errors ([`FieldError`]), configuration errors, the
//!   error of each upstream admission error type ([`ManagerError`]), and
//!   the refusal lines;
//! - `hints`: the topology manager's decisions ([`TopologyDecision`]).
//!
//! The submodules are private: every public item is re-exported here.

mod admission;
mod assignment;
mod config;
mod container_manager;
mod errors;
mod hints;
mod machine;
mod operations;
mod pod;
mod state;

pub use self::admission::{Admission, PlacementInputs, PreparedManagers};
pub use self::assignment::{ContainerAssignment, PodAssignment};
pub use self::errors::{FieldError, FieldErrorType, ManagerError, ManagerErrorKind};
pub use self::hints::{ProviderAnswer, ResourceManager, TopologyDecision};
pub use self::machine::{MAX_NUMA_NODES, Machine, NumaNode};
pub use self::operations::{
    ManagerOperation, OperationOutcome, OperationResponse, Operations, PodAllocation,
    TakeAlgorithm, TakeCpus,
};
pub use self::pod::ManagedPod;
pub use self::state::ManagerState;

pub(crate) use self::admission::{admit_managed, release_container};
pub(crate) use self::config::{Config, non_negative_bytes};
pub(crate) use self::container_manager::node_managers;
pub(crate) use self::pod::managed_pod;

/// What the managers give for input they cannot work with: the value, or
/// every field error found (so one call reports all of them).
type Result<T> = std::result::Result<T, Vec<FieldError>>;
