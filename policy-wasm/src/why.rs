//! `explain-values`: each value `evaluate` gives, with the kubelet rule that
//! produced it and that rule's inputs, in one line (`explain --why`).
//!
//! The values are `evaluate`'s own (it runs first); this module only names
//! the path each one took, using the same helpers (`cgroup`, `memory_qos`,
//! `oom`); `tests/e2e/explain_why.rs` checks each reason against its value.

use crate::cgroup::{ResourceConfig, cpu_shares_to_weight_linear};
use crate::field_error::FieldError;
use crate::model::{Container, Pod, ResourceMap};
use crate::node::{CpuWeightCurve, MemoryReservationPolicy, NodeConfig};
use crate::qos::QosClass;
use crate::quantity::Quantity;
use crate::resources;

/// One value `evaluate` gives, with the rule behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueReason {
    /// The container; `None` for the pod cgroup.
    pub container: Option<String>,
    /// The cgroup file, or `oom_score_adj`.
    pub file: String,
    /// The value, as `evaluate` gives it.
    pub value: String,
    /// The rule that produced it, with its inputs, in one line.
    pub reason: String,
}

/// Every value [`crate::evaluate::evaluate_pod`] gives for `pod`, with
/// its reason: the pod cgroup's files, then per container its files and
/// its `oom_score_adj`.
pub fn explain_pod(pod: Pod, node: &NodeConfig) -> Result<Vec<ValueReason>, Vec<FieldError>> {
    let evaluation = crate::evaluate::evaluate_pod(pod.clone(), node)?;
    // As `evaluate`: a pending resize is explained on the allocated values.
    let pod = crate::resize::allocated(&pod).map_or(pod, |(allocated, _)| allocated);
    let class = evaluation.qos_class;
    let gates = &node.gates;
    let options = resources::kubelet_options(gates);
    let requests = resources::pod_requests(&pod, &options, gates);
    let limits = resources::pod_limits(&pod, &options, gates);

    let mut out = Vec::new();
    for file in &evaluation.pod_cgroup_files {
        let (name, value) = (file.file.to_string(), file.value.to_string());
        out.push(ValueReason {
            container: None,
            reason: pod_reason(
                &name,
                &value,
                &evaluation.pod_resources,
                class,
                &requests,
                &limits,
                node,
            ),
            file: name,
            value,
        });
    }
    let containers = pod.init_and_regular().chain(&pod.ephemeral_containers);
    for (c, result) in containers.zip(&evaluation.containers) {
        for file in &result.cgroup_files {
            let (name, value) = (file.file.to_string(), file.value.to_string());
            out.push(ValueReason {
                container: Some(c.name.clone()),
                reason: container_reason(&name, &value, &pod, c, &result.resources, class, node),
                file: name,
                value,
            });
        }
        out.push(ValueReason {
            container: Some(c.name.clone()),
            file: "oom_score_adj".to_owned(),
            value: result.oom_score_adj.to_string(),
            reason: oom_reason(&pod, c, class, result.oom_score_adj),
        });
    }
    Ok(out)
}

fn class_name(class: QosClass) -> &'static str {
    match class {
        QosClass::Guaranteed => "Guaranteed",
        QosClass::Burstable => "Burstable",
        QosClass::BestEffort => "BestEffort",
    }
}

fn curve_name(curve: CpuWeightCurve) -> &'static str {
    match curve {
        CpuWeightCurve::Linear => "linear",
        CpuWeightCurve::Logarithmic => "logarithmic",
    }
}

fn quantity(map: &ResourceMap, name: &str) -> Option<Quantity> {
    map.get(name).copied().filter(|q| !q.is_zero())
}

/// Where a container's limit came from: its own, or the pod-level one it
/// falls back to (KEP-2837), as `cgroup::container_resource_config` reads it.
fn container_limit(
    pod: &Pod,
    c: &Container,
    node: &NodeConfig,
    name: &str,
) -> Option<(Quantity, &'static str)> {
    if let Some(own) = quantity(c.resources.limits(), name) {
        return Some((own, "container"));
    }
    if node.gates.pod_level_resources && resources::pod_level_resources_set(pod) {
        let pod_limit = pod
            .resources
            .as_ref()
            .and_then(|r| quantity(r.limits(), name));
        return pod_limit.map(|q| (q, "pod-level"));
    }
    None
}

fn hugetlb_reason(name: &str, value: &str, node: &NodeConfig, owner: &str) -> Option<String> {
    let rest = name.strip_prefix("hugetlb.")?;
    let (size, rsvd) = match rest.strip_suffix(".rsvd.max") {
        Some(size) => (size, true),
        None => (rest.strip_suffix(".max")?, false),
    };
    let mut reason = if value == "0" {
        format!(
            "no hugepages of size {size} in the {owner}'s limits: 0 (an unset hugetlb limit is 0, not max)"
        )
    } else {
        format!("the {owner}'s hugepages limit for size {size}: {value} bytes")
    };
    if rsvd {
        reason.push_str("; the reservation limit takes the same value (hugetlb reservations)");
    } else if node.hugetlb_reservations {
        reason.push_str("; its .rsvd.max is written with the same value");
    }
    Some(reason)
}

fn protection_reason(file: &str, node: &NodeConfig, class: QosClass, request: &str) -> String {
    let policy = match node.memory_reservation_policy {
        MemoryReservationPolicy::None => "None",
        MemoryReservationPolicy::HardReservation => "HardReservation",
        MemoryReservationPolicy::TieredReservation => "TieredReservation",
    };
    let kind = if file == "memory.min" {
        "hard protection"
    } else {
        "soft protection"
    };
    format!(
        "Memory QoS, memoryReservationPolicy {policy}, {} pod: the memory request {request} bytes gets {kind} ({file})",
        class_name(class)
    )
}

fn pod_reason(
    name: &str,
    value: &str,
    rc: &ResourceConfig,
    class: QosClass,
    requests: &ResourceMap,
    limits: &ResourceMap,
    node: &NodeConfig,
) -> String {
    let class_text = class_name(class);
    match name {
        "cpu.weight" => {
            let shares = rc.cpu_shares.unwrap_or_default();
            let weight = cpu_shares_to_weight_linear(shares);
            match (class, quantity(requests, "cpu")) {
                (QosClass::BestEffort, _) => format!(
                    "BestEffort pod: the minimum 2 shares -> weight {weight} (linear curve)"
                ),
                (_, Some(cpu)) => format!(
                    "pod cpu requests {cpu} (PodRequests) -> {shares} shares (MilliCPUToShares) -> weight {weight} (linear curve, as for every pod cgroup)"
                ),
                (_, None) => format!(
                    "{class_text} pod without cpu requests -> {shares} shares (the minimum) -> weight {weight} (linear curve)"
                ),
            }
        }
        "cpu.max" => match (rc.cpu_quota, quantity(limits, "cpu")) {
            (Some(quota), Some(cpu)) if quota > 0 => format!(
                "{class_text} pod, cpu limits {cpu} (PodLimits) -> quota {quota} us per {} us period (MilliCPUToQuota)",
                rc.cpu_period.unwrap_or(node.cfs_period_us)
            ),
            _ if !node.cpu_cfs_quota => "cpuCFSQuota is off: no quota".to_owned(),
            (None, _) if class == QosClass::Burstable => {
                "Burstable pod where some container sets no cpu limit: no quota (max)".to_owned()
            }
            _ => format!("{class_text} pod without a cpu limit: no quota (max)"),
        },
        "memory.max" => match (rc.memory_limit, quantity(limits, "memory")) {
            (Some(bytes), Some(memory)) if bytes > 0 => {
                format!("{class_text} pod, memory limits {memory} (PodLimits) = {bytes} bytes")
            }
            (None, _) if class == QosClass::Burstable => {
                "Burstable pod where some container sets no memory limit: max".to_owned()
            }
            _ => format!("{class_text} pod without a memory limit: max"),
        },
        "memory.min" | "memory.low" => protection_reason(name, node, class, value),
        _ => hugetlb_reason(name, value, node, "pod")
            .unwrap_or_else(|| format!("{class_text} pod: written as the kubelet writes {name}")),
    }
}

#[allow(clippy::too_many_arguments)]
fn container_reason(
    name: &str,
    value: &str,
    pod: &Pod,
    c: &Container,
    rc: &ResourceConfig,
    class: QosClass,
    node: &NodeConfig,
) -> String {
    let cpu_limit = container_limit(pod, c, node, "cpu");
    match name {
        "cpu.weight" => {
            let shares = rc.cpu_shares.unwrap_or_default();
            let source = match (c.resources.requests().get("cpu"), cpu_limit) {
                (Some(request), _) => format!("container cpu request {request}"),
                (None, Some((limit, from))) => format!(
                    "container has no cpu request; kubelet uses the {from} cpu limit {limit}"
                ),
                (None, None) => "container has neither a cpu request nor a cpu limit".to_owned(),
            };
            format!(
                "{source} -> {shares} shares (MilliCPUToShares, at least 2) -> weight {} ({} curve)",
                value,
                curve_name(node.cpu_weight_curve)
            )
        }
        "cpu.max" => match (rc.cpu_quota, cpu_limit) {
            _ if !node.cpu_cfs_quota => "cpuCFSQuota is off: no quota".to_owned(),
            (Some(quota), Some((limit, from))) if quota > 0 => format!(
                "{from} cpu limit {limit} -> quota {quota} us per {} us period (MilliCPUToQuota)",
                rc.cpu_period.unwrap_or(node.cfs_period_us)
            ),
            _ => "no cpu limit: no quota (max)".to_owned(),
        },
        "memory.max" => match container_limit(pod, c, node, "memory") {
            Some((limit, from)) => format!("{from} memory limit {limit} = {value} bytes"),
            None => "no memory limit: max".to_owned(),
        },
        "memory.oom.group" => {
            "cgroup v2 with singleProcessOOMKill off: the container's processes are OOM-killed together".to_owned()
        }
        "memory.min" | "memory.low" => protection_reason(name, node, class, value),
        "memory.high" => {
            let request = c.resources.requests().get("memory").map_or(0, |q| q.value());
            let (base, base_name) = match quantity(c.resources.limits(), "memory") {
                Some(limit) => (limit.value().max(0) as u64, "memory limit"),
                None => (node.allocatable_memory(), "node allocatable memory (no limit)"),
            };
            format!(
                "Memory QoS, {} container: floor((request {request} + factor {} x ({base_name} {base} - request)) / page {}) x page",
                class_name(class),
                node.memory_throttling_factor,
                node.page_size
            )
        }
        _ => hugetlb_reason(name, value, node, "container").unwrap_or_else(|| {
            format!("written as the runtime writes {name} from the CRI values")
        }),
    }
}

fn oom_reason(pod: &Pod, c: &Container, class: QosClass, value: i32) -> String {
    if crate::oom::is_node_critical_pod(pod) {
        return "node-critical pod (system-node-critical priority class): -997, as Guaranteed"
            .to_owned();
    }
    match class {
        QosClass::Guaranteed => "Guaranteed pod: -997".to_owned(),
        QosClass::BestEffort => "BestEffort pod: 1000".to_owned(),
        QosClass::Burstable => {
            let request = c
                .resources
                .requests()
                .get("memory")
                .map_or_else(|| "0".to_owned(), |q| q.to_string());
            format!(
                "Burstable: 1000 - 1000 x memory request ({request}, plus the pod-level remainder when pod-level requests are set; sidecars take the smallest regular container's) / node memory capacity, kept within 3..=999 -> {value}"
            )
        }
    }
}
