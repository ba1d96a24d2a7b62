//! `podpolicy apply` into stand-in cgroup roots (temporary directories; this
//! machine's cgroups are never touched): every file read back equals what
//! `explain -o json` computed, for both cgroup drivers and the node-level
//! Memory QoS cgroups; a second apply writes nothing; a dry run writes
//! nothing; unsafe names and rejected pods write nothing; a failed write
//! stops and reports the applied prefix; limits are lowered children first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{podpolicy, temp_dir, workspace};

const NODE: &str = "fixtures/nodes/node-1000gi.yaml";

/// Files under `root`, relative, with their contents.
fn tree(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let rel = path.strip_prefix(root).expect("below root");
                let text = std::fs::read_to_string(&path).expect("read");
                out.insert(rel.display().to_string(), text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).expect("read_dir").next().is_none()
}

fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
    path
}

/// The node fixture as JSON with `edit` applied (`cgroupDriver`, gates, ...).
fn node_variant(dir: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let text = std::fs::read_to_string(workspace().join(NODE)).expect("node fixture");
    let mut node: Value = serde_yaml_ng::from_str(&text).expect("node yaml");
    edit(&mut node);
    write_json(dir, name, &node)
}

/// Every fixture pod, one JSON file each, with a made-up UID where the
/// fixture has none (the pod cgroup is named after it).
fn fixture_pods_with_uids(dir: &Path) -> Vec<PathBuf> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures/pods"))
        .expect("fixtures/pods")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    sources.sort();
    let mut out = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let text = std::fs::read_to_string(source).expect("fixture");
        let mut pod: Value = serde_yaml_ng::from_str(&text).expect("yaml");
        if pod["metadata"]["uid"].as_str().is_none_or(str::is_empty) {
            pod["metadata"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
        }
        let name = source.file_stem().expect("stem").to_string_lossy();
        out.push(write_json(dir, &format!("{name}.json"), &pod));
    }
    out
}

fn explain_json(node: &Path, pods: &[PathBuf]) -> (i32, Value) {
    let mut args = vec![
        "explain",
        "-o",
        "json",
        "--node",
        node.to_str().expect("utf8"),
    ];
    args.extend(pods.iter().map(|p| p.to_str().expect("utf8")));
    let (code, stdout, stderr) = podpolicy(&args);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (code, serde_json::from_str(&stdout).expect("explain json"))
}

/// The fixture pods the policy accepts on `node`.
fn valid_fixture_pods(dir: &Path, node: &Path) -> Vec<PathBuf> {
    let all = fixture_pods_with_uids(dir);
    let (_, report) = explain_json(node, &all);
    let valid: Vec<PathBuf> = report["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter(|p| p["errors"].as_array().is_some_and(Vec::is_empty))
        .map(|p| PathBuf::from(p["source"].as_str().expect("source")))
        .collect();
    assert!(valid.len() >= 10, "most fixtures are valid: {valid:?}");
    assert!(valid.len() < all.len(), "some fixtures are invalid");
    valid
}

fn apply(extra: &[&str], node: &Path, root: &Path, pods: &[PathBuf]) -> (i32, Value, String) {
    let mut args = vec![
        "apply",
        "-o",
        "json",
        "--node",
        node.to_str().expect("utf8"),
        "--cgroup-root",
        root.to_str().expect("utf8"),
    ];
    args.extend_from_slice(extra);
    args.extend(pods.iter().map(|p| p.to_str().expect("utf8")));
    let (code, stdout, stderr) = podpolicy(&args);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let report = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (code, report, stderr)
}

#[derive(Clone, Copy, PartialEq)]
enum Driver {
    Cgroupfs,
    Systemd,
}

/// The pod cgroup as the kubelet names it, written out independently of
/// the host's code.
fn pod_dir(driver: Driver, qos: &str, uid: &str) -> String {
    let tier = match qos {
        "Guaranteed" => None,
        "Burstable" => Some("burstable"),
        "BestEffort" => Some("besteffort"),
        other => panic!("QoS {other}"),
    };
    let escaped = uid.replace('-', "_");
    match (driver, tier) {
        (Driver::Cgroupfs, None) => format!("kubepods/pod{uid}"),
        (Driver::Cgroupfs, Some(t)) => format!("kubepods/{t}/pod{uid}"),
        (Driver::Systemd, None) => format!("kubepods.slice/kubepods-pod{escaped}.slice"),
        (Driver::Systemd, Some(t)) => {
            format!("kubepods.slice/kubepods-{t}.slice/kubepods-{t}-pod{escaped}.slice")
        }
    }
}

fn node_dir(driver: Driver, cgroup: &str) -> String {
    match (driver, cgroup) {
        (Driver::Cgroupfs, "kubepods") => "kubepods".into(),
        (Driver::Cgroupfs, tier) => format!("kubepods/{tier}"),
        (Driver::Systemd, "kubepods") => "kubepods.slice".into(),
        (Driver::Systemd, tier) => format!("kubepods.slice/kubepods-{tier}.slice"),
    }
}

/// Every file the tree should hold, from `explain -o json` and the pod files.
fn expected_files(driver: Driver, report: &Value, pods: &[PathBuf]) -> BTreeMap<String, String> {
    let uid_of = |source: &str| -> String {
        let pod = pods
            .iter()
            .find(|p| p.to_str() == Some(source))
            .expect("source");
        let pod: Value = serde_json::from_slice(&std::fs::read(pod).expect("pod")).expect("json");
        pod["metadata"]["uid"].as_str().expect("uid").to_string()
    };
    let mut want = BTreeMap::new();
    let mut add = |dir: &str, files: &Value| {
        for (file, value) in files.as_object().expect("files") {
            want.insert(
                format!("{dir}/{file}"),
                value.as_str().expect("value").to_string(),
            );
        }
    };
    for pod in report["pods"].as_array().expect("pods") {
        let uid = uid_of(pod["source"].as_str().expect("source"));
        let dir = pod_dir(driver, pod["qosClass"].as_str().expect("qos"), &uid);
        add(&dir, &pod["podCgroup"]);
        for c in pod["containers"].as_array().expect("containers") {
            add(
                &format!("{dir}/{}", c["name"].as_str().expect("name")),
                &c["cgroup"],
            );
        }
    }
    for (cgroup, files) in report["node"]["cgroups"].as_object().expect("node cgroups") {
        add(&node_dir(driver, cgroup), files);
    }
    want
}

fn check_driver(driver: Driver, name: &str, edit: impl FnOnce(&mut Value)) {
    let dir = temp_dir(name);
    let node = node_variant(&dir, "node.json", edit);
    let pods = valid_fixture_pods(&dir, &node);
    let root = dir.join("cgroup");
    std::fs::create_dir(&root).expect("root");

    let (code, report, stderr) = apply(&[], &node, &root, &pods);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["dryRun"], false);
    let n_changes = report["changes"].as_array().expect("changes").len();
    assert_eq!(report["applied"], n_changes);

    let (code, explained) = explain_json(&node, &pods);
    assert_eq!(code, 0);
    let want = expected_files(driver, &explained, &pods);
    let mut got = tree(&root);
    // The host's own bookkeeping: controllers enabled top-down.
    let controls: Vec<String> = got
        .keys()
        .filter(|k| k.ends_with("cgroup.subtree_control"))
        .cloned()
        .collect();
    assert!(controls.contains(&"cgroup.subtree_control".to_string()));
    for key in controls {
        let enabled = got.remove(&key).expect("present");
        assert!(
            enabled.contains("+cpu") && enabled.contains("+memory"),
            "{key}: {enabled}"
        );
    }
    assert_eq!(got, want, "the tree holds exactly the explained values");
    assert!(want.len() > 100, "{} files", want.len());

    // A second apply finds nothing to do and changes nothing.
    let before = tree(&root);
    let (code, report, stderr) = apply(&[], &node, &root, &pods);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["changes"], json!([]));
    assert_eq!(report["applied"], 0);
    assert_eq!(tree(&root), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fixtures_apply_with_the_systemd_driver() {
    check_driver(Driver::Systemd, "apply-systemd", |node| {
        node["kubeletConfig"]["cgroupDriver"] = json!("systemd");
    });
}

#[test]
fn fixtures_apply_with_the_cgroupfs_driver() {
    check_driver(Driver::Cgroupfs, "apply-cgroupfs", |node| {
        node["kubeletConfig"]["cgroupDriver"] = json!("cgroupfs");
    });
}

#[test]
fn fixtures_apply_with_memory_qos_node_values() {
    check_driver(Driver::Cgroupfs, "apply-memory-qos", |node| {
        node["kubeletConfig"]["cgroupDriver"] = json!("cgroupfs");
        node["kubeletConfig"]["featureGates"] = json!({"MemoryQoS": true});
        node["kubeletConfig"]["memoryReservationPolicy"] = json!("HardReservation");
    });
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let dir = temp_dir("apply-dry-run");
    let pods = vec![workspace().join("fixtures/pods/kubectl-get-pod.yaml")];
    let node = workspace().join(NODE);
    let root = dir.join("cgroup");
    std::fs::create_dir(&root).expect("root");

    let (code, report, stderr) = apply(&["--dry-run"], &node, &root, &pods);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(report["dryRun"], true);
    assert_eq!(report["applied"], 0);
    assert!(report["changes"].as_array().expect("changes").len() > 10);
    assert!(is_empty_dir(&root), "a dry run creates nothing");

    // Table form: one line per change, old -> new.
    let (code, stdout, _) = podpolicy(&[
        "apply",
        "--dry-run",
        "--node",
        node.to_str().expect("utf8"),
        "--cgroup-root",
        root.to_str().expect("utf8"),
        pods[0].to_str().expect("utf8"),
    ]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("dry run: "), "{stdout}");
    let mesh = format!(
        "{}/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b6e2f8a_6c2d_4a7e_8e3f_9d8c7b6a5f4e.slice/mesh-proxy",
        root.display()
    );
    assert!(
        stdout.contains(&format!("write  {mesh}/memory.max  (absent) -> 134217728")),
        "{stdout}"
    );

    // After an apply, a drifted file shows up as one change with its old value.
    let (code, _, stderr) = apply(&[], &node, &root, &pods);
    assert_eq!(code, 0, "{stderr}");
    std::fs::write(format!("{mesh}/memory.max"), "1").expect("drift");
    let (code, report, _) = apply(&["--dry-run"], &node, &root, &pods);
    assert_eq!(code, 0);
    assert_eq!(
        report["changes"],
        json!([{"owner": "shop/checkout-7d9f8b6c5-x2k9p", "status": "planned", "action": "write", "path": format!("{mesh}/memory.max"), "old": "1", "new": "134217728"}])
    );
    assert_eq!(
        std::fs::read_to_string(format!("{mesh}/memory.max")).expect("read"),
        "1"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn hostile_pod(uid: &str, container: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hostile", "namespace": "default", "uid": uid},
        "spec": {"containers": [
            {"name": "ok", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": container, "resources": {"requests": {"memory": "1Gi"}}}
        ]}
    })
}

#[test]
fn unsafe_names_are_refused_before_any_write() {
    let dir = temp_dir("apply-hostile");
    let node = workspace().join(NODE);
    let root = dir.join("cgroup");
    std::fs::create_dir(&root).expect("root");
    let long = "x".repeat(300);
    let good_uid = "2f9c1c4e-0d6b-4b8e-9f3e-6f1a2b3c4d5e";
    let cases = [
        (hostile_pod("../x", "c"), "metadata.uid"),
        (hostile_pod("a/b", "c"), "metadata.uid"),
        (hostile_pod("a\0b", "c"), "metadata.uid"),
        (hostile_pod(&long, "c"), "metadata.uid"),
        (hostile_pod("", "c"), "metadata.uid"),
        (hostile_pod(good_uid, "../x"), "spec.containers[1].name"),
        (hostile_pod(good_uid, "a/b"), "spec.containers[1].name"),
        (hostile_pod(good_uid, "a\0b"), "spec.containers[1].name"),
        (hostile_pod(good_uid, ".."), "spec.containers[1].name"),
        (hostile_pod(good_uid, &long), "spec.containers[1].name"),
        (
            hostile_pod(good_uid, "memory.max"),
            "spec.containers[1].name",
        ),
    ];
    for (i, (pod, field)) in cases.iter().enumerate() {
        // A valid pod first, so a write before the check would show.
        let good = workspace().join("fixtures/pods/kubectl-get-pod.yaml");
        let bad = write_json(&dir, &format!("hostile-{i}.json"), pod);
        let (code, _, stderr) = apply(&[], &node, &root, &[good, bad]);
        assert_eq!(code, 2, "case {i}: {stderr}");
        assert!(stderr.contains(field), "case {i}: {stderr}");
        assert!(is_empty_dir(&root), "case {i}: nothing may be created");
        assert!(
            !dir.join("x").exists() && !dir.join("a").exists(),
            "case {i}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rejected_pods_and_bad_roots_write_nothing() {
    let dir = temp_dir("apply-rejected");
    let node = workspace().join(NODE);
    let root = dir.join("cgroup");
    std::fs::create_dir(&root).expect("root");
    let pods = fixture_pods_with_uids(&dir);
    let (code, report, stderr) = apply(&[], &node, &root, &pods);
    assert_eq!(code, 1, "the invalid fixtures are rejected: {stderr}");
    assert!(stderr.contains("nothing was written"), "{stderr}");
    assert!(
        report["pods"]
            .as_array()
            .expect("pods")
            .iter()
            .any(|p| !p["errors"].as_array().expect("errors").is_empty())
    );
    assert!(is_empty_dir(&root));

    // Roots that are not cgroup v2 and not stand-ins are refused.
    let valid = [workspace().join("fixtures/pods/kubectl-get-pod.yaml")];
    let (code, _, stderr) = apply(&["--dry-run"], &node, Path::new("/sys/kernel"), &valid);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("/sys/kernel: is not a cgroup v2 mount"),
        "{stderr}"
    );
    let (code, _, stderr) = apply(&[], &node, &dir.join("missing"), &valid);
    assert_eq!(code, 2);
    assert!(stderr.contains("missing: cannot open"), "{stderr}");

    // A v1 node is refused: apply writes cgroup v2 only.
    let v1 = node_variant(&dir, "v1.json", |n| n["cgroupVersion"] = json!("v1"));
    let (code, _, stderr) = apply(&[], &v1, &root, &valid);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cgroup v2 only"), "{stderr}");
    assert!(is_empty_dir(&root));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failed_write_stops_and_reports_the_applied_prefix() {
    let dir = temp_dir("apply-fail");
    let node = node_variant(&dir, "node.json", |n| {
        n["kubeletConfig"]["cgroupDriver"] = json!("cgroupfs");
    });
    let pods = vec![workspace().join("fixtures/pods/kubectl-get-pod.yaml")];
    let root = dir.join("cgroup");
    let pod = root.join("kubepods/burstable/pod0b6e2f8a-6c2d-4a7e-8e3f-9d8c7b6a5f4e");
    // The pod's memory.max is a directory: its write must fail.
    let blocker = pod.join("memory.max");
    std::fs::create_dir_all(&blocker).expect("blocker");

    let (code, report, stderr) = apply(&[], &node, &root, &pods);
    assert_eq!(code, 2, "{stderr}");
    let changes = report["changes"].as_array().expect("changes");
    let applied = report["applied"].as_u64().expect("applied") as usize;
    assert!(applied > 0 && applied < changes.len(), "{report}");
    assert_eq!(changes[applied]["path"], blocker.display().to_string());
    let error = report["error"].as_str().expect("error");
    assert!(
        error.contains(&format!("{}: ", blocker.display())),
        "{error}"
    );
    assert!(
        stderr.contains(&format!(
            "{applied} of {} change(s) were applied",
            changes.len()
        )),
        "{stderr}"
    );
    // Exactly the prefix happened.
    for (i, change) in changes.iter().enumerate() {
        let path = Path::new(change["path"].as_str().expect("path"));
        let done = match change["action"].as_str() {
            Some("mkdir") => path.is_dir(),
            _ => std::fs::read_to_string(path).ok().as_deref() == change["new"].as_str(),
        };
        assert_eq!(done, i < applied, "change {i}: {change}");
    }
    // Once the blocker is gone, the same apply completes the rest.
    std::fs::remove_dir(&blocker).expect("unblock");
    let (code, report, stderr) = apply(&[], &node, &root, &pods);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        report["changes"].as_array().map(Vec::len),
        Some(changes.len() - applied)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn limits_pod(pod_memory: &str, pod_cpu: &str, c1_memory: &str, c1_cpu: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "shrink", "namespace": "default", "uid": "6a1f0d3e-7b2c-4e5f-8a9b-0c1d2e3f4a5b"},
        "spec": {
            "resources": {"limits": {"memory": pod_memory, "cpu": pod_cpu}},
            "containers": [
                {"name": "c1", "resources": {"limits": {"memory": c1_memory, "cpu": c1_cpu}}},
                {"name": "c2"}
            ]
        }
    })
}

/// The order in which `file` was written, as cgroup directories relative to `root`.
fn write_order(report: &Value, root: &Path, file: &str) -> Vec<String> {
    report["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .filter_map(|c| c["path"].as_str())
        .filter(|p| p.ends_with(&format!("/{file}")))
        .map(|p| {
            let dir = Path::new(p).parent().expect("dir");
            dir.strip_prefix(root).expect("below").display().to_string()
        })
        .collect()
}

#[test]
fn limits_are_lowered_children_first_and_raised_parents_first() {
    let dir = temp_dir("apply-order");
    let node = node_variant(&dir, "node.json", |n| {
        n["kubeletConfig"]["cgroupDriver"] = json!("cgroupfs");
    });
    let root = dir.join("cgroup");
    std::fs::create_dir(&root).expect("root");
    let big = write_json(&dir, "big.json", &limits_pod("2Gi", "4", "1Gi", "2"));
    let small = write_json(&dir, "small.json", &limits_pod("1Gi", "2", "512Mi", "1"));
    // Burstable: c2 has no requests of its own.
    let pod = "kubepods/burstable/pod6a1f0d3e-7b2c-4e5f-8a9b-0c1d2e3f4a5b".to_string();
    let (c1, c2) = (format!("{pod}/c1"), format!("{pod}/c2"));
    let children_first = vec![c1.clone(), c2.clone(), pod.clone()];
    let parent_first = vec![pod.clone(), c1.clone(), c2.clone()];

    let (code, _, stderr) = apply(&[], &node, &root, std::slice::from_ref(&big));
    assert_eq!(code, 0, "{stderr}");
    let (code, report, stderr) = apply(&[], &node, &root, std::slice::from_ref(&small));
    assert_eq!(code, 0, "{stderr}");
    // c2 has no limit of its own: it follows the pod limit, so it shrinks too.
    assert_eq!(write_order(&report, &root, "memory.max"), children_first);
    assert_eq!(write_order(&report, &root, "cpu.max"), children_first);
    let last_child = report["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .rposition(|c| {
            c["path"]
                .as_str()
                .is_some_and(|p| p.contains(&format!("{c1}/")) || p.contains(&format!("{c2}/")))
        })
        .expect("child writes");
    let first_pod_limit = report["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .position(|c| {
            c["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("{pod}/memory.max")))
        })
        .expect("pod write");
    assert!(last_child < first_pod_limit, "{report}");

    let (code, report, stderr) = apply(&[], &node, &root, std::slice::from_ref(&big));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(write_order(&report, &root, "memory.max"), parent_first);
    assert_eq!(write_order(&report, &root, "cpu.max"), parent_first);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn oom_score_adj_is_written_for_given_pids() {
    let dir = temp_dir("apply-oom");
    let node = workspace().join(NODE);
    let root = dir.join("cgroup");
    let proc_root = dir.join("proc");
    std::fs::create_dir(&root).expect("root");
    for pid in ["4242", "4343"] {
        std::fs::create_dir_all(proc_root.join(pid)).expect("proc");
        std::fs::write(proc_root.join(pid).join("oom_score_adj"), "0\n").expect("oom");
    }
    let pods = vec![workspace().join("fixtures/pods/kubectl-get-pod.yaml")];
    let (_, explained) = explain_json(&node, &pods);
    let score = |name: &str| {
        explained["pods"][0]["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .find(|c| c["name"] == name)
            .expect("container")["oomScoreAdj"]
            .as_i64()
            .expect("score")
    };
    let proc_arg = proc_root.to_str().expect("utf8");
    let (code, report, stderr) = apply(
        &[
            "--proc-root",
            proc_arg,
            "--pid",
            "checkout=4242",
            "--pid",
            "shop/checkout-7d9f8b6c5-x2k9p/mesh-proxy=4343",
        ],
        &node,
        &root,
        &pods,
    );
    assert_eq!(code, 0, "{stderr}");
    let read = |pid: &str| {
        std::fs::read_to_string(proc_root.join(pid).join("oom_score_adj")).expect("read")
    };
    assert_eq!(read("4242"), score("checkout").to_string());
    assert_eq!(read("4343"), score("mesh-proxy").to_string());
    let last = report["changes"]
        .as_array()
        .expect("changes")
        .last()
        .cloned();
    assert_eq!(
        last.expect("a change")["old"],
        "0",
        "oom_score_adj comes last"
    );

    for (args, message) in [
        (vec!["--pid", "nope=4242"], "no container `nope`"),
        (vec!["--pid", "checkout=999"], "no process 999"),
        (vec!["--pid", "checkout=x"], "not a process id"),
        (
            vec!["--pid", "checkout=4242", "--pid", "mesh-proxy=4242"],
            "given twice",
        ),
    ] {
        let mut all = vec!["--proc-root", proc_arg];
        all.extend(args);
        let (code, _, stderr) = apply(&all, &node, &root, &pods);
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
