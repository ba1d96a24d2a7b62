//! API-server validation of container and pod-level resources (KEP-2837),
//! plus the kubelet-side admission checks that depend on the node.
//!
//! Validation runs on the defaulted pod, as the API server does, so a pod
//! whose derived pod request exceeds its pod limit (KEP row 6) fails here:
//! the `validate-pod` export (in [`crate::boundary::evaluate`]) checks the
//! name and namespace, defaults the pod, decodes it and calls
//! [`validate_pod_resources`]. Every finding is reported with its field
//! path; messages are stable.

use crate::defaults::is_overcommit_allowed;
use crate::features::FeatureGates;
use std::fmt;

use crate::field_error::{FieldError, FieldErrorType, field_error};
use crate::model::{Container, ContainerKind, FieldPath, Pod, Requirements, ResourceMap};
use crate::node::{CgroupVersion, NodeConfig};
use crate::quantity::Quantity;
use crate::resource_name;
use crate::resources::{self, is_hugepages, is_supported_pod_level_resource};

fn invalid(field: String, value: &Quantity, message: String) -> FieldError {
    let mut e = field_error(field, FieldErrorType::Invalid, message);
    e.bad_value = Some(value.to_canonical_string());
    e
}

/// The resource checks of the defaulted, decoded `pod`, as the API server
/// validates it and as the kubelet would admit it on `node`.
pub fn validate_pod_resources(pod: &Pod, node: &NodeConfig) -> Vec<FieldError> {
    let gates = &node.gates;
    let mut errors = Vec::new();
    for c in pod.init_and_regular() {
        let list = FieldPath::Root(c.kind.list_field());
        let item = list.index(c.index);
        validate_requirements(&c.resources, &item.field("resources"), false, &mut errors);
    }
    for c in pod.init_and_regular() {
        validate_resize_policy(c, pod.restart_policy.as_deref(), &mut errors);
    }
    // Upstream `validateOverhead`: the overhead is checked as a container's
    // limits (`ValidateContainerResourceRequirements`), so its paths read
    // `spec.overhead.limits[<name>]`.
    if let Some(overhead) = &pod.overhead {
        let as_limits = Requirements {
            requests: None,
            limits: Some(overhead.clone()),
        };
        validate_requirements(&as_limits, &"spec.overhead", false, &mut errors);
    }
    for c in &pod.ephemeral_containers {
        if !c.resize_policy.is_empty() {
            errors.push(field_error(
                format!("{}.resizePolicy", c.path()),
                FieldErrorType::Forbidden,
                "cannot be set for an Ephemeral Container",
            ));
        }
        let r = &c.resources;
        if !r.requests().is_empty() || !r.limits().is_empty() {
            errors.push(field_error(
                format!("{}.resources", c.path()),
                FieldErrorType::Forbidden,
                "cannot be set for an Ephemeral Container",
            ));
        }
    }
    if let Some(pod_resources) = &pod.resources {
        validate_pod_level(pod, pod_resources, gates, &mut errors);
        if resources::pod_level_resources_set(pod) && node.cgroup_version == CgroupVersion::V1 {
            errors.push(field_error(
                "spec.resources",
                FieldErrorType::Forbidden,
                "pod-level resources are not supported on cgroup v1 nodes; the kubelet rejects this pod",
            ));
        }
    }
    errors
}

/// Upstream `validateResizePolicy` (every container) and the
/// `validateInitContainers` rule that a non-sidecar init container may not
/// ask for a restart.
fn validate_resize_policy(c: &Container, pod_restart: Option<&str>, errors: &mut Vec<FieldError>) {
    let path = format!("{}.resizePolicy", c.path());
    let with_value = |reason, field: String, message: &str, value: &str| {
        let mut e = field_error(field, reason, message);
        e.bad_value = Some(crate::model::truncate(value));
        e
    };
    let mut seen = std::collections::BTreeSet::new();
    for (i, (resource, policy)) in c.resize_policy.iter().enumerate() {
        if !seen.insert(resource.as_str()) {
            errors.push(with_value(
                FieldErrorType::Duplicate,
                format!("{path}[{i}]"),
                "Duplicate value",
                resource,
            ));
        }
        match resource.as_str() {
            "cpu" | "memory" => {}
            "" => errors.push(field_error(
                path.clone(),
                FieldErrorType::Required,
                "Required value",
            )),
            other => errors.push(with_value(
                FieldErrorType::NotSupported,
                path.clone(),
                "supported values: \"cpu\", \"memory\"",
                other,
            )),
        }
        match policy.as_str() {
            "NotRequired" | "RestartContainer" => {}
            "" => errors.push(field_error(
                path.clone(),
                FieldErrorType::Required,
                "Required value",
            )),
            other => errors.push(with_value(
                FieldErrorType::NotSupported,
                path.clone(),
                "supported values: \"NotRequired\", \"RestartContainer\"",
                other,
            )),
        }
        if pod_restart == Some("Never") && policy != "NotRequired" {
            errors.push(with_value(
                FieldErrorType::Invalid,
                path.clone(),
                "must be 'NotRequired' when pod `restartPolicy` is 'Never'",
                policy,
            ));
        }
        if c.kind == ContainerKind::Init && policy == "RestartContainer" {
            errors.push(with_value(
                FieldErrorType::Invalid,
                format!("{path}[{i}].restartPolicy"),
                "must not be set to 'RestartContainer' for non-sidecar initContainers",
                policy,
            ));
        }
    }
}

/// The kubelet's `podFeaturesAdmitHandler` (`isPodLevelResourcesSupported`,
/// lifecycle/features_linux.go): a pod that sets pod-level resources is
/// not admitted (`PodLevelResourcesNotSupported`) while the kubelet's
/// `PodLevelResources` gate is off. `evaluate` and `admit` refuse it with
/// this error, at the field it concerns.
pub fn kubelet_refuses_pod_level_resources(pod: &Pod, gates: &FeatureGates) -> Option<FieldError> {
    (!gates.pod_level_resources && resources::pod_level_resources_set(pod)).then(|| {
        field_error(
            "spec.resources",
            FieldErrorType::Forbidden,
            "PodLevelResources feature gate is disabled",
        )
    })
}

fn validate_pod_level(
    pod: &Pod,
    pod_resources: &Requirements,
    gates: &FeatureGates,
    errors: &mut Vec<FieldError>,
) {
    let set = !pod_resources.requests().is_empty() || !pod_resources.limits().is_empty();
    // The API server validates pod-level resources only with the gate on
    // (`if opts.PodLevelResourcesEnabled`; with it off it drops the field
    // from a new pod). The kubelet refuses such a pod itself:
    // [`kubelet_refuses_pod_level_resources`].
    if !set || !gates.pod_level_resources {
        return;
    }
    if pod.os_name.as_deref() == Some("windows") {
        errors.push(field_error(
            "spec.resources",
            FieldErrorType::Forbidden,
            "may not be set for a windows pod",
        ));
        return;
    }
    validate_requirements(pod_resources, &"spec.resources", true, errors);

    let requests = pod_resources.requests();
    let limits = pod_resources.limits();
    let aggregate = resources::aggregate_container_requests(pod, &resources::Options::default());
    for (name, total) in &aggregate {
        if let Some(request) = requests.get(name)
            && total > request
        {
            errors.push(invalid(
                format!("spec.resources.requests[{name}]"),
                request,
                format!(
                    "must be greater than or equal to aggregate container requests of {}",
                    total.to_canonical_string()
                ),
            ));
        }
    }
    let aggregate_limits =
        resources::aggregate_container_limits(pod, &resources::Options::default());
    for (name, total) in aggregate_limits.iter().filter(|(n, _)| is_hugepages(n)) {
        if let Some(limit) = limits.get(name)
            && total > limit
        {
            errors.push(invalid(
                format!("spec.resources.limits[{name}]"),
                limit,
                format!(
                    "must be greater than or equal to aggregate container limits of {}",
                    total.to_canonical_string()
                ),
            ));
        }
    }
    // The KEP forbids any single container limit above the pod limit; the
    // sum of container limits may exceed it. Upstream checks regular
    // containers and reports under the pod-level path.
    for (i, c) in pod.containers.iter().enumerate() {
        for (name, limit) in c.resources.limits() {
            if let Some(pod_limit) = limits.get(name)
                && limit > pod_limit
            {
                errors.push(invalid(
                    format!("spec.resources.containers[{i}][{name}].limits"),
                    limit,
                    format!(
                        "must be less than or equal to pod limits of {}",
                        pod_limit.to_canonical_string()
                    ),
                ));
            }
        }
    }
}

/// Upstream `validateResourceName`: a qualified name, and a standard
/// resource type when it has no domain prefix. `field` builds the entry's
/// path; it runs only when there is an error. Returns whether `name` passed.
fn validate_generic_resource_name(
    name: &str,
    field: &impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) -> bool {
    let invalid_name = |message: &str| FieldError::invalid(field(), message, name);
    let qualified = resource_name::qualified_name_errors(name);
    if !qualified.is_empty() {
        errors.extend(qualified.iter().map(|message| invalid_name(message)));
        return false;
    }
    if resource_name::is_unqualified(name) && !resource_name::is_standard_resource_name(name) {
        errors.push(invalid_name(
            "must be a standard resource type or fully qualified",
        ));
        return false;
    }
    true
}

/// Upstream `validatePodResourceName` (`pod_level`) or
/// `validateContainerResourceName`: the generic checks, then what the pod
/// level supports, or what a container may name.
fn validate_resource_name(
    name: &str,
    field: impl Fn() -> String,
    pod_level: bool,
    errors: &mut Vec<FieldError>,
) {
    let generic_ok = validate_generic_resource_name(name, &field, errors);
    if pod_level {
        // The pod level reports only the first kind of problem it finds.
        if generic_ok && !is_supported_pod_level_resource(name) {
            let mut e = field_error(
                field(),
                FieldErrorType::NotSupported,
                "supported values: \"cpu\", \"hugepages-\", \"memory\"",
            );
            e.bad_value = Some(crate::model::truncate(name));
            errors.push(e);
        }
        return;
    }
    // A container's name is judged again whatever the generic checks found
    // (`disk` is reported twice upstream).
    let message = if resource_name::is_unqualified(name) {
        (!resource_name::is_standard_container_resource_name(name))
            .then_some("must be a standard resource for containers")
    } else {
        (!resource_name::is_native_resource(name)
            && !resource_name::is_extended_resource_name(name))
        .then_some("doesn't follow extended resource name standard")
    };
    if let Some(message) = message {
        errors.push(FieldError::invalid(field(), message, name));
    }
}

/// Upstream `ValidateResourceQuantityValue`, the part decoding leaves:
/// object counts and extended resources are whole numbers (a negative
/// quantity is refused where the pod is decoded).
fn validate_quantity_value(
    name: &str,
    q: &Quantity,
    field: &impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    if resource_name::is_integer_resource_name(name) && q.milli_value() % 1000 != 0 {
        errors.push(invalid(field(), q, "must be an integer".to_string()));
    }
}

fn hugepage_size(name: &str) -> Option<Quantity> {
    name.strip_prefix("hugepages-")
        .and_then(|s| Quantity::parse(s).ok())
        .filter(|q| q.value() > 0)
}

fn validate_hugepage_value(
    name: &str,
    q: &Quantity,
    field: impl Fn() -> String,
    errors: &mut Vec<FieldError>,
) {
    let ok = hugepage_size(name).is_some_and(|size| q.nanos() % size.nanos() == 0);
    if !ok {
        errors.push(invalid(
            field(),
            q,
            format!(
                "{} is not positive integer multiple of {name}",
                q.to_canonical_string()
            ),
        ));
    }
}

/// `validateResourceRequirements` for a container or the pod.
fn validate_requirements(
    r: &Requirements,
    path: &dyn fmt::Display,
    pod_level: bool,
    errors: &mut Vec<FieldError>,
) {
    let limits: &ResourceMap = r.limits();
    let requests: &ResourceMap = r.requests();
    let mut cpu_or_memory = false;
    let mut hugepages = false;
    for (name, q) in limits {
        let field = || format!("{path}.limits[{name}]");
        validate_resource_name(name, field, pod_level, errors);
        validate_quantity_value(name, q, &field, errors);
        if is_hugepages(name) {
            hugepages = true;
            validate_hugepage_value(name, q, field, errors);
        }
        cpu_or_memory |= name == "cpu" || name == "memory";
    }
    // Upstream reports a request that does not fit its limit at
    // `<path>.requests`, and a missing limit at `<path>.limits`, without
    // the resource's key (the value and the message name it).
    for (name, q) in requests {
        let field = || format!("{path}.requests[{name}]");
        validate_resource_name(name, field, pod_level, errors);
        validate_quantity_value(name, q, &field, errors);
        match limits.get(name) {
            Some(limit) if q != limit && !is_overcommit_allowed(name) => errors.push(invalid(
                format!("{path}.requests"),
                q,
                format!(
                    "must be equal to {name} limit of {}",
                    limit.to_canonical_string()
                ),
            )),
            Some(limit) if q > limit => errors.push(invalid(
                format!("{path}.requests"),
                q,
                format!(
                    "must be less than or equal to {name} limit of {}",
                    limit.to_canonical_string()
                ),
            )),
            Some(_) => {}
            None if !is_overcommit_allowed(name) => errors.push(field_error(
                format!("{path}.limits"),
                FieldErrorType::Required,
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
        if is_hugepages(name) {
            hugepages = true;
            validate_hugepage_value(name, q, field, errors);
        }
        cpu_or_memory |= name == "cpu" || name == "memory";
    }
    if hugepages && !cpu_or_memory {
        errors.push(field_error(
            path.to_string(),
            FieldErrorType::Forbidden,
            "HugePages require cpu or memory",
        ));
    }
}
