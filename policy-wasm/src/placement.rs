//! The cgroup files an admission implies: cpusets from the CPU and memory
//! managers, and `cpu.max` without a quota where CFS quota is disabled
//! for exclusive CPUs (`DisableCPUQuotaWithExclusiveCPUs`: the kubelet sets
//! `CpuQuota = -1` for such a container and, in `EnsureExists`, for its pod).
//!
//! A container without CPUs of its own runs in the node's shared pool (the
//! default cpuset, as the CPU manager's reconcile loop keeps it); a cgroup
//! without memory blocks may use every NUMA node. Ephemeral containers are
//! not managed.

use std::collections::BTreeSet;

use crate::cgroup_file::{CgroupFile, CgroupFileName, CgroupValue, CpuMaxValue};
use crate::managers::PodAssignment;
use crate::memory_manager::Block;

/// The files of one container's cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerFiles {
    /// The container name.
    pub name: String,
    /// Its cpusets (and `cpu.max` without quota on exclusive CPUs).
    pub files: Vec<CgroupFile>,
}

/// The cgroup files of an admitted pod: the pod cgroup's and each managed
/// container's, in admission order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementFiles {
    /// The pod cgroup's files.
    pub pod: Vec<CgroupFile>,
    /// Each init and app container's files.
    pub containers: Vec<ContainerFiles>,
}

fn file(file: CgroupFileName, list: String) -> CgroupFile {
    CgroupFile {
        file,
        value: CgroupValue::IdList(list),
    }
}

fn mems(blocks: &[Block], all_numa_nodes: &BTreeSet<u32>) -> String {
    // NUMA node ids fit a mask (0..=63), so they fit a u32.
    let used: BTreeSet<u32> = blocks
        .iter()
        .flat_map(|b| b.numa_affinity.iter().map(|&id| id as u32))
        .collect();
    let nodes = if used.is_empty() {
        all_numa_nodes
    } else {
        &used
    };
    nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The files of `assignment` on a node whose NUMA nodes are
/// `all_numa_nodes`, with CFS period `period_us`.
pub fn placement_files(
    assignment: &PodAssignment,
    all_numa_nodes: &BTreeSet<u32>,
    period_us: u64,
) -> PlacementFiles {
    let no_quota = || CgroupFile {
        file: CgroupFileName::CpuMax,
        value: CgroupValue::CpuMax(CpuMaxValue {
            quota: None,
            period: period_us,
        }),
    };
    let mut pod = Vec::new();
    if let Some(cpus) = &assignment.pod_cpuset {
        pod.push(file(CgroupFileName::CpusetCpus, cpus.to_string()));
    }
    pod.push(file(
        CgroupFileName::CpusetMems,
        mems(&assignment.pod_memory, all_numa_nodes),
    ));
    if assignment.pod_cfs_quota_disabled {
        pod.push(no_quota());
    }
    let containers = assignment
        .containers
        .iter()
        .map(|c| {
            let cpus = c
                .cpuset
                .as_ref()
                .unwrap_or(&assignment.node_shared_pool)
                .to_string();
            let mut files = vec![
                file(CgroupFileName::CpusetCpus, cpus),
                file(CgroupFileName::CpusetMems, mems(&c.memory, all_numa_nodes)),
            ];
            if c.cfs_quota_disabled {
                files.push(no_quota());
            }
            ContainerFiles {
                name: c.name.clone(),
                files,
            }
        })
        .collect();
    PlacementFiles { pod, containers }
}
