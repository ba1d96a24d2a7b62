//! The static policy's errors with upstream's texts and admission reasons:
//! [`MemoryError`] and the KEP-5526 partition check's [`PodScopeError`].
//!
//! Mirrors the errors of upstream
//! `pkg/kubelet/cm/memorymanager/policy_static.go` (`ErrorReasonEmptyPodSharedPool`
//! and the `fmt.Errorf` texts of `Allocate`, `AllocatePod` and
//! `validatePodScopeResources`).

use std::fmt;

use crate::topology::BitMaskError;

/// The admission reason of a rejected pod-level partition (`ErrorReasonEmptyPodSharedPool`).
pub const ERROR_EMPTY_POD_SHARED_POOL: &str = "EmptyPodSharedPoolError";
/// The admission reason of any other allocation failure (`ErrorReasonUnexpected`).
pub const ERROR_UNEXPECTED_ADMISSION: &str = "UnexpectedAdmissionError";

/// Why a pod-level partition is rejected (`validatePodScopeResources`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodScopeError {
    /// A regular init container asks for more than the pod budget minus the sidecars before it.
    InitContainerTooLarge {
        /// Its request in bytes.
        requested: u64,
        /// The resource.
        resource: String,
        /// What is left for it in bytes.
        available: u64,
    },
    /// A shared regular init container would see an empty pool.
    NoMemoryForSharedInitContainers {
        /// The resource.
        resource: String,
    },
    /// Shared long-running containers would see an empty pool.
    NoMemoryForSharedContainers {
        /// The resource.
        resource: String,
    },
}

impl fmt::Display for PodScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodScopeError::InitContainerTooLarge {
                requested,
                resource,
                available,
            } => write!(
                f,
                "pod rejected, largest exclusive init container requests {requested} of {resource}, but only {available} available"
            ),
            PodScopeError::NoMemoryForSharedInitContainers { resource } => {
                write!(
                    f,
                    "pod rejected, pod has shared init containers but no {resource} available for them"
                )
            }
            PodScopeError::NoMemoryForSharedContainers { resource } => write!(
                f,
                "pod rejected, sum of exclusive container {resource} requests equals pod budget, leaving no memory for shared containers"
            ),
        }
    }
}

impl core::error::Error for PodScopeError {}

/// Static policy errors, with upstream texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryError {
    /// `NewPolicyStatic` without any reserved regular memory.
    NoSystemReservedMemory,
    /// No NUMA mask can hold the request.
    DefaultAffinityNotFound,
    /// The topology manager's hint was preferred, the default one is not.
    DefaultPreferredHintNotFound,
    /// No mask containing the hint can hold the request.
    ExtendHintNotFound,
    /// The topology manager's hint was preferred, the extended one is not.
    ExtendedPreferredHintNotFound,
    /// The mask mixes single-node and multi-NUMA allocations, or two groups.
    AffinityViolatesNumaAllocations,
    /// KEP-5526: the pod-level partition leaves a shared pool empty.
    EmptyPodSharedPool(PodScopeError),
    /// A NUMA node the machine state does not have (upstream would panic).
    UnknownNumaNode(usize),
    /// A NUMA node id a mask cannot hold.
    InvalidNumaAffinity(BitMaskError),
    /// A hugepage pool whose size does not fit 64 bits.
    SizeOverflow {
        /// The NUMA node.
        node: usize,
    },
    /// The container is not part of the pod.
    UnknownContainer {
        /// The pod UID.
        pod: String,
        /// The container name.
        container: String,
    },
    /// A pod without containers cannot get pod-level memory.
    PodWithoutContainers {
        /// The pod UID.
        pod: String,
    },
}

impl MemoryError {
    /// The admission reason the kubelet reports.
    pub fn reason(&self) -> &'static str {
        match self {
            MemoryError::EmptyPodSharedPool(_) => ERROR_EMPTY_POD_SHARED_POOL,
            _ => ERROR_UNEXPECTED_ADMISSION,
        }
    }
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::NoSystemReservedMemory => {
                f.write_str("[memorymanager] you should specify the system reserved memory")
            }
            MemoryError::DefaultAffinityNotFound => f.write_str(
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available",
            ),
            MemoryError::DefaultPreferredHintNotFound => {
                f.write_str("[memorymanager] failed to find the default preferred hint")
            }
            MemoryError::ExtendHintNotFound => {
                f.write_str("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
            }
            MemoryError::ExtendedPreferredHintNotFound => {
                f.write_str("[memorymanager] failed to find the extended preferred hint")
            }
            MemoryError::AffinityViolatesNumaAllocations => {
                f.write_str("[memorymanager] preferred hint violates NUMA node allocation")
            }
            MemoryError::EmptyPodSharedPool(err) => write!(f, "{err}"),
            MemoryError::UnknownNumaNode(node) => {
                write!(f, "[memorymanager] NUMA node {node} is not in the machine state")
            }
            MemoryError::InvalidNumaAffinity(err) => write!(f, "[memorymanager] {err}"),
            MemoryError::SizeOverflow { node } => {
                write!(f, "[memorymanager] hugepages size of NUMA node {node} overflows")
            }
            MemoryError::UnknownContainer { pod, container } => {
                write!(f, "[memorymanager] container {container:?} is not part of pod {pod:?}")
            }
            MemoryError::PodWithoutContainers { pod } => {
                write!(f, "[memorymanager] pod {pod:?} has no containers")
            }
        }
    }
}

impl core::error::Error for MemoryError {}
