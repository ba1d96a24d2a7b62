//! Builders shared by the topology manager's unit tests.

use std::collections::BTreeMap;

use super::{BitMask, NumaInfo, Policy, PolicyName, PolicyOptions, ProviderHints, TopologyHint};

/// The mask of `bits`, which must be valid NUMA ids.
pub(super) fn mask(bits: &[usize]) -> BitMask {
    BitMask::new(bits).expect("valid bits")
}

/// A `name` policy on NUMA nodes 0-3, without distances, default options.
pub(super) fn four_node_policy(name: PolicyName) -> Policy {
    Policy::new(
        name,
        NumaInfo::new(vec![0, 1, 2, 3], BTreeMap::new()),
        PolicyOptions::default(),
    )
    .unwrap()
}

/// One provider answering for one resource.
pub(super) fn one(resource: &str, hints: Option<Vec<TopologyHint>>) -> ProviderHints {
    Some(BTreeMap::from([(resource.to_string(), hints)]))
}

/// Policy options (or any settings map) from string pairs.
pub(super) fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
