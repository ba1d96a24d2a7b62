//! Feature gates and their Kubernetes 1.36 defaults.
//!
//! The host passes only the gates a user set; every other gate keeps the
//! default listed here, so the defaults live in exactly one place.

use crate::field_error::{FieldError, FieldErrorType};

/// A feature gate known to this policy.
#[derive(Clone, Copy, Debug)]
pub struct GateSpec {
    /// The upstream gate name.
    pub name: &'static str,
    /// Its default in Kubernetes 1.36.
    pub default: bool,
}

/// Every gate the policy reads, with its Kubernetes 1.36 default.
pub const KNOWN_GATES: &[GateSpec] = &[
    GateSpec {
        name: "CPUManagerPolicyAlphaOptions",
        default: false,
    },
    GateSpec {
        name: "CPUManagerPolicyBetaOptions",
        default: true,
    },
    GateSpec {
        name: "CustomCPUCFSQuotaPeriod",
        default: false,
    },
    GateSpec {
        name: "DisableCPUQuotaWithExclusiveCPUs",
        default: true,
    },
    GateSpec {
        name: "DRANodeAllocatableResources",
        default: false,
    },
    GateSpec {
        name: "InPlacePodLevelResourcesVerticalScaling",
        default: true,
    },
    GateSpec {
        name: "InPlacePodVerticalScaling",
        default: true,
    },
    GateSpec {
        name: "InPlacePodVerticalScalingExclusiveCPUs",
        default: false,
    },
    GateSpec {
        name: "InPlacePodVerticalScalingExclusiveMemory",
        default: false,
    },
    GateSpec {
        name: "InPlacePodVerticalScalingInitContainers",
        default: true,
    },
    GateSpec {
        name: "KubeletOOMScoreAdjTieBreak",
        default: false,
    },
    GateSpec {
        name: "MemoryQoS",
        default: false,
    },
    GateSpec {
        name: "PodLevelResourceManagers",
        default: false,
    },
    GateSpec {
        name: "PodLevelResources",
        default: true,
    },
    GateSpec {
        name: "PodLevelResourcesFixKubeletQOSClass",
        default: true,
    },
    GateSpec {
        name: "PodLevelResourcesFixUpdateDefaulting",
        default: true,
    },
    GateSpec {
        name: "SidecarContainers",
        default: true,
    },
    GateSpec {
        name: "TopologyManagerPolicyAlphaOptions",
        default: false,
    },
    GateSpec {
        name: "TopologyManagerPolicyBetaOptions",
        default: true,
    },
];

/// The resolved gate values the policy reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "each field is the upstream gate of the same name"
)]
pub struct FeatureGates {
    pub cpu_manager_policy_alpha_options: bool,
    pub cpu_manager_policy_beta_options: bool,
    pub custom_cpu_cfs_quota_period: bool,
    pub disable_cpu_quota_with_exclusive_cpus: bool,
    pub dra_node_allocatable_resources: bool,
    pub in_place_pod_level_resources_vertical_scaling: bool,
    pub in_place_pod_vertical_scaling: bool,
    pub in_place_pod_vertical_scaling_exclusive_cpus: bool,
    pub in_place_pod_vertical_scaling_exclusive_memory: bool,
    pub in_place_pod_vertical_scaling_init_containers: bool,
    pub kubelet_oom_score_adj_tie_break: bool,
    pub memory_qos: bool,
    pub pod_level_resource_managers: bool,
    pub pod_level_resources: bool,
    pub pod_level_resources_fix_kubelet_qos_class: bool,
    pub pod_level_resources_fix_update_defaulting: bool,
    pub sidecar_containers: bool,
    pub topology_manager_policy_alpha_options: bool,
    pub topology_manager_policy_beta_options: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        let mut gates = FeatureGates::all(false);
        for spec in KNOWN_GATES {
            *gates.slot(spec.name).expect("every known gate has a slot") = spec.default;
        }
        gates
    }
}

impl FeatureGates {
    fn all(value: bool) -> Self {
        FeatureGates {
            cpu_manager_policy_alpha_options: value,
            cpu_manager_policy_beta_options: value,
            custom_cpu_cfs_quota_period: value,
            disable_cpu_quota_with_exclusive_cpus: value,
            dra_node_allocatable_resources: value,
            in_place_pod_level_resources_vertical_scaling: value,
            in_place_pod_vertical_scaling: value,
            in_place_pod_vertical_scaling_exclusive_cpus: value,
            in_place_pod_vertical_scaling_exclusive_memory: value,
            in_place_pod_vertical_scaling_init_containers: value,
            kubelet_oom_score_adj_tie_break: value,
            memory_qos: value,
            pod_level_resource_managers: value,
            pod_level_resources: value,
            pod_level_resources_fix_kubelet_qos_class: value,
            pod_level_resources_fix_update_defaulting: value,
            sidecar_containers: value,
            topology_manager_policy_alpha_options: value,
            topology_manager_policy_beta_options: value,
        }
    }

    fn slot(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "CPUManagerPolicyAlphaOptions" => &mut self.cpu_manager_policy_alpha_options,
            "CPUManagerPolicyBetaOptions" => &mut self.cpu_manager_policy_beta_options,
            "CustomCPUCFSQuotaPeriod" => &mut self.custom_cpu_cfs_quota_period,
            "DisableCPUQuotaWithExclusiveCPUs" => &mut self.disable_cpu_quota_with_exclusive_cpus,
            "DRANodeAllocatableResources" => &mut self.dra_node_allocatable_resources,
            "InPlacePodLevelResourcesVerticalScaling" => {
                &mut self.in_place_pod_level_resources_vertical_scaling
            }
            "InPlacePodVerticalScaling" => &mut self.in_place_pod_vertical_scaling,
            "InPlacePodVerticalScalingExclusiveCPUs" => {
                &mut self.in_place_pod_vertical_scaling_exclusive_cpus
            }
            "InPlacePodVerticalScalingExclusiveMemory" => {
                &mut self.in_place_pod_vertical_scaling_exclusive_memory
            }
            "InPlacePodVerticalScalingInitContainers" => {
                &mut self.in_place_pod_vertical_scaling_init_containers
            }
            "KubeletOOMScoreAdjTieBreak" => &mut self.kubelet_oom_score_adj_tie_break,
            "MemoryQoS" => &mut self.memory_qos,
            "PodLevelResourceManagers" => &mut self.pod_level_resource_managers,
            "PodLevelResources" => &mut self.pod_level_resources,
            "PodLevelResourcesFixKubeletQOSClass" => {
                &mut self.pod_level_resources_fix_kubelet_qos_class
            }
            "PodLevelResourcesFixUpdateDefaulting" => {
                &mut self.pod_level_resources_fix_update_defaulting
            }
            "SidecarContainers" => &mut self.sidecar_containers,
            "TopologyManagerPolicyAlphaOptions" => &mut self.topology_manager_policy_alpha_options,
            "TopologyManagerPolicyBetaOptions" => &mut self.topology_manager_policy_beta_options,
            _ => return None,
        })
    }

    /// Resolve user-set gates, `(name, enabled)` in the order set, over the
    /// 1.36 defaults. Unknown gates are errors (as in the kubelet:
    /// "unrecognized feature gate"); a gate set twice takes the last value.
    pub fn resolve<'a>(
        overrides: impl IntoIterator<Item = (&'a str, bool)>,
        errors: &mut Vec<FieldError>,
    ) -> FeatureGates {
        let mut gates = FeatureGates::default();
        for (name, enabled) in overrides {
            match gates.slot(name) {
                Some(slot) => *slot = enabled,
                None => errors.push(FieldError::new(
                    format!("featureGates[{}]", crate::model::truncate(name)),
                    FieldErrorType::NotSupported,
                    "unrecognized feature gate",
                    Some(crate::model::truncate(name)),
                )),
            }
        }
        gates
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_kubernetes_1_36() {
        let gates = FeatureGates::default();
        assert!(gates.pod_level_resources);
        assert!(gates.pod_level_resources_fix_kubelet_qos_class);
        assert!(gates.pod_level_resources_fix_update_defaulting);
        assert!(gates.in_place_pod_vertical_scaling);
        assert!(!gates.memory_qos);
        assert!(!gates.dra_node_allocatable_resources);
        assert!(!gates.custom_cpu_cfs_quota_period);
    }

    #[test]
    fn overrides_apply_and_unknown_gates_are_errors() {
        let mut errors = Vec::new();
        let gates = FeatureGates::resolve([("MemoryQoS", true), ("NoSuchGate", true)], &mut errors);
        assert!(gates.memory_qos);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "featureGates[NoSuchGate]");
        assert_eq!(errors[0].error_type, FieldErrorType::NotSupported);
    }
}
