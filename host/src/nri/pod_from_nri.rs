//! The policy's inputs rebuilt from what NRI carries: a pure translation,
//! no policy. Two sources, in this order:
//!
//! 1. **The pod's own spec**: when the sandbox carries the annotation
//!    `kubectl.kubernetes.io/last-applied-configuration` holding a `Pod`
//!    whose name and namespace are the sandbox's, that Pod's `spec` (every
//!    request and limit, memory requests included, init and sidecar
//!    containers, pod-level `resources`), with the sandbox's uid, labels and
//!    annotations. It must name the container at hand.
//! 2. **The runtime's values**: otherwise the inverse of the kubelet's CRI
//!    conversion of each container the plugin has seen in this sandbox
//!    (`linux.resources`): CPU shares -> the CPU request (the smallest
//!    milli-CPU value that `MilliCPUToShares` maps to those shares; 2
//!    shares -> no request), CFS quota / period -> the CPU limit (the
//!    smallest milli-CPU whose quota is that quota), the memory limit and
//!    hugepage limits as limits. The QoS class comes from the cgroup parent
//!    (`kubepods[/burstable|/besteffort]/pod<uid>` with the cgroupfs driver,
//!    `kubepods[-burstable|-besteffort]-pod<uid>.slice` with systemd): for a
//!    Guaranteed pod only limits are set (defaulting copies them to the
//!    requests, as the API server did); for BestEffort nothing. Not
//!    available this way: memory requests (so memory.min / memory.low and
//!    the memory-based parts of Memory QoS), ephemeral storage, extended
//!    resources, which containers are init or sidecar containers, and
//!    pod-level `resources` (`pod_resources` is the kubelet's aggregate
//!    sandbox configuration, not the spec). The caller checks the QoS class
//!    the policy computes against the cgroup parent's and answers nothing
//!    when they differ.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

use super::proto::api;
use crate::bindings::QosClass;
use crate::pod_input::PodDocument;

/// The annotation source 1 reads.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Which source a pod was rebuilt from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The last-applied Pod spec (full fidelity).
    LastApplied,
    /// The inverse of the CRI conversion of the runtime's values.
    RuntimeValues,
}

impl Source {
    /// For logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::LastApplied => "last-applied",
            Source::RuntimeValues => "runtime-values",
        }
    }
}

/// A pod rebuilt from NRI.
#[derive(Clone, Debug)]
pub struct Rebuilt {
    /// The pod, as the policy reads it.
    pub doc: PodDocument,
    /// Where it came from.
    pub source: Source,
    /// The QoS class the cgroup parent names (`None` when it names none).
    pub parent_qos: Option<QosClass>,
}

/// The QoS class a kubelet cgroup parent encodes, for either driver.
pub fn qos_from_cgroup_parent(parent: &str, uid: &str) -> Option<QosClass> {
    let parent = parent.trim_end_matches('/');
    let last = parent.rsplit('/').next().unwrap_or(parent);
    let pod_dir = format!("pod{uid}");
    let systemd_uid = uid.replace('-', "_");
    // cgroupfs: .../kubepods[/burstable|/besteffort]/pod<uid>
    if last == pod_dir {
        let tier = parent
            .strip_suffix(&pod_dir)
            .unwrap_or("")
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("");
        return match tier {
            "kubepods" => Some(QosClass::Guaranteed),
            "burstable" => Some(QosClass::Burstable),
            "besteffort" => Some(QosClass::BestEffort),
            _ => None,
        };
    }
    // systemd: kubepods[-burstable|-besteffort]-pod<uid with _>.slice
    let slice = last.strip_suffix(".slice")?;
    let before = slice
        .strip_suffix(&format!("-pod{systemd_uid}"))
        .or_else(|| slice.strip_suffix(&format!("-pod{uid}")))?;
    match before {
        "kubepods" => Some(QosClass::Guaranteed),
        "kubepods-burstable" => Some(QosClass::Burstable),
        "kubepods-besteffort" => Some(QosClass::BestEffort),
        _ => None,
    }
}

/// The kubelet's `MilliCPUToShares` (cgroup v1 shares from milli-CPU), only
/// to invert it: 0 -> 2, else `milli * 1024 / 1000`, at least 2.
fn milli_to_shares(milli: u64) -> u64 {
    if milli == 0 {
        return 2;
    }
    (milli * 1024 / 1000).max(2)
}

/// The smallest milli-CPU whose shares are `shares` (the nearest above
/// when none maps exactly); 0 = no CPU request.
pub fn shares_to_milli(shares: u64) -> u64 {
    if shares <= 2 {
        return 0;
    }
    let guess = (shares * 1000).div_ceil(1024);
    (guess.saturating_sub(2)..=guess + 2)
        .find(|&m| milli_to_shares(m) == shares)
        .unwrap_or(guess)
}

/// The smallest milli-CPU whose CFS quota over `period` is `quota`
/// (`MilliCPUToQuota`: `milli * period / 1000`); `None` = no limit.
pub fn quota_to_milli(quota: i64, period: u64) -> Option<u64> {
    if quota <= 0 || period == 0 {
        return None;
    }
    Some((quota as u64 * 1000).div_ceil(period))
}

/// `2MB` (the runtime's page size) -> `2Mi` (the resource suffix).
fn hugepage_resource(page_size: &str) -> Option<String> {
    let (number, unit) = page_size.split_at(page_size.find(|c: char| !c.is_ascii_digit())?);
    let unit = match unit {
        "KB" => "Ki",
        "MB" => "Mi",
        "GB" => "Gi",
        _ => return None,
    };
    Some(format!("hugepages-{number}{unit}"))
}

/// The requests and limits of one container from its runtime resources.
fn container_resources(resources: Option<&api::LinuxResources>, qos: Option<QosClass>) -> Value {
    let mut requests = Map::new();
    let mut limits = Map::new();
    if let Some(r) = resources {
        if let Some(cpu) = r.cpu.as_ref() {
            let shares = cpu.shares.as_ref().map(|s| s.value);
            let quota = cpu.quota.as_ref().map(|q| q.value);
            let period = cpu.period.as_ref().map(|p| p.value).unwrap_or(100_000);
            if let Some(milli) = quota.and_then(|q| quota_to_milli(q, period)) {
                limits.insert("cpu".into(), json!(format!("{milli}m")));
            }
            if qos == Some(QosClass::Burstable)
                && let Some(milli) = shares.map(shares_to_milli).filter(|m| *m > 0)
            {
                requests.insert("cpu".into(), json!(format!("{milli}m")));
            }
        }
        if let Some(limit) = r
            .memory
            .as_ref()
            .and_then(|m| m.limit.as_ref())
            .map(|l| l.value)
            .filter(|l| *l > 0)
        {
            limits.insert("memory".into(), json!(limit.to_string()));
        }
        for h in &r.hugepage_limits {
            if let Some(name) = hugepage_resource(&h.page_size).filter(|_| h.limit > 0) {
                limits.insert(name, json!(h.limit.to_string()));
            }
        }
    }
    if qos == Some(QosClass::BestEffort) {
        requests.clear();
        limits.clear();
    }
    let mut out = Map::new();
    if !requests.is_empty() {
        out.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        out.insert("limits".into(), Value::Object(limits));
    }
    Value::Object(out)
}

fn string_map(map: &std::collections::HashMap<String, String>) -> Value {
    let sorted: BTreeMap<&String, &String> = map.iter().collect();
    json!(sorted)
}

/// The sandbox's metadata as a Pod's.
fn metadata(pod: &api::PodSandbox) -> Value {
    json!({
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "labels": string_map(&pod.labels),
        "annotations": string_map(&pod.annotations),
    })
}

/// Source 1, when the annotation holds this pod and names `container`.
fn from_last_applied(pod: &api::PodSandbox, container: Option<&str>) -> Option<Value> {
    let text = pod.annotations.get(LAST_APPLIED)?;
    let applied: Value = serde_json::from_str(text).ok()?;
    if applied.get("kind").and_then(Value::as_str) != Some("Pod") {
        return None;
    }
    let meta = applied.get("metadata")?;
    let name = meta.get("name").and_then(Value::as_str)?;
    let namespace = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    if name != pod.name || namespace != pod.namespace {
        return None;
    }
    let spec = applied.get("spec")?.clone();
    if let Some(container) = container {
        let named = ["initContainers", "containers", "ephemeralContainers"]
            .iter()
            .filter_map(|k| spec.get(*k).and_then(Value::as_array))
            .flatten()
            .any(|c| c.get("name").and_then(Value::as_str) == Some(container));
        if !named {
            return None;
        }
    }
    Some(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(pod),
        "spec": spec,
    }))
}

/// Rebuild the pod of `sandbox` from the containers the plugin has seen in
/// it (`containers`, in creation order; `override_resources` replaces one
/// container's runtime resources, for an update). `container` is the one an
/// event is about (source 1 must name it).
pub fn rebuild(
    sandbox: &api::PodSandbox,
    containers: &[&api::Container],
    container: Option<&str>,
    override_resources: Option<(&str, &api::LinuxResources)>,
) -> Result<Rebuilt> {
    let parent = sandbox
        .linux
        .as_ref()
        .map(|l| l.cgroup_parent.as_str())
        .unwrap_or("");
    let parent_qos = qos_from_cgroup_parent(parent, &sandbox.uid);
    let origin = format!("nri:{}/{}", sandbox.namespace, sandbox.name);
    let from_spec = if override_resources.is_none() {
        from_last_applied(sandbox, container)
    } else {
        None
    };
    let (json, source) = match from_spec {
        Some(json) => (json, Source::LastApplied),
        None => {
            if containers.is_empty() {
                bail!(
                    "no container of the pod is known yet and it carries no {LAST_APPLIED} annotation naming one"
                );
            }
            let list: Vec<Value> = containers
                .iter()
                .map(|c| {
                    let resources = match override_resources {
                        Some((name, r)) if name == c.name => Some(r),
                        _ => c.linux.as_ref().and_then(|l| l.resources.as_ref()),
                    };
                    json!({
                        "name": c.name,
                        "image": "nri",
                        "resources": container_resources(resources, parent_qos),
                    })
                })
                .collect();
            (
                json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": metadata(sandbox),
                    "spec": { "containers": list },
                }),
                Source::RuntimeValues,
            )
        }
    };
    let pod = crate::pod_input::pod_from_json(&json)
        .map_err(|e| anyhow!("{e:#}"))
        .with_context(|| {
            format!(
                "{origin}: rebuilding the pod from NRI ({})",
                source.as_str()
            )
        })?;
    Ok(Rebuilt {
        doc: PodDocument { origin, json, pod },
        source,
        parent_qos,
    })
}

/// A pod-level resize (`UpdatePodSandbox`, NRI v0.10+): the pod-level
/// `resources` of `rebuilt` become the inverse of the kubelet's CRI
/// conversion of `resources` (the pod's new `LinuxPodSandboxConfig`
/// resources): CPU shares -> the CPU request (Burstable), CFS quota -> the
/// CPU limit, the memory and hugepage limits. What the CRI does not carry
/// (the memory request) keeps its value from the spec. A pod without
/// pod-level `resources` is returned unchanged: its sandbox values are the
/// sums of its containers', which their own `UpdateContainer` events carry.
pub fn with_pod_resources(rebuilt: Rebuilt, resources: &api::LinuxResources) -> Result<Rebuilt> {
    let Rebuilt {
        doc,
        source,
        parent_qos,
    } = rebuilt;
    let mut json = doc.json;
    let Some(old) = json.get("spec").and_then(|s| s.get("resources")).cloned() else {
        return Ok(Rebuilt {
            doc: PodDocument { json, ..doc },
            source,
            parent_qos,
        });
    };
    let mut new = container_resources(Some(resources), parent_qos);
    for (list, names) in [("requests", ["memory"]), ("limits", ["memory"])] {
        for name in names {
            let kept = old.get(list).and_then(|l| l.get(name)).cloned();
            let has = new.get(list).and_then(|l| l.get(name)).is_some();
            if let (Some(kept), false) = (kept, has) {
                let entry = new
                    .as_object_mut()
                    .expect("container_resources returns an object")
                    .entry(list)
                    .or_insert_with(|| json!({}));
                if let Some(map) = entry.as_object_mut() {
                    map.insert(name.into(), kept);
                }
            }
        }
    }
    json["spec"]["resources"] = new;
    let pod = crate::pod_input::pod_from_json(&json)
        .map_err(|e| anyhow!("{e:#}"))
        .with_context(|| {
            format!(
                "{}: the pod-level resources of an UpdatePodSandbox",
                doc.origin
            )
        })?;
    Ok(Rebuilt {
        doc: PodDocument {
            origin: doc.origin,
            json,
            pod,
        },
        source,
        parent_qos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_inverse_maps_back() {
        for milli in [
            0u64, 1, 2, 3, 10, 100, 250, 333, 500, 999, 1000, 1500, 64_000,
        ] {
            let shares = milli_to_shares(milli);
            let back = shares_to_milli(shares);
            assert_eq!(milli_to_shares(back), shares, "milli {milli}");
            assert!(back <= milli, "milli {milli}: {back} is not the smallest");
        }
        assert_eq!(shares_to_milli(2), 0);
        assert_eq!(shares_to_milli(1024), 1000);
        assert_eq!(shares_to_milli(256), 250);
    }

    #[test]
    fn the_quota_inverse_maps_back() {
        assert_eq!(quota_to_milli(50_000, 100_000), Some(500));
        assert_eq!(quota_to_milli(-1, 100_000), None);
        assert_eq!(quota_to_milli(25_000, 50_000), Some(500));
    }

    #[test]
    fn the_cgroup_parent_names_the_qos_class() {
        let uid = "8d3c6f0e-0000-4000-8000-000000000001";
        let q = |p: &str| qos_from_cgroup_parent(p, uid);
        assert_eq!(
            q(&format!("/kubepods/burstable/pod{uid}")),
            Some(QosClass::Burstable)
        );
        assert_eq!(
            q(&format!("/kubepods/besteffort/pod{uid}")),
            Some(QosClass::BestEffort)
        );
        assert_eq!(
            q(&format!("/kubepods/pod{uid}")),
            Some(QosClass::Guaranteed)
        );
        let s = uid.replace('-', "_");
        assert_eq!(
            q(&format!("kubepods-burstable-pod{s}.slice")),
            Some(QosClass::Burstable)
        );
        assert_eq!(
            q(&format!("kubepods-pod{s}.slice")),
            Some(QosClass::Guaranteed)
        );
        assert_eq!(q("/somewhere/else"), None);
    }

    #[test]
    fn hugepage_sizes_become_resource_names() {
        assert_eq!(hugepage_resource("2MB").as_deref(), Some("hugepages-2Mi"));
        assert_eq!(hugepage_resource("1GB").as_deref(), Some("hugepages-1Gi"));
        assert_eq!(hugepage_resource("weird"), None);
    }
}
