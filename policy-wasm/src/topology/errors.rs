//! The topology manager's errors: configuration errors ([`TopologyError`])
//! and admission rejections ([`AdmitError`]), with upstream's texts.
//!
//! Upstream has no single file for them: the configuration texts are the
//! `fmt.Errorf`s of `policy_options.go`, `numa_info.go`, `policy.go` and
//! `topology_manager.go`; `TopologyAffinityError` is in `topology_manager.go`
//! and its KEP-5526 pod-level variant in `scope_pod.go`.

use std::fmt;

use super::{AtoiError, BitMaskError, DEFAULT_MAX_ALLOWABLE_NUMA_NODES};

/// The admission reason of a topology rejection (`ErrorTopologyAffinity`).
pub const ERROR_TOPOLOGY_AFFINITY: &str = "TopologyAffinityError";

/// Configuration errors of the topology manager, with upstream texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopologyError {
    /// An option name no maturity set knows.
    UnknownOption(String),
    /// An alpha option while `TopologyManagerPolicyAlphaOptions` is off.
    AlphaOptionNotEnabled(String),
    /// A beta option while `TopologyManagerPolicyBetaOptions` is off.
    BetaOptionNotEnabled(String),
    /// A boolean option whose value `strconv.ParseBool` rejects.
    BadOptionValue {
        /// The option name.
        option: String,
        /// The rejected value.
        value: String,
    },
    /// An integer option whose value `strconv.Atoi` rejects.
    NotAnInteger {
        /// The option name.
        option: String,
        /// The rejected value.
        value: String,
        /// Why it was rejected.
        reason: AtoiError,
    },
    /// `max-allowable-numa-nodes` below [`DEFAULT_MAX_ALLOWABLE_NUMA_NODES`].
    MaxAllowableTooLow {
        /// The option name.
        option: String,
    },
    /// `prefer-closest-numa-nodes` is set but a node has no distance row.
    MissingNumaDistances,
    /// More NUMA nodes than `max-allowable-numa-nodes`.
    TooManyNumaNodes {
        /// The limit in force.
        max: usize,
    },
    /// A NUMA node id a [`BitMask`](super::BitMask) cannot hold.
    InvalidNumaNode(BitMaskError),
    /// An unknown policy name.
    UnknownPolicy(String),
    /// An unknown scope name.
    UnknownScope(String),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopologyError::UnknownOption(name) => {
                write!(f, "unknown Topology Manager Policy option: {name:?}")
            }
            TopologyError::AlphaOptionNotEnabled(name) => {
                write!(
                    f,
                    "Topology Manager Policy Alpha-level Options not enabled, but option {name:?} provided"
                )
            }
            TopologyError::BetaOptionNotEnabled(name) => {
                write!(
                    f,
                    "Topology Manager Policy Beta-level Options not enabled, but option {name:?} provided"
                )
            }
            TopologyError::BadOptionValue { option, value } => {
                write!(
                    f,
                    "bad value for option {option:?}: strconv.ParseBool: parsing {value:?}: invalid syntax"
                )
            }
            TopologyError::NotAnInteger {
                option,
                value,
                reason,
            } => write!(
                f,
                "unable to convert policy option to integer {option:?}: strconv.Atoi: parsing {value:?}: {reason}"
            ),
            TopologyError::MaxAllowableTooLow { option } => write!(
                f,
                "the minimum value of {option:?} should not be less than {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
            ),
            TopologyError::MissingNumaDistances => f.write_str(
                "cannot discover NUMA topology: error getting NUMA distances from cadvisor",
            ),
            TopologyError::TooManyNumaNodes { max } => {
                write!(f, "unsupported on machines with more than {max} NUMA Nodes")
            }
            TopologyError::InvalidNumaNode(err) => {
                write!(f, "cannot discover NUMA topology: {err}")
            }
            TopologyError::UnknownPolicy(name) => write!(f, "unknown policy: \"{name}\""),
            TopologyError::UnknownScope(name) => write!(f, "unknown scope: \"{name}\""),
        }
    }
}

impl core::error::Error for TopologyError {}

/// A topology admission rejection (upstream `TopologyAffinityError` and its
/// KEP-5526 pod-level variant). Both carry the reason [`ERROR_TOPOLOGY_AFFINITY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitError {
    /// The merged hint is not admissible under the policy.
    TopologyAffinity,
    /// The same, for a pod admitted through its pod-level resources (pod scope, KEP-5526).
    PodLevelTopologyAffinity,
}

impl AdmitError {
    /// The admission reason.
    pub const fn reason(self) -> &'static str {
        ERROR_TOPOLOGY_AFFINITY
    }
}

impl fmt::Display for AdmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AdmitError::TopologyAffinity => "Resources cannot be allocated with Topology locality",
            AdmitError::PodLevelTopologyAffinity => {
                "pod with pod-level resources failed admission under pod-scope topology manager"
            }
        })
    }
}

impl core::error::Error for AdmitError {}
