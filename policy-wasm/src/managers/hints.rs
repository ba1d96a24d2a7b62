//! Topology hints across the WIT: [`encode_hint`], and the decoding and
//! encoding of one hint provider's answer.
//!
//! Mirrors the data of upstream `pkg/kubelet/cm/topologymanager/topology_manager.go`
//! (`TopologyHint`, and `HintProvider`'s `map[string][]TopologyHint`); the
//! native types are [`crate::topology`]'s, which keep Go's distinction
//! between a nil and an empty hint list.

use std::collections::BTreeMap;

use super::decode::{decode_mask, duplicate};
use crate::cpu_manager::hints::CpuHints;
use crate::topology::{self as tm, BitMask, TopologyHint};
use crate::wit::{self, FieldError};

pub(super) fn decode_hint(
    hint: &wit::TopologyHint,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> TopologyHint {
    TopologyHint {
        numa_affinity: hint
            .numa_affinity
            .as_ref()
            .map(|ids| decode_mask(ids, &format!("{field}.numaAffinity"), errors)),
        preferred: hint.preferred,
    }
}

fn mask_ids(mask: BitMask) -> Vec<u32> {
    crate::cpu_topology::mask_bits(mask.raw())
}

/// A native hint as a WIT hint.
pub fn encode_hint(hint: &TopologyHint) -> wit::TopologyHint {
    wit::TopologyHint {
        numa_affinity: hint.numa_affinity.map(mask_ids),
        preferred: hint.preferred,
    }
}

pub(super) fn decode_provider_hints(
    hints: &wit::ProviderHints,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> tm::ProviderHints {
    let list = hints.as_ref()?;
    let mut map = BTreeMap::new();
    for (i, entry) in list.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let decoded = entry.hints.as_ref().map(|hints| {
            hints
                .iter()
                .enumerate()
                .map(|(j, h)| decode_hint(h, &format!("{path}.hints[{j}]"), errors))
                .collect::<Vec<_>>()
        });
        if map.insert(entry.resource_name.clone(), decoded).is_some() {
            errors.push(duplicate(
                format!("{path}.resourceName"),
                &entry.resource_name,
            ));
        }
    }
    Some(map)
}

pub(super) fn encode_provider_hints(hints: &CpuHints) -> wit::ProviderHints {
    hints.as_ref().map(|map| {
        map.iter()
            .map(|(resource, list)| wit::ResourceHints {
                resource_name: resource.clone(),
                hints: Some(list.iter().map(encode_hint).collect()),
            })
            .collect()
    })
}
