//! Node settings: kubelet defaults, derived values and validation.
//!
//! The host reports what it found (capacity, kubelet configuration, gates);
//! every default and every derived value (allocatable, the effective CFS
//! period) is decided here, so two hosts never disagree on policy.

use crate::features::FeatureGates;
use crate::field_error::{FieldError, FieldErrorType};
use crate::model::ResourceMap;
use crate::quantity::Quantity;

// The contract's `NodeSettings` with nothing set; the boundary builds it,
// native callers (the host's benches) find it here as they always did.
pub use crate::boundary::node::default_settings;

/// The default CFS period, 100 ms in microseconds.
pub const DEFAULT_CFS_PERIOD_US: u64 = 100_000;
/// The default `memoryThrottlingFactor`.
pub const DEFAULT_MEMORY_THROTTLING_FACTOR: f64 = 0.9;
/// The default page size for memory.high rounding.
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// Which cgroup hierarchy the node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// cgroup v1: separate hierarchies per controller.
    V1,
    /// cgroup v2: the unified hierarchy (the only one cgroup files are given for).
    V2,
}

/// Kubelet `cgroupDriver`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupDriver {
    /// The kubelet writes cgroupfs directly.
    Cgroupfs,
    /// systemd owns the cgroups (slices and scopes).
    Systemd,
}

/// How container CPU shares become cgroup v2 `cpu.weight`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuWeightCurve {
    /// Kubelet's linear map `1 + (shares - 2) * 9999 / 262142` (pod and QoS cgroups; runc < 1.3.2).
    Linear,
    /// The logarithmic map of runc >= 1.3.2 / crun >= 1.23 (shares 1024 -> weight 100).
    Logarithmic,
}

/// Kubelet `memoryReservationPolicy` (Memory QoS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryReservationPolicy {
    /// Write no memory.min / memory.low (the 1.36 default).
    None,
    /// KEP-2570: memory.min = requests for containers and pods, any QoS.
    HardReservation,
    /// Upstream 1.36: memory.min for Guaranteed, memory.low for Burstable.
    TieredReservation,
}

/// Node settings with every default applied (decoded from the contract's
/// `node-settings` by [`crate::boundary::node::decode_node`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConfig {
    /// Node name.
    pub name: String,
    /// Resolved feature gates.
    pub gates: FeatureGates,
    /// `status.capacity`.
    pub capacity: ResourceMap,
    /// `status.allocatable`, given or capacity minus reservations.
    pub allocatable: ResourceMap,
    /// cgroup v1 or v2.
    pub cgroup_version: CgroupVersion,
    /// cgroupfs or systemd.
    pub cgroup_driver: CgroupDriver,
    /// `cgroupsPerQOS`.
    pub cgroups_per_qos: bool,
    /// `enforceNodeAllocatable`.
    pub enforce_node_allocatable: Vec<String>,
    /// `cpuCFSQuota`.
    pub cpu_cfs_quota: bool,
    /// The CFS period in effect, in microseconds.
    pub cfs_period_us: u64,
    /// `memoryThrottlingFactor`.
    pub memory_throttling_factor: f64,
    /// `memoryReservationPolicy`.
    pub memory_reservation_policy: MemoryReservationPolicy,
    /// Page size in bytes.
    pub page_size: u64,
    /// Container shares -> weight curve.
    pub cpu_weight_curve: CpuWeightCurve,
    /// `singleProcessOOMKill`.
    pub single_process_oom_kill: bool,
    /// Hugepage sizes the node offers (bytes), from `hugepages-*` capacity keys.
    pub hugepage_sizes: Vec<u64>,
    /// `kubeReserved`.
    pub kube_reserved: ResourceMap,
    /// `systemReserved`.
    pub system_reserved: ResourceMap,
    /// Running kernel release, when the host reported it.
    pub kernel_version: Option<String>,
    /// `cpuManagerPolicy: static`.
    pub cpu_manager_static: bool,
    /// `memoryManagerPolicy: Static`.
    pub memory_manager_static: bool,
    /// The `evictionHard` `memory.available` threshold in bytes (a
    /// percentage taken of the memory capacity).
    pub eviction_hard_memory: u64,
    /// The `evictionHard` `nodefs.available` threshold in bytes of
    /// ephemeral storage.
    pub eviction_hard_storage: u64,
    /// Whether the kernel has hugetlb reservation limits
    /// (`hugetlb.<size>.rsvd.max`, Linux 5.7+): runc writes them next to
    /// `hugetlb.<size>.max` where the file exists. An unknown kernel is
    /// taken to have them.
    pub hugetlb_reservations: bool,
}

impl NodeConfig {
    /// Memory capacity in bytes, if the node reported it.
    pub fn memory_capacity(&self) -> Option<u64> {
        self.capacity.get("memory").map(|q| q.value().max(0) as u64)
    }

    /// Allocatable memory in bytes (0 when unknown).
    pub fn allocatable_memory(&self) -> u64 {
        self.allocatable
            .get("memory")
            .map_or(0, |q| q.value().max(0) as u64)
    }

    /// Node allocatable when the host reported none: capacity minus
    /// `kubeReserved` and `systemReserved`, never below zero.
    pub fn allocatable_from(
        capacity: &ResourceMap,
        kube_reserved: &ResourceMap,
        system_reserved: &ResourceMap,
    ) -> ResourceMap {
        let mut allocatable = capacity.clone();
        for (name, amount) in allocatable.iter_mut() {
            for reserved in [kube_reserved, system_reserved] {
                if let Some(r) = reserved.get(name) {
                    *amount = amount.saturating_sub(*r).max(Quantity::ZERO);
                }
            }
        }
        allocatable
    }

    /// Whether a node on kernel `kernel_version` has hugetlb reservation
    /// limits (Linux 5.7+); an unknown kernel is taken to have them.
    pub fn hugetlb_reservations(kernel_version: Option<&str>) -> bool {
        kernel_version
            .and_then(crate::memory_qos::parse_kernel_version)
            .is_none_or(|version| version >= (5, 7))
    }
}

/// The kubelet's default `evictionHard` (Linux) for the signals that
/// reserve node resources.
pub const DEFAULT_EVICTION_HARD: [(&str, &str); 2] =
    [("memory.available", "100Mi"), ("nodefs.available", "10%")];

/// An eviction threshold in bytes: a quantity, or `N%` of `capacity`
/// (upstream `parseThresholdStatement`; a percentage is rounded down).
pub fn eviction_threshold(text: &str, capacity: Quantity) -> Option<u64> {
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent.parse().ok()?;
        if !(0.0..=100.0).contains(&value) {
            return None;
        }
        return Some((capacity.value().max(0) as f64 * value / 100.0) as u64);
    }
    let quantity = Quantity::parse(text).ok()?;
    (!quantity.is_negative()).then(|| quantity.value() as u64)
}

impl NodeConfig {
    /// The kubelet's `validateNodeAllocatable`: for every resource the node
    /// reserves (kubeReserved + systemReserved + the hard eviction
    /// thresholds, `GetNodeAllocatableReservation`), the capacity must be at
    /// least the reservation. Resources the node does not report a capacity
    /// for are not checked.
    pub fn validate_allocatable(&self) -> Vec<FieldError> {
        let mut reservation: ResourceMap = ResourceMap::new();
        for reserved in [&self.system_reserved, &self.kube_reserved] {
            crate::resources::add_all(&mut reservation, reserved);
        }
        for (name, bytes) in [
            ("memory", self.eviction_hard_memory),
            ("ephemeral-storage", self.eviction_hard_storage),
        ] {
            if bytes > 0 {
                let q = Quantity::from_value(bytes as i64, crate::quantity::Format::BinarySI);
                let slot = reservation
                    .entry(name.to_string())
                    .or_insert(Quantity::ZERO);
                *slot = slot.saturating_add(q);
            }
        }
        reservation
            .iter()
            .filter_map(|(name, reserved)| {
                // A resource the node file does not report is not checked
                // (a kubelet always knows every capacity it reserves from).
                let capacity = *self.capacity.get(name)?;
                (capacity < *reserved).then(|| {
                    FieldError::new(
                        format!("capacity[{}]", crate::model::truncate(name)),
                        FieldErrorType::Invalid,
                        format!(
                            "invalid Node Allocatable configuration. Resource {name:?} has a reservation of {} but capacity of {}. Expected capacity >= reservation.",
                            reserved.to_canonical_string(),
                            capacity.to_canonical_string()
                        ),
                        Some(capacity.to_canonical_string()),
                    )
                })
            })
            .collect()
    }
}

/// `memoryThrottlingFactor` must be in (0, 1] (KEP-2570; NaN is invalid).
pub fn validate_memory_throttling_factor(factor: f64) -> Result<(), &'static str> {
    if factor > 0.0 && factor <= 1.0 {
        Ok(())
    } else {
        Err("must be greater than 0 and less than or equal to 1.0")
    }
}
