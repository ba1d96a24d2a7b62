//! `admit --why` (and `explain --why` of a refused pod): each topology decision with every provider's hints, the
//! merged hint and the policy rule, and the check behind a rejection, all
//! from the component (`topology-decision.rule`, `admission.rule`).
//!
//! The machine is fixtures/sysfs/topoDualSocketHT (2 NUMA nodes of 6 CPUs,
//! 2 threads per core, CPU 0 reserved). The expected hints and merges are
//! upstream's: an 8-CPU pod gets the CPU hint [0,1] only (preferred: no one
//! node has 8 CPUs) and memory hints [0], [1] preferred and [0,1] not, the
//! inputs of policy_single_numa_node_test.go's "Single NUMA hint
//! generation", which single-numa-node merges to {nil, not preferred}.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::outputs::check;
use crate::util::{podpolicy, temp_dir, workspace};

const SYSFS: &str = "fixtures/sysfs/topoDualSocketHT";
const WIDE: &str = "fixtures/topology/guaranteed-8cpu.yaml";
const ODD: &str = "fixtures/topology/guaranteed-3cpu.yaml";

/// fixtures/nodes/dual-socket-static.yaml with another topology manager
/// policy and extra kubelet settings, written to a temp dir.
fn node_file(test: &str, policy: &str, extra: &str) -> PathBuf {
    let fixture = workspace().join("fixtures/nodes/dual-socket-static.yaml");
    let text = std::fs::read_to_string(&fixture).expect("the node fixture");
    let sysfs = workspace().join(SYSFS);
    let changed = text
        .replace(
            "sysfs: ../sysfs/topoDualSocketHT",
            &format!("sysfs: {}", sysfs.display()),
        )
        .replace(
            "  topologyManagerPolicy: best-effort\n",
            &format!("  topologyManagerPolicy: {policy}\n{extra}"),
        );
    assert_ne!(changed, text, "the fixture changed shape");
    let path = temp_dir(test).join("node.yaml");
    std::fs::write(&path, changed).expect("writing the node file");
    path
}

/// `admit --why -o json`, checked against the Admission schema.
fn admit_json(node: &Path, pod: &str, code: i32) -> Value {
    check(
        "Admission",
        &[
            "admit",
            "--why",
            "-o",
            "json",
            "--node",
            node.to_str().unwrap(),
            "--sysfs",
            SYSFS,
            pod,
        ],
        &[code],
    )
}

fn admit_text(node: &Path, pod: &str) -> (i32, String) {
    let (code, stdout, stderr) = podpolicy(&[
        "admit",
        "--why",
        "--node",
        node.to_str().unwrap(),
        "--sysfs",
        SYSFS,
        pod,
    ]);
    assert!(stderr.is_empty(), "{stderr}");
    (code, stdout)
}

fn hint(numa: Option<&[u32]>, preferred: bool) -> Value {
    json!({"numaAffinity": numa, "preferred": preferred})
}

/// The hints of the 8-CPU pod on the empty machine (see the module docs).
fn wide_pod_providers() -> Value {
    json!([
        {"manager": "cpu", "resourceName": "cpu", "hints": [hint(Some(&[0, 1]), true)]},
        {"manager": "memory", "resourceName": "memory", "hints": [
            hint(Some(&[0]), true), hint(Some(&[1]), true), hint(Some(&[0, 1]), false)
        ]},
    ])
}

#[test]
fn single_numa_node_rejection_shows_both_providers_the_merge_and_the_rule() {
    let node = node_file("admit-why-snn", "single-numa-node", "");
    let a = admit_json(&node, WIDE, 1);
    assert_eq!(a["admitted"], false);
    assert_eq!(a["rejection"]["reason"], "TopologyAffinityError");
    let d = &a["topology"][0];
    assert_eq!(d["container"], Value::Null, "pod scope");
    assert_eq!(d["providers"], wide_pod_providers());
    assert_eq!(d["affinity"], hint(None, false));
    assert_eq!(d["admit"], false);
    let rule = "single-numa-node (pod scope): merged hint any NUMA node, not preferred: cpu has no preferred hint on a single NUMA node; single-numa-node admits only a preferred hint on one NUMA node";
    assert_eq!(d["rule"], rule);
    assert_eq!(a["rule"], rule);

    let (code, text) = admit_text(&node, WIDE);
    assert_eq!(code, 1);
    for line in [
        "  why\n",
        "    (pod) cpu manager, cpu: [0,1] preferred\n",
        "    (pod) memory manager, memory: [0] preferred, [1] preferred, [0,1] not preferred\n",
        "    (pod) merged: any NUMA node, not preferred -> reject\n",
        &format!("    (pod) rule: {rule}\n"),
        &format!("    rejected (TopologyAffinityError): {rule}\n"),
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
}

#[test]
fn restricted_rejection_names_the_unpreferred_merge() {
    let node = node_file("admit-why-restricted", "restricted", "");
    let a = admit_json(&node, WIDE, 1);
    assert_eq!(a["rejection"]["reason"], "TopologyAffinityError");
    let d = &a["topology"][0];
    assert_eq!(d["providers"], wide_pod_providers());
    // No pair of preferred hints has the same mask; of the non-preferred
    // merges upstream keeps the one as wide as the widest narrowest hint
    // (cpu's [0,1]).
    assert_eq!(d["affinity"], hint(Some(&[0, 1]), false));
    assert_eq!(d["admit"], false);
    assert_eq!(
        d["rule"],
        "restricted (pod scope): merged hint [0,1] not preferred: the resources' preferred hints share no NUMA node set; restricted admits only a preferred merged hint"
    );
    assert_eq!(a["rule"], d["rule"]);
}

#[test]
fn best_effort_admits_the_same_merge_and_says_why() {
    let node = node_file("admit-why-best-effort", "best-effort", "");
    let a = admit_json(&node, WIDE, 0);
    assert_eq!(a["admitted"], true);
    assert_eq!(a["rejection"], Value::Null);
    let d = &a["topology"][0];
    assert_eq!(d["providers"], wide_pod_providers());
    assert_eq!(d["affinity"], hint(Some(&[0, 1]), false));
    assert_eq!(d["admit"], true);
    assert_eq!(
        d["rule"],
        "best-effort (pod scope): merged hint [0,1] not preferred; best-effort admits every merged hint, preferred or not (it only picks the best one)"
    );
    assert_eq!(
        a["rule"],
        "admitted: topology manager policy best-effort (pod scope) admitted the merged hint; the static CPU manager and the Static memory manager allocated it"
    );
    // 8 exclusive CPUs across both NUMA nodes, so the merge was used.
    assert_eq!(a["containers"][0]["cpuset"], "1-3,5,7-9,11");

    let (code, text) = admit_text(&node, WIDE);
    assert_eq!(code, 0);
    assert!(
        text.contains("    (pod) merged: [0,1] not preferred -> admit\n")
            && text.contains("    admitted: topology manager policy best-effort"),
        "{text}"
    );
}

#[test]
fn smt_alignment_rejection_gives_the_check_and_its_numbers() {
    let node = node_file(
        "admit-why-smt",
        "best-effort",
        "  cpuManagerPolicyOptions:\n    full-pcpus-only: \"true\"\n",
    );
    let a = admit_json(&node, ODD, 1);
    assert_eq!(a["rejection"]["reason"], "SMTAlignmentError");
    assert_eq!(
        a["rejection"]["message"],
        "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"
    );
    // The topology manager admitted the pod on NUMA node 0; the CPU
    // manager's Allocate refused it afterwards.
    let d = &a["topology"][0];
    assert_eq!(d["affinity"], hint(Some(&[0]), true));
    assert_eq!(d["admit"], true);
    assert_eq!(
        d["providers"][0]["hints"],
        json!([
            hint(Some(&[0]), true),
            hint(Some(&[1]), true),
            hint(Some(&[0, 1]), false)
        ])
    );
    assert_eq!(
        a["rule"],
        "CPU manager static, Allocate (container app): full-pcpus-only: 3 CPUs requested is not a multiple of the 2 CPUs per physical core; full-pcpus-only hands out exclusive CPUs only as whole cores"
    );
    let (code, text) = admit_text(&node, ODD);
    assert_eq!(code, 1);
    assert!(
        text.contains("    rejected (SMTAlignmentError): CPU manager static, Allocate (container app): full-pcpus-only: 3 CPUs requested is not a multiple of the 2 CPUs per physical core"),
        "{text}"
    );
}

/// Without `--why` nothing changes: no why lines, no rule keys.
#[test]
fn without_why_the_output_is_unchanged() {
    let node = node_file("admit-why-off", "single-numa-node", "");
    let args = |format: &str| {
        vec![
            "admit".to_string(),
            "-o".into(),
            format.into(),
            "--node".into(),
            node.to_str().unwrap().into(),
            "--sysfs".into(),
            SYSFS.into(),
            WIDE.into(),
        ]
    };
    let run = |format: &str| {
        let owned = args(format);
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        let (code, stdout, _) = podpolicy(&refs);
        assert_eq!(code, 1);
        stdout
    };
    let text = run("table");
    assert!(!text.contains("why") && !text.contains("rule"), "{text}");
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    assert!(json.get("rule").is_none(), "{json}");
    assert!(json["topology"][0].get("rule").is_none(), "{json}");
    assert!(json["topology"][0].get("noPreference").is_none(), "{json}");
}

/// The README's `admit --why` example is the real output.
#[test]
fn the_readme_example_is_the_real_output() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let start = readme
        .find("$ podpolicy admit --why --node fixtures/nodes/dual-socket-single-numa.yaml")
        .expect("the README shows an admit --why example");
    let body = &readme[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let body = &body[body.find('\n').unwrap() + 1..]; // the command's second line
    let shown = &body[..body.find("```").unwrap()];
    let (code, stdout, stderr) = podpolicy(&[
        "admit",
        "--why",
        "--node",
        "fixtures/nodes/dual-socket-single-numa.yaml",
        "--sysfs",
        SYSFS,
        WIDE,
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(shown, stdout);
}

/// `explain --why` of a pod the managers refuse shows the same admission
/// inputs and rules as `admit --why`, as rows of the ExplainReport.
#[test]
fn explain_why_of_a_refused_pod_shows_the_admission_decision() {
    let node = node_file("explain-why-snn", "single-numa-node", "");
    let report = check(
        "ExplainReport",
        &[
            "explain",
            "--why",
            "-o",
            "json",
            "--node",
            node.to_str().unwrap(),
            "--sysfs",
            SYSFS,
            WIDE,
        ],
        &[1],
    );
    let pod = &report["pods"][0];
    assert_eq!(pod["errors"][0]["reason"], "TopologyAffinityError");
    let rule = "single-numa-node (pod scope): merged hint any NUMA node, not preferred: cpu has no preferred hint on a single NUMA node; single-numa-node admits only a preferred hint on one NUMA node";
    let rows: Vec<(String, String, String)> = pod["why"]
        .as_array()
        .expect("why rows for the refused pod")
        .iter()
        .map(|r| {
            assert!(r.get("container").is_none(), "pod scope: {r}");
            (
                r["file"].as_str().unwrap().to_string(),
                r["value"].as_str().unwrap().to_string(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        (
            "hints cpu/cpu",
            "[0,1] preferred",
            "the cpu manager's NUMA hints for cpu",
        ),
        (
            "hints memory/memory",
            "[0] preferred, [1] preferred, [0,1] not preferred",
            "the memory manager's NUMA hints for memory",
        ),
        ("topology", "any NUMA node, not preferred -> reject", rule),
        ("admission", "TopologyAffinityError", rule),
    ]
    .map(|(f, v, r)| (f.to_string(), v.to_string(), r.to_string()));
    assert_eq!(rows, expected);

    let (code, text, _) = podpolicy(&[
        "explain",
        "--why",
        "--node",
        node.to_str().unwrap(),
        "--sysfs",
        SYSFS,
        WIDE,
    ]);
    assert_eq!(code, 1);
    assert!(
        text.contains(&format!(
            "    (pod) topology any NUMA node, not preferred -> reject: {rule}\n"
        )),
        "{text}"
    );
}
