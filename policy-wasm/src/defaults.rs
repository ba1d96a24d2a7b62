//! API-server defaulting of container and pod-level resources
//! (`SetDefaults_Pod` with KEP-2837), returned as the defaulted pod and the
//! RFC 6902 patch that turns the input into it.
//!
//! Order, as upstream: every quantity is rounded up to milli precision;
//! container requests default to their limits; then, with PodLevelResources,
//! pod-level hugepage limits default to the containers' aggregate, pod-level
//! requests to the containers' aggregate (cpu, memory) or else to the pod
//! limit, and (PodLevelResourcesFixUpdateDefaulting) pod-level cpu/memory
//! limits to the sum of container limits when every container has one.

use std::fmt;

use crate::features::FeatureGates;
use crate::model::{Pod, ResourceMap};
use crate::quantity::Quantity;
use crate::resources::{self, is_hugepages, is_supported_pod_level_resource};
use crate::wit::{
    self, FieldError, PatchOp, PatchOperation, PatchValue, ResourceQuantity, ResourceRequirements,
};

/// Whether a resource may be overcommitted (requests below limits): every
/// native resource except hugepages (upstream `IsOvercommitAllowed`).
pub fn is_overcommit_allowed(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !is_hugepages(name)
}

/// Default a pod; the input must decode (quantities parse).
pub fn default_pod(
    input: &wit::Pod,
    gates: &FeatureGates,
) -> Result<wit::DefaultedPod, Vec<FieldError>> {
    crate::boundary::pod::decode_pod(input)?;
    let mut out = input.clone();
    round_all_to_milli(&mut out);
    for c in out
        .spec
        .containers
        .iter_mut()
        .chain(out.spec.init_containers.iter_mut())
    {
        default_container_requests(c);
    }
    if gates.pod_level_resources && out.spec.resources.is_some() {
        // The pod-level steps below read container resources only, which are
        // final from here on, so one decode serves all three.
        let containers = crate::boundary::pod::decode_pod(&out)?;
        default_hugepage_pod_limits(&mut out, &containers);
        default_pod_requests(&mut out, &containers);
        if gates.pod_level_resources_fix_update_defaulting {
            default_pod_limits(&mut out, &containers);
        }
    }
    let patch = diff_pod(input, &out);
    Ok(wit::DefaultedPod { pod: out, patch })
}

fn round_list(list: &mut [ResourceQuantity]) {
    for entry in list {
        if let Ok(q) = Quantity::parse(&entry.quantity) {
            let rounded = q.round_up_to_milli();
            if rounded.nanos() != q.nanos() {
                entry.quantity = rounded.to_canonical_string();
            }
        }
    }
}

fn round_requirements(r: &mut Option<ResourceRequirements>) {
    if let Some(r) = r {
        r.requests.iter_mut().for_each(|l| round_list(l));
        r.limits.iter_mut().for_each(|l| round_list(l));
    }
}

/// `SetDefaults_ResourceList`: values round up to milli precision.
fn round_all_to_milli(pod: &mut wit::Pod) {
    for c in pod
        .spec
        .containers
        .iter_mut()
        .chain(pod.spec.init_containers.iter_mut())
    {
        round_requirements(&mut c.resources);
    }
    round_requirements(&mut pod.spec.resources);
    pod.spec.overhead.iter_mut().for_each(|l| round_list(l));
}

fn has(list: &[ResourceQuantity], name: &str) -> bool {
    list.iter().any(|e| e.name == name)
}

/// A container with limits gets requests for every limit it lacks a request for.
fn default_container_requests(c: &mut wit::Container) {
    let Some(resources) = c.resources.as_mut() else {
        return;
    };
    let Some(limits) = resources.limits.as_ref() else {
        return;
    };
    let requests = resources.requests.get_or_insert_with(Vec::new);
    for limit in limits {
        if !has(requests, &limit.name) {
            requests.push(limit.clone());
        }
    }
}

fn push_quantity(list: &mut Vec<ResourceQuantity>, name: &str, q: &Quantity) {
    list.push(ResourceQuantity {
        name: name.to_string(),
        quantity: q.to_canonical_string(),
    });
}

/// `containers`: the pod decoded after container defaulting (see `default_pod`).
fn default_hugepage_pod_limits(pod: &mut wit::Pod, containers: &Pod) {
    let resources = pod.spec.resources.as_mut().expect("checked by caller");
    if resources.limits.as_ref().is_none_or(|l| l.is_empty())
        && resources.requests.as_ref().is_none_or(|l| l.is_empty())
    {
        return;
    }
    let aggregate =
        resources::aggregate_container_limits(containers, &resources::Options::default());
    let mut limits = resources.limits.clone().unwrap_or_default();
    let requests = resources.requests.clone().unwrap_or_default();
    for (name, q) in &aggregate {
        if is_supported_pod_level_resource(name)
            && is_hugepages(name)
            && !has(&requests, name)
            && !has(&limits, name)
        {
            push_quantity(&mut limits, name, q);
        }
    }
    if !limits.is_empty() {
        resources.limits = Some(limits);
    }
}

fn default_pod_requests(pod: &mut wit::Pod, containers: &Pod) {
    let resources = pod.spec.resources.as_mut().expect("checked by caller");
    let Some(limits) = resources.limits.clone().filter(|l| !l.is_empty()) else {
        return;
    };
    let mut requests = resources.requests.clone().unwrap_or_default();
    let aggregate: ResourceMap =
        resources::aggregate_container_requests(containers, &resources::Options::default());
    for (name, q) in &aggregate {
        if !has(&requests, name)
            && is_supported_pod_level_resource(name)
            && is_overcommit_allowed(name)
        {
            push_quantity(&mut requests, name, q);
        }
    }
    for limit in &limits {
        if !has(&requests, &limit.name) && is_supported_pod_level_resource(&limit.name) {
            requests.push(limit.clone());
        }
    }
    if !requests.is_empty() {
        resources.requests = Some(requests);
    }
}

fn all_containers_have_limit(pod: &Pod, name: &str) -> bool {
    pod.init_and_regular()
        .all(|c| c.resources.limits().contains_key(name))
}

/// Whether a pod-level list has a resource that may be set at pod level
/// (`IsPodLevelLimitsSet` / `IsPodLevelRequestsSet` on the current spec).
fn pod_level_set(list: Option<&Vec<ResourceQuantity>>) -> bool {
    list.is_some_and(|l| l.iter().any(|e| is_supported_pod_level_resource(&e.name)))
}

fn default_pod_limits(pod: &mut wit::Pod, containers: &Pod) {
    let current = pod.spec.resources.as_ref();
    if pod_level_set(current.and_then(|r| r.limits.as_ref()))
        || !pod_level_set(current.and_then(|r| r.requests.as_ref()))
    {
        return;
    }
    let aggregate =
        resources::aggregate_container_limits(containers, &resources::Options::default());
    let resources = pod.spec.resources.get_or_insert(ResourceRequirements {
        requests: None,
        limits: None,
    });
    let mut limits = resources.limits.clone().unwrap_or_default();
    for (name, q) in &aggregate {
        if !has(&limits, name)
            && is_supported_pod_level_resource(name)
            && is_overcommit_allowed(name)
            && all_containers_have_limit(containers, name)
        {
            push_quantity(&mut limits, name, q);
        }
    }
    if !limits.is_empty() {
        resources.limits = Some(limits);
    }
}

/// Escape a JSON Pointer token (RFC 6901): `~` -> `~0`, `/` -> `~1`.
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn op(kind: PatchOp, path: String, value: PatchValue) -> PatchOperation {
    PatchOperation {
        op: kind,
        path,
        value,
    }
}

fn diff_list(
    base: &dyn fmt::Display,
    before: Option<&Vec<ResourceQuantity>>,
    after: Option<&Vec<ResourceQuantity>>,
    ops: &mut Vec<PatchOperation>,
) {
    match (before, after) {
        (_, None) => {}
        (None, Some(after)) => ops.push(op(
            PatchOp::Add,
            base.to_string(),
            PatchValue::ResourceList(after.clone()),
        )),
        // Paths are formatted only for the entries that become operations.
        (Some(before), Some(after)) => {
            for entry in after {
                let path = || format!("{base}/{}", pointer_token(&entry.name));
                match before.iter().find(|b| b.name == entry.name) {
                    None => ops.push(op(
                        PatchOp::Add,
                        path(),
                        PatchValue::Quantity(entry.quantity.clone()),
                    )),
                    Some(b) if b.quantity != entry.quantity => ops.push(op(
                        PatchOp::Replace,
                        path(),
                        PatchValue::Quantity(entry.quantity.clone()),
                    )),
                    Some(_) => {}
                }
            }
        }
    }
}

fn diff_requirements(
    base: &dyn fmt::Display,
    before: Option<&ResourceRequirements>,
    after: Option<&ResourceRequirements>,
    ops: &mut Vec<PatchOperation>,
) {
    match (before, after) {
        (_, None) => {}
        (None, Some(after)) => {
            if after.requests.is_some() || after.limits.is_some() {
                ops.push(op(
                    PatchOp::Add,
                    base.to_string(),
                    PatchValue::Requirements(after.clone()),
                ));
            }
        }
        (Some(before), Some(after)) => {
            diff_list(
                &format_args!("{base}/limits"),
                before.limits.as_ref(),
                after.limits.as_ref(),
                ops,
            );
            diff_list(
                &format_args!("{base}/requests"),
                before.requests.as_ref(),
                after.requests.as_ref(),
                ops,
            );
        }
    }
}

/// The RFC 6902 patch from `before` to `after` (resources only change).
pub fn diff_pod(before: &wit::Pod, after: &wit::Pod) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    for (field, b_list, a_list) in [
        (
            "initContainers",
            &before.spec.init_containers,
            &after.spec.init_containers,
        ),
        (
            "containers",
            &before.spec.containers,
            &after.spec.containers,
        ),
    ] {
        for (i, (b, a)) in b_list.iter().zip(a_list.iter()).enumerate() {
            diff_requirements(
                &format_args!("/spec/{field}/{i}/resources"),
                b.resources.as_ref(),
                a.resources.as_ref(),
                &mut ops,
            );
        }
    }
    diff_list(
        &"/spec/overhead",
        before.spec.overhead.as_ref(),
        after.spec.overhead.as_ref(),
        &mut ops,
    );
    diff_requirements(
        &"/spec/resources",
        before.spec.resources.as_ref(),
        after.spec.resources.as_ref(),
        &mut ops,
    );
    ops
}
