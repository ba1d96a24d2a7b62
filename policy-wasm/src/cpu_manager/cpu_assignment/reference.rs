//! The CPU assignment as it was before the free CPUs were counted per unit
//! (scans and sorts of `CpuDetails` per step): a test-only reference that
//! the equivalence tests compare the optimised code with.

#![allow(dead_code)]

use std::cell::Cell;

use super::{COMBINATION_BUDGET, CpuAssignmentError, CpuSortingStrategy};
use crate::cpu_topology::{CpuDetails, CpuInfo, CpuTopology, UnitCounts};
use crate::cpuset::CpuSet;

/// Ids sorted by ascending free-CPU count, ties by ascending id (upstream `cpuAccumulator.sort`).
fn sort_by_free(ids: Vec<u32>, free: impl Fn(u32) -> usize) -> Vec<u32> {
    let mut keyed: Vec<(usize, u32)> = ids.into_iter().map(|id| (free(id), id)).collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, id)| id).collect()
}

/// Append `ids` to `out`, skipping ids already present (a unit spanning two parents is listed once).
fn extend_unique(out: &mut Vec<u32>, ids: Vec<u32>) {
    for id in ids {
        if !out.contains(&id) {
            out.push(id);
        }
    }
}

/// Upstream `cpuAccumulator`: the free CPUs, the CPUs taken so far and how many are still needed.
#[derive(Clone, Debug)]
pub(crate) struct CpuAccumulator<'t> {
    topo: &'t CpuTopology,
    details: CpuDetails,
    needed: i64,
    result: CpuSet,
    numa_first: bool,
    strategy: CpuSortingStrategy,
}

impl<'t> CpuAccumulator<'t> {
    pub(crate) fn new(
        topo: &'t CpuTopology,
        available: &CpuSet,
        num_cpus: usize,
        strategy: CpuSortingStrategy,
    ) -> Self {
        CpuAccumulator {
            topo,
            details: topo.details().keep_only(available),
            needed: i64::try_from(num_cpus).unwrap_or(i64::MAX),
            result: CpuSet::new(),
            numa_first: topo.num_sockets() >= topo.num_numa_nodes(),
            strategy,
        }
    }

    #[cfg(test)]
    pub(crate) fn needed(&self) -> i64 {
        self.needed
    }

    pub(crate) fn take(&mut self, cpus: &CpuSet) {
        let added = cpus.difference(&self.result).len();
        self.result = self.result.union(cpus);
        // `details` never holds a CPU of `result`, so dropping `cpus` is the
        // same as upstream's `KeepOnly(details.CPUs() - result)`.
        self.details.remove(cpus);
        self.needed -= i64::try_from(added).unwrap_or(i64::MAX);
    }

    fn needs_at_least(&self, n: usize) -> bool {
        self.needed >= i64::try_from(n).unwrap_or(i64::MAX)
    }

    pub(crate) fn is_satisfied(&self) -> bool {
        self.needed < 1
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.needed > i64::try_from(self.details.len()).unwrap_or(i64::MAX)
    }

    fn free_in_numa(&self, numa: u32) -> usize {
        self.details.cpus_in_numa_nodes(&[numa]).len()
    }

    // The sorts below count the free CPUs of every unit in one pass
    // (`count_by`) instead of scanning all CPUs once per unit; the order is
    // upstream's: fewest free first, ties by id, parents in their own order.

    pub(crate) fn sort_available_numa_nodes(&self) -> Vec<u32> {
        let free = self.details.count_by(|info| info.numa_node_id);
        let free_in = |numa: u32| free.get(numa).unwrap_or(0);
        if self.numa_first {
            return sort_by_free(free.ids().collect(), free_in);
        }
        let mut out = Vec::new();
        for socket in self.sort_available_sockets() {
            extend_unique(
                &mut out,
                sort_by_free(self.details.numa_nodes_in_sockets(&[socket]), free_in),
            );
        }
        out
    }

    pub(crate) fn sort_available_sockets(&self) -> Vec<u32> {
        let free = self.details.count_by(|info| info.socket_id);
        let free_in = |socket: u32| free.get(socket).unwrap_or(0);
        if !self.numa_first {
            return sort_by_free(free.ids().collect(), free_in);
        }
        let mut out = Vec::new();
        for numa in self.sort_available_numa_nodes() {
            extend_unique(
                &mut out,
                sort_by_free(self.details.sockets_in_numa_nodes(&[numa]), free_in),
            );
        }
        out
    }

    pub(crate) fn sort_available_cores(&self) -> Vec<u32> {
        self.sort_available_cores_with(&self.details.count_by(|info| info.core_id))
    }

    /// [`Self::sort_available_cores`] with the free CPUs per core already counted.
    fn sort_available_cores_with(&self, free: &UnitCounts) -> Vec<u32> {
        let free_in_core = |core: u32| free.get(core).unwrap_or(0);
        let mut out = Vec::new();
        if self.numa_first {
            for socket in self.sort_available_sockets() {
                extend_unique(
                    &mut out,
                    sort_by_free(self.details.cores_in_sockets(&[socket]), free_in_core),
                );
            }
        } else {
            for numa in self.sort_available_numa_nodes() {
                extend_unique(
                    &mut out,
                    sort_by_free(self.details.cores_in_numa_nodes(&[numa]), free_in_core),
                );
            }
        }
        out
    }

    fn sort_available_uncore_caches(&self) -> Vec<u32> {
        self.sort_available_uncore_caches_with(&self.details.count_by(CpuInfo::uncore_cache))
    }

    /// [`Self::sort_available_uncore_caches`] with the free CPUs per cache already counted.
    fn sort_available_uncore_caches_with(&self, free: &UnitCounts) -> Vec<u32> {
        let free_in_uncore = |uncore: u32| free.get(uncore).unwrap_or(0);
        let mut out = Vec::new();
        for numa in self.sort_available_numa_nodes() {
            extend_unique(
                &mut out,
                sort_by_free(
                    self.details.uncore_caches_in_numa_nodes(&[numa]),
                    free_in_uncore,
                ),
            );
        }
        out
    }

    /// The free CPUs in taking order (`freeCPUs`): core by core (packed) or socket by socket (spread).
    pub(crate) fn free_cpus(&self) -> Vec<u32> {
        let mut out = Vec::new();
        match self.strategy {
            CpuSortingStrategy::Packed => {
                let by_core = self.details.group_by(|info| info.core_id);
                for core in self.sort_available_cores() {
                    out.extend(by_core.get(&core).into_iter().flatten());
                }
            }
            CpuSortingStrategy::Spread => {
                let by_socket = self.details.group_by(|info| info.socket_id);
                for socket in self.sort_available_sockets() {
                    out.extend(by_socket.get(&socket).into_iter().flatten());
                }
            }
        }
        out
    }

    pub(crate) fn free_numa_nodes(&self) -> Vec<u32> {
        let free = self.details.count_by(|info| info.numa_node_id);
        self.sort_available_numa_nodes()
            .into_iter()
            .filter(|&numa| free.get(numa) == Some(self.topo.numa_node_cpus(numa).len()))
            .collect()
    }

    // A socket or core is free when every CPU the machine has in it is
    // available. Upstream compares with the averages `CPUsPerSocket` /
    // `CPUsPerCore` (integer division), which on an uneven machine (an
    // offline SMT sibling) calls a partly taken core free, and
    // `takeFullCores` / `takeFullSockets` then hand out all its CPUs:
    // reserved ones and other containers' exclusive ones (kubernetes#140495,
    // fixed upstream by #140498). On even machines both agree.
    pub(crate) fn free_sockets(&self) -> Vec<u32> {
        let free = self.details.count_by(|info| info.socket_id);
        self.sort_available_sockets()
            .into_iter()
            .filter(|&socket| free.get(socket) == Some(self.topo.socket_cpus(socket).len()))
            .collect()
    }

    pub(crate) fn free_cores(&self) -> Vec<u32> {
        let free = self.details.count_by(|info| info.core_id);
        self.sort_available_cores_with(&free)
            .into_iter()
            .filter(|&core| free.get(core) == Some(self.topo.core_cpus(core).len()))
            .collect()
    }

    fn free_uncore_caches(&self) -> Vec<u32> {
        let free = self.details.count_by(CpuInfo::uncore_cache);
        self.sort_available_uncore_caches_with(&free)
            .into_iter()
            .filter(|&uncore| free.get(uncore) == Some(self.topo.uncore_cache_cpus(uncore).len()))
            .collect()
    }

    fn take_full_numa_nodes(&mut self) {
        let topo = self.topo;
        for numa in self.free_numa_nodes() {
            let cpus = topo.numa_node_cpus(numa);
            if self.needs_at_least(cpus.len()) {
                self.take(&CpuSet::from_vec(cpus.to_vec()));
            }
        }
    }

    fn take_full_sockets(&mut self) {
        let topo = self.topo;
        for socket in self.free_sockets() {
            let cpus = topo.socket_cpus(socket);
            if self.needs_at_least(cpus.len()) {
                self.take(&CpuSet::from_vec(cpus.to_vec()));
            }
        }
    }

    fn take_full_first_level(&mut self) {
        if self.numa_first {
            self.take_full_numa_nodes()
        } else {
            self.take_full_sockets()
        }
    }

    fn take_full_second_level(&mut self) {
        if self.numa_first {
            self.take_full_sockets()
        } else {
            self.take_full_numa_nodes()
        }
    }

    fn take_full_uncore_caches(&mut self) {
        let topo = self.topo;
        for uncore in self.free_uncore_caches() {
            let cpus = topo.uncore_cache_cpus(uncore);
            if self.needs_at_least(cpus.len()) {
                self.take(&CpuSet::from_vec(cpus.to_vec()));
            }
        }
    }

    /// Take the whole request from one uncore cache when its lowest free cores fit it exactly.
    fn take_partial_uncore_cache(&mut self, uncore: u32) {
        let per_core = self.topo.cpus_per_core().max(1);
        let needed = usize::try_from(self.needed).unwrap_or(0);
        let cores = self
            .details
            .cores_needed_in_uncore_cache(needed.div_ceil(per_core), uncore);
        let mut cpus = self.details.cpus_in_cores(&cores);
        if !needed.is_multiple_of(2) && per_core > 1 && cpus.len() > needed {
            // An odd request needs one thread of the last core: drop its highest CPU.
            let mut ids = cpus.as_slice().to_vec();
            ids.pop();
            cpus = CpuSet::from_vec(ids);
        }
        if cpus.len() == needed {
            self.take(&cpus);
        }
    }

    fn take_uncore_caches(&mut self) {
        let per_uncore = self.topo.cpus_per_uncore_cache();
        for uncore in self.sort_available_uncore_caches() {
            if self.needs_at_least(per_uncore) {
                self.take_full_uncore_caches();
            }
            if self.is_satisfied() {
                return;
            }
            self.take_partial_uncore_cache(uncore);
            if self.is_satisfied() {
                return;
            }
        }
    }

    fn take_full_cores(&mut self) {
        let topo = self.topo;
        for core in self.free_cores() {
            let cpus = topo.core_cpus(core);
            if self.needs_at_least(cpus.len()) {
                self.take(&CpuSet::from_vec(cpus.to_vec()));
            }
        }
    }

    fn take_remaining_cpus(&mut self) {
        for cpu in self.free_cpus() {
            self.take(&CpuSet::from_vec(vec![cpu]));
            if self.is_satisfied() {
                return;
            }
        }
    }

    /// Fewest and most NUMA nodes that could hold the request in groups of `group` CPUs.
    fn range_numa_nodes_needed(&self, group: usize) -> (usize, usize) {
        let num_numa_nodes = self.topo.num_numa_nodes().max(1);
        let available_numa_nodes = self.details.numa_nodes().len();
        let num_cpus = self.topo.num_cpus().max(1);
        let groups = (num_cpus - 1) / group + 1;
        let groups_per_numa = (groups - 1) / num_numa_nodes + 1;
        let needed = usize::try_from(self.needed).unwrap_or(1).max(1);
        let groups_needed = (needed - 1) / group + 1;
        let min = (groups_needed - 1) / groups_per_numa + 1;
        (min, groups_needed.min(available_numa_nodes))
    }
}

/// Visit the `k`-element combinations of `items` in lexicographic order of position
/// (upstream `iterateCombinations`) until `visit` returns false or the shared budget runs out.
fn for_each_combination(
    items: &[u32],
    k: usize,
    budget: &Cell<usize>,
    mut visit: impl FnMut(&[u32]) -> bool,
) {
    let n = items.len();
    if k == 0 || k > n {
        return;
    }
    let mut index: Vec<usize> = (0..k).collect();
    let mut combo: Vec<u32> = Vec::with_capacity(k);
    loop {
        let left = budget.get();
        if left == 0 {
            return;
        }
        budget.set(left - 1);
        combo.clear();
        combo.extend(index.iter().map(|&i| items[i]));
        if !visit(&combo) {
            return;
        }
        let Some(pos) = (0..k).rev().find(|&pos| index[pos] < n - k + pos) else {
            return;
        };
        index[pos] += 1;
        for next in pos + 1..k {
            index[next] = index[next - 1] + 1;
        }
    }
}

/// Upstream `standardDeviation`: population standard deviation, mean and result rounded to 3 decimals.
fn standard_deviation(values: &[usize]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let len = values.len() as f64;
    let mean = (values.iter().map(|&v| v as f64).sum::<f64>() / len * 1000.0).round() / 1000.0;
    let variance = values
        .iter()
        .map(|&v| (v as f64 - mean) * (v as f64 - mean))
        .sum::<f64>()
        / len;
    (variance.sqrt() * 1000.0).round() / 1000.0
}

/// Take `num_cpus` CPUs from `available`, packed by topology (upstream `takeByTopologyNUMAPacked`).
pub fn take_by_topology_numa_packed(
    topo: &CpuTopology,
    available: &CpuSet,
    num_cpus: usize,
    strategy: CpuSortingStrategy,
    prefer_align_by_uncore_cache: bool,
) -> Result<CpuSet, CpuAssignmentError> {
    let mut acc = CpuAccumulator::new(topo, available, num_cpus, strategy);
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(CpuAssignmentError::NotEnoughCpus {
            requested: num_cpus,
            available: available.len(),
        });
    }
    acc.take_full_first_level();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    acc.take_full_second_level();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if prefer_align_by_uncore_cache {
        acc.take_uncore_caches();
        if acc.is_satisfied() {
            return Ok(acc.result);
        }
    }
    if strategy != CpuSortingStrategy::Spread {
        acc.take_full_cores();
        if acc.is_satisfied() {
            return Ok(acc.result);
        }
    }
    acc.take_remaining_cpus();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    Err(CpuAssignmentError::FailedToAllocate)
}

/// The best NUMA combination found for one combination size.
struct DistributionPlan {
    combo: Vec<u32>,
    remainder_numas: Vec<u32>,
    balance: f64,
}

/// Free CPUs per NUMA node, indexed like the sorted NUMA list.
struct NumaFree {
    numas: Vec<u32>,
    free: Vec<usize>,
}

impl NumaFree {
    fn slot(&self, numa: u32) -> usize {
        self.numas.iter().position(|&n| n == numa).unwrap_or(0)
    }

    fn free(&self, numa: u32) -> usize {
        self.free[self.slot(numa)]
    }
}

/// Take `num_cpus` CPUs from `available`, spread evenly over NUMA nodes in groups
/// of `cpu_group_size` CPUs (upstream `takeByTopologyNUMADistributed`; a group size
/// of 0 counts as 1). Falls back to packing when the request is not a multiple of
/// the group size or no NUMA combination can hold it evenly.
pub fn take_by_topology_numa_distributed(
    topo: &CpuTopology,
    available: &CpuSet,
    num_cpus: usize,
    cpu_group_size: usize,
    strategy: CpuSortingStrategy,
) -> Result<CpuSet, CpuAssignmentError> {
    let group = cpu_group_size.max(1);
    if !num_cpus.is_multiple_of(group) {
        return take_by_topology_numa_packed(topo, available, num_cpus, strategy, false);
    }
    let mut acc = CpuAccumulator::new(topo, available, num_cpus, strategy);
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(CpuAssignmentError::NotEnoughCpus {
            requested: num_cpus,
            available: available.len(),
        });
    }
    let numas = acc.sort_available_numa_nodes();
    let free = NumaFree {
        free: numas.iter().map(|&numa| acc.free_in_numa(numa)).collect(),
        numas,
    };
    let (min_numas, max_numas) = acc.range_numa_nodes_needed(group);
    let budget = Cell::new(COMBINATION_BUDGET);

    for k in min_numas..=max_numas {
        let mut best: Option<DistributionPlan> = None;
        for_each_combination(&free.numas, k, &budget, |combo| {
            if let Some(plan) = evaluate_combo(&free, combo, num_cpus, group, &budget)
                && best
                    .as_ref()
                    .is_none_or(|current| plan.balance < current.balance)
            {
                best = Some(plan);
            }
            // A perfectly balanced combination cannot be beaten.
            best.as_ref().is_none_or(|plan| plan.balance != 0.0)
        });
        let Some(plan) = best else {
            continue;
        };
        return allocate_plan(topo, &mut acc, &plan, num_cpus, group, strategy);
    }
    take_by_topology_numa_packed(topo, available, num_cpus, strategy, false)
}

/// Score one NUMA combination; `None` when it cannot hold the request evenly.
fn evaluate_combo(
    free: &NumaFree,
    combo: &[u32],
    num_cpus: usize,
    group: usize,
    budget: &Cell<usize>,
) -> Option<DistributionPlan> {
    let total: usize = combo.iter().map(|&numa| free.free(numa)).sum();
    if total < num_cpus {
        return None;
    }
    let groups: usize = combo.iter().map(|&numa| free.free(numa) / group).sum();
    if groups * group < num_cpus {
        return None;
    }
    let distribution = (num_cpus / combo.len() / group) * group;
    if combo.iter().any(|&numa| free.free(numa) < distribution) {
        return None;
    }
    // Free CPUs per NUMA node (all nodes with free CPUs) after the even share.
    let mut after: Vec<usize> = free.free.clone();
    for &numa in combo {
        after[free.slot(numa)] -= distribution;
    }
    let remainder = num_cpus - distribution * combo.len();
    let remainder_combo: Vec<u32> = combo
        .iter()
        .copied()
        .filter(|&numa| after[free.slot(numa)] >= group)
        .collect();

    let mut best_balance = f64::MAX;
    let mut best_remainder: Vec<u32> = Vec::new();
    if remainder == 0 {
        best_balance = standard_deviation(&after);
    }
    let mut size = remainder_combo.len();
    while remainder > 0 && size >= 1 {
        for_each_combination(&remainder_combo, size, budget, |subset| {
            let mut local = after.clone();
            // Only whole groups can be handed out, so count groups, not CPUs.
            let capacity: usize = subset
                .iter()
                .map(|&numa| local[free.slot(numa)] / group)
                .sum();
            if capacity * group < remainder {
                return true;
            }
            let mut left = remainder;
            while left > 0 {
                let before = left;
                for &numa in subset {
                    if left == 0 {
                        break;
                    }
                    let slot = free.slot(numa);
                    if local[slot] < group {
                        continue;
                    }
                    local[slot] -= group;
                    left -= group.min(left);
                }
                if left == before {
                    return true;
                }
            }
            let balance = standard_deviation(&local);
            if balance < best_balance {
                best_balance = balance;
                best_remainder = subset.to_vec();
            }
            true
        });
        size -= 1;
    }
    if best_balance == f64::MAX {
        return None;
    }
    Some(DistributionPlan {
        combo: combo.to_vec(),
        remainder_numas: best_remainder,
        balance: best_balance,
    })
}

/// Take the even share from every NUMA node of the plan, then the remainder groups.
fn allocate_plan(
    topo: &CpuTopology,
    acc: &mut CpuAccumulator<'_>,
    plan: &DistributionPlan,
    num_cpus: usize,
    group: usize,
    strategy: CpuSortingStrategy,
) -> Result<CpuSet, CpuAssignmentError> {
    let distribution = (num_cpus / plan.combo.len() / group) * group;
    for &numa in &plan.combo {
        let in_numa = acc.details.cpus_in_numa_nodes(&[numa]);
        // Upstream ignores a failure here; the accounting check below reports it.
        let cpus = take_by_topology_numa_packed(topo, &in_numa, distribution, strategy, false)
            .unwrap_or_default();
        acc.take(&cpus);
    }
    let mut remainder = num_cpus - distribution * plan.combo.len();
    while remainder > 0 {
        let before = remainder;
        for &numa in &plan.remainder_numas {
            if remainder == 0 {
                break;
            }
            let in_numa = acc.details.cpus_in_numa_nodes(&[numa]);
            if in_numa.len() < group {
                continue;
            }
            let cpus = take_by_topology_numa_packed(topo, &in_numa, group, strategy, false)
                .unwrap_or_default();
            acc.take(&cpus);
            remainder -= group.min(remainder);
        }
        if remainder == before {
            break;
        }
    }
    if acc.needed > 0 {
        return Err(CpuAssignmentError::AccountingNotEnough {
            remaining: acc.needed,
        });
    }
    if acc.needed < 0 {
        return Err(CpuAssignmentError::AccountingTooMany {
            remaining: acc.needed,
        });
    }
    Ok(acc.result.clone())
}
