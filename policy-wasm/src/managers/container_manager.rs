//! The managers of a node: built from the configuration and the machine
//! (each manager's `NewManager`), and started on a state (`Start`, which
//! checks the checkpoint against them or initialises a new one).
//!
//! Mirrors upstream `pkg/kubelet/cm/container_manager_linux.go`
//! (`NewContainerManager` builds the topology manager, then the CPU and
//! memory managers as its hint providers, in that order),
//! `topologymanager/topology_manager.go`'s `NewManager`,
//! `cpumanager/cpu_manager.go`'s `NewManager` and `Start` with
//! `cpumanager/policy_static.go`'s `NewStaticPolicy`, and
//! `memorymanager/memory_manager.go`'s `NewManager` and `Start` with
//! `memorymanager/policy_static.go`'s `NewPolicyStatic` (its `Start` /
//! `validateState` is `memory_manager::start`).

use super::Result;
use super::config::{Config, static_reservation};
use super::errors::ConfigError;
use super::machine::Machine;
use super::state::ManagerState;
use crate::cpu_manager::{CpuManagerError, StaticPolicy, StaticPolicyOptions};
use crate::cpu_topology::CpuTopology;
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, MemoryError, NumaNodeMap};
use crate::model::truncate;
use crate::topology as tm;

/// The CPU manager's checkpoint policy names.
const CPU_POLICY_STATIC: &str = "static";
const CPU_POLICY_NONE: &str = "none";
/// The memory manager's checkpoint policy names.
const MEMORY_POLICY_STATIC: &str = "Static";
const MEMORY_POLICY_NONE: &str = "None";

pub(crate) fn topology_manager(
    cfg: &Config,
    machine: &Machine,
) -> std::result::Result<tm::Manager, ConfigError> {
    use tm::TopologyError as E;
    tm::new_manager(
        cfg.topology_policy.as_str(),
        cfg.topology_scope.as_str(),
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

pub(super) fn cpu_policy(
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
        cfg.topology_policy.as_str(),
    )
    .map_err(|err| ConfigError::new("NewStaticPolicy", options_field(&err), err.to_string()))
}

/// The static memory policy: its default machine state.
#[derive(Clone, Debug)]
pub(super) struct MemoryPolicy {
    pub(super) default_machine: NumaNodeMap,
}

pub(super) fn memory_policy(
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

/// The managers of a node, as the kubelet's `NewManager`s build them for
/// `admit` and `release`; a configuration they refuse is a field error.
pub(crate) fn node_managers(cfg: &Config, machine: &Machine) -> Result<Managers> {
    static_reservation(cfg).map_err(|e| vec![e.field_error()])?;
    managers(cfg, machine)?.map_err(|e| vec![e.field_error()])
}

/// The configured managers.
pub(crate) struct Managers {
    pub(super) gates: FeatureGates,
    pub(super) topology: tm::Manager,
    pub(super) cpu: Option<StaticPolicy>,
    pub(super) memory: Option<MemoryPolicy>,
}

/// Build the configured managers in kubelet order (topology, CPU, memory).
/// The outer error is bad input (a static CPU policy without CPUs).
pub(super) fn managers(
    cfg: &Config,
    machine: &Machine,
) -> Result<std::result::Result<Managers, ConfigError>> {
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

/// `Start` of both managers: the checkpoint's policy names must match the
/// configured ones; the static CPU policy checks or initialises the CPU
/// state; the static memory policy checks the machine state against its
/// blocks or computes the default one.
pub(super) fn start(
    managers: &Managers,
    states: &ManagerState,
) -> std::result::Result<ManagerState, ConfigError> {
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
        mm::start(
            &policy.default_machine,
            &mut next.memory,
            managers.gates.pod_level_resource_managers,
        )
        .map_err(|e| ConfigError::new("Start", e.field, e.message))?;
    }
    Ok(next)
}
