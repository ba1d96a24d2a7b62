//! The evaluation threads' prepared nodes (`runtime::PreparedPolicy`):
//! reviews answered on a prepared node equal the one-shot exports' answers
//! on fresh instances (`review::OneShot`), a hot swap prepares the node on
//! the new version, a failed call costs only its own review, and node
//! settings that do not prepare still get the one-shot answers.

use std::path::PathBuf;
use std::sync::Arc;

use podpolicy::bindings::NodeSettings;
use podpolicy::pod_input::read_pods;
use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime, PreparedPolicy};
use podpolicy::swap::PolicySlot;
use podpolicy::webhook::WebhookOptions;
use podpolicy::webhook::review::{self, Endpoint, OneShot, Outcome, Verdict};
use serde_json::{Value, json};

use super::client::Client;
use super::{
    TestServer, fixture, options, pods_dir, resize_fixture, review, review_of, slot, webhook_policy,
};
use crate::hostile_policy::{Hostility, component};

/// Every review the comparisons send, to both endpoints: each fixture pod
/// created, a pod with upstream's fractional-byte warnings, and resizes of
/// the fixture pod: one the rules allow, one that changes the QoS class
/// (denied), and the latter as a plain UPDATE.
fn requests() -> Vec<(Endpoint, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(pods_dir())
        .expect("fixtures/pods")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut objects: Vec<Value> = files
        .iter()
        .flat_map(|f| read_pods(f).unwrap_or_else(|e| panic!("{}: {e:#}", f.display())))
        .map(|doc| doc.json)
        .collect();
    assert!(objects.len() >= 15, "{} fixture pods", objects.len());
    objects.push(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fractional", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "a",
            "resources": {"limits": {"memory": "1.5", "cpu": "500m"}}}]},
    }));
    let endpoints = [Endpoint::Mutate, Endpoint::Validate];
    let mut requests = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        for endpoint in endpoints {
            requests.push((
                endpoint,
                review(&format!("create-{i}"), "CREATE", object, None),
            ));
        }
    }
    let old = resize_fixture("web-old.yaml");
    let new = resize_fixture("web-new.yaml");
    // c1 keeps its limits but lowers its requests: Guaranteed -> Burstable.
    let mut burstable = old.clone();
    burstable["spec"]["containers"][0]["resources"]["requests"] =
        json!({"cpu": "1", "memory": "1Gi"});
    for (uid, object, sub_resource) in [
        ("resize-ok", &new, Some("resize")),
        ("resize-qos", &burstable, Some("resize")),
        ("update-qos", &burstable, None),
    ] {
        for endpoint in endpoints {
            requests.push((
                endpoint,
                review_of(uid, "UPDATE", object, Some(&old), sub_resource),
            ));
        }
    }
    requests
}

fn parse(body: &Value) -> review::AdmissionRequest {
    review::parse(&serde_json::to_vec(body).expect("JSON")).expect("a good review")
}

/// The answer of the one-shot exports on fresh instances.
fn one_shot(
    policy: &PolicyRuntime,
    node: &NodeSettings,
    endpoint: Endpoint,
    body: &Value,
) -> Verdict {
    review::review(&mut OneShot { policy, node }, endpoint, &parse(body))
        .expect("the policy answers")
}

/// The review body the webhook sends for `verdict`.
fn sent(verdict: &Verdict) -> Value {
    serde_json::from_slice(&review::to_body(&verdict.response)).expect("JSON")
}

/// The answers cover what the comparison is about: a defaulting patch, a
/// validation denial, warnings, an allowed resize and a resize denied by
/// the KEP-1287 rules.
fn assert_covered(answers: &[(Endpoint, &str, Verdict)]) {
    let has = |endpoint: Endpoint, uid: &str, what: &dyn Fn(&Verdict) -> bool| {
        answers
            .iter()
            .any(|(e, u, v)| *e == endpoint && u.starts_with(uid) && what(v))
    };
    assert!(has(Endpoint::Mutate, "create-", &|v| v.outcome
        == Outcome::Patched));
    assert!(has(Endpoint::Validate, "create-", &|v| v.outcome
        == Outcome::Denied));
    assert!(has(Endpoint::Validate, "create-", &|v| !v
        .response
        .warnings
        .is_empty()));
    assert!(has(Endpoint::Validate, "resize-ok", &|v| v.outcome
        == Outcome::Allowed));
    for uid in ["resize-qos", "update-qos"] {
        assert!(has(Endpoint::Validate, uid, &|v| v
            .response
            .status
            .as_ref()
            .is_some_and(|s| s
                .message
                .contains("Pod QOS Class may not change"))));
    }
}

/// `review::review` on a prepared node answers every request exactly as on
/// fresh instances, on one warm instance throughout, for the webhook's
/// default node settings and a node file's.
#[test]
fn reviews_on_a_prepared_node_answer_as_on_fresh_instances() {
    let policy = slot().current();
    let node_file = crate::util::workspace().join("fixtures/nodes/node-1000gi.yaml");
    let nodes = [
        podpolicy::empty_node(),
        podpolicy::node_input::read_node(&node_file).expect("fixture node"),
    ];
    for node in nodes {
        let mut prepared = PreparedPolicy::new(policy.clone(), node.clone(), None)
            .expect("call")
            .expect("the node prepares");
        let mut answers = Vec::new();
        let requests = requests();
        for (endpoint, body) in &requests {
            let request = parse(body);
            let fresh = one_shot(&policy, &node, *endpoint, body);
            let warm = review::review(&mut prepared, *endpoint, &request).expect("answers");
            assert_eq!(warm, fresh, "/{} {}", endpoint.name(), request.uid);
            answers.push((*endpoint, body["request"]["uid"].as_str().unwrap(), warm));
        }
        assert_covered(&answers);
        assert_eq!(prepared.prepared_count(), 1, "one warm instance throughout");
    }
}

/// The `podpolicy_webhook_warm_instances` gauge.
async fn warm_instances(client: &mut Client) -> u64 {
    let text = client.get("/metrics").await.expect("request").text();
    text.lines()
        .find_map(|l| l.strip_prefix("podpolicy_webhook_warm_instances "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no warm instances gauge in:\n{text}"))
}

/// POST `body` to `endpoint`; the reply's status and JSON (or text).
async fn post(client: &mut Client, endpoint: Endpoint, body: &Value) -> (u16, Value) {
    let reply = client
        .post_json(&format!("/{}", endpoint.name()), body)
        .await
        .expect("request");
    let value = serde_json::from_slice(&reply.body).unwrap_or_else(|_| json!(reply.text()));
    (reply.status, value)
}

/// Through the server (its evaluation threads, each on its prepared node),
/// every request gets the review the one-shot exports give, and every
/// thread holds its prepared node afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evaluation_threads_answer_as_fresh_instances() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let policy = slot().current();
    let node = options().node;
    let mut answers = Vec::new();
    let requests = requests();
    for (endpoint, body) in &requests {
        let expected = one_shot(&policy, &node, *endpoint, body);
        let uid = body["request"]["uid"].as_str().unwrap();
        assert_eq!(
            post(&mut client, *endpoint, body).await,
            (200, sent(&expected)),
            "/{} {uid}",
            endpoint.name()
        );
        answers.push((*endpoint, uid, expected));
    }
    assert_covered(&answers);
    assert_eq!(
        warm_instances(&mut client).await,
        options().max_concurrency as u64
    );
    server.stop().await;
}

/// After a swap the threads prepare the node on the version the review
/// took from the slot: a version whose every call traps fails the reviews
/// (500, and no thread keeps an instance of it), and after the rollback
/// the answers are the first version's again, on a node prepared anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_swap_reviews_run_on_a_node_prepared_on_the_new_version() {
    let first = webhook_policy(EMBEDDED_POLICY);
    let relabelled = super::relabelled_policy();
    let trapping = webhook_policy(&component(Hostility::Trap));
    let slot = Arc::new(PolicySlot::new(first));
    let server = TestServer::start_with(
        WebhookOptions {
            max_concurrency: 1,
            ..options()
        },
        slot.clone(),
    )
    .await;
    let mut client = server.client().await;
    let body = review("swap", "CREATE", &fixture("kep-ide.yaml").json, None);
    let (status, before) = post(&mut client, Endpoint::Mutate, &body).await;
    assert_eq!(status, 200, "{before}");
    assert!(before["response"]["patch"].is_string(), "{before}");
    assert_eq!(warm_instances(&mut client).await, 1);

    slot.activate(relabelled, |_, _| Ok(())).expect("swap");
    assert_eq!(
        post(&mut client, Endpoint::Mutate, &body).await,
        (200, before.clone())
    );
    assert_eq!(
        warm_instances(&mut client).await,
        1,
        "one instance, of the new version"
    );

    slot.activate(trapping, |_, _| Ok(())).expect("swap");
    for endpoint in [Endpoint::Mutate, Endpoint::Validate] {
        let (status, failed) = post(&mut client, endpoint, &body).await;
        assert_eq!(status, 500, "{failed}");
        assert!(
            failed
                .as_str()
                .is_some_and(|t| t.contains("the policy trapped")),
            "{failed}"
        );
    }
    assert_eq!(warm_instances(&mut client).await, 0);

    slot.rollback().expect("rollback");
    assert_eq!(
        post(&mut client, Endpoint::Mutate, &body).await,
        (200, before)
    );
    assert_eq!(warm_instances(&mut client).await, 1);
    server.stop().await;
}

/// A review that fails in the sandbox (here the memory cap, hit by a pod of
/// about 10 MB of container names) gets a 500 and drops its thread's
/// instance; the next review, on a node prepared anew, gets the same
/// answer as before the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_review_does_not_change_the_next_answer() {
    podpolicy::runtime::reserve_instances(podpolicy::webhook::default_concurrency())
        .expect("the default concurrency fits the pool");
    let capped = PolicyRuntime::from_bytes(
        EMBEDDED_POLICY,
        &Cache::Dir(crate::util::cache_dir()),
        Limits {
            memory_bytes: 8 << 20,
            ..Limits::default()
        },
    )
    .expect("the policy loads");
    let server = TestServer::start_with(
        WebhookOptions {
            max_concurrency: 1,
            max_body_bytes: 32 << 20,
            request_timeout: std::time::Duration::from_secs(20),
            ..options()
        },
        Arc::new(PolicySlot::new(capped)),
    )
    .await;
    let mut client = server.client().await;
    let pod = fixture("kep-ide.yaml").json;
    let good = review("good", "CREATE", &pod, None);
    let mut answers = Vec::new();
    for endpoint in [Endpoint::Mutate, Endpoint::Validate] {
        let (status, answer) = post(&mut client, endpoint, &good).await;
        assert_eq!(status, 200, "{answer}");
        answers.push(answer);
    }
    assert_eq!(warm_instances(&mut client).await, 1);

    let mut huge = pod.clone();
    let template = huge["spec"]["containers"][0].clone();
    huge["spec"]["containers"] = (0..10_000)
        .map(|i| {
            let mut c = template.clone();
            c["name"] = json!(format!("c{i:05}-{}", "x".repeat(1000)));
            c
        })
        .collect();
    let (status, failed) = post(
        &mut client,
        Endpoint::Mutate,
        &review("huge", "CREATE", &huge, None),
    )
    .await;
    assert_eq!(status, 500, "{failed}");
    assert!(
        failed.as_str().is_some_and(|t| t.contains("memory")),
        "{failed}"
    );
    assert_eq!(
        warm_instances(&mut client).await,
        0,
        "the failure dropped the instance"
    );

    for (endpoint, answer) in [Endpoint::Mutate, Endpoint::Validate]
        .into_iter()
        .zip(answers)
    {
        assert_eq!(post(&mut client, endpoint, &good).await, (200, answer));
    }
    assert_eq!(warm_instances(&mut client).await, 1);
    server.stop().await;
}

/// Node settings that do not prepare (field errors) still start the
/// server, hold no instance, and get exactly the one-shot exports' answers,
/// which report the node's errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_settings_that_do_not_prepare_get_the_one_shot_answers() {
    let mut node = podpolicy::empty_node();
    node.memory_throttling_factor = Some(7.0);
    let policy = slot().current();
    let errors = PreparedPolicy::new(policy.clone(), node.clone(), None)
        .expect("call")
        .err()
        .expect("the settings do not prepare");
    assert!(!errors.is_empty());
    let server = TestServer::start(WebhookOptions {
        node: node.clone(),
        ..options()
    })
    .await;
    let mut client = server.client().await;
    let mut denied = 0;
    for (endpoint, body) in requests() {
        let expected = one_shot(&policy, &node, endpoint, &body);
        denied += usize::from(expected.outcome == Outcome::Denied);
        let uid = body["request"]["uid"].as_str().unwrap().to_string();
        assert_eq!(
            post(&mut client, endpoint, &body).await,
            (200, sent(&expected)),
            "/{} {uid}",
            endpoint.name()
        );
    }
    assert!(denied > 0, "the node's errors deny reviews");
    assert_eq!(warm_instances(&mut client).await, 0);
    server.stop().await;
}
