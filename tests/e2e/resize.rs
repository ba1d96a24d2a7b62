//! In-place resize (KEP-1287) through the component: the KEP's e2e
//! scenario lists as plan tables, the rejected cases, the usage guard, and a
//! property test that injects a write failure at every step and checks the
//! pod-vs-container invariants at every moment and convergence on re-run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use podpolicy::bindings::{
    ErrorReason, FeatureGate, NodeSettings, Pod, ResizeDecision, ResizePlan, ResizeStepKind,
    ResourceQuantity,
};
use podpolicy::conformance::resize_targets;
use podpolicy::empty_node;
use podpolicy::pod_input::pod_from_json;
use podpolicy::resize_exec::{CgroupIo, Execution, Outcome, execute};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::util::policy;

fn node() -> NodeSettings {
    NodeSettings {
        capacity: vec![
            ResourceQuantity {
                name: "cpu".into(),
                quantity: "16".into(),
            },
            ResourceQuantity {
                name: "memory".into(),
                quantity: "64Gi".into(),
            },
        ],
        allocatable: Some(vec![
            ResourceQuantity {
                name: "cpu".into(),
                quantity: "16".into(),
            },
            ResourceQuantity {
                name: "memory".into(),
                quantity: "64Gi".into(),
            },
        ]),
        ..empty_node()
    }
}

fn container(name: &str, cpu: (&str, &str), memory: (&str, &str)) -> Value {
    json!({"name": name, "resources": {"requests": {"cpu": cpu.0, "memory": memory.0}, "limits": {"cpu": cpu.1, "memory": memory.1}}})
}

fn pod(containers: Vec<Value>) -> Pod {
    pod_from_json(
        &json!({"metadata": {"name": "p", "uid": "u1"}, "spec": {"containers": containers}}),
    )
    .expect("pod")
}

fn plan(current: &Pod, desired: &Pod, node: &NodeSettings) -> ResizePlan {
    policy()
        .resize_plan(current, desired, &Vec::new(), node)
        .expect("call")
        .expect("plan")
}

fn targets(current: Vec<Value>, desired: Vec<Value>) -> Vec<String> {
    let plan = plan(&pod(current), &pod(desired), &node());
    assert_eq!(plan.decision, ResizeDecision::Accepted, "{}", plan.message);
    resize_targets(&plan)
}

#[test]
fn guaranteed_single_container() {
    let c = |cpu: &'static str, mem: &'static str| vec![container("c1", (cpu, cpu), (mem, mem))];
    assert_eq!(
        targets(c("2", "1Gi"), c("1", "1Gi")),
        ["container:c1:cpu", "pod:cpu"]
    );
    assert_eq!(
        targets(c("1", "1Gi"), c("2", "1Gi")),
        ["pod:cpu", "container:c1:cpu"]
    );
    assert_eq!(
        targets(c("1", "2Gi"), c("1", "1Gi")),
        ["container:c1:memory", "pod:memory"]
    );
    assert_eq!(
        targets(c("1", "1Gi"), c("1", "2Gi")),
        ["pod:memory", "container:c1:memory"]
    );
    // Memory is planned before cpu, as upstream does.
    assert_eq!(
        targets(c("1", "1Gi"), c("2", "2Gi")),
        [
            "pod:memory",
            "container:c1:memory",
            "pod:cpu",
            "container:c1:cpu"
        ]
    );
    assert_eq!(
        targets(c("2", "2Gi"), c("1", "1Gi")),
        [
            "container:c1:memory",
            "pod:memory",
            "container:c1:cpu",
            "pod:cpu"
        ]
    );
}

#[test]
fn burstable_single_container_cpu_and_memory() {
    let c = |cpu: (&'static str, &'static str), mem: (&'static str, &'static str)| {
        vec![container("c1", cpu, mem)]
    };
    // Requests only: cpu.weight moves at both levels; memory requests write nothing (Memory QoS off).
    assert_eq!(
        targets(
            c(("500m", "2"), ("512Mi", "1Gi")),
            c(("1", "2"), ("512Mi", "1Gi"))
        ),
        ["pod:cpu", "container:c1:cpu"]
    );
    assert_eq!(
        targets(
            c(("1", "2"), ("512Mi", "1Gi")),
            c(("500m", "2"), ("256Mi", "1Gi"))
        ),
        ["container:c1:cpu", "pod:cpu"]
    );
    // Limits only.
    assert_eq!(
        targets(
            c(("500m", "1"), ("512Mi", "1Gi")),
            c(("500m", "2"), ("512Mi", "2Gi"))
        ),
        [
            "pod:memory",
            "container:c1:memory",
            "pod:cpu",
            "container:c1:cpu"
        ]
    );
}

#[test]
fn cpu_only_and_memory_only_pods() {
    let cpu_only = |req: &str, lim: &str| {
        vec![json!({"name": "c1", "resources": {"requests": {"cpu": req}, "limits": {"cpu": lim}}})]
    };
    assert_eq!(
        targets(cpu_only("500m", "1"), cpu_only("500m", "2")),
        ["pod:cpu", "container:c1:cpu"]
    );
    assert_eq!(
        targets(cpu_only("500m", "2"), cpu_only("250m", "1")),
        ["container:c1:cpu", "pod:cpu"]
    );
    let mem_only = |req: &str, lim: &str| {
        vec![
            json!({"name": "c1", "resources": {"requests": {"memory": req}, "limits": {"memory": lim}}}),
        ]
    };
    assert_eq!(
        targets(mem_only("256Mi", "1Gi"), mem_only("256Mi", "2Gi")),
        ["pod:memory", "container:c1:memory"]
    );
    assert_eq!(
        targets(mem_only("256Mi", "2Gi"), mem_only("256Mi", "1Gi")),
        ["container:c1:memory", "pod:memory"]
    );
}

fn three(c1: &'static str, c2: &'static str, c3: &'static str) -> Vec<Value> {
    vec![
        container("c1", (c1, c1), ("1Gi", "1Gi")),
        container("c2", (c2, c2), ("1Gi", "1Gi")),
        container("c3", (c3, c3), ("1Gi", "1Gi")),
    ]
}

fn position(targets: &[String], t: &str) -> usize {
    targets
        .iter()
        .position(|x| x == t)
        .unwrap_or_else(|| panic!("{t} missing from {targets:?}"))
}

#[test]
fn three_containers_net_increase_decrease_and_no_change() {
    // Net increase: pod first; the decreasing container before the increasing ones.
    let t = targets(three("2", "2", "2"), three("3", "1", "3"));
    assert_eq!(t[0], "pod:cpu");
    assert!(position(&t, "container:c2:cpu") < position(&t, "container:c1:cpu"));
    assert!(position(&t, "container:c2:cpu") < position(&t, "container:c3:cpu"));
    // Net decrease: pod last.
    let t = targets(three("2", "2", "2"), three("3", "1", "1"));
    assert_eq!(t.last().map(String::as_str), Some("pod:cpu"));
    assert!(position(&t, "container:c2:cpu") < position(&t, "container:c1:cpu"));
    // No net change: no pod write at all.
    let t = targets(three("2", "2", "2"), three("3", "1", "2"));
    assert_eq!(t, ["container:c2:cpu", "container:c1:cpu"]);
}

#[test]
fn a_qos_change_is_invalid() {
    let current = pod(vec![container("c1", ("1", "1"), ("1Gi", "1Gi"))]);
    let desired = pod(vec![container("c1", ("1", "2"), ("1Gi", "1Gi"))]);
    let plan = plan(&current, &desired, &node());
    assert_eq!(plan.decision, ResizeDecision::Invalid);
    // pkg/apis/core/validation/validation_test.go TestValidatePodResize
    // "Pod QoS change, guaranteed -> burstable": spec, Invalid.
    assert_eq!(plan.errors.len(), 1, "{:?}", plan.errors);
    assert_eq!(plan.errors[0].field, "spec");
    assert_eq!(plan.errors[0].reason, ErrorReason::Invalid);
    assert_eq!(
        plan.errors[0].message,
        "Pod QOS Class may not change as a result of resizing"
    );
    assert!(plan.steps.is_empty());
}

#[test]
fn guaranteed_pods_resize_next_to_the_static_managers_only_with_their_gates() {
    // pkg/kubelet/allocation/allocation_manager.go (canResizePod): a
    // Guaranteed pod that changes its CPU requests next to the static CPU
    // manager is Infeasible unless InPlacePodVerticalScalingExclusiveCPUs is
    // on (likewise its memory requests next to the Static memory manager and
    // InPlacePodVerticalScalingExclusiveMemory); a resize of the other
    // resource goes ahead (guaranteedPodResourceResizeRequired).
    let current = pod(vec![container("c1", ("2", "2"), ("1Gi", "1Gi"))]);
    let desired = pod(vec![container("c1", ("3", "3"), ("1Gi", "1Gi"))]);
    let more_memory = pod(vec![container("c1", ("2", "2"), ("2Gi", "2Gi"))]);
    let static_node = NodeSettings {
        cpu_manager_policy: Some(podpolicy::bindings::CpuManagerPolicy::Static),
        ..node()
    };
    let plan = plan(&current, &desired, &static_node);
    assert_eq!(plan.decision, ResizeDecision::Infeasible);
    assert_eq!(
        plan.message,
        "Resize is infeasible for Guaranteed Pods alongside CPU Manager policy \"static\""
    );
    let memory_node = NodeSettings {
        memory_manager_policy: Some(podpolicy::bindings::MemoryManagerPolicy::Static),
        ..node()
    };
    let plan = policy()
        .resize_plan(&current, &more_memory, &Vec::new(), &memory_node)
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Infeasible);
    assert_eq!(
        plan.message,
        "Resize is infeasible for Guaranteed Pods alongside Memory Manager policy \"Static\""
    );
    // The other resource: a CPU resize next to the memory manager, and a
    // memory resize next to the CPU manager, are accepted.
    let plan = policy()
        .resize_plan(&current, &desired, &Vec::new(), &memory_node)
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Accepted, "{}", plan.message);
    let plan = policy()
        .resize_plan(&current, &more_memory, &Vec::new(), &static_node)
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Accepted, "{}", plan.message);

    // With the gate: a non-integral request for exclusive CPUs is refused,
    // an integral one carries a cpuset re-allocation step.
    let gated = NodeSettings {
        feature_gates: vec![FeatureGate {
            name: "InPlacePodVerticalScalingExclusiveCPUs".into(),
            enabled: true,
        }],
        ..static_node
    };
    let fractional = pod(vec![container("c1", ("1500m", "1500m"), ("1Gi", "1Gi"))]);
    let plan = policy()
        .resize_plan(&current, &fractional, &Vec::new(), &gated)
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Invalid);
    assert_eq!(
        plan.errors[0].field,
        "spec.containers[0].resources.requests[cpu]"
    );
    let plan = policy()
        .resize_plan(&current, &desired, &Vec::new(), &gated)
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Accepted);
    assert!(
        plan.steps
            .iter()
            .any(|s| s.kind == ResizeStepKind::ReallocateCpus && s.cpus == Some(3))
    );
    // Without a static manager the same non-integral resize is accepted.
    assert_eq!(
        policy()
            .resize_plan(&current, &fractional, &Vec::new(), &node())
            .expect("call")
            .expect("plan")
            .decision,
        ResizeDecision::Accepted
    );
}

#[test]
fn restart_policy_never_requires_not_required() {
    let mk = |policy_value: &str, restart: &str, mem: &str| {
        pod_from_json(&json!({"spec": {"restartPolicy": restart, "containers": [{"name": "c1",
            "resizePolicy": [{"resourceName": "memory", "restartPolicy": policy_value}],
            "resources": {"requests": {"cpu": "1", "memory": mem}, "limits": {"cpu": "1", "memory": mem}}}]}}))
        .expect("pod")
    };
    let plan = policy().resize_plan(
        &mk("RestartContainer", "Never", "1Gi"),
        &mk("RestartContainer", "Never", "2Gi"),
        &Vec::new(),
        &node(),
    );
    let plan = plan.expect("call").expect("plan");
    // pkg/apis/core/validation/validation.go validateResizePolicy.
    assert_eq!(plan.decision, ResizeDecision::Invalid);
    let error = plan
        .errors
        .iter()
        .find(|e| e.field == "spec.containers[0].resizePolicy")
        .expect("resizePolicy error");
    assert_eq!(error.reason, ErrorReason::Invalid);
    assert_eq!(
        error.message,
        "must be 'NotRequired' when pod `restartPolicy` is 'Never'"
    );
    // With restartPolicy Always, RestartContainer adds a restart step.
    let plan = policy().resize_plan(
        &mk("RestartContainer", "Always", "1Gi"),
        &mk("RestartContainer", "Always", "2Gi"),
        &Vec::new(),
        &node(),
    );
    let plan = plan.expect("call").expect("plan");
    assert!(
        plan.steps
            .iter()
            .any(|s| s.kind == ResizeStepKind::RestartContainer)
    );
    // The KEP's `NoRestart` is not an upstream value: NotSupported.
    let plan = policy().resize_plan(
        &mk("NoRestart", "Never", "1Gi"),
        &mk("NoRestart", "Never", "2Gi"),
        &Vec::new(),
        &node(),
    );
    let plan = plan.expect("call").expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Invalid);
    assert!(
        plan.errors
            .iter()
            .any(|e| e.reason == ErrorReason::NotSupported
                && e.message == "supported values: \"NotRequired\", \"RestartContainer\""),
        "{:?}",
        plan.errors
    );
    let plan = policy().resize_plan(
        &mk("NotRequired", "Never", "1Gi"),
        &mk("NotRequired", "Never", "2Gi"),
        &Vec::new(),
        &node(),
    );
    let plan = plan.expect("call").expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Accepted);
    assert!(
        !plan
            .steps
            .iter()
            .any(|s| s.kind == ResizeStepKind::RestartContainer)
    );
}

#[test]
fn non_sidecar_init_containers_resize_with_their_gate() {
    // pkg/apis/core/validation/validation_test.go TestValidatePodResize:
    // "…attempt to resize non-sidecar initContainer with FG disabled",
    // "…with RestartContainer resize policy"; InPlacePodVerticalScalingInitContainers
    // is on by default in 1.36.
    let mk = |cpu: &str, policy_value: Option<&str>| {
        let mut init = json!({"name": "init", "resources": {"requests": {"cpu": cpu}}});
        if let Some(p) = policy_value {
            init["resizePolicy"] = json!([{"resourceName": "cpu", "restartPolicy": p}]);
        }
        pod_from_json(&json!({"spec": {"initContainers": [init],
            "containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}}}]}}))
        .expect("pod")
    };
    let plan = policy()
        .resize_plan(&mk("1", None), &mk("2", None), &Vec::new(), &node())
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Accepted, "{}", plan.message);
    let gate_off = NodeSettings {
        feature_gates: vec![FeatureGate {
            name: "InPlacePodVerticalScalingInitContainers".into(),
            enabled: false,
        }],
        ..node()
    };
    let plan = policy()
        .resize_plan(&mk("1", None), &mk("2", None), &Vec::new(), &gate_off)
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Invalid);
    assert_eq!(plan.errors[0].field, "spec");
    assert_eq!(plan.errors[0].reason, ErrorReason::Forbidden);
    assert_eq!(
        plan.errors[0].message,
        "resources for non-sidecar init containers are immutable"
    );
    let plan = policy()
        .resize_plan(
            &mk("1", Some("NotRequired")),
            &mk("2", Some("RestartContainer")),
            &Vec::new(),
            &node(),
        )
        .expect("call")
        .expect("plan");
    assert_eq!(plan.decision, ResizeDecision::Invalid);
    assert!(
        plan.errors.iter().any(|e| e.field == "spec.initContainers[0]"
            && e.message
                == "non-sidecar init containers with a resize policy of RestartContainer cannot be resized"),
        "{:?}",
        plan.errors
    );
}

/// In-memory cgroups with an optional failure at the n-th write and an
/// invariant check after every write.
struct FakeCgroups {
    files: BTreeMap<(PathBuf, String), String>,
    writes: usize,
    fail_at: Option<usize>,
    explicit_pod_limits: bool,
    containers: Vec<String>,
    violations: Vec<String>,
}

fn number(value: Option<&String>) -> Option<u128> {
    value
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

impl FakeCgroups {
    fn check(&mut self) {
        let pod = PathBuf::from("pod");
        for file in ["memory.max", "cpu.max"] {
            let Some(pod_value) = number(self.files.get(&(pod.clone(), file.to_string()))) else {
                continue;
            };
            let values: Vec<Option<u128>> = self
                .containers
                .iter()
                .map(|c| number(self.files.get(&(pod.join(c), file.to_string()))))
                .collect();
            if self.explicit_pod_limits {
                for (c, v) in self.containers.iter().zip(&values) {
                    if v.is_some_and(|v| v > pod_value) {
                        self.violations.push(format!(
                            "after write {}: {c} {file} {v:?} > pod {pod_value}",
                            self.writes
                        ));
                    }
                }
            } else if values.iter().all(Option::is_some) {
                let sum: u128 = values.iter().flatten().sum();
                if sum > pod_value {
                    self.violations.push(format!(
                        "after write {}: sum of container {file} {sum} > pod {pod_value}",
                        self.writes
                    ));
                }
            }
        }
    }
}

impl CgroupIo for FakeCgroups {
    fn read(&self, cgroup: &Path, file: &str) -> anyhow::Result<Option<String>> {
        Ok(self
            .files
            .get(&(cgroup.to_path_buf(), file.to_string()))
            .cloned())
    }
    fn write(&mut self, cgroup: &Path, file: &str, value: &str) -> anyhow::Result<()> {
        if self.fail_at == Some(self.writes) {
            self.fail_at = None;
            anyhow::bail!("{}/{file}: injected failure", cgroup.display());
        }
        self.writes += 1;
        self.files
            .insert((cgroup.to_path_buf(), file.to_string()), value.to_string());
        self.check();
        Ok(())
    }
}

fn evaluated_files(p: &Pod, node: &NodeSettings) -> BTreeMap<(PathBuf, String), String> {
    let eval = policy()
        .evaluate(p, node)
        .expect("call")
        .expect("evaluates");
    let mut files = BTreeMap::new();
    for f in &eval.pod_cgroup_files {
        files.insert(
            (PathBuf::from("pod"), f.file.to_string()),
            f.value.to_string(),
        );
    }
    for c in &eval.containers {
        for f in &c.cgroup_files {
            files.insert(
                (PathBuf::from("pod").join(&c.name), f.file.to_string()),
                f.value.to_string(),
            );
        }
    }
    files
}

fn run(plan: &ResizePlan, io: &mut FakeCgroups) -> Execution {
    execute(
        plan,
        Path::new("pod"),
        &|c: &str| PathBuf::from("pod").join(c),
        io,
    )
}

#[test]
fn a_memory_decrease_below_usage_is_deferred_not_applied() {
    let current = pod(vec![container("c1", ("1", "1"), ("2Gi", "2Gi"))]);
    let desired = pod(vec![container("c1", ("1", "1"), ("1Gi", "1Gi"))]);
    let plan = plan(&current, &desired, &node());
    assert_eq!(plan.steps[0].kind, ResizeStepKind::CheckMemoryUsage);
    let mut io = FakeCgroups {
        files: evaluated_files(&current, &node()),
        writes: 0,
        fail_at: None,
        explicit_pod_limits: false,
        containers: vec!["c1".into()],
        violations: Vec::new(),
    };
    io.files.insert(
        (PathBuf::from("pod/c1"), "memory.current".into()),
        (1536u64 << 20).to_string(),
    );
    let result = run(&plan, &mut io);
    assert_eq!(
        result.outcome,
        Outcome::Deferred {
            step: 0,
            usage: 1536 << 20,
            limit: 1 << 30
        }
    );
    assert_eq!(io.writes, 0, "nothing is written when the guard defers");
    // Once usage drops, the same plan completes.
    io.files.insert(
        (PathBuf::from("pod/c1"), "memory.current".into()),
        (512u64 << 20).to_string(),
    );
    assert_eq!(run(&plan, &mut io).outcome, Outcome::Completed);
    assert_eq!(
        io.files
            .get(&(PathBuf::from("pod/c1"), "memory.max".to_string()))
            .map(String::as_str),
        Some("1073741824")
    );
}

fn quantities() -> impl Strategy<Value = (u64, u64)> {
    // (cpu millicores, memory MiB) on a coarse grid so values repeat and cross.
    (
        (1u64..=8).prop_map(|n| n * 250),
        (1u64..=8).prop_map(|n| n * 128),
    )
}

fn resources_json(guaranteed: bool, cpu: u64, mem: u64) -> Value {
    if guaranteed {
        json!({"requests": {"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")},
               "limits": {"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")}})
    } else {
        json!({"requests": {"cpu": format!("{}m", cpu / 2), "memory": format!("{}Mi", mem / 2)},
               "limits": {"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")}})
    }
}

fn pod_of(guaranteed: bool, pod_level: Option<(u64, u64)>, values: &[(u64, u64)]) -> Pod {
    let containers: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, (cpu, mem))| json!({"name": format!("c{i}"), "resources": resources_json(guaranteed, *cpu, *mem)}))
        .collect();
    let mut spec = json!({"containers": containers});
    if let Some((cpu, mem)) = pod_level {
        spec["resources"] = resources_json(guaranteed, cpu * 4, mem * 4);
    }
    pod_from_json(&json!({"metadata": {"name": "p"}, "spec": spec})).expect("pod")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Inject a failure at every write position; the invariants hold at every
    /// moment, and re-running the same plan completes to the desired values.
    #[test]
    fn failures_at_any_step_keep_invariants_and_rerun_converges(
        guaranteed in any::<bool>(),
        explicit in any::<bool>(),
        old in proptest::collection::vec(quantities(), 1..=3),
        new_values in proptest::collection::vec(quantities(), 3),
        old_pod in quantities(),
        new_pod in quantities(),
    ) {
        let node = NodeSettings { feature_gates: vec![FeatureGate { name: "InPlacePodVerticalScaling".into(), enabled: true }], ..node() };
        let new: Vec<(u64, u64)> = new_values.into_iter().take(old.len()).collect();
        let current = pod_of(guaranteed, explicit.then_some(old_pod), &old);
        let desired = pod_of(guaranteed, explicit.then_some(new_pod), &new);
        // Only pods the API server admitted can be running.
        prop_assume!(policy().validate_pod(&current, &node).expect("call").is_empty());
        let plan = policy().resize_plan(&current, &desired, &Vec::new(), &node).expect("call").expect("plan");
        prop_assume!(plan.decision == ResizeDecision::Accepted);
        let containers: Vec<String> = (0..old.len()).map(|i| format!("c{i}")).collect();
        let start = evaluated_files(&current, &node);
        let target = evaluated_files(&desired, &node);
        let total_writes = plan.steps.iter().map(|s| s.files.len()).sum::<usize>();
        for fail_at in 0..=total_writes {
            let mut io = FakeCgroups {
                files: start.clone(),
                writes: 0,
                fail_at: Some(fail_at),
                explicit_pod_limits: explicit,
                containers: containers.clone(),
                violations: Vec::new(),
            };
            let first = run(&plan, &mut io);
            if fail_at < total_writes {
                prop_assert!(matches!(first.outcome, Outcome::Failed { .. }), "write {fail_at} should fail: {:?}", first.outcome);
            }
            let second = run(&plan, &mut io);
            prop_assert_eq!(second.outcome, Outcome::Completed);
            prop_assert!(io.violations.is_empty(), "{:?}", io.violations);
            for (key, value) in &target {
                if key.1.starts_with("cpu.") || key.1.starts_with("memory.") {
                    prop_assert_eq!(io.files.get(key), Some(value), "{:?}", key);
                }
            }
        }
    }
}

/// `podpolicy resize --apply` on a cgroup tree written by `podpolicy apply`:
/// it converges, is idempotent, and after a failed write a re-run completes.
#[test]
fn resize_cli_applies_converges_and_recovers_from_a_failed_write() {
    use crate::util::{podpolicy, temp_dir};
    let root = temp_dir("resize-cli");
    let root_arg = root.to_str().expect("utf-8");
    let node = "fixtures/nodes/node-1000gi.yaml";
    let (code, _, stderr) = podpolicy(&[
        "apply",
        "--node",
        node,
        "--cgroup-root",
        root_arg,
        "fixtures/resize/web-old.yaml",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // The node uses the systemd driver; a Guaranteed pod sits directly under kubepods.
    let pod_dir =
        root.join("kubepods.slice/kubepods-pod3f1e2d4c_0000_4d1e_8e2f_128700000001.slice");
    let read = |rel: &str| {
        std::fs::read_to_string(pod_dir.join(rel))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert_eq!(read("c1/memory.max"), (2u64 << 30).to_string());

    // Plan only.
    let (code, stdout, stderr) = podpolicy(&[
        "resize",
        "-o",
        "json",
        "--node",
        node,
        "fixtures/resize/web-old.yaml",
        "fixtures/resize/web-new.yaml",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let plan: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(plan["decision"], "Accepted");
    assert!(plan["execution"].is_null());

    // A failed write: c1's memory.max is unwritable (a directory).
    std::fs::remove_file(pod_dir.join("c1/memory.max")).expect("rm");
    std::fs::create_dir(pod_dir.join("c1/memory.max")).expect("mkdir");
    let args = [
        "resize",
        "-o",
        "json",
        "--apply",
        "--cgroup-root",
        root_arg,
        "--node",
        node,
        "fixtures/resize/web-old.yaml",
        "fixtures/resize/web-new.yaml",
    ];
    let (code, stdout, _) = podpolicy(&args);
    assert_eq!(code, 2, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["execution"]["result"], "failed");
    let failed = report["execution"]["step"].as_u64().expect("step") as usize;
    let statuses: Vec<&str> = report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["status"].as_str().unwrap_or(""))
        .collect();
    assert!(
        statuses[..failed].iter().all(|s| *s != "not-run"),
        "{statuses:?}"
    );
    assert!(
        statuses[failed..].iter().all(|s| *s == "not-run"),
        "{statuses:?}"
    );

    // Repair and re-run: it completes, and the values are the new pod's.
    std::fs::remove_dir(pod_dir.join("c1/memory.max")).expect("rmdir");
    std::fs::write(pod_dir.join("c1/memory.max"), (2u64 << 30).to_string()).expect("restore");
    let (code, stdout, _) = podpolicy(&args);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(read("c1/memory.max"), (3u64 << 30).to_string());
    assert_eq!(read("c2/memory.max"), (1u64 << 30).to_string());
    assert_eq!(read("c2/cpu.max"), "100000 100000");
    assert_eq!(read("cpu.max"), "700000 100000");

    // Idempotent: a third run writes nothing.
    let (code, stdout, _) = podpolicy(&args);
    assert_eq!(code, 0, "{stdout}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    for step in report["steps"].as_array().expect("steps") {
        assert_ne!(step["status"], "applied", "{step}");
    }
}

#[test]
fn resize_cli_reports_rejections() {
    use crate::util::podpolicy;
    let dir = crate::util::temp_dir("resize-reject");
    let burstable = dir.join("burstable.yaml");
    std::fs::write(
        &burstable,
        "kind: Pod\nmetadata: {name: web, uid: 3f1e2d4c-0000-4d1e-8e2f-128700000001}\nspec:\n  containers:\n  - {name: c1, resources: {requests: {cpu: '1'}, limits: {cpu: '2'}}}\n  - {name: c2}\n  - {name: c3}\n",
    )
    .expect("write");
    let (code, stdout, _) = podpolicy(&[
        "resize",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/resize/web-old.yaml",
        burstable.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("decision  Invalid")
            && stdout.contains("Pod QOS Class may not change as a result of resizing"),
        "{stdout}"
    );
    let (code, stdout, _) = podpolicy(&[
        "resize",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "--others",
        "cpu=60",
        "fixtures/resize/web-old.yaml",
        "fixtures/resize/web-new.yaml",
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("decision  Deferred"), "{stdout}");
}

/// plugin/pkg/admission/podresize: `PodResizeValidator` judges a resize only
/// of a pod bound to a node, against that node's allocatable. The plan
/// reports its refusal for a pod bound to the node the settings name (or to
/// any node, when the settings name none), and never for a pod that is not
/// bound or is bound to another node; the kubelet's own decision on these
/// settings (Infeasible) is the same in every case.
#[test]
fn the_api_refusal_is_for_a_pod_bound_to_this_node() {
    let bound = |node_name: Option<&str>, cpu: &str| {
        let mut spec = json!({"containers": [container("c1", (cpu, cpu), ("1Gi", "1Gi"))]});
        if let Some(name) = node_name {
            spec["nodeName"] = json!(name);
        }
        pod_from_json(&json!({"metadata": {"name": "p", "uid": "u1"}, "spec": spec})).expect("pod")
    };
    let named = |name: &str| NodeSettings {
        name: name.into(),
        ..node()
    };
    for (node_name, settings, refused) in [
        (Some("node-a"), named("node-a"), true),
        (Some("node-a"), named(""), true),
        (Some("node-b"), named("node-a"), false),
        (None, named("node-a"), false),
        (Some(""), named(""), false),
    ] {
        let case = format!("pod on {node_name:?}, settings of {:?}", settings.name);
        let got = plan(&bound(node_name, "2"), &bound(node_name, "32"), &settings);
        assert_eq!(got.decision, ResizeDecision::Infeasible, "{case}");
        assert_eq!(
            got.message, "Node didn't have enough capacity: cpu, requested: 32000, capacity: 16000",
            "{case}"
        );
        if refused {
            assert_eq!(got.errors.len(), 1, "{case}: {:?}", got.errors);
            assert_eq!(got.errors[0].reason, ErrorReason::Forbidden, "{case}");
            assert_eq!(
                got.errors[0].message,
                "node didn't have enough allocatable resources: cpu, requested: 32000, allocatable: 16000",
                "{case}"
            );
        } else {
            assert!(got.errors.is_empty(), "{case}: {:?}", got.errors);
        }
        // Within the allocatable, no refusal anywhere.
        let got = plan(&bound(node_name, "2"), &bound(node_name, "4"), &settings);
        assert_eq!(got.decision, ResizeDecision::Accepted, "{case}");
        assert!(got.errors.is_empty(), "{case}");
    }
}
