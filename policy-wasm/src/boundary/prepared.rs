//! The `prepared-node` resource's methods at the edge: decode the node
//! settings (and the topology) once into a [`PreparedNode`], then per call
//! decode only the pod and the state, run the core, and encode its answer,
//! exactly as the one-shot exports do.

use super::Result;
use super::encode_errors;
use super::evaluate::evaluate_decoded;
use super::managers::{admit_prepared, prepare_managers, release_prepared};
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
        crate::defaults::default_pod(pod, &self.node().gates)
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
}
