//! Property tests through the component: generated pods (regular, init and
//! sidecar containers, optional pod-level resources and overhead, cpu, memory
//! and hugepages quantities in varied spellings) on generated nodes.
//!
//! - memory.max >= memory.high >= memory.min/low wherever they are written
//!   (MemoryQoS on, HardReservation and TieredReservation);
//! - cpu.weight in [1, 10000]; oom_score_adj in [-1000, 1000] and, inside one
//!   Burstable pod, more memory request never means a higher score;
//! - defaulting is idempotent and a valid pod still validates once defaulted;
//! - no generated pod, however malformed, makes the component trap.
//!
//! Pods are generated as Kubernetes JSON and read with `pod_input`, as the CLI
//! reads them. The runs are deterministic (a fixed seed); set
//! `PROPTEST_RNG_SEED` to explore other inputs and `PROPTEST_CASES` to change
//! the number of cases of every property.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Map, Value, json};

use podpolicy::bindings::{
    CgroupFile, CgroupVersion, ContainerKind, CpuWeightCurve, FeatureGate, MemoryReservationPolicy,
    NodeSettings, Pod, PodEvaluation, QosClass, ResourceQuantity,
};
use podpolicy::empty_node;
use podpolicy::pod_input::pod_from_json;
use policy_wasm::quantity::Quantity;

use crate::util::policy;

const KI: u64 = 1 << 10;
const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

/// The seed used unless `PROPTEST_RNG_SEED` is set.
const DEFAULT_SEED: u64 = 0x0070_6f64_7072_6f70;

/// Each property's runner configuration: `cases` unless `PROPTEST_CASES` says otherwise.
fn config(cases: u32) -> Config {
    let mut config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2_000,
        ..Config::default()
    };
    if let Some(n) = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.cases = n;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(DEFAULT_SEED);
    }
    config
}

// ---------------------------------------------------------------------------
// Quantities in the spellings users write
// ---------------------------------------------------------------------------

/// `milli` millicores in one of several equivalent spellings.
fn format_cpu(milli: u64, style: u8) -> String {
    match style % 6 {
        0 => format!("{milli}m"),
        1 if milli.is_multiple_of(1000) => (milli / 1000).to_string(),
        1 => {
            let fraction = format!("{:03}", milli % 1000);
            format!("{}.{}", milli / 1000, fraction.trim_end_matches('0'))
        }
        2 => format!("{milli}e-3"),
        3 => format!("{}u", milli * 1000),
        4 => format!("{}n", milli * 1_000_000),
        _ => format!("+{milli}m"),
    }
}

/// `bytes` in one of several equivalent spellings.
fn format_memory(bytes: u64, style: u8) -> String {
    let largest = |units: &[(u64, &str)]| {
        units
            .iter()
            .find(|(unit, _)| bytes.is_multiple_of(*unit))
            .map(|(unit, suffix)| format!("{}{suffix}", bytes / unit))
    };
    let text = match style % 6 {
        0 => None,
        1 => largest(&[(GI, "Gi"), (MI, "Mi"), (KI, "Ki")]),
        2 => largest(&[(1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")]),
        3 => {
            // Trailing zeros as an exponent: 256000000 -> 256e6.
            let (mut mantissa, mut exponent) = (bytes, 0);
            while mantissa % 10 == 0 && mantissa > 0 {
                mantissa /= 10;
                exponent += 1;
            }
            Some(format!("{mantissa}e{exponent}"))
        }
        4 => {
            // A decimal fraction of Gi, exact: 1.5Gi, 0.125Gi, 0.0009765625Gi.
            let whole = bytes / GI;
            let mut rest = bytes % GI;
            let mut digits = String::new();
            while rest != 0 {
                rest *= 10;
                digits.push(char::from(b'0' + (rest / GI) as u8));
                rest %= GI;
            }
            Some(if digits.is_empty() {
                format!("{whole}Gi")
            } else {
                format!("{whole}.{digits}Gi")
            })
        }
        _ => largest(&[(MI, "Mi"), (KI, "Ki")]),
    };
    text.unwrap_or_else(|| bytes.to_string())
}

/// A value spelled in one of the styles above.
#[derive(Clone, Copy, Debug)]
struct Amount {
    value: u64,
    style: u8,
}

/// Container-sized CPU: 1m to 4 CPUs, round numbers more likely.
fn container_cpu() -> BoxedStrategy<u64> {
    prop_oneof![
        3 => (1u64..=40).prop_map(|n| n * 100),
        1 => 1u64..=4000,
        1 => Just(0u64),
    ]
    .boxed()
}

/// Container-sized memory: 1Mi to 4Gi (binary or decimal units), sometimes odd byte counts.
fn container_memory() -> BoxedStrategy<u64> {
    prop_oneof![
        4 => (1u64..=4096).prop_map(|n| n * MI),
        2 => (1u64..=4000).prop_map(|n| n * 1_000_000),
        1 => (1u64..=16).prop_map(|n| n * 256 * MI),
        1 => 1u64..=4 * GI,
    ]
    .boxed()
}

/// Pod-sized CPU and memory: larger than most containers, so that pods with
/// pod-level resources are often valid.
fn pod_cpu() -> BoxedStrategy<u64> {
    prop_oneof![
        (1u64..=32).prop_map(|n| n * 1000),
        (1u64..=320).prop_map(|n| n * 100)
    ]
    .boxed()
}

fn pod_memory() -> BoxedStrategy<u64> {
    prop_oneof![
        (1u64..=64).prop_map(|n| n * GI),
        (1u64..=64).prop_map(|n| n * 512 * MI)
    ]
    .boxed()
}

/// What a `resources` block says about one resource.
#[derive(Clone, Copy, Debug)]
enum Setting {
    Unset,
    Request(Amount),
    Limit(Amount),
    /// request <= limit (request + extra).
    Both(Amount, Amount),
}

fn setting(value: BoxedStrategy<u64>) -> impl Strategy<Value = Setting> {
    let amount = (value.clone(), any::<u8>()).prop_map(|(value, style)| Amount { value, style });
    prop_oneof![
        2 => Just(Setting::Unset),
        2 => amount.clone().prop_map(Setting::Request),
        1 => amount.clone().prop_map(Setting::Limit),
        2 => (amount.clone(), any::<u8>()).prop_map(|(a, style)| Setting::Both(a, Amount { style, ..a })),
        3 => (amount, value, any::<u8>()).prop_map(|(a, extra, style)| {
            Setting::Both(a, Amount { value: a.value + extra, style })
        }),
    ]
}

/// `hugepages-2Mi` and `hugepages-1Gi` limits (whole pages), or none.
fn hugepages() -> impl Strategy<Value = Vec<(&'static str, Amount)>> {
    let pages = |size: u64| {
        (1u64..=8, any::<u8>()).prop_map(move |(n, style)| Amount {
            value: n * size,
            style: 1 + style % 2 * 4, // binary units or a fraction of Gi
        })
    };
    prop_oneof![
        6 => Just(Vec::new()),
        1 => pages(2 * MI).prop_map(|a| vec![("hugepages-2Mi", a)]),
        1 => pages(GI).prop_map(|a| vec![("hugepages-1Gi", a)]),
    ]
}

/// A generated `resources` block (requests and limits of cpu, memory, hugepages).
#[derive(Clone, Debug)]
struct Resources {
    cpu: Setting,
    memory: Setting,
    hugepages: Vec<(&'static str, Amount)>,
}

impl Resources {
    fn to_json(&self) -> Option<Value> {
        let mut requests = Map::new();
        let mut limits = Map::new();
        for (name, setting) in [("cpu", self.cpu), ("memory", self.memory)] {
            let format = |a: Amount| {
                Value::String(if name == "cpu" {
                    format_cpu(a.value, a.style)
                } else {
                    format_memory(a.value, a.style)
                })
            };
            match setting {
                Setting::Unset => {}
                Setting::Request(a) => {
                    requests.insert(name.into(), format(a));
                }
                Setting::Limit(a) => {
                    limits.insert(name.into(), format(a));
                }
                Setting::Both(request, limit) => {
                    requests.insert(name.into(), format(request));
                    limits.insert(name.into(), format(limit));
                }
            }
        }
        for (name, a) in &self.hugepages {
            limits.insert((*name).into(), format_memory(a.value, a.style).into());
        }
        let mut out = Map::new();
        if !requests.is_empty() {
            out.insert("requests".into(), Value::Object(requests));
        }
        if !limits.is_empty() {
            out.insert("limits".into(), Value::Object(limits));
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }
}

impl Setting {
    /// The Guaranteed form of a setting: request == limit (a lone limit
    /// stays one: defaulting copies it to the request).
    fn guaranteed(self, fallback: Amount) -> Setting {
        match self {
            Setting::Unset => Setting::Limit(fallback),
            Setting::Request(a) => Setting::Both(a, a),
            Setting::Limit(a) => Setting::Limit(a),
            Setting::Both(_, limit) => Setting::Both(limit, limit),
        }
    }
}

impl Resources {
    fn best_effort() -> Resources {
        Resources {
            cpu: Setting::Unset,
            memory: Setting::Unset,
            hugepages: Vec::new(),
        }
    }

    fn guaranteed(mut self) -> Resources {
        self.cpu = self.cpu.guaranteed(Amount {
            value: 500,
            style: 0,
        });
        self.memory = self.memory.guaranteed(Amount {
            value: 256 * MI,
            style: 1,
        });
        self
    }
}

fn container_resources() -> impl Strategy<Value = Resources> {
    (
        setting(container_cpu()),
        setting(container_memory()),
        hugepages(),
    )
        .prop_map(|(cpu, memory, hugepages)| Resources {
            cpu,
            memory,
            hugepages,
        })
}

fn pod_resources() -> impl Strategy<Value = Resources> {
    (setting(pod_cpu()), setting(pod_memory()), hugepages()).prop_map(|(cpu, memory, hugepages)| {
        Resources {
            cpu,
            memory,
            hugepages,
        }
    })
}

// ---------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------

/// A generated pod, kept as Kubernetes JSON.
#[derive(Clone, Debug)]
struct GenPod(Value);

fn container_json(name: String, resources: &Resources, sidecar: bool) -> Value {
    let mut c = json!({ "name": name, "image": "registry.example/app:1" });
    if let Some(r) = resources.to_json() {
        c["resources"] = r;
    }
    if sidecar {
        c["restartPolicy"] = "Always".into();
    }
    c
}

fn pod() -> impl Strategy<Value = GenPod> {
    let regular = prop::collection::vec(container_resources(), 1..=4);
    let init = prop::collection::vec((container_resources(), any::<bool>()), 0..=3);
    let pod_level = prop::option::weighted(0.5, pod_resources());
    let overhead = prop::option::weighted(0.2, (1u64..=5, 1u64..=4));
    let criticality = prop_oneof![
        8 => Just(None),
        1 => Just(Some((2_000_001_000, "system-node-critical"))),
        1 => Just(Some((1000, "high"))),
    ];
    let static_pod = prop::bool::weighted(0.05);
    // Most pods mix settings (mostly Burstable); some are made Guaranteed or BestEffort.
    let profile = prop_oneof![6 => Just(None), 2 => Just(Some(true)), 1 => Just(Some(false))];
    (
        regular,
        init,
        pod_level,
        overhead,
        criticality,
        (static_pod, profile),
    )
        .prop_map(|(mut regular, mut init, mut pod_level, overhead, critical, (static_pod, profile))| {
            let reshape: fn(Resources) -> Resources = match profile {
                None => |r| r,
                Some(true) => Resources::guaranteed,
                Some(false) => |_| Resources::best_effort(),
            };
            regular = regular.into_iter().map(reshape).collect();
            init = init.into_iter().map(|(r, sidecar)| (reshape(r), sidecar)).collect();
            pod_level = pod_level.map(reshape);
            let containers: Vec<Value> = regular
                .iter()
                .enumerate()
                .map(|(i, r)| container_json(format!("app-{i}"), r, false))
                .collect();
            let init_containers: Vec<Value> = init
                .iter()
                .enumerate()
                .map(|(i, (r, sidecar))| container_json(format!("init-{i}"), r, *sidecar))
                .collect();
            let mut pod = json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": { "name": "generated", "namespace": "default" },
                "spec": { "containers": containers, "initContainers": init_containers },
            });
            if let Some(r) = pod_level.and_then(|r| r.to_json()) {
                pod["spec"]["resources"] = r;
            }
            if let Some((cpu, memory)) = overhead {
                pod["spec"]["overhead"] =
                    json!({ "cpu": format!("{}m", cpu * 50), "memory": format!("{}Mi", memory * 32) });
            }
            if let Some((priority, class)) = critical {
                pod["spec"]["priority"] = priority.into();
                pod["spec"]["priorityClassName"] = class.into();
            }
            if static_pod {
                pod["metadata"]["annotations"] = json!({ "kubernetes.io/config.source": "file" });
            }
            GenPod(pod)
        })
}

impl GenPod {
    fn wit(&self) -> Pod {
        pod_from_json(&self.0).expect("generated pods are well-formed JSON pods")
    }
}

/// Replace some quantities and resource names of a pod with hostile text:
/// malformed, huge, negative, NaN-like, or not a quantity at all.
fn hostile_pod() -> impl Strategy<Value = Pod> {
    let junk = prop_oneof![
        Just(String::new()),
        Just("-1".to_string()),
        Just("-0.000000001".to_string()),
        Just("9223372036854775807".to_string()),
        Just("9223372036854775808".to_string()),
        Just("8Ei".to_string()),
        Just("1e308".to_string()),
        Just("1e-308".to_string()),
        Just("0.0000000001n".to_string()),
        Just("NaN".to_string()),
        Just(" 1".to_string()),
        Just("1.5.5".to_string()),
        Just("hugepages-".to_string()),
        Just("hugepages-0".to_string()),
        Just("hugepages-3Mi".to_string()),
        Just("example.com/gpu".to_string()),
        Just("memory".to_string()),
        Just("cpu".to_string()),
        "[-+]?[0-9]{0,22}(\\.[0-9]{0,12})?([eE][-+]?[0-9]{1,4}|n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?",
        "\\PC{0,12}",
    ];
    (
        pod(),
        prop::collection::vec((any::<prop::sample::Index>(), junk, any::<bool>()), 1..=4),
    )
        .prop_map(|(pod, edits)| {
            let mut wit = pod.wit();
            for (index, text, name) in edits {
                let mut entries = quantity_entries(&mut wit);
                if entries.is_empty() {
                    break;
                }
                let entry = index.get_mut(&mut entries);
                if name {
                    entry.name = text;
                } else {
                    entry.quantity = text;
                }
            }
            wit
        })
}

/// Every resource entry of a pod's spec.
fn quantity_entries(pod: &mut Pod) -> Vec<&mut ResourceQuantity> {
    let spec = &mut pod.spec;
    let mut out: Vec<&mut ResourceQuantity> = Vec::new();
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut())
    {
        if let Some(r) = c.resources.as_mut() {
            out.extend(r.requests.iter_mut().flatten());
            out.extend(r.limits.iter_mut().flatten());
        }
    }
    if let Some(r) = spec.resources.as_mut() {
        out.extend(r.requests.iter_mut().flatten());
        out.extend(r.limits.iter_mut().flatten());
    }
    out.extend(spec.overhead.iter_mut().flatten());
    out
}

// ---------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------

fn quantity(name: &str, text: String) -> ResourceQuantity {
    ResourceQuantity {
        name: name.to_string(),
        quantity: text,
    }
}

fn gate(name: &str, enabled: bool) -> FeatureGate {
    FeatureGate {
        name: name.to_string(),
        enabled,
    }
}

/// Node settings with kubelet options varied; `memory_qos` forces MemoryQoS on
/// a cgroup v2 node with this reservation policy.
fn node(memory_qos: Option<MemoryReservationPolicy>) -> impl Strategy<Value = NodeSettings> {
    let capacity = (4u64..=1024, 2u64..=128, 0u64..=8, 0u64..=2);
    let reserved = (0u64..=4, 0u64..=2000);
    let allocatable_given = prop::bool::weighted(0.3);
    let cgroup_v1 = prop::bool::weighted(if memory_qos.is_some() { 0.0 } else { 0.15 });
    let factor = prop::option::of((1u32..=20).prop_map(|n| f64::from(n) / 20.0));
    let page = prop_oneof![Just(None), Just(Some(4096u64)), Just(Some(65536))];
    let curve = prop_oneof![
        Just(None),
        Just(Some(CpuWeightCurve::Linear)),
        Just(Some(CpuWeightCurve::Logarithmic))
    ];
    let reservation = prop_oneof![
        Just(None),
        Just(Some(MemoryReservationPolicy::None)),
        Just(Some(MemoryReservationPolicy::HardReservation)),
        Just(Some(MemoryReservationPolicy::TieredReservation)),
    ];
    let switches = (
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        any::<bool>(),
        prop::bool::weighted(0.15),
    );
    (
        capacity,
        reserved,
        allocatable_given,
        cgroup_v1,
        factor,
        page,
        curve,
        reservation,
        switches,
    )
        .prop_map(
            move |(
                (memory_gi, cpus, hugepages_2mi_gi, hugepages_1gi),
                (reserved_gi, reserved_milli),
                allocatable_given,
                cgroup_v1,
                factor,
                page,
                curve,
                reservation,
                (cfs_quota, single_oom, per_qos, memory_qos_gate, pod_level_off),
            )| {
                let mut capacity = vec![
                    quantity("memory", format!("{memory_gi}Gi")),
                    quantity("cpu", cpus.to_string()),
                ];
                if hugepages_2mi_gi > 0 {
                    capacity.push(quantity("hugepages-2Mi", format!("{hugepages_2mi_gi}Gi")));
                }
                if hugepages_1gi > 0 {
                    capacity.push(quantity("hugepages-1Gi", format!("{hugepages_1gi}Gi")));
                }
                let reserved_memory = reserved_gi.min(memory_gi / 2);
                let mut gates = Vec::new();
                let policy = match memory_qos {
                    Some(policy) => {
                        gates.push(gate("MemoryQoS", true));
                        Some(policy)
                    }
                    None => {
                        gates.push(gate("MemoryQoS", memory_qos_gate));
                        reservation
                    }
                };
                if pod_level_off {
                    gates.push(gate("PodLevelResources", false));
                }
                NodeSettings {
                    name: "generated".into(),
                    allocatable: allocatable_given.then(|| {
                        vec![
                            quantity("memory", format!("{}Gi", memory_gi - reserved_memory)),
                            quantity(
                                "cpu",
                                format!("{}m", cpus * 1000 - reserved_milli.min(1000)),
                            ),
                        ]
                    }),
                    capacity,
                    kube_reserved: vec![quantity("memory", format!("{reserved_memory}Gi"))],
                    system_reserved: vec![quantity("cpu", format!("{reserved_milli}m"))],
                    cgroup_version: if cgroup_v1 {
                        CgroupVersion::V1
                    } else {
                        CgroupVersion::V2
                    },
                    cgroups_per_qos: per_qos,
                    cpu_cfs_quota: cfs_quota,
                    memory_throttling_factor: factor,
                    memory_reservation_policy: policy,
                    page_size_bytes: page,
                    cpu_weight_curve: curve,
                    single_process_oom_kill: single_oom,
                    feature_gates: gates,
                    ..empty_node()
                }
            },
        )
}

// ---------------------------------------------------------------------------
// Helpers over results
// ---------------------------------------------------------------------------

fn file(files: &[CgroupFile], name: &str) -> Option<String> {
    files
        .iter()
        .find(|f| f.file.to_string() == name)
        .map(|f| f.value.to_string())
}

/// A byte value of a memory file; `max` is `u64::MAX`.
fn bytes(files: &[CgroupFile], name: &str) -> Option<u64> {
    file(files, name).map(|v| {
        if v == "max" {
            u64::MAX
        } else {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} = `{v}` is not a byte count"))
        }
    })
}

/// memory.max >= memory.high >= memory.min and memory.low, where written;
/// `high_below_max: false` leaves out memory.max >= memory.high.
fn check_memory_order(
    files: &[CgroupFile],
    what: &str,
    high_below_max: bool,
) -> Result<(), TestCaseError> {
    let max = bytes(files, "memory.max");
    let high = bytes(files, "memory.high");
    for protection in ["memory.min", "memory.low"] {
        if let Some(protected) = bytes(files, protection) {
            if let Some(high) = high {
                prop_assert!(
                    high >= protected,
                    "{what}: memory.high {high} < {protection} {protected}"
                );
            }
            if let Some(max) = max {
                prop_assert!(
                    max >= protected,
                    "{what}: memory.max {max} < {protection} {protected}"
                );
            }
        }
    }
    if let (Some(max), Some(high), true) = (max, high, high_below_max) {
        prop_assert!(max >= high, "{what}: memory.max {max} < memory.high {high}");
    }
    Ok(())
}

/// Validate, default and evaluate `pod` the way `explain` does; `None` for an invalid pod.
fn admit(pod: &Pod, node: &NodeSettings) -> Option<(Pod, PodEvaluation)> {
    let policy = policy();
    let errors = policy
        .validate_pod(pod, node)
        .expect("validate-pod does not trap");
    if !errors.is_empty() {
        return None;
    }
    let defaulted = policy
        .default_pod(pod, node)
        .expect("default-pod does not trap")
        .unwrap_or_else(|e| panic!("a valid pod fails defaulting: {e:?}"));
    let evaluation = match policy
        .evaluate(&defaulted.pod, node)
        .expect("evaluate does not trap")
    {
        Ok(evaluation) => evaluation,
        // The API server lets pod-level resources through with their gate
        // off; the kubelet refuses the pod (`isPodLevelResourcesSupported`).
        Err(e)
            if defaulted.pod.spec.resources.is_some()
                && e.iter().all(|f| {
                    f.field == "spec.resources"
                        && f.message == "PodLevelResources feature gate is disabled"
                }) =>
        {
            return None;
        }
        Err(e) => panic!("a valid defaulted pod fails evaluation: {e:?}"),
    };
    Some((defaulted.pod, evaluation))
}

/// A container's own request or limit of `resource`, in whole units.
fn container_amount(pod: &Pod, name: &str, resource: &str, limits: bool) -> Option<u64> {
    let spec = &pod.spec;
    let resources = spec
        .containers
        .iter()
        .chain(&spec.init_containers)
        .find(|c| c.name == name)?
        .resources
        .as_ref()?;
    let list = if limits {
        &resources.limits
    } else {
        &resources.requests
    };
    let entry = list.as_ref()?.iter().find(|e| e.name == resource)?;
    let parsed = Quantity::parse(&entry.quantity).expect("a valid pod's quantities parse");
    Some(parsed.value().max(0) as u64)
}

/// A container's own memory request in bytes (0 when it has none).
fn memory_request(pod: &Pod, name: &str) -> u64 {
    container_amount(pod, name, "memory", false).unwrap_or(0)
}

/// A container's own limit of `resource`.
fn limit(pod: &Pod, name: &str, resource: &str) -> Option<u64> {
    container_amount(pod, name, resource, true)
}

/// The pod has no pod-level memory limit and either a pod-level memory
/// request or a container without its own memory limit: then its memory.max
/// (the containers' summed limits) may be below its memory request.
fn pod_memory_max_may_be_partial(pod: &Pod) -> bool {
    let pod_level = |limits: bool| {
        pod.spec.resources.as_ref().is_some_and(|r| {
            let list = if limits { &r.limits } else { &r.requests };
            list.iter().flatten().any(|e| e.name == "memory")
        })
    };
    let spec = &pod.spec;
    let unlimited_container = spec
        .containers
        .iter()
        .chain(&spec.init_containers)
        .any(|c| limit(pod, &c.name, "memory").is_none());
    !pod_level(true) && (pod_level(false) || unlimited_container)
}

/// The first defaulting pass added pod-level limits to a pod that had
/// pod-level resources without limits.
fn defaults_pod_limits_after_pod_requests(input: &Pod, defaulted: &Pod) -> bool {
    let limits = |pod: &Pod| {
        pod.spec
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .is_some_and(|l| !l.is_empty())
    };
    input.spec.resources.is_some() && !limits(input) && limits(defaulted)
}

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(160))]

    /// No pod, however malformed, makes validation, defaulting or evaluation
    /// trap; each answers with a value or field errors.
    #[test]
    fn hostile_pods_never_trap(pod in hostile_pod(), node in node(None)) {
        let policy = policy();
        policy.validate_pod(&pod, &node).expect("validate-pod does not trap");
        let _answer = policy.default_pod(&pod, &node).expect("default-pod does not trap");
        let _answer = policy.evaluate(&pod, &node).expect("evaluate does not trap");
        let _answer = policy.oom_score_adjust(&pod, &node).expect("oom-score-adjust does not trap");
    }

    /// default(default(p)) == default(p), with an empty second patch, and a
    /// valid pod is still valid (and evaluates) once defaulted.
    #[test]
    fn defaulting_is_idempotent_and_keeps_valid_pods_valid(pod in pod(), node in node(None)) {
        let policy = policy();
        let pod = pod.wit();
        let Ok(once) = policy.default_pod(&pod, &node).expect("default-pod does not trap") else {
            return Ok(());
        };
        let twice = policy
            .default_pod(&once.pod, &node)
            .expect("default-pod does not trap")
            .expect("a defaulted pod defaults again");
        if defaults_pod_limits_after_pod_requests(&pod, &once.pod) {
            // FIXME(defaulting): pod-level limits are defaulted after pod-level
            // requests, so the second pass derives requests from the new limits
            // (see `fixme_defaulting_needs_two_passes`). It settles after two.
            let thrice = policy
                .default_pod(&twice.pod, &node)
                .expect("default-pod does not trap")
                .expect("a defaulted pod defaults again");
            prop_assert_eq!(&thrice.pod, &twice.pod);
        } else {
            prop_assert_eq!(&twice.pod, &once.pod);
            prop_assert!(twice.patch.is_empty(), "second patch: {:?}", twice.patch);
        }

        let errors = policy.validate_pod(&pod, &node).expect("validate-pod does not trap");
        if errors.is_empty() {
            let again = policy.validate_pod(&once.pod, &node).expect("validate-pod does not trap");
            prop_assert!(again.is_empty(), "the defaulted pod is invalid: {:?}", again);
            admit(&pod, &node);
        }
    }

    /// With MemoryQoS, every pod and container cgroup has
    /// memory.max >= memory.high >= memory.min (and memory.low).
    #[test]
    fn memory_limits_are_ordered_with_memory_qos(
        pod in pod(),
        node in prop_oneof![
            node(Some(MemoryReservationPolicy::HardReservation)),
            node(Some(MemoryReservationPolicy::TieredReservation)),
        ],
    ) {
        let Some((defaulted, evaluation)) = admit(&pod.wit(), &node) else {
            return Ok(());
        };
        // FIXME(pod memory.max): without a pod-level memory limit, the pod's
        // memory.max is the containers' summed limits, which a pod-level
        // request may exceed (`fixme_pod_memory_min_above_memory_max`), and
        // which leaves out a sidecar without a limit that follows one with a
        // limit (`fixme_unlimited_sidecar_counts_as_limited`).
        if !pod_memory_max_may_be_partial(&defaulted) {
            check_memory_order(&evaluation.pod_cgroup_files, "pod", true)?;
        }
        for c in &evaluation.containers {
            // FIXME(memory-qos): a container without its own memory limit gets
            // the pod-level limit as memory.max but memory.high from node
            // allocatable, above memory.max (see
            // `fixme_memory_high_ignores_the_pod_level_limit`).
            let own_limit = limit(&defaulted, &c.name, "memory").is_some();
            check_memory_order(&c.cgroup_files, &c.name, own_limit)?;
        }
    }

    /// cpu.weight in [1, 10000] and oom_score_adj in [-1000, 1000]; inside a
    /// Burstable pod a container with more memory request never scores higher.
    #[test]
    fn cpu_weight_and_oom_score_adj_stay_in_range(pod in pod(), node in node(None)) {
        let Some((defaulted, evaluation)) = admit(&pod.wit(), &node) else {
            return Ok(());
        };
        let weights = std::iter::once(("pod", &evaluation.pod_cgroup_files))
            .chain(evaluation.containers.iter().map(|c| (c.name.as_str(), &c.cgroup_files)));
        for (what, files) in weights {
            if let Some(weight) = file(files, "cpu.weight").as_deref() {
                let weight: u64 = weight.parse().expect("cpu.weight is a number");
                prop_assert!((1..=10_000).contains(&weight), "{what}: cpu.weight {weight}");
            }
        }
        for c in &evaluation.containers {
            prop_assert!(c.kind != ContainerKind::Ephemeral);
            prop_assert!(
                (-1000..=1000).contains(&c.oom_score_adj),
                "{}: oom_score_adj {}", c.name, c.oom_score_adj
            );
        }
        if evaluation.qos_class == QosClass::Burstable {
            let scored: Vec<(u64, i32, &str, ContainerKind)> = evaluation
                .containers
                .iter()
                .map(|c| (memory_request(&defaulted, &c.name), c.oom_score_adj, c.name.as_str(), c.kind))
                .collect();
            for (request_a, score_a, a, kind_a) in &scored {
                for (request_b, score_b, b, kind_b) in &scored {
                    // A sidecar is capped at the score of the regular container
                    // with the smallest request (upstream), which can put it
                    // below an init container that asks for more; the two never
                    // compete with the regular containers at the same time.
                    let sidecar_and_init = matches!(
                        (kind_a, kind_b),
                        (ContainerKind::Init, ContainerKind::Sidecar)
                            | (ContainerKind::Sidecar, ContainerKind::Init)
                    );
                    if request_a > request_b && !sidecar_and_init {
                        prop_assert!(
                            score_a <= score_b,
                            "{a} requests {request_a} and scores {score_a}; {b} requests {request_b} and scores {score_b}"
                        );
                    }
                }
            }
        }
    }
}

/// The generators reach what they are meant to: many pods are valid, and
/// every QoS class, container kind and memory file shows up.
#[test]
fn generators_cover_the_interesting_cases() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::new(config(128));
    let strategy = (
        pod(),
        prop_oneof![
            node(Some(MemoryReservationPolicy::HardReservation)),
            node(Some(MemoryReservationPolicy::TieredReservation)),
        ],
    );
    let (mut valid, mut classes, mut kinds, mut files) =
        (0, Vec::new(), Vec::new(), Vec::<String>::new());
    let total = 128;
    for _ in 0..total {
        let (pod, node) = strategy.new_tree(&mut runner).expect("generates").current();
        let Some((_, evaluation)) = admit(&pod.wit(), &node) else {
            continue;
        };
        valid += 1;
        classes.push(evaluation.qos_class);
        for c in &evaluation.containers {
            kinds.push(c.kind);
            files.extend(c.cgroup_files.iter().map(|f| f.file.to_string()));
        }
        files.extend(
            evaluation
                .pod_cgroup_files
                .iter()
                .map(|f| f.file.to_string()),
        );
    }
    assert!(
        valid * 2 >= total,
        "only {valid} of {total} generated pods are valid"
    );
    for class in [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ] {
        assert!(
            classes.contains(&class),
            "no {class:?} pod among {classes:?}"
        );
    }
    for kind in [
        ContainerKind::Init,
        ContainerKind::Sidecar,
        ContainerKind::Regular,
    ] {
        assert!(kinds.contains(&kind), "no {kind:?} container");
    }
    for name in [
        "memory.min",
        "memory.low",
        "memory.high",
        "memory.max",
        "cpu.weight",
    ] {
        assert!(files.iter().any(|f| f == name), "no {name} written");
    }
}

#[test]
fn spellings_parse_to_the_same_value() {
    for milli in [1, 5, 100, 250, 1000, 1500, 4000, 3999] {
        for style in 0..6 {
            let text = format_cpu(milli, style);
            let parsed = Quantity::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(parsed.milli_value(), milli as i64, "{text}");
        }
    }
    for bytes in [
        1,
        1000,
        KI,
        1536 * KI,
        100 * MI,
        256_000_000,
        3 * GI / 2,
        4 * GI + 1,
    ] {
        for style in 0..6 {
            let text = format_memory(bytes, style);
            let parsed = Quantity::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(parsed.value(), bytes as i64, "{text}");
            assert_eq!(parsed.nanos(), i128::from(bytes) * 1_000_000_000, "{text}");
        }
    }
}

// ---------------------------------------------------------------------------
// Known deviations from the properties, pinned until they are decided
// ---------------------------------------------------------------------------

fn node_file(text: &str) -> NodeSettings {
    // A directory per call: the tests run in parallel, and `temp_dir`
    // empties the directory it is given.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = crate::util::temp_dir(&format!("properties-node-{n}"));
    let path = dir.join("node.yaml");
    std::fs::write(&path, text).expect("writing the node file");
    podpolicy::node_input::read_node(&path).expect("a valid node file")
}

fn yaml_pod(text: &str) -> Pod {
    let value: Value = serde_yaml_ng::from_str(text).expect("valid YAML");
    pod_from_json(&value).expect("a valid pod")
}

/// FIXME(memory-qos): with MemoryQoS, a container without its own memory
/// limit in a pod with a pod-level memory limit gets memory.max = the pod
/// limit but memory.high computed from node allocatable (upstream reads only
/// the container's own limit), so memory.high > memory.max and early
/// throttling never happens. This pins today's values until that is decided.
#[test]
fn fixme_memory_high_ignores_the_pod_level_limit() {
    let node = node_file(
        "name: n\ncgroupVersion: v2\ncapacity: {cpu: \"8\", memory: 16Gi}\n\
         kubeletConfig:\n  memoryReservationPolicy: HardReservation\n  featureGates: {MemoryQoS: true}\n",
    );
    let pod = yaml_pod(
        "metadata: {name: high}\nspec:\n  resources:\n    limits: {memory: 1Gi}\n  containers:\n\
         \x20 - name: app\n    resources:\n      requests: {memory: 100Mi}\n",
    );
    let (_, evaluation) = admit(&pod, &node).expect("a valid pod");
    let files = &evaluation.containers[0].cgroup_files;
    assert_eq!(file(files, "memory.max").as_deref(), Some("1073741824"));
    assert_eq!(file(files, "memory.min").as_deref(), Some("104857600"));
    // 100Mi + 0.9 * (16Gi - 100Mi), page-aligned: above memory.max.
    assert_eq!(file(files, "memory.high").as_deref(), Some("15472365568"));
}

/// FIXME(defaulting): pod-level requests are defaulted before pod-level
/// limits, so a pod with pod-level requests only, whose containers all have
/// a cpu limit, gets a pod cpu limit on the first pass and, on the second, a
/// pod memory request derived from the containers (because pod limits now
/// exist). Defaulting should be idempotent: the API server defaults again
/// whenever it decodes a stored pod.
#[test]
fn fixme_defaulting_needs_two_passes() {
    let node = empty_node();
    let pod = yaml_pod(
        "metadata: {name: idem}\nspec:\n  resources:\n    requests: {cpu: \"1\"}\n  containers:\n\
         \x20 - name: app\n    resources:\n      limits: {cpu: \"1\"}\n      requests: {memory: 64Mi}\n",
    );
    let policy = policy();
    assert_eq!(policy.validate_pod(&pod, &node).expect("call"), vec![]);
    let once = policy
        .default_pod(&pod, &node)
        .expect("call")
        .expect("defaults");
    let twice = policy
        .default_pod(&once.pod, &node)
        .expect("call")
        .expect("defaults");
    let pod_requests = |pod: &Pod| {
        let mut names: Vec<String> = pod
            .spec
            .resources
            .as_ref()
            .expect("pod-level resources")
            .requests
            .iter()
            .flatten()
            .map(|e| format!("{}={}", e.name, e.quantity))
            .collect();
        names.sort();
        names
    };
    assert_eq!(pod_requests(&once.pod), ["cpu=1"]);
    assert_eq!(pod_requests(&twice.pod), ["cpu=1", "memory=64Mi"]);
    assert_eq!(twice.patch.len(), 1, "{:?}", twice.patch);
    let thrice = policy
        .default_pod(&twice.pod, &node)
        .expect("call")
        .expect("defaults");
    assert!(thrice.patch.is_empty(), "{:?}", thrice.patch);
}

/// FIXME(validation): pod-level limits for one resource (cpu here) stop the
/// pod-level memory limit from being defaulted to the containers' sum, and
/// nothing compares the pod-level memory request with that sum: the pod is
/// admitted with memory.min (1Gi) above memory.max (64Mi).
#[test]
fn fixme_pod_memory_min_above_memory_max() {
    let node = node_file(
        "name: n\ncgroupVersion: v2\ncapacity: {cpu: \"8\", memory: 16Gi}\n\
         kubeletConfig:\n  memoryReservationPolicy: HardReservation\n  featureGates: {MemoryQoS: true}\n",
    );
    let pod = yaml_pod(
        "metadata: {name: minmax}\nspec:\n  resources:\n    requests: {memory: 1Gi}\n    limits: {cpu: \"1\"}\n\
         \x20 containers:\n  - name: app\n    resources:\n      limits: {memory: 64Mi, cpu: \"1\"}\n",
    );
    let (_, evaluation) = admit(&pod, &node).expect("admitted today");
    let files = &evaluation.pod_cgroup_files;
    assert_eq!(file(files, "memory.max").as_deref(), Some("67108864"));
    assert_eq!(file(files, "memory.min").as_deref(), Some("1073741824"));
}

/// FIXME(pod memory.max): a sidecar without a memory limit that follows a
/// sidecar with one counts as "limit declared" (the in-use list of an init
/// container includes the earlier sidecars' limits, as upstream's
/// `ContainerFn` sees it), so the pod cgroup gets memory.max = 2Mi, the sum of
/// the declared limits, below the pod's 3Mi of requests: the unlimited
/// sidecar is capped by its siblings' limits.
#[test]
fn fixme_unlimited_sidecar_counts_as_limited() {
    let node = node_file(
        "name: n\ncgroupVersion: v2\ncapacity: {cpu: \"8\", memory: 16Gi}\n\
         kubeletConfig:\n  memoryReservationPolicy: HardReservation\n  featureGates: {MemoryQoS: true}\n",
    );
    let pod = yaml_pod(
        "metadata: {name: sidecars}\nspec:\n  containers:\n  - name: app\n    resources:\n      limits: {memory: 1Mi}\n\
         \x20 initContainers:\n  - name: limited\n    restartPolicy: Always\n    resources:\n      limits: {memory: 1Mi}\n\
         \x20 - name: unlimited\n    restartPolicy: Always\n    resources:\n      requests: {memory: 1Mi}\n",
    );
    let (_, evaluation) = admit(&pod, &node).expect("a valid pod");
    let files = &evaluation.pod_cgroup_files;
    assert_eq!(file(files, "memory.max").as_deref(), Some("2097152"));
    assert_eq!(file(files, "memory.min").as_deref(), Some("3145728"));
}
