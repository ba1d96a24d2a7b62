//! A node prepared once for many pods (the `prepared-node` resource): its
//! settings decoded and checked as `evaluate` does and, with a topology,
//! its resource managers built as `admit` does. A long-lived host keeps one
//! per node settings in a warm instance and sends only pods and states.
//!
//! Every answer is the one the one-shot export gives for the same node:
//! nothing here caches an answer, only the decoded node. The kubelet does
//! the same: it builds its managers once at start-up (`NewContainerManager`)
//! and runs every pod's admission against them.
//!
//! The methods that take and give WIT records (`prepare`, `validate_pod`,
//! `default_pod`, `evaluate`, `admit`, `release`) are the boundary's, in
//! [`crate::boundary::prepared`]; the ones here work on the core's types.

use crate::evaluate::PodEvaluation;
use crate::field_error::{FieldError, FieldErrorType};
use crate::managers::PreparedManagers;
use crate::model::Pod;
use crate::node::NodeConfig;

/// One node's settings (and, for the managers, its topology) decoded once.
pub struct PreparedNode {
    node: NodeConfig,
    managers: Option<PreparedManagers>,
}

impl PreparedNode {
    /// A node prepared from its decoded settings and, when it was given a
    /// topology, its built managers.
    pub fn new(node: NodeConfig, managers: Option<PreparedManagers>) -> Self {
        PreparedNode { node, managers }
    }

    /// The node's settings, every default applied.
    pub fn node(&self) -> &NodeConfig {
        &self.node
    }

    /// [`crate::evaluate::evaluate_pod`] of `pod` on this node.
    pub fn evaluate_pod(&self, pod: Pod) -> Result<PodEvaluation, Vec<FieldError>> {
        crate::evaluate::evaluate_pod(pod, &self.node)
    }

    /// The node's managers: an error when it was prepared without a
    /// topology, which admission and release need.
    pub fn managers(&self) -> Result<&PreparedManagers, Vec<FieldError>> {
        self.managers.as_ref().ok_or_else(|| {
            vec![FieldError::new(
                "topology",
                FieldErrorType::Required,
                "this node was prepared without a topology: admit and release need one",
                None,
            )]
        })
    }
}
