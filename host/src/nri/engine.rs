//! The plugin's synchronous core: every event's answer from the serving
//! policy, the resource managers' state and the plugin's own record, all
//! committed crash-safely in the state directory (locked for the plugin's
//! life) before the runtime hears the answer: in `podpolicy nri`, durable
//! as the commit's intent record, the files replaced after the answer
//! ([`Engine::answer_on_durable_record`]).
//!
//! The host decides nothing here: the values come from the component
//! (`validate-pod`, `default-pod`, `evaluate`, `admit`, `release`); this
//! module rebuilds the inputs ([`super::pod_from_nri`]), translates the
//! answers into NRI messages, and writes the pod cgroup's files through
//! [`crate::cgroupfs`]. A failure is returned as an error: the async side
//! ([`super::plugin`]) answers "no change" and counts it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::pod_from_nri::{self, Rebuilt};
use super::proto::api;
use crate::bindings::{
    CgroupVersion, CpuIsolation, ManagerState, NodeSettings, NodeTopology, Pod, PodEvaluation,
    QosClass, ResourceConfig,
};
use crate::cgroupfs::{self, CgroupRoot, CgroupValues, FileValue};
use crate::runtime::{PolicyRuntime, PreparedPolicy};
use crate::state_dir::{StateDir, crash_point};
use crate::swap::PolicySlot;
use crate::{checkpoint, format_field_errors};

/// The plugin's record file in the state directory.
pub const STATE_FILE: &str = "nri_state.json";

/// One container the plugin answered for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NriContainer {
    /// Container name (the managers key on it).
    pub name: String,
    /// CPUs the managers placed it on, when they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Memory nodes the managers placed it on, when they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mems: Option<String>,
    /// It runs on the node's shared pool (its `cpus` follow the pool).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// One pod the plugin answered for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NriPod {
    /// `namespace/name`.
    pub pod: String,
    /// The runtime's sandbox id.
    pub sandbox: String,
    /// Its containers by runtime id.
    pub containers: BTreeMap<String, NriContainer>,
}

/// `nri_state.json`: the pods by UID.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NriState {
    /// Pods by UID.
    pub pods: BTreeMap<String, NriPod>,
}

/// How the engine is set up.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// The node's settings.
    pub node: NodeSettings,
    /// Checkpoints and `nri_state.json`.
    pub state_dir: PathBuf,
    /// The cgroup v2 root pod-level files are written below.
    pub cgroup_root: PathBuf,
    /// The sysfs root the topology is read from (static managers only).
    pub sysfs_root: PathBuf,
}

struct Managers {
    topology: NodeTopology,
    state: ManagerState,
    /// The node prepared with its topology in a warm instance, so an
    /// admission or a release sends only the pod and the state; made again
    /// after a policy swap (or a sandbox failure, inside `PreparedPolicy`).
    prepared: Option<PreparedPolicy>,
}

/// The node prepared on `policy` (see [`PreparedPolicy::reuse_or_prepare`]).
fn prepared_node<'a>(
    slot: &'a mut Option<PreparedPolicy>,
    policy: &Arc<PolicyRuntime>,
    node: &NodeSettings,
    topology: &NodeTopology,
) -> Result<&'a mut PreparedPolicy> {
    PreparedPolicy::reuse_or_prepare(slot, policy, node, Some(topology))?.map_err(|e| {
        anyhow!(
            "the managers cannot run with this node: {}",
            format_field_errors(&e)
        )
    })
}

/// What one answer did, for the log line and the metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The policy's values were returned (or written).
    Answered,
    /// Nothing to answer (nothing drifted, nothing to release, no pod values yet).
    Nothing,
}

/// The synchronous core (see the module docs).
pub struct Engine {
    slot: Arc<PolicySlot>,
    node: NodeSettings,
    cgroup_root: PathBuf,
    state_dir: StateDir,
    state: NriState,
    managers: Option<Managers>,
    /// The node prepared (without a topology) in a warm instance for
    /// validating, defaulting and evaluating pods: each answer sends only
    /// the pod; made again after a policy swap or a sandbox failure.
    evaluator: Option<PreparedPolicy>,
    /// Sandboxes seen, by id.
    sandboxes: HashMap<String, api::PodSandbox>,
    /// Containers seen, by id, with a sequence number for creation order.
    containers: HashMap<String, (u64, api::Container)>,
    seq: u64,
    committed: Option<Vec<(&'static str, Vec<u8>)>>,
    /// An admission changed the managers' state since the last commit.
    checkpoints_changed: bool,
    /// Answers wait only for the commit's intent record; the files are
    /// replaced by [`Engine::finish_recorded`] after the answer (see
    /// [`Engine::answer_on_durable_record`]).
    answer_on_record: bool,
}

fn qos_name(qos: QosClass) -> &'static str {
    match qos {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    }
}

/// `2097152` -> `2MB` (the runtime's hugepage size names).
fn page_size_name(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{name}", bytes / unit);
        }
    }
    format!("{bytes}B")
}

/// The component's CRI container values as NRI resources (`unified` only
/// on a cgroup v2 node: runc refuses it on v1).
pub fn to_nri_resources(rc: &ResourceConfig, v2: bool) -> api::LinuxResources {
    let mut out = api::LinuxResources::new();
    if rc.cpu_shares.is_some() || rc.cpu_quota.is_some() || rc.cpu_period.is_some() {
        let mut cpu = api::LinuxCPU::new();
        if let Some(v) = rc.cpu_shares {
            cpu.shares = Some(api::OptionalUInt64 {
                value: v,
                ..Default::default()
            })
            .into();
        }
        if let Some(v) = rc.cpu_quota {
            cpu.quota = Some(api::OptionalInt64 {
                value: v,
                ..Default::default()
            })
            .into();
        }
        if let Some(v) = rc.cpu_period {
            cpu.period = Some(api::OptionalUInt64 {
                value: v,
                ..Default::default()
            })
            .into();
        }
        out.cpu = Some(cpu).into();
    }
    if let Some(v) = rc.memory_limit {
        let mut memory = api::LinuxMemory::new();
        // The CRI's 0 is "no limit"; to runc a limit of 0 means "leave it as
        // it is" and -1 means unlimited, so no limit is sent as -1 (else an
        // update could not lift a limit set behind the runtime's back).
        memory.limit = Some(api::OptionalInt64 {
            value: if v > 0 { v } else { -1 },
            ..Default::default()
        })
        .into();
        out.memory = Some(memory).into();
    }
    for h in rc.hugepage_limits.iter().flatten() {
        out.hugepage_limits.push(api::HugepageLimit {
            page_size: page_size_name(h.page_size_bytes),
            limit: h.limit_bytes,
            ..Default::default()
        });
    }
    if v2 {
        out.unified = rc.unified.iter().cloned().collect();
    }
    out
}

/// Whether `current` lacks a value of `desired` (the fields the plugin sets).
pub fn drifted(current: Option<&api::LinuxResources>, desired: &api::LinuxResources) -> bool {
    let empty = api::LinuxResources::new();
    let current = current.unwrap_or(&empty);
    let cpu_now = current.cpu.as_ref();
    if let Some(cpu) = desired.cpu.as_ref() {
        let now = |f: fn(&api::LinuxCPU) -> Option<i128>| cpu_now.and_then(f);
        let checks: [fn(&api::LinuxCPU) -> Option<i128>; 3] = [
            |c| c.shares.as_ref().map(|v| i128::from(v.value)),
            |c| c.quota.as_ref().map(|v| i128::from(v.value)),
            |c| c.period.as_ref().map(|v| i128::from(v.value)),
        ];
        for f in checks {
            if f(cpu).is_some() && f(cpu) != now(f) {
                return true;
            }
        }
        if !cpu.cpus.is_empty() && cpu_now.map(|c| c.cpus.as_str()) != Some(cpu.cpus.as_str()) {
            return true;
        }
        if !cpu.mems.is_empty() && cpu_now.map(|c| c.mems.as_str()) != Some(cpu.mems.as_str()) {
            return true;
        }
    }
    let limit = |r: &api::LinuxResources| {
        r.memory
            .as_ref()
            .and_then(|m| m.limit.as_ref())
            .map(|l| l.value)
    };
    if limit(desired).is_some() && limit(desired) != limit(current) {
        return true;
    }
    for h in &desired.hugepage_limits {
        if !current
            .hugepage_limits
            .iter()
            .any(|c| c.page_size == h.page_size && c.limit == h.limit)
        {
            return true;
        }
    }
    desired
        .unified
        .iter()
        .any(|(k, v)| current.unified.get(k) != Some(v))
}

fn pod_label(sandbox: &api::PodSandbox) -> String {
    format!("{}/{}", sandbox.namespace, sandbox.name)
}

impl Engine {
    /// Lock the state directory (for the engine's whole life), load the
    /// record and, when the policy says the static managers are active,
    /// the topology and the checkpoints (validated by the managers).
    pub fn start(options: EngineOptions, slot: Arc<PolicySlot>) -> Result<Engine> {
        let state_dir = StateDir::lock(&options.state_dir, crate::state_dir::DEFAULT_LOCK_WAIT)?;
        let state = match crate::state_dir::read_file(&options.state_dir, STATE_FILE)? {
            Some(bytes) => serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "{}: not a podpolicy NRI state file (move it away to start fresh)",
                    options.state_dir.join(STATE_FILE).display()
                )
            })?,
            None => NriState::default(),
        };
        let policy = slot.current();
        let managers_active = crate::admit::serving_managers_active(&policy, &options.node);
        let managers = if managers_active {
            let topology = crate::topology_input::read_node_topology(&options.sysfs_root)?;
            let state = crate::admit::start_state(
                &policy,
                &topology,
                &options.node,
                Some(&options.state_dir),
            )?;
            Some(Managers {
                topology,
                state,
                prepared: None,
            })
        } else {
            None
        };
        Ok(Engine {
            slot,
            node: options.node,
            cgroup_root: options.cgroup_root,
            state_dir,
            state,
            managers,
            evaluator: None,
            sandboxes: HashMap::new(),
            containers: HashMap::new(),
            seq: 0,
            committed: None,
            checkpoints_changed: false,
            answer_on_record: false,
        })
    }

    /// The plugin's record.
    pub fn state(&self) -> &NriState {
        &self.state
    }

    /// The managers' state, when they are active.
    pub fn manager_state(&self) -> Option<&ManagerState> {
        self.managers.as_ref().map(|m| &m.state)
    }

    fn v2(&self) -> bool {
        self.node.cgroup_version == CgroupVersion::V2
    }

    fn remember_sandbox(&mut self, sandbox: &api::PodSandbox) {
        self.sandboxes.insert(sandbox.id.clone(), sandbox.clone());
    }

    fn remember_container(&mut self, container: &api::Container) {
        match self.containers.get_mut(&container.id) {
            Some((_, known)) => *known = container.clone(),
            None => {
                self.seq += 1;
                self.containers
                    .insert(container.id.clone(), (self.seq, container.clone()));
            }
        }
    }

    /// The containers seen in a sandbox, in creation order.
    fn sandbox_containers(&self, sandbox_id: &str) -> Vec<&api::Container> {
        let mut list: Vec<&(u64, api::Container)> = self
            .containers
            .values()
            .filter(|(_, c)| c.pod_sandbox_id == sandbox_id)
            .collect();
        list.sort_by_key(|(seq, _)| *seq);
        list.into_iter().map(|(_, c)| c).collect()
    }

    fn rebuild(
        &self,
        sandbox: &api::PodSandbox,
        container: Option<&str>,
        update: Option<(&str, &api::LinuxResources)>,
    ) -> Result<Rebuilt> {
        let containers = self.sandbox_containers(&sandbox.id);
        pod_from_nri::rebuild(sandbox, &containers, container, update)
    }

    /// Validate, default and evaluate through the component; a rejected
    /// pod, or one whose QoS class contradicts its cgroup parent, is an
    /// error (no adjustment).
    fn evaluate(
        &mut self,
        policy: &Arc<PolicyRuntime>,
        rebuilt: &Rebuilt,
    ) -> Result<(PodEvaluation, Pod)> {
        let evaluator =
            PreparedPolicy::reuse_or_prepare(&mut self.evaluator, policy, &self.node, None)?
                .map_err(|e| {
                    anyhow!(
                        "the policy cannot evaluate pods on this node: {}",
                        format_field_errors(&e)
                    )
                })?;
        let (defaulted, eval) = evaluator
            .validate_default_evaluate(&rebuilt.doc.pod)?
            .map_err(|e| anyhow!("the policy rejects the pod: {}", format_field_errors(&e)))?;
        if let Some(parent) = rebuilt.parent_qos
            && parent != eval.qos_class
        {
            bail!(
                "the pod rebuilt from {} is {} by the policy, but its cgroup parent says {}: the inputs are not trusted, nothing is adjusted",
                rebuilt.source.as_str(),
                qos_name(eval.qos_class),
                qos_name(parent)
            );
        }
        Ok((eval, defaulted.pod))
    }

    /// Admit the pod through the managers (state in, state out) and return
    /// `container`'s placement (`cpuset.cpus`, `cpuset.mems`, `cpu.max`).
    fn place(
        &mut self,
        policy: &Arc<PolicyRuntime>,
        pod: &Pod,
        qos: QosClass,
        container: &str,
    ) -> Result<Option<(BTreeMap<String, String>, bool)>> {
        let node = self.node.clone();
        let Some(managers) = self.managers.as_mut() else {
            return Ok(None);
        };
        let prepared = prepared_node(&mut managers.prepared, policy, &node, &managers.topology)?;
        let admission = prepared.admit(pod, &managers.state)?.map_err(|e| {
            anyhow!(
                "the managers could not evaluate the pod: {}",
                format_field_errors(&e)
            )
        })?;
        if let Some(r) = &admission.rejection {
            bail!(
                "the resource managers reject the pod: {}: {} (the runtime's values stand)",
                r.reason(),
                r.message
            );
        }
        // The host's sanity checks on every cpuset before the state is kept.
        crate::admit::cpuset_values(&admission, pod, qos, &node, &managers.topology)?;
        if managers.state != admission.state {
            managers.state = admission.state.clone();
            self.checkpoints_changed = true;
        }
        let shared = admission
            .assignment
            .containers
            .iter()
            .any(|c| c.name == container && c.cpu_isolation == CpuIsolation::Host);
        Ok(admission
            .files
            .containers
            .iter()
            .find(|c| c.name == container)
            .map(|c| {
                let files = c
                    .files
                    .iter()
                    .map(|f| (f.file.to_string(), f.value.to_string()))
                    .collect();
                (files, shared)
            }))
    }

    /// The node's shared pool (`defaultCpuSet`), when the managers run.
    fn shared_pool(&self) -> Option<String> {
        self.managers
            .as_ref()
            .map(|m| m.state.cpu.default_cpuset.clone())
            .filter(|p| !p.is_empty())
    }

    /// Updates moving every recorded shared-pool container but `except` to
    /// the current pool where it runs on another set (an exclusive
    /// allocation shrank the pool, a release grew it); the record follows.
    fn pool_updates(&mut self, except: &str) -> Vec<api::ContainerUpdate> {
        let Some(pool) = self.shared_pool() else {
            return Vec::new();
        };
        let mut updates = Vec::new();
        for pod in self.state.pods.values_mut() {
            for (id, c) in pod.containers.iter_mut() {
                if !c.shared || id == except || c.cpus.as_ref() == Some(&pool) {
                    continue;
                }
                c.cpus = Some(pool.clone());
                let mut cpu = api::LinuxCPU::new();
                cpu.cpus = pool.clone();
                let mut resources = api::LinuxResources::new();
                resources.cpu = Some(cpu).into();
                let mut linux = api::LinuxContainerUpdate::new();
                linux.resources = Some(resources).into();
                let mut update = api::ContainerUpdate::new();
                update.container_id = id.clone();
                update.linux = Some(linux).into();
                update.ignore_failure = true;
                updates.push(update);
            }
        }
        updates
    }

    /// Let an answer that commits wait only until its commit is durable as
    /// the state directory's intent record ([`StateDir::commit_recorded`]),
    /// and replace the files in [`Engine::finish_recorded`], which the
    /// plugin calls once the answer is on its way. Crash safety is the same
    /// (the record is what a restart replays); the answer waits for two
    /// fsyncs instead of seven. Off by default: a caller that never
    /// finishes would leave the files behind their record until its next
    /// commit.
    pub fn answer_on_durable_record(&mut self, on: bool) {
        self.answer_on_record = on;
    }

    /// Replace the files of a commit an answer left recorded (nothing when
    /// none is pending; see [`Engine::answer_on_durable_record`]).
    pub fn finish_recorded(&mut self) -> Result<()> {
        self.state_dir.finish_recorded()
    }

    /// Commit the record and the checkpoints as one step: only the files
    /// that changed since the last commit (a file left out already holds
    /// its new content), nothing when none did. A shared-pool container on
    /// a node with the static managers changes only the record: one
    /// atomic rename, not a three-file commit with its intent record.
    fn commit(&mut self) -> Result<()> {
        self.commit_with(false)
    }

    /// [`Engine::commit`] before an answer: only as far as the intent
    /// record when [`Engine::answer_on_durable_record`] is on.
    fn commit_before_answer(&mut self) -> Result<()> {
        self.commit_with(self.answer_on_record)
    }

    fn commit_with(&mut self, recorded: bool) -> Result<()> {
        let mut files = vec![(STATE_FILE, serde_json::to_vec_pretty(&self.state)?)];
        if let Some(managers) = &self.managers {
            files.extend(checkpoint::files(&managers.state)?);
        }
        let changed: Vec<(&str, Vec<u8>)> = match &self.committed {
            Some(before) => files
                .iter()
                .filter(|file| !before.contains(file))
                .cloned()
                .collect(),
            None => files.clone(),
        };
        if changed.is_empty() {
            return Ok(());
        }
        let committed = if recorded {
            self.state_dir.commit_recorded(&changed)
        } else {
            self.state_dir.commit(&changed)
        };
        if let Err(e) = committed {
            // What the failed commit left on disk is not known (it may be
            // an intent record the next lock would replay): the next
            // answer commits, and writes every file again.
            self.committed = None;
            self.checkpoints_changed = true;
            return Err(e.context("committing the NRI state and the manager checkpoints"));
        }
        self.committed = Some(files);
        self.checkpoints_changed = false;
        Ok(())
    }

    /// The pod cgroup's files (v2 nodes only) through the one cgroup writer.
    fn write_pod_cgroup(&self, sandbox: &api::PodSandbox, eval: &PodEvaluation) -> Result<usize> {
        if !self.v2() || eval.pod_cgroup_files.is_empty() {
            return Ok(0);
        }
        let path = cgroupfs::pod(self.node.cgroup_driver, eval.qos_class, &sandbox.uid)
            .map_err(|e| anyhow!("{e}"))?;
        let files: Vec<FileValue> = eval
            .pod_cgroup_files
            .iter()
            .map(|f| FileValue {
                file: f.file.to_string(),
                value: f.value.to_string(),
            })
            .collect();
        crate::apply::check_files("the pod", &files)?;
        let root = CgroupRoot::open(&self.cgroup_root).map_err(|e| anyhow!("{e}"))?;
        let changes =
            cgroupfs::plan(&root, &[CgroupValues { path, files }]).map_err(|e| anyhow!("{e}"))?;
        let n = changes.len();
        cgroupfs::apply(&root, &changes).map_err(|e| anyhow!("{e}"))?;
        Ok(n)
    }

    /// The values of one container: resources, `oom_score_adj`, and the
    /// placement when the managers are active (admitting the pod once).
    fn container_values(
        &mut self,
        sandbox: &api::PodSandbox,
        container: &api::Container,
        update: Option<&api::LinuxResources>,
    ) -> Result<(api::LinuxResources, i32, PodEvaluation, Rebuilt)> {
        let policy = self.slot.current();
        let rebuilt = self.rebuild(
            sandbox,
            Some(&container.name),
            update.map(|r| (container.name.as_str(), r)),
        )?;
        let (eval, defaulted) = self.evaluate(&policy, &rebuilt)?;
        let ce = eval
            .containers
            .iter()
            .find(|c| c.name == container.name)
            .ok_or_else(|| anyhow!("the policy's answer has no container `{}`", container.name))?;
        let mut resources = to_nri_resources(&ce.resources, self.v2());
        let oom = ce.oom_score_adj;
        let uid = sandbox.uid.clone();
        let recorded = self
            .state
            .pods
            .get(&uid)
            .and_then(|p| p.containers.get(&container.id))
            .cloned();
        let mut record = NriContainer {
            name: container.name.clone(),
            ..recorded.clone().unwrap_or_default()
        };
        if self.managers.is_some() {
            let placement = match (&recorded, update) {
                // Placed before: keep it (an update does not move CPUs).
                (Some(r), _) if r.cpus.is_some() || r.mems.is_some() => None,
                _ => self.place(&policy, &defaulted, eval.qos_class, &container.name)?,
            };
            if let Some((files, shared)) = placement {
                record.shared = shared;
                record.cpus = files.get("cpuset.cpus").cloned();
                record.mems = files.get("cpuset.mems").cloned();
                if let Some(max) = files.get("cpu.max") {
                    let mut parts = max.split_whitespace();
                    let quota = parts.next().unwrap_or("");
                    let period = parts.next().and_then(|p| p.parse::<u64>().ok());
                    let cpu = resources.cpu.mut_or_insert_default();
                    cpu.quota = Some(api::OptionalInt64 {
                        value: if quota == "max" {
                            -1
                        } else {
                            quota.parse().unwrap_or(-1)
                        },
                        ..Default::default()
                    })
                    .into();
                    if let Some(period) = period {
                        cpu.period = Some(api::OptionalUInt64 {
                            value: period,
                            ..Default::default()
                        })
                        .into();
                    }
                }
            }
            // A shared-pool container follows the pool as it is now (its
            // record holds the pool of its last answer).
            if record.shared
                && let Some(pool) = self.shared_pool()
            {
                record.cpus = Some(pool);
            }
            if record.cpus.is_some() || record.mems.is_some() {
                let cpu = resources.cpu.mut_or_insert_default();
                cpu.cpus = record.cpus.clone().unwrap_or_default();
                cpu.mems = record.mems.clone().unwrap_or_default();
            }
        }
        let entry = self.state.pods.entry(uid).or_default();
        entry.pod = pod_label(sandbox);
        entry.sandbox = sandbox.id.clone();
        entry.containers.insert(container.id.clone(), record);
        // When the managers' state changed (CPUs or memory were assigned),
        // it is durable, with the record of where the container was
        // placed, before the runtime hears the answer: after a crash,
        // Synchronize releases from them what no running container
        // explains. Otherwise the record changed alone (a name, a
        // shared-pool container), and Synchronize gives all of it again
        // after a crash (the runtime's containers, each placed again by an
        // admission that changes nothing): the answer does not wait for the
        // disk, and the next commit (a removal, a placement, Synchronize)
        // writes the record.
        if std::mem::take(&mut self.checkpoints_changed) {
            self.commit_before_answer()?;
            crash_point("nri: state committed, not answered");
        }
        Ok((resources, oom, eval, rebuilt))
    }

    /// `CreateContainer`: the adjustment the policy computes, and updates
    /// moving the shared-pool containers off CPUs it made exclusive.
    pub fn create_container(
        &mut self,
        sandbox: &api::PodSandbox,
        container: &api::Container,
    ) -> Result<(api::ContainerAdjustment, Vec<api::ContainerUpdate>, String)> {
        self.remember_sandbox(sandbox);
        self.remember_container(container);
        let (resources, oom, eval, rebuilt) = self.container_values(sandbox, container, None)?;
        let updates = self.pool_updates(&container.id);
        if !updates.is_empty() {
            self.commit_before_answer()?;
        }
        let written = match self.write_pod_cgroup(sandbox, &eval) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(pod = %pod_label(sandbox), error = %format!("{e:#}"), "pod cgroup values not written");
                0
            }
        };
        let mut linux = api::LinuxContainerAdjustment::new();
        linux.resources = Some(resources).into();
        // Never below what the runtime already set: lowering oom_score_adj
        // needs CAP_SYS_RESOURCE, which a runtime with
        // `restrict_oom_score_adj` lacks (it clamped the kubelet's value up
        // to its own); the container would then fail to start.
        let current = container
            .linux
            .as_ref()
            .and_then(|l| l.oom_score_adj.as_ref())
            .map(|o| o.value);
        let oom_note = match current {
            Some(current) if i64::from(oom) < current => {
                format!(" oom_score_adj_kept={current} (policy {oom})")
            }
            _ => {
                linux.oom_score_adj = Some(api::OptionalInt {
                    value: i64::from(oom),
                    ..Default::default()
                })
                .into();
                String::new()
            }
        };
        let mut adjust = api::ContainerAdjustment::new();
        adjust.linux = Some(linux).into();
        let detail = format!(
            "qos={} source={} pod_files_written={written} shared_pool_updates={}{oom_note}",
            qos_name(eval.qos_class),
            rebuilt.source.as_str(),
            updates.len()
        );
        Ok((adjust, updates, detail))
    }

    /// `UpdateContainer` (an in-place resize): the container's values for
    /// the resources the runtime was asked for.
    pub fn update_container(
        &mut self,
        sandbox: &api::PodSandbox,
        container: &api::Container,
        requested: &api::LinuxResources,
    ) -> Result<(Vec<api::ContainerUpdate>, String)> {
        self.remember_sandbox(sandbox);
        self.remember_container(container);
        let (resources, _, eval, _) = self.container_values(sandbox, container, Some(requested))?;
        if let Some((_, known)) = self.containers.get_mut(&container.id) {
            known.linux.mut_or_insert_default().resources = Some(requested.clone()).into();
        }
        if let Err(e) = self.write_pod_cgroup(sandbox, &eval) {
            tracing::warn!(pod = %pod_label(sandbox), error = %format!("{e:#}"), "pod cgroup values not written");
        }
        let mut update = api::ContainerUpdate::new();
        update.container_id = container.id.clone();
        let mut linux = api::LinuxContainerUpdate::new();
        linux.resources = Some(resources).into();
        update.linux = Some(linux).into();
        Ok((vec![update], format!("qos={}", qos_name(eval.qos_class))))
    }

    /// Release one container's manager state and forget it (`forget`:
    /// RemoveContainer; StopContainer keeps the record). Returns the updates
    /// moving the shared-pool containers onto the CPUs the release gave
    /// back to the pool (the kubelet's reconcile loop does the same).
    pub fn release_container(
        &mut self,
        sandbox: &api::PodSandbox,
        container: &api::Container,
        forget: bool,
    ) -> Result<(Outcome, Vec<api::ContainerUpdate>)> {
        let uid = sandbox.uid.clone();
        let released = self.release_names(&uid, std::iter::once(container.name.clone()))?;
        let mut changed = released;
        if let Some(pod) = self.state.pods.get_mut(&uid)
            && let Some(c) = pod.containers.get_mut(&container.id)
        {
            if forget {
                pod.containers.remove(&container.id);
            } else {
                c.cpus = None;
                c.mems = None;
                c.shared = false;
            }
            changed = true;
        }
        if forget {
            self.containers.remove(&container.id);
        }
        let updates = self.pool_updates(&container.id);
        self.commit()?;
        Ok((
            if changed {
                Outcome::Answered
            } else {
                Outcome::Nothing
            },
            updates,
        ))
    }

    /// Release `names` of pod `uid` from the managers (in memory; the caller commits).
    fn release_names(
        &mut self,
        uid: &str,
        names: impl IntoIterator<Item = String>,
    ) -> Result<bool> {
        let node = self.node.clone();
        let policy = self.slot.current();
        let Some(managers) = self.managers.as_mut() else {
            return Ok(false);
        };
        let before = managers.state.clone();
        let prepared = prepared_node(&mut managers.prepared, &policy, &node, &managers.topology)?;
        for name in names {
            managers.state = prepared
                .release(uid, &name, &managers.state)?
                .map_err(|e| anyhow!("releasing {uid}/{name}: {}", format_field_errors(&e)))?;
        }
        Ok(managers.state != before)
    }

    /// `RunPodSandbox`: the pod cgroup's values, when the pod can be
    /// rebuilt before any container exists (source 1).
    pub fn run_pod_sandbox(&mut self, sandbox: &api::PodSandbox) -> Result<(Outcome, String)> {
        self.remember_sandbox(sandbox);
        let rebuilt = match self.rebuild(sandbox, None, None) {
            Ok(r) => r,
            Err(e) => {
                return Ok((
                    Outcome::Nothing,
                    format!("pod values wait for its first container ({e:#})"),
                ));
            }
        };
        let policy = self.slot.current();
        let (eval, _) = self.evaluate(&policy, &rebuilt)?;
        let n = self.write_pod_cgroup(sandbox, &eval)?;
        Ok((Outcome::Answered, format!("pod_files_written={n}")))
    }

    /// `UpdatePodSandbox` (a pod-level resize, NRI v0.10+): the pod cgroup's
    /// values for the pod's new resources. NRI has no adjustment for a
    /// sandbox: they are written through the one cgroup writer.
    pub fn update_pod_sandbox(
        &mut self,
        sandbox: &api::PodSandbox,
        resources: &api::LinuxResources,
    ) -> Result<(Outcome, String)> {
        self.remember_sandbox(sandbox);
        let rebuilt = self.rebuild(sandbox, None, None)?;
        let rebuilt = pod_from_nri::with_pod_resources(rebuilt, resources)?;
        let policy = self.slot.current();
        let (eval, _) = self.evaluate(&policy, &rebuilt)?;
        let n = self.write_pod_cgroup(sandbox, &eval)?;
        Ok((
            if n > 0 {
                Outcome::Answered
            } else {
                Outcome::Nothing
            },
            format!(
                "qos={} source={} pod_files_written={n}",
                qos_name(eval.qos_class),
                rebuilt.source.as_str()
            ),
        ))
    }

    /// `RemovePodSandbox`: release what the pod still holds and forget it;
    /// the updates move the shared-pool containers onto the CPUs it freed.
    pub fn remove_pod_sandbox(
        &mut self,
        sandbox: &api::PodSandbox,
    ) -> Result<(Outcome, Vec<api::ContainerUpdate>)> {
        let uid = sandbox.uid.clone();
        let mut names: BTreeSet<String> = self
            .state
            .pods
            .get(&uid)
            .map(|p| p.containers.values().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        names.extend(self.manager_holders().remove(&uid).unwrap_or_default());
        let released = self.release_names(&uid, names)?;
        let forgotten = self.state.pods.remove(&uid).is_some();
        self.sandboxes.remove(&sandbox.id);
        self.containers
            .retain(|_, (_, c)| c.pod_sandbox_id != sandbox.id);
        let updates = self.pool_updates("");
        self.commit()?;
        Ok((
            if released || forgotten {
                Outcome::Answered
            } else {
                Outcome::Nothing
            },
            updates,
        ))
    }

    /// Containers holding manager state, by pod UID.
    fn manager_holders(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.managers
            .as_ref()
            .map(|m| crate::admit::manager_holders(&m.state))
            .unwrap_or_default()
    }

    /// `Synchronize`: learn every pod and container, release what no
    /// running container explains (a crash, a missed event), and return the
    /// policy's values for every container, which repairs any drift. Containers not
    /// evaluated by `budget` are left as they run (counted as deferred).
    pub fn synchronize(
        &mut self,
        pods: &[api::PodSandbox],
        containers: &[api::Container],
        budget: std::time::Instant,
    ) -> Result<(Vec<api::ContainerUpdate>, String)> {
        for pod in pods {
            self.remember_sandbox(pod);
        }
        for c in containers {
            self.remember_container(c);
        }
        // Forget what the runtime no longer runs.
        let live: BTreeSet<&str> = containers.iter().map(|c| c.id.as_str()).collect();
        let live_uids: BTreeSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
        let mut stale: Vec<(String, String)> = Vec::new();
        for (uid, pod) in &self.state.pods {
            for (id, c) in &pod.containers {
                if !live.contains(id.as_str()) {
                    stale.push((uid.clone(), c.name.clone()));
                }
            }
        }
        for (uid, names) in self.manager_holders() {
            let recorded: BTreeSet<String> = self
                .state
                .pods
                .get(&uid)
                .map(|p| p.containers.values().map(|c| c.name.clone()).collect())
                .unwrap_or_default();
            for name in names {
                if !live_uids.contains(uid.as_str()) || !recorded.contains(&name) {
                    stale.push((uid.clone(), name));
                }
            }
        }
        stale.sort();
        stale.dedup();
        let mut released = 0;
        for (uid, name) in &stale {
            if self.release_names(uid, std::iter::once(name.clone()))? {
                released += 1;
            }
        }
        for pod in self.state.pods.values_mut() {
            pod.containers.retain(|id, _| live.contains(id.as_str()));
        }
        self.state
            .pods
            .retain(|uid, p| live_uids.contains(uid.as_str()) || !p.containers.is_empty());
        self.commit()?;
        let mut updates = Vec::new();
        let mut failed = 0;
        let mut deferred = 0;
        let mut drifted_records = 0;
        let by_id: HashMap<&str, &api::PodSandbox> =
            pods.iter().map(|p| (p.id.as_str(), p)).collect();
        for c in containers {
            let Some(sandbox) = by_id.get(c.pod_sandbox_id.as_str()) else {
                continue;
            };
            if std::time::Instant::now() > budget {
                deferred += 1;
                continue;
            }
            match self.container_values(sandbox, c, None) {
                Ok((desired, _, _, _)) => {
                    // Every evaluated container gets its values again: the
                    // runtime's record shows what it last asked for, not a
                    // cgroup file changed behind its back, so drift cannot
                    // be seen from here; re-applying is idempotent.
                    let current = c.linux.as_ref().and_then(|l| l.resources.as_ref());
                    if drifted(current, &desired) {
                        drifted_records += 1;
                    }
                    let mut update = api::ContainerUpdate::new();
                    update.container_id = c.id.clone();
                    let mut linux = api::LinuxContainerUpdate::new();
                    linux.resources = Some(desired).into();
                    update.linux = Some(linux).into();
                    update.ignore_failure = true;
                    updates.push(update);
                }
                Err(e) => {
                    failed += 1;
                    tracing::warn!(pod = %pod_label(sandbox), container = %c.name, error = %format!("{e:#}"), "synchronize: left as the runtime runs it");
                }
            }
        }
        // Containers placed later in this pass shrank the pool the earlier
        // shared-pool containers were answered with: all of them get the
        // pool as it is at the end.
        if let Some(pool) = self.shared_pool() {
            for update in &mut updates {
                let shared = self.state.pods.values_mut().find_map(|p| {
                    p.containers
                        .get_mut(&update.container_id)
                        .filter(|c| c.shared)
                });
                if let Some(record) = shared {
                    record.cpus = Some(pool.clone());
                    let resources = update
                        .linux
                        .mut_or_insert_default()
                        .resources
                        .mut_or_insert_default();
                    resources.cpu.mut_or_insert_default().cpus = pool.clone();
                }
            }
        }
        // The record of every answered container (without the managers,
        // the answers above did not commit it).
        self.commit()?;
        Ok((
            updates.clone(),
            format!(
                "pods={} containers={} updates={} (runtime record differs: {drifted_records}) released={released} unanswered={failed} deferred={deferred}",
                pods.len(),
                containers.len(),
                updates.len()
            ),
        ))
    }
}
