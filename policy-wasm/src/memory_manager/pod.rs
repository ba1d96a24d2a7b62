//! The pod as the static policy sees it ([`MemoryPod`], [`MemoryContainer`],
//! the [`PodLevelGates`]), the memory it requests, and the KEP-5526 check of
//! its pod-level partition ([`validate_pod_scope_resources`]).
//!
//! Mirrors upstream `pkg/kubelet/cm/memorymanager/policy_static.go`
//! (`getContainerRequestedResources`, `getPodRequestedResources`,
//! `validatePodScopeResources`, `isRegularInitContainer`).

use std::collections::BTreeMap;

use super::{PodScopeError, is_memory_resource};
use crate::features::FeatureGates;

/// The feature gates the static policy reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodLevelGates {
    /// `PodLevelResources` (KEP-2837).
    pub pod_level_resources: bool,
    /// `PodLevelResourceManagers` (KEP-5526).
    pub pod_level_resource_managers: bool,
}

impl PodLevelGates {
    /// Both gates on: pod-level resources are managed.
    pub const fn both(self) -> bool {
        self.pod_level_resources && self.pod_level_resource_managers
    }
}

impl From<&FeatureGates> for PodLevelGates {
    fn from(gates: &FeatureGates) -> PodLevelGates {
        PodLevelGates {
            pod_level_resources: gates.pod_level_resources,
            pod_level_resource_managers: gates.pod_level_resource_managers,
        }
    }
}

/// A container as the memory manager sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryContainer {
    /// The container name.
    pub name: String,
    /// For init containers: `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
    /// Requests in bytes; only `memory` and `hugepages-*` are read.
    pub requests: BTreeMap<String, u64>,
    /// `IsContainerEquivalentQOSGuaranteed`: cpu and memory requests set and equal to the limits.
    pub equivalent_guaranteed: bool,
}

/// A pod as the memory manager sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryPod {
    /// The pod UID.
    pub uid: String,
    /// The pod QoS class is Guaranteed.
    pub guaranteed: bool,
    /// `spec.initContainers`, in order.
    pub init_containers: Vec<MemoryContainer>,
    /// `spec.containers`, in order.
    pub containers: Vec<MemoryContainer>,
    /// `IsPodLevelResourcesSet`: `spec.resources` has a cpu, memory or hugepages request or limit.
    pub pod_level_resources_set: bool,
    /// `spec.resources.requests` in bytes; only `memory` and `hugepages-*` are read.
    pub pod_requests: BTreeMap<String, u64>,
}

impl MemoryPod {
    /// Init containers then app containers, the kubelet's admission order.
    pub fn all_containers(&self) -> impl Iterator<Item = &MemoryContainer> {
        self.init_containers.iter().chain(&self.containers)
    }

    /// The container called `name`, init or app.
    pub(super) fn container(&self, name: &str) -> Option<&MemoryContainer> {
        self.all_containers().find(|c| c.name == name)
    }

    /// Upstream `isRegularInitContainer`.
    pub(super) fn is_regular_init_container(&self, name: &str) -> bool {
        self.init_containers
            .iter()
            .find(|c| c.name == name)
            .is_some_and(|c| !c.restartable)
    }
}

/// Upstream `getContainerRequestedResources`: the container's memory and
/// hugepages requests. With `PodLevelResourceManagers` on and pod-level
/// resources set, a container that is not equivalent-Guaranteed gets none.
pub fn get_container_requested_resources(
    gates: PodLevelGates,
    pod: &MemoryPod,
    container: &MemoryContainer,
) -> BTreeMap<String, u64> {
    if gates.pod_level_resource_managers
        && pod.pod_level_resources_set
        && !container.equivalent_guaranteed
    {
        return BTreeMap::new();
    }
    memory_requests(&container.requests)
}

fn memory_requests(requests: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    requests
        .iter()
        .filter(|(name, _)| is_memory_resource(name))
        .map(|(name, &size)| (name.clone(), size))
        .collect()
}

/// Upstream `getPodRequestedResources`. With `PodLevelResourceManagers` on and
/// pod-level resources set: the positive pod-level memory and hugepages
/// requests. Otherwise the KEP-753 rule per resource:
/// `max(max over regular init containers of (sidecars before it + its request),
/// sum(app containers) + sum(sidecars))`. Quirk kept from upstream: only
/// resources some app container requests appear in the result.
pub fn get_pod_requested_resources(gates: PodLevelGates, pod: &MemoryPod) -> BTreeMap<String, u64> {
    if gates.pod_level_resource_managers && pod.pod_level_resources_set {
        return memory_requests(&pod.pod_requests)
            .into_iter()
            .filter(|&(_, size)| size > 0)
            .collect();
    }
    let mut by_init: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_sidecars: BTreeMap<String, u64> = BTreeMap::new();
    for container in &pod.init_containers {
        for (name, size) in get_container_requested_resources(gates, pod, container) {
            let init_max = by_init.entry(name.clone()).or_insert(0);
            let sidecars = by_sidecars.entry(name).or_insert(0);
            if container.restartable {
                *sidecars = sidecars.saturating_add(size);
            } else {
                *init_max = (*init_max).max(sidecars.saturating_add(size));
            }
        }
    }
    let mut by_apps: BTreeMap<String, u64> = BTreeMap::new();
    for container in &pod.containers {
        for (name, size) in get_container_requested_resources(gates, pod, container) {
            let sum = by_apps.entry(name).or_insert(0);
            *sum = sum.saturating_add(size);
        }
    }
    by_apps
        .into_iter()
        .map(|(name, apps)| {
            let long_running = apps.saturating_add(by_sidecars.get(&name).copied().unwrap_or(0));
            let size = long_running.max(by_init.get(&name).copied().unwrap_or(0));
            (name, size)
        })
        .collect()
}

/// Upstream `validatePodScopeResources` (KEP-5526): every shared pool of the
/// pod-level partition must be non-empty, and each exclusive regular init
/// container must fit the budget left by the sidecars before it. The pool for
/// init containers saturates at zero where upstream's `uint64` would wrap.
pub fn validate_pod_scope_resources(
    gates: PodLevelGates,
    pod: &MemoryPod,
) -> Result<(), PodScopeError> {
    let total = get_pod_requested_resources(gates, pod);
    let mut has_shared_long_running = false;
    let mut exclusive_long_running: BTreeMap<String, u64> = BTreeMap::new();
    let exclusive_of =
        |sums: &BTreeMap<String, u64>, name: &str| sums.get(name).copied().unwrap_or(0);

    for container in &pod.init_containers {
        let requests = get_container_requested_resources(gates, pod, container);
        if !container.restartable {
            if requests.is_empty() {
                for (resource, &budget) in &total {
                    if exclusive_of(&exclusive_long_running, resource) >= budget {
                        return Err(PodScopeError::NoMemoryForSharedInitContainers {
                            resource: resource.clone(),
                        });
                    }
                }
            } else {
                for (resource, &budget) in &total {
                    let available =
                        budget.saturating_sub(exclusive_of(&exclusive_long_running, resource));
                    let requested = requests.get(resource).copied().unwrap_or(0);
                    if requested > available {
                        return Err(PodScopeError::InitContainerTooLarge {
                            requested,
                            resource: resource.clone(),
                            available,
                        });
                    }
                }
            }
            continue;
        }
        if requests.is_empty() {
            has_shared_long_running = true;
            continue;
        }
        add_all(&mut exclusive_long_running, &requests);
    }
    for container in &pod.containers {
        let requests = get_container_requested_resources(gates, pod, container);
        if requests.is_empty() {
            has_shared_long_running = true;
            continue;
        }
        add_all(&mut exclusive_long_running, &requests);
    }
    if has_shared_long_running {
        for (resource, &budget) in &total {
            if exclusive_of(&exclusive_long_running, resource) >= budget {
                return Err(PodScopeError::NoMemoryForSharedContainers {
                    resource: resource.clone(),
                });
            }
        }
    }
    Ok(())
}

/// Adds `more` to `sums` per resource (saturating).
pub(super) fn add_all(sums: &mut BTreeMap<String, u64>, more: &BTreeMap<String, u64>) {
    for (name, &size) in more {
        let sum = sums.entry(name.clone()).or_insert(0);
        *sum = sum.saturating_add(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_manager::test_support::{
        GI, container, gates_on, hint, pod_level_pod, state,
    };
    use crate::memory_manager::{
        ERROR_EMPTY_POD_SHARED_POOL, MEMORY, allocate_pod, get_pod_topology_hints,
    };

    #[test]
    fn pod_scope_validation() {
        let start = state(2);
        let mut p = pod_level_pod();
        // Exclusive requests use the whole budget while shared containers exist.
        p.containers[0].requests.insert(MEMORY.into(), 3 * GI);
        let err = validate_pod_scope_resources(gates_on(), &p).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pod rejected, sum of exclusive container memory requests equals pod budget, leaving no memory for shared containers"
        );
        let hints = get_pod_topology_hints(gates_on(), &start, &p).unwrap();
        assert_eq!(hints, BTreeMap::from([(MEMORY.to_string(), vec![])]));
        let err = allocate_pod(gates_on(), &start, &p, hint(&[0], true)).unwrap_err();
        assert_eq!(err.reason(), ERROR_EMPTY_POD_SHARED_POOL);

        let mut p = pod_level_pod();
        p.init_containers[2].requests.insert(MEMORY.into(), 4 * GI);
        assert_eq!(
            validate_pod_scope_resources(gates_on(), &p)
                .unwrap_err()
                .to_string(),
            format!(
                "pod rejected, largest exclusive init container requests {} of memory, but only {} available",
                4 * GI,
                3 * GI
            )
        );

        // A sidecar takes the whole budget; the next regular init container is shared.
        let mut p = pod_level_pod();
        p.init_containers[1].requests.insert(MEMORY.into(), 4 * GI);
        p.init_containers[2] = container("init-excl", 0);
        assert_eq!(
            validate_pod_scope_resources(gates_on(), &p)
                .unwrap_err()
                .to_string(),
            "pod rejected, pod has shared init containers but no memory available for them"
        );
        // Below the budget is fine: the rest is reserved but unused.
        let mut p = pod_level_pod();
        p.init_containers.clear();
        p.containers.truncate(1);
        assert!(validate_pod_scope_resources(gates_on(), &p).is_ok());
    }
}
