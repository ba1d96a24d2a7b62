//! Memory QoS (KEP-2570): memory.min / memory.low / memory.high for
//! containers, pods, QoS tiers, `kubepods` and the reserved cgroups.
//!
//! - memory.high (containers, Burstable and BestEffort only):
//!   `floor((request + factor * (limit or allocatable - request)) / page) * page`,
//!   written only when it is above the request (it must exceed memory.min).
//!   The container's own limit is used; the implied pod-level limit is not
//!   (upstream reads `container.Resources.Limits`).
//! - memory.min / memory.low by `memoryReservationPolicy`: `None` writes
//!   nothing; `HardReservation` (the KEP) writes memory.min = requests for
//!   containers, pods, tiers and `kubepods`; `TieredReservation` (upstream
//!   1.36) protects Guaranteed memory with memory.min and Burstable memory
//!   with memory.low. The node-level values (QoS cgroups, `kubepods`, the
//!   reserved cgroups) are in `node_cgroups`.
//!
//! Everything here applies only with the MemoryQoS gate on a cgroup v2 node
//! ([`memory_qos_enforced`], which `cgroup`, `node_cgroups` and `resize` read
//! too).

use crate::model::Container;
use crate::node::{CgroupVersion, MemoryReservationPolicy, NodeConfig};
use crate::qos::QosClass;

/// Memory QoS applies only with its gate on a cgroup v2 node.
pub fn memory_qos_enforced(node: &NodeConfig) -> bool {
    node.gates.memory_qos && node.cgroup_version == CgroupVersion::V2
}

/// Container memory.high in bytes, or `None` when it is not written.
/// `request`/`limit` are the container's own values; `allocatable` stands in
/// for a missing limit. Float arithmetic matches upstream (no fused ops).
pub fn container_memory_high(
    request: Option<u64>,
    limit: Option<u64>,
    allocatable: u64,
    factor: f64,
    page_size: u64,
    qos: QosClass,
) -> Option<u64> {
    if qos == QosClass::Guaranteed {
        return None;
    }
    let request = request.unwrap_or(0);
    let limit = limit.unwrap_or(0);
    // request == limit is not overcommitted: nothing to throttle (upstream
    // skips it too). BestEffort (neither set) still gets the KEP's
    // factor * allocatable.
    if limit != 0 && request == limit {
        return None;
    }
    let base = if limit != 0 { limit } else { allocatable };
    if base == 0 || page_size == 0 {
        return None;
    }
    let raw = (request as f64 + (base as f64 - request as f64) * factor).floor();
    if !raw.is_finite() || raw <= 0.0 {
        return None;
    }
    let high = ((raw / page_size as f64) as u64).saturating_mul(page_size);
    (high != 0 && high > request).then_some(high)
}

fn bytes(list: &crate::model::ResourceMap, key: &str) -> Option<u64> {
    list.get(key)
        .map(|q| q.value().max(0) as u64)
        .filter(|v| *v > 0)
}

/// The file that protects the memory request of a pod or container of class
/// `qos`, the one place that chooses memory.min or memory.low (for the pod
/// cgroup in `cgroup` and for containers here): TieredReservation (upstream
/// 1.36 `generateLinuxContainerResources` / `ResourceConfigForPod`) gives
/// Guaranteed memory hard protection and Burstable memory soft protection;
/// HardReservation is the KEP's memory.min for every class; BestEffort and
/// the `None` policy are not protected. The caller checks that Memory QoS
/// is enforced.
pub fn protection_file(node: &NodeConfig, qos: QosClass) -> Option<&'static str> {
    match (node.memory_reservation_policy, qos) {
        (MemoryReservationPolicy::None, _) | (_, QosClass::BestEffort) => None,
        (MemoryReservationPolicy::HardReservation, _)
        | (MemoryReservationPolicy::TieredReservation, QosClass::Guaranteed) => Some("memory.min"),
        (MemoryReservationPolicy::TieredReservation, QosClass::Burstable) => Some("memory.low"),
    }
}

/// The container's `unified` Memory QoS entries (memory.min, memory.high).
pub fn container_unified(c: &Container, node: &NodeConfig, qos: QosClass) -> Vec<(String, String)> {
    if !memory_qos_enforced(node) {
        return Vec::new();
    }
    let mut unified = Vec::new();
    let request = bytes(c.resources.requests(), "memory");
    let limit = bytes(c.resources.limits(), "memory");
    if let (Some(key), Some(request)) = (protection_file(node, qos), request) {
        unified.push((key.to_string(), request.to_string()));
    }
    let high = container_memory_high(
        request,
        limit,
        node.allocatable_memory(),
        node.memory_throttling_factor,
        node.page_size,
        qos,
    );
    if let Some(high) = high {
        unified.push(("memory.high".to_string(), high.to_string()));
    }
    unified
}

/// A warning about the node's kernel for Memory QoS, with the
/// `kernel-version` it is about (as given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelWarning {
    /// Older than 5.9: `memory.high` can livelock (KEP-2570's prerequisite).
    TooOld(String),
    /// Not readable as `major.minor`, so 5.9 cannot be checked.
    Unreadable(String),
}

impl KernelWarning {
    /// The text of [`KernelWarning::TooOld`] for `version`; hosts print
    /// the contract's warning through it too ([`crate::evaluation_text!`]).
    pub fn write_too_old(f: &mut core::fmt::Formatter<'_>, version: &str) -> core::fmt::Result {
        write!(
            f,
            "kernel {version} is older than 5.9: workloads at memory.high may livelock (KEP-2570); \
             use a 5.9+ kernel or set memoryThrottlingFactor: 1.0 to disable early throttling"
        )
    }

    /// The text of [`KernelWarning::Unreadable`] for `version`.
    pub fn write_unreadable(f: &mut core::fmt::Formatter<'_>, version: &str) -> core::fmt::Result {
        write!(
            f,
            "cannot read kernel version `{version}`; Memory QoS needs 5.9 or newer"
        )
    }
}

impl core::fmt::Display for KernelWarning {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KernelWarning::TooOld(version) => KernelWarning::write_too_old(f, version),
            KernelWarning::Unreadable(version) => KernelWarning::write_unreadable(f, version),
        }
    }
}

/// Warnings about the node's kernel for Memory QoS: below 5.9 memory.high
/// can livelock (KEP-2570 Alpha v1.36 prerequisite).
pub fn kernel_warnings(node: &NodeConfig) -> Vec<KernelWarning> {
    if !memory_qos_enforced(node) {
        return Vec::new();
    }
    let Some(version) = node.kernel_version.as_deref() else {
        return Vec::new();
    };
    match parse_kernel_version(version) {
        Some((major, minor)) if (major, minor) < (5, 9) => {
            vec![KernelWarning::TooOld(version.to_string())]
        }
        Some(_) => Vec::new(),
        None => vec![KernelWarning::Unreadable(version.to_string())],
    }
}

/// `5.15.0-91-generic` -> (5, 15).
pub fn parse_kernel_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: u64 = 1 << 20;

    #[test]
    fn v1_27_table_from_the_kep() {
        // limit 1000Mi, factor 0.9, 1Mi pages: requests 0..900 -> 900..1036 (in Mi).
        let table = [
            (0, 900),
            (100, 910),
            (200, 920),
            (300, 930),
            (400, 940),
            (500, 950),
            (800, 980),
            (900, 990),
        ];
        for (request, high) in table {
            let got = container_memory_high(
                Some(request * MI),
                Some(1000 * MI),
                16 << 30,
                0.9,
                MI,
                QosClass::Burstable,
            );
            assert_eq!(got, Some(high * MI), "request {request}Mi");
        }
        assert_eq!(
            container_memory_high(
                Some(1000 * MI),
                Some(1000 * MI),
                16 << 30,
                0.9,
                MI,
                QosClass::Burstable
            ),
            None
        );
    }

    #[test]
    fn qos_cases() {
        let alloc = 16u64 << 30;
        assert_eq!(
            container_memory_high(
                Some(MI),
                Some(2 * MI),
                alloc,
                0.9,
                4096,
                QosClass::Guaranteed
            ),
            None
        );
        // Case III: no request -> factor * limit.
        assert_eq!(
            container_memory_high(None, Some(1000 * MI), alloc, 0.9, MI, QosClass::Burstable),
            Some(900 * MI)
        );
        // BestEffort: factor * allocatable.
        assert_eq!(
            container_memory_high(None, None, alloc, 0.9, MI, QosClass::BestEffort),
            Some(14745 * MI)
        );
        // factor 1.0: memory.high = limit.
        assert_eq!(
            container_memory_high(
                Some(500 * MI),
                Some(1000 * MI),
                alloc,
                1.0,
                MI,
                QosClass::Burstable
            ),
            Some(1000 * MI)
        );
    }

    #[test]
    fn kernel_versions_parse() {
        assert_eq!(parse_kernel_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(parse_kernel_version("4.19.0"), Some((4, 19)));
        assert_eq!(parse_kernel_version("6.1"), Some((6, 1)));
        assert_eq!(parse_kernel_version("garbage"), None);
    }
}
