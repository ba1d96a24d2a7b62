//! Hint merging: the providers' hint lists filtered, every combination
//! merged, and the best merged hint kept ([`HintMerger`]).
//!
//! Mirrors the merging half of upstream
//! `pkg/kubelet/cm/topologymanager/policy.go` (`filterProvidersHints`,
//! `mergePermutation`, `maxOfMinAffinityCounts`, `HintMerger`); the policies
//! that call it are in `policy`.

use super::{BitMask, NumaInfo, PolicyName, PolicyOptions, ProviderHints, TopologyHint};

/// Upstream `filterProvidersHints`: one hint list per (provider, resource).
/// A provider with a nil or empty map, or a resource with a nil list, becomes
/// `[{nil, preferred}]`; a resource with an empty list `[{nil, not preferred}]`.
pub fn filter_providers_hints(providers_hints: &[ProviderHints]) -> Vec<Vec<TopologyHint>> {
    let mut all = Vec::new();
    for provider in providers_hints {
        let Some(resources) = provider.as_ref().filter(|map| !map.is_empty()) else {
            all.push(vec![TopologyHint::any(true)]);
            continue;
        };
        for hints in resources.values() {
            match hints {
                None => all.push(vec![TopologyHint::any(true)]),
                Some(list) if list.is_empty() => all.push(vec![TopologyHint::any(false)]),
                Some(list) => all.push(list.clone()),
            }
        }
    }
    all
}

/// Upstream `mergePermutation`: AND of `default_affinity` with every non-nil
/// mask; preferred only if every hint is preferred and every non-nil mask is
/// identical (so {0} with {0,1} is not preferred). The result always has a mask.
pub fn merge_permutation(default_affinity: BitMask, permutation: &[&TopologyHint]) -> TopologyHint {
    let mut preferred = true;
    let mut merged = default_affinity;
    let mut first: Option<BitMask> = None;
    for hint in permutation {
        if let Some(mask) = hint.numa_affinity {
            let first_mask = *first.get_or_insert(mask);
            if mask != first_mask {
                preferred = false;
            }
            merged = merged.and(mask);
        }
        if !hint.preferred {
            preferred = false;
        }
    }
    TopologyHint::new(merged, preferred)
}

/// Upstream `narrowestHint`: the narrowest non-nil mask in a list (first wins ties).
fn narrowest_mask(hints: &[TopologyHint]) -> Option<BitMask> {
    let mut narrowest: Option<BitMask> = None;
    for mask in hints.iter().filter_map(|h| h.numa_affinity) {
        match narrowest {
            Some(best) if !mask.is_narrower_than(best) => {}
            _ => narrowest = Some(mask),
        }
    }
    narrowest
}

/// Upstream `maxOfMinAffinityCounts`: over every resource list, the count of
/// its narrowest mask; the maximum of those (0 without masks).
pub fn max_of_min_affinity_counts(filtered_hints: &[Vec<TopologyHint>]) -> usize {
    filtered_hints
        .iter()
        .filter_map(|hints| narrowest_mask(hints))
        .map(BitMask::count)
        .max()
        .unwrap_or(0)
}

/// Upstream `HintMerger`: walks the cartesian product of the filtered hint
/// lists and keeps the best merged hint.
#[derive(Clone, Debug)]
pub struct HintMerger<'a> {
    numa_info: &'a NumaInfo,
    hints: &'a [Vec<TopologyHint>],
    /// The target width for non-preferred hints ([`max_of_min_affinity_counts`]).
    pub best_non_preferred_affinity_count: usize,
    /// Whether equal preference is decided by [`NumaInfo::closest`] rather
    /// than [`NumaInfo::narrowest`]: `prefer-closest-numa-nodes`, except
    /// under `single-numa-node`, which ignores it.
    pub prefer_closest: bool,
}

impl<'a> HintMerger<'a> {
    /// Upstream `NewHintMerger`.
    pub fn new(
        numa_info: &'a NumaInfo,
        hints: &'a [Vec<TopologyHint>],
        policy: PolicyName,
        options: &PolicyOptions,
    ) -> HintMerger<'a> {
        HintMerger {
            numa_info,
            hints,
            best_non_preferred_affinity_count: max_of_min_affinity_counts(hints),
            prefer_closest: policy != PolicyName::SingleNumaNode && options.prefer_closest_numa,
        }
    }

    /// Upstream `CompareNUMAAffinityMasks`: `true` keeps `current`.
    fn keep_current_mask(&self, current: &TopologyHint, candidate: &TopologyHint) -> bool {
        let (Some(cur), Some(cand)) = (current.numa_affinity, candidate.numa_affinity) else {
            // Merged hints always carry a mask; keep what we have otherwise.
            return true;
        };
        if cand == cur {
            return true;
        }
        let best = if self.prefer_closest {
            self.numa_info.closest(cur, cand)
        } else {
            self.numa_info.narrowest(cur, cand)
        };
        best == cur
    }

    /// Upstream `compare`: `true` means the candidate replaces the current best.
    fn candidate_wins(&self, current: Option<&TopologyHint>, candidate: &TopologyHint) -> bool {
        if candidate.count() == 0 {
            return false;
        }
        let Some(current) = current else { return true };
        match (current.preferred, candidate.preferred) {
            (false, true) => return true,
            (true, false) => return false,
            (true, true) => return !self.keep_current_mask(current, candidate),
            (false, false) => {}
        }
        // Both non-preferred: move towards the best non-preferred width,
        // without going above it (upstream cases 1, 2, 3a-3c).
        let target = self.best_non_preferred_affinity_count;
        let (cur, cand) = (current.count(), candidate.count());
        if cur > target {
            return !self.keep_current_mask(current, candidate);
        }
        if cur == target {
            return cand == target && !self.keep_current_mask(current, candidate);
        }
        if cand > target {
            return false;
        }
        if cand == target {
            return true;
        }
        if cand != cur {
            return cand > cur;
        }
        !self.keep_current_mask(current, candidate)
    }

    /// Upstream `Merge`: the best merged hint, or `{default mask, not preferred}`
    /// when no permutation yields a non-empty mask. With no lists at all the
    /// single empty permutation gives `{default mask, preferred}`.
    ///
    /// Upstream walks every permutation of the lists, up to 255^4 on 8 NUMA
    /// nodes with four resources (a fuzz input ran for minutes). `compare`
    /// picks the maximum of a total order on (preferred, mask), so only the
    /// set of distinct merged hints matters, not how many permutations give
    /// each or in which order: [`distinct_merges`] builds that set list by
    /// list. `merge_by_permutations` (tests) is the upstream walk it is
    /// checked against.
    pub fn merge(&self) -> TopologyHint {
        let default_affinity = self.numa_info.default_affinity_mask();
        let mut best: Option<TopologyHint> = None;
        for candidate in distinct_merges(default_affinity, self.hints) {
            if self.candidate_wins(best.as_ref(), &candidate) {
                best = Some(candidate);
            }
        }
        best.unwrap_or(TopologyHint::new(default_affinity, false))
    }

    /// The upstream walk over every permutation (the oracle for [`Self::merge`]).
    #[cfg(test)]
    fn merge_by_permutations(&self) -> TopologyHint {
        let default_affinity = self.numa_info.default_affinity_mask();
        let mut best: Option<TopologyHint> = None;
        for_each_permutation(self.hints, |permutation| {
            let candidate = merge_permutation(default_affinity, permutation);
            if self.candidate_wins(best.as_ref(), &candidate) {
                best = Some(candidate);
            }
        });
        best.unwrap_or(TopologyHint::new(default_affinity, false))
    }
}

/// Every distinct [`merge_permutation`] result over the cartesian product of
/// `lists`, without enumerating it. A partial permutation is summarised by
/// (AND of its masks, its first mask while all masks so far are equal and
/// preferred, whether that still holds): two prefixes with the same summary
/// merge every suffix to the same hint. At most 64-bit masks × (first mask
/// or none) × 2 summaries per list, in practice a few hundred.
fn distinct_merges(default_affinity: BitMask, lists: &[Vec<TopologyHint>]) -> Vec<TopologyHint> {
    // (and, first mask, preferred so far); `first` is `None` until a mask
    // is seen and is dropped once `preferred` is false.
    type Summary = (u64, Option<u64>, bool);
    let mut summaries: Vec<Summary> = vec![(default_affinity.raw(), None, true)];
    for list in lists {
        let mut next: Vec<Summary> = Vec::with_capacity(summaries.len() * list.len());
        for &(and, first, preferred) in &summaries {
            for hint in list {
                let mut summary = (and, first, preferred && hint.preferred);
                if let Some(mask) = hint.numa_affinity {
                    summary.0 &= mask.raw();
                    match first {
                        None => summary.1 = Some(mask.raw()),
                        Some(f) if f != mask.raw() => summary.2 = false,
                        Some(_) => {}
                    }
                }
                if !summary.2 {
                    summary.1 = None;
                }
                next.push(summary);
            }
        }
        next.sort_unstable();
        next.dedup();
        summaries = next;
    }
    let mut merged: Vec<(u64, bool)> = summaries
        .into_iter()
        .map(|(and, _, preferred)| (and, preferred))
        .collect();
    merged.sort_unstable();
    merged.dedup();
    merged
        .into_iter()
        .map(|(and, preferred)| TopologyHint::new(BitMask::from_raw(and), preferred))
        .collect()
}

/// Calls `callback` with every element of the cartesian product of `lists`,
/// the last list varying fastest (upstream `iterateAllProviderTopologyHints`).
#[cfg(test)]
fn for_each_permutation(lists: &[Vec<TopologyHint>], mut callback: impl FnMut(&[&TopologyHint])) {
    if lists.iter().any(Vec::is_empty) {
        return;
    }
    let mut indices = vec![0usize; lists.len()];
    let mut permutation: Vec<&TopologyHint> = lists.iter().map(|list| &list[0]).collect();
    loop {
        callback(&permutation);
        // Odometer step from the last list; stop after the first list wraps.
        let mut position = lists.len();
        loop {
            if position == 0 {
                return;
            }
            position -= 1;
            indices[position] += 1;
            if indices[position] < lists[position].len() {
                permutation[position] = &lists[position][indices[position]];
                break;
            }
            indices[position] = 0;
            permutation[position] = &lists[position][0];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// `merge` over distinct merged hints against upstream's walk over every
    /// permutation: random hint lists (nil masks, duplicates, empty lists),
    /// random distances, every merging policy, with and without
    /// `prefer-closest-numa-nodes`.
    #[test]
    fn merge_of_distinct_hints_matches_the_permutation_walk() {
        let mut rng = crate::cpu_manager::Rng(0x005e_ed0f_7090_109e);
        let rounds: usize = std::env::var("MERGE_EQUIVALENCE_ROUNDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000);
        for round in 0..rounds {
            let nodes = 1 + rng.below(6) as usize;
            let mut distances = BTreeMap::new();
            for i in 0..nodes {
                let row = (0..nodes)
                    .map(|j| if i == j { 10 } else { 11 + rng.below(4) * 5 })
                    .collect();
                distances.insert(i, row);
            }
            let info = NumaInfo::new((0..nodes).collect(), distances);
            let full = (1u64 << nodes) - 1;
            let lists: Vec<Vec<TopologyHint>> = (0..rng.below(5))
                .map(|_| {
                    (0..rng.below(7))
                        .map(|_| TopologyHint {
                            numa_affinity: (!rng.chance(15))
                                .then(|| BitMask::from_raw(rng.below(full + 1) & full)),
                            preferred: rng.chance(50),
                        })
                        .collect()
                })
                .collect();
            let policy = [
                PolicyName::BestEffort,
                PolicyName::Restricted,
                PolicyName::SingleNumaNode,
            ][rng.below(3) as usize];
            let options = PolicyOptions {
                prefer_closest_numa: rng.chance(50),
                ..PolicyOptions::default()
            };
            let merger = HintMerger::new(&info, &lists, policy, &options);
            assert_eq!(
                merger.merge(),
                merger.merge_by_permutations(),
                "round {round}: {lists:?} {policy:?} {options:?}"
            );
        }
    }
}
