//! Reading node settings: a YAML/JSON node file (capacity, allocatable and
//! the kubelet configuration fields resource policy reads), or, without a
//! file, what this machine reports. The host only reports; defaults and
//! derived values are the policy's.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;

use crate::bindings as wit;
use crate::pod_input::{parse_documents, read_input};

/// A node file. Unknown fields are errors, so typos do not pass silently.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeFile {
    /// Node name.
    #[serde(default)]
    pub name: String,
    /// `status.capacity`.
    #[serde(default)]
    pub capacity: BTreeMap<String, QuantityText>,
    /// `status.allocatable`; absent = capacity minus reservations.
    pub allocatable: Option<BTreeMap<String, QuantityText>>,
    /// `v1` or `v2` (default `v2`).
    pub cgroup_version: Option<String>,
    /// Kernel page size in bytes (default 4096).
    pub page_size: Option<u64>,
    /// `linear` (default) or `logarithmic` container cpu.weight curve.
    pub cpu_weight_curve: Option<String>,
    /// Kernel release (`uname -r`), for the Memory QoS kernel check.
    pub kernel_version: Option<String>,
    /// The kubelet configuration (KubeletConfiguration field names).
    #[serde(default)]
    pub kubelet_config: KubeletConfig,
    /// The machine's sysfs tree, where the resource managers read the CPU
    /// and NUMA topology (relative to this file; `--sysfs` overrides it).
    pub sysfs: Option<std::path::PathBuf>,
}

/// A quantity written as a string or a bare number.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum QuantityText {
    /// `"2Gi"`.
    Text(String),
    /// `2`.
    Number(serde_json::Number),
}

impl QuantityText {
    fn text(&self) -> String {
        match self {
            QuantityText::Text(t) => t.clone(),
            QuantityText::Number(n) => n.to_string(),
        }
    }
}

/// The KubeletConfiguration fields podpolicy reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(
    missing_docs,
    reason = "each field is the KubeletConfiguration field of the same name"
)]
pub struct KubeletConfig {
    pub cgroup_driver: Option<String>,
    #[serde(rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: Option<bool>,
    pub enforce_node_allocatable: Option<Vec<String>>,
    #[serde(rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: Option<bool>,
    #[serde(rename = "cpuCFSQuotaPeriod")]
    pub cpu_cfs_quota_period: Option<String>,
    pub memory_throttling_factor: Option<f64>,
    pub memory_reservation_policy: Option<String>,
    #[serde(rename = "singleProcessOOMKill")]
    pub single_process_oom_kill: Option<bool>,
    #[serde(default)]
    pub kube_reserved: BTreeMap<String, QuantityText>,
    #[serde(default)]
    pub system_reserved: BTreeMap<String, QuantityText>,
    pub cpu_manager_policy: Option<String>,
    #[serde(default)]
    pub cpu_manager_policy_options: BTreeMap<String, String>,
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: Option<String>,
    pub memory_manager_policy: Option<String>,
    #[serde(default)]
    pub reserved_memory: Vec<ReservedMemory>,
    pub topology_manager_policy: Option<String>,
    pub topology_manager_scope: Option<String>,
    #[serde(default)]
    pub topology_manager_policy_options: BTreeMap<String, String>,
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    pub eviction_hard: Option<BTreeMap<String, String>>,
}

/// KubeletConfiguration `reservedMemory` entry.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReservedMemory {
    /// NUMA node id.
    pub numa_node: u32,
    /// Reserved amounts.
    #[serde(default)]
    pub limits: BTreeMap<String, QuantityText>,
}

fn resource_list(map: &BTreeMap<String, QuantityText>) -> wit::ResourceList {
    map.iter()
        .map(|(name, q)| wit::ResourceQuantity {
            name: name.clone(),
            quantity: q.text(),
        })
        .collect()
}

fn options(map: &BTreeMap<String, String>) -> Vec<wit::PolicyOption> {
    map.iter()
        .map(|(name, value)| wit::PolicyOption {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

/// Parse a Go duration such as `100ms`, `1s`, `5000us` into microseconds.
pub fn parse_duration_us(text: &str) -> Result<u64> {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| anyhow!("`{text}` is not a duration such as 100ms"))?;
    let factor = match unit {
        "us" | "µs" => 1.0,
        "ms" => 1_000.0,
        "s" => 1_000_000.0,
        "ns" => 0.001,
        _ => bail!("`{text}` has an unknown duration unit (use ns, us, ms or s)"),
    };
    Ok((value * factor).round() as u64)
}

impl NodeFile {
    /// Convert to the WIT record; enum-like fields are checked here because
    /// the WIT types are enums.
    pub fn to_wit(&self) -> Result<wit::NodeSettings> {
        let k = &self.kubelet_config;
        let cgroup_version = match self.cgroup_version.as_deref() {
            None | Some("v2") | Some("2") => wit::CgroupVersion::V2,
            Some("v1") | Some("1") => wit::CgroupVersion::V1,
            Some(other) => bail!("cgroupVersion: `{other}` is not v1 or v2"),
        };
        let cgroup_driver = match k.cgroup_driver.as_deref() {
            None | Some("cgroupfs") => wit::CgroupDriver::Cgroupfs,
            Some("systemd") => wit::CgroupDriver::Systemd,
            Some(other) => {
                bail!("kubeletConfig.cgroupDriver: `{other}` is not cgroupfs or systemd")
            }
        };
        let memory_reservation_policy = match k.memory_reservation_policy.as_deref() {
            None => None,
            Some("None") => Some(wit::MemoryReservationPolicy::None),
            Some("HardReservation") => Some(wit::MemoryReservationPolicy::HardReservation),
            Some("TieredReservation") => Some(wit::MemoryReservationPolicy::TieredReservation),
            Some(other) => bail!(
                "kubeletConfig.memoryReservationPolicy: `{other}` is not one of None, HardReservation, TieredReservation"
            ),
        };
        let cpu_weight_curve = match self.cpu_weight_curve.as_deref() {
            None => None,
            Some("linear") => Some(wit::CpuWeightCurve::Linear),
            Some("logarithmic") => Some(wit::CpuWeightCurve::Logarithmic),
            Some(other) => bail!("cpuWeightCurve: `{other}` is not linear or logarithmic"),
        };
        let cpu_cfs_quota_period_us = k
            .cpu_cfs_quota_period
            .as_deref()
            .map(parse_duration_us)
            .transpose()
            .context("kubeletConfig.cpuCFSQuotaPeriod")?;
        Ok(wit::NodeSettings {
            name: self.name.clone(),
            capacity: resource_list(&self.capacity),
            allocatable: self.allocatable.as_ref().map(resource_list),
            kube_reserved: resource_list(&k.kube_reserved),
            system_reserved: resource_list(&k.system_reserved),
            cgroup_version,
            cgroup_driver,
            cgroups_per_qos: k.cgroups_per_qos,
            enforce_node_allocatable: k.enforce_node_allocatable.clone(),
            cpu_cfs_quota: k.cpu_cfs_quota,
            cpu_cfs_quota_period_us,
            memory_throttling_factor: k.memory_throttling_factor,
            memory_reservation_policy,
            page_size_bytes: self.page_size,
            cpu_weight_curve,
            single_process_oom_kill: k.single_process_oom_kill,
            cpu_manager_policy: k.cpu_manager_policy.clone(),
            cpu_manager_policy_options: options(&k.cpu_manager_policy_options),
            reserved_system_cpus: k.reserved_system_cpus.clone(),
            memory_manager_policy: k.memory_manager_policy.clone(),
            reserved_memory: k
                .reserved_memory
                .iter()
                .map(|r| wit::NumaReservedMemory {
                    numa_node: r.numa_node,
                    limits: resource_list(&r.limits),
                })
                .collect(),
            topology_manager_policy: k.topology_manager_policy.clone(),
            topology_manager_scope: k.topology_manager_scope.clone(),
            topology_manager_policy_options: options(&k.topology_manager_policy_options),
            feature_gates: k
                .feature_gates
                .iter()
                .map(|(name, enabled)| wit::FeatureGate {
                    name: name.clone(),
                    enabled: *enabled,
                })
                .collect(),
            kernel_version: self.kernel_version.clone(),
            eviction_hard: k.eviction_hard.as_ref().map(|map| {
                map.iter()
                    .map(|(signal, threshold)| (signal.clone(), threshold.clone()))
                    .collect()
            }),
        })
    }
}

/// Read a node file.
pub fn read_node(path: &Path) -> Result<wit::NodeSettings> {
    read_node_file(path).map(|(node, _)| node)
}

/// Read a node file, with the sysfs tree it names (resolved against the
/// file's directory).
pub fn read_node_file(path: &Path) -> Result<(wit::NodeSettings, Option<std::path::PathBuf>)> {
    let (origin, text) = read_input(path)?;
    let file = parse_node_file(&origin, &text)?;
    let sysfs = file
        .sysfs
        .as_ref()
        .map(|sysfs| path.parent().unwrap_or_else(|| Path::new(".")).join(sysfs));
    Ok((file.to_wit().with_context(|| origin)?, sysfs))
}

fn parse_node_file(origin: &str, text: &str) -> Result<NodeFile> {
    let docs = parse_documents(origin, text)?;
    let [doc] = docs.as_slice() else {
        bail!(
            "{origin}: expected exactly one node document, found {}",
            docs.len()
        );
    };
    serde_path_to_error::deserialize(doc)
        .map_err(|e| anyhow!("{origin}: {}: {}", e.path(), e.inner()))
}

/// Parse a node document; `origin` names it in errors.
pub fn parse_node(origin: &str, text: &str) -> Result<wit::NodeSettings> {
    let origin = origin.to_string();
    parse_node_file(&origin, text)?
        .to_wit()
        .with_context(|| origin)
}

/// Describe this machine: memory and CPU capacity, cgroup version, page size.
/// `proc_root` and `cgroup_root` are explicit so tests can point elsewhere.
pub fn local_node(proc_root: &Path, cgroup_root: &Path) -> Result<wit::NodeSettings> {
    let meminfo_path = proc_root.join("meminfo");
    let meminfo = std::fs::read_to_string(&meminfo_path)
        .with_context(|| format!("reading {}", meminfo_path.display()))?;
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow!("{}: no MemTotal line", meminfo_path.display()))?;
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let cgroup_version = if cgroup_root.join("cgroup.controllers").exists() {
        "v2"
    } else {
        "v1"
    };
    let file = NodeFile {
        name: "localhost".into(),
        capacity: BTreeMap::from([
            ("cpu".to_string(), QuantityText::Text(cpus.to_string())),
            (
                "memory".to_string(),
                QuantityText::Text(format!("{mem_kib}Ki")),
            ),
        ]),
        cgroup_version: Some(cgroup_version.into()),
        kernel_version: std::fs::read_to_string(proc_root.join("sys/kernel/osrelease"))
            .ok()
            .map(|v| v.trim().to_string()),
        page_size: nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map(|p| p as u64),
        ..NodeFile::default()
    };
    file.to_wit()
}
