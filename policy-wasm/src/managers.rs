//! The KEP-5526 resource managers through the WIT: decoding the node
//! topology, the manager state and the configuration (with field paths),
//! the `admit` / `release` orchestration, and the `manager-operation`
//! surface that runs one upstream manager function on explicit inputs.
//!
//! The decisions themselves live in the native modules: [`crate::topology`]
//! (topology manager), [`crate::cpu_manager`] (static CPU policy) and
//! [`crate::memory_manager`] (static memory policy). This module only
//! converts, orders the calls as the kubelet does, and reports.
//!
//! How `admit` runs, as the kubelet does (`pkg/kubelet/cm/topologymanager`):
//! 1. The configuration is built: `NewManager` (topology policy, scope,
//!    options over the NUMA nodes), `NewStaticPolicy` when
//!    `cpuManagerPolicy: static`, `NewPolicyStatic` when
//!    `memoryManagerPolicy: Static`. A configuration the kubelet would not
//!    start with is a field error.
//! 2. `Start` checks the state (the checkpoint) or initialises a new one; an
//!    inconsistent state is a field error under `state`.
//! 3. The topology manager's scope runs with the hint providers in kubelet
//!    order (CPU manager, then memory manager):
//!    - `none` policy: every container is allocated without a hint;
//!    - `container` scope: per container (init containers first), hints,
//!      merge, admit, then `Allocate` on every provider;
//!    - `pod` scope: one merge over the pod hints, then `AllocatePod` on
//!      every provider (KEP-5526: `PodLevelResourceManagers` and pod-level
//!      resources set), else `Allocate` per container with the pod's hint.
//! 4. A rejection (`TopologyAffinityError`, `SMTAlignmentError`,
//!    `EmptyPodSharedPoolError`, `UnexpectedAdmissionError`) returns the
//!    started state unchanged; an admission returns the new state and what
//!    each container gets.
//!
//! Nothing is kept between calls: the reusable CPUs and memory of finished
//! init containers (never checkpointed upstream) live inside one call.

mod decode;
mod hints;
mod machine;

use std::collections::{BTreeMap, BTreeSet};

use self::decode::{
    decode_mask, duplicate, field_error, invalid, non_negative_bytes, numa_ids, parse_cpuset,
};
pub use self::hints::encode_hint;
use self::hints::{decode_hint, decode_provider_hints, encode_provider_hints};
pub use self::machine::{MAX_NUMA_NODES, Machine};

use crate::cpu_manager::hints::CpuHints;
use crate::cpu_manager::{
    ContainerKind as CpuContainerKind, ContainerSpec, CpuManagerError, CpuManagerState,
    CpuSortingStrategy, PodLevelResources, PodSpec, ResourceIsolationLevel, StaticPolicy,
    StaticPolicyOptions, take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use crate::cpu_topology::{CpuTopology, MAX_NUMA_NODE_ID};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::memory_manager::{
    self as mm, Block, MemoryContainer, MemoryError, MemoryPod, MemoryState, MemoryTable,
    NumaNodeMap, NumaNodeState, PodLevelGates, SystemReservedMemory,
};
use crate::model::{self, Pod, truncate};
use crate::node::NodeConfig;
use crate::quantity::Quantity;
use crate::topology::{self as tm, BitMask, TopologyHint};
use crate::wit::{self, ErrorReason, FieldError};

type Result<T> = std::result::Result<T, Vec<FieldError>>;

/// What a manager operation answers: the response, or the error the
/// upstream function returned.
pub type OperationResult = std::result::Result<wit::ManagerResponse, wit::ManagerError>;

/// The CPU manager's checkpoint policy names.
const CPU_POLICY_STATIC: &str = "static";
const CPU_POLICY_NONE: &str = "none";
/// The memory manager's checkpoint policy names.
const MEMORY_POLICY_STATIC: &str = "Static";
const MEMORY_POLICY_NONE: &str = "None";

// ----------------------------------------------------------------------
// Configuration
// ----------------------------------------------------------------------

/// The manager configuration from the node settings.
#[derive(Clone, Debug)]
struct Config {
    gates: FeatureGates,
    /// The CFS period in effect (for `cpu.max` without a quota).
    cfs_period_us: u64,
    cpu_static: bool,
    cpu_options: Vec<(String, String)>,
    num_reserved_cpus: u64,
    /// Whether `kubeReserved`, `systemReserved` or `reservedSystemCPUs`
    /// names CPU at all (the kubelet's reservation map has a `cpu` key).
    cpu_reservation_given: bool,
    reserved_cpus: CpuSet,
    reserved_cpus_given: bool,
    memory_static: bool,
    reserved_memory: SystemReservedMemory,
    topology_policy: String,
    topology_scope: String,
    topology_options: BTreeMap<String, String>,
}

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

/// The topology manager's name for `policy` (`none` when unset, the
/// kubelet default), as upstream's `NewManager` takes it.
fn topology_policy_name(policy: Option<wit::TopologyManagerPolicy>) -> &'static str {
    match policy {
        None | Some(wit::TopologyManagerPolicy::None) => "none",
        Some(wit::TopologyManagerPolicy::BestEffort) => "best-effort",
        Some(wit::TopologyManagerPolicy::Restricted) => "restricted",
        Some(wit::TopologyManagerPolicy::SingleNumaNode) => "single-numa-node",
    }
}

/// The topology manager's name for `scope` (`container` when unset, the kubelet default).
fn topology_scope_name(scope: Option<wit::TopologyManagerScope>) -> &'static str {
    match scope {
        None | Some(wit::TopologyManagerScope::Container) => "container",
        Some(wit::TopologyManagerScope::Pod) => "pod",
    }
}

fn decode_config(node: &wit::NodeSettings) -> Result<Config> {
    let decoded = NodeConfig::decode(node);
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
        let limits = model::decode_list(&entry.limits, &path, &mut errors);
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
    Ok(Config {
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
        topology_policy: topology_policy_name(node.topology_manager_policy).to_string(),
        topology_scope: topology_scope_name(node.topology_manager_scope).to_string(),
        topology_options,
    })
}

/// Whether the node's managers place pods: the static CPU policy or the
/// Static memory policy (a configuration that does not decode places none).
pub fn places_pods(node: &wit::NodeSettings) -> bool {
    decode_config(node).is_ok_and(|cfg| cfg.cpu_static || cfg.memory_static)
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
                    ErrorReason::NotSupported,
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
                    ErrorReason::Duplicate,
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
                    ErrorReason::Invalid,
                    format!(
                        "invalid configuration: reserved memory may not be zero for NUMA node {} and resource {:?}",
                        entry.numa_node, item.name
                    ),
                    Some(truncate(&item.quantity)),
                ));
            }
        }
    }
    let cfg = match decode_config(node) {
        Ok(cfg) => cfg,
        Err(e) => {
            errors.extend(e);
            return errors;
        }
    };
    if !errors.is_empty() {
        return errors;
    }
    // CPU manager options: the none policy takes none; the static policy
    // parses them with their gates (`NewStaticPolicyOptions`).
    if !cfg.cpu_static && !cfg.cpu_options.is_empty() {
        let names: Vec<String> = cfg
            .cpu_options
            .iter()
            .map(|(n, v)| format!("{n}:{v}"))
            .collect();
        errors.push(field_error(
            "cpuManagerPolicyOptions",
            ErrorReason::Forbidden,
            format!(
                "new none policy error: None policy: received unsupported options=map[{}]",
                names.join(" ")
            ),
            None,
        ));
    } else if cfg.cpu_static {
        if let Err(err) = StaticPolicyOptions::parse(
            cfg.cpu_options
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
            &cfg.gates,
        ) {
            let field = match &err {
                CpuManagerError::UnknownOption { name }
                | CpuManagerError::OptionNotAvailable { name, .. }
                | CpuManagerError::BadOptionValue { name, .. } => {
                    format!("cpuManagerPolicyOptions[{}]", truncate(name))
                }
                _ => "cpuManagerPolicyOptions".to_string(),
            };
            errors.push(field_error(
                field,
                ErrorReason::Invalid,
                err.to_string(),
                None,
            ));
        }
        if let Err(err) = static_reservation(&cfg) {
            errors.push(err.field_error());
        }
    }
    if topology_policy_name(node.topology_manager_policy) != "none"
        && let Err(err) =
            tm::new_policy_options(&cfg.topology_options, tm::OptionGates::from(&cfg.gates))
    {
        let field = match &err {
            tm::TopologyError::UnknownOption(name)
            | tm::TopologyError::AlphaOptionNotEnabled(name)
            | tm::TopologyError::BetaOptionNotEnabled(name) => {
                format!("topologyManagerPolicyOptions[{}]", truncate(name))
            }
            tm::TopologyError::BadOptionValue { option, .. }
            | tm::TopologyError::NotAnInteger { option, .. }
            | tm::TopologyError::MaxAllowableTooLow { option } => {
                format!("topologyManagerPolicyOptions[{}]", truncate(option))
            }
            _ => "topologyManagerPolicyOptions".to_string(),
        };
        errors.push(field_error(
            field,
            ErrorReason::Invalid,
            err.to_string(),
            None,
        ));
    }
    if cfg.memory_static {
        if let Err(err) = mm::check_system_reserved(&cfg.reserved_memory) {
            errors.push(field_error(
                "reservedMemory",
                ErrorReason::Required,
                err.to_string(),
                None,
            ));
        } else if let Ok(node_config) = NodeConfig::decode(node) {
            errors.extend(reserved_memory_matches_allocatable(&cfg, &node_config));
        }
    }
    errors
}

/// `validateReservedMemory`: per memory type, the `reservedMemory` total
/// equals the Node Allocatable reservation of that type (kubeReserved +
/// systemReserved, plus the hard eviction threshold for `memory`).
fn reserved_memory_matches_allocatable(cfg: &Config, node: &NodeConfig) -> Vec<FieldError> {
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for per_numa in cfg.reserved_memory.values() {
        for (name, bytes) in per_numa {
            let slot = totals.entry(name.clone()).or_insert(0);
            *slot = slot.saturating_add(*bytes);
        }
    }
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for reserved in [&node.kube_reserved, &node.system_reserved] {
        for (name, q) in reserved.iter().filter(|(n, _)| mm::is_memory_resource(n)) {
            let slot = expected.entry(name.clone()).or_insert(0);
            *slot = slot.saturating_add(non_negative_bytes(q));
        }
    }
    let memory = expected.entry(mm::MEMORY.to_string()).or_insert(0);
    *memory = memory.saturating_add(node.eviction_hard_memory);
    let names: BTreeSet<&String> = totals.keys().chain(expected.keys()).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let total = totals.get(name).copied().unwrap_or(0);
            let want = expected.get(name).copied().unwrap_or(0);
            (total != want).then(|| {
                field_error(
                    "reservedMemory",
                    ErrorReason::Invalid,
                    format!(
                        "the total amount {:?} of type {name:?} is not equal to the value {:?} determined by Node Allocatable feature",
                        crate::quantity::Quantity::from_value(total as i64, crate::quantity::Format::BinarySI).to_canonical_string(),
                        crate::quantity::Quantity::from_value(want as i64, crate::quantity::Format::BinarySI).to_canonical_string(),
                    ),
                    None,
                )
            })
        })
        .collect()
}

/// A configuration (or state) the managers cannot start with.
#[derive(Clone, Debug)]
struct ConfigError {
    function: &'static str,
    field: String,
    message: String,
}

impl ConfigError {
    fn new(function: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            function,
            field: field.into(),
            message: message.into(),
        }
    }

    fn field_error(self) -> FieldError {
        field_error(self.field, ErrorReason::Invalid, self.message, None)
    }

    fn manager_error(self) -> wit::ManagerError {
        wit::ManagerError {
            kind: wit::ManagerErrorKind::Configuration,
            message: self.message,
            function: self.function.to_string(),
        }
    }
}

fn topology_manager(
    cfg: &Config,
    machine: &Machine,
) -> std::result::Result<tm::Manager, ConfigError> {
    use tm::TopologyError as E;
    tm::new_manager(
        &cfg.topology_policy,
        &cfg.topology_scope,
        &cfg.topology_options,
        tm::OptionGates::from(&cfg.gates),
        &machine.topology_nodes(),
    )
    .map_err(|err| {
        let field = match &err {
            E::UnknownOption(name)
            | E::AlphaOptionNotEnabled(name)
            | E::BetaOptionNotEnabled(name) => {
                format!("topologyManagerPolicyOptions[{}]", truncate(name))
            }
            E::BadOptionValue { option, .. }
            | E::NotAnInteger { option, .. }
            | E::MaxAllowableTooLow { option } => {
                format!("topologyManagerPolicyOptions[{}]", truncate(option))
            }
            E::MissingNumaDistances | E::TooManyNumaNodes { .. } | E::InvalidNumaNode(_) => {
                "topology.numaNodes".to_string()
            }
            E::UnknownPolicy(_) => "topologyManagerPolicy".to_string(),
            E::UnknownScope(_) => "topologyManagerScope".to_string(),
        };
        ConfigError::new("NewManager", field, err.to_string())
    })
}

fn cpu_policy(
    cfg: &Config,
    topology: &CpuTopology,
) -> std::result::Result<StaticPolicy, ConfigError> {
    let options_field = |err: &CpuManagerError| match err {
        CpuManagerError::UnknownOption { name }
        | CpuManagerError::OptionNotAvailable { name, .. }
        | CpuManagerError::BadOptionValue { name, .. } => {
            format!("cpuManagerPolicyOptions[{}]", truncate(name))
        }
        CpuManagerError::UnableToReserve { .. } if !cfg.reserved_cpus_given => {
            "systemReserved[cpu]".to_string()
        }
        CpuManagerError::UnableToReserve { .. } | CpuManagerError::UnknownReservedCpu { .. } => {
            "reservedSystemCPUs".to_string()
        }
        _ => "cpuManagerPolicyOptions".to_string(),
    };
    let options = StaticPolicyOptions::parse(
        cfg.cpu_options
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
        &cfg.gates,
    )
    .map_err(|err| ConfigError::new("NewStaticPolicy", options_field(&err), err.to_string()))?;
    StaticPolicy::new(
        topology.clone(),
        cfg.num_reserved_cpus,
        &cfg.reserved_cpus,
        options,
        &cfg.topology_policy,
    )
    .map_err(|err| ConfigError::new("NewStaticPolicy", options_field(&err), err.to_string()))
}

/// The static memory policy: its default machine state.
#[derive(Clone, Debug)]
struct MemoryPolicy {
    default_machine: NumaNodeMap,
}

fn memory_policy(
    cfg: &Config,
    machine: &Machine,
) -> std::result::Result<MemoryPolicy, ConfigError> {
    mm::check_system_reserved(&cfg.reserved_memory)
        .map_err(|err| ConfigError::new("NewPolicyStatic", "reservedMemory", err.to_string()))?;
    let default_machine = mm::default_machine_state(&machine.memory_nodes(), &cfg.reserved_memory)
        .map_err(|err| {
            let field = match err {
                MemoryError::SizeOverflow { .. } => "topology.numaNodes",
                _ => "reservedMemory",
            };
            ConfigError::new("NewPolicyStatic", field, err.to_string())
        })?;
    Ok(MemoryPolicy { default_machine })
}

/// `NewManager`'s check before it builds the static CPU policy: a zero
/// reservation would let exclusive allocations drain the shared pool, which
/// containers without exclusive CPUs still need. The policy functions behind
/// `manager-operation` accept zero, as upstream's `NewStaticPolicy` does.
fn static_reservation(cfg: &Config) -> std::result::Result<(), ConfigError> {
    if !cfg.cpu_static {
        return Ok(());
    }
    if !cfg.cpu_reservation_given {
        return Err(ConfigError::new(
            "NewManager",
            "systemReserved[cpu]",
            "[cpumanager] unable to determine reserved CPU resources for static policy",
        ));
    }
    if cfg.num_reserved_cpus == 0 {
        return Err(ConfigError::new(
            "NewManager",
            "systemReserved[cpu]",
            "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero",
        ));
    }
    Ok(())
}

/// The managers of a node, as the kubelet's `NewManager`s build them for
/// `admit` and `release`; a configuration they refuse is a field error.
fn node_managers(cfg: &Config, machine: &Machine) -> Result<Managers> {
    static_reservation(cfg).map_err(|e| vec![e.field_error()])?;
    managers(cfg, machine)?.map_err(|e| vec![e.field_error()])
}

/// The configured managers.
struct Managers {
    gates: FeatureGates,
    topology: tm::Manager,
    cpu: Option<StaticPolicy>,
    memory: Option<MemoryPolicy>,
}

/// Build the configured managers in kubelet order (topology, CPU, memory).
/// The outer error is bad input (a static CPU policy without CPUs).
fn managers(cfg: &Config, machine: &Machine) -> Result<std::result::Result<Managers, ConfigError>> {
    let topology = match topology_manager(cfg, machine) {
        Ok(topology) => topology,
        Err(err) => return Ok(Err(err)),
    };
    let cpu = if cfg.cpu_static {
        let cpu_topology = machine.cpu_topology().map_err(|e| vec![e])?;
        match cpu_policy(cfg, cpu_topology) {
            Ok(policy) => Some(policy),
            Err(err) => return Ok(Err(err)),
        }
    } else {
        None
    };
    let memory = if cfg.memory_static {
        match memory_policy(cfg, machine) {
            Ok(policy) => Some(policy),
            Err(err) => return Ok(Err(err)),
        }
    } else {
        None
    };
    Ok(Ok(Managers {
        gates: cfg.gates,
        topology,
        cpu,
        memory,
    }))
}

// ----------------------------------------------------------------------
// State
// ----------------------------------------------------------------------

/// Both managers' state, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct States {
    cpu_policy: String,
    cpu: CpuManagerState,
    memory_policy: String,
    memory: MemoryState,
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

fn decode_state(state: &wit::ManagerState, base: &str, errors: &mut Vec<FieldError>) -> States {
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

fn encode_state(states: &States) -> wit::ManagerState {
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

/// Whether a loaded machine state matches the one its blocks imply
/// (upstream `validateState` / `areMachineStatesEqual`). Blocks over several
/// NUMA nodes are compared by group sums: how such a block splits across
/// its nodes depends on the order of earlier allocations and releases.
fn machine_states_match(got: &NumaNodeMap, want: &NumaNodeMap) -> bool {
    if got.keys().ne(want.keys()) {
        return false;
    }
    let mut groups: BTreeMap<(Vec<usize>, String), (u64, u64)> = BTreeMap::new();
    for (id, got_node) in got {
        let Some(want_node) = want.get(id) else {
            return false;
        };
        let mut got_cells = got_node.cells.clone();
        got_cells.sort_unstable();
        let mut want_cells = want_node.cells.clone();
        want_cells.sort_unstable();
        if got_node.number_of_assignments != want_node.number_of_assignments
            || got_cells != want_cells
            || got_node.memory_map.keys().ne(want_node.memory_map.keys())
        {
            return false;
        }
        for (resource, got_table) in &got_node.memory_map {
            let Some(want_table) = want_node.memory_map.get(resource) else {
                return false;
            };
            if got_table.total != want_table.total
                || got_table.system_reserved != want_table.system_reserved
                || got_table.allocatable != want_table.allocatable
                || got_table.reserved.checked_add(got_table.free) != Some(got_table.allocatable)
            {
                return false;
            }
            let sums = groups
                .entry((want_cells.clone(), resource.clone()))
                .or_insert((0, 0));
            sums.0 = sums.0.saturating_add(got_table.reserved);
            sums.1 = sums.1.saturating_add(want_table.reserved);
        }
    }
    groups.values().all(|(got, want)| got == want)
}

/// `Start` of both managers: the checkpoint's policy names must match the
/// configured ones; the static CPU policy checks or initialises the CPU
/// state; the static memory policy checks the machine state against its
/// blocks or computes the default one.
fn start(managers: &Managers, states: &States) -> std::result::Result<States, ConfigError> {
    let mut next = states.clone();
    let cpu_name = if managers.cpu.is_some() {
        CPU_POLICY_STATIC
    } else {
        CPU_POLICY_NONE
    };
    if !states.cpu_policy.is_empty() && states.cpu_policy != cpu_name {
        return Err(ConfigError::new(
            "Start",
            "state.cpu.policyName",
            format!(
                "configured policy {cpu_name:?} differs from state checkpoint policy {:?}",
                states.cpu_policy
            ),
        ));
    }
    next.cpu_policy = cpu_name.to_string();
    if let Some(policy) = &managers.cpu {
        next.cpu = policy
            .start(&states.cpu, &managers.gates)
            .map_err(|err| ConfigError::new("Start", "state.cpu", err.to_string()))?;
    }
    let memory_name = if managers.memory.is_some() {
        MEMORY_POLICY_STATIC
    } else {
        MEMORY_POLICY_NONE
    };
    if !states.memory_policy.is_empty() && states.memory_policy != memory_name {
        return Err(ConfigError::new(
            "Start",
            "state.memory.policyName",
            format!(
                "[memorymanager] configured policy {memory_name:?} differs from state checkpoint policy {:?}",
                states.memory_policy
            ),
        ));
    }
    next.memory_policy = memory_name.to_string();
    if let Some(policy) = &managers.memory {
        let memory = &states.memory;
        if memory.machine_state.is_empty() {
            if !memory.assignments.is_empty() || !memory.pod_assignments.is_empty() {
                return Err(ConfigError::new(
                    "Start",
                    "state.memory.machineState",
                    "[memorymanager] machine state can not be empty when it has memory assignments",
                ));
            }
            next.memory.machine_state = policy.default_machine.clone();
        } else {
            let expected = mm::expected_machine_state(&policy.default_machine, memory);
            if !machine_states_match(&memory.machine_state, &expected) {
                return Err(ConfigError::new(
                    "Start",
                    "state.memory.machineState",
                    "[memorymanager] the expected machine state is different from the real one",
                ));
            }
        }
    }
    Ok(next)
}

// ----------------------------------------------------------------------
// Pods
// ----------------------------------------------------------------------

/// A pod as both managers see it.
#[derive(Clone, Debug)]
struct ManagedPod {
    uid: String,
    cpu: PodSpec,
    memory: MemoryPod,
    /// Init containers then app containers, with their kinds.
    containers: Vec<(String, wit::ContainerKind)>,
    /// `IsPodLevelResourcesSet`.
    pod_level_set: bool,
}

impl ManagedPod {
    fn has_container(&self, name: &str) -> bool {
        self.containers.iter().any(|(n, _)| n == name)
    }
}

fn cpu_millis(map: &model::ResourceMap) -> Option<i64> {
    map.get("cpu").map(Quantity::milli_value)
}

fn memory_bytes(map: &model::ResourceMap) -> Option<u64> {
    map.get("memory").map(non_negative_bytes)
}

fn memory_requests(map: &model::ResourceMap) -> BTreeMap<String, u64> {
    map.iter()
        .filter(|(name, _)| mm::is_memory_resource(name))
        .map(|(name, q)| (name.clone(), non_negative_bytes(q)))
        .collect()
}

/// Decode a WIT pod for the managers (ephemeral containers are not managed).
fn managed_pod(wit_pod: &wit::Pod, gates: &FeatureGates) -> Result<ManagedPod> {
    let pod = Pod::decode(wit_pod)?;
    let mut errors = Vec::new();
    if wit_pod.uid.is_empty() {
        errors.push(field_error(
            "uid",
            ErrorReason::Required,
            "the managers key their state by pod UID",
            None,
        ));
    }
    if pod.containers.is_empty() {
        errors.push(field_error(
            "spec.containers",
            ErrorReason::Required,
            "a pod needs at least one container",
            None,
        ));
    }
    let mut names = BTreeSet::new();
    for c in pod.init_and_regular() {
        if c.name.is_empty() {
            errors.push(field_error(
                format!("{}.name", c.path()),
                ErrorReason::Required,
                "containers need a name",
                None,
            ));
        } else if !names.insert(c.name.as_str()) {
            errors.push(duplicate(format!("{}.name", c.path()), &c.name));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let spec = |c: &model::Container| {
        let kind = match c.kind {
            model::ContainerKind::Init => CpuContainerKind::Init,
            model::ContainerKind::Sidecar => CpuContainerKind::Sidecar,
            _ => CpuContainerKind::Regular,
        };
        ContainerSpec {
            name: c.name.clone(),
            kind,
            cpu_request_millis: cpu_millis(c.resources.requests()),
            cpu_limit_millis: cpu_millis(c.resources.limits()),
            memory_request_bytes: memory_bytes(c.resources.requests()),
            memory_limit_bytes: memory_bytes(c.resources.limits()),
        }
    };
    let pod_level = pod
        .resources
        .as_ref()
        .map(|r| PodLevelResources {
            cpu_request_millis: cpu_millis(r.requests()),
            cpu_limit_millis: cpu_millis(r.limits()),
            memory_request_bytes: memory_bytes(r.requests()),
            memory_limit_bytes: memory_bytes(r.limits()),
        })
        .unwrap_or_default();
    let cpu = PodSpec {
        uid: wit_pod.uid.clone(),
        pod_level,
        init_containers: pod.init_containers.iter().map(spec).collect(),
        containers: pod.containers.iter().map(spec).collect(),
    };
    let memory_container = |c: &model::Container, cpu: &ContainerSpec| MemoryContainer {
        name: c.name.clone(),
        restartable: c.kind == model::ContainerKind::Sidecar,
        requests: memory_requests(c.resources.requests()),
        equivalent_guaranteed: cpu.is_equivalent_guaranteed(),
    };
    let pod_level_set = crate::resources::pod_level_resources_set(&pod);
    let memory = MemoryPod {
        uid: wit_pod.uid.clone(),
        // Both managers see the class the CPU manager computes (ComputePodQOS over cpu and memory).
        guaranteed: cpu.qos_class(gates) == wit::QosClass::Guaranteed,
        init_containers: pod
            .init_containers
            .iter()
            .zip(&cpu.init_containers)
            .map(|(c, s)| memory_container(c, s))
            .collect(),
        containers: pod
            .containers
            .iter()
            .zip(&cpu.containers)
            .map(|(c, s)| memory_container(c, s))
            .collect(),
        pod_level_resources_set: pod_level_set,
        pod_requests: pod
            .resources
            .as_ref()
            .map(|r| memory_requests(r.requests()))
            .unwrap_or_default(),
    };
    Ok(ManagedPod {
        uid: wit_pod.uid.clone(),
        containers: pod
            .init_and_regular()
            .map(|c| (c.name.clone(), c.kind.to_wit()))
            .collect(),
        cpu,
        memory,
        pod_level_set,
    })
}

// ----------------------------------------------------------------------
// Errors and results
// ----------------------------------------------------------------------

impl wit::ManagerErrorKind {
    /// The admission reason the kubelet reports in the pod status for this
    /// kind (upstream's error type name); `""` for configuration errors,
    /// which are no admission result.
    pub fn reason(&self) -> &'static str {
        match self {
            wit::ManagerErrorKind::Configuration => "",
            wit::ManagerErrorKind::TopologyAffinity => tm::ERROR_TOPOLOGY_AFFINITY,
            wit::ManagerErrorKind::SmtAlignment(_) => {
                crate::cpu_manager::policy_static::ERROR_SMT_ALIGNMENT
            }
            wit::ManagerErrorKind::EmptyPodSharedPool => mm::ERROR_EMPTY_POD_SHARED_POOL,
            wit::ManagerErrorKind::UnexpectedAdmission => mm::ERROR_UNEXPECTED_ADMISSION,
        }
    }
}

fn manager_error(
    kind: wit::ManagerErrorKind,
    message: String,
    function: &str,
) -> wit::ManagerError {
    wit::ManagerError {
        kind,
        message,
        function: function.to_string(),
    }
}

/// An error without an admission type of its own: `UnexpectedAdmissionError`,
/// whose admission message wraps the error text.
fn unexpected(message: String, function: &str, admission: bool) -> wit::ManagerError {
    let message = if admission {
        format!("Allocate failed due to {message}, which is unexpected")
    } else {
        message
    };
    manager_error(
        wit::ManagerErrorKind::UnexpectedAdmission,
        message,
        function,
    )
}

fn cpu_error(err: &CpuManagerError, function: &str, admission: bool) -> wit::ManagerError {
    // Counts beyond u32 cannot come from a topology the component accepts.
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let kind = match err {
        CpuManagerError::SmtAlignment(smt) => {
            wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                requested_cpus: count(smt.requested_cpus),
                cpus_per_core: count(smt.cpus_per_core),
                available_physical_cpus: count(smt.available_physical_cpus),
                caused_by_physical_cpus: smt.caused_by_physical_cpus,
            })
        }
        CpuManagerError::EmptyPodSharedPool { .. } => wit::ManagerErrorKind::EmptyPodSharedPool,
        _ => return unexpected(err.to_string(), function, admission),
    };
    manager_error(kind, err.to_string(), function)
}

fn memory_error(err: &MemoryError, function: &str, admission: bool) -> wit::ManagerError {
    match err {
        MemoryError::EmptyPodSharedPool(_) => manager_error(
            wit::ManagerErrorKind::EmptyPodSharedPool,
            err.to_string(),
            function,
        ),
        _ => unexpected(err.to_string(), function, admission),
    }
}

/// Why the static CPU policy refused `call`, in one line with the inputs of
/// the check that failed (upstream's message keeps only some of them).
fn cpu_refusal(
    err: &CpuManagerError,
    call: &str,
    policy: &StaticPolicy,
    pod: &PodSpec,
    gates: &FeatureGates,
) -> String {
    let head = format!("CPU manager static, {call}");
    match err {
        CpuManagerError::SmtAlignment(smt) if smt.caused_by_physical_cpus => format!(
            "{head}: full-pcpus-only: {} CPUs requested, but only {} CPUs are free on whole physical cores outside the reserved ones ({} CPUs per core); full-pcpus-only hands out exclusive CPUs only as whole cores",
            smt.requested_cpus, smt.available_physical_cpus, smt.cpus_per_core
        ),
        CpuManagerError::SmtAlignment(smt) => format!(
            "{head}: full-pcpus-only: {} CPUs requested is not a multiple of the {} CPUs per physical core; full-pcpus-only hands out exclusive CPUs only as whole cores",
            smt.requested_cpus, smt.cpus_per_core
        ),
        CpuManagerError::EmptyPodSharedPool { message } => {
            let budget = policy.pod_guaranteed_cpus(pod, gates);
            let containers: Vec<String> = pod
                .all_containers()
                .map(|c| {
                    let init = if c.kind == CpuContainerKind::Init {
                        " (init, runs before the others)"
                    } else {
                        ""
                    };
                    match policy.guaranteed_cpus(pod, c, gates) {
                        0 => format!("{} pod shared pool{init}", c.name),
                        n => format!("{} {n} exclusive{init}", c.name),
                    }
                })
                .collect();
            format!(
                "{head}: {message}: pod cpu budget {budget} CPUs; containers: {}; KEP-5526 refuses a pod whose containers without exclusive CPUs would find its pod shared pool empty",
                containers.join(", ")
            )
        }
        other => format!("{head}: {other}"),
    }
}

/// Why the Static memory policy refused `call`, in one line with its inputs.
fn memory_refusal(err: &MemoryError, call: &str, pod: &MemoryPod, gates: PodLevelGates) -> String {
    let head = format!("memory manager Static, {call}");
    match err {
        MemoryError::EmptyPodSharedPool(scope) => {
            let budget: Vec<String> = mm::get_pod_requested_resources(gates, pod)
                .iter()
                .map(|(resource, bytes)| format!("{resource} {bytes}"))
                .collect();
            format!(
                "{head}: {scope}: pod budget (bytes) {}; KEP-5526 refuses a pod whose containers without exclusive memory would find its pod shared pool empty",
                if budget.is_empty() {
                    "none".to_string()
                } else {
                    budget.join(", ")
                }
            )
        }
        other => format!("{head}: {other}"),
    }
}

fn isolation(level: ResourceIsolationLevel) -> wit::CpuIsolation {
    match level {
        ResourceIsolationLevel::Host => wit::CpuIsolation::Host,
        ResourceIsolationLevel::Pod => wit::CpuIsolation::Pod,
        ResourceIsolationLevel::Container => wit::CpuIsolation::Container,
    }
}

/// What the state says the pod got. `cpu` is the static CPU policy when the
/// CPU manager runs; `affinities` the topology manager's hint per container.
fn pod_assignment(
    cpu: Option<&StaticPolicy>,
    gates: &FeatureGates,
    states: &States,
    pod: &ManagedPod,
    affinities: &BTreeMap<String, TopologyHint>,
    all_cpus: &CpuSet,
) -> wit::PodAssignment {
    let disable_quota = gates.disable_cpu_quota_with_exclusive_cpus;
    let memory_blocks = |name: &str| {
        states
            .memory
            .assignments
            .get(&pod.uid)
            .and_then(|c| c.get(name))
            .map(|blocks| encode_blocks(blocks))
            .unwrap_or_default()
    };
    let mut exclusive_long_running = CpuSet::new();
    let mut any_exclusive = false;
    let containers: Vec<wit::ContainerAssignment> = pod
        .containers
        .iter()
        .map(|(name, kind)| {
            let (level, cpuset) = match cpu {
                Some(policy) => (
                    policy.resource_isolation_level(&states.cpu, &pod.cpu, name, gates),
                    states.cpu.cpuset(&pod.uid, name).cloned(),
                ),
                None => (ResourceIsolationLevel::Host, None),
            };
            if level == ResourceIsolationLevel::Container {
                any_exclusive = true;
                if *kind != wit::ContainerKind::Init
                    && let Some(cpus) = &cpuset
                {
                    exclusive_long_running = exclusive_long_running.union(cpus);
                }
            }
            wit::ContainerAssignment {
                name: name.clone(),
                kind: *kind,
                affinity: encode_hint(&affinities.get(name).copied().unwrap_or_default()),
                cpu_isolation: isolation(level),
                cpuset: cpuset.map(|c| c.to_string()),
                cfs_quota_disabled: disable_quota && level == ResourceIsolationLevel::Container,
                memory: memory_blocks(name),
            }
        })
        .collect();
    let pod_cpus = cpu.and(states.cpu.pod_cpuset(&pod.uid));
    wit::PodAssignment {
        pod_cpuset: pod_cpus.map(CpuSet::to_string),
        pod_shared_pool: pod_cpus.map(|set| set.difference(&exclusive_long_running).to_string()),
        pod_memory: states
            .memory
            .pod_assignments
            .get(&pod.uid)
            .map(|blocks| encode_blocks(blocks))
            .unwrap_or_default(),
        pod_cfs_quota_disabled: disable_quota && any_exclusive,
        node_shared_pool: if cpu.is_some() {
            states.cpu.default_cpuset.to_string()
        } else {
            all_cpus.to_string()
        },
        containers,
    }
}

// ----------------------------------------------------------------------
// admit / release
// ----------------------------------------------------------------------

/// Everything `admit` and `release` decode before they run.
struct Inputs {
    cfg: Config,
    machine: Machine,
    states: States,
}

fn decode_inputs(
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
    errors: &mut Vec<FieldError>,
) -> Option<Inputs> {
    let cfg = decode_config(node).map_err(|e| errors.extend(e)).ok();
    let machine = Machine::decode(topology, errors);
    let states = decode_state(state, "state", errors);
    Some(Inputs {
        cfg: cfg?,
        machine,
        states,
    })
}

/// One admission in progress.
struct Admitting<'a> {
    managers: &'a Managers,
    pod: &'a ManagedPod,
    states: States,
    decisions: Vec<wit::TopologyDecision>,
    affinities: BTreeMap<String, TopologyHint>,
    /// Why the admission failed, one line with its inputs (the
    /// `admission.rule` of a rejection); set where the refusal happens,
    /// since only there are the check's numbers at hand.
    refusal: Option<String>,
}

impl Admitting<'_> {
    fn memory_gates(&self) -> PodLevelGates {
        PodLevelGates::from(&self.managers.gates)
    }

    /// Each active provider's hints for one container, or (`None`) for the pod.
    fn hints(&self, container: Option<&str>) -> Vec<(wit::ResourceManager, CpuHints)> {
        let gates = &self.managers.gates;
        let mut answers = Vec::new();
        if let Some(policy) = &self.managers.cpu {
            let hints = match container {
                Some(name) => {
                    policy.get_topology_hints(&self.states.cpu, &self.pod.cpu, name, gates)
                }
                None => policy.get_pod_topology_hints(&self.states.cpu, &self.pod.cpu, gates),
            };
            answers.push((wit::ResourceManager::Cpu, hints));
        }
        if self.managers.memory.is_some() {
            let memory_gates = self.memory_gates();
            let hints = match container {
                Some(name) => mm::get_topology_hints(
                    memory_gates,
                    &self.states.memory,
                    &self.pod.memory,
                    name,
                ),
                None => {
                    mm::get_pod_topology_hints(memory_gates, &self.states.memory, &self.pod.memory)
                }
            };
            answers.push((wit::ResourceManager::Memory, hints));
        }
        answers
    }

    /// Ask, merge and record; `Err` when the policy refuses.
    fn decide(
        &mut self,
        container: Option<&str>,
        pod_level: bool,
    ) -> std::result::Result<TopologyHint, wit::ManagerError> {
        let answers = self.hints(container);
        let providers: Vec<tm::ProviderHints> = answers
            .iter()
            .map(|(_, hints)| tm::provider_hints(hints.clone()))
            .collect();
        let topology = &self.managers.topology;
        let (hint, admit) = topology.policy.merge(&providers);
        let rule = topology
            .policy
            .admit_rule(topology.scope, &providers, &hint);
        if !admit {
            self.refusal = Some(match container {
                Some(name) => format!("container {name}: {rule}"),
                None => rule.clone(),
            });
        }
        self.decisions.push(wit::TopologyDecision {
            container: container.map(str::to_string),
            providers: answers
                .iter()
                .map(|(manager, hints)| wit::ProviderAnswer {
                    manager: *manager,
                    hints: encode_provider_hints(hints),
                })
                .collect(),
            affinity: encode_hint(&hint),
            admit,
            rule,
        });
        if admit {
            return Ok(hint);
        }
        let err = if pod_level {
            tm::AdmitError::PodLevelTopologyAffinity
        } else {
            tm::AdmitError::TopologyAffinity
        };
        Err(manager_error(
            wit::ManagerErrorKind::TopologyAffinity,
            err.to_string(),
            "Admit",
        ))
    }

    /// `Allocate(pod, container)` on every provider.
    fn allocate_container(
        &mut self,
        name: &str,
        hint: TopologyHint,
    ) -> std::result::Result<(), wit::ManagerError> {
        self.affinities.insert(name.to_string(), hint);
        let gates = &self.managers.gates;
        let call = format!("Allocate (container {name})");
        if let Some(policy) = &self.managers.cpu {
            let allocated = policy.allocate(
                &self.states.cpu,
                &self.pod.cpu,
                name,
                hint.numa_affinity.map(BitMask::raw),
                gates,
            );
            match allocated {
                Ok(state) => self.states.cpu = state,
                Err(err) => {
                    self.refusal = Some(cpu_refusal(&err, &call, policy, &self.pod.cpu, gates));
                    return Err(cpu_error(&err, "Allocate", true));
                }
            }
        }
        if self.managers.memory.is_some() {
            let memory_gates = self.memory_gates();
            let allocated = mm::allocate(
                memory_gates,
                &self.states.memory,
                &self.pod.memory,
                name,
                hint,
            );
            match allocated {
                Ok(state) => self.states.memory = state,
                Err(err) => {
                    self.refusal =
                        Some(memory_refusal(&err, &call, &self.pod.memory, memory_gates));
                    return Err(memory_error(&err, "Allocate", true));
                }
            }
        }
        Ok(())
    }

    /// `AllocatePod(pod)` on every provider (KEP-5526 pod scope).
    fn allocate_pod(&mut self, hint: TopologyHint) -> std::result::Result<(), wit::ManagerError> {
        for (name, _) in &self.pod.containers {
            self.affinities.insert(name.clone(), hint);
        }
        let gates = &self.managers.gates;
        let call = "AllocatePod (pod scope, KEP-5526 pod-level resources)";
        if let Some(policy) = &self.managers.cpu {
            let allocated = policy.allocate_pod(
                &self.states.cpu,
                &self.pod.cpu,
                hint.numa_affinity.map(BitMask::raw),
                gates,
            );
            match allocated {
                Ok(state) => self.states.cpu = state,
                Err(err) => {
                    self.refusal = Some(cpu_refusal(&err, call, policy, &self.pod.cpu, gates));
                    return Err(cpu_error(&err, "AllocatePod", true));
                }
            }
        }
        if self.managers.memory.is_some() {
            let memory_gates = self.memory_gates();
            let allocated =
                mm::allocate_pod(memory_gates, &self.states.memory, &self.pod.memory, hint);
            match allocated {
                Ok(state) => self.states.memory = state,
                Err(err) => {
                    self.refusal = Some(memory_refusal(&err, call, &self.pod.memory, memory_gates));
                    return Err(memory_error(&err, "AllocatePod", true));
                }
            }
        }
        Ok(())
    }

    /// Why the pod was admitted: the topology policy that let every
    /// decision through and the managers that allocated it.
    fn admitted_rule(&self) -> String {
        let topology = &self.managers.topology;
        let allocators = match (self.managers.cpu.is_some(), self.managers.memory.is_some()) {
            (true, true) => "the static CPU manager and the Static memory manager allocated it",
            (true, false) => "the static CPU manager allocated it",
            (false, true) => "the Static memory manager allocated it",
            (false, false) => "no resource manager places pods on this node",
        };
        if topology.scope == tm::Scope::None {
            return format!(
                "admitted: topology manager policy none asks for no NUMA alignment (no hint, no decision); {allocators}"
            );
        }
        let decisions = self.decisions.len();
        let admitted = if decisions == 1 {
            "the merged hint".to_string()
        } else {
            format!("all {decisions} merged hints")
        };
        format!(
            "admitted: topology manager policy {} ({} scope) admitted {admitted}; {allocators}",
            topology.policy.name().as_str(),
            topology.scope.as_str(),
        )
    }

    /// The topology manager's scope, as `Admit` runs it.
    fn run(&mut self) -> std::result::Result<(), wit::ManagerError> {
        let names: Vec<String> = self.pod.containers.iter().map(|(n, _)| n.clone()).collect();
        match self.managers.topology.scope {
            tm::Scope::None => {
                for name in &names {
                    self.allocate_container(name, TopologyHint::default())?;
                }
            }
            tm::Scope::Container => {
                for name in &names {
                    let hint = self.decide(Some(name), false)?;
                    self.allocate_container(name, hint)?;
                }
            }
            tm::Scope::Pod => {
                let allocation = tm::pod_scope_allocation(
                    self.managers.gates.pod_level_resource_managers,
                    self.pod.pod_level_set,
                );
                let per_pod = allocation == tm::PodAllocation::PerPod;
                let hint = self.decide(None, per_pod)?;
                if per_pod {
                    self.allocate_pod(hint)?;
                } else {
                    for name in &names {
                        self.allocate_container(name, hint)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Export `admit`: see the module docs.
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
    let managed = match crate::defaults::default_pod(pod, &gates) {
        Ok(defaulted) => managed_pod(&defaulted.pod, &gates)
            .map_err(|e| errors.extend(e))
            .ok(),
        Err(e) => {
            errors.extend(e);
            None
        }
    };
    let (Some(inputs), Some(managed), true) = (inputs, managed, errors.is_empty()) else {
        return Err(errors);
    };
    let managers = node_managers(&inputs.cfg, &inputs.machine)?;
    let started = start(&managers, &inputs.states).map_err(|e| vec![e.field_error()])?;
    let mut admitting = Admitting {
        managers: &managers,
        pod: &managed,
        states: started.clone(),
        decisions: Vec::new(),
        affinities: BTreeMap::new(),
        refusal: None,
    };
    let outcome = admitting.run();
    let rule = match (&outcome, admitting.refusal.take()) {
        (Ok(()), _) => admitting.admitted_rule(),
        (Err(_), Some(refusal)) => refusal,
        // Every refusal above records its line; this keeps a missed path
        // readable instead of empty.
        (Err(err), None) => format!("{}: {}", err.function, err.message),
    };
    let all_cpus = inputs.machine.all_cpus();
    let (rejection, states, pod_for_assignment) = match outcome {
        Ok(()) => (None, admitting.states, Some(&managed)),
        Err(err) => (Some(err), started, None),
    };
    let mut assignment = pod_assignment(
        managers.cpu.as_ref(),
        &managers.gates,
        &states,
        &managed,
        &admitting.affinities,
        &all_cpus,
    );
    if pod_for_assignment.is_none() {
        assignment.containers.clear();
        assignment.pod_cpuset = None;
        assignment.pod_shared_pool = None;
        assignment.pod_memory.clear();
        assignment.pod_cfs_quota_disabled = false;
    }
    let files = if rejection.is_none() {
        let numa_nodes = inputs.machine.numa.keys().map(|id| *id as u32).collect();
        crate::placement::placement_files(&assignment, &numa_nodes, inputs.cfg.cfs_period_us)
    } else {
        wit::PlacementFiles {
            pod: Vec::new(),
            containers: Vec::new(),
        }
    };
    Ok(wit::Admission {
        rejection,
        rule,
        topology: admitting.decisions,
        assignment,
        state: encode_state(&states),
        files,
    })
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
    let managers = node_managers(&inputs.cfg, &inputs.machine)?;
    let mut states = inputs.states;
    if let Some(policy) = &managers.cpu {
        states.cpu = policy.remove_container(&states.cpu, pod_uid, container, &managers.gates);
    }
    if managers.memory.is_some() {
        states.memory = mm::remove_container(
            PodLevelGates::from(&managers.gates),
            &states.memory,
            pod_uid,
            container,
        );
    }
    Ok(encode_state(&states))
}

// ----------------------------------------------------------------------
// manager-operation
// ----------------------------------------------------------------------

/// The decoded configuration and topology every operation starts from.
struct Operation {
    cfg: Config,
    machine: Machine,
}

fn ok_or_errors<T>(value: T, errors: Vec<FieldError>) -> Result<T> {
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

impl Operation {
    fn gates(&self) -> &FeatureGates {
        &self.cfg.gates
    }

    /// The static CPU policy, whatever the node configures.
    fn cpu_policy(&self) -> Result<std::result::Result<StaticPolicy, wit::ManagerError>> {
        let topology = self.machine.cpu_topology().map_err(|e| vec![e])?;
        Ok(cpu_policy(&self.cfg, topology).map_err(ConfigError::manager_error))
    }

    /// The static memory policy, whatever the node configures.
    fn memory_policy(&self) -> std::result::Result<MemoryPolicy, wit::ManagerError> {
        memory_policy(&self.cfg, &self.machine).map_err(ConfigError::manager_error)
    }

    /// A state whose empty memory machine state stands for the default one.
    fn with_machine(&self, mut states: States) -> std::result::Result<States, wit::ManagerError> {
        if states.memory.machine_state.is_empty() {
            states.memory.machine_state = self.memory_policy()?.default_machine;
        }
        Ok(states)
    }

    fn pod(&self, pod: &wit::Pod, errors: &mut Vec<FieldError>) -> Option<ManagedPod> {
        managed_pod(pod, self.gates())
            .map_err(|e| errors.extend(e))
            .ok()
    }

    fn check_container(pod: &ManagedPod, name: &str, errors: &mut Vec<FieldError>) {
        if !pod.has_container(name) {
            errors.push(invalid(
                "container",
                "not an init or app container of the pod",
                name,
            ));
        }
    }

    fn allocation(
        &self,
        states: &States,
        pod: &ManagedPod,
        hint: TopologyHint,
        only: Option<&str>,
    ) -> wit::ManagerResponse {
        let policy = self.cpu_policy().ok().and_then(|p| p.ok());
        let affinities = pod
            .containers
            .iter()
            .filter(|(name, _)| only.is_none_or(|o| o == name))
            .map(|(name, _)| (name.clone(), hint))
            .collect();
        wit::ManagerResponse::Allocated(wit::Allocation {
            assignment: pod_assignment(
                policy.as_ref(),
                self.gates(),
                states,
                pod,
                &affinities,
                &self.machine.all_cpus(),
            ),
            state: encode_state(states),
        })
    }

    fn start(&self, state: &wit::ManagerState) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let states = decode_state(state, "state", &mut errors);
        let states = ok_or_errors(states, errors)?;
        let managers = match managers(&self.cfg, &self.machine)? {
            Ok(managers) => managers,
            Err(err) => return Ok(Err(err.manager_error())),
        };
        Ok(start(&managers, &states)
            .map(|next| wit::ManagerResponse::State(encode_state(&next)))
            .map_err(ConfigError::manager_error))
    }

    fn topology_merge(&self, providers: &[wit::ProviderHints]) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let hints: Vec<tm::ProviderHints> = providers
            .iter()
            .enumerate()
            .map(|(i, p)| decode_provider_hints(p, &format!("providers[{i}]"), &mut errors))
            .collect();
        let hints = ok_or_errors(hints, errors)?;
        let manager = match topology_manager(&self.cfg, &self.machine) {
            Ok(manager) => manager,
            Err(err) => return Ok(Err(err.manager_error())),
        };
        let (hint, admit) = manager.policy.merge(&hints);
        Ok(Ok(wit::ManagerResponse::Merged(wit::MergedHint {
            hint: encode_hint(&hint),
            admit,
        })))
    }

    fn take_cpus(&self, request: &wit::TakeCpusRequest) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let available = parse_cpuset(&request.available, "available", &mut errors);
        let topology = self.machine.cpu_topology().map_err(|e| vec![e]);
        let topology = match topology {
            Ok(topology) if errors.is_empty() => topology,
            Ok(_) => return Err(errors),
            Err(e) => {
                errors.extend(e);
                return Err(errors);
            }
        };
        let strategy = match request.sorting {
            wit::CpuSortingStrategy::Packed => CpuSortingStrategy::Packed,
            wit::CpuSortingStrategy::Spread => CpuSortingStrategy::Spread,
        };
        let num_cpus = request.num_cpus as usize;
        let (taken, function) = match request.algorithm {
            wit::TakeAlgorithm::NumaPacked => (
                take_by_topology_numa_packed(
                    topology,
                    &available,
                    num_cpus,
                    strategy,
                    request.prefer_align_by_uncore_cache,
                ),
                "takeByTopologyNUMAPacked",
            ),
            wit::TakeAlgorithm::NumaDistributed => (
                take_by_topology_numa_distributed(
                    topology,
                    &available,
                    num_cpus,
                    request.cpu_group_size as usize,
                    strategy,
                ),
                "takeByTopologyNUMADistributed",
            ),
        };
        Ok(taken
            .map(|cpus| wit::ManagerResponse::Cpus(cpus.to_string()))
            .map_err(|err| unexpected(err.to_string(), function, false)))
    }

    fn allocate_cpus(&self, request: &wit::AllocateCpusRequest) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let states = decode_state(&request.state, "state", &mut errors);
        let reusable = parse_cpuset(&request.reusable, "reusable", &mut errors);
        let mask = request
            .numa_affinity
            .as_ref()
            .map(|ids| decode_mask(ids, "numaAffinity", &mut errors));
        let mut states = ok_or_errors(states, errors)?;
        let policy = match self.cpu_policy()? {
            Ok(policy) => policy,
            Err(err) => return Ok(Err(err)),
        };
        Ok(
            match policy.allocate_cpus(
                &states.cpu,
                request.num_cpus as usize,
                mask.map(BitMask::raw),
                &reusable,
            ) {
                Ok((cpus, next)) => {
                    states.cpu = next;
                    Ok(wit::ManagerResponse::CpusAllocated(wit::CpusAllocation {
                        cpus: cpus.to_string(),
                        state: encode_state(&states),
                    }))
                }
                Err(err) => Err(cpu_error(&err, "allocateCPUs", false)),
            },
        )
    }

    fn topology_hints(&self, request: &wit::HintsRequest) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let states = decode_state(&request.state, "state", &mut errors);
        let pod = self.pod(&request.pod, &mut errors);
        if let (Some(pod), Some(name)) = (&pod, &request.container) {
            Self::check_container(pod, name, &mut errors);
        }
        let (Some(pod), true) = (pod, errors.is_empty()) else {
            return Err(errors);
        };
        let container = request.container.as_deref();
        let hints = match request.manager {
            wit::ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                match container {
                    Some(name) => {
                        policy.get_topology_hints(&states.cpu, &pod.cpu, name, self.gates())
                    }
                    None => policy.get_pod_topology_hints(&states.cpu, &pod.cpu, self.gates()),
                }
            }
            wit::ResourceManager::Memory => {
                let states = match self.with_machine(states) {
                    Ok(states) => states,
                    Err(err) => return Ok(Err(err)),
                };
                let gates = PodLevelGates::from(self.gates());
                match container {
                    Some(name) => mm::get_topology_hints(gates, &states.memory, &pod.memory, name),
                    None => mm::get_pod_topology_hints(gates, &states.memory, &pod.memory),
                }
            }
        };
        Ok(Ok(wit::ManagerResponse::Hints(encode_provider_hints(
            &hints,
        ))))
    }

    fn allocate(&self, request: &wit::ContainerRequest) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let states = decode_state(&request.state, "state", &mut errors);
        let hint = decode_hint(&request.hint, "hint", &mut errors);
        let pod = self.pod(&request.pod, &mut errors);
        if let Some(pod) = &pod {
            Self::check_container(pod, &request.container, &mut errors);
        }
        let (Some(pod), true) = (pod, errors.is_empty()) else {
            return Err(errors);
        };
        let name = request.container.as_str();
        let mut states = states;
        match request.manager {
            wit::ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                match policy.allocate(
                    &states.cpu,
                    &pod.cpu,
                    name,
                    hint.numa_affinity.map(BitMask::raw),
                    self.gates(),
                ) {
                    Ok(next) => states.cpu = next,
                    Err(err) => return Ok(Err(cpu_error(&err, "Allocate", false))),
                }
            }
            wit::ResourceManager::Memory => {
                states = match self.with_machine(states) {
                    Ok(states) => states,
                    Err(err) => return Ok(Err(err)),
                };
                let gates = PodLevelGates::from(self.gates());
                match mm::allocate(gates, &states.memory, &pod.memory, name, hint) {
                    Ok(next) => states.memory = next,
                    Err(err) => return Ok(Err(memory_error(&err, "Allocate", false))),
                }
            }
        }
        Ok(Ok(self.allocation(&states, &pod, hint, Some(name))))
    }

    /// `allocate-pod` (`per_pod`) or `allocate-containers`.
    fn allocate_whole_pod(
        &self,
        request: &wit::PodRequest,
        per_pod: bool,
    ) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let states = decode_state(&request.state, "state", &mut errors);
        let hint = decode_hint(&request.hint, "hint", &mut errors);
        let pod = self.pod(&request.pod, &mut errors);
        let (Some(pod), true) = (pod, errors.is_empty()) else {
            return Err(errors);
        };
        let mut states = states;
        let gates = self.gates();
        match request.manager {
            wit::ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                let mask = hint.numa_affinity.map(BitMask::raw);
                let result = if per_pod {
                    policy
                        .allocate_pod(&states.cpu, &pod.cpu, mask, gates)
                        .map_err(|err| cpu_error(&err, "AllocatePod", false))
                } else {
                    policy
                        .allocate_container_scope(&states.cpu, &pod.cpu, mask, gates)
                        .map_err(|err| cpu_error(&err, "Allocate", false))
                };
                match result {
                    Ok(next) => states.cpu = next,
                    Err(err) => return Ok(Err(err)),
                }
            }
            wit::ResourceManager::Memory => {
                states = match self.with_machine(states) {
                    Ok(states) => states,
                    Err(err) => return Ok(Err(err)),
                };
                let memory_gates = PodLevelGates::from(gates);
                if per_pod && memory_gates.both() && pod.pod_level_set {
                    match mm::allocate_pod(memory_gates, &states.memory, &pod.memory, hint) {
                        Ok(next) => states.memory = next,
                        Err(err) => return Ok(Err(memory_error(&err, "AllocatePod", false))),
                    }
                } else {
                    let mut memory = states.memory.clone();
                    for (name, _) in &pod.containers {
                        match mm::allocate(memory_gates, &memory, &pod.memory, name, hint) {
                            Ok(next) => memory = next,
                            Err(err) => return Ok(Err(memory_error(&err, "Allocate", false))),
                        }
                    }
                    states.memory = memory;
                }
            }
        }
        Ok(Ok(self.allocation(&states, &pod, hint, None)))
    }

    fn remove_container(&self, request: &wit::RemoveRequest) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let states = decode_state(&request.state, "state", &mut errors);
        let mut states = ok_or_errors(states, errors)?;
        match request.manager {
            wit::ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                states.cpu = policy.remove_container(
                    &states.cpu,
                    &request.pod_uid,
                    &request.container,
                    self.gates(),
                );
            }
            wit::ResourceManager::Memory => {
                states.memory = mm::remove_container(
                    PodLevelGates::from(self.gates()),
                    &states.memory,
                    &request.pod_uid,
                    &request.container,
                );
            }
        }
        Ok(Ok(wit::ManagerResponse::State(encode_state(&states))))
    }

    fn pod_requested(&self, request: &wit::PodRequestedRequest) -> Result<OperationResult> {
        let mut errors = Vec::new();
        let pod = self.pod(&request.pod, &mut errors);
        let Some(pod) = pod else {
            return Err(errors);
        };
        let requested: Vec<(String, u64)> = match request.manager {
            wit::ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                let cpus = policy.pod_guaranteed_cpus(&pod.cpu, self.gates());
                vec![("cpu".to_string(), u64::try_from(cpus).unwrap_or(u64::MAX))]
            }
            wit::ResourceManager::Memory => {
                mm::get_pod_requested_resources(PodLevelGates::from(self.gates()), &pod.memory)
                    .into_iter()
                    .collect()
            }
        };
        Ok(Ok(wit::ManagerResponse::Requested(
            requested
                .into_iter()
                .map(|(resource_name, amount)| wit::RequestedResource {
                    resource_name,
                    amount,
                })
                .collect(),
        )))
    }
}

/// Export `manager-operation`: one upstream manager function on explicit inputs.
pub fn manager_operation(
    request: &wit::ManagerRequest,
    topology: &wit::NodeTopology,
    node: &wit::NodeSettings,
) -> Result<OperationResult> {
    let mut errors = Vec::new();
    let cfg = decode_config(node).map_err(|e| errors.extend(e)).ok();
    let machine = Machine::decode(topology, &mut errors);
    let (Some(cfg), true) = (cfg, errors.is_empty()) else {
        return Err(errors);
    };
    let op = Operation { cfg, machine };
    match request {
        wit::ManagerRequest::Start(state) => op.start(state),
        wit::ManagerRequest::TopologyMerge(providers) => op.topology_merge(providers),
        wit::ManagerRequest::TakeCpus(r) => op.take_cpus(r),
        wit::ManagerRequest::AllocateCpus(r) => op.allocate_cpus(r),
        wit::ManagerRequest::TopologyHints(r) => op.topology_hints(r),
        wit::ManagerRequest::Allocate(r) => op.allocate(r),
        wit::ManagerRequest::AllocatePod(r) => op.allocate_whole_pod(r, true),
        wit::ManagerRequest::AllocateContainers(r) => op.allocate_whole_pod(r, false),
        wit::ManagerRequest::RemoveContainer(r) => op.remove_container(r),
        wit::ManagerRequest::PodRequested(r) => op.pod_requested(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn list(pairs: &[(&str, &str)]) -> Vec<wit::ResourceQuantity> {
        pairs
            .iter()
            .map(|(name, quantity)| wit::ResourceQuantity {
                name: (*name).into(),
                quantity: (*quantity).into(),
            })
            .collect()
    }

    fn guaranteed(cpu: &str, memory: &str) -> Option<wit::ResourceRequirements> {
        let l = list(&[("cpu", cpu), ("memory", memory)]);
        Some(wit::ResourceRequirements {
            requests: Some(l.clone()),
            limits: Some(l),
        })
    }

    fn container(name: &str, resources: Option<wit::ResourceRequirements>) -> wit::Container {
        wit::Container {
            name: name.into(),
            resources,
            restart_policy: None,
            resize_policy: Vec::new(),
        }
    }

    fn pod(
        uid: &str,
        resources: Option<wit::ResourceRequirements>,
        containers: Vec<wit::Container>,
    ) -> wit::Pod {
        let mut pod = crate::model::bare_pod(uid, containers);
        pod.uid = uid.into();
        pod.spec.resources = resources;
        pod
    }

    /// topoDualSocketHT with 8Gi per NUMA node.
    fn topology() -> wit::NodeTopology {
        wit::NodeTopology {
            cpus: (0..12)
                .map(|id| wit::TopologyCpu {
                    id,
                    core_id: id % 6,
                    socket_id: id % 2,
                    numa_node: id % 2,
                    uncore_cache_id: None,
                })
                .collect(),
            numa_nodes: (0..2)
                .map(|id| wit::NumaNodeInfo {
                    id,
                    memory_bytes: 8 * GIB,
                    hugepages: Vec::new(),
                    distances: vec![10, 20],
                })
                .collect(),
        }
    }

    fn node(scope: &str) -> wit::NodeSettings {
        wit::NodeSettings {
            system_reserved: list(&[("cpu", "1")]),
            cpu_manager_policy: Some(wit::CpuManagerPolicy::Static),
            memory_manager_policy: Some(wit::MemoryManagerPolicy::Static),
            reserved_memory: (0..2)
                .map(|numa_node| wit::NumaReservedMemory {
                    numa_node,
                    limits: list(&[("memory", "1Gi")]),
                })
                .collect(),
            topology_manager_policy: Some(wit::TopologyManagerPolicy::Restricted),
            topology_manager_scope: Some(match scope {
                "pod" => wit::TopologyManagerScope::Pod,
                _ => wit::TopologyManagerScope::Container,
            }),
            feature_gates: vec![wit::FeatureGate {
                name: "PodLevelResourceManagers".into(),
                enabled: true,
            }],
            ..crate::node::default_settings()
        }
    }

    fn empty_state() -> wit::ManagerState {
        encode_state(&States::default())
    }

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

    fn with_options(
        mut node: wit::NodeSettings,
        policy: &str,
        options: &[(&str, &str)],
    ) -> wit::NodeSettings {
        node.topology_manager_policy = Some(match policy {
            "best-effort" => wit::TopologyManagerPolicy::BestEffort,
            "restricted" => wit::TopologyManagerPolicy::Restricted,
            "single-numa-node" => wit::TopologyManagerPolicy::SingleNumaNode,
            _ => wit::TopologyManagerPolicy::None,
        });
        node.cpu_manager_policy_options = options
            .iter()
            .map(|(name, value)| wit::PolicyOption {
                name: (*name).into(),
                value: (*value).into(),
            })
            .collect();
        node
    }

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

    #[test]
    fn operations_report_upstream_errors() {
        // NewStaticPolicy refuses a reserved set of the wrong size.
        let mut settings = node("pod");
        settings.reserved_system_cpus = Some("0-1".into());
        let out = manager_operation(
            &wit::ManagerRequest::Start(empty_state()),
            &topology(),
            &settings,
        )
        .unwrap();
        let err = out.unwrap_err();
        assert_eq!(err.kind, wit::ManagerErrorKind::Configuration);
        assert_eq!(err.function, "NewStaticPolicy");
        assert_eq!(
            err.message,
            "[cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)"
        );
        // takeByTopology on too few CPUs.
        let take = wit::ManagerRequest::TakeCpus(wit::TakeCpusRequest {
            algorithm: wit::TakeAlgorithm::NumaPacked,
            available: "0-1".into(),
            num_cpus: 3,
            cpu_group_size: 1,
            sorting: wit::CpuSortingStrategy::Packed,
            prefer_align_by_uncore_cache: false,
        });
        let err = manager_operation(&take, &topology(), &node("pod"))
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.message,
            "not enough cpus available to satisfy request: requested=3, available=2"
        );
        // Bad input stays a field error.
        let mut no_cpus = topology();
        no_cpus.cpus.clear();
        let errors = manager_operation(&take, &no_cpus, &node("pod")).unwrap_err();
        assert_eq!(errors[0].field, "topology.cpus");
    }

    #[test]
    fn multi_numa_blocks_compare_by_group() {
        let table = |reserved: u64| MemoryTable {
            total: 4 * GIB,
            system_reserved: 0,
            allocatable: 4 * GIB,
            reserved,
            free: 4 * GIB - reserved,
        };
        let node = |reserved: u64| NumaNodeState {
            number_of_assignments: 1,
            memory_map: BTreeMap::from([(mm::MEMORY.to_string(), table(reserved))]),
            cells: vec![0, 1],
        };
        let want: NumaNodeMap = BTreeMap::from([(0, node(4 * GIB)), (1, node(GIB))]);
        // The same 5Gi, split the other way after a release: still consistent.
        let got: NumaNodeMap = BTreeMap::from([(0, node(3 * GIB)), (1, node(2 * GIB))]);
        assert!(machine_states_match(&got, &want));
        let short: NumaNodeMap = BTreeMap::from([(0, node(3 * GIB)), (1, node(GIB))]);
        assert!(!machine_states_match(&short, &want));
    }
}
