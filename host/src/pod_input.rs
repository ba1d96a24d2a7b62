//! Reading pods: YAML or JSON, one pod, a `List`, or multi-document YAML,
//! from a file or stdin; parsed with k8s-openapi types and converted to the
//! WIT `pod` record. Errors name the file, the document and the field.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1 as core;
use serde_json::Value;

use crate::bindings as wit;

/// The largest input accepted, so a stray huge file fails fast.
pub const MAX_INPUT_BYTES: usize = 32 << 20;

/// A pod read from input, with where it came from.
#[derive(Clone, Debug)]
pub struct PodDocument {
    /// `file`, `file#2` (second YAML document) or `file#items[3]`.
    pub origin: String,
    /// The original JSON value (for patches and display).
    pub json: Value,
    /// The converted WIT pod.
    pub pod: wit::Pod,
}

/// Read `path` (`-` = stdin) into text, with the size limit.
pub fn read_input(path: &Path) -> Result<(String, String)> {
    let (origin, bytes) = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .context("reading stdin")?;
        ("<stdin>".to_string(), bytes)
    } else {
        let meta =
            std::fs::metadata(path).with_context(|| format!("{}: cannot read", path.display()))?;
        if meta.len() > MAX_INPUT_BYTES as u64 {
            bail!(
                "{}: file is {} bytes; the limit is {MAX_INPUT_BYTES}",
                path.display(),
                meta.len()
            );
        }
        (
            path.display().to_string(),
            std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?,
        )
    };
    if bytes.len() > MAX_INPUT_BYTES {
        bail!("{origin}: input is larger than {MAX_INPUT_BYTES} bytes");
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{origin}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok((origin, text))
}

/// Parse YAML or JSON text holding one or more documents into JSON values.
pub fn parse_documents(origin: &str, text: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value: Value = serde_path_to_error::deserialize(document).map_err(|e| {
            anyhow!(
                "{origin}: document {}: {}: {}",
                i + 1,
                display_path(e.path()),
                e.inner()
            )
        })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn display_path(path: &serde_path_to_error::Path) -> String {
    let text = path.to_string();
    if text == "." {
        "(top level)".to_string()
    } else {
        text
    }
}

/// Read every pod in `path`.
pub fn read_pods(path: &Path) -> Result<Vec<PodDocument>> {
    let (origin, text) = read_input(path)?;
    parse_pods(&origin, &text)
}

/// Parse every pod in `text` (a Pod, a List, or several YAML documents);
/// `origin` names the source in errors and in [`PodDocument::origin`].
pub fn parse_pods(origin: &str, text: &str) -> Result<Vec<PodDocument>> {
    let origin = origin.to_string();
    let docs = parse_documents(&origin, text)?;
    let multiple = docs.len() > 1;
    let mut pods = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let doc_origin = if multiple {
            format!("{origin}#{}", i + 1)
        } else {
            origin.clone()
        };
        match doc.get("kind").and_then(Value::as_str) {
            Some("List") | Some("PodList") => {
                let items = doc
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for (j, item) in items.into_iter().enumerate() {
                    pods.push(pod_document(format!("{doc_origin}#items[{j}]"), item)?);
                }
            }
            _ => pods.push(pod_document(doc_origin, doc)?),
        }
    }
    if pods.is_empty() {
        bail!("{origin}: no pod found");
    }
    Ok(pods)
}

fn pod_document(origin: String, json: Value) -> Result<PodDocument> {
    match json.get("kind").and_then(Value::as_str) {
        None | Some("Pod") => {}
        Some(other) => bail!("{origin}: kind is `{other}`, expected Pod"),
    }
    let pod = pod_from_json(&json).with_context(|| origin.clone())?;
    Ok(PodDocument { origin, json, pod })
}

/// Resource maps whose values may be written as bare YAML numbers (`cpu: 2`).
const QUANTITY_MAPS: &[&str] = &[
    "requests",
    "limits",
    "overhead",
    "allocatedResources",
    "capacity",
    "allocatable",
];

/// Quantities may be YAML numbers; the API accepts them, k8s-openapi wants strings.
fn stringify_quantities(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                if QUANTITY_MAPS.contains(&key.as_str())
                    && let Value::Object(entries) = child
                {
                    for entry in entries.values_mut() {
                        if let Value::Number(n) = entry {
                            *entry = Value::String(n.to_string());
                        }
                    }
                }
                stringify_quantities(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(stringify_quantities),
        _ => {}
    }
}

/// Convert one pod JSON value (full or partial) into the WIT record.
pub fn pod_from_json(json: &Value) -> Result<wit::Pod> {
    let mut json = json.clone();
    stringify_quantities(&mut json);
    // Path tracking is slow on large pods (the webhook's hot path): only a
    // pod that fails to parse pays for it, to say where.
    let pod: core::Pod = match serde::Deserialize::deserialize(&json) {
        Ok(pod) => pod,
        Err(_) => serde_path_to_error::deserialize(&json)
            .map_err(|e| anyhow!("{}: {}", display_path(e.path()), e.inner()))?,
    };
    let mut out = pod_to_wit(&pod);
    // k8s-openapi 1.36 knows the alpha claim status as a flat `resources`
    // map; newer servers send `mapping` and `overhead`. Read both shapes.
    if let Some(claims) = json.pointer("/status/nodeAllocatableResourceClaimStatuses") {
        let claims: Vec<ClaimStatusJson> =
            serde_path_to_error::deserialize(claims).map_err(|e| {
                anyhow!(
                    "status.nodeAllocatableResourceClaimStatuses{}: {}",
                    display_path(e.path()),
                    e.inner()
                )
            })?;
        out.status.node_allocatable_claim_statuses =
            claims.into_iter().map(ClaimStatusJson::into_wit).collect();
    }
    Ok(out)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimStatusJson {
    #[serde(default)]
    resource_claim_name: String,
    #[serde(default)]
    containers: Vec<String>,
    #[serde(default)]
    resources: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    mapping: Vec<ClaimMappingJson>,
    #[serde(default)]
    overhead: Vec<ClaimOverheadJson>,
}

#[derive(serde::Deserialize)]
struct ClaimMappingJson {
    name: String,
    quantity: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimOverheadJson {
    name: String,
    per_pod: Option<String>,
    per_container: Option<String>,
}

impl ClaimStatusJson {
    fn into_wit(self) -> wit::NodeAllocatableClaimStatus {
        let mut mapping: Vec<wit::ResourceQuantity> = self
            .resources
            .into_iter()
            .map(|(name, quantity)| wit::ResourceQuantity { name, quantity })
            .collect();
        mapping.extend(self.mapping.into_iter().map(|m| wit::ResourceQuantity {
            name: m.name,
            quantity: m.quantity,
        }));
        wit::NodeAllocatableClaimStatus {
            claim_name: self.resource_claim_name,
            containers: self.containers,
            mapping,
            overhead: self
                .overhead
                .into_iter()
                .map(|o| wit::ClaimOverhead {
                    name: o.name,
                    per_pod: o.per_pod,
                    per_container: o.per_container,
                })
                .collect(),
        }
    }
}

fn list(
    map: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
) -> Option<wit::ResourceList> {
    map.as_ref().map(|m| {
        m.iter()
            .map(|(name, q)| wit::ResourceQuantity {
                name: name.clone(),
                quantity: q.0.clone(),
            })
            .collect()
    })
}

fn requirements(r: &Option<core::ResourceRequirements>) -> Option<wit::ResourceRequirements> {
    r.as_ref().map(|r| wit::ResourceRequirements {
        requests: list(&r.requests),
        limits: list(&r.limits),
    })
}

fn container(c: &core::Container) -> wit::Container {
    wit::Container {
        name: c.name.clone(),
        resources: requirements(&c.resources),
        restart_policy: c.restart_policy.clone(),
        resize_policy: c
            .resize_policy
            .iter()
            .flatten()
            .map(|p| wit::ContainerResizePolicy {
                resource_name: p.resource_name.clone(),
                restart_policy: p.restart_policy.clone(),
            })
            .collect(),
    }
}

fn ephemeral(c: &core::EphemeralContainer) -> wit::Container {
    wit::Container {
        name: c.name.clone(),
        resources: requirements(&c.resources),
        restart_policy: c.restart_policy.clone(),
        resize_policy: Vec::new(),
    }
}

fn status(s: &core::ContainerStatus) -> wit::ContainerStatus {
    wit::ContainerStatus {
        name: s.name.clone(),
        allocated_resources: list(&s.allocated_resources),
        resources: requirements(&s.resources),
    }
}

/// Convert a k8s-openapi pod into the WIT record.
pub fn pod_to_wit(pod: &core::Pod) -> wit::Pod {
    let meta = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    let st = pod.status.clone().unwrap_or_default();
    wit::Pod {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        annotations: meta
            .annotations
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        spec: wit::PodSpec {
            containers: spec.containers.iter().map(container).collect(),
            init_containers: spec
                .init_containers
                .iter()
                .flatten()
                .map(container)
                .collect(),
            ephemeral_containers: spec
                .ephemeral_containers
                .iter()
                .flatten()
                .map(ephemeral)
                .collect(),
            resources: requirements(&spec.resources),
            overhead: list(&spec.overhead),
            priority: spec.priority,
            priority_class_name: spec.priority_class_name.clone(),
            os_name: spec.os.as_ref().map(|os| os.name.clone()),
            restart_policy: spec.restart_policy.clone(),
        },
        status: wit::PodStatus {
            qos_class: st.qos_class.clone(),
            resources: requirements(&st.resources),
            allocated_resources: list(&st.allocated_resources),
            container_statuses: st.container_statuses.iter().flatten().map(status).collect(),
            init_container_statuses: st
                .init_container_statuses
                .iter()
                .flatten()
                .map(status)
                .collect(),
            conditions: st
                .conditions
                .iter()
                .flatten()
                .map(|c| wit::PodCondition {
                    condition_type: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                })
                .collect(),
            node_allocatable_claim_statuses: st
                .node_allocatable_resource_claim_statuses
                .iter()
                .flatten()
                .map(|claim| wit::NodeAllocatableClaimStatus {
                    claim_name: claim.resource_claim_name.clone(),
                    containers: claim.containers.clone().unwrap_or_default(),
                    mapping: claim
                        .resources
                        .iter()
                        .map(|(name, q)| wit::ResourceQuantity {
                            name: name.clone(),
                            quantity: q.0.clone(),
                        })
                        .collect(),
                    overhead: Vec::new(),
                })
                .collect(),
        },
    }
}
