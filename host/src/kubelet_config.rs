//! The kubelet's configuration: a `KubeletConfiguration` file
//! (`kubelet.config.k8s.io/v1beta1`, the fields of Kubernetes 1.36), and the
//! `kubeletConfig` section of a custom node file, which takes the same fields.
//!
//! - The fields the resource policy reads ([`USED_FIELDS`]) are typed in
//!   [`KubeletConfig`] with their kubelet types (durations as strings such as
//!   `100ms`, maps, lists) and passed on in `node-settings`. A value of the
//!   wrong type is an error naming its path.
//! - Every other field of the upstream type ([`OTHER_FIELDS`]) is accepted,
//!   whatever its value (the kubelet checks those when it starts), and named
//!   in a note: `kubeletConfig.<field>: accepted, does not affect the
//!   resource policy`, or, for the few that change values the kubelet writes
//!   but podpolicy does not model, `accepted, not modelled by podpolicy (...)`.
//! - Any other name is an error naming its path, with the closest field
//!   name when one is near: `kubeletConfig.evictionHrd: unknown field ...`.
//!
//! Feature gates: the gates the policy reads
//! (`policy_wasm::features::KNOWN_GATES`) are passed on; any other gate is
//! named in a note and not passed (the policy refuses gates it does not
//! know). A gate that differs from one the policy reads only in case or by
//! a small typo (`MemoryQos`) is an error. Kubernetes' own list of gates is
//! not embedded, so other misspelt gates get a note, not an error.
//!
//! Eviction: `evictionHard` is passed as given. When it is given without
//! `memory.available` and `mergeDefaultEvictionSettings` is true, the
//! kubelet's default (`100Mi`) is added, as the kubelet does; without the
//! merge, the kubelet takes a missing signal as 0 and so does the policy.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, anyhow, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::bindings as wit;
use crate::node_input::{QuantityText, parse_duration_us};
use crate::pod_input::{parse_documents, read_input};

/// `apiVersion` of a KubeletConfiguration.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// `kind` of a KubeletConfiguration.
pub const KIND: &str = "KubeletConfiguration";

/// The KubeletConfiguration fields the resource policy reads (typed in
/// [`KubeletConfig`]), besides `apiVersion` and `kind`.
pub const USED_FIELDS: &[&str] = &[
    "cgroupDriver",
    "cgroupsPerQOS",
    "enforceNodeAllocatable",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriod",
    "memoryThrottlingFactor",
    "memoryReservationPolicy",
    "singleProcessOOMKill",
    "kubeReserved",
    "systemReserved",
    "cpuManagerPolicy",
    "cpuManagerPolicyOptions",
    "reservedSystemCPUs",
    "memoryManagerPolicy",
    "reservedMemory",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "featureGates",
    "evictionHard",
    "mergeDefaultEvictionSettings",
];

/// Every other field of `KubeletConfiguration` v1beta1 in Kubernetes 1.36
/// (`staging/src/k8s.io/kubelet/config/v1beta1/types.go`), in upstream
/// order: accepted with a note, their values not read.
pub const OTHER_FIELDS: &[&str] = &[
    "enableServer",
    "staticPodPath",
    "podLogsDir",
    "syncFrequency",
    "fileCheckFrequency",
    "httpCheckFrequency",
    "staticPodURL",
    "staticPodURLHeader",
    "address",
    "port",
    "readOnlyPort",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "tlsCipherSuites",
    "tlsCurvePreferences",
    "tlsMinVersion",
    "rotateCertificates",
    "serverTLSBootstrap",
    "authentication",
    "authorization",
    "registryPullQPS",
    "registryBurst",
    "imagePullCredentialsVerificationPolicy",
    "preloadedImagesVerificationAllowlist",
    "eventRecordQPS",
    "eventBurst",
    "enableDebuggingHandlers",
    "enableContentionProfiling",
    "healthzPort",
    "healthzBindAddress",
    "oomScoreAdj",
    "clusterDomain",
    "clusterDNS",
    "streamingConnectionIdleTimeout",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "nodeLeaseDurationSeconds",
    "imageMinimumGCAge",
    "imageMaximumGCAge",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "volumeStatsAggPeriod",
    "kubeletCgroups",
    "systemCgroups",
    "cgroupRoot",
    "cpuManagerReconcilePeriod",
    "qosReserved",
    "runtimeRequestTimeout",
    "hairpinMode",
    "maxPods",
    "podCIDR",
    "podPidsLimit",
    "resolvConf",
    "runOnce",
    "nodeStatusMaxImages",
    "maxOpenFiles",
    "contentType",
    "kubeAPIQPS",
    "kubeAPIBurst",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "podsPerCore",
    "enableControllerAttachDetach",
    "protectKernelDefaults",
    "makeIPTablesUtilChains",
    "iptablesMasqueradeBit",
    "iptablesDropBit",
    "failSwapOn",
    "memorySwap",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "containerLogMaxWorkers",
    "containerLogMonitorInterval",
    "configMapAndSecretChangeDetectionStrategy",
    "showHiddenMetricsForVersion",
    "systemReservedCgroup",
    "kubeReservedCgroup",
    "allowedUnsafeSysctls",
    "volumePluginDir",
    "providerID",
    "kernelMemcgNotification",
    "logging",
    "enableSystemLogHandler",
    "enableSystemLogQuery",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "shutdownGracePeriodByPodPriority",
    "crashLoopBackOff",
    "enableProfilingHandler",
    "enableDebugFlagsHandler",
    "seccompDefault",
    "registerWithTaints",
    "registerNode",
    "tracing",
    "localStorageCapacityIsolation",
    "containerRuntimeEndpoint",
    "imageServiceEndpoint",
    "failCgroupV1",
    "userNamespaces",
];

/// Fields of [`OTHER_FIELDS`] that change what the kubelet writes to a
/// cgroup but that podpolicy does not model, with what they change.
const NOT_MODELLED: &[(&str, &str)] = &[
    (
        "cgroupRoot",
        "podpolicy's cgroups start at the cgroup root `apply` is given",
    ),
    (
        "kubeReservedCgroup",
        "pass it to `apply` as --kube-reserved-cgroup",
    ),
    (
        "systemReservedCgroup",
        "pass it to `apply` as --system-reserved-cgroup",
    ),
    ("podPidsLimit", "the pod cgroup's pids.max"),
    ("qosReserved", "memory reserved for the QoS tiers"),
    ("memorySwap", "containers' memory.swap.max"),
];

/// The kubelet's default `evictionHard` `memory.available` on Linux.
pub const DEFAULT_EVICTION_HARD_MEMORY: &str = "100Mi";

/// A KubeletConfiguration: the fields the resource policy reads, typed, and
/// every other field by name in [`KubeletConfig::other`] (checked against
/// [`OTHER_FIELDS`] by [`KubeletConfig::apply`]).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(
    missing_docs,
    reason = "each field is the KubeletConfiguration field of the same name"
)]
pub struct KubeletConfig {
    pub api_version: Option<String>,
    pub kind: Option<String>,
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
    pub kube_reserved: Option<BTreeMap<String, QuantityText>>,
    pub system_reserved: Option<BTreeMap<String, QuantityText>>,
    pub cpu_manager_policy: Option<String>,
    pub cpu_manager_policy_options: Option<BTreeMap<String, String>>,
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: Option<String>,
    pub memory_manager_policy: Option<String>,
    pub reserved_memory: Option<Vec<ReservedMemory>>,
    pub topology_manager_policy: Option<String>,
    pub topology_manager_scope: Option<String>,
    pub topology_manager_policy_options: Option<BTreeMap<String, String>>,
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub eviction_hard: Option<BTreeMap<String, QuantityText>>,
    pub merge_default_eviction_settings: Option<bool>,
    /// Every other key, checked against [`OTHER_FIELDS`].
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// KubeletConfiguration `reservedMemory` entry (`MemoryReservation`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReservedMemory {
    /// NUMA node id.
    pub numa_node: u32,
    /// Reserved amounts (`memory`, `hugepages-<size>`).
    #[serde(default)]
    pub limits: BTreeMap<String, QuantityText>,
}

/// Read a KubeletConfiguration file (`-` = stdin): one YAML or JSON
/// document with `apiVersion: kubelet.config.k8s.io/v1beta1` and
/// `kind: KubeletConfiguration`, or a kubeadm configuration file holding
/// exactly one such document among others. Returns where it came from (for
/// messages) and the parsed configuration; the field names are checked by
/// [`KubeletConfig::apply`].
pub fn read_kubelet_config(path: &Path) -> Result<(String, KubeletConfig)> {
    let (origin, text) = read_input(path, "KubeletConfiguration")?;
    let config = parse_kubelet_config(&origin, &text)?;
    Ok((origin, config))
}

/// Parse a KubeletConfiguration document; `origin` names it in errors.
pub fn parse_kubelet_config(origin: &str, text: &str) -> Result<KubeletConfig> {
    let docs = parse_documents(origin, text)?;
    // A kubeadm configuration file holds several documents, one of them
    // the KubeletConfiguration: that one is taken.
    let configs: Vec<&Value> = docs
        .iter()
        .filter(|doc| doc.get("kind").and_then(Value::as_str) == Some(KIND))
        .collect();
    let doc = match (docs.as_slice(), configs.as_slice()) {
        ([doc], _) => doc,
        (_, [doc]) => *doc,
        _ => bail!(
            "{origin}: expected one KubeletConfiguration document, found {} document(s), {} of kind {KIND}",
            docs.len(),
            configs.len()
        ),
    };
    let kind = doc.get("kind").and_then(Value::as_str);
    let api_version = doc.get("apiVersion").and_then(Value::as_str);
    match (api_version, kind) {
        (Some(API_VERSION), Some(KIND)) => {}
        (_, Some("Node" | "List" | "NodeList")) => bail!(
            "{origin}: this is a Kubernetes {}, not a KubeletConfiguration: pass it with --node",
            kind.unwrap_or_default()
        ),
        (_, Some(KIND)) => bail!(
            "{origin}: apiVersion: `{}` is not {API_VERSION}",
            api_version.unwrap_or_default()
        ),
        _ => bail!(
            "{origin}: not a KubeletConfiguration (expected apiVersion: {API_VERSION}, kind: {KIND}; found kind `{}`)",
            kind.unwrap_or("(none)")
        ),
    }
    // Type errors name the field path.
    serde_path_to_error::deserialize(doc)
        .map_err(|e| anyhow!("{origin}: {}: {}", e.path(), e.inner()))
}

/// A closed-set setting: unset or `""` is `None` (the kubelet default),
/// a known name its value; `Err` carries an unknown name.
fn kubelet_enum<T: wit::KubeletName>(value: Option<&str>) -> Result<Option<T>, &str> {
    match value {
        None | Some("") => Ok(None),
        Some(name) => T::from_kubelet_name(name).map(Some).ok_or(name),
    }
}

fn non_empty(value: &Option<String>) -> Option<String> {
    value.as_ref().filter(|v| !v.is_empty()).cloned()
}

fn resource_list(map: Option<&BTreeMap<String, QuantityText>>) -> wit::ResourceList {
    map.into_iter()
        .flatten()
        .map(|(name, q)| wit::ResourceQuantity {
            name: name.clone(),
            quantity: q.text(),
        })
        .collect()
}

fn options(map: Option<&BTreeMap<String, String>>) -> Vec<wit::PolicyOption> {
    map.into_iter()
        .flatten()
        .map(|(name, value)| wit::PolicyOption {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

impl KubeletConfig {
    /// Check the field names and the enum-like values, and write the fields
    /// the policy reads into `settings`. `prefix` starts every field path in
    /// errors (`kubeletConfig.` for a node file's section, empty for a
    /// KubeletConfiguration file). Returns the notes: every accepted field
    /// the policy does not read, each gate it does not read, and defaults
    /// filled in; notes always name fields `kubeletConfig.<field>`.
    pub fn apply(&self, settings: &mut wit::NodeSettings, prefix: &str) -> Result<Vec<String>> {
        let mut notes = Vec::new();
        let mut errors = Vec::new();

        if let Some(api_version) = self.api_version.as_deref()
            && api_version != API_VERSION
        {
            errors.push(format!(
                "{prefix}apiVersion: `{api_version}` is not {API_VERSION}"
            ));
        }
        if let Some(kind) = self.kind.as_deref()
            && kind != KIND
        {
            errors.push(format!("{prefix}kind: `{kind}` is not {KIND}"));
        }

        for name in self.other.keys() {
            if let Some((_, what)) = NOT_MODELLED.iter().find(|(field, _)| field == name) {
                notes.push(format!(
                    "kubeletConfig.{name}: accepted, not modelled by podpolicy ({what})"
                ));
            } else if OTHER_FIELDS.contains(&name.as_str()) {
                notes.push(format!(
                    "kubeletConfig.{name}: accepted, does not affect the resource policy"
                ));
            } else {
                let known = USED_FIELDS
                    .iter()
                    .chain(OTHER_FIELDS)
                    .chain(&["apiVersion", "kind"]);
                errors.push(match closest(name, known.copied()) {
                    Some(near) => format!(
                        "{prefix}{name}: unknown field, not a KubeletConfiguration field (did you mean `{near}`?)"
                    ),
                    None => format!(
                        "{prefix}{name}: unknown field, not a KubeletConfiguration field (kubelet.config.k8s.io/v1beta1, Kubernetes 1.36)"
                    ),
                });
            }
        }

        let policy_gates = || policy_wasm::features::KNOWN_GATES.iter().map(|g| g.name);
        let mut feature_gates = Vec::new();
        for (name, enabled) in self.feature_gates.iter().flatten() {
            if policy_gates().any(|gate| gate == name) {
                feature_gates.push(wit::FeatureGate {
                    name: name.clone(),
                    enabled: *enabled,
                });
            } else if let Some(near) = closest(name, policy_gates()) {
                errors.push(format!(
                    "{prefix}featureGates.{name}: unrecognized feature gate (did you mean `{near}`?)"
                ));
            } else {
                notes.push(format!(
                    "kubeletConfig.featureGates.{name}: accepted, not a gate the resource policy reads"
                ));
            }
        }

        let cgroup_driver = match self.cgroup_driver.as_deref() {
            None | Some("") | Some("cgroupfs") => wit::CgroupDriver::Cgroupfs,
            Some("systemd") => wit::CgroupDriver::Systemd,
            Some(other) => {
                errors.push(format!(
                    "{prefix}cgroupDriver: `{other}` is not cgroupfs or systemd"
                ));
                wit::CgroupDriver::Cgroupfs
            }
        };
        // The manager policies and the scope are closed sets, enums in the
        // contract; an unknown name is refused here with upstream's words.
        let cpu_manager_policy = match kubelet_enum::<wit::CpuManagerPolicy>(
            self.cpu_manager_policy.as_deref(),
        ) {
            Ok(value) => value,
            Err(other) => {
                errors.push(format!(
                    "{prefix}cpuManagerPolicy: unknown policy: {other:?} (supported values: \"none\", \"static\")"
                ));
                None
            }
        };
        let memory_manager_policy = match kubelet_enum::<wit::MemoryManagerPolicy>(
            self.memory_manager_policy.as_deref(),
        ) {
            Ok(value) => value,
            Err(other) => {
                errors.push(format!(
                    "{prefix}memoryManagerPolicy: unknown policy: {other:?} (supported values: \"None\", \"Static\")"
                ));
                None
            }
        };
        let topology_manager_policy = match kubelet_enum::<wit::TopologyManagerPolicy>(
            self.topology_manager_policy.as_deref(),
        ) {
            Ok(value) => value,
            Err(other) => {
                errors.push(format!(
                    "{prefix}topologyManagerPolicy: invalid configuration: topologyManagerPolicy (--topology-manager-policy) {other:?} must be one of: [\"none\" \"best-effort\" \"restricted\" \"single-numa-node\"]"
                ));
                None
            }
        };
        let topology_manager_scope = match kubelet_enum::<wit::TopologyManagerScope>(
            self.topology_manager_scope.as_deref(),
        ) {
            Ok(value) => value,
            Err(other) => {
                errors.push(format!(
                    "{prefix}topologyManagerScope: invalid configuration: topologyManagerScope (--topology-manager-scope) {other:?} must be one of: \"container\", or \"pod\""
                ));
                None
            }
        };
        let memory_reservation_policy = match self.memory_reservation_policy.as_deref() {
            None | Some("") => None,
            Some("None") => Some(wit::MemoryReservationPolicy::None),
            Some("TieredReservation") => Some(wit::MemoryReservationPolicy::TieredReservation),
            Some("HardReservation") => Some(wit::MemoryReservationPolicy::HardReservation),
            Some(other) => {
                errors.push(format!(
                    "{prefix}memoryReservationPolicy: `{other}` is not one of None, TieredReservation (or podpolicy's HardReservation)"
                ));
                None
            }
        };
        let cpu_cfs_quota_period_us = match self.cpu_cfs_quota_period.as_deref() {
            None => None,
            Some(text) => match parse_duration_us(text) {
                Ok(us) => Some(us),
                Err(e) => {
                    errors.push(format!("{prefix}cpuCFSQuotaPeriod: {e}"));
                    None
                }
            },
        };

        let eviction_hard = self.eviction_hard.as_ref().map(|map| {
            let mut pairs: Vec<(String, String)> = map
                .iter()
                .map(|(signal, threshold)| (signal.clone(), threshold.text()))
                .collect();
            if !map.contains_key("memory.available") {
                if self.merge_default_eviction_settings == Some(true) {
                    pairs.push((
                        "memory.available".to_string(),
                        DEFAULT_EVICTION_HARD_MEMORY.to_string(),
                    ));
                    notes.push(format!(
                        "kubeletConfig.evictionHard: no memory.available threshold; mergeDefaultEvictionSettings adds the kubelet default {DEFAULT_EVICTION_HARD_MEMORY}"
                    ));
                } else {
                    notes.push(
                        "kubeletConfig.evictionHard: no memory.available threshold; without mergeDefaultEvictionSettings the kubelet takes it as 0"
                            .to_string(),
                    );
                }
            }
            pairs
        });

        match errors.as_slice() {
            [] => {}
            [one] => bail!("{one}"),
            many => bail!(
                "{} errors in the kubelet configuration:\n  {}",
                many.len(),
                many.join("\n  ")
            ),
        }

        settings.kube_reserved = resource_list(self.kube_reserved.as_ref());
        settings.system_reserved = resource_list(self.system_reserved.as_ref());
        settings.cgroup_driver = cgroup_driver;
        settings.cgroups_per_qos = self.cgroups_per_qos;
        settings.enforce_node_allocatable = self.enforce_node_allocatable.clone();
        settings.cpu_cfs_quota = self.cpu_cfs_quota;
        settings.cpu_cfs_quota_period_us = cpu_cfs_quota_period_us;
        settings.memory_throttling_factor = self.memory_throttling_factor;
        settings.memory_reservation_policy = memory_reservation_policy;
        settings.single_process_oom_kill = self.single_process_oom_kill;
        settings.cpu_manager_policy = cpu_manager_policy;
        settings.cpu_manager_policy_options = options(self.cpu_manager_policy_options.as_ref());
        settings.reserved_system_cpus = non_empty(&self.reserved_system_cpus);
        settings.memory_manager_policy = memory_manager_policy;
        settings.reserved_memory = self
            .reserved_memory
            .iter()
            .flatten()
            .map(|r| wit::NumaReservedMemory {
                numa_node: r.numa_node,
                limits: resource_list(Some(&r.limits)),
            })
            .collect();
        settings.topology_manager_policy = topology_manager_policy;
        settings.topology_manager_scope = topology_manager_scope;
        settings.topology_manager_policy_options =
            options(self.topology_manager_policy_options.as_ref());
        settings.feature_gates = feature_gates;
        settings.eviction_hard = eviction_hard;
        Ok(notes)
    }

    /// `failCgroupV1` as given (default true: the kubelet refuses cgroup v1).
    pub fn fail_cgroup_v1(&self) -> Option<bool> {
        self.other.get("failCgroupV1").and_then(Value::as_bool)
    }
}

/// The candidate nearest to `name` when it is a likely misspelling: equal
/// but for case, or at most two edits away (one for short names).
fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = if name.chars().count() <= 6 { 1 } else { 2 };
    candidates
        .filter_map(|candidate| {
            let distance = if candidate.eq_ignore_ascii_case(name) {
                0
            } else {
                edit_distance(name, candidate)
            };
            (distance <= limit).then_some((distance, candidate))
        })
        .min()
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_lists_are_disjoint_and_complete() {
        let mut all: Vec<&str> = USED_FIELDS.iter().chain(OTHER_FIELDS).copied().collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count, "a field is listed twice");
        // 125 fields in the 1.36 type, besides TypeMeta.
        assert_eq!(count, 125);
        for (name, _) in NOT_MODELLED {
            assert!(OTHER_FIELDS.contains(name), "{name}");
        }
    }

    #[test]
    fn near_names_are_suggested() {
        assert_eq!(
            closest("evictionHrd", USED_FIELDS.iter().copied()),
            Some("evictionHard")
        );
        assert_eq!(
            closest("memoryqos", ["MemoryQoS"].into_iter()),
            Some("MemoryQoS")
        );
        assert_eq!(closest("somethingElse", USED_FIELDS.iter().copied()), None);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
