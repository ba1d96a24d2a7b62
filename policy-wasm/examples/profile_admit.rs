//! Profiling driver for the native KEP-5526 admission on the 256-CPU fixture.
//!
//! Builds the scenario of `host/benches/allocation.rs` without the host crate
//! (so without wasmtime): the topology of
//! `fixtures/sysfs/server-2s-4numa-256cpu-l3` read from its sysfs files, a
//! static CPU manager with 2 CPUs system-reserved, the best-effort topology
//! manager at pod scope with PodLevelResources and PodLevelResourceManagers,
//! the state `Start` gives, and a pod with 16 CPUs / 16Gi at pod level, one
//! container with 8 exclusive CPUs and two sharing the rest. It checks the
//! pod is admitted, then calls `admit` N times (default 1000) so that
//! instruction counts per call are the totals divided by N:
//!
//! ```text
//! cargo build -p policy-wasm --release --examples
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/admit.cg \
//!     target/release/examples/profile_admit 50
//! callgrind_annotate --inclusive=yes /tmp/admit.cg | head -60
//! ```
//!
//! The one-off setup (reading the fixture, `Start`, the checking call) costs
//! about as much as a few calls; compare runs with the same N.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use policy_wasm::wit as guest;

/// The trimmed contents of a fixture file.
fn read(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
        .trim()
        .to_string()
}

fn number<T: std::str::FromStr>(path: &Path) -> T {
    let text = read(path);
    text.parse()
        .unwrap_or_else(|_| panic!("{}: not a number: {text:?}", path.display()))
}

/// `0-3,8` as a list of ids.
fn cpu_list(text: &str) -> Vec<u32> {
    let mut ids = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => ids.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => ids.push(part.parse().unwrap()),
        }
    }
    ids
}

/// The fixture's topology as the host converts it (`host/src/topology_input.rs`):
/// kubelet core ids (the lowest CPU of each (NUMA node, package, core_id)) and
/// kubelet uncore ids (the L3 id unless the L3 spans the whole NUMA node).
fn fixture_topology(root: &Path) -> guest::NodeTopology {
    let system = root.join("sys/devices/system");
    let node_ids = cpu_list(&read(&system.join("node/online")));
    let mut numa_of: BTreeMap<u32, u32> = BTreeMap::new();
    let mut numa_nodes = Vec::new();
    for &node in &node_ids {
        let dir = system.join(format!("node/node{node}"));
        for cpu in cpu_list(&read(&dir.join("cpulist"))) {
            numa_of.insert(cpu, node);
        }
        let meminfo = read(&dir.join("meminfo"));
        let kib: u64 = meminfo
            .lines()
            .find(|line| line.contains("MemTotal:"))
            .and_then(|line| line.split_whitespace().rev().nth(1))
            .and_then(|n| n.parse().ok())
            .expect("MemTotal");
        let mut hugepages = Vec::new();
        let mut sizes: Vec<PathBuf> = fs::read_dir(dir.join("hugepages"))
            .expect("hugepages")
            .map(|entry| entry.expect("entry").path())
            .collect();
        sizes.sort();
        for size in sizes {
            let name = size.file_name().unwrap().to_string_lossy().into_owned();
            let kib_per_page: u64 = name
                .trim_start_matches("hugepages-")
                .trim_end_matches("kB")
                .parse()
                .expect("page size");
            hugepages.push(guest::HugepagePool {
                page_size_bytes: kib_per_page * 1024,
                pages: number(&size.join("nr_hugepages")),
            });
        }
        hugepages.sort_by_key(|pool| pool.page_size_bytes);
        numa_nodes.push(guest::NumaNodeInfo {
            id: node,
            memory_bytes: kib * 1024,
            hugepages,
            distances: read(&dir.join("distance"))
                .split_whitespace()
                .map(|d| d.parse().expect("distance"))
                .collect(),
        });
    }

    // (id, sysfs core id, package, NUMA node, L3 id)
    let raw: Vec<(u32, u32, u32, u32, u32)> = cpu_list(&read(&system.join("cpu/online")))
        .into_iter()
        .map(|id| {
            let dir = system.join(format!("cpu/cpu{id}"));
            (
                id,
                number(&dir.join("topology/core_id")),
                number(&dir.join("topology/physical_package_id")),
                numa_of[&id],
                number(&dir.join("cache/index3/id")),
            )
        })
        .collect();
    let mut lowest: BTreeMap<(u32, u32, u32), u32> = BTreeMap::new();
    let mut threads: BTreeMap<(u32, u32, u32), usize> = BTreeMap::new();
    let mut cache_cpus: BTreeMap<u32, usize> = BTreeMap::new();
    let mut node_cores: BTreeMap<u32, std::collections::BTreeSet<(u32, u32, u32)>> =
        BTreeMap::new();
    for &(id, core, package, numa, l3) in &raw {
        let key = (numa, package, core);
        let low = lowest.entry(key).or_insert(id);
        *low = (*low).min(id);
        *threads.entry(key).or_default() += 1;
        *cache_cpus.entry(l3).or_default() += 1;
        node_cores.entry(numa).or_default().insert(key);
    }
    let cpus = raw
        .iter()
        .map(|&(id, core, package, numa, l3)| {
            let key = (numa, package, core);
            let node_threads = node_cores[&numa].len() * threads[&key];
            guest::TopologyCpu {
                id,
                core_id: lowest[&key],
                socket_id: package,
                numa_node: numa,
                uncore_cache_id: Some(if cache_cpus[&l3] != node_threads {
                    l3
                } else {
                    package
                }),
            }
        })
        .collect();
    guest::NodeTopology { cpus, numa_nodes }
}

fn quantity(name: &str, q: &str) -> guest::ResourceQuantity {
    guest::ResourceQuantity {
        name: name.into(),
        quantity: q.into(),
    }
}

fn guaranteed(cpu: &str, memory: &str) -> guest::ResourceRequirements {
    let list = vec![quantity("cpu", cpu), quantity("memory", memory)];
    guest::ResourceRequirements {
        requests: Some(list.clone()),
        limits: Some(list),
    }
}

fn container(name: &str, resources: Option<guest::ResourceRequirements>) -> guest::Container {
    guest::Container {
        name: name.into(),
        resources,
        restart_policy: None,
        resize_policy: Vec::new(),
    }
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("iterations"))
        .unwrap_or(1000);
    let root =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sysfs/server-2s-4numa-256cpu-l3");
    let topology = fixture_topology(&root);
    assert_eq!(topology.cpus.len(), 256);

    let gates = ["PodLevelResources", "PodLevelResourceManagers"];
    let mut node = policy_wasm::node::default_settings();
    node.system_reserved = vec![quantity("cpu", "2")];
    node.cpu_manager_policy = Some(guest::CpuManagerPolicy::Static);
    node.topology_manager_policy = Some(guest::TopologyManagerPolicy::BestEffort);
    node.topology_manager_scope = Some(guest::TopologyManagerScope::Pod);
    node.feature_gates = gates
        .iter()
        .map(|g| guest::FeatureGate {
            name: (*g).into(),
            enabled: true,
        })
        .collect();

    let pod = guest::Pod {
        name: "bench".into(),
        namespace: String::new(),
        uid: "bench-uid".into(),
        annotations: Vec::new(),
        spec: guest::PodSpec {
            containers: vec![
                container("exclusive", Some(guaranteed("8", "8Gi"))),
                container("shared-a", None),
                container("shared-b", None),
            ],
            init_containers: Vec::new(),
            ephemeral_containers: Vec::new(),
            resources: Some(guaranteed("16", "16Gi")),
            overhead: None,
            priority: None,
            priority_class_name: None,
            os_name: None,
            restart_policy: None,
            node_name: None,
        },
        status: guest::PodStatus::default(),
    };

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
    let state = match policy_wasm::evaluate::manager_operation(
        &guest::ManagerRequest::Start(empty),
        &topology,
        &node,
    )
    .expect("start")
    {
        Ok(guest::ManagerResponse::State(state)) => state,
        other => panic!("start failed: {other:?}"),
    };

    let admission =
        policy_wasm::evaluate::admit(&pod, &topology, &state, &node).expect("valid input");
    assert!(
        admission.rejection.is_none(),
        "rejected: {:?}",
        admission.rejection
    );
    let pod_cpuset = admission.assignment.pod_cpuset.clone().expect("pod cpuset");
    println!("pod cpuset {pod_cpuset}");
    for c in &admission.assignment.containers {
        println!("{c:?}");
    }

    for _ in 0..iterations {
        let a = policy_wasm::evaluate::admit(std::hint::black_box(&pod), &topology, &state, &node)
            .expect("valid input");
        std::hint::black_box(a);
    }
}
