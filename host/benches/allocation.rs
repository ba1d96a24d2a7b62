//! KEP-5526 admission latency on the 2-socket 4-NUMA 256-CPU fixture:
//! the same `admit` natively (policy-wasm as a library) and through the
//! component (a fresh pooled instance per call, as the host runs it).
//! Prints medians and the ratio; run with `cargo bench -p podpolicy --bench allocation`.
//! `BENCH_PROFILE=component-prepared-admit:5000` (or `native-prepared-admit`)
//! runs one prepared-node admission alone for a profiler.

use std::time::{Duration, Instant};

mod product_allocator;
mod profile_case;
mod targets;

use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
use policy_wasm::wit as guest;

const ITERATIONS: usize = 300;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn quantity(
    name: &str,
    q: &str,
) -> (
    podpolicy::bindings::ResourceQuantity,
    guest::ResourceQuantity,
) {
    (
        podpolicy::bindings::ResourceQuantity {
            name: name.into(),
            quantity: q.into(),
        },
        guest::ResourceQuantity {
            name: name.into(),
            quantity: q.into(),
        },
    )
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/sysfs/server-2s-4numa-256cpu-l3");
    let sysfs = podpolicy::sysfs::read_topology(&root).expect("fixture topology");
    let host_topology = podpolicy::topology_input::node_topology(&sysfs);
    let guest_topology = guest::NodeTopology {
        cpus: host_topology
            .cpus
            .iter()
            .map(|c| guest::TopologyCpu {
                id: c.id,
                core_id: c.core_id,
                socket_id: c.socket_id,
                numa_node: c.numa_node,
                uncore_cache_id: c.uncore_cache_id,
            })
            .collect(),
        numa_nodes: host_topology
            .numa_nodes
            .iter()
            .map(|n| guest::NumaNodeInfo {
                id: n.id,
                memory_bytes: n.memory_bytes,
                hugepages: n
                    .hugepages
                    .iter()
                    .map(|h| guest::HugepagePool {
                        page_size_bytes: h.page_size_bytes,
                        pages: h.pages,
                    })
                    .collect(),
                distances: n.distances.clone(),
            })
            .collect(),
    };

    // Node: static CPU manager, 2 reserved CPUs, topology manager at pod scope.
    let (host_cpu, guest_cpu) = quantity("cpu", "2");
    let gates = ["PodLevelResources", "PodLevelResourceManagers"];
    let host_node = podpolicy::bindings::NodeSettings {
        system_reserved: vec![host_cpu],
        cpu_manager_policy: Some(podpolicy::bindings::CpuManagerPolicy::Static),
        topology_manager_policy: Some(podpolicy::bindings::TopologyManagerPolicy::BestEffort),
        topology_manager_scope: Some(podpolicy::bindings::TopologyManagerScope::Pod),
        feature_gates: gates
            .iter()
            .map(|g| podpolicy::bindings::FeatureGate {
                name: (*g).into(),
                enabled: true,
            })
            .collect(),
        ..podpolicy::empty_node()
    };
    let mut guest_node = policy_wasm::node::default_settings();
    guest_node.system_reserved = vec![guest_cpu];
    guest_node.cpu_manager_policy = Some(policy_wasm::wit::CpuManagerPolicy::Static);
    guest_node.topology_manager_policy = Some(policy_wasm::wit::TopologyManagerPolicy::BestEffort);
    guest_node.topology_manager_scope = Some(policy_wasm::wit::TopologyManagerScope::Pod);
    guest_node.feature_gates = gates
        .iter()
        .map(|g| guest::FeatureGate {
            name: (*g).into(),
            enabled: true,
        })
        .collect();

    // Pod: 16 CPUs at pod level; one container with 8 exclusive CPUs, two sharing the rest.
    let json = serde_json::json!({"metadata": {"name": "bench", "uid": "bench-uid"}, "spec": {
        "resources": {"requests": {"cpu": "16", "memory": "16Gi"}, "limits": {"cpu": "16", "memory": "16Gi"}},
        "containers": [
            {"name": "exclusive", "resources": {"requests": {"cpu": "8", "memory": "8Gi"}, "limits": {"cpu": "8", "memory": "8Gi"}}},
            {"name": "shared-a"}, {"name": "shared-b"}]}});
    let host_pod = podpolicy::pod_input::pod_from_json(&json).expect("pod");
    let container = |name: &str, cpu: Option<(&str, &str)>| guest::Container {
        name: name.into(),
        resources: cpu.map(|(c, m)| guest::ResourceRequirements {
            requests: Some(vec![quantity("cpu", c).1, quantity("memory", m).1]),
            limits: Some(vec![quantity("cpu", c).1, quantity("memory", m).1]),
        }),
        restart_policy: None,
        resize_policy: Vec::new(),
    };
    let guest_pod = guest::Pod {
        name: "bench".into(),
        namespace: String::new(),
        uid: "bench-uid".into(),
        annotations: Vec::new(),
        spec: guest::PodSpec {
            containers: vec![
                container("exclusive", Some(("8", "8Gi"))),
                container("shared-a", None),
                container("shared-b", None),
            ],
            init_containers: Vec::new(),
            ephemeral_containers: Vec::new(),
            resources: Some(guest::ResourceRequirements {
                requests: Some(vec![quantity("cpu", "16").1, quantity("memory", "16Gi").1]),
                limits: Some(vec![quantity("cpu", "16").1, quantity("memory", "16Gi").1]),
            }),
            overhead: None,
            priority: None,
            priority_class_name: None,
            os_name: None,
            restart_policy: None,
            node_name: None,
        },
        status: guest::PodStatus::default(),
    };

    let policy =
        PolicyRuntime::embedded(&Cache::default_location(), Limits::default()).expect("policy");
    let host_state = match policy
        .start_managers(
            &host_topology,
            &podpolicy::empty_manager_state(),
            &host_node,
        )
        .expect("call")
    {
        Ok(Ok(state)) => state,
        other => panic!("managers do not start: {other:?}"),
    };
    // The native side starts from the same state, through the same code.
    let guest_state = {
        let empty = guest::ManagerState {
            cpu: guest::CpuManagerState {
                policy_name: String::new(),
                default_cpuset: String::new(),
                entries: Vec::new(),
                pod_entries: Vec::new(),
            },
            memory: guest::MemoryManagerState {
                policy_name: String::new(),
                machine_state: Vec::new(),
                entries: Vec::new(),
                pod_entries: Vec::new(),
            },
        };
        match policy_wasm::evaluate::manager_operation(
            &guest::ManagerRequest::Start(empty),
            &guest_topology,
            &guest_node,
        )
        .expect("start")
        {
            Ok(guest::ManagerResponse::State(state)) => state,
            other => panic!("native start failed: {other:?}"),
        }
    };

    // Same answer both ways.
    let host_admission = policy
        .admit(&host_pod, &host_topology, &host_state, &host_node)
        .expect("call")
        .expect("admits");
    let guest_admission =
        policy_wasm::evaluate::admit(&guest_pod, &guest_topology, &guest_state, &guest_node)
            .expect("admits");
    assert!(host_admission.rejection.is_none() && guest_admission.rejection.is_none());
    assert_eq!(
        host_admission.assignment.pod_cpuset,
        guest_admission.assignment.pod_cpuset
    );

    // The prepared node: the topology and managers decoded once, natively
    // and in a warm instance of the component.
    let policy = std::sync::Arc::new(policy);
    let native_prepared =
        policy_wasm::prepared::PreparedNode::prepare(&guest_node, Some(&guest_topology))
            .unwrap_or_else(|e| panic!("the node prepares natively: {e:?}"));
    let mut prepared = podpolicy::runtime::PreparedPolicy::new(
        policy.clone(),
        host_node.clone(),
        Some(host_topology.clone()),
    )
    .expect("call")
    .expect("the node prepares");
    assert_eq!(
        prepared
            .admit(&host_pod, &host_state)
            .expect("call")
            .expect("admits")
            .assignment
            .pod_cpuset,
        host_admission.assignment.pod_cpuset
    );

    let profile = profile_case::requested();
    if profile_case::run_if("native-prepared-admit", &profile, || {
        std::hint::black_box(
            native_prepared
                .admit(&guest_pod, &guest_state)
                .expect("admits"),
        );
    }) || profile_case::run_if("component-prepared-admit", &profile, || {
        std::hint::black_box(
            prepared
                .admit(&host_pod, &host_state)
                .expect("call")
                .expect("admits"),
        );
    }) {
        return;
    }
    profile_case::unknown(
        &profile,
        &["native-prepared-admit", "component-prepared-admit"],
    );

    let mut native = Vec::with_capacity(ITERATIONS);
    let mut component = Vec::with_capacity(ITERATIONS);
    let mut native_prepared_times = Vec::with_capacity(ITERATIONS);
    let mut prepared_times = Vec::with_capacity(ITERATIONS);
    for _ in 0..ITERATIONS {
        let start = Instant::now();
        let a = native_prepared
            .admit(&guest_pod, &guest_state)
            .expect("admits");
        native_prepared_times.push(start.elapsed());
        std::hint::black_box(a);
        let start = Instant::now();
        let a = prepared
            .admit(&host_pod, &host_state)
            .expect("call")
            .expect("admits");
        prepared_times.push(start.elapsed());
        std::hint::black_box(a);
        let start = Instant::now();
        let a =
            policy_wasm::evaluate::admit(&guest_pod, &guest_topology, &guest_state, &guest_node)
                .expect("admits");
        native.push(start.elapsed());
        std::hint::black_box(a);
        let start = Instant::now();
        let a = policy
            .admit(&host_pod, &host_topology, &host_state, &host_node)
            .expect("call")
            .expect("admits");
        component.push(start.elapsed());
        std::hint::black_box(a);
    }
    let (native, component) = (median(native), median(component));
    println!(
        "KEP-5526 admit on the 256-CPU fixture (pod scope, 16-CPU pod, 8 exclusive + shared pool), {ITERATIONS} runs each, interleaved"
    );
    println!(
        "native (policy-wasm library):        median {:>9.1} us",
        native.as_secs_f64() * 1e6
    );
    println!(
        "component (fresh pooled instance):   median {:>9.1} us",
        component.as_secs_f64() * 1e6
    );
    let ratio = component.as_secs_f64() / native.as_secs_f64();
    println!("ratio component / native:            {ratio:.2}");
    let (native_prepared, prepared) = (median(native_prepared_times), median(prepared_times));
    println!(
        "native, prepared node:               median {:>9.1} us",
        native_prepared.as_secs_f64() * 1e6
    );
    println!(
        "component, prepared node (warm):     median {:>9.1} us",
        prepared.as_secs_f64() * 1e6
    );
    let prepared_ratio = prepared.as_secs_f64() / native_prepared.as_secs_f64();
    println!("ratio prepared component / native:   {prepared_ratio:.2}");
    targets::time_at_most("admit-256", prepared, targets::ADMISSION_256);
    targets::ratio_at_most(
        "admit-256-ratio",
        prepared_ratio,
        targets::ADMISSION_256_RATIO,
    );
}
