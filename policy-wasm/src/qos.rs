//! Pod QoS class (`GetPodQOS` / `ComputePodQOS`).
//!
//! With pod-level resources set (KEP-2837) the class comes from
//! `spec.resources` alone. Gate PodLevelResourcesFixKubeletQOSClass (on in
//! 1.36) decides what "set" means: with it, `spec.resources: {}` is not set
//! and the containers decide (kubernetes#135082); without it, any non-nil
//! `spec.resources` is used.

use crate::features::FeatureGates;
use crate::model::{Pod, Requirements};
use crate::resources::pod_level_resources_set;

/// The pod QoS class (`v1.PodQOSClass`): one type for the whole policy,
/// the CPU manager's ([`crate::cpu_manager::QosClass`]) included.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QosClass {
    /// Every container (or the pod level) limits CPU and memory, requests equal limits.
    Guaranteed,
    /// Some request or limit is set, but not Guaranteed.
    Burstable,
    /// No request or limit is set.
    BestEffort,
}

/// The class of one `ResourceRequirements`: upstream `requirementsQOS`.
pub fn requirements_qos(r: &Requirements) -> QosClass {
    if r.requests().is_empty() && r.limits().is_empty() {
        return QosClass::BestEffort;
    }
    let mut class = None;
    for resource in ["cpu", "memory"] {
        let request = r.requests().get(resource).copied().unwrap_or_default();
        let limit = r.limits().get(resource).copied().unwrap_or_default();
        let this = if request != limit {
            QosClass::Burstable
        } else if request.is_zero() {
            QosClass::BestEffort
        } else {
            QosClass::Guaranteed
        };
        match class {
            _ if this == QosClass::Burstable => return QosClass::Burstable,
            None => class = Some(this),
            Some(seen) if seen != this => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    class.unwrap_or(QosClass::BestEffort)
}

/// `ComputePodQOS`: the class from the spec, ignoring `status.qosClass`.
pub fn compute_pod_qos(pod: &Pod, gates: &FeatureGates) -> QosClass {
    if gates.pod_level_resources {
        let pod_level = if gates.pod_level_resources_fix_kubelet_qos_class {
            pod_level_resources_set(pod)
        } else {
            pod.resources.is_some()
        };
        if pod_level {
            return requirements_qos(pod.resources.as_ref().expect("pod-level resources are set"));
        }
    }
    let mut pod_class = None;
    for c in pod.init_and_regular() {
        let class = requirements_qos(&c.resources);
        match pod_class {
            _ if class == QosClass::Burstable => return QosClass::Burstable,
            None => pod_class = Some(class),
            Some(seen) if seen != class => return QosClass::Burstable,
            Some(_) => {}
        }
    }
    pod_class.unwrap_or(QosClass::BestEffort)
}

/// `GetPodQOS`: `status.qosClass` when the API server already set it.
pub fn pod_qos(pod: &Pod, gates: &FeatureGates) -> QosClass {
    match pod.status.qos_class.as_deref() {
        Some("Guaranteed") => QosClass::Guaranteed,
        Some("Burstable") => QosClass::Burstable,
        Some("BestEffort") => QosClass::BestEffort,
        _ => compute_pod_qos(pod, gates),
    }
}

/// The Kubernetes spelling of a class (`Guaranteed`, `Burstable`, `BestEffort`).
pub fn qos_name(class: QosClass) -> &'static str {
    match class {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    }
}
