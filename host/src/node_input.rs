//! Reading node settings. `--node` takes one of:
//!
//! - a custom node file: YAML/JSON with capacity, allocatable, the machine
//!   facts a Node object lacks (cgroup version, page size, cpu.weight curve,
//!   sysfs) and a `kubeletConfig` section taking the fields of a
//!   `KubeletConfiguration` (see [`crate::kubelet_config`]). Its schema is
//!   `schemas/node-file.schema.json`; unknown fields are errors;
//! - a Kubernetes `Node` object as `kubectl get node NAME -o yaml` prints it
//!   (or a `List` holding exactly one): the name from `metadata.name`,
//!   capacity and allocatable from `status`, the kernel release from
//!   `status.nodeInfo.kernelVersion`. A Node does not report the cgroup
//!   version: cgroup v2 is assumed (the 1.36 kubelet refuses cgroup v1
//!   unless `failCgroupV1: false`), and a note says so;
//! - nothing: this machine (`/proc/meminfo`, CPUs, cgroup version, page size).
//!
//! `--kubelet-config` takes a real `KubeletConfiguration` file; its fields
//! fill the kubelet part of the settings of a Node object or of this
//! machine (without it, the kubelet's defaults apply). With a custom node
//! file it is taken when the file has no `kubeletConfig` section; a file
//! with the section and `--kubelet-config` together are refused as
//! ambiguous.
//!
//! The host only reports; defaults and derived values are the policy's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1 as core;
use serde::Deserialize;
use serde_json::Value;

use crate::bindings as wit;
use crate::bounded_read::read_regular_file_to_string;
use crate::kubelet_config::read_kubelet_config;
pub use crate::kubelet_config::{KubeletConfig, ReservedMemory};
use crate::pod_input::{parse_documents, read_input};

/// The most read from a `/proc` file (they report no size; `meminfo` is a
/// few kilobytes).
const MAX_PROC_FILE_BYTES: u64 = 1 << 20;

/// A custom node file. Unknown fields are errors, so typos do not pass
/// silently; `schemas/node-file.schema.json` documents it.
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
    /// The kubelet configuration (KubeletConfiguration field names); absent
    /// = the kubelet's defaults, or the `--kubelet-config` file.
    pub kubelet_config: Option<KubeletConfig>,
    /// The machine's sysfs tree, where the resource managers read the CPU
    /// and NUMA topology (relative to this file; `--sysfs` overrides it).
    pub sysfs: Option<PathBuf>,
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
    /// The quantity as text (the policy parses it).
    pub fn text(&self) -> String {
        match self {
            QuantityText::Text(t) => t.clone(),
            QuantityText::Number(n) => n.to_string(),
        }
    }
}

/// Everything `--node` and `--kubelet-config` (or this machine) say.
#[derive(Clone, Debug)]
pub struct NodeInputs {
    /// The settings handed to the policy (not yet checked by it:
    /// `validate-node` does that).
    pub settings: wit::NodeSettings,
    /// The sysfs tree a custom node file names (resolved against the
    /// file's directory).
    pub sysfs: Option<PathBuf>,
    /// What was accepted but not used, and what was assumed, one line each
    /// (`kubeletConfig.clusterDNS: accepted, does not affect the resource
    /// policy`); for `-o json` and for stderr.
    pub notes: Vec<String>,
}

/// Parse a Go duration (`100ms`, `1.5s`, `1m30s`, `5000us`; units ns, us,
/// µs, ms, s, m, h) into whole microseconds (truncated, as the kubelet
/// divides by `time.Microsecond`). Negative durations are refused.
pub fn parse_duration_us(text: &str) -> Result<u64> {
    let bad = || anyhow!("`{text}` is not a duration such as 100ms");
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest.starts_with('-') {
        bail!("`{text}` is negative");
    }
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total_ns: u128 = 0;
    let mut rest = rest;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(bad());
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => bail!("`{text}` has a number without a unit (use ns, us, ms, s, m or h)"),
            _ => {
                bail!("`{text}` has an unknown duration unit `{unit}` (use ns, us, ms, s, m or h)")
            }
        };
        let too_long = || anyhow!("`{text}` is too long a duration");
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| too_long())?
        };
        let mut part = whole.checked_mul(unit_ns).ok_or_else(too_long)?;
        let mut scale = unit_ns;
        for digit in fraction.bytes().map(|b| u128::from(b - b'0')) {
            scale /= 10;
            part += digit * scale;
        }
        total_ns = total_ns.checked_add(part).ok_or_else(too_long)?;
        rest = tail;
    }
    u64::try_from(total_ns / 1_000).map_err(|_| anyhow!("`{text}` is too long a duration"))
}

fn resource_list(map: &BTreeMap<String, QuantityText>) -> wit::ResourceList {
    map.iter()
        .map(|(name, q)| wit::ResourceQuantity {
            name: name.clone(),
            quantity: q.text(),
        })
        .collect()
}

impl NodeFile {
    /// The machine part of the settings (everything but the kubelet
    /// configuration, left at the kubelet's defaults); enum-like fields are
    /// checked here because the WIT types are enums.
    fn machine_settings(&self) -> Result<wit::NodeSettings> {
        let cgroup_version = match self.cgroup_version.as_deref() {
            None | Some("v2") | Some("2") => wit::CgroupVersion::V2,
            Some("v1") | Some("1") => wit::CgroupVersion::V1,
            Some(other) => bail!("cgroupVersion: `{other}` is not v1 or v2"),
        };
        let cpu_weight_curve = match self.cpu_weight_curve.as_deref() {
            None => None,
            Some("linear") => Some(wit::CpuWeightCurve::Linear),
            Some("logarithmic") => Some(wit::CpuWeightCurve::Logarithmic),
            Some(other) => bail!("cpuWeightCurve: `{other}` is not linear or logarithmic"),
        };
        Ok(wit::NodeSettings {
            name: self.name.clone(),
            capacity: resource_list(&self.capacity),
            allocatable: self.allocatable.as_ref().map(resource_list),
            cgroup_version,
            page_size_bytes: self.page_size,
            cpu_weight_curve,
            kernel_version: self.kernel_version.clone(),
            ..crate::empty_node()
        })
    }

    /// The settings and the notes on the `kubeletConfig` section.
    pub fn to_settings(&self) -> Result<(wit::NodeSettings, Vec<String>)> {
        let mut settings = self.machine_settings()?;
        let notes = match &self.kubelet_config {
            Some(config) => config.apply(&mut settings, "kubeletConfig.")?,
            None => Vec::new(),
        };
        Ok((settings, notes))
    }

    /// Convert to the WIT record (the notes dropped).
    pub fn to_wit(&self) -> Result<wit::NodeSettings> {
        self.to_settings().map(|(settings, _)| settings)
    }
}

/// Read `--node` and `--kubelet-config`: a custom node file, a Kubernetes
/// Node object (or a List of one), or, without `node`, this machine (read
/// from `proc_root` and `cgroup_root`); the kubelet part from the
/// KubeletConfiguration file when one is given (see the module docs for how
/// the two combine). Errors name the file and the field path; nothing here
/// is the policy's verdict on the node (that is `validate-node`).
pub fn read_node_inputs(
    node: Option<&Path>,
    kubelet_config: Option<&Path>,
    proc_root: &Path,
    cgroup_root: &Path,
) -> Result<NodeInputs> {
    let kubelet = kubelet_config.map(read_kubelet_config).transpose()?;
    match node {
        Some(path) => {
            let (origin, text) = read_input(path, "node file")?;
            let base = path.parent().unwrap_or_else(|| Path::new("."));
            node_inputs(&origin, &text, base, kubelet.as_ref())
        }
        None => {
            let mut settings = local_node(proc_root, cgroup_root)?;
            let notes = kubelet_notes(&mut settings, kubelet.as_ref())?;
            Ok(NodeInputs {
                settings,
                sysfs: None,
                notes,
            })
        }
    }
}

/// Apply the KubeletConfiguration file, if any, to a Node's or this
/// machine's settings; without one, say that the defaults apply.
fn kubelet_notes(
    settings: &mut wit::NodeSettings,
    kubelet: Option<&(String, KubeletConfig)>,
) -> Result<Vec<String>> {
    match kubelet {
        Some((origin, config)) => config
            .apply(settings, "")
            .with_context(|| origin.clone()),
        None => Ok(vec![
            "kubeletConfig: no KubeletConfiguration given (--kubelet-config); the kubelet's defaults are assumed"
                .to_string(),
        ]),
    }
}

/// A node document: the custom file, or a Kubernetes Node.
enum NodeDocument {
    Custom(Box<NodeFile>),
    Node(Box<core::Node>),
}

fn node_document(origin: &str, doc: &Value) -> Result<NodeDocument> {
    let kind = doc.get("kind").and_then(Value::as_str);
    match kind {
        None if doc.get("kind").is_some() => bail!("{origin}: kind: not a string"),
        None => serde_path_to_error::deserialize(doc)
            .map(|file| NodeDocument::Custom(Box::new(file)))
            .map_err(|e| anyhow!("{origin}: {}: {}", e.path(), e.inner())),
        Some("Node") => {
            let api_version = doc.get("apiVersion").and_then(Value::as_str);
            if api_version != Some("v1") {
                bail!(
                    "{origin}: apiVersion: `{}` is not v1 (a Node is apiVersion: v1, kind: Node)",
                    api_version.unwrap_or("(none)")
                );
            }
            serde_path_to_error::deserialize(doc)
                .map(|node| NodeDocument::Node(Box::new(node)))
                .map_err(|e| anyhow!("{origin}: {}: {}", e.path(), e.inner()))
        }
        Some("List" | "NodeList") => {
            let items = doc
                .get("items")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let [item] = items else {
                bail!(
                    "{origin}: the {} holds {} items; give one Node (kubectl get node NAME -o yaml)",
                    kind.unwrap_or_default(),
                    items.len()
                );
            };
            let mut item = item.clone();
            if let Some(object) = item.as_object_mut() {
                // NodeList items may leave out their type (the list has it).
                object
                    .entry("apiVersion")
                    .or_insert_with(|| Value::from("v1"));
                object.entry("kind").or_insert_with(|| Value::from("Node"));
            }
            if item.get("kind").and_then(Value::as_str) != Some("Node") {
                bail!("{origin}: items[0]: not a Node");
            }
            node_document(&format!("{origin}#items[0]"), &item)
        }
        Some(crate::kubelet_config::KIND) => bail!(
            "{origin}: this is a KubeletConfiguration, not a node: pass it with --kubelet-config"
        ),
        Some(other) => bail!(
            "{origin}: kind is `{other}`; expected a Node (kubectl get node NAME -o yaml) or a podpolicy node file (no kind)"
        ),
    }
}

/// The settings of a Kubernetes Node object: the machine part only.
fn node_object_settings(origin: &str, node: &core::Node) -> Result<wit::NodeSettings> {
    let status = node.status.as_ref();
    let quantities =
        |map: &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
            map.iter()
                .map(|(name, q)| wit::ResourceQuantity {
                    name: name.clone(),
                    quantity: q.0.clone(),
                })
                .collect::<wit::ResourceList>()
        };
    let Some(capacity) = status.and_then(|s| s.capacity.as_ref()) else {
        bail!(
            "{origin}: status.capacity: missing; give the Node as `kubectl get node NAME -o yaml` prints it"
        );
    };
    Ok(wit::NodeSettings {
        name: node.metadata.name.clone().unwrap_or_default(),
        capacity: quantities(capacity),
        allocatable: status.and_then(|s| s.allocatable.as_ref()).map(quantities),
        cgroup_version: wit::CgroupVersion::V2,
        kernel_version: status
            .and_then(|s| s.node_info.as_ref())
            .map(|info| info.kernel_version.clone())
            .filter(|v| !v.is_empty()),
        ..crate::empty_node()
    })
}

/// Parse a `--node` document (`base` resolves a custom file's `sysfs`).
fn node_inputs(
    origin: &str,
    text: &str,
    base: &Path,
    kubelet: Option<&(String, KubeletConfig)>,
) -> Result<NodeInputs> {
    let docs = parse_documents(origin, text)?;
    let [doc] = docs.as_slice() else {
        bail!(
            "{origin}: expected exactly one node document, found {}",
            docs.len()
        );
    };
    match node_document(origin, doc)? {
        NodeDocument::Custom(file) => {
            if let (Some((kubelet_origin, _)), Some(_)) = (kubelet, &file.kubelet_config) {
                bail!(
                    "{origin} has a kubeletConfig section and --kubelet-config {kubelet_origin} was given: use one (drop the section to take the kubelet settings from the KubeletConfiguration)"
                );
            }
            let sysfs = file.sysfs.as_ref().map(|sysfs| base.join(sysfs));
            let (mut settings, mut notes) =
                file.to_settings().with_context(|| origin.to_string())?;
            if let Some((kubelet_origin, config)) = kubelet {
                notes.extend(
                    config
                        .apply(&mut settings, "")
                        .with_context(|| kubelet_origin.clone())?,
                );
            }
            Ok(NodeInputs {
                settings,
                sysfs,
                notes,
            })
        }
        NodeDocument::Node(node) => {
            let mut settings = node_object_settings(origin, &node)?;
            let mut notes = vec![
                match kubelet.and_then(|(_, config)| config.fail_cgroup_v1()) {
                    Some(false) => "cgroupVersion: v2 assumed: a Node object does not report the cgroup version, and with failCgroupV1: false the kubelet may run on cgroup v1 (for a v1 node use a custom node file with cgroupVersion: v1)".to_string(),
                    _ => "cgroupVersion: v2 assumed: a Node object does not report the cgroup version, and the kubelet refuses cgroup v1 unless failCgroupV1 is false".to_string(),
                },
            ];
            notes.extend(kubelet_notes(&mut settings, kubelet)?);
            Ok(NodeInputs {
                settings,
                sysfs: None,
                notes,
            })
        }
    }
}

/// Read a node file (a custom node file or a Node object, without a
/// KubeletConfiguration).
pub fn read_node(path: &Path) -> Result<wit::NodeSettings> {
    read_node_file(path).map(|(node, _)| node)
}

/// Read a node file, with the sysfs tree it names (resolved against the
/// file's directory). The notes are dropped: [`read_node_inputs`] has them.
pub fn read_node_file(path: &Path) -> Result<(wit::NodeSettings, Option<PathBuf>)> {
    let inputs = read_node_inputs(
        Some(path),
        None,
        Path::new("/proc"),
        Path::new("/sys/fs/cgroup"),
    )?;
    Ok((inputs.settings, inputs.sysfs))
}

/// Parse a node document; `origin` names it in errors.
pub fn parse_node(origin: &str, text: &str) -> Result<wit::NodeSettings> {
    node_inputs(origin, text, Path::new("."), None).map(|inputs| inputs.settings)
}

/// Describe this machine: memory and CPU capacity, cgroup version, page size.
/// `proc_root` and `cgroup_root` are explicit so tests can point elsewhere.
pub fn local_node(proc_root: &Path, cgroup_root: &Path) -> Result<wit::NodeSettings> {
    let meminfo_path = proc_root.join("meminfo");
    let meminfo = read_regular_file_to_string(&meminfo_path, MAX_PROC_FILE_BYTES, "meminfo")?;
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
    // The kubelet's node name when no `--hostname-override` is given: the
    // host name, lower-cased (`nodeutil.GetHostname`). A bound pod's
    // `spec.nodeName` is compared with it.
    let name = read_regular_file_to_string(
        &proc_root.join("sys/kernel/hostname"),
        MAX_PROC_FILE_BYTES,
        "host name",
    )
    .ok()
    .map(|h| h.trim().to_lowercase())
    .filter(|h| !h.is_empty())
    .unwrap_or_else(|| "localhost".into());
    let file = NodeFile {
        name,
        capacity: BTreeMap::from([
            ("cpu".to_string(), QuantityText::Text(cpus.to_string())),
            (
                "memory".to_string(),
                QuantityText::Text(format!("{mem_kib}Ki")),
            ),
        ]),
        cgroup_version: Some(cgroup_version.into()),
        kernel_version: read_regular_file_to_string(
            &proc_root.join("sys/kernel/osrelease"),
            MAX_PROC_FILE_BYTES,
            "kernel release",
        )
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

#[cfg(test)]
mod tests {
    use super::parse_duration_us;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration_us("100ms").unwrap(), 100_000);
        assert_eq!(parse_duration_us("5000us").unwrap(), 5_000);
        assert_eq!(parse_duration_us("5000\u{b5}s").unwrap(), 5_000);
        assert_eq!(parse_duration_us("1.5s").unwrap(), 1_500_000);
        assert_eq!(parse_duration_us("1m30s").unwrap(), 90_000_000);
        assert_eq!(parse_duration_us(".5ms").unwrap(), 500);
        assert_eq!(parse_duration_us("1500ns").unwrap(), 1);
        assert_eq!(parse_duration_us("0").unwrap(), 0);
        assert_eq!(parse_duration_us("+2ms").unwrap(), 2_000);
        for bad in ["", "100", "ms", "1.2.3s", "10x", "-1s", ".s", "1e3ms"] {
            assert!(parse_duration_us(bad).is_err(), "{bad}");
        }
    }
}
