//! The admission webhook over real HTTPS on loopback: the server runs
//! in-process on 127.0.0.1:0 with a self-signed rcgen certificate, and a
//! hyper + rustls client sends AdmissionReview bodies built from the fixture
//! pods. Also: the deploy/ manifests, parsed with k8s-openapi types.

mod client;
mod prepared;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use podpolicy::pod_input::{PodDocument, pod_from_json, read_pods};
use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use podpolicy::swap::PolicySlot;
use podpolicy::webhook::{WebhookOptions, WebhookServer, start};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use client::{Client, Reply, TestCert, client_config, test_cert, tls_connect};

fn cert() -> &'static TestCert {
    static CERT: OnceLock<TestCert> = OnceLock::new();
    CERT.get_or_init(test_cert)
}

/// Load the embedded policy into an engine whose instance pool holds the
/// default `--max-concurrency` (one per CPU) and the headroom, as the
/// command does before it loads its policy.
fn webhook_policy(bytes: &[u8]) -> PolicyRuntime {
    podpolicy::runtime::reserve_instances(podpolicy::webhook::default_concurrency())
        .expect("the default concurrency fits the pool");
    PolicyRuntime::from_bytes(
        bytes,
        &Cache::Dir(crate::util::cache_dir()),
        Limits::default(),
    )
    .expect("the policy loads")
}

/// One policy slot for the whole binary (servers come and go per test).
fn slot() -> Arc<PolicySlot> {
    static SLOT: OnceLock<Arc<PolicySlot>> = OnceLock::new();
    SLOT.get_or_init(|| {
        Arc::new(PolicySlot::new(webhook_policy(
            podpolicy::runtime::EMBEDDED_POLICY,
        )))
    })
    .clone()
}

fn options() -> WebhookOptions {
    WebhookOptions {
        listen: "127.0.0.1:0".parse().expect("address"),
        ..WebhookOptions::default()
    }
}

struct TestServer {
    server: WebhookServer,
    tls: Arc<rustls::ClientConfig>,
}

impl TestServer {
    async fn start(options: WebhookOptions) -> TestServer {
        TestServer::start_with(options, slot()).await
    }

    async fn start_with(options: WebhookOptions, slot: Arc<PolicySlot>) -> TestServer {
        let cert = cert();
        let tls = podpolicy::webhook::tls::server_config_from_pem(
            cert.cert_pem.as_bytes(),
            cert.key_pem.as_bytes(),
        )
        .expect("TLS config");
        let server = start(options, Arc::new(tls), slot)
            .await
            .expect("server starts");
        TestServer {
            server,
            tls: client_config(&cert.cert_der),
        }
    }

    async fn client(&self) -> Client {
        Client::connect(self.server.local_addr(), self.tls.clone())
            .await
            .expect("client connects")
    }

    /// A good review still gets a good answer (on a new connection).
    async fn assert_still_serving(&self, after: &str) {
        let doc = fixture("kep-ide.yaml");
        let reply = self
            .client()
            .await
            .post_json("/mutate", &review("still-1", "CREATE", &doc.json, None))
            .await
            .unwrap_or_else(|e| panic!("after {after}: the server stopped serving: {e:#}"));
        assert_eq!(reply.status, 200, "after {after}: {}", reply.text());
        assert_eq!(reply.json()["response"]["allowed"], true, "after {after}");
    }

    async fn stop(self) {
        self.server.shutdown().await.expect("clean shutdown");
    }
}

fn pods_dir() -> PathBuf {
    crate::util::workspace().join("fixtures/pods")
}

fn fixture(name: &str) -> PodDocument {
    let mut docs = read_pods(&pods_dir().join(name)).expect("fixture parses");
    assert_eq!(docs.len(), 1, "{name}: one pod");
    docs.remove(0)
}

fn resize_fixture(name: &str) -> Value {
    let path = crate::util::workspace().join("fixtures/resize").join(name);
    read_pods(&path).expect("fixture parses").remove(0).json
}

/// An AdmissionReview as the API server sends it for a Pod.
fn review(uid: &str, operation: &str, object: &Value, old: Option<&Value>) -> Value {
    review_of(uid, operation, object, old, None)
}

fn review_of(
    uid: &str,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
    sub_resource: Option<&str>,
) -> Value {
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(json!(""));
    let namespace = object
        .pointer("/metadata/namespace")
        .cloned()
        .unwrap_or(json!("default"));
    let mut request = json!({
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": object,
        "oldObject": old,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": if operation == "CREATE" { "CreateOptions" } else { "UpdateOptions" }},
    });
    if let Some(sub) = sub_resource {
        request["subResource"] = json!(sub);
        request["requestSubResource"] = json!(sub);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// The `response` of a 200 review, checked for the review envelope and the uid echo.
fn response_of(reply: &Reply, uid: &str) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.content_type, "application/json");
    let body = reply.json();
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    assert_eq!(
        body["response"]["uid"], uid,
        "the response echoes the request uid"
    );
    body["response"].clone()
}

fn decoded_patch(response: &Value) -> Value {
    assert_eq!(response["patchType"], "JSONPatch");
    let text = response["patch"].as_str().expect("patch is a string");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("patch is base64");
    serde_json::from_slice(&bytes).expect("patch is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_of_the_kep_ide_pod_returns_the_defaulting_patch() {
    let server = TestServer::start(options()).await;
    let doc = fixture("kep-ide.yaml");
    let reply = server
        .client()
        .await
        .post_json("/mutate", &review("ide-1", "CREATE", &doc.json, None))
        .await
        .expect("request");
    let response = response_of(&reply, "ide-1");
    assert_eq!(response["allowed"], true);
    let patch = decoded_patch(&response);
    // The documented patch: pod-level requests from the container's.
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(pods_dir().join("kep-ide.expected.json")).expect("golden"),
    )
    .expect("golden JSON");
    assert_eq!(patch, golden["defaultingPatch"]);
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/spec/resources/requests", "value": {"cpu": "500m", "memory": "128Mi"}}])
    );

    // Applied to the input object by an RFC 6902 implementation, it gives
    // exactly the component's defaulted pod.
    let patch: json_patch::Patch = serde_json::from_value(patch).expect("RFC 6902 patch");
    let mut patched = doc.json.clone();
    json_patch::patch(&mut patched, &patch).expect("the patch applies to the input");
    let defaulted = crate::util::policy()
        .default_pod(&doc.pod, &podpolicy::empty_node())
        .expect("call")
        .expect("defaults");
    assert_eq!(pod_from_json(&patched).expect("patched pod"), defaulted.pod);
    server.stop().await;
}

/// Every fixture pod through /mutate: the patch (when any) applies and gives
/// the defaulted pod; a pod that needs no defaulting gets no patch at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_patches_of_every_fixture_apply_to_the_defaulted_pod() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let policy = crate::util::policy();
    let node = podpolicy::empty_node();
    let mut patched_count = 0;
    let mut unpatched_count = 0;
    for entry in std::fs::read_dir(pods_dir()).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let doc = read_pods(&path).expect("fixture").remove(0);
        let uid = format!("uid-{}", path.file_stem().unwrap().to_string_lossy());
        let reply = client
            .post_json("/mutate", &review(&uid, "CREATE", &doc.json, None))
            .await
            .expect("request");
        let response = response_of(&reply, &uid);
        match policy.default_pod(&doc.pod, &node).expect("call") {
            Err(errors) => {
                assert_eq!(response["allowed"], false, "{}", path.display());
                for error in errors {
                    assert!(
                        response["status"]["message"]
                            .as_str()
                            .unwrap()
                            .contains(&error.field)
                    );
                }
            }
            Ok(defaulted) if defaulted.patch.is_empty() => {
                unpatched_count += 1;
                assert_eq!(response["allowed"], true, "{}", path.display());
                assert!(
                    response.get("patch").is_none(),
                    "{}: no patch when empty",
                    path.display()
                );
                assert!(response.get("patchType").is_none(), "{}", path.display());
            }
            Ok(defaulted) => {
                patched_count += 1;
                assert_eq!(response["allowed"], true, "{}", path.display());
                let patch: json_patch::Patch =
                    serde_json::from_value(decoded_patch(&response)).expect("RFC 6902 patch");
                let mut patched = doc.json.clone();
                json_patch::patch(&mut patched, &patch)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(
                    pod_from_json(&patched).expect("patched pod"),
                    defaulted.pod,
                    "{}",
                    path.display()
                );
            }
        }
    }
    assert!(
        patched_count >= 5 && unpatched_count >= 5,
        "{patched_count} {unpatched_count}"
    );
    server.stop().await;
}

/// The kubectl-style pod (status, managedFields, ownerReferences) is read
/// like any other: validated and allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_allows_the_kubectl_style_pod_and_the_valid_examples() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let doc = fixture("kubectl-get-pod.yaml");
    assert!(doc.json.pointer("/metadata/managedFields").is_some());
    assert!(doc.json.pointer("/status/containerStatuses").is_some());
    let reply = client
        .post_json("/validate", &review("kubectl-1", "CREATE", &doc.json, None))
        .await
        .expect("request");
    let response = response_of(&reply, "kubectl-1");
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("status").is_none());
    for name in [
        "kep-ide.yaml",
        "kep-row16-all-set.yaml",
        "kep5526-pod-scope-mixed.yaml",
    ] {
        let doc = fixture(name);
        let reply = client
            .post_json("/validate", &review(name, "CREATE", &doc.json, None))
            .await
            .expect("request");
        assert_eq!(response_of(&reply, name)["allowed"], true, "{name}");
    }
    server.stop().await;
}

/// Fractional byte values get upstream's warnings on /validate (the pod is
/// still allowed), none on /mutate, and a whole-byte pod gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_returns_upstream_fractional_byte_warnings() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "fractional", "namespace": "default"},
        "spec": {
            "initContainers": [{"name": "init", "image": "i",
                "resources": {"requests": {"ephemeral-storage": "100m"}}}],
            "containers": [{"name": "app", "image": "a",
                "resources": {"limits": {"memory": "1.5", "cpu": "500m"}}}],
        },
    });
    let reply = client
        .post_json("/validate", &review("warn-1", "CREATE", &pod, None))
        .await
        .expect("request");
    let response = response_of(&reply, "warn-1");
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(
        response["warnings"],
        json!([
            "spec.initContainers[0].resources.requests[ephemeral-storage]: fractional byte value \"100m\" is invalid, must be an integer",
            "spec.containers[0].resources.limits[memory]: fractional byte value \"1500m\" is invalid, must be an integer",
        ]),
        "{response}"
    );
    let reply = client
        .post_json("/mutate", &review("warn-2", "CREATE", &pod, None))
        .await
        .expect("request");
    assert!(response_of(&reply, "warn-2").get("warnings").is_none());
    let doc = fixture("kep-ide.yaml");
    let reply = client
        .post_json("/validate", &review("warn-3", "CREATE", &doc.json, None))
        .await
        .expect("request");
    assert!(response_of(&reply, "warn-3").get("warnings").is_none());
    server.stop().await;
}

/// Each invalid example is denied with the documented field errors (the
/// golden `*.expected.json` files), every one with its path, in the status
/// message and as a cause.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_of_each_invalid_example_gives_the_documented_messages() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let mut invalid = 0;
    for entry in std::fs::read_dir(pods_dir()).expect("fixtures") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".expected.json") else {
            continue;
        };
        let golden: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("golden")).expect("JSON");
        let errors = golden["errors"].as_array().expect("errors list");
        let doc = fixture(&format!("{stem}.yaml"));
        let reply = client
            .post_json("/validate", &review(stem, "CREATE", &doc.json, None))
            .await
            .expect("request");
        let response = response_of(&reply, stem);
        if errors.is_empty() {
            assert_eq!(response["allowed"], true, "{stem}: {response}");
            continue;
        }
        invalid += 1;
        assert_eq!(response["allowed"], false, "{stem}");
        let status = &response["status"];
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["reason"], "Invalid");
        assert_eq!(status["code"], 422);
        let message = status["message"].as_str().expect("message");
        let pod_name = doc.json["metadata"]["name"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("Pod \"{pod_name}\" is invalid: ")),
            "{message}"
        );
        let causes = status["details"]["causes"].as_array().expect("causes");
        assert_eq!(causes.len(), errors.len(), "{stem}: one cause per error");
        for (error, cause) in errors.iter().zip(causes) {
            let field = error["field"].as_str().unwrap();
            let text = error["message"].as_str().unwrap();
            assert!(message.contains(&format!("{field}: ")), "{stem}: {message}");
            assert!(message.contains(text), "{stem}: `{message}` lacks `{text}`");
            if let Some(value) = error["badValue"].as_str() {
                assert!(
                    message.contains(&format!("Invalid value: \"{value}\"")),
                    "{message}"
                );
            }
            assert_eq!(cause["field"], field);
            assert!(cause["message"].as_str().unwrap().ends_with(text));
        }
    }
    assert_eq!(
        invalid, 3,
        "row06, row10 and the windows pod are the invalid examples"
    );
    // The documented wording of one of them, whole.
    let doc = fixture("kep-row06-invalid-derived-request.yaml");
    let reply = client
        .post_json("/validate", &review("row06", "CREATE", &doc.json, None))
        .await
        .expect("request");
    assert_eq!(
        response_of(&reply, "row06")["status"]["message"],
        "Pod \"row06-invalid-derived-request\" is invalid: spec.resources.requests: \
         Invalid value: \"120Gi\": must be less than or equal to memory limit of 100Gi"
    );
    server.stop().await;
}

/// A bad body gets a 4xx with a clear message, or a denied review when the
/// review is fine but its pod is not; the server keeps serving after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_get_clear_4xx_answers_and_the_server_keeps_serving() {
    let server = TestServer::start(options()).await;
    let good = review("bad-1", "CREATE", &fixture("kep-ide.yaml").json, None);
    let body = |value: &Value| serde_json::to_vec(value).unwrap();

    let mut wrong_version = good.clone();
    wrong_version["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let mut wrong_kind = good.clone();
    wrong_kind["kind"] = json!("Pod");
    let mut no_uid = good.clone();
    no_uid["request"].as_object_mut().unwrap().remove("uid");
    let mut empty_uid = good.clone();
    empty_uid["request"]["uid"] = json!("");
    let mut huge = good.clone();
    huge["request"]["object"]["metadata"]["annotations"] = json!({"big": "x".repeat(20 << 20)});
    // 10k-deep nesting, where the review itself should be and inside a good review.
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_review = serde_json::to_string(&{
        let mut review = good.clone();
        review["request"]["object"] = json!("@@DEEP@@");
        review
    })
    .unwrap()
    .replace("\"@@DEEP@@\"", &nested);
    let mut not_utf8 = body(&good);
    let at = not_utf8.len() / 2;
    not_utf8.splice(at..at, [0xff, 0xfe]);

    // (what, path, content type, body, status, text in the answer)
    type Case<'a> = (&'a str, &'a str, &'a str, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            "not JSON",
            "/mutate",
            "application/json",
            b"hello".to_vec(),
            400,
            "not an AdmissionReview",
        ),
        (
            "empty body",
            "/validate",
            "application/json",
            Vec::new(),
            400,
            "EOF while parsing",
        ),
        (
            "wrong apiVersion",
            "/mutate",
            "application/json",
            body(&wrong_version),
            400,
            "expected apiVersion `admission.k8s.io/v1`",
        ),
        (
            "wrong kind",
            "/validate",
            "application/json",
            body(&wrong_kind),
            400,
            "got `admission.k8s.io/v1` and `Pod`",
        ),
        (
            "missing request.uid",
            "/mutate",
            "application/json",
            body(&no_uid),
            400,
            "request: missing field `uid`",
        ),
        (
            "empty request.uid",
            "/validate",
            "application/json",
            body(&empty_uid),
            400,
            "`request.uid` is empty",
        ),
        (
            "20 MB body",
            "/mutate",
            "application/json",
            body(&huge),
            413,
            "larger than the limit of 6291456 bytes",
        ),
        (
            "10k-deep nesting as the body",
            "/validate",
            "application/json",
            nested.clone().into_bytes(),
            400,
            "not an AdmissionReview: not a JSON object",
        ),
        (
            "invalid UTF-8",
            "/mutate",
            "application/json",
            not_utf8,
            400,
            "not UTF-8",
        ),
        (
            "text/plain",
            "/mutate",
            "text/plain",
            body(&good),
            415,
            "expected Content-Type application/json",
        ),
    ];
    for (what, path, content_type, payload, status, text) in cases {
        let mut client = server.client().await;
        let reply = client
            .post(path, content_type, payload)
            .await
            .unwrap_or_else(|e| panic!("{what}: no answer: {e:#}"));
        assert_eq!(reply.status, status, "{what}: {}", reply.text());
        assert!(
            reply.text().contains(text),
            "{what}: `{}` lacks `{text}`",
            reply.text()
        );
        server.assert_still_serving(what).await;
    }

    // A review that parses but whose pod does not: denied, with the path.
    let mut bad_pod = good.clone();
    bad_pod["request"]["object"]["spec"]["containers"] = json!("nope");
    let mut client = server.client().await;
    for path in ["/mutate", "/validate"] {
        let reply = client.post_json(path, &bad_pod).await.expect("request");
        let response = response_of(&reply, "bad-1");
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("request.object is not a valid Pod: spec.containers: invalid type"),
            "{message}"
        );
    }
    // A 10k-deep object in a good review: denied at the depth limit.
    for path in ["/mutate", "/validate"] {
        let reply = client
            .post(path, "application/json", deep_review.clone().into_bytes())
            .await
            .expect("request");
        let response = response_of(&reply, "bad-1");
        assert_eq!(response["allowed"], false);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("request.object is not JSON: recursion limit exceeded"),
            "{message}"
        );
    }
    // An UPDATE without the stored object.
    let update = review("upd-1", "UPDATE", &fixture("kep-ide.yaml").json, None);
    let reply = client
        .post_json("/validate", &update)
        .await
        .expect("request");
    let response = response_of(&reply, "upd-1");
    assert_eq!(response["allowed"], false);
    assert!(
        response["status"]["message"]
            .as_str()
            .unwrap()
            .contains("request.oldObject is missing")
    );

    // Wrong method and unknown path.
    assert_eq!(client.get("/mutate").await.expect("request").status, 405);
    assert_eq!(client.get("/nope").await.expect("request").status, 404);
    server.assert_still_serving("the denied reviews").await;
    server.stop().await;
}

/// Other kinds, other operations and other subresources are allowed untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_pod_kinds_and_other_operations_are_allowed_untouched() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "bogus"}}}]}}},
    });
    let mut other_kind = review("dep-1", "CREATE", &deployment, None);
    other_kind["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    other_kind["request"]["resource"] =
        json!({"group": "apps", "version": "v1", "resource": "deployments"});
    let invalid_pod = fixture("kep-row06-invalid-derived-request.yaml").json;
    let delete = review("del-1", "DELETE", &Value::Null, Some(&invalid_pod));
    let status_update = review_of(
        "st-1",
        "UPDATE",
        &invalid_pod,
        Some(&invalid_pod),
        Some("status"),
    );
    for (uid, body) in [
        ("dep-1", &other_kind),
        ("del-1", &delete),
        ("st-1", &status_update),
    ] {
        for path in ["/mutate", "/validate"] {
            let reply = client.post_json(path, body).await.expect("request");
            let response = response_of(&reply, uid);
            assert_eq!(response["allowed"], true, "{uid} {path}");
            assert!(response.get("patch").is_none(), "{uid} {path}");
            assert!(response.get("status").is_none(), "{uid} {path}");
        }
    }
    // An UPDATE that leaves the spec alone (a label change) is not judged
    // again, even for a pod that would not pass validation today.
    let mut relabelled = invalid_pod.clone();
    relabelled["metadata"]["labels"] = json!({"tier": "gold"});
    let reply = client
        .post_json(
            "/validate",
            &review("lbl-1", "UPDATE", &relabelled, Some(&invalid_pod)),
        )
        .await
        .expect("request");
    assert_eq!(response_of(&reply, "lbl-1")["allowed"], true);
    server.stop().await;
}

/// An in-place resize (UPDATE of `pods/resize` changing only resources) goes
/// through the KEP-1287 rules: a QoS class change is denied, a valid resize
/// is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resize_that_changes_the_qos_class_is_denied() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let old = resize_fixture("web-old.yaml");
    let new = resize_fixture("web-new.yaml");
    let reply = client
        .post_json(
            "/validate",
            &review_of("rs-ok", "UPDATE", &new, Some(&old), Some("resize")),
        )
        .await
        .expect("request");
    assert_eq!(response_of(&reply, "rs-ok")["allowed"], true);

    // c1 keeps its limits but lowers its requests: Guaranteed -> Burstable.
    let mut burstable = old.clone();
    burstable["spec"]["containers"][0]["resources"]["requests"] =
        json!({"cpu": "1", "memory": "1Gi"});
    for sub_resource in [Some("resize"), None] {
        let reply = client
            .post_json(
                "/validate",
                &review_of("rs-qos", "UPDATE", &burstable, Some(&old), sub_resource),
            )
            .await
            .expect("request");
        let response = response_of(&reply, "rs-qos");
        assert_eq!(response["allowed"], false, "{response}");
        let message = response["status"]["message"].as_str().unwrap();
        // pkg/apis/core/validation/validation.go ValidatePodResize (test
        // "Pod QoS change, guaranteed -> burstable" in TestValidatePodResize).
        assert!(
            message.contains("spec: Invalid value")
                && message.contains("Pod QOS Class may not change as a result of resizing"),
            "{message}"
        );
    }
    server.stop().await;
}

/// `dryRun: true` gets the same answer: the webhook has no side effects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_reviews_get_the_same_answer() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let doc = fixture("kep-ide.yaml");
    let real = review("dry-1", "CREATE", &doc.json, None);
    let mut dry = real.clone();
    dry["request"]["dryRun"] = json!(true);
    for path in ["/mutate", "/validate"] {
        let a = response_of(
            &client.post_json(path, &real).await.expect("request"),
            "dry-1",
        );
        let b = response_of(
            &client.post_json(path, &dry).await.expect("request"),
            "dry-1",
        );
        assert_eq!(a, b, "{path}");
    }
    server.stop().await;
}

/// A review that misses the request deadline gets a 504 that says so (here
/// the client sends the headers and then stalls before the body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_past_the_request_deadline_gets_a_clear_504() {
    let server = TestServer::start(WebhookOptions {
        request_timeout: Duration::from_millis(200),
        ..options()
    })
    .await;
    let mut stream = tls_connect(server.server.local_addr(), server.tls.clone())
        .await
        .expect("connect");
    stream
        .write_all(
            b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
        )
        .await
        .expect("write");
    stream.flush().await.expect("flush");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&answer).contains("deadline\n") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within 5 s");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 504"), "{text}");
    assert!(
        text.contains("the review did not finish within the 200 ms request deadline"),
        "{text}"
    );
    server.assert_still_serving("a timed-out review").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let server = TestServer::start(options()).await;
    let mut client = server.client().await;
    let health = client.get("/healthz").await.expect("request");
    assert_eq!((health.status, health.text().as_str()), (200, "ok\n"));
    let ready = client.get("/readyz").await.expect("request");
    assert_eq!(ready.status, 200);
    let policy = slot().current();
    assert_eq!(
        ready.text(),
        format!(
            "ready: policy {} (sha256:{})\n",
            policy.info().policy_version,
            &policy.digest()[..12]
        )
    );
    let doc = fixture("kep-ide.yaml");
    client
        .post_json("/mutate", &review("m-1", "CREATE", &doc.json, None))
        .await
        .expect("request");
    let invalid = fixture("windows-pod-level.yaml");
    client
        .post_json("/validate", &review("v-1", "CREATE", &invalid.json, None))
        .await
        .expect("request");
    client
        .post("/validate", "application/json", b"{".to_vec())
        .await
        .expect("request");

    let metrics = client.get("/metrics").await.expect("request");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .content_type
            .starts_with("application/openmetrics-text")
    );
    let text = metrics.text();
    let warm = format!(
        "podpolicy_webhook_warm_instances {}",
        options().max_concurrency
    );
    for line in [
        "podpolicy_webhook_requests_total{endpoint=\"mutate\",result=\"patched\"} 1",
        "podpolicy_webhook_requests_total{endpoint=\"validate\",result=\"denied\"} 1",
        "podpolicy_webhook_requests_total{endpoint=\"validate\",result=\"bad_request\"} 1",
        "podpolicy_webhook_request_duration_seconds_count{endpoint=\"mutate\"} 1",
        "podpolicy_webhook_evaluations_in_flight 0",
        // A count that only grows is a counter, so that rate() works on it.
        "# TYPE podpolicy_webhook_policy_swaps counter",
        "podpolicy_webhook_policy_swaps_total 0",
        // Every evaluation thread holds its warm instance.
        warm.as_str(),
    ] {
        assert!(text.contains(line), "`{line}` missing in:\n{text}");
    }
    let info = format!(
        "podpolicy_webhook_policy_info{{digest=\"{}\",policy_version=\"{}\",wit_version=\"{}\"",
        policy.digest(),
        policy.info().policy_version,
        policy.info().wit_version
    );
    assert!(text.contains(&info), "`{info}` missing in:\n{text}");
    server.stop().await;
}

/// Many connections at once with a concurrency bound of 1: all answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reviews_under_a_concurrency_bound_all_succeed() {
    let server = TestServer::start(WebhookOptions {
        max_concurrency: 1,
        ..options()
    })
    .await;
    let doc = Arc::new(fixture("kep-ide.yaml"));
    let mut tasks = Vec::new();
    for connection in 0..8 {
        let mut client = server.client().await;
        let doc = doc.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..5 {
                let uid = format!("c{connection}-{i}");
                let path = if i % 2 == 0 { "/mutate" } else { "/validate" };
                let reply = client
                    .post_json(path, &review(&uid, "CREATE", &doc.json, None))
                    .await
                    .expect("request");
                assert_eq!(response_of(&reply, &uid)["allowed"], true);
            }
        }));
    }
    for task in tasks {
        task.await.expect("client task");
    }
    server.stop().await;
}

/// The embedded component with a custom section appended: the same policy
/// under another digest, so that a swap is a real change of version.
fn relabelled_policy() -> PolicyRuntime {
    let mut bytes = podpolicy::runtime::EMBEDDED_POLICY.to_vec();
    let name = b"podpolicy-test";
    let payload = b"another version";
    // Custom section: id 0, size, name (length-prefixed), payload; every length < 128.
    bytes.push(0);
    bytes.push((1 + name.len() + payload.len()) as u8);
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(payload);
    webhook_policy(&bytes)
}

/// Swaps and rollbacks of the slot while connections stay open: every
/// review is answered, /metrics and /readyz name the version serving now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_swap_and_rollback_while_serving() {
    let embedded = webhook_policy(podpolicy::runtime::EMBEDDED_POLICY);
    let first_digest = embedded.digest().to_string();
    // Compiled before the connection opens: a compile can outlast the
    // server's idle header timeout, which would close it.
    let candidate = relabelled_policy();
    let slot = Arc::new(PolicySlot::new(embedded));
    let server = TestServer::start_with(options(), slot.clone()).await;
    let mut client = server.client().await;
    let doc = fixture("kep-ide.yaml");
    let mut check = async |round: &str, digest: &str, swaps: u64| {
        for path in ["/mutate", "/validate"] {
            let uid = format!("{round}{path}");
            let reply = client
                .post_json(path, &review(&uid, "CREATE", &doc.json, None))
                .await
                .expect("request");
            assert_eq!(response_of(&reply, &uid)["allowed"], true, "{round} {path}");
        }
        let ready = client.get("/readyz").await.expect("request").text();
        assert!(ready.contains(&digest[..12]), "{round}: {ready}");
        let metrics = client.get("/metrics").await.expect("request").text();
        assert!(metrics.contains(&format!("digest=\"{digest}\"")), "{round}");
        let counted = format!("\npodpolicy_webhook_policy_swaps_total {swaps}\n");
        assert!(
            metrics.contains(&counted),
            "{round}: `{counted}` missing in:\n{metrics}"
        );
    };
    check("before", &first_digest, 0).await;
    let second_digest = candidate.digest().to_string();
    assert_ne!(first_digest, second_digest);
    slot.activate(candidate, |_, _| Ok(())).expect("swap");
    check("after the swap", &second_digest, 1).await;
    slot.rollback().expect("rollback");
    check("after the rollback", &first_digest, 2).await;
    server.stop().await;
}

// ---------------------------------------------------------------------------
// deploy/ manifests
// ---------------------------------------------------------------------------

fn deploy_documents() -> Vec<(PathBuf, Value)> {
    let dir = crate::util::workspace().join("deploy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/ exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if !value.is_null() {
                docs.push((path.clone(), value));
            }
        }
    }
    docs
}

/// Deserialise strictly into the typed struct: an unknown or misspelt field
/// is an error, as `kubectl apply --validate=strict` would say.
fn typed<T: serde::de::DeserializeOwned>(path: &Path, value: &Value) -> T {
    let mut unknown = Vec::new();
    let typed: T =
        serde_ignored::deserialize(value.clone(), |field| unknown.push(field.to_string()))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        unknown.is_empty(),
        "{}: unknown fields {unknown:?}",
        path.display()
    );
    typed
}

#[test]
fn deploy_manifests_parse_as_their_kinds_and_match_the_server() {
    use k8s_openapi::api::admissionregistration::v1 as admission;
    use k8s_openapi::api::apps::v1 as apps;
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::policy::v1 as policy;

    let docs = deploy_documents();
    let mut kinds = Vec::new();
    let mut mutating = None;
    let mut validating = None;
    let mut deployment = None;
    let mut service = None;
    let mut daemonset = None;
    for (path, value) in &docs {
        let kind = value["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no kind", path.display()));
        kinds.push(kind.to_string());
        match kind {
            "Namespace" => {
                let ns: core::Namespace = typed(path, value);
                assert_eq!(ns.metadata.name.as_deref(), Some("podpolicy-system"));
            }
            "ServiceAccount" => {
                let sa: core::ServiceAccount = typed(path, value);
                assert_eq!(sa.metadata.namespace.as_deref(), Some("podpolicy-system"));
            }
            "Deployment" => deployment = Some(typed::<apps::Deployment>(path, value)),
            "Service" => service = Some(typed::<core::Service>(path, value)),
            "PodDisruptionBudget" => {
                let _: policy::PodDisruptionBudget = typed(path, value);
            }
            "MutatingWebhookConfiguration" => {
                mutating = Some(typed::<admission::MutatingWebhookConfiguration>(
                    path, value,
                ))
            }
            "ValidatingWebhookConfiguration" => {
                validating = Some(typed::<admission::ValidatingWebhookConfiguration>(
                    path, value,
                ))
            }
            "DaemonSet" => daemonset = Some(typed::<apps::DaemonSet>(path, value)),
            other => panic!("{}: unexpected kind {other}", path.display()),
        }
    }
    for kind in [
        "Namespace",
        "ServiceAccount",
        "Deployment",
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "DaemonSet",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "deploy/ has no {kind}");
    }

    // The webhook Deployment: 2 replicas running `podpolicy webhook` with the TLS secret.
    let deployment = deployment.expect("deployment");
    let spec = deployment.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.as_ref().expect("pod spec");
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    assert_eq!(
        args.first().map(String::as_str),
        Some("webhook"),
        "{args:?}"
    );
    for flag in ["--tls-cert", "--tls-key", "--listen"] {
        assert!(
            args.iter().any(|a| a.starts_with(flag)),
            "{flag} missing in {args:?}"
        );
    }
    let probe_path = |probe: &Option<core::Probe>| {
        probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.path.clone())
    };
    assert_eq!(
        probe_path(&container.readiness_probe).as_deref(),
        Some("/readyz")
    );
    assert_eq!(
        probe_path(&container.liveness_probe).as_deref(),
        Some("/healthz")
    );
    // Every evaluation thread keeps an instance that can grow to the memory
    // cap: the flags are in range and the threads fit the memory limit.
    let flag = |name: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} missing in {args:?}"))
            .to_string()
    };
    let concurrency = podpolicy::webhook::flags::max_concurrency(&flag("--max-concurrency"))
        .expect("--max-concurrency in range");
    podpolicy::webhook::flags::max_connections(&flag("--max-connections"))
        .expect("--max-connections in range");
    podpolicy::webhook::flags::request_timeout_ms(&flag("--request-timeout"))
        .expect("--request-timeout in range");
    let memory_limit = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        .map(|q| q.0.clone())
        .expect("a memory limit");
    let mebibytes: usize = memory_limit
        .strip_suffix("Mi")
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("memory limit {memory_limit} is not in Mi"));
    assert!(
        concurrency * Limits::default().memory_bytes <= mebibytes << 20,
        "--max-concurrency={concurrency} instances of up to {} MiB do not fit the {memory_limit} limit",
        Limits::default().memory_bytes >> 20
    );
    let secret_volume = pod
        .volumes
        .iter()
        .flatten()
        .find_map(|v| v.secret.as_ref())
        .expect("a TLS secret volume");
    assert_eq!(
        secret_volume.secret_name.as_deref(),
        Some("podpolicy-webhook-tls")
    );

    let service = service.expect("service");
    let service_name = service.metadata.name.clone().expect("service name");
    let service_port = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .expect("ports")[0]
        .port;

    // Both configurations: failurePolicy, sideEffects None, timeoutSeconds,
    // v1 reviews, kube-system excluded, paths that the server routes.
    let check_common =
        |name: &str,
         client: &admission::WebhookClientConfig,
         failure: &Option<String>,
         side_effects: &str,
         timeout: Option<i32>,
         versions: &[String],
         selector: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
         expected_path: &str| {
            assert_eq!(failure.as_deref(), Some("Fail"), "{name}: failurePolicy");
            assert_eq!(side_effects, "None", "{name}: sideEffects");
            let timeout = timeout.expect("timeoutSeconds");
            assert!(
                (1..=10).contains(&timeout)
                    && Duration::from_secs(timeout as u64)
                        > podpolicy::webhook::DEFAULT_REQUEST_TIMEOUT,
                "{name}: timeoutSeconds {timeout} must exceed the server's request deadline"
            );
            assert_eq!(versions, ["v1"], "{name}: admissionReviewVersions");
            let expressions = selector
                .as_ref()
                .and_then(|s| s.match_expressions.clone())
                .unwrap_or_default();
            assert!(
                expressions
                    .iter()
                    .any(|e| e.key == "kubernetes.io/metadata.name"
                        && e.operator == "NotIn"
                        && e.values.iter().flatten().any(|v| v == "kube-system")),
                "{name}: namespaceSelector must exclude kube-system: {expressions:?}"
            );
            assert!(
                expressions.iter().any(|e| e.operator == "NotIn"
                    && e.values.iter().flatten().any(|v| v == "podpolicy-system")),
                "{name}: the webhook's own namespace must be excluded (bootstrap): {expressions:?}"
            );
            let svc = client.service.as_ref().expect("service reference");
            assert_eq!(svc.name, service_name, "{name}");
            assert_eq!(svc.namespace, "podpolicy-system", "{name}");
            assert_eq!(svc.port, Some(service_port), "{name}");
            assert_eq!(svc.path.as_deref(), Some(expected_path), "{name}");
            assert!(
                client.ca_bundle.is_none(),
                "{name}: caBundle is set at install time"
            );
        };
    let rules_cover =
        |name: &str, rules: &[admission::RuleWithOperations], ops: &[&str], resources: &[&str]| {
            for op in ops {
                for resource in resources {
                    assert!(
                        rules
                            .iter()
                            .any(|r| r.operations.iter().flatten().any(|o| o == op)
                                && r.resources.iter().flatten().any(|x| x == resource)
                                && r.api_groups.iter().flatten().any(|g| g.is_empty())
                                && r.api_versions.iter().flatten().any(|v| v == "v1")),
                        "{name}: no rule for {op} {resource}"
                    );
                }
            }
        };
    let mutating = mutating.expect("mutating configuration");
    let hooks = mutating.webhooks.expect("webhooks");
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    check_common(
        &hook.name,
        &hook.client_config,
        &hook.failure_policy,
        &hook.side_effects,
        hook.timeout_seconds,
        &hook.admission_review_versions,
        &hook.namespace_selector,
        "/mutate",
    );
    rules_cover(
        &hook.name,
        hook.rules.as_deref().unwrap_or_default(),
        &["CREATE"],
        &["pods"],
    );
    let validating = validating.expect("validating configuration");
    let hooks = validating.webhooks.expect("webhooks");
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    check_common(
        &hook.name,
        &hook.client_config,
        &hook.failure_policy,
        &hook.side_effects,
        hook.timeout_seconds,
        &hook.admission_review_versions,
        &hook.namespace_selector,
        "/validate",
    );
    rules_cover(
        &hook.name,
        hook.rules.as_deref().unwrap_or_default(),
        &["CREATE", "UPDATE"],
        &["pods", "pods/resize"],
    );

    // The node agent: `podpolicy agent` with the host paths it needs.
    let daemonset = daemonset.expect("daemonset");
    let template = &daemonset.spec.as_ref().expect("spec").template;
    let pod = template.spec.as_ref().expect("pod spec");
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    assert_eq!(
        args,
        [
            "agent",
            "--cgroup-root",
            "/sys/fs/cgroup",
            "--policy-dir",
            "/var/lib/podpolicy/policies",
            "--pods-dir",
            "/etc/kubernetes/podpolicy/pods",
            "--node",
            "/etc/kubernetes/podpolicy/node.yaml",
            "--kubelet-config",
            "/var/lib/kubelet/config.yaml",
            "--metrics-addr",
            "0.0.0.0:9464",
            "--proc-root",
            "/host/proc"
        ]
    );
    // Metrics on the pod IP, on a named port, with scrape annotations.
    let metrics_addr: std::net::SocketAddr = args
        .iter()
        .skip_while(|a| *a != "--metrics-addr")
        .nth(1)
        .expect("--metrics-addr")
        .parse()
        .expect("--metrics-addr is HOST:PORT");
    assert!(
        !metrics_addr.ip().is_loopback(),
        "{metrics_addr}: Prometheus and the kubelet's probes come from outside the pod"
    );
    let ports = container.ports.clone().unwrap_or_default();
    let metrics_port = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a container port named metrics");
    assert_eq!(metrics_port.container_port, i32::from(metrics_addr.port()));
    let annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    assert_eq!(
        annotations.get("prometheus.io/scrape").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        annotations.get("prometheus.io/port"),
        Some(&metrics_addr.port().to_string())
    );
    assert_eq!(
        annotations.get("prometheus.io/path").map(String::as_str),
        Some("/metrics")
    );
    // Probes on that port, at paths the agent's endpoint serves.
    let agent_metrics = std::sync::Arc::new(podpolicy::metrics::Metrics::new());
    let served = podpolicy::metrics::serve("127.0.0.1:0".parse().unwrap(), agent_metrics.clone())
        .expect("the agent's endpoint starts");
    for (probe, path, before_a_pass) in [
        (&container.liveness_probe, "/healthz", 200),
        (&container.readiness_probe, "/readyz", 503),
    ] {
        let get = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("no httpGet probe for {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(
            get.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into())
        );
        assert_eq!(plain_get_status(served, path), before_a_pass, "{path}");
    }
    podpolicy::metrics::Metrics::count(&agent_metrics.reconciles, "ok");
    assert_eq!(plain_get_status(served, "/readyz"), 200);
    assert_eq!(
        pod.host_pid,
        Some(true),
        "the agent writes oom_score_adj of host processes"
    );
    let host_paths: Vec<(String, String)> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| Some((v.name.clone(), v.host_path.as_ref()?.path.clone())))
        .collect();
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    for (path, read_only) in [
        ("/sys/fs/cgroup", false),
        ("/proc", false),
        ("/sys/devices/system", true),
        ("/var/lib/podpolicy", false),
        ("/etc/kubernetes/podpolicy/pods", true),
        ("/etc/kubernetes/podpolicy/node.yaml", true),
        ("/var/lib/kubelet/config.yaml", true),
    ] {
        let (volume, _) = host_paths
            .iter()
            .find(|(_, p)| p == path)
            .unwrap_or_else(|| panic!("no hostPath volume for {path}: {host_paths:?}"));
        let mount = mounts
            .iter()
            .find(|m| &m.name == volume)
            .unwrap_or_else(|| panic!("{path} is not mounted"));
        assert_eq!(
            mount.read_only.unwrap_or(false),
            read_only,
            "{path}: readOnly"
        );
    }
}

/// The status of a plain HTTP GET (the agent's metrics endpoint).
fn plain_get_status(addr: std::net::SocketAddr, path: &str) -> u16 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("an answer");
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text}"))
}

// ---------------------------------------------------------------------------
// The `podpolicy webhook` command
// ---------------------------------------------------------------------------

/// A `podpolicy webhook` process on 127.0.0.1:0 with the test certificate.
/// Its stderr is drained by a thread (a full pipe would stall it); the
/// process is killed if the test ends without [`WebhookProcess::terminate`].
struct WebhookProcess {
    child: std::process::Child,
    addr: std::net::SocketAddr,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl WebhookProcess {
    fn spawn(name: &str, args: &[&str], env: &[(&str, &str)]) -> WebhookProcess {
        use std::io::BufRead;
        let dir = crate::util::temp_dir(name);
        let cert = cert();
        std::fs::write(dir.join("tls.crt"), &cert.cert_pem).expect("write cert");
        std::fs::write(dir.join("tls.key"), &cert.key_pem).expect("write key");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_podpolicy"));
        command
            .args(["webhook", "--listen", "127.0.0.1:0", "--tls-cert"])
            .arg(dir.join("tls.crt"))
            .arg("--tls-key")
            .arg(dir.join("tls.key"))
            .args(args)
            .env("PODPOLICY_CACHE_DIR", crate::util::cache_dir())
            .env_remove("PODPOLICY_LOG")
            .env_remove("NO_COLOR")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("podpolicy webhook starts");
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        // Log lines may come first; the address is on the `serving` line.
        let mut seen = String::new();
        let addr = loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).expect("stderr") == 0 {
                let _ = child.kill();
                panic!("podpolicy webhook ended before serving:\n{seen}");
            }
            seen.push_str(&line);
            if let Some(rest) = line.strip_prefix("podpolicy webhook: serving https://") {
                break rest
                    .split_whitespace()
                    .next()
                    .and_then(|a| a.parse().ok())
                    .unwrap_or_else(|| panic!("no address in: {line}"));
            }
        };
        let drain = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
            seen + &rest
        });
        WebhookProcess {
            child,
            addr,
            stderr: Some(drain),
        }
    }

    async fn client(&self) -> Client {
        Client::connect(self.addr, client_config(&cert().cert_der))
            .await
            .expect("connects")
    }

    /// SIGTERM, then the exit status and everything it wrote on stderr.
    fn terminate(mut self) -> (std::process::ExitStatus, String) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
        let status = self.child.wait().expect("exits");
        let stderr = self
            .stderr
            .take()
            .expect("stderr")
            .join()
            .expect("stderr thread");
        (status, stderr)
    }
}

impl Drop for WebhookProcess {
    fn drop(&mut self) {
        if self.stderr.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The binary serves on the address it prints, answers over HTTPS, and ends
/// cleanly (exit 0) on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_command_serves_and_stops_on_sigterm() {
    let process = WebhookProcess::spawn("webhook-cli", &[], &[]);
    let mut client = process.client().await;
    assert_eq!(client.get("/healthz").await.expect("request").status, 200);
    let doc = fixture("kep-ide.yaml");
    let reply = client
        .post_json("/mutate", &review("cli-1", "CREATE", &doc.json, None))
        .await
        .expect("request");
    assert_eq!(response_of(&reply, "cli-1")["patchType"], "JSONPatch");
    drop(client);
    let (status, stderr) = process.terminate();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("shutting down"), "{stderr}");
}

/// More evaluation threads than the 64 instances the wasmtime pool used to
/// hold: `--max-concurrency 100` sizes the pool before the policy loads,
/// every thread holds its warm instance, and 100 reviews sent at once (100
/// connections) all get the right answer, with room left for /readyz.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_command_answers_100_concurrent_reviews_at_max_concurrency_100() {
    const N: usize = 100;
    let process = WebhookProcess::spawn("webhook-100", &["--max-concurrency", "100"], &[]);
    let doc = Arc::new(fixture("kep-ide.yaml"));
    let start = Arc::new(tokio::sync::Barrier::new(N));
    let mut tasks = Vec::new();
    for i in 0..N {
        let mut client = process.client().await;
        let (doc, start) = (doc.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            let uid = format!("many-{i}");
            let body = review(&uid, "CREATE", &doc.json, None);
            start.wait().await;
            let reply = client.post_json("/mutate", &body).await.expect("request");
            let response = response_of(&reply, &uid);
            assert_eq!(response["allowed"], true, "{uid}");
            assert_eq!(
                decoded_patch(&response),
                json!([{"op": "add", "path": "/spec/resources/requests", "value": {"cpu": "500m", "memory": "128Mi"}}]),
                "{uid}"
            );
        }));
    }
    for task in tasks {
        task.await
            .expect("every review answered 200 with the patch");
    }
    let mut client = process.client().await;
    let metrics = client.get("/metrics").await.expect("request").text();
    for line in [
        format!("\npodpolicy_webhook_warm_instances {N}\n"),
        format!(
            "\npodpolicy_webhook_requests_total{{endpoint=\"mutate\",result=\"patched\"}} {N}\n"
        ),
    ] {
        assert!(
            metrics.contains(&line),
            "`{}` missing in:\n{metrics}",
            line.trim()
        );
    }
    assert!(
        !metrics.contains("result=\"error\""),
        "failed reviews:\n{metrics}"
    );
    let ready = client.get("/readyz").await.expect("request");
    assert_eq!(ready.status, 200, "{}", ready.text());
    drop(client);
    let (status, stderr) = process.terminate();
    assert!(status.success(), "{status}: {stderr}");
}

/// Numeric flags out of range (or not numbers): exit 2 before anything
/// starts, with clap's message naming the flag, and the range.
#[test]
fn the_webhook_command_refuses_out_of_range_flags() {
    for (flag, value, range) in [
        ("--max-concurrency", "100000", "1..=1024"),
        ("--max-concurrency", "0", "1..=1024"),
        ("--request-timeout", "0", "1..=30000"),
        ("--request-timeout", "86400000", "1..=30000"),
        ("--max-body-bytes", "0", "4096..=67108864"),
        ("--max-body-bytes", "1099511627776", "4096..=67108864"),
        ("--max-connections", "0", "1..=65536"),
        ("--max-connections", "many", "1..=65536"),
    ] {
        let (code, _, stderr) = crate::util::podpolicy(&[
            "webhook",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "missing.crt",
            "--tls-key",
            "missing.key",
            flag,
            value,
        ]);
        assert_eq!(code, 2, "{flag} {value}: {stderr}");
        assert!(
            stderr.contains(&format!("invalid value '{value}' for '{flag}")),
            "{flag} {value}: {stderr}"
        );
        assert!(stderr.contains(range), "{flag} {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{flag} {value}: {stderr}");
    }
}

/// The same bounds for options built in code: `start` refuses them, naming
/// the flag, before it binds anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_refuses_options_out_of_range() {
    let tls = Arc::new(
        podpolicy::webhook::tls::server_config_from_pem(
            cert().cert_pem.as_bytes(),
            cert().key_pem.as_bytes(),
        )
        .expect("TLS config"),
    );
    for (options, flag) in [
        (
            WebhookOptions {
                max_concurrency: 0,
                ..options()
            },
            "--max-concurrency: 0 is not in 1..=1024",
        ),
        (
            WebhookOptions {
                max_concurrency: 100_000,
                ..options()
            },
            "--max-concurrency: 100000 is not in 1..=1024",
        ),
        (
            WebhookOptions {
                request_timeout: Duration::ZERO,
                ..options()
            },
            "--request-timeout: 0 is not in 1..=30000",
        ),
        (
            WebhookOptions {
                max_body_bytes: 0,
                ..options()
            },
            "--max-body-bytes: 0 is not in 4096..=67108864",
        ),
        (
            WebhookOptions {
                max_connections: 0,
                ..options()
            },
            "--max-connections: 0 is not in 1..=65536",
        ),
    ] {
        let error = match start(options, tls.clone(), slot()).await {
            Ok(_) => panic!("{flag}: started"),
            Err(e) => format!("{e:#}"),
        };
        assert!(error.starts_with(flag), "{error}");
    }
}

/// Whether the server has closed `stream` already (without waiting).
fn closed_now(stream: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    stream.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 1024];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    stream.set_nonblocking(false).expect("blocking");
    closed
}

/// Wait until the server closes `stream` (a 30 s guard against a hang).
fn wait_closed(stream: &mut std::net::TcpStream) {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("the server kept an idle connection open for 30 s")
            }
            Err(_) => return,
        }
    }
}

/// `--max-connections 2`: a connection that never starts its TLS handshake
/// and one that stops inside its request headers hold both places; the
/// server closes them after the header timeout, a third idle one waits for
/// a place and is closed in turn, and a real review, which could only be
/// accepted once both places were free again, is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_half_sent_connections_are_closed_and_the_connection_cap_holds() {
    let server = TestServer::start(WebhookOptions {
        max_connections: 2,
        header_timeout: Duration::from_millis(300),
        ..options()
    })
    .await;
    let addr = server.server.local_addr();
    let mut idle = std::net::TcpStream::connect(addr).expect("connect");
    let mut half = tls_connect(addr, server.tls.clone())
        .await
        .expect("the second place: TLS handshake");
    half.write_all(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl")
        .await
        .expect("write");
    half.flush().await.expect("flush");
    let mut beyond = std::net::TcpStream::connect(addr).expect("connect");

    server
        .assert_still_serving("idle connections at the cap")
        .await;
    // Connections are accepted in order: the review got a place only after
    // the server had closed the two that held them.
    assert!(closed_now(&mut idle), "the idle connection is still open");
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 256];
        loop {
            match half.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "the half-sent request is still open after 30 s"
    );
    wait_closed(&mut beyond);
    server.stop().await;
}

/// `--max-connections 1`: a client that sends request after request over
/// TLS and never reads an answer fills its socket buffers, so the server's
/// write of the next answer waits; it is cut off after the header timeout,
/// and a real review, which needs its place, is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_answers_loses_its_connection() {
    let server = TestServer::start(WebhookOptions {
        max_connections: 1,
        header_timeout: Duration::from_millis(300),
        ..options()
    })
    .await;
    let addr = server.server.local_addr();
    let mut hog = tls_connect(addr, server.tls.clone())
        .await
        .expect("the only place: TLS handshake");
    let pipelining = tokio::spawn(async move {
        let request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
        for _ in 0..1_000_000 {
            if hog.write_all(request).await.is_err() {
                return;
            }
        }
        panic!("a million requests written and never cut off");
    });
    tokio::time::timeout(
        Duration::from_secs(30),
        server.assert_still_serving("a client that never reads"),
    )
    .await
    .expect("a review answered within 30 s: the hog's place was freed");
    tokio::time::timeout(Duration::from_secs(30), pipelining)
        .await
        .expect("the hog's writes end once its connection is closed")
        .expect("the pipelining task");
    server.stop().await;
}

/// Logs written to a pipe (a pod's stderr, journald) carry no ANSI colour
/// codes; here at debug level, with a bad review to log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_command_logs_plain_text_to_a_pipe() {
    let process = WebhookProcess::spawn("webhook-logs", &[], &[("PODPOLICY_LOG", "debug")]);
    let mut client = process.client().await;
    let reply = client
        .post("/validate", "application/json", b"{".to_vec())
        .await
        .expect("request");
    assert_eq!(reply.status, 400);
    drop(client);
    let (status, stderr) = process.terminate();
    assert!(status.success(), "{status}: {stderr}");
    assert!(
        stderr.contains("bad review"),
        "the debug log is missing:\n{stderr}"
    );
    assert!(
        !stderr.contains("\x1b["),
        "ANSI escape codes in the log:\n{}",
        stderr.escape_debug()
    );
}

/// Unreadable or mismatched TLS files: exit 2 with a message naming them.
#[test]
fn the_webhook_command_refuses_bad_tls_files() {
    let dir = crate::util::temp_dir("webhook-bad-tls");
    std::fs::write(dir.join("empty.pem"), "").expect("write");
    let missing = dir.join("missing.pem");
    let empty = dir.join("empty.pem");
    let (code, _, stderr) = crate::util::podpolicy(&[
        "webhook",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        missing.to_str().unwrap(),
        "--tls-key",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("missing.pem"), "{stderr}");
    let (code, _, stderr) = crate::util::podpolicy(&[
        "webhook",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        empty.to_str().unwrap(),
        "--tls-key",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no CERTIFICATE block"), "{stderr}");
}
