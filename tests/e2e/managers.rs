//! The KEP-5526 resource managers through the component, on the
//! topoDualSocketHT machine read from `fixtures/sysfs/topoDualSocketHT`
//! (12 CPUs, cpu n on core n % 6, socket and NUMA node n % 2; about 64Gi and
//! 256 2Mi huge pages per NUMA node): the KEP's pod-scope examples 1-3 and
//! container-scope examples 1-2, both allocation tables, every
//! `kep5526-allocation.json` case through `admit`, errors with field paths,
//! and properties over generated pods: exclusive CPU sets of one node never
//! overlap across pods, the shared pool of an admitted pod is never empty,
//! and admitting then releasing every container gives back the exact start
//! state.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use podpolicy::bindings::{
    Admission, ContainerAssignment, ContainerKind, CpuIsolation, FeatureGate, KubeletName as _,
    ManagerErrorKind, ManagerState, NodeSettings, NodeTopology, NumaReservedMemory, Pod,
    PolicyOption, ResourceQuantity, TopologyManagerPolicy, TopologyManagerScope,
};
use podpolicy::pod_input::pod_from_json;
use podpolicy::sysfs::read_topology;
use podpolicy::topology_input::node_topology;
use podpolicy::{empty_manager_state, empty_node};
use policy_wasm::cpuset::CpuSet;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::util::{policy, vectors_dir};

const GIB: u64 = 1 << 30;

fn topology() -> NodeTopology {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sysfs/topoDualSocketHT");
    let sysfs = read_topology(&root).expect("the topoDualSocketHT fixture reads");
    node_topology(&sysfs)
}

fn quantity(name: &str, quantity: &str) -> ResourceQuantity {
    ResourceQuantity {
        name: name.into(),
        quantity: quantity.into(),
    }
}

/// Static CPU manager with CPU 0 reserved (`systemReserved: cpu: 1`), Static
/// memory manager with 1Gi reserved per NUMA node, the given topology
/// manager policy and scope, and both KEP-5526 gates.
fn settings(topology_policy: &str, scope: &str) -> NodeSettings {
    NodeSettings {
        system_reserved: vec![quantity("cpu", "1")],
        cpu_manager_policy: Some(podpolicy::bindings::CpuManagerPolicy::Static),
        memory_manager_policy: Some(podpolicy::bindings::MemoryManagerPolicy::Static),
        reserved_memory: (0..2)
            .map(|numa_node| NumaReservedMemory {
                numa_node,
                limits: vec![quantity("memory", "1Gi")],
            })
            .collect(),
        topology_manager_policy: Some(
            TopologyManagerPolicy::from_kubelet_name(topology_policy).expect("a topology policy"),
        ),
        topology_manager_scope: Some(
            TopologyManagerScope::from_kubelet_name(scope).expect("a topology scope"),
        ),
        feature_gates: ["PodLevelResources", "PodLevelResourceManagers"]
            .iter()
            .map(|name| FeatureGate {
                name: (*name).into(),
                enabled: true,
            })
            .collect(),
        ..empty_node()
    }
}

fn resources(cpu: &str, memory: &str) -> Value {
    json!({"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}})
}

/// A pod; `pod_level` is (cpu, memory); each container is (name, Some((cpu, memory))) or (name, None).
fn pod(
    uid: &str,
    pod_level: Option<(&str, &str)>,
    containers: &[(&str, Option<(&str, &str)>)],
) -> Pod {
    let containers: Vec<Value> = containers
        .iter()
        .map(|(name, r)| match r {
            Some((cpu, memory)) => json!({"name": name, "resources": resources(cpu, memory)}),
            None => json!({"name": name}),
        })
        .collect();
    let mut spec = json!({"containers": containers});
    if let Some((cpu, memory)) = pod_level {
        spec["resources"] = resources(cpu, memory);
    }
    pod_from_json(&json!({"metadata": {"name": uid, "uid": uid}, "spec": spec})).expect("pod")
}

fn started(node: &NodeSettings) -> ManagerState {
    policy()
        .start_managers(&topology(), &empty_manager_state(), node)
        .expect("call")
        .expect("valid input")
        .expect("the managers start")
}

#[track_caller]
fn admit(pod: &Pod, state: &ManagerState, node: &NodeSettings) -> Admission {
    policy()
        .admit(pod, &topology(), state, node)
        .expect("call")
        .unwrap_or_else(|errors| panic!("admit refused the input: {errors:?}"))
}

#[track_caller]
fn release_all(
    admission: &Admission,
    uid: &str,
    mut state: ManagerState,
    node: &NodeSettings,
) -> ManagerState {
    for c in &admission.assignment.containers {
        state = policy()
            .release(uid, &c.name, &topology(), &state, node)
            .expect("call")
            .expect("release");
    }
    state
}

fn set(text: &Option<String>) -> CpuSet {
    text.as_deref()
        .map(|t| CpuSet::parse(t).expect("canonical cpuset"))
        .unwrap_or_default()
}

fn container<'a>(admission: &'a Admission, name: &str) -> &'a ContainerAssignment {
    admission
        .assignment
        .containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The NUMA nodes of a CPU set on topoDualSocketHT (NUMA node = cpu % 2).
fn numa_of(cpus: &CpuSet) -> BTreeSet<u32> {
    cpus.iter().map(|cpu| cpu % 2).collect()
}

fn memory_total(c: &ContainerAssignment) -> u64 {
    c.memory.iter().map(|b| b.size).sum()
}

// ---------------------------------------------------------------- pod scope

#[test]
fn pod_scope_example_1_shared_pool_only() {
    let node = settings("best-effort", "pod");
    let start = started(&node);
    let p = pod(
        "pod-scope-shared",
        Some(("4", "4Gi")),
        &[
            ("container-1", None),
            ("container-2", None),
            ("container-3", None),
        ],
    );
    let a = admit(&p, &start, &node);
    assert_eq!(a.rejection, None);
    let pod_set = set(&a.assignment.pod_cpuset);
    assert_eq!(pod_set.len(), 4);
    assert_eq!(
        numa_of(&pod_set).len(),
        1,
        "one NUMA-aligned pool: {pod_set}"
    );
    assert_eq!(set(&a.assignment.pod_shared_pool), pod_set);
    for c in &a.assignment.containers {
        assert_eq!(c.cpu_isolation, CpuIsolation::Pod, "{}", c.name);
        assert_eq!(set(&c.cpuset), pod_set, "{} runs in the pod's pool", c.name);
        assert!(!c.cfs_quota_disabled);
        assert_eq!(memory_total(c), 4 * GIB, "{} shares the pod's 4Gi", c.name);
    }
    assert!(!a.assignment.pod_cfs_quota_disabled);
    let pod_memory: u64 = a.assignment.pod_memory.iter().map(|b| b.size).sum();
    assert_eq!(pod_memory, 4 * GIB);
    let numa = *numa_of(&pod_set).iter().next().unwrap();
    assert!(
        a.assignment
            .pod_memory
            .iter()
            .all(|b| b.numa_affinity == vec![numa])
    );
    // One pod-scope decision, preferring one NUMA node.
    assert_eq!(a.topology.len(), 1);
    assert_eq!(a.topology[0].container, None);
    assert_eq!(a.topology[0].affinity.numa_affinity, Some(vec![numa]));
    assert!(a.topology[0].affinity.preferred);
    assert_eq!(
        release_all(&a, "pod-scope-shared", a.state.clone(), &node),
        start
    );
}

#[test]
fn pod_scope_example_2_mixed() {
    let node = settings("best-effort", "pod");
    let start = started(&node);
    let p = pod(
        "pod-scope-mixed",
        Some(("4", "4Gi")),
        &[
            ("container-1", Some(("2", "2Gi"))),
            ("container-2", None),
            ("container-3", None),
        ],
    );
    let a = admit(&p, &start, &node);
    assert_eq!(a.rejection, None);
    let pod_set = set(&a.assignment.pod_cpuset);
    let exclusive = container(&a, "container-1");
    assert_eq!(exclusive.cpu_isolation, CpuIsolation::Container);
    assert!(exclusive.cfs_quota_disabled);
    assert_eq!(set(&exclusive.cpuset).len(), 2);
    assert_eq!(memory_total(exclusive), 2 * GIB);
    let pool = set(&a.assignment.pod_shared_pool);
    assert_eq!(pool.len(), 2);
    assert!(pool.is_disjoint(&set(&exclusive.cpuset)));
    assert_eq!(pool.union(&set(&exclusive.cpuset)), pod_set);
    for name in ["container-2", "container-3"] {
        let c = container(&a, name);
        assert_eq!(c.cpu_isolation, CpuIsolation::Pod);
        assert_eq!(set(&c.cpuset), pool);
        assert!(!c.cfs_quota_disabled);
        assert_eq!(
            memory_total(c),
            2 * GIB,
            "the memory pool left by container-1"
        );
    }
    assert!(
        a.assignment.pod_cfs_quota_disabled,
        "a container holds exclusive CPUs"
    );
    assert_eq!(
        release_all(&a, "pod-scope-mixed", a.state.clone(), &node),
        start
    );
}

#[test]
fn pod_scope_example_3_empty_shared_pool_is_rejected() {
    let p = pod(
        "pod-scope-admission-failure",
        Some(("5", "5Gi")),
        &[
            ("container-1", Some(("3", "3Gi"))),
            ("container-2", Some(("2", "2Gi"))),
            ("container-3", None),
        ],
    );
    // best-effort admits the unsatisfiable hint; AllocatePod refuses.
    let node = settings("best-effort", "pod");
    let start = started(&node);
    let a = admit(&p, &start, &node);
    let rejection = a.rejection.as_ref().expect("rejected");
    assert_eq!(rejection.kind, ManagerErrorKind::EmptyPodSharedPool);
    assert_eq!(rejection.reason(), "EmptyPodSharedPoolError");
    assert_eq!(
        rejection.message,
        "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers"
    );
    assert_eq!(a.state, start, "a rejected pod leaves the state untouched");
    assert!(a.assignment.containers.is_empty());
    // restricted refuses the empty hint list already.
    let node = super::managers::settings("restricted", "pod");
    let a = admit(&p, &started(&node), &node);
    let rejection = a.rejection.expect("rejected");
    assert_eq!(rejection.kind, ManagerErrorKind::TopologyAffinity);
    assert_eq!(rejection.reason(), "TopologyAffinityError");
    assert_eq!(
        rejection.message,
        "pod with pod-level resources failed admission under pod-scope topology manager"
    );
}

// ---------------------------------------------------------- container scope

#[test]
fn container_scope_example_1_exclusive_and_node_shared() {
    let node = settings("best-effort", "container");
    let start = started(&node);
    let p = pod(
        "container-scope-mixed",
        Some(("4", "4Gi")),
        &[
            ("container-1", Some(("2", "2Gi"))),
            ("container-2", None),
            ("container-3", None),
        ],
    );
    let a = admit(&p, &start, &node);
    assert_eq!(a.rejection, None);
    assert_eq!(a.topology.len(), 3, "one decision per container");
    let c1 = container(&a, "container-1");
    assert_eq!(c1.cpu_isolation, CpuIsolation::Container);
    let cpus = set(&c1.cpuset);
    assert_eq!(cpus.len(), 2);
    assert_eq!(numa_of(&cpus).len(), 1);
    assert_eq!(memory_total(c1), 2 * GIB);
    for name in ["container-2", "container-3"] {
        let c = container(&a, name);
        assert_eq!(c.cpu_isolation, CpuIsolation::Host);
        assert_eq!(c.cpuset, None, "{name} runs in the node's shared pool");
        assert!(c.memory.is_empty());
    }
    assert_eq!(
        a.assignment.pod_cpuset, None,
        "pod-level resources are ignored"
    );
    assert!(a.assignment.pod_memory.is_empty());
    let shared = CpuSet::parse(&a.assignment.node_shared_pool).unwrap();
    assert!(shared.is_disjoint(&cpus));
    assert_eq!(
        release_all(&a, "container-scope-mixed", a.state.clone(), &node),
        start
    );
}

#[test]
fn container_scope_example_2_pod_level_only() {
    let node = settings("best-effort", "container");
    let start = started(&node);
    let p = pod(
        "container-scope-pod-only",
        Some(("4", "4Gi")),
        &[
            ("container-1", None),
            ("container-2", None),
            ("container-3", None),
        ],
    );
    let a = admit(&p, &start, &node);
    assert_eq!(a.rejection, None);
    assert!(
        a.assignment
            .containers
            .iter()
            .all(|c| c.cpu_isolation == CpuIsolation::Host
                && c.cpuset.is_none()
                && c.memory.is_empty())
    );
    assert_eq!(a.state, start, "nothing is allocated");
}

// -------------------------------------------------------- allocation tables

/// One KEP table row: pod-level CPUs, container CPUs (`0` = no resources).
struct Row {
    name: &'static str,
    pod_cpus: Option<u32>,
    containers: [u32; 3],
}

const ROWS: [Row; 5] = [
    Row {
        name: "current behavior",
        pod_cpus: None,
        containers: [3, 1, 1],
    },
    Row {
        name: "all Guaranteed",
        pod_cpus: Some(5),
        containers: [3, 1, 1],
    },
    Row {
        name: "some Guaranteed",
        pod_cpus: Some(5),
        containers: [3, 0, 0],
    },
    Row {
        name: "no Guaranteed",
        pod_cpus: Some(5),
        containers: [0, 0, 0],
    },
    Row {
        name: "admission failure",
        pod_cpus: Some(5),
        containers: [3, 2, 0],
    },
];

fn row_pod(row: &Row) -> Pod {
    let cpus: Vec<String> = row.containers.iter().map(u32::to_string).collect();
    let memory: Vec<String> = row.containers.iter().map(|c| format!("{c}Gi")).collect();
    let pod_level = row.pod_cpus.map(|c| (c.to_string(), format!("{c}Gi")));
    let containers: Vec<(String, Option<(&str, &str)>)> = (0..3)
        .map(|i| {
            let r = (row.containers[i] > 0).then(|| (cpus[i].as_str(), memory[i].as_str()));
            (format!("container-{}", i + 1), r)
        })
        .collect();
    let refs: Vec<(&str, Option<(&str, &str)>)> =
        containers.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    pod(
        "table",
        pod_level.as_ref().map(|(c, m)| (c.as_str(), m.as_str())),
        &refs,
    )
}

#[test]
fn pod_scope_allocation_table() {
    let node = settings("best-effort", "pod");
    let start = started(&node);
    for row in &ROWS {
        let a = admit(&row_pod(row), &start, &node);
        let what = row.name;
        if row.name == "admission failure" {
            let rejection = a.rejection.expect("rejected");
            assert_eq!(rejection.reason(), "EmptyPodSharedPoolError", "{what}");
            continue;
        }
        assert_eq!(a.rejection, None, "{what}");
        // Hint generation: {NUMA node 0} for the whole pod.
        assert_eq!(a.topology.len(), 1, "{what}");
        assert_eq!(
            a.topology[0].affinity.numa_affinity,
            Some(vec![0]),
            "{what}"
        );
        let sets: Vec<CpuSet> = (1..=3)
            .map(|i| set(&container(&a, &format!("container-{i}")).cpuset))
            .collect();
        let all = sets.iter().fold(CpuSet::new(), |all, s| all.union(s));
        assert_eq!(all.len(), 5, "{what}: 5 CPUs in all");
        assert_eq!(numa_of(&all), BTreeSet::from([0]), "{what}: on NUMA node 0");
        let sizes: Vec<usize> = sets.iter().map(CpuSet::len).collect();
        match row.name {
            "current behavior" | "all Guaranteed" => {
                assert_eq!(sizes, vec![3, 1, 1], "{what}");
                assert!(sets[0].is_disjoint(&sets[1]) && sets[1].is_disjoint(&sets[2]));
                assert!(
                    a.assignment
                        .containers
                        .iter()
                        .all(|c| c.cpu_isolation == CpuIsolation::Container)
                );
            }
            "some Guaranteed" => {
                assert_eq!(sizes, vec![3, 2, 2], "{what}");
                assert_eq!(
                    sets[1], sets[2],
                    "{what}: containers 2 and 3 share {{4, 5}}"
                );
                assert!(sets[0].is_disjoint(&sets[1]));
            }
            _ => {
                assert_eq!(sizes, vec![5, 5, 5], "{what}");
                assert!(
                    sets.iter().all(|s| *s == sets[0]),
                    "{what}: all share the 5 CPUs"
                );
            }
        }
        assert_eq!(
            release_all(&a, "table", a.state.clone(), &node),
            start,
            "{what}"
        );
    }
}

#[test]
fn container_scope_allocation_table() {
    let node = settings("best-effort", "container");
    let start = started(&node);
    // The container-scope table has no rejected row: the admission failure
    // spec is admitted (only pod scope rejects an empty pod shared pool).
    for row in &ROWS {
        let a = admit(&row_pod(row), &start, &node);
        let what = row.name;
        assert_eq!(a.rejection, None, "{what}");
        assert_eq!(a.topology.len(), 3, "{what}: one decision per container");
        for (i, &cpus) in row.containers.iter().enumerate() {
            let name = format!("container-{}", i + 1);
            let c = container(&a, &name);
            let decision = &a.topology[i];
            if cpus == 0 {
                assert_eq!(c.cpu_isolation, CpuIsolation::Host, "{what} {name}");
                assert_eq!(c.cpuset, None, "{what} {name}: no exclusive allocation");
                // "No NUMA preference": no CPU hint; the merge keeps the default.
                assert_eq!(decision.providers[0].hints, None, "{what} {name}");
            } else {
                assert_eq!(c.cpu_isolation, CpuIsolation::Container, "{what} {name}");
                let got = set(&c.cpuset);
                assert_eq!(got.len() as u32, cpus, "{what} {name}");
                // Hint generation: {NUMA node 0} while node 0 has room.
                assert_eq!(numa_of(&got), BTreeSet::from([0]), "{what} {name}");
                assert_eq!(
                    decision.affinity.numa_affinity,
                    Some(vec![0]),
                    "{what} {name}"
                );
            }
        }
        assert_eq!(a.assignment.pod_cpuset, None, "{what}");
        assert_eq!(
            release_all(&a, "table", a.state.clone(), &node),
            start,
            "{what}"
        );
    }
}

// ------------------------------------- kep5526-allocation.json through admit

fn vector_side(value: &Value, kind: &str) -> Value {
    let mut map = serde_json::Map::new();
    for resource in ["cpu", "memory"] {
        if let Some(q) = value[format!("{resource}_{kind}")].as_str() {
            map.insert(resource.into(), json!(q));
        }
    }
    Value::Object(map)
}

fn vector_resources(value: &Value) -> Option<Value> {
    let requests = vector_side(value, "request");
    let limits = vector_side(value, "limit");
    let empty = |v: &Value| v.as_object().is_some_and(serde_json::Map::is_empty);
    (!empty(&requests) || !empty(&limits)).then(|| json!({"requests": requests, "limits": limits}))
}

fn vector_pod(value: &Value) -> Pod {
    let list = |key: &str| -> Vec<Value> {
        value[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut out = json!({"name": c["name"]});
                if let Some(r) = vector_resources(c) {
                    out["resources"] = r;
                }
                if let Some(p) = c.get("restart_policy").and_then(Value::as_str) {
                    out["restartPolicy"] = json!(p);
                }
                out
            })
            .collect()
    };
    let mut spec =
        json!({"containers": list("containers"), "initContainers": list("init_containers")});
    if let Some(r) = vector_resources(&value["pod_level_resources"]) {
        spec["resources"] = r;
    }
    let uid = value["uid"].as_str().expect("uid");
    pod_from_json(&json!({"metadata": {"name": uid, "uid": uid}, "spec": spec})).expect("pod")
}

fn cpu_entries(state: &ManagerState) -> BTreeMap<String, BTreeMap<String, CpuSet>> {
    state
        .cpu
        .entries
        .iter()
        .map(|p| {
            let containers = p
                .containers
                .iter()
                .map(|c| (c.container.clone(), CpuSet::parse(&c.cpuset).unwrap()))
                .collect();
            (p.pod_uid.clone(), containers)
        })
        .collect()
}

/// Every case of the KEP-derived allocation vectors through `admit` on the
/// fixture machine (pod scope for `AllocatePod`, container scope for
/// `AllocateContainerScope`, best-effort topology policy): the exact CPU ids
/// the vectors give (taken without a NUMA hint) are also what the NUMA-aware
/// admission picks on this machine, since NUMA node 0 is where the
/// hint-less packing lands too.
#[test]
fn kep5526_allocation_vectors_through_admit() {
    let path = vectors_dir().join("kep-derived/kep5526-allocation.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut failures = Vec::new();
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let input = &case["input"];
        let expected = &case["expected"];
        let scope = if input["function"] == "AllocatePod" {
            "pod"
        } else {
            "container"
        };
        let mut node = settings("best-effort", scope);
        node.feature_gates = input["feature_gates"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| FeatureGate {
                name: k.clone(),
                enabled: v.as_bool().unwrap(),
            })
            .collect();
        let start = started(&node);
        let a = admit(&vector_pod(&input["pod"]), &start, &node);
        let want_error = expected["error"].as_str();
        let got_error = a.rejection.as_ref().map(|r| r.reason());
        let want_entries: BTreeMap<String, BTreeMap<String, CpuSet>> = expected["assignments"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(uid, cs)| {
                let cs = cs
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(c, s)| (c.clone(), CpuSet::parse(s.as_str().unwrap()).unwrap()))
                    .collect();
                (uid.clone(), cs)
            })
            .collect();
        let want_default = CpuSet::parse(expected["default_cpuset"].as_str().unwrap()).unwrap();
        let got_default = CpuSet::parse(&a.state.cpu.default_cpuset).unwrap();
        if got_error != want_error
            || cpu_entries(&a.state) != want_entries
            || got_default != want_default
        {
            failures.push(format!(
                "{name}: got error {got_error:?}, entries {:?}, default {got_default}; want {want_error:?}, {want_entries:?}, {want_default}",
                cpu_entries(&a.state)
            ));
        }
        if a.rejection.is_none() {
            let uid = input["pod"]["uid"].as_str().unwrap();
            if release_all(&a, uid, a.state.clone(), &node) != start {
                failures.push(format!(
                    "{name}: releasing every container does not restore the state"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ------------------------------------------------------------------ errors

#[test]
fn bad_inputs_are_field_errors() {
    let node = settings("best-effort", "pod");
    let mut state = empty_manager_state();
    state.cpu.default_cpuset = "0-x".into();
    let mut topo = topology();
    topo.cpus[3].numa_node = 7;
    let p = pod("", None, &[("c", Some(("1", "1Gi")))]);
    let errors = policy()
        .admit(&p, &topo, &state, &node)
        .expect("call")
        .unwrap_err();
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    for want in [
        "state.cpu.defaultCpuset",
        "topology.cpus[3].numaNode",
        "uid",
    ] {
        assert!(fields.contains(&want), "no error at {want}: {fields:?}");
    }
    // Configuration errors name the node field, with upstream's text.
    let mut bad = node.clone();
    bad.topology_manager_policy_options = vec![PolicyOption {
        name: "bogus".into(),
        value: "1".into(),
    }];
    let ok_pod = pod("p", None, &[("c", Some(("1", "1Gi")))]);
    let errors = policy()
        .admit(&ok_pod, &topology(), &empty_manager_state(), &bad)
        .expect("call")
        .unwrap_err();
    assert_eq!(errors[0].field, "topologyManagerPolicyOptions[bogus]");
    assert_eq!(
        errors[0].message,
        "unknown Topology Manager Policy option: \"bogus\""
    );
    // A checkpoint written under another CPU policy does not start.
    let mut other = empty_manager_state();
    other.cpu.policy_name = "none".into();
    let errors = policy()
        .admit(&ok_pod, &topology(), &other, &node)
        .expect("call")
        .unwrap_err();
    assert_eq!(errors[0].field, "state.cpu.policyName");
    assert_eq!(
        errors[0].message,
        "configured policy \"static\" differs from state checkpoint policy \"none\""
    );
    // A memory machine state that its blocks do not explain does not start.
    let mut tampered = started(&node);
    let table = tampered.memory.machine_state[0]
        .memory_map
        .iter_mut()
        .find(|t| t.resource_name == "memory")
        .expect("a memory table");
    table.free -= 1;
    let errors = policy()
        .admit(&ok_pod, &topology(), &tampered, &node)
        .expect("call")
        .unwrap_err();
    assert_eq!(errors[0].field, "state.memory.machineState");
}

// -------------------------------------------------------------- properties

/// One generated container: none / Guaranteed integral / Guaranteed
/// non-integral / Burstable, with a CPU count.
#[derive(Clone, Debug)]
struct GenContainer {
    kind: u8,
    cpus: u32,
    sidecar: bool,
}

#[derive(Clone, Debug)]
struct GenPod {
    pod_cpus: Option<u32>,
    init: Vec<GenContainer>,
    apps: Vec<GenContainer>,
}

fn gen_container() -> impl Strategy<Value = GenContainer> {
    let kind = prop_oneof![3 => Just(0u8), 4 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)];
    (kind, 1u32..=3, any::<bool>()).prop_map(|(kind, cpus, sidecar)| GenContainer {
        kind,
        cpus,
        sidecar,
    })
}

fn gen_pod() -> impl Strategy<Value = GenPod> {
    (
        proptest::option::weighted(0.75, 1u32..=6),
        proptest::collection::vec(gen_container(), 0..=2),
        proptest::collection::vec(gen_container(), 1..=3),
    )
        .prop_map(|(pod_cpus, init, apps)| GenPod {
            pod_cpus,
            init,
            apps,
        })
}

fn gen_json(c: &GenContainer, name: String, init: bool) -> Value {
    let mut out = json!({"name": name});
    let r = match c.kind {
        1 => Some(resources(
            &c.cpus.to_string(),
            &format!("{}Mi", 256 * c.cpus),
        )),
        2 => Some(resources(&format!("{}m", c.cpus * 1000 - 500), "256Mi")),
        3 => Some(
            json!({"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}),
        ),
        _ => None,
    };
    if let Some(r) = r {
        out["resources"] = r;
    }
    if init && c.sidecar {
        out["restartPolicy"] = json!("Always");
    }
    out
}

fn gen_to_pod(g: &GenPod, uid: &str) -> Pod {
    let init: Vec<Value> = g
        .init
        .iter()
        .enumerate()
        .map(|(i, c)| gen_json(c, format!("init-{i}"), true))
        .collect();
    let apps: Vec<Value> = g
        .apps
        .iter()
        .enumerate()
        .map(|(i, c)| gen_json(c, format!("app-{i}"), false))
        .collect();
    let mut spec = json!({"containers": apps, "initContainers": init});
    if let Some(cpus) = g.pod_cpus {
        spec["resources"] = resources(&cpus.to_string(), &format!("{}Gi", cpus));
    }
    pod_from_json(&json!({"metadata": {"name": uid, "uid": uid}, "spec": spec})).expect("pod")
}

/// Per pod: every CPU it holds (pod-level set and container sets).
fn held_cpus(state: &ManagerState) -> BTreeMap<String, CpuSet> {
    let mut held: BTreeMap<String, CpuSet> = BTreeMap::new();
    for (uid, containers) in cpu_entries(state) {
        let all = containers.values().fold(CpuSet::new(), |a, s| a.union(s));
        let entry = held.entry(uid).or_default();
        *entry = entry.union(&all);
    }
    for p in &state.cpu.pod_entries {
        let entry = held.entry(p.pod_uid.clone()).or_default();
        *entry = entry.union(&CpuSet::parse(&p.cpuset).unwrap());
    }
    held
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn admitted_pods_never_share_exclusive_cpus_and_release_restores_the_state(
        pods in proptest::collection::vec(gen_pod(), 3..=7),
        scope in prop_oneof![Just("pod"), Just("container")],
        topology_policy in prop_oneof![Just("none"), Just("best-effort"), Just("restricted"), Just("single-numa-node")],
    ) {
        let node = settings(topology_policy, scope);
        let start = started(&node);
        let mut state = start.clone();
        let mut admitted: Vec<(String, Admission)> = Vec::new();
        for (i, g) in pods.iter().enumerate() {
            let uid = format!("pod-{i}");
            let p = gen_to_pod(g, &uid);
            // Only pods the API server accepts reach a kubelet.
            if !policy().validate_pod(&p, &node).expect("call").is_empty() {
                continue;
            }
            let a = admit(&p, &state, &node);
            if a.rejection.is_some() {
                prop_assert_eq!(&a.state, &state, "a rejection leaves the state untouched");
                continue;
            }
            // The shared pool of an admitted pod is never empty.
            let shared = CpuSet::parse(&a.assignment.node_shared_pool).unwrap();
            prop_assert!(!shared.is_empty(), "the node's shared pool keeps the reserved CPU");
            for c in &a.assignment.containers {
                if c.cpu_isolation == CpuIsolation::Pod {
                    let pool = set(&a.assignment.pod_shared_pool);
                    let cpus = set(&c.cpuset);
                    prop_assert!(!cpus.is_empty(), "{} has an empty shared pool", c.name);
                    if c.kind == ContainerKind::Init {
                        // Shared init containers get the pod's budget minus the sidecars so far.
                        prop_assert!(pool.is_subset_of(&cpus), "{}: {} misses pool {}", c.name, cpus, pool);
                    } else {
                        prop_assert_eq!(cpus, pool);
                    }
                    prop_assert!(c.memory.iter().all(|b| b.size > 0), "{}: empty memory pool", c.name);
                }
            }
            // Exclusive CPU sets of different pods never overlap, nor the shared pool.
            let held = held_cpus(&a.state);
            let default = CpuSet::parse(&a.state.cpu.default_cpuset).unwrap();
            let list: Vec<(&String, &CpuSet)> = held.iter().collect();
            for (j, (a_uid, a_cpus)) in list.iter().enumerate() {
                prop_assert!(a_cpus.is_disjoint(&default), "{} holds shared-pool CPUs", a_uid);
                for (b_uid, b_cpus) in &list[j + 1..] {
                    prop_assert!(a_cpus.is_disjoint(b_cpus), "{} ({}) overlaps {} ({})", a_uid, a_cpus, b_uid, b_cpus);
                }
            }
            // Within the pod, exclusive long-running slices are disjoint.
            let slices: Vec<CpuSet> = a.assignment.containers.iter()
                .filter(|c| c.cpu_isolation == CpuIsolation::Container && c.kind != ContainerKind::Init)
                .map(|c| set(&c.cpuset))
                .collect();
            for (j, s) in slices.iter().enumerate() {
                for t in &slices[j + 1..] {
                    prop_assert!(s.is_disjoint(t), "slices {} and {} overlap", s, t);
                }
            }
            state = a.state.clone();
            admitted.push((uid, a));
        }
        // Admitting then releasing every container gives the exact start state.
        for (uid, a) in &admitted {
            state = release_all(a, uid, state, &node);
        }
        prop_assert_eq!(state, start);
    }
}
