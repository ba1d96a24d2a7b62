//! Errors and refusals: field errors ([`FieldError`]), the start-up error
//! of a configuration or state (`ConfigError`), the [`ManagerError`] of
//! each upstream error type, and the one-line `rule` saying why a manager
//! refused a pod.
//!
//! Mirrors upstream's admission errors: `topologymanager`'s
//! `TopologyAffinityError` (`topology_manager.go`), `cpumanager`'s
//! `SMTAlignmentError` (`policy_static.go`), KEP-5526's
//! `EmptyPodSharedPoolError`, and `pkg/kubelet/cm/admission/errors.go`
//! (`UnexpectedAdmissionError`, whose message wraps any other error, and
//! the admission reason of each type). Upstream's messages keep only some
//! of a check's inputs; the refusal lines add the rest, since a refused pod
//! is explained from them alone.

use crate::cpu_manager::{
    ContainerKind as CpuContainerKind, CpuManagerError, PodSpec, SmtAlignmentError, StaticPolicy,
};
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, MemoryError, MemoryPod, PodLevelGates};
use crate::topology as tm;

// The policy's one field error; the managers report theirs with it.
pub use crate::field_error::{FieldError, FieldErrorType};

/// A configuration (or state) the managers cannot start with.
#[derive(Clone, Debug)]
pub(crate) struct ConfigError {
    function: &'static str,
    field: String,
    message: String,
}

impl ConfigError {
    pub(crate) fn new(
        function: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            function,
            field: field.into(),
            message: message.into(),
        }
    }

    /// The error as a field error at the configuration field it names.
    pub(crate) fn field_error(self) -> FieldError {
        FieldError::new(self.field, FieldErrorType::Invalid, self.message, None)
    }

    /// The error as the `Configuration` error of the function that refused.
    pub(crate) fn manager_error(self) -> ManagerError {
        ManagerError {
            kind: ManagerErrorKind::Configuration,
            message: self.message,
            function: self.function.to_string(),
        }
    }
}

/// Which upstream error type a manager error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManagerErrorKind {
    /// The configuration or state cannot be started with (no admission result).
    Configuration,
    /// `TopologyAffinityError`: the topology policy refused the merged hint.
    TopologyAffinity,
    /// `SMTAlignmentError`, with upstream's data.
    SmtAlignment(SmtAlignmentError),
    /// KEP-5526's `EmptyPodSharedPoolError`.
    EmptyPodSharedPool,
    /// `UnexpectedAdmissionError`: any other error.
    UnexpectedAdmission,
}

impl ManagerErrorKind {
    /// The admission reason the kubelet reports in the pod status for this
    /// kind (upstream's error type name); `""` for configuration errors,
    /// which are no admission result.
    pub fn reason(&self) -> &'static str {
        match self {
            ManagerErrorKind::Configuration => "",
            ManagerErrorKind::TopologyAffinity => tm::ERROR_TOPOLOGY_AFFINITY,
            ManagerErrorKind::SmtAlignment(_) => {
                crate::cpu_manager::policy_static::ERROR_SMT_ALIGNMENT
            }
            ManagerErrorKind::EmptyPodSharedPool => mm::ERROR_EMPTY_POD_SHARED_POOL,
            ManagerErrorKind::UnexpectedAdmission => mm::ERROR_UNEXPECTED_ADMISSION,
        }
    }
}

/// An error an upstream manager function returned: its type, upstream's
/// message, and the function that returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerError {
    /// The upstream error type.
    pub kind: ManagerErrorKind,
    /// Upstream's message.
    pub message: String,
    /// The upstream function (`Admit`, `Allocate`, `NewStaticPolicy`, ...).
    pub function: String,
}

pub(super) fn manager_error(
    kind: ManagerErrorKind,
    message: String,
    function: &str,
) -> ManagerError {
    ManagerError {
        kind,
        message,
        function: function.to_string(),
    }
}

/// An error without an admission type of its own: `UnexpectedAdmissionError`,
/// whose admission message wraps the error text.
pub(super) fn unexpected(message: String, function: &str, admission: bool) -> ManagerError {
    let message = if admission {
        format!("Allocate failed due to {message}, which is unexpected")
    } else {
        message
    };
    manager_error(ManagerErrorKind::UnexpectedAdmission, message, function)
}

pub(super) fn cpu_error(err: &CpuManagerError, function: &str, admission: bool) -> ManagerError {
    let kind = match err {
        CpuManagerError::SmtAlignment(smt) => ManagerErrorKind::SmtAlignment(*smt),
        CpuManagerError::EmptyPodSharedPool { .. } => ManagerErrorKind::EmptyPodSharedPool,
        _ => return unexpected(err.to_string(), function, admission),
    };
    manager_error(kind, err.to_string(), function)
}

pub(super) fn memory_error(err: &MemoryError, function: &str, admission: bool) -> ManagerError {
    match err {
        MemoryError::EmptyPodSharedPool(_) => manager_error(
            ManagerErrorKind::EmptyPodSharedPool,
            err.to_string(),
            function,
        ),
        _ => unexpected(err.to_string(), function, admission),
    }
}

/// Why the static CPU policy refused `call`, in one line with the inputs of
/// the check that failed (upstream's message keeps only some of them).
pub(super) fn cpu_refusal(
    err: &CpuManagerError,
    call: &str,
    policy: &StaticPolicy,
    pod: &PodSpec,
    gates: &FeatureGates,
) -> String {
    let head = format!("CPU manager static, {call}");
    match err {
        CpuManagerError::SmtAlignment(smt) if smt.caused_by_physical_cpus => format!(
            "{head}: full-pcpus-only: {} CPUs requested, but only {} CPUs are free on whole physical cores outside the reserved ones ({} CPUs per core); full-pcpus-only hands out exclusive CPUs only as whole cores",
            smt.requested_cpus, smt.available_physical_cpus, smt.cpus_per_core
        ),
        CpuManagerError::SmtAlignment(smt) => format!(
            "{head}: full-pcpus-only: {} CPUs requested is not a multiple of the {} CPUs per physical core; full-pcpus-only hands out exclusive CPUs only as whole cores",
            smt.requested_cpus, smt.cpus_per_core
        ),
        CpuManagerError::EmptyPodSharedPool { message } => {
            let budget = policy.pod_guaranteed_cpus(pod, gates);
            let containers: Vec<String> = pod
                .all_containers()
                .map(|c| {
                    let init = if c.kind == CpuContainerKind::Init {
                        " (init, runs before the others)"
                    } else {
                        ""
                    };
                    match policy.guaranteed_cpus(pod, c, gates) {
                        0 => format!("{} pod shared pool{init}", c.name),
                        n => format!("{} {n} exclusive{init}", c.name),
                    }
                })
                .collect();
            format!(
                "{head}: {message}: pod cpu budget {budget} CPUs; containers: {}; KEP-5526 refuses a pod whose containers without exclusive CPUs would find its pod shared pool empty",
                containers.join(", ")
            )
        }
        other => format!("{head}: {other}"),
    }
}

/// Why the Static memory policy refused `call`, in one line with its inputs.
pub(super) fn memory_refusal(
    err: &MemoryError,
    call: &str,
    pod: &MemoryPod,
    gates: PodLevelGates,
) -> String {
    let head = format!("memory manager Static, {call}");
    match err {
        MemoryError::EmptyPodSharedPool(scope) => {
            let budget: Vec<String> = mm::get_pod_requested_resources(gates, pod)
                .iter()
                .map(|(resource, bytes)| format!("{resource} {bytes}"))
                .collect();
            format!(
                "{head}: {scope}: pod budget (bytes) {}; KEP-5526 refuses a pod whose containers without exclusive memory would find its pod shared pool empty",
                if budget.is_empty() {
                    "none".to_string()
                } else {
                    budget.join(", ")
                }
            )
        }
        other => format!("{head}: {other}"),
    }
}
