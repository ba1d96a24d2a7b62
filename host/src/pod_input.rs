//! Reading pods: YAML or JSON, one pod, a workload (its pod template), a
//! `List`, or multi-document YAML, from a file, stdin or a directory (like
//! `kubectl -f`); parsed with k8s-openapi types, unknown fields refused or
//! reported with their path, and converted to the WIT `pod` record. Errors
//! name the file, the document and the field. Static pod manifests (read
//! with a node name) get the kubelet's name, namespace, UID and annotations.

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
    /// `file`, `file#2` (second YAML document) or `file#items[3]`
    /// (`file#2#items[3]` for a List in a multi-document file).
    pub origin: String,
    /// The pod as JSON (for patches and display): the input with the
    /// defaults the reader applied (`metadata.namespace: default`, static
    /// pod name, UID and annotations); for a workload, the pod built from its
    /// template. `pod_from_json(&json)` gives [`PodDocument::pod`].
    pub json: Value,
    /// The converted WIT pod.
    pub pod: wit::Pod,
}

/// Read `path` (`-` = stdin) into text, with the size limit: only a
/// regular file (or stdin) is read, never more than [`MAX_INPUT_BYTES`]
/// (see [`crate::bounded_read`]). `what` names the input in errors (`pod
/// file`, `node file`, ...).
pub fn read_input(path: &Path, what: &str) -> Result<(String, String)> {
    let (origin, bytes) = crate::bounded_read::read_input(path, MAX_INPUT_BYTES as u64, what)?;
    let text = crate::bounded_read::into_text(Path::new(&origin), what, bytes)?;
    Ok((origin, text))
}

/// The UTF-8 byte order mark some editors write first; kubectl skips it.
const BOM: char = '\u{feff}';

/// Parse YAML or JSON text holding one or more documents into JSON values.
///
/// A leading byte order mark is skipped. Text that starts with `{` is JSON
/// (as kubectl decides): parsed by a JSON parser as a stream of objects, so
/// JSON-only syntax such as surrogate pair escapes (`"\ud83d\ude00"`) reads
/// as JSON does. If it is not valid JSON but valid YAML (a flow mapping such
/// as `{a: 1}`), the YAML reading is taken; otherwise the JSON error is
/// reported. Anything else is YAML, one value per document.
pub fn parse_documents(origin: &str, text: &str) -> Result<Vec<Value>> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    if text.trim_start().starts_with('{') {
        match parse_json_documents(origin, text) {
            Ok(docs) => return Ok(docs),
            Err(json_error) => {
                return parse_yaml_documents(origin, text).map_err(|_| json_error);
            }
        }
    }
    parse_yaml_documents(origin, text)
}

/// A stream of JSON values (`{...} {...}`), as kubectl's JSON decoder reads it.
fn parse_json_documents(origin: &str, text: &str) -> Result<Vec<Value>> {
    let mut docs = Vec::new();
    let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    for (i, value) in stream.enumerate() {
        let value = value.map_err(|e| anyhow!("{origin}: document {}: {e}", i + 1))?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn parse_yaml_documents(origin: &str, text: &str) -> Result<Vec<Value>> {
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

/// What happens to a field the Kubernetes types do not know (a typo such as
/// `resouces:`), like kubectl's `--validate=strict` / `--validate=warn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum UnknownFields {
    /// The document is refused: `strict decoding error: unknown field "spec.containers[0].resouces"`.
    #[default]
    Error,
    /// The field is ignored and reported in [`PodRead::warnings`].
    Warn,
}

impl std::fmt::Display for UnknownFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UnknownFields::Error => "error",
            UnknownFields::Warn => "warn",
        })
    }
}

/// How [`read_pods_with`] reads its input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// A directory's subdirectories too (`kubectl -f DIR -R`).
    pub recursive: bool,
    /// Unknown fields in a Pod or a workload: an error (the default) or a warning.
    pub unknown_fields: UnknownFields,
    /// Read the Pods as the static pod manifests of this node: see
    /// [`kubelet_static_pod_uid`] for what changes. Workloads are not static
    /// pods (the kubelet refuses them in its manifest directory) and are read
    /// as without a node name.
    pub node_name: Option<String>,
}

/// What [`read_pods_with`] read.
#[derive(Clone, Debug, Default)]
pub struct PodRead {
    /// The pods, in input order (directories: files sorted by name).
    pub docs: Vec<PodDocument>,
    /// One line per ignored unknown field (`<origin>: unknown field "<path>"`)
    /// when [`ReadOptions::unknown_fields`] is [`UnknownFields::Warn`].
    pub warnings: Vec<String>,
}

/// The kinds evaluated, as `kind: <Kind>` (and in Lists, `kind: List` or
/// `kind: <Kind>List`).
pub const SUPPORTED_KINDS: &[&str] = &[
    "Pod",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "CronJob",
    "PodTemplate",
];

/// Read every pod in `path` with the default [`ReadOptions`]: a file, `-`
/// (stdin) or a directory (not recursive); workloads become their pod
/// template; unknown fields are an error; no node name.
pub fn read_pods(path: &Path) -> Result<Vec<PodDocument>> {
    Ok(read_pods_with(path, &ReadOptions::default())?.docs)
}

/// Read every pod in `path`: a file, `-` (stdin), or a directory, like
/// `kubectl -f DIR`: the `.yaml`, `.yml` and `.json` files in it (other files
/// are skipped), sorted by name; with [`ReadOptions::recursive`] the
/// subdirectories too, depth first in the same order (kubectl's
/// `filepath.Walk`). A file may hold a Pod, one of the workloads in
/// [`SUPPORTED_KINDS`], a `List` of them or several YAML documents; each
/// becomes one [`PodDocument`] (see [`parse_pods_with`]). In a directory an
/// empty file is skipped, but the directory must hold at least one pod.
pub fn read_pods_with(path: &Path, options: &ReadOptions) -> Result<PodRead> {
    let mut docs = Vec::new();
    let mut warnings = Vec::new();
    visit_pods(
        &[path],
        options,
        &mut |doc| {
            docs.push(doc);
            Ok(())
        },
        &mut |warning| warnings.push(warning.to_string()),
    )?;
    Ok(PodRead { docs, warnings })
}

/// The manifest files of `dir` in kubectl's order: names sorted bytewise,
/// subdirectories walked where they sort (only when `recursive`), files kept
/// when they end in `.yaml`, `.yml` or `.json` (case-sensitive).
fn manifest_files(dir: &Path, recursive: bool, out: &mut Vec<std::path::PathBuf>) -> Result<()> {
    let mut entries = Vec::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("{}: cannot read", dir.display()))?
    {
        let entry = entry.with_context(|| format!("{}: cannot read", dir.display()))?;
        let file_type = entry
            .file_type()
            .with_context(|| format!("{}: cannot read", entry.path().display()))?;
        entries.push((entry.file_name(), file_type));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, file_type) in entries {
        let path = dir.join(&name);
        if file_type.is_dir() {
            if recursive {
                manifest_files(&path, recursive, out)?;
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Parse every pod in `text` with the default [`ReadOptions`]; see
/// [`parse_pods_with`].
pub fn parse_pods(origin: &str, text: &str) -> Result<Vec<PodDocument>> {
    Ok(parse_pods_with(origin, text, &ReadOptions::default())?.docs)
}

/// Parse every pod in `text`: a Pod, a workload (Deployment, ReplicaSet,
/// StatefulSet, DaemonSet, Job, CronJob, PodTemplate), a `List` of them, or
/// several YAML documents mixing them. `origin` names the source in errors,
/// in [`PodDocument::origin`] (`file`, `file#2`, `file#2#items[0]`) and, for
/// static pods, in the UID (the manifest path, see [`kubelet_static_pod_uid`]).
///
/// Every document is checked against the k8s-openapi types of its kind:
/// unknown fields are reported with their path ([`UnknownFields`]); `status`
/// belongs to the types and is accepted. A Pod without `metadata.namespace`
/// is in `default` (what the API server and the kubelet do), in
/// [`PodDocument::json`] too.
///
/// A workload becomes one pod from its pod template
/// (`spec.template`; CronJob: `spec.jobTemplate.spec.template`; PodTemplate:
/// `template`), see [`workload_pod_uid`] for its metadata.
pub fn parse_pods_with(origin: &str, text: &str, options: &ReadOptions) -> Result<PodRead> {
    let mut read = PodRead::default();
    if parse_into(origin, text, options, &mut read)? == 0 {
        bail!("{origin}: no pod found");
    }
    Ok(read)
}

/// Parse `text` into `read`; returns how many pods it held.
fn parse_into(
    origin: &str,
    text: &str,
    options: &ReadOptions,
    read: &mut PodRead,
) -> Result<usize> {
    let before = read.docs.len();
    visit_text(origin, text, options, &mut |one| {
        read.docs.extend(one.docs);
        read.warnings.extend(one.warnings);
        Ok(())
    })?;
    Ok(read.docs.len() - before)
}

/// Parse `text` one document at a time: `each` gets the pods (and the
/// unknown-field warnings) of each document before the next is parsed, so
/// no more than one document's pods are held (what [`visit_pods`] streams).
/// Returns how many pods `text` held.
fn visit_text(
    origin: &str,
    text: &str,
    options: &ReadOptions,
    each: &mut dyn FnMut(PodRead) -> Result<()>,
) -> Result<usize> {
    let mut count = 0;
    visit_documents(origin, text, &mut |index, multiple, doc| {
        let doc_origin = if multiple {
            format!("{origin}#{}", index + 1)
        } else {
            origin.to_string()
        };
        let mut one = PodRead::default();
        let kind = doc.get("kind").and_then(Value::as_str).map(str::to_string);
        match kind.as_deref() {
            Some(list) if list.ends_with("List") => {
                // `kubectl get ... -o yaml` writes `kind: List`; typed lists
                // (`PodList`, `DeploymentList`) may leave out the items' kind.
                let item_kind = list.strip_suffix("List").filter(|k| !k.is_empty());
                let items = match doc {
                    Value::Object(mut fields) => match fields.remove("items") {
                        Some(Value::Array(items)) => items,
                        _ => Vec::new(),
                    },
                    _ => Vec::new(),
                };
                for (j, item) in items.into_iter().enumerate() {
                    let item_origin = format!("{doc_origin}#items[{j}]");
                    read_object(item_origin, origin, item, item_kind, options, &mut one)?;
                }
            }
            _ => read_object(doc_origin, origin, doc, None, options, &mut one)?,
        }
        count += one.docs.len();
        each(one)
    })?;
    Ok(count)
}

/// [`parse_documents`] one document at a time: `each` gets the index of
/// each non-null document, whether the text holds more than one, and the
/// document. YAML is parsed lazily, one document ahead (to know whether
/// there is more than one); JSON is checked whole first without building
/// values (so a text that is not JSON still falls back to YAML as
/// [`parse_documents`] does), then read lazily.
fn visit_documents(
    origin: &str,
    text: &str,
    each: &mut dyn FnMut(usize, bool, Value) -> Result<()>,
) -> Result<()> {
    let text = text.strip_prefix(BOM).unwrap_or(text);
    let mut values: Box<dyn Iterator<Item = Result<Value>> + '_> =
        if text.trim_start().starts_with('{') {
            let is_json = serde_json::Deserializer::from_str(text)
                .into_iter::<serde::de::IgnoredAny>()
                .all(|doc| doc.is_ok());
            if is_json {
                Box::new(
                    serde_json::Deserializer::from_str(text)
                        .into_iter::<Value>()
                        .enumerate()
                        .map(move |(i, value)| {
                            value.map_err(|e| anyhow!("{origin}: document {}: {e}", i + 1))
                        }),
                )
            } else {
                // Not JSON: the YAML reading, or the JSON error (eagerly,
                // as `parse_documents`; a flow mapping is a rare input).
                Box::new(parse_documents(origin, text)?.into_iter().map(Ok))
            }
        } else {
            Box::new(serde_yaml_ng::Deserializer::from_str(text).enumerate().map(
                move |(i, document)| {
                    serde_path_to_error::deserialize(document).map_err(|e| {
                        anyhow!(
                            "{origin}: document {}: {}: {}",
                            i + 1,
                            display_path(e.path()),
                            e.inner()
                        )
                    })
                },
            ))
        };
    let mut next = || -> Result<Option<Value>> {
        for value in values.by_ref() {
            let value = value?;
            if !value.is_null() {
                return Ok(Some(value));
            }
        }
        Ok(None)
    };
    // Whether the text holds more than one document decides the origins,
    // so the second is read before the first is handed on; after that,
    // each document is handed on before the next is parsed.
    let Some(first) = next()? else {
        return Ok(());
    };
    let second = next()?;
    let multiple = second.is_some();
    each(0, multiple, first)?;
    let Some(second) = second else {
        return Ok(());
    };
    each(1, multiple, second)?;
    let mut index = 2;
    while let Some(value) = next()? {
        each(index, multiple, value)?;
        index += 1;
    }
    Ok(())
}

/// Every pod in `paths`, in order, handed to `each` as it is read: the
/// streaming form of [`read_pods_with`] over several inputs (files, `-`,
/// directories), for commands that keep no pod after it is handled. An
/// input is read whole (it is bounded, [`MAX_INPUT_BYTES`]) but its
/// documents are parsed one at a time, so memory does not grow with the
/// pod count. Each input must hold a pod, as for [`read_pods_with`]; an
/// error in a later document comes after the earlier pods were handed on.
/// Warnings go to `warn` as they are found.
pub fn visit_pods(
    paths: &[&Path],
    options: &ReadOptions,
    each: &mut dyn FnMut(PodDocument) -> Result<()>,
    warn: &mut dyn FnMut(&str),
) -> Result<usize> {
    let mut total = 0;
    let mut hand_on = |one: PodRead| -> Result<()> {
        for warning in &one.warnings {
            warn(warning);
        }
        for doc in one.docs {
            each(doc)?;
        }
        Ok(())
    };
    for path in paths {
        let is_dir = *path != Path::new("-")
            && std::fs::metadata(path)
                .with_context(|| format!("{}: cannot read", path.display()))?
                .is_dir();
        if !is_dir {
            let (origin, text) = read_input(path, "pod file")?;
            let count = visit_text(&origin, &text, options, &mut hand_on)?;
            if count == 0 {
                bail!("{origin}: no pod found");
            }
            total += count;
            continue;
        }
        let mut files = Vec::new();
        manifest_files(path, options.recursive, &mut files)?;
        let mut count = 0;
        for file in &files {
            let (origin, text) = read_input(file, "pod file")?;
            count += visit_text(&origin, &text, options, &mut hand_on)?;
        }
        if count == 0 {
            bail!(
                "{}: no pod found in the directory's .yaml, .yml and .json files{}",
                path.display(),
                if options.recursive {
                    ""
                } else {
                    " (subdirectories are read only when recursive)"
                }
            );
        }
        total += count;
    }
    Ok(total)
}

/// Where each workload kind keeps its pod template (JSON pointer).
fn template_pointer(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" => "/spec/template",
        "CronJob" => "/spec/jobTemplate/spec/template",
        "PodTemplate" => "/template",
        _ => return None,
    })
}

/// One object (a document or a List item) into `read`.
fn read_object(
    origin: String,
    source: &str,
    json: Value,
    default_kind: Option<&str>,
    options: &ReadOptions,
    read: &mut PodRead,
) -> Result<()> {
    let kind = match json.get("kind") {
        Some(Value::String(kind)) => kind.clone(),
        // A non-string kind is reported by the typed parse.
        Some(_) | None => default_kind.unwrap_or("Pod").to_string(),
    };
    use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch};
    let unknown = match kind.as_str() {
        "Pod" => return read_pod(origin, source, json, options, read),
        "Deployment" => unknown_of::<apps::Deployment>(&json),
        "ReplicaSet" => unknown_of::<apps::ReplicaSet>(&json),
        "StatefulSet" => unknown_of::<apps::StatefulSet>(&json),
        "DaemonSet" => unknown_of::<apps::DaemonSet>(&json),
        "Job" => unknown_of::<batch::Job>(&json),
        "CronJob" => unknown_of::<batch::CronJob>(&json),
        "PodTemplate" => unknown_of::<core::PodTemplate>(&json),
        other => bail!(
            "{origin}: kind is `{other}`; supported kinds: {} (and Lists of them)",
            SUPPORTED_KINDS.join(", ")
        ),
    }
    .with_context(|| origin.clone())?;
    unknown_fields(&origin, unknown, options.unknown_fields, read)?;
    let pod_json = workload_pod_json(&kind, &json).with_context(|| origin.clone())?;
    let pod = pod_from_json(&pod_json).with_context(|| origin.clone())?;
    read.docs.push(PodDocument {
        origin,
        json: pod_json,
        pod,
    });
    Ok(())
}

/// The pod a workload's template describes.
///
/// - `metadata.name`: the workload's name itself (`web`, not the
///   `web-<hash>-<suffix>` a controller would generate: the report names the
///   workload; `generateName` when the workload has no name);
/// - `metadata.namespace`: the workload's, `default` without one;
/// - `metadata.uid`: the template's when it has one (unusual), else
///   [`workload_pod_uid`] of kind, namespace and name;
/// - labels, annotations (and any other template metadata) and `spec`: the
///   template's; no `status`.
fn workload_pod_json(kind: &str, workload: &Value) -> Result<Value> {
    let pointer = template_pointer(kind).expect("a workload kind");
    let path = pointer.trim_start_matches('/').replace('/', ".");
    let template = match workload.pointer(pointer) {
        Some(Value::Object(template)) => template,
        _ => bail!("{path}: a {kind} needs a pod template"),
    };
    let meta = workload.get("metadata");
    let text = |key: &str| {
        meta.and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = text("name").or(text("generateName")).unwrap_or_default();
    let namespace = text("namespace").unwrap_or("default");
    let mut pod_meta = match template.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    };
    pod_meta.remove("generateName");
    pod_meta.insert("name".into(), name.into());
    pod_meta.insert("namespace".into(), namespace.into());
    if pod_meta
        .get("uid")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        pod_meta.insert("uid".into(), workload_pod_uid(kind, namespace, name).into());
    }
    let mut pod = serde_json::Map::new();
    pod.insert("apiVersion".into(), "v1".into());
    pod.insert("kind".into(), "Pod".into());
    pod.insert("metadata".into(), Value::Object(pod_meta));
    if let Some(spec) = template.get("spec") {
        pod.insert("spec".into(), spec.clone());
    }
    Ok(Value::Object(pod))
}

/// The UID given to the pod of a workload without a template UID: stable
/// across runs and edits, and distinct per kind, namespace and name. The
/// first 16 bytes of SHA-256 over `<kind>/<namespace>/<name>`, written as an
/// RFC 9562 version-8 (custom) UUID: `xxxxxxxx-xxxx-8xxx-Yxxx-xxxxxxxxxxxx`
/// with `Y` in `8..b`. Real pods of a workload get random UIDs from the API
/// server; this one only has to name the pod's cgroup consistently.
pub fn workload_pod_uid(kind: &str, namespace: &str, name: &str) -> String {
    let hex = crate::runtime::digest(format!("{kind}/{namespace}/{name}").as_bytes());
    let mut chars: Vec<char> = hex[..32].chars().collect();
    chars[12] = '8';
    let variant = chars[16].to_digit(16).unwrap_or(0);
    chars[16] = char::from_digit((variant & 0x3) | 0x8, 16).unwrap_or('8');
    let hex: String = chars.into_iter().collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A Pod document: defaults, static pod rules, the strict parse.
fn read_pod(
    origin: String,
    source: &str,
    mut json: Value,
    options: &ReadOptions,
    read: &mut PodRead,
) -> Result<()> {
    if let Some(node_name) = &options.node_name {
        static_pod_defaults(&mut json, node_name, source).with_context(|| origin.clone())?;
    }
    // A metadata that is not a map is left to the typed parse to report.
    if let Some(meta) = metadata_mut(&mut json)
        && meta
            .get("namespace")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        meta.insert("namespace".into(), "default".into());
    }
    let mut stringified = json.clone();
    stringify_quantities(&mut stringified);
    let (typed, unknown) = strict::<core::Pod>(&stringified).with_context(|| origin.clone())?;
    unknown_fields(&origin, unknown, options.unknown_fields, read)?;
    let pod = finish_pod(&stringified, &typed).with_context(|| origin.clone())?;
    read.docs.push(PodDocument { origin, json, pod });
    Ok(())
}

/// `metadata` as a map, created when absent; `None` when it is not a map.
fn metadata_mut(json: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    let object = json.as_object_mut()?;
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if meta.is_null() {
        *meta = Value::Object(serde_json::Map::new());
    }
    meta.as_object_mut()
}

/// What the kubelet's `applyDefaults` (`pkg/kubelet/config/common.go`) and
/// its config merge do to a Pod read from a manifest file on `node_name`,
/// as far as the policy can see it:
///
/// - without a `metadata.uid`: [`kubelet_static_pod_uid`] of the document
///   as read (before any of these changes);
/// - `metadata.name` becomes `<name>-<node name in lower case>` (a name is
///   required, as the kubelet requires one);
/// - `metadata.namespace` `default` when absent;
/// - annotations `kubernetes.io/config.hash: <uid>` and
///   `kubernetes.io/config.source: file` (the latter makes the pod a static,
///   hence critical, pod for the policy: upstream `IsStaticPod`).
///
/// Not applied, as they change nothing the policy computes:
/// `spec.nodeName`, the `NoExecute` toleration, `status.phase: Pending`, and
/// `kubernetes.io/config.seen` (a timestamp).
fn static_pod_defaults(json: &mut Value, node_name: &str, source: &str) -> Result<()> {
    let mut as_read = json.clone();
    stringify_quantities(&mut as_read);
    let Some(meta) = metadata_mut(json) else {
        return Ok(());
    };
    let name = match meta.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            bail!("metadata.name: a static pod needs a name (the kubelet refuses the manifest)")
        }
        // Not a string: the typed parse reports it.
        Some(_) => return Ok(()),
    };
    let uid = match meta.get("uid") {
        Some(Value::String(uid)) if !uid.is_empty() => uid.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => {
            let uid = kubelet_static_pod_uid(&as_read, node_name, source);
            meta.insert("uid".into(), uid.clone().into());
            uid
        }
        Some(_) => return Ok(()),
    };
    meta.insert(
        "name".into(),
        format!("{name}-{}", node_name.to_lowercase()).into(),
    );
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if annotations.is_null() {
        *annotations = Value::Object(serde_json::Map::new());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert("kubernetes.io/config.hash".into(), uid.into());
        annotations.insert("kubernetes.io/config.source".into(), "file".into());
    }
    Ok(())
}

/// The UID of a static pod read without one, after the kubelet's rule
/// (`applyDefaults` in `pkg/kubelet/config/common.go`, upstream master):
///
/// ```text
/// hasher := fnv.New128a()            // md5.New() up to Kubernetes 1.34
/// hash.DeepHashObject(hasher, pod)   // resets, then writes dump.ForHash(pod)
/// fmt.Fprintf(hasher, "host:%s", nodeName)
/// fmt.Fprintf(hasher, "file:%s", source)   // the manifest's path
/// pod.UID = hex.EncodeToString(hasher.Sum(nil))
/// ```
///
/// Here: FNV-1a 128-bit over the pod's canonical JSON, then
/// `host:<node_name>`, then `file:<source>`, written as 32 lower-case hex
/// digits, the kubelet's form (no dashes).
///
/// The one difference: the kubelet hashes `dump.ForHash(pod)`, a go-spew
/// `%#v` dump of its internal Go `core.Pod` struct *after* v1 defaulting
/// (every field in Go declaration order with Go type names, nil pointers,
/// `resource.Quantity` internals), which depends on the Kubernetes version's
/// struct layout and cannot be rebuilt outside Go. This hashes the document
/// as read instead: its JSON with object keys sorted bytewise, no spaces,
/// serde_json's escaping, quantities written as bare numbers turned into
/// strings (`cpu: 1` and `cpu: "1"` hash alike, as in the kubelet). So the
/// UID has the kubelet's form and properties (a stable function of the
/// manifest's content, the node name and the manifest path: the same file
/// gives the same UID on every run; editing it, moving it or another node
/// gives another), but not the kubelet's value. Also unlike the kubelet:
/// writing a field at its default value (`imagePullPolicy`, `restartPolicy`,
/// ...) changes this UID but not the kubelet's, formatting, comments and key
/// order change neither, and a kubelet upgrade that changes `core.Pod`
/// changes the kubelet's UIDs but not these.
pub fn kubelet_static_pod_uid(pod: &Value, node_name: &str, source: &str) -> String {
    let mut text = String::new();
    canonical_json(pod, &mut text);
    let mut hash = Fnv128a::new();
    hash.write(text.as_bytes());
    hash.write(format!("host:{node_name}").as_bytes());
    hash.write(format!("file:{source}").as_bytes());
    hash.hex()
}

/// JSON with object keys sorted bytewise and no whitespace.
fn canonical_json(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, child)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical_json(child, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, child) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(child, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// FNV-1a, 128 bits (Go's `hash/fnv.New128a`; `Sum` is big-endian).
struct Fnv128a(u128);

impl Fnv128a {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;

    fn new() -> Self {
        Fnv128a(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u128::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }
}

/// Deserialize `json` as `T` and collect the paths of the fields `T` does
/// not know (`spec.containers[0].resouces`). Type errors name their path.
fn strict<T: serde::de::DeserializeOwned>(json: &Value) -> Result<(T, Vec<String>)> {
    let mut unknown = Vec::new();
    let parsed: std::result::Result<T, _> =
        serde_ignored::deserialize(json, |path| unknown.push(ignored_path(&path)));
    match parsed {
        Ok(value) => Ok((value, unknown)),
        Err(error) => match serde_path_to_error::deserialize::<_, T>(json) {
            Err(e) => Err(anyhow!("{}: {}", display_path(e.path()), e.inner())),
            Ok(_) => Err(anyhow!("{error}")),
        },
    }
}

/// The unknown fields of `json` as a `T` (quantities may be bare numbers).
fn unknown_of<T: serde::de::DeserializeOwned>(json: &Value) -> Result<Vec<String>> {
    let mut json = json.clone();
    stringify_quantities(&mut json);
    strict::<T>(&json).map(|(_, unknown)| unknown)
}

/// `serde_ignored`'s path in the API's style: `a.b[0].c`.
fn ignored_path(path: &serde_ignored::Path) -> String {
    fn walk(path: &serde_ignored::Path, out: &mut String) {
        use serde_ignored::Path as P;
        match path {
            P::Root => {}
            P::Seq { parent, index } => {
                walk(parent, out);
                out.push_str(&format!("[{index}]"));
            }
            P::Map { parent, key } => {
                walk(parent, out);
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            P::Some { parent } | P::NewtypeStruct { parent } | P::NewtypeVariant { parent } => {
                walk(parent, out)
            }
        }
    }
    let mut out = String::new();
    walk(path, &mut out);
    out
}

/// Fields k8s-openapi 1.36 does not know but the host reads itself: the
/// newer `mapping` and `overhead` of a node-allocatable claim status.
fn read_by_the_host(path: &str) -> bool {
    path.strip_prefix("status.nodeAllocatableResourceClaimStatuses[")
        .and_then(|rest| rest.split_once("]."))
        .is_some_and(|(index, field)| {
            index.bytes().all(|b| b.is_ascii_digit()) && matches!(field, "mapping" | "overhead")
        })
}

/// Refuse or report the unknown fields of one document.
fn unknown_fields(
    origin: &str,
    unknown: Vec<String>,
    mode: UnknownFields,
    read: &mut PodRead,
) -> Result<()> {
    let unknown: Vec<String> = unknown
        .into_iter()
        .filter(|path| !read_by_the_host(path))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    match mode {
        UnknownFields::Error => bail!(
            "{origin}: strict decoding error: {}",
            unknown
                .iter()
                .map(|path| format!("unknown field \"{path}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        UnknownFields::Warn => {
            read.warnings.extend(
                unknown
                    .iter()
                    .map(|path| format!("{origin}: unknown field \"{path}\"")),
            );
            Ok(())
        }
    }
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
/// Lenient and fast (the webhook's path): unknown fields are ignored and no
/// default is applied (a pod without a namespace keeps an empty one); the
/// strict checks belong to the file input ([`read_pods_with`]).
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
    finish_pod(&json, &pod)
}

/// The WIT record of `pod`, parsed from `json` (quantities stringified).
fn finish_pod(json: &Value, pod: &core::Pod) -> Result<wit::Pod> {
    let mut out = pod_to_wit(pod);
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
            node_name: spec.node_name.clone(),
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

#[cfg(test)]
mod tests {
    use super::{ReadOptions, parse_documents, parse_yaml_documents, visit_text};

    fn pod_yaml(name: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: x\n"
        )
    }

    /// Streams `text` and returns the origins handed on, in order, and the
    /// error that ended the stream, if any.
    fn streamed(text: &str) -> (Vec<String>, Option<String>) {
        let mut origins = Vec::new();
        let result = visit_text("t.yaml", text, &ReadOptions::default(), &mut |one| {
            origins.extend(one.docs.into_iter().map(|d| d.origin));
            Ok(())
        });
        (origins, result.err().map(|e| format!("{e:#}")))
    }

    /// Streaming hands on the pods `parse_pods` reads, with the same
    /// origins, for YAML documents (a null one skipped, a List), a JSON
    /// stream and a single document.
    #[test]
    fn streamed_documents_are_the_parsed_ones() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: l1}\n  spec: {containers: [{name: c, image: x}]}\n- kind: Pod\n  metadata: {name: l2}\n  spec: {containers: [{name: c, image: x}]}\n";
        let json = |n: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{n}"}},"spec":{{"containers":[{{"name":"c","image":"x"}}]}}}}"#
            )
        };
        for text in [
            format!("{}---\n---\n{list}---\n{}", pod_yaml("a"), pod_yaml("b")),
            format!("{}\n{}", json("j1"), json("j2")),
            pod_yaml("single"),
        ] {
            let parsed: Vec<String> = super::parse_pods("t.yaml", &text)
                .unwrap()
                .into_iter()
                .map(|d| d.origin)
                .collect();
            let (origins, error) = streamed(&text);
            assert_eq!(error, None);
            assert_eq!(origins, parsed, "{text}");
            assert!(!origins.is_empty());
        }
        let (origins, _) = streamed(&format!("{}---\n{list}", pod_yaml("a")));
        assert_eq!(
            origins,
            ["t.yaml#1", "t.yaml#2#items[0]", "t.yaml#2#items[1]"]
        );
    }

    /// A bad document ends the stream with its error after the pods before
    /// it were handed on (what `explain` prints before the error).
    #[test]
    fn a_bad_document_ends_the_stream_after_the_earlier_pods() {
        let text = format!("{}---\n{}---\nkind: [\n", pod_yaml("a"), pod_yaml("b"));
        let (origins, error) = streamed(&text);
        assert_eq!(origins, ["t.yaml#1", "t.yaml#2"]);
        let error = error.expect("the third document is refused");
        assert!(error.contains("t.yaml: document 3"), "{error}");
        assert!(super::parse_pods("t.yaml", &text).is_err());
    }

    /// Why JSON is not read through the YAML parser: JSON is YAML 1.2, but
    /// the YAML parser refuses a surrogate pair escape (YAML escapes name
    /// code points, and a lone surrogate is none), which JSON encoders such
    /// as Python's `json.dumps` write for every character outside the BMP.
    #[test]
    fn the_yaml_parser_refuses_json_surrogate_pairs_and_the_json_parser_reads_them() {
        let text = r#"{"note": "\ud83d\ude00"}"#;
        assert!(parse_yaml_documents("t", text).is_err());
        let docs = parse_documents("t", text).unwrap();
        assert_eq!(docs, [serde_json::json!({"note": "\u{1f600}"})]);
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        for text in ["\u{feff}{\"a\": 1}", "\u{feff}a: 1\n"] {
            assert_eq!(
                parse_documents("t", text).unwrap(),
                [serde_json::json!({"a": 1})],
                "{text:?}"
            );
        }
    }
}
