//! The machine as the static policy starts from it: each NUMA node's memory
//! and hugepage pools ([`NumaNodeMemory`]), `--reserved-memory`, and the
//! default machine state with everything free ([`default_machine_state`]).
//!
//! Mirrors upstream `pkg/kubelet/cm/memorymanager/policy_static.go`
//! (`NewPolicyStatic`'s reserved-memory check, `getDefaultMachineState`) and
//! `HugePageResourceName` of `pkg/apis/core/v1/helper`.

use std::collections::BTreeMap;

use super::{MEMORY, MemoryError, MemoryTable, NumaNodeMap, NumaNodeState};
use crate::quantity::{Format, Quantity};

/// A hugepage pool of one NUMA node, as cAdvisor reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HugePagesInfo {
    /// Page size in KiB.
    pub page_size_kib: u64,
    /// Number of pages.
    pub num_pages: u64,
}

/// One NUMA node's memory, as cAdvisor reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaNodeMemory {
    /// The NUMA node id.
    pub id: usize,
    /// Total memory in bytes, hugepages included.
    pub memory: u64,
    /// Its hugepage pools.
    pub hugepages: Vec<HugePagesInfo>,
}

/// `--reserved-memory`: NUMA node id, resource name, bytes.
pub type SystemReservedMemory = BTreeMap<usize, BTreeMap<String, u64>>;

/// Upstream `HugePageResourceName`: `hugepages-` plus the page size as a
/// canonical binary quantity (`2048` KiB gives `hugepages-2Mi`).
pub fn hugepage_resource_name(page_size_bytes: u64) -> String {
    let bytes = i64::try_from(page_size_bytes).unwrap_or(i64::MAX);
    format!(
        "hugepages-{}",
        Quantity::from_value(bytes, Format::BinarySI).to_canonical_string()
    )
}

/// Upstream `NewPolicyStatic`'s check: some regular memory must be reserved.
pub fn check_system_reserved(reserved: &SystemReservedMemory) -> Result<(), MemoryError> {
    let total = reserved
        .values()
        .filter_map(|r| r.get(MEMORY))
        .fold(0u64, |a, &b| a.saturating_add(b));
    if total == 0 {
        Err(MemoryError::NoSystemReservedMemory)
    } else {
        Ok(())
    }
}

/// Upstream `getDefaultMachineState`: everything free, every node its own
/// group. Hugepages: `pages * size`; regular memory: the node's memory minus
/// its system reservation and all its hugepages, in upstream's wrapping
/// `uint64` arithmetic (a misconfigured node is not refused here: upstream's
/// `Start` refuses a loaded state that differs, and fills an empty one).
pub fn default_machine_state(
    nodes: &[NumaNodeMemory],
    reserved: &SystemReservedMemory,
) -> Result<NumaNodeMap, MemoryError> {
    let reserved_of = |node: usize, resource: &str| {
        reserved
            .get(&node)
            .and_then(|r| r.get(resource))
            .copied()
            .unwrap_or(0)
    };
    let mut machine = NumaNodeMap::new();
    for node in nodes {
        let mut state = NumaNodeState {
            number_of_assignments: 0,
            memory_map: BTreeMap::new(),
            cells: vec![node.id],
        };
        let mut hugepages_total = 0u64;
        for pool in &node.hugepages {
            let overflow = || MemoryError::SizeOverflow { node: node.id };
            let page_bytes = pool.page_size_kib.checked_mul(1024).ok_or_else(overflow)?;
            let total = pool
                .num_pages
                .checked_mul(page_bytes)
                .ok_or_else(overflow)?;
            let resource = hugepage_resource_name(page_bytes);
            let system_reserved = reserved_of(node.id, &resource);
            // `uint64` arithmetic, as upstream: a reservation above the
            // pool wraps, and `Start` then finds a loaded state different.
            let allocatable = total.wrapping_sub(system_reserved);
            hugepages_total = hugepages_total.checked_add(total).ok_or_else(overflow)?;
            state
                .memory_map
                .insert(resource, table(total, system_reserved, allocatable));
        }
        let system_reserved = reserved_of(node.id, MEMORY);
        // Wraps as upstream's `uint64` when hugepages and the reservation
        // exceed the node's memory (see above).
        let allocatable = node
            .memory
            .wrapping_sub(system_reserved)
            .wrapping_sub(hugepages_total);
        state.memory_map.insert(
            MEMORY.to_string(),
            table(node.memory, system_reserved, allocatable),
        );
        machine.insert(node.id, state);
    }
    Ok(machine)
}

fn table(total: u64, system_reserved: u64, allocatable: u64) -> MemoryTable {
    MemoryTable {
        total,
        system_reserved,
        allocatable,
        reserved: 0,
        free: allocatable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_manager::test_support::{GI, machine};

    #[test]
    fn default_machine_state_tables() {
        let m = machine(2);
        let mem = m[&0].memory_map[MEMORY];
        // 10Gi - 1Gi reserved - 4Gi hugepages.
        assert_eq!(
            mem,
            MemoryTable {
                total: 10 * GI,
                system_reserved: GI,
                allocatable: 5 * GI,
                reserved: 0,
                free: 5 * GI
            }
        );
        let huge = m[&1].memory_map["hugepages-1Gi"];
        assert_eq!(
            huge,
            MemoryTable {
                total: 4 * GI,
                system_reserved: 0,
                allocatable: 4 * GI,
                reserved: 0,
                free: 4 * GI
            }
        );
        assert_eq!(m[&1].cells, vec![1]);
        assert_eq!(hugepage_resource_name(2 << 20), "hugepages-2Mi");
        assert_eq!(
            check_system_reserved(&BTreeMap::new()),
            Err(MemoryError::NoSystemReservedMemory)
        );
        assert_eq!(
            MemoryError::NoSystemReservedMemory.to_string(),
            "[memorymanager] you should specify the system reserved memory"
        );
        // A reservation above the node's memory wraps, as upstream's uint64.
        let too_much = BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_string(), 11 * GI)]))]);
        let nodes = [NumaNodeMemory {
            id: 0,
            memory: 10 * GI,
            hugepages: vec![],
        }];
        let wrapped = default_machine_state(&nodes, &too_much).unwrap();
        assert_eq!(
            wrapped[&0].memory_map[MEMORY].allocatable,
            (10 * GI).wrapping_sub(11 * GI)
        );
    }
}
