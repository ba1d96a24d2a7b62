//! In-place pod resize (KEP-1287, with KEP-2837 pod-level resources):
//! validation, the fit check, resize policy, and the ordered cgroup plan.
//!
//! The plan is computed from the values the node would apply for the
//! current and the desired pod (`cgroup` and `memory_qos`), so whatever the
//! evaluation writes is exactly what a resize converges to. Ordering, per
//! resource (memory first, then cpu, as upstream):
//! - pod knobs that rise are written before the containers, knobs that fall
//!   after them (net increase: pod first; net decrease: pod last; no net
//!   change: no pod write);
//! - containers whose values fall are written before those that rise;
//! - every lowered memory.max is preceded by a usage check, so the host
//!   defers instead of OOM-killing a workload above its new limit.
//!
//! Together these keep, at every step, the sum of container limits within
//! the pod's limit when the pod value derives from its containers, and
//! every single container within it when pod-level limits are explicit.

use crate::cgroup;
use crate::cgroup_file::{CgroupFile, CgroupFileName, CgroupValue, CpuMaxValue};
use crate::features::FeatureGates;
use crate::field_error::{FieldError, FieldErrorType, field_error};
use crate::model::{Container, ContainerKind, Pod, Requirements, ResourceMap};
use crate::node::{CgroupVersion, NodeConfig};
use crate::qos::{QosClass, compute_pod_qos, pod_qos};
use crate::resources;

/// What the node decides about a resize.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeDecision {
    /// It fits and the plan applies it.
    Accepted,
    /// It fits the node's allocatable but not next to the other pods now.
    Deferred,
    /// It can never fit this node.
    Infeasible,
    /// The API would reject it.
    Invalid,
}

/// What one resize step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeStepKind {
    /// Write `files` to the pod cgroup.
    WritePod,
    /// Write `files` to the container's cgroup.
    WriteContainer,
    /// Before a lowered memory.max: defer if usage is above the new limit.
    CheckMemoryUsage,
    /// The container's resize policy restarts it.
    RestartContainer,
    /// The container's exclusive CPUs are re-allocated.
    ReallocateCpus,
}

/// Whether a step raises or lowers what it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeDirection {
    /// Raises.
    Increase,
    /// Lowers.
    Decrease,
    /// Neither (restarts, re-allocations).
    Unchanged,
}

/// The resources an in-place resize changes ([`RESIZABLE`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeResource {
    /// `cpu`.
    Cpu,
    /// `memory`.
    Memory,
}

/// One ordered step of a resize plan.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeStep {
    /// What to do.
    pub kind: ResizeStepKind,
    /// The container, for container steps; `None` for the pod cgroup.
    pub container: Option<String>,
    /// The resource the step changes.
    pub resource: ResizeResource,
    /// Raise or lower.
    pub direction: ResizeDirection,
    /// The files and values to write (write steps).
    pub files: Vec<CgroupFile>,
    /// The new memory limit (usage checks).
    pub memory_limit_bytes: Option<u64>,
    /// The new exclusive CPU count (re-allocations).
    pub cpus: Option<u64>,
}

/// The decision and the ordered steps from the actuated to the desired resources.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizePlan {
    /// Accepted, Deferred, Infeasible or Invalid.
    pub decision: ResizeDecision,
    /// Why, for anything but Accepted.
    pub message: String,
    /// For Invalid: what the API server would reject, with field paths.
    pub errors: Vec<FieldError>,
    /// The pod's QoS class (an accepted resize keeps it).
    pub qos_class: QosClass,
    /// The steps in the order they must be applied; empty unless Accepted.
    pub steps: Vec<ResizeStep>,
}

/// Resources that may change in place.
const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// A resize policy value: `RestartContainer` restarts, `NotRequired`
/// resizes in place (upstream accepts no other value).
fn restart_required(policy: &str) -> Option<bool> {
    match policy {
        "NotRequired" => Some(false),
        "RestartContainer" => Some(true),
        _ => None,
    }
}

/// The container's restart policy for `resource`; unset is `NotRequired`.
fn restarts_on(c: &Container, resource: &str) -> bool {
    c.resize_policy
        .iter()
        .find(|(r, _)| r == resource)
        .is_some_and(|(_, p)| restart_required(p) == Some(true))
}

fn without_resizable(map: &ResourceMap) -> ResourceMap {
    map.iter()
        .filter(|(k, _)| !RESIZABLE.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// `resourcesRemoved`: a resource name of `old` is missing from `new`
/// (lowering a value, even to zero, is not a removal).
fn removed(old: &ResourceMap, new: &ResourceMap) -> bool {
    old.keys().any(|k| !new.contains_key(k))
}

fn forbidden(field: impl Into<String>, message: &str) -> FieldError {
    field_error(field, FieldErrorType::Forbidden, message)
}

/// Whether two containers differ outside cpu and memory
/// (`dropCPUMemoryResourcesFromContainer` then a deep compare; of a
/// container the contract carries resources and `resizePolicy`).
fn differs_outside_cpu_memory(old: &Container, new: &Container) -> bool {
    without_resizable(old.resources.requests()) != without_resizable(new.resources.requests())
        || without_resizable(old.resources.limits()) != without_resizable(new.resources.limits())
        || old.resize_policy != new.resize_policy
}

fn resources_differ(old: &Container, new: &Container) -> bool {
    old.resources.requests() != new.resources.requests()
        || old.resources.limits() != new.resources.limits()
}

/// The API server's `ValidatePodResize` (pkg/apis/core/validation), in its
/// order, with its field paths and messages. The desired pod's own spec
/// checks (request <= limit, `resizePolicy` values) come from
/// `validation::validate_pod`, as `validatePodMetadataAndSpec` runs first
/// upstream.
fn validate_api(current: &Pod, desired: &Pod, gates: &FeatureGates) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if crate::oom::is_mirror_pod(current) {
        errors.push(forbidden("", "static pods cannot be resized"));
        return errors;
    }
    if current.os_name.as_deref() == Some("windows") {
        errors.push(forbidden("", "windows pods cannot be resized"));
        return errors;
    }
    if pod_qos(current, gates) != compute_pod_qos(desired, gates) {
        let mut e = field_error(
            "spec",
            FieldErrorType::Invalid,
            "Pod QOS Class may not change as a result of resizing",
        );
        e.bad_value = Some(desired.status.qos_class.clone().unwrap_or_default());
        errors.push(e);
    }
    if current.resources.is_some() || desired.resources.is_some() {
        if !gates.in_place_pod_level_resources_vertical_scaling {
            errors.push(forbidden(
                "",
                "resize of pods with pod-level resources is forbidden when InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled",
            ));
            return errors;
        }
        if let Some(old) = &current.resources {
            let Some(new) = &desired.resources else {
                errors.push(forbidden(
                    "spec.resources",
                    "pod-level resources cannot be removed",
                ));
                return errors;
            };
            if removed(old.requests(), new.requests()) {
                errors.push(forbidden(
                    "spec.resources.requests",
                    "pod-level resource requests cannot be removed",
                ));
            }
            if removed(old.limits(), new.limits()) {
                errors.push(forbidden(
                    "spec.resources.limits",
                    "pod-level resource limits cannot be removed",
                ));
            }
        }
        let pod_level = |p: &Pod| p.resources.clone().unwrap_or_default();
        let (old, new) = (pod_level(current), pod_level(desired));
        if without_resizable(old.requests()) != without_resizable(new.requests())
            || without_resizable(old.limits()) != without_resizable(new.limits())
        {
            errors.push(forbidden(
                "spec",
                "only cpu and memory resources are mutable at pod-level",
            ));
        }
        if gates.dra_node_allocatable_resources
            && !desired.status.claims.is_empty()
            && let Some(message) = dra_not_covered(desired)
        {
            errors.push(field_error(
                "spec.resources",
                FieldErrorType::Invalid,
                message,
            ));
        }
    }

    let before = errors.len();
    ordering(
        &current.containers,
        &desired.containers,
        "spec.containers",
        "containers",
        &mut errors,
    );
    ordering(
        &current.init_containers,
        &desired.init_containers,
        "spec.initContainers",
        "initContainers",
        &mut errors,
    );
    if errors.len() > before {
        return errors;
    }

    for (old, new) in current.containers.iter().zip(&desired.containers) {
        removals(old, new, &mut errors);
        if differs_outside_cpu_memory(old, new) {
            errors.push(forbidden(
                "spec",
                "only cpu and memory resources are mutable",
            ));
        }
    }
    for (old, new) in current.init_containers.iter().zip(&desired.init_containers) {
        let sidecar = new.kind == ContainerKind::Sidecar;
        let resizable = sidecar || gates.in_place_pod_vertical_scaling_init_containers;
        if resizable {
            removals(old, new, &mut errors);
            if differs_outside_cpu_memory(old, new) {
                errors.push(forbidden(
                    new.path(),
                    "only cpu and memory resources for init or sidecar containers are mutable",
                ));
            }
        }
        if !sidecar && (resources_differ(old, new) || old.resize_policy != new.resize_policy) {
            if !gates.in_place_pod_vertical_scaling_init_containers {
                errors.push(forbidden(
                    "spec",
                    "resources for non-sidecar init containers are immutable",
                ));
            } else if new
                .resize_policy
                .iter()
                .any(|(_, p)| p == "RestartContainer")
            {
                errors.push(forbidden(
                    new.path(),
                    "non-sidecar init containers with a resize policy of RestartContainer cannot be resized",
                ));
            }
        }
    }
    if errors.is_empty()
        && current.ephemeral_containers.len() == desired.ephemeral_containers.len()
        && current
            .ephemeral_containers
            .iter()
            .zip(&desired.ephemeral_containers)
            .any(|(old, new)| old.name != new.name || resources_differ(old, new))
        || current.ephemeral_containers.len() != desired.ephemeral_containers.len()
    {
        // The last deep compare of the whole spec.
        errors.push(forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    errors
}

/// `validatePodLevelResourcesCoverDRA`: the pod-level requests must cover
/// the containers' aggregate plus the node-allocatable DRA claims, a
/// pod-level hugepages limit the aggregate limits plus the claims, and each
/// pod-level limit every regular container's own limit plus that
/// container's DRA share. The first shortfall, in resource-name order.
fn dra_not_covered(pod: &Pod) -> Option<String> {
    let pod_resources = pod.resources.as_ref()?;
    let options = resources::Options {
        skip_pod_level_resources: true,
        ..resources::Options::default()
    };
    let dra = resources::dra_claim_resources(pod);
    if !pod_resources.requests().is_empty() {
        let mut aggregate = resources::aggregate_container_requests(pod, &options);
        resources::add_all(&mut aggregate, &dra);
        for (name, request) in pod_resources.requests() {
            if resources::is_supported_pod_level_resource(name)
                && aggregate.get(name).is_some_and(|total| total > request)
            {
                return Some(format!(
                    "pod level request for {name} is insufficient to cover the aggregated container and node-allocatable DRA requests"
                ));
            }
        }
    }
    let limits = pod_resources.limits();
    if !limits.is_empty() {
        let mut aggregate = resources::aggregate_container_limits(pod, &options);
        resources::add_all(&mut aggregate, &dra);
        for (name, total) in aggregate.iter().filter(|(n, _)| resources::is_hugepages(n)) {
            if limits.get(name).is_some_and(|limit| total > limit) {
                return Some(format!(
                    "pod level limit for {name} is insufficient to cover the aggregated container and node-allocatable DRA limits"
                ));
            }
        }
        for c in &pod.containers {
            for (name, own) in c.resources.limits() {
                if resources::is_hugepages(name) {
                    continue;
                }
                let Some(limit) = limits.get(name) else {
                    continue;
                };
                let share = resources::dra_container_share(pod, &c.name, name);
                if own.saturating_add(share) > *limit {
                    return Some(format!(
                        "pod level limit for {name} is insufficient to cover the limit and DRA overhead for container {}",
                        c.name
                    ));
                }
            }
        }
    }
    None
}

/// `validatePodResizeContainerOrdering`.
fn ordering(
    old: &[Container],
    new: &[Container],
    path: &str,
    noun: &str,
    errors: &mut Vec<FieldError>,
) {
    if old.len() != new.len() {
        errors.push(forbidden(
            path,
            &format!("{noun} may not be added or removed on resize"),
        ));
        return;
    }
    for (i, (a, b)) in old.iter().zip(new).enumerate() {
        if a.name != b.name {
            errors.push(forbidden(
                format!("{path}[{i}].name"),
                &format!("{noun} may not be renamed or reordered on resize"),
            ));
        }
    }
}

/// `validateContainerResize`'s removal checks.
fn removals(old: &Container, new: &Container, errors: &mut Vec<FieldError>) {
    if removed(old.resources.requests(), new.resources.requests()) {
        errors.push(forbidden(
            format!("{}.resources.requests", new.path()),
            "resource requests cannot be removed",
        ));
    }
    if removed(old.resources.limits(), new.resources.limits()) {
        errors.push(forbidden(
            format!("{}.resources.limits", new.path()),
            "resource limits cannot be removed",
        ));
    }
}

/// Kubelet-side refusals that are not the API server's: the gate, and
/// integral CPUs for a container holding exclusive CPUs when
/// `InPlacePodVerticalScalingExclusiveCPUs` lets such pods resize.
fn validate_kubelet(current: &Pod, desired: &Pod, node: &NodeConfig) -> Vec<FieldError> {
    let gates = &node.gates;
    let mut errors = Vec::new();
    if !gates.in_place_pod_vertical_scaling {
        errors.push(forbidden(
            "spec",
            "in-place resize needs the InPlacePodVerticalScaling feature gate",
        ));
        return errors;
    }
    if node.cpu_manager_static && gates.in_place_pod_vertical_scaling_exclusive_cpus {
        for (old, new) in current.init_and_regular().zip(desired.init_and_regular()) {
            if exclusive_cpus(current, old, gates)
                && let Some(cpu) = new.resources.requests().get("cpu")
                && cpu.milli_value() % 1000 != 0
            {
                errors.push(field_error(
                    format!("{}.resources.requests[cpu]", new.path()),
                    FieldErrorType::Invalid,
                    "only integral CPU values may be set for a container with exclusive CPUs (static CPU manager policy)",
                ));
            }
        }
    }
    errors
}

/// The kubelet's `IsInPlacePodVerticalScalingAllowed` (allocation manager):
/// a static pod, run from a file the kubelet reads, is never resized in
/// place; the API server sees only its mirror, which `validate_api` refuses.
fn not_resizable_in_place(current: &Pod) -> Option<String> {
    crate::oom::is_static_pod(current)
        .then(|| "In-place resize of static-pods is not supported".to_string())
}

/// Upstream `guaranteedPodResourceResizeRequired`: whether a resizable
/// container (regular, or sidecar) asks for another `resource` request than
/// its current (allocated) one.
fn request_changes(current: &Pod, desired: &Pod, resource: &str) -> bool {
    desired.init_and_regular().any(|new| {
        if new.kind != ContainerKind::Regular && new.kind != ContainerKind::Sidecar {
            return false;
        }
        let old = current
            .init_and_regular()
            .find(|c| c.name == new.name)
            .and_then(|c| c.resources.requests().get(resource).copied())
            .unwrap_or_default();
        let wanted = new
            .resources
            .requests()
            .get(resource)
            .copied()
            .unwrap_or_default();
        old != wanted
    })
}

/// `canResizePod`'s first checks: a Guaranteed pod cannot change its CPU
/// requests next to the static CPU manager, nor its memory requests next to
/// the Static memory manager, unless the matching
/// `InPlacePodVerticalScalingExclusive*` gate is on. A resize of the other
/// resource goes ahead.
fn infeasible_with_managers(current: &Pod, desired: &Pod, node: &NodeConfig) -> Option<String> {
    let gates = &node.gates;
    if pod_qos(current, gates) != QosClass::Guaranteed {
        return None;
    }
    if node.cpu_manager_static
        && !gates.in_place_pod_vertical_scaling_exclusive_cpus
        && request_changes(current, desired, "cpu")
    {
        return Some(
            "Resize is infeasible for Guaranteed Pods alongside CPU Manager policy \"static\""
                .to_string(),
        );
    }
    if node.memory_manager_static
        && !gates.in_place_pod_vertical_scaling_exclusive_memory
        && request_changes(current, desired, "memory")
    {
        return Some(
            "Resize is infeasible for Guaranteed Pods alongside Memory Manager policy \"Static\""
                .to_string(),
        );
    }
    None
}

/// Whether the static CPU manager gives `c` exclusive CPUs: a Guaranteed
/// pod and an integral CPU request.
fn exclusive_cpus(pod: &Pod, c: &Container, gates: &FeatureGates) -> bool {
    compute_pod_qos(pod, gates) == QosClass::Guaranteed
        && c.resources
            .requests()
            .get("cpu")
            .is_some_and(|q| !q.is_zero() && q.milli_value() % 1000 == 0)
}

/// The API server's `PodResizeValidator` admission plugin
/// (plugin/pkg/admission/podresize): a resize whose pod requests
/// (`PodRequests` with no options: overhead and pod-level values included)
/// exceed the node's allocatable cpu or memory is refused with Forbidden
/// (cause NodeCapacity) before the kubelet sees it. The plan reports it
/// next to the kubelet's own decision (Infeasible). A node that reports no
/// allocatable amount of a resource (node settings without a capacity, as
/// the webhook judges resizes without the pod's node) is not checked for
/// it; a real node always reports cpu and memory.
///
/// The plugin judges only a pod bound to a node (`spec.nodeName`), against
/// that node's allocatable ([`judged_on`]).
fn exceeds_node_allocatable(desired: &Pod, node: &NodeConfig) -> Option<FieldError> {
    if !judged_on(desired, node) {
        return None;
    }
    let requests = resources::pod_requests(desired, &resources::Options::default(), &node.gates);
    let mut over = Vec::new();
    for resource in RESIZABLE {
        let Some(&have) = node.allocatable.get(resource) else {
            continue;
        };
        let want = requests.get(resource).copied().unwrap_or_default();
        if want > have {
            let (want, have) = match resource {
                "cpu" => (want.milli_value(), have.milli_value()),
                _ => (want.value(), have.value()),
            };
            over.push(format!(
                "{resource}, requested: {want}, allocatable: {have}"
            ));
        }
    }
    (!over.is_empty()).then(|| {
        forbidden(
            "",
            &format!(
                "node didn't have enough allocatable resources: {}",
                over.join("; ")
            ),
        )
    })
}

/// Whether `PodResizeValidator` judges a resize of `pod` against `node`.
/// Upstream skips a pod not yet bound (`spec.nodeName` empty) and judges a
/// bound one against the node it names. Node settings that name another
/// node are not that node's: their allocatable says nothing about it (the
/// API server's own plugin still judges it there). Settings that name no
/// node stand for the pod's own, as a caller that gives a pod and a node
/// without names means.
fn judged_on(pod: &Pod, node: &NodeConfig) -> bool {
    match pod.node_name.as_deref() {
        None | Some("") => false,
        Some(bound_to) => node.name.is_empty() || node.name == bound_to,
    }
}

/// The fit check (`canResizePod`, then the admission handlers): Infeasible
/// when the pod's requests exceed what the node can allocate at all (memory
/// reported before cpu when both do), else Deferred when they exceed what
/// the other pods leave free (cpu first, as the admission predicate lists
/// them); pod overhead included, as the kubelet adds it. A resource the
/// node settings give no allocatable amount of is not checked (as in
/// [`exceeds_node_allocatable`]).
pub(crate) fn fit(
    desired: &Pod,
    others: &ResourceMap,
    node: &NodeConfig,
) -> (ResizeDecision, String) {
    let requests = resources::pod_requests(
        desired,
        &resources::kubelet_options(&node.gates),
        &node.gates,
    );
    let units = |resource: &str, q: Option<&crate::quantity::Quantity>| {
        let q = q.copied().unwrap_or_default();
        if resource == "cpu" {
            q.milli_value()
        } else {
            q.value()
        }
    };
    let wanted = |resource: &str| units(resource, requests.get(resource));
    let capacity = |resource: &str| units(resource, node.allocatable.get(resource));
    let checked =
        |resource: &str| requests.contains_key(resource) && node.allocatable.contains_key(resource);
    if let Some(resource) = ["memory", "cpu"]
        .into_iter()
        .find(|r| checked(r) && wanted(r) > capacity(r))
    {
        return (
            ResizeDecision::Infeasible,
            format!(
                "Node didn't have enough capacity: {resource}, requested: {}, capacity: {}",
                wanted(resource),
                capacity(resource)
            ),
        );
    }
    for resource in RESIZABLE {
        if !checked(resource) {
            continue;
        }
        let (want, capacity) = (wanted(resource), capacity(resource));
        let used = units(resource, others.get(resource));
        if want.saturating_add(used) > capacity {
            return (
                ResizeDecision::Deferred,
                format!(
                    "Node didn't have enough resource: {resource}, requested: {want}, used: {used}, capacity: {capacity}"
                ),
            );
        }
    }
    (ResizeDecision::Accepted, String::new())
}

/// The files a resource's knobs live in.
fn files_of(resource: &str) -> &'static [CgroupFileName] {
    match resource {
        "cpu" => &[CgroupFileName::CpuMax, CgroupFileName::CpuWeight],
        _ => &[
            CgroupFileName::MemoryMax,
            CgroupFileName::MemoryMin,
            CgroupFileName::MemoryLow,
            CgroupFileName::MemoryHigh,
        ],
    }
}

/// A cgroup file value as a number for comparisons: `max` is infinite;
/// `cpu.max` compares by its quota.
fn magnitude(value: &CgroupValue) -> u128 {
    match value {
        CgroupValue::Max | CgroupValue::CpuMax(CpuMaxValue { quota: None, .. }) => u128::MAX,
        CgroupValue::Number(n) | CgroupValue::CpuMax(CpuMaxValue { quota: Some(n), .. }) => {
            u128::from(*n)
        }
        CgroupValue::IdList(_) => 0,
    }
}

/// The value a file falls back to when the new evaluation no longer sets it.
fn reset_value(file: &CgroupFileName) -> CgroupValue {
    match file {
        CgroupFileName::MemoryMin | CgroupFileName::MemoryLow => CgroupValue::Number(0),
        _ => CgroupValue::Max,
    }
}

fn lookup<'a>(files: &'a [CgroupFile], name: &CgroupFileName) -> Option<&'a CgroupValue> {
    files.iter().find(|f| f.file == *name).map(|f| &f.value)
}

/// Changed files of one resource, split into rising and falling ones.
fn changes(
    old: &[CgroupFile],
    new: &[CgroupFile],
    resource: &str,
) -> (Vec<CgroupFile>, Vec<CgroupFile>) {
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for name in files_of(resource) {
        let before = lookup(old, name);
        let after = lookup(new, name);
        if before == after || (before.is_none() && after.is_none()) {
            continue;
        }
        let after_value = after.cloned().unwrap_or_else(|| reset_value(name));
        let before_value = before.cloned().unwrap_or_else(|| reset_value(name));
        if before_value == after_value {
            continue;
        }
        let rises = magnitude(&after_value) >= magnitude(&before_value);
        let file = CgroupFile {
            file: *name,
            value: after_value,
        };
        if rises {
            up.push(file);
        } else {
            down.push(file);
        }
    }
    (up, down)
}

/// The step's leading limit file decides a container's direction.
fn direction_of(up: &[CgroupFile], down: &[CgroupFile], resource: &str) -> ResizeDirection {
    let limit = if resource == "cpu" {
        CgroupFileName::CpuMax
    } else {
        CgroupFileName::MemoryMax
    };
    if up.iter().any(|f| f.file == limit) {
        ResizeDirection::Increase
    } else if down.iter().any(|f| f.file == limit) || (up.is_empty() && !down.is_empty()) {
        ResizeDirection::Decrease
    } else if !up.is_empty() {
        ResizeDirection::Increase
    } else {
        ResizeDirection::Unchanged
    }
}

/// The contract's name for one of the [`RESIZABLE`] resources.
fn resize_resource(name: &str) -> ResizeResource {
    debug_assert!(RESIZABLE.contains(&name), "{name} is not resizable");
    if name == "cpu" {
        ResizeResource::Cpu
    } else {
        ResizeResource::Memory
    }
}

fn step(
    kind: ResizeStepKind,
    container: Option<&str>,
    resource: &str,
    direction: ResizeDirection,
    files: Vec<CgroupFile>,
) -> ResizeStep {
    ResizeStep {
        kind,
        container: container.map(str::to_string),
        resource: resize_resource(resource),
        direction,
        files,
        memory_limit_bytes: None,
        cpus: None,
    }
}

/// A usage check before a lowered memory.max, when one is lowered.
fn guard(files: &[CgroupFile], container: Option<&str>) -> Option<ResizeStep> {
    let CgroupValue::Number(bytes) = *lookup(files, &CgroupFileName::MemoryMax)? else {
        return None;
    };
    let mut check = step(
        ResizeStepKind::CheckMemoryUsage,
        container,
        "memory",
        ResizeDirection::Decrease,
        Vec::new(),
    );
    check.memory_limit_bytes = Some(bytes);
    Some(check)
}

fn push_write(
    steps: &mut Vec<ResizeStep>,
    kind: ResizeStepKind,
    container: Option<&str>,
    resource: &str,
    up: Vec<CgroupFile>,
    down: Vec<CgroupFile>,
) {
    if up.is_empty() && down.is_empty() {
        return;
    }
    let direction = direction_of(&up, &down, resource);
    if let Some(check) = guard(&down, container) {
        steps.push(check);
    }
    let mut files = down;
    files.extend(up);
    steps.push(step(kind, container, resource, direction, files));
}

/// Per container: (container, its old files, its new files).
struct ContainerFiles<'a> {
    old: &'a Container,
    new: &'a Container,
    before: Vec<CgroupFile>,
    after: Vec<CgroupFile>,
}

/// Plan an in-place resize of `current` (the actuated pod) to `desired`,
/// next to `others` (the summed requests of the node's other pods).
/// `desired_errors` is the desired pod's own API validation (its metadata,
/// then its resources after defaulting), which `ValidatePodResize` runs
/// before the resize rules (`validatePodMetadataAndSpec`).
pub fn plan(
    current_pod: &Pod,
    desired_pod: &Pod,
    desired_errors: Vec<FieldError>,
    others: &ResourceMap,
    node: &NodeConfig,
) -> ResizePlan {
    let gates = &node.gates;
    let qos_class = compute_pod_qos(current_pod, gates);
    let rejected = |decision, message: String, errors| ResizePlan {
        decision,
        message,
        errors,
        qos_class,
        steps: Vec::new(),
    };

    // A static pod never reaches the API server (only its mirror does), so
    // the kubelet's refusal comes first.
    if let Some(message) = not_resizable_in_place(current_pod) {
        return rejected(ResizeDecision::Infeasible, message, Vec::new());
    }
    // The desired pod must itself be valid (e.g. no container limit above a
    // pod-level limit, `resizePolicy` values), as `ValidatePodResize` runs
    // the spec validation first; then the resize rules themselves.
    let mut problems = desired_errors;
    problems.extend(validate_api(current_pod, desired_pod, gates));
    problems.extend(validate_kubelet(current_pod, desired_pod, node));
    if !problems.is_empty() {
        let message = problems
            .iter()
            .map(|e| {
                if e.field.is_empty() {
                    e.message.clone()
                } else {
                    format!("{}: {}", e.field, e.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        return rejected(ResizeDecision::Invalid, message, problems);
    }
    // Above the node's allocatable, the API server's `PodResizeValidator`
    // refuses the resize before the kubelet sees it; the kubelet's own
    // answer to it is Infeasible. The plan is the kubelet's decision, with
    // the API server's refusal in `errors`.
    let api_refusal: Vec<FieldError> = exceeds_node_allocatable(desired_pod, node)
        .into_iter()
        .collect();
    if let Some(message) = infeasible_with_managers(current_pod, desired_pod, node) {
        return rejected(ResizeDecision::Infeasible, message, api_refusal);
    }
    let (decision, message) = fit(desired_pod, others, node);
    if let Some(refusal) = api_refusal.first()
        && decision != ResizeDecision::Infeasible
    {
        // Only where the API server's sum and the kubelet's differ (the
        // kubelet's options): such a resize never reaches the kubelet, and
        // can never fit, so the plan says Infeasible rather than the fit
        // check's Accepted or Deferred.
        let message = refusal.message.clone();
        return rejected(ResizeDecision::Infeasible, message, api_refusal);
    }
    if decision != ResizeDecision::Accepted {
        return rejected(decision, message, api_refusal);
    }

    let old_pod_files = pod_files(current_pod, node, qos_class);
    let new_pod_files = pod_files(desired_pod, node, qos_class);
    let containers: Vec<ContainerFiles> = current_pod
        .init_and_regular()
        .zip(desired_pod.init_and_regular())
        .map(|(old, new)| ContainerFiles {
            old,
            new,
            before: container_files(current_pod, old, node, qos_class),
            after: container_files(desired_pod, new, node, qos_class),
        })
        .collect();

    // `computePodResizeAction`: a container whose resize policy says
    // RestartContainer for a resource whose request or limit changes is
    // restarted as a whole (with its new values), even when no cgroup file
    // changes; it gets no in-place writes.
    let restarts: Vec<Option<&'static str>> = containers
        .iter()
        .map(|c| restart_for(current_pod, c.old, desired_pod, c.new))
        .collect();
    // Memory QoS off on cgroup v2: a lowered or raised memory limit also
    // resets a memory.high left from when it was on (kubernetes PR 139377).
    let reset_memory_high =
        node.cgroup_version == CgroupVersion::V2 && !crate::memory_qos::memory_qos_enforced(node);

    let mut steps = Vec::new();
    for resource in ["memory", "cpu"] {
        let (pod_up, pod_down) = changes(&old_pod_files, &new_pod_files, resource);
        // Rising pod knobs first, so containers never outgrow the pod.
        push_write(
            &mut steps,
            ResizeStepKind::WritePod,
            None,
            resource,
            pod_up,
            Vec::new(),
        );
        let mut rising = Vec::new();
        let mut falling = Vec::new();
        for (c, restart) in containers.iter().zip(&restarts) {
            if restart.is_some() {
                continue;
            }
            let (mut up, mut down) = changes(&c.before, &c.after, resource);
            if up.is_empty() && down.is_empty() {
                continue;
            }
            if reset_memory_high
                && resource == "memory"
                && lookup(&c.after, &CgroupFileName::MemoryHigh).is_none()
            {
                let reset = CgroupFile {
                    file: CgroupFileName::MemoryHigh,
                    value: CgroupValue::Max,
                };
                if down.is_empty() { &mut up } else { &mut down }.push(reset);
            }
            match direction_of(&up, &down, resource) {
                ResizeDirection::Increase => rising.push((c, up, down)),
                _ => falling.push((c, up, down)),
            }
        }
        for (c, up, down) in falling.into_iter().chain(rising) {
            push_write(
                &mut steps,
                ResizeStepKind::WriteContainer,
                Some(&c.new.name),
                resource,
                up,
                down,
            );
            if resource == "cpu"
                && node.cpu_manager_static
                && exclusive_cpus(desired_pod, c.new, gates)
            {
                let mut realloc = step(
                    ResizeStepKind::ReallocateCpus,
                    Some(&c.new.name),
                    "cpu",
                    ResizeDirection::Unchanged,
                    Vec::new(),
                );
                realloc.cpus = c
                    .new
                    .resources
                    .requests()
                    .get("cpu")
                    .map(|q| (q.milli_value() / 1000) as u64);
                steps.push(realloc);
            }
        }
        // Falling pod knobs last.
        push_write(
            &mut steps,
            ResizeStepKind::WritePod,
            None,
            resource,
            Vec::new(),
            pod_down,
        );
    }
    // Restarted containers start after the pod cgroup holds its new values
    // (upstream starts them in SyncPod after `doPodResizeAction`).
    for (c, restart) in containers.iter().zip(&restarts) {
        if let Some(resource) = restart {
            steps.push(step(
                ResizeStepKind::RestartContainer,
                Some(&c.new.name),
                resource,
                ResizeDirection::Unchanged,
                Vec::new(),
            ));
        }
    }
    ResizePlan {
        decision: ResizeDecision::Accepted,
        message: String::new(),
        errors: Vec::new(),
        qos_class,
        steps,
    }
}

/// What changes with a pending resize, for one container or the pod level.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourcesChange {
    /// Container name; `None` for the pod-level `spec.resources`.
    pub container: Option<String>,
    /// The spec's (desired) resources.
    pub desired: Requirements,
    /// The allocated resources the node applies meanwhile
    /// (`allocatedResources` for requests; the actuated limits while the
    /// resize is pending).
    pub allocated: Requirements,
}

/// Where an in-place resize that is not actuated stands, as the pod's
/// conditions say (since 1.33 the kubelet reports a resize through them:
/// `PodResizePending` with reason `Deferred` or `Infeasible`, and
/// `PodResizeInProgress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeState {
    /// `PodResizePending`, reason `Deferred` (`v1.PodReasonDeferred`).
    Deferred,
    /// `PodResizePending`, reason `Infeasible` (`v1.PodReasonInfeasible`).
    Infeasible,
    /// `PodResizePending` with no reason, or one the kubelet does not set
    /// (the API server stores any condition reason a client writes).
    Pending,
    /// `PodResizeInProgress`.
    InProgress,
}

impl ResizeState {
    /// The state of a `PodResizePending` condition with `reason`.
    fn of_pending(reason: Option<&str>) -> Self {
        match reason {
            Some("Deferred") => ResizeState::Deferred,
            Some("Infeasible") => ResizeState::Infeasible,
            _ => ResizeState::Pending,
        }
    }

    /// How a user reads it: the `PodResizePending` reason (`Deferred`,
    /// `Infeasible`; `Pending` without one of them), or `InProgress`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ResizeState::Deferred => "Deferred",
            ResizeState::Infeasible => "Infeasible",
            ResizeState::Pending => "Pending",
            ResizeState::InProgress => "InProgress",
        }
    }
}

impl std::fmt::Display for ResizeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An in-place resize that is not actuated.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingResize {
    /// What the pod's conditions say about it.
    pub state: ResizeState,
    /// Every container (and the pod level) whose desired resources differ from the allocated ones.
    pub changes: Vec<ResourcesChange>,
}

/// The pod as the kubelet actuates it while an in-place resize is not done
/// (a `PodResizePending` or `PodResizeInProgress` condition with status
/// `True`), and what is pending; `None` when the spec is what runs.
///
/// Upstream the pod worker syncs the pod from the allocation checkpoint
/// (`UpdatePodFromAllocation`). The status carries that allocation as
/// `allocatedResources` (requests only; pod-level in
/// `status.allocatedResources`); while the resize is pending, the limits in
/// force are the actuated ones (`status...resources.limits`). Once the
/// resize is accepted (InProgress) the spec's limits are allocated.
pub fn allocated(pod: &Pod) -> Option<(Pod, PendingResize)> {
    let condition = |kind: &str| {
        pod.status
            .conditions
            .iter()
            .find(|(t, status, _)| t == kind && status == "True")
    };
    let (state, pending) = match condition("PodResizePending") {
        Some((_, _, reason)) => (ResizeState::of_pending(reason.as_deref()), true),
        None => match condition("PodResizeInProgress") {
            Some(_) => (ResizeState::InProgress, false),
            None => return None,
        },
    };
    let mut allocated = pod.clone();
    let mut changes = Vec::new();
    let statuses = |kind: ContainerKind| match kind {
        ContainerKind::Init | ContainerKind::Sidecar => &pod.status.init_container_statuses,
        _ => &pod.status.container_statuses,
    };
    for c in allocated
        .init_containers
        .iter_mut()
        .chain(allocated.containers.iter_mut())
    {
        let Some(status) = statuses(c.kind).iter().find(|s| s.name == c.name) else {
            continue;
        };
        let mut resources = c.resources.clone();
        if let Some(requests) = &status.allocated {
            resources.requests = Some(requests.clone());
        }
        if pending && let Some(actuated) = &status.resources {
            resources.limits = actuated.limits.clone();
        }
        if resources.requests() != c.resources.requests()
            || resources.limits() != c.resources.limits()
        {
            // The pod runs on the allocation; the spec's values are what is pending.
            let desired = std::mem::replace(&mut c.resources, resources);
            changes.push(ResourcesChange {
                container: Some(c.name.clone()),
                desired,
                allocated: c.resources.clone(),
            });
        }
    }
    if let Some(spec) = &pod.resources {
        let mut resources = spec.clone();
        if let Some(requests) = &pod.status.allocated {
            resources.requests = Some(requests.clone());
        }
        if pending && let Some(actuated) = &pod.status.resources {
            resources.limits = actuated.limits.clone();
        }
        if resources.requests() != spec.requests() || resources.limits() != spec.limits() {
            changes.push(ResourcesChange {
                container: None,
                desired: spec.clone(),
                allocated: resources.clone(),
            });
            allocated.resources = Some(resources);
        }
    }
    Some((allocated, PendingResize { state, changes }))
}

/// The (request, limit) pair of a resource as `computePodResizeAction`
/// compares it: bytes for memory, millicores for cpu, 0 when unset. A
/// container that sets neither a request nor a limit for the resource runs
/// on the pod-level values, so those are its pair: a pod-level change
/// restarts it when its policy says RestartContainer
/// (test/e2e/common/node/pod_level_resources_resize.go @ 019cac28 expects
/// the restart of such containers, sidecars included, when only the
/// pod-level value changes; a container with values of its own is not
/// restarted by a pod-level change).
fn compared(pod: &Pod, c: &Container, resource: &str) -> (i64, i64) {
    let units = |q: Option<&crate::quantity::Quantity>| {
        q.map_or(0, |q| {
            if resource == "cpu" {
                q.milli_value()
            } else {
                q.value()
            }
        })
    };
    let (requests, limits) = (c.resources.requests(), c.resources.limits());
    if !requests.contains_key(resource)
        && !limits.contains_key(resource)
        && let Some(pod_level) = &pod.resources
    {
        return (
            units(pod_level.requests().get(resource)),
            units(pod_level.limits().get(resource)),
        );
    }
    (units(requests.get(resource)), units(limits.get(resource)))
}

/// The resource (memory before cpu) whose change makes the container
/// restart under its resize policy, if any.
fn restart_for(
    current: &Pod,
    old: &Container,
    desired: &Pod,
    new: &Container,
) -> Option<&'static str> {
    ["memory", "cpu"].into_iter().find(|resource| {
        restarts_on(new, resource)
            && compared(current, old, resource) != compared(desired, new, resource)
    })
}

fn pod_files(pod: &Pod, node: &NodeConfig, qos: QosClass) -> Vec<CgroupFile> {
    cgroup::pod_cgroup_files(&cgroup::pod_resource_config(pod, node, qos), node)
}

fn container_files(pod: &Pod, c: &Container, node: &NodeConfig, qos: QosClass) -> Vec<CgroupFile> {
    cgroup::container_cgroup_files(&cgroup::container_resource_config(pod, c, node, qos), node)
}
