//! `podpolicy policy diff`: two policy versions on the same pods.
//!
//! The behaviourally different side is the hostile `Zeros` component
//! (`hostile_policy`): it loads (right WIT version) and answers every call
//! with well-formed empty values, so each value the embedded policy gives
//! shows as removed and the QoS class as `Guaranteed` (the enum's first
//! case). It is the cheapest honest variant: the build has no switch that
//! changes a policy value, and `embedded_variant` changes only the digest.

use serde_json::{Value, json};

use crate::hostile_policy::{Hostility, component};
use crate::util::{embedded_variant, podpolicy, temp_dir};

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: be, namespace: default}\nspec:\n  containers:\n  - {name: app, image: nginx, resources: {limits: {memory: 64Mi}}}\n";

fn setup(name: &str) -> (std::path::PathBuf, String) {
    let dir = temp_dir(name);
    let pod = dir.join("pod.yaml");
    std::fs::write(&pod, POD).unwrap();
    (dir, pod.display().to_string())
}

#[test]
fn embedded_against_itself_changes_nothing() {
    let (dir, pod) = setup("diff-same");
    let variant = dir.join("v2.wasm");
    std::fs::write(&variant, embedded_variant("v2")).unwrap();
    for new in ["embedded", variant.to_str().unwrap()] {
        let (code, stdout, stderr) = podpolicy(&[
            "policy",
            "diff",
            "embedded",
            new,
            &pod,
            "fixtures/pods/kep-row16-all-set.yaml",
            "--node",
            "fixtures/nodes/node-1000gi.yaml",
        ]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(stdout.contains("no changes in 2 pod(s)"), "{stdout}");
        let (code, stdout, stderr) =
            podpolicy(&["policy", "diff", "embedded", new, &pod, "-o", "json"]);
        assert_eq!(code, 0, "{stderr}");
        let v: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["kind"], "PolicyDiff");
        assert_eq!(v["changes"], json!([]));
        assert_eq!(v["changedPods"], json!([]));
        assert_eq!(v["pods"], 1);
    }
}

#[test]
fn static_managers_with_a_sysfs_topology_compare_cpusets_too() {
    // Guaranteed integer pods on the dual-socket static node get cpusets;
    // the same policy on both sides places them the same way.
    let (code, stdout, stderr) = podpolicy(&[
        "policy",
        "diff",
        "embedded",
        "embedded",
        "fixtures/pods/kep5526-pod-scope-mixed.yaml",
        "fixtures/topology/guaranteed-4cpu.yaml",
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["changes"], json!([]));
    assert_eq!(v["pods"], 2);
}

#[test]
fn a_policy_that_answers_differently_lists_every_changed_value() {
    let (dir, pod) = setup("diff-zeros");
    let zeros = dir.join("zeros.wasm");
    std::fs::write(&zeros, component(Hostility::Zeros)).unwrap();
    let zeros = zeros.to_str().unwrap();
    let (code, stdout, stderr) = podpolicy(&[
        "policy",
        "diff",
        "embedded",
        zeros,
        &pod,
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "-o",
        "json",
    ]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["new"]["policyVersion"], "hostile-1.0");
    assert_eq!(v["old"]["source"], "embedded");
    assert_eq!(v["changedPods"], json!(["default/be"]));
    let rows: Vec<String> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} | {} | {} | {} | {}",
                r["pod"].as_str().unwrap(),
                r["container"].as_str().unwrap(),
                r["item"].as_str().unwrap(),
                r["old"].as_str().unwrap_or("-"),
                r["new"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    let expected: Vec<String> = EXPECTED_ROWS.iter().map(|s| s.to_string()).collect();
    assert_eq!(rows, expected, "{stdout}");

    // The table says the same, one row per value.
    let (code, table, _) = podpolicy(&[
        "policy",
        "diff",
        "embedded",
        zeros,
        &pod,
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
    ]);
    assert_eq!(code, 1);
    assert!(table.contains("change(s) in 1 of 1 pod(s)"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["default/be", "-", "qos", "Burstable", "Guaranteed"]),
        "{table}"
    );
}

#[test]
fn a_missing_policy_file_is_an_error() {
    let (_dir, pod) = setup("diff-missing");
    let (code, _, stderr) = podpolicy(&["policy", "diff", "embedded", "no/such.wasm", &pod]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no/such.wasm"), "{stderr}");
}

/// Embedded (the Burstable pod's values, as `explain` shows them) against
/// `Zeros`: the QoS class changes, every file and the patch go, and so do
/// the node-level cgroups (`Zeros` answers none).
const EXPECTED_ROWS: &[&str] = &[
    "default/be |  | qos | Burstable | Guaranteed",
    "default/be |  | patch /spec/containers/0/resources/requests | add {\"memory\":\"64Mi\"} | -",
    "default/be |  | cpu.weight | 1 | -",
    "default/be |  | cpu.max | max 100000 | -",
    "default/be |  | memory.max | 67108864 | -",
    "default/be |  | hugetlb.2MB.max | 0 | -",
    "default/be |  | hugetlb.2MB.rsvd.max | 0 | -",
    "default/be |  | hugetlb.1GB.max | 0 | -",
    "default/be |  | hugetlb.1GB.rsvd.max | 0 | -",
    "default/be | app | oom_score_adj | 999 | -",
    "default/be | app | cpu.weight | 1 | -",
    "default/be | app | cpu.max | max 100000 | -",
    "default/be | app | memory.max | 67108864 | -",
    "default/be | app | hugetlb.2MB.max | 0 | -",
    "default/be | app | hugetlb.2MB.rsvd.max | 0 | -",
    "default/be | app | hugetlb.1GB.max | 0 | -",
    "default/be | app | hugetlb.1GB.rsvd.max | 0 | -",
    "default/be | app | memory.oom.group | 1 | -",
    "(node) | kubepods | cpu.weight | 2442 | -",
    "(node) | kubepods | memory.max | 1070520598528 | -",
    "(node) | kubepods | hugetlb.2MB.max | 4611686018427387904 | -",
    "(node) | kubepods | hugetlb.2MB.rsvd.max | 4611686018427387904 | -",
    "(node) | kubepods | hugetlb.1GB.max | 4611686018427387904 | -",
    "(node) | kubepods | hugetlb.1GB.rsvd.max | 4611686018427387904 | -",
    "(node) | kubepods | memory.min | 0 | -",
    "(node) | kubepods | memory.low | 0 | -",
    "(node) | burstable | cpu.weight | 1 | -",
    "(node) | burstable | hugetlb.2MB.max | 4611686018427387904 | -",
    "(node) | burstable | hugetlb.2MB.rsvd.max | 4611686018427387904 | -",
    "(node) | burstable | hugetlb.1GB.max | 4611686018427387904 | -",
    "(node) | burstable | hugetlb.1GB.rsvd.max | 4611686018427387904 | -",
    "(node) | burstable | memory.low | 0 | -",
    "(node) | besteffort | cpu.weight | 1 | -",
    "(node) | besteffort | hugetlb.2MB.max | 4611686018427387904 | -",
    "(node) | besteffort | hugetlb.2MB.rsvd.max | 4611686018427387904 | -",
    "(node) | besteffort | hugetlb.1GB.max | 4611686018427387904 | -",
    "(node) | besteffort | hugetlb.1GB.rsvd.max | 4611686018427387904 | -",
];

/// The shadow evaluation of a candidate records the same rows as `policy
/// diff`, and `policy status` shows them. (A candidate that changes values
/// and passes the self-check cannot be built here, so the serving side is
/// the `Zeros` component and the candidate the embedded policy.)
#[test]
fn the_shadow_evaluation_records_the_diff_rows_for_policy_status() {
    use podpolicy::policy_dir::{DirState, Verdict, shadow_evaluate};
    use podpolicy::runtime::{Cache, Limits, PolicyRuntime};

    // The host's output checks need a UID (the cgroup path has it).
    let dir = temp_dir("diff-shadow");
    let pod = dir.join("pod.yaml");
    std::fs::write(
        &pod,
        POD.replace(
            "namespace: default}",
            "namespace: default, uid: 5a1e0000-0000-4000-8000-0000000000be}",
        ),
    )
    .unwrap();
    let docs = podpolicy::pod_input::read_pods(&pod).unwrap();
    let node = podpolicy::node_input::read_node(
        &crate::util::workspace().join("fixtures/nodes/node-1000gi.yaml"),
    )
    .unwrap();
    let zeros =
        PolicyRuntime::from_bytes(&component(Hostility::Zeros), &Cache::Off, Limits::default())
            .unwrap();
    let report = shadow_evaluate(crate::util::policy(), &zeros, &docs, &node).unwrap();
    assert_eq!(report.pods, 1);
    assert_eq!(report.changed, vec!["default/be".to_string()]);
    let rows: Vec<String> = report
        .changes
        .iter()
        .map(|r| {
            format!(
                "{} | {} | {} | {} | {}",
                r.pod,
                r.container,
                r.item,
                r.old.as_deref().unwrap_or("-"),
                r.new.as_deref().unwrap_or("-")
            )
        })
        .collect();
    // The reverse of the `policy diff embedded zeros` pod rows.
    let expected: Vec<String> = EXPECTED_ROWS
        .iter()
        .filter(|r| r.starts_with("default/be"))
        .map(|r| {
            let cells: Vec<&str> = r.split(" | ").collect();
            format!(
                "{} | {} | {} | {} | {}",
                cells[0], cells[1], cells[2], cells[4], cells[3]
            )
        })
        .collect();
    // Zeros has only the QoS class and the verdict; the rest is added.
    let mut sorted_rows = rows.clone();
    let mut sorted_expected = expected.clone();
    sorted_rows.sort();
    sorted_expected.sort();
    assert_eq!(sorted_rows, sorted_expected);

    let mut state = DirState::default();
    state.seen.insert(
        "0123456789abcdef".into(),
        Verdict {
            file: "v2.wasm".into(),
            version: "0.1.0".into(),
            accepted: true,
            detail: "shadow evaluation: 1 pods, 1 with changed values".into(),
            changes: report.changes.clone(),
        },
    );
    let table = state.to_table();
    assert!(
        table.contains("changes by 0123456789ab (v2.wasm):"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["default/be", "app", "oom_score_adj", "-", "999"]),
        "{table}"
    );
    // And state.json keeps them.
    let json = serde_json::to_string(&state).unwrap();
    let back: DirState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, state);
}

/// Where the node's static managers place pods, cpusets are part of the
/// diff: the same pod evaluated on an empty node and on one whose NUMA 0
/// cores are taken (by `explain_all` with two placements) moves to NUMA 1.
#[test]
fn cpusets_are_diffed_where_the_managers_place_pods() {
    use podpolicy::policy_diff::diff_evaluations;
    let ws = crate::util::workspace();
    let (node, sysfs) =
        podpolicy::node_input::read_node_file(&ws.join("fixtures/nodes/dual-socket-static.yaml"))
            .unwrap();
    let topology =
        podpolicy::topology_input::read_node_topology(&sysfs.expect("the node file names sysfs"))
            .unwrap();
    let policy = crate::util::policy();
    let start = podpolicy::admit::start_state(policy, &topology, &node, None).unwrap();
    let read = |p: &str| podpolicy::pod_input::read_pods(&ws.join(p)).unwrap();
    let db = read("fixtures/topology/guaranteed-4cpu.yaml");
    let mut empty = podpolicy::Placement {
        topology: topology.clone(),
        state: start.clone(),
    };
    let mut busy = empty.clone();
    // A Guaranteed 4-CPU pod first takes NUMA 0's free cores.
    let mut first = db.clone();
    first[0].pod.uid = "00000000-0000-4000-8000-00000000f1f5".into();
    first[0].pod.name = "first".into();
    podpolicy::explain_all(policy, &first, &node, Some(&mut busy)).unwrap();
    let a = podpolicy::explain_all(policy, &db, &node, Some(&mut empty)).unwrap();
    let b = podpolicy::explain_all(policy, &db, &node, Some(&mut busy)).unwrap();
    let rows: Vec<String> = diff_evaluations(&a, &b)
        .iter()
        .filter(|r| r.pod != podpolicy::policy_diff::NODE_ROW)
        .map(|r| {
            format!(
                "{} | {} | {} | {} | {}",
                r.pod,
                r.container,
                r.item,
                r.old.as_deref().unwrap_or("-"),
                r.new.as_deref().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            "default/db | postgres | cpuset.cpus | 2,4,8,10 | 1,3,7,9",
            "default/db | postgres | cpuset.mems | 0 | 1",
        ]
    );
}
