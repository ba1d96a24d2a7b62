//! The parsed pod the policy works on.
//!
//! Quantities cross the WIT boundary as strings; [`crate::boundary::pod`]
//! parses them, once, and reports every failure with the Kubernetes field
//! path of the value (`spec.containers[1].resources.limits[memory]`, a
//! [`FieldPath`]). The rest of the policy works on [`Pod`], whose
//! quantities are exact numbers and whose containers know their kind and
//! path.

use std::fmt;

pub use crate::resource_map::ResourceMap;

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

static EMPTY: ResourceMap = ResourceMap::new();

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
    /// `spec.nodeName`: the node the pod is bound to; `None` or empty =
    /// not bound.
    pub node_name: Option<String>,
    /// `status`.
    pub status: Status,
}

impl Pod {
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
