//! The node topology ([`Machine`]): NUMA nodes with their memory,
//! hugepages and distances, and the CPU topology.
//!
//! Upstream the kubelet reads the machine from cAdvisor (`MachineInfo`) and
//! `pkg/kubelet/cm/container_manager_linux.go` hands it to each manager,
//! which derives its own view: `cpumanager/topology/topology.go`'s
//! `Discover` (the CPU topology), `topologymanager/numa_info.go`'s
//! `NewNUMAInfo` (NUMA nodes and distances) and the memory manager's
//! per-NUMA memory and hugepages. Here the host sends the machine with
//! every call; the boundary (`crate::boundary`) checks and decodes it into
//! a [`Machine`], which gives each manager its view.

use std::collections::{BTreeMap, BTreeSet};

use super::errors::{FieldError, FieldErrorType};
use crate::cpu_topology::{CpuTopology, CpuTopologyError};
use crate::cpuset::CpuSet;
use crate::memory_manager::NumaNodeMemory;
use crate::topology as tm;

/// The most NUMA nodes a topology may list. Hint generation enumerates every
/// subset of the NUMA nodes (`IterateBitMasks`), 2^n - 1 of them, so the
/// bound keeps one call within its budget; upstream warns above 8 nodes.
pub const MAX_NUMA_NODES: usize = 16;

/// One NUMA node of the machine.
#[derive(Clone, Debug)]
pub struct NumaNode {
    /// Its memory and hugepages, as the memory manager sees them.
    pub memory: NumaNodeMemory,
    /// Its distances to the NUMA nodes by id (`None` when not given).
    pub distances: Option<Vec<u64>>,
}

/// The node topology: its NUMA nodes and its CPUs.
#[derive(Clone, Debug)]
pub struct Machine {
    /// NUMA nodes by id.
    pub(super) numa: BTreeMap<usize, NumaNode>,
    /// The CPU topology; `Err` when the topology lists no CPUs.
    cpu: std::result::Result<CpuTopology, CpuTopologyError>,
}

impl Machine {
    /// A machine from its NUMA nodes by id and its CPU topology (`Err`
    /// when the topology lists no CPUs).
    pub fn new(
        numa: BTreeMap<usize, NumaNode>,
        cpu: std::result::Result<CpuTopology, CpuTopologyError>,
    ) -> Machine {
        Machine { numa, cpu }
    }

    /// The NUMA node ids, ascending (the `cpuset.mems` of a cgroup
    /// without memory blocks).
    pub fn numa_node_ids(&self) -> BTreeSet<u32> {
        // Ids are at most MAX_NUMA_NODE_ID once decoded.
        self.numa.keys().map(|&id| id as u32).collect()
    }

    /// The CPU topology, or the field error of a topology without CPUs.
    pub fn cpu_topology(&self) -> std::result::Result<&CpuTopology, FieldError> {
        self.cpu.as_ref().map_err(|err| {
            FieldError::new(
                "topology.cpus",
                FieldErrorType::Required,
                format!("the CPU manager needs the node's CPUs ({err})"),
                None,
            )
        })
    }

    /// Every CPU of the machine (empty without CPUs).
    pub fn all_cpus(&self) -> CpuSet {
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
