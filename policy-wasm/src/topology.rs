//! The kubelet Topology Manager core: NUMA affinity masks, hint merging, the
//! four policies and the two admission scopes, as pure functions.
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager`, one submodule per
//! upstream file or concept:
//! - `bitmask`: `bitmask/bitmask.go` ([`BitMask`], [`iterate_bit_masks`]);
//! - `hint`: `TopologyHint` of `topology_manager.go` ([`TopologyHint`],
//!   [`ProviderHints`], [`describe_hint`]);
//! - `numa_info`: `numa_info.go` ([`NumaInfo`]);
//! - `policy_options`: `policy_options.go` ([`PolicyOptions`]);
//! - `merge`: the merging half of `policy.go` ([`filter_providers_hints`],
//!   [`merge_permutation`], [`HintMerger`]);
//! - `policy`: `policy.go`'s `Policy` and `policy_{none,best_effort,restricted,
//!   single_numa_node}.go` ([`Policy`], [`PolicyName`]);
//! - `manager`: `topology_manager.go` ([`Manager`], [`new_manager`]);
//! - `scope`: `scope.go` and `scope_{container,pod}.go` ([`Scope`],
//!   [`container_scope_admit`], [`pod_scope_admit`], including the KEP-5526
//!   pod-level branch);
//! - `errors`: the configuration and admission errors with upstream texts
//!   ([`TopologyError`], [`AdmitError`]).
//!
//! The submodules are private: every item is re-exported here, so
//! `topology::X` is the one path callers (`managers`, `cpu_manager`,
//! `memory_manager`, the host, fuzzing) use.
//!
//! Hint providers are plain data. One provider's answer is a [`ProviderHints`]:
//! `None` is Go's nil map, `Some(map)` a map whose values keep Go's distinction
//! between a nil hint list (`None`: no preference for that resource) and an
//! empty one (`Some(vec![])`: no possible affinity, so unsatisfiable). A
//! [`BTreeMap`](std::collections::BTreeMap) stands in for Go's map; the merge
//! result does not depend on the iteration order. Feature gates come in as
//! [`OptionGates`], never from globals.

mod bitmask;
mod errors;
mod hint;
mod manager;
mod merge;
mod numa_info;
mod policy;
mod policy_options;
mod scope;
#[cfg(test)]
mod test_support;

pub use bitmask::{BitMask, BitMaskError, bit_masks, iterate_bit_masks};
pub use errors::{AdmitError, ERROR_TOPOLOGY_AFFINITY, TopologyError};
pub use hint::{ProviderHints, TopologyHint, describe_hint, numa_list, provider_hints};
pub use manager::{Manager, new_manager};
pub use merge::{
    HintMerger, filter_providers_hints, max_of_min_affinity_counts, merge_permutation,
};
pub use numa_info::{NumaInfo, NumaNode};
pub use policy::{Policy, PolicyName};
pub use policy_options::{
    AtoiError, DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES, OptionGates,
    OptionMaturity, POLICY_OPTIONS, PREFER_CLOSEST_NUMA_NODES, PolicyOptions,
    check_policy_option_available, new_policy_options,
};
pub use scope::{
    PodAllocation, PodScopeAdmission, Scope, container_scope_admit, container_scope_affinity,
    pod_scope_admit, pod_scope_allocation,
};
