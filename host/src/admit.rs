//! `podpolicy admit` and `podpolicy release`: the resource managers
//! (KEP-5526) on a node, with crash-safe checkpoints and cpuset writes.
//!
//! The component decides (hints, affinity, cpusets, memory blocks,
//! isolation); this module loads and saves the state, turns the assignment
//! into cgroup files (`cpuset.cpus`, `cpuset.mems`, the quota of containers
//! whose CFS quota is disabled) and refuses an empty cpuset before any write.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use crate::bindings::{Admission, ManagerState, NodeSettings, NodeTopology, Pod, QosClass};
use crate::cgroupfs::{self, CgroupRoot, CgroupValues, FileValue};
use crate::runtime::PolicyRuntime;
use crate::{checkpoint, format_field_errors};

/// Configured policy names, as the checkpoints record them.
fn policy_names(node: &NodeSettings) -> (String, String) {
    (
        node.cpu_manager_policy
            .clone()
            .unwrap_or_else(|| "none".to_string()),
        node.memory_manager_policy
            .clone()
            .unwrap_or_else(|| "None".to_string()),
    )
}

/// Load the state (or start empty) and let the managers validate it, as the
/// kubelet's `Start` does.
pub fn start_state(
    policy: &PolicyRuntime,
    topology: &NodeTopology,
    node: &NodeSettings,
    state_dir: Option<&Path>,
) -> Result<ManagerState> {
    let (cpu_policy, memory_policy) = policy_names(node);
    let state = match state_dir {
        Some(dir) => checkpoint::load(dir, &cpu_policy, &memory_policy)?,
        None => crate::empty_manager_state(),
    };
    match policy.start_managers(topology, &state, node)? {
        Ok(Ok(state)) => Ok(state),
        Ok(Err(e)) => bail!(
            "the resource managers refuse to start: {} ({:?})",
            e.message,
            e.reason
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
                file: f.file.clone(),
                value: f.value.clone(),
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

/// The result of `admit`, for output.
pub fn admission_json(pod: &Pod, admission: &Admission) -> Value {
    let a = &admission.assignment;
    json!({
        "pod": format!("{}/{}", pod.namespace, pod.name),
        "uid": pod.uid,
        "admitted": admission.rejection.is_none(),
        "rejection": admission.rejection.as_ref().map(|r| json!({"reason": r.reason, "message": r.message})),
        "topology": admission.topology,
        "podCpuset": a.pod_cpuset,
        "podSharedPool": a.pod_shared_pool,
        "nodeSharedPool": a.node_shared_pool,
        "podCfsQuotaDisabled": a.pod_cfs_quota_disabled,
        "containers": a.containers.iter().map(|c| json!({
            "name": c.name,
            "cpuset": c.cpuset,
            "cpuIsolation": format!("{:?}", c.cpu_isolation).to_lowercase(),
            "cfsQuotaDisabled": c.cfs_quota_disabled,
            "memory": c.memory,
        })).collect::<Vec<_>>(),
    })
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
    if let Some(dir) = state_dir {
        checkpoint::save(dir, &admission.state).context("saving the manager checkpoints")?;
    }
    if let Some(root) = cgroup_root {
        let root = CgroupRoot::open(root).map_err(|e| anyhow!("{e}"))?;
        let changes = cgroupfs::plan(&root, &values).map_err(|e| anyhow!("{e}"))?;
        cgroupfs::apply(&changes).map_err(|e| anyhow!("{e}"))?;
    }
    Ok(admission)
}

/// Release one container (the pod's resources go with its last container)
/// and persist the new state.
pub fn release(
    policy: &PolicyRuntime,
    pod_uid: &str,
    container: &str,
    node: &NodeSettings,
    topology: &NodeTopology,
    state_dir: &Path,
) -> Result<ManagerState> {
    let state = start_state(policy, topology, node, Some(state_dir))?;
    let state = match policy.release(pod_uid, container, topology, &state, node)? {
        Ok(s) => s,
        Err(errors) => bail!("{}", format_field_errors(&errors)),
    };
    checkpoint::save(state_dir, &state).context("saving the manager checkpoints")?;
    Ok(state)
}
