//! The `pod` record decoded into the core's [`Pod`] (quantities parsed
//! once, every bad one reported with its field path, built lazily as a
//! [`FieldPath`]), and parsed resource maps and container kinds encoded
//! back.

use std::collections::BTreeMap;

use crate::model::{
    ClaimStatus, Container, ContainerKind, ContainerStatus, FieldPath, Pod, Requirements,
    ResourceMap, Status, truncate,
};
use crate::quantity::Quantity;
use crate::resize::{PendingResize, ResizeState};
use crate::warnings::{PodWarning, WrittenList, WrittenPod, WrittenResources};
use crate::wit::{self, ErrorReason, FieldError};

/// A WIT field error of `reason`, without a bad value: for the decoding
/// here and the exports that still build WIT errors themselves.
pub fn field_error(
    field: impl Into<String>,
    reason: ErrorReason,
    message: impl Into<String>,
) -> FieldError {
    FieldError {
        field: field.into(),
        reason,
        message: message.into(),
        bad_value: None,
    }
}

impl From<ContainerKind> for wit::ContainerKind {
    fn from(kind: ContainerKind) -> Self {
        match kind {
            ContainerKind::Init => wit::ContainerKind::Init,
            ContainerKind::Sidecar => wit::ContainerKind::Sidecar,
            ContainerKind::Regular => wit::ContainerKind::Regular,
            ContainerKind::Ephemeral => wit::ContainerKind::Ephemeral,
        }
    }
}

/// Decode a WIT pod; every bad quantity is reported, not just the first.
pub fn decode_pod(pod: &wit::Pod) -> Result<Pod, Vec<FieldError>> {
    let mut errors = Vec::new();
    let spec = &pod.spec;
    let init_containers = spec
        .init_containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let kind = if c.restart_policy.as_deref() == Some("Always") {
                ContainerKind::Sidecar
            } else {
                ContainerKind::Init
            };
            decode_container(c, kind, i, &mut errors)
        })
        .collect();
    let containers = decode_containers(&spec.containers, ContainerKind::Regular, &mut errors);
    let ephemeral_containers = decode_containers(
        &spec.ephemeral_containers,
        ContainerKind::Ephemeral,
        &mut errors,
    );
    let resources = spec
        .resources
        .as_ref()
        .map(|r| decode_requirements(r, "spec.resources".into(), &mut errors));
    let overhead = spec
        .overhead
        .as_ref()
        .map(|o| decode_list(o, "spec.overhead", &mut errors));
    let status = decode_status(&pod.status, &mut errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Pod {
        name: pod.name.clone(),
        annotations: pod.annotations.clone(),
        init_containers,
        containers,
        ephemeral_containers,
        resources,
        overhead,
        priority: spec.priority,
        priority_class_name: spec.priority_class_name.clone(),
        os_name: spec.os_name.clone(),
        restart_policy: spec.restart_policy.clone(),
        node_name: spec.node_name.clone(),
        status,
    })
}

fn decode_containers(
    containers: &[wit::Container],
    kind: ContainerKind,
    errors: &mut Vec<FieldError>,
) -> Vec<Container> {
    containers
        .iter()
        .enumerate()
        .map(|(i, c)| decode_container(c, kind, i, errors))
        .collect()
}

fn decode_container(
    c: &wit::Container,
    kind: ContainerKind,
    index: usize,
    errors: &mut Vec<FieldError>,
) -> Container {
    let list = FieldPath::Root(kind.list_field());
    let item = list.index(index);
    let resources = c
        .resources
        .as_ref()
        .map(|r| decode_requirements(r, item.field("resources"), errors))
        .unwrap_or_default();
    Container {
        name: c.name.clone(),
        kind,
        index,
        resources,
        resize_policy: c
            .resize_policy
            .iter()
            .map(|p| (p.resource_name.clone(), p.restart_policy.clone()))
            .collect(),
    }
}

/// Decode `resources` found at `path`.
pub fn decode_requirements(
    r: &wit::ResourceRequirements,
    path: FieldPath<'_>,
    errors: &mut Vec<FieldError>,
) -> Requirements {
    Requirements {
        requests: r
            .requests
            .as_ref()
            .map(|l| decode_list(l, path.field("requests"), errors)),
        limits: r
            .limits
            .as_ref()
            .map(|l| decode_list(l, path.field("limits"), errors)),
    }
}

/// Decode one `ResourceList` found at `path`; negative quantities and
/// duplicate names are errors.
pub fn decode_list<'p>(
    list: &[wit::ResourceQuantity],
    path: impl Into<FieldPath<'p>>,
    errors: &mut Vec<FieldError>,
) -> ResourceMap {
    let path = path.into();
    if list.windows(2).all(|pair| pair[0].name < pair[1].name) {
        // In name order, as API objects keep their maps: every entry is
        // appended, and no name can repeat.
        let mut map = ResourceMap::with_capacity(list.len());
        decode_entries(list, path, errors, |name, q| map.insert(name, q).is_some());
        map
    } else {
        // Any other order: a tree, so a long list in reverse order costs
        // its sort and not an insertion in the middle per entry.
        let mut tree = BTreeMap::new();
        decode_entries(list, path, errors, |name, q| tree.insert(name, q).is_some());
        tree.into_iter().collect()
    }
}

/// Parse every entry of `list` and give it to `insert`, which says whether
/// the name was there already (a duplicate, reported in the list's order).
fn decode_entries(
    list: &[wit::ResourceQuantity],
    path: FieldPath<'_>,
    errors: &mut Vec<FieldError>,
    mut insert: impl FnMut(String, Quantity) -> bool,
) {
    for entry in list {
        let field = path.key(&entry.name);
        if let Some(q) = parse_quantity(&entry.quantity, field, false, errors)
            && insert(entry.name.clone(), q)
        {
            errors.push(FieldError {
                field: field.to_string(),
                reason: ErrorReason::Duplicate,
                message: "resource name appears more than once".to_string(),
                bad_value: Some(truncate(&entry.name)),
            });
        }
    }
}

/// `tree[name] += q`, saturating.
fn sum_into(tree: &mut BTreeMap<String, Quantity>, name: &str, q: Quantity) {
    match tree.get_mut(name) {
        Some(sum) => *sum = sum.saturating_add(q),
        None => {
            tree.insert(name.to_string(), q);
        }
    }
}

/// Parse one quantity found at `field`; `allow_negative` is false for
/// resource amounts (`must be greater than or equal to 0`, as upstream).
pub fn parse_quantity(
    text: &str,
    field: FieldPath<'_>,
    allow_negative: bool,
    errors: &mut Vec<FieldError>,
) -> Option<Quantity> {
    match Quantity::parse(text) {
        Ok(q) if !allow_negative && q.is_negative() => {
            errors.push(FieldError {
                field: field.to_string(),
                reason: ErrorReason::Invalid,
                message: "must be greater than or equal to 0".to_string(),
                bad_value: Some(truncate(text)),
            });
            None
        }
        Ok(q) => Some(q),
        Err(e) => {
            errors.push(FieldError {
                field: field.to_string(),
                reason: ErrorReason::Invalid,
                message: e.to_string(),
                bad_value: Some(truncate(text)),
            });
            None
        }
    }
}

fn decode_status(status: &wit::PodStatus, errors: &mut Vec<FieldError>) -> Status {
    let statuses = |list: &[wit::ContainerStatus], base: &str, errors: &mut Vec<FieldError>| {
        list.iter()
            .enumerate()
            .map(|(i, s)| {
                let base = FieldPath::Root(base);
                let path = base.index(i);
                ContainerStatus {
                    name: s.name.clone(),
                    allocated: s
                        .allocated_resources
                        .as_ref()
                        .map(|l| decode_list(l, path.field("allocatedResources"), errors)),
                    resources: s
                        .resources
                        .as_ref()
                        .map(|r| decode_requirements(r, path.field("resources"), errors)),
                }
            })
            .collect::<Vec<_>>()
    };
    let claims = status
        .node_allocatable_claim_statuses
        .iter()
        .enumerate()
        .map(|(i, claim)| {
            let list = FieldPath::Root("status.nodeAllocatableResourceClaimStatuses");
            let path = list.index(i);
            // Summed by name in a tree, whatever the entries' order, then
            // collected in name order (see `ResourceMap`).
            let mut per_pod = BTreeMap::new();
            let mut per_container = BTreeMap::new();
            let overhead = path.field("overhead");
            for (j, o) in claim.overhead.iter().enumerate() {
                let opath = overhead.index(j);
                if let Some(q) = o
                    .per_pod
                    .as_ref()
                    .and_then(|t| parse_quantity(t, opath.field("perPod"), false, errors))
                {
                    sum_into(&mut per_pod, &o.name, q);
                }
                if let Some(q) = o
                    .per_container
                    .as_ref()
                    .and_then(|t| parse_quantity(t, opath.field("perContainer"), false, errors))
                {
                    sum_into(&mut per_container, &o.name, q);
                }
            }
            ClaimStatus {
                containers: claim.containers.clone(),
                mapping: decode_list(&claim.mapping, path.field("mapping"), errors),
                per_pod: per_pod.into_iter().collect(),
                per_container: per_container.into_iter().collect(),
            }
        })
        .collect();
    Status {
        qos_class: status.qos_class.clone().filter(|q| !q.is_empty()),
        resources: status
            .resources
            .as_ref()
            .map(|r| decode_requirements(r, "status.resources".into(), errors)),
        allocated: status
            .allocated_resources
            .as_ref()
            .map(|l| decode_list(l, "status.allocatedResources", errors)),
        container_statuses: statuses(
            &status.container_statuses,
            "status.containerStatuses",
            errors,
        ),
        init_container_statuses: statuses(
            &status.init_container_statuses,
            "status.initContainerStatuses",
            errors,
        ),
        conditions: status
            .conditions
            .iter()
            .map(|c| (c.condition_type.clone(), c.status.clone(), c.reason.clone()))
            .collect(),
        claims,
    }
}

fn written_list(list: &[wit::ResourceQuantity]) -> WrittenList<'_> {
    list.iter()
        .map(|entry| (entry.name.as_str(), entry.quantity.as_str()))
        .collect()
}

fn written_resources(containers: &[wit::Container]) -> Vec<Option<WrittenResources<'_>>> {
    containers
        .iter()
        .map(|c| {
            c.resources.as_ref().map(|r| WrittenResources {
                limits: r.limits.as_deref().map(written_list),
                requests: r.requests.as_deref().map(written_list),
            })
        })
        .collect()
}

/// The pod's resource lists as written, for [`crate::warnings`] (which
/// also looks at pods that do not decode).
pub fn written_pod(pod: &wit::Pod) -> WrittenPod<'_> {
    let spec = &pod.spec;
    WrittenPod {
        overhead: spec.overhead.as_deref().map(written_list),
        init_containers: written_resources(&spec.init_containers),
        containers: written_resources(&spec.containers),
        ephemeral_containers: written_resources(&spec.ephemeral_containers),
    }
}

/// Parsed requirements as a WIT `resource-requirements` of canonical
/// quantities (moving the resource names).
pub fn encode_requirements(requirements: Requirements) -> wit::ResourceRequirements {
    let list = |map: Option<ResourceMap>| {
        map.map(|m| {
            m.into_iter()
                .map(|(name, q)| wit::ResourceQuantity {
                    name,
                    quantity: q.to_canonical_string(),
                })
                .collect()
        })
    };
    wit::ResourceRequirements {
        requests: list(requirements.requests),
        limits: list(requirements.limits),
    }
}

impl From<PendingResize> for wit::PendingResize {
    fn from(pending: PendingResize) -> Self {
        wit::PendingResize {
            state: match pending.state {
                ResizeState::Deferred => wit::ResizeState::Deferred,
                ResizeState::Infeasible => wit::ResizeState::Infeasible,
                ResizeState::Pending => wit::ResizeState::Pending,
                ResizeState::InProgress => wit::ResizeState::InProgress,
            },
            changes: pending
                .changes
                .into_iter()
                .map(|change| wit::ResourcesChange {
                    container: change.container,
                    desired: encode_requirements(change.desired),
                    allocated: encode_requirements(change.allocated),
                })
                .collect(),
        }
    }
}

impl From<PodWarning> for wit::PodWarning {
    fn from(warning: PodWarning) -> Self {
        wit::PodWarning {
            field: warning.field,
            message: warning.message,
        }
    }
}

/// No status: a pod as it is first submitted.
impl Default for wit::PodStatus {
    fn default() -> Self {
        wit::PodStatus {
            qos_class: None,
            resources: None,
            allocated_resources: None,
            container_statuses: Vec::new(),
            init_container_statuses: Vec::new(),
            conditions: Vec::new(),
            node_allocatable_claim_statuses: Vec::new(),
        }
    }
}

/// Convert a parsed map back to WIT amounts.
pub fn to_amounts(map: &ResourceMap) -> Vec<wit::ResourceAmount> {
    map.iter()
        .map(|(name, q)| wit::ResourceAmount {
            name: name.clone(),
            quantity: q.to_canonical_string(),
            milli_value: q.milli_value(),
            value: q.value(),
        })
        .collect()
}

/// Convert a parsed map back to a WIT resource list of canonical strings.
pub fn to_resource_list(map: &ResourceMap) -> Vec<wit::ResourceQuantity> {
    map.iter()
        .map(|(name, q)| wit::ResourceQuantity {
            name: name.clone(),
            quantity: q.to_canonical_string(),
        })
        .collect()
}

/// A WIT pod with `containers` and nothing else set, for unit tests.
#[cfg(test)]
pub(crate) fn bare_pod(name: &str, containers: Vec<wit::Container>) -> wit::Pod {
    wit::Pod {
        name: name.into(),
        namespace: String::new(),
        uid: String::new(),
        annotations: Vec::new(),
        spec: wit::PodSpec {
            containers,
            init_containers: Vec::new(),
            ephemeral_containers: Vec::new(),
            resources: None,
            overhead: None,
            priority: None,
            priority_class_name: None,
            os_name: None,
            restart_policy: None,
            node_name: None,
        },
        status: wit::PodStatus::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(&str, &str)]) -> Option<Vec<wit::ResourceQuantity>> {
        Some(
            entries
                .iter()
                .map(|(name, quantity)| wit::ResourceQuantity {
                    name: name.to_string(),
                    quantity: quantity.to_string(),
                })
                .collect(),
        )
    }

    /// The written pod keeps every list where the pod has it, so the
    /// `pod-warnings` export flags what the core finds, at the WIT paths.
    #[test]
    fn pod_warnings_read_the_lists_as_written() {
        let container = |limits: &[(&str, &str)], requests: &[(&str, &str)]| wit::Container {
            name: "c".into(),
            restart_policy: None,
            resources: Some(wit::ResourceRequirements {
                limits: list(limits),
                requests: list(requests),
            }),
            resize_policy: Vec::new(),
        };
        let mut pod = bare_pod(
            "p",
            vec![
                container(&[("memory", "1Gi")], &[("memory", "1.5")]),
                container(&[("ephemeral-storage", "100m")], &[]),
            ],
        );
        pod.spec.overhead = list(&[("memory", "10.5")]);
        pod.spec.init_containers = vec![container(&[], &[("memory", "1n")])];
        let shown: Vec<String> = crate::evaluate::pod_warnings(&pod)
            .iter()
            .map(|w| format!("{}: {}", w.field, w.message))
            .collect();
        assert_eq!(
            shown,
            vec![
                "spec.overhead[memory]: fractional byte value \"10500m\" is invalid, must be an integer",
                "spec.initContainers[0].resources.requests[memory]: fractional byte value \"1n\" is invalid, must be an integer",
                "spec.containers[0].resources.requests[memory]: fractional byte value \"1500m\" is invalid, must be an integer",
                "spec.containers[1].resources.limits[ephemeral-storage]: fractional byte value \"100m\" is invalid, must be an integer",
            ]
        );
    }
}
