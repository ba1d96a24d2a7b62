//! The whole node-side evaluation of one pod, over the core's types:
//! effective requests and limits, the QoS class, the pod and container
//! cgroup values, `oom_score_adj`, the node-level cgroups.
//!
//! The exports that take and give WIT records (`evaluate`, `validate_pod`,
//! `admit`, ...) decode, call these and encode in
//! [`crate::boundary::evaluate`]; they are re-exported here, the path the
//! host's benches and the fuzzers have always called them by.

use crate::cgroup::{self, ResourceConfig};
use crate::cgroup_file::CgroupFile;
use crate::field_error::{FieldError, FieldErrorType};
use crate::model::{ContainerKind, Pod, ResourceMap};
use crate::node::NodeConfig;
use crate::node_cgroups::{NodeCgroupValues, QosClassTotals};
use crate::oom;
use crate::qos::{self, QosClass};
use crate::resize::PendingResize;
use crate::resources::{self, Options};

pub use crate::boundary::evaluate::{
    admit, container_memory_high, default_pod, effective_resources, evaluate, manager_operation,
    managers_active, node_cgroups, oom_score_adjust, pod_resource_config, pod_warnings, qos_class,
    release, resize_plan, validate_node, validate_pod,
};

/// A pod's effective requests and limits (`PodRequests` / `PodLimits`),
/// their container parts, and which pod-level values are set.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveResources {
    /// `PodRequests`.
    pub requests: ResourceMap,
    /// `PodLimits`.
    pub limits: ResourceMap,
    /// `AggregateContainerRequests`.
    pub aggregate_container_requests: ResourceMap,
    /// `AggregateContainerLimits`.
    pub aggregate_container_limits: ResourceMap,
    /// `IsPodLevelResourcesSet`.
    pub pod_level_resources_set: bool,
    /// `IsPodLevelRequestsSet`.
    pub pod_level_requests_set: bool,
    /// `IsPodLevelLimitsSet`.
    pub pod_level_limits_set: bool,
}

/// What the node applies for one container.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerEvaluation {
    /// The container name.
    pub name: String,
    /// Init, sidecar, regular or ephemeral.
    pub kind: ContainerKind,
    /// Its `oom_score_adj`.
    pub oom_score_adj: i32,
    /// The CRI resources the kubelet hands the runtime.
    pub resources: ResourceConfig,
    /// The cgroup v2 files of the container cgroup.
    pub cgroup_files: Vec<CgroupFile>,
}

/// Everything the node applies for one pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodEvaluation {
    /// QoS class.
    pub qos_class: QosClass,
    /// Effective requests and limits (the kubelet's options).
    pub effective: EffectiveResources,
    /// The pod cgroup's `ResourceConfig`.
    pub pod_resources: ResourceConfig,
    /// The cgroup v2 files of the pod cgroup.
    pub pod_cgroup_files: Vec<CgroupFile>,
    /// Per container: init containers first, then regular, then ephemeral, in spec order.
    pub containers: Vec<ContainerEvaluation>,
    /// Non-fatal notes for a user (today: an old kernel under Memory QoS).
    pub warnings: Vec<crate::memory_qos::KernelWarning>,
    /// A resize the kubelet has not actuated yet; the values are the allocated ones.
    pub pending_resize: Option<PendingResize>,
}

/// `pod`'s effective resources under `options` (pod-level resources are
/// skipped without the PodLevelResources gate, whatever the options say).
pub fn effective(pod: &Pod, mut options: Options, node: &NodeConfig) -> EffectiveResources {
    options.skip_pod_level_resources |= !node.gates.pod_level_resources;
    Totals::new(pod, &options, node).into_effective(pod)
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

    fn into_effective(self, pod: &Pod) -> EffectiveResources {
        EffectiveResources {
            requests: self.requests,
            limits: self.limits,
            aggregate_container_requests: self.aggregate_requests,
            aggregate_container_limits: self.aggregate_limits,
            pod_level_resources_set: resources::pod_level_resources_set(pod),
            pod_level_requests_set: resources::pod_level_requests_set(pod),
            pod_level_limits_set: resources::pod_level_limits_set(pod),
        }
    }
}

/// The node's memory capacity in bytes, which `oom_score_adj` is computed
/// from: an error when the node reports none.
pub fn memory_capacity(node: &NodeConfig) -> Result<u64, Vec<FieldError>> {
    match node.memory_capacity() {
        Some(capacity) if capacity > 0 => Ok(capacity),
        _ => Err(vec![FieldError::new(
            "capacity[memory]",
            FieldErrorType::Required,
            "the node's memory capacity is needed to compute oom_score_adj",
            None,
        )]),
    }
}

/// `oom_score_adj` of every init and regular container, in spec order.
pub fn oom_score_adjustments(
    pod: &Pod,
    node: &NodeConfig,
) -> Result<Vec<(String, i32)>, Vec<FieldError>> {
    let capacity = memory_capacity(node)?;
    let oom = oom::PodOomFacts::new(pod, qos::pod_qos(pod, &node.gates), capacity, &node.gates);
    Ok(pod
        .init_and_regular()
        .map(|c| (c.name.clone(), oom.score(pod, c, &node.gates)))
        .collect())
}

/// Everything the node applies for `pod` (init, regular and ephemeral
/// containers).
pub fn evaluate_pod(pod: Pod, node: &NodeConfig) -> Result<PodEvaluation, Vec<FieldError>> {
    // While a resize is pending the kubelet applies the allocated resources
    // (`UpdatePodFromAllocation`), not the spec's.
    let (pod, pending_resize) = match crate::resize::allocated(&pod) {
        Some((allocated, pending)) => (allocated, Some(pending)),
        None => (pod, None),
    };
    let gates = &node.gates;
    if let Some(refused) = crate::validation::kubelet_refuses_pod_level_resources(&pod, gates) {
        return Err(vec![refused]);
    }
    let capacity = memory_capacity(node)?;
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
            ContainerEvaluation {
                name: c.name.clone(),
                kind: c.kind,
                oom_score_adj: oom.score(&pod, c, gates),
                cgroup_files: cgroup::container_cgroup_files(&resources, node),
                resources,
            }
        })
        .collect();
    Ok(PodEvaluation {
        qos_class: class,
        effective: totals.into_effective(&pod),
        pod_resources,
        pod_cgroup_files,
        containers,
        warnings: crate::memory_qos::kernel_warnings(node),
        pending_resize,
    })
}

/// The node-level cgroups over `pods`, each taken as allocated (the QoS
/// manager sums the pods as allocated).
pub fn node_level_cgroups(pods: Vec<Pod>, node: &NodeConfig) -> Vec<NodeCgroupValues> {
    let mut totals = QosClassTotals::default();
    for pod in &pods {
        add_allocated_pod(&mut totals, pod, node);
    }
    crate::node_cgroups::node_cgroups(&totals, node)
}

/// Count `pod` in `totals` as allocated, with its QoS class: one step of
/// [`node_level_cgroups`], for a host that streams the node's pods.
pub fn add_allocated_pod(totals: &mut QosClassTotals, pod: &Pod, node: &NodeConfig) {
    match crate::resize::allocated(pod) {
        Some((allocated, _)) => totals.add(&allocated, qos::pod_qos(&allocated, &node.gates), node),
        None => totals.add(pod, qos::pod_qos(pod, &node.gates), node),
    }
}
