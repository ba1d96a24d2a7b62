//! The node topology, decoded ([`Machine`]): NUMA nodes with their memory,
//! hugepages and distances, and the CPU topology.
//!
//! Upstream the kubelet reads the machine from cAdvisor (`MachineInfo`) and
//! `pkg/kubelet/cm/container_manager_linux.go` hands it to each manager,
//! which derives its own view: `cpumanager/topology/topology.go`'s
//! `Discover` (the CPU topology), `topologymanager/numa_info.go`'s
//! `NewNUMAInfo` (NUMA nodes and distances) and the memory manager's
//! per-NUMA memory and hugepages. Here the host sends the machine through
//! the WIT with every call, and [`Machine`] checks it and gives each
//! manager its view.

use std::collections::{BTreeMap, BTreeSet};

use super::decode::{duplicate, field_error, invalid};
use crate::cpu_topology::{CpuInfo, CpuTopology, CpuTopologyError, MAX_NUMA_NODE_ID};
use crate::cpuset::{CpuSet, MAX_CPU_ID};
use crate::memory_manager::{HugePagesInfo, NumaNodeMemory};
use crate::topology as tm;
use crate::wit::{self, ErrorReason, FieldError};

/// The most NUMA nodes a topology may list. Hint generation enumerates every
/// subset of the NUMA nodes (`IterateBitMasks`), 2^n - 1 of them, so the
/// bound keeps one call within its budget; upstream warns above 8 nodes.
pub const MAX_NUMA_NODES: usize = 16;

/// One decoded NUMA node.
#[derive(Clone, Debug)]
pub(super) struct NumaNode {
    memory: NumaNodeMemory,
    distances: Option<Vec<u64>>,
}

/// The node topology, decoded.
#[derive(Clone, Debug)]
pub struct Machine {
    /// NUMA nodes by id.
    pub(super) numa: BTreeMap<usize, NumaNode>,
    /// The CPU topology; `Err` when the topology lists no CPUs.
    cpu: std::result::Result<CpuTopology, CpuTopologyError>,
}

impl Machine {
    /// Decode and check a WIT topology; problems are pushed to `errors` with
    /// paths under `topology`.
    pub fn decode(topology: &wit::NodeTopology, errors: &mut Vec<FieldError>) -> Machine {
        let mut numa = BTreeMap::new();
        if topology.numa_nodes.len() > MAX_NUMA_NODES {
            errors.push(field_error(
                "topology.numaNodes",
                ErrorReason::TooLong,
                format!(
                    "at most {MAX_NUMA_NODES} NUMA nodes are supported (hint generation enumerates every subset of them)"
                ),
                Some(topology.numa_nodes.len().to_string()),
            ));
        }
        // NUMA node ids (at most 63) already decoded, for the CPU loop below.
        let mut known_numa = 0u64;
        for (i, node) in topology.numa_nodes.iter().enumerate() {
            // Formatted only for an error.
            let path = || format!("topology.numaNodes[{i}]");
            if node.id > MAX_NUMA_NODE_ID {
                errors.push(invalid(
                    format!("{}.id", path()),
                    format!("NUMA node ids must be at most {MAX_NUMA_NODE_ID}"),
                    &node.id.to_string(),
                ));
                continue;
            }
            let mut hugepages = Vec::new();
            let mut sizes = BTreeSet::new();
            for (j, pool) in node.hugepages.iter().enumerate() {
                let pool_path = || format!("{}.hugepages[{j}].pageSizeBytes", path());
                if pool.page_size_bytes == 0 || pool.page_size_bytes % 1024 != 0 {
                    errors.push(invalid(
                        pool_path(),
                        "must be a positive multiple of 1024",
                        &pool.page_size_bytes.to_string(),
                    ));
                    continue;
                }
                if !sizes.insert(pool.page_size_bytes) {
                    errors.push(duplicate(pool_path(), &pool.page_size_bytes.to_string()));
                    continue;
                }
                hugepages.push(HugePagesInfo {
                    page_size_kib: pool.page_size_bytes / 1024,
                    num_pages: pool.pages,
                });
            }
            let id = node.id as usize;
            let decoded = NumaNode {
                memory: NumaNodeMemory {
                    id,
                    memory: node.memory_bytes,
                    hugepages,
                },
                distances: (!node.distances.is_empty())
                    .then(|| node.distances.iter().map(|&d| u64::from(d)).collect()),
            };
            if numa.insert(id, decoded).is_some() {
                errors.push(duplicate(format!("{}.id", path()), &node.id.to_string()));
            }
            known_numa |= 1u64 << node.id;
        }
        let mut cpus = Vec::with_capacity(topology.cpus.len());
        // Every id is at most MAX_CPU_ID once checked, so a bitmap finds duplicates.
        let mut seen = vec![0u64; (MAX_CPU_ID as usize + 1).div_ceil(64)];
        for (i, cpu) in topology.cpus.iter().enumerate() {
            // Formatted only for an error: a big machine lists hundreds of CPUs.
            let path = || format!("topology.cpus[{i}]");
            if cpu.id > MAX_CPU_ID {
                errors.push(invalid(
                    format!("{}.id", path()),
                    format!("CPU ids must be at most {MAX_CPU_ID}"),
                    &cpu.id.to_string(),
                ));
                continue;
            }
            let (word, bit) = (cpu.id as usize / 64, 1u64 << (cpu.id % 64));
            if seen[word] & bit != 0 {
                errors.push(duplicate(format!("{}.id", path()), &cpu.id.to_string()));
                continue;
            }
            seen[word] |= bit;
            if cpu.numa_node > MAX_NUMA_NODE_ID || known_numa & (1u64 << cpu.numa_node) == 0 {
                errors.push(invalid(
                    format!("{}.numaNode", path()),
                    "the CPU's NUMA node is not listed in topology.numaNodes",
                    &cpu.numa_node.to_string(),
                ));
                continue;
            }
            cpus.push((
                cpu.id,
                CpuInfo {
                    core_id: cpu.core_id,
                    socket_id: cpu.socket_id,
                    numa_node_id: cpu.numa_node,
                    uncore_cache_id: cpu.uncore_cache_id,
                },
            ));
        }
        let cpu = CpuTopology::new(cpus);
        if let Err(err) = &cpu
            && *err != CpuTopologyError::NoCpus
        {
            errors.push(field_error(
                "topology.cpus",
                ErrorReason::Invalid,
                err.to_string(),
                None,
            ));
        }
        Machine { numa, cpu }
    }

    /// The CPU topology, or the field error of a topology without CPUs.
    pub(super) fn cpu_topology(&self) -> std::result::Result<&CpuTopology, FieldError> {
        self.cpu.as_ref().map_err(|err| {
            field_error(
                "topology.cpus",
                ErrorReason::Required,
                format!("the CPU manager needs the node's CPUs ({err})"),
                None,
            )
        })
    }

    /// Every CPU of the machine (empty without CPUs).
    pub(super) fn all_cpus(&self) -> CpuSet {
        self.cpu.as_ref().map(CpuTopology::cpus).unwrap_or_default()
    }

    pub(super) fn topology_nodes(&self) -> Vec<tm::NumaNode> {
        self.numa
            .iter()
            .map(|(&id, node)| tm::NumaNode {
                id,
                distances: node.distances.clone(),
            })
            .collect()
    }

    pub(super) fn memory_nodes(&self) -> Vec<NumaNodeMemory> {
        self.numa.values().map(|node| node.memory.clone()).collect()
    }
}
