//! Node settings: kubelet defaults, derived values and validation.
//!
//! The host reports what it found (capacity, kubelet configuration, gates);
//! every default and every derived value (allocatable, the effective CFS
//! period) is decided here, so two hosts never disagree on policy.

use crate::features::FeatureGates;
use crate::model::{ResourceMap, decode_list, field_error};
use crate::quantity::Quantity;
use crate::wit::{
    self, CgroupDriver, CgroupVersion, CpuWeightCurve, ErrorReason, FieldError,
    MemoryReservationPolicy,
};

/// The default CFS period, 100 ms in microseconds.
pub const DEFAULT_CFS_PERIOD_US: u64 = 100_000;
/// The default `memoryThrottlingFactor`.
pub const DEFAULT_MEMORY_THROTTLING_FACTOR: f64 = 0.9;
/// The default page size for memory.high rounding.
pub const DEFAULT_PAGE_SIZE: u64 = 4096;

/// Node settings with every default applied.
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

    /// Decode and validate node settings; all problems are reported.
    pub fn decode(node: &wit::NodeSettings) -> Result<NodeConfig, Vec<FieldError>> {
        let mut gate_errors = Vec::new();
        let gates = FeatureGates::resolve(
            node.feature_gates
                .iter()
                .map(|gate| (gate.name.as_str(), gate.enabled)),
            &mut gate_errors,
        );
        let mut errors = crate::boundary::encode_errors(gate_errors);
        let capacity = decode_list(&node.capacity, "capacity", &mut errors);
        let kube_reserved = decode_list(&node.kube_reserved, "kubeReserved", &mut errors);
        let system_reserved = decode_list(&node.system_reserved, "systemReserved", &mut errors);
        let allocatable = match &node.allocatable {
            Some(list) => decode_list(list, "allocatable", &mut errors),
            None => {
                let mut allocatable = capacity.clone();
                for (name, amount) in allocatable.iter_mut() {
                    for reserved in [&kube_reserved, &system_reserved] {
                        if let Some(r) = reserved.get(name) {
                            *amount = amount.saturating_sub(*r).max(Quantity::ZERO);
                        }
                    }
                }
                allocatable
            }
        };

        let requested_period = node
            .cpu_cfs_quota_period_us
            .unwrap_or(DEFAULT_CFS_PERIOD_US);
        if !(1_000..=1_000_000).contains(&requested_period) {
            errors.push(error(
                "cpuCFSQuotaPeriod",
                ErrorReason::Invalid,
                "must be between 1ms and 1s (1000 to 1000000 microseconds)",
                requested_period.to_string(),
            ));
        } else if requested_period != DEFAULT_CFS_PERIOD_US && !gates.custom_cpu_cfs_quota_period {
            errors.push(error(
                "cpuCFSQuotaPeriod",
                ErrorReason::Forbidden,
                "must be 100ms unless the CustomCPUCFSQuotaPeriod feature gate is enabled",
                requested_period.to_string(),
            ));
        }

        let factor = node
            .memory_throttling_factor
            .unwrap_or(DEFAULT_MEMORY_THROTTLING_FACTOR);
        if let Err(message) = validate_memory_throttling_factor(factor) {
            errors.push(error(
                "memoryThrottlingFactor",
                ErrorReason::Invalid,
                message,
                factor.to_string(),
            ));
        }

        let page_size = node.page_size_bytes.unwrap_or(DEFAULT_PAGE_SIZE);
        if page_size == 0 || !page_size.is_power_of_two() {
            errors.push(error(
                "pageSize",
                ErrorReason::Invalid,
                "must be a power of two",
                page_size.to_string(),
            ));
        }

        let mut hugepage_sizes = Vec::new();
        for name in capacity.keys() {
            if let Some(size) = name.strip_prefix("hugepages-") {
                match Quantity::parse(size) {
                    Ok(q) if q.value() > 0 && !q.is_negative() => {
                        hugepage_sizes.push(q.value() as u64)
                    }
                    _ => errors.push(error(
                        format!("capacity[{}]", crate::model::truncate(name)),
                        ErrorReason::Invalid,
                        "hugepages resource names must end in a page size, e.g. hugepages-2Mi",
                        crate::model::truncate(name),
                    )),
                }
            }
        }
        hugepage_sizes.sort_unstable();
        hugepage_sizes.dedup();

        // `hardEvictionReservation`: memory.available reserves memory,
        // nodefs.available reserves ephemeral-storage.
        let threshold_of = |signal: &str, resource: &str, errors: &mut Vec<FieldError>| {
            let capacity = capacity.get(resource).copied().unwrap_or(Quantity::ZERO);
            let text = match &node.eviction_hard {
                None => DEFAULT_EVICTION_HARD
                    .iter()
                    .find(|(s, _)| *s == signal)
                    .map(|(_, t)| (*t).to_string()),
                Some(thresholds) => thresholds
                    .iter()
                    .rev()
                    .find(|(s, _)| s == signal)
                    .map(|(_, t)| t.clone()),
            };
            let text = text?;
            let value = eviction_threshold(&text, capacity);
            if value.is_none() {
                errors.push(error(
                    format!("evictionHard[{signal}]"),
                    ErrorReason::Invalid,
                    "must be a quantity or a percentage between 0% and 100%",
                    crate::model::truncate(&text),
                ));
            }
            value
        };
        let eviction_hard_memory =
            threshold_of("memory.available", "memory", &mut errors).unwrap_or(0);
        let eviction_hard_storage =
            threshold_of("nodefs.available", "ephemeral-storage", &mut errors).unwrap_or(0);

        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(NodeConfig {
            name: node.name.clone(),
            cfs_period_us: if gates.custom_cpu_cfs_quota_period {
                requested_period
            } else {
                DEFAULT_CFS_PERIOD_US
            },
            gates,
            capacity,
            allocatable,
            cgroup_version: node.cgroup_version,
            cgroup_driver: node.cgroup_driver,
            cgroups_per_qos: node.cgroups_per_qos.unwrap_or(true),
            enforce_node_allocatable: node
                .enforce_node_allocatable
                .clone()
                .unwrap_or_else(|| vec!["pods".to_string()]),
            cpu_cfs_quota: node.cpu_cfs_quota.unwrap_or(true),
            memory_throttling_factor: factor,
            memory_reservation_policy: node
                .memory_reservation_policy
                .unwrap_or(MemoryReservationPolicy::None),
            page_size,
            cpu_weight_curve: node.cpu_weight_curve.unwrap_or(CpuWeightCurve::Linear),
            single_process_oom_kill: node.single_process_oom_kill.unwrap_or(false),
            hugepage_sizes,
            kube_reserved,
            system_reserved,
            kernel_version: node.kernel_version.clone(),
            eviction_hard_memory,
            eviction_hard_storage,
            cpu_manager_static: node.cpu_manager_policy == Some(wit::CpuManagerPolicy::Static),
            memory_manager_static: node.memory_manager_policy
                == Some(wit::MemoryManagerPolicy::Static),
            hugetlb_reservations: node
                .kernel_version
                .as_deref()
                .and_then(crate::memory_qos::parse_kernel_version)
                .is_none_or(|version| version >= (5, 7)),
        })
    }
}

/// The kubelet's default `evictionHard` (Linux) for the signals that
/// reserve node resources.
pub const DEFAULT_EVICTION_HARD: [(&str, &str); 2] =
    [("memory.available", "100Mi"), ("nodefs.available", "10%")];

/// An eviction threshold in bytes: a quantity, or `N%` of `capacity`
/// (upstream `parseThresholdStatement`; a percentage is rounded down).
fn eviction_threshold(text: &str, capacity: Quantity) -> Option<u64> {
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
            for (name, q) in reserved {
                let slot = reservation.entry(name.clone()).or_insert(Quantity::ZERO);
                *slot = slot.saturating_add(*q);
            }
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
                    error(
                        format!("capacity[{}]", crate::model::truncate(name)),
                        ErrorReason::Invalid,
                        &format!(
                            "invalid Node Allocatable configuration. Resource {name:?} has a reservation of {} but capacity of {}. Expected capacity >= reservation.",
                            reserved.to_canonical_string(),
                            capacity.to_canonical_string()
                        ),
                        capacity.to_canonical_string(),
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

fn error(field: impl Into<String>, reason: ErrorReason, message: &str, bad: String) -> FieldError {
    let mut e = field_error(field, reason, message);
    e.bad_value = Some(bad);
    e
}

/// A node with nothing set: every kubelet default, cgroup v2, no capacity.
pub fn default_settings() -> wit::NodeSettings {
    wit::NodeSettings {
        name: String::new(),
        capacity: Vec::new(),
        allocatable: None,
        kube_reserved: Vec::new(),
        system_reserved: Vec::new(),
        cgroup_version: CgroupVersion::V2,
        cgroup_driver: CgroupDriver::Cgroupfs,
        cgroups_per_qos: None,
        enforce_node_allocatable: None,
        cpu_cfs_quota: None,
        cpu_cfs_quota_period_us: None,
        memory_throttling_factor: None,
        memory_reservation_policy: None,
        page_size_bytes: None,
        cpu_weight_curve: None,
        single_process_oom_kill: None,
        cpu_manager_policy: None,
        cpu_manager_policy_options: Vec::new(),
        reserved_system_cpus: None,
        memory_manager_policy: None,
        reserved_memory: Vec::new(),
        topology_manager_policy: None,
        topology_manager_scope: None,
        topology_manager_policy_options: Vec::new(),
        feature_gates: Vec::new(),
        kernel_version: None,
        eviction_hard: None,
    }
}
