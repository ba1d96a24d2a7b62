//! Real workload inputs (`podpolicy::pod_input`): workloads read through
//! their pod template, directories like `kubectl -f DIR [-R]`, strict
//! unknown fields, the `default` namespace and static pod manifests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use podpolicy::bindings::{Container, Pod};
use podpolicy::pod_input::{
    PodDocument, ReadOptions, SUPPORTED_KINDS, UnknownFields, kubelet_static_pod_uid,
    parse_pods_with, pod_from_json, read_pods, read_pods_with, workload_pod_uid,
};
use serde_json::json;

use crate::util::{podpolicy, podpolicy_with_stdin, temp_dir, workspace};

fn workloads() -> PathBuf {
    workspace().join("fixtures/workloads")
}

fn one(name: &str) -> PodDocument {
    let mut docs = read_pods(&workloads().join(name)).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert_eq!(docs.len(), 1, "{name}: one pod");
    docs.remove(0)
}

fn quantities(list: Option<&Vec<podpolicy::bindings::ResourceQuantity>>) -> BTreeMap<&str, &str> {
    list.into_iter()
        .flatten()
        .map(|q| (q.name.as_str(), q.quantity.as_str()))
        .collect()
}

fn requests(c: &Container) -> BTreeMap<&str, &str> {
    quantities(c.resources.as_ref().and_then(|r| r.requests.as_ref()))
}

fn limits(c: &Container) -> BTreeMap<&str, &str> {
    quantities(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

fn names(containers: &[Container]) -> Vec<&str> {
    containers.iter().map(|c| c.name.as_str()).collect()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.annotations
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The pod read from a document is the pod its JSON describes (patches are
/// applied to the JSON: both must stay one pod).
fn assert_json_is_the_pod(doc: &PodDocument) {
    assert_eq!(
        pod_from_json(&doc.json).expect("the document's JSON parses"),
        doc.pod,
        "{}",
        doc.origin
    );
}

#[test]
fn a_deployment_is_its_pod_template_named_after_it() {
    let doc = one("deployment.yaml");
    let pod = &doc.pod;
    assert_eq!(pod.name, "web");
    assert_eq!(pod.namespace, "shop");
    assert_eq!(pod.uid, workload_pod_uid("Deployment", "shop", "web"));
    assert_eq!(annotation(pod, "prometheus.io/scrape"), Some("true"));
    assert_eq!(names(&pod.spec.containers), ["app", "log-shipper"]);
    let app = &pod.spec.containers[0];
    assert_eq!(
        requests(app),
        BTreeMap::from([("cpu", "500m"), ("memory", "256Mi")])
    );
    // `cpu: 1`, a bare YAML number, is the quantity "1".
    assert_eq!(
        limits(app),
        BTreeMap::from([("cpu", "1"), ("memory", "512Mi")])
    );
    let resize: Vec<(&str, &str)> = app
        .resize_policy
        .iter()
        .map(|p| (p.resource_name.as_str(), p.restart_policy.as_str()))
        .collect();
    assert_eq!(
        resize,
        [("cpu", "NotRequired"), ("memory", "RestartContainer")]
    );
    let shipper = &pod.spec.containers[1];
    assert_eq!(
        requests(shipper),
        BTreeMap::from([("cpu", "50m"), ("memory", "64Mi")])
    );
    assert_eq!(limits(shipper), BTreeMap::from([("memory", "128Mi")]));
    assert_eq!(
        doc.origin,
        workloads().join("deployment.yaml").display().to_string()
    );
    assert_eq!(doc.json["kind"], "Pod");
    assert_eq!(doc.json["metadata"]["name"], "web");
    assert_json_is_the_pod(&doc);
}

#[test]
fn every_workload_kind_becomes_the_right_pod() {
    struct Case {
        file: &'static str,
        kind: &'static str,
        namespace: &'static str,
        name: &'static str,
        containers: &'static [&'static str],
        init: &'static [&'static str],
        /// The first container's requests.
        requests: &'static [(&'static str, &'static str)],
    }
    let cases = [
        Case {
            file: "statefulset.yaml",
            kind: "StatefulSet",
            namespace: "data",
            name: "db",
            containers: &["postgres"],
            init: &[],
            requests: &[("cpu", "2"), ("memory", "4Gi")],
        },
        Case {
            file: "daemonset.yaml",
            kind: "DaemonSet",
            namespace: "monitoring",
            name: "node-exporter",
            containers: &["node-exporter"],
            init: &[],
            requests: &[("cpu", "100m"), ("memory", "30Mi")],
        },
        Case {
            file: "job.yaml",
            kind: "Job",
            namespace: "default",
            name: "pi",
            containers: &["pi"],
            init: &["fetch"],
            requests: &[("cpu", "1"), ("memory", "128Mi")],
        },
        Case {
            file: "cronjob.yaml",
            kind: "CronJob",
            namespace: "ops",
            name: "backup",
            containers: &["backup"],
            init: &[],
            requests: &[("cpu", "250m"), ("memory", "512Mi")],
        },
        Case {
            file: "podtemplate.yaml",
            kind: "PodTemplate",
            namespace: "batch",
            name: "worker-template",
            containers: &["worker"],
            init: &[],
            requests: &[("cpu", "750m"), ("memory", "1Gi")],
        },
    ];
    for case in cases {
        let file = case.file;
        let doc = one(file);
        let pod = &doc.pod;
        assert_eq!(pod.name, case.name, "{file}");
        assert_eq!(pod.namespace, case.namespace, "{file}");
        assert_eq!(
            pod.uid,
            workload_pod_uid(case.kind, case.namespace, case.name),
            "{file}"
        );
        assert_eq!(names(&pod.spec.containers), case.containers, "{file}");
        assert_eq!(names(&pod.spec.init_containers), case.init, "{file}");
        assert_eq!(
            requests(&pod.spec.containers[0]),
            case.requests.iter().copied().collect::<BTreeMap<_, _>>(),
            "{file}"
        );
        assert_json_is_the_pod(&doc);
    }
    let job = one("job.yaml").pod;
    assert_eq!(job.spec.restart_policy.as_deref(), Some("Never"));
    let daemon = one("daemonset.yaml").pod;
    assert_eq!(
        daemon.spec.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    let cron = one("cronjob.yaml").pod;
    assert_eq!(cron.spec.restart_policy.as_deref(), Some("OnFailure"));
}

#[test]
fn workload_uids_are_stable_distinct_uuids() {
    let uid = workload_pod_uid("Deployment", "shop", "web");
    assert_eq!(uid, workload_pod_uid("Deployment", "shop", "web"));
    assert_ne!(uid, workload_pod_uid("StatefulSet", "shop", "web"));
    assert_ne!(uid, workload_pod_uid("Deployment", "default", "web"));
    assert_ne!(uid, workload_pod_uid("Deployment", "shop", "web2"));
    let groups: Vec<&str> = uid.split('-').collect();
    assert_eq!(
        groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12],
        "{uid}"
    );
    assert!(groups[2].starts_with('8'), "version 8: {uid}");
    assert!(
        matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
        "RFC 9562 variant: {uid}"
    );
    // A template UID, when given, is kept.
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {uid: fixed-uid, labels: {a: b}}\n    spec: {containers: [{name: c}]}\n";
    let read = parse_pods_with("w.yaml", text, &ReadOptions::default()).expect("reads");
    assert_eq!(read.docs[0].pod.uid, "fixed-uid");
    assert_eq!(read.docs[0].pod.namespace, "default");
}

#[test]
fn multi_document_files_and_lists_mix_kinds() {
    let path = workloads().join("mixed.yaml");
    let docs = read_pods(&path).expect("mixed.yaml reads");
    let base = path.display().to_string();
    let got: Vec<(String, &str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d.origin.strip_prefix(&base).expect("origin").to_string(),
                d.pod.namespace.as_str(),
                d.pod.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("#1".to_string(), "shop", "cache"),
            ("#2".to_string(), "default", "debug"),
            ("#3#items[0]".to_string(), "shop", "migrate"),
            ("#3#items[1]".to_string(), "shop", "probe"),
        ]
    );
    assert_eq!(
        docs[0].pod.uid,
        workload_pod_uid("ReplicaSet", "shop", "cache")
    );
    assert_eq!(docs[2].pod.uid, workload_pod_uid("Job", "shop", "migrate"));
    // A Pod without a UID keeps an empty one (no node name: not a static pod).
    assert_eq!(docs[1].pod.uid, "");
    assert_eq!(docs[3].pod.uid, "");
    assert_eq!(
        limits(&docs[3].pod.spec.containers[0]),
        BTreeMap::from([("cpu", "50m"), ("memory", "32Mi")])
    );
    for doc in &docs {
        assert_json_is_the_pod(doc);
    }

    // Typed lists may leave out their items' kind.
    let list = r#"{"apiVersion":"apps/v1","kind":"DeploymentList","items":[
        {"metadata":{"name":"a","namespace":"n"},"spec":{"selector":{},"template":{"spec":{"containers":[{"name":"c"}]}}}}]}"#;
    let read = parse_pods_with("list.json", list, &ReadOptions::default()).expect("reads");
    assert_eq!(read.docs[0].origin, "list.json#items[0]");
    assert_eq!(
        read.docs[0].pod.uid,
        workload_pod_uid("Deployment", "n", "a")
    );
}

#[test]
fn a_pod_without_a_namespace_is_in_default() {
    let text =
        "apiVersion: v1\nkind: Pod\nmetadata: {name: lonely}\nspec:\n  containers: [{name: c}]\n";
    let read = parse_pods_with("p.yaml", text, &ReadOptions::default()).expect("reads");
    let doc = &read.docs[0];
    assert_eq!(doc.pod.namespace, "default");
    assert_eq!(doc.json["metadata"]["namespace"], "default");
    assert_json_is_the_pod(doc);
    // Even without any metadata.
    let read = parse_pods_with(
        "p.yaml",
        "spec: {containers: [{name: c}]}\n",
        &ReadOptions::default(),
    )
    .expect("reads");
    assert_eq!(read.docs[0].pod.namespace, "default");
    // A namespace given is kept.
    let text =
        "kind: Pod\nmetadata: {name: p, namespace: team-a}\nspec: {containers: [{name: c}]}\n";
    let read = parse_pods_with("p.yaml", text, &ReadOptions::default()).expect("reads");
    assert_eq!(read.docs[0].pod.namespace, "team-a");
    // The webhook's lenient conversion applies no default.
    let pod =
        pod_from_json(&json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}))
            .expect("pod");
    assert_eq!(pod.namespace, "");
}

#[test]
fn a_typo_in_a_pod_is_an_error_naming_its_path() {
    let path = workloads().join("typo-pod.yaml");
    let error = format!("{:#}", read_pods(&path).expect_err("refused"));
    assert!(
        error.contains(r#"unknown field "spec.containers[0].resouces""#),
        "{error}"
    );
    assert!(error.contains("typo-pod.yaml"), "{error}");

    // As a warning, the field is ignored and the pod read (BestEffort).
    let options = ReadOptions {
        unknown_fields: UnknownFields::Warn,
        ..ReadOptions::default()
    };
    let read = read_pods_with(&path, &options).expect("read with a warning");
    assert_eq!(
        read.warnings,
        [format!(
            "{}: unknown field \"spec.containers[0].resouces\"",
            path.display()
        )]
    );
    assert_eq!(read.docs.len(), 1);
    assert_eq!(read.docs[0].pod.name, "typo");
    assert!(read.docs[0].pod.spec.containers[0].resources.is_none());
}

#[test]
fn unknown_fields_anywhere_in_a_workload_are_named() {
    let options = ReadOptions::default();
    let cases = [
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    spec:\n      containers:\n      - name: c\n        resouces: {limits: {cpu: 1}}\n",
            "spec.template.spec.containers[0].resouces",
        ),
        (
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: c\n          - name: d\n            resources: {limit: {cpu: 1}}\n",
            "spec.jobTemplate.spec.template.spec.containers[1].resources.limit",
        ),
        (
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s, lables: {a: b}}\nspec:\n  selector: {}\n  template: {spec: {containers: [{name: c}]}}\n",
            "metadata.lables",
        ),
        (
            "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: t}\ntemplate:\n  spec:\n    initContainers: [{name: i, restartPolcy: Always}]\n    containers: [{name: c}]\n",
            "template.spec.initContainers[0].restartPolcy",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n  resources: {requests: {cpu: 1}}\n  overheads: {cpu: 1}\n",
            "spec.overheads",
        ),
    ];
    for (text, field) in cases {
        let error = format!(
            "{:#}",
            parse_pods_with("w.yaml", text, &options).expect_err(field)
        );
        assert!(
            error.contains(&format!("unknown field \"{field}\"")),
            "{field}: {error}"
        );
        assert!(error.starts_with("w.yaml: "), "{error}");
        let read = parse_pods_with(
            "w.yaml",
            text,
            &ReadOptions {
                unknown_fields: UnknownFields::Warn,
                ..ReadOptions::default()
            },
        )
        .expect("warned");
        assert_eq!(
            read.warnings,
            [format!("w.yaml: unknown field \"{field}\"")]
        );
    }
    // Several unknown fields are all named.
    let text = "kind: Pod\nmetadata: {name: p, nam: x}\nspec: {containers: [{name: c, imag: x}]}\n";
    let error = format!(
        "{:#}",
        parse_pods_with("p.yaml", text, &options).expect_err("refused")
    );
    assert!(error.contains(r#"unknown field "metadata.nam""#), "{error}");
    assert!(
        error.contains(r#"unknown field "spec.containers[0].imag""#),
        "{error}"
    );
}

#[test]
fn status_and_every_fixture_pod_are_known_fields() {
    let options = ReadOptions {
        unknown_fields: UnknownFields::Warn,
        ..ReadOptions::default()
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures/pods"))
        .expect("fixtures/pods")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 19, "{files:?}");
    for file in &files {
        let read = read_pods_with(file, &options).expect("fixture reads");
        assert!(read.warnings.is_empty(), "{:?}", read.warnings);
    }
    // `kubectl get pod -o yaml` carries a status.
    let kubectl =
        read_pods(&workspace().join("fixtures/pods/kubectl-get-pod.yaml")).expect("reads");
    assert!(kubectl[0].json.get("status").is_some());
    // The newer claim status shape (`mapping`, `overhead`) is read by the
    // host, not refused.
    let text = r#"{"kind":"Pod","metadata":{"name":"p","namespace":"n"},"spec":{"containers":[{"name":"c"}]},
        "status":{"nodeAllocatableResourceClaimStatuses":[{"resourceClaimName":"r","containers":["c"],
        "mapping":[{"name":"example.com/gpu","quantity":"1"}],"overhead":[{"name":"memory","perPod":"1Mi"}]}]}}"#;
    let read = parse_pods_with("claims.json", text, &ReadOptions::default()).expect("reads");
    let claims = &read.docs[0].pod.status.node_allocatable_claim_statuses;
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].mapping[0].name, "example.com/gpu");
    // Resize fixtures too.
    for file in ["web-old.yaml", "web-new.yaml"] {
        read_pods(&workspace().join("fixtures/resize").join(file)).expect(file);
    }
}

#[test]
fn wrong_types_and_unknown_kinds_are_errors_naming_them() {
    let options = ReadOptions::default();
    let error = format!(
        "{:#}",
        parse_pods_with("s.yaml", "kind: Service\nmetadata: {name: s}\n", &options)
            .expect_err("refused")
    );
    assert!(error.contains("kind is `Service`"), "{error}");
    for kind in SUPPORTED_KINDS {
        assert!(error.contains(kind), "{error}");
    }
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: {name: c}\n";
    let error = format!(
        "{:#}",
        parse_pods_with("d.yaml", text, &options).expect_err("refused")
    );
    assert!(error.contains("spec.template.spec.containers"), "{error}");
    let text = "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: d}\n";
    let error = format!(
        "{:#}",
        parse_pods_with("d.yaml", text, &options).expect_err("refused")
    );
    assert!(
        error.contains("\"apps/v1beta1\", expected apps/v1"),
        "{error}"
    );
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {selector: {}}\n";
    let error = format!(
        "{:#}",
        parse_pods_with("d.yaml", text, &options).expect_err("refused")
    );
    assert!(error.contains("spec.template"), "{error}");
}

fn write(dir: &Path, name: &str, pod_name: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let text = if name.ends_with(".json") {
        format!(
            r#"{{"kind":"Pod","metadata":{{"name":"{pod_name}"}},"spec":{{"containers":[{{"name":"c"}}]}}}}"#
        )
    } else {
        format!("kind: Pod\nmetadata: {{name: {pod_name}}}\nspec: {{containers: [{{name: c}}]}}\n")
    };
    std::fs::write(path, text).expect("write");
}

#[test]
fn directories_read_like_kubectl_f_and_r() {
    let dir = temp_dir("pod-inputs-dir");
    write(&dir, "b.yaml", "b");
    write(&dir, "a.json", "a");
    write(&dir, "z.yml", "z");
    write(&dir, "m/d.yaml", "m-d");
    write(&dir, "m/deeper/e.yaml", "m-deeper-e");
    write(&dir, "c.txt", "not-read");
    write(&dir, "B.YAML", "not-read-either");
    std::fs::write(dir.join("empty.yaml"), "# nothing here\n").expect("write");

    let pods = |options: &ReadOptions| -> Vec<String> {
        read_pods_with(&dir, options)
            .expect("directory reads")
            .docs
            .into_iter()
            .map(|d| {
                let origin = PathBuf::from(&d.origin);
                assert!(origin.starts_with(&dir), "{}", d.origin);
                d.pod.name
            })
            .collect()
    };
    assert_eq!(pods(&ReadOptions::default()), ["a", "b", "z"]);
    let recursive = ReadOptions {
        recursive: true,
        ..ReadOptions::default()
    };
    assert_eq!(pods(&recursive), ["a", "b", "m-d", "m-deeper-e", "z"]);
    // `read_pods` reads a directory with the defaults.
    assert_eq!(read_pods(&dir).expect("reads").len(), 3);

    // A bad file in the directory fails the read, naming it.
    std::fs::write(
        dir.join("y.yaml"),
        "kind: Pod\nspec: {containers: [{name: c, resouces: {}}]}\n",
    )
    .expect("write");
    let error = format!("{:#}", read_pods(&dir).expect_err("refused"));
    assert!(error.contains("y.yaml"), "{error}");
    assert!(
        error.contains(r#"unknown field "spec.containers[0].resouces""#),
        "{error}"
    );

    // A directory without pods is an error.
    let empty = temp_dir("pod-inputs-empty");
    write(&empty, "sub/x.yaml", "x");
    let error = format!("{:#}", read_pods(&empty).expect_err("refused"));
    assert!(error.contains("no pod found"), "{error}");
    assert_eq!(
        read_pods_with(&empty, &recursive)
            .expect("reads")
            .docs
            .len(),
        1
    );
}

/// The static pod UID, cross-checked outside Rust: FNV-1a 128 (offset
/// 0x6c62272e07bb014262b821756295c58d, prime 2^88 + 0x13b; "a" gives
/// d228cb696f1a8caf78912b704e4a8964 as Go's `hash/fnv` tests) over
/// `json.dumps(pod, sort_keys=True, separators=(",", ":"))` +
/// `"host:Node-1"` + `"file:/etc/kubernetes/manifests/etcd.yaml"`, in Python.
#[test]
fn static_pod_manifests_get_the_kubelets_uid_name_and_annotations() {
    const MANIFEST: &str = "apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
  labels: {component: etcd, tier: control-plane}
spec:
  priorityClassName: system-node-critical
  hostNetwork: true
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.5.21-0
    command: [etcd, --data-dir=/var/lib/etcd]
    resources:
      requests: {cpu: 100m, memory: 100Mi}
";
    const SOURCE: &str = "/etc/kubernetes/manifests/etcd.yaml";
    const UID: &str = "28d6aae388ada57f024654303fe1ff8e";
    let on_node = |node: &str| ReadOptions {
        node_name: Some(node.to_string()),
        ..ReadOptions::default()
    };
    let read = parse_pods_with(SOURCE, MANIFEST, &on_node("Node-1")).expect("reads");
    let doc = &read.docs[0];
    assert_eq!(doc.pod.uid, UID);
    // `<name>-<node name in lower case>`, as generatePodName.
    assert_eq!(doc.pod.name, "etcd-node-1");
    assert_eq!(doc.pod.namespace, "kube-system");
    assert_eq!(annotation(&doc.pod, "kubernetes.io/config.hash"), Some(UID));
    assert_eq!(
        annotation(&doc.pod, "kubernetes.io/config.source"),
        Some("file")
    );
    assert_eq!(doc.json["metadata"]["uid"], UID);
    assert_json_is_the_pod(doc);

    // The public function, on the document as read.
    let as_read: serde_json::Value = serde_yaml_ng::from_str(MANIFEST).expect("yaml");
    assert_eq!(kubelet_static_pod_uid(&as_read, "Node-1", SOURCE), UID);

    // A function of content, node and path; not of formatting or of how a
    // quantity is spelled in YAML.
    let reformatted = MANIFEST.replace(
        "{cpu: 100m, memory: 100Mi}",
        "\n        memory: \"100Mi\"\n        cpu: 100m  # a comment",
    );
    let same = parse_pods_with(SOURCE, &reformatted, &on_node("Node-1")).expect("reads");
    assert_eq!(same.docs[0].pod.uid, UID);
    let bare = |cpu: &str| {
        let text = MANIFEST.replace("cpu: 100m", &format!("cpu: {cpu}"));
        parse_pods_with(SOURCE, &text, &on_node("Node-1"))
            .expect("reads")
            .docs[0]
            .pod
            .uid
            .clone()
    };
    assert_eq!(bare("1"), "41b13f75dc22b1a2e5cfef11e4ad9fd5");
    assert_eq!(bare("'1'"), "41b13f75dc22b1a2e5cfef11e4ad9fd5");
    let other_node = parse_pods_with(SOURCE, MANIFEST, &on_node("node-2")).expect("reads");
    assert_ne!(other_node.docs[0].pod.uid, UID);
    let lower_node = parse_pods_with(SOURCE, MANIFEST, &on_node("node-1")).expect("reads");
    assert_ne!(
        lower_node.docs[0].pod.uid, UID,
        "the hash takes the node name as given"
    );
    assert_eq!(lower_node.docs[0].pod.name, "etcd-node-1");
    let other_path = parse_pods_with(
        "/etc/kubernetes/manifests/etcd2.yaml",
        MANIFEST,
        &on_node("Node-1"),
    )
    .expect("reads");
    assert_ne!(other_path.docs[0].pod.uid, UID);
    let edited = parse_pods_with(
        SOURCE,
        &MANIFEST.replace("100Mi", "200Mi"),
        &on_node("Node-1"),
    )
    .expect("reads");
    assert_ne!(edited.docs[0].pod.uid, UID);

    // A manifest with a UID keeps it (and is still renamed and annotated).
    let with_uid = MANIFEST.replace(
        "  name: etcd\n",
        "  name: etcd\n  uid: 1b4e28ba-2fa1-11d2-883f-0016d3cca427\n",
    );
    let read = parse_pods_with(SOURCE, &with_uid, &on_node("Node-1")).expect("reads");
    assert_eq!(read.docs[0].pod.uid, "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    assert_eq!(read.docs[0].pod.name, "etcd-node-1");
    assert_eq!(
        annotation(&read.docs[0].pod, "kubernetes.io/config.hash"),
        Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427")
    );

    // No namespace: `default` after hashing (the kubelet hashes first).
    let no_ns = MANIFEST.replace("  namespace: kube-system\n", "");
    let read = parse_pods_with(SOURCE, &no_ns, &on_node("Node-1")).expect("reads");
    assert_eq!(read.docs[0].pod.namespace, "default");
    let as_read: serde_json::Value = serde_yaml_ng::from_str(&no_ns).expect("yaml");
    assert_eq!(
        read.docs[0].pod.uid,
        kubelet_static_pod_uid(&as_read, "Node-1", SOURCE)
    );

    // Without a node name a manifest is not a static pod: no UID, no rename.
    let read = parse_pods_with(SOURCE, MANIFEST, &ReadOptions::default()).expect("reads");
    assert_eq!(read.docs[0].pod.uid, "");
    assert_eq!(read.docs[0].pod.name, "etcd");
    assert_eq!(
        annotation(&read.docs[0].pod, "kubernetes.io/config.source"),
        None
    );

    // The kubelet refuses a static pod without a name.
    let error = format!(
        "{:#}",
        parse_pods_with(
            SOURCE,
            "kind: Pod\nspec: {containers: [{name: c}]}\n",
            &on_node("n")
        )
        .expect_err("refused")
    );
    assert!(error.contains("metadata.name"), "{error}");

    // Workloads are not static pods: read as without a node name.
    let read =
        read_pods_with(&workloads().join("deployment.yaml"), &on_node("Node-1")).expect("reads");
    assert_eq!(read.docs[0].pod.name, "web");
    assert_eq!(
        read.docs[0].pod.uid,
        workload_pod_uid("Deployment", "shop", "web")
    );
}

#[test]
fn explain_reads_a_deployment_and_refuses_a_typo() {
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/workloads/deployment.yaml",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("POD shop/web"), "{stdout}");
    assert!(stdout.contains("log-shipper"), "{stdout}");

    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/workloads/mixed.yaml",
        "fixtures/workloads/cronjob.yaml",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let pods: Vec<&str> = report["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| p["pod"].as_str().expect("pod"))
        .collect();
    assert_eq!(
        pods,
        [
            "shop/cache",
            "default/debug",
            "shop/migrate",
            "shop/probe",
            "ops/backup"
        ]
    );

    let (code, _, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        "fixtures/workloads/typo-pod.yaml",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.starts_with("podpolicy: "), "{stderr}");
    assert!(stderr.contains("typo-pod.yaml"), "{stderr}");
    assert!(
        stderr.contains(r#"unknown field "spec.containers[0].resouces""#),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    // From stdin too.
    let typo = std::fs::read(workloads().join("typo-pod.yaml")).expect("read");
    let (code, _, stderr) = podpolicy_with_stdin(
        &["explain", "--node", "fixtures/nodes/node-1000gi.yaml", "-"],
        Some(&typo),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("<stdin>: strict decoding error"),
        "{stderr}"
    );
}

#[test]
fn explain_reads_a_directory() {
    let dir = temp_dir("pod-inputs-cli-dir");
    for file in ["statefulset.yaml", "job.yaml", "daemonset.yaml"] {
        std::fs::copy(workloads().join(file), dir.join(file)).expect("copy");
    }
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        dir.to_str().expect("path"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("json");
    let pods: Vec<&str> = report["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .map(|p| p["pod"].as_str().expect("pod"))
        .collect();
    assert_eq!(pods, ["monitoring/node-exporter", "default/pi", "data/db"]);
}

/// The `podpolicy` binary under a 2 GiB data limit (`ulimit -d`): a build
/// that reads `/dev/zero` without bound fails an allocation there instead
/// of taking the machine's memory.
pub(crate) fn podpolicy_command() -> std::process::Command {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -d 2097152 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_podpolicy"));
    command
}

/// Run `podpolicy`, killed after `limit`: an input that blocks or never
/// ends fails the test instead of hanging it.
pub(crate) fn podpolicy_within(args: &[&str], limit: std::time::Duration) -> (i32, String, String) {
    use std::io::Read as _;
    use std::process::Stdio;
    let mut child = podpolicy_command()
        .args(args)
        .env("PODPOLICY_CACHE_DIR", crate::util::cache_dir())
        .current_dir(workspace())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running podpolicy");
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for podpolicy") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("podpolicy {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut stdout)
        .expect("stdout");
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut stderr)
        .expect("stderr");
    (status.code().unwrap_or(-1), stdout, stderr)
}

#[test]
fn a_device_or_a_fifo_given_as_pods_is_refused_at_once() {
    let dir = temp_dir("pod-inputs-special");
    let fifo = dir.join("pod.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let link = dir.join("zero.yaml");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
    let pods = dir.join("pods");
    std::fs::create_dir(&pods).expect("mkdir");
    std::fs::copy(workloads().join("job.yaml"), pods.join("job.yaml")).expect("copy");
    nix::unistd::mkfifo(&pods.join("zz.yaml"), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let (fifo, link, in_dir) = (
        fifo.display().to_string(),
        link.display().to_string(),
        pods.join("zz.yaml").display().to_string(),
    );
    for (input, shown, kind) in [
        ("/dev/zero", "/dev/zero", "a character device"),
        (fifo.as_str(), fifo.as_str(), "a FIFO"),
        (link.as_str(), link.as_str(), "a character device"),
        (pods.to_str().expect("path"), in_dir.as_str(), "a FIFO"),
    ] {
        let (code, _, stderr) = podpolicy_within(
            &[
                "explain",
                "--node",
                "fixtures/nodes/node-1000gi.yaml",
                input,
            ],
            std::time::Duration::from_secs(60),
        );
        assert_eq!(code, 2, "{input}: {stderr}");
        assert!(
            stderr.contains(&format!("{shown}: pod file is not a regular file ({kind})")),
            "{input}: {stderr}"
        );
    }
}

#[test]
fn an_oversized_pod_file_is_refused_by_its_size() {
    let dir = temp_dir("pod-inputs-oversized");
    let path = dir.join("huge.yaml");
    // Sparse: refused by its size, before anything is read.
    std::fs::File::create(&path)
        .expect("create")
        .set_len(podpolicy::pod_input::MAX_INPUT_BYTES as u64 + 1)
        .expect("set_len");
    let error = format!("{:#}", read_pods(&path).expect_err("too large"));
    assert!(
        error.ends_with(&format!(
            "pod file is larger than {} bytes ({} bytes)",
            podpolicy::pod_input::MAX_INPUT_BYTES,
            podpolicy::pod_input::MAX_INPUT_BYTES + 1
        )),
        "{error}"
    );
}

const SMILE: &str = r#"{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "smile", "annotations": {"note": "\ud83d\ude00 \u00e9"}},
 "spec": {"containers": [{"name": "app", "image": "app",
   "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}"#;

#[test]
fn json_is_read_as_json_and_a_byte_order_mark_is_skipped() {
    // A surrogate pair is valid JSON (a YAML parser refuses it).
    let docs = parse_pods_with("smile.json", SMILE, &ReadOptions::default())
        .expect("JSON with a surrogate pair")
        .docs;
    assert_eq!(
        docs[0].json["metadata"]["annotations"]["note"],
        "\u{1f600} \u{e9}"
    );
    assert_json_is_the_pod(&docs[0]);

    // A byte order mark before JSON or YAML, as some editors write it.
    let with_bom = format!("\u{feff}{SMILE}");
    let docs = podpolicy::pod_input::parse_pods("bom.json", &with_bom).expect("BOM + JSON");
    assert_eq!(docs[0].pod.name, "smile");
    let yaml = "\u{feff}apiVersion: v1\nkind: Pod\nmetadata:\n  name: bom\nspec:\n  containers:\n  - name: app\n    image: app\n";
    let docs = podpolicy::pod_input::parse_pods("bom.yaml", yaml).expect("BOM + YAML");
    assert_eq!(docs[0].pod.name, "bom");

    // Several JSON objects one after another, as kubectl reads them.
    let stream = format!("{SMILE}\n{}", SMILE.replace("\"smile\"", "\"twin\""));
    let docs = podpolicy::pod_input::parse_pods("stream.json", &stream).expect("JSON stream");
    let names: Vec<&str> = docs.iter().map(|d| d.pod.name.as_str()).collect();
    assert_eq!(names, ["smile", "twin"]);

    // A YAML flow mapping starts with `{` too, and stays YAML.
    let flow = "{apiVersion: v1, kind: Pod, metadata: {name: flow}, spec: {containers: [{name: app, image: app}]}}";
    let docs = podpolicy::pod_input::parse_pods("flow.yaml", flow).expect("YAML flow mapping");
    assert_eq!(docs[0].pod.name, "flow");

    // Broken JSON is reported as JSON, with its position.
    let error = format!(
        "{:#}",
        podpolicy::pod_input::parse_pods("broken.json", "{\"kind\": \"Pod\",\n \"spec\": [}")
            .expect_err("broken JSON")
    );
    assert!(
        error.starts_with("broken.json: document 1: ") && error.contains("line 2 column"),
        "{error}"
    );

    // From a file through the CLI.
    let dir = temp_dir("pod-inputs-bom");
    let path = dir.join("smile.json");
    std::fs::write(&path, &with_bom).expect("write");
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "--node",
        "fixtures/nodes/node-1000gi.yaml",
        path.to_str().expect("path"),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("POD default/smile"), "{stdout}");
}
