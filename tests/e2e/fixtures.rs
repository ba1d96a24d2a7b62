//! Every pod in fixtures/pods is explained against its golden JSON, and the
//! KEP's own numbers are asserted explicitly so a blessed golden file cannot
//! hide a wrong value. `PODPOLICY_BLESS=1` rewrites the golden files.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{podpolicy, workspace};

const NODE: &str = "fixtures/nodes/node-1000gi.yaml";

fn pods() -> Vec<PathBuf> {
    let mut pods: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures/pods"))
        .expect("fixtures/pods")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    pods.sort();
    pods
}

fn explain(pod: &Path) -> (i32, Value) {
    // Relative to the workspace (the CLI runs there), so golden files do not
    // depend on where the repository is cloned.
    let relative = pod.strip_prefix(workspace()).unwrap_or(pod);
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        NODE,
        relative.to_str().expect("utf-8 path"),
    ]);
    assert!(
        code == 0 || code == 1,
        "{}: exit {code}: {stderr}",
        pod.display()
    );
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {stdout}", pod.display()));
    (code, report["pods"][0].clone())
}

#[test]
fn explain_output_matches_golden_files() {
    let bless = std::env::var_os("PODPOLICY_BLESS").is_some();
    let mut mismatches = Vec::new();
    for pod in pods() {
        let (_, got) = explain(&pod);
        let golden = pod.with_extension("expected.json");
        let rendered = serde_json::to_string_pretty(&got).expect("serializes") + "\n";
        if bless {
            std::fs::write(&golden, &rendered).expect("writing golden file");
            continue;
        }
        match std::fs::read_to_string(&golden) {
            Ok(want) if want == rendered => {}
            Ok(want) => mismatches.push(format!(
                "{}:\n--- want\n{want}\n--- got\n{rendered}",
                golden.display()
            )),
            Err(_) => mismatches.push(format!(
                "{} is missing (run with PODPOLICY_BLESS=1)",
                golden.display()
            )),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{}\n(rerun with PODPOLICY_BLESS=1 if the change is intended)",
        mismatches.join("\n")
    );
}

fn fixture(name: &str) -> Value {
    explain(
        &workspace()
            .join("fixtures/pods")
            .join(format!("{name}.yaml")),
    )
    .1
}

fn scores(v: &Value) -> Vec<i64> {
    v["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| c["oomScoreAdj"].as_i64().expect("score"))
        .collect()
}

fn pod_file<'a>(v: &'a Value, file: &str) -> &'a str {
    v["podCgroup"][file]
        .as_str()
        .unwrap_or_else(|| panic!("pod cgroup file {file} in {v}"))
}

fn container_file<'a>(v: &'a Value, container: &str, file: &str) -> &'a str {
    let c = v["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .find(|c| c["name"] == container)
        .expect("container");
    c["cgroup"][file]
        .as_str()
        .unwrap_or_else(|| panic!("{container} {file}"))
}

#[test]
fn kep_oom_score_tables_reproduce() {
    assert_eq!(
        scores(&fixture("kep-oom-example1-pod1")),
        vec![1000, 1000, 1000]
    );
    assert_eq!(
        scores(&fixture("kep-oom-example1-pod2")),
        vec![940, 940, 940]
    );
    assert_eq!(
        scores(&fixture("kep-oom-example2-pod1")),
        vec![950, 900, 999]
    );
    assert_eq!(
        scores(&fixture("kep-oom-example2-pod2")),
        vec![940, 890, 990]
    );
}

const GI: u64 = 1 << 30;

#[test]
fn kep_rows_reproduce() {
    // Row 5: pod request defaults to the limit; containers get the pod limit as cgroup max.
    let row5 = fixture("kep-row05-pod-limit-only");
    assert_eq!(row5["requests"]["memory"], "100Gi");
    assert_eq!(row5["qosClass"], "Guaranteed");
    assert_eq!(
        container_file(&row5, "c1", "memory.max"),
        (100 * GI).to_string()
    );
    assert_eq!(container_file(&row5, "c2", "cpu.max"), "1000000 100000");
    // Row 6 and row 10: invalid.
    let row6 = fixture("kep-row06-invalid-derived-request");
    assert_eq!(
        row6["errors"][0]["field"]
            .as_str()
            .map(|f| f.starts_with("spec.resources.requests")),
        Some(true)
    );
    let row10 = fixture("kep-row10-invalid-container-limits");
    assert_eq!(
        row10["errors"][0]["field"],
        "spec.resources.requests[memory]"
    );
    // Row 7: pod request derived 100Gi; limit 120Gi implied for every container cgroup.
    let row7 = fixture("kep-row07-pod-limit-container-requests");
    assert_eq!(row7["requests"]["memory"], "100Gi");
    assert_eq!(pod_file(&row7, "memory.max"), (120 * GI).to_string());
    assert_eq!(
        container_file(&row7, "c2", "memory.max"),
        (120 * GI).to_string()
    );
    // Pod request only: memory.max stays max at the pod.
    let row9 = fixture("kep-row09-pod-request-only");
    assert_eq!(pod_file(&row9, "memory.max"), "max");
    assert_eq!(container_file(&row9, "c1", "memory.max"), "max");
    // One container with a spec: pod request 50Gi, c2 capped by the pod limit.
    let row11 = fixture("kep-row11-one-container-spec");
    assert_eq!(row11["requests"]["memory"], "50Gi");
    assert_eq!(
        container_file(&row11, "c1", "memory.max"),
        (60 * GI).to_string()
    );
    assert_eq!(
        container_file(&row11, "c2", "memory.max"),
        (100 * GI).to_string()
    );
    // Row 12: the pod limit defaults to the sum of container limits.
    let row12 = fixture("kep-row12-limits-for-all");
    assert_eq!(row12["limits"]["memory"], "5Gi");
    assert_eq!(pod_file(&row12, "memory.max"), (5 * GI).to_string());
    // Requests 10+20+20 give a pod request of 50Gi.
    assert_eq!(
        fixture("kep-row15-pod-limit-requests-for-all")["requests"]["memory"],
        "50Gi"
    );
    // Row 16: everything set, pod-level Guaranteed.
    let row16 = fixture("kep-row16-all-set");
    assert_eq!(row16["qosClass"], "Guaranteed");
    assert_eq!(pod_file(&row16, "cpu.max"), "200000 100000");
    assert_eq!(container_file(&row16, "c1", "cpu.max"), "100000 100000");
    assert_eq!(container_file(&row16, "c2", "cpu.max"), "200000 100000");
}

#[test]
fn kep_ide_pod_shares_the_pod_limit() {
    let ide = fixture("kep-ide");
    assert_eq!(ide["qosClass"], "Burstable");
    assert_eq!(pod_file(&ide, "memory.max"), (1024u64 << 20).to_string());
    assert_eq!(pod_file(&ide, "cpu.max"), "400000 100000");
    // Sidecars without limits are capped by the pod limit; the IDE by its own.
    assert_eq!(
        container_file(&ide, "tool1", "memory.max"),
        (1024u64 << 20).to_string()
    );
    assert_eq!(
        container_file(&ide, "ide", "memory.max"),
        (256u64 << 20).to_string()
    );
    // The defaulted pod request is the KEP-753 aggregate: the ide's 128Mi / 500m.
    assert_eq!(ide["requests"]["memory"], "128Mi");
    assert_eq!(ide["requests"]["cpu"], "500m");
}

#[test]
fn windows_pods_may_not_use_pod_level_resources() {
    let v = fixture("windows-pod-level");
    assert_eq!(v["errors"][0]["field"], "spec.resources");
    assert_eq!(v["errors"][0]["reason"], "Forbidden");
}

#[test]
fn kubectl_output_of_a_real_pod_explains() {
    let v = fixture("kubectl-get-pod");
    assert_eq!(v["errors"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["qosClass"], "Burstable");
    assert_eq!(v["pod"], "shop/checkout-7d9f8b6c5-x2k9p");
}

#[test]
fn cgroup_v1_nodes_reject_pod_level_resources() {
    let pod = workspace().join("fixtures/pods/kep-ide.yaml");
    let (code, stdout, _) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        "fixtures/nodes/small-v1.yaml",
        pod.to_str().expect("path"),
    ]);
    assert_eq!(code, 1, "{stdout}");
    let v: Value = serde_json::from_str(&stdout).expect("json");
    let v = &v["pods"][0];
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cgroup v1"),
        "{v}"
    );
}

/// RFC 6901 pointer tokens.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// A minimal RFC 6902 `add` / `replace` applier for the patches defaulting emits.
fn apply_patch(doc: &mut Value, patch: &[podpolicy::output::PatchOut]) {
    for op in patch {
        let tokens: Vec<String> = op.path.split('/').skip(1).map(unescape).collect();
        let (last, parents) = tokens.split_last().expect("non-empty pointer");
        let mut target = &mut *doc;
        for token in parents {
            target = match target {
                Value::Array(items) => &mut items[token.parse::<usize>().expect("array index")],
                Value::Object(map) => map
                    .get_mut(token)
                    .unwrap_or_else(|| panic!("{}: missing parent `{token}`", op.path)),
                other => panic!("{}: cannot descend into {other}", op.path),
            };
        }
        let map = target
            .as_object_mut()
            .unwrap_or_else(|| panic!("{}: parent is not an object", op.path));
        match op.op.as_str() {
            "add" => {
                map.insert(last.clone(), op.value.clone());
            }
            "replace" => {
                assert!(
                    map.contains_key(last),
                    "{}: replace of a missing member",
                    op.path
                );
                map.insert(last.clone(), op.value.clone());
            }
            other => panic!("unexpected op {other}"),
        }
    }
}

/// The defaulting patch, applied to the input as a mutating webhook's
/// caller would, yields exactly the component's defaulted pod.
#[test]
fn defaulting_patch_applied_to_the_input_equals_the_defaulted_pod() {
    let node = podpolicy::empty_node();
    let policy = crate::util::policy();
    for path in pods() {
        for doc in podpolicy::pod_input::read_pods(&path).expect("fixture parses") {
            let defaulted = match policy.default_pod(&doc.pod, &node).expect("call") {
                Ok(d) => d,
                Err(_) => continue,
            };
            let mut patched = doc.json.clone();
            apply_patch(
                &mut patched,
                &podpolicy::output::patch_json(&defaulted.patch),
            );
            let reparsed =
                podpolicy::pod_input::pod_from_json(&patched).expect("patched pod parses");
            // Quantities compare numerically: canonical forms of equal values may differ in spelling.
            let canonical = |p: &podpolicy::bindings::Pod| {
                let again = policy
                    .default_pod(p, &node)
                    .expect("call")
                    .expect("defaults");
                assert!(
                    again.patch.is_empty(),
                    "{}: defaulting is not idempotent: {:?}",
                    path.display(),
                    again.patch
                );
                again.pod
            };
            assert_eq!(
                canonical(&reparsed),
                canonical(&defaulted.pod),
                "{}",
                path.display()
            );
        }
    }
}
