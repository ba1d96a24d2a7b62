//! Executing a resize plan against cgroup files, safely.
//!
//! The policy orders the steps; this module only carries them out, in order,
//! through a [`CgroupIo`] (the real cgroupfs, or a fake with injected
//! failures in tests). It stops at the first failed write, defers (never
//! OOM-kills) when a usage check finds memory above a lowered limit, skips
//! files that already hold their target value, and so converges when run
//! again after any interruption.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::bindings::{ResizePlan, ResizeStep, ResizeStepKind};

/// Reading and writing cgroup interface files.
pub trait CgroupIo {
    /// The current content of `file` in `cgroup` (trimmed), if it exists.
    fn read(&self, cgroup: &Path, file: &str) -> Result<Option<String>>;
    /// Write `value` to `file` in `cgroup`, whole.
    fn write(&mut self, cgroup: &Path, file: &str, value: &str) -> Result<()>;
}

/// How an execution ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every step is done (or was already done).
    Completed,
    /// A usage check found memory above the new limit: nothing after it ran.
    Deferred {
        /// Index of the check step.
        step: usize,
        /// memory.current in bytes.
        usage: u64,
        /// The new limit in bytes.
        limit: u64,
    },
    /// A write failed: nothing after it ran.
    Failed {
        /// Index of the failed step.
        step: usize,
        /// The error, with the file's path.
        error: String,
    },
}

/// What happened to each step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepReport {
    /// Files were written.
    Applied,
    /// Every file already held its target value.
    AlreadyApplied,
    /// A usage check that passed.
    Checked,
    /// An action for the container runtime (restart, cpuset re-allocation).
    RuntimeAction,
    /// Not reached because an earlier step stopped the run.
    NotRun,
}

/// The result of one execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Execution {
    /// Per step, in plan order.
    pub steps: Vec<StepReport>,
    /// How it ended.
    pub outcome: Outcome,
}

/// Where a step's files live: the pod cgroup or a container's.
pub fn step_cgroup(
    step: &ResizeStep,
    pod_dir: &Path,
    container_dir: &dyn Fn(&str) -> PathBuf,
) -> PathBuf {
    match &step.container {
        Some(name) => container_dir(name),
        None => pod_dir.to_path_buf(),
    }
}

/// Carry out `plan` in order.
pub fn execute(
    plan: &ResizePlan,
    pod_dir: &Path,
    container_dir: &dyn Fn(&str) -> PathBuf,
    io: &mut dyn CgroupIo,
) -> Execution {
    let mut reports = vec![StepReport::NotRun; plan.steps.len()];
    for (index, step) in plan.steps.iter().enumerate() {
        let cgroup = step_cgroup(step, pod_dir, container_dir);
        match step.kind {
            ResizeStepKind::WritePod | ResizeStepKind::WriteContainer => {
                let mut wrote = false;
                for file in &step.files {
                    let (name, value) = (file.file.to_string(), file.value.to_string());
                    let current = match io.read(&cgroup, &name) {
                        Ok(v) => v,
                        Err(e) => {
                            return stop(
                                reports,
                                Outcome::Failed {
                                    step: index,
                                    error: format!("{e:#}"),
                                },
                            );
                        }
                    };
                    if current.as_deref() == Some(value.as_str()) {
                        continue;
                    }
                    if let Err(e) = io.write(&cgroup, &name, &value) {
                        return stop(
                            reports,
                            Outcome::Failed {
                                step: index,
                                error: format!("{e:#}"),
                            },
                        );
                    }
                    wrote = true;
                }
                reports[index] = if wrote {
                    StepReport::Applied
                } else {
                    StepReport::AlreadyApplied
                };
            }
            ResizeStepKind::CheckMemoryUsage => {
                let limit = step.memory_limit_bytes.unwrap_or(u64::MAX);
                let usage = match io.read(&cgroup, "memory.current") {
                    Ok(Some(text)) => text.parse::<u64>().unwrap_or(0),
                    Ok(None) => 0,
                    Err(e) => {
                        return stop(
                            reports,
                            Outcome::Failed {
                                step: index,
                                error: format!("{e:#}"),
                            },
                        );
                    }
                };
                if usage > limit {
                    return stop(
                        reports,
                        Outcome::Deferred {
                            step: index,
                            usage,
                            limit,
                        },
                    );
                }
                reports[index] = StepReport::Checked;
            }
            ResizeStepKind::RestartContainer | ResizeStepKind::ReallocateCpus => {
                reports[index] = StepReport::RuntimeAction;
            }
        }
    }
    Execution {
        steps: reports,
        outcome: Outcome::Completed,
    }
}

fn stop(steps: Vec<StepReport>, outcome: Outcome) -> Execution {
    Execution { steps, outcome }
}

/// The real cgroup filesystem under a root directory: every read and
/// write goes through [`crate::cgroupfs`], resolved beneath the root, never
/// through a symlink. On a cgroup2 mount no file is created (the kernel's
/// files are there or the controller is off); a stand-in directory gets the
/// file, as `apply` creates them there.
pub struct FsIo {
    /// The cgroup root the pod's directories are below.
    pub root: crate::cgroupfs::CgroupRoot,
}

impl CgroupIo for FsIo {
    fn read(&self, cgroup: &Path, file: &str) -> Result<Option<String>> {
        crate::cgroupfs::read_file(&self.root, cgroup, file)
            .map(|text| text.map(|t| t.trim().to_string()))
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    fn write(&mut self, cgroup: &Path, file: &str, value: &str) -> Result<()> {
        crate::cgroupfs::validate_name("cgroup file name", file)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let create = self.root.kind() == crate::cgroupfs::RootKind::Directory;
        crate::cgroupfs::write_file(&self.root, &cgroup.join(file), value, create)
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
}
