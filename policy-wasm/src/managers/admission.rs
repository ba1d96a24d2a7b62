//! `admit` and `release`: one pod through the topology manager's scope
//! and its hint providers, as the kubelet's admit handler runs it (see the
//! `managers` module docs for the steps), and `RemoveContainer` on every
//! configured manager.
//!
//! Mirrors upstream `pkg/kubelet/cm/topologymanager/topology_manager.go`
//! (`Admit`), `topologymanager/scope*.go` (the `none`, `container` and
//! `pod` scopes: hints, merge, admit, then `Allocate` or, for KEP-5526
//! pod-level resources, `AllocatePod` on every provider), and the
//! `Allocate`, `AllocatePod` and `RemoveContainer` of
//! `cpumanager/cpu_manager.go` and `memorymanager/memory_manager.go`.
//! The rule of each decision and refusal is recorded where it happens,
//! since only there are the check's inputs at hand.

use std::collections::BTreeMap;

use super::Result;
use super::assignment::pod_assignment;
use super::config::{Config, decode_config};
use super::container_manager::{Managers, node_managers, start};
use super::errors::{cpu_error, cpu_refusal, manager_error, memory_error, memory_refusal};
use super::hints::{encode_hint, encode_provider_hints};
use super::machine::Machine;
use super::pod::{ManagedPod, managed_pod};
use super::state::{States, decode_state, encode_state};
use crate::cpu_manager::hints::CpuHints;
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, PodLevelGates};
use crate::topology::{self as tm, BitMask, TopologyHint};
use crate::wit::{self, FieldError};

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

/// The pod as the managers read it after the API server's defaulting (as
/// `admit` always takes it); its errors go to `errors`.
fn defaulted_managed_pod(
    pod: &wit::Pod,
    gates: &FeatureGates,
    errors: &mut Vec<FieldError>,
) -> Option<ManagedPod> {
    match crate::defaults::default_pod(pod, gates) {
        Ok(defaulted) => managed_pod(&defaulted.pod, gates)
            .map_err(|e| errors.extend(e))
            .ok(),
        Err(e) => {
            errors.extend(e);
            None
        }
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
    let managed = defaulted_managed_pod(pod, &gates, &mut errors);
    let (Some(inputs), Some(managed), true) = (inputs, managed, errors.is_empty()) else {
        return Err(errors);
    };
    let managers = node_managers(&inputs.cfg, &inputs.machine)?;
    admit_managed(
        &inputs.cfg,
        &inputs.machine,
        &managers,
        &managed,
        &inputs.states,
    )
}

/// `admit` once everything is decoded: `Start` on `states`, then the scope.
fn admit_managed(
    cfg: &Config,
    machine: &Machine,
    managers: &Managers,
    managed: &ManagedPod,
    states: &States,
) -> Result<wit::Admission> {
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
    let all_cpus = machine.all_cpus();
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
        let numa_nodes = machine.numa.keys().map(|id| *id as u32).collect();
        crate::placement::placement_files(&assignment, &numa_nodes, cfg.cfs_period_us)
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
    Ok(release_container(
        &managers,
        inputs.states,
        pod_uid,
        container,
    ))
}

/// `RemoveContainer` of one container on every configured manager.
fn release_container(
    managers: &Managers,
    mut states: States,
    pod_uid: &str,
    container: &str,
) -> wit::ManagerState {
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
    encode_state(&states)
}

/// A node's resource managers built once from its settings and topology
/// (the managers part of a prepared node): `admit` and `release` on it
/// decode only the pod and the state.
pub struct PreparedManagers {
    cfg: Config,
    machine: Machine,
    managers: Managers,
}

impl PreparedManagers {
    /// Decode the manager configuration and the topology and build the
    /// managers, with the errors `admit` reports for them.
    pub fn prepare(topology: &wit::NodeTopology, node: &wit::NodeSettings) -> Result<Self> {
        let mut errors = Vec::new();
        let cfg = decode_config(node).map_err(|e| errors.extend(e)).ok();
        let machine = Machine::decode(topology, &mut errors);
        let (Some(cfg), true) = (cfg, errors.is_empty()) else {
            return Err(errors);
        };
        let managers = node_managers(&cfg, &machine)?;
        Ok(PreparedManagers {
            cfg,
            machine,
            managers,
        })
    }

    /// [`admit`] of `pod` with `state` on this node.
    pub fn admit(&self, pod: &wit::Pod, state: &wit::ManagerState) -> Result<wit::Admission> {
        let mut errors = Vec::new();
        let states = decode_state(state, "state", &mut errors);
        let gates = self.cfg.gates;
        let managed = defaulted_managed_pod(pod, &gates, &mut errors);
        let (Some(managed), true) = (managed, errors.is_empty()) else {
            return Err(errors);
        };
        admit_managed(&self.cfg, &self.machine, &self.managers, &managed, &states)
    }

    /// [`release`] of one container with `state` on this node.
    pub fn release(
        &self,
        pod_uid: &str,
        container: &str,
        state: &wit::ManagerState,
    ) -> Result<wit::ManagerState> {
        let mut errors = Vec::new();
        let states = decode_state(state, "state", &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(release_container(
            &self.managers,
            states,
            pod_uid,
            container,
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::managers::test_support::{
        GIB, container, empty_state, guaranteed, node, pod, topology, with_options,
    };

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
}
