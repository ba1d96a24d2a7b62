//! The resource-manager settings as the managers read them (`Config`,
//! decoded from the node settings by the boundary), their checks as the
//! kubelet runs them when it starts (`Config::validate`), and whether
//! they place pods at all (`Config::places_pods`).
//!
//! Mirrors upstream `pkg/kubelet/apis/config/validation/validation.go`
//! (`ValidateKubeletConfiguration`) and `validation_reserved_memory.go`
//! (`validateReservedMemoryConfiguration`), `memorymanager/memory_manager.go`'s
//! `validateReservedMemory`, and the reservation arithmetic and checks of
//! `cpumanager/cpu_manager.go`'s `NewManager` (`static_reservation`).
//! Checks that need the machine run when the managers are built
//! (`container_manager`).

use std::collections::{BTreeMap, BTreeSet};

use super::errors::{ConfigError, FieldError, FieldErrorType};
use crate::cpu_manager::{CpuManagerError, StaticPolicyOptions};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, SystemReservedMemory};
use crate::model::truncate;
use crate::node::NodeConfig;
use crate::quantity::Quantity;
use crate::topology as tm;

/// The manager configuration from the node settings (decoded by the
/// boundary, `crate::boundary`).
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The feature gates in effect.
    pub(crate) gates: FeatureGates,
    /// The CFS period in effect (for `cpu.max` without a quota).
    pub(crate) cfs_period_us: u64,
    /// `cpuManagerPolicy: static`.
    pub(crate) cpu_static: bool,
    /// `cpuManagerPolicyOptions`, name and value, in their order.
    pub(crate) cpu_options: Vec<(String, String)>,
    /// The number of reserved CPUs (`NewManager`'s reservation arithmetic).
    pub(crate) num_reserved_cpus: u64,
    /// Whether `kubeReserved`, `systemReserved` or `reservedSystemCPUs`
    /// names CPU at all (the kubelet's reservation map has a `cpu` key).
    pub(crate) cpu_reservation_given: bool,
    /// `reservedSystemCPUs` (empty when not given).
    pub(crate) reserved_cpus: CpuSet,
    /// Whether `reservedSystemCPUs` names any CPU.
    pub(crate) reserved_cpus_given: bool,
    /// `memoryManagerPolicy: Static`.
    pub(crate) memory_static: bool,
    /// `reservedMemory`, per NUMA node and memory resource.
    pub(crate) reserved_memory: SystemReservedMemory,
    /// The topology manager policy (`none` when unset, the kubelet default).
    pub(crate) topology_policy: tm::PolicyName,
    /// The topology manager scope (`container` when unset, the kubelet default).
    pub(crate) topology_scope: tm::Scope,
    /// `topologyManagerPolicyOptions`.
    pub(crate) topology_options: BTreeMap<String, String>,
}

/// A quantity's value in bytes, negative values as zero.
pub(crate) fn non_negative_bytes(q: &Quantity) -> u64 {
    u64::try_from(q.value().max(0)).unwrap_or(0)
}

impl Config {
    /// Whether the node's managers place pods: the static CPU policy or
    /// the Static memory policy.
    pub(crate) fn places_pods(&self) -> bool {
        self.cpu_static || self.memory_static
    }

    /// The checks of [`validate_config`](crate::boundary::managers::validate_config)
    /// on a decoded configuration (`node` is the node it was decoded with):
    /// CPU manager options and their gates, the static CPU reservation,
    /// topology manager options, and the Static memory policy's
    /// `reservedMemory` against Node Allocatable.
    pub(crate) fn validate(&self, node: &NodeConfig) -> Vec<FieldError> {
        let cfg = self;
        let mut errors = Vec::new();
        // CPU manager options: the none policy takes none; the static policy
        // parses them with their gates (`NewStaticPolicyOptions`).
        if !cfg.cpu_static && !cfg.cpu_options.is_empty() {
            let names: Vec<String> = cfg
                .cpu_options
                .iter()
                .map(|(n, v)| format!("{n}:{v}"))
                .collect();
            errors.push(FieldError::new(
                "cpuManagerPolicyOptions",
                FieldErrorType::Forbidden,
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
                errors.push(FieldError::new(
                    field,
                    FieldErrorType::Invalid,
                    err.to_string(),
                    None,
                ));
            }
            if let Err(err) = static_reservation(cfg) {
                errors.push(err.field_error());
            }
        }
        if cfg.topology_policy != tm::PolicyName::None
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
            errors.push(FieldError::new(
                field,
                FieldErrorType::Invalid,
                err.to_string(),
                None,
            ));
        }
        if cfg.memory_static {
            if let Err(err) = mm::check_system_reserved(&cfg.reserved_memory) {
                errors.push(FieldError::new(
                    "reservedMemory",
                    FieldErrorType::Required,
                    err.to_string(),
                    None,
                ));
            } else {
                errors.extend(reserved_memory_matches_allocatable(cfg, node));
            }
        }
        errors
    }
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
                FieldError::new(
                    "reservedMemory",
                    FieldErrorType::Invalid,
                    format!(
                        "the total amount {:?} of type {name:?} is not equal to the value {:?} determined by Node Allocatable feature",
                        Quantity::from_value(total as i64, crate::quantity::Format::BinarySI).to_canonical_string(),
                        Quantity::from_value(want as i64, crate::quantity::Format::BinarySI).to_canonical_string(),
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
pub(crate) fn static_reservation(cfg: &Config) -> std::result::Result<(), ConfigError> {
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
