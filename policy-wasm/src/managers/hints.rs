//! The topology manager's decisions as the managers report them: which
//! hint provider ([`ResourceManager`]) answered what ([`ProviderAnswer`]),
//! and each merge with its outcome and rule ([`TopologyDecision`]).
//!
//! Mirrors the data of upstream `pkg/kubelet/cm/topologymanager/topology_manager.go`
//! (`TopologyHint`, and `HintProvider`'s `map[string][]TopologyHint`); the
//! hints themselves are [`crate::topology`]'s, which keep Go's distinction
//! between a nil and an empty hint list.

use crate::cpu_manager::hints::CpuHints;
use crate::topology::TopologyHint;

/// A topology manager hint provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceManager {
    /// The CPU manager.
    Cpu,
    /// The memory manager.
    Memory,
}

/// One hint provider's answer for a container or a pod: its hints per
/// resource (`None`: a nil map, the provider has no opinion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderAnswer {
    /// The provider.
    pub manager: ResourceManager,
    /// Its hints per resource.
    pub hints: CpuHints,
}

/// One merge of the topology manager: the providers' answers, the merged
/// hint, whether the policy admits it, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyDecision {
    /// The container the hints are for; `None` for the pod (pod scope).
    pub container: Option<String>,
    /// Each active provider's answer, in kubelet order (CPU, then memory).
    pub providers: Vec<ProviderAnswer>,
    /// The merged hint.
    pub affinity: TopologyHint,
    /// Whether the policy admits it.
    pub admit: bool,
    /// The rule behind the decision, in one line with its inputs.
    pub rule: String,
}
