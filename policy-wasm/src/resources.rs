//! Effective pod requests and limits: upstream `PodRequests`, `PodLimits`,
//! `AggregateContainerRequests` and `AggregateContainerLimits`
//! (component-helpers `resource/helpers.go`).
//!
//! Containers aggregate with the sidecar formula of KEP-753: regular
//! containers and sidecars add up, each non-restartable init container
//! counts as its own request plus the sidecars started before it, and the
//! pod takes the element-wise maximum of the two. Pod-level values
//! (KEP-2837) replace the aggregate per resource. Status-aware accounting
//! for in-place resize follows upstream master: the maximum of the per-source
//! sums (spec, allocated, actuated), not the sum of per-container maxima.

use std::borrow::Cow;

use crate::features::FeatureGates;
use crate::model::{Container, ContainerKind, ContainerStatus, Pod, ResourceMap};
use crate::quantity::Quantity;

/// Whether a resource may be set at pod level: cpu, memory and hugepages-*.
pub fn is_supported_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// Whether `name` is a hugepages resource (`hugepages-<size>`).
pub fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `IsPodLevelResourcesSet`: `spec.resources` has a supported request or limit.
pub fn pod_level_resources_set(pod: &Pod) -> bool {
    pod.resources.as_ref().is_some_and(|r| {
        r.requests()
            .keys()
            .chain(r.limits().keys())
            .any(|k| is_supported_pod_level_resource(k))
    })
}

/// The container's limit of `resource` as the kubelet sets it on the
/// container's cgroup: its own, or, when it has none, the pod-level limit
/// (KEP-2837 row 7, annotation [c]; upstream `getCPULimit` and the memory
/// limit of `calculateLinuxResources`). Zero means no limit.
pub fn container_limit_with_pod_fallback(
    pod: &Pod,
    c: &Container,
    gates: &FeatureGates,
    resource: &str,
) -> Quantity {
    let own = c
        .resources
        .limits()
        .get(resource)
        .copied()
        .unwrap_or_default();
    if gates.pod_level_resources && pod_level_resources_set(pod) && own.is_zero() {
        return pod
            .resources
            .as_ref()
            .and_then(|r| r.limits().get(resource).copied())
            .unwrap_or_default();
    }
    own
}

/// `IsPodLevelRequestsSet`: `spec.resources.requests` has a supported key.
pub fn pod_level_requests_set(pod: &Pod) -> bool {
    pod.resources.as_ref().is_some_and(|r| {
        r.requests()
            .keys()
            .any(|k| is_supported_pod_level_resource(k))
    })
}

/// `IsPodLevelLimitsSet`: `spec.resources.limits` has a supported key.
pub fn pod_level_limits_set(pod: &Pod) -> bool {
    pod.resources.as_ref().is_some_and(|r| {
        r.limits()
            .keys()
            .any(|k| is_supported_pod_level_resource(k))
    })
}

/// Upstream `PodResourcesOptions`, parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Options {
    /// Leave `spec.overhead` out.
    pub exclude_overhead: bool,
    /// Account status resources (in-place resize).
    pub use_status_resources: bool,
    /// Also account pod-level status resources.
    pub in_place_pod_level_resources_vertical_scaling: bool,
    /// Defaults for missing container requests.
    pub non_missing_container_requests: Option<ResourceMap>,
    /// Ignore `spec.resources`.
    pub skip_pod_level_resources: bool,
    /// Ignore container resources.
    pub skip_container_level_resources: bool,
}

/// `map[k] = max(map[k], other[k])` for every key of `other`.
pub fn max_into(map: &mut ResourceMap, other: &ResourceMap) {
    // On a tie the quantity already there stays (its format is what prints).
    map.merge_with(
        other,
        |mine, theirs| if mine >= theirs { mine } else { theirs },
    );
}

/// `map += other`, key by key.
pub fn add_all(map: &mut ResourceMap, other: &ResourceMap) {
    map.merge_with(other, Quantity::saturating_add);
}

/// `requests` with the missing defaults added; borrowed when there are none.
fn apply_non_missing<'a>(
    requests: &'a ResourceMap,
    non_missing: Option<&ResourceMap>,
) -> Cow<'a, ResourceMap> {
    let Some(defaults) = non_missing else {
        return Cow::Borrowed(requests);
    };
    let mut out = requests.clone();
    for (k, v) in defaults {
        out.entry(k.clone()).or_insert(*v);
    }
    Cow::Owned(out)
}

/// The KEP-753 aggregate of one resource source over all containers.
/// `source` returns a container's list, or `None` when that source has
/// nothing for it (counts as an empty list). Sources borrow the pod's maps
/// where they can: this runs five times per evaluation.
pub fn aggregate<'p>(
    pod: &'p Pod,
    mut source: impl FnMut(&'p Container) -> Option<Cow<'p, ResourceMap>>,
) -> ResourceMap {
    let mut result = ResourceMap::new();
    for c in &pod.containers {
        if let Some(r) = source(c) {
            add_all(&mut result, &r);
        }
    }
    let mut sidecar_sum = ResourceMap::new();
    let mut init_max = ResourceMap::new();
    for c in &pod.init_containers {
        let r = source(c).unwrap_or_default();
        if c.kind == ContainerKind::Sidecar {
            add_all(&mut result, &r);
            add_all(&mut sidecar_sum, &r);
            max_into(&mut init_max, &sidecar_sum);
        } else {
            let mut in_use = r.into_owned();
            add_all(&mut in_use, &sidecar_sum);
            max_into(&mut init_max, &in_use);
        }
    }
    max_into(&mut result, &init_max);
    result
}

fn status_for<'a>(pod: &'a Pod, c: &Container) -> Option<&'a ContainerStatus> {
    let list = match c.kind {
        ContainerKind::Regular => &pod.status.container_statuses,
        ContainerKind::Init | ContainerKind::Sidecar => &pod.status.init_container_statuses,
        ContainerKind::Ephemeral => return None,
    };
    list.iter().find(|s| s.name == c.name)
}

/// `IsPodResizeInfeasible`: the first `PodResizePending` condition has reason `Infeasible`.
pub fn resize_infeasible(pod: &Pod) -> bool {
    first_resize_pending_reason(pod) == Some("Infeasible")
}

/// `IsPodResizeDeferred`: the first `PodResizePending` condition has reason `Deferred`.
pub fn resize_deferred(pod: &Pod) -> bool {
    first_resize_pending_reason(pod) == Some("Deferred")
}

fn first_resize_pending_reason(pod: &Pod) -> Option<&str> {
    pod.status
        .conditions
        .iter()
        .find(|(kind, _, _)| kind == "PodResizePending")
        .and_then(|(_, _, reason)| reason.as_deref())
}

/// `AggregateContainerRequests(pod, options)`.
pub fn aggregate_container_requests<'p>(pod: &'p Pod, options: &Options) -> ResourceMap {
    let non_missing = options.non_missing_container_requests.as_ref();
    let spec = aggregate(pod, |c| {
        Some(apply_non_missing(c.resources.requests(), non_missing))
    });
    if !options.use_status_resources {
        return spec;
    }
    let infeasible = resize_infeasible(pod);
    let spec_fallback = |c: &'p Container| {
        (!infeasible).then(|| apply_non_missing(c.resources.requests(), non_missing))
    };
    let pod_level_status = options.in_place_pod_level_resources_vertical_scaling
        && pod.status.allocated.is_some()
        && pod
            .status
            .resources
            .as_ref()
            .is_some_and(|r| r.requests.is_some());
    let (allocated, actuated) = if pod_level_status {
        (
            pod.status.allocated.clone().unwrap_or_default(),
            pod.status
                .resources
                .as_ref()
                .map(|r| r.requests().clone())
                .unwrap_or_default(),
        )
    } else {
        let allocated = aggregate(pod, |c| {
            match status_for(pod, c).and_then(|s| s.allocated.as_ref()) {
                Some(a) => Some(Cow::Borrowed(a)),
                None => spec_fallback(c),
            }
        });
        let actuated = aggregate(pod, |c| {
            let status = status_for(pod, c);
            if let Some(req) = status
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
            {
                return Some(Cow::Borrowed(req));
            }
            match status.and_then(|s| s.allocated.as_ref()) {
                Some(a) => Some(Cow::Borrowed(a)),
                None => spec_fallback(c),
            }
        });
        (allocated, actuated)
    };
    let mut result = if infeasible { ResourceMap::new() } else { spec };
    max_into(&mut result, &actuated);
    max_into(&mut result, &allocated);
    result
}

/// `AggregateContainerLimits(pod, options)` (ignores `nonMissingContainerRequests`).
pub fn aggregate_container_limits(pod: &Pod, options: &Options) -> ResourceMap {
    let spec = aggregate(pod, |c| Some(Cow::Borrowed(c.resources.limits())));
    if !options.use_status_resources {
        return spec;
    }
    let infeasible = resize_infeasible(pod);
    let pod_level_limits = options
        .in_place_pod_level_resources_vertical_scaling
        .then(|| pod.status.resources.as_ref().and_then(|r| r.limits.clone()))
        .flatten();
    let actuated = match pod_level_limits {
        Some(limits) => limits,
        None => aggregate(pod, |c| {
            match status_for(pod, c)
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.limits.as_ref())
            {
                Some(l) => Some(Cow::Borrowed(l)),
                None => (!infeasible).then(|| Cow::Borrowed(c.resources.limits())),
            }
        }),
    };
    if infeasible {
        return actuated;
    }
    let mut result = spec;
    max_into(&mut result, &actuated);
    result
}

/// Resources added by DRA node-allocatable claims (alpha
/// DRANodeAllocatableResources): every mapping, the per-pod overhead and
/// the per-container overhead once per referencing container.
pub fn dra_claim_resources(pod: &Pod) -> ResourceMap {
    let mut total = ResourceMap::new();
    for claim in &pod.status.claims {
        add_all(&mut total, &claim.mapping);
        add_all(&mut total, &claim.per_pod);
        for _ in &claim.containers {
            add_all(&mut total, &claim.per_container);
        }
    }
    total
}

/// The DRA share of one container (`GetContainerDRAAllocations`): for each
/// claim listing it, its share of the mapping and per-pod overhead plus the
/// per-container overhead.
pub fn dra_container_share(pod: &Pod, container: &str, resource: &str) -> Quantity {
    let mut share = Quantity::ZERO;
    for claim in &pod.status.claims {
        let refs = claim.containers.len() as i64;
        if refs == 0 || !claim.containers.iter().any(|c| c == container) {
            continue;
        }
        let shared = [claim.mapping.get(resource), claim.per_pod.get(resource)];
        for q in shared.into_iter().flatten() {
            // cpu divides in millicores, other resources in whole units.
            let part = if resource == "cpu" {
                Quantity::from_milli(q.milli_value() / refs, q.format())
            } else {
                Quantity::from_value(q.value() / refs, q.format())
            };
            share = share.saturating_add(part);
        }
        if let Some(q) = claim.per_container.get(resource) {
            share = share.saturating_add(*q);
        }
    }
    share
}

fn pod_level_effective(pod: &Pod, options: &Options, requests: bool) -> Option<ResourceMap> {
    let spec_resources = pod.resources.as_ref()?;
    let spec = if requests {
        spec_resources.requests()
    } else {
        spec_resources.limits()
    };
    let status = pod.status.resources.as_ref();
    if !(options.use_status_resources
        && options.in_place_pod_level_resources_vertical_scaling
        && status.is_some())
    {
        return Some(spec.clone());
    }
    let status = status.expect("checked above");
    let mut eff = if resize_infeasible(pod) {
        ResourceMap::new()
    } else {
        spec.clone()
    };
    if requests {
        max_into(&mut eff, status.requests());
        if let Some(allocated) = &pod.status.allocated {
            max_into(&mut eff, allocated);
        }
    } else {
        max_into(&mut eff, status.limits());
    }
    Some(eff)
}

/// `PodRequests(pod, options)`.
pub fn pod_requests(pod: &Pod, options: &Options, gates: &FeatureGates) -> ResourceMap {
    let aggregate = if options.skip_container_level_resources {
        ResourceMap::new()
    } else {
        aggregate_container_requests(pod, options)
    };
    pod_requests_from(aggregate, pod, options, gates)
}

/// `PodRequests` given the containers' part: `aggregate_container_requests`
/// with the same options, or empty when they skip container resources.
pub fn pod_requests_from(
    aggregate: ResourceMap,
    pod: &Pod,
    options: &Options,
    gates: &FeatureGates,
) -> ResourceMap {
    let mut reqs = aggregate;
    if gates.dra_node_allocatable_resources {
        add_all(&mut reqs, &dra_claim_resources(pod));
    }
    if !options.skip_pod_level_resources
        && pod_level_requests_set(pod)
        && let Some(eff) = pod_level_effective(pod, options, true)
    {
        for (k, v) in eff {
            if is_supported_pod_level_resource(&k) {
                reqs.insert(k, v);
            }
        }
    }
    if !options.exclude_overhead
        && let Some(overhead) = &pod.overhead
    {
        add_all(&mut reqs, overhead);
    }
    reqs
}

/// `PodLimits(pod, options)`.
pub fn pod_limits(pod: &Pod, options: &Options, gates: &FeatureGates) -> ResourceMap {
    let aggregate = if options.skip_container_level_resources {
        ResourceMap::new()
    } else {
        aggregate_container_limits(pod, options)
    };
    pod_limits_from(aggregate, pod, options, gates)
}

/// `PodLimits` given the containers' part (see [`pod_requests_from`]).
pub fn pod_limits_from(
    aggregate: ResourceMap,
    pod: &Pod,
    options: &Options,
    gates: &FeatureGates,
) -> ResourceMap {
    let mut limits = aggregate;
    if gates.dra_node_allocatable_resources {
        let claimed: ResourceMap = dra_claim_resources(pod)
            .into_iter()
            .filter(|(k, _)| limits.contains_key(k) || is_hugepages(k))
            .collect();
        add_all(&mut limits, &claimed);
    }
    // Upstream checks ResourcesSet (not LimitsSet) here; the loop below only
    // copies the limits that exist, so the two agree.
    if !options.skip_pod_level_resources
        && pod_level_resources_set(pod)
        && let Some(eff) = pod_level_effective(pod, options, false)
    {
        for (k, v) in eff {
            if is_supported_pod_level_resource(&k) {
                limits.insert(k, v);
            }
        }
    }
    if !options.exclude_overhead
        && let Some(overhead) = &pod.overhead
    {
        for (k, v) in overhead {
            if let Some(limit) = limits.get_mut(k)
                && !limit.is_zero()
            {
                *limit = limit.saturating_add(*v);
            }
        }
    }
    limits
}

/// Options as the kubelet uses them for cgroups and admission: pod-level
/// resources honoured when the gate is on.
pub fn kubelet_options(gates: &FeatureGates) -> Options {
    Options {
        skip_pod_level_resources: !gates.pod_level_resources,
        ..Options::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> ResourceMap {
        entries
            .iter()
            .map(|(name, text)| (name.to_string(), Quantity::parse(text).expect("a quantity")))
            .collect()
    }

    fn printed(map: &ResourceMap) -> Vec<(String, String)> {
        map.iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }

    /// `max_into` keeps the quantity already there on a tie, as upstream's
    /// `maxResourceList` (it replaces only a smaller one), so its format is
    /// what prints; a name only in `other` is added, and sums saturate.
    #[test]
    fn maxima_keep_the_first_of_equal_quantities_and_sums_add_every_name() {
        let mut first = map(&[("cpu", "1"), ("memory", "1Gi")]);
        max_into(
            &mut first,
            &map(&[("cpu", "1000m"), ("memory", "1073741824"), ("pods", "3")]),
        );
        assert_eq!(
            printed(&first),
            printed(&map(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "3")]))
        );
        let mut second = map(&[("memory", "1073741824")]);
        max_into(&mut second, &map(&[("memory", "1Gi"), ("cpu", "2")]));
        assert_eq!(
            printed(&second),
            printed(&map(&[("cpu", "2"), ("memory", "1073741824")]))
        );

        let mut sum = map(&[("cpu", "500m"), ("zz", "1")]);
        add_all(&mut sum, &map(&[("a", "1"), ("cpu", "1500m")]));
        assert_eq!(
            printed(&sum),
            printed(&map(&[("a", "1"), ("cpu", "2"), ("zz", "1")]))
        );
    }
}
