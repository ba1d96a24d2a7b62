//! Decoding WIT pods into parsed pods.
//!
//! Quantities cross the WIT boundary as strings; they are parsed here, once,
//! and every failure becomes a [`FieldError`] with the Kubernetes field path
//! of the value (`spec.containers[1].resources.limits[memory]`). The rest of
//! the policy works on [`Pod`], whose quantities are exact numbers and whose
//! containers know their kind and path.

use std::collections::BTreeMap;
use std::fmt;

use crate::quantity::Quantity;
use crate::wit::{self, ErrorReason, FieldError};

/// A parsed `ResourceList`, ordered by resource name.
pub type ResourceMap = BTreeMap<String, Quantity>;

/// The longest value echoed back in an error message.
const MAX_ECHO: usize = 64;

/// Shorten user input for messages so hostile input cannot bloat errors.
pub fn truncate(text: &str) -> String {
    if text.chars().count() <= MAX_ECHO {
        text.to_string()
    } else {
        let mut out: String = text.chars().take(MAX_ECHO).collect();
        out.push('…');
        out
    }
}

/// Build a field error.
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

/// A field path that is only turned into text when an error needs it.
///
/// Decoding builds one path per resource entry; formatting each eagerly cost
/// about a quarter of a whole evaluation, and valid pods never print one.
#[derive(Clone, Copy, Debug)]
pub enum FieldPath<'a> {
    /// A path given as text, e.g. `spec.overhead`.
    Root(&'a str),
    /// `parent.name`.
    Field(&'a FieldPath<'a>, &'a str),
    /// `parent[index]`.
    Index(&'a FieldPath<'a>, usize),
    /// `parent[key]`, with the key shortened like any echoed input.
    Key(&'a FieldPath<'a>, &'a str),
}

impl<'a> FieldPath<'a> {
    /// `self.name`.
    pub fn field(&'a self, name: &'a str) -> FieldPath<'a> {
        FieldPath::Field(self, name)
    }
    /// `self[index]`.
    pub fn index(&'a self, index: usize) -> FieldPath<'a> {
        FieldPath::Index(self, index)
    }
    /// `self[key]`.
    pub fn key(&'a self, key: &'a str) -> FieldPath<'a> {
        FieldPath::Key(self, key)
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldPath::Root(text) => f.write_str(text),
            FieldPath::Field(parent, name) => write!(f, "{parent}.{name}"),
            FieldPath::Index(parent, index) => write!(f, "{parent}[{index}]"),
            FieldPath::Key(parent, key) => write!(f, "{parent}[{}]", truncate(key)),
        }
    }
}

impl<'a> From<&'a str> for FieldPath<'a> {
    fn from(text: &'a str) -> Self {
        FieldPath::Root(text)
    }
}

impl<'a> From<&'a String> for FieldPath<'a> {
    fn from(text: &'a String) -> Self {
        FieldPath::Root(text)
    }
}

/// `resources` of a container or of the pod, parsed. `None` maps are nil.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requirements {
    /// `requests`.
    pub requests: Option<ResourceMap>,
    /// `limits`.
    pub limits: Option<ResourceMap>,
}

static EMPTY: ResourceMap = BTreeMap::new();

impl Requirements {
    /// Requests, with nil read as empty.
    pub fn requests(&self) -> &ResourceMap {
        self.requests.as_ref().unwrap_or(&EMPTY)
    }
    /// Limits, with nil read as empty.
    pub fn limits(&self) -> &ResourceMap {
        self.limits.as_ref().unwrap_or(&EMPTY)
    }
}

/// Where a container sits in the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContainerKind {
    /// A non-restartable init container.
    Init,
    /// A restartable init container (`restartPolicy: Always`).
    Sidecar,
    /// A regular container.
    Regular,
    /// An ephemeral (debug) container.
    Ephemeral,
}

impl ContainerKind {
    /// The pod spec field that lists containers of this kind.
    pub fn list_field(self) -> &'static str {
        match self {
            ContainerKind::Init | ContainerKind::Sidecar => "spec.initContainers",
            ContainerKind::Regular => "spec.containers",
            ContainerKind::Ephemeral => "spec.ephemeralContainers",
        }
    }

    /// The WIT enum value.
    pub fn to_wit(self) -> wit::ContainerKind {
        match self {
            ContainerKind::Init => wit::ContainerKind::Init,
            ContainerKind::Sidecar => wit::ContainerKind::Sidecar,
            ContainerKind::Regular => wit::ContainerKind::Regular,
            ContainerKind::Ephemeral => wit::ContainerKind::Ephemeral,
        }
    }
}

/// A container with parsed resources.
#[derive(Clone, Debug, PartialEq)]
pub struct Container {
    /// `name`.
    pub name: String,
    /// Init, sidecar, regular or ephemeral.
    pub kind: ContainerKind,
    /// Position in its list (`spec.initContainers`, `spec.containers` or
    /// `spec.ephemeralContainers`, by kind).
    pub index: usize,
    /// `resources` (nil and empty are the same for a container).
    pub resources: Requirements,
    /// `resizePolicy` as (resource, restart policy) pairs, verbatim.
    pub resize_policy: Vec<(String, String)>,
}

impl Container {
    /// Field path of the container, e.g. `spec.initContainers[0]`.
    pub fn path(&self) -> String {
        format!("{}[{}]", self.kind.list_field(), self.index)
    }
}

/// A container status with parsed resources.
#[derive(Clone, Debug, PartialEq)]
pub struct ContainerStatus {
    /// `name`.
    pub name: String,
    /// `allocatedResources`.
    pub allocated: Option<ResourceMap>,
    /// `resources` (actuated).
    pub resources: Option<Requirements>,
}

/// A DRA node-allocatable claim status with parsed quantities.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimStatus {
    /// Containers referencing the claim.
    pub containers: Vec<String>,
    /// `mapping` amounts.
    pub mapping: ResourceMap,
    /// `overhead[].perPod`.
    pub per_pod: ResourceMap,
    /// `overhead[].perContainer`.
    pub per_container: ResourceMap,
}

/// `PodStatus`, parsed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    /// `qosClass`.
    pub qos_class: Option<String>,
    /// Pod-level actuated `resources`.
    pub resources: Option<Requirements>,
    /// Pod-level `allocatedResources`.
    pub allocated: Option<ResourceMap>,
    /// `containerStatuses`.
    pub container_statuses: Vec<ContainerStatus>,
    /// `initContainerStatuses`.
    pub init_container_statuses: Vec<ContainerStatus>,
    /// `conditions` as (type, status, reason).
    pub conditions: Vec<(String, String, Option<String>)>,
    /// `nodeAllocatableResourceClaimStatuses`.
    pub claims: Vec<ClaimStatus>,
}

/// A pod with parsed quantities.
#[derive(Clone, Debug, PartialEq)]
pub struct Pod {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.annotations`.
    pub annotations: Vec<(String, String)>,
    /// `spec.initContainers` (init containers and sidecars), in order.
    pub init_containers: Vec<Container>,
    /// `spec.containers`, in order.
    pub containers: Vec<Container>,
    /// `spec.ephemeralContainers`.
    pub ephemeral_containers: Vec<Container>,
    /// `spec.resources`; `None` = nil.
    pub resources: Option<Requirements>,
    /// `spec.overhead`; `None` = nil.
    pub overhead: Option<ResourceMap>,
    /// `spec.priority`.
    pub priority: Option<i32>,
    /// `spec.priorityClassName`.
    pub priority_class_name: Option<String>,
    /// `spec.os.name`.
    pub os_name: Option<String>,
    /// `spec.restartPolicy`.
    pub restart_policy: Option<String>,
    /// `status`.
    pub status: Status,
}

impl Pod {
    /// Decode a WIT pod; every bad quantity is reported, not just the first.
    pub fn decode(pod: &wit::Pod) -> Result<Pod, Vec<FieldError>> {
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
            status,
        })
    }

    /// Init containers (including sidecars) then regular containers, in spec order.
    pub fn init_and_regular(&self) -> impl Iterator<Item = &Container> {
        self.init_containers.iter().chain(self.containers.iter())
    }

    /// Find a container of any kind by name (init containers first, as the kubelet does).
    pub fn container(&self, name: &str) -> Option<&Container> {
        self.init_and_regular()
            .chain(self.ephemeral_containers.iter())
            .find(|c| c.name == name)
    }
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
    let mut map = ResourceMap::new();
    for entry in list {
        let field = path.key(&entry.name);
        if let Some(q) = parse_quantity(&entry.quantity, field, false, errors)
            && map.insert(entry.name.clone(), q).is_some()
        {
            errors.push(FieldError {
                field: field.to_string(),
                reason: ErrorReason::Duplicate,
                message: "resource name appears more than once".to_string(),
                bad_value: Some(truncate(&entry.name)),
            });
        }
    }
    map
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
            let mut per_pod = ResourceMap::new();
            let mut per_container = ResourceMap::new();
            let overhead = path.field("overhead");
            for (j, o) in claim.overhead.iter().enumerate() {
                let opath = overhead.index(j);
                if let Some(q) = o
                    .per_pod
                    .as_ref()
                    .and_then(|t| parse_quantity(t, opath.field("perPod"), false, errors))
                {
                    add_into(&mut per_pod, &o.name, q);
                }
                if let Some(q) = o
                    .per_container
                    .as_ref()
                    .and_then(|t| parse_quantity(t, opath.field("perContainer"), false, errors))
                {
                    add_into(&mut per_container, &o.name, q);
                }
            }
            ClaimStatus {
                containers: claim.containers.clone(),
                mapping: decode_list(&claim.mapping, path.field("mapping"), errors),
                per_pod,
                per_container,
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

/// `map[name] += q` (creating the key), saturating at the quantity bound.
pub fn add_into(map: &mut ResourceMap, name: &str, q: Quantity) {
    match map.get_mut(name) {
        Some(existing) => *existing = existing.saturating_add(q),
        None => {
            map.insert(name.to_string(), q);
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
        },
        status: wit::PodStatus::default(),
    }
}
