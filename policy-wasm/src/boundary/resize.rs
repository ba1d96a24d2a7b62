//! The `resize` interface's `plan`: the two pods, the other pods' requests
//! and the node decoded for [`crate::resize::plan`], and its plan encoded.

use crate::resize::{
    ResizeDecision, ResizeDirection, ResizePlan, ResizeResource, ResizeStep, ResizeStepKind,
};
use crate::wit::{self, FieldError};

use super::cgroup::encode_files;
use super::pod::{decode_list, decode_pod};
use super::{Result, encode_errors};

impl From<ResizeDecision> for wit::ResizeDecision {
    fn from(decision: ResizeDecision) -> Self {
        match decision {
            ResizeDecision::Accepted => wit::ResizeDecision::Accepted,
            ResizeDecision::Deferred => wit::ResizeDecision::Deferred,
            ResizeDecision::Infeasible => wit::ResizeDecision::Infeasible,
            ResizeDecision::Invalid => wit::ResizeDecision::Invalid,
        }
    }
}

impl From<ResizeStepKind> for wit::ResizeStepKind {
    fn from(kind: ResizeStepKind) -> Self {
        match kind {
            ResizeStepKind::WritePod => wit::ResizeStepKind::WritePod,
            ResizeStepKind::WriteContainer => wit::ResizeStepKind::WriteContainer,
            ResizeStepKind::CheckMemoryUsage => wit::ResizeStepKind::CheckMemoryUsage,
            ResizeStepKind::RestartContainer => wit::ResizeStepKind::RestartContainer,
            ResizeStepKind::ReallocateCpus => wit::ResizeStepKind::ReallocateCpus,
        }
    }
}

impl From<ResizeDirection> for wit::ResizeDirection {
    fn from(direction: ResizeDirection) -> Self {
        match direction {
            ResizeDirection::Increase => wit::ResizeDirection::Increase,
            ResizeDirection::Decrease => wit::ResizeDirection::Decrease,
            ResizeDirection::Unchanged => wit::ResizeDirection::Unchanged,
        }
    }
}

impl From<ResizeResource> for wit::ResizeResource {
    fn from(resource: ResizeResource) -> Self {
        match resource {
            ResizeResource::Cpu => wit::ResizeResource::Cpu,
            ResizeResource::Memory => wit::ResizeResource::Memory,
        }
    }
}

impl From<ResizeStep> for wit::ResizeStep {
    fn from(step: ResizeStep) -> Self {
        wit::ResizeStep {
            kind: step.kind.into(),
            container: step.container,
            resource: step.resource.into(),
            direction: step.direction.into(),
            files: encode_files(step.files),
            memory_limit_bytes: step.memory_limit_bytes,
            cpus: step.cpus,
        }
    }
}

impl From<ResizePlan> for wit::ResizePlan {
    fn from(plan: ResizePlan) -> Self {
        wit::ResizePlan {
            decision: plan.decision.into(),
            message: plan.message,
            errors: encode_errors(plan.errors),
            qos_class: plan.qos_class.into(),
            steps: plan.steps.into_iter().map(Into::into).collect(),
        }
    }
}

/// `errors` with every field path under `which` (`current.spec...`).
fn prefix(errors: Vec<FieldError>, which: &str) -> Vec<FieldError> {
    errors
        .into_iter()
        .map(|mut e| {
            e.field = format!("{which}.{}", e.field);
            e
        })
        .collect()
}

/// Export `plan`: every bad field of `others`, `current` and `desired`
/// (the pods' under `current.` and `desired.`), or the plan.
pub fn plan(
    current: &wit::Pod,
    desired: &wit::Pod,
    others: &[wit::ResourceQuantity],
    node: &wit::NodeSettings,
) -> Result<wit::ResizePlan> {
    let node = super::node::decode_node(node)?;
    let mut errors = Vec::new();
    let others = decode_list(others, "others", &mut errors);
    let current_pod = decode_pod(current).map_err(|e| prefix(e, "current"));
    let desired_pod = decode_pod(desired).map_err(|e| prefix(e, "desired"));
    let (current_pod, desired_pod) = match (current_pod, desired_pod) {
        (Ok(c), Ok(d)) if errors.is_empty() => (c, d),
        (c, d) => {
            errors.extend(c.err().into_iter().flatten());
            errors.extend(d.err().into_iter().flatten());
            return Err(errors);
        }
    };
    let desired_errors = super::evaluate::validate_decoded_pod(desired, desired_pod.clone(), &node);
    Ok(crate::resize::plan(&current_pod, &desired_pod, desired_errors, &others, &node).into())
}

#[cfg(test)]
mod tests {
    use super::super::node::{decode_node, default_settings};
    use super::super::test_support::{container, guaranteed, list, pod};
    use super::decode_pod;
    use crate::model::ResourceMap;
    use crate::resize::{ResizeDecision, fit};

    /// `canResizePod`: a pod too large for the node is Infeasible before any
    /// Deferred check, memory reported when both resources are too large;
    /// what the other pods use only defers.
    #[test]
    fn the_fit_check_reports_capacity_memory_first_then_what_is_used() {
        let mut settings = default_settings();
        settings.capacity = list(&[("cpu", "4"), ("memory", "4Gi")]);
        let node = decode_node(&settings).expect("node");
        let sized = |cpu: &str, memory: &str| {
            decode_pod(&pod(
                "p",
                None,
                vec![container("c", guaranteed(cpu, memory))],
            ))
            .expect("pod")
        };
        let none = ResourceMap::new();
        let (decision, message) = fit(&sized("5", "5Gi"), &none, &node);
        assert_eq!(decision, ResizeDecision::Infeasible);
        assert!(
            message.starts_with("Node didn't have enough capacity: memory, requested: 5368709120"),
            "{message}"
        );
        let (decision, message) = fit(&sized("5", "1Gi"), &none, &node);
        assert_eq!(decision, ResizeDecision::Infeasible);
        assert!(
            message.contains("capacity: cpu, requested: 5000, capacity: 4000"),
            "{message}"
        );
        // cpu fits the node but not beside the others; memory is too large
        // for the node: Infeasible, as the capacity check comes first.
        let mut others = ResourceMap::new();
        others.insert("cpu".into(), crate::quantity::Quantity::parse("3").unwrap());
        let (decision, message) = fit(&sized("2", "5Gi"), &others, &node);
        assert_eq!(
            (decision, message.contains("memory")),
            (ResizeDecision::Infeasible, true)
        );
        let (decision, message) = fit(&sized("2", "1Gi"), &others, &node);
        assert_eq!(decision, ResizeDecision::Deferred);
        assert!(
            message
                .starts_with("Node didn't have enough resource: cpu, requested: 2000, used: 3000"),
            "{message}"
        );
        assert_eq!(
            fit(&sized("1", "1Gi"), &others, &node).0,
            ResizeDecision::Accepted
        );
    }
}
