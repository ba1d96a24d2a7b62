//! Memory QoS (KEP-2570) through the component: the KEP's tables, factor
//! validation, container values in `evaluate`, and node-level sums.

use podpolicy::bindings::{
    EvaluationWarning, FeatureGate, MemoryReservationPolicy, NodeCgroup, NodeSettings, QosClass,
    ResourceQuantity,
};
use podpolicy::empty_node;
use podpolicy::pod_input::pod_from_json;

use crate::util::policy;

const MI: u64 = 1 << 20;

fn memory_qos_node(policy_kind: MemoryReservationPolicy, factor: f64, page: u64) -> NodeSettings {
    NodeSettings {
        capacity: vec![
            ResourceQuantity {
                name: "memory".into(),
                quantity: "64Gi".into(),
            },
            ResourceQuantity {
                name: "cpu".into(),
                quantity: "32".into(),
            },
        ],
        allocatable: Some(vec![ResourceQuantity {
            name: "memory".into(),
            quantity: "16Gi".into(),
        }]),
        memory_throttling_factor: Some(factor),
        page_size_bytes: Some(page),
        memory_reservation_policy: Some(policy_kind),
        kube_reserved: vec![ResourceQuantity {
            name: "memory".into(),
            quantity: "1Gi".into(),
        }],
        system_reserved: vec![ResourceQuantity {
            name: "memory".into(),
            quantity: "512Mi".into(),
        }],
        enforce_node_allocatable: Some(vec![
            "pods".into(),
            "kube-reserved".into(),
            "system-reserved".into(),
        ]),
        feature_gates: vec![FeatureGate {
            name: "MemoryQoS".into(),
            enabled: true,
        }],
        ..empty_node()
    }
}

fn high(request: Option<u64>, limit: Option<u64>, factor: f64, qos: QosClass) -> Option<u64> {
    let node = memory_qos_node(MemoryReservationPolicy::HardReservation, factor, MI);
    policy()
        .container_memory_high(request, limit, qos, &node)
        .expect("call")
        .expect("valid node")
}

#[test]
fn kep_v1_27_table() {
    // limit 1000Mi, factor 0.9, 1Mi pages.
    let rows = [
        (0, 900),
        (100, 910),
        (200, 920),
        (300, 930),
        (400, 940),
        (500, 950),
        (600, 960),
        (700, 970),
        (800, 980),
        (900, 990),
    ];
    for (request, want) in rows {
        assert_eq!(
            high(
                Some(request * MI),
                Some(1000 * MI),
                0.9,
                QosClass::Burstable
            ),
            Some(want * MI),
            "request {request}Mi"
        );
    }
    // request == limit: not overcommitted, memory.high stays max.
    assert_eq!(
        high(Some(1000 * MI), Some(1000 * MI), 0.9, QosClass::Burstable),
        None
    );
}

#[test]
fn kep_v1_22_vs_v1_27_rows() {
    // Rows where the v1.22 formula (factor * limit) fell below the request and never throttled.
    assert_eq!(
        high(Some(800 * MI), Some(1000 * MI), 0.6, QosClass::Burstable),
        Some(920 * MI)
    );
    assert_eq!(
        high(Some(850 * MI), Some(1000 * MI), 0.8, QosClass::Burstable),
        Some(970 * MI)
    );
    assert_eq!(
        high(Some(500 * MI), Some(1000 * MI), 0.4, QosClass::Burstable),
        Some(700 * MI)
    );
}

#[test]
fn kep_qos_cases() {
    assert_eq!(
        high(Some(500 * MI), Some(1000 * MI), 0.9, QosClass::Guaranteed),
        None,
        "Guaranteed is exempt"
    );
    // Case I: request and limit.
    assert_eq!(
        high(Some(500 * MI), Some(1000 * MI), 0.9, QosClass::Burstable),
        Some(950 * MI)
    );
    // Case II: request, no limit -> node allocatable (16Gi) stands in.
    assert_eq!(
        high(Some(1024 * MI), None, 0.9, QosClass::Burstable),
        Some(14848 * MI)
    );
    // Case III: limit, no request.
    assert_eq!(
        high(None, Some(1000 * MI), 0.9, QosClass::Burstable),
        Some(900 * MI)
    );
    // BestEffort: factor * allocatable.
    assert_eq!(
        high(None, None, 0.9, QosClass::BestEffort),
        Some(14745 * MI)
    );
}

#[test]
fn invalid_throttling_factors_are_rejected() {
    for factor in [0.0, 1.5, f64::NAN, -0.5, f64::INFINITY] {
        let node = memory_qos_node(MemoryReservationPolicy::None, factor, 4096);
        let errors = policy().validate_node(&node).expect("call");
        let error = errors
            .iter()
            .find(|e| e.field == "memoryThrottlingFactor")
            .unwrap_or_else(|| panic!("factor {factor} accepted"));
        assert_eq!(
            error.message,
            "must be greater than 0 and less than or equal to 1.0"
        );
        // Every other call refuses the node too.
        let rejected = policy()
            .container_memory_high(Some(1), Some(2), QosClass::Burstable, &node)
            .expect("call");
        assert!(rejected.is_err(), "factor {factor}");
    }
    for factor in [0.0001, 0.9, 1.0] {
        let node = memory_qos_node(MemoryReservationPolicy::None, factor, 4096);
        assert!(
            policy().validate_node(&node).expect("call").is_empty(),
            "factor {factor}"
        );
    }
}

#[test]
fn evaluate_writes_container_memory_min_and_high() {
    let pod = pod_from_json(&serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [
            {"name": "a", "resources": {"requests": {"memory": "100Mi"}, "limits": {"memory": "200Mi"}}},
            {"name": "b"}
        ]}
    }))
    .expect("pod");
    let node = memory_qos_node(MemoryReservationPolicy::HardReservation, 0.9, 4096);
    let eval = policy()
        .evaluate(&pod, &node)
        .expect("call")
        .expect("evaluates");
    let files = |name: &str| {
        let c = eval
            .containers
            .iter()
            .find(|c| c.name == name)
            .expect("container");
        c.cgroup_files
            .iter()
            .map(|f| (f.file.to_string(), f.value.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let a = files("a");
    assert_eq!(a.get("memory.min").map(String::as_str), Some("104857600"));
    // floor((100Mi + 0.9 * 100Mi) / 4Ki) * 4Ki = 190Mi
    assert_eq!(a.get("memory.high").map(String::as_str), Some("199229440"));
    let b = files("b");
    assert_eq!(b.get("memory.min"), None);
    // BestEffort-like container in a Burstable pod: 0.9 * 16Gi allocatable, page-aligned.
    assert_eq!(
        b.get("memory.high").map(String::as_str),
        Some("15461879808")
    );
    let pod_min = eval
        .pod_cgroup_files
        .iter()
        .find(|f| f.file.to_string() == "memory.min")
        .map(|f| f.value.to_string());
    assert_eq!(pod_min.as_deref(), Some("104857600"));
}

/// Memory QoS on a kernel older than 5.9, or on one whose version does not
/// read, is a typed warning with the version it is about, in the pod's
/// evaluation and in the node-level answer alike; the host prints it with
/// the policy's words.
#[test]
fn old_kernels_get_a_warning() {
    let pod =
        pod_from_json(&serde_json::json!({"spec": {"containers": [{"name": "c"}]}})).expect("pod");
    let warnings_on = |kernel: &str| {
        let mut node = memory_qos_node(MemoryReservationPolicy::HardReservation, 0.9, 4096);
        node.kernel_version = Some(kernel.into());
        let eval = policy()
            .evaluate(&pod, &node)
            .expect("call")
            .expect("evaluates");
        let node_level = policy()
            .node_cgroups(std::slice::from_ref(&pod), &node)
            .expect("call")
            .expect("node cgroups");
        assert_eq!(node_level.warnings, eval.warnings, "kernel {kernel}");
        eval.warnings
    };

    let warnings = warnings_on("5.4.0-150-generic");
    assert_eq!(
        warnings,
        [EvaluationWarning::MemoryQosKernelTooOld(
            "5.4.0-150-generic".into()
        )]
    );
    assert!(
        warnings[0]
            .to_string()
            .starts_with("kernel 5.4.0-150-generic is older than 5.9: "),
        "{}",
        warnings[0]
    );

    // A version that does not read as major.minor is named, not guessed.
    let warnings = warnings_on("linux");
    assert_eq!(
        warnings,
        [EvaluationWarning::KernelVersionUnreadable("linux".into())]
    );
    assert_eq!(
        warnings[0].to_string(),
        "cannot read kernel version `linux`; Memory QoS needs 5.9 or newer"
    );

    assert_eq!(warnings_on("6.1.0-28-amd64"), []);
}

/// 30 pods of mixed QoS: node-level values equal sums computed here.
#[test]
fn node_level_values_are_sums_over_thirty_pods() {
    let mut pods = Vec::new();
    let (mut guaranteed, mut burstable) = (0u64, 0u64);
    for i in 0..30u64 {
        let mib = 64 * (i + 1);
        let json = match i % 3 {
            0 => {
                guaranteed += mib * MI;
                serde_json::json!({"metadata": {"name": format!("g{i}")}, "spec": {"containers": [{"name": "c", "resources": {
                    "requests": {"cpu": "100m", "memory": format!("{mib}Mi")}, "limits": {"cpu": "100m", "memory": format!("{mib}Mi")}}}]}})
            }
            1 => {
                // Sidecar + app: the pod request is their sum.
                burstable += (mib + 16) * MI;
                serde_json::json!({"metadata": {"name": format!("b{i}")}, "spec": {
                    "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"memory": "16Mi"}}}],
                    "containers": [{"name": "c", "resources": {"requests": {"memory": format!("{mib}Mi")}}}]}})
            }
            _ => {
                serde_json::json!({"metadata": {"name": format!("e{i}")}, "spec": {"containers": [{"name": "c"}]}})
            }
        };
        pods.push(pod_from_json(&json).expect("pod"));
    }
    let value = |qos: &podpolicy::bindings::NodeCgroups, cgroup: NodeCgroup, file: &str| {
        qos.cgroups
            .iter()
            .find(|c| c.cgroup == cgroup)
            .and_then(|c| c.files.iter().find(|f| f.file.to_string() == file))
            .map(|f| f.value.to_string().parse::<u64>().expect("number"))
    };

    let hard = memory_qos_node(MemoryReservationPolicy::HardReservation, 0.9, 4096);
    let qos = policy()
        .node_cgroups(&pods, &hard)
        .expect("call")
        .expect("values");
    assert_eq!(
        value(&qos, NodeCgroup::Kubepods, "memory.min"),
        Some(guaranteed + burstable)
    );
    assert_eq!(
        value(&qos, NodeCgroup::Burstable, "memory.min"),
        Some(burstable)
    );
    assert_eq!(
        value(&qos, NodeCgroup::Besteffort, "memory.min"),
        None,
        "BestEffort pods request nothing"
    );
    assert_eq!(
        value(&qos, NodeCgroup::KubeReserved, "memory.min"),
        Some(1 << 30)
    );
    assert_eq!(
        value(&qos, NodeCgroup::SystemReserved, "memory.min"),
        Some(512 * MI)
    );

    let tiered = memory_qos_node(MemoryReservationPolicy::TieredReservation, 0.9, 4096);
    let qos = policy()
        .node_cgroups(&pods, &tiered)
        .expect("call")
        .expect("values");
    assert_eq!(
        value(&qos, NodeCgroup::Kubepods, "memory.min"),
        Some(guaranteed + burstable)
    );
    assert_eq!(
        value(&qos, NodeCgroup::Burstable, "memory.low"),
        Some(burstable)
    );
    assert_eq!(value(&qos, NodeCgroup::Burstable, "memory.min"), None);
    // Upstream master (kubernetes PR 140267; test/e2e_node/memory_qos_test.go
    // "should propagate memory protection through QoS cgroup hierarchy"):
    // kubepods carries memory.low = the Burstable sum too.
    assert_eq!(
        value(&qos, NodeCgroup::Kubepods, "memory.low"),
        Some(burstable)
    );

    // pkg/kubelet/cm/qos_container_manager_linux_test.go
    // TestQoSContainerCgroupWithMemoryReservationPolicyNone: zeros are written.
    let none = memory_qos_node(MemoryReservationPolicy::None, 0.9, 4096);
    let qos = policy()
        .node_cgroups(&pods, &none)
        .expect("call")
        .expect("values");
    assert_eq!(value(&qos, NodeCgroup::Kubepods, "memory.min"), Some(0));
    assert_eq!(value(&qos, NodeCgroup::Burstable, "memory.low"), Some(0));
}

#[test]
fn node_level_errors_name_the_pod() {
    let bad = pod_from_json(&serde_json::json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"memory": "lots"}}}]}}))
        .expect("pod");
    let good =
        pod_from_json(&serde_json::json!({"spec": {"containers": [{"name": "c"}]}})).expect("pod");
    let node = memory_qos_node(MemoryReservationPolicy::HardReservation, 0.9, 4096);
    let errors = policy()
        .node_cgroups(&[good, bad], &node)
        .expect("call")
        .expect_err("bad quantity");
    assert_eq!(
        errors[0].field,
        "pods[1].spec.containers[0].resources.requests[memory]"
    );
}

#[test]
fn conformance_memory_qos_vectors_pass() {
    for file in [
        "kep-derived/memory-high.json",
        "kep-derived/pod-memory-min.json",
    ] {
        let report =
            podpolicy::conformance::run_file(policy(), &crate::util::vectors_dir().join(file))
                .expect("runs");
        let totals = report.totals();
        assert_eq!(
            (totals.failed, totals.skipped),
            (0, 0),
            "{}",
            report.render()
        );
    }
}
