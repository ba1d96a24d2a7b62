//! The `podpolicy` binary as a user runs it, bad inputs included: every
//! failure is a clear message naming the file or field, exit status 2 for
//! errors, 1 for policy rejections, and never a panic.

use crate::util::{podpolicy, podpolicy_with_stdin, temp_dir};

fn assert_clean_error(code: i32, stderr: &str) {
    assert_eq!(code, 2, "expected an error exit: {stderr}");
    assert!(stderr.starts_with("podpolicy: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn policy_info_prints_versions() {
    let (code, stdout, stderr) = podpolicy(&["policy", "info"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("WIT package         podpolicy:policy@3.0.0"),
        "{stdout}"
    );
    assert!(stdout.contains("Kubernetes version  1.36"), "{stdout}");
    let (code, stdout, _) = podpolicy(&["policy", "info", "-o", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(v["featureGates"]["PodLevelResources"], true);
}

#[test]
fn explain_reads_stdin_lists_and_multi_document_yaml() {
    let two_docs = b"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: 1}}}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec:\n  containers: [{name: c}]\n";
    let (code, stdout, stderr) = podpolicy_with_stdin(
        &[
            "explain",
            "-o",
            "json",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
            "-",
        ],
        Some(two_docs),
    );
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let v = &report["pods"];
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    assert_eq!(v[0]["source"], "<stdin>#1");
    // A bare YAML number is a quantity too (`cpu: 1`).
    assert_eq!(v[0]["requests"]["cpu"], "1");
    assert_eq!(v[1]["qosClass"], "BestEffort");

    let list = br#"{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c"}]}}]}"#;
    let (code, stdout, stderr) = podpolicy_with_stdin(
        &[
            "explain",
            "-o",
            "yaml",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
            "-",
        ],
        Some(list),
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("source: <stdin>#items[0]"), "{stdout}");
}

#[test]
fn explain_without_a_node_describes_this_machine() {
    let (code, stdout, stderr) = podpolicy(&["explain", "fixtures/pods/kep-option1.yaml"]);
    // This machine may be cgroup v1 (pod-level resources rejected: exit 1) or v2 (exit 0).
    assert!(code == 0 || code == 1, "{stderr}");
    assert!(stdout.contains("POD default/option-1"), "{stdout}");
}

#[test]
fn malformed_yaml_names_the_file_and_position() {
    let dir = temp_dir("malformed");
    let file = dir.join("broken.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: Pod\nspec:\n  containers: [\n").expect("write");
    let (code, _, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        file.to_str().expect("path"),
    ]);
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("broken.yaml"), "{stderr}");
}

#[test]
fn a_wrongly_typed_field_is_named() {
    let pod = b"kind: Pod\nmetadata: {name: p}\nspec:\n  containers: {name: c}\n";
    let (code, _, stderr) = podpolicy_with_stdin(
        &["explain", "--node", "fixtures/nodes/node-1000gi.yaml", "-"],
        Some(pod),
    );
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("spec.containers"), "{stderr}");
}

#[test]
fn an_unknown_quantity_is_an_invalid_field() {
    let pod = b"kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {limits: {memory: 12Qi}}\n";
    let (code, stdout, stderr) = podpolicy_with_stdin(
        &["explain", "--node", "fixtures/nodes/node-1000gi.yaml", "-"],
        Some(pod),
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stdout.contains("spec.containers[0].resources.limits[memory]"),
        "{stdout}"
    );
    assert!(stdout.contains("12Qi"), "{stdout}");
}

#[test]
fn an_overflowing_quantity_is_an_invalid_field() {
    let pod = b"kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {memory: 9Ei}}\n";
    let (code, stdout, _) = podpolicy_with_stdin(
        &["explain", "--node", "fixtures/nodes/node-1000gi.yaml", "-"],
        Some(pod),
    );
    assert_eq!(code, 1);
    assert!(
        stdout.contains("spec.containers[0].resources.requests[memory]"),
        "{stdout}"
    );
    assert!(stdout.contains("too large"), "{stdout}");
}

#[test]
fn a_ten_megabyte_random_file_is_refused_cleanly() {
    let dir = temp_dir("random");
    let file = dir.join("random.bin");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..10 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    std::fs::write(&file, bytes).expect("write");
    let (code, _, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        file.to_str().expect("path"),
    ]);
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("random.bin"), "{stderr}");
    assert!(
        stderr.len() < 2000,
        "the message should be short, got {} bytes",
        stderr.len()
    );
}

#[test]
fn a_missing_file_and_a_non_pod_are_errors() {
    let (code, _, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "no/such/pod.yaml",
    ]);
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("no/such/pod.yaml"), "{stderr}");
    let (code, _, stderr) = podpolicy_with_stdin(
        &["explain", "--node", "fixtures/nodes/node-1000gi.yaml", "-"],
        Some(b"kind: Service\nmetadata: {name: s}\n"),
    );
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("kind is `Service`"), "{stderr}");
}

#[test]
fn bad_node_settings_are_reported_by_field() {
    let dir = temp_dir("node");
    let file = dir.join("node.yaml");
    std::fs::write(
        &file,
        "capacity: {memory: 1Gi}\nkubeletConfig:\n  memoryThrottlingFactor: 1.5\n",
    )
    .expect("write");
    let (code, _, stderr) = podpolicy(&[
        "explain",
        "--node",
        file.to_str().expect("path"),
        "fixtures/pods/kep-option1.yaml",
    ]);
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("memoryThrottlingFactor"), "{stderr}");
    std::fs::write(
        &file,
        "capacity: {memory: 1Gi}\nkubeletConfig:\n  cpuManagerPolcy: static\n",
    )
    .expect("write");
    let (code, _, stderr) = podpolicy(&[
        "explain",
        "--node",
        file.to_str().expect("path"),
        "fixtures/pods/kep-option1.yaml",
    ]);
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("cpuManagerPolcy"), "{stderr}");
}

#[test]
fn a_hostile_policy_file_is_refused() {
    let dir = temp_dir("policy");
    let file = dir.join("evil.wasm");
    std::fs::write(
        &file,
        wat::parse_str(crate::hostile::WASI_IMPORTING_COMPONENT).expect("wat"),
    )
    .expect("write");
    let (code, _, stderr) =
        podpolicy(&["--policy", file.to_str().expect("path"), "policy", "info"]);
    assert_clean_error(code, &stderr);
    assert!(stderr.contains("must import nothing"), "{stderr}");
}

#[test]
fn conformance_runs_any_file_of_the_vector_shape() {
    let dir = temp_dir("vectors");
    let file = dir.join("mine.json");
    let vectors = serde_json::json!({
        "area": "local", "notes": [], "cases": [
            {"name": "qos ok", "input": {"function": "ComputePodQOS", "pod": {"spec": {"containers": [{"name": "c"}]}}},
             "expected": {"qosClass": "BestEffort"}},
            {"name": "qos wrong", "input": {"function": "ComputePodQOS", "pod": {"spec": {"containers": [{"name": "c"}]}}},
             "expected": {"qosClass": "Guaranteed"}},
            {"name": "conversion", "input": {"function": "MilliCPUToShares", "milliCPU": 0}, "expected": {"shares": 2}}
        ]
    });
    std::fs::write(&file, vectors.to_string()).expect("write");
    let (code, stdout, _) = podpolicy(&["conformance", file.to_str().expect("path")]);
    assert_eq!(code, 1, "a failing case must fail the run: {stdout}");
    assert!(
        stdout.contains("FAIL qos wrong: expected Guaranteed, got BestEffort"),
        "{stdout}"
    );
    assert!(stdout.contains("SKIP conversion"), "{stdout}");
    assert!(
        stdout.contains("total: 1 passed, 1 failed, 1 skipped"),
        "{stdout}"
    );
}

/// A List of `n` small Burstable pods.
fn many_pods(n: usize) -> String {
    let mut text = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for i in 0..n {
        text.push_str(&format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata: {{name: p{i}, namespace: default, uid: u-{i}}}\n  spec:\n    containers:\n    - name: c\n      resources: {{requests: {{cpu: 100m, memory: 64Mi}}}}\n"
        ));
    }
    text
}

/// `explain` under script(1), so stderr is a terminal (stdout goes to a
/// file); returns what the terminal got and the report.
fn explain_on_a_terminal(
    dir: &std::path::Path,
    pods: &std::path::Path,
) -> Option<(String, String)> {
    use std::process::Command;
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!(
            "script(1) is not installed: the terminal run is skipped (progress::tests cover the logic)"
        );
        return None;
    }
    let report = dir.join("report.json");
    let command = format!(
        "'{}' explain -o json --node fixtures/nodes/node-1000gi.yaml '{}' > '{}'",
        env!("CARGO_BIN_EXE_podpolicy"),
        pods.display(),
        report.display()
    );
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("PODPOLICY_CACHE_DIR", crate::util::cache_dir())
        .current_dir(crate::util::workspace())
        .output()
        .expect("running script(1)");
    assert!(out.status.success(), "{out:?}");
    let terminal = String::from_utf8(out.stdout).expect("utf-8");
    let report = std::fs::read_to_string(&report).expect("the report");
    Some((terminal, report))
}

#[test]
fn progress_on_a_terminal_for_many_pods_and_never_in_a_pipe() {
    let dir = temp_dir("progress");
    let many = dir.join("many.yaml");
    std::fs::write(&many, many_pods(250)).unwrap();
    // A pipe (the tests' stderr): nothing but the report.
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        many.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stderr, "");
    let piped: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(piped["pods"].as_array().unwrap().len(), 250);

    let Some((terminal, report)) = explain_on_a_terminal(&dir, &many) else {
        return;
    };
    // `explain` streams: a count from 200 pods on, every 25, with no total.
    assert!(
        terminal.starts_with("\revaluating pods: 200\revaluating pods: 225"),
        "{terminal:?}"
    );
    // The last count, then the line blanked and the cursor back at its start.
    let cleared = format!("\revaluating pods: 250\r{}\r", " ".repeat(20));
    assert!(terminal.ends_with(&cleared), "{terminal:?}");
    // The report is the same as in a pipe: progress never reaches stdout.
    assert_eq!(report, stdout);

    // Fewer pods than the threshold: no line even on a terminal.
    let few = dir.join("few.yaml");
    std::fs::write(&few, many_pods(podpolicy::progress::THRESHOLD - 1)).unwrap();
    let (terminal, _) = explain_on_a_terminal(&dir, &few).expect("script ran above");
    assert_eq!(terminal, "");
}
