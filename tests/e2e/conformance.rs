//! The conformance vectors (tests/vectors, the repository's copy of the shared ones) through the component. Areas whose issues have landed
//! must pass completely; the rest must at least run and report.

use podpolicy::conformance::{Outcome, Totals, run_file};
use serde_json::{Value, json};

use crate::util::{policy, vectors_dir};

fn run(relative: &str) -> (Totals, Vec<String>) {
    let report = run_file(policy(), &vectors_dir().join(relative)).expect("vector file runs");
    let failures = report
        .cases
        .iter()
        .filter_map(|c| match &c.outcome {
            Outcome::Fail(why) => Some(format!("{}: {why}", c.name)),
            _ => None,
        })
        .collect();
    (report.totals(), failures)
}

fn assert_all_pass(relative: &str, expected_cases: usize) {
    let (totals, failures) = run(relative);
    assert!(
        failures.is_empty(),
        "{relative}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        totals.passed + totals.skipped,
        expected_cases,
        "{relative}: {totals}"
    );
}

#[test]
fn effective_pod_resources() {
    assert_all_pass("k8s-core/effective-pod-resources.json", 70);
}

#[test]
fn oom_score_adj() {
    assert_all_pass("k8s-core/oom-score-adj.json", 37);
    assert_all_pass("kep-derived/oom-score-adj-kep2837.json", 6);
}

#[test]
fn pod_cgroup_config_skips_only_unit_conversions() {
    assert_all_pass("k8s-core/pod-cgroup-config.json", 71);
    let report = run_file(
        policy(),
        &vectors_dir().join("k8s-core/pod-cgroup-config.json"),
    )
    .expect("runs");
    for case in &report.cases {
        if let Outcome::Skip(why) = &case.outcome {
            assert!(
                why.contains("conversion"),
                "{}: skipped for another reason: {why}",
                case.name
            );
        }
    }
}

#[test]
fn qos_class() {
    assert_all_pass("k8s-core/qos-class.json", 27);
}

#[test]
fn pod_level_defaulting_and_validation() {
    assert_all_pass("kep-derived/pod-level-defaulting.json", 18);
    assert_all_pass("kep-derived/pod-level-validation.json", 13);
}

/// The resource manager files: every case through the component; only the
/// upstream-internal `cpuAccumulator.*` cases may be skipped.
#[test]
fn resource_managers() {
    for (relative, cases) in [
        ("k8s-managers/cpu-assignment.json", 85),
        ("k8s-managers/cpu-static-policy.json", 40),
        ("k8s-managers/kep5526-pod-level-cpu.json", 6),
        ("k8s-managers/memory-static-policy.json", 8),
        ("k8s-managers/topology-manager-merge.json", 77),
        ("kep-derived/kep5526-allocation.json", 13),
    ] {
        assert_all_pass(relative, cases);
        let report = run_file(policy(), &vectors_dir().join(relative)).expect("runs");
        for case in &report.cases {
            if let Outcome::Skip(why) = &case.outcome {
                assert!(
                    why.contains("cpuAccumulator."),
                    "{relative}: {} skipped for another reason: {why}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn every_shared_file_runs_through_the_runner() {
    let mut total = Totals::default();
    let mut files = 0;
    for dir in ["k8s-core", "k8s-managers", "kep-derived"] {
        for entry in std::fs::read_dir(vectors_dir().join(dir)).expect("vector dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                total.add(
                    run_file(policy(), &path)
                        .expect("vector file runs")
                        .totals(),
                );
                files += 1;
            }
        }
    }
    assert_eq!(files, 16);
    assert_eq!(total.passed + total.failed + total.skipped, 537, "{total}");
}

// ----------------------------------------------------------------------
// The upstream corpus (tests/vectors/upstream): value assertions of
// upstream Kubernetes tests transcribed by hand, one file per upstream file.
// ----------------------------------------------------------------------

/// Upstream assertions the policy answers differently today (see
/// tests/vectors/upstream/README.md, "Known failures"). Kept failing on
/// purpose: the expected values are upstream's. When the policy is fixed,
/// the case passes and must be removed from this list.
const UPSTREAM_KNOWN_FAILURES: &[&str] = &[];

/// The JSON files of `tests/vectors/<dir>`, sorted.
fn vector_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(vectors_dir().join(dir))
        .unwrap_or_else(|e| panic!("tests/vectors/{dir}: {e}"))
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn upstream_corpus() {
    let paths = vector_files("upstream");
    assert!(paths.len() >= 13, "{} upstream files", paths.len());
    let mut total = Totals::default();
    let mut failing = Vec::new();
    let mut skipped = Vec::new();
    for path in &paths {
        let file: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
        let commit = file["source_commit"].as_str().unwrap_or_default();
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}: source_commit {commit:?}",
            path.display()
        );
        for case in file["cases"].as_array().expect("cases") {
            let source = case["source"].as_str().unwrap_or_default();
            let (_, at) = source
                .rsplit_once(" @ ")
                .unwrap_or_else(|| panic!("{}: source {source:?} names no commit", case["name"]));
            assert!(
                at.len() == 40 && at.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}: source {source:?}",
                case["name"]
            );
        }
        let report = run_file(policy(), path).expect("upstream file runs");
        total.add(report.totals());
        for case in report.cases {
            match case.outcome {
                Outcome::Fail(why) => failing.push((case.name, why)),
                Outcome::Skip(why) => skipped.push(format!("{}: {why}", case.name)),
                Outcome::Pass => {}
            }
        }
    }
    assert!(total.passed >= 300, "{total}");
    // Inexpressible assertions are listed in the README, not skipped.
    assert!(skipped.is_empty(), "skipped:\n{}", skipped.join("\n"));
    let unexpected: Vec<String> = failing
        .iter()
        .filter(|(name, _)| !UPSTREAM_KNOWN_FAILURES.contains(&name.as_str()))
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    let fixed: Vec<&str> = UPSTREAM_KNOWN_FAILURES
        .iter()
        .copied()
        .filter(|known| !failing.iter().any(|(name, _)| name == known))
        .collect();
    assert!(
        unexpected.is_empty() && fixed.is_empty(),
        "new failures:\n{}\nknown failures that now pass (remove them from the list):\n{}",
        unexpected.join("\n"),
        fixed.join("\n")
    );
    assert_eq!(total.failed, UPSTREAM_KNOWN_FAILURES.len(), "{total}");
    assert_eq!(total.passed + total.failed, 682, "{total}");
}

// ----------------------------------------------------------------------
// The whole vector contract: a runner that reads only the fields the
// shared cases happen to vary passes vacuously. Synthetic files (cases of
// the shared files, changed) in a temp dir, with per-case outcomes asserted.
// ----------------------------------------------------------------------

/// A shared file (its header: notes, topologies, numa_infos).
fn shared(relative: &str) -> Value {
    let path = vectors_dir().join(relative);
    serde_json::from_str(&std::fs::read_to_string(&path).expect("vector file")).expect("json")
}

/// The first case of `file` whose name starts with `prefix` and that `keep` accepts.
fn case_of(file: &Value, prefix: &str, keep: impl Fn(&Value) -> bool) -> Value {
    file["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(prefix)) && keep(c))
        .unwrap_or_else(|| panic!("no case {prefix:?}"))
        .clone()
}

/// `base` with `name` and `edit` applied.
fn variant(base: &Value, name: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let mut case = base.clone();
    case["name"] = json!(name);
    edit(&mut case);
    case
}

/// Run `cases` as a file with `header`'s other fields; outcome per case name.
fn run_cases(test: &str, header: &Value, cases: Vec<Value>) -> Vec<(String, Outcome)> {
    let mut file = header.clone();
    file["cases"] = Value::Array(cases);
    let path = crate::util::temp_dir(test).join("vectors.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&file).expect("json")).expect("write");
    run_file(policy(), &path)
        .expect("vector file runs")
        .cases
        .into_iter()
        .map(|c| (c.name, c.outcome))
        .collect()
}

#[track_caller]
fn assert_outcomes(got: &[(String, Outcome)], passes: &[&str], fails: &[(&str, &str)]) {
    for name in passes {
        let (_, outcome) = got.iter().find(|(n, _)| n == name).expect("case ran");
        assert_eq!(outcome, &Outcome::Pass, "{name}");
    }
    for (name, why) in fails {
        let (_, outcome) = got.iter().find(|(n, _)| n == name).expect("case ran");
        match outcome {
            Outcome::Fail(text) => assert!(
                text.contains(why),
                "{name}: failed, but not for {why:?}: {text}"
            ),
            other => panic!("{name}: expected a failure ({why}), got {other:?}"),
        }
    }
    assert_eq!(got.len(), passes.len() + fails.len(), "{got:?}");
}

const GIB: u64 = 1 << 30;

/// A memory table of the checkpoint (`MemoryTable` JSON names).
fn table(total: u64, system_reserved: u64, reserved: u64) -> Value {
    json!({
        "total": total,
        "systemReserved": system_reserved,
        "allocatable": total - system_reserved,
        "reserved": reserved,
        "free": total - system_reserved - reserved,
    })
}

/// A memory manager case's `machine_state` is the state the hints are
/// computed from: with NUMA node 0 fully reserved only node 1 fits, where
/// the default machine state (all free) offers 0, 1 and {0,1}.
#[test]
fn memory_manager_machine_state_is_read() {
    let file = shared("k8s-managers/memory-static-policy.json");
    let base = case_of(
        &file,
        "TestStaticPolicyGetTopologyHints / should provide",
        |_| true,
    );
    let hints = |masks: &[(&[u32], bool)]| {
        let list: Vec<Value> = masks
            .iter()
            .map(|(mask, preferred)| json!({"mask": mask, "preferred": preferred}))
            .collect();
        json!({"memory": list, "hugepages-1Gi": list})
    };
    let everywhere = hints(&[(&[0], true), (&[1], true), (&[0, 1], false)]);
    let node1_only = hints(&[(&[1], true)]);
    let busy_node0 = json!({
        "0": {"numberOfAssignments": 2, "cells": [0], "memoryMap": {
            "memory": table(6 * GIB, GIB, 5 * GIB),
            "hugepages-1Gi": table(4 * GIB, 0, 4 * GIB)}},
        "1": {"numberOfAssignments": 0, "cells": [1], "memoryMap": {
            "memory": table(6 * GIB, GIB, 0),
            "hugepages-1Gi": table(4 * GIB, 0, 0)}},
    });
    // No existing assignment: the hints come from the machine state.
    let fresh = |name: &str, machine_state: Option<Value>, want: &Value| {
        variant(&base, name, |c| {
            c["input"]["assignments"] = json!({});
            match &machine_state {
                Some(m) => c["input"]["machine_state"] = m.clone(),
                None => {
                    c["input"].as_object_mut().unwrap().remove("machine_state");
                }
            }
            c["expected"]["hints"] = want.clone();
        })
    };
    let mut unknown_table_field = busy_node0.clone();
    unknown_table_field["1"]["memoryMap"]["memory"]["hugeReserve"] = json!(0);
    let cases = vec![
        fresh("node 0 busy", Some(busy_node0.clone()), &node1_only),
        fresh("node 0 busy, default hints", Some(busy_node0), &everywhere),
        fresh(
            "default machine state",
            Some(json!("default (irrelevant)")),
            &everywhere,
        ),
        fresh("no machine state", None, &everywhere),
        fresh(
            "machine state in words",
            Some(json!("node 0 full")),
            &everywhere,
        ),
        fresh(
            "unknown table field",
            Some(unknown_table_field),
            &node1_only,
        ),
        // The notes' named fixture is Guaranteed (requests == limits), so it gets hints.
        variant(&base, "requirementsGuaranteed by name", |c| {
            c["input"]["assignments"] = json!({});
            c["input"]["container_resources"] = json!("requirementsGuaranteed");
            c["expected"]["hints"] = everywhere.clone();
        }),
    ];
    assert_outcomes(
        &run_cases("conformance-machine-state", &file, cases),
        &[
            "node 0 busy",
            "default machine state",
            "no machine state",
            "requirementsGuaranteed by name",
        ],
        &[
            ("node 0 busy, default hints", "expected"),
            ("machine state in words", "machine_state"),
            ("unknown table field", "hugeReserve"),
        ],
    );
}

/// Expected errors may be objects `{type, message}` (and lists): the type
/// and the message are both compared, for manager errors and field errors.
#[test]
fn expected_errors_as_objects() {
    // Static CPU policy: error strings are exact Go texts.
    let cpu = shared("k8s-managers/cpu-static-policy.json");
    let smt = case_of(&cpu, "TestStaticPolicyAdd / GuPodSingleCore", |c| {
        c["expected"]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("SMT Alignment Error: requested 1"))
    });
    let message = smt["expected"]["error"].as_str().unwrap().to_string();
    let with_error =
        |name: &str, error: Value| variant(&smt, name, |c| c["expected"]["error"] = error);
    let cases = vec![
        with_error("string", json!(message)),
        with_error(
            "type and message",
            json!({"type": "SMTAlignmentError", "message": message}),
        ),
        with_error("type only", json!({"type": "SMTAlignmentError"})),
        with_error("list of strings", json!([message])),
        with_error(
            "wrong type",
            json!({"type": "TopologyAffinityError", "message": message}),
        ),
        with_error(
            "wrong message",
            json!({"type": "SMTAlignmentError", "message": format!("{message}.")}),
        ),
        with_error(
            "a field path",
            json!({"type": "SMTAlignmentError", "field": "spec.containers[0]"}),
        ),
        with_error(
            "unknown error key",
            json!({"type": "SMTAlignmentError", "detail": "x"}),
        ),
        with_error("no error", Value::Null),
    ];
    assert_outcomes(
        &run_cases("conformance-manager-errors", &cpu, cases),
        &["string", "type and message", "type only", "list of strings"],
        &[
            ("wrong type", "TopologyAffinityError"),
            ("wrong message", "expected error"),
            ("a field path", "no field path"),
            ("unknown error key", "detail"),
            ("no error", "unexpected error"),
        ],
    );

    // KEP-5526 allocation: a string is the error's type.
    let kep = shared("kep-derived/kep5526-allocation.json");
    let rejected = case_of(&kep, "pod scope table: admission failure", |_| true);
    let with_error =
        |name: &str, error: Value| variant(&rejected, name, |c| c["expected"]["error"] = error);
    let cases = vec![
        with_error("type object", json!({"type": "EmptyPodSharedPoolError"})),
        with_error("wrong type", json!({"type": "UnexpectedAdmissionError"})),
    ];
    assert_outcomes(
        &run_cases("conformance-kep5526-errors", &kep, cases),
        &["type object"],
        &[("wrong type", "UnexpectedAdmissionError")],
    );

    // Pod validation: field errors by type (Go constant or short name) and field.
    let validation = shared("kep-derived/pod-level-validation.json");
    let invalid = case_of(&validation, "pod request > pod limit", |_| true);
    let with_errors =
        |name: &str, errors: Value| variant(&invalid, name, |c| c["expected"]["errors"] = errors);
    let cases = vec![
        with_errors(
            "FieldValueInvalid",
            json!([{"type": "FieldValueInvalid", "field": "spec.resources.requests"}]),
        ),
        with_errors(
            "FieldValueForbidden",
            json!([{"type": "FieldValueForbidden", "field": "spec.resources.requests"}]),
        ),
        with_errors(
            "message not in the error",
            json!([{"type": "Invalid", "message": "no such words in any error"}]),
        ),
        with_errors("unknown type", json!([{"type": "FieldValueBogus"}])),
    ];
    assert_outcomes(
        &run_cases("conformance-field-errors", &validation, cases),
        &["FieldValueInvalid"],
        &[
            ("FieldValueForbidden", "expected an error"),
            ("message not in the error", "expected an error"),
            ("unknown type", "FieldValueBogus"),
        ],
    );
}

/// A case with an input (or expected) field its adapter does not read fails
/// instead of passing vacuously.
#[test]
fn unknown_fields_fail_the_case() {
    let cpu = shared("k8s-managers/cpu-static-policy.json");
    let allocate = case_of(&cpu, "TestStaticPolicyAdd", |c| {
        c["input"]["operation"] == "Allocate" && c["expected"]["allocated"] == true
    });
    let cases = vec![
        variant(&allocate, "as shared", |_| {}),
        variant(&allocate, "new input field", |c| {
            c["input"]["numa_policy"] = json!("interleave");
        }),
        variant(&allocate, "new container field", |c| {
            c["input"]["pod"]["containers"][0]["gpu_request"] = json!("1");
        }),
        variant(&allocate, "new expected field", |c| {
            c["expected"]["numa_nodes"] = json!([0]);
        }),
        variant(&allocate, "two function keys", |c| {
            c["input"]["function"] = json!("Allocate");
        }),
    ];
    assert_outcomes(
        &run_cases("conformance-unknown-cpu", &cpu, cases),
        &["as shared"],
        &[
            ("new input field", "numa_policy"),
            ("new container field", "gpu_request"),
            ("new expected field", "numa_nodes"),
            ("two function keys", "more than once"),
        ],
    );

    let effective = shared("k8s-core/effective-pod-resources.json");
    let base = case_of(&effective, "pod overhead excluded", |_| true);
    let cases = vec![
        variant(&base, "as shared", |_| {}),
        variant(&base, "new option", |c| {
            c["input"]["options"]["excludeEphemeralContainers"] = json!(true);
        }),
        variant(&base, "non-boolean option", |c| {
            c["input"]["options"]["excludeOverhead"] = json!("yes");
        }),
    ];
    assert_outcomes(
        &run_cases("conformance-unknown-options", &effective, cases),
        &["as shared"],
        &[
            ("new option", "excludeEphemeralContainers"),
            ("non-boolean option", "excludeOverhead"),
        ],
    );

    let memory_high = shared("kep-derived/memory-high.json");
    let base = case_of(&memory_high, "", |c| {
        c["input"]["function"] == "ContainerMemoryHigh"
    });
    let cases = vec![
        variant(&base, "as shared", |_| {}),
        variant(&base, "new input field", |c| {
            c["input"]["swapBytes"] = json!(0);
        }),
        variant(&base, "request as text", |c| {
            c["input"]["requestBytes"] = json!("100Mi");
        }),
    ];
    assert_outcomes(
        &run_cases("conformance-unknown-memory-high", &memory_high, cases),
        &["as shared"],
        &[
            ("new input field", "swapBytes"),
            ("request as text", "requestBytes"),
        ],
    );

    let oom = shared("k8s-core/oom-score-adj.json");
    let base = case_of(&oom, "", |c| c["expected"].get("oomScoreAdj").is_some());
    let score = base["expected"]["oomScoreAdj"].as_i64().unwrap();
    let cases = vec![
        variant(&base, "as shared", |_| {}),
        variant(&base, "new expected field", |c| {
            c["expected"]["oomScoreAdjDefault"] = json!(score);
        }),
        // Every bound given is checked, not only the first one found.
        variant(&base, "exact score contradicts the range", |c| {
            c["expected"]["oomScoreAdjMin"] = json!(score - 1);
            c["expected"]["oomScoreAdjMax"] = json!(score + 1);
            c["expected"]["oomScoreAdj"] = json!(score + 1);
        }),
    ];
    assert_outcomes(
        &run_cases("conformance-unknown-oom", &oom, cases),
        &["as shared"],
        &[
            ("new expected field", "oomScoreAdjDefault"),
            ("exact score contradicts the range", "expected"),
        ],
    );
}

/// The upstream unit-test corpus (tests/vectors/upstream-unit): cases of
/// upstream's unit tests the shared vectors do not carry (API validation
/// and defaulting, the kubelet's cgroup values, `oom_score_adj`, in-place
/// resize, the CPU and topology managers, pod-level admission). Every case
/// passes, none is skipped, and each names the upstream file or package it
/// comes from.
#[test]
fn upstream_unit_corpus() {
    let paths = vector_files("upstream-unit");
    assert!(
        paths.len() >= 28,
        "{} upstream unit-test files",
        paths.len()
    );
    let mut total = Totals::default();
    for path in &paths {
        let file: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
        assert!(
            file["source_commit"]
                .as_str()
                .is_some_and(|c| !c.is_empty()),
            "{}: no source_commit",
            path.display()
        );
        for case in file["cases"].as_array().expect("cases") {
            let source = case["source"].as_str().unwrap_or_default();
            assert!(
                source.contains(".go") || source.contains("pkg/"),
                "{}: {}: source {source:?} names no upstream file",
                path.display(),
                case["name"]
            );
        }
        let report = run_file(policy(), path).expect("upstream unit-test file runs");
        total.add(report.totals());
        let not_passed: Vec<String> = report
            .cases
            .iter()
            .filter(|c| !matches!(c.outcome, Outcome::Pass))
            .map(|c| format!("{}: {:?}", c.name, c.outcome))
            .collect();
        assert!(not_passed.is_empty(), "{}: {not_passed:#?}", path.display());
    }
    assert!(total.passed >= 820, "{total}");
    assert_eq!(total.skipped, 0, "{total}");
}

/// The memory manager's functions: a case is the memory manager's by its
/// file's area or by its fields (a file of another area still routes it),
/// and every expected part is compared: the assignments, the machine state,
/// the error; an input field the adapter does not read fails the case.
#[test]
fn memory_manager_functions_compare_what_they_expect() {
    let file = shared("upstream-unit/memorymanager-policy-static.json");
    // Free and reserved compare as sums over a node's group (`cells`), as
    // upstream's `areMachineStatesEqual`: a case whose nodes have groups.
    let base = case_of(&file, "TestStaticPolicyAllocate / ", |c| {
        c["input"]["operation"] == "Allocate"
            && c["expected"]["assignments"]
                .as_object()
                .is_some_and(|a| !a.is_empty())
            && c["expected"]["machine_state"]
                .as_object()
                .and_then(|m| m.values().next())
                .is_some_and(|n| n["cells"].as_array().is_some_and(|c| !c.is_empty()))
    });
    let uid = base["input"]["pod"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let container = base["input"]["container"]
        .as_str()
        .expect("container")
        .to_string();
    let cases = vec![
        variant(&base, "as stored", |_| {}),
        variant(&base, "other block size", |c| {
            let blocks = &mut c["expected"]["assignments"][uid.as_str()][container.as_str()];
            let size = blocks[0]["size"].as_u64().expect("size");
            blocks[0]["size"] = json!(size + 1);
        }),
        variant(&base, "other free memory", |c| {
            let node = c["expected"]["machine_state"]
                .as_object_mut()
                .expect("machine state")
                .values_mut()
                .next()
                .expect("a node");
            let free = node["memoryMap"]["memory"]["free"].as_u64().expect("free");
            node["memoryMap"]["memory"]["free"] = json!(free + 1);
        }),
        variant(&base, "an error expected", |c| {
            c["expected"]["error"] =
                json!("[memorymanager] failed to find the default preferred hint");
        }),
        variant(&base, "new input field", |c| {
            c["input"]["reusable_memory"] = json!({});
        }),
    ];
    let outcomes = |header: &Value| run_cases("memory-manager-functions", header, cases.clone());
    let expect = |got: &[(String, Outcome)]| {
        assert_outcomes(
            got,
            &["as stored"],
            &[
                ("other block size", "assignments"),
                ("other free memory", "machine state"),
                ("an error expected", "the call succeeded"),
                ("new input field", "reusable_memory"),
            ],
        )
    };
    expect(&outcomes(&file));
    let mut elsewhere = file.clone();
    elsewhere["area"] = json!("a file of other functions");
    expect(&outcomes(&elsewhere));

    // CPU hints: an other preferred flag fails, the same list in another
    // order passes (upstream sorts both sides).
    let file = shared("upstream-unit/cpumanager-hints-and-init.json");
    let base = case_of(&file, "TestGetTopologyHints / ", |c| {
        c["expected"]["hints"]["cpu"]
            .as_array()
            .is_some_and(|h| h.len() > 1)
    });
    let cases = vec![
        variant(&base, "as stored", |_| {}),
        variant(&base, "reversed", |c| {
            let hints = c["expected"]["hints"]["cpu"].as_array_mut().expect("hints");
            hints.reverse();
        }),
        variant(&base, "other preferred", |c| {
            let first = &mut c["expected"]["hints"]["cpu"][0]["preferred"];
            *first = json!(!first.as_bool().expect("preferred"));
        }),
        variant(&base, "nil map", |c| c["expected"]["hints"] = Value::Null),
    ];
    assert_outcomes(
        &run_cases("cpu-manager-hints", &file, cases),
        &["as stored", "reversed"],
        &[("other preferred", "hints"), ("nil map", "hints")],
    );
}

/// A pod `admit` refuses with field errors (pod-level resources with their
/// gate off) must be expected so: named with its errors it passes; left
/// out of `expected.pods`, or expected admitted, it fails the case. A
/// memory manager case that fails with its expected error cannot also
/// expect a state.
#[test]
fn refusals_and_failed_calls_are_not_passed_over() {
    let file = shared("upstream-unit/kubelet-pod-level-admission.json");
    let base = case_of(&file, "", |c| {
        c["expected"]["pods"]
            .as_object()
            .is_some_and(|pods| pods.values().any(|p| p.get("errors").is_some()))
    });
    let cases = vec![
        variant(&base, "as stored", |_| {}),
        variant(&base, "not named", |c| c["expected"]["pods"] = json!({})),
        variant(&base, "no expectation", |c| {
            c["expected"]
                .as_object_mut()
                .expect("expected")
                .remove("pods");
        }),
        variant(&base, "admitted", |c| {
            let pods = c["expected"]["pods"].as_object_mut().expect("pods");
            for pod in pods.values_mut() {
                *pod = json!({"admitted": true});
            }
        }),
    ];
    assert_outcomes(
        &run_cases("admit-refusals", &file, cases),
        &["as stored"],
        &[
            ("not named", "admit refused it"),
            ("no expectation", "admit refused it"),
            ("admitted", "admit refused"),
        ],
    );

    let file = shared("upstream-unit/memorymanager-policy-static.json");
    let base = case_of(&file, "", |c| {
        c["input"]["operation"] == "Allocate" && c["expected"]["error"].is_string()
    });
    let cases = vec![
        variant(&base, "as stored", |_| {}),
        variant(&base, "a state too", |c| {
            c["expected"]["machine_state"] = json!({});
        }),
    ];
    assert_outcomes(
        &run_cases("memory-error-and-state", &file, cases),
        &["as stored"],
        &[("a state too", "given, but the call failed")],
    );
}

/// A memory block's NUMA affinity compares in its order, as Go's
/// `reflect.DeepEqual` compares the `[]int` in upstream's
/// `areMemoryBlocksEqual`: the blocks of a container may come in any
/// order, the nodes of one block may not.
#[test]
fn memory_blocks_compare_their_numa_affinity_in_order() {
    fn multi_node_blocks(case: &mut Value) -> Vec<&mut Value> {
        let mut out = Vec::new();
        if let Some(pods) = case["expected"]["assignments"].as_object_mut() {
            for containers in pods.values_mut() {
                for blocks in containers
                    .as_object_mut()
                    .into_iter()
                    .flat_map(|c| c.values_mut())
                {
                    for block in blocks.as_array_mut().into_iter().flatten() {
                        if block["numaAffinity"]
                            .as_array()
                            .is_some_and(|n| n.len() > 1)
                        {
                            out.push(&mut block["numaAffinity"]);
                        }
                    }
                }
            }
        }
        out
    }
    let file = shared("upstream-unit/memorymanager-policy-static.json");
    let base = case_of(&file, "", |c| {
        !multi_node_blocks(&mut c.clone()).is_empty() && c["expected"]["error"].is_null()
    });
    let cases = vec![
        variant(&base, "as stored", |_| {}),
        variant(&base, "nodes reversed", |c| {
            for numa in multi_node_blocks(c) {
                numa.as_array_mut().expect("nodes").reverse();
            }
        }),
        variant(&base, "blocks reversed", |c| {
            let pods = c["expected"]["assignments"].as_object_mut().expect("pods");
            for containers in pods.values_mut() {
                for blocks in containers.as_object_mut().expect("containers").values_mut() {
                    blocks.as_array_mut().expect("blocks").reverse();
                }
            }
        }),
    ];
    assert_outcomes(
        &run_cases("memory-numa-order", &file, cases),
        &["as stored", "blocks reversed"],
        &[("nodes reversed", "assignments of")],
    );
}

/// The upstream corpus's adapters read every field: an unknown input or
/// expected field, an unknown node setting or cpuset spec key fails the
/// case, and a changed expected value fails it.
#[test]
fn upstream_adapters_refuse_unknown_fields() {
    for (relative, function) in [
        ("upstream/e2e-pod-level-resources.json", "Evaluate"),
        ("upstream/e2e-pod-resize.json", "PodResize"),
        ("upstream/node-container-manager.json", "NodeCgroups"),
        ("upstream/node-container-manager.json", "ValidateNode"),
        ("upstream/pod-warnings.json", "GetWarningsForPod"),
        ("upstream/e2e-node-cpu-manager.json", "Admit"),
    ] {
        let file = shared(relative);
        let base = case_of(&file, "", |c| c["input"]["function"] == function);
        let cases = vec![
            variant(&base, "as stored", |_| {}),
            variant(&base, "new input field", |c| {
                c["input"]["swapBehavior"] = json!("LimitedSwap");
            }),
            variant(&base, "new expected field", |c| {
                c["expected"]["swapFiles"] = json!({});
            }),
        ];
        assert_outcomes(
            &run_cases(&format!("upstream-unknown-{function}"), &file, cases),
            &["as stored"],
            &[
                ("new input field", "swapBehavior"),
                ("new expected field", "swapFiles"),
            ],
        );
    }

    let file = shared("upstream/e2e-node-cpu-manager.json");
    let base = case_of(
        &file,
        "cpu_manager_test.go should assign CPUs as expected based on the Pod spec: runMultipleGuNonGuPods: the Gu container",
        |_| true,
    );
    let cases = vec![
        variant(&base, "as stored", |_| {}),
        variant(&base, "other cpu", |c| {
            c["expected"]["pods"]["gu-pod"]["containers"]["gu-container"]["cpuset"] = json!("5");
        }),
        variant(&base, "unknown cpuset key", |c| {
            c["expected"]["pods"]["gu-pod"]["containers"]["gu-container"]["cpuset"] =
                json!({"size": 1, "siblingOf": "0"});
        }),
        variant(&base, "unknown node setting", |c| {
            c["input"]["node"] =
                json!({"cpuManagerPolicy": "static", "cpuManagerReconcilePeriod": "1s"});
        }),
    ];
    assert_outcomes(
        &run_cases("upstream-admit-specs", &file, cases),
        &["as stored"],
        &[
            ("other cpu", "expected \"5\""),
            ("unknown cpuset key", "siblingOf"),
            ("unknown node setting", "cpuManagerReconcilePeriod"),
        ],
    );
}
