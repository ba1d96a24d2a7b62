//! The kubelet CPU manager's static policy (`pkg/kubelet/cm/cpumanager`) as pure functions.
//!
//! The most interesting items:
//! - [`StaticPolicy`] (`policy_static.go`): reserved CPUs, `start`,
//!   `allocate`, `remove_container`, and the KEP-5526 pod-level
//!   `allocate_pod` / `allocate_container_scope`.
//! - [`CpuManagerState`] (`state/`): the shared pool, container and pod-level
//!   assignments, passed in and returned, never held.
//! - [`StaticPolicyOptions`] (`policy_options.go`): option parsing, gating and checks.
//! - [`take_by_topology_numa_packed`] / [`take_by_topology_numa_distributed`]
//!   (`cpu_assignment.go`): the topology-aware CPU pickers.
//! - [`PodSpec`] / [`ContainerSpec`]: the pod values the policy reads.
//! - [`hints`]: the static policy as a topology manager hint provider
//!   (`GetTopologyHints`, `GetPodTopologyHints`).
//!
//! The topology manager is not here: its hint for a container or pod comes
//! in as an optional NUMA bitmask (bit n = NUMA node n). Feature gates come
//! in as [`FeatureGates`](crate::features::FeatureGates) values. Errors carry
//! their data and render upstream's exact texts; [`CpuManagerError::reason`]
//! gives the admission reason for the errors that have one.
//!
//! ```
//! use policy_wasm::cpu_manager::{ContainerKind, ContainerSpec, CpuManagerState, PodSpec, StaticPolicy, StaticPolicyOptions};
//! use policy_wasm::cpu_topology::{CpuInfo, CpuTopology};
//! use policy_wasm::cpuset::CpuSet;
//! use policy_wasm::features::FeatureGates;
//!
//! // Four cores with two threads each: cpu n sits on core n % 4.
//! let topology = CpuTopology::new((0..8).map(|cpu| {
//!     (cpu, CpuInfo { core_id: cpu % 4, socket_id: 0, numa_node_id: 0, uncore_cache_id: None })
//! }))
//! .unwrap();
//! let gates = FeatureGates::default();
//! let policy = StaticPolicy::new(topology, 1, &CpuSet::new(), StaticPolicyOptions::default(), "none").unwrap();
//! let state = policy.start(&CpuManagerState::default(), &gates).unwrap();
//! let pod = PodSpec {
//!     uid: "pod-1".into(),
//!     containers: vec![ContainerSpec {
//!         name: "app".into(),
//!         kind: ContainerKind::Regular,
//!         cpu_request_millis: Some(2000),
//!         cpu_limit_millis: Some(2000),
//!         memory_request_bytes: Some(1 << 30),
//!         memory_limit_bytes: Some(1 << 30),
//!     }],
//!     ..PodSpec::default()
//! };
//! let state = policy.allocate(&state, &pod, "app", None, &gates).unwrap();
//! assert_eq!(state.cpuset("pod-1", "app").unwrap().to_string(), "1,5");
//! let state = policy.remove_container(&state, "pod-1", "app", &gates);
//! assert_eq!(state.default_cpuset.to_string(), "0-7");
//! ```

pub mod cpu_assignment;
pub mod hints;
pub mod pod;
pub mod policy_options;
pub mod policy_static;
pub mod state;

#[cfg(test)]
mod properties;
#[cfg(test)]
pub(crate) use properties::Rng;
#[cfg(test)]
mod vectors;

use std::fmt;

use crate::cpuset::CpuSet;

pub use cpu_assignment::{
    CpuAssignmentError, CpuSortingStrategy, take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
};
pub use pod::{ContainerKind, ContainerSpec, PodLevelResources, PodSpec, QosClass};
pub use policy_options::{OptionMaturity, StaticPolicyOptions};
pub use policy_static::{ResourceIsolationLevel, SmtAlignmentError, StaticPolicy};
pub use state::CpuManagerState;

/// Everything the CPU manager can refuse; `Display` gives upstream's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuManagerError {
    /// The CPU pickers failed (`not enough cpus available to satisfy request: ...` and others).
    Assignment(CpuAssignmentError),
    /// `full-pcpus-only` cannot be honoured (admission reason `SMTAlignmentError`).
    SmtAlignment(SmtAlignmentError),
    /// KEP-5526: the pod shared pool would be empty (admission reason `EmptyPodSharedPoolError`).
    EmptyPodSharedPool {
        /// The `validatePodScopeResources` message.
        message: String,
    },
    /// The reserved set does not have the requested size.
    UnableToReserve {
        /// The reserved CPUs found.
        reserved: CpuSet,
        /// The number requested (64-bit like upstream's Go `int`, so the
        /// message is the same natively and in wasm32).
        num_reserved_cpus: u64,
    },
    /// A reserved CPU the topology does not have.
    UnknownReservedCpu {
        /// The CPU id.
        cpu: u32,
    },
    /// `Start`: assignments exist but the shared pool is empty.
    DefaultCpuSetEmpty,
    /// `Start`: some reserved CPUs are missing from the shared pool.
    ReservedNotInDefault {
        /// The reserved CPUs.
        reserved: CpuSet,
        /// The shared pool.
        default: CpuSet,
    },
    /// `Start` with `strict-cpu-reservation`: reserved CPUs are in the shared pool.
    StrictReservedInDefault {
        /// The reserved CPUs found in the shared pool.
        overlap: CpuSet,
        /// The shared pool.
        default: CpuSet,
    },
    /// `Start`: a container assignment overlaps the shared pool.
    AssignmentOverlapsDefault {
        /// The pod uid.
        pod: String,
        /// The container name.
        container: String,
        /// Its CPUs.
        cpus: CpuSet,
        /// The shared pool.
        default: CpuSet,
    },
    /// `Start`: the state does not account for exactly the machine's CPUs.
    CpusMismatch {
        /// The CPUs the state must cover.
        all: CpuSet,
        /// The CPUs it covers.
        known: CpuSet,
    },
    /// An option name the policy does not know.
    UnknownOption {
        /// The option name.
        name: String,
    },
    /// An option whose maturity gate is off.
    OptionNotAvailable {
        /// The option name.
        name: String,
        /// Its maturity.
        maturity: OptionMaturity,
    },
    /// An option value `strconv.ParseBool` rejects.
    BadOptionValue {
        /// The option name.
        name: String,
        /// The value given.
        value: String,
    },
    /// Two options that cannot be combined.
    ConflictingOptions {
        /// The first option.
        first: &'static str,
        /// The second option.
        second: &'static str,
    },
    /// `align-by-socket` with the `single-numa-node` topology manager policy.
    AlignBySocketWithSingleNumaNode,
    /// `align-by-socket` on a machine with more sockets than NUMA nodes.
    AlignBySocketUnsupportedHardware,
    /// The pod breaks what API validation guarantees (duplicate names, wrong kinds).
    InvalidPod {
        /// What is wrong.
        message: String,
    },
    /// The named container is not in the pod.
    ContainerNotFound {
        /// The pod uid.
        pod: String,
        /// The container name.
        container: String,
    },
}

impl CpuManagerError {
    /// The admission reason for errors that carry one (`SMTAlignmentError`, `EmptyPodSharedPoolError`).
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            CpuManagerError::SmtAlignment(_) => Some(policy_static::ERROR_SMT_ALIGNMENT),
            CpuManagerError::EmptyPodSharedPool { .. } => {
                Some(policy_static::ERROR_EMPTY_POD_SHARED_POOL)
            }
            _ => None,
        }
    }
}

impl From<CpuAssignmentError> for CpuManagerError {
    fn from(err: CpuAssignmentError) -> Self {
        CpuManagerError::Assignment(err)
    }
}

impl From<SmtAlignmentError> for CpuManagerError {
    fn from(err: SmtAlignmentError) -> Self {
        CpuManagerError::SmtAlignment(err)
    }
}

impl fmt::Display for CpuManagerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuManagerError::Assignment(err) => err.fmt(f),
            CpuManagerError::SmtAlignment(err) => err.fmt(f),
            CpuManagerError::EmptyPodSharedPool { message } => f.write_str(message),
            CpuManagerError::UnableToReserve { reserved, num_reserved_cpus } => write!(
                f,
                "[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal {num_reserved_cpus})"
            ),
            CpuManagerError::UnknownReservedCpu { cpu } => write!(
                f,
                "[cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: {cpu}"
            ),
            CpuManagerError::DefaultCpuSetEmpty => f.write_str("default cpuset cannot be empty"),
            CpuManagerError::ReservedNotInDefault { reserved, default } => write!(
                f,
                "not all reserved cpus: {:?} are present in defaultCpuSet: {:?}",
                reserved.to_string(),
                default.to_string()
            ),
            CpuManagerError::StrictReservedInDefault { overlap, default } => write!(
                f,
                "some of strictly reserved cpus: {:?} are present in defaultCpuSet: {:?}",
                overlap.to_string(),
                default.to_string()
            ),
            CpuManagerError::AssignmentOverlapsDefault { pod, container, cpus, default } => write!(
                f,
                "pod: {pod}, container: {container} cpuset: {:?} overlaps with default cpuset {:?}",
                cpus.to_string(),
                default.to_string()
            ),
            CpuManagerError::CpusMismatch { all, known } => write!(
                f,
                "current set of available CPUs {:?} doesn't match with CPUs in state {:?}",
                all.to_string(),
                known.to_string()
            ),
            CpuManagerError::UnknownOption { name } => write!(f, "unknown CPU Manager Policy option: {name:?}"),
            CpuManagerError::OptionNotAvailable { name, maturity } => {
                let level = match maturity {
                    OptionMaturity::Alpha => "Alpha",
                    OptionMaturity::Beta => "Beta",
                    OptionMaturity::Stable => "Stable",
                };
                write!(f, "CPU Manager Policy {level}-level Options not enabled, but option {name:?} provided")
            }
            CpuManagerError::BadOptionValue { name, value } => {
                write!(f, "bad value for option {name:?}: strconv.ParseBool: parsing {value:?}: invalid syntax")
            }
            CpuManagerError::ConflictingOptions { first, second } => {
                write!(f, "static policy options {first} and {second} can not be used at the same time")
            }
            CpuManagerError::AlignBySocketWithSingleNumaNode => f.write_str(
                "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option",
            ),
            CpuManagerError::AlignBySocketUnsupportedHardware => f.write_str(
                "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA",
            ),
            CpuManagerError::InvalidPod { message } => f.write_str(message),
            CpuManagerError::ContainerNotFound { pod, container } => {
                write!(f, "container `{container}` not found in pod `{pod}`")
            }
        }
    }
}

impl std::error::Error for CpuManagerError {}
