//! The node topology the resource managers read: [`SysfsTopology`] (what
//! sysfs says) converted to the WIT `node-topology` (what the kubelet gets
//! from cAdvisor).
//!
//! The conversion decides nothing: core ids are the kubelet's machine-wide
//! ids ([`SysfsTopology::kubelet_core_ids`]), uncore cache ids the kubelet's
//! L3 grouping with its socket fallback
//! ([`SysfsTopology::kubelet_uncore_cache_ids`]), and every NUMA node keeps
//! its memory, huge pages and distance row as read.

use std::path::Path;

use anyhow::Result;

use crate::bindings::{HugepagePool, NodeTopology, NumaNodeInfo, TopologyCpu};
use crate::sysfs::{SysfsTopology, read_topology};

/// Convert a topology read from sysfs to the WIT topology.
pub fn node_topology(topology: &SysfsTopology) -> NodeTopology {
    let core_ids = topology.kubelet_core_ids();
    let uncore_ids = topology.kubelet_uncore_cache_ids();
    NodeTopology {
        cpus: topology
            .cpus
            .iter()
            .map(|cpu| TopologyCpu {
                id: cpu.id,
                core_id: core_ids.get(&cpu.id).copied().unwrap_or(cpu.id),
                socket_id: cpu.socket_id,
                numa_node: cpu.numa_node,
                uncore_cache_id: uncore_ids.get(&cpu.id).copied(),
            })
            .collect(),
        numa_nodes: topology
            .numa_nodes
            .iter()
            .map(|node| NumaNodeInfo {
                id: node.id,
                memory_bytes: node.memory_bytes,
                hugepages: node
                    .hugepages
                    .iter()
                    .map(|(&page_size_bytes, &pages)| HugepagePool {
                        page_size_bytes,
                        pages,
                    })
                    .collect(),
                distances: node.distances.clone(),
            })
            .collect(),
    }
}

/// Read the topology below `sysfs_root` (`/` for this machine) and convert it.
pub fn read_node_topology(sysfs_root: &Path) -> Result<NodeTopology> {
    Ok(node_topology(&read_topology(sysfs_root)?))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sysfs::{CpuInfo, NumaNodeInfo as SysfsNode};

    #[test]
    fn converts_ids_memory_and_hugepages() {
        // Two packages whose sysfs core ids repeat: the kubelet names cores by their lowest CPU.
        let cpu = |id, core_id, socket_id, numa_node| CpuInfo {
            id,
            core_id,
            socket_id,
            die_id: None,
            cluster_id: None,
            numa_node,
            uncore_cache_id: Some(socket_id),
        };
        let topology = SysfsTopology {
            cpus: vec![
                cpu(0, 0, 0, 0),
                cpu(1, 0, 1, 1),
                cpu(2, 0, 0, 0),
                cpu(3, 0, 1, 1),
            ],
            numa_nodes: vec![
                SysfsNode {
                    id: 0,
                    cpus: vec![0, 2],
                    memory_bytes: 8 << 30,
                    hugepages: BTreeMap::from([(2 << 20, 16)]),
                    distances: vec![10, 21],
                },
                SysfsNode {
                    id: 1,
                    cpus: vec![1, 3],
                    memory_bytes: 4 << 30,
                    hugepages: BTreeMap::new(),
                    distances: vec![21, 10],
                },
            ],
        };
        let wit = node_topology(&topology);
        let cores: Vec<(u32, u32)> = wit.cpus.iter().map(|c| (c.id, c.core_id)).collect();
        assert_eq!(cores, vec![(0, 0), (1, 1), (2, 0), (3, 1)]);
        assert_eq!(wit.numa_nodes[0].hugepages[0].page_size_bytes, 2 << 20);
        assert_eq!(wit.numa_nodes[0].hugepages[0].pages, 16);
        assert_eq!(wit.numa_nodes[1].memory_bytes, 4 << 30);
        assert_eq!(wit.numa_nodes[1].distances, vec![21, 10]);
        // One L3 per node spanning the whole node: the socket id stands in.
        assert_eq!(wit.cpus[1].uncore_cache_id, Some(1));
    }
}
