//! `podpolicy topology`: the fixture machines drawn as text, SVG and JSON,
//! with the reserved CPUs, the shared pool and dry-run placements that the
//! component decides. (The SVG in a real browser: tests/browser/run.sh.)

use serde_json::Value;

use crate::util::{podpolicy, temp_dir};

const DUAL: &str = "fixtures/nodes/dual-socket-static.yaml";
const BIG: &str = "fixtures/nodes/server-256-static.yaml";
const DB: &str = "fixtures/topology/guaranteed-4cpu.yaml";
const MIXED: &str = "fixtures/pods/kep5526-pod-scope-mixed.yaml";

fn run(args: &[&str]) -> String {
    let (code, stdout, stderr) = podpolicy(args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    stdout
}

fn assert_fits(text: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= 100,
            "wider than 100 columns: {line:?}"
        );
    }
    assert!(!text.contains('\x1b'), "colour when not a terminal");
}

#[test]
fn dual_socket_text_shows_sockets_numa_cores_and_threads() {
    let text = run(&["topology", "--node", DUAL]);
    assert_fits(&text);
    assert!(
        text.starts_with("node numa-node: 12 CPUs, CPU manager static, memory manager Static\n"),
        "{text}"
    );
    // Core 0 holds CPUs 0 and 6 (SMT siblings); CPU 0 is the reserved one
    // (systemReserved cpu: 1, picked by the component's static policy).
    for line in [
        "socket 0",
        "  NUMA 0",
        "    memory           total 63.9Gi  reserved 1Gi  assigned 0  free 62.4Gi",
        "    hugepages-2Mi    total 512Mi  reserved 0  assigned 0  free 512Mi",
        "       0:R.  2:..  4:..",
        "socket 1",
        "       1:..  3:..  5:..",
        "reserved CPUs  0",
        "shared pool    1-11",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
}

#[test]
fn dual_socket_dry_run_places_pods_without_touching_the_state() {
    let text = run(&["topology", "--node", DUAL, DB, MIXED]);
    assert_fits(&text);
    for line in [
        "       0:R.  2:AA  4:AA",
        "       1:BB  3:bb  5:..",
        "      default/db/postgres memory 4Gi",
        "shared pool    5-6,11",
        "A default/db (dry run)",
        "    postgres             exclusive 2,4,8,10",
        "B default/pod-scope-mixed (dry run)",
        "    pod cpuset 1,3,7,9  pod shared pool 3,9",
        "    container-1          exclusive 1,7",
        "    container-2          pod shared pool 3,9",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }

    // With a checkpointed pod: it keeps its CPUs, the new one goes around
    // it, and the checkpoints are not written.
    let state = temp_dir("topology-state");
    let state_arg = state.to_str().unwrap();
    let (code, _, stderr) = podpolicy(&[
        "admit",
        MIXED,
        "--node",
        DUAL,
        "--sysfs",
        "fixtures/sysfs/topoDualSocketHT",
        "--state",
        state_arg,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let before: Vec<_> = ["cpu_manager_state", "memory_manager_state"]
        .iter()
        .map(|f| std::fs::read(state.join(f)).unwrap())
        .collect();
    let json = run(&[
        "topology", "--node", DUAL, "--state", state_arg, DB, "-o", "json",
    ]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "TopologyView");
    let pods = v["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2, "{json}");
    assert_eq!(pods[0]["uid"], "7a0c9d2e-1111-4a3b-9c5d-5526aa000002");
    assert_eq!(pods[0]["dryRun"], false);
    // Admitted alone, the KEP-5526 pod took NUMA 0's free cores; the
    // checkpoint does not name it, so it shows by UID.
    assert_eq!(pods[0]["podCpuset"], "2,4,8,10");
    assert_eq!(pods[0]["podSharedPool"], "4,10");
    assert_eq!(pods[0]["containers"][0]["cpuUse"], "exclusive");
    assert_eq!(pods[0]["containers"][1]["cpuUse"], "podShared");
    assert_eq!(pods[1]["name"], "default/db");
    assert_eq!(pods[1]["dryRun"], true);
    assert_eq!(pods[1]["containers"][0]["cpuset"], "1,3,7,9");
    let after: Vec<_> = ["cpu_manager_state", "memory_manager_state"]
        .iter()
        .map(|f| std::fs::read(state.join(f)).unwrap())
        .collect();
    assert_eq!(before, after, "topology wrote the checkpoints");
}

#[test]
fn the_256_cpu_server_fits_100_columns_with_l3_groups() {
    let text = run(&["topology", "--node", BIG, DB]);
    assert_fits(&text);
    assert!(text.starts_with("node big-server: 256 CPUs"), "{text}");
    for line in [
        "  NUMA 3",
        "    L3 0",
        "    L3 15",
        // Core 1 is CPUs 1 and 129: the 4-CPU pod gets two whole cores next
        // to the reserved core 0 (CPUs 0 and 128).
        "        0:RR   1:AA   2:AA   3:..   4:..   5:..   6:..   7:..",
        "      120:.. 121:.. 122:.. 123:.. 124:.. 125:.. 126:.. 127:..",
        "reserved CPUs  0,128",
        "shared pool    3-127,131-255",
        "    postgres             exclusive 1-2,129-130",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    let v: Value =
        serde_json::from_str(&run(&["topology", "--node", BIG, DB, "-o", "json"])).unwrap();
    assert_eq!(v["cpuCount"], 256);
    assert_eq!(v["reservedCpus"], "0,128");
    assert_eq!(v["sockets"].as_array().unwrap().len(), 2);
    let numa0 = &v["sockets"][0]["numaNodes"][0];
    assert_eq!(numa0["cacheGroups"].as_array().unwrap().len(), 4);
    let core1 = &numa0["cacheGroups"][0]["cores"][1];
    assert_eq!(core1["id"], 1);
    assert_eq!(core1["cpus"][1]["id"], 129);
    assert_eq!(core1["cpus"][1]["use"], "exclusive");
    assert_eq!(core1["cpus"][1]["container"], "postgres");
    let memory = numa0["memory"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["resource"] == "memory")
        .unwrap();
    assert_eq!(memory["assigned"], 4u64 << 30);
    assert_eq!(memory["systemReserved"], 2u64 << 30);
}

#[test]
fn svg_is_standalone_with_readable_labels() {
    let svg = run(&["topology", "--node", DUAL, DB, MIXED, "-o", "svg"]);
    assert!(svg.starts_with(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\""
    ));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<g>").count(), 12, "one group per CPU");
    assert_eq!(svg.matches("<g>").count(), svg.matches("</g>").count());
    for label in [
        ">socket 0</text>",
        ">socket 1</text>",
        ">NUMA 0</text>",
        ">L3 1</text>",
        "<title>CPU 2: default/db/postgres</title>",
        "<title>CPU 3: default/pod-scope-mixed pod shared pool</title>",
        ">reserved 0</text>",
        ">default/db (dry run); postgres exclusive 2,4,8,10</text>",
        "memory: total 63.9Gi, reserved 1Gi, assigned 4Gi, free 58.4Gi",
    ] {
        assert!(svg.contains(label), "no {label:?} in the SVG");
    }
    let big = run(&["topology", "--node", BIG, "-o", "svg"]);
    assert_eq!(big.matches("<g>").count(), 256);
    assert!(big.contains(">L3 15</text>"));
}

#[test]
fn a_node_without_static_managers_is_drawn_unmanaged() {
    let text = run(&[
        "topology",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "--sysfs",
        "fixtures/sysfs/topoDualSocketHT",
        DB,
    ]);
    assert!(text.contains("       0:--  2:--  4:--"), "{text}");
    assert!(
        text.contains(
            "    not admitted: not placed: the node runs no static CPU or memory manager"
        ),
        "{text}"
    );
    // A pod without a UID cannot be placed: said, and the rest is drawn.
    let text = run(&[
        "topology",
        "--node",
        DUAL,
        "fixtures/pods/kep-row16-all-set.yaml",
        DB,
    ]);
    assert!(
        text.contains("    not admitted: uid: the managers key their state by pod UID (Required)"),
        "{text}"
    );
    assert!(
        text.contains("    postgres             exclusive 2,4,8,10"),
        "{text}"
    );
    let (code, _, stderr) = podpolicy(&["topology", "--node", DUAL, "--sysfs", "no/such/dir"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no/such/dir"), "{stderr}");
}

#[test]
fn the_readme_picture_is_the_real_output() {
    let readme = std::fs::read_to_string(crate::util::workspace().join("README.md")).unwrap();
    let start = readme
        .find("$ podpolicy topology --node fixtures/nodes/dual-socket-static.yaml")
        .expect("the README shows a topology picture");
    let body = &readme[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    let body = &body[body.find('\n').unwrap() + 1..]; // the command's second line
    let picture = &body[..body.find("```").unwrap()];
    assert_eq!(picture, run(&["topology", "--node", DUAL, DB, MIXED]));
}
