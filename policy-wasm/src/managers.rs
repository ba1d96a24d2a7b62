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
//!
//! One submodule per upstream concept, after kubelet's `pkg/kubelet/cm`:
//! - `machine`: the node topology as cAdvisor gives it to
//!   `container_manager_linux.go` ([`Machine`], [`MAX_NUMA_NODES`]);
//! - `config`: the manager settings, decoded and checked as
//!   `ValidateKubeletConfiguration` and the managers' `NewManager` check
//!   them ([`validate_config`], [`places_pods`]);
//! - `container_manager`: the node's managers, built (`NewManager` of the
//!   topology, CPU and memory managers) and started (`Start`);
//! - `state`: both managers' checkpoints across the WIT;
//! - `pod`: a pod as both managers see it;
//! - `assignment`: what the state says a pod got;
//! - `admission`: [`admit`] and [`release`], the topology manager's scopes
//!   (`topologymanager/scope*.go`) over the hint providers;
//! - `operations`: [`manager_operation`], one upstream manager function on
//!   explicit inputs ([`OperationResult`]);
//! - `errors`: configuration errors, the WIT error of each upstream
//!   admission error type, and the refusal lines;
//! - `hints`: topology hints across the WIT ([`encode_hint`]);
//! - `decode`: the field-error and decoding helpers they share.
//!
//! The submodules are private: every public item is re-exported here, so
//! `managers::X` stays the one path callers (`evaluate`, the guest) use.

mod admission;
mod assignment;
mod config;
mod container_manager;
mod decode;
mod errors;
mod hints;
mod machine;
mod operations;
mod pod;
mod state;

pub use self::admission::{admit, release};
pub use self::config::{places_pods, validate_config};
pub use self::hints::encode_hint;
pub use self::machine::{MAX_NUMA_NODES, Machine};
pub use self::operations::{OperationResult, manager_operation};

#[cfg(test)]
use self::container_manager::machine_states_match;
#[cfg(test)]
use self::state::{States, encode_state};
#[cfg(test)]
use crate::memory_manager::{self as mm, MemoryTable, NumaNodeMap, NumaNodeState};
#[cfg(test)]
use crate::wit;
#[cfg(test)]
use std::collections::{BTreeMap, BTreeSet};

/// What decoding WIT input gives: the value, or every field error found
/// (so one call reports all of them).
type Result<T> = std::result::Result<T, Vec<crate::wit::FieldError>>;

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
