//! `podpolicy policy diff`: what changes between two policy versions, per
//! pod and container.
//!
//! Both sides are the components' own typed answers
//! ([`crate::evaluation::Evaluations`]) for the same pods on the same node;
//! this module only lists them as (pod, container, item) = value and
//! compares the lists. It decides nothing: a value is whatever the
//! component returned, and an item one side has and the other lacks shows
//! as `-` on the side that lacks it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::evaluation::{Evaluations, PodOutcome, Verdict};
use crate::output::{node_cgroup_name, patch_json, qos_name, table_value};

/// The pod column of node-level rows (`kubepods`, the QoS tiers, ...).
pub const NODE_ROW: &str = "(node)";

/// One value that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffRow {
    /// `namespace/name`, or [`NODE_ROW`] for the node-level cgroups.
    pub pod: String,
    /// The container, or `""` for a pod-level value (for node rows: the cgroup).
    pub container: String,
    /// What the value is: a cgroup file (`cpu.weight`), `qos`,
    /// `oom_score_adj`, `verdict`, `error <field>`, `admission`, `patch <path>`.
    pub item: String,
    /// The old side's value; `None` when it has no such item.
    pub old: Option<String>,
    /// The new side's value; `None` when it has no such item.
    pub new: Option<String>,
}

/// One side of a diff, for the header.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// `embedded` or the file as given.
    pub source: String,
    /// The component's `policy-version`.
    pub policy_version: String,
    /// SHA-256 of the component.
    pub digest: String,
}

/// The whole diff.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDiff {
    /// The old side.
    pub old: Side,
    /// The new side.
    pub new: Side,
    /// Pods compared.
    pub pods: usize,
    /// Pods with at least one changed value, in input order.
    pub changed_pods: Vec<String>,
    /// Every changed value, pods in input order, then the node.
    pub changes: Vec<DiffRow>,
}

impl PolicyDiff {
    /// Compare two sides' evaluations of the same pods (same order).
    pub fn new(old: Side, new: Side, old_eval: &Evaluations, new_eval: &Evaluations) -> PolicyDiff {
        let changes = diff_evaluations(old_eval, new_eval);
        let mut changed_pods: Vec<String> = Vec::new();
        for row in &changes {
            if row.pod != NODE_ROW && !changed_pods.contains(&row.pod) {
                changed_pods.push(row.pod.clone());
            }
        }
        PolicyDiff {
            old,
            new,
            pods: old_eval.pods.len().max(new_eval.pods.len()),
            changed_pods,
            changes,
        }
    }

    /// Whether anything changes.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// A table for people.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for (label, side) in [("old", &self.old), ("new", &self.new)] {
            let _ = writeln!(
                out,
                "{label}: {} (policy {}, sha256:{})",
                side.source,
                side.policy_version,
                short(&side.digest)
            );
        }
        if self.changes.is_empty() {
            let _ = writeln!(out, "no changes in {} pod(s)", self.pods);
            return out;
        }
        let _ = writeln!(
            out,
            "{} change(s) in {} of {} pod(s)",
            self.changes.len(),
            self.changed_pods.len(),
            self.pods
        );
        out.push_str(&render_rows(&self.changes));
        out
    }
}

/// The rows as aligned columns (POD CONTAINER VALUE OLD NEW).
pub fn render_rows(rows: &[DiffRow]) -> String {
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let show = |v: &Option<String>| match v {
                Some(v) => table_value(&r.item, v),
                None => "-".to_string(),
            };
            [
                r.pod.clone(),
                if r.container.is_empty() {
                    "-".to_string()
                } else {
                    r.container.clone()
                },
                r.item.clone(),
                show(&r.old),
                show(&r.new),
            ]
        })
        .collect();
    let header = [
        "POD".to_string(),
        "CONTAINER".to_string(),
        "VALUE".to_string(),
        "OLD".to_string(),
        "NEW".to_string(),
    ];
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&cells) {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&cells) {
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
    }
    out
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// Every changed value between two evaluations of the same pods: pods are
/// paired by position (both sides read the same documents), then the node.
pub fn diff_evaluations(old: &Evaluations, new: &Evaluations) -> Vec<DiffRow> {
    let mut rows = Vec::new();
    let count = old.pods.len().max(new.pods.len());
    for i in 0..count {
        match (old.pods.get(i), new.pods.get(i)) {
            (Some(a), Some(b)) => rows.extend(diff_pods(a, b)),
            (Some(a), None) => rows.extend(compare(&a.name, values(a), Vec::new())),
            (None, Some(b)) => rows.extend(compare(&b.name, Vec::new(), values(b))),
            (None, None) => {}
        }
    }
    rows.extend(compare(NODE_ROW, node_values(old), node_values(new)));
    rows
}

/// Every changed value of one pod between two answers for it.
pub fn diff_pods(old: &PodOutcome, new: &PodOutcome) -> Vec<DiffRow> {
    compare(&new.name, values(old), values(new))
}

type Key = (String, String);

/// Merge two ordered lists of (container, item) = value into the changed
/// rows, in the old side's order, then the items only the new side has.
fn compare(pod: &str, old: Vec<(Key, String)>, new: Vec<(Key, String)>) -> Vec<DiffRow> {
    let new_map: BTreeMap<&Key, &String> = new.iter().map(|(k, v)| (k, v)).collect();
    let old_map: BTreeMap<&Key, &String> = old.iter().map(|(k, v)| (k, v)).collect();
    let mut rows = Vec::new();
    let row = |key: &Key, a: Option<&String>, b: Option<&String>| DiffRow {
        pod: pod.to_string(),
        container: key.0.clone(),
        item: key.1.clone(),
        old: a.cloned(),
        new: b.cloned(),
    };
    for (key, value) in &old {
        let other = new_map.get(key).copied();
        if other != Some(value) {
            rows.push(row(key, Some(value), other));
        }
    }
    for (key, value) in &new {
        if !old_map.contains_key(key) {
            rows.push(row(key, None, Some(value)));
        }
    }
    rows
}

/// One pod's values, keyed by (container or `""`, item), in the
/// component's order. A key that repeats (two errors on one field) gets
/// `#2`, `#3`, ... so that nothing is lost.
fn values(outcome: &PodOutcome) -> Vec<(Key, String)> {
    let mut out: Vec<(Key, String)> = Vec::new();
    let mut push = |container: &str, item: String, value: String| {
        let mut key = (container.to_string(), item.clone());
        let mut n = 1;
        while out.iter().any(|(k, _)| k == &key) {
            n += 1;
            key.1 = format!("{item} #{n}");
        }
        out.push((key, value));
    };
    match &outcome.verdict {
        Verdict::Evaluated(pod) => {
            push("", "verdict".into(), "admitted".into());
            push(
                "",
                "qos".into(),
                qos_name(pod.evaluation.qos_class).to_string(),
            );
            for op in patch_json(&pod.patch) {
                push(
                    "",
                    format!("patch {}", op.path),
                    format!("{} {}", op.op, op.value),
                );
            }
            for file in &pod.evaluation.pod_cgroup_files {
                push("", file.file.to_string(), file.value.to_string());
            }
            for container in pod.containers() {
                push(
                    &container.name,
                    "oom_score_adj".into(),
                    container.oom_score_adj.to_string(),
                );
                for file in &container.cgroup_files {
                    push(
                        &container.name,
                        file.file.to_string(),
                        file.value.to_string(),
                    );
                }
            }
            for warning in &pod.evaluation.warnings {
                push("", "warning".into(), warning.to_string());
            }
        }
        Verdict::Invalid(errors) => {
            push("", "verdict".into(), "invalid".into());
            for e in errors {
                push(
                    "",
                    format!("error {}", e.field),
                    format!("{}: {}", crate::reason_name(e.reason), e.message),
                );
            }
        }
        Verdict::NotAdmitted(refusal) => {
            push("", "verdict".into(), "not admitted".into());
            push(
                "",
                "admission".into(),
                format!("{}: {}", refusal.error.reason(), refusal.error.message),
            );
        }
    }
    out
}

fn node_values(eval: &Evaluations) -> Vec<(Key, String)> {
    let mut out = Vec::new();
    for cgroup in &eval.node.cgroups {
        for file in &cgroup.files {
            out.push((
                (
                    node_cgroup_name(cgroup.cgroup).to_string(),
                    file.file.to_string(),
                ),
                file.value.to_string(),
            ));
        }
    }
    for (i, warning) in eval.node.warnings.iter().enumerate() {
        out.push((
            (String::new(), format!("warning #{}", i + 1)),
            warning.to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(items: &[(&str, &str, &str)]) -> Vec<(Key, String)> {
        items
            .iter()
            .map(|(c, i, v)| ((c.to_string(), i.to_string()), v.to_string()))
            .collect()
    }

    #[test]
    fn compare_lists_changed_removed_and_added_values() {
        let old = kv(&[
            ("", "qos", "Burstable"),
            ("app", "cpu.weight", "79"),
            ("app", "memory.max", "max"),
        ]);
        let new = kv(&[
            ("", "qos", "Burstable"),
            ("app", "cpu.weight", "157"),
            ("app", "cpuset.cpus", "2-3"),
        ]);
        let rows = compare("ns/p", old, new);
        let show: Vec<(String, String, Option<String>, Option<String>)> = rows
            .into_iter()
            .map(|r| (r.container, r.item, r.old, r.new))
            .collect();
        assert_eq!(
            show,
            vec![
                (
                    "app".into(),
                    "cpu.weight".into(),
                    Some("79".into()),
                    Some("157".into())
                ),
                ("app".into(), "memory.max".into(), Some("max".into()), None),
                ("app".into(), "cpuset.cpus".into(), None, Some("2-3".into())),
            ]
        );
    }

    #[test]
    fn identical_lists_give_no_rows() {
        let list = kv(&[("", "qos", "Guaranteed"), ("c", "cpu.max", "max 100000")]);
        assert!(compare("p", list.clone(), list).is_empty());
    }
}
