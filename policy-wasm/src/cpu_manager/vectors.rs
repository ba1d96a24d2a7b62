//! Conformance vectors and property checks for the CPU manager (test only).
//!
//! Reads `tests/vectors/{k8s-managers,kep-derived}/*.json` of the workspace
//! (the repository's copy of the shared vectors). Every case of `cpu-assignment.json` (the optional
//! `cpuAccumulator.*` internals included), `cpu-static-policy.json`,
//! `kep5526-pod-level-cpu.json` and `kep5526-allocation.json` must pass; a
//! failing case is reported by name with what differed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::cpu_assignment::CpuAccumulator;
use super::*;
use crate::cpu_topology::{CpuInfo, CpuTopology};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;
use crate::quantity::Quantity;

fn load(relative: &str) -> Value {
    let path = format!("{}/../tests/vectors/{relative}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("vector file {path} is missing or unreadable: {err}"));
    serde_json::from_str(&text)
        .unwrap_or_else(|err| panic!("vector file {path} is not JSON: {err}"))
}

fn topologies(file: &Value) -> BTreeMap<String, CpuTopology> {
    let mut out = BTreeMap::new();
    for (name, topo) in file["topologies"].as_object().expect("topologies object") {
        let cpus = topo["cpus"]
            .as_array()
            .expect("cpus list")
            .iter()
            .map(|cpu| {
                let id = |key: &str| {
                    u32::try_from(cpu[key].as_u64().expect("numeric id")).expect("small id")
                };
                let uncore = cpu
                    .get("uncore")
                    .and_then(Value::as_u64)
                    .map(|v| u32::try_from(v).expect("small id"));
                (
                    id("cpu"),
                    CpuInfo {
                        core_id: id("core"),
                        socket_id: id("socket"),
                        numa_node_id: id("numa"),
                        uncore_cache_id: uncore,
                    },
                )
            });
        let topology =
            CpuTopology::new(cpus).unwrap_or_else(|err| panic!("topology {name}: {err}"));
        let count =
            |key: &str| usize::try_from(topo[key].as_u64().expect("count")).expect("small count");
        assert_eq!(
            (
                topology.num_cpus(),
                topology.num_sockets(),
                topology.num_cores(),
                topology.num_numa_nodes()
            ),
            (
                count("num_cpus"),
                count("num_sockets"),
                count("num_cores"),
                count("num_numa_nodes")
            ),
            "derived counts of topology {name}"
        );
        out.insert(name.clone(), topology);
    }
    out
}

fn cpuset(value: &Value) -> CpuSet {
    match value {
        Value::Null => CpuSet::new(),
        Value::String(text) => {
            CpuSet::parse(text).unwrap_or_else(|err| panic!("cpuset {text:?}: {err}"))
        }
        other => panic!("not a cpuset: {other}"),
    }
}

fn numa_mask(value: &Value) -> Option<u64> {
    let bits = match value {
        Value::Null => return None,
        Value::Array(bits) => bits,
        Value::Object(hint) => hint["mask"].as_array().expect("hint mask"),
        other => panic!("not a NUMA affinity: {other}"),
    };
    Some(
        bits.iter()
            .fold(0u64, |mask, bit| mask | 1u64 << bit.as_u64().expect("bit")),
    )
}

fn milli(value: &Value) -> Option<i64> {
    value.as_str().map(|text| {
        Quantity::parse(text)
            .unwrap_or_else(|err| panic!("cpu {text:?}: {err}"))
            .milli_value()
    })
}

fn bytes(value: &Value) -> Option<u64> {
    value.as_str().map(|text| {
        let q = Quantity::parse(text).unwrap_or_else(|err| panic!("memory {text:?}: {err}"));
        u64::try_from(q.value()).expect("non-negative memory")
    })
}

fn container(value: &Value, init: bool) -> ContainerSpec {
    let kind = match (init, value.get("restart_policy").and_then(Value::as_str)) {
        (false, _) => ContainerKind::Regular,
        (true, Some("Always")) => ContainerKind::Sidecar,
        (true, _) => ContainerKind::Init,
    };
    ContainerSpec {
        name: value["name"].as_str().expect("container name").to_string(),
        kind,
        cpu_request_millis: milli(&value["cpu_request"]),
        cpu_limit_millis: milli(&value["cpu_limit"]),
        memory_request_bytes: bytes(&value["memory_request"]),
        memory_limit_bytes: bytes(&value["memory_limit"]),
    }
}

fn pod(value: &Value) -> PodSpec {
    let list = |key: &str, init: bool| -> Vec<ContainerSpec> {
        value
            .get(key)
            .and_then(Value::as_array)
            .map(|cs| cs.iter().map(|c| container(c, init)).collect())
            .unwrap_or_default()
    };
    let plr = &value["pod_level_resources"];
    PodSpec {
        uid: value["uid"].as_str().expect("pod uid").to_string(),
        pod_level: PodLevelResources {
            cpu_request_millis: milli(&plr["cpu_request"]),
            cpu_limit_millis: milli(&plr["cpu_limit"]),
            memory_request_bytes: bytes(&plr["memory_request"]),
            memory_limit_bytes: bytes(&plr["memory_limit"]),
        },
        init_containers: list("init_containers", true),
        containers: list("containers", false),
    }
}

fn state(value: &Value) -> CpuManagerState {
    let mut state = CpuManagerState {
        default_cpuset: cpuset(&value["default_cpuset"]),
        ..CpuManagerState::default()
    };
    if let Some(pods) = value["assignments"].as_object() {
        for (uid, containers) in pods {
            // An empty pod map still counts as an entry, as in upstream's map.
            let entry = state.assignments.entry(uid.clone()).or_default();
            for (name, cpus) in containers.as_object().expect("container map") {
                entry.insert(name.clone(), cpuset(cpus));
            }
        }
    }
    state
}

fn assignments(value: &Value) -> BTreeMap<String, BTreeMap<String, CpuSet>> {
    let mut out = BTreeMap::new();
    for (uid, containers) in value.as_object().expect("assignments object") {
        let entry: &mut BTreeMap<String, CpuSet> = out.entry(uid.clone()).or_default();
        for (name, cpus) in containers.as_object().expect("container map") {
            entry.insert(name.clone(), cpuset(cpus));
        }
    }
    out
}

fn gates(input: &Value, name: &str) -> FeatureGates {
    let mut gates = FeatureGates::default();
    if name.contains("CPUManagerPolicyAlphaOptions enabled") {
        gates.cpu_manager_policy_alpha_options = true;
    }
    if let Some(map) = input.get("feature_gates").and_then(Value::as_object) {
        for (gate, on) in map {
            let on = on.as_bool().expect("gate value");
            match gate.as_str() {
                "PodLevelResources" => gates.pod_level_resources = on,
                "PodLevelResourceManagers" => gates.pod_level_resource_managers = on,
                "CPUManagerPolicyAlphaOptions" => gates.cpu_manager_policy_alpha_options = on,
                "CPUManagerPolicyBetaOptions" => gates.cpu_manager_policy_beta_options = on,
                other => panic!("gate {other} not handled by the runner"),
            }
        }
    }
    gates
}

fn policy(
    input: &Value,
    topos: &BTreeMap<String, CpuTopology>,
    gates: &FeatureGates,
) -> Result<StaticPolicy, CpuManagerError> {
    let topology = topos[input["topology"].as_str().expect("topology name")].clone();
    let options: Vec<(String, String)> = input["options"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("option value").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let opts =
        StaticPolicyOptions::parse(options.iter().map(|(k, v)| (k.as_str(), v.as_str())), gates)?;
    let num_reserved = usize::try_from(
        input["num_reserved_cpus"]
            .as_u64()
            .expect("num_reserved_cpus"),
    )
    .expect("small");
    StaticPolicy::new(
        topology,
        num_reserved as u64,
        &cpuset(&input["reserved_cpus"]),
        opts,
        "none",
    )
}

/// Collects per-case failures so one run reports all of them.
struct Outcome {
    file: &'static str,
    passed: usize,
    failures: Vec<String>,
}

impl Outcome {
    fn new(file: &'static str) -> Self {
        Outcome {
            file,
            passed: 0,
            failures: Vec::new(),
        }
    }

    fn record(&mut self, name: &str, problems: Vec<String>) {
        if problems.is_empty() {
            self.passed += 1;
        } else {
            self.failures
                .push(format!("{name}:\n    {}", problems.join("\n    ")));
        }
    }

    #[track_caller]
    fn finish(self, expected_cases: usize) {
        eprintln!(
            "{}: {} passed, {} failed",
            self.file,
            self.passed,
            self.failures.len()
        );
        assert!(
            self.failures.is_empty(),
            "{} failures in {}:\n{}",
            self.failures.len(),
            self.file,
            self.failures.join("\n")
        );
        assert_eq!(self.passed, expected_cases, "case count of {}", self.file);
    }
}

fn check<T: PartialEq + std::fmt::Debug>(problems: &mut Vec<String>, what: &str, got: T, want: T) {
    if got != want {
        problems.push(format!("{what}: got {got:?}, want {want:?}"));
    }
}

fn strategy(input: &Value) -> CpuSortingStrategy {
    match input.get("sorting").and_then(Value::as_str) {
        Some("spread") => CpuSortingStrategy::Spread,
        _ => CpuSortingStrategy::Packed,
    }
}

fn id_list(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .expect("id list")
        .iter()
        .map(|v| u32::try_from(v.as_u64().expect("id")).expect("small"))
        .collect()
}

#[test]
fn cpu_vectors_cpu_assignment() {
    let file = load("k8s-managers/cpu-assignment.json");
    let topos = topologies(&file);
    let mut outcome = Outcome::new("cpu-assignment.json");
    let cases = file["cases"].as_array().expect("cases");
    for case in cases {
        let (name, input, expected) = (
            case["name"].as_str().expect("name"),
            &case["input"],
            &case["expected"],
        );
        let topo = &topos[input["topology"].as_str().expect("topology")];
        let available = cpuset(&input["available"]);
        let num_cpus =
            usize::try_from(input["num_cpus"].as_u64().expect("num_cpus")).expect("small");
        let mut problems = Vec::new();
        let function = input["function"].as_str().expect("function");
        let sorted = input.get("compare").and_then(Value::as_str) == Some("sorted");
        let list_check =
            |problems: &mut Vec<String>, what: &str, mut got: Vec<u32>, want: &Value| {
                if sorted {
                    got.sort_unstable();
                }
                check(problems, what, got, id_list(want));
            };
        let acc = CpuAccumulator::new(topo, &available, num_cpus, strategy(input));
        match function {
            "takeByTopologyNUMAPacked" | "takeByTopologyNUMADistributed" => {
                let prefer_uncore = input["prefer_align_by_uncore_cache"]
                    .as_bool()
                    .unwrap_or(false);
                let got = if function == "takeByTopologyNUMAPacked" {
                    take_by_topology_numa_packed(
                        topo,
                        &available,
                        num_cpus,
                        strategy(input),
                        prefer_uncore,
                    )
                } else {
                    let group = usize::try_from(input["cpu_group_size"].as_u64().expect("group"))
                        .expect("small");
                    take_by_topology_numa_distributed(
                        topo,
                        &available,
                        num_cpus,
                        group,
                        strategy(input),
                    )
                };
                match (&got, expected.get("error").and_then(Value::as_str)) {
                    (Err(err), Some(want)) => {
                        check(&mut problems, "error", err.to_string(), want.to_string())
                    }
                    (Ok(cpus), None) => check(
                        &mut problems,
                        "cpuset",
                        cpus.clone(),
                        cpuset(&expected["cpuset"]),
                    ),
                    (got, want) => problems.push(format!(
                        "got {got:?}, want error {want:?} / {}",
                        expected["cpuset"]
                    )),
                }
            }
            "cpuAccumulator.freeSockets" => list_check(
                &mut problems,
                "free sockets",
                acc.free_sockets(),
                &expected["list"],
            ),
            "cpuAccumulator.freeNUMANodes" => {
                list_check(
                    &mut problems,
                    "free NUMA nodes",
                    acc.free_numa_nodes(),
                    &expected["list"],
                );
            }
            "cpuAccumulator.freeSockets+freeNUMANodes" => {
                list_check(
                    &mut problems,
                    "free sockets",
                    acc.free_sockets(),
                    &expected["sockets"],
                );
                list_check(
                    &mut problems,
                    "free NUMA nodes",
                    acc.free_numa_nodes(),
                    &expected["numa_nodes"],
                );
            }
            "cpuAccumulator.freeCores" => list_check(
                &mut problems,
                "free cores",
                acc.free_cores(),
                &expected["list"],
            ),
            "cpuAccumulator.freeCPUs" => list_check(
                &mut problems,
                "free cpus",
                acc.free_cpus(),
                &expected["list"],
            ),
            "cpuAccumulator.take (sequence)" => {
                let mut acc = acc;
                for step in input["take_sequence"].as_array().expect("sequence") {
                    acc.take(&cpuset(step));
                }
                check(
                    &mut problems,
                    "is_satisfied",
                    acc.is_satisfied(),
                    expected["is_satisfied"].as_bool().expect("bool"),
                );
                check(
                    &mut problems,
                    "is_failed",
                    acc.is_failed(),
                    expected["is_failed"].as_bool().expect("bool"),
                );
                check(
                    &mut problems,
                    "needed",
                    acc.needed(),
                    expected["num_cpus_needed"].as_i64().expect("int"),
                );
            }
            other => problems.push(format!("unknown function {other}")),
        }
        outcome.record(name, problems);
    }
    outcome.finish(cases.len());
}

#[test]
fn cpu_vectors_static_policy() {
    let file = load("k8s-managers/cpu-static-policy.json");
    let topos = topologies(&file);
    let mut outcome = Outcome::new("cpu-static-policy.json");
    let cases = file["cases"].as_array().expect("cases");
    for case in cases {
        let (name, input, expected) = (
            case["name"].as_str().expect("name"),
            &case["input"],
            &case["expected"],
        );
        let gates = gates(input, name);
        let mut problems = Vec::new();
        let operation = input["operation"].as_str().expect("operation");
        let policy = match policy(input, &topos, &gates) {
            Ok(policy) => policy,
            Err(err) => {
                let want = expected.get("new_policy_error").and_then(Value::as_str);
                check(
                    &mut problems,
                    "new policy error",
                    Some(err.to_string()),
                    want.map(str::to_string),
                );
                outcome.record(name, problems);
                continue;
            }
        };
        if let Some(want) = expected.get("new_policy_error").and_then(Value::as_str) {
            problems.push(format!("policy created, want error {want:?}"));
        }
        let start_state = state(&input["state"]);
        match operation {
            "Start" | "NewStaticPolicy+Start" => match policy.start(&start_state, &gates) {
                Ok(next) => {
                    check(
                        &mut problems,
                        "error",
                        None,
                        expected.get("error").and_then(Value::as_str),
                    );
                    if let Some(want) = expected.get("default_cpuset") {
                        check(
                            &mut problems,
                            "default cpuset",
                            next.default_cpuset,
                            cpuset(want),
                        );
                    }
                }
                Err(err) => {
                    check(
                        &mut problems,
                        "error",
                        Some(err.to_string().as_str()),
                        expected["error"].as_str(),
                    );
                }
            },
            "Allocate" => {
                let pod = pod(&input["pod"]);
                let container = input["container"].as_str().expect("container");
                let hint = numa_mask(&input["topology_hint"]);
                let result = policy.allocate(&start_state, &pod, container, hint, &gates);
                let want_error = expected["error"].as_str();
                match result {
                    Ok(next) => {
                        check(&mut problems, "error", None, want_error);
                        let got = next.cpuset(&pod.uid, container).cloned();
                        check(
                            &mut problems,
                            "allocated",
                            got.is_some(),
                            expected["allocated"].as_bool().expect("bool"),
                        );
                        if let Some(want) = expected.get("cpuset") {
                            check(
                                &mut problems,
                                "cpuset",
                                got.unwrap_or_default(),
                                cpuset(want),
                            );
                        }
                        // Exclusive CPUs leave the shared pool.
                        if let Some(cpus) = next.cpuset(&pod.uid, container) {
                            check(
                                &mut problems,
                                "disjoint from shared pool",
                                cpus.is_disjoint(&next.default_cpuset),
                                true,
                            );
                        }
                    }
                    Err(err) => {
                        check(
                            &mut problems,
                            "error",
                            Some(err.to_string().as_str()),
                            want_error,
                        );
                        check(
                            &mut problems,
                            "allocated",
                            false,
                            expected["allocated"].as_bool().expect("bool"),
                        );
                    }
                }
            }
            "allocateCPUs" => {
                let n =
                    usize::try_from(input["num_cpus"].as_u64().expect("num_cpus")).expect("small");
                let got = policy.allocate_cpus(
                    &start_state,
                    n,
                    numa_mask(&input["numa_affinity"]),
                    &cpuset(&input["reusable_cpus"]),
                );
                match got {
                    Ok((cpus, _)) => {
                        check(&mut problems, "cpuset", cpus, cpuset(&expected["cpuset"]))
                    }
                    Err(err) => problems.push(format!("unexpected error {err}")),
                }
            }
            "RemoveContainer" => {
                let (uid, container) = (
                    input["pod_uid"].as_str().expect("uid"),
                    input["container"].as_str().expect("c"),
                );
                let next = policy.remove_container(&start_state, uid, container, &gates);
                check(
                    &mut problems,
                    "default cpuset",
                    next.default_cpuset.clone(),
                    cpuset(&expected["default_cpuset"]),
                );
                check(
                    &mut problems,
                    "removed",
                    next.cpuset(uid, container).is_none(),
                    expected["container_removed"].as_bool().expect("b"),
                );
            }
            op if op.starts_with("Allocate all (init then app)") => {
                let pod = pod(&input["pod"]);
                match policy.allocate_container_scope(&start_state, &pod, None, &gates) {
                    Ok(next) => {
                        let want = cpuset(&expected["default_cpuset_after_alloc"]);
                        check(
                            &mut problems,
                            "default after alloc",
                            next.default_cpuset.clone(),
                            want,
                        );
                        if let Some(removed) = input.get("remove_container").and_then(Value::as_str)
                        {
                            let after = policy.remove_container(&next, &pod.uid, removed, &gates);
                            let want = cpuset(&expected["default_cpuset_after_remove"]);
                            check(
                                &mut problems,
                                "default after remove",
                                after.default_cpuset,
                                want,
                            );
                        }
                    }
                    Err(err) => problems.push(format!("unexpected error {err}")),
                }
            }
            other => problems.push(format!("unknown operation {other}")),
        }
        outcome.record(name, problems);
    }
    outcome.finish(cases.len());
}

/// Container-level view of a pod after allocation, derived from the state.
struct PodView {
    pod_set: CpuSet,
    exclusive: BTreeMap<String, CpuSet>,
    pod_shared: BTreeMap<String, CpuSet>,
    node_shared: BTreeSet<String>,
}

fn pod_view(
    policy: &StaticPolicy,
    state: &CpuManagerState,
    pod: &PodSpec,
    gates: &FeatureGates,
) -> PodView {
    let mut view = PodView {
        pod_set: state.pod_cpuset(&pod.uid).cloned().unwrap_or_default(),
        exclusive: BTreeMap::new(),
        pod_shared: BTreeMap::new(),
        node_shared: BTreeSet::new(),
    };
    for c in pod.all_containers() {
        let cpus = state.cpuset(&pod.uid, &c.name).cloned().unwrap_or_default();
        match policy.resource_isolation_level(state, pod, &c.name, gates) {
            ResourceIsolationLevel::Container => drop(view.exclusive.insert(c.name.clone(), cpus)),
            ResourceIsolationLevel::Pod => drop(view.pod_shared.insert(c.name.clone(), cpus)),
            ResourceIsolationLevel::Host => drop(view.node_shared.insert(c.name.clone())),
        }
    }
    view
}

fn names(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .expect("name list")
        .iter()
        .map(|v| v.as_str().expect("name").to_string())
        .collect()
}

#[test]
fn cpu_vectors_kep5526_pod_level_upstream() {
    let file = load("k8s-managers/kep5526-pod-level-cpu.json");
    let topos = topologies(&file);
    let mut outcome = Outcome::new("kep5526-pod-level-cpu.json");
    let cases = file["cases"].as_array().expect("cases");
    for case in cases {
        let (name, input, expected) = (
            case["name"].as_str().expect("name"),
            &case["input"],
            &case["expected"],
        );
        let gates = gates(input, name);
        let mut problems = Vec::new();
        let policy = policy(input, &topos, &gates).expect("policy");
        let start_state = state(&input["state"]);
        let pod = pod(&input["pod"]);
        let hint = numa_mask(&input["topology_hint"]);
        match policy.allocate_pod(&start_state, &pod, hint, &gates) {
            Ok(next) => {
                check(&mut problems, "error", None, expected["error"].as_str());
                check(
                    &mut problems,
                    "assignments",
                    next.assignments.clone(),
                    assignments(&expected["assignments"]),
                );
                check(
                    &mut problems,
                    "default cpuset",
                    next.default_cpuset.clone(),
                    cpuset(&expected["default_cpuset"]),
                );
                let view = pod_view(&policy, &next, &pod, &gates);
                let metrics = &expected["metrics"];
                if let Some(allocs) = metrics.get("allocs").and_then(Value::as_u64) {
                    let assigned = next.assignments.get(&pod.uid).map_or(0, BTreeMap::len);
                    check(&mut problems, "allocs", assigned as u64, allocs);
                }
                if let Some(n) = metrics.get("exclusive_assignments").and_then(Value::as_u64) {
                    check(
                        &mut problems,
                        "exclusive assignments",
                        view.exclusive.len() as u64,
                        n,
                    );
                }
                if let Some(n) = metrics
                    .get("pod_shared_pool_assignments")
                    .and_then(Value::as_u64)
                {
                    check(
                        &mut problems,
                        "pod shared pool assignments",
                        view.pod_shared.len() as u64,
                        n,
                    );
                }
                if !view.pod_set.is_empty() {
                    let union = next.assignments[&pod.uid]
                        .values()
                        .fold(CpuSet::new(), |all, c| all.union(c));
                    check(
                        &mut problems,
                        "containers inside the pod set",
                        union.is_subset_of(&view.pod_set),
                        true,
                    );
                    check(
                        &mut problems,
                        "pod set outside shared pool",
                        view.pod_set.is_disjoint(&next.default_cpuset),
                        true,
                    );
                }
            }
            Err(err) => {
                check(
                    &mut problems,
                    "error reason",
                    err.reason(),
                    expected["error"].as_str(),
                );
            }
        }
        outcome.record(name, problems);
    }
    outcome.finish(cases.len());
}

#[test]
fn cpu_vectors_kep5526_allocation_derived() {
    let file = load("kep-derived/kep5526-allocation.json");
    let topos = topologies(&file);
    let mut outcome = Outcome::new("kep5526-allocation.json");
    let cases = file["cases"].as_array().expect("cases");
    for case in cases {
        let (name, input, expected) = (
            case["name"].as_str().expect("name"),
            &case["input"],
            &case["expected"],
        );
        let gates = gates(input, name);
        let mut problems = Vec::new();
        let policy = policy(input, &topos, &gates).expect("policy");
        let start_state = state(&input["state"]);
        let pod = pod(&input["pod"]);
        let hint = numa_mask(&input["topology_hint"]);
        let result = match input["function"].as_str().expect("function") {
            "AllocatePod" => policy.allocate_pod(&start_state, &pod, hint, &gates),
            "AllocateContainerScope" => {
                policy.allocate_container_scope(&start_state, &pod, hint, &gates)
            }
            other => panic!("unknown function {other}"),
        };
        let want_error = expected["error"].as_str();
        check(
            &mut problems,
            "admitted",
            result.is_ok(),
            expected["admitted"].as_bool().expect("admitted"),
        );
        let next = match result {
            Ok(next) => {
                check(&mut problems, "error", None, want_error);
                next
            }
            Err(err) => {
                check(&mut problems, "error reason", err.reason(), want_error);
                start_state.clone()
            }
        };
        check(
            &mut problems,
            "assignments",
            next.assignments.clone(),
            assignments(&expected["assignments"]),
        );
        check(
            &mut problems,
            "default cpuset",
            next.default_cpuset.clone(),
            cpuset(&expected["default_cpuset"]),
        );
        if want_error.is_none() {
            let view = pod_view(&policy, &next, &pod, &gates);
            if let Some(size) = expected.get("podSetSize").and_then(Value::as_u64) {
                check(
                    &mut problems,
                    "pod set size",
                    view.pod_set.len() as u64,
                    size,
                );
            }
            let want_sizes: BTreeMap<String, u64> = expected["exclusiveSizes"]
                .as_object()
                .expect("exclusiveSizes")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().expect("size")))
                .collect();
            let got_sizes: BTreeMap<String, u64> = view
                .exclusive
                .iter()
                .map(|(k, v)| (k.clone(), v.len() as u64))
                .collect();
            check(&mut problems, "exclusive sizes", got_sizes, want_sizes);
            check(
                &mut problems,
                "node shared containers",
                view.node_shared.clone(),
                names(&expected["nodeSharedContainers"]),
            );
            let long_running: Vec<&ContainerSpec> = pod
                .init_containers
                .iter()
                .filter(|c| c.is_restartable())
                .chain(pod.containers.iter())
                .collect();
            let exclusive_long_running = long_running
                .iter()
                .filter_map(|c| view.exclusive.get(&c.name))
                .fold(CpuSet::new(), |all, cpus| all.union(cpus));
            let pool = view.pod_set.difference(&exclusive_long_running);
            if let Some(size) = expected.get("sharedPoolSize").and_then(Value::as_u64) {
                check(&mut problems, "shared pool size", pool.len() as u64, size);
            }
            if let Some(shared) = expected.get("sharedContainers") {
                let want = names(shared);
                let got: BTreeSet<String> = long_running
                    .iter()
                    .filter(|c| view.pod_shared.contains_key(&c.name))
                    .map(|c| c.name.clone())
                    .collect();
                check(&mut problems, "shared containers", got, want.clone());
                for name in &want {
                    check(
                        &mut problems,
                        &format!("{name} gets the pod shared pool"),
                        view.pod_shared.get(name).cloned(),
                        Some(pool.clone()),
                    );
                }
            }
            // Exclusive long-running slices are pairwise disjoint, disjoint from the pool, inside the pod set.
            let slices: Vec<(&String, &CpuSet)> = long_running
                .iter()
                .filter_map(|c| view.exclusive.get_key_value(&c.name))
                .collect();
            for (i, (a, a_cpus)) in slices.iter().enumerate() {
                for (b, b_cpus) in &slices[i + 1..] {
                    check(
                        &mut problems,
                        &format!("{a} and {b} disjoint"),
                        a_cpus.is_disjoint(b_cpus),
                        true,
                    );
                }
                if !view.pod_set.is_empty() {
                    check(
                        &mut problems,
                        &format!("{a} disjoint from pool"),
                        a_cpus.is_disjoint(&pool),
                        true,
                    );
                    check(
                        &mut problems,
                        &format!("{a} inside pod set"),
                        a_cpus.is_subset_of(&view.pod_set),
                        true,
                    );
                }
            }
            for (c, cpus) in view.exclusive.iter().chain(view.pod_shared.iter()) {
                if !view.pod_set.is_empty() {
                    check(
                        &mut problems,
                        &format!("{c} inside pod set"),
                        cpus.is_subset_of(&view.pod_set),
                        true,
                    );
                }
                check(
                    &mut problems,
                    &format!("{c} outside shared pool"),
                    cpus.is_disjoint(&next.default_cpuset),
                    true,
                );
            }
        }
        outcome.record(name, problems);
    }
    outcome.finish(cases.len());
}
