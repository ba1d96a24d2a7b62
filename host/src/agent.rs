//! `podpolicy agent`: the long-running node agent.
//!
//! It watches a directory of pod manifests and reconciles the cgroup tree
//! with them: every pod is validated, defaulted and evaluated through the
//! serving policy (one pod's failure never blocks the others), admitted by
//! the resource managers when a static CPU or memory manager is configured,
//! and its files are planned and written by [`crate::apply`]. A pod whose
//! manifest disappears has its manager state released and its cgroups
//! removed once no process runs in them. Policy versions come and go
//! through [`crate::policy_dir`] without a restart.
//!
//! State that must survive a restart lives in `--state-dir`: the managers'
//! checkpoints ([`crate::checkpoint`]) and `agent_state.json` (the pods this
//! agent applied, so it only ever removes cgroups it created). Every file is
//! written atomically.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use crate::apply::{ApplyOptions, apply_explained};
use crate::bindings::{
    Admission, CgroupFileName, CgroupValue, CpuIsolation, ManagerState, NodeSettings, NodeTopology,
    Pod,
};
use crate::cgroupfs::{self, CgroupPath, CgroupRoot, CgroupValues, Removal};
use crate::evaluation::{Evaluations, PodOutcome};
use crate::metrics::{AllocationLabels, AssignmentLabels, CgroupLabels, Metrics, ResourceLabels};
use crate::pod_input::PodDocument;
use crate::policy_dir::{PolicyDirServer, ShadowReport};
use crate::runtime::{Cache, Limits, PolicyRuntime, PreparedPolicy};
use crate::state_dir::{StateDir, crash_point};
use crate::swap::{Heartbeat, PolicySlot, short};
use crate::{PolicyResult, checkpoint, format_field_errors};

/// Everything the agent is configured with.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// The directory of pod manifests (`*.yaml`, `*.yml`, `*.json`).
    pub pods_dir: PathBuf,
    /// The node's settings.
    pub node: NodeSettings,
    /// Where and how to write (its `pids` and `dry_run` are not used).
    pub apply: ApplyOptions,
    /// Checkpoints and `agent_state.json`.
    pub state_dir: PathBuf,
    /// Policy versions to hot swap (see [`crate::policy_dir`]).
    pub policy_dir: Option<PathBuf>,
    /// The sysfs root the topology is read from (static managers only).
    pub sysfs_root: PathBuf,
    /// Reconcile at least this often, changes or not.
    pub resync: Duration,
    /// Compiled-policy cache.
    pub cache: Cache,
    /// Sandbox limits per call.
    pub limits: Limits,
}

/// One pod this agent applied, as persisted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedPod {
    /// `namespace/name`.
    pub pod: String,
    /// Its cgroups, as paths below the root, pod cgroup first.
    pub cgroups: Vec<String>,
    /// Its containers (released one by one from the managers).
    pub containers: Vec<String>,
    /// Whether the resource managers hold state for it.
    pub managed: bool,
}

/// `agent_state.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentState {
    /// Applied pods by UID.
    pub pods: BTreeMap<String, AppliedPod>,
}

/// What identifies one version of a manifest file: inode, size, and
/// modification and change times in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileSignature(u64, u64, i64, i64, i64, i64);

impl FileSignature {
    fn of(path: &Path) -> Option<FileSignature> {
        use std::os::unix::fs::MetadataExt as _;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(FileSignature(
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        ))
    }
}

/// What one reconcile pass did (also written to `agent_status.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileReport {
    /// Digest of the policy that decided.
    pub policy_digest: String,
    /// Its version string.
    pub policy_version: String,
    /// Whether its compiled code came from the on-disk cache.
    pub policy_from_cache: bool,
    /// Pods in the manifests.
    pub pods: usize,
    /// Pods whose cgroups match the policy's answer.
    pub applied: Vec<String>,
    /// Pods whose cgroups could not be planned or written, with why (the
    /// other pods were still written).
    pub failed: Vec<String>,
    /// Pods the policy or the managers rejected, with why.
    pub rejected: Vec<String>,
    /// Pods or files that could not be evaluated (bad manifest, failed
    /// policy call, failed sanity check), with why: nothing was written for them.
    pub errors: Vec<String>,
    /// Files written in this pass.
    pub writes: usize,
    /// Pods removed (cgroups gone, manager state released).
    pub removed: Vec<String>,
    /// Pods gone from the manifests whose cgroups still hold processes.
    pub removal_pending: Vec<String>,
    /// Milliseconds from agent start to the end of its first pass.
    pub first_decision_ms: Option<u64>,
}

/// The resource managers' side, when a static policy is configured.
struct Managers {
    topology: NodeTopology,
    state: ManagerState,
    admissions: BTreeMap<String, Admission>,
    /// The node prepared with its topology in a warm instance: every
    /// admission of a poll sends only the pod and the state.
    prepared: Option<PreparedPolicy>,
}

/// The node agent.
pub struct Agent {
    options: AgentOptions,
    /// The state directory, locked for the agent's whole life.
    state_dir: StateDir,
    slot: Arc<PolicySlot>,
    policy_dir: Option<PolicyDirServer>,
    metrics: Arc<Metrics>,
    state: AgentState,
    /// The last manifests of each file that parsed (a file caught half
    /// written keeps its previous pods instead of looking deleted).
    last_good: BTreeMap<PathBuf, Vec<PodDocument>>,
    /// Files that dropped pods in the last pass, by content signature: the
    /// drop is believed only when the next pass reads the same file again.
    unsettled: BTreeMap<PathBuf, FileSignature>,
    /// The last status written (unchanged passes write nothing).
    last_status: Option<Vec<u8>>,
    /// Whether the first pass (which also frees what a crash leaked) ran.
    recovered: bool,
    /// A manifest is unsettled: reconcile again soon, not at the resync.
    recheck_soon: bool,
    /// Beaten on every turn of the loop: a pass stuck in a read, a write or
    /// a call stops it, and `/healthz` says so.
    heartbeat: Arc<Heartbeat>,
    /// The files of the last commit (an unchanged pass commits nothing).
    committed: Option<Vec<(&'static str, Vec<u8>)>>,
    managers: Option<Managers>,
    /// The node prepared (without a topology) in a warm instance for each
    /// pass's validate-default-evaluate: only the pods cross.
    evaluator: Option<PreparedPolicy>,
    started: Instant,
    first_decision: Option<Duration>,
}

/// An `admit` answer, or `None` with the failure (a failed call, or field
/// errors) reported for `pod`.
fn admission_or_report(
    answer: Result<crate::PolicyResult<Admission>>,
    pod: &str,
    report: &mut ReconcileReport,
) -> Option<Admission> {
    match answer {
        Ok(Ok(admission)) => Some(admission),
        Ok(Err(errors)) => {
            report.errors.push(format!(
                "{pod}: the managers could not evaluate the pod: {}",
                format_field_errors(&errors)
            ));
            None
        }
        Err(e) => {
            report.errors.push(format!("{pod}: {e:#}"));
            None
        }
    }
}

fn pod_name(pod: &Pod) -> String {
    if pod.namespace.is_empty() {
        pod.name.clone()
    } else {
        format!("{}/{}", pod.namespace, pod.name)
    }
}

impl Agent {
    /// Start: load the serving policy (from `slot`), restore the policy
    /// directory's active version, the agent state and the checkpoints.
    /// `started` is when the process started (for the time to first decision).
    pub fn start(
        options: AgentOptions,
        slot: Arc<PolicySlot>,
        metrics: Arc<Metrics>,
        started: Instant,
    ) -> Result<Agent> {
        // One agent (or admit / release) per state directory at a time.
        let state_dir = StateDir::lock(&options.state_dir, crate::state_dir::DEFAULT_LOCK_WAIT)?;
        let policy_dir = match &options.policy_dir {
            Some(dir) => Some(PolicyDirServer::start(
                dir,
                &slot,
                options.cache.clone(),
                options.limits,
            )?),
            None => None,
        };
        let policy = slot.current();
        metrics.set_policy(&policy.info().policy_version, policy.digest());
        let state = read_agent_state(&options.state_dir)?;
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
                admissions: BTreeMap::new(),
                prepared: None,
            })
        } else {
            None
        };
        for warning in node_warnings(&policy, &options.node) {
            tracing::warn!("{warning}");
        }
        Ok(Agent {
            options,
            state_dir,
            slot,
            policy_dir,
            metrics,
            state,
            last_good: BTreeMap::new(),
            unsettled: BTreeMap::new(),
            last_status: None,
            recovered: false,
            recheck_soon: false,
            heartbeat: Arc::new(Heartbeat::new()),
            committed: None,
            managers,
            evaluator: None,
            started,
            first_decision: None,
        })
    }

    /// The serving policy slot.
    pub fn slot(&self) -> &Arc<PolicySlot> {
        &self.slot
    }

    /// The pods this agent has applied.
    pub fn state(&self) -> &AgentState {
        &self.state
    }

    /// Read every manifest; a file that fails to parse keeps its last good
    /// pods and is reported. A file that parses but no longer holds a pod it
    /// held (a half-written file, a multi-document file cut at `---`) keeps
    /// its last good pods until a pass reads it again unchanged: a pod goes
    /// away only when its manifest is gone or a complete, stable file no
    /// longer holds it. Returns the pods and whether a file is unsettled
    /// (the caller reconciles again soon).
    fn read_manifests(&mut self, errors: &mut Vec<String>) -> Result<(Vec<PodDocument>, bool)> {
        let dir = &self.options.pods_dir;
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading the pods directory {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                    && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
            })
            .collect();
        files.sort();
        let present: BTreeSet<&PathBuf> = files.iter().collect();
        self.last_good.retain(|path, _| present.contains(path));
        self.unsettled.retain(|path, _| present.contains(path));
        let mut docs = Vec::new();
        let mut unsettled = false;
        for file in &files {
            // Static pod manifests, read as the kubelet reads them: unknown
            // fields are tolerated (a warning), and a pod gets the kubelet's
            // static-pod name, annotations and uid form for this node.
            let options = crate::pod_input::ReadOptions {
                recursive: false,
                unknown_fields: crate::pod_input::UnknownFields::Warn,
                node_name: Some(self.options.node.name.clone()).filter(|n| !n.is_empty()),
            };
            let signature = FileSignature::of(file);
            match crate::pod_input::read_pods_with(file, &options) {
                Ok(read) => {
                    for warning in &read.warnings {
                        tracing::warn!("{warning}");
                    }
                    let mut pods = read.docs;
                    for doc in &mut pods {
                        if doc.pod.uid.is_empty() {
                            doc.pod.uid = static_pod_uid(&doc.pod, &self.options.node.name);
                        }
                    }
                    let uids: BTreeSet<&str> = pods.iter().map(|d| d.pod.uid.as_str()).collect();
                    let drops = self.last_good.get(file).is_some_and(|before| {
                        before.iter().any(|d| !uids.contains(d.pod.uid.as_str()))
                    });
                    let settled = signature.is_some()
                        && signature == FileSignature::of(file)
                        && self.unsettled.get(file) == signature.as_ref();
                    if drops && !settled {
                        // Believe the drop only if the next pass reads the
                        // very same file.
                        if let Some(signature) = signature {
                            self.unsettled.insert(file.clone(), signature);
                        }
                        unsettled = true;
                        let mut kept = self.last_good[file].clone();
                        for doc in pods {
                            if !kept.iter().any(|d| d.pod.uid == doc.pod.uid) {
                                kept.push(doc);
                            }
                        }
                        docs.extend(kept);
                        continue;
                    }
                    self.unsettled.remove(file);
                    self.last_good.insert(file.clone(), pods.clone());
                    docs.extend(pods);
                }
                Err(e) => {
                    errors.push(format!("{e:#}"));
                    docs.extend(self.last_good.get(file).cloned().unwrap_or_default());
                }
            }
        }
        Ok((docs, unsettled))
    }

    /// Handle the policy directory's requests and candidates once, without
    /// waiting for a candidate being vetted (a later call swaps it in).
    pub fn poll_policy_dir(&mut self) -> Result<()> {
        self.policy_dir_step(None)
    }

    /// Like [`Agent::poll_policy_dir`], but wait up to `timeout` for the
    /// candidates being vetted (`agent --once`).
    pub fn settle_policy_dir(&mut self, timeout: Duration) -> Result<()> {
        self.policy_dir_step(Some(timeout))
    }

    /// The agent loop's liveness, for `/healthz`.
    pub fn heartbeat(&self) -> Arc<Heartbeat> {
        self.heartbeat.clone()
    }

    fn policy_dir_step(&mut self, settle: Option<Duration>) -> Result<()> {
        let Some(server) = self.policy_dir.as_mut() else {
            return Ok(());
        };
        // Shadow-evaluate the pods of the last pass (what the node runs).
        let docs: Vec<PodDocument> = self.last_good.values().flatten().cloned().collect();
        let node = self.options.node.clone();
        let vet = |candidate: &PolicyRuntime, serving: &PolicyRuntime| -> Result<ShadowReport> {
            crate::policy_dir::vet(candidate, serving, &docs, &node)
        };
        let outcome = match settle {
            None => server.poll(&self.slot, &vet)?,
            Some(timeout) => server.settle(&self.slot, &vet, timeout)?,
        };
        self.metrics.record_poll(&outcome, &self.slot.current());
        Ok(())
    }

    /// One reconcile pass.
    pub fn reconcile(&mut self) -> Result<ReconcileReport> {
        let result = self.reconcile_inner();
        Metrics::count(
            &self.metrics.reconciles,
            if result.is_ok() { "ok" } else { "error" },
        );
        if self.first_decision.is_none() && result.is_ok() {
            self.first_decision = Some(self.started.elapsed());
        }
        // A failed pass is reported in the status file too (nothing was
        // written: every failure before the writes stops the pass).
        let (mut report, error) = match result {
            Ok(report) => (report, None),
            Err(e) => {
                let policy = self.slot.current();
                let report = ReconcileReport {
                    policy_digest: policy.digest().to_string(),
                    policy_version: policy.info().policy_version.clone(),
                    policy_from_cache: policy.compiled_from_cache(),
                    errors: vec![format!("{e:#}")],
                    ..ReconcileReport::default()
                };
                (report, Some(e))
            }
        };
        report.first_decision_ms = self.first_decision.map(|d| d.as_millis() as u64);
        // The status is rewritten only when it says something new.
        let bytes = serde_json::to_vec_pretty(&report)?;
        if self.last_status.as_ref() != Some(&bytes) {
            checkpoint::write_atomically(
                &self.options.state_dir.join("agent_status.json"),
                &bytes,
            )?;
            self.last_status = Some(bytes);
        }
        match error {
            Some(e) => Err(e),
            None => Ok(report),
        }
    }

    fn reconcile_inner(&mut self) -> Result<ReconcileReport> {
        // One version decides the whole pass, even if a swap lands meanwhile.
        let policy = self.slot.current();
        let node = self.options.node.clone();
        let mut report = ReconcileReport {
            policy_digest: policy.digest().to_string(),
            policy_version: policy.info().policy_version.clone(),
            policy_from_cache: policy.compiled_from_cache(),
            ..ReconcileReport::default()
        };
        let (docs, unsettled) = self.read_manifests(&mut report.errors)?;
        self.recheck_soon = unsettled;
        report.pods = docs.len();

        // Evaluate each pod on its own.
        let mut present = BTreeSet::new();
        let mut admitted: Vec<(PodDocument, PodOutcome)> = Vec::new();
        for doc in docs {
            let name = pod_name(&doc.pod);
            if !present.insert(doc.pod.uid.clone()) {
                report.errors.push(format!(
                    "{name} ({}): metadata.uid `{}` is used by another pod too",
                    doc.origin,
                    doc.pod.uid.escape_debug()
                ));
                continue;
            }
            let began = Instant::now();
            let evaluated =
                match PreparedPolicy::reuse_or_prepare(&mut self.evaluator, &policy, &node, None) {
                    Ok(Ok(prepared)) => crate::explain_prepared(prepared, &doc),
                    Ok(Err(errors)) => Err(anyhow!(
                        "the policy cannot evaluate pods on this node: {}",
                        format_field_errors(&errors)
                    )),
                    Err(e) => Err(e),
                };
            self.metrics
                .evaluation_duration
                .observe(began.elapsed().as_secs_f64());
            match evaluated {
                Err(e) => {
                    Metrics::count(&self.metrics.evaluations, "error");
                    report
                        .errors
                        .push(format!("{name} ({}): {e:#}", doc.origin));
                }
                Ok(outcome) => match outcome.evaluated() {
                    None => {
                        Metrics::count(&self.metrics.evaluations, "rejected");
                        report
                            .rejected
                            .push(format!("{name}: {}", outcome.refusals().join("; ")));
                    }
                    Some(evaluated) => {
                        Metrics::count(&self.metrics.evaluations, "ok");
                        // The host's sanity checks, per pod, before any write.
                        match crate::apply::check_pod_output(&doc, evaluated, &node) {
                            Ok(()) => admitted.push((doc, outcome)),
                            Err(e) => report
                                .errors
                                .push(format!("{name} ({}): {e:#}", doc.origin)),
                        }
                    }
                },
            }
        }

        // The first pass frees manager state no recorded pod explains (a
        // crash of an older version, or `admit` run on this directory).
        if !self.recovered {
            self.release_unrecorded(&policy, &present, &mut report)?;
            self.recovered = true;
        }

        // The resource managers, for pods they have not admitted yet: the
        // new state is only committed below, with the agent state.
        let mut extra = Vec::new();
        let mut manager_state = self.managers.as_ref().map(|m| m.state.clone());
        if self.managers.is_some() {
            admitted = self.admit_all(
                &policy,
                admitted,
                &mut report,
                &mut extra,
                &mut manager_state,
            )?;
        }

        // Node-level values over the admitted pods.
        let pods: Vec<Pod> = admitted
            .iter()
            .filter_map(|(_, o)| o.evaluated().map(|e| e.defaulted.clone()))
            .collect();
        let node_qos = match policy.node_cgroups(&pods, &node)? {
            Ok(values) => values,
            Err(errors) => {
                return Err(anyhow!(
                    "node-level evaluation failed:\n{}",
                    format_field_errors(&errors)
                ));
            }
        };
        let (docs, outcomes): (Vec<PodDocument>, Vec<PodOutcome>) = admitted.into_iter().unzip();
        let full = Evaluations {
            pods: outcomes,
            node: node_qos,
        };

        // Intent first: every cgroup this pass may create is recorded as the
        // pod's (with the cgroups recorded before, until they are removed)
        // in the same commit as the managers' new state, before any write.
        // A crash after it leaves nothing unowned; a crash before it, nothing
        // changed.
        let paths = crate::apply::pod_cgroup_paths(&docs, &full, &node);
        let mut intended = self.state.clone();
        for (doc, outcome) in docs.iter().zip(&full.pods) {
            let Some(evaluated) = outcome.evaluated() else {
                continue;
            };
            let uid = &doc.pod.uid;
            let mut cgroups: Vec<String> = paths
                .get(uid)
                .map(|p| p.iter().map(cgroup_text).collect())
                .unwrap_or_default();
            if let Some(before) = self.state.pods.get(uid) {
                for old in &before.cgroups {
                    if !cgroups.contains(old) {
                        cgroups.push(old.clone());
                    }
                }
            }
            let managed = self
                .managers
                .as_ref()
                .is_some_and(|m| m.admissions.contains_key(uid))
                || self.state.pods.get(uid).is_some_and(|p| p.managed);
            intended.pods.insert(
                uid.clone(),
                AppliedPod {
                    pod: outcome.name.clone(),
                    cgroups,
                    containers: evaluated
                        .containers()
                        .iter()
                        .map(|c| c.name.clone())
                        .collect(),
                    managed,
                },
            );
        }
        self.commit(&intended, manager_state.as_ref())?;
        crash_point("agent: intent committed, cgroups not written");

        // Then the writes: every owner (the node, each pod) on its own.
        let apply_options = ApplyOptions {
            dry_run: false,
            pids: Vec::new(),
            ..self.options.apply.clone()
        };
        let applied = apply_explained(&docs, &full, &node, &apply_options, &extra)?;
        crash_point("agent: cgroups written");
        report.writes = applied.applied;
        self.metrics.cgroup_writes.inc_by(applied.applied as u64);
        let root = CgroupRoot::open(&self.options.apply.cgroup_root)?;
        self.metrics.pod_applied.clear();
        for result in &applied.results {
            if result.uid.is_some() {
                self.metrics
                    .pod_applied
                    .get_or_create(&crate::metrics::PodLabels {
                        pod: result.owner.clone(),
                    })
                    .set(i64::from(result.error.is_none()));
            }
            match (&result.uid, &result.error) {
                (Some(_), None) => report.applied.push(result.owner.clone()),
                (Some(_), Some(error)) => report.failed.push(error.clone()),
                (None, Some(error)) => report.errors.push(format!("writing cgroups: {error}")),
                (None, None) => {}
            }
        }
        // Cgroups a pod no longer uses (its QoS class changed): removed once
        // empty, then forgotten.
        for (uid, pod) in intended.pods.iter_mut() {
            let Some(current) = paths.get(uid) else {
                continue;
            };
            let current: Vec<String> = current.iter().map(cgroup_text).collect();
            let mut stale: Vec<CgroupPath> = Vec::new();
            for text in pod.cgroups.iter().filter(|c| !current.contains(c)) {
                stale.push(CgroupPath::parse("agent_state.json cgroup", text)?);
            }
            stale.sort_by_key(|p| std::cmp::Reverse(p.depth()));
            for path in stale {
                match cgroupfs::remove(&root, &path) {
                    Ok(Removal::Removed) => {
                        let text = cgroup_text(&path);
                        pod.cgroups.retain(|c| *c != text);
                    }
                    Ok(Removal::Busy { dir }) => report.removal_pending.push(format!(
                        "{}: processes still run in {} (its old cgroup)",
                        pod.pod,
                        dir.display()
                    )),
                    Err(e) => report.errors.push(format!("{}: {e}", pod.pod)),
                }
            }
        }
        self.state = intended;
        if let (Some(managers), Some(state)) = (self.managers.as_mut(), manager_state) {
            managers.state = state;
        }
        self.update_memory_metrics(&root, &docs, &full);

        // Pods gone from the manifests.
        let gone: Vec<String> = self
            .state
            .pods
            .keys()
            .filter(|uid| !present.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            self.remove_pod(&policy, &root, &uid, &mut report)?;
        }
        let state = self.state.clone();
        let manager_state = self.managers.as_ref().map(|m| m.state.clone());
        self.commit(&state, manager_state.as_ref())?;
        Ok(report)
    }

    /// Commit the agent state and, with managers, their checkpoints, as one
    /// step; nothing is written when neither changed.
    fn commit(&mut self, state: &AgentState, managers: Option<&ManagerState>) -> Result<()> {
        let mut files = vec![("agent_state.json", serde_json::to_vec_pretty(state)?)];
        if let Some(managers) = managers {
            files.extend(checkpoint::files(managers)?);
        }
        if self.committed.as_ref() == Some(&files) {
            return Ok(());
        }
        self.state_dir
            .commit(&files)
            .context("committing the agent state and the manager checkpoints")?;
        self.committed = Some(files);
        Ok(())
    }

    /// Release the manager state of pods that no recorded pod and no
    /// manifest explains (see [`Agent::reconcile_inner`]).
    fn release_unrecorded(
        &mut self,
        policy: &Arc<PolicyRuntime>,
        present: &BTreeSet<String>,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let Some(managers) = self.managers.as_mut() else {
            return Ok(());
        };
        let holders = crate::admit::manager_holders(&managers.state);
        let mut state = managers.state.clone();
        for (uid, containers) in holders {
            if present.contains(&uid) || self.state.pods.contains_key(&uid) {
                continue;
            }
            state = release_containers(
                &mut managers.prepared,
                policy,
                &managers.topology,
                &self.options.node,
                state,
                &uid,
                &uid,
                &containers,
            )?;
            let still_held = state.cpu.pod_entries.iter().any(|p| p.pod_uid == uid)
                || state.memory.pod_entries.iter().any(|p| p.pod_uid == uid)
                || state.cpu.entries.iter().any(|p| p.pod_uid == uid)
                || state.memory.entries.iter().any(|p| p.pod_uid == uid);
            if still_held {
                report.errors.push(format!(
                    "pod uid {uid}: holds manager state that no manifest and no recorded pod explains, and no container of it is known to release it"
                ));
            } else {
                tracing::warn!(uid = %uid, "released manager state no pod explains (left by a crash, or by admit on this state directory)");
                report
                    .removed
                    .push(format!("uid {uid} (unrecorded manager state)"));
            }
        }
        if state != managers.state {
            let files = checkpoint::files(&state)?;
            let mut all = vec![("agent_state.json", serde_json::to_vec_pretty(&self.state)?)];
            all.extend(files);
            self.state_dir
                .commit(&all)
                .context("committing the released manager state")?;
            managers.state = state;
        }
        Ok(())
    }

    fn admit_all(
        &mut self,
        policy: &Arc<PolicyRuntime>,
        admitted: Vec<(PodDocument, PodOutcome)>,
        report: &mut ReconcileReport,
        extra: &mut Vec<CgroupValues>,
        new_state: &mut Option<ManagerState>,
    ) -> Result<Vec<(PodDocument, PodOutcome)>> {
        let node = self.options.node.clone();
        let (Some(managers), Some(state)) = (self.managers.as_mut(), new_state.as_mut()) else {
            return Ok(admitted);
        };
        let mut kept = Vec::new();
        for (doc, outcome) in admitted {
            let Some(evaluated) = outcome.evaluated() else {
                continue;
            };
            let pod = &evaluated.defaulted;
            let uid = pod.uid.clone();
            if !managers.admissions.contains_key(&uid) {
                let began = Instant::now();
                let answer = admit_prepared(
                    &mut managers.prepared,
                    policy,
                    &node,
                    &managers.topology,
                    pod,
                    state,
                );
                self.metrics
                    .admission_duration
                    .observe(began.elapsed().as_secs_f64());
                let Some(admission) = admission_or_report(answer, &outcome.name, report) else {
                    continue;
                };
                if let Some(rejection) = &admission.rejection {
                    for resource in ["cpu", "memory"] {
                        self.metrics
                            .allocation_errors
                            .get_or_create(&ResourceLabels {
                                resource_name: resource.into(),
                            })
                            .inc();
                    }
                    report.rejected.push(format!(
                        "{}: {}: {}",
                        outcome.name,
                        rejection.reason(),
                        rejection.message
                    ));
                    continue;
                }
                // Check the cpusets (non-empty, inside the topology) before
                // the state that implies them is kept.
                let qos = evaluated.evaluation.qos_class;
                if let Err(e) =
                    crate::admit::cpuset_values(&admission, pod, qos, &node, &managers.topology)
                {
                    report.errors.push(format!("{}: {e:#}", outcome.name));
                    continue;
                }
                *state = admission.state.clone();
                let source = if admission.assignment.pod_cpuset.is_some() {
                    "pod"
                } else {
                    "container"
                };
                if admission
                    .assignment
                    .containers
                    .iter()
                    .any(|c| c.cpuset.is_some())
                    || admission.assignment.pod_cpuset.is_some()
                {
                    self.metrics
                        .allocations
                        .get_or_create(&AllocationLabels {
                            resource_name: "cpu".into(),
                            source: source.into(),
                        })
                        .inc();
                }
                if admission
                    .assignment
                    .containers
                    .iter()
                    .any(|c| !c.memory.is_empty())
                {
                    self.metrics
                        .allocations
                        .get_or_create(&AllocationLabels {
                            resource_name: "memory".into(),
                            source: source.into(),
                        })
                        .inc();
                }
                managers.admissions.insert(uid.clone(), admission);
            }
            kept.push((doc, outcome));
        }
        // Every admitted pod's files from the final state (admitting an
        // admitted pod again changes nothing), so shared-pool containers get
        // the node's current shared pool, as `apply` and `explain` compute it.
        let mut placed = Vec::new();
        for (doc, outcome) in kept {
            let Some(evaluated) = outcome.evaluated() else {
                continue;
            };
            let pod = &evaluated.defaulted;
            let answer = admit_prepared(
                &mut managers.prepared,
                policy,
                &node,
                &managers.topology,
                pod,
                state,
            );
            let Some(admission) = admission_or_report(answer, &outcome.name, report) else {
                continue;
            };
            if let Some(r) = &admission.rejection {
                report.errors.push(format!(
                    "{}: no longer admitted on the current manager state: {}: {}",
                    outcome.name,
                    r.reason(),
                    r.message
                ));
                continue;
            }
            let qos = evaluated.evaluation.qos_class;
            match crate::admit::cpuset_values(&admission, pod, qos, &node, &managers.topology) {
                Ok(values) => extra.extend(values),
                Err(e) => {
                    report.errors.push(format!("{}: {e:#}", outcome.name));
                    continue;
                }
            }
            placed.push((doc, outcome));
        }
        self.update_assignment_metrics();
        Ok(placed)
    }

    fn update_assignment_metrics(&self) {
        let Some(managers) = &self.managers else {
            return;
        };
        let mut counts: BTreeMap<&str, i64> =
            [("exclusive", 0), ("pod_shared", 0), ("node_shared", 0)].into();
        for admission in managers.admissions.values() {
            for c in &admission.assignment.containers {
                let kind = match c.cpu_isolation {
                    CpuIsolation::Container => "exclusive",
                    CpuIsolation::Pod => "pod_shared",
                    CpuIsolation::Host => "node_shared",
                };
                *counts.entry(kind).or_default() += 1;
            }
        }
        for (kind, n) in counts {
            self.metrics
                .container_assignments
                .get_or_create(&AssignmentLabels {
                    assignment_type: kind.into(),
                })
                .set(n);
        }
    }

    fn update_memory_metrics(
        &self,
        root: &CgroupRoot,
        docs: &[PodDocument],
        evaluations: &Evaluations,
    ) {
        self.metrics.memory_min_bytes.clear();
        self.metrics.memory_high_bytes.clear();
        let driver = self.options.node.cgroup_driver;
        for (doc, outcome) in docs.iter().zip(&evaluations.pods) {
            let Some(evaluated) = outcome.evaluated() else {
                continue;
            };
            let qos = evaluated.evaluation.qos_class;
            let Ok(pod_path) = cgroupfs::pod(driver, qos, &doc.pod.uid) else {
                continue;
            };
            let mut owners = vec![(
                String::new(),
                pod_path.clone(),
                evaluated.evaluation.pod_cgroup_files.as_slice(),
            )];
            for c in evaluated.containers() {
                if let Ok(path) = cgroupfs::container(&pod_path, "container", &c.name) {
                    owners.push((c.name.clone(), path, c.cgroup_files.as_slice()));
                }
            }
            for (container, path, files) in owners {
                let labels = CgroupLabels {
                    pod: outcome.name.clone(),
                    container,
                };
                let number = |file: CgroupFileName| {
                    files
                        .iter()
                        .find(|f| f.file == file)
                        .and_then(|f| match f.value {
                            CgroupValue::Number(n) => i64::try_from(n).ok(),
                            _ => None,
                        })
                };
                if let Some(min) = number(CgroupFileName::MemoryMin) {
                    self.metrics
                        .memory_min_bytes
                        .get_or_create(&labels)
                        .set(min);
                }
                if let Some(high) = number(CgroupFileName::MemoryHigh) {
                    self.metrics
                        .memory_high_bytes
                        .get_or_create(&labels)
                        .set(high);
                }
                if let Some(high_events) =
                    read_memory_events(root, &path.dir_in(root.dir())).get("high")
                {
                    Metrics::set_counter(
                        &self.metrics.throttle_events.get_or_create(&labels),
                        *high_events,
                    );
                }
            }
        }
    }

    /// Remove a pod gone from the manifests: its cgroups (children first,
    /// never while a process runs in them), then its manager state, in
    /// memory; the caller commits the agent state and the checkpoints
    /// together. A crash in between leaves the pod recorded, and the next
    /// pass removes it again (a missing cgroup counts as removed).
    fn remove_pod(
        &mut self,
        policy: &Arc<PolicyRuntime>,
        root: &CgroupRoot,
        uid: &str,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let Some(applied) = self.state.pods.get(uid).cloned() else {
            return Ok(());
        };
        // Cgroups first: the managers' CPUs may only go back to the shared
        // pool once nothing runs on them.
        let mut paths = Vec::new();
        for text in &applied.cgroups {
            paths.push(CgroupPath::parse("agent_state.json cgroup", text)?);
        }
        paths.sort_by_key(|p| std::cmp::Reverse(p.depth()));
        for path in &paths {
            match cgroupfs::remove(root, path)? {
                Removal::Removed => crash_point("agent: a removed pod's cgroup is gone"),
                Removal::Busy { dir } => {
                    report.removal_pending.push(format!(
                        "{}: processes still run in {}",
                        applied.pod,
                        dir.display()
                    ));
                    return Ok(());
                }
            }
        }
        if let Some(managers) = self.managers.as_mut()
            && (applied.managed || managers.admissions.contains_key(uid))
        {
            managers.state = release_containers(
                &mut managers.prepared,
                policy,
                &managers.topology,
                &self.options.node,
                managers.state.clone(),
                uid,
                &applied.pod,
                &applied.containers,
            )?;
            managers.admissions.remove(uid);
        }
        self.state.pods.remove(uid);
        report.removed.push(applied.pod);
        self.update_assignment_metrics();
        Ok(())
    }

    /// Run until `stop` is set: reconcile when the pods or policy directory
    /// change (inotify through `notify`) and every `resync` anyway.
    pub fn run(&mut self, stop: &AtomicBool, wake: mpsc::Receiver<()>) -> Result<()> {
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher = {
            let tx = tx.clone();
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok_and(|e| is_change(&e.kind)) {
                    let _ = tx.send(());
                }
            })
            .context("starting the file watcher")?
        };
        use notify::Watcher as _;
        watcher
            .watch(&self.options.pods_dir, notify::RecursiveMode::NonRecursive)
            .with_context(|| format!("watching {}", self.options.pods_dir.display()))?;
        if let Some(dir) = &self.options.policy_dir {
            watcher
                .watch(dir, notify::RecursiveMode::Recursive)
                .with_context(|| format!("watching {}", dir.display()))?;
        }
        // A vetted candidate is swapped in at once, not at the next resync.
        if let Some(server) = self.policy_dir.as_mut() {
            let tx = tx.clone();
            server.set_waker(move || {
                let _ = tx.send(());
            });
        }
        // Signals and other wake-ups arrive on `wake`; forward them.
        std::thread::spawn(move || {
            while wake.recv().is_ok() {
                if tx.send(()).is_err() {
                    break;
                }
            }
        });
        while !stop.load(Ordering::SeqCst) {
            self.heartbeat.beat();
            self.reconcile_and_log();
            self.heartbeat.beat();
            let before = self.slot.current().digest().to_string();
            if let Err(e) = self.poll_policy_dir() {
                tracing::error!(error = %format!("{e:#}"), "policy directory");
            }
            if self.slot.current().digest() != before {
                // A new version decides again at once.
                self.reconcile_and_log();
            }
            // Wait for a change, then let a burst of events settle. A
            // manifest read mid-write is read again soon.
            let wait = if self.recheck_soon {
                self.options.resync.min(UNSETTLED_RECHECK)
            } else {
                self.options.resync
            };
            if rx.recv_timeout(wait).is_ok() {
                std::thread::sleep(Duration::from_millis(50));
                while rx.try_recv().is_ok() {}
            }
        }
        tracing::info!("agent stopping");
        Ok(())
    }
}

impl Agent {
    fn reconcile_and_log(&mut self) {
        match self.reconcile() {
            Ok(report) => log_report(&report),
            Err(e) => tracing::error!(error = %format!("{e:#}"), "reconcile failed"),
        }
    }
}

/// How soon a pass reads a manifest again that looked cut short.
const UNSETTLED_RECHECK: Duration = Duration::from_millis(250);

/// Whether a watch event is a change of content or of the directory: the
/// agent's own reads (open, access, close without write) are not, or it
/// would wake itself.
fn is_change(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode, ModifyKind};
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        // Access times (a read under relatime) and modes say nothing new.
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Any | EventKind::Other => false,
    }
}

fn log_report(report: &ReconcileReport) {
    for e in &report.errors {
        tracing::error!("{e}");
    }
    for f in &report.failed {
        tracing::error!("not applied: {f}");
    }
    for r in &report.rejected {
        tracing::warn!("rejected: {r}");
    }
    for p in &report.removal_pending {
        tracing::info!("removal pending: {p}");
    }
    tracing::info!(
        policy = short(&report.policy_digest),
        pods = report.pods,
        applied = report.applied.len(),
        writes = report.writes,
        removed = report.removed.len(),
        first_decision_ms = report.first_decision_ms,
        "reconciled"
    );
}

/// A UID for a manifest without one, as the kubelet gives static pods one:
/// derived from the pod's namespace and name and the node's name, so it is
/// stable across restarts and edits of the manifest.
/// The uid of a manifest without one when the node has no name (with a
/// name, the kubelet's static-pod form applies, see `pod_input`).
pub fn static_pod_uid(pod: &Pod, node_name: &str) -> String {
    let key = format!("{}/{}@{node_name}", pod.namespace, pod.name);
    crate::runtime::digest(key.as_bytes())[..32].to_string()
}

/// The policy's node-level warnings (e.g. Memory QoS on a kernel < 5.9).
fn node_warnings(policy: &PolicyRuntime, node: &NodeSettings) -> Vec<String> {
    match policy.node_cgroups(&[], node) {
        Ok(Ok(values)) => values.warnings.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    }
}

/// The counters of a cgroup's `memory.events` file (`low`, `high`, `max`,
/// `oom`, `oom_kill`, ...), read beneath the root like every cgroup file.
pub fn read_memory_events(root: &CgroupRoot, cgroup: &Path) -> BTreeMap<String, u64> {
    cgroupfs::read_file(root, cgroup, "memory.events")
        .ok()
        .flatten()
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once(' ')?;
            Some((key.to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

/// `admit` of `pod` on the node prepared in `slot` (made or remade for this
/// policy, node and topology); the node's own errors are the answer's.
fn admit_prepared(
    slot: &mut Option<PreparedPolicy>,
    policy: &Arc<PolicyRuntime>,
    node: &NodeSettings,
    topology: &NodeTopology,
    pod: &Pod,
    state: &ManagerState,
) -> Result<PolicyResult<Admission>> {
    match PreparedPolicy::reuse_or_prepare(slot, policy, node, Some(topology))? {
        Ok(prepared) => prepared.admit(pod, state),
        Err(errors) => Ok(Err(errors)),
    }
}

/// `state` with each of `containers` of the pod `uid` released (the pod's
/// resources go with its last container) on the node prepared in `slot`
/// (made or remade for this policy, node and topology, as for admissions);
/// `shown` names the pod in errors.
#[allow(clippy::too_many_arguments)]
fn release_containers<'a>(
    slot: &mut Option<PreparedPolicy>,
    policy: &Arc<PolicyRuntime>,
    topology: &NodeTopology,
    node: &NodeSettings,
    mut state: ManagerState,
    uid: &str,
    shown: &str,
    containers: impl IntoIterator<Item = &'a String>,
) -> Result<ManagerState> {
    for container in containers {
        let answer = match PreparedPolicy::reuse_or_prepare(slot, policy, node, Some(topology))? {
            Ok(prepared) => prepared.release(uid, container, &state)?,
            Err(errors) => Err(errors),
        };
        state = match answer {
            Ok(state) => state,
            Err(errors) => bail!(
                "releasing {shown}/{container}: {}",
                format_field_errors(&errors)
            ),
        };
    }
    Ok(state)
}

/// A cgroup as `agent_state.json` records it: relative to the root.
fn cgroup_text(path: &CgroupPath) -> String {
    path.components().join("/")
}

fn read_agent_state(dir: &Path) -> Result<AgentState> {
    let path = dir.join("agent_state.json");
    match crate::state_dir::read_file(dir, "agent_state.json")? {
        Some(bytes) => serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{}: not an agent state file (move it away to start fresh)",
                path.display()
            )
        }),
        None => Ok(AgentState::default()),
    }
}
