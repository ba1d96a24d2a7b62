//! `podpolicy review`: AdmissionReview files run offline through the
//! webhook's /mutate and /validate logic (fixtures/reviews).

use serde_json::{Value, json};

use crate::util::{podpolicy, podpolicy_with_stdin};

fn review_json(file: &str) -> (i32, Value, String) {
    let (code, stdout, stderr) = podpolicy(&["review", file, "-o", "json"]);
    let value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (code, value, stderr)
}

#[test]
fn a_create_is_defaulted_with_a_decoded_patch_and_allowed() {
    let (code, v, stderr) = review_json("fixtures/reviews/create-patched.json");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["kind"], "ReviewReport");
    assert_eq!(v["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(v["allowed"], true);
    assert_eq!(v["mutate"]["outcome"], "patched");
    let response = &v["mutate"]["review"]["response"];
    assert_eq!(v["mutate"]["review"]["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["patchType"], "JSONPatch");
    assert!(response["patch"].is_string());
    // API-server defaulting: requests default to the limits.
    assert_eq!(
        v["mutate"]["patch"],
        json!([{"op": "add", "path": "/spec/containers/0/resources/requests",
                "value": {"cpu": "500m", "memory": "256Mi"}}])
    );
    assert_eq!(v["validate"]["outcome"], "allowed");
    assert_eq!(v["validate"]["patch"], Value::Null);

    let (code, table, _) = podpolicy(&["review", "fixtures/reviews/create-patched.json"]);
    assert_eq!(code, 0);
    assert!(table.contains("mutate    patched"), "{table}");
    assert!(
        table.contains("patch: add /spec/containers/0/resources/requests {\"cpu\":\"500m\",\"memory\":\"256Mi\"}"),
        "{table}"
    );
    assert!(table.contains("validate  allowed"), "{table}");
}

#[test]
fn an_invalid_pod_is_denied_with_its_field_path() {
    let (code, v, stderr) = review_json("fixtures/reviews/create-denied.json");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["allowed"], false);
    let status = &v["validate"]["review"]["response"]["status"];
    assert_eq!(v["validate"]["outcome"], "denied");
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    let causes = status["details"]["causes"].as_array().unwrap();
    assert!(
        causes
            .iter()
            .any(|c| c["field"] == "spec.containers[0].resources.requests"
                && c["message"]
                    == "Invalid value: \"2Gi\": must be less than or equal to memory limit of 1Gi"),
        "{status}"
    );
}

#[test]
fn a_resource_only_update_runs_the_resize_rules() {
    // A CPU resize of a Burstable pod: valid.
    let (code, v, stderr) = review_json("fixtures/reviews/resize-update.yaml");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["uid"], "resize-1");
    assert_eq!(v["validate"]["outcome"], "allowed");
    assert_eq!(v["mutate"]["outcome"], "allowed");
    // Guaranteed -> Burstable: the QoS class may not change.
    let (code, v, stderr) = review_json("fixtures/reviews/resize-qos-change.yaml");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["validate"]["outcome"], "denied");
    let message = v["validate"]["review"]["response"]["status"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains("Pod \"db\""), "{message}");
    assert!(
        message.contains("Pod QOS Class may not change as a result of resizing"),
        "{message}"
    );
}

/// Above the node's allocatable the kubelet would say Infeasible, but the API
/// server's `PodResizeValidator` admission plugin refuses the resize first:
/// 403 Forbidden, as `admission.NewForbidden` answers. Within it, the same
/// node allows the resize; so does it a pod bound elsewhere or not bound.
#[test]
fn a_resize_above_the_node_allocatable_is_forbidden() {
    let on_small_node = |file: &str| {
        let args = ["review", "--node", "fixtures/nodes/small-v1.yaml", file];
        let (code, stdout, stderr) = podpolicy(&[&args[..], &["-o", "json"]].concat());
        let value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        (code, value, stderr)
    };
    let (code, v, stderr) = on_small_node("fixtures/reviews/resize-beyond-node.yaml");
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["validate"]["outcome"], "denied");
    let status = &v["validate"]["review"]["response"]["status"];
    assert_eq!(status["code"], 403, "{status}");
    assert_eq!(status["reason"], "Forbidden", "{status}");
    assert_eq!(
        status["message"],
        "pods \"web\" is forbidden: node didn't have enough allocatable resources: \
         cpu, requested: 64000, allocatable: 4000"
    );
    let (code, v, stderr) = on_small_node("fixtures/reviews/resize-update.yaml");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(v["validate"]["outcome"], "allowed");

    // The plugin judges a bound pod against its own node: the same resize of
    // a pod bound to another node, or not bound yet, is not judged against
    // old-node's allocatable (the API server judges it on the pod's node).
    let fixture = std::fs::read_to_string(
        crate::util::workspace().join("fixtures/reviews/resize-beyond-node.yaml"),
    )
    .unwrap();
    assert_eq!(fixture.matches("nodeName: old-node").count(), 2);
    let dir = crate::util::temp_dir("resize-bound-elsewhere");
    for (case, bound) in [("elsewhere", "nodeName: node-b"), ("unbound", "")] {
        let path = dir.join(format!("{case}.yaml"));
        std::fs::write(&path, fixture.replace("nodeName: old-node", bound)).unwrap();
        let (code, v, stderr) = on_small_node(path.to_str().unwrap());
        assert_eq!(code, 0, "{case}: {stderr}");
        assert_eq!(v["validate"]["outcome"], "allowed", "{case}: {v}");
    }
}

#[test]
fn a_malformed_review_is_an_error_naming_the_field() {
    let (code, stdout, stderr) = podpolicy(&["review", "fixtures/reviews/malformed.json"]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(
        stderr.starts_with("podpolicy: fixtures/reviews/malformed.json: "),
        "{stderr}"
    );
    assert!(stderr.contains("request.operation"), "{stderr}");
    // Not YAML, not JSON.
    let (code, _, stderr) = podpolicy_with_stdin(&["review", "-"], Some(b"{ nope"));
    assert_eq!(code, 2);
    assert!(stderr.contains("<stdin>"), "{stderr}");
    // YAML of another kind.
    let (code, _, stderr) = podpolicy_with_stdin(
        &["review", "-"],
        Some(b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"),
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("AdmissionReview"), "{stderr}");
    assert!(!stderr.contains("panicked"));
}
