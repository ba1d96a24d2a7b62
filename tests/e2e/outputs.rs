//! Every JSON / YAML output of the CLI: `apiVersion` and `kind`, valid
//! against its schema in `schemas/output/`, camelCase keys, and Kubernetes
//! names for enums (never Rust debug text such as `cpuisolation::host`).

use serde_json::Value;

use crate::util::{podpolicy, temp_dir, workspace};

fn schema(kind: &str) -> jsonschema::Validator {
    let path = workspace().join(format!("schemas/output/{kind}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{kind} schema: {e}"))
}

/// Run a command printing JSON, check it against the schema of `kind`.
#[track_caller]
pub fn check(kind: &str, args: &[&str], codes: &[i32]) -> Value {
    let (code, stdout, stderr) = podpolicy(args);
    assert!(
        codes.contains(&code),
        "{args:?}: exit {code}\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains("::"),
        "{args:?}: Rust debug text in\n{stdout}"
    );
    let value: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}\n{stdout}"));
    assert_eq!(value["apiVersion"], "podpolicy.io/v1alpha1");
    assert_eq!(value["kind"], kind);
    let validator = schema(kind);
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{args:?}: {errors:#?}\n{stdout}");
    value
}

fn keys_are_camel_case(value: &Value, path: &str) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                // Data keys: cgroup file names, resource names, gate names,
                // digests, node cgroups. Field names have no dot, dash or slash.
                let data = key.contains('.')
                    || key.contains('-')
                    || key.contains('/')
                    || key
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                    || matches!(path, "/featureGates" | "/requests" | "/limits" | "/seen");
                if !data {
                    assert!(!key.contains('_'), "{path}/{key}: not camelCase");
                }
                keys_are_camel_case(v, &format!("{path}/{key}"));
            }
        }
        Value::Array(items) => items.iter().for_each(|v| keys_are_camel_case(v, path)),
        _ => {}
    }
}

#[test]
fn every_json_output_has_its_kind_and_schema() {
    let dir = temp_dir("outputs");
    let node = "fixtures/nodes/dual-socket-static.yaml";
    let sysfs = "fixtures/sysfs/topoDualSocketHT";
    let state = dir.join("state");
    std::fs::create_dir_all(&state).expect("state dir");
    let state = state.to_str().expect("utf-8");

    let explain = check(
        "ExplainReport",
        &[
            "explain",
            "-o",
            "json",
            "--why",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
            "fixtures/pods/kep-ide.yaml",
        ],
        &[0],
    );
    keys_are_camel_case(&explain, "");
    check(
        "ExplainReport",
        &[
            "explain",
            "-o",
            "json",
            "--node",
            node,
            "fixtures/pods/kep5526-pod-scope-mixed.yaml",
        ],
        &[0],
    );
    let admission = check(
        "Admission",
        &[
            "admit",
            "-o",
            "json",
            "--node",
            node,
            "--sysfs",
            sysfs,
            "--state",
            state,
            "fixtures/pods/kep5526-pod-scope-mixed.yaml",
        ],
        &[0],
    );
    keys_are_camel_case(&admission, "");
    assert_eq!(admission["containers"][0]["cpuIsolation"], "container");
    assert_eq!(admission["containers"][1]["cpuIsolation"], "pod");
    check(
        "Release",
        &[
            "release",
            "-o",
            "json",
            "--node",
            node,
            "--sysfs",
            sysfs,
            "--state",
            state,
            "7a0c9d2e-1111-4a3b-9c5d-5526aa000002",
            "container-1",
        ],
        &[0],
    );
    let resize = check(
        "ResizeReport",
        &[
            "resize",
            "-o",
            "json",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
            "fixtures/resize/web-old.yaml",
            "fixtures/resize/web-new.yaml",
        ],
        &[0],
    );
    keys_are_camel_case(&resize, "");
    assert!(
        resize["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .any(|s| s["direction"] == "Increase"),
        "{resize}"
    );
    let root = dir.join("cgroup");
    std::fs::create_dir_all(&root).expect("root");
    let apply = check(
        "ApplyReport",
        &[
            "apply",
            "--dry-run",
            "-o",
            "json",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
            "--cgroup-root",
            root.to_str().expect("utf-8"),
            "fixtures/pods/kubectl-get-pod.yaml",
        ],
        &[0],
    );
    keys_are_camel_case(&apply, "");
    check("PolicyInfo", &["policy", "info", "-o", "json"], &[0]);
    // `policy status` reads an existing directory (a missing one is an error).
    let policy_dir = dir.join("policy-dir");
    std::fs::create_dir_all(&policy_dir).expect("policy dir");
    check(
        "PolicyStatus",
        &[
            "policy",
            "status",
            "-o",
            "json",
            "--policy-dir",
            policy_dir.to_str().expect("utf-8"),
        ],
        &[0],
    );
}

#[test]
fn tables_are_tables_and_show_bad_values_and_sizes() {
    // `admit -o table` (the default) is a table, not YAML.
    let dir = temp_dir("outputs-table");
    let (code, stdout, stderr) = podpolicy(&[
        "admit",
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "--sysfs",
        "fixtures/sysfs/topoDualSocketHT",
        "fixtures/pods/kep5526-pod-scope-mixed.yaml",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.starts_with("POD default/pod-scope-mixed"),
        "{stdout}"
    );
    assert!(
        stdout.contains("CONTAINER") && stdout.contains("ISOLATION"),
        "{stdout}"
    );
    assert!(stdout.contains("memory 2Gi on numa 0"), "{stdout}");
    // An invalid pod's table shows the bad value, as JSON does.
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: default}\nspec:\n  containers:\n  - {name: c, image: i, resources: {requests: {memory: 2Gi}, limits: {memory: 1Gi}}}\n",
    )
    .expect("write");
    let (code, stdout, _) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        bad.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("value \"2Gi\""), "{stdout}");
    // Byte values are also shown human-readable.
    let (code, stdout, _) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/pods/kep-ide.yaml",
    ]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("memory.max             1073741824 (1Gi)"),
        "{stdout}"
    );
}

#[test]
fn issue23_outputs_have_their_kind_and_schema() {
    let dir = temp_dir("outputs-issue23");
    let pod = dir.join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec:\n  containers:\n  - {name: c, resources: {limits: {cpu: 1}}}\n",
    )
    .unwrap();
    let pod = pod.to_str().unwrap();
    let zeros = dir.join("zeros.wasm");
    std::fs::write(
        &zeros,
        crate::hostile_policy::component(crate::hostile_policy::Hostility::Zeros),
    )
    .unwrap();
    let values = [
        check(
            "PolicyDiff",
            &["policy", "diff", "embedded", "embedded", pod, "-o", "json"],
            &[0],
        ),
        check(
            "PolicyDiff",
            &[
                "policy",
                "diff",
                "embedded",
                zeros.to_str().unwrap(),
                pod,
                "-o",
                "json",
            ],
            &[1],
        ),
        check(
            "ReviewReport",
            &[
                "review",
                "fixtures/reviews/create-patched.json",
                "-o",
                "json",
            ],
            &[0],
        ),
        check(
            "ReviewReport",
            &[
                "review",
                "fixtures/reviews/create-denied.json",
                "-o",
                "json",
            ],
            &[1],
        ),
        check("Version", &["version", "-o", "json"], &[0]),
        check(
            "TopologyView",
            &[
                "topology",
                "--node",
                "fixtures/nodes/dual-socket-static.yaml",
                "fixtures/topology/guaranteed-4cpu.yaml",
                "fixtures/pods/kep5526-pod-scope-mixed.yaml",
                "-o",
                "json",
            ],
            &[0],
        ),
    ];
    for value in &values {
        // The review documents carry the AdmissionReview as the API server
        // spells it (camelCase too).
        keys_are_camel_case(value, "");
    }
}
