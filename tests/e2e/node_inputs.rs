//! Real node inputs: a Kubernetes Node object (`kubectl get node -o yaml`)
//! with a real KubeletConfiguration, the custom node file and its JSON
//! Schema (`schemas/node-file.schema.json`), and how typos are reported
//! (input errors naming the path, exit 2, never a policy verdict).

use std::path::{Path, PathBuf};

use podpolicy::bindings::{
    CgroupDriver, CgroupVersion, CpuManagerPolicy, MemoryManagerPolicy, MemoryReservationPolicy,
    TopologyManagerPolicy, TopologyManagerScope,
};
use podpolicy::kubelet_config::{OTHER_FIELDS, USED_FIELDS};
use podpolicy::node_input::{NodeInputs, read_node_inputs};
use serde_json::{Value, json};

use crate::util::{podpolicy, policy, temp_dir, workspace};

const NODE: &str = "fixtures/nodes/kubectl-get-node.yaml";
const KUBELET: &str = "fixtures/nodes/kubelet-config.yaml";

fn proc_root() -> PathBuf {
    workspace().join("fixtures/sysfs/topoDualSocketHT/proc")
}

fn read(node: Option<&Path>, kubelet: Option<&Path>) -> anyhow::Result<NodeInputs> {
    // No cgroup.controllers there: this machine is taken as cgroup v1.
    read_node_inputs(node, kubelet, &proc_root(), &proc_root())
}

fn read_pair() -> NodeInputs {
    read(
        Some(&workspace().join(NODE)),
        Some(&workspace().join(KUBELET)),
    )
    .expect("the Node and KubeletConfiguration fixtures read")
}

fn quantity<'a>(list: &'a [podpolicy::bindings::ResourceQuantity], name: &str) -> Option<&'a str> {
    list.iter()
        .find(|q| q.name == name)
        .map(|q| q.quantity.as_str())
}

fn error_text(result: anyhow::Result<NodeInputs>) -> String {
    format!("{:#}", result.expect_err("expected an input error"))
}

fn yaml_value(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).expect("read");
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn schema() -> Value {
    let text = std::fs::read_to_string(workspace().join("schemas/node-file.schema.json"))
        .expect("the node file schema");
    serde_json::from_str(&text).expect("the schema is JSON")
}

/// The schema of a KubeletConfiguration file: the same document, rooted at
/// `$defs/kubeletConfiguration`.
fn kubelet_schema() -> Value {
    let mut schema = schema();
    let object = schema.as_object_mut().expect("object");
    for key in [
        "properties",
        "additionalProperties",
        "type",
        "title",
        "description",
    ] {
        object.remove(key);
    }
    object.insert("$ref".into(), json!("#/$defs/kubeletConfiguration"));
    schema
}

fn schema_errors(schema: &Value, instance: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("a valid JSON Schema");
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn a_node_object_and_a_kubelet_configuration_give_the_node_settings() {
    let inputs = read_pair();
    let s = &inputs.settings;
    assert_eq!(s.name, "worker-3");
    assert_eq!(quantity(&s.capacity, "cpu"), Some("12"));
    assert_eq!(quantity(&s.capacity, "memory"), Some("16777216Ki"));
    assert_eq!(quantity(&s.capacity, "hugepages-1Gi"), Some("0"));
    assert_eq!(quantity(&s.capacity, "pods"), Some("110"));
    let allocatable = s.allocatable.as_deref().expect("allocatable from status");
    assert_eq!(quantity(allocatable, "cpu"), Some("10"));
    assert_eq!(quantity(allocatable, "memory"), Some("14680064Ki"));
    assert_eq!(s.kernel_version.as_deref(), Some("6.8.0-60-generic"));
    assert_eq!(s.cgroup_version, CgroupVersion::V2);
    assert_eq!(inputs.sysfs, None);

    assert_eq!(s.cgroup_driver, CgroupDriver::Systemd);
    assert_eq!(s.cgroups_per_qos, Some(true));
    assert_eq!(s.enforce_node_allocatable, Some(vec!["pods".to_string()]));
    assert_eq!(s.cpu_cfs_quota, Some(true));
    assert_eq!(s.cpu_cfs_quota_period_us, Some(100_000));
    assert_eq!(s.memory_throttling_factor, Some(0.9));
    assert_eq!(
        s.memory_reservation_policy,
        Some(MemoryReservationPolicy::TieredReservation)
    );
    assert_eq!(s.single_process_oom_kill, Some(false));
    assert_eq!(quantity(&s.kube_reserved, "cpu"), Some("1"));
    assert_eq!(quantity(&s.kube_reserved, "memory"), Some("1Gi"));
    assert_eq!(quantity(&s.system_reserved, "memory"), Some("924Mi"));
    assert_eq!(s.cpu_manager_policy, Some(CpuManagerPolicy::Static));
    assert_eq!(s.cpu_manager_policy_options.len(), 1);
    assert_eq!(s.cpu_manager_policy_options[0].name, "full-pcpus-only");
    assert_eq!(s.cpu_manager_policy_options[0].value, "true");
    assert_eq!(s.memory_manager_policy, Some(MemoryManagerPolicy::Static));
    assert_eq!(s.reserved_memory.len(), 2);
    for (i, numa) in s.reserved_memory.iter().enumerate() {
        assert_eq!(numa.numa_node, i as u32);
        assert_eq!(quantity(&numa.limits, "memory"), Some("1Gi"));
    }
    assert_eq!(
        s.topology_manager_policy,
        Some(TopologyManagerPolicy::BestEffort)
    );
    assert_eq!(s.topology_manager_scope, Some(TopologyManagerScope::Pod));
    let gates: Vec<(&str, bool)> = s
        .feature_gates
        .iter()
        .map(|g| (g.name.as_str(), g.enabled))
        .collect();
    assert_eq!(
        gates,
        [("MemoryQoS", true), ("PodLevelResourceManagers", true)],
        "only the gates the policy reads are passed"
    );
    let eviction = s.eviction_hard.as_deref().expect("evictionHard passed");
    assert!(eviction.contains(&("memory.available".to_string(), "100Mi".to_string())));
    assert!(eviction.contains(&("nodefs.available".to_string(), "10%".to_string())));
    assert_eq!(eviction.len(), 4);
}

#[test]
fn the_notes_name_every_field_that_is_accepted_but_not_used() {
    let notes = read_pair().notes;
    for expected in [
        "kubeletConfig.clusterDNS: accepted, does not affect the resource policy",
        "kubeletConfig.authentication: accepted, does not affect the resource policy",
        "kubeletConfig.evictionSoft: accepted, does not affect the resource policy",
        "kubeletConfig.featureGates.KubeletSeparateDiskGC: accepted, not a gate the resource policy reads",
    ] {
        assert!(
            notes.iter().any(|n| n == expected),
            "{expected}: {notes:#?}"
        );
    }
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("kubeletConfig.podPidsLimit: accepted, not modelled")),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("cgroupVersion: v2 assumed")),
        "{notes:#?}"
    );
    for used in USED_FIELDS {
        let prefix = format!("kubeletConfig.{used}:");
        assert!(
            !notes.iter().any(|n| n.starts_with(&prefix)),
            "{used} is used, not noted: {notes:#?}"
        );
    }
}

/// The fixtures are consistent: reservedMemory adds up to kubeReserved +
/// systemReserved + evictionHard memory.available, the reserved CPUs are
/// whole cores, and a Guaranteed pod is placed on the machine.
#[test]
fn the_pair_is_a_valid_node_and_places_pods() {
    let settings = read_pair().settings;
    let errors = policy().validate_node(&settings).expect("validate-node");
    assert!(
        errors.is_empty(),
        "{}",
        podpolicy::format_field_errors(&errors)
    );
    assert!(
        policy()
            .managers_active(&settings)
            .expect("managers-active")
    );

    let topology = podpolicy::topology_input::read_node_topology(
        &workspace().join("fixtures/sysfs/topoDualSocketHT"),
    )
    .expect("topology");
    let state =
        podpolicy::admit::start_state(policy(), &topology, &settings, None).expect("start state");
    let mut placement = podpolicy::Placement { topology, state };
    let docs = podpolicy::pod_input::parse_pods(
        "guaranteed.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: db, namespace: default, uid: 6f1c0000-0000-4000-8000-000000000001}\nspec:\n  containers:\n  - name: db\n    image: postgres\n    resources:\n      requests: {cpu: \"2\", memory: 2Gi}\n      limits: {cpu: \"2\", memory: 2Gi}\n",
    )
    .expect("pod");
    let report =
        podpolicy::explain_all(policy(), &docs, &settings, Some(&mut placement)).expect("explain");
    let outcome = &report.pods[0];
    let pod = outcome
        .evaluated()
        .unwrap_or_else(|| panic!("{:?}", outcome.refusals()));
    assert_eq!(
        pod.evaluation.qos_class,
        podpolicy::bindings::QosClass::Guaranteed
    );
    let cpus = &pod.containers()[0]
        .cgroup_files
        .iter()
        .find(|f| f.file.to_string() == "cpuset.cpus")
        .expect("a cpuset.cpus file")
        .value
        .to_string();
    assert!(!cpus.is_empty(), "exclusive CPUs placed: {cpus}");
}

#[test]
fn without_a_kubelet_configuration_the_node_object_takes_the_kubelet_defaults() {
    let inputs = read(Some(&workspace().join(NODE)), None).expect("a Node alone reads");
    let s = &inputs.settings;
    assert_eq!(s.name, "worker-3");
    assert_eq!(s.cgroup_driver, CgroupDriver::Cgroupfs);
    assert_eq!(s.cpu_manager_policy, None);
    assert_eq!(s.eviction_hard, None);
    assert!(s.feature_gates.is_empty());
    assert!(
        inputs
            .notes
            .iter()
            .any(|n| n.starts_with("kubeletConfig: no KubeletConfiguration given")),
        "{:#?}",
        inputs.notes
    );
    assert!(policy().validate_node(s).expect("validate").is_empty());
}

#[test]
fn a_list_of_one_node_is_that_node_and_a_list_of_two_is_refused() {
    let dir = temp_dir("node-list");
    let node = yaml_value(&workspace().join(NODE));
    let one = dir.join("one.yaml");
    std::fs::write(
        &one,
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [node]})
            .to_string(),
    )
    .expect("write");
    let inputs = read(Some(&one), Some(&workspace().join(KUBELET))).expect("a List of one Node");
    assert_eq!(inputs.settings.name, "worker-3");
    let mut item = node.clone();
    item.as_object_mut().expect("object").remove("kind");
    let node_list = dir.join("nodelist.yaml");
    std::fs::write(
        &node_list,
        json!({"apiVersion": "v1", "kind": "NodeList", "items": [item]}).to_string(),
    )
    .expect("write");
    assert_eq!(
        read(Some(&node_list), None)
            .expect("NodeList")
            .settings
            .name,
        "worker-3"
    );
    let two = dir.join("two.yaml");
    std::fs::write(
        &two,
        json!({"apiVersion": "v1", "kind": "List", "items": [node, node]}).to_string(),
    )
    .expect("write");
    let text = error_text(read(Some(&two), None));
    assert!(text.contains("holds 2 items"), "{text}");
}

#[test]
fn this_machine_takes_the_kubelet_configuration_too() {
    let inputs = read(None, Some(&workspace().join(KUBELET))).expect("this machine");
    let s = &inputs.settings;
    // MemTotal of fixtures/sysfs/topoDualSocketHT/proc/meminfo.
    assert_eq!(quantity(&s.capacity, "memory"), Some("133966720Ki"));
    assert_eq!(s.cgroup_version, CgroupVersion::V1, "no cgroup.controllers");
    assert_eq!(s.cpu_manager_policy, Some(CpuManagerPolicy::Static));
    assert!(
        inputs
            .notes
            .iter()
            .any(|n| n.starts_with("kubeletConfig.clusterDNS:"))
    );
}

/// This machine's node is named as the kubelet names it without
/// `--hostname-override`: the host name, lower-cased (`spec.nodeName` of
/// the pods bound to it); "localhost" when the host name cannot be read.
#[test]
fn this_machine_is_named_after_its_host_name() {
    let dir = temp_dir("host-name");
    let proc = dir.join("proc");
    std::fs::create_dir_all(proc.join("sys/kernel")).expect("mkdir");
    std::fs::copy(proc_root().join("meminfo"), proc.join("meminfo")).expect("meminfo");
    let name = || {
        read_node_inputs(None, None, &proc, &proc)
            .expect("this machine")
            .settings
            .name
    };
    assert_eq!(name(), "localhost", "no host name to read");
    std::fs::write(proc.join("sys/kernel/hostname"), "Worker-7.Example\n").expect("write");
    assert_eq!(name(), "worker-7.example");
}

#[test]
fn a_custom_node_file_takes_the_kubelet_configuration_only_without_its_own_section() {
    let dir = temp_dir("custom-and-kubelet");
    let bare = dir.join("bare.yaml");
    std::fs::write(
        &bare,
        "name: numa-node\nsysfs: sysfs-here\ncgroupVersion: v2\npageSize: 4096\ncapacity:\n  cpu: \"12\"\n  memory: 16Gi\n",
    )
    .expect("write");
    let inputs = read(Some(&bare), Some(&workspace().join(KUBELET))).expect("merged");
    assert_eq!(inputs.settings.name, "numa-node");
    assert_eq!(inputs.settings.page_size_bytes, Some(4096));
    assert_eq!(
        inputs.settings.memory_manager_policy,
        Some(MemoryManagerPolicy::Static)
    );
    assert_eq!(inputs.sysfs, Some(dir.join("sysfs-here")));
    assert!(
        inputs
            .notes
            .iter()
            .any(|n| n.starts_with("kubeletConfig.clusterDNS:"))
    );
    assert!(
        policy()
            .validate_node(&inputs.settings)
            .expect("validate")
            .is_empty()
    );

    let text = error_text(read(
        Some(&workspace().join("fixtures/nodes/dual-socket-static.yaml")),
        Some(&workspace().join(KUBELET)),
    ));
    assert!(
        text.contains("has a kubeletConfig section and --kubelet-config"),
        "{text}"
    );
}

#[test]
fn every_kubelet_configuration_field_is_accepted() {
    let dir = temp_dir("every-kubelet-field");
    let mut config = yaml_value(&workspace().join(KUBELET));
    let object = config.as_object_mut().expect("object");
    // Every field by name (null: the kubelet's zero value).
    for name in USED_FIELDS.iter().chain(OTHER_FIELDS) {
        object.entry(*name).or_insert(json!(null));
    }
    let file = dir.join("all.json");
    std::fs::write(&file, config.to_string()).expect("write");
    let inputs = read(Some(&workspace().join(NODE)), Some(&file)).expect("every field accepted");
    let field_notes = inputs
        .notes
        .iter()
        .filter(|n| {
            n.starts_with("kubeletConfig.") && !n.starts_with("kubeletConfig.featureGates.")
        })
        .count();
    assert_eq!(field_notes, OTHER_FIELDS.len(), "{:#?}", inputs.notes);
    assert!(schema_errors(&kubelet_schema(), &config).is_empty());
}

#[test]
fn a_misspelt_kubelet_field_is_an_error_naming_its_path() {
    let dir = temp_dir("kubelet-typo");
    let file = dir.join("kubelet.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHrd:\n  memory.available: 100Mi\nclusterDomian: cluster.local\n",
    )
    .expect("write");
    let text = error_text(read(Some(&workspace().join(NODE)), Some(&file)));
    assert!(text.contains(file.to_str().expect("utf-8")), "{text}");
    assert!(
        text.contains("evictionHrd: unknown field, not a KubeletConfiguration field (did you mean `evictionHard`?)"),
        "{text}"
    );
    assert!(
        text.contains("clusterDomian: unknown field"),
        "every unknown field is reported: {text}"
    );

    let node = dir.join("node.yaml");
    std::fs::write(
        &node,
        "capacity: {cpu: \"4\", memory: 8Gi}\nkubeletConfig:\n  evictionHrd:\n    memory.available: 100Mi\n",
    )
    .expect("write");
    let text = error_text(read(Some(&node), None));
    assert!(
        text.contains("kubeletConfig.evictionHrd: unknown field"),
        "{text}"
    );
    assert!(!schema_errors(&schema(), &yaml_value(&node)).is_empty());

    // A misspelt gate the policy reads is an error too.
    std::fs::write(
        &node,
        "capacity: {cpu: \"4\", memory: 8Gi}\nkubeletConfig:\n  featureGates:\n    MemoryQos: true\n",
    )
    .expect("write");
    let text = error_text(read(Some(&node), None));
    assert!(
        text.contains("kubeletConfig.featureGates.MemoryQos: unrecognized feature gate (did you mean `MemoryQoS`?)"),
        "{text}"
    );
}

#[test]
fn a_wrongly_typed_kubelet_field_is_an_error_naming_its_path() {
    let dir = temp_dir("kubelet-types");
    let file = dir.join("kubelet.yaml");
    let header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
    for (body, path) in [
        ("cpuCFSQuota: sometimes\n", "cpuCFSQuota: invalid type"),
        (
            "memoryThrottlingFactor: \"0.9\"\n",
            "memoryThrottlingFactor: invalid type",
        ),
        (
            "featureGates:\n  MemoryQoS: on\n",
            "featureGates.MemoryQoS: invalid type",
        ),
        (
            "evictionHard: [memory.available]\n",
            "evictionHard: invalid type",
        ),
        (
            "reservedMemory:\n- numaNode: 0\n  limit: {memory: 1Gi}\n",
            "reservedMemory[0].limit: unknown field `limit`",
        ),
        (
            "reservedMemory:\n- numaNode: -1\n",
            "reservedMemory[0].numaNode: invalid value",
        ),
        (
            "cpuCFSQuotaPeriod: 100\n",
            "cpuCFSQuotaPeriod: invalid type",
        ),
        ("cpuCFSQuotaPeriod: 100 ms\n", "cpuCFSQuotaPeriod: `100 ms`"),
        (
            "cgroupDriver: system\n",
            "cgroupDriver: `system` is not cgroupfs or systemd",
        ),
        (
            "memoryReservationPolicy: Tiered\n",
            "memoryReservationPolicy: `Tiered`",
        ),
        (
            "cpuManagerPolicyOptions:\n  full-pcpus-only: true\n",
            "cpuManagerPolicyOptions.full-pcpus-only: invalid type",
        ),
    ] {
        std::fs::write(&file, format!("{header}{body}")).expect("write");
        let text = error_text(read(Some(&workspace().join(NODE)), Some(&file)));
        assert!(text.contains(path), "{body}: {text}");
    }
    // A value of a field podpolicy does not read is not checked.
    std::fs::write(&file, format!("{header}clusterDNS: not-a-list\n")).expect("write");
    read(Some(&workspace().join(NODE)), Some(&file)).expect("clusterDNS is not read");
}

#[test]
fn merge_default_eviction_settings_adds_the_memory_threshold() {
    let dir = temp_dir("kubelet-merge");
    let file = dir.join("kubelet.yaml");
    let header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  nodefs.available: 5%\n";
    std::fs::write(
        &file,
        format!("{header}mergeDefaultEvictionSettings: true\n"),
    )
    .expect("write");
    let inputs = read(Some(&workspace().join(NODE)), Some(&file)).expect("read");
    let eviction = inputs.settings.eviction_hard.expect("evictionHard");
    assert!(eviction.contains(&("memory.available".to_string(), "100Mi".to_string())));
    assert!(eviction.contains(&("nodefs.available".to_string(), "5%".to_string())));

    std::fs::write(&file, header).expect("write");
    let inputs = read(Some(&workspace().join(NODE)), Some(&file)).expect("read");
    let eviction = inputs.settings.eviction_hard.expect("evictionHard");
    assert_eq!(eviction.len(), 1, "the kubelet takes memory.available as 0");
    assert!(
        inputs
            .notes
            .iter()
            .any(|n| n.starts_with("kubeletConfig.evictionHard: no memory.available")),
        "{:#?}",
        inputs.notes
    );
}

#[test]
fn each_file_must_be_what_its_flag_takes() {
    let text = error_text(read(Some(&workspace().join(KUBELET)), None));
    assert!(text.contains("pass it with --kubelet-config"), "{text}");
    let text = error_text(read(None, Some(&workspace().join(NODE))));
    assert!(text.contains("pass it with --node"), "{text}");
    let dir = temp_dir("kubelet-kinds");
    let file = dir.join("old.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
    )
    .expect("write");
    let text = error_text(read(None, Some(&file)));
    assert!(
        text.contains("apiVersion: `kubelet.config.k8s.io/v1alpha1`"),
        "{text}"
    );
    let pod = workspace().join("fixtures/pods/kep-ide.yaml");
    let text = error_text(read(Some(&pod), None));
    assert!(text.contains("kind is `Pod`"), "{text}");
}

/// Every node fixture is valid: custom node files against the schema, the
/// KubeletConfiguration against its `$defs` part; each reads.
#[test]
fn every_node_fixture_matches_the_schema_and_reads() {
    let root_schema = schema();
    let kubelet_schema = kubelet_schema();
    let mut files: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures/nodes"))
        .expect("fixtures/nodes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.push(workspace().join("tests/vm/node.yaml"));
    files.sort();
    let mut custom = 0;
    for file in &files {
        let value = yaml_value(file);
        match value.get("kind").and_then(Value::as_str) {
            Some("KubeletConfiguration") => {
                let errors = schema_errors(&kubelet_schema, &value);
                assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
                read(None, Some(file)).unwrap_or_else(|e| panic!("{}: {e:#}", file.display()));
            }
            Some("Node") => {
                read(Some(file), None).unwrap_or_else(|e| panic!("{}: {e:#}", file.display()));
            }
            other => {
                assert_eq!(other, None, "{}", file.display());
                custom += 1;
                let errors = schema_errors(&root_schema, &value);
                assert!(errors.is_empty(), "{}: {errors:#?}", file.display());
                let inputs =
                    read(Some(file), None).unwrap_or_else(|e| panic!("{}: {e:#}", file.display()));
                let node_errors = policy().validate_node(&inputs.settings).expect("validate");
                assert!(
                    node_errors.is_empty(),
                    "{}: {node_errors:?}",
                    file.display()
                );
            }
        }
    }
    assert!(custom >= 4, "{files:?}");
}

#[test]
fn a_typo_in_a_node_file_fails_the_schema_and_the_reader() {
    let dir = temp_dir("node-typo");
    let file = dir.join("node.yaml");
    for (text, path) in [
        ("capacty: {cpu: \"4\"}\n", "capacty"),
        (
            "capacity: {cpu: \"4\"}\ncgroupVersion: v3\n",
            "cgroupVersion",
        ),
        (
            "capacity: {cpu: \"4\"}\nkubeletConfig: {cpuManagerPolcy: static}\n",
            "kubeletConfig.cpuManagerPolcy",
        ),
        (
            "capacity: {cpu: \"4\"}\nkubeletConfig: {cgroupsPerQOS: \"yes\"}\n",
            "kubeletConfig.cgroupsPerQOS",
        ),
    ] {
        std::fs::write(&file, text).expect("write");
        let errors = schema_errors(&schema(), &yaml_value(&file));
        assert!(!errors.is_empty(), "the schema must refuse {text}");
        let message = error_text(read(Some(&file), None));
        assert!(message.contains(path), "{text}: {message}");
    }
}

/// The schema documents every field the reader takes, and no other.
#[test]
fn the_schema_lists_every_kubelet_field_and_describes_every_field() {
    let schema = schema();
    let kubelet = schema["$defs"]["kubeletConfiguration"]["properties"]
        .as_object()
        .expect("kubeletConfiguration properties");
    let mut names: Vec<&str> = kubelet.keys().map(String::as_str).collect();
    names.sort_unstable();
    let mut expected: Vec<&str> = USED_FIELDS
        .iter()
        .chain(OTHER_FIELDS)
        .copied()
        .chain(["apiVersion", "kind"])
        .collect();
    expected.sort_unstable();
    assert_eq!(names, expected);
    let top: Vec<&str> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(top.len(), 9, "{top:?}");

    fn described(path: &str, value: &Value) {
        if let Some(properties) = value.get("properties").and_then(Value::as_object) {
            for (name, property) in properties {
                assert!(
                    property.get("description").is_some(),
                    "{path}.{name} has no description"
                );
                described(&format!("{path}.{name}"), property);
            }
        }
        if let Some(defs) = value.get("$defs").and_then(Value::as_object) {
            for (name, def) in defs {
                described(&format!("$defs.{name}"), def);
            }
        }
    }
    described("", &schema);
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

/// `explain --node` with a typo in the node file is an input error (exit 2)
/// naming the field, never a verdict on the pod.
#[test]
fn the_cli_reports_a_node_file_typo_as_an_input_error() {
    let dir = temp_dir("cli-node-typo");
    let bad = dir.join("node.yaml");
    std::fs::write(
        &bad,
        "capacity: {cpu: \"4\", memory: 8Gi}\nkubeletConfig:\n  evictionHrd: {memory.available: 100Mi}\n",
    )
    .expect("write");
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "--node",
        bad.to_str().expect("utf-8"),
        "fixtures/pods/kep-ide.yaml",
    ]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.starts_with("podpolicy: "), "{stderr}");
    assert!(
        stderr.contains("kubeletConfig.evictionHrd: unknown field"),
        "{stderr}"
    );
    assert!(!stdout.contains("INVALID"), "{stdout}");
}

/// `--node` takes a Node object as `kubectl get node -o yaml` prints it.
#[test]
fn the_cli_takes_a_node_object() {
    let (code, stdout, stderr) = podpolicy(&[
        "explain",
        "-o",
        "json",
        "--node",
        NODE,
        "fixtures/pods/kep-ide.yaml",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("json");
    assert!(report["pods"][0]["qosClass"].is_string(), "{report}");
}

/// A kubeadm configuration file (several documents) gives its
/// KubeletConfiguration document.
#[test]
fn a_kubeadm_configuration_file_gives_its_kubelet_configuration() {
    let dir = temp_dir("kubeadm-config");
    let file = dir.join("kubeadm.yaml");
    let kubelet = std::fs::read_to_string(workspace().join(KUBELET)).expect("read");
    std::fs::write(
        &file,
        format!(
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nnodeRegistration:\n  name: worker-3\n---\n{kubelet}"
        ),
    )
    .expect("write");
    let inputs = read(Some(&workspace().join(NODE)), Some(&file)).expect("kubeadm file");
    assert_eq!(
        inputs.settings.cpu_manager_policy,
        Some(CpuManagerPolicy::Static)
    );
    std::fs::write(&file, format!("{kubelet}---\n{kubelet}")).expect("write");
    let text = error_text(read(Some(&workspace().join(NODE)), Some(&file)));
    assert!(text.contains("2 of kind KubeletConfiguration"), "{text}");
}

#[test]
fn a_device_or_a_fifo_given_as_node_or_kubelet_configuration_is_refused_at_once() {
    let dir = temp_dir("node-inputs-special");
    let fifo = dir.join("node.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let fifo = fifo.display().to_string();
    for (flag, input, what, kind) in [
        ("--node", "/dev/zero", "node file", "a character device"),
        ("--node", fifo.as_str(), "node file", "a FIFO"),
        (
            "--kubelet-config",
            "/dev/zero",
            "KubeletConfiguration",
            "a character device",
        ),
        (
            "--kubelet-config",
            fifo.as_str(),
            "KubeletConfiguration",
            "a FIFO",
        ),
    ] {
        let (code, _, stderr) = crate::pod_inputs::podpolicy_within(
            &["explain", flag, input, "fixtures/pods/kep-ide.yaml"],
            std::time::Duration::from_secs(60),
        );
        assert_eq!(code, 2, "{flag} {input}: {stderr}");
        assert!(
            stderr.contains(&format!("{input}: {what} is not a regular file ({kind})")),
            "{flag} {input}: {stderr}"
        );
    }
}

#[test]
fn json_node_files_and_kubelet_configurations_read_as_json_with_a_byte_order_mark() {
    let dir = temp_dir("node-inputs-json");
    // The fixtures as JSON, behind a byte order mark, with a surrogate pair
    // in a string the reader keeps (the node's name).
    let mut node = yaml_value(&workspace().join(NODE));
    node["metadata"]["name"] = json!("node-\u{1f600}");
    let node_text = serde_json::to_string(&node)
        .expect("json")
        .replace('\u{1f600}', "\\ud83d\\ude00");
    assert!(node_text.contains("\\ud83d\\ude00"));
    let node_path = dir.join("node.json");
    std::fs::write(&node_path, format!("\u{feff}{node_text}")).expect("write");
    let kubelet = serde_json::to_string(&yaml_value(&workspace().join(KUBELET))).expect("json");
    let kubelet_path = dir.join("kubelet.json");
    std::fs::write(&kubelet_path, format!("\u{feff}{kubelet}")).expect("write");

    let from_json = read(Some(&node_path), Some(&kubelet_path)).expect("the JSON files read");
    assert_eq!(from_json.settings.name, "node-\u{1f600}");
    let mut from_yaml = read_pair();
    from_yaml.settings.name = from_json.settings.name.clone();
    assert_eq!(from_json.settings, from_yaml.settings);
}
