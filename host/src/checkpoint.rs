//! Crash-safe checkpoints of the resource managers' state, in the spirit of
//! kubelet's `cpu_manager_state` and `memory_manager_state` files.
//!
//! The component is pure (state in, new state out); this module persists
//! what it returns, both files in one commit of the locked state directory
//! ([`crate::state_dir`]): a crash leaves both old or both new, never one of
//! each. Loading verifies a checksum and the policy name and refuses a
//! corrupt or mismatched checkpoint with a clear error instead of guessing;
//! reads are bounded and never follow a symlink or block on a FIFO.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::bindings::{
    ContainerMemory, CpuManagerState, ManagerState, MemoryBlock, MemoryManagerState, MemoryTable,
    NumaMemoryState, PodCpuEntries, PodCpuset, PodMemory, PodMemoryEntries,
};
use crate::state_dir::StateDir;

/// File name of the CPU manager checkpoint (as the kubelet names it).
pub const CPU_CHECKPOINT: &str = "cpu_manager_state";
/// File name of the memory manager checkpoint.
pub const MEMORY_CHECKPOINT: &str = "memory_manager_state";

/// `cpu_manager_state` on disk.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CpuCheckpoint {
    policy_name: String,
    default_cpu_set: String,
    #[serde(default)]
    entries: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    pod_entries: BTreeMap<String, PodCpuCheckpoint>,
    checksum: u64,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodCpuCheckpoint {
    cpu_set: String,
}

/// `memory_manager_state` on disk.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MemoryCheckpoint {
    policy_name: String,
    #[serde(default)]
    machine_state: BTreeMap<u32, NumaCheckpoint>,
    #[serde(default)]
    entries: BTreeMap<String, BTreeMap<String, Vec<BlockCheckpoint>>>,
    #[serde(default)]
    pod_entries: BTreeMap<String, PodMemoryCheckpoint>,
    checksum: u64,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct NumaCheckpoint {
    number_of_assignments: i64,
    memory_map: BTreeMap<String, TableCheckpoint>,
    cells: Vec<u32>,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TableCheckpoint {
    total: u64,
    system_reserved: u64,
    allocatable: u64,
    reserved: u64,
    free: u64,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BlockCheckpoint {
    numa_affinity: Vec<u32>,
    #[serde(rename = "type")]
    resource: String,
    size: u64,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PodMemoryCheckpoint {
    memory_blocks: Vec<BlockCheckpoint>,
}

/// FNV-1a (64-bit) over the checkpoint's JSON with the checksum field zeroed.
fn checksum<T: Serialize>(value: &T) -> Result<u64> {
    let bytes = serde_json::to_vec(value)?;
    Ok(bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    }))
}

fn to_blocks(blocks: &[MemoryBlock]) -> Vec<BlockCheckpoint> {
    blocks
        .iter()
        .map(|b| BlockCheckpoint {
            numa_affinity: b.numa_affinity.clone(),
            resource: b.resource_name.clone(),
            size: b.size,
        })
        .collect()
}

fn from_blocks(blocks: &[BlockCheckpoint]) -> Vec<MemoryBlock> {
    blocks
        .iter()
        .map(|b| MemoryBlock {
            numa_affinity: b.numa_affinity.clone(),
            resource_name: b.resource.clone(),
            size: b.size,
        })
        .collect()
}

fn cpu_checkpoint(state: &CpuManagerState) -> Result<CpuCheckpoint> {
    let mut checkpoint = CpuCheckpoint {
        policy_name: state.policy_name.clone(),
        default_cpu_set: state.default_cpuset.clone(),
        entries: state
            .entries
            .iter()
            .map(|pod| {
                let containers = pod
                    .containers
                    .iter()
                    .map(|c| (c.container.clone(), c.cpuset.clone()))
                    .collect();
                (pod.pod_uid.clone(), containers)
            })
            .collect(),
        pod_entries: state
            .pod_entries
            .iter()
            .map(|p| {
                (
                    p.pod_uid.clone(),
                    PodCpuCheckpoint {
                        cpu_set: p.cpuset.clone(),
                    },
                )
            })
            .collect(),
        checksum: 0,
    };
    checkpoint.checksum = checksum(&checkpoint)?;
    Ok(checkpoint)
}

fn memory_checkpoint(state: &MemoryManagerState) -> Result<MemoryCheckpoint> {
    let mut checkpoint = MemoryCheckpoint {
        policy_name: state.policy_name.clone(),
        machine_state: state
            .machine_state
            .iter()
            .map(|n| {
                let tables = n
                    .memory_map
                    .iter()
                    .map(|t| {
                        let table = TableCheckpoint {
                            total: t.total,
                            system_reserved: t.system_reserved,
                            allocatable: t.allocatable,
                            reserved: t.reserved,
                            free: t.free,
                        };
                        (t.resource_name.clone(), table)
                    })
                    .collect();
                let numa = NumaCheckpoint {
                    number_of_assignments: n.number_of_assignments,
                    memory_map: tables,
                    cells: n.cells.clone(),
                };
                (n.numa_node, numa)
            })
            .collect(),
        entries: state
            .entries
            .iter()
            .map(|pod| {
                let containers = pod
                    .containers
                    .iter()
                    .map(|c| (c.container.clone(), to_blocks(&c.blocks)))
                    .collect();
                (pod.pod_uid.clone(), containers)
            })
            .collect(),
        pod_entries: state
            .pod_entries
            .iter()
            .map(|p| {
                (
                    p.pod_uid.clone(),
                    PodMemoryCheckpoint {
                        memory_blocks: to_blocks(&p.blocks),
                    },
                )
            })
            .collect(),
        checksum: 0,
    };
    checkpoint.checksum = checksum(&checkpoint)?;
    Ok(checkpoint)
}

/// Write `bytes` to `path` atomically and durably (see [`crate::state_dir`]).
pub use crate::state_dir::write_atomically;

/// The checkpoint files of `state`, by file name, as one commit writes them.
pub fn files(state: &ManagerState) -> Result<Vec<(&'static str, Vec<u8>)>> {
    Ok(vec![
        (
            CPU_CHECKPOINT,
            serde_json::to_vec_pretty(&cpu_checkpoint(&state.cpu)?)?,
        ),
        (
            MEMORY_CHECKPOINT,
            serde_json::to_vec_pretty(&memory_checkpoint(&state.memory)?)?,
        ),
    ])
}

/// Persist both managers' state in the locked `dir`, as one commit: a
/// crash leaves both files old or both new.
pub fn save(dir: &StateDir, state: &ManagerState) -> Result<()> {
    dir.commit(&files(state)?)
}

fn read_checkpoint(dir: &Path, name: &str) -> Result<Option<String>> {
    let path = dir.join(name);
    match crate::state_dir::read_file(dir, name)? {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| corrupt(&path, "not UTF-8")),
    }
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "{}: corrupt checkpoint ({why}); refusing to guess the node's assignments: drain the node and remove the file to start fresh",
        path.display()
    )
}

/// Load the checkpoints in `dir` (missing files give an empty state). The
/// policy names they record are passed on as they are: whether they match
/// the configured policies is the managers' start-up check, in the
/// component.
pub fn load(dir: &Path) -> Result<ManagerState> {
    let mut state = crate::empty_manager_state();
    let cpu_path = dir.join(CPU_CHECKPOINT);
    if let Some(text) = read_checkpoint(dir, CPU_CHECKPOINT)? {
        let mut checkpoint: CpuCheckpoint =
            serde_json::from_str(&text).map_err(|e| corrupt(&cpu_path, e))?;
        let stored = std::mem::take(&mut checkpoint.checksum);
        if checksum(&checkpoint)? != stored {
            return Err(corrupt(&cpu_path, "checksum mismatch"));
        }
        state.cpu = CpuManagerState {
            policy_name: checkpoint.policy_name,
            default_cpuset: checkpoint.default_cpu_set,
            entries: checkpoint
                .entries
                .into_iter()
                .map(|(pod_uid, containers)| PodCpuEntries {
                    pod_uid,
                    containers: containers
                        .into_iter()
                        .map(|(container, cpuset)| crate::bindings::ContainerCpuset {
                            container,
                            cpuset,
                        })
                        .collect(),
                })
                .collect(),
            pod_entries: checkpoint
                .pod_entries
                .into_iter()
                .map(|(pod_uid, p)| PodCpuset {
                    pod_uid,
                    cpuset: p.cpu_set,
                })
                .collect(),
        };
    }
    let memory_path = dir.join(MEMORY_CHECKPOINT);
    if let Some(text) = read_checkpoint(dir, MEMORY_CHECKPOINT)? {
        let mut checkpoint: MemoryCheckpoint =
            serde_json::from_str(&text).map_err(|e| corrupt(&memory_path, e))?;
        let stored = std::mem::take(&mut checkpoint.checksum);
        if checksum(&checkpoint)? != stored {
            return Err(corrupt(&memory_path, "checksum mismatch"));
        }
        state.memory = MemoryManagerState {
            policy_name: checkpoint.policy_name,
            machine_state: checkpoint
                .machine_state
                .into_iter()
                .map(|(numa_node, n)| NumaMemoryState {
                    numa_node,
                    number_of_assignments: n.number_of_assignments,
                    memory_map: n
                        .memory_map
                        .into_iter()
                        .map(|(resource_name, t)| MemoryTable {
                            resource_name,
                            total: t.total,
                            system_reserved: t.system_reserved,
                            allocatable: t.allocatable,
                            reserved: t.reserved,
                            free: t.free,
                        })
                        .collect(),
                    cells: n.cells,
                })
                .collect(),
            entries: checkpoint
                .entries
                .into_iter()
                .map(|(pod_uid, containers)| PodMemoryEntries {
                    pod_uid,
                    containers: containers
                        .into_iter()
                        .map(|(container, blocks)| ContainerMemory {
                            container,
                            blocks: from_blocks(&blocks),
                        })
                        .collect(),
                })
                .collect(),
            pod_entries: checkpoint
                .pod_entries
                .into_iter()
                .map(|(pod_uid, p)| PodMemory {
                    pod_uid,
                    blocks: from_blocks(&p.memory_blocks),
                })
                .collect(),
        };
    }
    Ok(state)
}

/// Where the checkpoints of a state directory live.
pub fn paths(dir: &Path) -> [PathBuf; 2] {
    [dir.join(CPU_CHECKPOINT), dir.join(MEMORY_CHECKPOINT)]
}
