//! Per-container `oom_score_adj` (kubelet `GetContainerOOMScoreAdjust`).
//!
//! Guaranteed pods and node-critical pods get -997, BestEffort pods 1000.
//! Burstable containers score `1000 - 1000 * request / capacity`; with
//! pod-level requests (KEP-2837) each container also gets an equal share of
//! the pod request its containers do not claim, so a container without a
//! request is not the first victim inside a pod that asked for memory.
//! Sidecars are capped at the score of the regular container with the
//! smallest request. With `KubeletOOMScoreAdjTieBreak`, Burstable scores
//! that round alike are told apart by a few points (request size, and a
//! limit within the request), and sidecars are capped by the highest such
//! score of a regular container. Results stay in [3, 999] for Burstable.

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

/// Whether the kubelet runs the pod from a file or an URL rather than the
/// API server (upstream `IsStaticPod`: a `kubernetes.io/config.source`
/// annotation other than `api`, as the kubelet sets it on static pods).
pub fn is_static_pod(pod: &Pod) -> bool {
    pod.annotations
        .iter()
        .find(|(k, _)| k == "kubernetes.io/config.source")
        .is_some_and(|(_, source)| source != "api")
}

/// `IsCriticalPod`: static, mirror, or priority at least system-critical.
pub fn is_critical_pod(pod: &Pod) -> bool {
    is_static_pod(pod)
        || is_mirror_pod(pod)
        || pod.priority.is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
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

/// The smallest request `KubeletOOMScoreAdjTieBreak` tells apart
/// (`oomScoreAdjTieBreakFloor`, 64Mi): on nodes whose adj point
/// (capacity / 1000) is no larger, requests are apart enough already.
const TIE_BREAK_FLOOR: i128 = 64 << 20;

/// `floor(log2(x))`, or 0 below 1 (upstream `log2Floor`).
fn log2_floor(x: i128) -> i128 {
    if x < 1 {
        0
    } else {
        // x fits in 127 bits: ilog2 is at most 126.
        x.ilog2() as i128
    }
}

/// Upstream `tieBreakOOMScoreAdjust` (`KubeletOOMScoreAdjTieBreak`):
/// Burstable containers whose requests round to the same linear score are
/// told apart by one point per doubling of the request above 64Mi, at most
/// `log2(capacity / 1000 / 64Mi)` points; a container whose enforced limit
/// (`limit`, 0 = none) is within its request can never be over its request
/// and drops that many points and one more. `request` is the effective
/// request the linear score came from.
fn tie_break(linear: i128, request: i128, limit: i128, capacity: i128) -> i128 {
    let max_nudge = log2_floor(capacity / 1000 / TIE_BREAK_FLOOR);
    let mut adj = linear - log2_floor(request / TIE_BREAK_FLOOR).min(max_nudge);
    if limit > 0 && limit <= request {
        adj -= max_nudge + 1;
    }
    adj
}

/// The memory limit podpolicy sets on the container's cgroup, in bytes
/// (0 = none): upstream `enforcedMemoryLimit`, which with
/// `DRANodeAllocatableResources` also adds the container's DRA memory
/// allocations; podpolicy's container limits do not carry those
/// (tests/vectors/upstream-unit/README.md).
fn enforced_memory_limit(pod: &Pod, c: &Container, gates: &FeatureGates) -> i128 {
    crate::resources::container_limit_with_pod_fallback(pod, c, gates, "memory").value() as i128
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
    /// With `KubeletOOMScoreAdjTieBreak`, the highest tie-broken score
    /// among regular containers, before clamping (caps sidecars instead).
    max_regular_tie_broken: Option<i128>,
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
                max_regular_tie_broken: None,
            };
        }
        let remaining =
            if gates.pod_level_resources && crate::resources::pod_level_requests_set(pod) {
                remaining_pod_memory_per_container(pod, gates)
            } else {
                0
            };
        // A node without memory is not a node; avoid dividing by zero.
        let capacity = (memory_capacity as i128).max(1);
        // Upstream `maxRegularContainerOOMScoreAdjust`.
        let max_regular_tie_broken = if gates.kubelet_oom_score_adj_tie_break {
            pod.containers
                .iter()
                .map(|c| {
                    let request = memory_request(pod, c, gates) + remaining;
                    tie_break(
                        burstable_score(request, capacity),
                        request,
                        enforced_memory_limit(pod, c, gates),
                        capacity,
                    )
                })
                .max()
        } else {
            None
        };
        PodOomFacts {
            fixed,
            capacity,
            remaining,
            min_regular_request: pod
                .containers
                .iter()
                .map(|c| memory_request(pod, c, gates))
                .min(),
            max_regular_tie_broken,
        }
    }

    /// `oom_score_adj` of `container`, one of the pod's containers.
    pub fn score(&self, pod: &Pod, container: &Container, gates: &FeatureGates) -> i32 {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let (capacity, remaining) = (self.capacity, self.remaining);
        let request = memory_request(pod, container, gates) + remaining;
        let mut adj = burstable_score(request, capacity);
        if gates.kubelet_oom_score_adj_tie_break {
            let limit = enforced_memory_limit(pod, container, gates);
            adj = tie_break(adj, request, limit, capacity);
        }
        if container.kind == ContainerKind::Sidecar {
            // The tie-break makes the smallest request no longer the
            // highest score, so sidecars are capped by every regular
            // container's tie-broken score then.
            let cap = if gates.kubelet_oom_score_adj_tie_break {
                self.max_regular_tie_broken
            } else {
                self.min_regular_request
                    .map(|min_request| burstable_score(min_request + remaining, capacity))
            };
            if let Some(cap) = cap {
                adj = adj.min(cap);
            }
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
