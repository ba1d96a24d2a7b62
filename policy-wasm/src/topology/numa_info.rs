//! The machine's NUMA nodes and their distances: [`NumaInfo`], which the
//! merge uses to pick the narrowest or the closest mask.
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/numa_info.go`.

use std::collections::BTreeMap;

use super::bitmask::check_bit;
use super::{BitMask, PolicyOptions, TopologyError};

/// The machine's NUMA nodes and their distances (upstream `NUMAInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaInfo {
    /// NUMA node ids, in discovery order.
    pub nodes: Vec<usize>,
    /// `distances[i][j]`: the distance from node `i` to node `j` (sysfs
    /// `node<i>/distance`, indexed by node id). A missing entry counts as 0.
    pub distances: BTreeMap<usize, Vec<u64>>,
}

/// One discovered NUMA node, as `NewNUMAInfo` reads it from cAdvisor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaNode {
    /// The NUMA node id.
    pub id: usize,
    /// Its distance row, if it could be read.
    pub distances: Option<Vec<u64>>,
}

impl NumaInfo {
    /// A `NumaInfo` from its parts.
    pub fn new(nodes: Vec<usize>, distances: BTreeMap<usize, Vec<u64>>) -> NumaInfo {
        NumaInfo { nodes, distances }
    }

    /// Upstream `NewNUMAInfo`: distances are required (and kept) only with
    /// `prefer-closest-numa-nodes`.
    pub fn discover(
        topology: &[NumaNode],
        options: &PolicyOptions,
    ) -> Result<NumaInfo, TopologyError> {
        let mut info = NumaInfo::default();
        for node in topology {
            info.nodes.push(node.id);
            if options.prefer_closest_numa {
                let row = node
                    .distances
                    .clone()
                    .ok_or(TopologyError::MissingNumaDistances)?;
                info.distances.insert(node.id, row);
            }
        }
        Ok(info)
    }

    /// The mask of every NUMA node (`DefaultAffinityMask`). Ids above 63 are
    /// dropped here; [`Policy::new`](super::Policy::new) rejects them.
    pub fn default_affinity_mask(&self) -> BitMask {
        self.nodes
            .iter()
            .filter_map(|&id| check_bit(id).ok())
            .fold(BitMask::empty(), |m, b| m.or(BitMask::from_raw(b)))
    }

    /// `m1` if it is narrower than `m2`, else `m2` (`Narrowest`).
    pub fn narrowest(&self, m1: BitMask, m2: BitMask) -> BitMask {
        if m1.is_narrower_than(m2) { m1 } else { m2 }
    }

    /// Upstream `Closest`: different counts fall back to [`NumaInfo::narrowest`];
    /// equal counts pick the smaller average distance, and on a tie the
    /// numerically smaller mask.
    pub fn closest(&self, m1: BitMask, m2: BitMask) -> BitMask {
        if m1.count() != m2.count() {
            return self.narrowest(m1, m2);
        }
        let d1 = self.calculate_average_for(m1);
        let d2 = self.calculate_average_for(m2);
        if d1 == d2 {
            return if m1.is_less_than(m2) { m1 } else { m2 };
        }
        if d1 < d2 { m1 } else { m2 }
    }

    /// The mean of `distances[i][j]` over all ordered pairs of set bits,
    /// diagonal included; 0 for an empty mask (`CalculateAverageFor`).
    pub fn calculate_average_for(&self, mask: BitMask) -> f64 {
        let bits = mask.bits();
        if bits.is_empty() {
            return 0.0;
        }
        // Same summation order as upstream, so equal averages compare equal.
        let mut sum = 0.0f64;
        let mut count = 0.0f64;
        for &from in &bits {
            let row = self.distances.get(&from);
            for &to in &bits {
                let distance = row.and_then(|r| r.get(to)).copied().unwrap_or(0);
                sum += distance as f64;
                count += 1.0;
            }
        }
        sum / count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::test_support::mask;
    use crate::topology::{NumaNode, PolicyOptions};

    fn eight_nodes() -> NumaInfo {
        let rows: [[u64; 8]; 8] = [
            [10, 11, 12, 12, 30, 30, 30, 30],
            [11, 10, 12, 12, 30, 30, 30, 30],
            [12, 12, 10, 11, 30, 30, 30, 30],
            [12, 12, 11, 10, 30, 30, 30, 30],
            [30, 30, 30, 30, 10, 11, 12, 12],
            [30, 30, 30, 30, 11, 10, 12, 12],
            [30, 30, 30, 30, 12, 12, 10, 11],
            [30, 30, 30, 30, 12, 12, 13, 10],
        ];
        NumaInfo::new(
            (0..8).collect(),
            rows.iter()
                .enumerate()
                .map(|(i, r)| (i, r.to_vec()))
                .collect(),
        )
    }

    #[test]
    fn numa_info_average_and_closest() {
        let info = eight_nodes();
        assert_eq!(info.calculate_average_for(mask(&[0, 2])), 11.0);
        assert_eq!(info.calculate_average_for(mask(&[0, 4])), 20.0);
        assert_eq!(info.calculate_average_for(BitMask::empty()), 0.0);
        assert_eq!(
            info.default_affinity_mask(),
            mask(&[0, 1, 2, 3, 4, 5, 6, 7])
        );
        // Different counts: narrowest.
        assert_eq!(info.closest(mask(&[0, 4]), mask(&[5])), mask(&[5]));
        // Same count: smaller average distance.
        assert_eq!(info.closest(mask(&[0, 4]), mask(&[4, 5])), mask(&[4, 5]));
        assert_eq!(info.closest(mask(&[0, 2]), mask(&[0, 4])), mask(&[0, 2]));
        // Equal averages: the numerically smaller mask, whatever the argument order.
        assert_eq!(info.closest(mask(&[2, 3]), mask(&[0, 1])), mask(&[0, 1]));
        assert_eq!(info.closest(mask(&[0, 1]), mask(&[2, 3])), mask(&[0, 1]));
        // The asymmetric row 7 (7->6 = 13) makes {6,7} farther than {4,5}.
        assert_eq!(info.closest(mask(&[6, 7]), mask(&[4, 5])), mask(&[4, 5]));
        assert_eq!(info.narrowest(mask(&[0, 4]), mask(&[0, 2])), mask(&[0, 2]));
    }

    #[test]
    fn numa_info_discover() {
        let nodes = [
            NumaNode {
                id: 0,
                distances: Some(vec![10, 20]),
            },
            NumaNode {
                id: 1,
                distances: None,
            },
        ];
        let plain = NumaInfo::discover(&nodes, &PolicyOptions::default()).unwrap();
        assert_eq!(plain.nodes, vec![0, 1]);
        assert!(plain.distances.is_empty());
        let closest = PolicyOptions {
            prefer_closest_numa: true,
            ..PolicyOptions::default()
        };
        let err = NumaInfo::discover(&nodes, &closest).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot discover NUMA topology: error getting NUMA distances from cadvisor"
        );
    }
}
