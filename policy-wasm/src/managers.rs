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

mod config;
mod container_manager;
mod decode;
mod errors;
mod hints;
mod machine;
mod pod;
mod state;

use std::collections::BTreeMap;

use self::config::{Config, decode_config};
pub use self::config::{places_pods, validate_config};
#[cfg(test)]
use self::container_manager::machine_states_match;
use self::container_manager::{
    Managers, MemoryPolicy, cpu_policy, managers, memory_policy, node_managers, start,
    topology_manager,
};
use self::decode::{decode_mask, invalid, parse_cpuset};
use self::errors::{
    ConfigError, cpu_error, cpu_refusal, manager_error, memory_error, memory_refusal, unexpected,
};
pub use self::hints::encode_hint;
use self::hints::{decode_hint, decode_provider_hints, encode_provider_hints};
pub use self::machine::{MAX_NUMA_NODES, Machine};
use self::pod::{ManagedPod, managed_pod};
use self::state::{States, decode_state, encode_blocks, encode_state};

use crate::cpu_manager::hints::CpuHints;
use crate::cpu_manager::{
    CpuSortingStrategy, ResourceIsolationLevel, StaticPolicy, take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, PodLevelGates};
#[cfg(test)]
use crate::memory_manager::{MemoryTable, NumaNodeMap, NumaNodeState};
use crate::topology::{self as tm, BitMask, TopologyHint};
use crate::wit::{self, FieldError};
#[cfg(test)]
use std::collections::BTreeSet;

type Result<T> = std::result::Result<T, Vec<FieldError>>;

/// What a manager operation answers: the response, or the error the
/// upstream function returned.
pub type OperationResult = std::result::Result<wit::ManagerResponse, wit::ManagerError>;

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
