//! Kubelet parity: values that upstream Kubernetes' own tests assert, through
//! the component. Each test names the upstream file and test (or code) that
//! defines its expectation.

use podpolicy::bindings::{
    CgroupFile, ErrorReason, FeatureGate, KubeletName as _, MemoryReservationPolicy, NodeCgroup,
    NodeSettings, Pod, PodEvaluation, ResizeDecision, ResizePlan, ResizeResource, ResizeState,
    ResizeStepKind, ResourceQuantity,
};
use podpolicy::empty_node;
use podpolicy::pod_input::pod_from_json;
use serde_json::{Value, json};

use crate::util::{podpolicy, policy, temp_dir, workspace};

fn list(pairs: &[(&str, &str)]) -> Vec<ResourceQuantity> {
    pairs
        .iter()
        .map(|(name, quantity)| ResourceQuantity {
            name: (*name).into(),
            quantity: (*quantity).into(),
        })
        .collect()
}

fn gate(name: &str, enabled: bool) -> FeatureGate {
    FeatureGate {
        name: name.into(),
        enabled,
    }
}

fn node() -> NodeSettings {
    NodeSettings {
        capacity: list(&[("cpu", "16"), ("memory", "64Gi")]),
        ..empty_node()
    }
}

fn pod(spec: Value) -> Pod {
    pod_from_json(
        &json!({"metadata": {"name": "p", "namespace": "default", "uid": "u-1"}, "spec": spec}),
    )
    .expect("pod")
}

fn plan(current: &Pod, desired: &Pod, node: &NodeSettings) -> ResizePlan {
    policy()
        .resize_plan(current, desired, &Vec::new(), node)
        .expect("call")
        .expect("plan")
}

fn evaluate(pod: &Pod, node: &NodeSettings) -> PodEvaluation {
    policy()
        .evaluate(pod, node)
        .expect("call")
        .expect("evaluation")
}

fn file(files: &[CgroupFile], name: &str) -> Option<String> {
    files
        .iter()
        .find(|f| f.file.to_string() == name)
        .map(|f| f.value.to_string())
}

fn container<'a>(
    eval: &'a PodEvaluation,
    name: &str,
) -> &'a podpolicy::bindings::ContainerEvaluation {
    eval.containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn restarts(plan: &ResizePlan) -> Vec<(String, String)> {
    plan.steps
        .iter()
        .filter(|s| s.kind == ResizeStepKind::RestartContainer)
        .map(|s| {
            (
                s.container.clone().unwrap_or_default(),
                s.resource.kubelet_name().to_string(),
            )
        })
        .collect()
}

fn container_writes(plan: &ResizePlan, name: &str) -> usize {
    plan.steps
        .iter()
        .filter(|s| {
            s.kind == ResizeStepKind::WriteContainer && s.container.as_deref() == Some(name)
        })
        .count()
}

fn resized(cpu: (&str, &str), memory: (&str, &str), policy: Value) -> Value {
    json!({"name": "c1", "resizePolicy": policy, "resources": {
        "requests": {"cpu": cpu.0, "memory": memory.0},
        "limits": {"cpu": cpu.1, "memory": memory.1}}})
}

// ---------------------------------------------------------------------------
// KEP-1287: restart decisions
// ---------------------------------------------------------------------------

/// pkg/kubelet/kuberuntime/kuberuntime_manager_test.go
/// TestComputePodActionsForPodResize, "Update container memory (requests
/// only) with RestartContainer policy for memory": the container restarts
/// although no cgroup file changes (Memory QoS off).
#[test]
fn a_memory_request_change_restarts_a_restart_container_container() {
    let policy_list = json!([{"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    let current =
        pod(json!({"containers": [resized(("1", "2"), ("100Mi", "1Gi"), policy_list.clone())]}));
    let desired = pod(json!({"containers": [resized(("1", "2"), ("200Mi", "1Gi"), policy_list)]}));
    let plan = plan(&current, &desired, &node());
    assert_eq!(plan.decision, ResizeDecision::Accepted, "{}", plan.message);
    assert_eq!(restarts(&plan), [("c1".to_string(), "memory".to_string())]);
    assert_eq!(container_writes(&plan, "c1"), 0);
}

/// Same test, "Update container memory (requests only) with
/// RestartNotRequired policy for memory": no restart, and (Memory QoS off)
/// no cgroup file to write.
#[test]
fn a_memory_request_change_with_not_required_restarts_nothing() {
    let policy_list = json!([{"resourceName": "memory", "restartPolicy": "NotRequired"}]);
    let current =
        pod(json!({"containers": [resized(("1", "2"), ("100Mi", "1Gi"), policy_list.clone())]}));
    let desired = pod(json!({"containers": [resized(("1", "2"), ("200Mi", "1Gi"), policy_list)]}));
    let plan = plan(&current, &desired, &node());
    assert_eq!(plan.decision, ResizeDecision::Accepted);
    assert!(restarts(&plan).is_empty());
}

/// "Update container CPU resources with Restart policy for memory": the cpu
/// change is made in place; "Update container CPU and memory resources with
/// Restart policy for CPU": the container restarts.
#[test]
fn the_policy_of_the_changed_resource_decides() {
    let memory_restarts = json!([
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}]);
    let current =
        pod(json!({"containers": [resized(("1", "2"), ("1Gi", "2Gi"), memory_restarts.clone())]}));
    let desired =
        pod(json!({"containers": [resized(("2", "3"), ("1Gi", "2Gi"), memory_restarts)]}));
    let p = plan(&current, &desired, &node());
    assert!(restarts(&p).is_empty());
    assert!(container_writes(&p, "c1") > 0);

    let cpu_restarts = json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]);
    let current =
        pod(json!({"containers": [resized(("1", "2"), ("1Gi", "2Gi"), cpu_restarts.clone())]}));
    let desired = pod(json!({"containers": [resized(("2", "3"), ("2Gi", "3Gi"), cpu_restarts)]}));
    let p = plan(&current, &desired, &node());
    assert_eq!(restarts(&p), [("c1".to_string(), "cpu".to_string())]);
    // A restarted container gets no in-place writes: it starts with the new values.
    assert_eq!(container_writes(&p, "c1"), 0);
}

/// A cpu request change inside the same cpu.weight (100m -> 101m: shares
/// 102 -> 103, weight 4 both) still restarts a RestartContainer container:
/// computePodResizeAction compares the requests, not the cgroup files.
#[test]
fn a_cpu_request_change_within_one_weight_restarts() {
    let cpu_restarts = json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]);
    let current =
        pod(json!({"containers": [resized(("100m", "1"), ("1Gi", "2Gi"), cpu_restarts.clone())]}));
    let desired =
        pod(json!({"containers": [resized(("101m", "1"), ("1Gi", "2Gi"), cpu_restarts)]}));
    let p = plan(&current, &desired, &node());
    assert_eq!(p.decision, ResizeDecision::Accepted);
    assert_eq!(restarts(&p), [("c1".to_string(), "cpu".to_string())]);
}

/// test/e2e/common/node/pod_level_resources_resize.go (doPatchAndRollbackPLR,
/// "[cpu restart] resizing only pod-level cpu"): a pod-level change restarts
/// no container, even one without limits of its own whose cpu policy is
/// RestartContainer.
#[test]
fn a_pod_level_limit_change_restarts_no_container() {
    let mk = |limit: &str| {
        pod(
            json!({"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": limit, "memory": "2Gi"}},
            "containers": [{"name": "c1", "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}],
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}),
        )
    };
    let p = plan(&mk("2"), &mk("3"), &node());
    assert_eq!(p.decision, ResizeDecision::Accepted, "{}", p.message);
    assert!(restarts(&p).is_empty(), "{:?}", restarts(&p));
}

// ---------------------------------------------------------------------------
// KEP-1287: the API server's resize validation
// ---------------------------------------------------------------------------

fn only_error(plan: &ResizePlan) -> (String, ErrorReason, String) {
    assert_eq!(plan.decision, ResizeDecision::Invalid, "{}", plan.message);
    let e = plan.errors.first().expect("an error");
    (e.field.clone(), e.reason, e.message.clone())
}

/// pkg/apis/core/validation/validation_test.go TestValidatePodResize,
/// "Pod QoS unchanged, burstable -> burstable, remove cpu limit" and
/// "… remove memory request".
#[test]
fn limits_and_requests_cannot_be_removed() {
    let current = pod(json!({"containers": [{"name": "c1", "resources": {
        "requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}));
    let no_cpu_limit = pod(json!({"containers": [{"name": "c1", "resources": {
        "requests": {"cpu": "100m", "memory": "100Mi"}, "limits": {"memory": "200Mi"}}}]}));
    assert_eq!(
        only_error(&plan(&current, &no_cpu_limit, &node())),
        (
            "spec.containers[0].resources.limits".into(),
            ErrorReason::Forbidden,
            "resource limits cannot be removed".into()
        )
    );
    let no_memory_request = pod(json!({"containers": [{"name": "c1", "resources": {
        "requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "200Mi"}}}]}));
    assert_eq!(
        only_error(&plan(&current, &no_memory_request, &node())),
        (
            "spec.containers[0].resources.requests".into(),
            ErrorReason::Forbidden,
            "resource requests cannot be removed".into()
        )
    );
    // "Pod QoS unchanged, burstable -> burstable, add limits": valid.
    let fewer =
        pod(json!({"containers": [{"name": "c1", "resources": {"requests": {"cpu": "100m"}}}]}));
    let more = pod(json!({"containers": [{"name": "c1", "resources": {
        "requests": {"cpu": "100m"}, "limits": {"cpu": "200m"}}}]}));
    assert_eq!(
        plan(&fewer, &more, &node()).decision,
        ResizeDecision::Accepted
    );
}

/// "pod container rename", "pod container addition", "storage request
/// change", "windows pod, resource change" and the static-pod check.
#[test]
fn resize_validation_paths_and_messages() {
    let c = |name: &str, storage: &str| json!({"name": name, "resources": {"requests": {"cpu": "1", "ephemeral-storage": storage}}});
    let current = pod(json!({"containers": [c("c1", "1Gi"), c("c2", "1Gi")]}));
    let renamed = pod(json!({"containers": [c("c1", "1Gi"), c("c3", "1Gi")]}));
    assert_eq!(
        only_error(&plan(&current, &renamed, &node())),
        (
            "spec.containers[1].name".into(),
            ErrorReason::Forbidden,
            "containers may not be renamed or reordered on resize".into()
        )
    );
    let added = pod(json!({"containers": [c("c1", "1Gi"), c("c2", "1Gi"), c("c3", "1Gi")]}));
    assert_eq!(
        only_error(&plan(&current, &added, &node())),
        (
            "spec.containers".into(),
            ErrorReason::Forbidden,
            "containers may not be added or removed on resize".into()
        )
    );
    let storage = pod(json!({"containers": [c("c1", "2Gi"), c("c2", "1Gi")]}));
    assert_eq!(
        only_error(&plan(&current, &storage, &node())),
        (
            "spec".into(),
            ErrorReason::Forbidden,
            "only cpu and memory resources are mutable".into()
        )
    );
    let windows = |cpu: &str| {
        pod(
            json!({"os": {"name": "windows"}, "containers": [{"name": "c1", "resources": {"requests": {"cpu": cpu}}}]}),
        )
    };
    assert_eq!(
        only_error(&plan(&windows("1"), &windows("2"), &node())),
        (
            String::new(),
            ErrorReason::Forbidden,
            "windows pods cannot be resized".into()
        )
    );
    let mirror = |cpu: &str| {
        pod_from_json(
            &json!({"metadata": {"name": "m", "annotations": {"kubernetes.io/config.mirror": "x"}},
            "spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": cpu}}}]}}),
        )
        .expect("pod")
    };
    assert_eq!(
        only_error(&plan(&mirror("1"), &mirror("2"), &node())),
        (
            String::new(),
            ErrorReason::Forbidden,
            "static pods cannot be resized".into()
        )
    );
    // "pod-level resources with pod-level storage changes".
    let pod_level = |storage: &str| {
        pod(
            json!({"resources": {"requests": {"cpu": "1", "ephemeral-storage": storage}},
            "containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}}}]}),
        )
    };
    // (Upstream's spec validation refuses pod-level ephemeral-storage too;
    // the test matches the resize error among them.)
    let p = plan(&pod_level("1Gi"), &pod_level("2Gi"), &node());
    assert_eq!(p.decision, ResizeDecision::Invalid);
    assert!(
        p.errors.iter().any(|e| e.field == "spec"
            && e.reason == ErrorReason::Forbidden
            && e.message == "only cpu and memory resources are mutable at pod-level"),
        "{:?}",
        p.errors
    );
}

// ---------------------------------------------------------------------------
// KEP-1287: a pending resize is evaluated from the allocated resources
// ---------------------------------------------------------------------------

/// pkg/kubelet/allocation/allocation_manager.go `UpdatePodFromAllocation`:
/// while a resize is Deferred the kubelet runs the pod with its allocated
/// resources (test/e2e/common/node/pod_resize.go checks the cgroup values
/// keep the old resources until the resize is actuated).
fn deferred_pod() -> Pod {
    pod_from_json(&deferred_pod_json()).expect("pod")
}

/// [`deferred_pod`] as JSON.
fn deferred_pod_json() -> Value {
    json!({"metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
        "spec": {"containers": [{"name": "c1", "resources": {
            "requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}}]},
        "status": {"qosClass": "Guaranteed",
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
            "containerStatuses": [{"name": "c1", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                "allocatedResources": {"cpu": "1", "memory": "1Gi"},
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}})
}

#[test]
fn a_deferred_resize_runs_on_the_allocated_resources() {
    let eval = evaluate(&deferred_pod(), &node());
    let c1 = container(&eval, "c1");
    assert_eq!(
        file(&c1.cgroup_files, "cpu.max").as_deref(),
        Some("100000 100000")
    );
    assert_eq!(
        file(&c1.cgroup_files, "memory.max").as_deref(),
        Some("1073741824")
    );
    assert_eq!(
        file(&eval.pod_cgroup_files, "memory.max").as_deref(),
        Some("1073741824")
    );
    let pending = eval.pending_resize.expect("pending resize");
    assert_eq!(pending.state, ResizeState::Deferred);
    assert_eq!(pending.changes.len(), 1);
    assert_eq!(pending.changes[0].container.as_deref(), Some("c1"));

    // `explain` shows the desired next to the allocated resources.
    let dir = temp_dir("parity-deferred");
    let path = dir.join("pod.json");
    let pod_json = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "uid": "u-1"},
        "spec": {"containers": [{"name": "c1", "image": "i", "resources": {
            "requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}}]},
        "status": {"qosClass": "Guaranteed",
            "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
            "containerStatuses": [{"name": "c1", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                "allocatedResources": {"cpu": "1", "memory": "1Gi"},
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}});
    std::fs::write(&path, pod_json.to_string()).expect("write");
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("resize Deferred"), "{stdout}");
    assert!(
        stdout.contains("desired requests cpu=2 memory=2Gi"),
        "{stdout}"
    );
    assert!(
        stdout.contains("allocated requests cpu=1 memory=1Gi"),
        "{stdout}"
    );
}

/// The resize state crosses as an enum: each condition the kubelet sets
/// (`PodResizePending` with `Deferred` or `Infeasible`,
/// `PodResizeInProgress`), and a pending condition whose reason is none of
/// the kubelet's (the API server stores what a client writes) as `Pending`;
/// a `False` condition is no resize. The host prints each as the policy
/// names it.
#[test]
fn every_resize_condition_gives_its_state() {
    let with = |conditions: Value| {
        let mut pod = deferred_pod_json();
        pod["status"]["conditions"] = conditions;
        pod_from_json(&pod).expect("pod")
    };
    let pending = |reason: Option<&str>| {
        let mut condition = json!({"type": "PodResizePending", "status": "True"});
        if let Some(reason) = reason {
            condition["reason"] = json!(reason);
        }
        json!([condition])
    };
    for (conditions, state, text) in [
        (
            pending(Some("Infeasible")),
            ResizeState::Infeasible,
            "Infeasible",
        ),
        (pending(None), ResizeState::Pending, "Pending"),
        (
            pending(Some("SomethingElse")),
            ResizeState::Pending,
            "Pending",
        ),
        (
            json!([{"type": "PodResizeInProgress", "status": "True"}]),
            ResizeState::InProgress,
            "InProgress",
        ),
        (
            json!([{"type": "PodResizeInProgress", "status": "True", "reason": "Error"},
                {"type": "PodResizePending", "status": "True", "reason": "Deferred"}]),
            ResizeState::Deferred,
            "Deferred",
        ),
    ] {
        let eval = evaluate(&with(conditions.clone()), &node());
        let pending = eval.pending_resize.expect("a pending resize");
        assert_eq!(pending.state, state, "{conditions}");
        assert_eq!(pending.state.to_string(), text, "{conditions}");
    }
    let eval = evaluate(
        &with(json!([{"type": "PodResizePending", "status": "False", "reason": "Deferred"}])),
        &node(),
    );
    assert_eq!(eval.pending_resize, None);
}

/// kubernetes PR 139377 ("clear stale memory.high on containers when
/// MemoryQoS is disabled"); test/e2e_node/memory_qos_test.go "should clear
/// stale memory.high when MemoryQoS is disabled and container is resized".
#[test]
fn a_resize_without_memory_qos_resets_memory_high() {
    let mk = |memory: &str| {
        pod(json!({"containers": [resized(("1", "2"), ("512Mi", memory), json!([]))]}))
    };
    let p = plan(&mk("1Gi"), &mk("2Gi"), &node());
    let memory_step = p
        .steps
        .iter()
        .find(|s| s.kind == ResizeStepKind::WriteContainer && s.resource == ResizeResource::Memory)
        .expect("a container memory write");
    assert_eq!(
        file(&memory_step.files, "memory.high").as_deref(),
        Some("max")
    );
    // With Memory QoS on, memory.high is the formula's value instead.
    let qos_on = NodeSettings {
        feature_gates: vec![gate("MemoryQoS", true)],
        ..node()
    };
    let p = plan(&mk("1Gi"), &mk("2Gi"), &qos_on);
    let memory_step = p
        .steps
        .iter()
        .find(|s| s.kind == ResizeStepKind::WriteContainer && s.resource == ResizeResource::Memory)
        .expect("a container memory write");
    assert_ne!(
        file(&memory_step.files, "memory.high").as_deref(),
        Some("max")
    );
}

// ---------------------------------------------------------------------------
// KEP-2570: TieredReservation
// ---------------------------------------------------------------------------

fn tiered() -> NodeSettings {
    NodeSettings {
        feature_gates: vec![gate("MemoryQoS", true)],
        memory_reservation_policy: Some(MemoryReservationPolicy::TieredReservation),
        ..node()
    }
}

/// test/e2e_node/memory_qos_test.go "should set memory.low =
/// requests.memory for Burstable pod containers" (256Mi / 512Mi) and
/// "should set memory.min for Guaranteed pod containers"; pkg/kubelet/cm
/// helpers_linux_test.go TestResourceConfigForPodWithEnforceMemoryQoS
/// ("burstable-with-limits": pod memory.low).
#[test]
fn tiered_reservation_protects_burstable_memory_with_memory_low() {
    let burstable = pod(json!({"containers": [{"name": "c1", "resources": {
        "requests": {"memory": "256Mi"}, "limits": {"memory": "512Mi"}}}]}));
    let eval = evaluate(&burstable, &tiered());
    let c1 = container(&eval, "c1");
    assert_eq!(
        file(&c1.cgroup_files, "memory.low").as_deref(),
        Some("268435456")
    );
    assert_eq!(file(&c1.cgroup_files, "memory.min").as_deref(), None);
    assert_eq!(
        file(&eval.pod_cgroup_files, "memory.low").as_deref(),
        Some("268435456")
    );

    let guaranteed = pod(json!({"containers": [{"name": "c1", "resources": {
        "requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "100m", "memory": "256Mi"}}}]}));
    let eval = evaluate(&guaranteed, &tiered());
    let c1 = container(&eval, "c1");
    assert_eq!(
        file(&c1.cgroup_files, "memory.min").as_deref(),
        Some("268435456")
    );
    assert_eq!(file(&c1.cgroup_files, "memory.low").as_deref(), None);
}

/// pkg/kubelet/cm/qos_container_manager_linux_test.go TestQoSContainerCgroup
/// "writes aggregated memory min" (activeTestPods: Guaranteed 128Mi,
/// Burstable 128Mi + 256Mi): kubepods memory.min 512Mi, Burstable
/// memory.low 384Mi; kubepods memory.low 384Mi (kubernetes PR 140267).
#[test]
fn qos_tiers_sum_the_active_pods() {
    let pods = [
        pod(json!({"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}}]})),
        pod(json!({"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "256Mi"}}}]})),
        pod(json!({"containers": [{"name": "c", "resources": {
            "requests": {"cpu": "2", "memory": "256Mi"}}}]})),
    ];
    let values = policy()
        .node_cgroups(&pods, &tiered())
        .expect("call")
        .expect("values");
    let get = |cgroup: NodeCgroup, name: &str| {
        values
            .cgroups
            .iter()
            .find(|c| c.cgroup == cgroup)
            .and_then(|c| file(&c.files, name))
    };
    assert_eq!(
        get(NodeCgroup::Kubepods, "memory.min").as_deref(),
        Some("536870912")
    );
    assert_eq!(
        get(NodeCgroup::Kubepods, "memory.low").as_deref(),
        Some("402653184")
    );
    assert_eq!(
        get(NodeCgroup::Burstable, "memory.low").as_deref(),
        Some("402653184")
    );
    // TestQOSCPUConfigUpdate: Burstable shares from the Burstable pods' cpu
    // requests (3 CPUs -> 3072 shares -> weight 118), BestEffort MinShares (weight 1).
    assert_eq!(
        get(NodeCgroup::Burstable, "cpu.weight").as_deref(),
        Some("118")
    );
    assert_eq!(
        get(NodeCgroup::Besteffort, "cpu.weight").as_deref(),
        Some("1")
    );
}

/// pkg/kubelet/cm/node_container_manager_linux_test.go
/// TestNodeAllocatableForEnforcement: capacity 10 CPUs / 10Gi, kube reserved
/// 100m / 100Mi, system reserved 50m / 50Mi, a 100Mi hard eviction
/// threshold: kubepods gets 9850m (shares 10086, weight 385) and 10090Mi;
/// the eviction threshold is not subtracted.
#[test]
fn kubepods_gets_node_allocatable_without_the_eviction_threshold() {
    let node = NodeSettings {
        capacity: list(&[("cpu", "10"), ("memory", "10Gi"), ("hugepages-2Mi", "1Gi")]),
        kube_reserved: list(&[("cpu", "100m"), ("memory", "100Mi")]),
        system_reserved: list(&[("cpu", "50m"), ("memory", "50Mi")]),
        eviction_hard: Some(vec![("memory.available".into(), "100Mi".into())]),
        ..empty_node()
    };
    let values = policy()
        .node_cgroups(&[], &node)
        .expect("call")
        .expect("values");
    let kubepods = values
        .cgroups
        .iter()
        .find(|c| c.cgroup == NodeCgroup::Kubepods)
        .expect("kubepods");
    assert_eq!(
        file(&kubepods.files, "memory.max").as_deref(),
        Some("10580131840")
    );
    assert_eq!(file(&kubepods.files, "cpu.weight").as_deref(), Some("385"));
    // The QoS manager's periodic update leaves hugetlb unbounded on its
    // cgroups, kubepods (its Guaranteed cgroup) included: 1 << 62.
    assert_eq!(
        file(&kubepods.files, "hugetlb.2MB.max").as_deref(),
        Some("4611686018427387904")
    );
}

// ---------------------------------------------------------------------------
// Hugepages
// ---------------------------------------------------------------------------

/// runc libcontainer fs2 `setHugeTlb` writes `hugetlb.<size>.rsvd.max`
/// with the same value where the kernel has it (5.7+); kubernetes PR 131089
/// ("propagate pod level hugepages to containers", kuberuntime
/// TestGetHugepageLimitsFromResources): a container without hugepage limits
/// gets the pod-level ones.
#[test]
fn hugepages_reservations_and_pod_level_limits() {
    let node = NodeSettings {
        capacity: list(&[("cpu", "16"), ("memory", "64Gi"), ("hugepages-2Mi", "1Gi")]),
        kernel_version: Some("6.1.0".into()),
        ..empty_node()
    };
    let p = pod(json!({
        "resources": {"requests": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "100Mi"},
                      "limits": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "100Mi"}},
        "containers": [
            {"name": "plain", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}}},
            {"name": "own", "resources": {"requests": {"cpu": "500m", "memory": "512Mi", "hugepages-2Mi": "50Mi"},
                "limits": {"cpu": "500m", "memory": "512Mi", "hugepages-2Mi": "50Mi"}}}]}));
    let eval = evaluate(&p, &node);
    let plain = container(&eval, "plain");
    assert_eq!(
        file(&plain.cgroup_files, "hugetlb.2MB.max").as_deref(),
        Some("104857600")
    );
    assert_eq!(
        file(&plain.cgroup_files, "hugetlb.2MB.rsvd.max").as_deref(),
        Some("104857600")
    );
    let own = container(&eval, "own");
    assert_eq!(
        file(&own.cgroup_files, "hugetlb.2MB.max").as_deref(),
        Some("52428800")
    );
    assert_eq!(
        file(&eval.pod_cgroup_files, "hugetlb.2MB.rsvd.max").as_deref(),
        Some("104857600")
    );
    // A kernel before 5.7 has no reservation files.
    let old_kernel = NodeSettings {
        kernel_version: Some("5.4.0".into()),
        ..node
    };
    let eval = evaluate(&p, &old_kernel);
    assert_eq!(
        file(&eval.pod_cgroup_files, "hugetlb.2MB.rsvd.max").as_deref(),
        None
    );
    assert_eq!(
        file(&eval.pod_cgroup_files, "hugetlb.2MB.max").as_deref(),
        Some("104857600")
    );
}

// ---------------------------------------------------------------------------
// Ephemeral containers
// ---------------------------------------------------------------------------

/// KEP-2837 "Ephemeral Containers": capped by pod-level limits.
/// pkg/kubelet/kuberuntime/kuberuntime_container_linux.go `getCPULimit` /
/// `getMemoryLimit` fall back to the pod-level limits for a container
/// without its own, and `calculateLinuxResources` takes the shares from the
/// cpu limit when there is no request; pkg/kubelet/qos/policy.go gives a
/// Burstable container without a memory request 999.
#[test]
fn ephemeral_containers_are_evaluated_and_capped_by_pod_limits() {
    let p = pod(json!({
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}],
        "ephemeralContainers": [{"name": "debugger"}]}));
    let eval = evaluate(&p, &node());
    let debugger = container(&eval, "debugger");
    assert_eq!(debugger.kind, podpolicy::bindings::ContainerKind::Ephemeral);
    assert_eq!(
        file(&debugger.cgroup_files, "cpu.max").as_deref(),
        Some("200000 100000")
    );
    assert_eq!(
        file(&debugger.cgroup_files, "memory.max").as_deref(),
        Some("1073741824")
    );
    assert_eq!(
        file(&debugger.cgroup_files, "cpu.weight").as_deref(),
        Some("79")
    );
    assert_eq!(debugger.oom_score_adj, 999);
    // Without pod-level resources: minimum shares, no limits.
    let p = pod(json!({
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "500m"}}}],
        "ephemeralContainers": [{"name": "debugger"}]}));
    let eval = evaluate(&p, &node());
    let debugger = container(&eval, "debugger");
    assert_eq!(
        file(&debugger.cgroup_files, "cpu.max").as_deref(),
        Some("max 100000")
    );
    assert_eq!(
        file(&debugger.cgroup_files, "memory.max").as_deref(),
        Some("max")
    );
    assert_eq!(
        file(&debugger.cgroup_files, "cpu.weight").as_deref(),
        Some("1")
    );
}

/// `apply` writes the ephemeral container's cgroup too (it used to refuse
/// the pod: "the policy answered for containers [app], the pod has [app, debugger]").
#[test]
fn apply_writes_ephemeral_containers() {
    let dir = temp_dir("parity-ephemeral");
    let root = dir.join("cgroup");
    std::fs::create_dir_all(&root).expect("root");
    let path = dir.join("pod.yaml");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: dbg, namespace: default, uid: 5e1f0000-0000-4000-8000-000000000001}\nspec:\n  resources: {limits: {cpu: '2', memory: 1Gi}}\n  containers:\n  - {name: app, image: i, resources: {requests: {cpu: 500m, memory: 256Mi}}}\n  ephemeralContainers:\n  - {name: debugger, image: busybox}\n",
    )
    .expect("write");
    let (code, stdout, stderr) = podpolicy(&[
        "apply",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "--cgroup-root",
        root.to_str().expect("utf-8"),
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let max = std::fs::read_to_string(
        root.join("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5e1f0000_0000_4000_8000_000000000001.slice/debugger/memory.max"),
    )
    .expect("debugger memory.max");
    assert_eq!(max.trim(), "1073741824");
}

// ---------------------------------------------------------------------------
// Static CPU manager nodes: one answer
// ---------------------------------------------------------------------------

/// pkg/kubelet/kuberuntime/kuberuntime_container_linux.go: with
/// DisableCPUQuotaWithExclusiveCPUs (on in 1.36) a container with exclusive
/// CPUs gets CpuQuota -1 (`cpu.max` "max 100000"), and its pod too
/// (pod_container_manager_linux.go `EnsureExists`). `explain` on the
/// dual-socket static node shows it with the cpusets `admit` gives.
#[test]
fn explain_on_a_static_node_shows_the_placement() {
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "fixtures/pods/kep5526-pod-scope-mixed.yaml",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    let pod = &report["pods"][0];
    assert_eq!(pod["podCgroup"]["cpu.max"], "max 100000");
    assert_eq!(pod["podCgroup"]["cpuset.cpus"], "2,4,8,10");
    let c1 = &pod["containers"][0];
    assert_eq!(c1["name"], "container-1");
    assert_eq!(c1["cgroup"]["cpu.max"], "max 100000");
    assert_eq!(c1["cgroup"]["cpuset.cpus"], "2,8");
    let c2 = &pod["containers"][1];
    assert_eq!(c2["cgroup"]["cpuset.cpus"], "4,10");
    assert_eq!(c2["cgroup"]["cpu.max"], "400000 100000");
}

/// After the agent applied a static node's pods, `apply --dry-run` with the
/// agent's state plans nothing: both write the component's placement files.
#[test]
fn apply_after_the_agent_plans_nothing() {
    let dir = temp_dir("parity-agent-apply");
    let (root, state, pods) = (dir.join("cgroup"), dir.join("state"), dir.join("pods"));
    for d in [&root, &state, &pods] {
        std::fs::create_dir_all(d).expect("dir");
    }
    std::fs::copy(
        workspace().join("fixtures/pods/kep5526-pod-scope-mixed.yaml"),
        pods.join("mixed.yaml"),
    )
    .expect("copy");
    std::fs::write(
        pods.join("burstable.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default, uid: 0b5e0000-0000-4000-8000-000000000002}\nspec:\n  containers:\n  - {name: app, image: i, resources: {requests: {cpu: 500m, memory: 256Mi}}}\n",
    )
    .expect("write");
    let (code, stdout, stderr) = podpolicy(&[
        "agent",
        "--once",
        "--metrics-addr",
        "off",
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "--sysfs",
        "fixtures/sysfs/topoDualSocketHT",
        "--pods-dir",
        pods.to_str().expect("utf-8"),
        "--cgroup-root",
        root.to_str().expect("utf-8"),
        "--state-dir",
        state.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let (code, stdout, stderr) = podpolicy(&[
        "apply",
        "--dry-run",
        "-o",
        "json",
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "--state",
        state.to_str().expect("utf-8"),
        "--cgroup-root",
        root.to_str().expect("utf-8"),
        pods.join("burstable.yaml").to_str().expect("utf-8"),
        pods.join("mixed.yaml").to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(report["changes"], json!([]), "{stdout}");
}

/// Policy names as the kubelet accepts them, and the kubelet's start-up
/// checks of the manager settings (cpumanager `NewManager`, memorymanager
/// `validateReservedMemory`, `ValidateKubeletConfiguration`).
#[test]
fn validate_node_checks_the_manager_settings() {
    let errors = |node: &NodeSettings| policy().validate_node(node).expect("call");
    // Policy and scope names are enums in the contract: the kubelet's
    // case-sensitive spelling is decoded from the configuration, and an
    // unknown one is refused there with its field path and upstream's words.
    let refused = |kubelet: &str| {
        let yaml = format!("name: n\nkubeletConfig:\n  {kubelet}\n");
        format!(
            "{:#}",
            podpolicy::node_input::parse_node("node.yaml", &yaml).expect_err(kubelet)
        )
    };
    let e = refused("cpuManagerPolicy: Static");
    assert!(
        e.contains("kubeletConfig.cpuManagerPolicy: unknown policy: \"Static\""),
        "{e}"
    );
    let e = refused("memoryManagerPolicy: static");
    assert!(
        e.contains("kubeletConfig.memoryManagerPolicy: unknown policy: \"static\""),
        "{e}"
    );
    let e = refused("topologyManagerPolicy: Best-Effort");
    assert!(
        e.contains("kubeletConfig.topologyManagerPolicy: invalid configuration: topologyManagerPolicy (--topology-manager-policy) \"Best-Effort\" must be one of"),
        "{e}"
    );
    let e = refused("topologyManagerScope: node");
    assert!(
        e.contains("kubeletConfig.topologyManagerScope: invalid configuration: topologyManagerScope (--topology-manager-scope) \"node\" must be one of"),
        "{e}"
    );
    let accepted = podpolicy::node_input::parse_node(
        "node.yaml",
        "name: n\nkubeletConfig:\n  cpuManagerPolicy: static\n  memoryManagerPolicy: Static\n  topologyManagerPolicy: single-numa-node\n  topologyManagerScope: pod\n",
    )
    .expect("kubelet spellings");
    assert_eq!(
        accepted.cpu_manager_policy,
        Some(podpolicy::bindings::CpuManagerPolicy::Static)
    );
    assert_eq!(
        accepted.memory_manager_policy,
        Some(podpolicy::bindings::MemoryManagerPolicy::Static)
    );
    assert_eq!(
        accepted.topology_manager_policy,
        Some(podpolicy::bindings::TopologyManagerPolicy::SingleNumaNode)
    );
    assert_eq!(
        accepted.topology_manager_scope,
        Some(podpolicy::bindings::TopologyManagerScope::Pod)
    );
    // Static memory: reservedMemory must add up to kube + system reserved +
    // the hard eviction threshold (default memory.available 100Mi).
    let reserved = |memory: &str| NodeSettings {
        memory_manager_policy: Some(podpolicy::bindings::MemoryManagerPolicy::Static),
        system_reserved: list(&[("memory", "924Mi")]),
        reserved_memory: vec![podpolicy::bindings::NumaReservedMemory {
            numa_node: 0,
            limits: list(&[("memory", memory)]),
        }],
        ..node()
    };
    assert!(
        errors(&reserved("1Gi")).is_empty(),
        "{:?}",
        errors(&reserved("1Gi"))
    );
    let e = errors(&reserved("2Gi"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(
        e[0].message,
        "the total amount \"2Gi\" of type \"memory\" is not equal to the value \"1Gi\" determined by Node Allocatable feature"
    );
    // The none CPU policy takes no options.
    let options = NodeSettings {
        cpu_manager_policy_options: vec![podpolicy::bindings::PolicyOption {
            name: "full-pcpus-only".into(),
            value: "true".into(),
        }],
        ..node()
    };
    assert!(
        errors(&options)
            .iter()
            .any(|e| e.field == "cpuManagerPolicyOptions"),
        "{:?}",
        errors(&options)
    );
}

/// `component`, built for contract `version`, is refused at load with a
/// message naming its version and this host's.
fn refused_naming_both(component: &[u8], version: &str) {
    use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
    let error = PolicyRuntime::from_bytes(component, &Cache::Off, Limits::default())
        .err()
        .expect("refused");
    let text = format!("{error:#}");
    assert!(
        text.contains(&format!("podpolicy:policy@{version}"))
            && text.contains(&format!("@{}", podpolicy::runtime::WIT_VERSION)),
        "{text}"
    );
}

/// Components built for earlier contracts (0.5.0; 0.6.0, the one before
/// `explain-values` and the admission rules; 0.7.0, the one with string
/// policy names and data-less manager errors; 0.8.0, the last flat world
/// without versioned interfaces) are refused at load, naming both versions.
#[test]
fn an_old_contract_component_is_refused_naming_both_versions() {
    for old in ["0.5.0", "0.6.0", "0.7.0", "0.8.0"] {
        refused_naming_both(&crate::hostile_policy::old_contract_component(old), old);
    }
}

/// A component of a later contract in today's interface layout (or of an
/// earlier one with versioned interfaces) is refused from its export names
/// alone (`podpolicy:policy/node@4.0.0`, ...), naming
/// both versions; and today's component imports nothing although its types
/// live in interfaces.
#[test]
fn a_later_contract_component_is_refused_from_its_export_names() {
    // 3.1.0 and 4.0.0, later than this host; 0.9.0, the first contract of
    // versioned interfaces, whose cgroup files were name and value strings;
    // 0.10.0, without the node-cgroups sum; 0.11.0, the last draft before
    // 1.0.0; 1.0.0, whose resize state and evaluation warnings were
    // strings; and 2.0.0, whose pod had no `spec.nodeName`: each refused,
    // naming both.
    for other in [
        "3.1.0", "4.0.0", "0.9.0", "0.10.0", "0.11.0", "1.0.0", "2.0.0",
    ] {
        refused_naming_both(
            &crate::hostile_policy::later_contract_component(other),
            other,
        );
    }

    let engine = wasmtime::Engine::default();
    let component =
        wasmtime::component::Component::new(&engine, podpolicy::runtime::EMBEDDED_POLICY)
            .expect("the embedded policy compiles");
    let ty = component.component_type();
    assert_eq!(ty.imports(&engine).count(), 0, "the policy imports nothing");
    let exports: Vec<String> = ty
        .exports(&engine)
        .map(|(name, _)| name.to_string())
        .collect();
    for interface in [
        "common", "node", "pod", "evaluate", "resize", "managers", "testing",
    ] {
        let name = format!(
            "podpolicy:policy/{interface}@{}",
            podpolicy::runtime::WIT_VERSION
        );
        assert!(exports.contains(&name), "no export {name}: {exports:?}");
    }
}
