//! The `node-settings` record decoded into the core's [`NodeConfig`]: every
//! kubelet default applied, the derived values computed, and every bad
//! setting reported with its field path (`cpuCFSQuotaPeriod`,
//! `evictionHard[memory.available]`), in the order the settings are read.

use super::pod::decode_list;
use super::{Result, encode_errors, field_error};
use crate::features::FeatureGates;
use crate::field_error::FieldErrorType;
use crate::node::{
    CgroupDriver, CgroupVersion, CpuWeightCurve, DEFAULT_CFS_PERIOD_US, DEFAULT_EVICTION_HARD,
    DEFAULT_MEMORY_THROTTLING_FACTOR, DEFAULT_PAGE_SIZE, MemoryReservationPolicy, NodeConfig,
    eviction_threshold, validate_memory_throttling_factor,
};
use crate::quantity::Quantity;
use crate::wit::{self, FieldError};

impl From<wit::CgroupVersion> for CgroupVersion {
    fn from(version: wit::CgroupVersion) -> Self {
        match version {
            wit::CgroupVersion::V1 => CgroupVersion::V1,
            wit::CgroupVersion::V2 => CgroupVersion::V2,
        }
    }
}

impl From<wit::CgroupDriver> for CgroupDriver {
    fn from(driver: wit::CgroupDriver) -> Self {
        match driver {
            wit::CgroupDriver::Cgroupfs => CgroupDriver::Cgroupfs,
            wit::CgroupDriver::Systemd => CgroupDriver::Systemd,
        }
    }
}

impl From<wit::CpuWeightCurve> for CpuWeightCurve {
    fn from(curve: wit::CpuWeightCurve) -> Self {
        match curve {
            wit::CpuWeightCurve::Linear => CpuWeightCurve::Linear,
            wit::CpuWeightCurve::Logarithmic => CpuWeightCurve::Logarithmic,
        }
    }
}

impl From<wit::MemoryReservationPolicy> for MemoryReservationPolicy {
    fn from(policy: wit::MemoryReservationPolicy) -> Self {
        match policy {
            wit::MemoryReservationPolicy::None => MemoryReservationPolicy::None,
            wit::MemoryReservationPolicy::HardReservation => {
                MemoryReservationPolicy::HardReservation
            }
            wit::MemoryReservationPolicy::TieredReservation => {
                MemoryReservationPolicy::TieredReservation
            }
        }
    }
}

/// A field error with the offending value echoed.
fn error(
    field: impl Into<String>,
    error_type: FieldErrorType,
    message: &str,
    bad: String,
) -> FieldError {
    field_error(field, error_type, message, Some(bad))
}

/// Decode and validate node settings; all problems are reported.
pub fn decode_node(node: &wit::NodeSettings) -> Result<NodeConfig> {
    let mut gate_errors = Vec::new();
    let gates = FeatureGates::resolve(
        node.feature_gates
            .iter()
            .map(|gate| (gate.name.as_str(), gate.enabled)),
        &mut gate_errors,
    );
    let mut errors = encode_errors(gate_errors);
    let capacity = decode_list(&node.capacity, "capacity", &mut errors);
    let kube_reserved = decode_list(&node.kube_reserved, "kubeReserved", &mut errors);
    let system_reserved = decode_list(&node.system_reserved, "systemReserved", &mut errors);
    let allocatable = match &node.allocatable {
        Some(list) => decode_list(list, "allocatable", &mut errors),
        None => NodeConfig::allocatable_from(&capacity, &kube_reserved, &system_reserved),
    };

    let requested_period = node
        .cpu_cfs_quota_period_us
        .unwrap_or(DEFAULT_CFS_PERIOD_US);
    if !(1_000..=1_000_000).contains(&requested_period) {
        errors.push(error(
            "cpuCFSQuotaPeriod",
            FieldErrorType::Invalid,
            "must be between 1ms and 1s (1000 to 1000000 microseconds)",
            requested_period.to_string(),
        ));
    } else if requested_period != DEFAULT_CFS_PERIOD_US && !gates.custom_cpu_cfs_quota_period {
        errors.push(error(
            "cpuCFSQuotaPeriod",
            FieldErrorType::Forbidden,
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
            FieldErrorType::Invalid,
            message,
            factor.to_string(),
        ));
    }

    let page_size = node.page_size_bytes.unwrap_or(DEFAULT_PAGE_SIZE);
    if page_size == 0 || !page_size.is_power_of_two() {
        errors.push(error(
            "pageSize",
            FieldErrorType::Invalid,
            "must be a power of two",
            page_size.to_string(),
        ));
    }

    let mut hugepage_sizes = Vec::new();
    for name in capacity.keys() {
        if let Some(size) = name.strip_prefix("hugepages-") {
            match Quantity::parse(size) {
                Ok(q) if q.value() > 0 && !q.is_negative() => hugepage_sizes.push(q.value() as u64),
                _ => errors.push(error(
                    format!("capacity[{}]", crate::model::truncate(name)),
                    FieldErrorType::Invalid,
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
                FieldErrorType::Invalid,
                "must be a quantity or a percentage between 0% and 100%",
                crate::model::truncate(&text),
            ));
        }
        value
    };
    let eviction_hard_memory = threshold_of("memory.available", "memory", &mut errors).unwrap_or(0);
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
        cgroup_version: node.cgroup_version.into(),
        cgroup_driver: node.cgroup_driver.into(),
        cgroups_per_qos: node.cgroups_per_qos.unwrap_or(true),
        enforce_node_allocatable: node
            .enforce_node_allocatable
            .clone()
            .unwrap_or_else(|| vec!["pods".to_string()]),
        cpu_cfs_quota: node.cpu_cfs_quota.unwrap_or(true),
        memory_throttling_factor: factor,
        memory_reservation_policy: node
            .memory_reservation_policy
            .map_or(MemoryReservationPolicy::None, MemoryReservationPolicy::from),
        page_size,
        cpu_weight_curve: node
            .cpu_weight_curve
            .map_or(CpuWeightCurve::Linear, CpuWeightCurve::from),
        single_process_oom_kill: node.single_process_oom_kill.unwrap_or(false),
        hugepage_sizes,
        kube_reserved,
        system_reserved,
        kernel_version: node.kernel_version.clone(),
        eviction_hard_memory,
        eviction_hard_storage,
        cpu_manager_static: node.cpu_manager_policy == Some(wit::CpuManagerPolicy::Static),
        memory_manager_static: node.memory_manager_policy == Some(wit::MemoryManagerPolicy::Static),
        hugetlb_reservations: NodeConfig::hugetlb_reservations(node.kernel_version.as_deref()),
    })
}

/// A node with nothing set: every kubelet default, cgroup v2, no capacity.
pub fn default_settings() -> wit::NodeSettings {
    wit::NodeSettings {
        name: String::new(),
        capacity: Vec::new(),
        allocatable: None,
        kube_reserved: Vec::new(),
        system_reserved: Vec::new(),
        cgroup_version: wit::CgroupVersion::V2,
        cgroup_driver: wit::CgroupDriver::Cgroupfs,
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
