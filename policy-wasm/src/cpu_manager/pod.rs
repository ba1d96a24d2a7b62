//! The pod as the CPU manager sees it: names, kinds and the CPU and memory values.
//!
//! These are plain values, not API objects. Quantities are already converted:
//! CPU in millicores, memory in bytes, `None` where the field is absent. The
//! values are the ones the kubelet sees, so API defaulting has run (a limit
//! without a request has its request set to the limit).
//!
//! The QoS class follows `ComputePodQOS` (`pkg/apis/core/v1/helper/qos`):
//! with pod-level resources set (and `PodLevelResources` on) only the
//! pod-level values count; otherwise requests and limits are summed over
//! all containers, non-positive values are ignored, and every container must
//! limit both CPU and memory for the pod to be Guaranteed. `status.qosClass`
//! is not consulted: the class always comes from these values.

use crate::features::FeatureGates;

// The policy's one QoS class type; the CPU manager computes it its own
// way ([`PodSpec::qos_class`]).
pub use crate::qos::QosClass;

/// Where a container runs in the pod lifecycle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ContainerKind {
    /// A standard init container: runs to completion before the next one.
    Init,
    /// A restartable init container (`restartPolicy: Always`) that runs for the pod's lifetime.
    Sidecar,
    /// An app container.
    #[default]
    Regular,
}

/// One container's CPU and memory values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerSpec {
    /// The container name, unique in the pod.
    pub name: String,
    /// Its kind; must match the list it is in ([`PodSpec::init_containers`] or [`PodSpec::containers`]).
    pub kind: ContainerKind,
    /// `resources.requests.cpu` in millicores.
    pub cpu_request_millis: Option<i64>,
    /// `resources.limits.cpu` in millicores.
    pub cpu_limit_millis: Option<i64>,
    /// `resources.requests.memory` in bytes.
    pub memory_request_bytes: Option<u64>,
    /// `resources.limits.memory` in bytes.
    pub memory_limit_bytes: Option<u64>,
}

/// Pod-level `spec.resources` values (KEP-2837); all `None` means not set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodLevelResources {
    /// `spec.resources.requests.cpu` in millicores.
    pub cpu_request_millis: Option<i64>,
    /// `spec.resources.limits.cpu` in millicores.
    pub cpu_limit_millis: Option<i64>,
    /// `spec.resources.requests.memory` in bytes.
    pub memory_request_bytes: Option<u64>,
    /// `spec.resources.limits.memory` in bytes.
    pub memory_limit_bytes: Option<u64>,
}

/// A pod as the CPU manager reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodSpec {
    /// `metadata.uid`, the state key.
    pub uid: String,
    /// `spec.resources` (pod-level resources).
    pub pod_level: PodLevelResources,
    /// `spec.initContainers` in order (kinds `Init` or `Sidecar`).
    pub init_containers: Vec<ContainerSpec>,
    /// `spec.containers` in order (kind `Regular`).
    pub containers: Vec<ContainerSpec>,
}

impl ContainerSpec {
    /// Whether it is a restartable init container (`IsRestartableInitContainer`).
    pub fn is_restartable(&self) -> bool {
        self.kind == ContainerKind::Sidecar
    }

    /// `IsContainerEquivalentQOSGuaranteed`: CPU and memory requests are non-zero and equal their limits.
    pub fn is_equivalent_guaranteed(&self) -> bool {
        let cpu_request = self.cpu_request_millis.unwrap_or(0);
        let memory_request = self.memory_request_bytes.unwrap_or(0);
        cpu_request != 0
            && cpu_request == self.cpu_limit_millis.unwrap_or(0)
            && memory_request != 0
            && memory_request == self.memory_limit_bytes.unwrap_or(0)
    }
}

/// Whether a CPU amount in millicores is a whole number of CPUs (`isIntegralCPUAmount`).
pub fn is_integral_cpu(millis: i64) -> bool {
    millis % 1000 == 0
}

/// The positive CPU and memory requests and limits summed for the QoS class.
#[derive(Clone, Copy, Default)]
struct QosTotals {
    cpu_request: Option<u128>,
    memory_request: Option<u128>,
    cpu_limit: Option<u128>,
    memory_limit: Option<u128>,
}

fn add_positive(total: &mut Option<u128>, value: Option<i128>) {
    if let Some(value) = value.filter(|v| *v > 0) {
        *total = Some(total.unwrap_or(0).saturating_add(value.unsigned_abs()));
    }
}

impl QosTotals {
    fn add(
        &mut self,
        cpu_req: Option<i64>,
        cpu_lim: Option<i64>,
        mem_req: Option<u64>,
        mem_lim: Option<u64>,
    ) -> bool {
        add_positive(&mut self.cpu_request, cpu_req.map(i128::from));
        add_positive(&mut self.memory_request, mem_req.map(i128::from));
        add_positive(&mut self.cpu_limit, cpu_lim.map(i128::from));
        add_positive(&mut self.memory_limit, mem_lim.map(i128::from));
        // Both CPU and memory limits must be present (and positive) for Guaranteed.
        cpu_lim.is_some_and(|v| v > 0) && mem_lim.is_some_and(|v| v > 0)
    }

    fn class(&self, all_limited: bool) -> QosClass {
        let requests = [self.cpu_request, self.memory_request];
        let limits = [self.cpu_limit, self.memory_limit];
        if requests.iter().all(Option::is_none) && limits.iter().all(Option::is_none) {
            return QosClass::BestEffort;
        }
        let requests_match = requests
            .iter()
            .zip(limits.iter())
            .all(|(req, lim)| req.is_none() || req == lim);
        let same_count = requests.iter().filter(|v| v.is_some()).count()
            == limits.iter().filter(|v| v.is_some()).count();
        if all_limited && requests_match && same_count {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        }
    }
}

impl PodSpec {
    /// `IsPodLevelResourcesSet`: any pod-level CPU or memory request or limit is present.
    pub fn is_pod_level_resources_set(&self) -> bool {
        let r = &self.pod_level;
        r.cpu_request_millis.is_some()
            || r.cpu_limit_millis.is_some()
            || r.memory_request_bytes.is_some()
            || r.memory_limit_bytes.is_some()
    }

    /// The init containers, then the app containers.
    pub fn all_containers(&self) -> impl Iterator<Item = &ContainerSpec> + '_ {
        self.init_containers.iter().chain(self.containers.iter())
    }

    /// The container called `name`.
    pub fn container(&self, name: &str) -> Option<&ContainerSpec> {
        self.all_containers().find(|c| c.name == name)
    }

    /// Whether `name` is one of the init containers (standard or restartable).
    pub fn is_init_container(&self, name: &str) -> bool {
        self.init_containers.iter().any(|c| c.name == name)
    }

    /// The pod QoS class (`ComputePodQOS`; pod-level values when set and `PodLevelResources` is on).
    pub fn qos_class(&self, gates: &FeatureGates) -> QosClass {
        let mut totals = QosTotals::default();
        let mut all_limited = true;
        if gates.pod_level_resources && self.is_pod_level_resources_set() {
            let r = &self.pod_level;
            all_limited = totals.add(
                r.cpu_request_millis,
                r.cpu_limit_millis,
                r.memory_request_bytes,
                r.memory_limit_bytes,
            );
        } else {
            for c in self.all_containers() {
                let limited = totals.add(
                    c.cpu_request_millis,
                    c.cpu_limit_millis,
                    c.memory_request_bytes,
                    c.memory_limit_bytes,
                );
                all_limited &= limited;
            }
        }
        totals.class(all_limited)
    }

    /// Check what the API server would: at least one app container, unique non-empty names, kinds that match their lists.
    pub fn validate(&self) -> Result<(), String> {
        if self.containers.is_empty() {
            return Err(format!("pod `{}` has no containers", self.uid));
        }
        let mut names: Vec<&str> = Vec::new();
        for c in self.all_containers() {
            if c.name.is_empty() {
                return Err(format!("pod `{}` has a container without a name", self.uid));
            }
            if names.contains(&c.name.as_str()) {
                return Err(format!(
                    "pod `{}` has two containers named `{}`",
                    self.uid, c.name
                ));
            }
            names.push(&c.name);
        }
        if let Some(c) = self
            .init_containers
            .iter()
            .find(|c| c.kind == ContainerKind::Regular)
        {
            return Err(format!(
                "init container `{}` of pod `{}` has kind regular",
                c.name, self.uid
            ));
        }
        if let Some(c) = self
            .containers
            .iter()
            .find(|c| c.kind != ContainerKind::Regular)
        {
            return Err(format!(
                "app container `{}` of pod `{}` has an init kind",
                c.name, self.uid
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, cpu: Option<(i64, i64)>, memory: Option<(u64, u64)>) -> ContainerSpec {
        ContainerSpec {
            name: name.to_string(),
            kind: ContainerKind::Regular,
            cpu_request_millis: cpu.map(|c| c.0),
            cpu_limit_millis: cpu.map(|c| c.1),
            memory_request_bytes: memory.map(|m| m.0),
            memory_limit_bytes: memory.map(|m| m.1),
        }
    }

    #[test]
    fn cpu_pod_qos_class() {
        let gates = FeatureGates::default();
        let mut pod = PodSpec {
            uid: "p".into(),
            ..PodSpec::default()
        };
        assert_eq!(pod.qos_class(&gates), QosClass::BestEffort);
        pod.containers = vec![container("a", Some((2000, 2000)), Some((1 << 30, 1 << 30)))];
        assert_eq!(pod.qos_class(&gates), QosClass::Guaranteed);
        pod.containers
            .push(container("b", Some((100, 200)), Some((1, 1))));
        assert_eq!(pod.qos_class(&gates), QosClass::Burstable);
        pod.containers[1] = container("b", None, None);
        assert_eq!(
            pod.qos_class(&gates),
            QosClass::Burstable,
            "a container without limits breaks Guaranteed"
        );
        pod.pod_level = PodLevelResources {
            cpu_request_millis: Some(4000),
            cpu_limit_millis: Some(4000),
            memory_request_bytes: Some(4 << 30),
            memory_limit_bytes: Some(4 << 30),
        };
        assert_eq!(
            pod.qos_class(&gates),
            QosClass::Guaranteed,
            "pod-level values decide"
        );
        pod.pod_level.cpu_limit_millis = Some(1000);
        assert_eq!(pod.qos_class(&gates), QosClass::Burstable);
        let no_plr = FeatureGates {
            pod_level_resources: false,
            ..gates
        };
        assert_eq!(
            pod.qos_class(&no_plr),
            QosClass::Burstable,
            "gate off: containers decide"
        );
        assert!(container("a", Some((2000, 2000)), Some((1, 1))).is_equivalent_guaranteed());
        assert!(!container("a", Some((2000, 2000)), None).is_equivalent_guaranteed());
        assert!(is_integral_cpu(3000) && !is_integral_cpu(1500));
    }

    #[test]
    fn cpu_pod_validation() {
        let mut pod = PodSpec {
            uid: "p".into(),
            ..PodSpec::default()
        };
        assert!(pod.validate().unwrap_err().contains("has no containers"));
        pod.containers = vec![container("a", None, None), container("a", None, None)];
        assert!(
            pod.validate()
                .unwrap_err()
                .contains("two containers named `a`")
        );
        pod.containers.pop();
        pod.init_containers = vec![container("i", None, None)];
        assert!(pod.validate().unwrap_err().contains("has kind regular"));
        pod.init_containers[0].kind = ContainerKind::Sidecar;
        assert_eq!(pod.validate(), Ok(()));
        assert!(pod.is_init_container("i") && !pod.is_init_container("a"));
    }
}
