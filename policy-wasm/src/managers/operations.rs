//! `manager-operation`: one upstream manager function on explicit inputs,
//! answering with the function's result or the error it returned.
//!
//! Each operation mirrors the upstream function it names: `Start`
//! (`cpumanager/cpu_manager.go`, `memorymanager/memory_manager.go`),
//! the topology policy's `Merge` (`topologymanager/policy*.go`),
//! `takeByTopologyNUMAPacked` / `takeByTopologyNUMADistributed`
//! (`cpumanager/cpu_assignment.go`), `allocateCPUs`, `GetTopologyHints`,
//! `GetPodTopologyHints`, `Allocate`, `AllocatePod` and `RemoveContainer`
//! of both static policies, and the pod's requested resources. The
//! policies are built whatever the node configures, and without
//! `NewManager`'s reservation check: the functions themselves accept what
//! upstream's accept. Bad input is a field error; an error the upstream
//! function returns is the answer.

use super::Result;
use super::assignment::pod_assignment;
use super::config::{Config, decode_config};
use super::container_manager::{
    MemoryPolicy, cpu_policy, managers, memory_policy, start, topology_manager,
};
use super::decode::{decode_mask, invalid, parse_cpuset};
use super::errors::{ConfigError, cpu_error, memory_error, unexpected};
use super::hints::{decode_hint, decode_provider_hints, encode_hint, encode_provider_hints};
use super::machine::Machine;
use super::pod::{ManagedPod, managed_pod};
use super::state::{States, decode_state, encode_state};
use crate::cpu_manager::{
    CpuSortingStrategy, StaticPolicy, take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
};
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, PodLevelGates};
use crate::topology::{self as tm, BitMask, TopologyHint};
use crate::wit::{self, FieldError};

/// What a manager operation answers: the response, or the error the
/// upstream function returned.
pub type OperationResult = std::result::Result<wit::ManagerResponse, wit::ManagerError>;

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
    use crate::managers::test_support::{empty_state, node, topology};

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
}
