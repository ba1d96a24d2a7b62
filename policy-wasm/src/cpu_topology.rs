//! The CPU topology of a node (`pkg/kubelet/cm/cpumanager/topology/topology.go`).
//!
//! Every logical CPU has a core id, a socket id, a NUMA node id and an
//! optional uncore (L3) cache id. As upstream (`getUniqueCoreID`), core ids
//! are unique machine-wide; a CPU without an uncore cache id falls back to
//! its socket id (`getUncoreCacheID`). The counts are derived from the CPU
//! list, and the per-unit sizes are the upstream integer divisions
//! (`CPUsPerCore() = NumCPUs / NumCores`, 0 when there are no cores).
//!
//! [`CpuDetails`] is upstream `CPUDetails`: a CPU-to-info map that can be
//! narrowed to a subset of CPUs and queried for the CPUs, cores, sockets,
//! NUMA nodes and uncore caches it covers. The CPU assignment algorithms
//! work on details narrowed to the free CPUs.
//!
//! Where this reads hardware is not its concern: the host discovers the
//! topology (sysfs) and passes it in.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::cpuset::{CpuSet, MAX_CPU_ID};

/// The largest NUMA node id (NUMA affinities are `u64` bitmasks).
pub const MAX_NUMA_NODE_ID: u32 = 63;

/// Where one logical CPU sits (upstream `CPUInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuInfo {
    /// The physical core id, unique machine-wide.
    pub core_id: u32,
    /// The socket (package) id.
    pub socket_id: u32,
    /// The NUMA node id (0..=63).
    pub numa_node_id: u32,
    /// The uncore (L3) cache id; `None` when unknown.
    pub uncore_cache_id: Option<u32>,
}

impl CpuInfo {
    /// The uncore cache id the algorithms use: the given one, else the socket id.
    pub fn uncore_cache(&self) -> u32 {
        self.uncore_cache_id.unwrap_or(self.socket_id)
    }
}

/// Why a topology was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuTopologyError {
    /// No CPUs at all (upstream: `could not detect number of cpus`).
    NoCpus,
    /// A CPU id above [`MAX_CPU_ID`].
    CpuIdTooLarge {
        /// The CPU id.
        cpu: u32,
    },
    /// The same CPU id listed twice.
    DuplicateCpu {
        /// The CPU id.
        cpu: u32,
    },
    /// A NUMA node id above [`MAX_NUMA_NODE_ID`].
    NumaNodeIdTooLarge {
        /// The CPU that names it.
        cpu: u32,
        /// The NUMA node id.
        numa_node_id: u32,
    },
    /// One core id used in two sockets or two NUMA nodes.
    CoreSpansUnits {
        /// The core id.
        core_id: u32,
    },
}

impl fmt::Display for CpuTopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuTopologyError::NoCpus => f.write_str("could not detect number of cpus"),
            CpuTopologyError::CpuIdTooLarge { cpu } => {
                write!(f, "cpu id {cpu} exceeds the maximum {MAX_CPU_ID}")
            }
            CpuTopologyError::DuplicateCpu { cpu } => {
                write!(f, "cpu {cpu} is listed more than once")
            }
            CpuTopologyError::NumaNodeIdTooLarge { cpu, numa_node_id } => {
                write!(
                    f,
                    "cpu {cpu}: NUMA node id {numa_node_id} exceeds the maximum {MAX_NUMA_NODE_ID}"
                )
            }
            CpuTopologyError::CoreSpansUnits { core_id } => {
                write!(
                    f,
                    "core {core_id} has cpus in more than one socket or NUMA node"
                )
            }
        }
    }
}

impl std::error::Error for CpuTopologyError {}

/// CPUs per unit id (core, socket, ...), ascending by id ([`CpuDetails::count_by`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitCounts(Vec<(u32, usize)>);

impl UnitCounts {
    /// The CPUs of unit `id`; `None` when the unit has none.
    pub fn get(&self, id: u32) -> Option<usize> {
        self.0
            .binary_search_by_key(&id, |(unit, _)| *unit)
            .ok()
            .map(|index| self.0[index].1)
    }

    /// The unit ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(|(id, _)| *id)
    }
}

/// A CPU-to-info map, possibly narrowed to a subset of CPUs (upstream `CPUDetails`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuDetails {
    /// Sorted by CPU id, no duplicates.
    entries: Vec<(u32, CpuInfo)>,
}

impl CpuDetails {
    /// The info of `cpu`, if it is in these details.
    pub fn get(&self, cpu: u32) -> Option<&CpuInfo> {
        self.entries
            .binary_search_by_key(&cpu, |(id, _)| *id)
            .ok()
            .map(|index| &self.entries[index].1)
    }

    /// The number of CPUs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no CPUs.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Iterate `(cpu, info)` in CPU order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &CpuInfo)> + '_ {
        self.entries.iter().map(|(cpu, info)| (*cpu, info))
    }

    /// The same details narrowed to the CPUs of `cpus` (`KeepOnly`).
    pub fn keep_only(&self, cpus: &CpuSet) -> CpuDetails {
        CpuDetails {
            entries: self
                .entries
                .iter()
                .filter(|(cpu, _)| cpus.contains(*cpu))
                .copied()
                .collect(),
        }
    }

    /// All CPU ids.
    pub fn cpus(&self) -> CpuSet {
        CpuSet::from_vec(self.entries.iter().map(|(cpu, _)| *cpu).collect())
    }

    /// Drop the CPUs of `cpus` in place (`KeepOnly` of the rest, without a copy).
    pub fn remove(&mut self, cpus: &CpuSet) {
        self.entries.retain(|(cpu, _)| !cpus.contains(*cpu));
    }

    /// The number of CPUs per unit (`key`: core, socket, ...), in one pass.
    ///
    /// The assignment loops sort units by free CPUs; counting every unit at
    /// once replaces one scan of all CPUs per unit.
    pub fn count_by(&self, key: impl Fn(&CpuInfo) -> u32) -> UnitCounts {
        // Sorting the keys and counting runs beats a map for a few hundred CPUs.
        let mut keys: Vec<u32> = self.entries.iter().map(|(_, info)| key(info)).collect();
        keys.sort_unstable();
        let mut counts: Vec<(u32, usize)> = Vec::new();
        for id in keys {
            match counts.last_mut() {
                Some((last, n)) if *last == id => *n += 1,
                _ => counts.push((id, 1)),
            }
        }
        UnitCounts(counts)
    }

    /// The CPUs of every unit (`key`: core, socket, ...), each list ascending.
    pub fn group_by(&self, key: impl Fn(&CpuInfo) -> u32) -> BTreeMap<u32, Vec<u32>> {
        let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (cpu, info) in &self.entries {
            groups.entry(key(info)).or_default().push(*cpu);
        }
        groups
    }

    fn ids(&self, key: impl Fn(&CpuInfo) -> u32) -> Vec<u32> {
        self.ids_where(|_| true, key)
    }

    fn cpus_where(&self, keep: impl Fn(&CpuInfo) -> bool) -> CpuSet {
        CpuSet::from_vec(
            self.entries
                .iter()
                .filter(|(_, info)| keep(info))
                .map(|(cpu, _)| *cpu)
                .collect(),
        )
    }

    fn ids_where(
        &self,
        keep: impl Fn(&CpuInfo) -> bool,
        key: impl Fn(&CpuInfo) -> u32,
    ) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        for (_, info) in &self.entries {
            // Neighbouring CPUs mostly share their unit: skip repeats before sorting.
            let id = key(info);
            if keep(info) && ids.last() != Some(&id) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The distinct core ids, ascending.
    pub fn cores(&self) -> Vec<u32> {
        self.ids(|info| info.core_id)
    }

    /// The distinct socket ids, ascending.
    pub fn sockets(&self) -> Vec<u32> {
        self.ids(|info| info.socket_id)
    }

    /// The distinct NUMA node ids, ascending.
    pub fn numa_nodes(&self) -> Vec<u32> {
        self.ids(|info| info.numa_node_id)
    }

    /// The distinct uncore cache ids, ascending.
    pub fn uncore_caches(&self) -> Vec<u32> {
        self.ids(CpuInfo::uncore_cache)
    }

    /// The CPUs of the given cores.
    pub fn cpus_in_cores(&self, cores: &[u32]) -> CpuSet {
        self.cpus_where(|info| cores.contains(&info.core_id))
    }

    /// The CPUs of the given sockets.
    pub fn cpus_in_sockets(&self, sockets: &[u32]) -> CpuSet {
        self.cpus_where(|info| sockets.contains(&info.socket_id))
    }

    /// The CPUs of the given NUMA nodes.
    pub fn cpus_in_numa_nodes(&self, numa_nodes: &[u32]) -> CpuSet {
        self.cpus_where(|info| numa_nodes.contains(&info.numa_node_id))
    }

    /// The CPUs of the given uncore caches.
    pub fn cpus_in_uncore_caches(&self, uncore_caches: &[u32]) -> CpuSet {
        self.cpus_where(|info| uncore_caches.contains(&info.uncore_cache()))
    }

    /// The cores in the given sockets, ascending.
    pub fn cores_in_sockets(&self, sockets: &[u32]) -> Vec<u32> {
        self.ids_where(
            |info| sockets.contains(&info.socket_id),
            |info| info.core_id,
        )
    }

    /// The cores in the given NUMA nodes, ascending.
    pub fn cores_in_numa_nodes(&self, numa_nodes: &[u32]) -> Vec<u32> {
        self.ids_where(
            |info| numa_nodes.contains(&info.numa_node_id),
            |info| info.core_id,
        )
    }

    /// The cores in the given uncore cache, ascending.
    pub fn cores_in_uncore_cache(&self, uncore_cache: u32) -> Vec<u32> {
        self.ids_where(
            |info| info.uncore_cache() == uncore_cache,
            |info| info.core_id,
        )
    }

    /// The lowest `needed` cores of an uncore cache, or all of them (`CoresNeededInUncoreCache`).
    pub fn cores_needed_in_uncore_cache(&self, needed: usize, uncore_cache: u32) -> Vec<u32> {
        let mut cores = self.cores_in_uncore_cache(uncore_cache);
        cores.truncate(needed);
        cores
    }

    /// The sockets the given NUMA nodes span, ascending.
    pub fn sockets_in_numa_nodes(&self, numa_nodes: &[u32]) -> Vec<u32> {
        self.ids_where(
            |info| numa_nodes.contains(&info.numa_node_id),
            |info| info.socket_id,
        )
    }

    /// The NUMA nodes in the given sockets, ascending.
    pub fn numa_nodes_in_sockets(&self, sockets: &[u32]) -> Vec<u32> {
        self.ids_where(
            |info| sockets.contains(&info.socket_id),
            |info| info.numa_node_id,
        )
    }

    /// The uncore caches in the given NUMA nodes, ascending.
    pub fn uncore_caches_in_numa_nodes(&self, numa_nodes: &[u32]) -> Vec<u32> {
        self.ids_where(
            |info| numa_nodes.contains(&info.numa_node_id),
            CpuInfo::uncore_cache,
        )
    }

    /// Whether all the given NUMA nodes exist here and sit in one socket (`AreNUMANodesInSameSocket`).
    pub fn are_numa_nodes_in_same_socket(&self, numa_nodes: &[u32]) -> bool {
        let known = self.numa_nodes();
        numa_nodes.iter().all(|numa| known.contains(numa))
            && self.sockets_in_numa_nodes(numa_nodes).len() <= 1
    }
}

/// Groups of items in one flat list (compressed rows): the items of group
/// `g` are `items[starts[g]..starts[g + 1]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Groups {
    starts: Vec<u32>,
    items: Vec<u32>,
}

impl Groups {
    /// Item `i` of `0..n` goes to group `group_of(i)`; within a group items
    /// keep their order (a counting sort, no comparisons).
    fn by_group(
        num_groups: usize,
        n: usize,
        group_of: impl Fn(usize) -> u32,
        item: impl Fn(usize) -> u32,
    ) -> Groups {
        let mut starts = vec![0u32; num_groups + 1];
        for i in 0..n {
            starts[group_of(i) as usize + 1] += 1;
        }
        for g in 0..num_groups {
            starts[g + 1] += starts[g];
        }
        let mut next = starts.clone();
        let mut items = vec![0u32; n];
        for i in 0..n {
            let slot = &mut next[group_of(i) as usize];
            items[*slot as usize] = item(i);
            *slot += 1;
        }
        Groups { starts, items }
    }

    /// The items of group `g` (empty for an unknown group).
    pub(crate) fn get(&self, g: usize) -> &[u32] {
        match (self.starts.get(g), self.starts.get(g + 1)) {
            (Some(&start), Some(&end)) => &self.items[start as usize..end as usize],
            _ => &[],
        }
    }
}

/// Dense indexes of `keys`: the distinct keys ascending, and each key's
/// position among them written to `of`. Small keys (every real machine's
/// ids) go through a lookup table instead of a sort.
fn dense_index(keys: &[u64], mut of: impl FnMut(usize, u32)) -> Vec<u64> {
    let max = keys.iter().copied().max().unwrap_or(0);
    if max < keys.len() as u64 * 4 + 4096 {
        let mut table = vec![u32::MAX; max as usize + 1];
        for &key in keys {
            table[key as usize] = 0;
        }
        let mut ids = Vec::new();
        for (key, slot) in table.iter_mut().enumerate() {
            if *slot == 0 {
                *slot = ids.len() as u32;
                ids.push(key as u64);
            }
        }
        for (i, &key) in keys.iter().enumerate() {
            of(i, table[key as usize]);
        }
        return ids;
    }
    let mut ids = keys.to_vec();
    ids.sort_unstable();
    ids.dedup();
    for (i, key) in keys.iter().enumerate() {
        of(i, ids.binary_search(key).unwrap_or(0) as u32);
    }
    ids
}

/// Unit kinds of [`Layout`]: cores, sockets, NUMA nodes and uncore caches.
pub(crate) const CORE: usize = 0;
/// See [`CORE`].
pub(crate) const SOCKET: usize = 1;
/// See [`CORE`].
pub(crate) const NUMA: usize = 2;
/// See [`CORE`].
pub(crate) const UNCORE: usize = 3;
/// The number of unit kinds.
pub(crate) const KINDS: usize = 4;

/// The machine's units as dense indexes, built once per topology so the
/// assignment loops count free CPUs per unit in arrays and walk prepared
/// child lists instead of scanning and sorting all CPUs per step.
///
/// Unit indexes follow ascending unit ids, so "ties by id" is "ties by index".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// CPU id to its position in the details, `u32::MAX` when absent.
    index_of: Vec<u32>,
    /// Per CPU position, its unit index of every kind.
    unit_of: Vec<[u32; KINDS]>,
    /// The ids of cores, sockets, NUMA nodes and uncore caches, ascending.
    ids: [Vec<u32>; KINDS],
    /// The CPU ids of every unit, ascending.
    cpus: [Groups; KINDS],
    /// The number of units of every kind.
    counts: [usize; KINDS],
    /// Per socket, its core indexes; per NUMA node, its core indexes.
    cores_in_socket: Groups,
    cores_in_numa: Groups,
    /// The (socket, NUMA) index pairs that have cores, ascending.
    socket_numa: Vec<(u32, u32)>,
    /// Per socket, its (socket, NUMA) pairs by NUMA node; per NUMA node, by socket.
    socket_numa_by_socket: Groups,
    socket_numa_by_numa: Groups,
}

impl Layout {
    /// The position of CPU `cpu` in the details, if the machine has it.
    pub(crate) fn index(&self, cpu: u32) -> Option<usize> {
        match self.index_of.get(cpu as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// The unit indexes of the CPU at position `i`.
    pub(crate) fn units(&self, i: usize) -> &[u32; KINDS] {
        &self.unit_of[i]
    }

    /// The number of units of `kind`.
    pub(crate) fn count(&self, kind: usize) -> usize {
        self.counts[kind]
    }

    /// The id of unit `index` of `kind` (one of the four plain kinds).
    pub(crate) fn id(&self, kind: usize, index: u32) -> u32 {
        self.ids[kind][index as usize]
    }

    /// The index of the unit of `kind` with id `id`.
    pub(crate) fn find(&self, kind: usize, id: u32) -> Option<usize> {
        self.ids[kind].binary_search(&id).ok()
    }

    /// The CPU ids of unit `index` of `kind`, ascending.
    pub(crate) fn cpus(&self, kind: usize, index: usize) -> &[u32] {
        self.cpus[kind].get(index)
    }

    /// The cores of a socket, by index.
    pub(crate) fn cores_in_socket(&self, socket: usize) -> &[u32] {
        self.cores_in_socket.get(socket)
    }

    /// The cores of a NUMA node, by index.
    pub(crate) fn cores_in_numa(&self, numa: usize) -> &[u32] {
        self.cores_in_numa.get(numa)
    }

    /// The (socket, NUMA) pairs of a socket, NUMA node ascending.
    pub(crate) fn socket_numa_pairs_of_socket(&self, socket: usize) -> &[u32] {
        self.socket_numa_by_socket.get(socket)
    }

    /// The (socket, NUMA) pairs of a NUMA node, socket ascending.
    pub(crate) fn socket_numa_pairs_of_numa(&self, numa: usize) -> &[u32] {
        self.socket_numa_by_numa.get(numa)
    }

    /// The socket and NUMA indexes of a (socket, NUMA) pair.
    pub(crate) fn socket_numa(&self, pair: u32) -> (u32, u32) {
        self.socket_numa[pair as usize]
    }
}

/// The CPU topology of a node (upstream `CPUTopology`).
///
/// Besides the details it keeps the CPUs of every core, socket, NUMA node
/// and uncore cache and the dense [`Layout`], built once: the assignment
/// loops ask for them per unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    details: CpuDetails,
    /// Shared: every policy built on the topology clones it.
    layout: Arc<Layout>,
}

impl CpuTopology {
    /// Build a topology from `(cpu id, info)` pairs in any order.
    pub fn new(
        cpus: impl IntoIterator<Item = (u32, CpuInfo)>,
    ) -> Result<CpuTopology, CpuTopologyError> {
        let cpus = cpus.into_iter();
        let mut entries: Vec<(u32, CpuInfo)> = Vec::with_capacity(cpus.size_hint().0);
        // Duplicates are found with a bitmap of every possible id, in input order.
        let mut seen = vec![0u64; (MAX_CPU_ID as usize + 1).div_ceil(64)];
        for (cpu, info) in cpus {
            if cpu > MAX_CPU_ID {
                return Err(CpuTopologyError::CpuIdTooLarge { cpu });
            }
            if info.numa_node_id > MAX_NUMA_NODE_ID {
                return Err(CpuTopologyError::NumaNodeIdTooLarge {
                    cpu,
                    numa_node_id: info.numa_node_id,
                });
            }
            let (word, bit) = (cpu as usize / 64, 1u64 << (cpu % 64));
            if seen[word] & bit != 0 {
                return Err(CpuTopologyError::DuplicateCpu { cpu });
            }
            seen[word] |= bit;
            entries.push((cpu, info));
        }
        if entries.is_empty() {
            return Err(CpuTopologyError::NoCpus);
        }
        // Topologies mostly come sorted; the check is cheaper than the sort.
        if !entries.is_sorted_by_key(|(cpu, _)| *cpu) {
            entries.sort_unstable_by_key(|(cpu, _)| *cpu);
        }
        let details = CpuDetails { entries };
        let layout = Arc::new(Layout::new(&details)?);
        Ok(CpuTopology { details, layout })
    }

    /// The details of every CPU.
    pub fn details(&self) -> &CpuDetails {
        &self.details
    }

    /// The info of `cpu`, if the machine has it.
    pub fn info(&self, cpu: u32) -> Option<&CpuInfo> {
        self.layout.index(cpu).map(|i| &self.details.entries[i].1)
    }

    /// The NUMA node ids that have CPUs, ascending.
    pub fn numa_node_ids(&self) -> &[u32] {
        &self.layout.ids[NUMA]
    }

    /// The dense unit indexes the assignment loops work on.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The CPUs of the unit of `kind` with id `id`, ascending (empty when unknown).
    fn unit_cpus(&self, kind: usize, id: u32) -> &[u32] {
        match self.layout.find(kind, id) {
            Some(index) => self.layout.cpus(kind, index),
            None => &[],
        }
    }

    /// All CPU ids.
    pub fn cpus(&self) -> CpuSet {
        self.details.cpus()
    }

    /// All CPUs of core `core`, ascending (empty for an unknown core).
    pub fn core_cpus(&self, core: u32) -> &[u32] {
        self.unit_cpus(CORE, core)
    }

    /// All CPUs of socket `socket`, ascending (empty for an unknown socket).
    pub fn socket_cpus(&self, socket: u32) -> &[u32] {
        self.unit_cpus(SOCKET, socket)
    }

    /// All CPUs of NUMA node `numa`, ascending (empty for an unknown node).
    pub fn numa_node_cpus(&self, numa: u32) -> &[u32] {
        self.unit_cpus(NUMA, numa)
    }

    /// All CPUs of uncore cache `uncore`, ascending (empty for an unknown cache).
    pub fn uncore_cache_cpus(&self, uncore: u32) -> &[u32] {
        self.unit_cpus(UNCORE, uncore)
    }

    /// `NumCPUs`.
    pub fn num_cpus(&self) -> usize {
        self.details.len()
    }

    /// `NumCores`: distinct physical cores.
    pub fn num_cores(&self) -> usize {
        self.layout.count(CORE)
    }

    /// `NumSockets`.
    pub fn num_sockets(&self) -> usize {
        self.layout.count(SOCKET)
    }

    /// `NumNUMANodes`.
    pub fn num_numa_nodes(&self) -> usize {
        self.layout.count(NUMA)
    }

    /// `NumUncoreCache` (CPUs without an uncore id count their socket).
    pub fn num_uncore_caches(&self) -> usize {
        self.layout.count(UNCORE)
    }

    /// `CPUsPerCore`: `NumCPUs / NumCores` (0 without cores).
    pub fn cpus_per_core(&self) -> usize {
        self.num_cpus().checked_div(self.num_cores()).unwrap_or(0)
    }

    /// `CPUsPerSocket`: `NumCPUs / NumSockets` (0 without sockets).
    pub fn cpus_per_socket(&self) -> usize {
        self.num_cpus().checked_div(self.num_sockets()).unwrap_or(0)
    }

    /// `CPUsPerNUMA`: `NumCPUs / NumNUMANodes` (0 without NUMA nodes).
    pub fn cpus_per_numa_node(&self) -> usize {
        self.num_cpus()
            .checked_div(self.num_numa_nodes())
            .unwrap_or(0)
    }

    /// `CPUsPerUncore`: `NumCPUs / NumUncoreCache` (0 without uncore caches).
    pub fn cpus_per_uncore_cache(&self) -> usize {
        self.num_cpus()
            .checked_div(self.num_uncore_caches())
            .unwrap_or(0)
    }

    /// NUMA nodes per socket, `NumNUMANodes / NumSockets` (as `isHintSocketAligned`; 0 when a NUMA node spans sockets).
    pub fn numa_nodes_per_socket(&self) -> usize {
        self.num_numa_nodes()
            .checked_div(self.num_sockets())
            .unwrap_or(0)
    }

    /// Sockets per NUMA node, `NumSockets / NumNUMANodes` (0 when a socket holds several NUMA nodes).
    pub fn sockets_per_numa_node(&self) -> usize {
        self.num_sockets()
            .checked_div(self.num_numa_nodes())
            .unwrap_or(0)
    }

    /// The core of `cpu` (`CPUCoreID`).
    pub fn cpu_core_id(&self, cpu: u32) -> Option<u32> {
        self.info(cpu).map(|info| info.core_id)
    }

    /// The socket of `cpu` (`CPUSocketID`).
    pub fn cpu_socket_id(&self, cpu: u32) -> Option<u32> {
        self.info(cpu).map(|info| info.socket_id)
    }

    /// The NUMA node of `cpu` (`CPUNUMANodeID`).
    pub fn cpu_numa_node_id(&self, cpu: u32) -> Option<u32> {
        self.info(cpu).map(|info| info.numa_node_id)
    }

    /// Whether all of `cpus` share one uncore cache (`CheckAlignment().UncoreCache`; false when empty or unknown).
    pub fn is_aligned_at_uncore_cache(&self, cpus: &CpuSet) -> bool {
        let mut caches = cpus
            .iter()
            .map(|cpu| self.info(cpu).map(CpuInfo::uncore_cache));
        match caches.next() {
            Some(Some(first)) => caches.all(|cache| cache == Some(first)),
            _ => false,
        }
    }

    /// The CPUs of the NUMA nodes set in `mask` (bit n = NUMA node n).
    pub fn cpus_in_numa_mask(&self, mask: u64) -> CpuSet {
        CpuSet::from_vec(
            mask_bits(mask)
                .into_iter()
                .flat_map(|numa| self.numa_node_cpus(numa).iter().copied())
                .collect(),
        )
    }
}

impl Layout {
    fn new(details: &CpuDetails) -> Result<Layout, CpuTopologyError> {
        let entries = &details.entries;
        let n = entries.len();
        let max_cpu = entries.last().map_or(0, |(cpu, _)| *cpu as usize);
        let mut index_of = vec![u32::MAX; max_cpu + 1];
        for (i, (cpu, _)) in entries.iter().enumerate() {
            index_of[*cpu as usize] = i as u32;
        }
        let mut unit_of = vec![[0u32; KINDS]; n];
        let mut ids: [Vec<u32>; KINDS] = Default::default();
        let mut counts = [0usize; KINDS];
        let mut keys = vec![0u64; n];
        for kind in [CORE, SOCKET, NUMA, UNCORE] {
            for (key, (_, info)) in keys.iter_mut().zip(entries) {
                *key = u64::from(match kind {
                    CORE => info.core_id,
                    SOCKET => info.socket_id,
                    NUMA => info.numa_node_id,
                    _ => info.uncore_cache(),
                });
            }
            let unique = dense_index(&keys, |i, u| unit_of[i][kind] = u);
            // The keys are u32 ids, so the conversion back is lossless.
            ids[kind] = unique.into_iter().map(|id| id as u32).collect();
            counts[kind] = ids[kind].len();
        }
        // The CPUs of every unit of the four kinds: one counting sort for all.
        let mut cpus: [Groups; KINDS] = std::array::from_fn(|kind| Groups {
            starts: vec![0; counts[kind] + 1],
            items: vec![0; n],
        });
        for units in &unit_of {
            for (kind, groups) in cpus.iter_mut().enumerate() {
                groups.starts[units[kind] as usize + 1] += 1;
            }
        }
        let mut next: [Vec<u32>; KINDS] = std::array::from_fn(|kind| {
            let starts = &mut cpus[kind].starts;
            for g in 0..counts[kind] {
                starts[g + 1] += starts[g];
            }
            starts.clone()
        });
        for (units, (cpu, _)) in unit_of.iter().zip(entries) {
            for (kind, groups) in cpus.iter_mut().enumerate() {
                let slot = &mut next[kind][units[kind] as usize];
                groups.items[*slot as usize] = *cpu;
                *slot += 1;
            }
        }
        // A core must sit in one socket and one NUMA node. Reported: the core
        // of the lowest CPU whose unit differs from that of its core's lowest CPU.
        let mut core_socket_numa = vec![None; counts[CORE]];
        for (i, units) in unit_of.iter().enumerate() {
            let here = (units[SOCKET], units[NUMA]);
            match core_socket_numa[units[CORE] as usize] {
                None => core_socket_numa[units[CORE] as usize] = Some(here),
                Some(first) if first != here => {
                    return Err(CpuTopologyError::CoreSpansUnits {
                        core_id: entries[i].1.core_id,
                    });
                }
                Some(_) => {}
            }
        }
        // Cores in ascending order, bucketed by their (single) socket and NUMA node.
        let core_unit = |c: usize| core_socket_numa[c].unwrap_or((0, 0));
        let cores_in_socket = Groups::by_group(
            counts[SOCKET],
            counts[CORE],
            |c| core_unit(c).0,
            |c| c as u32,
        );
        let cores_in_numa =
            Groups::by_group(counts[NUMA], counts[CORE], |c| core_unit(c).1, |c| c as u32);

        // The (socket, NUMA) pairs, from the cores (a core sits in one of each).
        let num_numa = counts[NUMA] as u64;
        let keys: Vec<u64> = (0..counts[CORE])
            .map(|c| {
                let (socket, numa) = core_unit(c);
                u64::from(socket) * num_numa + u64::from(numa)
            })
            .collect();
        let pairs = dense_index(&keys, |_, _| {});
        // Both halves are below the unit counts (u32), so the conversions are lossless.
        let socket_numa: Vec<(u32, u32)> = pairs
            .iter()
            .map(|&key| ((key / num_numa) as u32, (key % num_numa) as u32))
            .collect();
        let num_pairs = socket_numa.len();
        let socket_numa_by_socket = Groups::by_group(
            counts[SOCKET],
            num_pairs,
            |p| socket_numa[p].0,
            |p| p as u32,
        );
        let socket_numa_by_numa =
            Groups::by_group(counts[NUMA], num_pairs, |p| socket_numa[p].1, |p| p as u32);

        Ok(Layout {
            index_of,
            unit_of,
            ids,
            cpus,
            counts,
            cores_in_socket,
            cores_in_numa,
            socket_numa,
            socket_numa_by_socket,
            socket_numa_by_numa,
        })
    }
}

/// The set bits of `mask`, lowest first; only the set bits are visited
/// (each is cleared after it is read).
pub fn set_bits(mask: u64) -> impl Iterator<Item = u32> {
    let mut rest = mask;
    std::iter::from_fn(move || {
        (rest != 0).then(|| {
            let bit = rest.trailing_zeros();
            rest &= rest - 1;
            bit
        })
    })
}

/// The NUMA node ids set in a bitmask, ascending (`BitMask.GetBits`).
pub fn mask_bits(mask: u64) -> Vec<u32> {
    set_bits(mask).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// topoDualSocketHT from upstream policy_test.go: 12 CPUs, cpu n on core n % 6, socket/NUMA n % 2.
    fn dual_socket_ht() -> CpuTopology {
        CpuTopology::new((0..12).map(|cpu| {
            (
                cpu,
                CpuInfo {
                    core_id: cpu % 6,
                    socket_id: cpu % 2,
                    numa_node_id: cpu % 2,
                    uncore_cache_id: None,
                },
            )
        }))
        .expect("valid topology")
    }

    #[test]
    fn cpu_topology_counts_and_sizes() {
        let topo = dual_socket_ht();
        assert_eq!(
            (
                topo.num_cpus(),
                topo.num_cores(),
                topo.num_sockets(),
                topo.num_numa_nodes(),
                topo.num_uncore_caches()
            ),
            (12, 6, 2, 2, 2)
        );
        assert_eq!(
            (
                topo.cpus_per_core(),
                topo.cpus_per_socket(),
                topo.cpus_per_numa_node()
            ),
            (2, 6, 6)
        );
        assert_eq!(
            (topo.numa_nodes_per_socket(), topo.sockets_per_numa_node()),
            (1, 1)
        );
        assert_eq!(topo.cpu_core_id(7), Some(1));
        assert_eq!(topo.cpu_core_id(12), None);
        assert_eq!(topo.cpus_in_numa_mask(0b10).to_string(), "1,3,5,7,9,11");
        assert!(topo.is_aligned_at_uncore_cache(&CpuSet::parse("0,2,4").unwrap()));
        assert!(!topo.is_aligned_at_uncore_cache(&CpuSet::parse("0-1").unwrap()));
    }

    #[test]
    fn cpu_topology_details_queries() {
        let topo = dual_socket_ht();
        let free = topo
            .details()
            .keep_only(&CpuSet::parse("1-5,7-11").unwrap());
        assert_eq!(free.cpus().to_string(), "1-5,7-11");
        assert_eq!(free.cores(), vec![1, 2, 3, 4, 5]);
        assert_eq!(free.cpus_in_cores(&[0]).to_string(), "");
        assert_eq!(free.cpus_in_cores(&[0, 2]).to_string(), "2,8");
        assert_eq!(free.cpus_in_sockets(&[0]).to_string(), "2,4,8,10");
        assert_eq!(free.cores_in_sockets(&[1]), vec![1, 3, 5]);
        assert_eq!(free.sockets_in_numa_nodes(&[0, 1]), vec![0, 1]);
        assert_eq!(free.numa_nodes_in_sockets(&[1]), vec![1]);
        assert_eq!(free.cores_needed_in_uncore_cache(2, 1), vec![1, 3]);
        assert!(free.are_numa_nodes_in_same_socket(&[1]));
        assert!(!free.are_numa_nodes_in_same_socket(&[0, 1]));
        assert!(!free.are_numa_nodes_in_same_socket(&[5]));
        assert_eq!(mask_bits(0b1011), vec![0, 1, 3]);
    }

    #[test]
    fn cpu_topology_rejects_bad_input() {
        let info = CpuInfo {
            core_id: 0,
            socket_id: 0,
            numa_node_id: 0,
            uncore_cache_id: None,
        };
        assert_eq!(CpuTopology::new([]), Err(CpuTopologyError::NoCpus));
        assert_eq!(
            CpuTopology::new([(0, info), (0, info)]),
            Err(CpuTopologyError::DuplicateCpu { cpu: 0 })
        );
        assert_eq!(
            CpuTopology::new([(MAX_CPU_ID + 1, info)]),
            Err(CpuTopologyError::CpuIdTooLarge {
                cpu: MAX_CPU_ID + 1
            })
        );
        assert_eq!(
            CpuTopology::new([(
                0,
                CpuInfo {
                    numa_node_id: 64,
                    ..info
                }
            )]),
            Err(CpuTopologyError::NumaNodeIdTooLarge {
                cpu: 0,
                numa_node_id: 64
            })
        );
        assert_eq!(
            CpuTopology::new([
                (0, info),
                (
                    1,
                    CpuInfo {
                        socket_id: 1,
                        ..info
                    }
                )
            ]),
            Err(CpuTopologyError::CoreSpansUnits { core_id: 0 })
        );
    }
}
