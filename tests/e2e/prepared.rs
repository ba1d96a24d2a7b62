//! The prepared node (`prepared-node`, `runtime::PreparedPolicy`): the same
//! answers as the one-shot exports, and isolation between calls on its warm
//! instance (an error or a trap in one call does not change the next one's
//! answer).

use std::sync::Arc;

use podpolicy::bindings::{ManagerState, NodeSettings, NodeTopology, Pod};
use podpolicy::pod_input::read_pods;
use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime, PreparedPolicy};
use podpolicy::sysfs::read_topology;
use podpolicy::topology_input::node_topology;
use podpolicy::{empty_manager_state, node_input::read_node};

use crate::util::workspace;

fn runtime(limits: Limits) -> Arc<PolicyRuntime> {
    Arc::new(
        PolicyRuntime::from_bytes(EMBEDDED_POLICY, &Cache::Off, limits).expect("the policy loads"),
    )
}

/// Every pod document of fixtures/pods, in file name order.
fn fixture_docs() -> Vec<podpolicy::pod_input::PodDocument> {
    let mut files: Vec<_> = std::fs::read_dir(workspace().join("fixtures/pods"))
        .expect("fixtures/pods")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let docs: Vec<_> = files
        .iter()
        .flat_map(|f| read_pods(f).unwrap_or_else(|e| panic!("{}: {e:#}", f.display())))
        .collect();
    assert!(docs.len() >= 15, "{} fixture pods", docs.len());
    docs
}

fn fixture_pods() -> Vec<Pod> {
    fixture_docs().into_iter().map(|d| d.pod).collect()
}

/// `node` prepared in a warm instance of `policy` (the node must prepare).
fn prepared_on(policy: &Arc<PolicyRuntime>, node: &NodeSettings) -> PreparedPolicy {
    PreparedPolicy::new(policy.clone(), node.clone(), None)
        .expect("call")
        .expect("the node prepares")
}

/// Each pod evaluated on `prepared` answers as `policy`'s one-shot
/// `evaluate` (a fresh instance) does; returns how many evaluated and how
/// many were refused.
fn evaluate_as_one_shot(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    prepared: &mut PreparedPolicy,
    pods: Vec<Pod>,
) -> (usize, usize) {
    let (mut evaluated, mut refused) = (0, 0);
    for pod in pods {
        let one_shot = policy.evaluate(&pod, node).expect("call");
        evaluated += usize::from(one_shot.is_ok());
        refused += usize::from(one_shot.is_err());
        assert_eq!(
            prepared.evaluate(&pod).expect("call"),
            one_shot,
            "{}",
            pod.name
        );
    }
    (evaluated, refused)
}

fn node(name: &str) -> NodeSettings {
    read_node(&workspace().join("fixtures/nodes").join(name)).expect("fixture node")
}

fn dual_socket() -> NodeTopology {
    node_topology(
        &read_topology(&workspace().join("fixtures/sysfs/topoDualSocketHT")).expect("sysfs reads"),
    )
}

/// Validate, default and evaluate on the prepared node (what the agent and
/// the NRI plugin run per pod) answer as the one-shot exports do, on one
/// warm instance: every fixture pod, one the API server would refuse
/// (a negative request) and one with a malformed quantity.
#[test]
fn prepared_validate_default_evaluate_answers_as_the_one_shot_exports() {
    let policy = runtime(Limits::default());
    let node = node("node-1000gi.yaml");
    let mut prepared = prepared_on(&policy, &node);
    let mut pods = fixture_pods();
    for quantity in ["-1", "1.5.5"] {
        let mut bad = pods[0].clone();
        bad.name = format!("bad-{quantity}");
        bad.spec.containers[0].resources = Some(podpolicy::bindings::ResourceRequirements {
            requests: Some(vec![podpolicy::bindings::ResourceQuantity {
                name: "cpu".into(),
                quantity: quantity.into(),
            }]),
            limits: None,
        });
        pods.push(bad);
    }
    let (mut valid, mut invalid) = (0, 0);
    for pod in &pods {
        assert_eq!(
            prepared.validate_pod(pod).expect("call"),
            policy.validate_pod(pod, &node).expect("call"),
            "validate {}",
            pod.name
        );
        assert_eq!(
            prepared.default_pod(pod).expect("call"),
            policy.default_pod(pod, &node).expect("call"),
            "default {}",
            pod.name
        );
        let one_shot = policy.validate_default_evaluate(pod, &node).expect("call");
        match &one_shot {
            Ok(_) => valid += 1,
            Err(_) => invalid += 1,
        }
        assert_eq!(
            prepared.validate_default_evaluate(pod).expect("call"),
            one_shot,
            "validate-default-evaluate {}",
            pod.name
        );
    }
    assert!(
        valid >= 10 && invalid >= 2,
        "{valid} valid, {invalid} invalid"
    );
    assert_eq!(prepared.prepared_count(), 1, "one warm instance throughout");
}

/// Every fixture pod (the invalid ones included) gets the one-shot
/// `evaluate`'s answer from the prepared node, on one warm instance.
#[test]
fn prepared_evaluate_answers_as_the_one_shot_export() {
    let policy = runtime(Limits::default());
    let node = node("node-1000gi.yaml");
    let mut prepared = prepared_on(&policy, &node);
    let mut pods = fixture_pods();
    let mut bad = pods[0].clone();
    bad.spec.containers[0].resources = Some(podpolicy::bindings::ResourceRequirements {
        requests: Some(vec![podpolicy::bindings::ResourceQuantity {
            name: "cpu".into(),
            quantity: "1.5.5".into(),
        }]),
        limits: None,
    });
    pods.push(bad);
    let (_, errors) = evaluate_as_one_shot(&policy, &node, &mut prepared, pods);
    assert!(
        errors > 0,
        "some fixture pods are invalid, so errors are compared too"
    );
    assert_eq!(
        prepared.prepared_count(),
        1,
        "one instance served every pod"
    );
}

/// Admissions and releases on a prepared node thread the state exactly as
/// the one-shot `admit` / `release` do, refusals included.
#[test]
fn prepared_admit_and_release_answer_as_the_one_shot_exports() {
    let policy = runtime(Limits::default());
    let node = node("dual-socket-static.yaml");
    let topology = dual_socket();
    let mut prepared = PreparedPolicy::new(policy.clone(), node.clone(), Some(topology.clone()))
        .expect("call")
        .expect("the node prepares");
    let pods = fixture_pods();
    let (mut one_shot_state, mut prepared_state): (ManagerState, ManagerState) =
        (empty_manager_state(), empty_manager_state());
    let mut admitted = 0;
    for pod in &pods {
        let one_shot = policy
            .admit(pod, &topology, &one_shot_state, &node)
            .expect("call");
        let answer = prepared.admit(pod, &prepared_state).expect("call");
        assert_eq!(answer, one_shot, "{}", pod.name);
        if let Ok(admission) = one_shot {
            admitted += usize::from(admission.rejection.is_none());
            one_shot_state = admission.state;
            prepared_state = answer.expect("same").state;
        }
    }
    assert!(admitted >= 2, "{admitted} pods admitted");
    for pod in &pods {
        for c in &pod.spec.containers {
            let one_shot = policy
                .release(&pod.uid, &c.name, &topology, &one_shot_state, &node)
                .expect("call")
                .expect("released");
            let answer = prepared
                .release(&pod.uid, &c.name, &prepared_state)
                .expect("call")
                .expect("released");
            assert_eq!(answer, one_shot);
            one_shot_state = one_shot;
            prepared_state = answer;
        }
    }
}

/// A node that does not decode is refused when it is prepared, with the
/// field errors `evaluate` reports; a node prepared without a topology
/// refuses admissions with a field error, not a trap.
#[test]
fn preparing_a_bad_node_gives_its_field_errors() {
    let policy = runtime(Limits::default());
    let mut bad = node("node-1000gi.yaml");
    bad.memory_throttling_factor = Some(7.0);
    let pod = fixture_pods().remove(0);
    let one_shot = policy
        .evaluate(&pod, &bad)
        .expect("call")
        .expect_err("refused");
    let errors = PreparedPolicy::new(policy.clone(), bad, None)
        .expect("call")
        .err()
        .expect("refused");
    assert_eq!(errors, one_shot);

    let mut prepared = PreparedPolicy::new(policy, node("node-1000gi.yaml"), None)
        .expect("call")
        .expect("prepares");
    let errors = prepared
        .admit(&pod, &empty_manager_state())
        .expect("call")
        .expect_err("no topology");
    assert_eq!(errors[0].field, "topology");
}

/// Isolation on the warm instance: an error answer keeps the instance and
/// changes nothing; a trap (here the memory cap, hit by a huge pod) drops
/// it, and the next call, on a freshly prepared node, gets the same answer
/// as before the trap.
#[test]
fn an_error_or_a_trap_does_not_change_the_next_answer() {
    let policy = runtime(Limits {
        memory_bytes: 8 << 20,
        ..Limits::default()
    });
    let node = node("node-1000gi.yaml");
    let mut prepared = prepared_on(&policy, &node);
    let pods = fixture_pods();
    let good = pods
        .iter()
        .find(|p| policy.evaluate(p, &node).expect("call").is_ok())
        .expect("a valid fixture pod")
        .clone();
    let before = prepared.evaluate(&good).expect("call").expect("evaluates");

    let mut bad = good.clone();
    bad.spec.containers[0].resources = Some(podpolicy::bindings::ResourceRequirements {
        requests: Some(vec![podpolicy::bindings::ResourceQuantity {
            name: "memory".into(),
            quantity: "12.5.7Gi".into(),
        }]),
        limits: None,
    });
    prepared
        .evaluate(&bad)
        .expect("call")
        .expect_err("a bad quantity");
    assert_eq!(
        prepared.evaluate(&good).expect("call").expect("evaluates"),
        before
    );
    assert_eq!(
        prepared.prepared_count(),
        1,
        "an error answer keeps the instance"
    );

    // About 20 MB of container names: beyond the 8 MiB cap.
    let mut huge = good.clone();
    let template = huge.spec.containers[0].clone();
    huge.spec.containers = (0..20_000)
        .map(|i| podpolicy::bindings::Container {
            name: format!("c{i:05}-{}", "x".repeat(1000)),
            ..template.clone()
        })
        .collect();
    let trapped = prepared
        .evaluate(&huge)
        .expect_err("the memory cap stops it");
    assert!(format!("{trapped:#}").contains("memory"), "{trapped:#}");
    assert_eq!(
        prepared.evaluate(&good).expect("call").expect("evaluates"),
        before
    );
    assert_eq!(
        prepared.prepared_count(),
        2,
        "the trap replaced the instance"
    );
}

/// The component allocates each call from a 256 KiB bump arena and spills
/// to its general allocator past it (`policy-wasm/src/call_arena.rs`).
/// On one warm instance, pods whose calls overflow the arena (0.8 MB and
/// more of container names alone) alternate with small ones: every answer is
/// the one a fresh instance gives, and the instance is never replaced.
#[test]
fn calls_larger_than_the_call_arena_answer_as_a_fresh_instance() {
    let policy = runtime(Limits::default());
    let node = node("node-1000gi.yaml");
    let mut prepared = prepared_on(&policy, &node);
    let small: Vec<Pod> = fixture_pods()
        .into_iter()
        .filter(|p| policy.evaluate(p, &node).expect("call").is_ok())
        .take(3)
        .collect();
    assert_eq!(small.len(), 3, "three valid fixture pods");
    let large = |pod: &Pod, containers: usize| {
        let mut large = pod.clone();
        let template = large.spec.containers[0].clone();
        large.spec.containers = (0..containers)
            .map(|i| podpolicy::bindings::Container {
                name: format!("c{i:04}-{}", "n".repeat(2000)),
                ..template.clone()
            })
            .collect();
        large
    };
    let mut answers = 0;
    for round in 0..3 {
        for pod in &small {
            for candidate in [pod.clone(), large(pod, 400 + 100 * round)] {
                let fresh = policy.evaluate(&candidate, &node).expect("call");
                let warm = prepared.evaluate(&candidate).expect("call");
                let evaluation = warm.as_ref().expect("evaluates");
                assert!(
                    evaluation.containers.len() >= candidate.spec.containers.len(),
                    "{}: every container evaluated",
                    candidate.name
                );
                assert_eq!(warm, fresh, "round {round}, {}", candidate.name);
                answers += 1;
            }
        }
    }
    assert_eq!(answers, 18);
    assert_eq!(
        prepared.prepared_count(),
        1,
        "one instance served every call"
    );
}

/// The call arena is part of each instance's memory: with a 2 MiB cap
/// (the module's own memory is 1.375 MiB, the arena's 256 KiB included), a
/// prepared node still answers every fixture pod as an instance under the
/// default cap does.
#[test]
fn a_two_mib_memory_cap_still_leaves_room_for_the_call_arena() {
    let policy = runtime(Limits::default());
    let small = runtime(Limits {
        memory_bytes: 2 << 20,
        ..Limits::default()
    });
    let node = node("node-1000gi.yaml");
    let mut prepared = prepared_on(&small, &node);
    let (evaluated, _) = evaluate_as_one_shot(&policy, &node, &mut prepared, fixture_pods());
    assert!(evaluated > 10, "{evaluated} fixture pods evaluated");
    assert_eq!(prepared.prepared_count(), 1, "no call ran out of memory");
}

/// A cap below the module's own memory (its stack, data and call arena) is
/// refused when the policy loads, with the cap and the flag that sets it,
/// and no answer; the compiled artifact in the cache, sound, stays.
#[test]
fn a_memory_cap_below_the_modules_own_memory_is_refused_naming_the_flag() {
    let dir = crate::util::temp_dir("memory-cap-cache");
    let cache = Cache::Dir(dir.clone());
    let artifacts = || {
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .expect("the cache directory")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        names.sort();
        names
    };
    PolicyRuntime::from_bytes(EMBEDDED_POLICY, &cache, Limits::default()).expect("loads");
    let cached = artifacts();
    assert_eq!(cached.len(), 1, "{cached:?}");
    let refused = PolicyRuntime::from_bytes(
        EMBEDDED_POLICY,
        &cache,
        Limits {
            memory_bytes: 1 << 20,
            ..Limits::default()
        },
    )
    .err()
    .expect("a 1 MiB cap is refused");
    assert_eq!(artifacts(), cached, "the cached artifact is kept");
    let text = format!("{refused:#}");
    assert!(
        text.contains("memory cap of 1048576 bytes (`--memory-mib`)")
            && text.contains("minimum byte size"),
        "{text}"
    );
    let (code, stdout, stderr) = crate::util::podpolicy(&[
        "--memory-mib",
        "1",
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/pods/kep-ide.yaml",
    ]);
    assert_ne!(code, 0);
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("`--memory-mib`); raise the cap"),
        "{stderr}"
    );
}

/// The streaming `explain` (pods handed on one at a time, the node-level
/// sums kept in a `node-cgroups-sum` in the component) reports what
/// `explain_all` (every pod kept, `node-level-cgroups` over all of them)
/// reports, pod by pod and for the node: every fixture pod twice (the sums
/// must count each), plus a pod the policy refuses, which is reported and
/// not counted.
#[test]
fn streamed_explain_reports_what_explain_all_reports() {
    use podpolicy::output::{NodeOut, Report};
    let policy = runtime(Limits::default());
    let mut docs = fixture_docs();
    let mut refused = docs[0].clone();
    refused.pod.spec.containers[0].resources = Some(podpolicy::bindings::ResourceRequirements {
        requests: Some(vec![podpolicy::bindings::ResourceQuantity {
            name: "cpu".into(),
            quantity: "-1".into(),
        }]),
        limits: None,
    });
    docs.extend(docs.clone());
    docs.insert(3, refused);
    // node-1000gi, and the same with Memory QoS (TieredReservation), whose
    // node-level memory.min / memory.low sum the pods' memory requests.
    let mut memory_qos = node("node-1000gi.yaml");
    memory_qos
        .feature_gates
        .push(podpolicy::bindings::FeatureGate {
            name: "MemoryQoS".into(),
            enabled: true,
        });
    memory_qos.memory_reservation_policy =
        Some(podpolicy::bindings::MemoryReservationPolicy::TieredReservation);
    for (node_file, node) in [
        ("node-1000gi.yaml", node("node-1000gi.yaml")),
        ("node-1000gi.yaml with Memory QoS", memory_qos),
    ] {
        let whole = podpolicy::explain_all(&policy, &docs, &node, None).expect("explain_all");
        assert!(whole.any_rejected(), "the refused pod is reported");
        let mut prepared = prepared_on(&policy, &node);
        let mut streamed = Vec::new();
        let node_values = podpolicy::explain_stream(
            &mut prepared,
            |each| docs.iter().cloned().try_for_each(each),
            |outcome| {
                streamed.push(outcome.explanation());
                Ok(())
            },
        )
        .expect("explain_stream");
        let report = Report {
            pods: streamed,
            node: NodeOut::new(&node.name, &node_values),
        };
        assert_eq!(report, whole.report(&node.name), "{node_file}");
        // The sums counted the pods: an empty run gives other values.
        let empty =
            podpolicy::explain_stream(&mut prepared, |_| Ok(()), |_| Ok(())).expect("an empty run");
        assert_ne!(empty, node_values, "{node_file}");
        assert_eq!(prepared.prepared_count(), 1, "one instance for the runs");
    }
}
