//! Rendering `explain` results: a table for people, or exact JSON / YAML.
//!
//! The [`Explanation`] struct is the stable output schema (camelCase keys,
//! cgroup files as `file -> value` maps). It is filled from the component's
//! results only.

use crate::bindings::KubeletName as _;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::bindings::{
    ContainerKind, FieldError, NodeCgroup, NodeCgroups, PatchOperation, PatchValue, PodEvaluation,
    QosClass, ResourceAmount,
};
use crate::reason_name;

/// The `apiVersion` of every JSON / YAML document podpolicy prints; each
/// also names its `kind` (`ExplainReport`, `ApplyReport`, ...), and
/// `schemas/output/<kind>.schema.json` describes it.
pub const API_VERSION: &str = "podpolicy.io/v1alpha1";

/// `value` as an output document: `apiVersion` and `kind` first.
pub fn document(kind: &str, value: &impl Serialize) -> serde_json::Result<serde_json::Value> {
    let mut out = serde_json::Map::new();
    out.insert("apiVersion".into(), API_VERSION.into());
    out.insert("kind".into(), kind.into());
    match serde_json::to_value(value)? {
        serde_json::Value::Object(fields) => out.extend(fields),
        other => {
            out.insert("value".into(), other);
        }
    }
    Ok(serde_json::Value::Object(out))
}

/// Bytes for people: `1073741824` -> `1Gi`, `1536` -> `1.5Ki`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut unit = 0;
    let mut value = bytes as f64 / 1024.0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let text = format!("{value:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text}{}", UNITS[unit])
}

/// A cgroup file value for a table: byte counts also human-readable
/// (`1073741824 (1Gi)`), everything else as it is.
pub fn table_value(file: &str, value: &str) -> String {
    let bytes_file =
        file.starts_with("memory.") && file != "memory.oom.group" || file.starts_with("hugetlb.");
    match value.parse::<u64>() {
        Ok(bytes) if bytes_file && bytes >= 1024 => format!("{value} ({})", human_bytes(bytes)),
        _ => value.to_string(),
    }
}

/// One field error, for output.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorOut {
    /// Field path.
    pub field: String,
    /// `Invalid`, `Forbidden`, ...
    pub reason: String,
    /// Message.
    pub message: String,
    /// Offending value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bad_value: Option<String>,
}

impl From<&FieldError> for ErrorOut {
    fn from(e: &FieldError) -> Self {
        ErrorOut {
            field: e.field.clone(),
            reason: reason_name(e.reason).to_string(),
            message: e.message.clone(),
            bad_value: e.bad_value.clone(),
        }
    }
}

/// One RFC 6902 operation, for output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PatchOut {
    /// `add` or `replace`.
    pub op: String,
    /// JSON Pointer.
    pub path: String,
    /// JSON value.
    pub value: serde_json::Value,
}

/// Convert WIT patch operations to JSON Patch values.
pub fn patch_json(ops: &[PatchOperation]) -> Vec<PatchOut> {
    let list = |l: &[crate::bindings::ResourceQuantity]| {
        serde_json::Value::Object(
            l.iter()
                .map(|q| {
                    (
                        q.name.clone(),
                        serde_json::Value::String(q.quantity.clone()),
                    )
                })
                .collect(),
        )
    };
    ops.iter()
        .map(|op| PatchOut {
            op: op.op.kubelet_name().to_string(),
            path: op.path.clone(),
            value: match &op.value {
                PatchValue::Quantity(q) => serde_json::Value::String(q.clone()),
                PatchValue::ResourceList(l) => list(l),
                PatchValue::Requirements(r) => {
                    let mut m = serde_json::Map::new();
                    if let Some(l) = &r.limits {
                        m.insert("limits".into(), list(l));
                    }
                    if let Some(l) = &r.requests {
                        m.insert("requests".into(), list(l));
                    }
                    serde_json::Value::Object(m)
                }
            },
        })
        .collect()
}

/// One container's values.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerOut {
    /// Name.
    pub name: String,
    /// `init`, `sidecar`, `regular`, `ephemeral`.
    pub kind: String,
    /// oom_score_adj.
    pub oom_score_adj: i32,
    /// cgroup v2 files of the container cgroup.
    pub cgroup: BTreeMap<String, String>,
}

/// Everything `explain` reports for one pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// Where the pod came from.
    pub source: String,
    /// Validation errors; when non-empty nothing else is computed.
    pub errors: Vec<ErrorOut>,
    /// The defaulting patch the API server would apply.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub defaulting_patch: Vec<PatchOut>,
    /// QoS class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    /// Effective pod requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, String>>,
    /// Effective pod limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, String>>,
    /// cgroup v2 files of the pod cgroup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_cgroup: Option<BTreeMap<String, String>>,
    /// Per container.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerOut>,
    /// Notes from the policy (e.g. an old kernel for Memory QoS).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// An in-place resize not actuated yet: the values above are the
    /// allocated ones; this shows the desired ones next to them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_resize: Option<PendingResizeOut>,
    /// `explain --why`: every value with the rule that produced it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<WhyOut>,
}

/// One value and why it is what it is (the component's `explain-values`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhyOut {
    /// The container; absent for the pod cgroup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The cgroup file, or `oom_score_adj`.
    pub file: String,
    /// The value.
    pub value: String,
    /// The rule and its inputs.
    pub reason: String,
}

/// Desired next to allocated resources.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesChangeOut {
    /// Container name; absent for pod-level resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The spec's resources.
    pub desired: RequirementsOut,
    /// What the node applies meanwhile.
    pub allocated: RequirementsOut,
}

/// `requests` and `limits` as quantity maps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RequirementsOut {
    /// Requests.
    pub requests: BTreeMap<String, String>,
    /// Limits.
    pub limits: BTreeMap<String, String>,
}

impl From<&crate::bindings::ResourceRequirements> for RequirementsOut {
    fn from(r: &crate::bindings::ResourceRequirements) -> Self {
        let map = |l: &Option<Vec<crate::bindings::ResourceQuantity>>| {
            l.iter()
                .flatten()
                .map(|q| (q.name.clone(), q.quantity.clone()))
                .collect()
        };
        RequirementsOut {
            requests: map(&r.requests),
            limits: map(&r.limits),
        }
    }
}

/// A resize that is not actuated.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingResizeOut {
    /// `Deferred`, `Infeasible`, `Pending` (a `PodResizePending` reason the
    /// kubelet does not set) or `InProgress`: the contract's state as the policy prints it.
    pub state: String,
    /// What differs.
    pub changes: Vec<ResourcesChangeOut>,
}

/// Node-level values for the explained pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeOut {
    /// Node name.
    pub name: String,
    /// Files per node-level cgroup the kubelet writes itself (`kubepods`,
    /// `burstable`, `besteffort`, `kube-reserved`, `system-reserved`).
    pub cgroups: BTreeMap<String, BTreeMap<String, String>>,
    /// Notes from the policy.
    pub warnings: Vec<String>,
    /// Notes on the node inputs (kubelet fields the policy does not use,
    /// assumed defaults).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The whole `explain` output: every pod, then the node.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Per pod, in input order.
    pub pods: Vec<Explanation>,
    /// Node-level values over the valid pods.
    pub node: NodeOut,
}

/// The name of a node-level cgroup in the report (and `apply`'s owners).
pub fn node_cgroup_name(cgroup: NodeCgroup) -> &'static str {
    match cgroup {
        NodeCgroup::Kubepods => "kubepods",
        NodeCgroup::Burstable => "burstable",
        NodeCgroup::Besteffort => "besteffort",
        NodeCgroup::KubeReserved => "kube-reserved",
        NodeCgroup::SystemReserved => "system-reserved",
    }
}

impl Report {
    /// Assemble the report.
    pub fn new(pods: Vec<Explanation>, node_name: &str, node: &NodeCgroups) -> Report {
        Report {
            pods,
            node: NodeOut::new(node_name, node),
        }
    }

    /// Whether any pod was rejected.
    pub fn any_rejected(&self) -> bool {
        self.pods.iter().any(|p| !p.errors.is_empty())
    }

    /// A plain-text rendering for a terminal.
    pub fn to_table(&self) -> String {
        let mut out = self
            .pods
            .iter()
            .map(Explanation::to_table)
            .collect::<Vec<_>>()
            .join("\n");
        out.push_str(&self.node.to_table());
        out
    }
}

impl NodeOut {
    /// The node part of a report: the node-level cgroups' files, without notes.
    pub fn new(node_name: &str, node: &NodeCgroups) -> NodeOut {
        NodeOut {
            name: node_name.to_string(),
            cgroups: node
                .cgroups
                .iter()
                .map(|c| {
                    let files = c
                        .files
                        .iter()
                        .map(|f| (f.file.to_string(), f.value.to_string()))
                        .collect();
                    (node_cgroup_name(c.cgroup).to_string(), files)
                })
                .collect(),
            warnings: node.warnings.iter().map(ToString::to_string).collect(),
            notes: Vec::new(),
        }
    }

    /// The node part of [`Report::to_table`] (empty when there is nothing
    /// to show), starting with the blank line that ends the pods.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        if !self.cgroups.is_empty() || !self.warnings.is_empty() {
            let _ = writeln!(
                out,
                "\nNODE {}",
                if self.name.is_empty() {
                    "-"
                } else {
                    &self.name
                }
            );
            for (cgroup, files) in &self.cgroups {
                let files = files
                    .iter()
                    .map(|(k, v)| format!("{k}={}", table_value(k, v)))
                    .collect::<Vec<_>>()
                    .join(" ");
                let _ = writeln!(out, "  {cgroup:<16} {files}");
            }
            for w in &self.warnings {
                let _ = writeln!(out, "  warning: {w}");
            }
        }
        out
    }
}

/// How [`ReportWriter`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportFormat {
    /// [`Report::to_table`].
    Table,
    /// The `ExplainReport` document, pretty JSON.
    Json,
    /// The `ExplainReport` document, YAML.
    Yaml,
}

/// Writes an `explain` report as its pods come, so that no pod is kept
/// once it is written: each pod, then the node (whose values need every
/// pod). The text is [`Report::to_table`]'s for a table; a document is the
/// `ExplainReport` (the same values as [`document`] of the [`Report`]), with
/// its keys in the order `apiVersion`, `kind`, `pods`, `node`, and each pod's
/// and the node's keys sorted, as [`document`] writes them.
pub struct ReportWriter<W: std::io::Write> {
    out: W,
    format: ReportFormat,
    pods: usize,
    rejected: bool,
}

/// Indent every line of `text` but the first by `indent`.
fn indent_following_lines(text: &str, indent: &str) -> String {
    text.replace('\n', &format!("\n{indent}"))
}

impl<W: std::io::Write> ReportWriter<W> {
    /// A writer of a report in `format` to `out`; nothing is written yet.
    pub fn new(out: W, format: ReportFormat) -> ReportWriter<W> {
        ReportWriter {
            out,
            format,
            pods: 0,
            rejected: false,
        }
    }

    fn header(&mut self) -> anyhow::Result<()> {
        match self.format {
            ReportFormat::Table => {}
            ReportFormat::Json => write!(
                self.out,
                "{{\n  \"apiVersion\": {},\n  \"kind\": \"ExplainReport\",\n  \"pods\": [",
                serde_json::to_string(API_VERSION)?
            )?,
            ReportFormat::Yaml => {
                let head: BTreeMap<&str, &str> =
                    [("apiVersion", API_VERSION), ("kind", "ExplainReport")].into();
                self.out
                    .write_all(serde_yaml_ng::to_string(&head)?.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Write one pod's explanation.
    pub fn pod(&mut self, pod: &Explanation) -> anyhow::Result<()> {
        if self.pods == 0 {
            self.header()?;
        }
        self.rejected |= !pod.errors.is_empty();
        match self.format {
            ReportFormat::Table => {
                if self.pods > 0 {
                    self.out.write_all(b"\n")?;
                }
                self.out.write_all(pod.to_table().as_bytes())?;
            }
            ReportFormat::Json => {
                let text = serde_json::to_string_pretty(&serde_json::to_value(pod)?)?;
                let separator = if self.pods == 0 { "\n    " } else { ",\n    " };
                write!(
                    self.out,
                    "{separator}{}",
                    indent_following_lines(&text, "    ")
                )?;
            }
            ReportFormat::Yaml => {
                if self.pods == 0 {
                    self.out.write_all(b"pods:\n")?;
                }
                let item = [serde_json::to_value(pod)?];
                self.out
                    .write_all(serde_yaml_ng::to_string(&item)?.as_bytes())?;
            }
        }
        self.pods += 1;
        Ok(())
    }

    /// Write the node's values and end the report; whether any pod was
    /// rejected.
    pub fn finish(mut self, node: &NodeOut) -> anyhow::Result<bool> {
        if self.pods == 0 {
            self.header()?;
        }
        match self.format {
            ReportFormat::Table => self.out.write_all(node.to_table().as_bytes())?,
            ReportFormat::Json => {
                let close = if self.pods == 0 { "]" } else { "\n  ]" };
                let text = serde_json::to_string_pretty(&serde_json::to_value(node)?)?;
                writeln!(
                    self.out,
                    "{close},\n  \"node\": {}\n}}",
                    indent_following_lines(&text, "  ")
                )?;
            }
            ReportFormat::Yaml => {
                if self.pods == 0 {
                    self.out.write_all(b"pods: []\n")?;
                }
                let node: BTreeMap<&str, serde_json::Value> =
                    [("node", serde_json::to_value(node)?)].into();
                self.out
                    .write_all(serde_yaml_ng::to_string(&node)?.as_bytes())?;
            }
        }
        self.out.flush()?;
        Ok(self.rejected)
    }
}

fn amounts(list: &[ResourceAmount]) -> BTreeMap<String, String> {
    list.iter()
        .map(|a| (a.name.clone(), a.quantity.clone()))
        .collect()
}

/// The Kubernetes spelling of a QoS class.
pub fn qos_name(class: QosClass) -> &'static str {
    match class {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    }
}

fn kind_name(kind: ContainerKind) -> &'static str {
    match kind {
        ContainerKind::Init => "init",
        ContainerKind::Sidecar => "sidecar",
        ContainerKind::Regular => "regular",
        ContainerKind::Ephemeral => "ephemeral",
    }
}

impl Explanation {
    /// An explanation of a pod that failed validation.
    pub fn rejected(pod: String, source: String, errors: &[FieldError]) -> Explanation {
        Explanation {
            pod,
            source,
            errors: errors.iter().map(ErrorOut::from).collect(),
            defaulting_patch: Vec::new(),
            qos_class: None,
            requests: None,
            limits: None,
            pod_cgroup: None,
            containers: Vec::new(),
            warnings: Vec::new(),
            pending_resize: None,
            why: Vec::new(),
        }
    }

    /// An explanation of an evaluated pod.
    pub fn evaluated(
        pod: String,
        source: String,
        patch: &[PatchOperation],
        eval: &PodEvaluation,
    ) -> Explanation {
        Explanation {
            pod,
            source,
            errors: Vec::new(),
            defaulting_patch: patch_json(patch),
            qos_class: Some(qos_name(eval.qos_class).to_string()),
            requests: Some(amounts(&eval.effective.requests)),
            limits: Some(amounts(&eval.effective.limits)),
            pod_cgroup: Some(
                eval.pod_cgroup_files
                    .iter()
                    .map(|f| (f.file.to_string(), f.value.to_string()))
                    .collect(),
            ),
            containers: eval
                .containers
                .iter()
                .map(|c| ContainerOut {
                    name: c.name.clone(),
                    kind: kind_name(c.kind).to_string(),
                    oom_score_adj: c.oom_score_adj,
                    cgroup: c
                        .cgroup_files
                        .iter()
                        .map(|f| (f.file.to_string(), f.value.to_string()))
                        .collect(),
                })
                .collect(),
            why: Vec::new(),
            warnings: eval.warnings.iter().map(ToString::to_string).collect(),
            pending_resize: eval.pending_resize.as_ref().map(|p| PendingResizeOut {
                state: p.state.to_string(),
                changes: p
                    .changes
                    .iter()
                    .map(|c| ResourcesChangeOut {
                        container: c.container.clone(),
                        desired: (&c.desired).into(),
                        allocated: (&c.allocated).into(),
                    })
                    .collect(),
            }),
        }
    }

    /// Put the resource managers' placement files over the evaluated ones
    /// (a file in both takes the placement's value; see `placement-files`).
    pub fn place(&mut self, files: &crate::bindings::PlacementFiles) {
        let over = |map: &mut BTreeMap<String, String>, files: &[crate::bindings::CgroupFile]| {
            for f in files {
                map.insert(f.file.to_string(), f.value.to_string());
            }
        };
        over(
            self.pod_cgroup.get_or_insert_with(BTreeMap::new),
            &files.pod,
        );
        for c in &files.containers {
            if let Some(container) = self.containers.iter_mut().find(|x| x.name == c.name) {
                over(&mut container.cgroup, &c.files);
            }
        }
    }

    /// A plain-text rendering for a terminal.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "POD {}  ({})", self.pod, self.source);
        if !self.errors.is_empty() {
            let _ = writeln!(out, "  INVALID:");
            for e in &self.errors {
                let value = e
                    .bad_value
                    .as_deref()
                    .map_or(String::new(), |v| format!(", value {v:?}"));
                if e.field.is_empty() {
                    let _ = writeln!(out, "    {} ({}{value})", e.message, e.reason);
                } else {
                    let _ = writeln!(out, "    {}: {} ({}{value})", e.field, e.message, e.reason);
                }
            }
            self.why_table(&mut out);
            return out;
        }
        if let Some(q) = &self.qos_class {
            let _ = writeln!(out, "  QoS class      {q}");
        }
        let map = |m: &Option<BTreeMap<String, String>>| m.as_ref().map_or_else(String::new, pairs);
        let _ = writeln!(out, "  requests       {}", map(&self.requests));
        let _ = writeln!(out, "  limits         {}", map(&self.limits));
        if !self.defaulting_patch.is_empty() {
            let _ = writeln!(
                out,
                "  defaulting     {} patch operation(s)",
                self.defaulting_patch.len()
            );
            for op in &self.defaulting_patch {
                let _ = writeln!(out, "    {} {} {}", op.op, op.path, op.value);
            }
        }
        if let Some(files) = &self.pod_cgroup {
            let _ = writeln!(out, "  pod cgroup");
            for (file, value) in files {
                let _ = writeln!(out, "    {file:<22} {}", table_value(file, value));
            }
        }
        let _ = writeln!(
            out,
            "  {:<24} {:<8} {:>13}  cgroup",
            "CONTAINER", "KIND", "OOM_SCORE_ADJ"
        );
        for c in &self.containers {
            let files = c
                .cgroup
                .iter()
                .map(|(k, v)| format!("{k}={}", table_value(k, v)))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                out,
                "  {:<24} {:<8} {:>13}  {files}",
                c.name, c.kind, c.oom_score_adj
            );
        }
        if let Some(pending) = &self.pending_resize {
            let _ = writeln!(
                out,
                "  resize {}: values above are the allocated resources",
                pending.state
            );
            let list = pairs;
            for change in &pending.changes {
                let who = change.container.as_deref().unwrap_or("(pod level)");
                let _ = writeln!(
                    out,
                    "    {who:<22} desired requests {} limits {}",
                    list(&change.desired.requests),
                    list(&change.desired.limits)
                );
                let _ = writeln!(
                    out,
                    "    {:<22} allocated requests {} limits {}",
                    "",
                    list(&change.allocated.requests),
                    list(&change.allocated.limits)
                );
            }
        }
        self.why_table(&mut out);
        for w in &self.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        out
    }

    /// The `--why` rows, one line each.
    fn why_table(&self, out: &mut String) {
        if self.why.is_empty() {
            return;
        }
        let _ = writeln!(out, "  why");
        for w in &self.why {
            let owner = w.container.as_deref().unwrap_or("(pod)");
            let _ = writeln!(
                out,
                "    {owner} {} {}: {}",
                w.file,
                table_value(&w.file, &w.value),
                w.reason
            );
        }
    }
}

/// `k=v k=v` for a table, `-` for an empty map.
fn pairs(m: &BTreeMap<String, String>) -> String {
    if m.is_empty() {
        return "-".to_string();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::ErrorReason;

    fn explanation(name: &str, rejected: bool) -> Explanation {
        let errors = if rejected {
            vec![FieldError {
                field: "spec.containers[0].resources.requests[cpu]".into(),
                reason: ErrorReason::Invalid,
                message: "must be a \"quantity\"\nsecond line".into(),
                bad_value: Some("bogus: [x]".into()),
            }]
        } else {
            Vec::new()
        };
        let mut e = Explanation::rejected(name.into(), format!("{name}.yaml"), &errors);
        if !rejected {
            e.warnings = vec!["a warning: with a colon".into()];
        }
        e
    }

    fn node(cgroups: bool) -> NodeOut {
        NodeOut {
            name: "node-1".into(),
            cgroups: if cgroups {
                [(
                    "burstable".to_string(),
                    [("cpu.weight".to_string(), "39".to_string())].into(),
                )]
                .into()
            } else {
                BTreeMap::new()
            },
            warnings: vec!["kernel 5.4".into()],
            notes: vec!["a note".into()],
        }
    }

    fn written(format: ReportFormat, report: &Report) -> (String, bool) {
        let mut out = Vec::new();
        let mut writer = ReportWriter::new(&mut out, format);
        for pod in &report.pods {
            writer.pod(pod).unwrap();
        }
        let rejected = writer.finish(&report.node).unwrap();
        (String::from_utf8(out).unwrap(), rejected)
    }

    #[test]
    fn the_streamed_report_is_the_whole_report_in_every_format() {
        for pods in [
            vec![],
            vec![explanation("default/a", false)],
            vec![
                explanation("default/a", false),
                explanation("default/b", true),
            ],
        ] {
            for with_cgroups in [false, true] {
                let report = Report {
                    pods: pods.clone(),
                    node: node(with_cgroups),
                };
                let whole = document("ExplainReport", &report).unwrap();

                let (table, rejected) = written(ReportFormat::Table, &report);
                assert_eq!(table, report.to_table());
                assert_eq!(rejected, report.any_rejected());

                let (json, _) = written(ReportFormat::Json, &report);
                let parsed: serde_json::Value = serde_json::from_str(&json)
                    .unwrap_or_else(|e| panic!("{e}: not JSON:\n{json}"));
                assert_eq!(parsed, whole, "{json}");
                // `pods` before `node`: the node's values need every pod.
                let keys: Vec<&str> = json
                    .lines()
                    .filter(|l| l.starts_with("  \""))
                    .map(|l| l.trim_start().split('"').nth(1).unwrap())
                    .collect();
                assert_eq!(keys, ["apiVersion", "kind", "pods", "node"]);
                let (yaml, _) = written(ReportFormat::Yaml, &report);
                let parsed: serde_json::Value = serde_yaml_ng::from_str(&yaml)
                    .unwrap_or_else(|e| panic!("{e}: not YAML:\n{yaml}"));
                assert_eq!(parsed, whole, "{yaml}");
            }
        }
    }
}
