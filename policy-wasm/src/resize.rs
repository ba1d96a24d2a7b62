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
use crate::features::FeatureGates;
use crate::model::{Container, ContainerKind, Pod, ResourceMap, decode_list, field_error};
use crate::node::NodeConfig;
use crate::qos::{compute_pod_qos, qos_name};
use crate::resources;
use crate::wit::{
    self, CgroupFile, ErrorReason, FieldError, QosClass, ResizeDecision, ResizeDirection,
    ResizePlan, ResizeStep, ResizeStepKind,
};

/// Resources that may change in place.
const RESIZABLE: [&str; 2] = ["cpu", "memory"];

/// A resize policy value, with the KEP's older `NoRestart` as an alias.
fn restart_required(policy: &str) -> Option<bool> {
    match policy {
        "NotRequired" | "NoRestart" => Some(false),
        "RestartContainer" => Some(true),
        _ => None,
    }
}

fn without_resizable(map: &ResourceMap) -> ResourceMap {
    map.iter()
        .filter(|(k, _)| !RESIZABLE.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

fn invalid(field: String, reason: ErrorReason, message: impl Into<String>) -> FieldError {
    field_error(field, reason, message)
}

/// Everything the API server and the kubelet reject before any fit check.
fn validate(current: &Pod, desired: &Pod, node: &NodeConfig) -> Vec<FieldError> {
    let gates: &FeatureGates = &node.gates;
    let mut errors = Vec::new();
    if !gates.in_place_pod_vertical_scaling {
        errors.push(invalid(
            "spec".into(),
            ErrorReason::Forbidden,
            "in-place resize needs the InPlacePodVerticalScaling feature gate",
        ));
        return errors;
    }
    let same_names = |a: &[Container], b: &[Container]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| x.name == y.name && x.kind == y.kind)
    };
    if !same_names(&current.containers, &desired.containers)
        || !same_names(&current.init_containers, &desired.init_containers)
    {
        errors.push(invalid(
            "spec.containers".into(),
            ErrorReason::Forbidden,
            "a resize may not add, remove, rename or reorder containers",
        ));
        return errors;
    }
    let old_qos = compute_pod_qos(current, gates);
    let new_qos = compute_pod_qos(desired, gates);
    if old_qos != new_qos {
        errors.push(invalid(
            "spec".into(),
            ErrorReason::Invalid,
            format!(
                "Pod QoS is immutable: a resize may not change it from {} to {}",
                qos_name(old_qos),
                qos_name(new_qos)
            ),
        ));
    }
    for (old, new) in current.init_and_regular().zip(desired.init_and_regular()) {
        let path = new.path();
        for (which, old_list, new_list) in [
            (
                "requests",
                old.resources.requests(),
                new.resources.requests(),
            ),
            ("limits", old.resources.limits(), new.resources.limits()),
        ] {
            if without_resizable(old_list) != without_resizable(new_list) {
                errors.push(invalid(
                    format!("{path}.resources.{which}"),
                    ErrorReason::Forbidden,
                    "only cpu and memory may be resized in place",
                ));
            }
        }
        if old.kind == ContainerKind::Init && old.resources != new.resources {
            errors.push(invalid(
                format!("{path}.resources"),
                ErrorReason::Forbidden,
                "resources of (non-restartable) init containers cannot be resized",
            ));
        }
        for resource in RESIZABLE {
            if let (Some(request), Some(limit)) = (
                new.resources.requests().get(resource),
                new.resources.limits().get(resource),
            ) && request > limit
            {
                errors.push(invalid(
                    format!("{path}.resources.requests[{resource}]"),
                    ErrorReason::Invalid,
                    format!(
                        "must be less than or equal to {resource} limit of {}",
                        limit.to_canonical_string()
                    ),
                ));
            }
        }
        for (i, (resource, policy)) in new.resize_policy.iter().enumerate() {
            let field = format!("{path}.resizePolicy[{i}]");
            if !RESIZABLE.contains(&resource.as_str()) {
                errors.push(invalid(
                    format!("{field}.resourceName"),
                    ErrorReason::NotSupported,
                    "supported values: \"cpu\", \"memory\"",
                ));
            }
            match restart_required(policy) {
                None => errors.push(invalid(
                    format!("{field}.restartPolicy"),
                    ErrorReason::NotSupported,
                    "supported values: \"NotRequired\", \"RestartContainer\"",
                )),
                Some(true) if desired.restart_policy.as_deref() == Some("Never") => {
                    errors.push(invalid(
                        format!("{field}.restartPolicy"),
                        ErrorReason::Invalid,
                        "must be NotRequired when the pod's restartPolicy is Never",
                    ))
                }
                Some(_) => {}
            }
        }
        if node.cpu_manager_static
            && exclusive_cpus(current, old, gates)
            && let Some(cpu) = new.resources.requests().get("cpu")
            && cpu.milli_value() % 1000 != 0
        {
            errors.push(invalid(
                        format!("{path}.resources.requests[cpu]"),
                        ErrorReason::Invalid,
                        "only integral CPU values may be set for a container with exclusive CPUs (static CPU manager policy)",
                    ));
        }
    }
    for c in &desired.ephemeral_containers {
        if !c.resources.requests().is_empty() || !c.resources.limits().is_empty() {
            errors.push(invalid(
                format!("{}.resources", c.path()),
                ErrorReason::Forbidden,
                "ephemeral containers have no resources",
            ));
        }
    }
    let pod_level = |p: &Pod| p.resources.clone().unwrap_or_default();
    let (old_pod, new_pod) = (pod_level(current), pod_level(desired));
    if old_pod != new_pod {
        if !gates.in_place_pod_level_resources_vertical_scaling {
            errors.push(invalid(
                "spec.resources".into(),
                ErrorReason::Forbidden,
                "pod-level resources can be resized only with InPlacePodLevelResourcesVerticalScaling",
            ));
        } else if without_resizable(old_pod.requests()) != without_resizable(new_pod.requests())
            || without_resizable(old_pod.limits()) != without_resizable(new_pod.limits())
        {
            errors.push(invalid(
                "spec.resources".into(),
                ErrorReason::Forbidden,
                "only pod-level cpu and memory may be resized in place",
            ));
        }
        for resource in RESIZABLE {
            if let (Some(request), Some(limit)) = (
                new_pod.requests().get(resource),
                new_pod.limits().get(resource),
            ) && request > limit
            {
                errors.push(invalid(
                    format!("spec.resources.requests[{resource}]"),
                    ErrorReason::Invalid,
                    format!(
                        "must be less than or equal to {resource} limit of {}",
                        limit.to_canonical_string()
                    ),
                ));
            }
        }
    }
    errors
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

/// The fit check: Infeasible beyond allocatable, Deferred beyond what the
/// other pods leave free (pod overhead included, as the kubelet adds it).
fn fit(desired: &Pod, others: &ResourceMap, node: &NodeConfig) -> (ResizeDecision, String) {
    let requests = resources::pod_requests(
        desired,
        &resources::kubelet_options(&node.gates),
        &node.gates,
    );
    for resource in RESIZABLE {
        let Some(want) = requests.get(resource) else {
            continue;
        };
        let capacity = node.allocatable.get(resource).copied().unwrap_or_default();
        let (want_units, capacity_units) = match resource {
            "cpu" => (want.milli_value(), capacity.milli_value()),
            _ => (want.value(), capacity.value()),
        };
        if want_units > capacity_units {
            return (
                ResizeDecision::Infeasible,
                format!(
                    "Node didn't have enough capacity: {resource}, requested: {want_units}, capacity: {capacity_units}"
                ),
            );
        }
        let used = others.get(resource).map_or(0, |q| {
            if resource == "cpu" {
                q.milli_value()
            } else {
                q.value()
            }
        });
        if want_units.saturating_add(used) > capacity_units {
            return (
                ResizeDecision::Deferred,
                format!(
                    "Node didn't have enough resource: {resource}, requested: {want_units}, used: {used}, capacity: {capacity_units}"
                ),
            );
        }
    }
    (ResizeDecision::Accepted, String::new())
}

/// The files a resource's knobs live in.
fn files_of(resource: &str) -> &'static [&'static str] {
    match resource {
        "cpu" => &["cpu.max", "cpu.weight"],
        _ => &["memory.max", "memory.min", "memory.low", "memory.high"],
    }
}

/// A cgroup file value as a number for comparisons: `max` is infinite.
fn magnitude(file: &str, value: &str) -> u128 {
    let first = value.split_whitespace().next().unwrap_or("");
    if first == "max" {
        return u128::MAX;
    }
    let _ = file;
    first.parse().unwrap_or(0)
}

/// The value a file falls back to when the new evaluation no longer sets it.
fn reset_value(file: &str) -> &'static str {
    match file {
        "memory.min" | "memory.low" => "0",
        _ => "max",
    }
}

fn lookup<'a>(files: &'a [CgroupFile], name: &str) -> Option<&'a str> {
    files
        .iter()
        .find(|f| f.file == name)
        .map(|f| f.value.as_str())
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
        let after_value = after.unwrap_or_else(|| reset_value(name)).to_string();
        let before_value = before.unwrap_or_else(|| reset_value(name));
        if before_value == after_value {
            continue;
        }
        let file = CgroupFile {
            file: name.to_string(),
            value: after_value.clone(),
        };
        if magnitude(name, &after_value) >= magnitude(name, before_value) {
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
        "cpu.max"
    } else {
        "memory.max"
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
        resource_name: resource.to_string(),
        direction,
        files,
        memory_limit_bytes: None,
        cpus: None,
    }
}

/// A usage check before a lowered memory.max, when one is lowered.
fn guard(files: &[CgroupFile], container: Option<&str>) -> Option<ResizeStep> {
    let limit = lookup(files, "memory.max")?;
    let bytes: u64 = limit.parse().ok()?;
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

/// Plan an in-place resize.
pub fn plan(
    current: &wit::Pod,
    desired: &wit::Pod,
    others: &[wit::ResourceQuantity],
    node: &wit::NodeSettings,
) -> Result<ResizePlan, Vec<FieldError>> {
    let node = NodeConfig::decode(node)?;
    let mut errors = Vec::new();
    let others = decode_list(others, "others", &mut errors);
    let current_pod = Pod::decode(current).map_err(|e| prefix(e, "current"));
    let desired_pod = Pod::decode(desired).map_err(|e| prefix(e, "desired"));
    let (current_pod, desired_pod) = match (current_pod, desired_pod) {
        (Ok(c), Ok(d)) if errors.is_empty() => (c, d),
        (c, d) => {
            errors.extend(c.err().into_iter().flatten());
            errors.extend(d.err().into_iter().flatten());
            return Err(errors);
        }
    };
    let gates = &node.gates;
    let qos_class = compute_pod_qos(&current_pod, gates);
    let rejected = |decision, message: String, errors| ResizePlan {
        decision,
        message,
        errors,
        qos_class,
        steps: Vec::new(),
    };

    // The desired pod must itself be valid (e.g. no container limit above a
    // pod-level limit), as the API server checks the update.
    let mut problems = crate::validation::validate_pod(desired, &node);
    problems.extend(validate(&current_pod, &desired_pod, &node));
    if !problems.is_empty() {
        let message = problems
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        return Ok(rejected(ResizeDecision::Invalid, message, problems));
    }
    let (decision, message) = fit(&desired_pod, &others, &node);
    if decision != ResizeDecision::Accepted {
        return Ok(rejected(decision, message, Vec::new()));
    }

    let old_pod_files = pod_files(&current_pod, &node, qos_class);
    let new_pod_files = pod_files(&desired_pod, &node, qos_class);
    let containers: Vec<ContainerFiles> = current_pod
        .init_and_regular()
        .zip(desired_pod.init_and_regular())
        .map(|(old, new)| ContainerFiles {
            old,
            new,
            before: container_files(&current_pod, old, &node, qos_class),
            after: container_files(&desired_pod, new, &node, qos_class),
        })
        .collect();

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
        for c in &containers {
            let (up, down) = changes(&c.before, &c.after, resource);
            if up.is_empty() && down.is_empty() {
                continue;
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
                && exclusive_cpus(&desired_pod, c.new, gates)
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
            let restart = c
                .new
                .resize_policy
                .iter()
                .any(|(r, p)| r == resource && restart_required(p) == Some(true));
            if restart && c.old.resources != c.new.resources {
                steps.push(step(
                    ResizeStepKind::RestartContainer,
                    Some(&c.new.name),
                    resource,
                    ResizeDirection::Unchanged,
                    Vec::new(),
                ));
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
    Ok(ResizePlan {
        decision: ResizeDecision::Accepted,
        message: String::new(),
        errors: Vec::new(),
        qos_class,
        steps,
    })
}

fn prefix(errors: Vec<FieldError>, which: &str) -> Vec<FieldError> {
    errors
        .into_iter()
        .map(|mut e| {
            e.field = format!("{which}.{}", e.field);
            e
        })
        .collect()
}

fn pod_files(pod: &Pod, node: &NodeConfig, qos: QosClass) -> Vec<CgroupFile> {
    cgroup::pod_cgroup_files(&cgroup::pod_resource_config(pod, node, qos), node)
}

fn container_files(pod: &Pod, c: &Container, node: &NodeConfig, qos: QosClass) -> Vec<CgroupFile> {
    cgroup::container_cgroup_files(&cgroup::container_resource_config(pod, c, node, qos), node)
}
