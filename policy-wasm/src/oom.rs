//! Per-container `oom_score_adj` (kubelet `GetContainerOOMScoreAdjust`).
//!
//! Guaranteed pods and node-critical pods get -997, BestEffort pods 1000.
//! Burstable containers score `1000 - 1000 * request / capacity`; with
//! pod-level requests (KEP-2837) each container also gets an equal share of
//! the pod request its containers do not claim, so a container without a
//! request is not the first victim inside a pod that asked for memory.
//! Sidecars are capped at the score of the regular container with the
//! smallest request. Results stay in [3, 999] for Burstable.

use crate::features::FeatureGates;
use crate::model::{Container, ContainerKind, Pod};
use crate::qos::QosClass;
use crate::qos::pod_qos;
use crate::resources::{
    Options, aggregate_container_requests, dra_claim_resources, dra_container_share,
};

/// `oom_score_adj` of the kubelet and kube-proxy.
pub const KUBELET_OOM_SCORE_ADJ: i32 = -999;
/// `oom_score_adj` of Guaranteed and node-critical pods.
pub const GUARANTEED_OOM_SCORE_ADJ: i32 = -997;
/// `oom_score_adj` of BestEffort pods.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i32 = 1000;
/// Priority of `system-cluster-critical` and above (`SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// Whether the pod is the API server's mirror of a static pod (upstream
/// `IsMirrorPod`: the `kubernetes.io/config.mirror` annotation).
pub fn is_mirror_pod(pod: &Pod) -> bool {
    pod.annotations
        .iter()
        .any(|(k, _)| k == "kubernetes.io/config.mirror")
}

/// `IsCriticalPod`: static, mirror, or priority at least system-critical.
pub fn is_critical_pod(pod: &Pod) -> bool {
    let annotation = |key: &str| {
        pod.annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    let is_static = annotation("kubernetes.io/config.source").is_some_and(|source| source != "api");
    let is_mirror = is_mirror_pod(pod);
    is_static || is_mirror || pod.priority.is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// `IsNodeCriticalPod`: critical and of class `system-node-critical`.
pub fn is_node_critical_pod(pod: &Pod) -> bool {
    is_critical_pod(pod) && pod.priority_class_name.as_deref() == Some("system-node-critical")
}

fn memory_request(pod: &Pod, c: &Container, gates: &FeatureGates) -> i128 {
    let own = c
        .resources
        .requests()
        .get("memory")
        .map_or(0, |q| q.value() as i128);
    if gates.dra_node_allocatable_resources {
        own + dra_container_share(pod, &c.name, "memory").value() as i128
    } else {
        own
    }
}

/// The pod request that containers leave unclaimed, split evenly over all
/// containers (regular and init): upstream `remainingPodMemReqPerContainer`.
fn remaining_pod_memory_per_container(pod: &Pod, gates: &FeatureGates) -> i128 {
    let Some(pod_request) = pod
        .resources
        .as_ref()
        .and_then(|r| r.requests().get("memory"))
    else {
        return 0;
    };
    if pod_request.is_zero() {
        return 0;
    }
    let count = (pod.containers.len() + pod.init_containers.len()) as i128;
    if count == 0 {
        return 0;
    }
    let aggregate = aggregate_container_requests(pod, &Options::default())
        .get("memory")
        .map_or(0, |q| q.value() as i128);
    let dra = if gates.dra_node_allocatable_resources {
        dra_claim_resources(pod)
            .get("memory")
            .map_or(0, |q| q.value() as i128)
    } else {
        0
    };
    // Go int64 division truncates toward zero; i128 `/` does the same.
    (pod_request.value() as i128 - aggregate - dra) / count
}

fn burstable_score(request: i128, memory_capacity: i128) -> i128 {
    1000 - crate::quantity::mul_div(1000, request, memory_capacity)
}

/// `oom_score_adj` for `container` of `pod` on a node with `memory_capacity` bytes.
pub fn container_oom_score_adj(
    pod: &Pod,
    container: &Container,
    memory_capacity: u64,
    gates: &FeatureGates,
) -> i32 {
    PodOomFacts::new(pod, pod_qos(pod, gates), memory_capacity, gates).score(pod, container, gates)
}

/// What every container's score needs from the pod as a whole, computed
/// once per pod instead of once per container.
pub struct PodOomFacts {
    /// The score of every container when the pod decides it alone
    /// (node-critical, Guaranteed, BestEffort).
    fixed: Option<i32>,
    capacity: i128,
    /// Each container's share of the pod request its containers leave unclaimed.
    remaining: i128,
    /// The smallest memory request among regular containers (caps sidecars).
    min_regular_request: Option<i128>,
}

impl PodOomFacts {
    /// The facts for `pod` of class `qos` on a node with `memory_capacity` bytes.
    pub fn new(pod: &Pod, qos: QosClass, memory_capacity: u64, gates: &FeatureGates) -> Self {
        let fixed = if is_node_critical_pod(pod) {
            Some(GUARANTEED_OOM_SCORE_ADJ)
        } else {
            match qos {
                QosClass::Guaranteed => Some(GUARANTEED_OOM_SCORE_ADJ),
                QosClass::BestEffort => Some(BEST_EFFORT_OOM_SCORE_ADJ),
                QosClass::Burstable => None,
            }
        };
        if fixed.is_some() {
            return PodOomFacts {
                fixed,
                capacity: 1,
                remaining: 0,
                min_regular_request: None,
            };
        }
        let remaining =
            if gates.pod_level_resources && crate::resources::pod_level_requests_set(pod) {
                remaining_pod_memory_per_container(pod, gates)
            } else {
                0
            };
        PodOomFacts {
            fixed,
            // A node without memory is not a node; avoid dividing by zero.
            capacity: (memory_capacity as i128).max(1),
            remaining,
            min_regular_request: pod
                .containers
                .iter()
                .map(|c| memory_request(pod, c, gates))
                .min(),
        }
    }

    /// `oom_score_adj` of `container`, one of the pod's containers.
    pub fn score(&self, pod: &Pod, container: &Container, gates: &FeatureGates) -> i32 {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let (capacity, remaining) = (self.capacity, self.remaining);
        let mut adj = burstable_score(memory_request(pod, container, gates) + remaining, capacity);
        if container.kind == ContainerKind::Sidecar
            && let Some(min_request) = self.min_regular_request
        {
            adj = adj.min(burstable_score(min_request + remaining, capacity));
        }
        let floor = (1000 + GUARANTEED_OOM_SCORE_ADJ) as i128;
        if adj < floor {
            return floor as i32;
        }
        if adj == 1000 {
            return 999;
        }
        // adj <= 1000 here: requests are never negative.
        adj as i32
    }
}
