//! The `pod`, `evaluate` and `resize` interfaces' exports at the edge:
//! each decodes its WIT records (the pod and the node reporting their
//! errors together), calls the core ([`crate::evaluate`] and the modules
//! it composes) and encodes the answer. [`crate::evaluate`] re-exports
//! them at their historical path; the guest shim calls them here.

use super::pod::{decode_list, decode_pod, to_amounts};
use super::{encode_errors, encode_result};
use crate::evaluate::{ContainerEvaluation, EffectiveResources, PodEvaluation};
use crate::model::{Pod, ResourceMap};
use crate::node::NodeConfig;
use crate::qos;
use crate::resources::Options;
use crate::wit::{self, FieldError};

/// What an export gives: the answer, or every field error found.
pub(crate) type Result<T> = std::result::Result<T, Vec<FieldError>>;

/// Decode the pod and the node together so that both report their errors.
pub(crate) fn decode(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<(Pod, NodeConfig)> {
    match (decode_pod(pod), super::node::decode_node(node)) {
        (Ok(pod), Ok(node)) => Ok((pod, node)),
        (pod, node) => Err(pod.err().into_iter().chain(node.err()).flatten().collect()),
    }
}

impl From<EffectiveResources> for wit::EffectiveResources {
    fn from(effective: EffectiveResources) -> Self {
        wit::EffectiveResources {
            requests: to_amounts(&effective.requests),
            limits: to_amounts(&effective.limits),
            aggregate_container_requests: to_amounts(&effective.aggregate_container_requests),
            aggregate_container_limits: to_amounts(&effective.aggregate_container_limits),
            pod_level_resources_set: effective.pod_level_resources_set,
            pod_level_requests_set: effective.pod_level_requests_set,
            pod_level_limits_set: effective.pod_level_limits_set,
        }
    }
}

impl From<ContainerEvaluation> for wit::ContainerEvaluation {
    fn from(container: ContainerEvaluation) -> Self {
        wit::ContainerEvaluation {
            name: container.name,
            kind: container.kind.into(),
            oom_score_adj: container.oom_score_adj,
            resources: container.resources.into(),
            cgroup_files: super::cgroup::encode_files(container.cgroup_files),
        }
    }
}

impl From<PodEvaluation> for wit::PodEvaluation {
    fn from(evaluation: PodEvaluation) -> Self {
        wit::PodEvaluation {
            qos_class: evaluation.qos_class.into(),
            effective: evaluation.effective.into(),
            pod_resources: evaluation.pod_resources.into(),
            pod_cgroup_files: super::cgroup::encode_files(evaluation.pod_cgroup_files),
            containers: evaluation
                .containers
                .into_iter()
                .map(wit::ContainerEvaluation::from)
                .collect(),
            warnings: encode_warnings(evaluation.warnings),
            pending_resize: evaluation.pending_resize.map(wit::PendingResize::from),
        }
    }
}

/// Export `validate-node`.
pub fn validate_node(node: &wit::NodeSettings) -> Vec<FieldError> {
    match super::node::decode_node(node) {
        Err(errors) => errors,
        Ok(config) => {
            let mut errors = encode_errors(config.validate_allocatable());
            errors.extend(super::managers::validate_config(node));
            errors
        }
    }
}

/// Export `managers-active`.
pub fn managers_active(node: &wit::NodeSettings) -> bool {
    super::managers::places_pods(node)
}

/// Export `default-pod`.
pub fn default_pod(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<wit::DefaultedPod> {
    let node = super::node::decode_node(node)?;
    super::defaults::default_pod(pod, &node.gates)
}

/// Export `validate-pod`.
pub fn validate_pod(pod: &wit::Pod, node: &wit::NodeSettings) -> Vec<FieldError> {
    match super::node::decode_node(node) {
        Ok(node) => validate_written_pod(pod, &node),
        Err(errors) => errors,
    }
}

/// Validate a pod as the API server would (its name and namespace, then
/// its resources after defaulting) and as the kubelet would admit it on
/// `node`.
pub(crate) fn validate_written_pod(input: &wit::Pod, node: &NodeConfig) -> Vec<FieldError> {
    match decode_pod(input) {
        Ok(pod) => encode_errors(validate_decoded_pod(input, pod, node)),
        Err(decode_errors) => {
            let mut errors = encode_errors(object_meta_errors(input));
            errors.extend(decode_errors);
            errors
        }
    }
}

fn object_meta_errors(input: &wit::Pod) -> Vec<crate::field_error::FieldError> {
    crate::object_meta::validate_object_meta(
        &input.name,
        &input.namespace,
        input.spec.node_name.as_deref(),
        input.spec.containers.len(),
    )
}

/// [`validate_written_pod`] of `input`, which decodes to `pod`; the
/// `resize` interface's `plan` checks its desired pod with it too.
pub(crate) fn validate_decoded_pod(
    input: &wit::Pod,
    pod: Pod,
    node: &NodeConfig,
) -> Vec<crate::field_error::FieldError> {
    let mut errors = object_meta_errors(input);
    let defaulted = super::defaults::defaulted_decoded_pod(input, pod, &node.gates);
    errors.extend(crate::validation::validate_pod_resources(&defaulted, node));
    errors
}

/// Export `pod-warnings`.
pub fn pod_warnings(pod: &wit::Pod) -> Vec<wit::PodWarning> {
    crate::warnings::pod_warnings(&super::pod::written_pod(pod))
        .into_iter()
        .map(wit::PodWarning::from)
        .collect()
}

/// Export `effective-resources`.
pub fn effective_resources(
    pod: &wit::Pod,
    options: &wit::PodResourcesOptions,
    node: &wit::NodeSettings,
) -> Result<wit::EffectiveResources> {
    let (pod, node) = decode(pod, node)?;
    let mut errors = Vec::new();
    let non_missing: Option<ResourceMap> = options
        .non_missing_container_requests
        .as_ref()
        .map(|l| decode_list(l, "options.nonMissingContainerRequests", &mut errors));
    if !errors.is_empty() {
        return Err(errors);
    }
    let options = Options {
        exclude_overhead: options.exclude_overhead,
        use_status_resources: options.use_status_resources,
        in_place_pod_level_resources_vertical_scaling: options
            .in_place_pod_level_resources_vertical_scaling_enabled,
        non_missing_container_requests: non_missing,
        skip_pod_level_resources: options.skip_pod_level_resources,
        skip_container_level_resources: options.skip_container_level_resources,
    };
    Ok(crate::evaluate::effective(&pod, options, &node).into())
}

/// Export `qos-class`.
pub fn qos_class(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<wit::QosClass> {
    let (pod, node) = decode(pod, node)?;
    Ok(qos::pod_qos(&pod, &node.gates).into())
}

/// Export `pod-resource-config`.
pub fn pod_resource_config(
    pod: &wit::Pod,
    node: &wit::NodeSettings,
) -> Result<wit::ResourceConfig> {
    let (pod, node) = decode(pod, node)?;
    let class = qos::pod_qos(&pod, &node.gates);
    Ok(crate::cgroup::pod_resource_config(&pod, &node, class).into())
}

/// Export `oom-score-adjust`.
pub fn oom_score_adjust(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<Vec<(String, i32)>> {
    let (pod, node) = decode(pod, node)?;
    encode_result(crate::evaluate::oom_score_adjustments(&pod, &node))
}

/// Export `evaluate`.
pub fn evaluate(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<wit::PodEvaluation> {
    let (pod, node) = decode(pod, node)?;
    evaluate_decoded(pod, &node)
}

/// [`evaluate`] of a decoded pod on a decoded node (a prepared node's
/// `evaluate` decodes only the pod).
pub(crate) fn evaluate_decoded(pod: Pod, node: &NodeConfig) -> Result<wit::PodEvaluation> {
    encode_result(crate::evaluate::evaluate_pod(pod, node)).map(wit::PodEvaluation::from)
}

/// Export `explain-values`.
pub fn explain_values(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<Vec<wit::ValueReason>> {
    let (pod, node) = decode(pod, node)?;
    let reasons = encode_result(crate::why::explain_pod(pod, &node))?;
    Ok(reasons
        .into_iter()
        .map(|reason| wit::ValueReason {
            container: reason.container,
            file: reason.file,
            value: reason.value,
            reason: reason.reason,
        })
        .collect())
}

/// Export `container-memory-high`.
pub fn container_memory_high(
    request: Option<u64>,
    limit: Option<u64>,
    qos: wit::QosClass,
    node: &wit::NodeSettings,
) -> Result<Option<u64>> {
    let node = super::node::decode_node(node)?;
    Ok(crate::memory_qos::container_memory_high(
        request,
        limit,
        node.allocatable_memory(),
        node.memory_throttling_factor,
        node.page_size,
        qos.into(),
    ))
}

/// Export `node-cgroups`.
pub fn node_cgroups(pods: &[wit::Pod], node: &wit::NodeSettings) -> Result<wit::NodeCgroups> {
    let node = super::node::decode_node(node)?;
    let mut errors = Vec::new();
    let mut decoded = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        // A pod the kubelet refuses never runs, so it is in no node-level
        // sum: it is refused here as `evaluate` refuses it.
        let decoded_pod = decode_pod(pod).and_then(|pod| {
            match crate::validation::kubelet_refuses_pod_level_resources(&pod, &node.gates) {
                Some(refused) => Err(vec![refused.into()]),
                None => Ok(pod),
            }
        });
        match decoded_pod {
            Ok(pod) => decoded.push(pod),
            Err(pod_errors) => errors.extend(pod_errors.into_iter().map(|mut e| {
                e.field = format!("pods[{i}].{}", e.field);
                e
            })),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(encode_node_cgroups(
        crate::evaluate::node_level_cgroups(decoded, &node),
        &node,
    ))
}

/// The `node-cgroups` answer: the node-level cgroups' files and the
/// node's kernel notes.
pub(crate) fn encode_node_cgroups(
    cgroups: Vec<crate::node_cgroups::NodeCgroupValues>,
    node: &NodeConfig,
) -> wit::NodeCgroups {
    wit::NodeCgroups {
        cgroups: cgroups
            .into_iter()
            .map(wit::NodeCgroupValues::from)
            .collect(),
        warnings: encode_warnings(crate::memory_qos::kernel_warnings(node)),
    }
}

/// The contract's evaluation warnings for the core's kernel warnings.
fn encode_warnings(warnings: Vec<crate::memory_qos::KernelWarning>) -> Vec<wit::EvaluationWarning> {
    use crate::memory_qos::KernelWarning;
    warnings
        .into_iter()
        .map(|warning| match warning {
            KernelWarning::TooOld(version) => {
                wit::EvaluationWarning::MemoryQosKernelTooOld(version)
            }
            KernelWarning::Unreadable(version) => {
                wit::EvaluationWarning::KernelVersionUnreadable(version)
            }
        })
        .collect()
}

/// Export `resize-plan`.
pub use super::resize::plan as resize_plan;

/// Export `admit`: KEP-5526 admission by the topology, CPU and memory managers.
pub fn admit(
    pod: &wit::Pod,
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
) -> Result<wit::Admission> {
    super::managers::admit(pod, topology, state, node)
}

/// Export `release`: `RemoveContainer` on the configured managers.
pub fn release(
    pod_uid: &str,
    container: &str,
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
) -> Result<wit::ManagerState> {
    super::managers::release(pod_uid, container, topology, state, node)
}

/// Export `manager-operation`: one upstream manager function on explicit inputs.
pub fn manager_operation(
    request: &wit::ManagerRequest,
    topology: &wit::NodeTopology,
    node: &wit::NodeSettings,
) -> Result<super::testing::OperationResult> {
    super::testing::manager_operation(request, topology, node)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{container, guaranteed, list, pod};
    use super::*;

    /// Upstream `validateOverhead`: `spec.overhead` is judged as a
    /// container's limits, names and values alike.
    #[test]
    fn the_overhead_is_validated_as_container_limits() {
        let mut with_overhead = pod("p", None, vec![container("a", guaranteed("1", "1Gi"))]);
        with_overhead.spec.overhead = Some(list(&[
            ("cpu", "250m"),
            ("disk", "1Gi"),
            ("example.com/foo", "500m"),
        ]));
        let node = crate::node::default_settings();
        let errors = validate_pod(&with_overhead, &node);
        let found: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect();
        for want in [
            (
                "spec.overhead.limits[disk]",
                "must be a standard resource type or fully qualified",
            ),
            (
                "spec.overhead.limits[disk]",
                "must be a standard resource for containers",
            ),
            (
                "spec.overhead.limits[example.com/foo]",
                "must be an integer",
            ),
        ] {
            assert!(found.contains(&want), "{want:?} not in {found:?}");
        }
        with_overhead.spec.overhead = Some(list(&[("cpu", "250m"), ("memory", "64Mi")]));
        assert!(validate_pod(&with_overhead, &node).is_empty());
    }

    /// `explain-values` names every value `evaluate` gives, in its order
    /// and with its text: the pod cgroup's files, then per container its
    /// files and its `oom_score_adj`.
    #[test]
    fn explain_values_follows_the_evaluation() {
        let burstable = Some(wit::ResourceRequirements {
            requests: Some(list(&[("cpu", "250m"), ("memory", "64Mi")])),
            limits: None,
        });
        let pod = pod(
            "p",
            None,
            vec![
                container("a", guaranteed("1", "1Gi")),
                container("b", burstable),
            ],
        );
        let node = wit::NodeSettings {
            capacity: list(&[("cpu", "8"), ("memory", "16Gi")]),
            ..crate::node::default_settings()
        };
        let evaluation = evaluate(&pod, &node).expect("evaluates");
        let mut expected = Vec::new();
        for file in &evaluation.pod_cgroup_files {
            expected.push((None, file.file.to_string(), file.value.to_string()));
        }
        for c in &evaluation.containers {
            for file in &c.cgroup_files {
                expected.push((
                    Some(c.name.clone()),
                    file.file.to_string(),
                    file.value.to_string(),
                ));
            }
            expected.push((
                Some(c.name.clone()),
                "oom_score_adj".to_owned(),
                c.oom_score_adj.to_string(),
            ));
        }
        let reasons = explain_values(&pod, &node).expect("explains");
        let explained: Vec<_> = reasons
            .iter()
            .map(|r| (r.container.clone(), r.file.clone(), r.value.clone()))
            .collect();
        assert_eq!(explained, expected);
        assert!(reasons.iter().all(|r| !r.reason.is_empty()));
        // Without a memory capacity there is no `oom_score_adj`, so no evaluation.
        let errors = explain_values(&pod, &crate::node::default_settings()).unwrap_err();
        assert_eq!(errors[0].field, "capacity[memory]");
    }

    /// With the `PodLevelResources` gate off the API server validates
    /// nothing under `spec.resources` (`if opts.PodLevelResourcesEnabled`),
    /// and the kubelet refuses the pod (`isPodLevelResourcesSupported`):
    /// `evaluate` answers with the kubelet's message at `spec.resources`. A
    /// pod without pod-level resources, or the gate on, evaluates as before.
    #[test]
    fn with_the_gate_off_the_api_skips_pod_level_resources_and_the_kubelet_refuses_them() {
        let gate = |enabled| wit::NodeSettings {
            capacity: list(&[("cpu", "8"), ("memory", "16Gi")]),
            feature_gates: vec![wit::FeatureGate {
                name: "PodLevelResources".into(),
                enabled,
            }],
            ..crate::node::default_settings()
        };
        // A pod-level request above its limit: invalid with the gate on.
        let pod_level = Some(wit::ResourceRequirements {
            requests: Some(list(&[("cpu", "4")])),
            limits: Some(list(&[("cpu", "2")])),
        });
        let plr = pod("p", pod_level, vec![container("a", None)]);
        let (off, on) = (gate(false), gate(true));
        assert!(validate_pod(&plr, &off).is_empty());
        assert!(
            validate_pod(&plr, &on)
                .iter()
                .any(|e| e.field.starts_with("spec.resources.requests")),
            "{:?}",
            validate_pod(&plr, &on)
        );
        let refused = evaluate(&plr, &off).unwrap_err();
        let shown: Vec<_> = refused
            .iter()
            .map(|e| (e.field.as_str(), e.reason, e.message.as_str()))
            .collect();
        assert_eq!(
            shown,
            vec![(
                "spec.resources",
                wit::ErrorReason::Forbidden,
                "PodLevelResources feature gate is disabled"
            )]
        );
        let plain = pod("q", None, vec![container("a", guaranteed("1", "1Gi"))]);
        assert!(evaluate(&plain, &off).is_ok());
        let valid_plr = pod(
            "r",
            guaranteed("2", "2Gi"),
            vec![container("a", guaranteed("1", "1Gi"))],
        );
        assert!(evaluate(&valid_plr, &on).is_ok());
        assert!(evaluate(&valid_plr, &off).is_err());
    }

    /// `validate-pod`: the name first, then the defaulted pod's resource
    /// checks, each with its path, type and message.
    #[test]
    fn validate_pod_reports_names_then_resources() {
        let mut bad = container("a", guaranteed("1", "1Gi"));
        bad.resize_policy = vec![wit::ContainerResizePolicy {
            resource_name: "gpu".into(),
            restart_policy: "NotRequired".into(),
        }];
        let mut pod = pod("p", None, vec![bad]);
        pod.name = "web/evil".into();
        pod.spec.ephemeral_containers = vec![container("debug", guaranteed("1", "1Gi"))];
        let errors = validate_pod(&pod, &crate::node::default_settings());
        let shown: Vec<_> = errors
            .iter()
            .map(|e| (e.field.as_str(), e.reason, e.bad_value.as_deref()))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("metadata.name", wit::ErrorReason::Invalid, Some("web/evil")),
                (
                    "spec.containers[0].resizePolicy",
                    wit::ErrorReason::NotSupported,
                    Some("gpu")
                ),
                (
                    "spec.ephemeralContainers[0].resources",
                    wit::ErrorReason::Forbidden,
                    None
                ),
            ]
        );
        assert_eq!(
            errors[2].message,
            "cannot be set for an Ephemeral Container"
        );
    }
}
