//! The component's answers for a set of pods, typed: what `apply`, the
//! agent and the shadow evaluation of a policy candidate consume.
//!
//! Every value here is the component's own (WIT types: a QoS class enum,
//! container kinds, cgroup files as the component listed them), with the
//! resource managers' placement files put over `evaluate`'s where the node
//! places pods. [`crate::output`] renders these for people (`explain`);
//! nothing that writes to the node reads that display schema.

use crate::bindings::{
    CgroupFile, CgroupFileName, ContainerEvaluation, FieldError, ManagerError, NodeCgroups,
    PatchOperation, PlacementFiles, Pod, PodEvaluation,
};
use crate::output;

/// One pod the component evaluated: valid, defaulted, evaluated.
#[derive(Clone, Debug, PartialEq)]
pub struct EvaluatedPod {
    /// The pod as the API server would store it (defaults applied).
    pub defaulted: Pod,
    /// The defaulting patch that turned the input into [`Self::defaulted`].
    pub patch: Vec<PatchOperation>,
    /// The component's evaluation, with the managers' placement files over
    /// its cgroup files once the pod is placed ([`EvaluatedPod::place`]).
    pub evaluation: PodEvaluation,
}

impl EvaluatedPod {
    /// Put the resource managers' placement files over the evaluated ones:
    /// a file in both takes the placement's value (see `placement-files`).
    pub fn place(&mut self, files: &PlacementFiles) {
        over(&mut self.evaluation.pod_cgroup_files, &files.pod);
        for placed in &files.containers {
            if let Some(container) = self
                .evaluation
                .containers
                .iter_mut()
                .find(|c| c.name == placed.name)
            {
                over(&mut container.cgroup_files, &placed.files);
            }
        }
    }

    /// The container results, in the component's order.
    pub fn containers(&self) -> &[ContainerEvaluation] {
        &self.evaluation.containers
    }
}

fn over(files: &mut Vec<CgroupFile>, placed: &[CgroupFile]) {
    for file in placed {
        match files.iter_mut().find(|f| f.file == file.file) {
            Some(existing) => existing.value = file.value.clone(),
            None => files.push(file.clone()),
        }
    }
}

/// What became of one pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Valid and evaluated (and, on a node that places pods, admitted).
    Evaluated(Box<EvaluatedPod>),
    /// Refused by validation, defaulting or evaluation, with field paths.
    Invalid(Vec<FieldError>),
    /// Valid, but the resource managers do not admit it on this node.
    NotAdmitted(Box<Refusal>),
}

/// The resource managers' refusal of a pod.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The rejection as the kubelet reports it.
    pub error: ManagerError,
    /// The admission that refused it: the topology decisions (each
    /// provider's hints, the merged hint, the rule) and the admission's
    /// rule, for `--why`.
    pub admission: crate::bindings::Admission,
}

/// One pod's outcome, named as the agent, `apply` and `explain` name it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodOutcome {
    /// `namespace/name` (or `name` when the input has no namespace).
    pub name: String,
    /// Where the pod came from (a file, a document in it).
    pub source: String,
    /// What the component answered.
    pub verdict: Verdict,
}

impl PodOutcome {
    /// The evaluated pod, unless the pod was refused.
    pub fn evaluated(&self) -> Option<&EvaluatedPod> {
        match &self.verdict {
            Verdict::Evaluated(pod) => Some(pod),
            _ => None,
        }
    }

    /// Why the pod was refused, one `field: message` per error; empty when
    /// it was not.
    pub fn refusals(&self) -> Vec<String> {
        match &self.verdict {
            Verdict::Evaluated(_) => Vec::new(),
            Verdict::Invalid(errors) => errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect(),
            Verdict::NotAdmitted(refusal) => vec![format!(
                "{}: {}",
                refusal.error.reason(),
                refusal.error.message
            )],
        }
    }

    /// The display form (`explain`).
    pub fn explanation(&self) -> output::Explanation {
        match &self.verdict {
            Verdict::Evaluated(pod) => output::Explanation::evaluated(
                self.name.clone(),
                self.source.clone(),
                &pod.patch,
                &pod.evaluation,
            ),
            Verdict::Invalid(errors) => {
                output::Explanation::rejected(self.name.clone(), self.source.clone(), errors)
            }
            Verdict::NotAdmitted(refusal) => {
                let error = &refusal.error;
                let mut explanation =
                    output::Explanation::rejected(self.name.clone(), self.source.clone(), &[]);
                explanation.errors.push(output::ErrorOut {
                    field: String::new(),
                    reason: error.reason().to_string(),
                    message: error.message.clone(),
                    bad_value: None,
                });
                explanation
            }
        }
    }
}

/// `explain --why`: the component's reason for each value of an evaluated
/// pod (`explain-values`), for the values as they stand. A file the
/// resource managers' placement replaced says so, with the value and
/// reason `evaluate` had given.
pub fn reasons(
    policy: &crate::runtime::PolicyRuntime,
    pod: &EvaluatedPod,
    node: &crate::bindings::NodeSettings,
) -> anyhow::Result<Vec<output::WhyOut>> {
    let reasons = match policy.explain_values(&pod.defaulted, node)? {
        Ok(reasons) => reasons,
        Err(errors) => anyhow::bail!(
            "the policy could not explain the values:\n{}",
            crate::format_field_errors(&errors)
        ),
    };
    let current = |container: Option<&str>, file: &str| -> Option<String> {
        let files = match container {
            None => &pod.evaluation.pod_cgroup_files,
            Some(name) => {
                &pod.evaluation
                    .containers
                    .iter()
                    .find(|c| c.name == name)?
                    .cgroup_files
            }
        };
        let file = CgroupFileName::parse(file)?;
        files
            .iter()
            .find(|f| f.file == file)
            .map(|f| f.value.to_string())
    };
    let mut out: Vec<output::WhyOut> = reasons
        .into_iter()
        .map(|r| {
            let placed = current(r.container.as_deref(), &r.file).filter(|now| *now != r.value);
            match placed {
                Some(now) => output::WhyOut {
                    reason: format!(
                        "placed by the resource managers' admission (over evaluate's {}: {})",
                        r.value, r.reason
                    ),
                    container: r.container,
                    file: r.file,
                    value: now,
                },
                None => output::WhyOut {
                    container: r.container,
                    file: r.file,
                    value: r.value,
                    reason: r.reason,
                },
            }
        })
        .collect();
    // Files only the placement sets (cpusets).
    let mut placed_only = Vec::new();
    let owners = std::iter::once((None, &pod.evaluation.pod_cgroup_files)).chain(
        pod.evaluation
            .containers
            .iter()
            .map(|c| (Some(c.name.as_str()), &c.cgroup_files)),
    );
    for (container, files) in owners {
        for f in files {
            if !out
                .iter()
                .any(|w| w.container.as_deref() == container && w.file == f.file.to_string())
            {
                placed_only.push(output::WhyOut {
                    container: container.map(str::to_owned),
                    file: f.file.to_string(),
                    value: f.value.to_string(),
                    reason: "placed by the resource managers' admission (see `podpolicy admit`)"
                        .to_owned(),
                });
            }
        }
    }
    out.extend(placed_only);
    Ok(out)
}

/// Every pod's outcome, in input order, and the node-level cgroup values
/// over the pods that were evaluated (and admitted).
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluations {
    /// Per pod, in input order.
    pub pods: Vec<PodOutcome>,
    /// The node-level cgroups (`kubepods`, the QoS tiers, reserved cgroups).
    pub node: NodeCgroups,
}

impl Evaluations {
    /// Whether any pod was refused.
    pub fn any_rejected(&self) -> bool {
        self.pods.iter().any(|p| p.evaluated().is_none())
    }

    /// The display form (`explain`).
    pub fn report(&self, node_name: &str) -> output::Report {
        output::Report::new(
            self.pods.iter().map(PodOutcome::explanation).collect(),
            node_name,
            &self.node,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> Vec<CgroupFile> {
        pairs
            .iter()
            .map(|(file, value)| CgroupFile::parse(file, value).expect("a cgroup file"))
            .collect()
    }

    #[test]
    fn placement_files_replace_and_add_in_the_component_order() {
        let mut evaluated = files(&[("cpu.weight", "79"), ("cpu.max", "200000 100000")]);
        over(
            &mut evaluated,
            &files(&[("cpu.max", "max 100000"), ("cpuset.cpus", "2-3")]),
        );
        assert_eq!(
            evaluated,
            files(&[
                ("cpu.weight", "79"),
                ("cpu.max", "max 100000"),
                ("cpuset.cpus", "2-3")
            ])
        );
    }
}
