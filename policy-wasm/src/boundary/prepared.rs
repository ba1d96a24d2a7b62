//! The `prepared-node` resource's methods at the edge: decode the node
//! settings (and the topology) once into a [`PreparedNode`], then per call
//! decode only the pod and the state, run the core, and encode its answer,
//! exactly as the one-shot exports do.

use super::Result;
use super::encode_errors;
use super::evaluate::evaluate_decoded;
use super::managers::{admit_prepared, prepare_managers, release_prepared};
use crate::node_cgroups::QosClassTotals;
use crate::prepared::PreparedNode;
use crate::wit;

// The WIT-typed methods of the core's `PreparedNode`, kept on the type (the
// host's benches call `PreparedNode::prepare` and `evaluate` natively).
impl PreparedNode {
    /// Decode `node` and, when `topology` is given, build its managers:
    /// the errors are the ones `evaluate` (node fields) and `admit` (the
    /// manager configuration and the topology) report for them.
    pub fn prepare(
        node: &wit::NodeSettings,
        topology: Option<&wit::NodeTopology>,
    ) -> Result<PreparedNode> {
        let decoded = super::node::decode_node(node);
        let managers = topology.map(|topology| prepare_managers(topology, node));
        match (decoded, managers) {
            (Ok(node), None) => Ok(PreparedNode::new(node, None)),
            (Ok(node), Some(Ok(managers))) => Ok(PreparedNode::new(node, Some(managers))),
            (decoded, managers) => {
                let mut errors = decoded.err().unwrap_or_default();
                if let Some(Err(manager_errors)) = managers {
                    // `admit` decodes the node through the managers'
                    // configuration too: report each field once.
                    for e in manager_errors {
                        if !errors.contains(&e) {
                            errors.push(e);
                        }
                    }
                }
                Err(errors)
            }
        }
    }

    /// `validate-pod` of `pod` on this node.
    pub fn validate_pod(&self, pod: &wit::Pod) -> Vec<wit::FieldError> {
        super::evaluate::validate_written_pod(pod, self.node())
    }

    /// `default-pod` of `pod` on this node.
    pub fn default_pod(&self, pod: &wit::Pod) -> Result<wit::DefaultedPod> {
        super::defaults::default_pod(pod, &self.node().gates)
    }

    /// `evaluate` of `pod` on this node.
    pub fn evaluate(&self, pod: &wit::Pod) -> Result<wit::PodEvaluation> {
        evaluate_decoded(super::pod::decode_pod(pod)?, self.node())
    }

    /// `admit` of `pod` with `state` on this node.
    pub fn admit(&self, pod: &wit::Pod, state: &wit::ManagerState) -> Result<wit::Admission> {
        admit_prepared(self.managers().map_err(encode_errors)?, pod, state)
    }

    /// `release` of one container with `state` on this node.
    pub fn release(
        &self,
        pod_uid: &str,
        container: &str,
        state: &wit::ManagerState,
    ) -> Result<wit::ManagerState> {
        release_prepared(
            self.managers().map_err(encode_errors)?,
            pod_uid,
            container,
            state,
        )
    }

    /// A new, empty [`NodeCgroupsSum`] over this node's settings.
    pub fn node_cgroups_sum(&self) -> NodeCgroupsSum {
        NodeCgroupsSum {
            node: self.node().clone(),
            totals: QosClassTotals::default(),
        }
    }
}

/// The `node-cgroups-sum` resource's state: the pods added so far, as the
/// only sums the node-level cgroups need of them
/// ([`crate::node_cgroups::QosClassTotals`]), on one prepared node's
/// settings.
pub struct NodeCgroupsSum {
    node: crate::node::NodeConfig,
    totals: QosClassTotals,
}

impl NodeCgroupsSum {
    /// `add-pod`: count `pod` as `node-level-cgroups` counts each of its
    /// pods (as allocated); a pod that does not decode, or that the kubelet
    /// refuses to run, is refused with its field errors and changes nothing.
    pub fn add_pod(&mut self, pod: &wit::Pod) -> Result<()> {
        let pod = super::pod::decode_pod(pod)?;
        if let Some(refused) =
            crate::validation::kubelet_refuses_pod_level_resources(&pod, &self.node.gates)
        {
            return Err(vec![refused.into()]);
        }
        crate::evaluate::add_allocated_pod(&mut self.totals, &pod, &self.node);
        Ok(())
    }

    /// `node-cgroups`: `node-level-cgroups` over the pods added so far.
    pub fn node_cgroups(&self) -> wit::NodeCgroups {
        super::evaluate::encode_node_cgroups(
            crate::node_cgroups::node_cgroups(&self.totals, &self.node),
            &self.node,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{container, guaranteed, list, pod};
    use crate::prepared::PreparedNode;
    use crate::wit;

    fn memory_qos_node() -> wit::NodeSettings {
        wit::NodeSettings {
            capacity: list(&[("cpu", "8"), ("memory", "32Gi")]),
            feature_gates: vec![wit::FeatureGate {
                name: "MemoryQoS".into(),
                enabled: true,
            }],
            ..crate::node::default_settings()
        }
    }

    fn pods() -> Vec<wit::Pod> {
        let burstable = Some(wit::ResourceRequirements {
            requests: Some(list(&[("cpu", "500m"), ("memory", "256Mi")])),
            limits: None,
        });
        vec![
            pod("g", None, vec![container("c", guaranteed("1", "1Gi"))]),
            pod("b", None, vec![container("c", burstable.clone())]),
            pod(
                "b2",
                None,
                vec![container("a", burstable), container("b", None)],
            ),
            pod("be", None, vec![container("c", None)]),
        ]
    }

    #[test]
    fn a_sum_of_pods_added_one_at_a_time_answers_as_node_level_cgroups() {
        let node = memory_qos_node();
        let prepared = PreparedNode::prepare(&node, None).expect("node prepares");
        let pods = pods();
        let mut sum = prepared.node_cgroups_sum();
        let empty = sum.node_cgroups();
        for (i, pod) in pods.iter().enumerate() {
            sum.add_pod(pod).expect("pod adds");
            assert_eq!(
                sum.node_cgroups(),
                super::super::evaluate::node_cgroups(&pods[..=i], &node).unwrap(),
                "after {} pods",
                i + 1
            );
        }
        // The pods moved the sums (Burstable cpu.weight, memory.min).
        assert_ne!(sum.node_cgroups(), empty);
    }

    #[test]
    fn a_pod_that_does_not_decode_is_refused_and_leaves_the_sum_unchanged() {
        let node = memory_qos_node();
        let prepared = PreparedNode::prepare(&node, None).expect("node prepares");
        let mut sum = prepared.node_cgroups_sum();
        sum.add_pod(&pods()[1]).expect("pod adds");
        let before = sum.node_cgroups();
        let bad = pod(
            "bad",
            None,
            vec![container(
                "c",
                Some(wit::ResourceRequirements {
                    requests: Some(list(&[("cpu", "bogus")])),
                    limits: None,
                }),
            )],
        );
        let errors = sum.add_pod(&bad).expect_err("a bad quantity is refused");
        assert!(
            errors
                .iter()
                .any(|e| e.field == "spec.containers[0].resources.requests[cpu]"),
            "{errors:?}"
        );
        assert_eq!(sum.node_cgroups(), before);
    }

    /// With the kubelet's `PodLevelResources` gate off, a pod that sets
    /// pod-level resources is not admitted (`evaluate` refuses it), so it
    /// never counts in the node-level cgroups.
    #[test]
    fn a_pod_the_kubelet_refuses_is_in_no_node_level_sum() {
        let mut node = memory_qos_node();
        node.feature_gates.push(wit::FeatureGate {
            name: "PodLevelResources".into(),
            enabled: false,
        });
        let prepared = PreparedNode::prepare(&node, None).expect("node prepares");
        let mut sum = prepared.node_cgroups_sum();
        sum.add_pod(&pods()[1]).expect("pod adds");
        let before = sum.node_cgroups();
        // Burstable at pod level: it would move the Burstable cpu.weight.
        let pod_level = pod(
            "pl",
            Some(wit::ResourceRequirements {
                requests: Some(list(&[("cpu", "2"), ("memory", "1Gi")])),
                limits: None,
            }),
            vec![container("c", None)],
        );
        let refused = |errors: &[wit::FieldError], field: &str| {
            errors.iter().any(|e| {
                e.field == field && e.message == "PodLevelResources feature gate is disabled"
            })
        };
        let errors = sum.add_pod(&pod_level).expect_err("the kubelet refuses it");
        assert!(refused(&errors, "spec.resources"), "{errors:?}");
        assert_eq!(sum.node_cgroups(), before);
        let errors =
            super::super::evaluate::node_cgroups(&[pods()[1].clone(), pod_level.clone()], &node)
                .expect_err("the kubelet refuses it");
        assert!(refused(&errors, "pods[1].spec.resources"), "{errors:?}");
        // With the gate on (its 1.36 default) the same pod counts.
        let node = memory_qos_node();
        let prepared = PreparedNode::prepare(&node, None).expect("node prepares");
        let mut sum = prepared.node_cgroups_sum();
        sum.add_pod(&pods()[1]).expect("pod adds");
        sum.add_pod(&pod_level).expect("counted with the gate on");
        assert_ne!(sum.node_cgroups(), before);
    }
}
