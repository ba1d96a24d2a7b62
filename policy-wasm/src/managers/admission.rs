//! Admission and release (`admit_managed`, `release_container`, and
//! [`PreparedManagers`] for a node built once): one pod through the
//! topology manager's scope and its hint providers, as the kubelet's admit
//! handler runs it (see the `managers` module docs for the steps), and
//! `RemoveContainer` on every configured manager. The answer is an
//! [`Admission`]; the boundary encodes it (`admit` / `release` exports).
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/topology_manager.go`
//! (`Admit`), `topologymanager/scope*.go` (the `none`, `container` and
//! `pod` scopes: hints, merge, admit, then `Allocate` or, for KEP-5526
//! pod-level resources, `AllocatePod` on every provider), and the
//! `Allocate`, `AllocatePod` and `RemoveContainer` of
//! `cpumanager/cpu_manager.go` and `memorymanager/memory_manager.go`.
//! The rule of each decision and refusal is recorded where it happens,
//! since only there are the check's inputs at hand.

use std::collections::{BTreeMap, BTreeSet};

use super::Result;
use super::assignment::{PodAssignment, pod_assignment};
use super::config::Config;
use super::container_manager::{Managers, node_managers, start};
use super::errors::{
    ManagerError, ManagerErrorKind, cpu_error, cpu_refusal, manager_error, memory_error,
    memory_refusal,
};
use super::hints::{ProviderAnswer, ResourceManager, TopologyDecision};
use super::machine::Machine;
use super::pod::ManagedPod;
use super::state::ManagerState;
use crate::cpu_manager::hints::CpuHints;
use crate::memory_manager::{self as mm, PodLevelGates};
use crate::topology::{self as tm, BitMask, TopologyHint};

/// What the cgroup files of an admitted pod are computed from besides its
/// assignment (`crate::placement`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementInputs {
    /// The node's NUMA node ids (`cpuset.mems` without memory blocks).
    pub numa_nodes: BTreeSet<u32>,
    /// The CFS period in effect (`cpu.max` without a quota).
    pub cfs_period_us: u64,
}

/// The managers' answer to one pod: admitted or rejected, why, each
/// topology decision, what the pod got and the state to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The error that rejected the pod; `None` when admitted.
    pub rejection: Option<ManagerError>,
    /// Why, in one line with the inputs of the deciding check.
    pub rule: String,
    /// Each merge of the topology manager, in order.
    pub topology: Vec<TopologyDecision>,
    /// What the pod got (no containers and no pod-level values when rejected).
    pub assignment: PodAssignment,
    /// The new state (the started state, unchanged, when rejected).
    pub state: ManagerState,
    /// What the placement files are computed from; `None` when rejected
    /// (no files).
    pub placement: Option<PlacementInputs>,
}

/// One admission in progress.
struct Admitting<'a> {
    managers: &'a Managers,
    pod: &'a ManagedPod,
    states: ManagerState,
    decisions: Vec<TopologyDecision>,
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
    fn hints(&self, container: Option<&str>) -> Vec<(ResourceManager, CpuHints)> {
        let gates = &self.managers.gates;
        let mut answers = Vec::new();
        if let Some(policy) = &self.managers.cpu {
            let hints = match container {
                Some(name) => {
                    policy.get_topology_hints(&self.states.cpu, &self.pod.cpu, name, gates)
                }
                None => policy.get_pod_topology_hints(&self.states.cpu, &self.pod.cpu, gates),
            };
            answers.push((ResourceManager::Cpu, hints));
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
            answers.push((ResourceManager::Memory, hints));
        }
        answers
    }

    /// Ask, merge and record; `Err` when the policy refuses.
    fn decide(
        &mut self,
        container: Option<&str>,
        pod_level: bool,
    ) -> std::result::Result<TopologyHint, ManagerError> {
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
        self.decisions.push(TopologyDecision {
            container: container.map(str::to_string),
            providers: answers
                .into_iter()
                .map(|(manager, hints)| ProviderAnswer { manager, hints })
                .collect(),
            affinity: hint,
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
            ManagerErrorKind::TopologyAffinity,
            err.to_string(),
            "Admit",
        ))
    }

    /// `Allocate(pod, container)` on every provider.
    fn allocate_container(
        &mut self,
        name: &str,
        hint: TopologyHint,
    ) -> std::result::Result<(), ManagerError> {
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
    fn allocate_pod(&mut self, hint: TopologyHint) -> std::result::Result<(), ManagerError> {
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
    fn run(&mut self) -> std::result::Result<(), ManagerError> {
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

/// `admit` once everything is decoded: `Start` on `states`, then the scope.
pub(crate) fn admit_managed(
    cfg: &Config,
    machine: &Machine,
    managers: &Managers,
    managed: &ManagedPod,
    states: &ManagerState,
) -> Result<Admission> {
    let started = start(managers, states).map_err(|e| vec![e.field_error()])?;
    let mut admitting = Admitting {
        managers,
        pod: managed,
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
    let (rejection, states, pod_for_assignment) = match outcome {
        Ok(()) => (None, admitting.states, Some(managed)),
        Err(err) => (Some(err), started, None),
    };
    let mut assignment = pod_assignment(
        managers.cpu.as_ref(),
        &managers.gates,
        &states,
        managed,
        &admitting.affinities,
        machine,
    );
    if pod_for_assignment.is_none() {
        assignment.containers.clear();
        assignment.pod_cpuset = None;
        assignment.pod_shared_pool = None;
        assignment.pod_memory.clear();
        assignment.pod_cfs_quota_disabled = false;
    }
    let placement = rejection.is_none().then(|| PlacementInputs {
        numa_nodes: machine.numa_node_ids(),
        cfs_period_us: cfg.cfs_period_us,
    });
    Ok(Admission {
        rejection,
        rule,
        topology: admitting.decisions,
        assignment,
        state: states,
        placement,
    })
}

/// `RemoveContainer` of one container on every configured manager.
pub(crate) fn release_container(
    managers: &Managers,
    mut states: ManagerState,
    pod_uid: &str,
    container: &str,
) -> ManagerState {
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
    states
}

/// A node's resource managers built once from its configuration and
/// machine (the managers part of a prepared node): `admit` and `release`
/// on it need only the pod and the state.
pub struct PreparedManagers {
    cfg: Config,
    machine: Machine,
    managers: Managers,
}

impl PreparedManagers {
    /// Build the managers of `cfg` on `machine`, with the errors `admit`
    /// reports for them.
    pub(crate) fn new(cfg: Config, machine: Machine) -> Result<Self> {
        let managers = node_managers(&cfg, &machine)?;
        Ok(PreparedManagers {
            cfg,
            machine,
            managers,
        })
    }

    /// The feature gates the managers run with.
    pub fn gates(&self) -> &crate::features::FeatureGates {
        &self.cfg.gates
    }

    /// `admit` of `pod` with `state` on this node.
    pub fn admit(&self, pod: &ManagedPod, state: &ManagerState) -> Result<Admission> {
        admit_managed(&self.cfg, &self.machine, &self.managers, pod, state)
    }

    /// `release` of one container with `state` on this node.
    pub fn release(&self, state: ManagerState, pod_uid: &str, container: &str) -> ManagerState {
        release_container(&self.managers, state, pod_uid, container)
    }
}
