//! The `testing` interface at the edge: `manager-operation`'s request
//! decoded into a [`ManagerOperation`] (with field paths), run by
//! [`crate::managers::Operations`], and its answer encoded.

use super::managers::{
    decode_config, decode_hint, decode_machine, decode_managed_pod, decode_provider_hints,
    decode_state, encode_assignment, encode_hint, encode_provider_hints, encode_state,
};
use super::{Result, decode_mask, encode_result, invalid, parse_cpuset};
use crate::cpu_manager::CpuSortingStrategy;
use crate::managers::{
    ManagedPod, ManagerOperation, OperationResponse, Operations, PodAllocation, TakeAlgorithm,
    TakeCpus,
};
use crate::topology as tm;
use crate::wit::{self, FieldError};

/// What a manager operation answers: the response, or the error the
/// upstream function returned.
pub type OperationResult = std::result::Result<wit::ManagerResponse, wit::ManagerError>;

fn ok_or_errors<T>(value: T, errors: Vec<FieldError>) -> Result<T> {
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

fn decode_pod(
    operations: &Operations,
    pod: &wit::Pod,
    errors: &mut Vec<FieldError>,
) -> Option<ManagedPod> {
    decode_managed_pod(pod, operations.gates())
        .map_err(|e| errors.extend(e))
        .ok()
}

fn check_container(pod: &ManagedPod, name: &str, errors: &mut Vec<FieldError>) {
    if !pod.has_container(name) {
        errors.push(invalid(
            "container",
            "not an init or app container of the pod",
            name,
        ));
    }
}

fn decode_take_cpus(
    operations: &Operations,
    request: &wit::TakeCpusRequest,
) -> Result<ManagerOperation> {
    let mut errors = Vec::new();
    let available = parse_cpuset(&request.available, "available", &mut errors);
    if !errors.is_empty() {
        // Bad input reports the missing CPUs too (the operation does when
        // the request decodes).
        if let Err(e) = operations.machine().cpu_topology() {
            errors.push(e.into());
        }
        return Err(errors);
    }
    Ok(ManagerOperation::TakeCpus(TakeCpus {
        algorithm: match request.algorithm {
            wit::TakeAlgorithm::NumaPacked => TakeAlgorithm::NumaPacked,
            wit::TakeAlgorithm::NumaDistributed => TakeAlgorithm::NumaDistributed,
        },
        available,
        num_cpus: request.num_cpus as usize,
        cpu_group_size: request.cpu_group_size as usize,
        sorting: match request.sorting {
            wit::CpuSortingStrategy::Packed => CpuSortingStrategy::Packed,
            wit::CpuSortingStrategy::Spread => CpuSortingStrategy::Spread,
        },
        prefer_align_by_uncore_cache: request.prefer_align_by_uncore_cache,
    }))
}

fn decode_pod_allocation(
    operations: &Operations,
    request: &wit::PodRequest,
) -> Result<PodAllocation> {
    let mut errors = Vec::new();
    let state = decode_state(&request.state, "state", &mut errors);
    let hint = decode_hint(&request.hint, "hint", &mut errors);
    let pod = decode_pod(operations, &request.pod, &mut errors);
    let (Some(pod), true) = (pod, errors.is_empty()) else {
        return Err(errors);
    };
    Ok(PodAllocation {
        manager: request.manager.into(),
        state,
        pod,
        hint,
    })
}

/// Decode a `manager-request` (field paths as the request names them:
/// `state...`, `pod` fields, `hint`, `container`, `available`, ...).
pub fn decode_operation(
    operations: &Operations,
    request: &wit::ManagerRequest,
) -> Result<ManagerOperation> {
    let mut errors = Vec::new();
    match request {
        wit::ManagerRequest::Start(state) => {
            let state = decode_state(state, "state", &mut errors);
            ok_or_errors(ManagerOperation::Start(state), errors)
        }
        wit::ManagerRequest::TopologyMerge(providers) => {
            let hints: Vec<tm::ProviderHints> = providers
                .iter()
                .enumerate()
                .map(|(i, p)| decode_provider_hints(p, &format!("providers[{i}]"), &mut errors))
                .collect();
            ok_or_errors(ManagerOperation::TopologyMerge(hints), errors)
        }
        wit::ManagerRequest::TakeCpus(r) => decode_take_cpus(operations, r),
        wit::ManagerRequest::AllocateCpus(r) => {
            let state = decode_state(&r.state, "state", &mut errors);
            let reusable = parse_cpuset(&r.reusable, "reusable", &mut errors);
            let numa_affinity = r
                .numa_affinity
                .as_ref()
                .map(|ids| decode_mask(ids, "numaAffinity", &mut errors));
            ok_or_errors(
                ManagerOperation::AllocateCpus {
                    state,
                    num_cpus: r.num_cpus as usize,
                    numa_affinity,
                    reusable,
                },
                errors,
            )
        }
        wit::ManagerRequest::TopologyHints(r) => {
            let state = decode_state(&r.state, "state", &mut errors);
            let pod = decode_pod(operations, &r.pod, &mut errors);
            if let (Some(pod), Some(name)) = (&pod, &r.container) {
                check_container(pod, name, &mut errors);
            }
            let (Some(pod), true) = (pod, errors.is_empty()) else {
                return Err(errors);
            };
            Ok(ManagerOperation::TopologyHints {
                manager: r.manager.into(),
                state,
                pod,
                container: r.container.clone(),
            })
        }
        wit::ManagerRequest::Allocate(r) => {
            let state = decode_state(&r.state, "state", &mut errors);
            let hint = decode_hint(&r.hint, "hint", &mut errors);
            let pod = decode_pod(operations, &r.pod, &mut errors);
            if let Some(pod) = &pod {
                check_container(pod, &r.container, &mut errors);
            }
            let (Some(pod), true) = (pod, errors.is_empty()) else {
                return Err(errors);
            };
            Ok(ManagerOperation::Allocate {
                manager: r.manager.into(),
                state,
                pod,
                container: r.container.clone(),
                hint,
            })
        }
        wit::ManagerRequest::AllocatePod(r) => {
            decode_pod_allocation(operations, r).map(ManagerOperation::AllocatePod)
        }
        wit::ManagerRequest::AllocateContainers(r) => {
            decode_pod_allocation(operations, r).map(ManagerOperation::AllocateContainers)
        }
        wit::ManagerRequest::RemoveContainer(r) => {
            let state = decode_state(&r.state, "state", &mut errors);
            ok_or_errors(
                ManagerOperation::RemoveContainer {
                    manager: r.manager.into(),
                    state,
                    pod_uid: r.pod_uid.clone(),
                    container: r.container.clone(),
                },
                errors,
            )
        }
        wit::ManagerRequest::PodRequested(r) => {
            let Some(pod) = decode_pod(operations, &r.pod, &mut errors) else {
                return Err(errors);
            };
            Ok(ManagerOperation::PodRequested {
                manager: r.manager.into(),
                pod,
            })
        }
    }
}

/// An operation's response as the WIT `manager-response`.
pub fn encode_response(response: OperationResponse) -> wit::ManagerResponse {
    match response {
        OperationResponse::State(state) => wit::ManagerResponse::State(encode_state(&state)),
        OperationResponse::Merged { hint, admit } => {
            wit::ManagerResponse::Merged(wit::MergedHint {
                hint: encode_hint(&hint),
                admit,
            })
        }
        OperationResponse::Cpus(cpus) => wit::ManagerResponse::Cpus(cpus.to_string()),
        OperationResponse::CpusAllocated { cpus, state } => {
            wit::ManagerResponse::CpusAllocated(wit::CpusAllocation {
                cpus: cpus.to_string(),
                state: encode_state(&state),
            })
        }
        OperationResponse::Hints(hints) => {
            wit::ManagerResponse::Hints(encode_provider_hints(&hints))
        }
        OperationResponse::Allocated { assignment, state } => {
            wit::ManagerResponse::Allocated(wit::Allocation {
                assignment: encode_assignment(assignment),
                state: encode_state(&state),
            })
        }
        OperationResponse::Requested(requested) => wit::ManagerResponse::Requested(
            requested
                .into_iter()
                .map(|(resource_name, amount)| wit::RequestedResource {
                    resource_name,
                    amount,
                })
                .collect(),
        ),
    }
}

/// Export `manager-operation`: one upstream manager function on explicit inputs.
pub fn manager_operation(
    request: &wit::ManagerRequest,
    topology: &wit::NodeTopology,
    node: &wit::NodeSettings,
) -> Result<OperationResult> {
    let mut errors = Vec::new();
    let cfg = decode_config(node).map_err(|e| errors.extend(e)).ok();
    let machine = decode_machine(topology, &mut errors);
    let (Some(cfg), true) = (cfg, errors.is_empty()) else {
        return Err(errors);
    };
    let operations = Operations::new(cfg, machine);
    let operation = decode_operation(&operations, request)?;
    let outcome = encode_result(operations.run(operation))?;
    Ok(outcome
        .map(encode_response)
        .map_err(wit::ManagerError::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::test_support::{empty_state, node, topology};

    #[test]
    fn operations_report_upstream_errors() {
        // NewStaticPolicy refuses a reserved set of the wrong size.
        let mut settings = node("pod");
        settings.reserved_system_cpus = Some("0-1".into());
        let out = manager_operation(
            &wit::ManagerRequest::Start(empty_state()),
            &topology(),
            &settings,
        )
        .unwrap();
        let err = out.unwrap_err();
        assert_eq!(err.kind, wit::ManagerErrorKind::Configuration);
        assert_eq!(err.function, "NewStaticPolicy");
        assert_eq!(
            err.message,
            "[cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 1)"
        );
        // takeByTopology on too few CPUs.
        let take = wit::ManagerRequest::TakeCpus(wit::TakeCpusRequest {
            algorithm: wit::TakeAlgorithm::NumaPacked,
            available: "0-1".into(),
            num_cpus: 3,
            cpu_group_size: 1,
            sorting: wit::CpuSortingStrategy::Packed,
            prefer_align_by_uncore_cache: false,
        });
        let err = manager_operation(&take, &topology(), &node("pod"))
            .unwrap()
            .unwrap_err();
        assert_eq!(
            err.message,
            "not enough cpus available to satisfy request: requested=3, available=2"
        );
        // Bad input stays a field error.
        let mut no_cpus = topology();
        no_cpus.cpus.clear();
        let errors = manager_operation(&take, &no_cpus, &node("pod")).unwrap_err();
        assert_eq!(errors[0].field, "topology.cpus");
    }
}
