//! The input of the `allocation` target and of the manager half of
//! `differential`: a machine, node settings for the resource managers, and
//! a sequence of admissions, releases and manager operations.
//!
//! Every part is kept as the bytes that choose it (small structs of `u8`
//! fields read and written by the crate's [`Stream`] codec), so decoding
//! never fails, [`AllocCase::to_bytes`] is its exact inverse, and the seeds
//! ([`seeds`]) are real fixtures: the machines of `fixtures/sysfs` read with
//! the host's sysfs reader, and the pods of `fixtures/pods`. The bytes are
//! turned into WIT values by the `build_*` functions:
//!
//! - [`MachineSpec`]: a `fixtures/sysfs` machine, a synthetic one (sockets,
//!   NUMA nodes per socket or sockets per NUMA node, cores, threads, CPU
//!   numbering, an offline CPU, L3 groups, memory, huge pages, distances;
//!   built as a [`SysfsTopology`] and converted by the host, kubelet core
//!   ids included), or raw WIT CPUs (duplicates, unknown NUMA nodes, ...).
//! - [`NodeSpec`]: static or `none` CPU manager with options and reserved
//!   CPUs (by count or by list), `Static` or `None` memory manager with
//!   reserved memory, topology manager policy, scope and options, gates.
//! - [`Op`]: admit a generated pod ([`PodGen`]: Guaranteed integer-CPU,
//!   fractional, Burstable, limits-only containers, init containers and
//!   sidecars, pod-level resources, huge pages), admit a pod spelled by the
//!   pod codec (fixture pods), admit an admitted pod again, release one
//!   container or a whole pod, or run one `manager-operation` ([`OpGen`]).

use std::path::Path;
use std::sync::OnceLock;

use podpolicy::bindings as host;
use podpolicy::sysfs::{CpuInfo, NumaNodeInfo, SysfsTopology};

use crate::{Result, Stream, empty_pod, flag, list, opt, raw};

/// Read or write one byte field.
fn byte<S: Stream>(s: &mut S, v: &mut u8) -> Result<()> {
    s.byte(v)
}

// ----------------------------------------------------------------------
// Machine
// ----------------------------------------------------------------------

/// One raw CPU: id, core, socket, NUMA node, L3 (0 = none).
pub type RawCpu = [u8; 5];

/// Which machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MachineSpec {
    /// `% 4`: 0 = a fixtures/sysfs machine, 1-2 = synthetic, 3 = raw CPUs.
    pub kind: u8,
    /// Fixture index; or synthetic shape: sockets, NUMA layout, cores per
    /// NUMA node, threads per core, numbering, offline CPU, L3 groups.
    pub shape: [u8; 8],
    /// Per NUMA node memory, 2Mi pages, 1Gi pages; distance style.
    pub memory: [u8; 4],
    /// Raw CPUs (kind 3).
    pub raw_cpus: Vec<RawCpu>,
}

fn machine<S: Stream>(s: &mut S, v: &mut MachineSpec) -> Result<()> {
    byte(s, &mut v.kind)?;
    raw(s, &mut v.shape)?;
    raw(s, &mut v.memory)?;
    if v.kind % 4 == 3 {
        list(s, &mut v.raw_cpus, 24, || [0; 5], raw)?;
    } else {
        v.raw_cpus.clear();
    }
    Ok(())
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// The machines of fixtures/sysfs, read by the host's sysfs reader.
pub fn fixture_machines() -> &'static [(String, host::NodeTopology)] {
    static MACHINES: OnceLock<Vec<(String, host::NodeTopology)>> = OnceLock::new();
    MACHINES.get_or_init(|| {
        let dir = crate::seeds::repository().join("fixtures/sysfs");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .filter(|p| p.is_dir())
            .map(|p| {
                p.file_name()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|name| {
                let topology = podpolicy::topology_input::read_node_topology(&dir.join(&name))
                    .unwrap_or_else(|e| panic!("fixtures/sysfs/{name}: {e:#}"));
                (name, topology)
            })
            .collect()
    })
}

/// The fixture machine named `name` (its index for [`MachineSpec::fixture`]).
pub fn fixture_index(name: &str) -> u8 {
    fixture_machines()
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no fixtures/sysfs/{name}")) as u8
}

impl MachineSpec {
    /// The fixture machine with this index.
    pub fn fixture(index: u8) -> MachineSpec {
        MachineSpec {
            kind: 0,
            shape: [index, 0, 0, 0, 0, 0, 0, 0],
            ..MachineSpec::default()
        }
    }

    /// A synthetic machine; `shape` as [`build_synthetic`] reads it.
    pub fn synthetic(shape: [u8; 8], memory: [u8; 4]) -> MachineSpec {
        MachineSpec {
            kind: 1,
            shape,
            memory,
            raw_cpus: Vec::new(),
        }
    }

    /// The WIT topology.
    pub fn build(&self) -> host::NodeTopology {
        match self.kind % 4 {
            0 => {
                let machines = fixture_machines();
                machines[usize::from(self.shape[0]) % machines.len()]
                    .1
                    .clone()
            }
            3 => self.build_raw(),
            _ => podpolicy::topology_input::node_topology(&build_synthetic(
                &self.shape,
                &self.memory,
            )),
        }
    }

    fn build_raw(&self) -> host::NodeTopology {
        let mut numa_ids: Vec<u32> = Vec::new();
        let cpus: Vec<host::TopologyCpu> = self
            .raw_cpus
            .iter()
            .map(|c| {
                // Mostly small ids; a few far out of range.
                let wide = |b: u8, m: u8| {
                    if b >= 0xF8 {
                        u32::from(b) * 100
                    } else {
                        u32::from(b % m)
                    }
                };
                let numa = wide(c[3], 4);
                if !numa_ids.contains(&numa) && c[3] & 0x40 == 0 {
                    numa_ids.push(numa);
                }
                host::TopologyCpu {
                    id: wide(c[0], 32),
                    core_id: wide(c[1], 16),
                    socket_id: wide(c[2], 4),
                    numa_node: numa,
                    uncore_cache_id: (c[4] != 0).then_some(u32::from(c[4] % 4)),
                }
            })
            .collect();
        let memory = memory_per_node(self.memory[0]);
        let count = numa_ids.len();
        host::NodeTopology {
            cpus,
            numa_nodes: numa_ids
                .iter()
                .map(|&id| host::NumaNodeInfo {
                    id,
                    memory_bytes: memory,
                    hugepages: Vec::new(),
                    distances: distances(self.memory[3], count, id as usize, &|_, _| true),
                })
                .collect(),
        }
    }
}

fn memory_per_node(b: u8) -> u64 {
    [GIB, 4 * GIB, 16 * GIB, 64 * GIB, 256 * GIB, 512 * MIB][usize::from(b) % 6]
}

/// The distance row of node `i` of `count`: `% 3` of `style`: none
/// (unknown), 10/11/21 (same socket / other socket), or 10 + 10 * |i - j|.
fn distances(
    style: u8,
    count: usize,
    i: usize,
    same_socket: &dyn Fn(usize, usize) -> bool,
) -> Vec<u32> {
    match style % 3 {
        0 => Vec::new(),
        1 => (0..count)
            .map(|j| {
                if i == j {
                    10
                } else if same_socket(i, j) {
                    11
                } else {
                    21
                }
            })
            .collect(),
        _ => (0..count)
            .map(|j| 10 + 10 * (i.abs_diff(j) as u32))
            .collect(),
    }
}

/// A synthetic machine as sysfs would describe it.
///
/// `shape`: [0] sockets (1, 2, 2, 4); [1] NUMA layout (`% 4`: one node per
/// socket, two per socket, four per socket, one per two sockets), at most 8
/// nodes; [2] cores per NUMA node (1-6); [3] threads per core (1, 2, 2, 4);
/// [4] numbering (`% 3`: siblings one core count apart as on x86, siblings
/// adjacent, NUMA nodes interleaved); [5] offline CPU (`% 4`: none, the
/// highest, one thread of a middle core, CPU 0); [6] L3 groups (`% 4`:
/// none, per socket, per NUMA node, per two cores); [7] unused.
/// `memory`: [0] bytes per NUMA node, [1] 2Mi pages, [2] 1Gi pages,
/// [3] distance style.
pub fn build_synthetic(shape: &[u8; 8], memory: &[u8; 4]) -> SysfsTopology {
    let sockets = [1u32, 2, 2, 4][usize::from(shape[0]) % 4];
    let layout = shape[1] % 4;
    let mut per_socket = [1u32, 2, 4, 1][usize::from(layout)];
    while sockets * per_socket > 8 {
        per_socket /= 2;
    }
    let cores = 1 + u32::from(shape[2]) % 6;
    let threads = [1u32, 2, 2, 4][usize::from(shape[3]) % 4];
    // (socket, NUMA node) of each group of `cores` cores.
    let units: Vec<(u32, u32)> = (0..sockets)
        .flat_map(|s| {
            (0..per_socket).map(move |k| {
                let numa = if layout == 3 {
                    s / 2
                } else {
                    s * per_socket + k
                };
                (s, numa)
            })
        })
        .collect();
    let unit_count = units.len() as u32;
    let physical = unit_count * cores;
    let mut cpus = Vec::new();
    for (u, &(socket, numa)) in units.iter().enumerate() {
        let u = u as u32;
        // Core index within the socket, as sysfs core_id.
        let first_in_socket = units.iter().position(|&(s, _)| s == socket).unwrap_or(0) as u32;
        for j in 0..cores {
            let p = u * cores + j;
            for t in 0..threads {
                let id = match shape[4] % 3 {
                    0 => t * physical + p,
                    1 => p * threads + t,
                    _ => t * physical + j * unit_count + u,
                };
                let uncore = match shape[6] % 4 {
                    0 => None,
                    1 => Some(socket),
                    2 => Some(u),
                    _ => Some(p / 2),
                };
                cpus.push(CpuInfo {
                    id,
                    core_id: (u - first_in_socket) * cores + j,
                    socket_id: socket,
                    die_id: None,
                    cluster_id: None,
                    numa_node: numa,
                    uncore_cache_id: uncore,
                });
            }
        }
    }
    cpus.sort_by_key(|c| c.id);
    match shape[5] % 4 {
        1 if cpus.len() > 1 => {
            cpus.pop();
        }
        2 if threads > 1 => {
            let middle = physical / 2;
            let victim = cpus
                .iter()
                .rposition(|c| {
                    // The last thread of core `middle`.
                    let p = match shape[4] % 3 {
                        0 | 2 => c.id % physical,
                        _ => c.id / threads,
                    };
                    p == middle
                })
                .unwrap_or(0);
            if cpus.len() > 1 {
                cpus.remove(victim);
            }
        }
        3 if cpus.len() > 1 => {
            cpus.remove(0);
        }
        _ => {}
    }
    let mut numa_ids: Vec<u32> = units.iter().map(|&(_, n)| n).collect();
    numa_ids.dedup();
    let socket_of = |numa: usize| {
        units
            .iter()
            .find(|&&(_, n)| n as usize == numa)
            .map(|u| u.0)
    };
    let node_memory = memory_per_node(memory[0]);
    let pages_2m = [0u64, 16, 512, 0][usize::from(memory[1]) % 4];
    let pages_1g = [0u64, 0, 1, 4][usize::from(memory[2]) % 4];
    let count = numa_ids.len();
    let numa_nodes = numa_ids
        .iter()
        .map(|&id| {
            let mut hugepages = std::collections::BTreeMap::new();
            if pages_2m > 0 {
                hugepages.insert(2 * MIB, pages_2m);
            }
            if pages_1g > 0 {
                hugepages.insert(GIB, pages_1g);
            }
            NumaNodeInfo {
                id,
                cpus: cpus
                    .iter()
                    .filter(|c| c.numa_node == id)
                    .map(|c| c.id)
                    .collect(),
                memory_bytes: node_memory,
                hugepages,
                distances: distances(memory[3], count, id as usize, &|i, j| {
                    socket_of(i) == socket_of(j)
                }),
            }
        })
        .collect();
    SysfsTopology { cpus, numa_nodes }
}

// ----------------------------------------------------------------------
// Node settings
// ----------------------------------------------------------------------

/// The static CPU policy options, one bit each in [`NodeSpec::cpu_options`].
pub const CPU_OPTIONS: [&str; 6] = [
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
];

/// Gates the managers read, one bit each in [`NodeSpec::gates`]; a set bit
/// flips the gate's default.
pub const GATES: [&str; 8] = [
    "PodLevelResources",
    "PodLevelResourceManagers",
    "CPUManagerPolicyAlphaOptions",
    "CPUManagerPolicyBetaOptions",
    "TopologyManagerPolicyAlphaOptions",
    "TopologyManagerPolicyBetaOptions",
    "DisableCPUQuotaWithExclusiveCPUs",
    "SidecarContainers",
];

const TOPOLOGY_POLICIES: [host::TopologyManagerPolicy; 4] = [
    host::TopologyManagerPolicy::None,
    host::TopologyManagerPolicy::BestEffort,
    host::TopologyManagerPolicy::Restricted,
    host::TopologyManagerPolicy::SingleNumaNode,
];

/// The managers' node settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSpec {
    /// `% 4`: 0 = `none`, else `static`.
    pub cpu_policy: u8,
    /// Bits over [`CPU_OPTIONS`] (each set to `true`).
    pub cpu_options: u8,
    /// `% 4`: systemReserved cpu N; kubeReserved cpu N - 0.5; the first N
    /// CPUs as reservedSystemCPUs with systemReserved cpu N; the last N CPUs
    /// as reservedSystemCPUs alone.
    pub reserve_mode: u8,
    /// N: (1, 1, 2, 2, 3, 4, 0)[`% 7`].
    pub reserved_cpus: u8,
    /// `% 3`: 0 = `None`, else `Static`.
    pub memory_policy: u8,
    /// Reserved memory per NUMA node: bits 0-1 size (0, 64Mi, 256Mi, 1Gi),
    /// bit 2: also 2Mi of 2Mi huge pages on node 0, bit 3: nothing on node 0.
    pub reserved_memory: u8,
    /// Topology manager policy (`% 4`).
    pub topology_policy: u8,
    /// Bit 0: pod scope; bit 1: prefer-closest-numa-nodes; bit 2:
    /// max-allowable-numa-nodes=16; bit 3: an unknown scope.
    pub topology: u8,
    /// Bits over [`GATES`].
    pub gates: u8,
}

fn node_spec<S: Stream>(s: &mut S, v: &mut NodeSpec) -> Result<()> {
    for b in [
        &mut v.cpu_policy,
        &mut v.cpu_options,
        &mut v.reserve_mode,
        &mut v.reserved_cpus,
        &mut v.memory_policy,
        &mut v.reserved_memory,
        &mut v.topology_policy,
        &mut v.topology,
        &mut v.gates,
    ] {
        byte(s, b)?;
    }
    Ok(())
}

fn quantity(name: &str, quantity: impl Into<String>) -> host::ResourceQuantity {
    host::ResourceQuantity {
        name: name.to_string(),
        quantity: quantity.into(),
    }
}

/// What the node settings ask for, for the invariants.
#[derive(Clone, Debug)]
pub struct NodeFacts {
    /// Static CPU manager.
    pub cpu_static: bool,
    /// Static memory manager.
    pub memory_static: bool,
    /// `strict-cpu-reservation`.
    pub strict: bool,
    /// `align-by-socket`: exclusive CPUs may come from any NUMA node of the
    /// hint's sockets, while memory stays on the hint's nodes.
    pub align_by_socket: bool,
    /// `reservedSystemCPUs`, when given.
    pub reserved_list: Option<Vec<u32>>,
    /// Reserved CPUs by count (`ceil(kube + system reserved cpu)`, else the list's size).
    pub reserved_count: usize,
    /// `PodLevelResourceManagers` is on.
    pub pod_level_managers: bool,
}

impl NodeSpec {
    /// The node settings on `topology`, and what they ask for.
    pub fn build(&self, topology: &host::NodeTopology) -> (host::NodeSettings, NodeFacts) {
        let mut node = podpolicy::empty_node();
        node.name = "fuzz".into();
        let memory: u64 = topology
            .numa_nodes
            .iter()
            .fold(0u64, |a, n| a.saturating_add(n.memory_bytes));
        node.capacity = vec![
            quantity("cpu", topology.cpus.len().to_string()),
            quantity("memory", memory.to_string()),
        ];
        let cpu_static = !self.cpu_policy.is_multiple_of(4);
        if cpu_static {
            node.cpu_manager_policy = Some(host::CpuManagerPolicy::Static);
        }
        node.cpu_manager_policy_options = CPU_OPTIONS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.cpu_options & (1 << i) != 0)
            .map(|(_, name)| host::PolicyOption {
                name: (*name).into(),
                value: "true".into(),
            })
            .collect();
        let n = [1usize, 1, 2, 2, 3, 4, 0][usize::from(self.reserved_cpus) % 7];
        let mut ids: Vec<u32> = topology.cpus.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut reserved_list = None;
        let mut reserved_count = n;
        match self.reserve_mode % 4 {
            0 => node.system_reserved = vec![quantity("cpu", n.to_string())],
            1 => {
                let millis = (n * 1000).saturating_sub(500);
                node.kube_reserved = vec![quantity("cpu", format!("{millis}m"))];
                reserved_count = millis.div_ceil(1000);
            }
            mode => {
                let list: Vec<u32> = if mode == 2 {
                    ids.iter().take(n).copied().collect()
                } else {
                    ids.iter().rev().take(n).copied().collect()
                };
                node.reserved_system_cpus = Some(
                    list.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                );
                if mode == 2 {
                    node.system_reserved = vec![quantity("cpu", n.to_string())];
                }
                reserved_count = list.len();
                reserved_list = Some(list);
            }
        }
        let memory_static = !self.memory_policy.is_multiple_of(3);
        if memory_static {
            node.memory_manager_policy = Some(host::MemoryManagerPolicy::Static);
        }
        let size = [0u64, 64 * MIB, 256 * MIB, GIB][usize::from(self.reserved_memory & 3)];
        node.reserved_memory = topology
            .numa_nodes
            .iter()
            .filter(|n| !(self.reserved_memory & 8 != 0 && n.id == 0))
            .map(|n| {
                let mut limits = vec![quantity("memory", size.to_string())];
                if self.reserved_memory & 4 != 0 && n.id == 0 {
                    limits.push(quantity("hugepages-2Mi", "2Mi"));
                }
                host::NumaReservedMemory {
                    numa_node: n.id,
                    limits,
                }
            })
            .collect();
        node.topology_manager_policy =
            Some(TOPOLOGY_POLICIES[usize::from(self.topology_policy) % TOPOLOGY_POLICIES.len()]);
        // An unknown scope name cannot cross the contract (an enum); the
        // host's decoding refuses it before any call.
        node.topology_manager_scope = Some(if self.topology & 1 != 0 {
            host::TopologyManagerScope::Pod
        } else {
            host::TopologyManagerScope::Container
        });
        if self.topology & 2 != 0 {
            node.topology_manager_policy_options
                .push(host::PolicyOption {
                    name: "prefer-closest-numa-nodes".into(),
                    value: "true".into(),
                });
        }
        if self.topology & 4 != 0 {
            node.topology_manager_policy_options
                .push(host::PolicyOption {
                    name: "max-allowable-numa-nodes".into(),
                    value: "16".into(),
                });
        }
        let mut pod_level_managers = false;
        node.feature_gates = GATES
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let default = policy_wasm::features::KNOWN_GATES
                    .iter()
                    .find(|g| g.name == *name)
                    .is_some_and(|g| g.default);
                let enabled = default ^ (self.gates & (1 << i) != 0);
                if *name == "PodLevelResourceManagers" {
                    pod_level_managers = enabled;
                }
                host::FeatureGate {
                    name: (*name).into(),
                    enabled,
                }
            })
            .collect();
        let facts = NodeFacts {
            cpu_static,
            memory_static,
            strict: cpu_static && self.cpu_options & (1 << 4) != 0,
            align_by_socket: cpu_static && self.cpu_options & (1 << 2) != 0,
            reserved_list,
            reserved_count,
            pod_level_managers,
        };
        (node, facts)
    }
}

// ----------------------------------------------------------------------
// Pods
// ----------------------------------------------------------------------

/// One generated container.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContainerGen {
    /// `% 8`: none; Guaranteed N CPUs; Guaranteed N - 0.5 CPUs; Burstable;
    /// limits only (defaulted to Guaranteed); requests only; Guaranteed N
    /// CPUs with huge pages; Guaranteed N CPUs without memory.
    pub kind: u8,
    /// N: (1, 1, 1, 2, 2, 3, 4, 8)[`% 8`].
    pub cpus: u8,
    /// Memory: (64Mi, 128Mi, 256Mi, 1Gi, 2Gi, 4Gi, 16Gi)[`% 7`]; bit 7 of
    /// kind 6 picks 1Gi pages instead of 2Mi pages.
    pub memory: u8,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub sidecar: bool,
}

fn container_gen<S: Stream>(s: &mut S, v: &mut ContainerGen) -> Result<()> {
    byte(s, &mut v.kind)?;
    byte(s, &mut v.cpus)?;
    byte(s, &mut v.memory)?;
    flag(s, &mut v.sidecar)
}

/// One generated pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodGen {
    /// Pod-level resources, `% 6`: none; Guaranteed N CPUs; Guaranteed
    /// N - 0.5 CPUs; limits only; CPU only (requests = limits); requests only.
    pub pod_level: u8,
    /// N: (1, 2, 3, 4, 6, 8, 16)[`% 7`].
    pub pod_cpus: u8,
    /// Pod memory: (256Mi, 1Gi, 4Gi, 16Gi)[`% 4`].
    pub pod_memory: u8,
    /// Init containers (sidecars among them).
    pub init: Vec<ContainerGen>,
    /// App containers.
    pub apps: Vec<ContainerGen>,
}

fn pod_gen<S: Stream>(s: &mut S, v: &mut PodGen) -> Result<()> {
    byte(s, &mut v.pod_level)?;
    byte(s, &mut v.pod_cpus)?;
    byte(s, &mut v.pod_memory)?;
    list(s, &mut v.init, 3, ContainerGen::default, container_gen)?;
    list(s, &mut v.apps, 4, ContainerGen::default, container_gen)
}

fn requirements(
    requests: Vec<host::ResourceQuantity>,
    limits: Vec<host::ResourceQuantity>,
) -> Option<host::ResourceRequirements> {
    Some(host::ResourceRequirements {
        requests: (!requests.is_empty()).then_some(requests),
        limits: (!limits.is_empty()).then_some(limits),
    })
}

fn memory_text(b: u8) -> String {
    ["64Mi", "128Mi", "256Mi", "1Gi", "2Gi", "4Gi", "16Gi"][usize::from(b) % 7].into()
}

impl ContainerGen {
    /// The exclusive CPUs the container asks for when it gets any: its
    /// integral CPU request (kinds 1, 4, 6, 7).
    pub fn integral_cpus(&self) -> Option<usize> {
        let n = [1usize, 1, 1, 2, 2, 3, 4, 8][usize::from(self.cpus) % 8];
        matches!(self.kind % 8, 1 | 4 | 6 | 7).then_some(n)
    }

    fn build(&self, name: String, init: bool) -> host::Container {
        let n = [1u32, 1, 1, 2, 2, 3, 4, 8][usize::from(self.cpus) % 8];
        let memory = memory_text(self.memory);
        let both = |cpu: String, memory: String| {
            let list = vec![quantity("cpu", cpu), quantity("memory", memory)];
            requirements(list.clone(), list)
        };
        let resources = match self.kind % 8 {
            0 => None,
            1 => both(n.to_string(), memory),
            2 => both(format!("{}m", n * 1000 - 500), memory),
            3 => requirements(
                vec![quantity("cpu", "100m"), quantity("memory", "64Mi")],
                vec![quantity("cpu", n.to_string()), quantity("memory", memory)],
            ),
            4 => requirements(
                Vec::new(),
                vec![quantity("cpu", n.to_string()), quantity("memory", memory)],
            ),
            5 => requirements(
                vec![quantity("cpu", n.to_string()), quantity("memory", memory)],
                Vec::new(),
            ),
            6 => {
                let pages = if self.memory & 0x80 != 0 {
                    quantity("hugepages-1Gi", "1Gi")
                } else {
                    quantity("hugepages-2Mi", "4Mi")
                };
                let list = vec![
                    quantity("cpu", n.to_string()),
                    quantity("memory", memory),
                    pages,
                ];
                requirements(list.clone(), list)
            }
            _ => {
                let list = vec![quantity("cpu", n.to_string())];
                requirements(list.clone(), list)
            }
        };
        host::Container {
            name,
            resources,
            restart_policy: (init && self.sidecar).then(|| "Always".into()),
            resize_policy: Vec::new(),
        }
    }
}

impl PodGen {
    /// The pod, with this UID (also its name).
    pub fn build(&self, uid: &str) -> host::Pod {
        let mut pod = empty_pod();
        pod.name = uid.into();
        pod.namespace = "default".into();
        pod.uid = uid.into();
        pod.spec.init_containers = self
            .init
            .iter()
            .enumerate()
            .map(|(i, c)| c.build(format!("init-{i}"), true))
            .collect();
        pod.spec.containers = self
            .apps
            .iter()
            .enumerate()
            .map(|(i, c)| c.build(format!("app-{i}"), false))
            .collect();
        let n = [1u32, 2, 3, 4, 6, 8, 16][usize::from(self.pod_cpus) % 7];
        let memory = ["256Mi", "1Gi", "4Gi", "16Gi"][usize::from(self.pod_memory) % 4];
        let both = |cpu: String| {
            let list = vec![quantity("cpu", cpu), quantity("memory", memory)];
            requirements(list.clone(), list)
        };
        pod.spec.resources = match self.pod_level % 6 {
            0 => None,
            1 => both(n.to_string()),
            2 => both(format!("{}m", n * 1000 - 500)),
            3 => requirements(
                Vec::new(),
                vec![quantity("cpu", n.to_string()), quantity("memory", memory)],
            ),
            4 => {
                let list = vec![quantity("cpu", n.to_string())];
                requirements(list.clone(), list)
            }
            _ => requirements(
                vec![quantity("cpu", n.to_string()), quantity("memory", memory)],
                Vec::new(),
            ),
        };
        pod
    }

    /// Per container (init containers first), the exclusive CPUs it asks for.
    pub fn integral_cpus(&self) -> Vec<Option<usize>> {
        self.init
            .iter()
            .chain(&self.apps)
            .map(ContainerGen::integral_cpus)
            .collect()
    }
}

// ----------------------------------------------------------------------
// Manager operations
// ----------------------------------------------------------------------

/// One hint: NUMA ids (`% 8`, or the byte itself from 0xF0 on: out of
/// range), or none (don't care).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HintGen {
    /// NUMA ids.
    pub ids: Option<Vec<u8>>,
    /// Preferred.
    pub preferred: bool,
}

/// One resource's hints.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceHintsGen {
    /// (cpu, memory, hugepages-2Mi, hugepages-1Gi)[`% 4`].
    pub resource: u8,
    /// The hints; none = a nil list.
    pub hints: Option<Vec<HintGen>>,
}

/// One provider's hints; none = a nil map.
pub type ProviderGen = Option<Vec<ResourceHintsGen>>;

fn hint_gen<S: Stream>(s: &mut S, v: &mut HintGen) -> Result<()> {
    opt(s, &mut v.ids, Vec::new, |s, ids| {
        list(s, ids, 3, || 0, byte)
    })?;
    flag(s, &mut v.preferred)
}

fn provider_gen<S: Stream>(s: &mut S, v: &mut ProviderGen) -> Result<()> {
    opt(s, v, Vec::new, |s, l| {
        list(s, l, 3, ResourceHintsGen::default, |s, r| {
            byte(s, &mut r.resource)?;
            opt(s, &mut r.hints, Vec::new, |s, h| {
                list(s, h, 4, HintGen::default, hint_gen)
            })
        })
    })
}

impl HintGen {
    /// The WIT hint.
    pub fn build(&self) -> host::TopologyHint {
        host::TopologyHint {
            numa_affinity: self.ids.as_ref().map(|ids| {
                ids.iter()
                    .map(|&b| {
                        if b >= 0xF0 {
                            u32::from(b)
                        } else {
                            u32::from(b % 8)
                        }
                    })
                    .collect()
            }),
            preferred: self.preferred,
        }
    }
}

/// Build provider hints.
pub fn build_provider(p: &ProviderGen) -> host::ProviderHints {
    p.as_ref().map(|l| {
        l.iter()
            .map(|r| host::ResourceHints {
                resource_name: ["cpu", "memory", "hugepages-2Mi", "hugepages-1Gi"]
                    [usize::from(r.resource) % 4]
                    .into(),
                hints: r
                    .hints
                    .as_ref()
                    .map(|h| h.iter().map(HintGen::build).collect()),
            })
            .collect()
    })
}

/// One `manager-operation`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpGen {
    /// `% 10`: start (of the current state, maybe damaged), topology-merge,
    /// take-cpus, allocate-cpus, topology-hints, allocate, allocate-pod,
    /// allocate-containers, remove-container, pod-requested.
    pub kind: u8,
    /// [0] pod (bit 7: the memory manager), [1] container, [2] CPU count,
    /// [3] CPU mask (available / reusable), [4] take-cpus knobs, [5] hint
    /// or damage to the state.
    pub params: [u8; 6],
    /// `topology-merge` providers; the first hint found is the allocation hint.
    pub hints: Vec<ProviderGen>,
}

fn op_gen<S: Stream>(s: &mut S, v: &mut OpGen) -> Result<()> {
    byte(s, &mut v.kind)?;
    raw(s, &mut v.params)?;
    list(s, &mut v.hints, 3, || None, provider_gen)
}

// ----------------------------------------------------------------------
// The sequence
// ----------------------------------------------------------------------

/// One step.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Admit a generated pod (UID `pod-<step>`).
    Admit(PodGen),
    /// Admit a pod spelled by the pod codec (UID `pod-<step>`).
    AdmitPod(Box<host::Pod>),
    /// Admit an admitted pod again (index `%` the admitted pods).
    Readmit(u8),
    /// Release one container of an admitted pod: (pod, container); a
    /// container index past the end names a container the pod lacks.
    Release(u8, u8),
    /// Release every container of an admitted pod, in spec order.
    ReleasePod(u8),
    /// One manager operation.
    Operation(OpGen),
}

fn op<S: Stream>(s: &mut S, v: &mut Op) -> Result<()> {
    let mut tag = match v {
        Op::Admit(_) => 0,
        Op::AdmitPod(_) => 1,
        Op::Readmit(_) => 2,
        Op::Release(..) => 3,
        Op::ReleasePod(_) => 4,
        Op::Operation(_) => 5,
    };
    byte(s, &mut tag)?;
    let tag = tag % 6;
    // Keep the payload when the tag is unchanged (writing), else start empty.
    let same = matches!(
        (tag, &*v),
        (0, Op::Admit(_))
            | (1, Op::AdmitPod(_))
            | (2, Op::Readmit(_))
            | (3, Op::Release(..))
            | (4, Op::ReleasePod(_))
            | (5, Op::Operation(_))
    );
    if !same {
        *v = match tag {
            0 => Op::Admit(PodGen::default()),
            1 => Op::AdmitPod(Box::new(empty_pod())),
            2 => Op::Readmit(0),
            3 => Op::Release(0, 0),
            4 => Op::ReleasePod(0),
            _ => Op::Operation(OpGen::default()),
        };
    }
    match v {
        Op::Admit(p) => pod_gen(s, p),
        Op::AdmitPod(p) => crate::pod(s, p),
        Op::Readmit(i) | Op::ReleasePod(i) => byte(s, i),
        Op::Release(i, j) => {
            byte(s, i)?;
            byte(s, j)
        }
        Op::Operation(o) => op_gen(s, o),
    }
}

/// The input of the `allocation` target.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AllocCase {
    /// The machine.
    pub machine: MachineSpec,
    /// The node settings.
    pub node: NodeSpec,
    /// The steps.
    pub ops: Vec<Op>,
}

/// The most steps in one case.
pub const MAX_OPS: usize = 16;

pub(crate) fn alloc_case<S: Stream>(s: &mut S, v: &mut AllocCase) -> Result<()> {
    machine(s, &mut v.machine)?;
    node_spec(s, &mut v.node)?;
    list(s, &mut v.ops, MAX_OPS, || Op::Readmit(0), op)
}

impl AllocCase {
    /// The bytes that decode to this case.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut value = self.clone();
        let mut writer = crate::Writer::default();
        alloc_case(&mut writer, &mut value).expect("writing cannot fail");
        writer.bytes
    }

    /// Decode bytes (never fails; missing bytes read as zeros).
    pub fn from_bytes(bytes: &[u8]) -> AllocCase {
        let mut u = arbitrary::Unstructured::new(bytes);
        <AllocCase as arbitrary::Arbitrary>::arbitrary(&mut u).expect("decoding cannot fail")
    }
}

impl<'a> arbitrary::Arbitrary<'a> for AllocCase {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> Result<AllocCase> {
        let mut value = AllocCase::default();
        alloc_case(&mut crate::Reader { u }, &mut value)?;
        Ok(value)
    }
}

// ----------------------------------------------------------------------
// Seeds
// ----------------------------------------------------------------------

/// Node settings seeds: (name, spec).
pub fn node_presets() -> Vec<(&'static str, NodeSpec)> {
    vec![
        // fixtures/nodes/dual-socket-static.yaml: static CPU (1 CPU
        // reserved), Static memory (1Gi per node), best-effort, pod scope,
        // PodLevelResourceManagers on.
        (
            "kep5526",
            NodeSpec {
                cpu_policy: 1,
                reserve_mode: 0,
                reserved_cpus: 0,
                memory_policy: 1,
                reserved_memory: 3,
                topology_policy: 1,
                topology: 1,
                gates: pod_level_gate_flip(),
                ..NodeSpec::default()
            },
        ),
        (
            "full-pcpus-single-numa",
            NodeSpec {
                cpu_policy: 1,
                cpu_options: 1,
                reserve_mode: 0,
                reserved_cpus: 2,
                memory_policy: 0,
                reserved_memory: 0,
                topology_policy: 3,
                topology: 0,
                gates: 0,
            },
        ),
        (
            "distribute-restricted-list",
            NodeSpec {
                cpu_policy: 1,
                cpu_options: 2,
                reserve_mode: 2,
                reserved_cpus: 2,
                memory_policy: 1,
                reserved_memory: 2 | 4,
                topology_policy: 2,
                topology: 2,
                gates: 0,
            },
        ),
        (
            "strict-uncore-pod-scope",
            NodeSpec {
                cpu_policy: 1,
                cpu_options: (1 << 4) | (1 << 5),
                reserve_mode: 3,
                reserved_cpus: 0,
                memory_policy: 1,
                reserved_memory: 1,
                topology_policy: 0,
                topology: 1,
                gates: pod_level_gate_flip() | gate_flip("CPUManagerPolicyAlphaOptions"),
            },
        ),
    ]
}

fn gate_flip(name: &str) -> u8 {
    let i = GATES
        .iter()
        .position(|g| *g == name)
        .expect("a listed gate");
    let default = policy_wasm::features::KNOWN_GATES
        .iter()
        .find(|g| g.name == name)
        .is_some_and(|g| g.default);
    // Flip to on when the default is off.
    if default { 0 } else { 1 << i }
}

fn pod_level_gate_flip() -> u8 {
    gate_flip("PodLevelResources") | gate_flip("PodLevelResourceManagers")
}

fn container(kind: u8, cpus: u8, memory: u8) -> ContainerGen {
    ContainerGen {
        kind,
        cpus,
        memory,
        sidecar: false,
    }
}

/// Generated pods for the seeds: the KEP-5526 shapes and the common ones.
pub fn pod_presets() -> Vec<PodGen> {
    vec![
        // Guaranteed, 2 exclusive CPUs.
        PodGen {
            apps: vec![container(1, 3, 3)],
            ..PodGen::default()
        },
        // Pod-level 4 CPUs: one container with 2 exclusive CPUs, two sharing.
        PodGen {
            pod_level: 1,
            pod_cpus: 3,
            pod_memory: 2,
            apps: vec![container(1, 3, 3), container(0, 0, 0), container(0, 0, 0)],
            ..PodGen::default()
        },
        // An init container, a sidecar and two apps.
        PodGen {
            init: vec![
                container(1, 5, 2),
                ContainerGen {
                    sidecar: true,
                    ..container(1, 0, 1)
                },
            ],
            apps: vec![container(1, 0, 2), container(2, 3, 2)],
            ..PodGen::default()
        },
        // Burstable and huge pages.
        PodGen {
            apps: vec![container(3, 2, 2), container(6, 0, 1)],
            ..PodGen::default()
        },
        // Pod-level fractional CPUs, limits-only containers.
        PodGen {
            pod_level: 2,
            pod_cpus: 4,
            pod_memory: 1,
            apps: vec![container(4, 0, 1), container(0, 0, 0)],
            ..PodGen::default()
        },
    ]
}

/// The seeds of the `allocation` target: every fixture machine and a few
/// synthetic ones, under every node preset, admitting the generated pod
/// presets and the KEP-5526 fixture pod, then releasing, re-admitting and
/// running manager operations.
pub fn seed_cases() -> Vec<(String, AllocCase)> {
    let fixture_pod = |name: &str| {
        let path = crate::seeds::repository().join("fixtures/pods").join(name);
        let docs =
            podpolicy::pod_input::read_pods(Path::new(&path)).unwrap_or_else(|e| panic!("{e:#}"));
        Box::new(docs[0].pod.clone())
    };
    let mut machines: Vec<(String, MachineSpec)> = fixture_machines()
        .iter()
        .enumerate()
        .map(|(i, (name, _))| (name.clone(), MachineSpec::fixture(i as u8)))
        .collect();
    machines.push((
        "synthetic-2s-4numa-ht".into(),
        MachineSpec::synthetic([1, 1, 3, 1, 0, 0, 2, 0], [2, 1, 2, 1]),
    ));
    machines.push((
        "synthetic-1s-smt4-offline".into(),
        MachineSpec::synthetic([0, 0, 5, 3, 1, 2, 3, 0], [1, 0, 0, 2]),
    ));
    machines.push((
        "synthetic-4s-numa-per-2-sockets".into(),
        MachineSpec::synthetic([3, 3, 2, 1, 2, 0, 1, 0], [3, 2, 3, 1]),
    ));
    let pods = pod_presets();
    let mut out = Vec::new();
    for (machine_name, machine) in &machines {
        for (node_name, node) in node_presets() {
            let mut ops: Vec<Op> = pods.iter().cloned().map(Op::Admit).collect();
            ops.push(Op::AdmitPod(fixture_pod("kep5526-pod-scope-mixed.yaml")));
            ops.push(Op::Release(0, 0));
            ops.push(Op::Readmit(1));
            ops.push(Op::ReleasePod(2));
            ops.push(Op::Operation(OpGen {
                kind: 0,
                ..OpGen::default()
            }));
            ops.push(Op::Operation(OpGen {
                kind: 6,
                params: [1, 0, 2, 0xff, 0, 1],
                hints: Vec::new(),
            }));
            out.push((
                format!("seed-{machine_name}-{node_name}"),
                AllocCase {
                    machine: machine.clone(),
                    node: node.clone(),
                    ops,
                },
            ));
        }
    }
    // Every fixture pod once, on the KEP-5526 machine and node.
    let dual = MachineSpec::fixture(fixture_index("topoDualSocketHT"));
    let mut ops = Vec::new();
    for doc in crate::seeds::fixture_pods() {
        ops.push(Op::AdmitPod(Box::new(doc)));
        if ops.len() == MAX_OPS {
            break;
        }
    }
    out.push((
        "seed-fixture-pods".into(),
        AllocCase {
            machine: dual,
            node: node_presets()[0].1.clone(),
            ops,
        },
    ));
    // Manager operations of every kind.
    let mut ops: Vec<Op> = pods.iter().take(3).cloned().map(Op::Admit).collect();
    for kind in 0..10u8 {
        ops.push(Op::Operation(OpGen {
            kind,
            params: [kind % 3, 0, 2, 0x0f, kind, kind],
            hints: vec![Some(vec![ResourceHintsGen {
                resource: 0,
                hints: Some(vec![
                    HintGen {
                        ids: Some(vec![0]),
                        preferred: true,
                    },
                    HintGen {
                        ids: Some(vec![0, 1]),
                        preferred: false,
                    },
                ]),
            }])],
        }));
    }
    out.push((
        "seed-operations".into(),
        AllocCase {
            machine: MachineSpec::fixture(fixture_index("topoDualSocketHT")),
            node: node_presets()[0].1.clone(),
            ops,
        },
    ));
    out
}
