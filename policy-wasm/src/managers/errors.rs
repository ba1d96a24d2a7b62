//! Errors and refusals: the start-up error of a configuration or state
//! (`ConfigError`), the WIT `manager-error` of each upstream error type,
//! and the one-line `rule` saying why a manager refused a pod.
//!
//! Mirrors upstream's admission errors: `topologymanager`'s
//! `TopologyAffinityError` (`topology_manager.go`), `cpumanager`'s
//! `SMTAlignmentError` (`policy_static.go`), KEP-5526's
//! `EmptyPodSharedPoolError`, and `pkg/kubelet/cm/admission/errors.go`
//! (`UnexpectedAdmissionError`, whose message wraps any other error, and
//! the admission reason of each type). Upstream's messages keep only some
//! of a check's inputs; the refusal lines add the rest, since a refused pod
//! is explained from them alone.

use super::decode::field_error;
use crate::cpu_manager::{
    ContainerKind as CpuContainerKind, CpuManagerError, PodSpec, StaticPolicy,
};
use crate::features::FeatureGates;
use crate::memory_manager::{self as mm, MemoryError, MemoryPod, PodLevelGates};
use crate::topology as tm;
use crate::wit::{self, ErrorReason, FieldError};

/// A configuration (or state) the managers cannot start with.
#[derive(Clone, Debug)]
pub(super) struct ConfigError {
    function: &'static str,
    field: String,
    message: String,
}

impl ConfigError {
    pub(super) fn new(
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

    pub(super) fn field_error(self) -> FieldError {
        field_error(self.field, ErrorReason::Invalid, self.message, None)
    }

    pub(super) fn manager_error(self) -> wit::ManagerError {
        wit::ManagerError {
            kind: wit::ManagerErrorKind::Configuration,
            message: self.message,
            function: self.function.to_string(),
        }
    }
}

impl wit::ManagerErrorKind {
    /// The admission reason the kubelet reports in the pod status for this
    /// kind (upstream's error type name); `""` for configuration errors,
    /// which are no admission result.
    pub fn reason(&self) -> &'static str {
        match self {
            wit::ManagerErrorKind::Configuration => "",
            wit::ManagerErrorKind::TopologyAffinity => tm::ERROR_TOPOLOGY_AFFINITY,
            wit::ManagerErrorKind::SmtAlignment(_) => {
                crate::cpu_manager::policy_static::ERROR_SMT_ALIGNMENT
            }
            wit::ManagerErrorKind::EmptyPodSharedPool => mm::ERROR_EMPTY_POD_SHARED_POOL,
            wit::ManagerErrorKind::UnexpectedAdmission => mm::ERROR_UNEXPECTED_ADMISSION,
        }
    }
}

pub(super) fn manager_error(
    kind: wit::ManagerErrorKind,
    message: String,
    function: &str,
) -> wit::ManagerError {
    wit::ManagerError {
        kind,
        message,
        function: function.to_string(),
    }
}

/// An error without an admission type of its own: `UnexpectedAdmissionError`,
/// whose admission message wraps the error text.
pub(super) fn unexpected(message: String, function: &str, admission: bool) -> wit::ManagerError {
    let message = if admission {
        format!("Allocate failed due to {message}, which is unexpected")
    } else {
        message
    };
    manager_error(
        wit::ManagerErrorKind::UnexpectedAdmission,
        message,
        function,
    )
}

pub(super) fn cpu_error(
    err: &CpuManagerError,
    function: &str,
    admission: bool,
) -> wit::ManagerError {
    // Counts beyond u32 cannot come from a topology the component accepts.
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let kind = match err {
        CpuManagerError::SmtAlignment(smt) => {
            wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                requested_cpus: count(smt.requested_cpus),
                cpus_per_core: count(smt.cpus_per_core),
                available_physical_cpus: count(smt.available_physical_cpus),
                caused_by_physical_cpus: smt.caused_by_physical_cpus,
            })
        }
        CpuManagerError::EmptyPodSharedPool { .. } => wit::ManagerErrorKind::EmptyPodSharedPool,
        _ => return unexpected(err.to_string(), function, admission),
    };
    manager_error(kind, err.to_string(), function)
}

pub(super) fn memory_error(
    err: &MemoryError,
    function: &str,
    admission: bool,
) -> wit::ManagerError {
    match err {
        MemoryError::EmptyPodSharedPool(_) => manager_error(
            wit::ManagerErrorKind::EmptyPodSharedPool,
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

#[cfg(test)]
mod tests {
    use crate::managers::admit;
    use crate::managers::test_support::{
        container, empty_state, guaranteed, node, pod, topology, with_options,
    };
    use crate::wit;

    /// `full-pcpus-only` with 2 threads per core: an odd request is refused
    /// by the CPU manager after the topology manager admitted its hint, and
    /// the rule gives the numbers of the check.
    #[test]
    fn smt_alignment_rule_has_the_requested_and_per_core_cpus() {
        let node = with_options(
            node("container"),
            "best-effort",
            &[("full-pcpus-only", "true")],
        );
        let p = pod("p", None, vec![container("odd", guaranteed("3", "1Gi"))]);
        let a = admit(&p, &topology(), &empty_state(), &node).unwrap();
        let rejection = a.rejection.expect("rejected");
        // Upstream's SMTAlignmentError fields cross as data.
        assert_eq!(
            rejection.kind,
            wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                requested_cpus: 3,
                cpus_per_core: 2,
                available_physical_cpus: 0,
                caused_by_physical_cpus: false,
            })
        );
        assert_eq!(rejection.kind.reason(), "SMTAlignmentError");
        assert_eq!(
            a.rule,
            "CPU manager static, Allocate (container odd): full-pcpus-only: 3 CPUs requested is not a multiple of the 2 CPUs per physical core; full-pcpus-only hands out exclusive CPUs only as whole cores"
        );
        // The topology decision itself admitted.
        assert!(a.topology[0].admit);
        assert!(
            a.topology[0]
                .rule
                .starts_with("best-effort (container scope): merged hint ")
        );

        // 10 CPUs on whole cores: 12 minus the reserved CPU 0's core (0 and
        // its sibling 6) leaves 10 free; 12 asked is too many.
        let big = pod("big", None, vec![container("big", guaranteed("12", "1Gi"))]);
        let a = admit(&big, &topology(), &empty_state(), &node).unwrap();
        assert_eq!(
            a.rejection.expect("rejected").kind,
            wit::ManagerErrorKind::SmtAlignment(wit::SmtAlignmentError {
                requested_cpus: 12,
                cpus_per_core: 2,
                available_physical_cpus: 10,
                caused_by_physical_cpus: true,
            })
        );
        assert_eq!(
            a.rule,
            "CPU manager static, Allocate (container big): full-pcpus-only: 12 CPUs requested, but only 10 CPUs are free on whole physical cores outside the reserved ones (2 CPUs per core); full-pcpus-only hands out exclusive CPUs only as whole cores"
        );
    }

    /// KEP-5526's example 3: 5 pod CPUs, exclusive 3 + 2, one container
    /// left for the empty pod shared pool.
    #[test]
    fn empty_pod_shared_pool_rule_has_the_budget_and_each_container() {
        let node = with_options(node("pod"), "best-effort", &[]);
        let p = pod(
            "p",
            guaranteed("5", "5Gi"),
            vec![
                container("container-1", guaranteed("3", "3Gi")),
                container("container-2", guaranteed("2", "2Gi")),
                container("container-3", None),
            ],
        );
        let a = admit(&p, &topology(), &empty_state(), &node).unwrap();
        assert_eq!(
            a.rejection.expect("rejected").kind,
            wit::ManagerErrorKind::EmptyPodSharedPool
        );
        assert_eq!(
            a.rule,
            "CPU manager static, AllocatePod (pod scope, KEP-5526 pod-level resources): pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers: pod cpu budget 5 CPUs; containers: container-1 3 exclusive, container-2 2 exclusive, container-3 pod shared pool; KEP-5526 refuses a pod whose containers without exclusive CPUs would find its pod shared pool empty"
        );
    }
}
