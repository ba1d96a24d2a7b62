//! `explain --why`: every value with the rule behind it, from the
//! component's `explain-values` export (not from the host).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::util::{podpolicy, temp_dir};

fn explain_json(args: &[&str]) -> Value {
    let mut all = vec!["explain", "-o", "json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = podpolicy(&all);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The `why` rows of `pod`, by (container or "", file).
fn why_of<'a>(pod: &'a Value, container: &str, file: &str) -> &'a Value {
    let rows = pod["why"].as_array().expect("a why list");
    let found: Vec<&Value> = rows
        .iter()
        .filter(|w| w["container"].as_str().unwrap_or("") == container && w["file"] == file)
        .collect();
    assert_eq!(found.len(), 1, "{container} {file}: {rows:#?}");
    found[0]
}

/// Every value the pod's report shows has exactly one reason, with the
/// same value, and no reason names a value that is not shown.
fn assert_every_value_explained(pod: &Value) {
    let mut shown = BTreeSet::new();
    for (file, value) in pod["podCgroup"].as_object().expect("podCgroup") {
        shown.insert((
            String::new(),
            file.clone(),
            value.as_str().unwrap().to_owned(),
        ));
    }
    for c in pod["containers"].as_array().expect("containers") {
        let name = c["name"].as_str().unwrap().to_owned();
        for (file, value) in c["cgroup"].as_object().expect("cgroup") {
            shown.insert((
                name.clone(),
                file.clone(),
                value.as_str().unwrap().to_owned(),
            ));
        }
        shown.insert((name, "oom_score_adj".into(), c["oomScoreAdj"].to_string()));
    }
    let mut explained = BTreeSet::new();
    for w in pod["why"].as_array().expect("a why list") {
        let key = (
            w["container"].as_str().unwrap_or("").to_owned(),
            w["file"].as_str().unwrap().to_owned(),
            w["value"].as_str().unwrap().to_owned(),
        );
        assert!(
            !w["reason"].as_str().unwrap().is_empty(),
            "an empty reason: {w}"
        );
        assert!(explained.insert(key), "explained twice: {w}");
    }
    assert_eq!(explained, shown);
}

#[test]
fn every_value_of_the_kep_ide_pod_has_its_rule() {
    let report = explain_json(&[
        "--why",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/pods/kep-ide.yaml",
    ]);
    let pod = &report["pods"][0];
    assert_every_value_explained(pod);
    assert_eq!(
        why_of(pod, "shell", "cpu.weight")["reason"],
        "container has no cpu request; kubelet uses the pod-level cpu limit 4 -> 4096 shares (MilliCPUToShares, at least 2) -> weight 157 (linear curve)"
    );
    assert_eq!(
        why_of(pod, "ide", "cpu.max")["reason"],
        "container cpu limit 1 -> quota 100000 us per 100000 us period (MilliCPUToQuota)"
    );
    assert_eq!(
        why_of(pod, "", "cpu.weight")["reason"],
        "pod cpu requests 500m (PodRequests) -> 512 shares (MilliCPUToShares) -> weight 20 (linear curve, as for every pod cgroup)"
    );
    assert_eq!(
        why_of(pod, "", "memory.max")["reason"],
        "Burstable pod, memory limits 1Gi (PodLimits) = 1073741824 bytes"
    );
    // Without --why there is no such list.
    let plain = explain_json(&[
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/pods/kep-ide.yaml",
    ]);
    assert!(plain["pods"][0].get("why").is_none());
}

#[test]
fn memory_high_names_the_factor_the_limit_and_the_page() {
    let dir = temp_dir("explain-why-mqos");
    let node = dir.join("node.yaml");
    std::fs::write(
        &node,
        "name: mqos-node\ncgroupVersion: v2\ncapacity: {cpu: \"8\", memory: 32Gi}\nkubeletConfig:\n  memoryThrottlingFactor: 0.9\n  featureGates: {MemoryQoS: true}\n",
    )
    .unwrap();
    let pod = dir.join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default, uid: 0d8e0000-0000-4000-8000-0000000000aa}\nspec:\n  containers:\n  - name: app\n    image: nginx\n    resources:\n      requests: {cpu: 250m, memory: 256Mi}\n      limits: {cpu: \"1\", memory: 1Gi}\n",
    )
    .unwrap();
    let report = explain_json(&[
        "--why",
        "--node",
        node.to_str().unwrap(),
        pod.to_str().unwrap(),
    ]);
    let pod = &report["pods"][0];
    assert_every_value_explained(pod);
    let high = why_of(pod, "app", "memory.high");
    // floor((256Mi + 0.9 x (1Gi - 256Mi)) / 4096) x 4096
    assert_eq!(high["value"], "993210368");
    assert_eq!(
        high["reason"],
        "Memory QoS, Burstable container: floor((request 268435456 + factor 0.9 x (memory limit 1073741824 - request)) / page 4096) x page"
    );
    assert_eq!(
        why_of(pod, "app", "oom_score_adj")["value"],
        "993",
        "1000 - 1000 x 256Mi / 32Gi"
    );
}

/// On a node whose static CPU manager places pods, the cpusets come from
/// the admission, and their rows say so; evaluate's quota, replaced by the
/// placement, is named with its own reason.
#[test]
fn placed_values_say_the_managers_placed_them() {
    let report = explain_json(&[
        "--why",
        "--node",
        "fixtures/nodes/dual-socket-static.yaml",
        "--sysfs",
        "fixtures/sysfs/topoDualSocketHT",
        "fixtures/topology/guaranteed-4cpu.yaml",
    ]);
    let pod = &report["pods"][0];
    assert_every_value_explained(pod);
    let name = pod["containers"][0]["name"].as_str().unwrap();
    let cpus = why_of(pod, name, "cpuset.cpus");
    assert_eq!(cpus["value"], pod["containers"][0]["cgroup"]["cpuset.cpus"]);
    assert_eq!(
        cpus["reason"],
        "placed by the resource managers' admission (see `podpolicy admit`)"
    );
}
