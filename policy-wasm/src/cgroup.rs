//! Pod and container cgroup values.
//!
//! - [`pod_resource_config`]: kubelet `ResourceConfigForPod`, the pod cgroup.
//! - [`container_resource_config`]: the CRI `LinuxContainerResources` the
//!   kubelet hands the runtime (which writes the container cgroup).
//! - [`pod_cgroup_files`] / [`container_cgroup_files`]: the same values as
//!   exact cgroup v2 file contents.
//!
//! Conversions are upstream's (`helpers_linux.go`), in exact integer
//! arithmetic; the runc logarithmic weight curve uses `libm` so that the
//! native build and the component round identically.

use std::collections::BTreeMap;

use crate::cgroup_file::{CgroupFile, CgroupFileName, CgroupValue, CpuMaxValue};
use crate::model::{Container, ContainerKind, Pod, ResourceMap};
use crate::node::{CgroupVersion, CpuWeightCurve, NodeConfig};
use crate::qos::QosClass;
use crate::quantity::{Quantity, mul_div};
use crate::resources::{self, container_limit_with_pod_fallback, pod_level_resources_set};

// Memory QoS's switch and its memory.min / memory.low choice live in
// `memory_qos`: cgroup depends on memory_qos, never the other way round.
use crate::memory_qos::memory_qos_enforced;

/// A hugetlb limit: page size and limit, both in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HugepageLimit {
    /// Page size in bytes (2097152 for 2Mi pages).
    pub page_size_bytes: u64,
    /// Limit in bytes.
    pub limit_bytes: u64,
}

/// A kubelet `ResourceConfig` (pod or QoS cgroup) or the CRI container
/// resources, cgroup-version neutral.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceConfig {
    /// CPU shares (cgroup v1 units; v2 weight derives from them).
    pub cpu_shares: Option<u64>,
    /// CFS quota in microseconds; -1 = unlimited.
    pub cpu_quota: Option<i64>,
    /// CFS period in microseconds.
    pub cpu_period: Option<u64>,
    /// Memory limit in bytes.
    pub memory_limit: Option<i64>,
    /// hugetlb limits by page size.
    pub hugepage_limits: Option<Vec<HugepageLimit>>,
    /// cgroup v2 `unified` keys (memory.min, memory.low, memory.high, ...).
    pub unified: Vec<(String, String)>,
}

/// cgroup v1 minimum CPU shares.
pub const MIN_SHARES: u64 = 2;
/// cgroup v1 maximum CPU shares.
pub const MAX_SHARES: u64 = 262_144;
/// Shares of one CPU.
pub const SHARES_PER_CPU: i64 = 1024;
/// Millicores of one CPU.
pub const MILLI_CPU_TO_CPU: i64 = 1000;
/// The smallest CFS quota the kubelet writes, in microseconds.
pub const MIN_QUOTA_PERIOD: i64 = 1000;

/// `MilliCPUToShares`: 0 (or negative) -> 2, else m * 1024 / 1000 in [2, 262144].
pub fn milli_cpu_to_shares(milli_cpu: i64) -> u64 {
    if milli_cpu <= 0 {
        return MIN_SHARES;
    }
    let shares = mul_div(
        milli_cpu.into(),
        SHARES_PER_CPU.into(),
        MILLI_CPU_TO_CPU.into(),
    );
    shares.clamp(MIN_SHARES.into(), MAX_SHARES.into()) as u64
}

/// `MilliCPUToQuota`: 0 -> 0 (no quota), else m * period / 1000, at least 1000 us.
pub fn milli_cpu_to_quota(milli_cpu: i64, period_us: u64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    let quota = mul_div(milli_cpu.into(), period_us.into(), MILLI_CPU_TO_CPU.into());
    quota.clamp(MIN_QUOTA_PERIOD.into(), i64::MAX.into()) as i64
}

/// `SharesToMilliCPU`: ceil(shares * 1000 / 1024) for shares >= 2, else 0.
pub fn shares_to_milli_cpu(shares: i64) -> i64 {
    if shares < MIN_SHARES as i64 {
        return 0;
    }
    let numerator = shares as i128 * MILLI_CPU_TO_CPU as i128;
    ((numerator + SHARES_PER_CPU as i128 - 1) / SHARES_PER_CPU as i128).min(i64::MAX as i128) as i64
}

/// `QuotaToMilliCPU`: -1 (unlimited) -> 0, else quota * 1000 / period.
pub fn quota_to_milli_cpu(quota: i64, period_us: i64) -> i64 {
    if quota == -1 || period_us == 0 {
        return 0;
    }
    mul_div(quota.into(), MILLI_CPU_TO_CPU.into(), period_us.into()) as i64
}

/// Kubelet's linear shares -> cgroup v2 weight: `1 + (shares - 2) * 9999 / 262142`.
pub fn cpu_shares_to_weight_linear(shares: u64) -> u64 {
    let shares = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((shares - 2) * 9999) / 262_142
}

/// Kubelet's inverse map, weight -> shares: `2 + (weight - 1) * 262142 / 9999`.
pub fn cpu_weight_to_shares(weight: u64) -> u64 {
    let weight = weight.clamp(1, 10_000);
    ((weight - 1) * 262_142) / 9999 + 2
}

/// runc >= 1.3.2 logarithmic shares -> weight (1024 shares -> weight 100).
pub fn cpu_shares_to_weight_logarithmic(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    if shares <= MIN_SHARES {
        return 1;
    }
    if shares >= MAX_SHARES {
        return 10_000;
    }
    let l = libm::log2(shares as f64);
    // A quadratic in log2(shares) through (2, 1), (1024, 100), (262144, 10000).
    let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
    libm::ceil(libm::pow(10.0, exponent)) as u64
}

/// `CPUSharesEqualAfterV2RoundTrip`: does `readback` equal `allocated` after the lossy v2 round trip?
pub fn cpu_shares_equal_after_v2_round_trip(allocated: u64, readback: u64) -> bool {
    readback == cpu_weight_to_shares(cpu_shares_to_weight_linear(allocated))
}

/// Hugepage limits by page size from the `hugepages-<size>` keys of a list
/// (upstream `HugePageLimits`); malformed sizes are ignored, as upstream does.
pub fn hugepage_limits(list: &ResourceMap) -> BTreeMap<u64, u64> {
    let mut limits = BTreeMap::new();
    for (name, amount) in list {
        let Some(size) = name
            .strip_prefix("hugepages-")
            .and_then(|s| Quantity::parse(s).ok())
        else {
            continue;
        };
        if size.is_negative() || size.is_zero() {
            continue;
        }
        let entry = limits.entry(size.value() as u64).or_insert(0u64);
        *entry = entry.saturating_add(amount.value().max(0) as u64);
    }
    limits
}

fn hugepage_list(limits: &BTreeMap<u64, u64>) -> Vec<HugepageLimit> {
    limits
        .iter()
        .map(|(size, limit)| HugepageLimit {
            page_size_bytes: *size,
            limit_bytes: *limit,
        })
        .collect()
}

/// Whether every container declares a non-zero limit for `resource`, seen
/// the way upstream's `ContainerFn` sees it: regular containers by their own
/// limits, init containers by their in-use list (own + earlier sidecars).
fn all_limits_declared(pod: &Pod, resource: &str) -> bool {
    let declared = |list: &ResourceMap| list.get(resource).is_some_and(|q| !q.is_zero());
    if !pod
        .containers
        .iter()
        .all(|c| declared(c.resources.limits()))
    {
        return false;
    }
    // Only `resource` matters, so its sidecar sum is tracked alone (as
    // upstream's in-use lists would hold it: absent until some sidecar sets it).
    let sum = |a: Option<Quantity>, b: Option<Quantity>| match (a, b) {
        (Some(a), Some(b)) => Some(a.saturating_add(b)),
        (a, b) => a.or(b),
    };
    let mut sidecar_sum = None;
    for c in &pod.init_containers {
        let own = c.resources.limits().get(resource).copied();
        let in_use = if c.kind == ContainerKind::Sidecar {
            sidecar_sum = sum(sidecar_sum, own);
            sidecar_sum
        } else {
            sum(own, sidecar_sum)
        };
        if in_use.is_none_or(|q| q.is_zero()) {
            return false;
        }
    }
    true
}

/// `ResourceConfigForPod`: the pod cgroup's values.
pub fn pod_resource_config(pod: &Pod, node: &NodeConfig, qos: QosClass) -> ResourceConfig {
    let gates = &node.gates;
    let options = resources::kubelet_options(gates);
    let requests = resources::pod_requests(pod, &options, gates);
    let limits = resources::pod_limits(pod, &options, gates);
    pod_resource_config_from(pod, node, qos, &requests, &limits)
}

/// [`pod_resource_config`] given the pod's `PodRequests` and `PodLimits`
/// under [`resources::kubelet_options`].
pub fn pod_resource_config_from(
    pod: &Pod,
    node: &NodeConfig,
    qos: QosClass,
    requests: &ResourceMap,
    limits: &ResourceMap,
) -> ResourceConfig {
    let gates = &node.gates;
    let mut cpu_limits_declared = all_limits_declared(pod, "cpu");
    let mut memory_limits_declared = all_limits_declared(pod, "memory");
    if gates.pod_level_resources && pod_level_resources_set(pod) {
        let pod_limits = pod.resources.as_ref().map(|r| r.limits());
        if pod_limits
            .and_then(|l| l.get("cpu"))
            .is_some_and(|q| !q.is_zero())
        {
            cpu_limits_declared = true;
        }
        if pod_limits
            .and_then(|l| l.get("memory"))
            .is_some_and(|q| !q.is_zero())
        {
            memory_limits_declared = true;
        }
    }

    let milli = |map: &ResourceMap, k: &str| map.get(k).map_or(0, |q| q.milli_value());
    let cpu_shares = milli_cpu_to_shares(milli(requests, "cpu"));
    let cpu_quota = if node.cpu_cfs_quota {
        milli_cpu_to_quota(milli(limits, "cpu"), node.cfs_period_us)
    } else {
        -1
    };
    let memory_limit = limits.get("memory").map_or(0, |q| q.value());
    let hugepages = hugepage_limits(requests);

    let mut config = ResourceConfig {
        cpu_shares: None,
        cpu_quota: None,
        cpu_period: None,
        memory_limit: None,
        hugepage_limits: Some(hugepage_list(&hugepages)),
        unified: Vec::new(),
    };
    match qos {
        QosClass::Guaranteed => {
            config.cpu_shares = Some(cpu_shares);
            config.cpu_quota = Some(cpu_quota);
            config.cpu_period = Some(node.cfs_period_us);
            config.memory_limit = Some(memory_limit);
        }
        QosClass::Burstable => {
            config.cpu_shares = Some(cpu_shares);
            if cpu_limits_declared {
                config.cpu_quota = Some(cpu_quota);
                config.cpu_period = Some(node.cfs_period_us);
            }
            if memory_limits_declared {
                config.memory_limit = Some(memory_limit);
            }
        }
        QosClass::BestEffort => {
            config.cpu_shares = Some(MIN_SHARES);
        }
    }

    if memory_qos_enforced(node) {
        let memory_request = requests.get("memory").map_or(0, |q| q.value());
        if memory_request > 0
            && let Some(key) = crate::memory_qos::protection_file(node, qos)
        {
            config
                .unified
                .push((key.to_string(), decimal(memory_request)));
        }
    }
    config
}

/// The CRI `LinuxContainerResources` for one container (upstream
/// `generateLinuxContainerResources` / `calculateLinuxResources`).
pub fn container_resource_config(
    pod: &Pod,
    c: &Container,
    node: &NodeConfig,
    qos: QosClass,
) -> ResourceConfig {
    let cpu_request = c.resources.requests().get("cpu").copied();
    let cpu_limit = container_limit_with_pod_fallback(pod, c, &node.gates, "cpu");
    let memory_limit = container_limit_with_pod_fallback(pod, c, &node.gates, "memory");

    // Upstream: a missing request defaults to the limit (the API server does
    // this for new pods; the kubelet repeats it for old ones).
    let cpu_shares = match cpu_request {
        None => milli_cpu_to_shares(cpu_limit.milli_value()),
        Some(request) => milli_cpu_to_shares(request.milli_value()),
    };
    let (cpu_quota, cpu_period) = if node.cpu_cfs_quota {
        (
            Some(milli_cpu_to_quota(
                cpu_limit.milli_value(),
                node.cfs_period_us,
            )),
            Some(node.cfs_period_us),
        )
    } else {
        (None, None)
    };

    // Every size the node offers starts at 0 (an unset hugetlb limit is 0,
    // not max). With pod-level resources, the pod-level hugepage limits come
    // next and the container's own limits prevail per size (upstream
    // `GetHugepageLimitsFromResources`, kubernetes PR 131089), so a
    // container that sets none can use the pod's hugepages.
    // `hugepage_limits` reads only the `hugepages-*` entries.
    let mut hugepages: BTreeMap<u64, u64> = node.hugepage_sizes.iter().map(|s| (*s, 0)).collect();
    if node.gates.pod_level_resources
        && pod_level_resources_set(pod)
        && let Some(pod_limits) = pod.resources.as_ref().map(|r| r.limits())
    {
        hugepages.extend(hugepage_limits(pod_limits));
    }
    hugepages.extend(hugepage_limits(c.resources.limits()));

    let mut unified = Vec::new();
    if node.cgroup_version == CgroupVersion::V2 && !node.single_process_oom_kill {
        unified.push(("memory.oom.group".to_string(), "1".to_string()));
    }
    unified.extend(crate::memory_qos::container_unified(c, node, qos));
    ResourceConfig {
        cpu_shares: Some(cpu_shares),
        cpu_quota,
        cpu_period,
        memory_limit: Some(memory_limit.value()),
        hugepage_limits: Some(hugepage_list(&hugepages)),
        unified,
    }
}

/// cgroup v2 hugetlb file size names: 2MB, 1GB, 64KB (upstream `HugePageUnitSizeFromByteSize`).
pub fn hugetlb_size_name(size: u64) -> String {
    crate::HugetlbSize(size).to_string()
}

/// An integer's decimal text. `itoa`, not `format!`: cheaper in the guest.
fn decimal(value: impl itoa::Integer) -> String {
    itoa::Buffer::new().format(value).to_owned()
}

/// `cpu.max`: the quota when there is a positive one, else `max`.
fn cpu_max(quota: Option<i64>, period: Option<u64>, default_period: u64) -> CgroupValue {
    CgroupValue::CpuMax(CpuMaxValue {
        quota: quota.filter(|q| *q > 0).map(|q| q as u64),
        period: period.unwrap_or(default_period),
    })
}

fn bytes_or_max(value: Option<i64>) -> CgroupValue {
    match value {
        Some(v) if v > 0 => CgroupValue::Number(v as u64),
        _ => CgroupValue::Max,
    }
}

fn common_files(
    rc: &ResourceConfig,
    hugepage_limits: &[HugepageLimit],
    weight: Option<u64>,
    node: &NodeConfig,
    files: &mut Vec<CgroupFile>,
) {
    files.reserve(3 + 2 * hugepage_limits.len() + rc.unified.len());
    let mut push =
        |file: CgroupFileName, value: CgroupValue| files.push(CgroupFile { file, value });
    if let Some(weight) = weight {
        push(CgroupFileName::CpuWeight, CgroupValue::Number(weight));
    }
    push(
        CgroupFileName::CpuMax,
        cpu_max(rc.cpu_quota, rc.cpu_period, node.cfs_period_us),
    );
    push(CgroupFileName::MemoryMax, bytes_or_max(rc.memory_limit));
    for limit in hugepage_limits {
        let size = limit.page_size_bytes;
        let value = CgroupValue::Number(limit.limit_bytes);
        if node.hugetlb_reservations {
            // runc writes the reservation limit with the same value
            // (libcontainer fs2 `setHugeTlb`), so reserved-but-unfaulted
            // pages are bounded too.
            push(CgroupFileName::HugetlbMax(size), value.clone());
            push(CgroupFileName::HugetlbRsvdMax(size), value);
        } else {
            push(CgroupFileName::HugetlbMax(size), value);
        }
    }
    for (key, value) in &rc.unified {
        // The `unified` entries are the policy's own (Memory QoS and
        // memory.oom.group), each a file and a number or `max`.
        match CgroupFile::parse(key, value) {
            Some(file) => files.push(file),
            None => debug_assert!(false, "unified entry {key}={value} is not a cgroup file"),
        }
    }
}

/// The pod cgroup's v2 files. Sizes the node offers but the pod does not
/// request get a hugetlb limit of 0 (an unset hugetlb limit is 0, not max).
pub fn pod_cgroup_files(rc: &ResourceConfig, node: &NodeConfig) -> Vec<CgroupFile> {
    let mut limits: BTreeMap<u64, u64> = node.hugepage_sizes.iter().map(|s| (*s, 0)).collect();
    for l in rc.hugepage_limits.iter().flatten() {
        limits.insert(l.page_size_bytes, l.limit_bytes);
    }
    let mut files = Vec::new();
    let weight = rc.cpu_shares.map(cpu_shares_to_weight_linear);
    common_files(rc, &hugepage_list(&limits), weight, node, &mut files);
    files
}

/// The container cgroup's v2 files, as the runtime writes them from the CRI values.
pub fn container_cgroup_files(rc: &ResourceConfig, node: &NodeConfig) -> Vec<CgroupFile> {
    let weight = rc.cpu_shares.map(|shares| match node.cpu_weight_curve {
        CpuWeightCurve::Linear => cpu_shares_to_weight_linear(shares),
        CpuWeightCurve::Logarithmic => cpu_shares_to_weight_logarithmic(shares),
    });
    let mut files = Vec::new();
    common_files(
        rc,
        rc.hugepage_limits.as_deref().unwrap_or_default(),
        weight,
        node,
        &mut files,
    );
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_match_upstream_examples() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(100), 102);
        assert_eq!(milli_cpu_to_shares(1_000_000), MAX_SHARES);
        assert_eq!(milli_cpu_to_quota(0, 100_000), 0);
        assert_eq!(milli_cpu_to_quota(5, 100_000), 1000);
        assert_eq!(milli_cpu_to_quota(200, 100_000), 20_000);
        assert_eq!(cpu_shares_to_weight_linear(51), 2);
        assert_eq!(cpu_weight_to_shares(2), 28);
        assert_eq!(cpu_shares_to_weight_linear(2), 1);
        assert_eq!(cpu_shares_to_weight_linear(MAX_SHARES), 10_000);
        assert!(cpu_shares_equal_after_v2_round_trip(51, 28));
    }

    #[test]
    fn logarithmic_curve_hits_its_anchor_points() {
        assert_eq!(cpu_shares_to_weight_logarithmic(2), 1);
        assert_eq!(cpu_shares_to_weight_logarithmic(1024), 100);
        assert_eq!(cpu_shares_to_weight_logarithmic(MAX_SHARES), 10_000);
        let mut last = 0;
        for shares in 2..MAX_SHARES {
            let weight = cpu_shares_to_weight_logarithmic(shares);
            assert!(
                weight >= last && (1..=10_000).contains(&weight),
                "shares {shares}"
            );
            last = weight;
        }
    }

    #[test]
    fn hugetlb_names_follow_the_kernel() {
        assert_eq!(hugetlb_size_name(2 * 1024 * 1024), "2MB");
        assert_eq!(hugetlb_size_name(1024 * 1024 * 1024), "1GB");
        assert_eq!(hugetlb_size_name(64 * 1024), "64KB");
    }
}
