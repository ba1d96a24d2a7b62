//! `podpolicy admit` and `podpolicy release`: the resource managers
//! (KEP-5526) on a node, with crash-safe checkpoints and cpuset writes.
//!
//! The component decides (hints, affinity, cpusets, memory blocks,
//! isolation); this module loads and saves the state, turns the assignment
//! into cgroup files (`cpuset.cpus`, `cpuset.mems`, the quota of containers
//! whose CFS quota is disabled) and refuses an empty cpuset before any write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;

use crate::bindings::{
    Admission, CpuIsolation, ManagerState, NodeSettings, NodeTopology, Pod, QosClass,
    ResourceManager, TopologyHint,
};
use crate::cgroupfs::{self, CgroupRoot, CgroupValues, FileValue};
use crate::runtime::PolicyRuntime;
use crate::state_dir::StateDir;
use crate::{checkpoint, format_field_errors};

/// Load the state (or start empty) and let the managers validate it, as the
/// kubelet's `Start` does.
pub fn start_state(
    policy: &PolicyRuntime,
    topology: &NodeTopology,
    node: &NodeSettings,
    state_dir: Option<&Path>,
) -> Result<ManagerState> {
    let state = match state_dir {
        Some(dir) => checkpoint::load(dir)?,
        None => crate::empty_manager_state(),
    };
    match policy.start_managers(topology, &state, node)? {
        Ok(Ok(state)) => Ok(state),
        Ok(Err(e)) => bail!(
            "the resource managers refuse to start: {}{}{}",
            e.message,
            if e.reason().is_empty() {
                String::new()
            } else {
                format!(" ({})", e.reason())
            },
            match state_dir {
                Some(dir) => format!(
                    "; the checkpoints in {} were written for other settings: the kubelet refuses them too (drain the node and remove them)",
                    dir.display()
                ),
                None => String::new(),
            }
        ),
        Err(errors) => bail!(
            "invalid manager state or settings:\n{}",
            format_field_errors(&errors)
        ),
    }
}

/// The CPUs of a cpuset list (`0-3,8`); `None` when malformed or absurdly large.
pub fn parse_cpu_list(text: &str) -> Option<BTreeSet<u32>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
            None => {
                let a = part.parse::<u32>().ok()?;
                (a, a)
            }
        };
        if a > b || b - a > 65_536 {
            return None;
        }
        cpus.extend(a..=b);
    }
    Some(cpus)
}

/// The admission's cgroup files (the component's `placement-files`) at
/// their kubelet paths, after the host's sanity checks: every cpuset is a
/// well-formed, non-empty list of this node's CPUs, and every file passes
/// `apply::check_files`; a failed check writes nothing.
pub fn cpuset_values(
    admission: &Admission,
    pod: &Pod,
    qos: QosClass,
    node: &NodeSettings,
    topology: &NodeTopology,
) -> Result<Vec<CgroupValues>> {
    let driver = node.cgroup_driver;
    let pod_path = cgroupfs::pod(driver, qos, &pod.uid).map_err(|e| anyhow!("{e}"))?;
    let all_cpus: BTreeSet<u32> = topology.cpus.iter().map(|c| c.id).collect();
    let checked = |owner: &str, files: &[crate::bindings::CgroupFile]| -> Result<Vec<FileValue>> {
        let values: Vec<FileValue> = files
            .iter()
            .map(|f| FileValue {
                file: f.file.to_string(),
                value: f.value.to_string(),
            })
            .collect();
        for f in values.iter().filter(|f| f.file == "cpuset.cpus") {
            let set = &f.value;
            if set.trim().is_empty() {
                bail!(
                    "the policy assigned an empty cpuset to {owner}; refusing to write it (no cgroup was changed)"
                );
            }
            let cpus = parse_cpu_list(set).ok_or_else(|| {
                anyhow!(
                    "the policy assigned {owner} the malformed cpuset `{}`",
                    set.escape_debug()
                )
            })?;
            if let Some(cpu) = cpus.iter().find(|c| !all_cpus.contains(c)) {
                bail!(
                    "the policy assigned {owner} CPU {cpu}, which this node does not have (cpuset `{set}`); no cgroup was changed"
                );
            }
        }
        crate::apply::check_files(owner, &values)?;
        Ok(values)
    };
    let mut out = vec![CgroupValues {
        path: pod_path.clone(),
        files: checked("the pod", &admission.files.pod)?,
    }];
    for c in &admission.files.containers {
        let path =
            cgroupfs::container(&pod_path, "container", &c.name).map_err(|e| anyhow!("{e}"))?;
        out.push(CgroupValues {
            path,
            files: checked(&format!("container `{}`", c.name), &c.files)?,
        });
    }
    Ok(out)
}

/// A NUMA affinity for output: `[0, 1]`, or `null` for "don't care".
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HintOut {
    /// NUMA node ids; `None` = any.
    pub numa_affinity: Option<Vec<u32>>,
    /// Whether the hint is preferred.
    pub preferred: bool,
}

impl From<&TopologyHint> for HintOut {
    fn from(h: &TopologyHint) -> Self {
        HintOut {
            numa_affinity: h.numa_affinity.clone(),
            preferred: h.preferred,
        }
    }
}

/// One memory block for output.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryBlockOut {
    /// NUMA nodes.
    pub numa_affinity: Vec<u32>,
    /// `memory` or `hugepages-<size>`.
    pub resource_name: String,
    /// Bytes.
    pub size: u64,
}

/// One provider's hints for one resource.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderHintsOut {
    /// `cpu` or `memory` (the CPU or memory manager).
    pub manager: &'static str,
    /// The resource the hints are for.
    pub resource_name: String,
    /// The hints; `None` = no preference.
    pub hints: Option<Vec<HintOut>>,
}

/// One topology manager decision.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionOut {
    /// The container; `None` = the pod (pod scope).
    pub container: Option<String>,
    /// Every provider's hints.
    pub providers: Vec<ProviderHintsOut>,
    /// The merged hint.
    pub affinity: HintOut,
    /// Whether the policy admits it.
    pub admit: bool,
    /// `--why`: the providers that answered "no preference" (a nil hint
    /// map, so they have no row in `providers`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub no_preference: Vec<&'static str>,
    /// `--why`: the component's one line on why the policy admitted or
    /// refused the merged hint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// One container's placement.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPlacementOut {
    /// Container name.
    pub name: String,
    /// Its CPUs; `None` = the node's shared pool.
    pub cpuset: Option<String>,
    /// `host`, `pod` or `container` (KEP-5526 `ResourceIsolationLevel`).
    pub cpu_isolation: &'static str,
    /// CFS quota off (exclusive CPUs).
    pub cfs_quota_disabled: bool,
    /// Its memory blocks.
    pub memory: Vec<MemoryBlockOut>,
}

/// Why the managers refused a pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RejectionOut {
    /// The admission reason the kubelet reports (`TopologyAffinityError`, ...).
    pub reason: String,
    /// Upstream's message.
    pub message: String,
}

/// The `admit` command's output (`kind: Admission`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionOut {
    /// `namespace/name`.
    pub pod: String,
    /// `metadata.uid`.
    pub uid: String,
    /// Whether the managers admitted it.
    pub admitted: bool,
    /// The rejection, when not admitted.
    pub rejection: Option<RejectionOut>,
    /// The topology manager's decisions.
    pub topology: Vec<DecisionOut>,
    /// The pod-level CPU set (KEP-5526).
    pub pod_cpuset: Option<String>,
    /// The pod shared pool.
    pub pod_shared_pool: Option<String>,
    /// The node's shared pool after the admission.
    pub node_shared_pool: String,
    /// CFS quota off on the pod cgroup.
    pub pod_cfs_quota_disabled: bool,
    /// Per container.
    pub containers: Vec<ContainerPlacementOut>,
    /// `--why`: the component's one line on why the pod was admitted or
    /// refused (for a rejection, the check that failed with its inputs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// The KEP-5526 spelling of a CPU isolation level.
pub fn isolation_name(level: CpuIsolation) -> &'static str {
    match level {
        CpuIsolation::Host => "host",
        CpuIsolation::Pod => "pod",
        CpuIsolation::Container => "container",
    }
}

fn manager_name(manager: ResourceManager) -> &'static str {
    match manager {
        ResourceManager::Cpu => "cpu",
        ResourceManager::Memory => "memory",
    }
}

fn blocks(list: &[crate::bindings::MemoryBlock]) -> Vec<MemoryBlockOut> {
    list.iter()
        .map(|b| MemoryBlockOut {
            numa_affinity: b.numa_affinity.clone(),
            resource_name: b.resource_name.clone(),
            size: b.size,
        })
        .collect()
}

impl AdmissionOut {
    /// The output of an admission of `pod`.
    pub fn new(pod: &Pod, admission: &Admission) -> AdmissionOut {
        let a = &admission.assignment;
        AdmissionOut {
            pod: format!("{}/{}", pod.namespace, pod.name),
            uid: pod.uid.clone(),
            admitted: admission.rejection.is_none(),
            rejection: admission.rejection.as_ref().map(|r| RejectionOut {
                reason: r.reason().to_string(),
                message: r.message.clone(),
            }),
            topology: admission
                .topology
                .iter()
                .map(|d| DecisionOut {
                    container: d.container.clone(),
                    providers: d
                        .providers
                        .iter()
                        .flat_map(|p| {
                            p.hints.iter().flatten().map(move |r| ProviderHintsOut {
                                manager: manager_name(p.manager),
                                resource_name: r.resource_name.clone(),
                                hints: r
                                    .hints
                                    .as_ref()
                                    .map(|h| h.iter().map(HintOut::from).collect()),
                            })
                        })
                        .collect(),
                    affinity: (&d.affinity).into(),
                    admit: d.admit,
                    no_preference: Vec::new(),
                    rule: None,
                })
                .collect(),
            pod_cpuset: a.pod_cpuset.clone(),
            pod_shared_pool: a.pod_shared_pool.clone(),
            node_shared_pool: a.node_shared_pool.clone(),
            pod_cfs_quota_disabled: a.pod_cfs_quota_disabled,
            containers: a
                .containers
                .iter()
                .map(|c| ContainerPlacementOut {
                    name: c.name.clone(),
                    cpuset: c.cpuset.clone(),
                    cpu_isolation: isolation_name(c.cpu_isolation),
                    cfs_quota_disabled: c.cfs_quota_disabled,
                    memory: blocks(&c.memory),
                })
                .collect(),
            rule: None,
        }
    }

    /// `--why`: add the component's reasons (each decision's rule, the
    /// admission's) and the providers without hints, so the output shows
    /// every input of each decision. `admission` is the one `new` was
    /// built from.
    pub fn with_why(mut self, admission: &Admission) -> AdmissionOut {
        for (out, decision) in self.topology.iter_mut().zip(&admission.topology) {
            out.rule = Some(decision.rule.clone());
            out.no_preference = decision
                .providers
                .iter()
                .filter(|p| p.hints.as_ref().is_none_or(Vec::is_empty))
                .map(|p| manager_name(p.manager))
                .collect();
        }
        self.rule = Some(admission.rule.clone());
        self
    }

    /// A plain-text rendering for a terminal.
    pub fn to_table(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "POD {}  (uid {})", self.pod, self.uid);
        match &self.rejection {
            Some(r) => {
                let _ = writeln!(out, "  REJECTED  {}: {}", r.reason, r.message);
            }
            None => {
                let _ = writeln!(out, "  admitted");
            }
        }
        let numa = |h: &HintOut| match &h.numa_affinity {
            Some(nodes) => format!(
                "numa {}{}",
                nodes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                if h.preferred { " (preferred)" } else { "" }
            ),
            None => "any NUMA node".to_string(),
        };
        for d in &self.topology {
            let _ = writeln!(
                out,
                "  topology   {:<16} {} -> {}",
                d.container.as_deref().unwrap_or("(pod)"),
                numa(&d.affinity),
                if d.admit { "admit" } else { "reject" }
            );
        }
        let why = self.why_lines();
        let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let _ = writeln!(out, "  pod cpuset        {}", dash(&self.pod_cpuset));
        let _ = writeln!(out, "  pod shared pool   {}", dash(&self.pod_shared_pool));
        let _ = writeln!(out, "  node shared pool  {}", self.node_shared_pool);
        if !self.containers.is_empty() {
            let _ = writeln!(
                out,
                "  {:<24} {:<10} {:<16} {:<9} memory",
                "CONTAINER", "ISOLATION", "CPUSET", "CFS QUOTA"
            );
        }
        for c in &self.containers {
            let memory = c
                .memory
                .iter()
                .map(|b| {
                    format!(
                        "{} {} on numa {}",
                        b.resource_name,
                        crate::output::human_bytes(b.size),
                        b.numa_affinity
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            let _ = writeln!(
                out,
                "  {:<24} {:<10} {:<16} {:<9} {}",
                c.name,
                c.cpu_isolation,
                c.cpuset.as_deref().unwrap_or("(shared)"),
                if c.cfs_quota_disabled { "off" } else { "on" },
                if memory.is_empty() {
                    "-".into()
                } else {
                    memory
                }
            );
        }
        out.push_str(&why);
        out
    }

    /// The `--why` lines (empty without `--why`): per topology decision one
    /// line per provider resource with its hints, the merged hint and the
    /// component's rule; then the admission's own reason.
    fn why_lines(&self) -> String {
        use std::fmt::Write as _;
        let Some(rule) = &self.rule else {
            return String::new();
        };
        let mut out = String::from("  why\n");
        for d in &self.topology {
            let owner = d.container.as_deref().unwrap_or("(pod)");
            for p in &d.providers {
                let hints = hint_list_words(p.hints.as_deref());
                let _ = writeln!(
                    out,
                    "    {owner} {} manager, {}: {hints}",
                    p.manager, p.resource_name
                );
            }
            for manager in &d.no_preference {
                let _ = writeln!(out, "    {owner} {manager} manager: no preference");
            }
            let _ = writeln!(
                out,
                "    {owner} merged: {} -> {}",
                hint_words(&d.affinity),
                if d.admit { "admit" } else { "reject" }
            );
            if let Some(rule) = &d.rule {
                let _ = writeln!(out, "    {owner} rule: {rule}");
            }
        }
        match &self.rejection {
            Some(r) => {
                let _ = writeln!(out, "    rejected ({}): {rule}", r.reason);
            }
            None => {
                let _ = writeln!(out, "    {rule}");
            }
        }
        out
    }
}

/// `explain --why` for a pod the managers refused: the component's inputs
/// and rules of the admission, as rows (the pod's or a container's topology
/// decision: each provider's hints, the merged hint with the policy's rule;
/// then the admission's own reason and rule).
pub fn admission_reasons(admission: &Admission) -> Vec<crate::output::WhyOut> {
    let mut rows = Vec::new();
    for d in &admission.topology {
        for p in &d.providers {
            let manager = manager_name(p.manager);
            match &p.hints {
                None => rows.push(crate::output::WhyOut {
                    container: d.container.clone(),
                    file: format!("hints {manager}"),
                    value: "no preference".into(),
                    reason: format!("the {manager} manager has no NUMA preference for it"),
                }),
                Some(list) => {
                    for r in list {
                        let hints = hint_list_words(
                            r.hints
                                .as_ref()
                                .map(|h| h.iter().map(HintOut::from).collect::<Vec<_>>())
                                .as_deref(),
                        );
                        rows.push(crate::output::WhyOut {
                            container: d.container.clone(),
                            file: format!("hints {manager}/{}", r.resource_name),
                            value: hints,
                            reason: format!(
                                "the {manager} manager's NUMA hints for {}",
                                r.resource_name
                            ),
                        });
                    }
                }
            }
        }
        rows.push(crate::output::WhyOut {
            container: d.container.clone(),
            file: "topology".into(),
            value: format!(
                "{} -> {}",
                hint_words(&HintOut::from(&d.affinity)),
                if d.admit { "admit" } else { "reject" }
            ),
            reason: d.rule.clone(),
        });
    }
    let verdict = match &admission.rejection {
        Some(r) => r.reason().to_string(),
        None => "admitted".into(),
    };
    rows.push(crate::output::WhyOut {
        container: None,
        file: "admission".into(),
        value: verdict,
        reason: admission.rule.clone(),
    });
    rows
}

/// A provider's hint list as the `--why` lines show it: `no preference`
/// (no list), `none: no placement possible` (an empty one), else the hints
/// joined by commas.
fn hint_list_words(hints: Option<&[HintOut]>) -> String {
    match hints {
        None => "no preference".to_string(),
        Some([]) => "none: no placement possible".to_string(),
        Some(list) => list.iter().map(hint_words).collect::<Vec<_>>().join(", "),
    }
}

/// A hint as the `--why` lines show it: `[0,1] preferred`, `any NUMA node,
/// not preferred` (the component's rule lines use the same words).
fn hint_words(h: &HintOut) -> String {
    let preferred = if h.preferred {
        "preferred"
    } else {
        "not preferred"
    };
    match &h.numa_affinity {
        Some(nodes) => format!(
            "[{}] {preferred}",
            nodes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => format!("any NUMA node, {preferred}"),
    }
}

/// Admit `pod`: validate, run the managers, persist the new state, and
/// (with a cgroup root) write cpusets. Returns the admission.
pub fn admit(
    policy: &PolicyRuntime,
    pod: &Pod,
    node: &NodeSettings,
    topology: &NodeTopology,
    state_dir: Option<&Path>,
    cgroup_root: Option<&Path>,
) -> Result<Admission> {
    let errors = policy.validate_pod(pod, node)?;
    if !errors.is_empty() {
        bail!("the pod is invalid:\n{}", format_field_errors(&errors));
    }
    let qos = match policy.qos_class(pod, node)? {
        Ok(q) => q,
        Err(errors) => bail!("{}", format_field_errors(&errors)),
    };
    // One writer at a time: the lock is held from reading the state to
    // saving the new one, so concurrent admissions never share a CPU.
    let locked = state_dir
        .map(|dir| StateDir::lock(dir, crate::state_dir::DEFAULT_LOCK_WAIT))
        .transpose()?;
    let state = start_state(policy, topology, node, state_dir)?;
    let admission = match policy.admit(pod, topology, &state, node)? {
        Ok(a) => a,
        Err(errors) => bail!(
            "the managers could not evaluate the pod:\n{}",
            format_field_errors(&errors)
        ),
    };
    if admission.rejection.is_some() {
        return Ok(admission);
    }
    // Files first (validated, nothing written yet), then the checkpoint, then the writes.
    let values = cpuset_values(&admission, pod, qos, node, topology)?;
    if let Some(dir) = &locked {
        checkpoint::save(dir, &admission.state).context("saving the manager checkpoints")?;
    }
    if let Some(root) = cgroup_root {
        let root = CgroupRoot::open(root).map_err(|e| anyhow!("{e}"))?;
        let changes = cgroupfs::plan(&root, &values).map_err(|e| anyhow!("{e}"))?;
        cgroupfs::apply(&root, &changes).map_err(|e| anyhow!("{e}"))?;
    }
    Ok(admission)
}

/// Whether `state` holds anything for the pod `uid`, and the containers it
/// names for it.
fn held_by(state: &ManagerState, uid: &str) -> (bool, BTreeSet<String>) {
    let mut containers = BTreeSet::new();
    let mut held = false;
    for pod in state.cpu.entries.iter().filter(|p| p.pod_uid == uid) {
        held = true;
        containers.extend(pod.containers.iter().map(|c| c.container.clone()));
    }
    for pod in state.memory.entries.iter().filter(|p| p.pod_uid == uid) {
        held = true;
        containers.extend(pod.containers.iter().map(|c| c.container.clone()));
    }
    held |= state.cpu.pod_entries.iter().any(|p| p.pod_uid == uid)
        || state.memory.pod_entries.iter().any(|p| p.pod_uid == uid);
    (held, containers)
}

/// Release one container (the pod's resources go with its last container)
/// and persist the new state. A pod the state does not know, or a container
/// it names no assignment for while the state is unchanged, is an error.
pub fn release(
    policy: &PolicyRuntime,
    pod_uid: &str,
    container: &str,
    node: &NodeSettings,
    topology: &NodeTopology,
    state_dir: &Path,
) -> Result<ManagerState> {
    let locked = StateDir::lock(state_dir, crate::state_dir::DEFAULT_LOCK_WAIT)?;
    let before = start_state(policy, topology, node, Some(state_dir))?;
    let (held, containers) = held_by(&before, pod_uid);
    if !held {
        bail!(
            "pod uid `{}` holds no resource-manager state in {}: nothing to release",
            pod_uid.escape_debug(),
            state_dir.display()
        );
    }
    let state = match policy.release(pod_uid, container, topology, &before, node)? {
        Ok(s) => s,
        Err(errors) => bail!("{}", format_field_errors(&errors)),
    };
    if state == before && !containers.is_empty() && !containers.contains(container) {
        bail!(
            "pod uid `{}` has no container `{}` in the resource-manager state (it has: {})",
            pod_uid.escape_debug(),
            container.escape_debug(),
            containers.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    checkpoint::save(&locked, &state).context("saving the manager checkpoints")?;
    Ok(state)
}

/// Who holds manager state: the containers with entries in either
/// manager's state, by pod UID; a pod with only a pod-level (KEP-5526)
/// reservation is listed with no containers.
pub fn manager_holders(state: &ManagerState) -> BTreeMap<String, BTreeSet<String>> {
    let mut holders: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (uid, containers) in state
        .cpu
        .entries
        .iter()
        .map(|p| {
            (
                &p.pod_uid,
                p.containers
                    .iter()
                    .map(|c| &c.container)
                    .collect::<Vec<_>>(),
            )
        })
        .chain(state.memory.entries.iter().map(|p| {
            (
                &p.pod_uid,
                p.containers.iter().map(|c| &c.container).collect(),
            )
        }))
    {
        holders
            .entry(uid.clone())
            .or_default()
            .extend(containers.into_iter().cloned());
    }
    for uid in state
        .cpu
        .pod_entries
        .iter()
        .map(|p| &p.pod_uid)
        .chain(state.memory.pod_entries.iter().map(|p| &p.pod_uid))
    {
        holders.entry(uid.clone()).or_default();
    }
    holders
}

/// Whether a long-lived server (the agent, the NRI plugin) runs the
/// resource managers: the serving policy's answer. A policy that fails its
/// self-check cannot be trusted to answer (a garbage module may say "yes"),
/// and one that cannot answer (a broken first version): the managers stay
/// off, logged.
pub fn serving_managers_active(
    policy: &crate::runtime::PolicyRuntime,
    node: &crate::bindings::NodeSettings,
) -> bool {
    match crate::policy_dir::self_check(policy) {
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "the serving policy fails its self-check; the resource managers stay off");
            false
        }
        Ok(()) => policy.managers_active(node).unwrap_or_else(|e| {
            tracing::error!(error = %format!("{e:#}"), "the policy could not say whether the resource managers are active");
            false
        }),
    }
}
