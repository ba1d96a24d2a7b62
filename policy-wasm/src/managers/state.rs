//! Both managers' state across the WIT: decoding a `manager-state` (field
//! paths under the caller's base, `state`) into `States`, and encoding it
//! back.
//!
//! Mirrors the checkpoints upstream keeps: `cpumanager/state/checkpoint.go`
//! (policy name, default cpuset, per-container entries, KEP-5526's pod
//! entries) and `memorymanager/state/checkpoint.go` (policy name, machine
//! state, per-container and pod memory blocks). Decoding checks only the
//! shape; whether the state fits the configuration is `Start`'s question
//! (`container_manager`).

use std::collections::BTreeMap;

use super::decode::{duplicate, invalid, numa_ids, parse_cpuset};
use crate::cpu_manager::CpuManagerState;
use crate::cpu_topology::MAX_NUMA_NODE_ID;
use crate::memory_manager::{Block, MemoryState, MemoryTable, NumaNodeState};
use crate::wit::{self, FieldError};

/// Both managers' state, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct States {
    pub(super) cpu_policy: String,
    pub(super) cpu: CpuManagerState,
    pub(super) memory_policy: String,
    pub(super) memory: MemoryState,
}

fn decode_blocks(
    blocks: &[wit::MemoryBlock],
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<Block> {
    blocks
        .iter()
        .enumerate()
        .map(|(i, block)| {
            let path = format!("{field}[{i}]");
            let mut ids = numa_ids(
                &block.numa_affinity,
                &format!("{path}.numaAffinity"),
                errors,
            );
            ids.sort_unstable();
            ids.dedup();
            Block {
                numa_affinity: ids,
                resource: block.resource_name.clone(),
                size: block.size,
            }
        })
        .collect()
}

pub(super) fn decode_state(
    state: &wit::ManagerState,
    base: &str,
    errors: &mut Vec<FieldError>,
) -> States {
    let cpu_base = format!("{base}.cpu");
    let mut cpu = CpuManagerState {
        default_cpuset: parse_cpuset(
            &state.cpu.default_cpuset,
            &format!("{cpu_base}.defaultCpuset"),
            errors,
        ),
        ..CpuManagerState::default()
    };
    for (i, pod) in state.cpu.entries.iter().enumerate() {
        let path = format!("{cpu_base}.entries[{i}]");
        if cpu.assignments.contains_key(&pod.pod_uid) {
            errors.push(duplicate(format!("{path}.podUid"), &pod.pod_uid));
            continue;
        }
        let containers = cpu.assignments.entry(pod.pod_uid.clone()).or_default();
        for (j, entry) in pod.containers.iter().enumerate() {
            let cpath = format!("{path}.containers[{j}]");
            let cpus = parse_cpuset(&entry.cpuset, &format!("{cpath}.cpuset"), errors);
            if containers.insert(entry.container.clone(), cpus).is_some() {
                errors.push(duplicate(format!("{cpath}.container"), &entry.container));
            }
        }
    }
    for (i, pod) in state.cpu.pod_entries.iter().enumerate() {
        let path = format!("{cpu_base}.podEntries[{i}]");
        let cpus = parse_cpuset(&pod.cpuset, &format!("{path}.cpuset"), errors);
        if cpu
            .pod_assignments
            .insert(pod.pod_uid.clone(), cpus)
            .is_some()
        {
            errors.push(duplicate(format!("{path}.podUid"), &pod.pod_uid));
        }
    }

    let memory_base = format!("{base}.memory");
    let mut memory = MemoryState::default();
    for (i, node) in state.memory.machine_state.iter().enumerate() {
        let path = format!("{memory_base}.machineState[{i}]");
        if node.numa_node > MAX_NUMA_NODE_ID {
            errors.push(invalid(
                format!("{path}.numaNode"),
                format!("NUMA node ids must be at most {MAX_NUMA_NODE_ID}"),
                &node.numa_node.to_string(),
            ));
            continue;
        }
        if node.number_of_assignments < 0 {
            errors.push(invalid(
                format!("{path}.numberOfAssignments"),
                "must be greater than or equal to 0",
                &node.number_of_assignments.to_string(),
            ));
        }
        let mut memory_map = BTreeMap::new();
        for (j, table) in node.memory_map.iter().enumerate() {
            let decoded = MemoryTable {
                total: table.total,
                system_reserved: table.system_reserved,
                allocatable: table.allocatable,
                reserved: table.reserved,
                free: table.free,
            };
            if memory_map
                .insert(table.resource_name.clone(), decoded)
                .is_some()
            {
                errors.push(duplicate(
                    format!("{path}.memoryMap[{j}].resourceName"),
                    &table.resource_name,
                ));
            }
        }
        let decoded = NumaNodeState {
            number_of_assignments: node.number_of_assignments,
            memory_map,
            cells: numa_ids(&node.cells, &format!("{path}.cells"), errors),
        };
        if memory
            .machine_state
            .insert(node.numa_node as usize, decoded)
            .is_some()
        {
            errors.push(duplicate(
                format!("{path}.numaNode"),
                &node.numa_node.to_string(),
            ));
        }
    }
    for (i, pod) in state.memory.entries.iter().enumerate() {
        let path = format!("{memory_base}.entries[{i}]");
        if memory.assignments.contains_key(&pod.pod_uid) {
            errors.push(duplicate(format!("{path}.podUid"), &pod.pod_uid));
            continue;
        }
        let containers = memory.assignments.entry(pod.pod_uid.clone()).or_default();
        for (j, entry) in pod.containers.iter().enumerate() {
            let cpath = format!("{path}.containers[{j}]");
            let blocks = decode_blocks(&entry.blocks, &format!("{cpath}.blocks"), errors);
            if containers.insert(entry.container.clone(), blocks).is_some() {
                errors.push(duplicate(format!("{cpath}.container"), &entry.container));
            }
        }
    }
    for (i, pod) in state.memory.pod_entries.iter().enumerate() {
        let path = format!("{memory_base}.podEntries[{i}]");
        let blocks = decode_blocks(&pod.blocks, &format!("{path}.blocks"), errors);
        if memory
            .pod_assignments
            .insert(pod.pod_uid.clone(), blocks)
            .is_some()
        {
            errors.push(duplicate(format!("{path}.podUid"), &pod.pod_uid));
        }
    }
    States {
        cpu_policy: state.cpu.policy_name.clone(),
        cpu,
        memory_policy: state.memory.policy_name.clone(),
        memory,
    }
}

pub(super) fn encode_blocks(blocks: &[Block]) -> Vec<wit::MemoryBlock> {
    blocks
        .iter()
        .map(|block| wit::MemoryBlock {
            numa_affinity: block.numa_affinity.iter().map(|&id| id as u32).collect(),
            resource_name: block.resource.clone(),
            size: block.size,
        })
        .collect()
}

pub(super) fn encode_state(states: &States) -> wit::ManagerState {
    let cpu = &states.cpu;
    let memory = &states.memory;
    wit::ManagerState {
        cpu: wit::CpuManagerState {
            policy_name: states.cpu_policy.clone(),
            default_cpuset: cpu.default_cpuset.to_string(),
            entries: cpu
                .assignments
                .iter()
                .map(|(uid, containers)| wit::PodCpuEntries {
                    pod_uid: uid.clone(),
                    containers: containers
                        .iter()
                        .map(|(name, cpus)| wit::ContainerCpuset {
                            container: name.clone(),
                            cpuset: cpus.to_string(),
                        })
                        .collect(),
                })
                .collect(),
            pod_entries: cpu
                .pod_assignments
                .iter()
                .map(|(uid, cpus)| wit::PodCpuset {
                    pod_uid: uid.clone(),
                    cpuset: cpus.to_string(),
                })
                .collect(),
        },
        memory: wit::MemoryManagerState {
            policy_name: states.memory_policy.clone(),
            machine_state: memory
                .machine_state
                .iter()
                .map(|(&id, node)| wit::NumaMemoryState {
                    numa_node: id as u32,
                    number_of_assignments: node.number_of_assignments,
                    memory_map: node
                        .memory_map
                        .iter()
                        .map(|(resource, t)| wit::MemoryTable {
                            resource_name: resource.clone(),
                            total: t.total,
                            system_reserved: t.system_reserved,
                            allocatable: t.allocatable,
                            reserved: t.reserved,
                            free: t.free,
                        })
                        .collect(),
                    cells: node.cells.iter().map(|&c| c as u32).collect(),
                })
                .collect(),
            entries: memory
                .assignments
                .iter()
                .map(|(uid, containers)| wit::PodMemoryEntries {
                    pod_uid: uid.clone(),
                    containers: containers
                        .iter()
                        .map(|(name, blocks)| wit::ContainerMemory {
                            container: name.clone(),
                            blocks: encode_blocks(blocks),
                        })
                        .collect(),
                })
                .collect(),
            pod_entries: memory
                .pod_assignments
                .iter()
                .map(|(uid, blocks)| wit::PodMemory {
                    pod_uid: uid.clone(),
                    blocks: encode_blocks(blocks),
                })
                .collect(),
        },
    }
}
