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

/// The CPUs of every unit of one kind (core, socket, NUMA node or uncore
/// cache), built with one sort so the assignment loops can look a unit up
/// instead of scanning every CPU for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Units {
    /// `(unit id, end of its CPUs in cpus)`, ascending by id.
    ends: Vec<(u32, usize)>,
    /// The CPUs of each unit in turn, ascending within a unit.
    cpus: Vec<u32>,
}

impl Units {
    fn new(details: &CpuDetails, key: impl Fn(&CpuInfo) -> u32) -> Units {
        let mut pairs: Vec<(u32, u32)> = details
            .entries
            .iter()
            .map(|(cpu, info)| (key(info), *cpu))
            .collect();
        pairs.sort_unstable();
        let mut ends: Vec<(u32, usize)> = Vec::new();
        let mut cpus = Vec::with_capacity(pairs.len());
        for (unit, cpu) in pairs {
            cpus.push(cpu);
            match ends.last_mut() {
                Some((last, end)) if *last == unit => *end = cpus.len(),
                _ => ends.push((unit, cpus.len())),
            }
        }
        Units { ends, cpus }
    }

    /// The number of distinct units.
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The CPUs of `unit`, ascending; empty for an unknown unit.
    fn cpus(&self, unit: u32) -> &[u32] {
        match self.ends.binary_search_by_key(&unit, |(id, _)| *id) {
            Ok(i) => {
                let start = if i == 0 { 0 } else { self.ends[i - 1].1 };
                &self.cpus[start..self.ends[i].1]
            }
            Err(_) => &[],
        }
    }
}

/// The CPU topology of a node (upstream `CPUTopology`).
///
/// Besides the details it keeps the CPUs of every core, socket, NUMA node
/// and uncore cache, built once: the assignment loops ask for them per unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    details: CpuDetails,
    cores: Units,
    sockets: Units,
    numa_nodes: Units,
    uncore_caches: Units,
    num_cores: usize,
    num_sockets: usize,
    num_numa_nodes: usize,
    num_uncore_caches: usize,
}

impl CpuTopology {
    /// Build a topology from `(cpu id, info)` pairs in any order.
    pub fn new(
        cpus: impl IntoIterator<Item = (u32, CpuInfo)>,
    ) -> Result<CpuTopology, CpuTopologyError> {
        let mut entries: Vec<(u32, CpuInfo)> = Vec::new();
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
        entries.sort_unstable_by_key(|(cpu, _)| *cpu);
        let details = CpuDetails { entries };
        let cores = Units::new(&details, |info| info.core_id);
        // A core must sit in one socket and one NUMA node. Reported: the core
        // of the lowest CPU whose unit differs from that of its core's lowest
        // CPU, as a walk in CPU order finds it.
        let mut spanning: Option<(u32, u32)> = None;
        for &(core, _) in &cores.ends {
            let unit = |cpu: u32| {
                details
                    .get(cpu)
                    .map(|info| (info.socket_id, info.numa_node_id))
            };
            let cpus = cores.cpus(core);
            let first = unit(cpus[0]);
            if let Some(&cpu) = cpus.iter().find(|&&cpu| unit(cpu) != first)
                && spanning.is_none_or(|(lowest, _)| cpu < lowest)
            {
                spanning = Some((cpu, core));
            }
        }
        if let Some((_, core_id)) = spanning {
            return Err(CpuTopologyError::CoreSpansUnits { core_id });
        }
        let sockets = Units::new(&details, |info| info.socket_id);
        let numa_nodes = Units::new(&details, |info| info.numa_node_id);
        let uncore_caches = Units::new(&details, CpuInfo::uncore_cache);
        Ok(CpuTopology {
            num_cores: cores.len(),
            num_sockets: sockets.len(),
            num_numa_nodes: numa_nodes.len(),
            num_uncore_caches: uncore_caches.len(),
            details,
            cores,
            sockets,
            numa_nodes,
            uncore_caches,
        })
    }

    /// The details of every CPU.
    pub fn details(&self) -> &CpuDetails {
        &self.details
    }

    /// The info of `cpu`, if the machine has it.
    pub fn info(&self, cpu: u32) -> Option<&CpuInfo> {
        self.details.get(cpu)
    }

    /// All CPU ids.
    pub fn cpus(&self) -> CpuSet {
        self.details.cpus()
    }

    /// All CPUs of core `core`, ascending (empty for an unknown core).
    pub fn core_cpus(&self, core: u32) -> &[u32] {
        self.cores.cpus(core)
    }

    /// All CPUs of socket `socket`, ascending (empty for an unknown socket).
    pub fn socket_cpus(&self, socket: u32) -> &[u32] {
        self.sockets.cpus(socket)
    }

    /// All CPUs of NUMA node `numa`, ascending (empty for an unknown node).
    pub fn numa_node_cpus(&self, numa: u32) -> &[u32] {
        self.numa_nodes.cpus(numa)
    }

    /// All CPUs of uncore cache `uncore`, ascending (empty for an unknown cache).
    pub fn uncore_cache_cpus(&self, uncore: u32) -> &[u32] {
        self.uncore_caches.cpus(uncore)
    }

    /// `NumCPUs`.
    pub fn num_cpus(&self) -> usize {
        self.details.len()
    }

    /// `NumCores`: distinct physical cores.
    pub fn num_cores(&self) -> usize {
        self.num_cores
    }

    /// `NumSockets`.
    pub fn num_sockets(&self) -> usize {
        self.num_sockets
    }

    /// `NumNUMANodes`.
    pub fn num_numa_nodes(&self) -> usize {
        self.num_numa_nodes
    }

    /// `NumUncoreCache` (CPUs without an uncore id count their socket).
    pub fn num_uncore_caches(&self) -> usize {
        self.num_uncore_caches
    }

    /// `CPUsPerCore`: `NumCPUs / NumCores` (0 without cores).
    pub fn cpus_per_core(&self) -> usize {
        self.num_cpus().checked_div(self.num_cores).unwrap_or(0)
    }

    /// `CPUsPerSocket`: `NumCPUs / NumSockets` (0 without sockets).
    pub fn cpus_per_socket(&self) -> usize {
        self.num_cpus().checked_div(self.num_sockets).unwrap_or(0)
    }

    /// `CPUsPerNUMA`: `NumCPUs / NumNUMANodes` (0 without NUMA nodes).
    pub fn cpus_per_numa_node(&self) -> usize {
        self.num_cpus()
            .checked_div(self.num_numa_nodes)
            .unwrap_or(0)
    }

    /// `CPUsPerUncore`: `NumCPUs / NumUncoreCache` (0 without uncore caches).
    pub fn cpus_per_uncore_cache(&self) -> usize {
        self.num_cpus()
            .checked_div(self.num_uncore_caches)
            .unwrap_or(0)
    }

    /// NUMA nodes per socket, `NumNUMANodes / NumSockets` (as `isHintSocketAligned`; 0 when a NUMA node spans sockets).
    pub fn numa_nodes_per_socket(&self) -> usize {
        self.num_numa_nodes
            .checked_div(self.num_sockets)
            .unwrap_or(0)
    }

    /// Sockets per NUMA node, `NumSockets / NumNUMANodes` (0 when a socket holds several NUMA nodes).
    pub fn sockets_per_numa_node(&self) -> usize {
        self.num_sockets
            .checked_div(self.num_numa_nodes)
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

/// The NUMA node ids set in a bitmask, ascending (`BitMask.GetBits`).
pub fn mask_bits(mask: u64) -> Vec<u32> {
    (0..64u32).filter(|bit| mask & (1u64 << bit) != 0).collect()
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
