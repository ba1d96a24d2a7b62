//! What a hint provider answers: [`TopologyHint`], one provider's
//! [`ProviderHints`], and a hint in words for rule lines.
//!
//! Mirrors upstream `TopologyHint` in
//! `pkg/kubelet/cm/topologymanager/topology_manager.go` and the
//! `map[string][]TopologyHint` the `HintProvider` interface returns.

use std::collections::BTreeMap;

use super::BitMask;

/// A hint provider's view of where a resource can be placed
/// (upstream `TopologyHint`). `numa_affinity: None` means "don't care".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TopologyHint {
    /// The NUMA nodes, or `None` (nil) for no preference.
    pub numa_affinity: Option<BitMask>,
    /// Whether the provider prefers this placement.
    pub preferred: bool,
}

impl TopologyHint {
    /// A hint with the given mask.
    pub const fn new(mask: BitMask, preferred: bool) -> TopologyHint {
        TopologyHint {
            numa_affinity: Some(mask),
            preferred,
        }
    }

    /// A hint without a mask ("don't care").
    pub const fn any(preferred: bool) -> TopologyHint {
        TopologyHint {
            numa_affinity: None,
            preferred,
        }
    }

    /// The number of NUMA nodes in the mask (0 for "don't care"); the
    /// hint merger compares widths with it.
    pub(super) fn count(&self) -> usize {
        self.numa_affinity.map_or(0, BitMask::count)
    }
}

/// One hint provider's answer (`map[string][]TopologyHint`): `None` is a nil
/// map, a `None` list is a nil hint list, `Some(vec![])` an empty one.
pub type ProviderHints = Option<BTreeMap<String, Option<Vec<TopologyHint>>>>;

/// Converts a provider's non-nil hint lists (`map[string][]TopologyHint`
/// without nil lists, as the memory manager returns) to [`ProviderHints`].
pub fn provider_hints(hints: Option<BTreeMap<String, Vec<TopologyHint>>>) -> ProviderHints {
    hints.map(|map| {
        map.into_iter()
            .map(|(name, list)| (name, Some(list)))
            .collect()
    })
}

/// A hint in words, for rule lines: `[0,1] preferred`, `any NUMA node, not
/// preferred`. NUMA ids as a list, since people read `[0,1]` faster than
/// upstream's binary mask string.
pub fn describe_hint(hint: &TopologyHint) -> String {
    let preferred = if hint.preferred {
        "preferred"
    } else {
        "not preferred"
    };
    match hint.numa_affinity {
        Some(mask) => format!("{} {preferred}", numa_list(mask)),
        None => format!("any NUMA node, {preferred}"),
    }
}

/// `[0,1]`: the NUMA node ids of a mask, ascending.
pub fn numa_list(mask: BitMask) -> String {
    let ids: Vec<String> = mask.bits().iter().map(usize::to_string).collect();
    format!("[{}]", ids.join(","))
}
