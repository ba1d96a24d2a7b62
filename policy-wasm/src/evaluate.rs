//! The policy's public functions over WIT records: decode, decide, encode.
//!
//! Each function here is one export of the `pod-policy` world; the guest
//! shim forwards to them unchanged, and native callers (tests, fuzzing,
//! benches) call them directly, so both paths run the same code.

use crate::boundary::cgroup::encode_files;
use crate::boundary::pod::{decode_list, field_error, to_amounts};
use crate::cgroup;
use crate::model::{Pod, ResourceMap};
use crate::node::NodeConfig;
use crate::oom;
use crate::qos;
use crate::resources::{self, Options};
use crate::wit::{self, ErrorReason, FieldError};

pub(crate) type Result<T> = std::result::Result<T, Vec<FieldError>>;

/// Decode the pod and the node together so that both report their errors.
pub(crate) fn decode(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<(Pod, NodeConfig)> {
    match (
        crate::boundary::pod::decode_pod(pod),
        crate::boundary::node::decode_node(node),
    ) {
        (Ok(pod), Ok(node)) => Ok((pod, node)),
        (pod, node) => Err(pod.err().into_iter().chain(node.err()).flatten().collect()),
    }
}

/// Export `validate-node`.
pub fn validate_node(node: &wit::NodeSettings) -> Vec<FieldError> {
    match crate::boundary::node::decode_node(node) {
        Err(errors) => errors,
        Ok(config) => {
            let mut errors = crate::boundary::encode_errors(config.validate_allocatable());
            errors.extend(crate::boundary::managers::validate_config(node));
            errors
        }
    }
}

/// Export `managers-active`.
pub fn managers_active(node: &wit::NodeSettings) -> bool {
    crate::boundary::managers::places_pods(node)
}

/// Export `default-pod`.
pub fn default_pod(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<wit::DefaultedPod> {
    let node = crate::boundary::node::decode_node(node)?;
    crate::defaults::default_pod(pod, &node.gates)
}

/// Export `validate-pod`.
pub fn validate_pod(pod: &wit::Pod, node: &wit::NodeSettings) -> Vec<FieldError> {
    match crate::boundary::node::decode_node(node) {
        Ok(node) => crate::validation::validate_pod(pod, &node),
        Err(errors) => errors,
    }
}

/// Export `pod-warnings`.
pub fn pod_warnings(pod: &wit::Pod) -> Vec<wit::PodWarning> {
    crate::warnings::pod_warnings(&crate::boundary::pod::written_pod(pod))
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
        skip_pod_level_resources: options.skip_pod_level_resources
            || !node.gates.pod_level_resources,
        skip_container_level_resources: options.skip_container_level_resources,
    };
    Ok(effective(&pod, &options, &node))
}

fn effective(pod: &Pod, options: &Options, node: &NodeConfig) -> wit::EffectiveResources {
    Totals::new(pod, options, node).to_wit(pod)
}

/// A pod's effective requests and limits and their container parts, each
/// computed once.
struct Totals {
    requests: ResourceMap,
    limits: ResourceMap,
    aggregate_requests: ResourceMap,
    aggregate_limits: ResourceMap,
}

impl Totals {
    fn new(pod: &Pod, options: &Options, node: &NodeConfig) -> Totals {
        let aggregate_requests = resources::aggregate_container_requests(pod, options);
        let aggregate_limits = resources::aggregate_container_limits(pod, options);
        let containers = |aggregate: &ResourceMap| {
            if options.skip_container_level_resources {
                ResourceMap::new()
            } else {
                aggregate.clone()
            }
        };
        Totals {
            requests: resources::pod_requests_from(
                containers(&aggregate_requests),
                pod,
                options,
                &node.gates,
            ),
            limits: resources::pod_limits_from(
                containers(&aggregate_limits),
                pod,
                options,
                &node.gates,
            ),
            aggregate_requests,
            aggregate_limits,
        }
    }

    fn to_wit(&self, pod: &Pod) -> wit::EffectiveResources {
        wit::EffectiveResources {
            requests: to_amounts(&self.requests),
            limits: to_amounts(&self.limits),
            aggregate_container_requests: to_amounts(&self.aggregate_requests),
            aggregate_container_limits: to_amounts(&self.aggregate_limits),
            pod_level_resources_set: resources::pod_level_resources_set(pod),
            pod_level_requests_set: resources::pod_level_requests_set(pod),
            pod_level_limits_set: resources::pod_level_limits_set(pod),
        }
    }
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
    Ok(cgroup::pod_resource_config(&pod, &node, class).into())
}

fn memory_capacity(node: &NodeConfig) -> Result<u64> {
    match node.memory_capacity() {
        Some(capacity) if capacity > 0 => Ok(capacity),
        _ => Err(vec![field_error(
            "capacity[memory]",
            ErrorReason::Required,
            "the node's memory capacity is needed to compute oom_score_adj",
        )]),
    }
}

/// Export `oom-score-adjust`.
pub fn oom_score_adjust(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<Vec<(String, i32)>> {
    let (pod, node) = decode(pod, node)?;
    let capacity = memory_capacity(&node)?;
    let oom = oom::PodOomFacts::new(&pod, qos::pod_qos(&pod, &node.gates), capacity, &node.gates);
    Ok(pod
        .init_and_regular()
        .map(|c| (c.name.clone(), oom.score(&pod, c, &node.gates)))
        .collect())
}

/// Export `evaluate`.
pub fn evaluate(pod: &wit::Pod, node: &wit::NodeSettings) -> Result<wit::PodEvaluation> {
    let (pod, node) = decode(pod, node)?;
    evaluate_decoded(pod, &node)
}

/// [`evaluate`] of a decoded pod on a decoded node (a prepared node's
/// `evaluate` decodes only the pod).
pub(crate) fn evaluate_decoded(pod: Pod, node: &NodeConfig) -> Result<wit::PodEvaluation> {
    // While a resize is pending the kubelet applies the allocated resources
    // (`UpdatePodFromAllocation`), not the spec's.
    let (pod, pending_resize) = match crate::resize::allocated(&pod) {
        Some((allocated, pending)) => (allocated, Some(pending)),
        None => (pod, None),
    };
    let capacity = memory_capacity(node)?;
    let gates = &node.gates;
    let class = qos::pod_qos(&pod, gates);
    // The cgroup values use the same kubelet options as `effective`.
    let totals = Totals::new(&pod, &resources::kubelet_options(gates), node);
    let pod_resources =
        cgroup::pod_resource_config_from(&pod, node, class, &totals.requests, &totals.limits);
    let pod_cgroup_files = cgroup::pod_cgroup_files(&pod_resources, node);
    let oom = oom::PodOomFacts::new(&pod, class, capacity, gates);
    // Ephemeral containers run like any other (no resources of their own,
    // so capped by pod-level limits, KEP-2837 "Ephemeral Containers").
    let containers = pod
        .init_and_regular()
        .chain(&pod.ephemeral_containers)
        .map(|c| {
            let resources = cgroup::container_resource_config(&pod, c, node, class);
            wit::ContainerEvaluation {
                name: c.name.clone(),
                kind: c.kind.into(),
                oom_score_adj: oom.score(&pod, c, gates),
                cgroup_files: encode_files(cgroup::container_cgroup_files(&resources, node)),
                resources: resources.into(),
            }
        })
        .collect();
    Ok(wit::PodEvaluation {
        qos_class: class.into(),
        effective: totals.to_wit(&pod),
        pod_resources: pod_resources.into(),
        pod_cgroup_files: encode_files(pod_cgroup_files),
        containers,
        warnings: crate::memory_qos::kernel_warnings(node),
        pending_resize: pending_resize.map(wit::PendingResize::from),
    })
}

/// Export `container-memory-high`.
pub fn container_memory_high(
    request: Option<u64>,
    limit: Option<u64>,
    qos: wit::QosClass,
    node: &wit::NodeSettings,
) -> Result<Option<u64>> {
    let node = crate::boundary::node::decode_node(node)?;
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
    let node = crate::boundary::node::decode_node(node)?;
    let mut errors = Vec::new();
    let mut decoded = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        match crate::boundary::pod::decode_pod(pod) {
            Ok(pod) => {
                // The QoS manager sums the pods as allocated.
                let pod = crate::resize::allocated(&pod).map_or(pod, |(allocated, _)| allocated);
                let class = qos::pod_qos(&pod, &node.gates);
                decoded.push((pod, class));
            }
            Err(pod_errors) => errors.extend(pod_errors.into_iter().map(|mut e| {
                e.field = format!("pods[{i}].{}", e.field);
                e
            })),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(wit::NodeCgroups {
        cgroups: crate::node_cgroups::node_cgroups(&decoded, &node)
            .into_iter()
            .map(wit::NodeCgroupValues::from)
            .collect(),
        warnings: crate::memory_qos::kernel_warnings(&node),
    })
}

/// Export `resize-plan`.
pub fn resize_plan(
    current: &wit::Pod,
    desired: &wit::Pod,
    others: &[wit::ResourceQuantity],
    node: &wit::NodeSettings,
) -> Result<wit::ResizePlan> {
    crate::resize::plan(current, desired, others, node)
}

/// Export `admit`: KEP-5526 admission by the topology, CPU and memory managers.
pub fn admit(
    pod: &wit::Pod,
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
) -> Result<wit::Admission> {
    crate::boundary::managers::admit(pod, topology, state, node)
}

/// Export `release`: `RemoveContainer` on the configured managers.
pub fn release(
    pod_uid: &str,
    container: &str,
    topology: &wit::NodeTopology,
    state: &wit::ManagerState,
    node: &wit::NodeSettings,
) -> Result<wit::ManagerState> {
    crate::boundary::managers::release(pod_uid, container, topology, state, node)
}

/// Export `manager-operation`: one upstream manager function on explicit inputs.
pub fn manager_operation(
    request: &wit::ManagerRequest,
    topology: &wit::NodeTopology,
    node: &wit::NodeSettings,
) -> Result<crate::boundary::testing::OperationResult> {
    crate::boundary::testing::manager_operation(request, topology, node)
}
