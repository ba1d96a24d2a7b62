//! Crash-safe checkpoints of the resource managers' state, in the spirit of
//! kubelet's `cpu_manager_state` and `memory_manager_state` files.
//!
//! The component is pure (state in, new state out); this module persists
//! what it returns. Each file is written to a temporary file in the same
//! directory, fsynced, renamed over the old one, and the directory is
//! fsynced, so a crash leaves either the old or the new checkpoint. Loading
//! verifies a checksum and the policy name and refuses a corrupt or
//! mismatched checkpoint with a clear error instead of guessing.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::bindings::{
    ContainerMemory, CpuManagerState, ManagerState, MemoryBlock, MemoryManagerState, MemoryTable,
    NumaMemoryState, PodCpuEntries, PodCpuset, PodMemory, PodMemoryEntries,
};

/// File name of the CPU manager checkpoint (as the kubelet names it).
pub const CPU_CHECKPOINT: &str = "cpu_manager_state";
/// File name of the memory manager checkpoint.
pub const MEMORY_CHECKPOINT: &str = "memory_manager_state";
/// Checkpoints larger than this are refused.
const MAX_CHECKPOINT_BYTES: u64 = 16 << 20;

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

/// Write `bytes` to `path` atomically and durably.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .context("checkpoint path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut file =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(bytes)
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.sync_all()
            .with_context(|| format!("syncing {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing directory {}", dir.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Persist both managers' state into `dir`.
pub fn save(dir: &Path, state: &ManagerState) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cpu = serde_json::to_vec_pretty(&cpu_checkpoint(&state.cpu)?)?;
    let memory = serde_json::to_vec_pretty(&memory_checkpoint(&state.memory)?)?;
    write_atomically(&dir.join(CPU_CHECKPOINT), &cpu)?;
    write_atomically(&dir.join(MEMORY_CHECKPOINT), &memory)?;
    Ok(())
}

fn read_checkpoint(path: &Path) -> Result<Option<String>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow!("{}: {e}", path.display())),
        Ok(meta) if meta.len() > MAX_CHECKPOINT_BYTES => bail!(
            "{}: checkpoint is larger than {MAX_CHECKPOINT_BYTES} bytes",
            path.display()
        ),
        Ok(_) => {}
    }
    std::fs::read_to_string(path)
        .map(Some)
        .with_context(|| format!("reading {}", path.display()))
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> anyhow::Error {
    anyhow!(
        "{}: corrupt checkpoint ({why}); refusing to guess the node's assignments: drain the node and remove the file to start fresh",
        path.display()
    )
}

/// Load the checkpoints in `dir` (missing files give an empty state).
/// `expected_cpu_policy` / `expected_memory_policy` are the configured
/// policy names; a checkpoint written by another policy is refused.
pub fn load(
    dir: &Path,
    expected_cpu_policy: &str,
    expected_memory_policy: &str,
) -> Result<ManagerState> {
    let mut state = crate::empty_manager_state();
    let cpu_path = dir.join(CPU_CHECKPOINT);
    if let Some(text) = read_checkpoint(&cpu_path)? {
        let mut checkpoint: CpuCheckpoint =
            serde_json::from_str(&text).map_err(|e| corrupt(&cpu_path, e))?;
        let stored = std::mem::take(&mut checkpoint.checksum);
        if checksum(&checkpoint)? != stored {
            return Err(corrupt(&cpu_path, "checksum mismatch"));
        }
        if !checkpoint
            .policy_name
            .eq_ignore_ascii_case(expected_cpu_policy)
        {
            bail!(
                "{}: checkpoint was written by CPU manager policy `{}` but `{expected_cpu_policy}` is configured; the kubelet refuses to switch policies on a node with assignments: drain it and remove the file",
                cpu_path.display(),
                checkpoint.policy_name
            );
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
    if let Some(text) = read_checkpoint(&memory_path)? {
        let mut checkpoint: MemoryCheckpoint =
            serde_json::from_str(&text).map_err(|e| corrupt(&memory_path, e))?;
        let stored = std::mem::take(&mut checkpoint.checksum);
        if checksum(&checkpoint)? != stored {
            return Err(corrupt(&memory_path, "checksum mismatch"));
        }
        if !checkpoint
            .policy_name
            .eq_ignore_ascii_case(expected_memory_policy)
        {
            bail!(
                "{}: checkpoint was written by memory manager policy `{}` but `{expected_memory_policy}` is configured; drain the node and remove the file",
                memory_path.display(),
                checkpoint.policy_name
            );
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
