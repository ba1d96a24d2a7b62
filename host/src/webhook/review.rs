//! `AdmissionReview` (`admission.k8s.io/v1`) in and out, and the decisions:
//! what `/mutate` and `/validate` answer for one request.
//!
//! k8s-openapi has no admission types (they are not in the API server's
//! OpenAPI document), so the few we need are defined here. Parsing is strict
//! about what we read (required fields, types, the review's `apiVersion` and
//! `kind`) and ignores fields we do not read, as every Kubernetes client
//! does, so a newer API server's extra fields do not break reviews.
//!
//! Every answer comes from the policy component: defaulting (`default-pod`,
//! whose RFC 6902 patch becomes the webhook's JSONPatch), validation
//! (`validate-pod`) and, for an update that changes only resources, the
//! in-place resize rules (`resize-plan`). This module decides only which of
//! them applies to a request.

use anyhow::Result;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::PolicyResult;
use crate::bindings::{
    DefaultedPod, ErrorReason, FieldError, NodeSettings, Pod, PodWarning, ResizeDecision,
    ResizePlan, ResourceQuantity,
};
use crate::runtime::{PolicyRuntime, PreparedPolicy};

/// The four policy calls a review makes, on the node settings the caller
/// fixed: on a prepared node in a warm instance ([`PreparedPolicy`], what
/// the webhook's evaluation threads keep) or on a fresh instance per call
/// with the settings sent each time ([`OneShot`], the `review` command and
/// the threads' fallback). `Err` is a failure of the policy itself (trap,
/// fuel, deadline, memory cap); field errors are answers.
pub trait PolicyCalls {
    /// `validate-pod`.
    fn validate_pod(&mut self, pod: &Pod) -> Result<Vec<FieldError>>;
    /// `default-pod`.
    fn default_pod(&mut self, pod: &Pod) -> Result<PolicyResult<DefaultedPod>>;
    /// `pod-warnings` (they do not depend on the node).
    fn pod_warnings(&mut self, pod: &Pod) -> Result<Vec<PodWarning>>;
    /// `resize`'s `plan` from `current` to `desired`, with `others` (the
    /// requests of the node's other pods).
    fn resize_plan(
        &mut self,
        current: &Pod,
        desired: &Pod,
        others: &[ResourceQuantity],
    ) -> Result<PolicyResult<ResizePlan>>;
}

impl PolicyCalls for PreparedPolicy {
    fn validate_pod(&mut self, pod: &Pod) -> Result<Vec<FieldError>> {
        PreparedPolicy::validate_pod(self, pod)
    }

    fn default_pod(&mut self, pod: &Pod) -> Result<PolicyResult<DefaultedPod>> {
        PreparedPolicy::default_pod(self, pod)
    }

    fn pod_warnings(&mut self, pod: &Pod) -> Result<Vec<PodWarning>> {
        PreparedPolicy::pod_warnings(self, pod)
    }

    fn resize_plan(
        &mut self,
        current: &Pod,
        desired: &Pod,
        others: &[ResourceQuantity],
    ) -> Result<PolicyResult<ResizePlan>> {
        PreparedPolicy::resize_plan(self, current, desired, others)
    }
}

/// The one-shot exports on a fresh instance per call ([`PolicyRuntime::call`],
/// the host's default), with `node` sent on each call. Nothing is prepared,
/// so node settings that do not decode are reported by each call, as the
/// one-shot exports report them.
#[derive(Clone, Copy)]
pub struct OneShot<'a> {
    /// The policy.
    pub policy: &'a PolicyRuntime,
    /// The node settings sent with every call.
    pub node: &'a NodeSettings,
}

impl PolicyCalls for OneShot<'_> {
    fn validate_pod(&mut self, pod: &Pod) -> Result<Vec<FieldError>> {
        self.policy.validate_pod(pod, self.node)
    }

    fn default_pod(&mut self, pod: &Pod) -> Result<PolicyResult<DefaultedPod>> {
        self.policy.default_pod(pod, self.node)
    }

    fn pod_warnings(&mut self, pod: &Pod) -> Result<Vec<PodWarning>> {
        self.policy.call(|p, store| p.call_pod_warnings(store, pod))
    }

    fn resize_plan(
        &mut self,
        current: &Pod,
        desired: &Pod,
        others: &[ResourceQuantity],
    ) -> Result<PolicyResult<ResizePlan>> {
        self.policy.resize_plan(current, desired, others, self.node)
    }
}

/// The only review version served (the API server sends what
/// `admissionReviewVersions` lists; the manifests list `v1`).
pub const API_VERSION: &str = "admission.k8s.io/v1";

/// The review's `kind`.
pub const KIND: &str = "AdmissionReview";

/// Which webhook a request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/mutate`: API-server defaulting as a JSONPatch.
    Mutate,
    /// `/validate`: validation, and the resize rules for resource updates.
    Validate,
}

impl Endpoint {
    /// The route and metric label: `mutate` or `validate`.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
        }
    }
}

/// An incoming `AdmissionReview`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReview {
    /// Must be [`API_VERSION`].
    pub api_version: String,
    /// Must be [`KIND`].
    pub kind: String,
    /// The request; a review without one is refused.
    pub request: Option<AdmissionRequest>,
}

/// `AdmissionRequest`, the fields the webhook reads.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifies this call; the response echoes it.
    pub uid: String,
    /// The kind of the object (`{group: "", version: "v1", kind: "Pod"}`).
    pub kind: GroupVersionKind,
    /// The subresource (`resize`, `status`, ...), when one is addressed.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// The object's name (may be empty on CREATE with `generateName`).
    #[serde(default)]
    pub name: Option<String>,
    /// The object's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// The object as it would be stored (CREATE, UPDATE), kept as JSON
    /// text: it is read straight into a Pod when the review applies.
    #[serde(default)]
    pub object: Option<Box<RawValue>>,
    /// The stored object (UPDATE, DELETE).
    #[serde(default)]
    pub old_object: Option<Box<RawValue>>,
    /// Whether the API server will not persist the result. The webhook has
    /// no side effects, so a dry run is answered exactly like a real one.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// `metav1.GroupVersionKind`.
#[derive(Debug, Deserialize)]
pub struct GroupVersionKind {
    /// API group; `""` is the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// The admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// Create.
    Create,
    /// Update (including subresources such as `resize`).
    Update,
    /// Delete.
    Delete,
    /// Connect (exec, attach, port-forward).
    Connect,
}

/// The outgoing `AdmissionReview`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut<'a> {
    /// [`API_VERSION`].
    pub api_version: &'static str,
    /// [`KIND`].
    pub kind: &'static str,
    /// The answer.
    pub response: &'a AdmissionResponse,
}

/// `AdmissionResponse`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not (or a note), as a `metav1.Status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `JSONPatch` when `patch` is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Base64 of the RFC 6902 patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Warnings shown to the client (kubectl prints them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// `metav1.Status`, the parts a webhook sets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Status {
    /// `Failure` for a denial.
    pub status: &'static str,
    /// The text the API server shows after "denied the request:".
    pub message: String,
    /// `Invalid`, `BadRequest`, ...
    pub reason: &'static str,
    /// HTTP code the API server returns to its client (422 for an invalid pod).
    pub code: u16,
    /// Per-field causes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

/// `metav1.StatusDetails`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusDetails {
    /// The pod's name, when known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `Pod`.
    pub kind: &'static str,
    /// One per field error.
    pub causes: Vec<StatusCause>,
}

/// `metav1.StatusCause`: one field error.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusCause {
    /// `FieldValueInvalid`, `FieldValueForbidden`, ...
    pub reason: &'static str,
    /// The error without the field path, as upstream's `ErrorBody`.
    pub message: String,
    /// The field path.
    pub field: String,
}

/// How a request ended, for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Allowed without a patch.
    Allowed,
    /// Allowed with a defaulting patch.
    Patched,
    /// Denied by the policy (or the pod could not be read).
    Denied,
    /// Not a pod CREATE/UPDATE the webhook handles: allowed untouched.
    Ignored,
}

impl Outcome {
    /// The metric label.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Patched => "patched",
            Outcome::Denied => "denied",
            Outcome::Ignored => "ignored",
        }
    }
}

/// An answer and how it ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The response to send.
    pub response: AdmissionResponse,
    /// For metrics.
    pub outcome: Outcome,
}

/// Why a body is not a usable review: the HTTP 400 message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadReview(pub String);

/// Parse and check a request body: UTF-8, JSON, `admission.k8s.io/v1`
/// `AdmissionReview` with a request and a non-empty `request.uid`.
pub fn parse(body: &[u8]) -> std::result::Result<AdmissionRequest, BadReview> {
    let text = std::str::from_utf8(body).map_err(|e| {
        BadReview(format!(
            "the request body is not UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    // Path tracking costs a wrapper per JSON node: parse plainly, and only
    // when that fails parse again to say where.
    let review: AdmissionReview = match serde_json::from_str(text) {
        Ok(review) => review,
        Err(plain) => return Err(explain_parse_error(text, plain)),
    };
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(BadReview(format!(
            "expected apiVersion `{API_VERSION}` and kind `{KIND}`, got `{}` and `{}`",
            review.api_version, review.kind
        )));
    }
    let Some(request) = review.request else {
        return Err(BadReview("the AdmissionReview has no `request`".into()));
    };
    if request.uid.is_empty() {
        return Err(BadReview("`request.uid` is empty".into()));
    }
    Ok(request)
}

/// The message for a body that does not parse, with the field path.
fn explain_parse_error(text: &str, plain: serde_json::Error) -> BadReview {
    // serde would read a struct from an array and blame its first element.
    if let Some(first) = text.trim_start().chars().next()
        && first != '{'
    {
        return BadReview("the request body is not an AdmissionReview: not a JSON object".into());
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let tracked: std::result::Result<AdmissionReview, _> =
        serde_path_to_error::deserialize(&mut deserializer);
    let error = match tracked {
        Err(e) => e,
        // Only trailing data can fail the plain parse but not this one.
        Ok(_) => {
            return BadReview(format!(
                "the request body has trailing data after the AdmissionReview: {plain}"
            ));
        }
    };
    let path = error.path().to_string();
    let inner = error.into_inner();
    if path == "." {
        BadReview(format!(
            "the request body is not an AdmissionReview: {inner}"
        ))
    } else {
        BadReview(format!(
            "the request body is not an AdmissionReview: {path}: {inner}"
        ))
    }
}

/// Serialise the review carrying `response`.
pub fn to_body(response: &AdmissionResponse) -> Vec<u8> {
    let review = ReviewOut {
        api_version: API_VERSION,
        kind: KIND,
        response,
    };
    // Serialising plain structs of strings and numbers cannot fail.
    serde_json::to_vec(&review).unwrap_or_default()
}

/// Whether the webhook evaluates this request: a CREATE or UPDATE of a core
/// v1 Pod, or of its `resize` subresource. Everything else (other kinds,
/// DELETE, CONNECT, `status`, `ephemeralcontainers`, `binding`) is allowed
/// untouched: registration mistakes must not block unrelated objects.
pub fn applies(request: &AdmissionRequest) -> bool {
    let pod =
        request.kind.group.is_empty() && request.kind.version == "v1" && request.kind.kind == "Pod";
    let subresource_ok = matches!(
        request.sub_resource.as_deref(),
        None | Some("") | Some("resize")
    );
    let operation_ok = matches!(request.operation, Operation::Create | Operation::Update);
    pod && subresource_ok && operation_ok
}

/// An allowed response without a patch.
pub fn allow(uid: &str, outcome: Outcome) -> Verdict {
    Verdict {
        response: AdmissionResponse {
            uid: uid.to_string(),
            allowed: true,
            status: None,
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        },
        outcome,
    }
}

/// A denial with a plain message (no field causes).
fn deny_message(uid: &str, reason: &'static str, code: u16, message: String) -> Verdict {
    Verdict {
        response: AdmissionResponse {
            uid: uid.to_string(),
            allowed: false,
            status: Some(Status {
                status: "Failure",
                message,
                reason,
                code,
                details: None,
            }),
            patch_type: None,
            patch: None,
            warnings: Vec::new(),
        },
        outcome: Outcome::Denied,
    }
}

/// A denial listing every field error with its path, worded like the API
/// server's own `Pod "name" is invalid: [...]`.
fn deny_invalid(uid: &str, name: &str, errors: &[FieldError]) -> Verdict {
    let texts: Vec<String> = errors.iter().map(field_error_text).collect();
    let list = match texts.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let mut verdict = deny_message(
        uid,
        "Invalid",
        422,
        format!("Pod {name:?} is invalid: {list}"),
    );
    if let Some(status) = verdict.response.status.as_mut() {
        status.details = Some(StatusDetails {
            name: name.to_string(),
            kind: "Pod",
            causes: errors
                .iter()
                .map(|e| StatusCause {
                    reason: cause_type(e.reason),
                    message: error_body(e),
                    field: e.field.clone(),
                })
                .collect(),
        });
    }
    verdict
}

/// `field.ErrorType` as a `StatusCause` type.
fn cause_type(reason: ErrorReason) -> &'static str {
    match reason {
        ErrorReason::Invalid => "FieldValueInvalid",
        ErrorReason::Forbidden => "FieldValueForbidden",
        ErrorReason::NotSupported => "FieldValueNotSupported",
        ErrorReason::Required => "FieldValueRequired",
        ErrorReason::Duplicate => "FieldValueDuplicate",
        ErrorReason::TooLong => "FieldValueTooLong",
    }
}

/// Upstream `field.Error.ErrorBody()`: the type, the value where the type
/// shows one, and the message.
fn error_body(error: &FieldError) -> String {
    let (kind, shows_value) = match error.reason {
        ErrorReason::Invalid => ("Invalid value", true),
        ErrorReason::NotSupported => ("Unsupported value", true),
        ErrorReason::Duplicate => ("Duplicate value", true),
        ErrorReason::Required => ("Required value", false),
        ErrorReason::Forbidden => ("Forbidden", false),
        ErrorReason::TooLong => ("Too long", false),
    };
    let mut text = kind.to_string();
    if shows_value && let Some(value) = &error.bad_value {
        text.push_str(&format!(": {value:?}"));
    }
    if !error.message.is_empty() {
        text.push_str(": ");
        text.push_str(&error.message);
    }
    text
}

/// `field: body`, as upstream's `field.Error.Error()`.
pub fn field_error_text(error: &FieldError) -> String {
    format!("{}: {}", error.field, error_body(error))
}

/// The name to show: `metadata.name`, else `generateName` with `*`, else the request's name.
fn display_name(
    name: Option<&str>,
    generate_name: Option<&str>,
    request_name: Option<&str>,
) -> String {
    match (name, generate_name) {
        (Some(name), _) if !name.is_empty() => name.to_string(),
        (_, Some(prefix)) if !prefix.is_empty() => format!("{prefix}*"),
        _ => request_name.unwrap_or_default().to_string(),
    }
}

/// What an UPDATE changed in the pod's spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecChange {
    /// The spec is the same (labels, annotations, status, ...).
    None,
    /// Only container or pod-level `resources`: an in-place resize.
    ResourcesOnly,
    /// Something else (the API server judges such updates itself).
    Other,
}

/// Compare the specs of the old and new object.
pub fn spec_change(old: &Value, new: &Value) -> SpecChange {
    let (old_spec, new_spec) = (old.get("spec"), new.get("spec"));
    if old_spec == new_spec {
        return SpecChange::None;
    }
    if without_resources(old_spec) == without_resources(new_spec) {
        SpecChange::ResourcesOnly
    } else {
        SpecChange::Other
    }
}

fn without_resources(spec: Option<&Value>) -> Option<Value> {
    let mut spec = spec?.clone();
    if let Value::Object(map) = &mut spec {
        map.remove("resources");
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(items)) = map.get_mut(list) {
                for item in items {
                    if let Value::Object(container) = item {
                        container.remove("resources");
                    }
                }
            }
        }
    }
    Some(spec)
}

fn bad_request(uid: &str, message: String) -> Box<Verdict> {
    Box::new(deny_message(uid, "BadRequest", 400, message))
}

/// The pod in `raw` and the name to show for it, or the denial that says
/// why it cannot be read.
fn read_pod(
    uid: &str,
    what: &str,
    raw: &RawValue,
    request_name: Option<&str>,
) -> std::result::Result<(Pod, String), Box<Verdict>> {
    let text = raw.get();
    // What an API server sends (quantities as strings, no alpha claim
    // statuses, whose two shapes only `pod_from_json` reads) goes straight
    // into k8s-openapi's Pod: no JSON tree, no copy of it.
    if !text.contains("nodeAllocatableResourceClaimStatuses")
        && let Ok(pod) = serde_json::from_str::<k8s_openapi::api::core::v1::Pod>(text)
    {
        let meta = &pod.metadata;
        let name = display_name(
            meta.name.as_deref(),
            meta.generate_name.as_deref(),
            request_name,
        );
        return Ok((crate::pod_input::pod_to_wit(&pod), name));
    }
    // Anything else, errors included (they get their field path here).
    let value: Value = serde_json::from_str(text)
        .map_err(|e| bad_request(uid, format!("{what} is not JSON: {e}")))?;
    if let Some(kind) = value.get("kind").and_then(Value::as_str)
        && kind != "Pod"
    {
        return Err(bad_request(
            uid,
            format!("{what}.kind is `{kind}`, expected Pod"),
        ));
    }
    let meta = value.get("metadata");
    let field = |key: &str| meta.and_then(|m| m.get(key)).and_then(Value::as_str);
    let name = display_name(field("name"), field("generateName"), request_name);
    let pod = crate::pod_input::pod_from_json(&value)
        .map_err(|e| bad_request(uid, format!("{what} is not a valid Pod: {e:#}")))?;
    Ok((pod, name))
}

/// The spec change between the stored and the new object.
fn raw_spec_change(
    uid: &str,
    old: &RawValue,
    new: &RawValue,
) -> std::result::Result<SpecChange, Box<Verdict>> {
    let parse = |what: &str, raw: &RawValue| {
        serde_json::from_str::<Value>(raw.get())
            .map_err(|e| bad_request(uid, format!("{what} is not JSON: {e}")))
    };
    Ok(spec_change(
        &parse("request.oldObject", old)?,
        &parse("request.object", new)?,
    ))
}

/// Answer one request with `policy`'s calls (the node settings are the
/// ones `policy` was given). `Err` is a failure of the policy itself (trap,
/// fuel, deadline, memory cap): the server turns it into an HTTP 500 so
/// that the webhook configuration's `failurePolicy` decides, not this code.
pub fn review(
    policy: &mut impl PolicyCalls,
    endpoint: Endpoint,
    request: &AdmissionRequest,
) -> Result<Verdict> {
    let uid = request.uid.as_str();
    if !applies(request) {
        return Ok(allow(uid, Outcome::Ignored));
    }
    let Some(object) = &request.object else {
        return Ok(deny_message(
            uid,
            "BadRequest",
            400,
            "request.object is missing: a Pod CREATE or UPDATE carries the pod".into(),
        ));
    };
    let change = match (request.operation, &request.old_object) {
        (Operation::Create, _) => None,
        (Operation::Update, Some(old)) => match raw_spec_change(uid, old, object) {
            Ok(change) => Some(change),
            Err(denial) => return Ok(*denial),
        },
        (Operation::Update, None) => {
            return Ok(deny_message(
                uid,
                "BadRequest",
                400,
                "request.oldObject is missing: a Pod UPDATE carries the stored pod".into(),
            ));
        }
        // `applies` let only CREATE and UPDATE through.
        (Operation::Delete | Operation::Connect, _) => return Ok(allow(uid, Outcome::Ignored)),
    };
    // An update that leaves the spec alone changes nothing the policy
    // judges; defaulting it again could patch resources of a pod created
    // before the webhook, which the API server refuses as immutable.
    if change == Some(SpecChange::None) {
        return Ok(allow(uid, Outcome::Allowed));
    }
    let request_name = request.name.as_deref();
    let (pod, name) = match read_pod(uid, "request.object", object, request_name) {
        Ok(read) => read,
        Err(denial) => return Ok(*denial),
    };
    let mut verdict = match endpoint {
        Endpoint::Mutate => return mutate(policy, uid, &name, &pod),
        Endpoint::Validate => match (change, &request.old_object) {
            (Some(SpecChange::ResourcesOnly), Some(old_json)) => {
                let old = match read_pod(uid, "request.oldObject", old_json, request_name) {
                    Ok((pod, _)) => pod,
                    Err(denial) => return Ok(*denial),
                };
                validate_resize(policy, uid, &name, &old, &pod)?
            }
            _ => {
                let errors = policy.validate_pod(&pod)?;
                if errors.is_empty() {
                    allow(uid, Outcome::Allowed)
                } else {
                    deny_invalid(uid, &name, &errors)
                }
            }
        },
    };
    // Upstream's pod warnings (fractional bytes), on the validating side only
    // so that a client sees each once; they go with denials too.
    verdict.response.warnings = policy
        .pod_warnings(&pod)?
        .iter()
        .map(ToString::to_string)
        .collect();
    Ok(verdict)
}

fn mutate(policy: &mut impl PolicyCalls, uid: &str, name: &str, pod: &Pod) -> Result<Verdict> {
    let defaulted = match policy.default_pod(pod)? {
        Ok(defaulted) => defaulted,
        Err(errors) => return Ok(deny_invalid(uid, name, &errors)),
    };
    if defaulted.patch.is_empty() {
        return Ok(allow(uid, Outcome::Allowed));
    }
    let patch = serde_json::to_vec(&crate::output::patch_json(&defaulted.patch))?;
    let mut verdict = allow(uid, Outcome::Patched);
    verdict.response.patch_type = Some("JSONPatch");
    verdict.response.patch = Some(base64::engine::general_purpose::STANDARD.encode(patch));
    Ok(verdict)
}

/// An update of resources only: the KEP-1287 rules (QoS class immutable,
/// only cpu and memory, no init container resize, ...) between the stored
/// and the new pod. What the API server refuses is the API's business (the
/// plan's `errors`: Invalid, or `PodResizeValidator`'s Forbidden when the
/// node settings know the node's allocatable); whether the resize fits
/// (Deferred, Infeasible) is the node's, so those are allowed.
fn validate_resize(
    policy: &mut impl PolicyCalls,
    uid: &str,
    name: &str,
    old: &Pod,
    new: &Pod,
) -> Result<Verdict> {
    let no_others = Vec::new();
    let plan = match policy.resize_plan(old, new, &no_others)? {
        Ok(plan) => plan,
        Err(errors) => return Ok(deny_invalid(uid, name, &errors)),
    };
    if plan.decision != ResizeDecision::Invalid && plan.errors.is_empty() {
        return Ok(allow(uid, Outcome::Allowed));
    }
    if plan.decision != ResizeDecision::Invalid {
        // An admission plugin's refusal: 403, as `admission.NewForbidden`.
        let why: Vec<&str> = plan.errors.iter().map(|e| e.message.as_str()).collect();
        return Ok(deny_message(
            uid,
            "Forbidden",
            403,
            format!("pods {name:?} is forbidden: {}", why.join("; ")),
        ));
    }
    if plan.errors.is_empty() {
        return Ok(deny_message(
            uid,
            "Invalid",
            422,
            format!("Pod {name:?} resize is invalid: {}", plan.message),
        ));
    }
    Ok(deny_invalid(uid, name, &plan.errors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(value: Value) -> Vec<u8> {
        serde_json::to_vec(&value).unwrap()
    }

    fn review_json(request: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": KIND, "request": request})
    }

    fn pod_request() -> Value {
        json!({
            "uid": "u-1",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}},
        })
    }

    #[test]
    fn parse_accepts_a_v1_review_and_ignores_unknown_fields() {
        let mut request = pod_request();
        request["userInfo"] = json!({"username": "me"});
        request["someFutureField"] = json!(1);
        let parsed = parse(&body(review_json(request))).unwrap();
        assert_eq!(parsed.uid, "u-1");
        assert_eq!(parsed.operation, Operation::Create);
        assert!(applies(&parsed));
    }

    #[test]
    fn parse_refuses_what_is_not_a_v1_review() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not an AdmissionReview"),
            (
                vec![b'{', 0xff, b'}'],
                "not UTF-8 (invalid byte at offset 1)",
            ),
            (
                body(
                    json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": KIND, "request": pod_request()}),
                ),
                "expected apiVersion `admission.k8s.io/v1`",
            ),
            (
                body(json!({"apiVersion": API_VERSION, "kind": "Pod", "request": pod_request()})),
                "got `admission.k8s.io/v1` and `Pod`",
            ),
            (
                body(json!({"apiVersion": API_VERSION, "kind": KIND})),
                "has no `request`",
            ),
            (
                body(review_json({
                    let mut r = pod_request();
                    r.as_object_mut().unwrap().remove("uid");
                    r
                })),
                "request: missing field `uid`",
            ),
            (
                body(review_json({
                    let mut r = pod_request();
                    r["uid"] = json!("");
                    r
                })),
                "`request.uid` is empty",
            ),
            (
                body(review_json({
                    let mut r = pod_request();
                    r["operation"] = json!("PATCH");
                    r
                })),
                "request.operation: unknown variant `PATCH`",
            ),
            (
                format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
                "not an AdmissionReview: not a JSON object",
            ),
            (
                [body(review_json(pod_request())), b"{}".to_vec()].concat(),
                "trailing data",
            ),
        ];
        for (input, expected) in cases {
            let error = parse(&input).expect_err(expected);
            assert!(
                error.0.contains(expected),
                "`{}` does not contain `{expected}`",
                error.0
            );
        }
    }

    /// A 10k-deep object inside a good review: the review parses (the
    /// object is skipped without recursion), and reading the pod is denied
    /// at serde_json's depth limit, not a stack overflow.
    #[test]
    fn deeply_nested_objects_are_denied_not_overflowed() {
        let mut request = pod_request();
        request["object"] = json!(null);
        let text = serde_json::to_string(&review_json(request)).unwrap();
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let text = text.replace("\"object\":null", &format!("\"object\":{deep}"));
        let parsed = parse(text.as_bytes()).unwrap();
        let raw = parsed.object.as_ref().unwrap();
        let denial = read_pod("u", "request.object", raw, None).unwrap_err();
        let message = denial.response.status.unwrap().message;
        assert!(message.contains("recursion limit exceeded"), "{message}");
    }

    #[test]
    fn only_pod_create_and_update_apply() {
        let mut request = parse(&body(review_json(pod_request()))).unwrap();
        request.sub_resource = Some("resize".into());
        assert!(applies(&request));
        request.sub_resource = Some("status".into());
        assert!(!applies(&request));
        request.sub_resource = None;
        request.operation = Operation::Delete;
        assert!(!applies(&request));
        request.operation = Operation::Update;
        request.kind.kind = "Deployment".into();
        request.kind.group = "apps".into();
        assert!(!applies(&request));
    }

    #[test]
    fn spec_change_tells_resize_from_other_updates() {
        let old = json!({"metadata": {"labels": {"a": "1"}}, "spec": {
            "resources": {"limits": {"cpu": "2"}},
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "1"}}}]}});
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"]["a"] = json!("2");
        assert_eq!(spec_change(&old, &relabelled), SpecChange::None);
        let mut resized = old.clone();
        resized["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("2");
        resized["spec"]["resources"]["limits"]["cpu"] = json!("3");
        assert_eq!(spec_change(&old, &resized), SpecChange::ResourcesOnly);
        let mut reimaged = resized.clone();
        reimaged["spec"]["containers"][0]["image"] = json!("y");
        assert_eq!(spec_change(&old, &reimaged), SpecChange::Other);
    }

    /// The direct read of an object equals `pod_from_json` of its JSON
    /// tree, for every fixture pod as an API server would send it.
    #[test]
    fn objects_read_directly_equal_pod_from_json() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/pods");
        let mut read = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            for doc in crate::pod_input::read_pods(&path).unwrap() {
                let text = serde_json::to_string(&doc.json).unwrap();
                let raw = RawValue::from_string(text).unwrap();
                let (pod, name) = read_pod("u", "request.object", &raw, None).unwrap();
                assert_eq!(pod, doc.pod, "{}", path.display());
                assert!(!name.is_empty(), "{}", path.display());
                read += 1;
            }
        }
        assert!(read >= 15, "{read}");
    }

    #[test]
    fn field_errors_read_like_the_api_server() {
        let error = FieldError {
            field: "spec.resources.requests".into(),
            reason: ErrorReason::Invalid,
            message: "must be less than or equal to memory limit of 100Gi".into(),
            bad_value: Some("120Gi".into()),
        };
        assert_eq!(
            field_error_text(&error),
            "spec.resources.requests: Invalid value: \"120Gi\": must be less than or equal to memory limit of 100Gi"
        );
        let forbidden = FieldError {
            field: "spec.resources".into(),
            reason: ErrorReason::Forbidden,
            message: "may not be set for a windows pod".into(),
            bad_value: Some("ignored".into()),
        };
        assert_eq!(
            field_error_text(&forbidden),
            "spec.resources: Forbidden: may not be set for a windows pod"
        );
        let verdict = deny_invalid("u", "p", &[error.clone(), forbidden]);
        let status = verdict.response.status.unwrap();
        assert_eq!(status.code, 422);
        assert!(
            status
                .message
                .starts_with("Pod \"p\" is invalid: [spec.resources.requests: Invalid value")
        );
        assert_eq!(
            status.details.unwrap().causes[1].reason,
            "FieldValueForbidden"
        );
    }
}
