//! What each fuzz target checks, as plain functions: the targets call them,
//! and the tests below run them over the seeds and random bytes without
//! libFuzzer.

use std::sync::{Arc, OnceLock};

use podpolicy::runtime::{Cache, Limits, PolicyRuntime, PreparedPolicy};
use policy_wasm::evaluate;
use policy_wasm::quantity::{Format, Quantity};

use crate::alloc::AllocCase;
use crate::{Case, DiffCase, is_budget_exhausted, native, render, to_native};

/// `quantity`: any text either parses or fails with a short error, and a
/// parsed value survives its canonical string unchanged.
pub fn quantity(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Quantity::parse(text) {
        Ok(quantity) => check_round_trip(text, quantity),
        Err(error) => {
            // Errors echo at most ~40 characters of the input (control
            // characters escaped, up to 6 characters each), whatever its length.
            let message = error.to_string();
            assert!(message.chars().count() <= 1024, "{text:?}: {message}");
        }
    }
}

fn check_round_trip(text: &str, quantity: Quantity) {
    let canonical = quantity.to_canonical_string();
    let again = Quantity::parse(&canonical)
        .unwrap_or_else(|e| panic!("{text:?} -> {canonical:?} does not parse: {e}"));
    assert_eq!(again.nanos(), quantity.nanos(), "{text:?} -> {canonical:?}");
    let reprinted = again.to_canonical_string();
    if quantity.format() == Format::BinarySI && again.format() == Format::DecimalSI {
        // A BinarySI value printed without a binary suffix re-parses as
        // DecimalSI and may print differently once; that text is then fixed.
        let third = Quantity::parse(&reprinted).expect("a canonical string parses");
        assert_eq!(third.nanos(), quantity.nanos(), "{text:?} -> {reprinted:?}");
        assert_eq!(third.to_canonical_string(), reprinted, "{text:?}");
    } else {
        assert_eq!(reprinted, canonical, "{text:?}");
    }
    // Derived values and arithmetic never panic, and agree with the nanos.
    let nanos = quantity.nanos();
    assert_eq!(
        i128::from(quantity.value()),
        div_ceil(nanos, 1_000_000_000),
        "{text:?}: value"
    );
    if let Some(milli) = quantity.checked_milli_value() {
        assert_eq!(
            i128::from(milli),
            div_ceil(nanos, 1_000_000),
            "{text:?}: milli"
        );
        assert_eq!(quantity.milli_value(), milli);
    }
    let rounded = quantity.round_up_to_milli();
    assert!(
        rounded.nanos().abs() >= nanos.abs(),
        "{text:?}: rounding shrank"
    );
    assert_eq!(rounded.nanos() % 1_000_000, 0, "{text:?}: not whole millis");
    let rounded_again =
        Quantity::parse(&rounded.to_canonical_string()).expect("a rounded canonical string parses");
    assert_eq!(rounded_again.nanos(), rounded.nanos(), "{text:?}: rounded");
    let _ = quantity.checked_add(again);
    let _ = quantity.checked_sub(again);
    let _ = quantity.saturating_add(again);
    assert_eq!(quantity.saturating_sub(again).nanos(), 0);
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && (a > 0) == (b > 0) {
        q + 1
    } else {
        q
    }
}

/// `evaluate_native`: validation, defaulting and evaluation never panic,
/// and a pod the policy accepts is defaulted and evaluated without errors.
pub fn evaluate_native(case: &Case) {
    let pod: native::Pod = to_native(&case.pod);
    let node: native::NodeSettings = to_native(&case.node);
    let options: native::PodResourcesOptions = to_native(&case.options);

    let node_errors = evaluate::validate_node(&node);
    let errors = evaluate::validate_pod(&pod, &node);
    let defaulted = evaluate::default_pod(&pod, &node);
    let _ = evaluate::evaluate(&pod, &node);
    let _ = evaluate::effective_resources(&pod, &options, &node);
    let _ = evaluate::qos_class(&pod, &node);
    let _ = evaluate::pod_resource_config(&pod, &node);
    let _ = evaluate::oom_score_adjust(&pod, &node);
    let _ = evaluate::node_cgroups(std::slice::from_ref(&pod), &node);
    let (request, limit) = case.memory_high;
    let _ =
        evaluate::container_memory_high(request, limit, to_native(&case.memory_high_qos), &node);
    let _ = evaluate::resize_plan(
        &pod,
        &to_native(&case.desired_pod()),
        &to_native(&case.resize_others),
        &node,
    );

    if node_errors.is_empty() && errors.is_empty() {
        let defaulted = defaulted.unwrap_or_else(|e| panic!("a valid pod fails defaulting: {e:?}"));
        let evaluated = evaluate::evaluate(&defaulted.pod, &node);
        let has_memory = case.node.capacity.iter().any(|q| {
            q.name == "memory" && Quantity::parse(&q.quantity).is_ok_and(|q| q.value() > 0)
        });
        if has_memory {
            evaluated.unwrap_or_else(|e| panic!("a valid pod fails evaluation: {e:?}"));
        }
    }
}

/// The component, compiled once per process; a fresh instance per call.
/// With fuel metering on (the host's default is the epoch deadline alone),
/// so a budget error is the same on every replay of a finding.
fn runtime() -> &'static Arc<PolicyRuntime> {
    static RUNTIME: OnceLock<Arc<PolicyRuntime>> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let limits = Limits {
            fuel: Some(2_000_000_000),
            ..Limits::default()
        };
        Arc::new(PolicyRuntime::embedded(&Cache::Off, limits).expect("the embedded policy loads"))
    })
}

/// Compare one export's answers; `None` when the component ran out of budget.
pub(crate) fn same<C: std::fmt::Debug, N: std::fmt::Debug>(
    what: &str,
    component: anyhow::Result<C>,
    native: N,
) -> Option<C> {
    let component = match component {
        Ok(value) => value,
        Err(e) if is_budget_exhausted(&format!("{e:#}")) => return None,
        Err(e) => panic!("{what}: the component failed: {e:#}"),
    };
    let (c, n) = (render(&component), render(&native));
    assert!(c == n, "{what} differs\ncomponent: {c}\nnative:    {n}");
    Some(component)
}

/// `allocation`: topology + admission + release sequences natively, with
/// the invariants of [`crate::sequence`] after every step.
pub fn allocation(case: &AllocCase) {
    crate::sequence::allocation(case);
}

/// `differential`: [`differential`] on the pod case, then the manager
/// sequence through the component and natively ([`crate::sequence::differential`]).
pub fn differential_all(input: &DiffCase) {
    differential(&input.case);
    crate::sequence::differential(runtime(), &input.managers);
}

/// `differential` on one pod case: the same case through every pod export
/// of the component and of the native policy, and through `admit`,
/// `release` and `manager-operation` `start` on a fixture machine with a
/// new state, with identical results; the component never traps (only a
/// spent fuel or time budget is tolerated).
pub fn differential(case: &Case) {
    let policy = runtime();
    let (pod, node, options) = (&case.pod, &case.node, &case.options);
    let native_pod: native::Pod = to_native(pod);
    let native_node: native::NodeSettings = to_native(node);
    let native_options: native::PodResourcesOptions = to_native(options);

    same(
        "validate-node",
        policy.validate_node(node),
        evaluate::validate_node(&native_node),
    );
    let native_validation = evaluate::validate_pod(&native_pod, &native_node);
    same(
        "validate-pod",
        policy.validate_pod(pod, node),
        &native_validation,
    );
    let native_defaulted = evaluate::default_pod(&native_pod, &native_node);
    let defaulted = same(
        "default-pod",
        policy.default_pod(pod, node),
        &native_defaulted,
    );
    let native_evaluation = evaluate::evaluate(&native_pod, &native_node);
    same("evaluate", policy.evaluate(pod, node), &native_evaluation);
    same(
        "effective-resources",
        policy.effective_resources(pod, options, node),
        evaluate::effective_resources(&native_pod, &native_options, &native_node),
    );
    same(
        "qos-class",
        policy.qos_class(pod, node),
        evaluate::qos_class(&native_pod, &native_node),
    );
    same(
        "pod-resource-config",
        policy.pod_resource_config(pod, node),
        evaluate::pod_resource_config(&native_pod, &native_node),
    );
    same(
        "oom-score-adjust",
        policy.oom_score_adjust(pod, node),
        evaluate::oom_score_adjust(&native_pod, &native_node),
    );
    same(
        "node-memory-qos",
        policy.node_cgroups(std::slice::from_ref(pod), node),
        evaluate::node_cgroups(std::slice::from_ref(&native_pod), &native_node),
    );
    let (request, limit) = case.memory_high;
    same(
        "container-memory-high",
        policy.container_memory_high(request, limit, case.memory_high_qos, node),
        evaluate::container_memory_high(
            request,
            limit,
            to_native(&case.memory_high_qos),
            &native_node,
        ),
    );
    let desired = case.desired_pod();
    same(
        "resize-plan",
        policy.resize_plan(pod, &desired, &case.resize_others, node),
        evaluate::resize_plan(
            &native_pod,
            &to_native(&desired),
            &to_native(&case.resize_others),
            &native_node,
        ),
    );
    // The managers on the pod and node as they come (mostly field errors).
    let machines = crate::alloc::fixture_machines();
    let topology = &machines[pod.name.len() % machines.len()].1;
    let native_topology: native::NodeTopology = to_native(topology);
    let state = podpolicy::empty_manager_state();
    let native_state: native::ManagerState = to_native(&state);
    let native_admission =
        evaluate::admit(&native_pod, &native_topology, &native_state, &native_node);
    same(
        "admit",
        policy.admit(pod, topology, &state, node),
        &native_admission,
    );
    let container = pod
        .spec
        .containers
        .first()
        .map_or("app", |c| c.name.as_str());
    let native_release = evaluate::release(
        &pod.uid,
        container,
        &native_topology,
        &native_state,
        &native_node,
    );
    same(
        "release",
        policy.release(&pod.uid, container, topology, &state, node),
        &native_release,
    );
    let request = podpolicy::bindings::ManagerRequest::Start(state.clone());
    same(
        "manager-operation start",
        policy.manager_operation(&request, topology, node),
        evaluate::manager_operation(&to_native(&request), &native_topology, &native_node),
    );
    // The defaulted pod, as `explain` evaluates it.
    let defaulted = match &defaulted {
        Some(Ok(defaulted)) => Some((
            &defaulted.pod,
            evaluate::evaluate(&to_native(&defaulted.pod), &native_node),
        )),
        _ => None,
    };
    if let Some((pod, native_evaluation)) = &defaulted {
        same(
            "evaluate (defaulted)",
            policy.evaluate(pod, node),
            native_evaluation,
        );
    }
    // The long-lived hosts' path: the node prepared once in a warm
    // instance, then the same calls on it, one after the other (a call
    // that errs must not change the next one's answer).
    let mut slot = None;
    same(
        "prepare",
        PreparedPolicy::new(runtime().clone(), node.clone(), Some(topology.clone()))
            .map(|answer| answer.map(|prepared| slot = Some(prepared))),
        policy_wasm::prepared::PreparedNode::prepare(&native_node, Some(&native_topology))
            .map(|_| ()),
    );
    let Some(prepared) = slot.as_mut() else {
        return;
    };
    same(
        "prepared validate-pod",
        prepared.validate_pod(pod),
        &native_validation,
    );
    same(
        "prepared default-pod",
        prepared.default_pod(pod),
        &native_defaulted,
    );
    same(
        "prepared evaluate",
        prepared.evaluate(pod),
        &native_evaluation,
    );
    same(
        "prepared admit",
        prepared.admit(pod, &state),
        &native_admission,
    );
    same(
        "prepared release",
        prepared.release(&pod.uid, container, &state),
        &native_release,
    );
    if let Some((pod, native_evaluation)) = &defaulted {
        same(
            "prepared evaluate (defaulted)",
            prepared.evaluate(pod),
            native_evaluation,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seeds;

    fn random_cases(count: usize) -> impl Iterator<Item = Case> {
        let mut seed = 0x0ddb_a11c_afe0_1234u64;
        (0..count).map(move |i| {
            let bytes: Vec<u8> = (0..(i * 7) % 1500)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            Case::from_bytes(&bytes)
        })
    }

    #[test]
    fn seeds_pass_every_check() {
        for (_, case) in seeds::cases() {
            evaluate_native(&case);
            differential(&case);
        }
        for text in seeds::quantities() {
            quantity(text.as_bytes());
        }
    }

    #[test]
    fn random_cases_pass_every_check() {
        for case in random_cases(300) {
            evaluate_native(&case);
            differential(&case);
        }
    }
}
