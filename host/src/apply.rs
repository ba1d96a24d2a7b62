//! `podpolicy apply`: one shot of a node agent. Pods are validated,
//! defaulted and evaluated through the component exactly as `explain` does
//! ([`crate::explain_all`]); if the policy rejects any pod nothing is
//! written. Otherwise the component's cgroup files (pods, containers and
//! the node-level Memory QoS cgroups) and the `oom_score_adj` of given PIDs
//! are checked for sanity, planned against what the tree holds
//! ([`cgroupfs::plan`]) and written, or only printed with `--dry-run`.
//!
//! The host adds no value of its own: the sanity checks only refuse output
//! that no kernel interface accepts or that contradicts itself (a file
//! outside the allow-list, a non-numeric limit, memory.max below
//! memory.min), so a broken policy module cannot write nonsense.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::bindings::{
    CgroupFile, CgroupVersion, ContainerKind, NodeCgroup, NodeSettings, QosClass,
};
use crate::cgroupfs::{self, CgroupPath, CgroupRoot, CgroupValues, Change, Current, FileValue};
use crate::evaluation::{EvaluatedPod, Evaluations};
use crate::output::Report;
use crate::pod_input::PodDocument;
use crate::runtime::PolicyRuntime;

/// `--pid CONTAINER=PID`: a process of a container whose `oom_score_adj`
/// is written. `CONTAINER` is a container name, `POD/CONTAINER` or
/// `NAMESPACE/POD/CONTAINER`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidAssignment {
    /// The container as written.
    pub container: String,
    /// The process id.
    pub pid: u32,
}

impl FromStr for PidAssignment {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        let (container, pid) = text
            .rsplit_once('=')
            .ok_or_else(|| format!("`{text}` is not CONTAINER=PID"))?;
        let pid: u32 = pid
            .parse()
            .ok()
            .filter(|p| *p > 0 && *p <= i32::MAX as u32)
            .ok_or_else(|| format!("`{pid}` is not a process id"))?;
        if container.is_empty() || container.split('/').count() > 3 {
            return Err(format!(
                "`{container}` is not CONTAINER, POD/CONTAINER or NAMESPACE/POD/CONTAINER"
            ));
        }
        Ok(PidAssignment {
            container: container.to_string(),
            pid,
        })
    }
}

/// What `apply` needs besides the pods and the node.
#[derive(Clone, Debug)]
pub struct ApplyOptions {
    /// The cgroup v2 root (a cgroup2 mount, or a stand-in directory).
    pub cgroup_root: PathBuf,
    /// Where `<pid>/oom_score_adj` lives (`/proc` on a real node).
    pub proc_root: PathBuf,
    /// Plan and print only.
    pub dry_run: bool,
    /// Processes whose `oom_score_adj` is written.
    pub pids: Vec<PidAssignment>,
    /// The kubelet's `kubeReservedCgroup`, needed when the policy writes to it.
    pub kube_reserved_cgroup: Option<String>,
    /// The kubelet's `systemReservedCgroup`, needed when the policy writes to it.
    pub system_reserved_cgroup: Option<String>,
}

/// The result of `apply`.
#[derive(Debug)]
pub enum ApplyOutcome {
    /// The policy rejected at least one pod; nothing was planned or written.
    Rejected(Report),
    /// The plan, and what was applied.
    Planned(ApplyReport),
}

/// One planned change, for output.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeOut {
    /// Whose change it is: `namespace/pod`, `node`, or `--pid`.
    pub owner: String,
    /// `planned` (dry run), `applied`, `failed` (this change stopped its
    /// owner's writes), or `notRun` (after a failure of the same owner).
    pub status: ChangeStatus,
    /// `mkdir` or `write`.
    pub action: String,
    /// Absolute path of the directory or file.
    pub path: String,
    /// The file's current text; `null` when it is absent (or for `mkdir`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// Why the current text could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_error: Option<String>,
    /// The text written (`write` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<String>,
}

/// What happened to one planned change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ChangeStatus {
    /// A dry run: not written.
    Planned,
    /// Written.
    Applied,
    /// Its write failed; its owner's later changes did not run.
    Failed,
    /// Not run because an earlier change of the same owner failed.
    NotRun,
}

impl ChangeOut {
    fn new(owner: &str, change: &Change, status: ChangeStatus) -> Self {
        let (action, path, old, old_error, new) = match change {
            Change::Mkdir { dir } => ("mkdir", dir.display().to_string(), None, None, None),
            Change::Write { path, old, new, .. } => (
                "write",
                path.display().to_string(),
                match old {
                    Current::Value(v) => Some(v.clone()),
                    _ => None,
                },
                match old {
                    Current::Unreadable(e) => Some(e.clone()),
                    _ => None,
                },
                Some(new.clone()),
            ),
        };
        ChangeOut {
            owner: owner.to_string(),
            status,
            action: action.into(),
            path,
            old,
            old_error,
            new,
        }
    }
}

/// What happened to one owner's cgroups (a pod, the node, the `--pid`s).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerResult {
    /// `namespace/pod`, `node`, or `--pid`.
    pub owner: String,
    /// The pod's `metadata.uid` (pods only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Whether every file of the owner holds its value (false on a dry run
    /// with changes planned).
    pub applied: bool,
    /// Why not, when its planning or a write failed: nothing of it was
    /// written after the failure, and the other owners went on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A cgroup `apply` manages and whose it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CgroupOut {
    /// `namespace/pod`, `namespace/pod/container`, or `node/<cgroup>`.
    pub owner: String,
    /// Absolute directory.
    pub path: String,
}

/// What `apply` planned and did.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyReport {
    /// Whether this was a dry run (nothing written).
    pub dry_run: bool,
    /// The absolute cgroup root.
    pub cgroup_root: String,
    /// The cgroups the pods and the node use.
    pub cgroups: Vec<CgroupOut>,
    /// Every planned change, in write order, with what happened to it.
    pub changes: Vec<ChangeOut>,
    /// How many changes were applied.
    pub applied: usize,
    /// Per owner (the node, each pod, the `--pid`s): applied or failed, with why.
    pub results: Vec<OwnerResult>,
    /// The failures, one line per failed owner (also in `results`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Notes from the policy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ApplyReport {
    /// A plain-text rendering: the diff, marked by what happened.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let total = self.changes.len();
        let line = |c: &ChangeOut| match c.action.as_str() {
            "mkdir" => format!("mkdir  {}", c.path),
            _ => {
                let old = match (&c.old, &c.old_error) {
                    (Some(v), _) if v.is_empty() => "(empty)".to_string(),
                    (Some(v), _) => v.escape_debug().to_string(),
                    (None, Some(e)) => format!("(unreadable: {e})"),
                    (None, None) => "(absent)".to_string(),
                };
                let new = c.new.as_deref().unwrap_or_default().escape_debug();
                format!("write  {}  {old} -> {new}", c.path)
            }
        };
        if total == 0 && self.error.is_none() {
            let _ = writeln!(
                out,
                "no changes: the cgroups under {} already hold every value",
                self.cgroup_root
            );
        } else if self.dry_run {
            let _ = writeln!(
                out,
                "dry run: {total} change(s) planned under {}, nothing written",
                self.cgroup_root
            );
            for c in &self.changes {
                let _ = writeln!(out, "  {}", line(c));
            }
            if let Some(error) = &self.error {
                let _ = writeln!(out, "error: {error}");
            }
        } else if let Some(error) = &self.error {
            let _ = writeln!(
                out,
                "applied {} of {total} change(s); some owners failed:",
                self.applied
            );
            for c in &self.changes {
                let mark = match c.status {
                    ChangeStatus::Applied | ChangeStatus::Planned => "  ",
                    ChangeStatus::Failed => "! ",
                    ChangeStatus::NotRun => "- ",
                };
                let _ = writeln!(out, "{mark}{}", line(c));
            }
            let _ = writeln!(out, "error: {error}");
        } else {
            let _ = writeln!(out, "applied {total} change(s) under {}", self.cgroup_root);
            for c in &self.changes {
                let _ = writeln!(out, "  {}", line(c));
            }
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }
}

/// Interface files the component may ask for, and what their values look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Grammar {
    /// A byte or count limit: a `u64` or `max`.
    BytesOrMax,
    /// `cpu.max`: `max|QUOTA [PERIOD]`.
    CpuMax,
    /// An integer in a range.
    Range(i64, i64),
    /// A `u64`.
    Unsigned,
    /// A CPU or node list: `0-3,8`.
    List,
    /// One of a few words.
    Word(&'static [&'static str]),
    /// Free text of printable ASCII (io.max, io.weight lines).
    Text,
}

/// The allow-list: cgroup v2 interface files a policy may set. `cgroup.*`
/// files are not among them; the host manages `cgroup.subtree_control`.
fn grammar(file: &str) -> Option<Grammar> {
    use Grammar::*;
    let grammar = match file {
        "memory.min" | "memory.low" | "memory.high" | "memory.max" | "memory.swap.high"
        | "memory.swap.max" | "memory.zswap.max" | "pids.max" => BytesOrMax,
        "cpu.max" => CpuMax,
        "cpu.max.burst" => Unsigned,
        "cpu.weight" => Range(1, 10_000),
        "cpu.weight.nice" => Range(-20, 19),
        "cpu.idle" | "memory.oom.group" | "memory.zswap.writeback" => Range(0, 1),
        "cpuset.cpus" | "cpuset.mems" | "cpuset.cpus.exclusive" => List,
        "cpuset.cpus.partition" => Word(&["member", "root", "isolated"]),
        "io.weight" | "io.max" | "io.bfq.weight" => Text,
        _ => {
            let size = file
                .strip_prefix("hugetlb.")
                .and_then(|rest| {
                    rest.strip_suffix(".rsvd.max")
                        .or_else(|| rest.strip_suffix(".max"))
                })
                .and_then(|size| {
                    size.strip_suffix("KB")
                        .or_else(|| size.strip_suffix("MB"))
                        .or_else(|| size.strip_suffix("GB"))
                })?;
            if size.is_empty() || !size.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            BytesOrMax
        }
    };
    Some(grammar)
}

fn is_u64(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && text.parse::<u64>().is_ok()
}

fn value_ok(grammar: Grammar, value: &str) -> bool {
    match grammar {
        Grammar::BytesOrMax => value == "max" || is_u64(value),
        Grammar::CpuMax => {
            let parts: Vec<&str> = value.split(' ').collect();
            match parts.as_slice() {
                [quota] => *quota == "max" || is_u64(quota),
                [quota, period] => (*quota == "max" || is_u64(quota)) && is_u64(period),
                _ => false,
            }
        }
        Grammar::Range(low, high) => value
            .parse::<i64>()
            .is_ok_and(|v| (low..=high).contains(&v) && v.to_string() == value),
        Grammar::Unsigned => is_u64(value),
        Grammar::List => value.split(',').all(|part| match part.split_once('-') {
            Some((a, b)) => is_u64(a) && is_u64(b) && a.parse::<u64>().ok() <= b.parse().ok(),
            None => is_u64(part),
        }),
        Grammar::Word(words) => words.contains(&value),
        Grammar::Text => {
            !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        }
    }
}

/// Check the component's files for one cgroup before anything is written:
/// every file is on the allow-list, every value has its file's form and
/// fits one write, no file appears twice, and memory.min / memory.low are
/// not above memory.max (nor memory.min above memory.high). `owner` names
/// the cgroup in errors.
pub fn check_files(owner: &str, files: &[FileValue]) -> Result<()> {
    let mut seen = BTreeMap::new();
    for f in files {
        let Some(grammar) = grammar(&f.file) else {
            bail!(
                "{owner}: the policy asks to write `{}`, which is not a cgroup v2 interface file podpolicy writes",
                f.file.escape_debug()
            );
        };
        if f.value.len() > 4096 || !value_ok(grammar, &f.value) {
            bail!(
                "{owner}: the policy's value for {} is malformed: `{}`",
                f.file,
                f.value.escape_debug()
            );
        }
        if seen.insert(f.file.as_str(), f.value.as_str()).is_some() {
            bail!("{owner}: the policy gives {} twice", f.file);
        }
    }
    // `max` (or absent) is unlimited; values are u64 by now.
    let bytes = |file: &str| seen.get(file).and_then(|v| v.parse::<u64>().ok());
    for (low, high) in [
        ("memory.min", "memory.max"),
        ("memory.low", "memory.max"),
        ("memory.min", "memory.high"),
    ] {
        if let (Some(l), Some(h)) = (bytes(low), bytes(high))
            && h < l
        {
            bail!("{owner}: the policy sets {high} {h} below {low} {l}");
        }
    }
    Ok(())
}

fn file_values(files: &[CgroupFile]) -> Vec<FileValue> {
    files
        .iter()
        .map(|f| FileValue {
            file: f.file.to_string(),
            value: f.value.to_string(),
        })
        .collect()
}

/// Check the component's answer for one admitted pod before anything is
/// written: a QoS class, one result per container of the pod (each name
/// once, none invented), safe cgroup names and sane files.
pub fn check_pod_output(doc: &PodDocument, pod: &EvaluatedPod, node: &NodeSettings) -> Result<()> {
    pod_cgroups(doc, pod, node).map(|_| ())
}

/// The cgroups of one evaluated pod: the pod's, then each container's.
struct PodCgroups {
    pod: CgroupValues,
    containers: Vec<(String, CgroupValues)>,
}

fn pod_cgroups(
    doc: &PodDocument,
    evaluated: &EvaluatedPod,
    node: &NodeSettings,
) -> Result<PodCgroups> {
    let evaluation = &evaluated.evaluation;
    let pod_path = cgroupfs::pod(node.cgroup_driver, evaluation.qos_class, &doc.pod.uid)?;
    let pod = CgroupValues {
        path: pod_path.clone(),
        files: file_values(&evaluation.pod_cgroup_files),
    };
    check_files(&format!("pod cgroup {pod_path}"), &pod.files)?;
    let spec = &doc.pod.spec;
    let expected: BTreeSet<&str> = spec
        .containers
        .iter()
        .chain(&spec.init_containers)
        .chain(&spec.ephemeral_containers)
        .map(|c| c.name.as_str())
        .collect();
    let answered: BTreeSet<&str> = evaluation
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    if answered.len() != evaluation.containers.len() || answered != expected {
        bail!(
            "the policy answered for containers [{}], the pod has [{}]",
            answered.into_iter().collect::<Vec<_>>().join(", "),
            expected.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    // Field paths for the names: each container list is counted on its own.
    let (mut n_init, mut n_regular, mut n_ephemeral) = (0, 0, 0);
    let mut containers = Vec::new();
    for c in &evaluation.containers {
        let counter = match c.kind {
            ContainerKind::Init | ContainerKind::Sidecar => ("initContainers", &mut n_init),
            ContainerKind::Ephemeral => ("ephemeralContainers", &mut n_ephemeral),
            ContainerKind::Regular => ("containers", &mut n_regular),
        };
        let field = format!("spec.{}[{}].name", counter.0, counter.1);
        *counter.1 += 1;
        let path = cgroupfs::container(&pod_path, &field, &c.name)?;
        let values = CgroupValues {
            path: path.clone(),
            files: file_values(&c.cgroup_files),
        };
        check_files(&format!("container cgroup {path}"), &values.files)?;
        containers.push((c.name.clone(), values));
    }
    Ok(PodCgroups { pod, containers })
}

/// Where a node-level cgroup the policy sets values on lives; `name` is
/// how the report names it.
fn node_cgroup(
    cgroup: NodeCgroup,
    name: &str,
    node: &NodeSettings,
    options: &ApplyOptions,
) -> Result<CgroupPath> {
    let reserved = |flag: &str, value: &Option<String>| -> Result<CgroupPath> {
        match value {
            Some(text) => Ok(CgroupPath::parse(flag, text)?),
            None => bail!(
                "the policy sets values on the {name} cgroup (enforceNodeAllocatable names it); give its path with {flag}"
            ),
        }
    };
    Ok(match cgroup {
        NodeCgroup::Kubepods => cgroupfs::kubepods(node.cgroup_driver),
        NodeCgroup::Burstable => cgroupfs::qos_tier(node.cgroup_driver, QosClass::Burstable),
        NodeCgroup::Besteffort => cgroupfs::qos_tier(node.cgroup_driver, QosClass::BestEffort),
        NodeCgroup::KubeReserved => {
            reserved("--kube-reserved-cgroup", &options.kube_reserved_cgroup)?
        }
        NodeCgroup::SystemReserved => {
            reserved("--system-reserved-cgroup", &options.system_reserved_cgroup)?
        }
    })
}

/// Find the container a `--pid` names; returns (pod index, container index).
fn find_container(
    assignment: &PidAssignment,
    docs: &[PodDocument],
    pods: &[&EvaluatedPod],
) -> Result<(usize, usize)> {
    let parts: Vec<&str> = assignment.container.split('/').collect();
    let mut found = Vec::new();
    for (pod_idx, (doc, pod)) in docs.iter().zip(pods).enumerate() {
        let (namespace, name) = (doc.pod.namespace.as_str(), doc.pod.name.as_str());
        for (container_idx, c) in pod.containers().iter().enumerate() {
            let matches = match parts.as_slice() {
                [container] => c.name == *container,
                [pod_name, container] => name == *pod_name && c.name == *container,
                [ns, pod_name, container] => {
                    namespace == *ns && name == *pod_name && c.name == *container
                }
                _ => false,
            };
            if matches {
                found.push((pod_idx, container_idx));
            }
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => bail!(
            "--pid {}={}: no container `{}` in the pods",
            assignment.container,
            assignment.pid,
            assignment.container
        ),
        _ => bail!(
            "--pid {}={}: `{}` names containers in several pods; write POD/CONTAINER or NAMESPACE/POD/CONTAINER",
            assignment.container,
            assignment.pid,
            assignment.container
        ),
    }
}

/// Evaluate `docs` on `node` and make the cgroup tree match: the `apply`
/// command. Errors (exit 2) leave the tree untouched, except a failed write,
/// which is reported in [`ApplyReport::error`] with the applied prefix.
///
/// On a node whose resource managers place pods, `placement` admits the
/// pods (see [`crate::explain_all`]) and, with `checkpoint_dir` (locked by
/// the caller before it read the state), the new manager state is saved
/// there first, so `apply` writes exactly the
/// cpusets and quotas the agent and `admit` write for the same state.
pub fn apply_pods(
    policy: &PolicyRuntime,
    docs: &[PodDocument],
    node: &NodeSettings,
    options: &ApplyOptions,
    mut placement: Option<&mut crate::Placement>,
    checkpoint_dir: Option<&crate::state_dir::StateDir>,
) -> Result<ApplyOutcome> {
    if node.cgroup_version != CgroupVersion::V2 {
        bail!("apply writes cgroup v2 only; the node settings say cgroupVersion v1");
    }
    if node.cgroups_per_qos == Some(false) {
        bail!("apply needs cgroupsPerQOS (the kubelet creates no pod cgroups without it)");
    }
    let before = placement.as_ref().map(|p| p.state.clone());
    let evaluations = crate::explain_all(policy, docs, node, placement.as_deref_mut())?;
    if evaluations.any_rejected() {
        return Ok(ApplyOutcome::Rejected(evaluations.report(&node.name)));
    }
    // The managers' new state is checkpointed before any cpuset is written
    // (as `admit` and the agent do); a dry run saves nothing.
    if let (Some(placement), Some(dir), false) = (&placement, checkpoint_dir, options.dry_run)
        && before.as_ref() != Some(&placement.state)
    {
        crate::checkpoint::save(dir, &placement.state).context("saving the manager checkpoints")?;
    }
    apply_owners(docs, &evaluations, node, options, &[], true).map(ApplyOutcome::Planned)
}

/// Put `extra` files (e.g. the resource managers' cpusets) over the
/// policy's: a file given in both takes the extra value.
fn merge_extra(desired: &mut Vec<CgroupValues>, extra: &[CgroupValues]) {
    for values in extra {
        match desired.iter_mut().find(|d| d.path == values.path) {
            Some(target) => {
                for file in &values.files {
                    match target.files.iter_mut().find(|f| f.file == file.file) {
                        Some(existing) => existing.value = file.value.clone(),
                        None => target.files.push(file.clone()),
                    }
                }
            }
            None => desired.push(values.clone()),
        }
    }
}

/// One owner's desired cgroups: the node's, one pod's, or the `--pid`
/// files. Owners are planned and written one after the other, each on its
/// own: a failure stops only its owner.
struct Unit {
    owner: String,
    uid: Option<String>,
    desired: Vec<CgroupValues>,
    oom: Vec<Change>,
    /// Why the owner cannot be planned at all (nothing of it is written).
    error: Option<String>,
}

impl Unit {
    fn new(owner: String, uid: Option<String>) -> Unit {
        Unit {
            owner,
            uid,
            desired: Vec::new(),
            oom: Vec::new(),
            error: None,
        }
    }

    fn failed(owner: String, uid: Option<String>, error: String) -> Unit {
        Unit {
            error: Some(error),
            ..Unit::new(owner, uid)
        }
    }
}

/// The cgroups of every evaluated pod, by pod uid, as [`apply_explained`]
/// would write them (pod cgroup first): what the agent records as its own
/// before it writes. A pod that cannot be planned is left out.
pub fn pod_cgroup_paths(
    docs: &[PodDocument],
    evaluations: &Evaluations,
    node: &NodeSettings,
) -> BTreeMap<String, Vec<CgroupPath>> {
    docs.iter()
        .zip(&evaluations.pods)
        .filter_map(|(doc, outcome)| {
            let pod = pod_cgroups(doc, outcome.evaluated()?, node).ok()?;
            let mut paths = vec![pod.pod.path];
            paths.extend(pod.containers.into_iter().map(|(_, v)| v.path));
            Some((doc.pod.uid.clone(), paths))
        })
        .collect()
}

/// Make the cgroup tree match an already evaluated set of pods (every pod
/// in `evaluations` admitted, in the order of `docs`), with `extra` files over
/// the policy's (see [`merge_extra`]): what `apply` and the agent share.
///
/// The node's cgroups, each pod's and the `--pid` files are planned and
/// written one owner after the other, each on its own: a pod that cannot be
/// planned (a name the kernel refuses, a file the sanity checks refuse, a
/// cgroup another pod maps to as well, a symlink on its path) or whose write
/// fails is reported in [`ApplyReport::results`] with why, and the others
/// are still written. Errors that concern the whole run (the root, the
/// cgroup version) are returned.
pub fn apply_explained(
    docs: &[PodDocument],
    evaluations: &Evaluations,
    node: &NodeSettings,
    options: &ApplyOptions,
    extra: &[CgroupValues],
) -> Result<ApplyReport> {
    apply_owners(docs, evaluations, node, options, extra, false)
}

/// [`apply_explained`]; with `refuse_input_errors`, an owner that cannot be
/// planned from its input (a refused name or file, a cgroup two pods map
/// to) stops the whole run before any write: the one-shot `apply` command
/// writes all of a correct input or nothing, while failures at write time
/// still stop only their owner.
fn apply_owners(
    docs: &[PodDocument],
    evaluations: &Evaluations,
    node: &NodeSettings,
    options: &ApplyOptions,
    extra: &[CgroupValues],
    refuse_input_errors: bool,
) -> Result<ApplyReport> {
    if node.cgroup_version != CgroupVersion::V2 {
        bail!("apply writes cgroup v2 only; the node settings say cgroupVersion v1");
    }
    let root = CgroupRoot::open(&options.cgroup_root)?;
    let Some(pods) = evaluations
        .pods
        .iter()
        .map(|p| p.evaluated())
        .collect::<Option<Vec<&EvaluatedPod>>>()
    else {
        bail!("internal: apply_explained was given a rejected pod");
    };
    if pods.len() != docs.len() {
        bail!(
            "internal: apply_explained was given {} pods for {} documents",
            pods.len(),
            docs.len()
        );
    }
    let mut cgroups = Vec::new();
    let mut warnings = Vec::new();
    let mut units: Vec<Unit> = Vec::new();
    let owner_dir = |path: &CgroupPath| path.dir_in(root.dir()).display().to_string();

    // The node's cgroups.
    let mut node_unit = Unit::new("node".to_string(), None);
    let node_values = (|| -> Result<Vec<(String, CgroupValues)>> {
        let mut out = Vec::new();
        for cgroup in &evaluations.node.cgroups {
            let name = crate::output::node_cgroup_name(cgroup.cgroup);
            let files = &cgroup.files;
            let path = node_cgroup(cgroup.cgroup, name, node, options)?;
            let values = CgroupValues {
                path,
                files: file_values(files),
            };
            check_files(&format!("node cgroup {}", values.path), &values.files)?;
            out.push((name.to_string(), values));
        }
        Ok(out)
    })();
    match node_values {
        Ok(values) => {
            for (name, values) in values {
                cgroups.push(CgroupOut {
                    owner: format!("node/{name}"),
                    path: owner_dir(&values.path),
                });
                node_unit.desired.push(values);
            }
        }
        Err(e) => node_unit.error = Some(format!("{e:#}")),
    }
    warnings.extend(evaluations.node.warnings.iter().map(ToString::to_string));
    if !node_unit.desired.is_empty() || node_unit.error.is_some() {
        units.push(node_unit);
    }

    // Each pod, on its own.
    let mut uids = BTreeSet::new();
    let mut claimed: BTreeMap<CgroupPath, usize> = BTreeMap::new();
    let mut conflicts: BTreeMap<usize, String> = BTreeMap::new();
    for ((doc, outcome), evaluated) in docs.iter().zip(&evaluations.pods).zip(&pods) {
        let owner = outcome.name.clone();
        let uid = Some(doc.pod.uid.clone());
        warnings.extend(
            evaluated
                .evaluation
                .warnings
                .iter()
                .map(|w| format!("{owner}: {w}")),
        );
        if !uids.insert(doc.pod.uid.as_str()) {
            units.push(Unit::failed(
                owner,
                uid,
                format!(
                    "{}: metadata.uid `{}` is used by another pod too",
                    doc.origin,
                    doc.pod.uid.escape_debug()
                ),
            ));
            continue;
        }
        let pod = match pod_cgroups(doc, evaluated, node) {
            Ok(pod) => pod,
            Err(e) => {
                units.push(Unit::failed(
                    owner.clone(),
                    uid,
                    format!("{owner} ({}): {e:#}", doc.origin),
                ));
                continue;
            }
        };
        let index = units.len();
        let mut unit = Unit::new(owner.clone(), uid);
        // Two pods whose cgroups are one directory (systemd turns `-`
        // into `_`) would write over each other: both fail.
        let mut paths = vec![pod.pod.path.clone()];
        paths.extend(pod.containers.iter().map(|(_, v)| v.path.clone()));
        for path in &paths {
            if let Some(&other) = claimed.get(path) {
                let text = |me: &str, them: &str| {
                    format!(
                        "{me}: its cgroup {path} is also the cgroup of pod {them}; neither is written"
                    )
                };
                conflicts.insert(index, text(&owner, &units[other].owner));
                conflicts.insert(other, text(&units[other].owner, &owner));
            } else {
                claimed.insert(path.clone(), index);
            }
        }
        cgroups.push(CgroupOut {
            owner: owner.clone(),
            path: owner_dir(&pod.pod.path),
        });
        unit.desired.push(pod.pod);
        for (name, values) in pod.containers {
            cgroups.push(CgroupOut {
                owner: format!("{owner}/{name}"),
                path: owner_dir(&values.path),
            });
            unit.desired.push(values);
        }
        units.push(unit);
    }
    for (index, error) in conflicts {
        units[index].error = Some(error);
        units[index].desired.clear();
    }

    // The managers' files go to the pod whose cgroups they are in.
    for values in extra {
        let owner = units.iter().position(|u| {
            u.uid.is_some()
                && u.desired
                    .first()
                    .is_some_and(|pod| values.path.lineage().contains(&pod.path))
        });
        let checked = check_files(&format!("cgroup {}", values.path), &values.files);
        match (owner, checked) {
            (Some(i), Ok(())) => merge_extra(&mut units[i].desired, std::slice::from_ref(values)),
            (Some(i), Err(e)) => {
                units[i].error = Some(format!("{}: {e:#}", units[i].owner));
                units[i].desired.clear();
            }
            (None, Err(e)) => return Err(e),
            (None, Ok(())) => bail!(
                "internal: the managers' files for {} belong to no pod being applied",
                values.path
            ),
        }
    }

    if refuse_input_errors {
        let errors: Vec<&str> = units.iter().filter_map(|u| u.error.as_deref()).collect();
        if !errors.is_empty() {
            bail!("{}\nnothing was written", errors.join("\n"));
        }
    }

    // The `--pid` files.
    if !options.pids.is_empty() {
        let mut unit = Unit::new("--pid".to_string(), None);
        let mut pids = BTreeSet::new();
        for assignment in &options.pids {
            if !pids.insert(assignment.pid) {
                bail!("--pid: process {} is given twice", assignment.pid);
            }
            let (pod_idx, container_idx) = find_container(assignment, docs, &pods)?;
            let value = pods[pod_idx].containers()[container_idx].oom_score_adj;
            if !(-1000..=1000).contains(&value) {
                bail!(
                    "{}: the policy's oom_score_adj {value} is outside -1000..=1000",
                    assignment.container
                );
            }
            unit.oom.extend(cgroupfs::plan_oom_score_adj(
                &options.proc_root,
                assignment.pid,
                value,
            )?);
        }
        units.push(unit);
    }

    let mut changes = Vec::new();
    let mut results = Vec::new();
    let mut applied_total = 0;
    if options.dry_run {
        // An owner that cannot be planned on its own fails alone.
        for unit in units.iter_mut().filter(|u| u.error.is_none()) {
            if let Err(e) = cgroupfs::plan(&root, &unit.desired) {
                unit.error = Some(format!("{}: {e}", unit.owner));
            }
        }
        // One plan over every owner that can be planned: what a run would
        // write first (shared directories and controllers appear once).
        let desired: Vec<CgroupValues> = units
            .iter()
            .filter(|u| u.error.is_none())
            .flat_map(|u| u.desired.iter().cloned())
            .collect();
        let owners: Vec<(CgroupPath, String)> = units
            .iter()
            .filter(|u| u.error.is_none())
            .flat_map(|u| u.desired.iter().map(|d| (d.path.clone(), u.owner.clone())))
            .collect();
        let owner_of = |path: &Path| -> String {
            owners
                .iter()
                .filter(|(p, _)| path.starts_with(p.dir_in(root.dir())))
                .max_by_key(|(p, _)| p.depth())
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| "node".to_string())
        };
        match cgroupfs::plan(&root, &desired) {
            Ok(planned) => {
                for change in &planned {
                    let path = match change {
                        Change::Mkdir { dir } => dir,
                        Change::Write { path, .. } => path,
                    };
                    changes.push(ChangeOut::new(
                        &owner_of(path),
                        change,
                        ChangeStatus::Planned,
                    ));
                }
            }
            Err(e) => bail!("{e}"),
        }
        for unit in &units {
            for change in &unit.oom {
                changes.push(ChangeOut::new(&unit.owner, change, ChangeStatus::Planned));
            }
            results.push(OwnerResult {
                owner: unit.owner.clone(),
                uid: unit.uid.clone(),
                applied: false,
                error: unit.error.clone(),
            });
        }
    } else {
        for unit in &units {
            if let Some(error) = &unit.error {
                results.push(OwnerResult {
                    owner: unit.owner.clone(),
                    uid: unit.uid.clone(),
                    applied: false,
                    error: Some(error.clone()),
                });
                continue;
            }
            let planned = match cgroupfs::plan(&root, &unit.desired) {
                Ok(mut planned) => {
                    planned.extend(unit.oom.iter().cloned());
                    planned
                }
                Err(e) => {
                    results.push(OwnerResult {
                        owner: unit.owner.clone(),
                        uid: unit.uid.clone(),
                        applied: false,
                        error: Some(format!("{}: {e}", unit.owner)),
                    });
                    continue;
                }
            };
            let (applied, error) = match cgroupfs::apply(&root, &planned) {
                Ok(()) => (planned.len(), None),
                Err(e) => (e.applied, Some(e.error.to_string())),
            };
            applied_total += applied;
            for (i, change) in planned.iter().enumerate() {
                let status = match i.cmp(&applied) {
                    std::cmp::Ordering::Less => ChangeStatus::Applied,
                    std::cmp::Ordering::Equal if error.is_some() => ChangeStatus::Failed,
                    _ => ChangeStatus::NotRun,
                };
                changes.push(ChangeOut::new(&unit.owner, change, status));
            }
            results.push(OwnerResult {
                owner: unit.owner.clone(),
                uid: unit.uid.clone(),
                applied: error.is_none(),
                error: error.map(|e| format!("{}: {e}", unit.owner)),
            });
        }
    }
    let failures: Vec<&str> = results.iter().filter_map(|r| r.error.as_deref()).collect();
    Ok(ApplyReport {
        dry_run: options.dry_run,
        cgroup_root: root.dir().display().to_string(),
        cgroups,
        changes,
        applied: applied_total,
        error: (!failures.is_empty()).then(|| failures.join("; ")),
        results,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Vec<FileValue> {
        pairs
            .iter()
            .map(|(file, value)| FileValue {
                file: file.to_string(),
                value: value.to_string(),
            })
            .collect()
    }

    #[track_caller]
    fn check(pairs: &[(&str, &str)], want: Result<(), &str>) {
        let got = check_files("c", &files(pairs)).map_err(|e| e.to_string());
        match (got, want) {
            (Ok(()), Ok(())) => {}
            (Err(got), Err(want)) => assert!(got.contains(want), "{got:?} lacks {want:?}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn sane_output_passes() {
        check(
            &[
                ("cpu.weight", "157"),
                ("cpu.max", "400000 100000"),
                ("memory.max", "1073741824"),
                ("memory.min", "134217728"),
                ("memory.high", "966367641"),
                ("memory.oom.group", "1"),
                ("hugetlb.2MB.max", "0"),
                ("hugetlb.1GB.rsvd.max", "max"),
                ("cpuset.cpus", "0-3,8"),
            ],
            Ok(()),
        );
        check(&[("cpu.max", "max 100000"), ("memory.max", "max")], Ok(()));
    }

    #[test]
    fn broken_output_is_refused() {
        check(&[("memory.max", "1G")], Err("malformed"));
        check(&[("memory.max", "-1")], Err("malformed"));
        check(&[("memory.max", "1\n2")], Err("malformed"));
        check(&[("cpu.max", "50000  100000")], Err("malformed"));
        check(&[("cpu.weight", "0")], Err("malformed"));
        check(&[("cpu.weight", "010")], Err("malformed"));
        check(&[("cpuset.cpus", "3-1")], Err("malformed"));
        check(
            &[("cgroup.procs", "1")],
            Err("not a cgroup v2 interface file"),
        );
        check(
            &[("../../etc/passwd", "x")],
            Err("not a cgroup v2 interface file"),
        );
        check(
            &[("hugetlb.2XB.max", "0")],
            Err("not a cgroup v2 interface file"),
        );
        check(
            &[("memory.max", "100"), ("memory.min", "200")],
            Err("memory.max 100 below memory.min 200"),
        );
        check(
            &[("memory.high", "100"), ("memory.min", "200")],
            Err("memory.high 100 below memory.min 200"),
        );
        check(&[("memory.max", "1"), ("memory.max", "1")], Err("twice"));
    }

    #[test]
    fn pid_flags() {
        assert_eq!(
            "ide=42".parse::<PidAssignment>(),
            Ok(PidAssignment {
                container: "ide".into(),
                pid: 42
            })
        );
        assert!("dev/myide/ide=7".parse::<PidAssignment>().is_ok());
        for bad in [
            "ide",
            "ide=0",
            "ide=-3",
            "=4",
            "a/b/c/d=1",
            "ide=99999999999",
        ] {
            assert!(bad.parse::<PidAssignment>().is_err(), "{bad}");
        }
    }
}
