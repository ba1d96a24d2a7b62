//! A pod as both managers see it (`ManagedPod`): the CPU manager's
//! `PodSpec`, the memory manager's `MemoryPod`, the containers in admission
//! order (init containers first) and whether pod-level resources are set.
//!
//! Mirrors what upstream's managers read from the `v1.Pod`: requests and
//! limits per container and for the pod (`cpumanager/policy_static.go`,
//! `memorymanager/policy_static.go`), `IsPodLevelResourcesSet`, and the
//! pod's QoS class. The pod is defaulted and validated before it gets
//! here; this adds what the managers need on top (a UID to key the state
//! by, unique container names). Ephemeral containers are not managed.

use std::collections::{BTreeMap, BTreeSet};

use super::Result;
use super::config::non_negative_bytes;
use super::errors::{FieldError, FieldErrorType};
use crate::cpu_manager::{
    ContainerKind as CpuContainerKind, ContainerSpec, PodLevelResources, PodSpec,
    QosClass as CpuQosClass,
};
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, MemoryContainer, MemoryPod};
use crate::model::{self, ContainerKind, Pod};
use crate::quantity::Quantity;

/// A pod as both managers see it.
#[derive(Clone, Debug)]
pub struct ManagedPod {
    pub(super) uid: String,
    pub(super) cpu: PodSpec,
    pub(super) memory: MemoryPod,
    /// Init containers then app containers, with their kinds.
    pub(super) containers: Vec<(String, ContainerKind)>,
    /// `IsPodLevelResourcesSet`.
    pub(super) pod_level_set: bool,
}

impl ManagedPod {
    /// Whether `name` is one of the pod's init or app containers.
    pub fn has_container(&self, name: &str) -> bool {
        self.containers.iter().any(|(n, _)| n == name)
    }
}

fn cpu_millis(map: &model::ResourceMap) -> Option<i64> {
    map.get("cpu").map(Quantity::milli_value)
}

fn memory_bytes(map: &model::ResourceMap) -> Option<u64> {
    map.get("memory").map(non_negative_bytes)
}

fn memory_requests(map: &model::ResourceMap) -> BTreeMap<String, u64> {
    map.iter()
        .filter(|(name, _)| mm::is_memory_resource(name))
        .map(|(name, q)| (name.clone(), non_negative_bytes(q)))
        .collect()
}

/// The pod `uid` (already decoded) as the managers see it; ephemeral
/// containers are not managed.
pub(crate) fn managed_pod(uid: &str, pod: &Pod, gates: &FeatureGates) -> Result<ManagedPod> {
    let mut errors = Vec::new();
    if uid.is_empty() {
        errors.push(FieldError::new(
            "uid",
            FieldErrorType::Required,
            "the managers key their state by pod UID",
            None,
        ));
    }
    if pod.containers.is_empty() {
        errors.push(FieldError::new(
            "spec.containers",
            FieldErrorType::Required,
            "a pod needs at least one container",
            None,
        ));
    }
    let mut names = BTreeSet::new();
    for c in pod.init_and_regular() {
        if c.name.is_empty() {
            errors.push(FieldError::new(
                format!("{}.name", c.path()),
                FieldErrorType::Required,
                "containers need a name",
                None,
            ));
        } else if !names.insert(c.name.as_str()) {
            errors.push(FieldError::duplicate(format!("{}.name", c.path()), &c.name));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let spec = |c: &model::Container| {
        let kind = match c.kind {
            model::ContainerKind::Init => CpuContainerKind::Init,
            model::ContainerKind::Sidecar => CpuContainerKind::Sidecar,
            _ => CpuContainerKind::Regular,
        };
        ContainerSpec {
            name: c.name.clone(),
            kind,
            cpu_request_millis: cpu_millis(c.resources.requests()),
            cpu_limit_millis: cpu_millis(c.resources.limits()),
            memory_request_bytes: memory_bytes(c.resources.requests()),
            memory_limit_bytes: memory_bytes(c.resources.limits()),
        }
    };
    let pod_level = pod
        .resources
        .as_ref()
        .map(|r| PodLevelResources {
            cpu_request_millis: cpu_millis(r.requests()),
            cpu_limit_millis: cpu_millis(r.limits()),
            memory_request_bytes: memory_bytes(r.requests()),
            memory_limit_bytes: memory_bytes(r.limits()),
        })
        .unwrap_or_default();
    let cpu = PodSpec {
        uid: uid.to_string(),
        pod_level,
        init_containers: pod.init_containers.iter().map(spec).collect(),
        containers: pod.containers.iter().map(spec).collect(),
    };
    let memory_container = |c: &model::Container, cpu: &ContainerSpec| MemoryContainer {
        name: c.name.clone(),
        restartable: c.kind == model::ContainerKind::Sidecar,
        requests: memory_requests(c.resources.requests()),
        equivalent_guaranteed: cpu.is_equivalent_guaranteed(),
    };
    let pod_level_set = crate::resources::pod_level_resources_set(pod);
    let memory = MemoryPod {
        uid: uid.to_string(),
        // Both managers see the class the CPU manager computes (ComputePodQOS over cpu and memory).
        guaranteed: cpu.qos_class(gates) == CpuQosClass::Guaranteed,
        init_containers: pod
            .init_containers
            .iter()
            .zip(&cpu.init_containers)
            .map(|(c, s)| memory_container(c, s))
            .collect(),
        containers: pod
            .containers
            .iter()
            .zip(&cpu.containers)
            .map(|(c, s)| memory_container(c, s))
            .collect(),
        pod_level_resources_set: pod_level_set,
        pod_requests: pod
            .resources
            .as_ref()
            .map(|r| memory_requests(r.requests()))
            .unwrap_or_default(),
    };
    Ok(ManagedPod {
        uid: uid.to_string(),
        containers: pod
            .init_and_regular()
            .map(|c| (c.name.clone(), c.kind))
            .collect(),
        cpu,
        memory,
        pod_level_set,
    })
}
