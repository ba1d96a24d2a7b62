//! Node-level cgroups the kubelet writes itself, over every pod on the node:
//!
//! - `kubepods`, the node-allocatable cgroup (`node_container_manager_linux.go`
//!   `enforceNodeAllocatableCgroups`): cpu.weight from the allocatable CPUs,
//!   memory.max = capacity - kubeReserved - systemReserved (the eviction
//!   threshold is not subtracted here; it only shrinks the scheduler's
//!   allocatable), or the whole capacity without `enforceNodeAllocatable: pods`.
//! - the Burstable and BestEffort QoS cgroups (`qos_container_manager_linux.go`
//!   `UpdateCgroups`): Burstable cpu.weight from the summed CPU requests of
//!   Burstable pods, BestEffort the minimum shares; every hugetlb size
//!   unbounded (1 << 62) on all three QoS cgroups, `kubepods` included: the
//!   QoS manager's Guaranteed cgroup *is* `kubepods`, and its periodic update
//!   rewrites the node-allocatable hugetlb limits with that value.
//! - Memory QoS (KEP-2570) on those cgroups and on the reserved ones
//!   (`setMemoryQoS`, `enforceExistingCgroup`).
//!
//! Only cgroup v2 files are produced (the contract's cgroup files are v2);
//! a cgroup v1 node gets none. `QOSReserved` (alpha, off) is not modelled:
//! without it the QoS cgroups carry no memory.max.

use crate::cgroup::{cpu_shares_to_weight_linear, milli_cpu_to_shares};
use crate::cgroup_file::{CgroupFile, CgroupFileName, CgroupValue};
use crate::memory_qos::memory_qos_enforced;
use crate::model::{Pod, ResourceMap};
use crate::node::{CgroupVersion, MemoryReservationPolicy, NodeConfig};
use crate::qos::QosClass;
use crate::quantity::Quantity;
use crate::resources;

/// A node-level cgroup the kubelet writes itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeCgroup {
    /// The `kubepods` root: node allocatable, and the QoS manager's Guaranteed cgroup.
    Kubepods,
    /// The Burstable QoS tier (with `cgroupsPerQOS`).
    Burstable,
    /// The BestEffort QoS tier (with `cgroupsPerQOS`).
    Besteffort,
    /// `kubeReservedCgroup` (with `enforceNodeAllocatable: kube-reserved`).
    KubeReserved,
    /// `systemReservedCgroup` (with `enforceNodeAllocatable: system-reserved`).
    SystemReserved,
}

/// Files to write to one node-level cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeCgroupValues {
    /// Which cgroup.
    pub cgroup: NodeCgroup,
    /// Its files.
    pub files: Vec<CgroupFile>,
}

/// The hugetlb limit the QoS manager sets on its cgroups (`setHugePagesUnbounded`).
pub const UNBOUNDED_HUGEPAGES: u64 = 1 << 62;

/// Per-class sums over the node's pods, as the QoS manager computes them
/// (`PodRequests` with the kubelet's options: pod-level requests, overhead,
/// init containers): all the node-level cgroups need of the pods, so a host
/// can add pods one at a time and keep none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QosClassTotals {
    /// Memory requests of Guaranteed pods, bytes.
    guaranteed_memory: u64,
    /// Memory requests of Burstable pods, bytes.
    burstable_memory: u64,
    /// CPU requests of Burstable pods, millicores.
    burstable_milli_cpu: i64,
}

impl QosClassTotals {
    /// Count `pod`, of class `qos`, on `node` (saturating: a sum that
    /// would overflow stays at the largest value, as no node holds it).
    pub fn add(&mut self, pod: &Pod, qos: QosClass, node: &NodeConfig) {
        if qos == QosClass::BestEffort {
            return;
        }
        let options = resources::kubelet_options(&node.gates);
        let requests = resources::pod_requests(pod, &options, &node.gates);
        let memory = requests
            .get("memory")
            .map_or(0, |q| q.value().max(0) as u64);
        match qos {
            QosClass::Guaranteed => {
                self.guaranteed_memory = self.guaranteed_memory.saturating_add(memory)
            }
            _ => {
                self.burstable_memory = self.burstable_memory.saturating_add(memory);
                self.burstable_milli_cpu = self
                    .burstable_milli_cpu
                    .saturating_add(requests.get("cpu").map_or(0, |q| q.milli_value()));
            }
        }
    }
}

struct Files(Vec<CgroupFile>);

impl Files {
    fn push(&mut self, file: CgroupFileName, value: u64) {
        self.0.push(CgroupFile {
            file,
            value: CgroupValue::Number(value),
        });
    }

    fn cpu_weight_from_milli(&mut self, milli_cpu: i64) {
        self.push(
            CgroupFileName::CpuWeight,
            cpu_shares_to_weight_linear(milli_cpu_to_shares(milli_cpu)),
        );
    }

    fn hugetlb(&mut self, node: &NodeConfig, limit: impl Fn(u64) -> u64) {
        for size in &node.hugepage_sizes {
            let value = limit(*size);
            self.push(CgroupFileName::HugetlbMax(*size), value);
            if node.hugetlb_reservations {
                self.push(CgroupFileName::HugetlbRsvdMax(*size), value);
            }
        }
    }
}

/// `getNodeAllocatableAbsoluteImpl`: capacity minus system and kube
/// reservations, never negative.
fn allocatable_absolute(node: &NodeConfig) -> ResourceMap {
    let mut result = node.capacity.clone();
    for (name, amount) in result.iter_mut() {
        for reserved in [&node.system_reserved, &node.kube_reserved] {
            if let Some(r) = reserved.get(name) {
                *amount = amount.saturating_sub(*r);
            }
        }
        if amount.is_negative() {
            *amount = Quantity::ZERO;
        }
    }
    result
}

fn enforced(node: &NodeConfig, key: &str) -> bool {
    node.enforce_node_allocatable.iter().any(|e| e == key)
}

/// Every node-level cgroup's files for the pods counted in `totals`.
pub fn node_cgroups(totals: &QosClassTotals, node: &NodeConfig) -> Vec<NodeCgroupValues> {
    if node.cgroup_version != CgroupVersion::V2 {
        return Vec::new();
    }
    let memory_qos = memory_qos_enforced(node);
    let policy = node.memory_reservation_policy;
    let mut out = Vec::new();

    if node.cgroups_per_qos {
        // kubepods: node allocatable (or capacity) values, then the QoS
        // manager's Guaranteed-cgroup values on the same cgroup.
        let base = if enforced(node, "pods") {
            allocatable_absolute(node)
        } else {
            node.capacity.clone()
        };
        let mut kubepods = Files(Vec::new());
        if let Some(cpu) = base.get("cpu") {
            kubepods.cpu_weight_from_milli(cpu.milli_value());
        }
        if let Some(memory) = base.get("memory") {
            kubepods.push(CgroupFileName::MemoryMax, memory.value().max(0) as u64);
        }
        kubepods.hugetlb(node, |_| UNBOUNDED_HUGEPAGES);
        let guaranteed_and_burstable = totals
            .guaranteed_memory
            .saturating_add(totals.burstable_memory);
        match (memory_qos, policy) {
            (true, MemoryReservationPolicy::TieredReservation) => {
                kubepods.push(CgroupFileName::MemoryMin, guaranteed_and_burstable);
                // Burstable memory.low only protects if the parent has it too
                // (kubernetes PR 140267).
                kubepods.push(CgroupFileName::MemoryLow, totals.burstable_memory);
            }
            (true, MemoryReservationPolicy::HardReservation) => {
                kubepods.push(CgroupFileName::MemoryMin, guaranteed_and_burstable)
            }
            // None, or Memory QoS off on cgroup v2: protection left from an
            // earlier configuration is reset (kubernetes PR 138903).
            _ => {
                kubepods.push(CgroupFileName::MemoryMin, 0);
                kubepods.push(CgroupFileName::MemoryLow, 0);
            }
        }
        out.push(values(NodeCgroup::Kubepods, kubepods));

        let mut burstable = Files(Vec::new());
        burstable.cpu_weight_from_milli(totals.burstable_milli_cpu);
        burstable.hugetlb(node, |_| UNBOUNDED_HUGEPAGES);
        match (memory_qos, policy) {
            (true, MemoryReservationPolicy::TieredReservation) => {
                burstable.push(CgroupFileName::MemoryLow, totals.burstable_memory)
            }
            (true, MemoryReservationPolicy::HardReservation) => {
                burstable.push(CgroupFileName::MemoryMin, totals.burstable_memory)
            }
            // None, or Memory QoS off: protection left from an earlier
            // configuration is reset (test/e2e_node/memory_qos_test.go
            // "should reset memory protection to 0 when MemoryQoS is disabled").
            (true, MemoryReservationPolicy::None) | (false, _) => {
                burstable.push(CgroupFileName::MemoryLow, 0)
            }
        }
        out.push(values(NodeCgroup::Burstable, burstable));

        let mut best_effort = Files(Vec::new());
        best_effort.cpu_weight_from_milli(0);
        best_effort.hugetlb(node, |_| UNBOUNDED_HUGEPAGES);
        out.push(values(NodeCgroup::Besteffort, best_effort));
    }

    // `enforceExistingCgroup` for the reserved cgroups.
    for (key, cgroup, reserved) in [
        (
            "kube-reserved",
            NodeCgroup::KubeReserved,
            &node.kube_reserved,
        ),
        (
            "system-reserved",
            NodeCgroup::SystemReserved,
            &node.system_reserved,
        ),
    ] {
        if !enforced(node, key) {
            continue;
        }
        let mut files = Files(Vec::new());
        if let Some(cpu) = reserved.get("cpu") {
            files.cpu_weight_from_milli(cpu.milli_value());
        }
        if let Some(memory) = reserved.get("memory") {
            let bytes = memory.value().max(0) as u64;
            files.push(CgroupFileName::MemoryMax, bytes);
            if node.gates.memory_qos {
                files.push(CgroupFileName::MemoryMin, bytes);
            }
        }
        // Sizes the reservation leaves out are limited to 0 (`maybeSetHugetlb`).
        let limits = crate::cgroup::hugepage_limits(reserved);
        files.hugetlb(node, |size| limits.get(&size).copied().unwrap_or(0));
        out.push(values(cgroup, files));
    }
    out
}

fn values(cgroup: NodeCgroup, files: Files) -> NodeCgroupValues {
    NodeCgroupValues {
        cgroup,
        files: files.0,
    }
}
