//! The CPU manager state (`pkg/kubelet/cm/cpumanager/state`), as a value.
//!
//! Upstream keeps the state behind a `State` interface that the policy
//! mutates. Here the policy takes a [`CpuManagerState`] and returns a new
//! one, so a failed call leaves the caller's state untouched. The first
//! three fields are what the kubelet checkpoints (`cpu_manager_state`:
//! `defaultCpuSet`, `entries`, and the KEP-5526 `podEntries`); the
//! reusable-CPU map is in-memory policy bookkeeping that upstream keeps in
//! the policy object (`cpusToReuse`) and never writes to disk.

use std::collections::BTreeMap;

use crate::cpuset::CpuSet;

/// Pod uid -> container name -> CPU set (upstream `ContainerCPUAssignments`).
pub type ContainerCpuAssignments = BTreeMap<String, BTreeMap<String, CpuSet>>;

/// The CPU manager state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuManagerState {
    /// The shared pool (`defaultCpuSet`): CPUs not exclusively assigned; includes the reserved CPUs unless `strict-cpu-reservation`.
    pub default_cpuset: CpuSet,
    /// Container assignments (`entries`): exclusive slices, and with KEP-5526 pod scope also the pod shared pool.
    pub assignments: ContainerCpuAssignments,
    /// Pod-level CPU sets (`podEntries`, KEP-5526): pod uid -> the pod's whole CPU set.
    pub pod_assignments: BTreeMap<String, CpuSet>,
    /// Not checkpointed: CPUs of finished standard init containers that later containers of the same pod may reuse (`cpusToReuse`).
    pub cpus_to_reuse: BTreeMap<String, CpuSet>,
}

impl CpuManagerState {
    /// The CPU set of a container (`GetCPUSet`).
    pub fn cpuset(&self, pod_uid: &str, container: &str) -> Option<&CpuSet> {
        self.assignments
            .get(pod_uid)
            .and_then(|containers| containers.get(container))
    }

    /// The pod-level CPU set of a pod (`GetPodCPUSet`).
    pub fn pod_cpuset(&self, pod_uid: &str) -> Option<&CpuSet> {
        self.pod_assignments.get(pod_uid)
    }

    /// Record a container's CPU set (`SetCPUSet`).
    pub fn set_cpuset(&mut self, pod_uid: &str, container: &str, cpus: CpuSet) {
        self.assignments
            .entry(pod_uid.to_string())
            .or_default()
            .insert(container.to_string(), cpus);
    }

    /// Forget a container's CPU set, and the pod's map when it becomes empty (`Delete`).
    pub fn delete(&mut self, pod_uid: &str, container: &str) {
        if let Some(containers) = self.assignments.get_mut(pod_uid) {
            containers.remove(container);
            if containers.is_empty() {
                self.assignments.remove(pod_uid);
            }
        }
    }

    /// Forget everything about a pod (`DeletePod`).
    pub fn delete_pod(&mut self, pod_uid: &str) {
        self.assignments.remove(pod_uid);
        self.pod_assignments.remove(pod_uid);
        self.cpus_to_reuse.remove(pod_uid);
    }

    /// The union of every container and pod-level set: the CPUs taken out of the shared pool.
    pub fn assigned_cpus(&self) -> CpuSet {
        let mut all = CpuSet::new();
        for containers in self.assignments.values() {
            for cpus in containers.values() {
                all = all.union(cpus);
            }
        }
        for cpus in self.pod_assignments.values() {
            all = all.union(cpus);
        }
        all
    }
}
