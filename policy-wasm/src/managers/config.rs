//! The resource-manager settings: decoding them into a `Config`
//! (`decode_config`), checking them as the kubelet does when it starts
//! ([`validate_config`]), and whether they place pods at all
//! ([`places_pods`]).
//!
//! Mirrors upstream `pkg/kubelet/apis/config/validation/validation.go`
//! (`ValidateKubeletConfiguration`) and `validation_reserved_memory.go`
//! (`validateReservedMemoryConfiguration`), `memorymanager/memory_manager.go`'s
//! `validateReservedMemory`, and the reservation arithmetic and checks of
//! `cpumanager/cpu_manager.go`'s `NewManager` (`static_reservation`).
//! Checks that need the machine run when the managers are built
//! (`container_manager`).

use std::collections::{BTreeMap, BTreeSet};

use super::Result;
use super::decode::{duplicate, field_error, non_negative_bytes, parse_cpuset};
use super::errors::ConfigError;
use crate::cpu_manager::{CpuManagerError, StaticPolicyOptions};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, SystemReservedMemory};
use crate::model::{self, truncate};
use crate::node::NodeConfig;
use crate::topology as tm;
use crate::wit::{self, ErrorReason, FieldError};

/// The manager configuration from the node settings.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub(super) gates: FeatureGates,
    /// The CFS period in effect (for `cpu.max` without a quota).
    pub(super) cfs_period_us: u64,
    pub(super) cpu_static: bool,
    pub(super) cpu_options: Vec<(String, String)>,
    pub(super) num_reserved_cpus: u64,
    /// Whether `kubeReserved`, `systemReserved` or `reservedSystemCPUs`
    /// names CPU at all (the kubelet's reservation map has a `cpu` key).
    pub(super) cpu_reservation_given: bool,
    pub(super) reserved_cpus: CpuSet,
    pub(super) reserved_cpus_given: bool,
    pub(super) memory_static: bool,
    pub(super) reserved_memory: SystemReservedMemory,
    pub(super) topology_policy: String,
    pub(super) topology_scope: String,
    pub(super) topology_options: BTreeMap<String, String>,
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

pub(super) fn decode_config(node: &wit::NodeSettings) -> Result<Config> {
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

/// `NewManager`'s check before it builds the static CPU policy: a zero
/// reservation would let exclusive allocations drain the shared pool, which
/// containers without exclusive CPUs still need. The policy functions behind
/// `manager-operation` accept zero, as upstream's `NewStaticPolicy` does.
pub(super) fn static_reservation(cfg: &Config) -> std::result::Result<(), ConfigError> {
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

#[cfg(test)]
mod tests {
    use crate::managers::test_support::{container, empty_state, list, node, pod, topology};
    use crate::managers::{admit, manager_operation};
    use crate::wit;

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
