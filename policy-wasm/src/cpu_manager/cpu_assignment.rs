//! Topology-aware CPU picking (`pkg/kubelet/cm/cpumanager/cpu_assignment.go`).
//!
//! [`take_by_topology_numa_packed`] is the best-fit packing algorithm: it
//! takes whole NUMA nodes and sockets first (NUMA nodes first when a NUMA
//! node holds at least one socket, else sockets first), then, with
//! prefer-align-cpus-by-uncorecache, whole and partial uncore caches, then
//! whole cores (skipped by the spread strategy), then single CPUs. Every list
//! it walks is sorted so that the unit with the fewest free CPUs comes first
//! (ties by id), which packs allocations and keeps big units free.
//!
//! [`take_by_topology_numa_distributed`] (distribute-cpus-across-numa,
//! KEP-2902) spreads a request evenly over the fewest NUMA nodes that can
//! hold it, in groups of `cpu_group_size` CPUs, and places any remainder
//! where the free CPUs stay most balanced (lowest standard deviation).
//!
//! Both are pure functions of the topology and the free CPUs. The loops are
//! bounded: combination searches share a budget of
//! [`COMBINATION_BUDGET`] candidates (a limit no real machine reaches), and
//! every round-robin loop stops when a pass makes no progress.

use std::cell::Cell;
use std::fmt;

use crate::cpu_topology::{CORE, CpuTopology, KINDS, Layout, NUMA, SOCKET, UNCORE};
use crate::cpuset::CpuSet;

/// How single CPUs are ordered once whole units are taken (upstream `CPUSortingStrategy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CpuSortingStrategy {
    /// Fill cores: the CPUs of one core before the next (`packed`, the default).
    #[default]
    Packed,
    /// Spread over cores: socket by socket in CPU id order, whole cores are not taken (`spread`, distribute-cpus-across-cores).
    Spread,
}

/// The most NUMA-node combinations (and remainder subsets) one distributed pick evaluates.
pub const COMBINATION_BUDGET: usize = 1_000_000;

/// Why CPUs could not be taken; the texts are upstream's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuAssignmentError {
    /// Fewer free CPUs than requested.
    NotEnoughCpus {
        /// The number of CPUs requested.
        requested: usize,
        /// The number of CPUs offered.
        available: usize,
    },
    /// The packing steps ended short of the request.
    FailedToAllocate,
    /// The distributed pick allocated too few CPUs.
    AccountingNotEnough {
        /// CPUs still missing.
        remaining: i64,
    },
    /// The distributed pick allocated too many CPUs.
    AccountingTooMany {
        /// The (negative) CPUs still needed.
        remaining: i64,
    },
}

impl fmt::Display for CpuAssignmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuAssignmentError::NotEnoughCpus {
                requested,
                available,
            } => {
                write!(
                    f,
                    "not enough cpus available to satisfy request: requested={requested}, available={available}"
                )
            }
            CpuAssignmentError::FailedToAllocate => f.write_str("failed to allocate cpus"),
            CpuAssignmentError::AccountingNotEnough { remaining } => {
                write!(
                    f,
                    "accounting error, not enough CPUs allocated, remaining: {remaining}"
                )
            }
            CpuAssignmentError::AccountingTooMany { remaining } => {
                write!(
                    f,
                    "accounting error, too many CPUs allocated, remaining: {remaining}"
                )
            }
        }
    }
}

impl std::error::Error for CpuAssignmentError {}

/// Sort unit indexes by ascending free-CPU count, ties by ascending index
/// (ascending id), as upstream `cpuAccumulator.sort`; the keys are distinct,
/// so an unstable sort is deterministic.
fn sort_by_free(units: &mut [u64]) {
    units.sort_unstable();
}

/// The sort key of unit `index` with `free` free CPUs.
fn free_key(free: u32, index: u32) -> u64 {
    (u64::from(free) << 32) | u64::from(index)
}

/// Upstream `cpuAccumulator`: the free CPUs, the CPUs taken so far and how many are still needed.
///
/// The free CPUs are kept as a flag per CPU and a free count per unit of
/// every kind (see [`Layout`]), updated as CPUs are taken, so ordering the
/// units costs a sort of the units, not a scan of all CPUs.
#[derive(Clone, Debug)]
pub(crate) struct CpuAccumulator<'t> {
    topo: &'t CpuTopology,
    layout: &'t Layout,
    /// Per CPU position: still available and not taken.
    free: Vec<bool>,
    /// Per unit kind, per unit index: its free CPUs.
    counts: [Vec<u32>; KINDS],
    num_free: usize,
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
        let layout = topo.layout();
        let mut acc = CpuAccumulator {
            topo,
            layout,
            free: vec![false; topo.num_cpus()],
            counts: std::array::from_fn(|kind| vec![0; layout.count(kind)]),
            num_free: 0,
            needed: i64::try_from(num_cpus).unwrap_or(i64::MAX),
            result: CpuSet::new(),
            numa_first: topo.num_sockets() >= topo.num_numa_nodes(),
            strategy,
        };
        // CPUs the topology does not know are dropped, as upstream's `KeepOnly`.
        for cpu in available.iter() {
            if let Some(i) = layout.index(cpu) {
                acc.free[i] = true;
                acc.num_free += 1;
                for (kind, &unit) in layout.units(i).iter().enumerate() {
                    acc.counts[kind][unit as usize] += 1;
                }
            }
        }
        acc
    }

    #[cfg(test)]
    pub(crate) fn needed(&self) -> i64 {
        self.needed
    }

    pub(crate) fn take(&mut self, cpus: &CpuSet) {
        let added = cpus.difference(&self.result).len();
        self.result = self.result.union(cpus);
        // The free CPUs never include a CPU of `result`, so dropping `cpus`
        // is the same as upstream's `KeepOnly(details.CPUs() - result)`.
        for cpu in cpus.iter() {
            if let Some(i) = self.layout.index(cpu)
                && self.free[i]
            {
                self.free[i] = false;
                self.num_free -= 1;
                for (kind, &unit) in self.layout.units(i).iter().enumerate() {
                    self.counts[kind][unit as usize] -= 1;
                }
            }
        }
        self.needed -= i64::try_from(added).unwrap_or(i64::MAX);
    }

    fn needs_at_least(&self, n: usize) -> bool {
        self.needed >= i64::try_from(n).unwrap_or(i64::MAX)
    }

    pub(crate) fn is_satisfied(&self) -> bool {
        self.needed < 1
    }

    pub(crate) fn is_failed(&self) -> bool {
        self.needed > i64::try_from(self.num_free).unwrap_or(i64::MAX)
    }

    fn is_free(&self, cpu: u32) -> bool {
        self.layout.index(cpu).is_some_and(|i| self.free[i])
    }

    fn free_in_numa(&self, numa: u32) -> usize {
        self.layout
            .find(NUMA, numa)
            .map_or(0, |u| self.counts[NUMA][u] as usize)
    }

    /// The free CPUs of NUMA node `numa`.
    fn free_cpus_in_numa(&self, numa: u32) -> CpuSet {
        let cpus = match self.layout.find(NUMA, numa) {
            Some(u) => self.layout.cpus(NUMA, u),
            None => &[],
        };
        CpuSet::from_vec(
            cpus.iter()
                .copied()
                .filter(|&cpu| self.is_free(cpu))
                .collect(),
        )
    }

    // The orders below are upstream's: fewest free CPUs first, ties by id,
    // children grouped under their parents in the parents' order, a child
    // under two parents listed once. They work on unit indexes.

    /// Every unit of `kind` with free CPUs, sorted.
    fn all_sorted(&self, kind: usize) -> Vec<u32> {
        let mut keys: Vec<u64> = self.counts[kind]
            .iter()
            .enumerate()
            .filter(|(_, free)| **free > 0)
            .map(|(u, &free)| free_key(free, u as u32))
            .collect();
        sort_by_free(&mut keys);
        keys.into_iter().map(|key| key as u32).collect()
    }

    /// For every parent in order, its children of `kind` (from `children`,
    /// already filtered to those with free CPUs) sorted, each child once.
    fn grouped_sorted<'a, I>(
        &self,
        kind: usize,
        parents: Vec<u32>,
        children: impl Fn(u32) -> I,
    ) -> Vec<u32>
    where
        I: Iterator<Item = u32> + 'a,
    {
        let counts = &self.counts[kind];
        let mut seen = vec![false; counts.len()];
        let mut out = Vec::new();
        let mut keys: Vec<u64> = Vec::new();
        for parent in parents {
            keys.clear();
            keys.extend(children(parent).map(|u| free_key(counts[u as usize], u)));
            sort_by_free(&mut keys);
            for &key in &keys {
                let u = key as u32;
                if !std::mem::replace(&mut seen[u as usize], true) {
                    out.push(u);
                }
            }
        }
        out
    }

    /// Whether the (socket, NUMA) pair `pair` has a free CPU: the NUMA node's
    /// or the socket's count when the other one holds it whole, else its cores'.
    fn pair_has_free(&self, pair: u32) -> bool {
        let layout = self.layout;
        let (socket, numa) = layout.socket_numa(pair);
        if layout.socket_numa_pairs_of_numa(numa as usize).len() == 1 {
            return self.counts[NUMA][numa as usize] > 0;
        }
        if layout.socket_numa_pairs_of_socket(socket as usize).len() == 1 {
            return self.counts[SOCKET][socket as usize] > 0;
        }
        layout.cores_in_numa(numa as usize).iter().any(|&core| {
            self.counts[CORE][core as usize] > 0
                && layout
                    .cpus(CORE, core as usize)
                    .first()
                    .and_then(|&cpu| layout.index(cpu))
                    .is_some_and(|i| layout.units(i)[SOCKET] == socket)
        })
    }

    fn numa_order(&self) -> Vec<u32> {
        if self.numa_first {
            return self.all_sorted(NUMA);
        }
        self.grouped_sorted(NUMA, self.socket_order(), |socket| {
            self.layout
                .socket_numa_pairs_of_socket(socket as usize)
                .iter()
                .filter(|&&p| self.pair_has_free(p))
                .map(|&p| self.layout.socket_numa(p).1)
        })
    }

    fn socket_order(&self) -> Vec<u32> {
        if !self.numa_first {
            return self.all_sorted(SOCKET);
        }
        self.grouped_sorted(SOCKET, self.numa_order(), |numa| {
            self.layout
                .socket_numa_pairs_of_numa(numa as usize)
                .iter()
                .filter(|&&p| self.pair_has_free(p))
                .map(|&p| self.layout.socket_numa(p).0)
        })
    }

    fn core_order(&self) -> Vec<u32> {
        let cores = &self.counts[CORE];
        let with_free =
            |list: &'t [u32]| list.iter().copied().filter(move |&c| cores[c as usize] > 0);
        if self.numa_first {
            self.grouped_sorted(CORE, self.socket_order(), |socket| {
                with_free(self.layout.cores_in_socket(socket as usize))
            })
        } else {
            self.grouped_sorted(CORE, self.numa_order(), |numa| {
                with_free(self.layout.cores_in_numa(numa as usize))
            })
        }
    }

    /// The uncore caches of the free CPUs of NUMA node `numa`, ascending (`UncoreCachesInNUMANodes`).
    fn uncore_caches_in_numa(&self, numa: u32) -> std::vec::IntoIter<u32> {
        let layout = self.layout;
        let mut caches: Vec<u32> = layout
            .cpus(NUMA, numa as usize)
            .iter()
            .filter_map(|&cpu| layout.index(cpu).filter(|&i| self.free[i]))
            .map(|i| layout.units(i)[UNCORE])
            .collect();
        caches.sort_unstable();
        caches.dedup();
        caches.into_iter()
    }

    fn uncore_order(&self) -> Vec<u32> {
        self.grouped_sorted(UNCORE, self.numa_order(), |numa| {
            self.uncore_caches_in_numa(numa)
        })
    }

    /// The units of `order` (of `kind`) whose CPUs are all free.
    fn whole(&self, kind: usize, order: Vec<u32>) -> Vec<u32> {
        order
            .into_iter()
            .filter(|&u| {
                self.counts[kind][u as usize] as usize == self.layout.cpus(kind, u as usize).len()
            })
            .collect()
    }

    fn ids(&self, kind: usize, units: Vec<u32>) -> Vec<u32> {
        units.into_iter().map(|u| self.layout.id(kind, u)).collect()
    }

    pub(crate) fn sort_available_numa_nodes(&self) -> Vec<u32> {
        self.ids(NUMA, self.numa_order())
    }

    #[cfg(test)]
    pub(crate) fn sort_available_sockets(&self) -> Vec<u32> {
        self.ids(SOCKET, self.socket_order())
    }

    #[cfg(test)]
    pub(crate) fn sort_available_cores(&self) -> Vec<u32> {
        self.ids(CORE, self.core_order())
    }

    /// The free CPUs in taking order (`freeCPUs`): core by core (packed) or socket by socket (spread).
    pub(crate) fn free_cpus(&self) -> Vec<u32> {
        let (kind, order) = match self.strategy {
            CpuSortingStrategy::Packed => (CORE, self.core_order()),
            CpuSortingStrategy::Spread => (SOCKET, self.socket_order()),
        };
        let mut out = Vec::new();
        for u in order {
            out.extend(
                self.layout
                    .cpus(kind, u as usize)
                    .iter()
                    .copied()
                    .filter(|&cpu| self.is_free(cpu)),
            );
        }
        out
    }

    #[cfg(test)]
    pub(crate) fn free_numa_nodes(&self) -> Vec<u32> {
        self.ids(NUMA, self.whole(NUMA, self.numa_order()))
    }

    // A socket or core is free when every CPU the machine has in it is
    // available. Upstream compares with the averages `CPUsPerSocket` /
    // `CPUsPerCore` (integer division), which on an uneven machine (an
    // offline SMT sibling) calls a partly taken core free, and
    // `takeFullCores` / `takeFullSockets` then hand out all its CPUs:
    // reserved ones and other containers' exclusive ones (kubernetes#140495,
    // fixed upstream by #140498). On even machines both agree.
    #[cfg(test)]
    pub(crate) fn free_sockets(&self) -> Vec<u32> {
        self.ids(SOCKET, self.whole(SOCKET, self.socket_order()))
    }

    #[cfg(test)]
    pub(crate) fn free_cores(&self) -> Vec<u32> {
        self.ids(CORE, self.whole(CORE, self.core_order()))
    }

    /// Take every whole unit of `units` (of `kind`) that the request still needs entirely.
    fn take_whole(&mut self, kind: usize, units: Vec<u32>) {
        let layout = self.layout;
        for u in units {
            // Every unit has a CPU, so once satisfied nothing more is taken.
            if self.is_satisfied() {
                return;
            }
            let cpus = layout.cpus(kind, u as usize);
            if self.needs_at_least(cpus.len()) {
                self.take(&CpuSet::from_vec(cpus.to_vec()));
            }
        }
    }

    fn take_full_numa_nodes(&mut self) {
        let units = self.whole(NUMA, self.numa_order());
        self.take_whole(NUMA, units);
    }

    fn take_full_sockets(&mut self) {
        let units = self.whole(SOCKET, self.socket_order());
        self.take_whole(SOCKET, units);
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
        let units = self.whole(UNCORE, self.uncore_order());
        self.take_whole(UNCORE, units);
    }

    /// Take the whole request from one uncore cache (by index) when its lowest free cores fit it exactly.
    fn take_partial_uncore_cache(&mut self, uncore: u32) {
        let layout = self.layout;
        let per_core = self.topo.cpus_per_core().max(1);
        let needed = usize::try_from(self.needed).unwrap_or(0);
        // The lowest cores with a free CPU in the cache (`CoresNeededInUncoreCache`).
        let mut cores: Vec<u32> = layout
            .cpus(UNCORE, uncore as usize)
            .iter()
            .filter_map(|&cpu| layout.index(cpu).filter(|&i| self.free[i]))
            .map(|i| layout.units(i)[CORE])
            .collect();
        cores.sort_unstable();
        cores.dedup();
        cores.truncate(needed.div_ceil(per_core));
        // All their free CPUs, in the cache or not (`CPUsInCores`).
        let mut ids = Vec::new();
        for core in cores {
            ids.extend(
                layout
                    .cpus(CORE, core as usize)
                    .iter()
                    .copied()
                    .filter(|&cpu| self.is_free(cpu)),
            );
        }
        let mut cpus = CpuSet::from_vec(ids);
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
        for uncore in self.uncore_order() {
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
        // `whole(core_order())` one parent at a time, stopping once satisfied:
        // a core sits in one socket and one NUMA node, so taking the cores of
        // one parent leaves the next parent's cores (their counts, their
        // order, whether they are whole) as they were when the order began.
        let layout = self.layout;
        let parents = if self.numa_first {
            self.socket_order()
        } else {
            self.numa_order()
        };
        let mut keys: Vec<u64> = Vec::new();
        for parent in parents {
            let cores = if self.numa_first {
                layout.cores_in_socket(parent as usize)
            } else {
                layout.cores_in_numa(parent as usize)
            };
            let counts = &self.counts[CORE];
            keys.clear();
            keys.extend(
                cores
                    .iter()
                    .filter(|&&c| counts[c as usize] > 0)
                    .map(|&c| free_key(counts[c as usize], c)),
            );
            sort_by_free(&mut keys);
            for &key in &keys {
                let core = key as u32;
                let cpus = layout.cpus(CORE, core as usize);
                if self.counts[CORE][core as usize] as usize == cpus.len()
                    && self.needs_at_least(cpus.len())
                {
                    self.take(&CpuSet::from_vec(cpus.to_vec()));
                }
                if self.is_satisfied() {
                    return;
                }
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
        let available_numa_nodes = self.counts[NUMA].iter().filter(|&&free| free > 0).count();
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
    if num_cpus == 0 {
        // Satisfied before anything is counted (`allocateCPUs` asks for 0 after an aligned take).
        return Ok(CpuSet::new());
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
        let in_numa = acc.free_cpus_in_numa(numa);
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
            let in_numa = acc.free_cpus_in_numa(numa);
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

#[cfg(test)]
mod reference;

#[cfg(test)]
mod equivalence;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_assignment_combinations_are_lexicographic_and_bounded() {
        let mut seen = Vec::new();
        let budget = Cell::new(100);
        for_each_combination(&[0, 1, 2, 3], 2, &budget, |combo| {
            seen.push(combo.to_vec());
            true
        });
        assert_eq!(
            seen,
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        assert_eq!(budget.get(), 94);
        let mut count = 0;
        let small = Cell::new(3);
        for_each_combination(&[0, 1, 2, 3, 4], 2, &small, |_| {
            count += 1;
            true
        });
        assert_eq!((count, small.get()), (3, 0));
        let none = Cell::new(10);
        for_each_combination(&[0, 1], 3, &none, |_| panic!("k > n has no combination"));
        for_each_combination(&[0, 1], 0, &none, |_| panic!("k = 0 has no combination"));
    }

    use crate::cpu_topology::CpuInfo;

    /// `cpus` CPUs without SMT, `per_socket` per socket (one NUMA node each), uncore caches of `per_uncore`.
    fn no_smt(cpus: u32, per_socket: u32, per_uncore: u32) -> CpuTopology {
        CpuTopology::new((0..cpus).map(|cpu| {
            let socket = cpu / per_socket;
            let info = CpuInfo {
                core_id: cpu,
                socket_id: socket,
                numa_node_id: socket,
                uncore_cache_id: Some(cpu / per_uncore),
            };
            (cpu, info)
        }))
        .unwrap()
    }

    #[track_caller]
    fn check_uncore(topo: &CpuTopology, available: &str, num_cpus: usize, expected: &str) {
        let available = CpuSet::parse(available).unwrap();
        let got = take_by_topology_numa_packed(
            topo,
            &available,
            num_cpus,
            CpuSortingStrategy::Packed,
            true,
        );
        assert_eq!(got.map(|cpus| cpus.to_string()), Ok(expected.to_string()));
    }

    /// Cases of upstream `TestTakeByTopologyNUMAPacked` (PreferAlignByUncoreCache), on topologies modelled
    /// on upstream's uncore test machines (their listings were not transcribed).
    #[test]
    fn cpu_assignment_prefer_align_by_uncore_cache() {
        // Two whole uncore caches, then the rest from the partly used first one.
        check_uncore(&no_smt(16, 16, 4), "1-15", 10, "1-2,4-11");
        // The first free uncore cache of the first socket.
        check_uncore(&no_smt(16, 8, 4), "0-15", 4, "0-3");
        // Upstream's test topologies leave the uncore id at 0: one cache, lowest free core, one thread of it.
        let dual_socket_ht = CpuTopology::new((0..12).map(|cpu| {
            (
                cpu,
                CpuInfo {
                    core_id: cpu % 6,
                    socket_id: cpu % 2,
                    numa_node_id: cpu % 2,
                    uncore_cache_id: Some(0),
                },
            )
        }))
        .unwrap();
        check_uncore(&dual_socket_ht, "1-5,7-11", 1, "1");
    }

    #[test]
    fn cpu_assignment_standard_deviation_matches_upstream_rounding() {
        assert_eq!(standard_deviation(&[]), 0.0);
        assert_eq!(standard_deviation(&[5, 5, 5]), 0.0);
        assert_eq!(standard_deviation(&[0, 2]), 1.0);
        assert_eq!(standard_deviation(&[1, 2, 2]), 0.471);
    }
}
