//! A node prepared once for many pods (the `prepared-node` resource): its
//! settings decoded and checked as `evaluate` does and, with a topology,
//! its resource managers built as `admit` does. A long-lived host keeps one
//! per node settings in a warm instance and sends only pods and states.
//!
//! Every answer is the one the one-shot export gives for the same node:
//! nothing here caches an answer, only the decoded node. The kubelet does
//! the same: it builds its managers once at start-up (`NewContainerManager`)
//! and runs every pod's admission against them.

use crate::boundary::evaluate::{Result, evaluate_decoded};
use crate::boundary::managers::{admit_prepared, prepare_managers, release_prepared};
use crate::managers::PreparedManagers;
use crate::node::NodeConfig;
use crate::wit;

/// One node's settings (and, for the managers, its topology) decoded once.
pub struct PreparedNode {
    node: NodeConfig,
    managers: Option<PreparedManagers>,
}

impl PreparedNode {
    /// Decode `node` and, when `topology` is given, build its managers:
    /// the errors are the ones `evaluate` (node fields) and `admit` (the
    /// manager configuration and the topology) report for them.
    pub fn prepare(
        node: &wit::NodeSettings,
        topology: Option<&wit::NodeTopology>,
    ) -> Result<PreparedNode> {
        let decoded = crate::boundary::node::decode_node(node);
        let managers = topology.map(|topology| prepare_managers(topology, node));
        match (decoded, managers) {
            (Ok(node), None) => Ok(PreparedNode {
                node,
                managers: None,
            }),
            (Ok(node), Some(Ok(managers))) => Ok(PreparedNode {
                node,
                managers: Some(managers),
            }),
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

    /// `evaluate` of `pod` on this node.
    pub fn evaluate(&self, pod: &wit::Pod) -> Result<wit::PodEvaluation> {
        evaluate_decoded(crate::boundary::pod::decode_pod(pod)?, &self.node)
    }

    /// `admit` of `pod` with `state` on this node.
    pub fn admit(&self, pod: &wit::Pod, state: &wit::ManagerState) -> Result<wit::Admission> {
        admit_prepared(self.managers()?, pod, state)
    }

    /// `release` of one container with `state` on this node.
    pub fn release(
        &self,
        pod_uid: &str,
        container: &str,
        state: &wit::ManagerState,
    ) -> Result<wit::ManagerState> {
        release_prepared(self.managers()?, pod_uid, container, state)
    }

    fn managers(&self) -> Result<&PreparedManagers> {
        self.managers.as_ref().ok_or_else(|| {
            vec![crate::boundary::pod::field_error(
                "topology",
                wit::ErrorReason::Required,
                "this node was prepared without a topology: admit and release need one",
            )]
        })
    }
}
