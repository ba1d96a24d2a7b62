//! Manager operations: one upstream manager function on explicit inputs
//! ([`ManagerOperation`]), answering with the function's result
//! ([`OperationResponse`]) or the error it returned.
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
//! function returns is the answer. The boundary (`crate::boundary::testing`)
//! decodes the `testing` interface's `manager-request` into a
//! [`ManagerOperation`] and encodes the answer.

use super::Result;
use super::assignment::{PodAssignment, pod_assignment};
use super::config::Config;
use super::container_manager::{
    MemoryPolicy, cpu_policy, managers, memory_policy, start, topology_manager,
};
use super::errors::{ConfigError, ManagerError, cpu_error, memory_error, unexpected};
use super::hints::ResourceManager;
use super::machine::Machine;
use super::pod::ManagedPod;
use super::state::ManagerState;
use crate::cpu_manager::hints::CpuHints;
use crate::cpu_manager::{
    CpuSortingStrategy, StaticPolicy, take_by_topology_numa_distributed,
    take_by_topology_numa_packed,
};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, PodLevelGates};
use crate::topology::{self as tm, BitMask, TopologyHint};

/// Which `takeByTopology` algorithm picks the CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeAlgorithm {
    /// `takeByTopologyNUMAPacked`.
    NumaPacked,
    /// `takeByTopologyNUMADistributed`.
    NumaDistributed,
}

/// `takeByTopology*` on explicit inputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakeCpus {
    /// The algorithm.
    pub algorithm: TakeAlgorithm,
    /// The CPUs to pick from.
    pub available: CpuSet,
    /// How many CPUs to pick.
    pub num_cpus: usize,
    /// The CPU group size (`NUMADistributed` only).
    pub cpu_group_size: usize,
    /// The CPU sorting strategy.
    pub sorting: CpuSortingStrategy,
    /// `prefer-align-cpus-by-uncorecache` (`NUMAPacked` only).
    pub prefer_align_by_uncore_cache: bool,
}

/// One upstream manager function and its inputs, decoded.
#[derive(Clone, Debug)]
pub enum ManagerOperation {
    /// `Start` of both managers on a state.
    Start(ManagerState),
    /// The topology policy's `Merge` over the providers' hints.
    TopologyMerge(Vec<tm::ProviderHints>),
    /// `takeByTopologyNUMAPacked` / `takeByTopologyNUMADistributed`.
    TakeCpus(TakeCpus),
    /// The static CPU policy's `allocateCPUs`.
    AllocateCpus {
        /// The state.
        state: ManagerState,
        /// How many CPUs.
        num_cpus: usize,
        /// The NUMA affinity, if any.
        numa_affinity: Option<BitMask>,
        /// CPUs of finished init containers that may be reused.
        reusable: CpuSet,
    },
    /// `GetTopologyHints` (one container) or `GetPodTopologyHints` (`container: None`).
    TopologyHints {
        /// The provider.
        manager: ResourceManager,
        /// The state.
        state: ManagerState,
        /// The pod.
        pod: ManagedPod,
        /// The container, or `None` for the pod.
        container: Option<String>,
    },
    /// `Allocate` of one container.
    Allocate {
        /// The provider.
        manager: ResourceManager,
        /// The state.
        state: ManagerState,
        /// The pod.
        pod: ManagedPod,
        /// The container (one of the pod's).
        container: String,
        /// The topology manager's hint.
        hint: TopologyHint,
    },
    /// `AllocatePod` (KEP-5526 pod scope).
    AllocatePod(PodAllocation),
    /// `Allocate` of every container with the same hint.
    AllocateContainers(PodAllocation),
    /// `RemoveContainer`.
    RemoveContainer {
        /// The provider.
        manager: ResourceManager,
        /// The state.
        state: ManagerState,
        /// The pod UID.
        pod_uid: String,
        /// The container name.
        container: String,
    },
    /// The pod's requested resources as the provider counts them.
    PodRequested {
        /// The provider.
        manager: ResourceManager,
        /// The pod.
        pod: ManagedPod,
    },
}

/// The inputs of `AllocatePod` and of `Allocate` of every container.
#[derive(Clone, Debug)]
pub struct PodAllocation {
    /// The provider.
    pub manager: ResourceManager,
    /// The state.
    pub state: ManagerState,
    /// The pod.
    pub pod: ManagedPod,
    /// The topology manager's hint.
    pub hint: TopologyHint,
}

/// What an operation answers when the upstream function succeeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationResponse {
    /// The new state (`Start`, `RemoveContainer`).
    State(ManagerState),
    /// `Merge`'s best hint and whether the policy admits it.
    Merged {
        /// The merged hint.
        hint: TopologyHint,
        /// Whether the policy admits it.
        admit: bool,
    },
    /// The CPUs `takeByTopology*` picked.
    Cpus(CpuSet),
    /// The CPUs `allocateCPUs` picked and the new state.
    CpusAllocated {
        /// The CPUs.
        cpus: CpuSet,
        /// The new state.
        state: ManagerState,
    },
    /// A provider's hints.
    Hints(CpuHints),
    /// What the pod got and the new state (`Allocate`, `AllocatePod`).
    Allocated {
        /// What the state says the pod (or the container) got.
        assignment: PodAssignment,
        /// The new state.
        state: ManagerState,
    },
    /// The pod's requested resources, by name.
    Requested(Vec<(String, u64)>),
}

/// What a manager operation answers: the response, or the error the
/// upstream function returned.
pub type OperationOutcome = std::result::Result<OperationResponse, ManagerError>;

/// The configuration and machine every operation starts from.
pub struct Operations {
    cfg: Config,
    machine: Machine,
}

impl Operations {
    /// Operations on the managers `cfg` configures, on `machine`.
    pub(crate) fn new(cfg: Config, machine: Machine) -> Operations {
        Operations { cfg, machine }
    }

    /// The feature gates.
    pub fn gates(&self) -> &FeatureGates {
        &self.cfg.gates
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// Run one operation.
    pub fn run(&self, operation: ManagerOperation) -> Result<OperationOutcome> {
        match operation {
            ManagerOperation::Start(state) => self.start(&state),
            ManagerOperation::TopologyMerge(providers) => Ok(self.topology_merge(&providers)),
            ManagerOperation::TakeCpus(request) => self.take_cpus(&request),
            ManagerOperation::AllocateCpus {
                state,
                num_cpus,
                numa_affinity,
                reusable,
            } => self.allocate_cpus(state, num_cpus, numa_affinity, &reusable),
            ManagerOperation::TopologyHints {
                manager,
                state,
                pod,
                container,
            } => self.topology_hints(manager, state, &pod, container.as_deref()),
            ManagerOperation::Allocate {
                manager,
                state,
                pod,
                container,
                hint,
            } => self.allocate(manager, state, &pod, &container, hint),
            ManagerOperation::AllocatePod(request) => self.allocate_whole_pod(request, true),
            ManagerOperation::AllocateContainers(request) => {
                self.allocate_whole_pod(request, false)
            }
            ManagerOperation::RemoveContainer {
                manager,
                state,
                pod_uid,
                container,
            } => self.remove_container(manager, state, &pod_uid, &container),
            ManagerOperation::PodRequested { manager, pod } => self.pod_requested(manager, &pod),
        }
    }

    /// The static CPU policy, whatever the node configures.
    fn cpu_policy(&self) -> Result<std::result::Result<StaticPolicy, ManagerError>> {
        let topology = self.machine.cpu_topology().map_err(|e| vec![e])?;
        Ok(cpu_policy(&self.cfg, topology).map_err(ConfigError::manager_error))
    }

    /// The static memory policy, whatever the node configures.
    fn memory_policy(&self) -> std::result::Result<MemoryPolicy, ManagerError> {
        memory_policy(&self.cfg, &self.machine).map_err(ConfigError::manager_error)
    }

    /// A state whose empty memory machine state stands for the default one.
    fn with_machine(
        &self,
        mut states: ManagerState,
    ) -> std::result::Result<ManagerState, ManagerError> {
        if states.memory.machine_state.is_empty() {
            states.memory.machine_state = self.memory_policy()?.default_machine;
        }
        Ok(states)
    }

    fn allocation(
        &self,
        states: ManagerState,
        pod: &ManagedPod,
        hint: TopologyHint,
        only: Option<&str>,
    ) -> OperationResponse {
        let policy = self.cpu_policy().ok().and_then(|p| p.ok());
        let affinities = pod
            .containers
            .iter()
            .filter(|(name, _)| only.is_none_or(|o| o == name))
            .map(|(name, _)| (name.clone(), hint))
            .collect();
        OperationResponse::Allocated {
            assignment: pod_assignment(
                policy.as_ref(),
                self.gates(),
                &states,
                pod,
                &affinities,
                &self.machine,
            ),
            state: states,
        }
    }

    fn start(&self, states: &ManagerState) -> Result<OperationOutcome> {
        let managers = match managers(&self.cfg, &self.machine)? {
            Ok(managers) => managers,
            Err(err) => return Ok(Err(err.manager_error())),
        };
        Ok(start(&managers, states)
            .map(OperationResponse::State)
            .map_err(ConfigError::manager_error))
    }

    fn topology_merge(&self, hints: &[tm::ProviderHints]) -> OperationOutcome {
        let manager = match topology_manager(&self.cfg, &self.machine) {
            Ok(manager) => manager,
            Err(err) => return Err(err.manager_error()),
        };
        let (hint, admit) = manager.policy.merge(hints);
        Ok(OperationResponse::Merged { hint, admit })
    }

    fn take_cpus(&self, request: &TakeCpus) -> Result<OperationOutcome> {
        let topology = self.machine.cpu_topology().map_err(|e| vec![e])?;
        let (taken, function) = match request.algorithm {
            TakeAlgorithm::NumaPacked => (
                take_by_topology_numa_packed(
                    topology,
                    &request.available,
                    request.num_cpus,
                    request.sorting,
                    request.prefer_align_by_uncore_cache,
                ),
                "takeByTopologyNUMAPacked",
            ),
            TakeAlgorithm::NumaDistributed => (
                take_by_topology_numa_distributed(
                    topology,
                    &request.available,
                    request.num_cpus,
                    request.cpu_group_size,
                    request.sorting,
                ),
                "takeByTopologyNUMADistributed",
            ),
        };
        Ok(taken
            .map(OperationResponse::Cpus)
            .map_err(|err| unexpected(err.to_string(), function, false)))
    }

    fn allocate_cpus(
        &self,
        mut states: ManagerState,
        num_cpus: usize,
        mask: Option<BitMask>,
        reusable: &CpuSet,
    ) -> Result<OperationOutcome> {
        let policy = match self.cpu_policy()? {
            Ok(policy) => policy,
            Err(err) => return Ok(Err(err)),
        };
        Ok(
            match policy.allocate_cpus(&states.cpu, num_cpus, mask.map(BitMask::raw), reusable) {
                Ok((cpus, next)) => {
                    states.cpu = next;
                    Ok(OperationResponse::CpusAllocated {
                        cpus,
                        state: states,
                    })
                }
                Err(err) => Err(cpu_error(&err, "allocateCPUs", false)),
            },
        )
    }

    fn topology_hints(
        &self,
        manager: ResourceManager,
        states: ManagerState,
        pod: &ManagedPod,
        container: Option<&str>,
    ) -> Result<OperationOutcome> {
        let hints = match manager {
            ResourceManager::Cpu => {
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
            ResourceManager::Memory => {
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
        Ok(Ok(OperationResponse::Hints(hints)))
    }

    fn allocate(
        &self,
        manager: ResourceManager,
        mut states: ManagerState,
        pod: &ManagedPod,
        name: &str,
        hint: TopologyHint,
    ) -> Result<OperationOutcome> {
        match manager {
            ResourceManager::Cpu => {
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
            ResourceManager::Memory => {
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
        Ok(Ok(self.allocation(states, pod, hint, Some(name))))
    }

    /// `allocate-pod` (`per_pod`) or `allocate-containers`.
    fn allocate_whole_pod(
        &self,
        request: PodAllocation,
        per_pod: bool,
    ) -> Result<OperationOutcome> {
        let PodAllocation {
            manager,
            state: mut states,
            pod,
            hint,
        } = request;
        let gates = self.gates();
        match manager {
            ResourceManager::Cpu => {
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
            ResourceManager::Memory => {
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
        Ok(Ok(self.allocation(states, &pod, hint, None)))
    }

    fn remove_container(
        &self,
        manager: ResourceManager,
        mut states: ManagerState,
        pod_uid: &str,
        container: &str,
    ) -> Result<OperationOutcome> {
        match manager {
            ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                states.cpu = policy.remove_container(&states.cpu, pod_uid, container, self.gates());
            }
            ResourceManager::Memory => {
                states.memory = mm::remove_container(
                    PodLevelGates::from(self.gates()),
                    &states.memory,
                    pod_uid,
                    container,
                );
            }
        }
        Ok(Ok(OperationResponse::State(states)))
    }

    fn pod_requested(
        &self,
        manager: ResourceManager,
        pod: &ManagedPod,
    ) -> Result<OperationOutcome> {
        let requested: Vec<(String, u64)> = match manager {
            ResourceManager::Cpu => {
                let policy = match self.cpu_policy()? {
                    Ok(policy) => policy,
                    Err(err) => return Ok(Err(err)),
                };
                let cpus = policy.pod_guaranteed_cpus(&pod.cpu, self.gates());
                vec![("cpu".to_string(), u64::try_from(cpus).unwrap_or(u64::MAX))]
            }
            ResourceManager::Memory => {
                mm::get_pod_requested_resources(PodLevelGates::from(self.gates()), &pod.memory)
                    .into_iter()
                    .collect()
            }
        };
        Ok(Ok(OperationResponse::Requested(requested)))
    }
}
