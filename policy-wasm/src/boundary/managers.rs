//! The `managers` interface at the edge: the node topology, the manager
//! state, the manager settings and the pod decoded from their WIT records
//! into [`crate::managers`]' types (with field paths), and the admission,
//! the state, the assignment, the decisions and the errors encoded back.
//!
//! The exports `admit` and `release`, the prepared node's managers, and
//! the managers' part of `validate-node` and `managers-active` decode
//! here, call the core, and encode its answer; an admission's placement
//! files are computed by [`crate::placement`] from the core assignment and
//! encoded with it ([`super::cgroup`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{
    Result, decode_mask, duplicate, encode_errors, encode_result, field_error, invalid, numa_ids,
    parse_cpuset,
};
use crate::cpu_manager::hints::CpuHints;
use crate::cpu_manager::{CpuManagerState, ResourceIsolationLevel};
use crate::cpu_topology::{CpuInfo, CpuTopology, CpuTopologyError, MAX_NUMA_NODE_ID};
use crate::cpuset::MAX_CPU_ID;
use crate::features::FeatureGates;
use crate::managers::{
    Admission, Config, ContainerAssignment, FieldErrorType, MAX_NUMA_NODES, Machine, ManagedPod,
    ManagerError, ManagerErrorKind, ManagerState, NumaNode, PodAssignment, PreparedManagers,
    ProviderAnswer, ResourceManager, TopologyDecision, admit_managed, managed_pod, node_managers,
    non_negative_bytes, release_container,
};
use crate::memory_manager::{
    self as mm, Block, HugePagesInfo, MemoryState, MemoryTable, NumaNodeMemory, NumaNodeState,
    SystemReservedMemory,
};
use crate::model::truncate;
use crate::node::NodeConfig;
use crate::placement::PlacementFiles;
use crate::topology::{self as tm, BitMask, TopologyHint};
use crate::wit::{self, FieldError};

// ---- The node topology ----------------------------------------------------

/// Decode and check a WIT topology; problems are pushed to `errors` with
/// paths under `topology`.
pub fn decode_machine(topology: &wit::NodeTopology, errors: &mut Vec<FieldError>) -> Machine {
    let mut numa = BTreeMap::new();
    if topology.numa_nodes.len() > MAX_NUMA_NODES {
        errors.push(field_error(
            "topology.numaNodes",
            FieldErrorType::TooLong,
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
            FieldErrorType::Invalid,
            err.to_string(),
            None,
        ));
    }
    Machine::new(numa, cpu)
}

// ---- The manager settings -------------------------------------------------

fn option_pairs(
    options: &[wit::PolicyOption],
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for option in options {
        if !seen.insert(option.name.clone()) {
            errors.push(duplicate(
                format!("{field}[{}]", truncate(&option.name)),
                &option.name,
            ));
            continue;
        }
        out.push((option.name.clone(), option.value.clone()));
    }
    out
}

/// The topology manager policy (`none` when unset, the kubelet default).
fn topology_policy(policy: Option<wit::TopologyManagerPolicy>) -> tm::PolicyName {
    match policy {
        None | Some(wit::TopologyManagerPolicy::None) => tm::PolicyName::None,
        Some(wit::TopologyManagerPolicy::BestEffort) => tm::PolicyName::BestEffort,
        Some(wit::TopologyManagerPolicy::Restricted) => tm::PolicyName::Restricted,
        Some(wit::TopologyManagerPolicy::SingleNumaNode) => tm::PolicyName::SingleNumaNode,
    }
}

/// The topology manager scope (`container` when unset, the kubelet default).
fn topology_scope(scope: Option<wit::TopologyManagerScope>) -> tm::Scope {
    match scope {
        None | Some(wit::TopologyManagerScope::Container) => tm::Scope::Container,
        Some(wit::TopologyManagerScope::Pod) => tm::Scope::Pod,
    }
}

/// The managers' configuration and the node configuration it was decoded with.
fn decode_config_and_node(node: &wit::NodeSettings) -> Result<(Config, NodeConfig)> {
    let decoded = crate::boundary::node::decode_node(node);
    let mut errors = Vec::new();
    let cpu_static = node.cpu_manager_policy == Some(wit::CpuManagerPolicy::Static);
    let memory_static = node.memory_manager_policy == Some(wit::MemoryManagerPolicy::Static);
    let reserved_cpus = node
        .reserved_system_cpus
        .as_deref()
        .map(|text| parse_cpuset(text, "reservedSystemCPUs", &mut errors))
        .unwrap_or_default();
    let cpu_options = option_pairs(
        &node.cpu_manager_policy_options,
        "cpuManagerPolicyOptions",
        &mut errors,
    );
    let topology_options = option_pairs(
        &node.topology_manager_policy_options,
        "topologyManagerPolicyOptions",
        &mut errors,
    )
    .into_iter()
    .collect();
    let mut reserved_memory = SystemReservedMemory::new();
    for (i, entry) in node.reserved_memory.iter().enumerate() {
        let path = format!("reservedMemory[{i}].limits");
        let limits = super::pod::decode_list(&entry.limits, &path, &mut errors);
        let numa = reserved_memory.entry(entry.numa_node as usize).or_default();
        for (name, q) in &limits {
            if mm::is_memory_resource(name) {
                let slot = numa.entry(name.clone()).or_insert(0);
                *slot = slot.saturating_add(non_negative_bytes(q));
            }
        }
    }
    let node_config = match decoded {
        Ok(config) => Some(config),
        Err(node_errors) => {
            errors.extend(node_errors);
            None
        }
    };
    let Some(node_config) = node_config.filter(|_| errors.is_empty()) else {
        return Err(errors);
    };
    // ceil(kubeReserved[cpu] + systemReserved[cpu]) CPUs; the size of
    // reservedSystemCPUs when neither reserves CPU.
    let reserved_millis = [&node_config.kube_reserved, &node_config.system_reserved]
        .iter()
        .filter_map(|map| map.get("cpu"))
        .fold(0i64, |sum, q| sum.saturating_add(q.milli_value().max(0)));
    let reserved_cpus_given = !reserved_cpus.is_empty();
    let cpu_reservation_given = reserved_cpus_given
        || node_config.kube_reserved.contains_key("cpu")
        || node_config.system_reserved.contains_key("cpu");
    // u64, not usize: the count (and its error message) must not depend on
    // the target's pointer width (a differential fuzz finding).
    let num_reserved_cpus = if reserved_millis > 0 {
        reserved_millis.saturating_add(999).unsigned_abs() / 1000
    } else {
        reserved_cpus.len() as u64
    };
    let config = Config {
        gates: node_config.gates,
        cfs_period_us: node_config.cfs_period_us,
        cpu_static,
        cpu_options,
        num_reserved_cpus,
        cpu_reservation_given,
        reserved_cpus_given,
        reserved_cpus,
        memory_static,
        reserved_memory,
        topology_policy: topology_policy(node.topology_manager_policy),
        topology_scope: topology_scope(node.topology_manager_scope),
        topology_options,
    };
    Ok((config, node_config))
}

/// The managers' configuration from the node settings, with field paths.
pub(crate) fn decode_config(node: &wit::NodeSettings) -> Result<Config> {
    decode_config_and_node(node).map(|(config, _)| config)
}

/// Whether the node's managers place pods: the static CPU policy or the
/// Static memory policy (a configuration that does not decode places none).
pub fn places_pods(node: &wit::NodeSettings) -> bool {
    decode_config(node).is_ok_and(|cfg| cfg.places_pods())
}

/// The resource-manager settings as the kubelet checks them when it starts
/// (`ValidateKubeletConfiguration`, `validateReservedMemoryConfiguration`,
/// and the managers' `NewManager` checks that need no topology): policy,
/// scope and option names (case-sensitive: `static`, `Static`), options
/// and their gates, `reservedMemory` entries, and, with the Static memory
/// policy, `reservedMemory` adding up to kubeReserved + systemReserved +
/// the hard eviction threshold for every memory type (`validateReservedMemory`).
pub fn validate_config(node: &wit::NodeSettings) -> Vec<FieldError> {
    // Policy and scope names are enums in the contract: a host decodes the
    // kubelet's spelling and refuses an unknown one with its field path.
    let mut errors = Vec::new();
    // reservedMemory entries (`validateReservedMemoryConfiguration`).
    let mut seen = BTreeSet::new();
    for (i, entry) in node.reserved_memory.iter().enumerate() {
        for item in &entry.limits {
            let field = format!("reservedMemory[{i}].limits[{}]", truncate(&item.name));
            if !mm::is_memory_resource(&item.name) {
                errors.push(field_error(
                    field.clone(),
                    FieldErrorType::NotSupported,
                    format!(
                        "invalid configuration: the limit type {:?} for NUMA node {} is not supported, only [memory hugepages-<HugePageSize>] is accepted",
                        item.name, entry.numa_node
                    ),
                    Some(truncate(&item.name)),
                ));
            }
            if !seen.insert((entry.numa_node, item.name.clone())) {
                errors.push(field_error(
                    field.clone(),
                    FieldErrorType::Duplicate,
                    format!(
                        "invalid configuration: the reserved memory has a duplicate value for NUMA node {} and resource {:?}",
                        entry.numa_node, item.name
                    ),
                    Some(truncate(&item.name)),
                ));
            }
            if crate::quantity::Quantity::parse(&item.quantity).is_ok_and(|q| q.is_zero()) {
                errors.push(field_error(
                    field,
                    FieldErrorType::Invalid,
                    format!(
                        "invalid configuration: reserved memory may not be zero for NUMA node {} and resource {:?}",
                        entry.numa_node, item.name
                    ),
                    Some(truncate(&item.quantity)),
                ));
            }
        }
    }
    let (cfg, node_config) = match decode_config_and_node(node) {
        Ok(decoded) => decoded,
        Err(e) => {
            errors.extend(e);
            return errors;
        }
    };
    if !errors.is_empty() {
        return errors;
    }
    encode_errors(cfg.validate(&node_config))
}

// ---- The manager state ----------------------------------------------------

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

/// Decode a `manager-state` (field paths under `base`, e.g. `state`):
/// only its shape is checked; whether it fits the configuration is `Start`'s question.
pub fn decode_state(
    state: &wit::ManagerState,
    base: &str,
    errors: &mut Vec<FieldError>,
) -> ManagerState {
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
    ManagerState {
        cpu_policy: state.cpu.policy_name.clone(),
        cpu,
        memory_policy: state.memory.policy_name.clone(),
        memory,
    }
}

/// Memory blocks as WIT blocks.
fn encode_blocks(blocks: &[Block]) -> Vec<wit::MemoryBlock> {
    blocks
        .iter()
        .map(|block| wit::MemoryBlock {
            numa_affinity: block.numa_affinity.iter().map(|&id| id as u32).collect(),
            resource_name: block.resource.clone(),
            size: block.size,
        })
        .collect()
}

/// A state as the WIT `manager-state`.
pub fn encode_state(states: &ManagerState) -> wit::ManagerState {
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

// ---- Topology hints -------------------------------------------------------

/// Decode a WIT hint (its NUMA ids under `{field}.numaAffinity`).
pub fn decode_hint(
    hint: &wit::TopologyHint,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> TopologyHint {
    TopologyHint {
        numa_affinity: hint
            .numa_affinity
            .as_ref()
            .map(|ids| decode_mask(ids, &format!("{field}.numaAffinity"), errors)),
        preferred: hint.preferred,
    }
}

fn mask_ids(mask: BitMask) -> Vec<u32> {
    crate::cpu_topology::mask_bits(mask.raw())
}

/// A native hint as a WIT hint.
pub fn encode_hint(hint: &TopologyHint) -> wit::TopologyHint {
    wit::TopologyHint {
        numa_affinity: hint.numa_affinity.map(mask_ids),
        preferred: hint.preferred,
    }
}

/// Decode one provider's hints (paths under `field`), keeping Go's
/// distinction between a nil and an empty list.
pub fn decode_provider_hints(
    hints: &wit::ProviderHints,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> tm::ProviderHints {
    let list = hints.as_ref()?;
    let mut map = BTreeMap::new();
    for (i, entry) in list.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let decoded = entry.hints.as_ref().map(|hints| {
            hints
                .iter()
                .enumerate()
                .map(|(j, h)| decode_hint(h, &format!("{path}.hints[{j}]"), errors))
                .collect::<Vec<_>>()
        });
        if map.insert(entry.resource_name.clone(), decoded).is_some() {
            errors.push(duplicate(
                format!("{path}.resourceName"),
                &entry.resource_name,
            ));
        }
    }
    Some(map)
}

/// One provider's hints as WIT provider hints.
pub fn encode_provider_hints(hints: &CpuHints) -> wit::ProviderHints {
    hints.as_ref().map(|map| {
        map.iter()
            .map(|(resource, list)| wit::ResourceHints {
                resource_name: resource.clone(),
                hints: Some(list.iter().map(encode_hint).collect()),
            })
            .collect()
    })
}

impl From<ResourceManager> for wit::ResourceManager {
    fn from(manager: ResourceManager) -> Self {
        match manager {
            ResourceManager::Cpu => wit::ResourceManager::Cpu,
            ResourceManager::Memory => wit::ResourceManager::Memory,
        }
    }
}

impl From<wit::ResourceManager> for ResourceManager {
    fn from(manager: wit::ResourceManager) -> Self {
        match manager {
            wit::ResourceManager::Cpu => ResourceManager::Cpu,
            wit::ResourceManager::Memory => ResourceManager::Memory,
        }
    }
}

fn encode_decision(decision: TopologyDecision) -> wit::TopologyDecision {
    wit::TopologyDecision {
        container: decision.container,
        providers: decision
            .providers
            .iter()
            .map(|answer: &ProviderAnswer| wit::ProviderAnswer {
                manager: answer.manager.into(),
                hints: encode_provider_hints(&answer.hints),
            })
            .collect(),
        affinity: encode_hint(&decision.affinity),
        admit: decision.admit,
        rule: decision.rule,
    }
}

// ---- The pod --------------------------------------------------------------

/// Decode a WIT pod for the managers (ephemeral containers are not managed).
pub fn decode_managed_pod(pod: &wit::Pod, gates: &FeatureGates) -> Result<ManagedPod> {
    let decoded = crate::boundary::pod::decode_pod(pod)?;
    encode_result(managed_pod(&pod.uid, &decoded, gates))
}

/// The pod as the managers read it after the API server's defaulting (as
/// `admit` always takes it); its errors go to `errors`.
fn defaulted_managed_pod(
    pod: &wit::Pod,
    gates: &FeatureGates,
    errors: &mut Vec<FieldError>,
) -> Option<ManagedPod> {
    match super::defaults::defaulted_pod(pod, gates) {
        Ok(defaulted) => {
            if let Some(refused) =
                crate::validation::kubelet_refuses_pod_level_resources(&defaulted, gates)
            {
                errors.extend(encode_errors(vec![refused]));
                return None;
            }
            encode_result(managed_pod(&pod.uid, &defaulted, gates))
                .map_err(|e| errors.extend(e))
                .ok()
        }
        Err(e) => {
            errors.extend(e);
            None
        }
    }
}

// ---- Errors ---------------------------------------------------------------

impl From<&ManagerErrorKind> for wit::ManagerErrorKind {
    fn from(kind: &ManagerErrorKind) -> Self {
        // Counts beyond u32 cannot come from a topology the component accepts.
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        match kind {
            ManagerErrorKind::Configuration => wit::ManagerErrorKind::Configuration,
            ManagerErrorKind::TopologyAffinity => wit::ManagerErrorKind::TopologyAffinity,
            ManagerErrorKind::SmtAlignment(smt) => {
                wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                    requested_cpus: count(smt.requested_cpus),
                    cpus_per_core: count(smt.cpus_per_core),
                    available_physical_cpus: count(smt.available_physical_cpus),
                    caused_by_physical_cpus: smt.caused_by_physical_cpus,
                })
            }
            ManagerErrorKind::EmptyPodSharedPool => wit::ManagerErrorKind::EmptyPodSharedPool,
            ManagerErrorKind::UnexpectedAdmission => wit::ManagerErrorKind::UnexpectedAdmission,
        }
    }
}

impl From<ManagerError> for wit::ManagerError {
    fn from(error: ManagerError) -> Self {
        wit::ManagerError {
            kind: (&error.kind).into(),
            message: error.message,
            function: error.function,
        }
    }
}

impl From<&wit::ManagerErrorKind> for ManagerErrorKind {
    fn from(kind: &wit::ManagerErrorKind) -> Self {
        let count = |n: u32| n as usize;
        match kind {
            wit::ManagerErrorKind::Configuration => ManagerErrorKind::Configuration,
            wit::ManagerErrorKind::TopologyAffinity => ManagerErrorKind::TopologyAffinity,
            wit::ManagerErrorKind::SmtAlignment(smt) => {
                ManagerErrorKind::SmtAlignment(crate::cpu_manager::SmtAlignmentError {
                    requested_cpus: count(smt.requested_cpus),
                    cpus_per_core: count(smt.cpus_per_core),
                    available_physical_cpus: count(smt.available_physical_cpus),
                    caused_by_physical_cpus: smt.caused_by_physical_cpus,
                })
            }
            wit::ManagerErrorKind::EmptyPodSharedPool => ManagerErrorKind::EmptyPodSharedPool,
            wit::ManagerErrorKind::UnexpectedAdmission => ManagerErrorKind::UnexpectedAdmission,
        }
    }
}

impl wit::ManagerErrorKind {
    /// The admission reason the kubelet reports in the pod status for this
    /// kind (upstream's error type name, [`ManagerErrorKind::reason`]);
    /// `""` for configuration errors, which are no admission result.
    pub fn reason(&self) -> &'static str {
        ManagerErrorKind::from(self).reason()
    }
}

// ---- The assignment and the admission -------------------------------------

fn encode_isolation(level: ResourceIsolationLevel) -> wit::CpuIsolation {
    match level {
        ResourceIsolationLevel::Host => wit::CpuIsolation::Host,
        ResourceIsolationLevel::Pod => wit::CpuIsolation::Pod,
        ResourceIsolationLevel::Container => wit::CpuIsolation::Container,
    }
}

/// Memory blocks as WIT blocks (moving the resource names).
fn encode_owned_blocks(blocks: Vec<Block>) -> Vec<wit::MemoryBlock> {
    blocks
        .into_iter()
        .map(|block| wit::MemoryBlock {
            numa_affinity: block.numa_affinity.iter().map(|&id| id as u32).collect(),
            resource_name: block.resource,
            size: block.size,
        })
        .collect()
}

fn encode_container_assignment(container: ContainerAssignment) -> wit::ContainerAssignment {
    wit::ContainerAssignment {
        name: container.name,
        kind: container.kind.into(),
        affinity: encode_hint(&container.affinity),
        cpu_isolation: encode_isolation(container.cpu_isolation),
        cpuset: container.cpuset.map(|c| c.to_string()),
        cfs_quota_disabled: container.cfs_quota_disabled,
        memory: encode_owned_blocks(container.memory),
    }
}

/// A pod assignment as the WIT `pod-assignment`.
pub fn encode_assignment(assignment: PodAssignment) -> wit::PodAssignment {
    wit::PodAssignment {
        pod_cpuset: assignment.pod_cpuset.map(|c| c.to_string()),
        pod_shared_pool: assignment.pod_shared_pool.map(|c| c.to_string()),
        pod_memory: encode_owned_blocks(assignment.pod_memory),
        pod_cfs_quota_disabled: assignment.pod_cfs_quota_disabled,
        node_shared_pool: assignment.node_shared_pool.to_string(),
        containers: assignment
            .containers
            .into_iter()
            .map(encode_container_assignment)
            .collect(),
    }
}

/// An admission as the WIT `admission`, with the placement files of an
/// admitted pod.
pub fn encode_admission(admission: Admission) -> wit::Admission {
    let files = match &admission.placement {
        Some(inputs) => crate::placement::placement_files(
            &admission.assignment,
            &inputs.numa_nodes,
            inputs.cfs_period_us,
        ),
        None => PlacementFiles::default(),
    };
    let assignment = encode_assignment(admission.assignment);
    wit::Admission {
        rejection: admission.rejection.map(wit::ManagerError::from),
        rule: admission.rule,
        topology: admission
            .topology
            .into_iter()
            .map(encode_decision)
            .collect(),
        assignment,
        state: encode_state(&admission.state),
        files: files.into(),
    }
}

// ---- The exports ----------------------------------------------------------

/// Everything `admit` and `release` decode before they run.
struct Inputs {
    cfg: Config,
    machine: Machine,
    states: ManagerState,
}

fn decode_inputs(
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
    errors: &mut Vec<FieldError>,
) -> Option<Inputs> {
    let cfg = decode_config(node).map_err(|e| errors.extend(e)).ok();
    let machine = decode_machine(topology, errors);
    let states = decode_state(state, "state", errors);
    Some(Inputs {
        cfg: cfg?,
        machine,
        states,
    })
}

/// Export `admit`: see the [`crate::managers`] docs.
pub fn admit(
    pod: &wit::Pod,
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
) -> Result<wit::Admission> {
    let mut errors = Vec::new();
    let inputs = decode_inputs(topology, state, node, &mut errors);
    let gates = inputs
        .as_ref()
        .map_or_else(FeatureGates::default, |i| i.cfg.gates);
    let managed = defaulted_managed_pod(pod, &gates, &mut errors);
    let (Some(inputs), Some(managed), true) = (inputs, managed, errors.is_empty()) else {
        return Err(errors);
    };
    let managers = encode_result(node_managers(&inputs.cfg, &inputs.machine))?;
    encode_result(admit_managed(
        &inputs.cfg,
        &inputs.machine,
        &managers,
        &managed,
        &inputs.states,
    ))
    .map(encode_admission)
}

/// Export `release`: `RemoveContainer` on the configured managers.
pub fn release(
    pod_uid: &str,
    container: &str,
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
) -> Result<wit::ManagerState> {
    let mut errors = Vec::new();
    let inputs = decode_inputs(topology, state, node, &mut errors);
    let (Some(inputs), true) = (inputs, errors.is_empty()) else {
        return Err(errors);
    };
    let managers = encode_result(node_managers(&inputs.cfg, &inputs.machine))?;
    Ok(encode_state(&release_container(
        &managers,
        inputs.states,
        pod_uid,
        container,
    )))
}

/// Decode the manager configuration and the topology and build the
/// managers of a prepared node, with the errors `admit` reports for them.
pub fn prepare_managers(
    topology: &wit::NodeTopology,
    node: &wit::NodeSettings,
) -> Result<PreparedManagers> {
    let mut errors = Vec::new();
    let cfg = decode_config(node).map_err(|e| errors.extend(e)).ok();
    let machine = decode_machine(topology, &mut errors);
    let (Some(cfg), true) = (cfg, errors.is_empty()) else {
        return Err(errors);
    };
    encode_result(PreparedManagers::new(cfg, machine))
}

/// [`admit`] of `pod` with `state` on prepared managers.
pub fn admit_prepared(
    managers: &PreparedManagers,
    pod: &wit::Pod,
    state: &wit::ManagerState,
) -> Result<wit::Admission> {
    let mut errors = Vec::new();
    let states = decode_state(state, "state", &mut errors);
    let managed = defaulted_managed_pod(pod, managers.gates(), &mut errors);
    let (Some(managed), true) = (managed, errors.is_empty()) else {
        return Err(errors);
    };
    encode_result(managers.admit(&managed, &states)).map(encode_admission)
}

/// [`release`] of one container with `state` on prepared managers.
pub fn release_prepared(
    managers: &PreparedManagers,
    pod_uid: &str,
    container: &str,
    state: &wit::ManagerState,
) -> Result<wit::ManagerState> {
    let mut errors = Vec::new();
    let states = decode_state(state, "state", &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(encode_state(&managers.release(states, pod_uid, container)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::boundary::test_support::{
        GIB, container, empty_state, guaranteed, list, node, pod, topology, with_options,
    };
    use crate::boundary::testing::manager_operation;

    // admit and release (`managers::admission`).
    #[test]
    fn admit_pod_scope_and_release_everything() {
        let node = node("pod");
        let p = pod(
            "p1",
            guaranteed("4", "4Gi"),
            vec![
                container("exclusive", guaranteed("2", "2Gi")),
                container("shared", None),
            ],
        );
        let first = admit(&p, &topology(), &empty_state(), &node).expect("valid");
        // A new state is started: all CPUs, the default machine state.
        assert_eq!(first.rejection, None);
        let a = &first.assignment;
        assert_eq!(a.pod_cpuset.as_deref(), Some("2,4,8,10"));
        assert_eq!(a.pod_shared_pool.as_deref(), Some("4,10"));
        assert_eq!(a.containers[0].cpuset.as_deref(), Some("2,8"));
        assert_eq!(a.containers[0].cpu_isolation, wit::CpuIsolation::Container);
        assert!(a.containers[0].cfs_quota_disabled && a.pod_cfs_quota_disabled);
        assert_eq!(a.containers[1].cpu_isolation, wit::CpuIsolation::Pod);
        assert_eq!(a.containers[1].memory[0].size, 2 * GIB);
        assert_eq!(a.pod_memory[0].size, 4 * GIB);
        assert_eq!(a.node_shared_pool, "0-1,3,5-7,9,11");
        assert_eq!(first.topology.len(), 1);
        assert_eq!(first.topology[0].affinity.numa_affinity, Some(vec![0]));
        assert_eq!(first.state.cpu.policy_name, "static");
        assert_eq!(first.state.memory.policy_name, "Static");

        // The start state, as `admit` started it, comes back after releasing
        // both containers; the pod-level set goes with the last one.
        let started = {
            let none = pod("none", None, vec![container("c", None)]);
            admit(&none, &topology(), &empty_state(), &node)
                .unwrap()
                .state
        };
        let after_one = release("p1", "exclusive", &topology(), &first.state, &node).unwrap();
        assert_eq!(after_one.cpu.pod_entries.len(), 1, "the pod set stays");
        let after_all = release("p1", "shared", &topology(), &after_one, &node).unwrap();
        assert_eq!(after_all, started);
        // Admitting on the admitted state again is idempotent.
        let again = admit(&p, &topology(), &first.state, &node).unwrap();
        assert_eq!(again.state, first.state);
    }

    #[test]
    fn rejection_keeps_the_started_state() {
        let node = node("pod");
        let p = pod(
            "p1",
            guaranteed("4", "4Gi"),
            vec![
                container("a", guaranteed("2", "2Gi")),
                container("b", guaranteed("2", "2Gi")),
                container("shared", None),
            ],
        );
        let a = admit(&p, &topology(), &empty_state(), &node).unwrap();
        let rejection = a.rejection.expect("rejected");
        assert_eq!(rejection.kind, wit::ManagerErrorKind::TopologyAffinity);
        assert_eq!(rejection.function, "Admit");
        assert!(a.assignment.containers.is_empty());
        assert!(a.state.cpu.entries.is_empty());
        assert_eq!(a.state.cpu.default_cpuset, "0-11");
        // The hints show why: both providers found no placement.
        let providers = &a.topology[0].providers;
        assert_eq!(providers.len(), 2);
        assert!(providers.iter().all(|p| p.hints.as_ref().is_some_and(|h| {
            h.iter()
                .all(|r| r.hints.as_ref().is_some_and(Vec::is_empty))
        })));
        // And the rule says so, in the decision and as the admission's reason.
        let rule = "restricted (pod scope): merged hint [0,1] not preferred: cpu and memory have no preferred hint; restricted admits only a preferred merged hint";
        assert_eq!(a.topology[0].rule, rule);
        assert_eq!(a.rule, rule);
    }

    #[test]
    fn admitted_and_container_scope_rules() {
        let node = with_options(node("container"), "best-effort", &[]);
        let p = pod(
            "p",
            None,
            vec![
                container("a", guaranteed("2", "1Gi")),
                container("b", guaranteed("2", "1Gi")),
            ],
        );
        let a = admit(&p, &topology(), &empty_state(), &node).unwrap();
        assert_eq!(a.rejection, None);
        assert_eq!(
            a.rule,
            "admitted: topology manager policy best-effort (container scope) admitted all 2 merged hints; the static CPU manager and the Static memory manager allocated it"
        );
        // Container scope under restricted: the container that did not fit
        // is named in front of the decision's rule (7 CPUs fit on no NUMA
        // node of 6, and the 12-CPU machine has 11 free).
        let restricted = with_options(node.clone(), "restricted", &[]);
        let p = pod(
            "p",
            None,
            vec![
                container("small", guaranteed("1", "1Gi")),
                container("wide", guaranteed("7", "1Gi")),
            ],
        );
        let a = admit(&p, &topology(), &empty_state(), &restricted).unwrap();
        assert_eq!(
            a.rejection.expect("rejected").kind,
            wit::ManagerErrorKind::TopologyAffinity
        );
        assert!(a.topology[0].admit);
        assert!(!a.topology[1].admit);
        assert_eq!(a.rule, format!("container wide: {}", a.topology[1].rule));
        // cpu: only [0,1] (preferred: 7 CPUs need both nodes); memory: [0]
        // or [1] (not [0,1]: `small`'s memory is already single-NUMA on 0).
        // No hint pair has the same mask, so nothing merged is preferred.
        assert_eq!(
            a.topology[1].rule,
            "restricted (container scope): merged hint [0] not preferred: the resources' preferred hints share no NUMA node set; restricted admits only a preferred merged hint"
        );

        let none = with_options(node, "none", &[]);
        let a = admit(
            &pod("p", None, vec![container("c", guaranteed("2", "1Gi"))]),
            &topology(),
            &empty_state(),
            &none,
        )
        .unwrap();
        assert!(a.topology.is_empty());
        assert_eq!(
            a.rule,
            "admitted: topology manager policy none asks for no NUMA alignment (no hint, no decision); the static CPU manager and the Static memory manager allocated it"
        );
    }

    #[test]
    fn field_paths() {
        let mut state = empty_state();
        state.cpu.entries = vec![
            wit::PodCpuEntries {
                pod_uid: "x".into(),
                containers: vec![wit::ContainerCpuset {
                    container: "c".into(),
                    cpuset: "5-3".into(),
                }],
            },
            wit::PodCpuEntries {
                pod_uid: "x".into(),
                containers: Vec::new(),
            },
        ];
        let mut topo = topology();
        topo.numa_nodes[1].id = 0;
        topo.numa_nodes[0].hugepages.push(wit::HugepagePool {
            page_size_bytes: 1000,
            pages: 1,
        });
        let mut settings = node("pod");
        settings.reserved_system_cpus = Some("0-".into());
        let p = pod("p", None, vec![container("c", None), container("c", None)]);
        let errors = admit(&p, &topo, &state, &settings).unwrap_err();
        let fields: BTreeSet<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        for want in [
            "state.cpu.entries[0].containers[0].cpuset",
            "state.cpu.entries[1].podUid",
            "topology.numaNodes[1].id",
            "topology.numaNodes[0].hugepages[0].pageSizeBytes",
            "reservedSystemCPUs",
            "spec.containers[1].name",
        ] {
            assert!(fields.contains(want), "no error at {want}: {fields:?}");
        }
    }

    // Rejections and their rules (`managers::errors`).
    /// `full-pcpus-only` with 2 threads per core: an odd request is refused
    /// by the CPU manager after the topology manager admitted its hint, and
    /// the rule gives the numbers of the check.
    #[test]
    fn smt_alignment_rule_has_the_requested_and_per_core_cpus() {
        let node = with_options(
            node("container"),
            "best-effort",
            &[("full-pcpus-only", "true")],
        );
        let p = pod("p", None, vec![container("odd", guaranteed("3", "1Gi"))]);
        let a = admit(&p, &topology(), &empty_state(), &node).unwrap();
        let rejection = a.rejection.expect("rejected");
        // Upstream's SMTAlignmentError fields cross as data.
        assert_eq!(
            rejection.kind,
            wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                requested_cpus: 3,
                cpus_per_core: 2,
                available_physical_cpus: 0,
                caused_by_physical_cpus: false,
            })
        );
        assert_eq!(rejection.kind.reason(), "SMTAlignmentError");
        assert_eq!(
            a.rule,
            "CPU manager static, Allocate (container odd): full-pcpus-only: 3 CPUs requested is not a multiple of the 2 CPUs per physical core; full-pcpus-only hands out exclusive CPUs only as whole cores"
        );
        // The topology decision itself admitted.
        assert!(a.topology[0].admit);
        assert!(
            a.topology[0]
                .rule
                .starts_with("best-effort (container scope): merged hint ")
        );

        // 10 CPUs on whole cores: 12 minus the reserved CPU 0's core (0 and
        // its sibling 6) leaves 10 free; 12 asked is too many.
        let big = pod("big", None, vec![container("big", guaranteed("12", "1Gi"))]);
        let a = admit(&big, &topology(), &empty_state(), &node).unwrap();
        assert_eq!(
            a.rejection.expect("rejected").kind,
            wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                requested_cpus: 12,
                cpus_per_core: 2,
                available_physical_cpus: 10,
                caused_by_physical_cpus: true,
            })
        );
        assert_eq!(
            a.rule,
            "CPU manager static, Allocate (container big): full-pcpus-only: 12 CPUs requested, but only 10 CPUs are free on whole physical cores outside the reserved ones (2 CPUs per core); full-pcpus-only hands out exclusive CPUs only as whole cores"
        );
    }

    /// KEP-5526's example 3: 5 pod CPUs, exclusive 3 + 2, one container
    /// left for the empty pod shared pool.
    #[test]
    fn empty_pod_shared_pool_rule_has_the_budget_and_each_container() {
        let node = with_options(node("pod"), "best-effort", &[]);
        let p = pod(
            "p",
            guaranteed("5", "5Gi"),
            vec![
                container("container-1", guaranteed("3", "3Gi")),
                container("container-2", guaranteed("2", "2Gi")),
                container("container-3", None),
            ],
        );
        let a = admit(&p, &topology(), &empty_state(), &node).unwrap();
        assert_eq!(
            a.rejection.expect("rejected").kind,
            wit::ManagerErrorKind::EmptyPodSharedPool
        );
        assert_eq!(
            a.rule,
            "CPU manager static, AllocatePod (pod scope, KEP-5526 pod-level resources): pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers: pod cpu budget 5 CPUs; containers: container-1 3 exclusive, container-2 2 exclusive, container-3 pod shared pool; KEP-5526 refuses a pod whose containers without exclusive CPUs would find its pod shared pool empty"
        );
    }

    // The manager settings (`managers::config`).
    #[test]
    fn static_policy_needs_a_cpu_reservation() {
        // Upstream NewManager refuses both: with nothing reserved, exclusive
        // allocations could take the last shared CPU (a fuzz finding).
        let p = pod("p", None, vec![container("c", None)]);
        let refusal = |settings: &wit::NodeSettings| {
            let errors = admit(&p, &topology(), &empty_state(), settings).unwrap_err();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert_eq!(errors[0].field, "systemReserved[cpu]");
            errors[0].message.clone()
        };
        let mut absent = node("pod");
        absent.system_reserved.clear();
        assert_eq!(
            refusal(&absent),
            "[cpumanager] unable to determine reserved CPU resources for static policy"
        );
        let mut zero = node("pod");
        zero.system_reserved = list(&[("cpu", "0")]);
        zero.kube_reserved = list(&[("cpu", "0m")]);
        assert!(refusal(&zero).contains("requires systemreserved.cpu + kubereserved.cpu"));
        // reservedSystemCPUs alone counts as a reservation (the kubelet
        // writes its size into systemReserved[cpu]).
        let mut by_set = absent.clone();
        by_set.reserved_system_cpus = Some("0".into());
        assert!(admit(&p, &topology(), &empty_state(), &by_set).is_ok());
        // The policy function itself still takes zero, as upstream's does.
        let out = manager_operation(
            &wit::ManagerRequest::Start(empty_state()),
            &topology(),
            &zero,
        );
        let out = out.unwrap();
        assert!(out.is_ok(), "{out:?}");
    }
}
