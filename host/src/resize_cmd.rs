//! `podpolicy resize OLD NEW`: the component's decision and plan for an
//! in-place resize, and with `--apply` its execution against cgroup files.

use crate::bindings::KubeletName as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};

use crate::bindings::{
    NodeSettings, Pod, ResizeDecision, ResizeDirection, ResizePlan, ResizeStepKind,
    ResourceQuantity,
};
use crate::cgroupfs;
use crate::format_field_errors;
use crate::resize_exec::{Execution, FsIo, Outcome, StepReport, execute};
use crate::runtime::PolicyRuntime;

/// What `resize` did.
pub struct ResizeReport {
    /// The plan from the component.
    pub plan: ResizePlan,
    /// The execution, with `--apply`.
    pub execution: Option<Execution>,
}

fn decision_name(d: ResizeDecision) -> &'static str {
    match d {
        ResizeDecision::Accepted => "Accepted",
        ResizeDecision::Deferred => "Deferred",
        ResizeDecision::Infeasible => "Infeasible",
        ResizeDecision::Invalid => "Invalid",
    }
}

/// What happened to a step when the plan was carried out.
fn status_name(step: &StepReport) -> &'static str {
    match step {
        StepReport::Applied => "applied",
        StepReport::AlreadyApplied => "already-applied",
        StepReport::Checked => "checked",
        StepReport::RuntimeAction => "runtime-action",
        StepReport::NotRun => "not-run",
    }
}

/// The direction of a step: `Increase`, `Decrease`, `Unchanged`.
fn direction_name(d: ResizeDirection) -> &'static str {
    match d {
        ResizeDirection::Increase => "Increase",
        ResizeDirection::Decrease => "Decrease",
        ResizeDirection::Unchanged => "Unchanged",
    }
}

fn kind_name(k: ResizeStepKind) -> &'static str {
    match k {
        ResizeStepKind::WritePod => "write-pod",
        ResizeStepKind::WriteContainer => "write-container",
        ResizeStepKind::CheckMemoryUsage => "check-memory-usage",
        ResizeStepKind::RestartContainer => "restart-container",
        ResizeStepKind::ReallocateCpus => "reallocate-cpus",
    }
}

/// Plan (and with `cgroup_root`, apply) the resize from `current` to `desired`.
pub fn resize(
    policy: &PolicyRuntime,
    current: &Pod,
    desired: &Pod,
    others: &[ResourceQuantity],
    node: &NodeSettings,
    cgroup_root: Option<&Path>,
) -> Result<ResizeReport> {
    if current.uid != desired.uid {
        bail!(
            "the two pods differ in metadata.uid (`{}` vs `{}`): a resize changes one pod",
            current.uid,
            desired.uid
        );
    }
    let plan = match policy.resize_plan(current, desired, others, node)? {
        Ok(plan) => plan,
        Err(errors) => bail!(
            "the pods cannot be planned:\n{}",
            format_field_errors(&errors)
        ),
    };
    let execution = match cgroup_root {
        Some(root) if plan.decision == ResizeDecision::Accepted => {
            let root = cgroupfs::CgroupRoot::open(root).map_err(|e| anyhow!("{e}"))?;
            let pod_path = cgroupfs::pod(node.cgroup_driver, plan.qos_class, &current.uid)
                .map_err(|e| anyhow!("{e}"))?;
            let pod_dir = pod_path.dir_in(root.dir());
            // Validate every container name before touching anything.
            let mut container_dirs = Vec::new();
            for step in &plan.steps {
                if let Some(name) = &step.container {
                    let path = cgroupfs::container(&pod_path, "container", name)
                        .map_err(|e| anyhow!("{e}"))?;
                    container_dirs.push((name.clone(), path.dir_in(root.dir())));
                }
            }
            let lookup = move |name: &str| -> PathBuf {
                container_dirs
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, d)| d.clone())
                    .unwrap_or_default()
            };
            Some(execute(&plan, &pod_dir, &lookup, &mut FsIo { root }))
        }
        _ => None,
    };
    Ok(ResizeReport { plan, execution })
}

impl ResizeReport {
    /// The exit status: 0 done (or planned), 1 not accepted or deferred, 2 a failed write.
    pub fn exit_code(&self) -> u8 {
        match (&self.plan.decision, &self.execution) {
            (ResizeDecision::Accepted, None) => 0,
            (ResizeDecision::Accepted, Some(e)) => match e.outcome {
                Outcome::Completed => 0,
                Outcome::Deferred { .. } => 1,
                Outcome::Failed { .. } => 2,
            },
            _ => 1,
        }
    }

    /// JSON output.
    pub fn to_json(&self) -> Value {
        let steps: Vec<Value> = self
            .plan
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let status = self.execution.as_ref().map(|e| status_name(&e.steps[i]));
                json!({
                    "kind": kind_name(s.kind),
                    "container": s.container,
                    "resource": s.resource.kubelet_name(),
                    "direction": direction_name(s.direction),
                    "files": s.files.iter().map(|f| (f.file.to_string(), Value::String(f.value.to_string()))).collect::<serde_json::Map<_, _>>(),
                    "memoryLimitBytes": s.memory_limit_bytes,
                    "cpus": s.cpus,
                    "status": status,
                })
            })
            .collect();
        let outcome = self.execution.as_ref().map(|e| match &e.outcome {
            Outcome::Completed => json!({"result": "completed"}),
            Outcome::Deferred { step, usage, limit } => {
                json!({"result": "deferred", "step": step, "memoryCurrent": usage, "newLimit": limit})
            }
            Outcome::Failed { step, error } => json!({"result": "failed", "step": step, "error": error}),
        });
        json!({
            "decision": decision_name(self.plan.decision),
            "message": self.plan.message,
            "errors": self.plan.errors.iter().map(crate::output::ErrorOut::from).collect::<Vec<_>>(),
            "steps": steps,
            "execution": outcome,
        })
    }

    /// Table output.
    pub fn to_table(&self) -> String {
        let mut out = format!("decision  {}\n", decision_name(self.plan.decision));
        if !self.plan.message.is_empty() {
            out.push_str(&format!("reason    {}\n", self.plan.message));
        }
        for (i, s) in self.plan.steps.iter().enumerate() {
            let target = s
                .container
                .as_deref()
                .map_or_else(|| "pod".to_string(), |c| format!("container {c}"));
            let files = s
                .files
                .iter()
                .map(|f| {
                    format!(
                        "{}={}",
                        f.file,
                        crate::output::table_value(&f.file.to_string(), &f.value.to_string())
                    )
                })
                .collect::<Vec<_>>()
                .join(" ");
            let extra = match (s.memory_limit_bytes, s.cpus) {
                (Some(limit), _) => format!(
                    "memory.current <= {limit} ({})",
                    crate::output::human_bytes(limit)
                ),
                (_, Some(cpus)) => format!("{cpus} exclusive CPUs"),
                _ => files,
            };
            let status = self.execution.as_ref().map_or(String::new(), |e| {
                format!("  [{}]", status_name(&e.steps[i]))
            });
            out.push_str(&format!(
                "{:>3}. {:<18} {:<22} {:<6} {extra}{status}\n",
                i + 1,
                kind_name(s.kind),
                target,
                s.resource.kubelet_name()
            ));
        }
        if let Some(e) = &self.execution {
            out.push_str(&match &e.outcome {
                Outcome::Completed => "result    completed\n".to_string(),
                Outcome::Deferred { step, usage, limit } => format!(
                    "result    deferred at step {}: memory.current {usage} is above the new limit {limit}; nothing after it was written\n",
                    step + 1
                ),
                Outcome::Failed { step, error } => format!("result    failed at step {}: {error}; steps before it are applied, run again to converge\n", step + 1),
            });
        }
        out
    }
}
