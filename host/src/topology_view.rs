//! `podpolicy topology`: the machine as sockets -> NUMA nodes -> L3 groups
//! -> cores -> CPUs, with what the resource managers hold on it.
//!
//! Every placement fact comes from the component: the state is the
//! managers' started checkpoint (`admit::start_state`), the PODs given are
//! admitted on it by the component (a dry run: nothing is written), and the
//! reserved CPUs are the CPUs the component's static policy does not hand
//! out (`allocate-cpus` on the started state, the largest count it grants;
//! see [`reserved_cpus`]). This module only arranges the facts and draws
//! them: a terminal picture ([`TopologyView::to_text`]), a standalone SVG
//! ([`TopologyView::to_svg`]) and JSON (the struct itself).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::admit::parse_cpu_list;
use crate::bindings::{
    AllocateCpusRequest, CpuIsolation, ManagerRequest, ManagerResponse, ManagerState, NodeSettings,
    NodeTopology,
};
use crate::output::human_bytes;
use crate::pod_input::PodDocument;
use crate::runtime::PolicyRuntime;
use crate::sysfs::SysfsTopology;

/// What a CPU is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum CpuUse {
    /// Reserved for the system (kube/system reserved): never exclusive.
    Reserved,
    /// The node's shared pool (`defaultCpuSet` without the reserved CPUs).
    Shared,
    /// Exclusive to one container.
    Exclusive,
    /// A pod's shared pool (KEP-5526 pod-level CPUs not exclusive to a container).
    PodShared,
    /// Not in any set the CPU manager knows (no static CPU manager).
    Unmanaged,
}

/// One logical CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuView {
    /// Logical CPU id.
    pub id: u32,
    /// What it is used for.
    #[serde(rename = "use")]
    pub usage: CpuUse,
    /// The pod holding it (`Exclusive`, `PodShared`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The container holding it (`Exclusive`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// One core: its threads (SMT siblings), ascending.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CoreView {
    /// The kubelet's core id (the lowest CPU id of the core).
    pub id: u32,
    /// Its CPUs.
    pub cpus: Vec<CpuView>,
}

/// CPUs sharing one L3 cache (or the whole NUMA node when sysfs reports none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheGroupView {
    /// The L3 cache id from sysfs; `None` when sysfs has no L3 for these CPUs.
    pub l3: Option<u32>,
    /// Its cores.
    pub cores: Vec<CoreView>,
}

/// Memory of one resource on one NUMA node, in bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryView {
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Physical size.
    pub total: u64,
    /// Reserved for the system (`reservedMemory`); `None` without the memory manager.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<u64>,
    /// Held by containers and pods; `None` without the memory manager.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assigned: Option<u64>,
    /// Still free for containers; `None` without the memory manager.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free: Option<u64>,
}

/// A memory block held by a container (or a pod, `container` empty).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockView {
    /// The pod.
    pub pod: String,
    /// The container; `""` for a pod-level block.
    pub container: String,
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes.
    pub size: u64,
    /// The NUMA nodes the block spans.
    pub numa_affinity: Vec<u32>,
}

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaView {
    /// NUMA node id.
    pub id: u32,
    /// Memory and huge pages.
    pub memory: Vec<MemoryView>,
    /// The blocks placed on it (a block spanning several nodes is listed on each).
    pub blocks: Vec<BlockView>,
    /// Its CPUs by L3 group.
    pub cache_groups: Vec<CacheGroupView>,
}

/// One socket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SocketView {
    /// Socket id.
    pub id: u32,
    /// Its NUMA nodes.
    pub numa_nodes: Vec<NumaView>,
}

/// One container's CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerCpusView {
    /// Container name.
    pub name: String,
    /// `exclusive`, `podShared` or `shared` (the node's pool).
    pub cpu_use: CpuUse,
    /// Its cpuset (`""`: the node's shared pool).
    pub cpuset: String,
}

/// One pod the managers hold, or would hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// `namespace/name` for a pod given on the command line; the UID for
    /// one known only from the checkpoints.
    pub name: String,
    /// Pod UID.
    pub uid: String,
    /// Given on the command line and admitted in a dry run.
    pub dry_run: bool,
    /// The mark in the text picture (`A`, `B`, ...).
    pub mark: char,
    /// The pod-level cpuset (KEP-5526), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_cpuset: Option<String>,
    /// The pod shared pool, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_shared_pool: Option<String>,
    /// Per container.
    pub containers: Vec<ContainerCpusView>,
    /// Why the managers would refuse it (dry-run pods only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejection: Option<String>,
}

/// The whole picture.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyView {
    /// Node name.
    pub node: String,
    /// The CPU manager's policy in the state (`static`, `none`, `""`).
    pub cpu_manager_policy: String,
    /// The memory manager's policy in the state (`Static`, `None`, `""`).
    pub memory_manager_policy: String,
    /// Online CPUs.
    pub cpu_count: usize,
    /// The reserved CPUs.
    pub reserved_cpus: String,
    /// The node's shared pool, reserved CPUs left out.
    pub shared_pool: String,
    /// Sockets, ascending.
    pub sockets: Vec<SocketView>,
    /// Pods holding CPUs or memory: checkpointed ones, then the dry-run ones.
    pub pods: Vec<PodView>,
}

/// A set as a cpuset list (`0-3,8`).
pub fn cpu_list(cpus: &BTreeSet<u32>) -> String {
    let mut out = Vec::new();
    let mut iter = cpus.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

fn set(text: &str) -> BTreeSet<u32> {
    if text.trim().is_empty() {
        return BTreeSet::new();
    }
    parse_cpu_list(text).unwrap_or_default()
}

/// The reserved CPUs, as the component's static policy keeps them: the
/// CPUs of the node's shared pool that `allocate-cpus` never hands out.
/// The largest count it grants from the started state is found by
/// bisection (about log2(CPUs) calls); the CPUs it then grants are the
/// assignable ones, and everything neither assignable nor already assigned
/// is reserved (with `strict-cpu-reservation` the shared pool lacks them).
pub fn reserved_cpus(
    policy: &PolicyRuntime,
    topology: &NodeTopology,
    state: &ManagerState,
    node: &NodeSettings,
) -> Result<BTreeSet<u32>> {
    let pool = set(&state.cpu.default_cpuset);
    let grant = |n: u32| -> Result<Option<BTreeSet<u32>>> {
        let request = ManagerRequest::AllocateCpus(AllocateCpusRequest {
            state: state.clone(),
            num_cpus: n,
            numa_affinity: None,
            reusable: String::new(),
        });
        Ok(match policy.manager_operation(&request, topology, node)? {
            Ok(Ok(ManagerResponse::CpusAllocated(a))) => Some(set(&a.cpus)),
            _ => None,
        })
    };
    let (mut lo, mut hi) = (0u32, u32::try_from(pool.len()).unwrap_or(u32::MAX));
    let mut granted = BTreeSet::new();
    // Invariant: `lo` CPUs are granted (0 trivially), more than `hi` are not.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match grant(mid)? {
            Some(cpus) => {
                lo = mid;
                granted = cpus;
            }
            None => hi = mid - 1,
        }
    }
    let mut assigned: BTreeSet<u32> = BTreeSet::new();
    for pod in &state.cpu.entries {
        for c in &pod.containers {
            assigned.extend(set(&c.cpuset));
        }
    }
    for pod in &state.cpu.pod_entries {
        assigned.extend(set(&pod.cpuset));
    }
    Ok(topology
        .cpus
        .iter()
        .map(|c| c.id)
        .filter(|id| !granted.contains(id) && !assigned.contains(id))
        .collect())
}

/// One NUMA node's CPUs: L3 id -> core id -> CPU ids.
type CacheTree = BTreeMap<Option<u32>, BTreeMap<u32, Vec<u32>>>;

/// What the dry run found for one POD.
struct DryRun {
    name: String,
    uid: String,
    assignment: Option<crate::bindings::PodAssignment>,
    rejection: Option<String>,
}

/// Build the view.
///
/// `placement` is `None` when the node runs no static manager: the machine
/// is drawn with every CPU unmanaged and the PODs are not placed.
pub fn build(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    sysfs: &SysfsTopology,
    topology: &NodeTopology,
    state: Option<ManagerState>,
    docs: &[PodDocument],
) -> Result<TopologyView> {
    let mut state = state;
    let mut dry_runs = Vec::new();
    let mut progress = crate::progress::Progress::on_stderr("placing pods", docs.len());
    for (done, doc) in docs.iter().enumerate() {
        progress.update(done);
        let outcome = crate::explain(policy, doc, node)?;
        let uid = doc.pod.uid.clone();
        let Some(evaluated) = outcome.evaluated() else {
            dry_runs.push(DryRun {
                name: outcome.name.clone(),
                uid,
                assignment: None,
                rejection: Some(outcome.refusals().join("; ")),
            });
            continue;
        };
        let Some(current) = state.as_mut() else {
            dry_runs.push(DryRun {
                name: outcome.name.clone(),
                uid,
                assignment: None,
                rejection: Some("not placed: the node runs no static CPU or memory manager".into()),
            });
            continue;
        };
        let admission = match policy.admit(&evaluated.defaulted, topology, current, node)? {
            Ok(a) => a,
            // A pod the managers cannot take at all (no UID): shown as such,
            // the other pods are still drawn.
            Err(errors) => {
                dry_runs.push(DryRun {
                    name: outcome.name.clone(),
                    uid,
                    assignment: None,
                    rejection: Some(crate::format_field_errors(&errors).replace('\n', "; ")),
                });
                continue;
            }
        };
        match admission.rejection {
            Some(r) => dry_runs.push(DryRun {
                name: outcome.name.clone(),
                uid: evaluated.defaulted.uid.clone(),
                assignment: None,
                rejection: Some(format!("{}: {}", r.reason(), r.message)),
            }),
            None => {
                *current = admission.state;
                dry_runs.push(DryRun {
                    name: outcome.name.clone(),
                    uid: evaluated.defaulted.uid.clone(),
                    assignment: Some(admission.assignment),
                    rejection: None,
                });
            }
        }
    }
    let static_cpu = state
        .as_ref()
        .is_some_and(|s| s.cpu.policy_name == "static");
    let reserved = match (&state, static_cpu) {
        (Some(s), true) => reserved_cpus(policy, topology, s, node)?,
        _ => BTreeSet::new(),
    };

    // Pods: the checkpointed ones (by UID), then the dry-run ones.
    let mut pods: Vec<PodView> = Vec::new();
    let dry_uids: BTreeSet<&str> = dry_runs.iter().map(|d| d.uid.as_str()).collect();
    if let Some(s) = &state {
        let mut uids: BTreeSet<&str> = BTreeSet::new();
        uids.extend(s.cpu.entries.iter().map(|e| e.pod_uid.as_str()));
        uids.extend(s.cpu.pod_entries.iter().map(|e| e.pod_uid.as_str()));
        uids.extend(s.memory.entries.iter().map(|e| e.pod_uid.as_str()));
        uids.extend(s.memory.pod_entries.iter().map(|e| e.pod_uid.as_str()));
        for uid in uids.into_iter().filter(|u| !dry_uids.contains(u)) {
            pods.push(checkpointed_pod(s, uid));
        }
    }
    for d in &dry_runs {
        let mut view = PodView {
            name: d.name.clone(),
            uid: d.uid.clone(),
            dry_run: true,
            mark: ' ',
            pod_cpuset: None,
            pod_shared_pool: None,
            containers: Vec::new(),
            rejection: d.rejection.clone(),
        };
        if let Some(a) = &d.assignment {
            view.pod_cpuset = a.pod_cpuset.clone();
            view.pod_shared_pool = a.pod_shared_pool.clone();
            view.containers = a
                .containers
                .iter()
                .map(|c| ContainerCpusView {
                    name: c.name.clone(),
                    cpu_use: match c.cpu_isolation {
                        CpuIsolation::Container => CpuUse::Exclusive,
                        CpuIsolation::Pod => CpuUse::PodShared,
                        CpuIsolation::Host => CpuUse::Shared,
                    },
                    cpuset: c.cpuset.clone().unwrap_or_default(),
                })
                .collect();
        }
        pods.push(view);
    }
    for (i, pod) in pods.iter_mut().enumerate() {
        pod.mark = mark(i);
    }

    // Per CPU use.
    let mut uses: BTreeMap<u32, (CpuUse, Option<String>, Option<String>)> = BTreeMap::new();
    let shared_pool: BTreeSet<u32> = match &state {
        Some(s) if static_cpu => set(&s.cpu.default_cpuset)
            .difference(&reserved)
            .copied()
            .collect(),
        _ => BTreeSet::new(),
    };
    for cpu in &topology.cpus {
        let usage = if reserved.contains(&cpu.id) {
            CpuUse::Reserved
        } else if shared_pool.contains(&cpu.id) {
            CpuUse::Shared
        } else {
            CpuUse::Unmanaged
        };
        uses.insert(cpu.id, (usage, None, None));
    }
    for pod in &pods {
        if let Some(pool) = &pod.pod_shared_pool {
            for id in set(pool) {
                uses.insert(id, (CpuUse::PodShared, Some(pod.name.clone()), None));
            }
        }
        for c in &pod.containers {
            if c.cpu_use == CpuUse::Exclusive {
                for id in set(&c.cpuset) {
                    uses.insert(
                        id,
                        (
                            CpuUse::Exclusive,
                            Some(pod.name.clone()),
                            Some(c.name.clone()),
                        ),
                    );
                }
            }
        }
    }

    // Memory blocks per NUMA node.
    let mut blocks: Vec<BlockView> = Vec::new();
    if let Some(s) = &state {
        let name_of = |uid: &str| {
            pods.iter()
                .find(|p| p.uid == uid)
                .map_or(uid.to_string(), |p| p.name.clone())
        };
        for pod in &s.memory.entries {
            for c in &pod.containers {
                for b in &c.blocks {
                    blocks.push(BlockView {
                        pod: name_of(&pod.pod_uid),
                        container: c.container.clone(),
                        resource: b.resource_name.clone(),
                        size: b.size,
                        numa_affinity: b.numa_affinity.clone(),
                    });
                }
            }
        }
        for pod in &s.memory.pod_entries {
            for b in &pod.blocks {
                blocks.push(BlockView {
                    pod: name_of(&pod.pod_uid),
                    container: String::new(),
                    resource: b.resource_name.clone(),
                    size: b.size,
                    numa_affinity: b.numa_affinity.clone(),
                });
            }
        }
    }

    // The tree: sockets -> NUMA nodes -> L3 groups -> cores -> CPUs.
    let raw: BTreeMap<u32, &crate::sysfs::CpuInfo> = sysfs.cpus.iter().map(|c| (c.id, c)).collect();
    let mut tree: BTreeMap<u32, BTreeMap<u32, CacheTree>> = BTreeMap::new();
    for cpu in &topology.cpus {
        let l3 = raw.get(&cpu.id).and_then(|c| c.uncore_cache_id);
        tree.entry(cpu.socket_id)
            .or_default()
            .entry(cpu.numa_node)
            .or_default()
            .entry(l3)
            .or_default()
            .entry(cpu.core_id)
            .or_default()
            .push(cpu.id);
    }
    let machine = state.as_ref().map(|s| &s.memory.machine_state);
    let sockets = tree
        .into_iter()
        .map(|(socket, numas)| SocketView {
            id: socket,
            numa_nodes: numas
                .into_iter()
                .map(|(numa, groups)| NumaView {
                    id: numa,
                    memory: numa_memory(topology, machine, numa),
                    blocks: blocks
                        .iter()
                        .filter(|b| b.numa_affinity.contains(&numa))
                        .cloned()
                        .collect(),
                    cache_groups: groups
                        .into_iter()
                        .map(|(l3, cores)| CacheGroupView {
                            l3,
                            cores: cores
                                .into_iter()
                                .map(|(core, mut ids)| {
                                    ids.sort_unstable();
                                    CoreView {
                                        id: core,
                                        cpus: ids
                                            .into_iter()
                                            .map(|id| {
                                                let (usage, pod, container) = uses
                                                    .get(&id)
                                                    .cloned()
                                                    .unwrap_or((CpuUse::Unmanaged, None, None));
                                                CpuView {
                                                    id,
                                                    usage,
                                                    pod,
                                                    container,
                                                }
                                            })
                                            .collect(),
                                    }
                                })
                                .collect(),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(TopologyView {
        node: node.name.clone(),
        cpu_manager_policy: state
            .as_ref()
            .map_or(String::new(), |s| s.cpu.policy_name.clone()),
        memory_manager_policy: state
            .as_ref()
            .map_or(String::new(), |s| s.memory.policy_name.clone()),
        cpu_count: topology.cpus.len(),
        reserved_cpus: cpu_list(&reserved),
        shared_pool: cpu_list(&shared_pool),
        sockets,
        pods,
    })
}

fn mark(i: usize) -> char {
    const MARKS: &[u8] = b"ABCDEFGHIJKLMNOPQSTUVWXYZ0123456789";
    MARKS.get(i).map_or('*', |&b| b as char)
}

/// A pod known only from the checkpoints: its container sets, exclusive
/// unless several containers share one set inside a pod-level set (then it
/// is the pod shared pool; the checkpoint does not say which it is when
/// only one container uses the pod shared pool).
fn checkpointed_pod(state: &ManagerState, uid: &str) -> PodView {
    let pod_cpuset = state
        .cpu
        .pod_entries
        .iter()
        .find(|p| p.pod_uid == uid)
        .map(|p| p.cpuset.clone());
    let entries: Vec<(String, String)> = state
        .cpu
        .entries
        .iter()
        .filter(|e| e.pod_uid == uid)
        .flat_map(|e| {
            e.containers
                .iter()
                .map(|c| (c.container.clone(), c.cpuset.clone()))
        })
        .collect();
    let mut pool: Option<BTreeSet<u32>> = None;
    let containers = entries
        .iter()
        .map(|(name, cpuset)| {
            let shared =
                pod_cpuset.is_some() && entries.iter().filter(|(_, s)| s == cpuset).count() > 1;
            if shared {
                pool = Some(set(cpuset));
            }
            ContainerCpusView {
                name: name.clone(),
                cpu_use: if shared {
                    CpuUse::PodShared
                } else {
                    CpuUse::Exclusive
                },
                cpuset: cpuset.clone(),
            }
        })
        .collect();
    PodView {
        name: uid.to_string(),
        uid: uid.to_string(),
        dry_run: false,
        mark: ' ',
        pod_shared_pool: pool.map(|p| cpu_list(&p)),
        pod_cpuset,
        containers,
        rejection: None,
    }
}

fn numa_memory(
    topology: &NodeTopology,
    machine: Option<&Vec<crate::bindings::NumaMemoryState>>,
    numa: u32,
) -> Vec<MemoryView> {
    if let Some(node) = machine.and_then(|m| m.iter().find(|n| n.numa_node == numa)) {
        return node
            .memory_map
            .iter()
            .map(|t| MemoryView {
                resource: t.resource_name.clone(),
                total: t.total,
                system_reserved: Some(t.system_reserved),
                assigned: Some(t.reserved),
                free: Some(t.free),
            })
            .collect();
    }
    let Some(info) = topology.numa_nodes.iter().find(|n| n.id == numa) else {
        return Vec::new();
    };
    let mut out = vec![MemoryView {
        resource: "memory".into(),
        total: info.memory_bytes,
        system_reserved: None,
        assigned: None,
        free: None,
    }];
    for pool in &info.hugepages {
        out.push(MemoryView {
            resource: format!("hugepages-{}", human_bytes(pool.page_size_bytes)),
            total: pool.page_size_bytes.saturating_mul(pool.pages),
            system_reserved: None,
            assigned: None,
            free: None,
        });
    }
    out
}

// ---------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------

/// The widest line of the text picture.
pub const TEXT_COLUMNS: usize = 100;

const ANSI_RESET: &str = "\x1b[0m";
const PALETTE: [&str; 6] = [
    "\x1b[36m", "\x1b[32m", "\x1b[35m", "\x1b[33m", "\x1b[34m", "\x1b[96m",
];

impl TopologyView {
    fn pod_mark(&self, name: &str) -> (char, usize) {
        self.pods
            .iter()
            .position(|p| p.name == name)
            .map_or(('?', 0), |i| (self.pods[i].mark, i))
    }

    fn cpu_mark(&self, cpu: &CpuView, colour: bool) -> String {
        let (ch, paint) = match cpu.usage {
            CpuUse::Reserved => ('R', "\x1b[31m".to_string()),
            CpuUse::Shared => ('.', "\x1b[2m".to_string()),
            CpuUse::Unmanaged => ('-', "\x1b[2m".to_string()),
            CpuUse::Exclusive | CpuUse::PodShared => {
                let (m, i) = self.pod_mark(cpu.pod.as_deref().unwrap_or_default());
                let m = if cpu.usage == CpuUse::PodShared {
                    m.to_ascii_lowercase()
                } else {
                    m
                };
                (m, format!("\x1b[1m{}", PALETTE[i % PALETTE.len()]))
            }
        };
        if colour {
            format!("{paint}{ch}{ANSI_RESET}")
        } else {
            ch.to_string()
        }
    }

    /// The terminal picture: plain, or with ANSI colour.
    pub fn to_text(&self, colour: bool) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "node {}: {} CPUs, CPU manager {}, memory manager {}",
            if self.node.is_empty() {
                "-"
            } else {
                &self.node
            },
            self.cpu_count,
            or_dash(&self.cpu_manager_policy),
            or_dash(&self.memory_manager_policy)
        );
        let _ = writeln!(
            out,
            "legend: R reserved  . shared pool  - unmanaged  A-Z a pod's exclusive CPUs  a-z its pod shared pool"
        );
        let _ = writeln!(
            out,
            "        a cell is a core: its lowest CPU id, then one mark per thread (CPU ids ascending)"
        );
        for socket in &self.sockets {
            let _ = writeln!(out, "socket {}", socket.id);
            for numa in &socket.numa_nodes {
                let _ = writeln!(out, "  NUMA {}", numa.id);
                for m in &numa.memory {
                    let line = match (m.system_reserved, m.assigned, m.free) {
                        (Some(r), Some(a), Some(f)) => format!(
                            "    {:<16} total {}  reserved {}  assigned {}  free {}",
                            m.resource,
                            human_bytes(m.total),
                            human_bytes(r),
                            human_bytes(a),
                            human_bytes(f)
                        ),
                        _ => format!("    {:<16} total {}", m.resource, human_bytes(m.total)),
                    };
                    let _ = writeln!(out, "{line}");
                }
                for b in &numa.blocks {
                    let who = if b.container.is_empty() {
                        format!("{} (pod)", b.pod)
                    } else {
                        format!("{}/{}", b.pod, b.container)
                    };
                    let span = if b.numa_affinity.len() > 1 {
                        format!(
                            " (spans NUMA {})",
                            b.numa_affinity
                                .iter()
                                .map(u32::to_string)
                                .collect::<Vec<_>>()
                                .join("+")
                        )
                    } else {
                        String::new()
                    };
                    let line =
                        format!("      {} {} {}{span}", who, b.resource, human_bytes(b.size));
                    let _ = writeln!(out, "{}", clip(&line));
                }
                let show_l3 = numa.cache_groups.iter().any(|g| g.l3.is_some());
                for group in &numa.cache_groups {
                    let indent = if show_l3 {
                        let _ = writeln!(
                            out,
                            "    L3 {}",
                            group.l3.map_or("-".to_string(), |id| id.to_string())
                        );
                        "      "
                    } else {
                        "    "
                    };
                    let threads = group.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1);
                    let id_width = self.cpu_count.saturating_sub(1).max(1).to_string().len();
                    let cell = id_width + 1 + threads + 1;
                    let per_line = ((TEXT_COLUMNS - indent.len()) / cell).max(1);
                    for chunk in group.cores.chunks(per_line) {
                        let mut line = indent.to_string();
                        for core in chunk {
                            let _ = write!(line, "{:>id_width$}:", core.id);
                            for cpu in &core.cpus {
                                line.push_str(&self.cpu_mark(cpu, colour));
                            }
                            for _ in core.cpus.len()..threads {
                                line.push(' ');
                            }
                            line.push(' ');
                        }
                        let _ = writeln!(out, "{}", line.trim_end());
                    }
                }
            }
        }
        let _ = writeln!(out, "reserved CPUs  {}", or_dash(&self.reserved_cpus));
        let _ = writeln!(out, "shared pool    {}", or_dash(&self.shared_pool));
        for pod in &self.pods {
            let head = format!(
                "{} {}{}",
                pod.mark,
                pod.name,
                if pod.dry_run { " (dry run)" } else { "" }
            );
            let _ = writeln!(out, "{}", clip(&head));
            if let Some(r) = &pod.rejection {
                let _ = writeln!(out, "{}", clip(&format!("    not admitted: {r}")));
                continue;
            }
            if let Some(p) = &pod.pod_cpuset {
                let _ = writeln!(
                    out,
                    "    pod cpuset {}  pod shared pool {}",
                    or_dash(p),
                    or_dash(pod.pod_shared_pool.as_deref().unwrap_or(""))
                );
            }
            for c in &pod.containers {
                let what = match c.cpu_use {
                    CpuUse::Exclusive => format!("exclusive {}", c.cpuset),
                    CpuUse::PodShared => format!("pod shared pool {}", c.cpuset),
                    _ => "node shared pool".to_string(),
                };
                let _ = writeln!(out, "{}", clip(&format!("    {:<20} {what}", c.name)));
            }
        }
        out
    }
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

/// A line cut to [`TEXT_COLUMNS`] characters.
fn clip(line: &str) -> String {
    if line.chars().count() <= TEXT_COLUMNS {
        return line.to_string();
    }
    let mut s: String = line.chars().take(TEXT_COLUMNS - 1).collect();
    s.push('…');
    s
}

// ---------------------------------------------------------------------------
// SVG
// ---------------------------------------------------------------------------

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const CPU_W: u32 = 40;
const CPU_H: u32 = 22;
const PAD: u32 = 8;
const HEAD: u32 = 22;
const CORES_PER_ROW: usize = 8;
const FILLS: [&str; 6] = [
    "#4e79a7", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7",
];

impl TopologyView {
    /// A CPU's fill, text colour and fill opacity (a pod shared pool is
    /// its pod's colour, lighter).
    fn fill(&self, cpu: &CpuView) -> (String, &'static str, &'static str) {
        match cpu.usage {
            CpuUse::Reserved => ("#e15759".into(), "#ffffff", "1"),
            CpuUse::Shared => ("#e8e8e8".into(), "#222222", "1"),
            CpuUse::Unmanaged => ("#f7f7f7".into(), "#222222", "1"),
            CpuUse::Exclusive => {
                let (_, i) = self.pod_mark(cpu.pod.as_deref().unwrap_or_default());
                (FILLS[i % FILLS.len()].into(), "#ffffff", "1")
            }
            CpuUse::PodShared => {
                let (_, i) = self.pod_mark(cpu.pod.as_deref().unwrap_or_default());
                (FILLS[i % FILLS.len()].into(), "#000000", "0.45")
            }
        }
    }

    /// A standalone SVG document.
    pub fn to_svg(&self) -> String {
        let threads = self
            .sockets
            .iter()
            .flat_map(|s| &s.numa_nodes)
            .flat_map(|n| &n.cache_groups)
            .flat_map(|g| &g.cores)
            .map(|c| c.cpus.len())
            .max()
            .unwrap_or(1) as u32;
        let core_w = threads * CPU_W + 2 * 3;
        let core_h = CPU_H + 2 * 3;
        let group_w = CORES_PER_ROW as u32 * (core_w + 4) + 2 * PAD;
        let mut body = String::new();
        let mut y = 10u32;
        let mut width = group_w + 4 * PAD + 20;
        let _ = writeln!(
            body,
            r#"<text x="10" y="{}" font-size="16" font-weight="bold">node {}: {} CPUs, CPU manager {}, memory manager {}</text>"#,
            y + 14,
            xml(or_dash(&self.node)),
            self.cpu_count,
            xml(or_dash(&self.cpu_manager_policy)),
            xml(or_dash(&self.memory_manager_policy))
        );
        y += 30;
        for socket in &self.sockets {
            let socket_top = y;
            y += HEAD;
            let mut inner = String::new();
            for numa in &socket.numa_nodes {
                let numa_top = y;
                y += HEAD;
                let mut numa_inner = String::new();
                for m in &numa.memory {
                    let text = match (m.system_reserved, m.assigned, m.free) {
                        (Some(r), Some(a), Some(f)) => format!(
                            "{}: total {}, reserved {}, assigned {}, free {}",
                            m.resource,
                            human_bytes(m.total),
                            human_bytes(r),
                            human_bytes(a),
                            human_bytes(f)
                        ),
                        _ => format!("{}: total {}", m.resource, human_bytes(m.total)),
                    };
                    let _ = writeln!(
                        numa_inner,
                        r#"<text x="{}" y="{}" font-size="12">{}</text>"#,
                        3 * PAD,
                        y + 12,
                        xml(&text)
                    );
                    y += 16;
                }
                for b in &numa.blocks {
                    let who = if b.container.is_empty() {
                        b.pod.clone()
                    } else {
                        format!("{}/{}", b.pod, b.container)
                    };
                    let _ = writeln!(
                        numa_inner,
                        r#"<text x="{}" y="{}" font-size="12">{}: {} {}</text>"#,
                        4 * PAD,
                        y + 12,
                        xml(&who),
                        xml(&b.resource),
                        human_bytes(b.size)
                    );
                    y += 16;
                }
                for group in &numa.cache_groups {
                    let group_top = y;
                    y += HEAD;
                    let rows = group.cores.len().div_ceil(CORES_PER_ROW) as u32;
                    let mut cells = String::new();
                    for (i, core) in group.cores.iter().enumerate() {
                        let cx = 3 * PAD + (i % CORES_PER_ROW) as u32 * (core_w + 4);
                        let cy = y + (i / CORES_PER_ROW) as u32 * (core_h + 4);
                        let _ = writeln!(
                            cells,
                            r##"<rect x="{cx}" y="{cy}" width="{core_w}" height="{core_h}" fill="#ffffff" stroke="#888888"/>"##
                        );
                        for (t, cpu) in core.cpus.iter().enumerate() {
                            let (fill, ink, opacity) = self.fill(cpu);
                            let x = cx + 3 + t as u32 * CPU_W;
                            let title = match (&cpu.pod, &cpu.container) {
                                (Some(p), Some(c)) => format!("CPU {}: {p}/{c}", cpu.id),
                                (Some(p), None) => format!("CPU {}: {p} pod shared pool", cpu.id),
                                _ => format!("CPU {}", cpu.id),
                            };
                            let _ = writeln!(
                                cells,
                                r#"<g><title>{}</title><rect x="{x}" y="{}" width="{}" height="{CPU_H}" fill="{fill}" fill-opacity="{opacity}"/><text x="{}" y="{}" font-size="12" text-anchor="middle" fill="{ink}">{}</text></g>"#,
                                xml(&title),
                                cy + 3,
                                CPU_W - 2,
                                x + CPU_W / 2 - 1,
                                cy + 3 + 15,
                                cpu.id
                            );
                        }
                    }
                    y += rows * (core_h + 4) + PAD;
                    let label = match group.l3 {
                        Some(id) => format!("L3 {id}"),
                        None => "CPUs".to_string(),
                    };
                    let _ = writeln!(
                        numa_inner,
                        r##"<rect x="{}" y="{group_top}" width="{}" height="{}" fill="#fbfbfb" stroke="#bbbbbb"/><text x="{}" y="{}" font-size="12">{}</text>"##,
                        2 * PAD,
                        group_w,
                        y - group_top,
                        3 * PAD,
                        group_top + 15,
                        xml(&label)
                    );
                    numa_inner.push_str(&cells);
                    y += PAD / 2;
                }
                let _ = writeln!(
                    inner,
                    r##"<rect x="{}" y="{numa_top}" width="{}" height="{}" fill="#f3f6fa" stroke="#5b7ba6"/><text x="{}" y="{}" font-size="14" font-weight="bold">NUMA {}</text>"##,
                    PAD + 2,
                    group_w + 2 * PAD,
                    y - numa_top,
                    2 * PAD,
                    numa_top + 16,
                    numa.id
                );
                inner.push_str(&numa_inner);
                y += PAD;
            }
            let _ = writeln!(
                body,
                r##"<rect x="4" y="{socket_top}" width="{}" height="{}" fill="#ffffff" stroke="#333333" stroke-width="2"/><text x="12" y="{}" font-size="15" font-weight="bold">socket {}</text>"##,
                group_w + 4 * PAD,
                y - socket_top,
                socket_top + 16,
                socket.id
            );
            body.push_str(&inner);
            y += PAD;
        }
        // Legend and pods.
        let mut legend = vec![
            (
                "#e15759".to_string(),
                format!("reserved {}", or_dash(&self.reserved_cpus)),
            ),
            (
                "#e8e8e8".to_string(),
                format!("shared pool {}", or_dash(&self.shared_pool)),
            ),
        ];
        for (i, pod) in self.pods.iter().enumerate() {
            let fill = FILLS[i % FILLS.len()].to_string();
            let mut text = pod.name.clone();
            if pod.dry_run {
                text.push_str(" (dry run)");
            }
            if let Some(r) = &pod.rejection {
                text.push_str(&format!(": not admitted: {r}"));
            }
            for c in &pod.containers {
                match c.cpu_use {
                    CpuUse::Exclusive => {
                        text.push_str(&format!("; {} exclusive {}", c.name, c.cpuset))
                    }
                    CpuUse::PodShared => {
                        text.push_str(&format!("; {} pod shared pool {}", c.name, c.cpuset))
                    }
                    _ => text.push_str(&format!("; {} node shared pool", c.name)),
                }
            }
            legend.push((fill, text));
        }
        for (fill, text) in legend {
            let _ = writeln!(
                body,
                r##"<rect x="10" y="{y}" width="16" height="14" fill="{fill}" stroke="#666666"/><text x="32" y="{}" font-size="13">{}</text>"##,
                y + 12,
                xml(&text)
            );
            width = width.max(40 + 7 * text.chars().count() as u32);
            y += 20;
        }
        let height = y + 10;
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n{body}</svg>\n"
        )
    }
}

/// Read the topology from `sysfs` and the state from `state_dir`, start
/// the managers when the node runs a static one, and build the view.
pub fn from_paths(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    sysfs_root: &Path,
    state_dir: Option<&Path>,
    docs: &[PodDocument],
) -> Result<TopologyView> {
    let sysfs = crate::sysfs::read_topology(sysfs_root)
        .with_context(|| format!("reading the topology from {}", sysfs_root.display()))?;
    let topology = crate::topology_input::node_topology(&sysfs);
    let state = if policy.managers_active(node)? || state_dir.is_some() {
        Some(crate::admit::start_state(
            policy, &topology, node, state_dir,
        )?)
    } else {
        None
    };
    build(policy, node, &sysfs, &topology, state, docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_ranges() {
        let s: BTreeSet<u32> = [0, 1, 2, 5, 7, 8].into_iter().collect();
        assert_eq!(cpu_list(&s), "0-2,5,7-8");
        assert_eq!(cpu_list(&BTreeSet::new()), "");
    }

    fn tiny_view() -> TopologyView {
        let cpu = |id, usage, pod: Option<&str>| CpuView {
            id,
            usage,
            pod: pod.map(str::to_string),
            container: pod.map(|_| "c".to_string()),
        };
        TopologyView {
            node: "n".into(),
            cpu_manager_policy: "static".into(),
            memory_manager_policy: String::new(),
            cpu_count: 4,
            reserved_cpus: "0".into(),
            shared_pool: "1".into(),
            sockets: vec![SocketView {
                id: 0,
                numa_nodes: vec![NumaView {
                    id: 0,
                    memory: Vec::new(),
                    blocks: Vec::new(),
                    cache_groups: vec![CacheGroupView {
                        l3: None,
                        cores: vec![
                            CoreView {
                                id: 0,
                                cpus: vec![
                                    cpu(0, CpuUse::Reserved, None),
                                    cpu(2, CpuUse::Shared, None),
                                ],
                            },
                            CoreView {
                                id: 1,
                                cpus: vec![
                                    cpu(1, CpuUse::Exclusive, Some("ns/p")),
                                    cpu(3, CpuUse::Exclusive, Some("ns/p")),
                                ],
                            },
                        ],
                    }],
                }],
            }],
            pods: vec![PodView {
                name: "ns/p".into(),
                uid: "u".into(),
                dry_run: true,
                mark: 'A',
                pod_cpuset: None,
                pod_shared_pool: None,
                containers: Vec::new(),
                rejection: None,
            }],
        }
    }

    #[test]
    fn colour_only_when_asked() {
        let view = tiny_view();
        let plain = view.to_text(false);
        assert!(plain.contains("    0:R. 1:AA\n"), "{plain}");
        assert!(!plain.contains('\x1b'));
        let coloured = view.to_text(true);
        assert!(coloured.contains("\x1b[31mR\x1b[0m"), "{coloured:?}");
        assert!(coloured.contains("\x1b[1m\x1b[36mA\x1b[0m"), "{coloured:?}");
    }

    #[test]
    fn long_lines_are_clipped() {
        let line = "x".repeat(150);
        assert_eq!(clip(&line).chars().count(), TEXT_COLUMNS);
    }
}
