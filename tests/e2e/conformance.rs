//! The shared vectors through the component. Areas whose issues have landed
//! must pass completely; the rest must at least run and report.

use podpolicy::conformance::{Outcome, Totals, run_file};

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
