//! `sysfs::read_topology` over the trees in `fixtures/sysfs/` (written by
//! `fixtures/sysfs/generate.py`) and over broken trees built per test in a
//! temporary directory.
//!
//! The vector machines are checked against the CPU tables of the kubelet
//! tests in `tests/vectors/k8s-managers/`, read at test time.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use podpolicy::sysfs::{NumaNodeInfo, SysfsTopology, read_topology};
use serde_json::{Value, json};

const GIB: u64 = 1 << 30;
const HUGE_2M: u64 = 2 << 20;
const HUGE_1G: u64 = 1 << 30;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/sysfs")
        .join(name)
}

#[track_caller]
fn read_fixture(name: &str) -> SysfsTopology {
    read_topology(&fixture(name)).unwrap_or_else(|err| panic!("fixture {name}: {err:#}"))
}

#[track_caller]
fn load_vectors(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/vectors/k8s-managers")
        .join(file);
    let text = fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "{}: {err} (the kubelet vector files are expected in tests/vectors/k8s-managers)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[track_caller]
fn as_u32(value: &Value) -> u32 {
    let number = value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not a number"));
    u32::try_from(number).unwrap_or_else(|_| panic!("{value} is too large"))
}

fn kubelet_core_count(topology: &SysfsTopology) -> usize {
    topology
        .kubelet_core_ids()
        .values()
        .collect::<BTreeSet<_>>()
        .len()
}

fn socket_ids(topology: &SysfsTopology) -> BTreeSet<u32> {
    topology.cpus.iter().map(|cpu| cpu.socket_id).collect()
}

/// The fixture `name` read as the kubelet would see it equals the topology
/// `name` in each vector file: CPU to core, socket and NUMA node, and counts.
#[track_caller]
fn check_vector_topology(name: &str, files: &[&str]) {
    let topology = read_fixture(name);
    let core_ids = topology.kubelet_core_ids();
    let got: Vec<(u32, u32, u32, u32)> = topology
        .cpus
        .iter()
        .map(|cpu| (cpu.id, core_ids[&cpu.id], cpu.socket_id, cpu.numa_node))
        .collect();
    for file in files {
        let vectors = load_vectors(file);
        let expected_topology = vectors["topologies"]
            .get(name)
            .unwrap_or_else(|| panic!("{file} has no topology {name}"));
        let expected: Vec<(u32, u32, u32, u32)> = expected_topology["cpus"]
            .as_array()
            .unwrap_or_else(|| panic!("{file}: {name}.cpus is not a list"))
            .iter()
            .map(|row| {
                (
                    as_u32(&row["cpu"]),
                    as_u32(&row["core"]),
                    as_u32(&row["socket"]),
                    as_u32(&row["numa"]),
                )
            })
            .collect();
        assert_eq!(
            got, expected,
            "{name} against {file}: (cpu, core, socket, numa)"
        );
        let count = |key: &str| expected_topology[key].as_u64().map(|n| n as usize);
        assert_eq!(
            Some(topology.cpus.len()),
            count("num_cpus"),
            "{name}: num_cpus"
        );
        assert_eq!(
            Some(socket_ids(&topology).len()),
            count("num_sockets"),
            "{name}: num_sockets"
        );
        assert_eq!(
            Some(kubelet_core_count(&topology)),
            count("num_cores"),
            "{name}: num_cores"
        );
        assert_eq!(
            Some(topology.numa_nodes.len()),
            count("num_numa_nodes"),
            "{name}: num_numa_nodes"
        );
    }
    // The node lists agree with the per-CPU nodes.
    for node in &topology.numa_nodes {
        let cpus: Vec<u32> = got
            .iter()
            .filter(|row| row.3 == node.id)
            .map(|row| row.0)
            .collect();
        assert_eq!(node.cpus, cpus, "{name}: node {} cpus", node.id);
    }
}

/// The distance matrix of the fixture equals `numa_infos.<key>` of the
/// topology manager vectors.
#[track_caller]
fn check_distances(name: &str, key: &str) {
    let vectors = load_vectors("topology-manager-merge.json");
    let info = vectors["numa_infos"]
        .get(key)
        .unwrap_or_else(|| panic!("topology-manager-merge.json has no numa_infos.{key}"));
    let expected_nodes: Vec<u32> = info["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(as_u32)
        .collect();
    let expected: Vec<Vec<u32>> = info["distances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row.as_array().unwrap().iter().map(as_u32).collect())
        .collect();
    let topology = read_fixture(name);
    let nodes: Vec<u32> = topology.numa_nodes.iter().map(|node| node.id).collect();
    let distances: Vec<Vec<u32>> = topology
        .numa_nodes
        .iter()
        .map(|node| node.distances.clone())
        .collect();
    assert_eq!(nodes, expected_nodes, "{name}: nodes");
    assert_eq!(
        distances, expected,
        "{name}: distances against numa_infos.{key}"
    );
}

#[test]
fn vector_single_socket_ht() {
    check_vector_topology(
        "topoSingleSocketHT",
        &["cpu-assignment.json", "cpu-static-policy.json"],
    );
}

#[test]
fn vector_dual_socket_ht() {
    check_vector_topology(
        "topoDualSocketHT",
        &["cpu-assignment.json", "cpu-static-policy.json"],
    );
}

#[test]
fn vector_dual_socket_no_ht() {
    check_vector_topology(
        "topoDualSocketNoHT",
        &["cpu-assignment.json", "cpu-static-policy.json"],
    );
}

#[test]
fn vector_dual_socket_multi_numa_per_socket_ht() {
    check_vector_topology(
        "topoDualSocketMultiNumaPerSocketHT",
        &["cpu-assignment.json", "cpu-static-policy.json"],
    );
    check_distances("topoDualSocketMultiNumaPerSocketHT", "four_nodes");
}

#[test]
fn vector_multi_socket_per_numa_ht() {
    check_vector_topology(
        "fakeTopoMultiSocketDualSocketPerNumaHT",
        &["cpu-assignment.json"],
    );
    check_distances("fakeTopoMultiSocketDualSocketPerNumaHT", "two_nodes");
}

/// The 8-NUMA server: also a kubelet test machine, with the asymmetric
/// eight-node distance matrix (node 7 to 6 is 13, node 6 to 7 is 11).
#[test]
fn eight_numa_server() {
    let name = "topoDualSocketMultiNumaPerSocketHTLarge";
    check_vector_topology(name, &["cpu-assignment.json"]);
    check_distances(name, "eight_nodes");
    let topology = read_fixture(name);
    assert_eq!(topology.numa_nodes[7].distances[6], 13);
    assert_eq!(topology.numa_nodes[6].distances[7], 11);
    // One L3 per node: node-wide, so the kubelet uses the socket id.
    let uncore = topology.kubelet_uncore_cache_ids();
    for cpu in &topology.cpus {
        assert_eq!(cpu.uncore_cache_id, Some(cpu.numa_node), "cpu {}", cpu.id);
        assert_eq!(uncore[&cpu.id], cpu.socket_id, "cpu {}", cpu.id);
    }
    for node in &topology.numa_nodes {
        assert_eq!(
            node.hugepages,
            BTreeMap::from([(HUGE_2M, 2048), (HUGE_1G, 8)])
        );
        assert_eq!(
            node.memory_bytes,
            (64 * GIB / 1024 - 123_456 - 4096 * u64::from(node.id)) * 1024
        );
    }
}

/// Optional attributes per kernel age: cluster_id (5.16+), die_id (5.2+) and
/// the cache `id` (4.11+) are read when present and `None` when not.
#[test]
fn optional_topology_attributes() {
    let single = read_fixture("topoSingleSocketHT");
    assert!(single.cpus.iter().all(|cpu| cpu.die_id == Some(0)));
    assert!(
        single
            .cpus
            .iter()
            .all(|cpu| cpu.cluster_id == Some(cpu.core_id))
    );
    assert!(single.cpus.iter().all(|cpu| cpu.uncore_cache_id == Some(0)));

    let dual = read_fixture("topoDualSocketHT");
    assert!(
        dual.cpus
            .iter()
            .all(|cpu| cpu.die_id == Some(0) && cpu.cluster_id.is_none())
    );
    assert!(
        dual.cpus
            .iter()
            .all(|cpu| cpu.uncore_cache_id == Some(cpu.socket_id))
    );
    // Packages number their cores from 0, so CPU 0 and 1 share a core_id.
    assert_eq!((dual.cpus[0].core_id, dual.cpus[1].core_id), (0, 0));
    assert_eq!(dual.numa_nodes[0].distances, vec![10, 21]);
    assert_eq!(
        dual.numa_nodes[1].hugepages,
        BTreeMap::from([(HUGE_2M, 256), (HUGE_1G, 0)])
    );

    let old = read_fixture("topoDualSocketNoHT");
    assert!(old.cpus.iter().all(|cpu| cpu.die_id.is_none()
        && cpu.cluster_id.is_none()
        && cpu.uncore_cache_id.is_none()));
    let uncore = old.kubelet_uncore_cache_ids();
    assert!(old.cpus.iter().all(|cpu| uncore[&cpu.id] == cpu.socket_id));
}

/// 2 sockets x 64 cores x SMT2, NPS2 (4 NUMA nodes), 8 L3 groups per socket.
#[test]
fn server_256_cpus_with_l3_groups() {
    let topology = read_fixture("server-2s-4numa-256cpu-l3");
    assert_eq!(topology.cpus.len(), 256);
    assert_eq!(topology.numa_nodes.len(), 4);
    assert_eq!(socket_ids(&topology), BTreeSet::from([0, 1]));
    assert_eq!(kubelet_core_count(&topology), 128);

    let core_ids = topology.kubelet_core_ids();
    for cpu in &topology.cpus {
        // CPU n and n+128 are the two threads of core n.
        assert_eq!(core_ids[&cpu.id], cpu.id % 128, "cpu {}", cpu.id);
        assert_eq!(cpu.core_id, cpu.id % 64, "cpu {}", cpu.id);
        assert_eq!(cpu.socket_id, (cpu.id % 128) / 64, "cpu {}", cpu.id);
        assert_eq!(cpu.die_id, Some(cpu.socket_id));
        assert_eq!(cpu.cluster_id, Some(cpu.id % 128));
    }
    for node in &topology.numa_nodes {
        let first = 32 * node.id;
        let expected: Vec<u32> = (first..first + 32)
            .chain(128 + first..128 + first + 32)
            .collect();
        assert_eq!(node.cpus, expected, "node {}", node.id);
        assert_eq!(
            node.memory_bytes,
            (192 * GIB / 1024 - 123_456 - 4096 * u64::from(node.id)) * 1024
        );
        assert_eq!(
            node.hugepages,
            BTreeMap::from([(HUGE_2M, 4096), (HUGE_1G, 16)])
        );
    }
    assert_eq!(topology.numa_nodes[0].distances, vec![10, 12, 32, 32]);
    assert_eq!(topology.numa_nodes[3].distances, vec![32, 32, 12, 10]);

    // 16 L3 groups of 8 cores (16 CPUs), each inside one node, and smaller
    // than the node, so the kubelet's uncore ids are the L3 ids.
    let mut groups: BTreeMap<u32, Vec<&podpolicy::sysfs::CpuInfo>> = BTreeMap::new();
    for cpu in &topology.cpus {
        groups
            .entry(cpu.uncore_cache_id.expect("every CPU has an L3"))
            .or_default()
            .push(cpu);
    }
    assert_eq!(
        groups.keys().copied().collect::<Vec<_>>(),
        (0..16).collect::<Vec<_>>()
    );
    for (id, cpus) in &groups {
        assert_eq!(cpus.len(), 16, "L3 {id}");
        let cores: BTreeSet<u32> = cpus.iter().map(|cpu| core_ids[&cpu.id]).collect();
        assert_eq!(cores.len(), 8, "L3 {id}");
        let nodes: BTreeSet<u32> = cpus.iter().map(|cpu| cpu.numa_node).collect();
        assert_eq!(nodes.len(), 1, "L3 {id}");
        assert!(cpus.iter().all(|cpu| cpu.socket_id == id / 8), "L3 {id}");
    }
    let uncore = topology.kubelet_uncore_cache_ids();
    assert!(
        topology
            .cpus
            .iter()
            .all(|cpu| Some(uncore[&cpu.id]) == cpu.uncore_cache_id)
    );
}

/// No `sys/devices/system/node`: one node 0 with every CPU, memory from
/// `proc/meminfo`, huge pages from `sys/kernel/mm/hugepages`.
#[test]
fn vm_without_numa() {
    let topology = read_fixture("vm-2cpu-no-numa");
    assert_eq!(
        topology.numa_nodes,
        vec![NumaNodeInfo {
            id: 0,
            cpus: vec![0, 1],
            memory_bytes: (24 * GIB / 1024 - 123_456) * 1024,
            hugepages: BTreeMap::from([(HUGE_2M, 0), (HUGE_1G, 0)]),
            distances: vec![10],
        }]
    );
    assert_eq!(
        topology.kubelet_core_ids(),
        BTreeMap::from([(0, 0), (1, 1)])
    );
    // The one L3 spans the node, so the kubelet uses the socket id.
    assert_eq!(
        topology.kubelet_uncore_cache_ids(),
        BTreeMap::from([(0, 0), (1, 0)])
    );
    assert_eq!(
        serde_json::to_value(&topology).unwrap(),
        json!({
            "cpus": [
                {"id": 0, "core_id": 0, "socket_id": 0, "die_id": 0, "cluster_id": 0, "numa_node": 0, "uncore_cache_id": 0},
                {"id": 1, "core_id": 1, "socket_id": 0, "die_id": 0, "cluster_id": 1, "numa_node": 0, "uncore_cache_id": 0},
            ],
            "numa_nodes": [
                {"id": 0, "cpus": [0, 1], "memory_bytes": 25_643_384_832u64, "hugepages": {"2097152": 0, "1073741824": 0}, "distances": [10]},
            ],
        })
    );
}

/// A relative root still gives absolute paths in errors and reads fine.
#[test]
fn relative_root() {
    // Integration tests run in the package directory (`host/`).
    let topology = read_topology(Path::new("../fixtures/sysfs/vm-2cpu-no-numa")).unwrap();
    assert_eq!(topology.cpus.len(), 2);
    let message = format!(
        "{:#}",
        read_topology(Path::new("no-such-root-dir")).unwrap_err()
    );
    let expected = std::path::absolute("no-such-root-dir/sys/devices/system/cpu/online").unwrap();
    assert!(message.starts_with('/'), "{message}");
    assert!(
        message.contains(&expected.display().to_string()),
        "{message}"
    );
}

/// A tree in the temporary directory, removed when dropped.
struct TempTree {
    root: PathBuf,
}

impl TempTree {
    /// Two CPUs (two cores, one package) in one NUMA node.
    fn minimal(test: &str) -> TempTree {
        let root =
            std::env::temp_dir().join(format!("podpolicy-sysfs-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let tree = TempTree { root };
        tree.write("sys/devices/system/cpu/online", "0-1\n");
        for cpu in 0..2 {
            tree.write(
                &format!("sys/devices/system/cpu/cpu{cpu}/topology/core_id"),
                format!("{cpu}\n"),
            );
            tree.write(
                &format!("sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
                "0\n",
            );
        }
        tree.write("sys/devices/system/node/online", "0\n");
        tree.write("sys/devices/system/node/node0/cpulist", "0-1\n");
        tree.write(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:       1024 kB\n",
        );
        tree.write("sys/devices/system/node/node0/distance", "10\n");
        tree
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    fn write(&self, relative: &str, contents: impl AsRef<[u8]>) {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, contents).unwrap();
    }

    fn remove(&self, relative: &str) {
        fs::remove_file(self.path(relative)).unwrap();
    }

    fn read(&self) -> anyhow::Result<SysfsTopology> {
        read_topology(&self.root)
    }

    /// Reading fails, and the message names `file` (absolute) and `needle`.
    #[track_caller]
    fn check_error(&self, file: &str, needle: &str) {
        let message = match self.read() {
            Ok(topology) => panic!("expected an error about {file}, read {topology:?}"),
            Err(err) => format!("{err:#}"),
        };
        let path = self.path(file).display().to_string();
        assert!(message.contains(&path), "`{message}` does not name {path}");
        assert!(
            message.contains(needle),
            "`{message}` does not say `{needle}`"
        );
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

const CPU: &str = "sys/devices/system/cpu";
const NODE: &str = "sys/devices/system/node";

#[test]
fn minimal_tree_reads() {
    let tree = TempTree::minimal("ok");
    let topology = tree.read().unwrap();
    assert_eq!(topology.cpus.len(), 2);
    assert_eq!(topology.numa_nodes[0].cpus, vec![0, 1]);
    assert_eq!(topology.numa_nodes[0].memory_bytes, 1024 * 1024);
    assert!(topology.numa_nodes[0].hugepages.is_empty());
}

#[test]
fn missing_files_are_named() {
    let tree = TempTree::minimal("missing-online");
    tree.remove(&format!("{CPU}/online"));
    tree.check_error(&format!("{CPU}/online"), "no such file");

    let tree = TempTree::minimal("missing-core-id");
    tree.remove(&format!("{CPU}/cpu1/topology/core_id"));
    tree.check_error(&format!("{CPU}/cpu1/topology/core_id"), "no such file");

    let tree = TempTree::minimal("missing-distance");
    tree.remove(&format!("{NODE}/node0/distance"));
    tree.check_error(&format!("{NODE}/node0/distance"), "no such file");

    // An online CPU without a directory at all.
    let tree = TempTree::minimal("missing-cpu-dir");
    tree.write(&format!("{CPU}/online"), "0-2");
    tree.write(&format!("{NODE}/node0/cpulist"), "0-2");
    tree.check_error(&format!("{CPU}/cpu2/topology/core_id"), "no such file");
}

#[test]
fn garbage_values_are_named() {
    let tree = TempTree::minimal("garbage-core-id");
    tree.write(&format!("{CPU}/cpu1/topology/core_id"), "abc\n");
    tree.check_error(
        &format!("{CPU}/cpu1/topology/core_id"),
        "`abc` is not a decimal number",
    );

    let tree = TempTree::minimal("garbage-online");
    tree.write(&format!("{CPU}/online"), "0-1,x\n");
    tree.check_error(&format!("{CPU}/online"), "`x`");

    let tree = TempTree::minimal("garbage-distance");
    tree.write(&format!("{NODE}/node0/distance"), "10 far\n");
    tree.check_error(&format!("{NODE}/node0/distance"), "`far`");

    let tree = TempTree::minimal("garbage-meminfo");
    tree.write(&format!("{NODE}/node0/meminfo"), "Node 0 MemFree: 1 kB\n");
    tree.check_error(
        &format!("{NODE}/node0/meminfo"),
        "no `Node 0 MemTotal:` line",
    );

    let tree = TempTree::minimal("garbage-hugepages");
    tree.write(
        &format!("{NODE}/node0/hugepages/hugepages-2MB/nr_hugepages"),
        "1\n",
    );
    tree.check_error(
        &format!("{NODE}/node0/hugepages/hugepages-2MB"),
        "`hugepages-2MB`",
    );

    let tree = TempTree::minimal("garbage-nr-hugepages");
    tree.write(
        &format!("{NODE}/node0/hugepages/hugepages-2048kB/nr_hugepages"),
        "-5\n",
    );
    tree.check_error(
        &format!("{NODE}/node0/hugepages/hugepages-2048kB/nr_hugepages"),
        "`-5`",
    );

    let tree = TempTree::minimal("garbage-utf8");
    tree.write(&format!("{CPU}/cpu0/topology/core_id"), [0xff, 0xfe]);
    tree.check_error(&format!("{CPU}/cpu0/topology/core_id"), "not UTF-8");
}

#[test]
fn huge_numbers_are_named() {
    let tree = TempTree::minimal("huge-package");
    tree.write(
        &format!("{CPU}/cpu0/topology/physical_package_id"),
        "99999999999\n",
    );
    tree.check_error(
        &format!("{CPU}/cpu0/topology/physical_package_id"),
        "`99999999999` is larger than 4294967295",
    );

    let tree = TempTree::minimal("huge-range");
    tree.write(&format!("{CPU}/online"), "0-4294967295\n");
    tree.check_error(
        &format!("{CPU}/online"),
        "`4294967295` is larger than 65535",
    );

    let tree = TempTree::minimal("huge-memory");
    tree.write(
        &format!("{NODE}/node0/meminfo"),
        "Node 0 MemTotal: 18446744073709551615 kB\n",
    );
    tree.check_error(&format!("{NODE}/node0/meminfo"), "18446744073709551615");
}

#[test]
fn a_ten_megabyte_file_is_refused() {
    let tree = TempTree::minimal("big-file");
    tree.write(&format!("{CPU}/online"), vec![b'0'; 10 << 20]);
    tree.check_error(&format!("{CPU}/online"), "larger than 1048576 bytes");
}

#[test]
fn symlink_loops_are_named() {
    let tree = TempTree::minimal("symlink-loop");
    let core_id = tree.path(&format!("{CPU}/cpu1/topology/core_id"));
    fs::remove_file(&core_id).unwrap();
    std::os::unix::fs::symlink(&core_id, &core_id).unwrap();
    tree.check_error(&format!("{CPU}/cpu1/topology/core_id"), "symbolic links");

    // A loop in the optional `cache` directory is an error too, not "absent".
    let tree = TempTree::minimal("symlink-loop-dir");
    let cache = tree.path(&format!("{CPU}/cpu0/cache"));
    std::os::unix::fs::symlink(&cache, &cache).unwrap();
    tree.check_error(&format!("{CPU}/cpu0/cache"), "symbolic links");
}

#[test]
fn special_files_are_refused() {
    let tree = TempTree::minimal("dir-as-file");
    tree.remove(&format!("{CPU}/cpu0/topology/core_id"));
    fs::create_dir(tree.path(&format!("{CPU}/cpu0/topology/core_id"))).unwrap();
    tree.check_error(
        &format!("{CPU}/cpu0/topology/core_id"),
        "not a regular file",
    );

    // A FIFO would block a plain read forever.
    let tree = TempTree::minimal("fifo");
    tree.remove(&format!("{CPU}/online"));
    nix::unistd::mkfifo(
        &tree.path(&format!("{CPU}/online")),
        nix::sys::stat::Mode::S_IRWXU,
    )
    .unwrap();
    tree.check_error(&format!("{CPU}/online"), "not a regular file");

    let tree = TempTree::minimal("file-as-node-dir");
    fs::remove_dir_all(tree.path(NODE)).unwrap();
    tree.write(NODE, "0");
    tree.check_error(NODE, "not a directory");
}

#[test]
fn numa_membership() {
    // An offline CPU may stay in its node's list; it is not read.
    let tree = TempTree::minimal("offline-cpu");
    tree.write(&format!("{CPU}/online"), "0\n");
    let topology = tree.read().unwrap();
    assert_eq!(topology.cpus.len(), 1);
    assert_eq!(topology.numa_nodes[0].cpus, vec![0]);

    // Without a cpulist entry, the `nodeN` entry in `cpuN/` decides.
    let tree = TempTree::minimal("node-entry");
    tree.write(&format!("{NODE}/node0/cpulist"), "0\n");
    tree.write(&format!("{CPU}/cpu1/node0"), "");
    assert_eq!(tree.read().unwrap().numa_nodes[0].cpus, vec![0, 1]);

    let tree = TempTree::minimal("no-node");
    tree.write(&format!("{NODE}/node0/cpulist"), "0\n");
    tree.check_error(&format!("{CPU}/cpu1"), "CPU 1 is in no NUMA node");

    let tree = TempTree::minimal("unlisted-node");
    tree.write(&format!("{NODE}/node0/cpulist"), "0\n");
    tree.write(&format!("{CPU}/cpu1/node5"), "");
    tree.check_error(&format!("{NODE}/online"), "CPU 1 is in NUMA node 5");

    let tree = TempTree::minimal("two-node-entries");
    tree.write(&format!("{NODE}/node0/cpulist"), "0\n");
    tree.write(&format!("{CPU}/cpu1/node0"), "");
    tree.write(&format!("{CPU}/cpu1/node1"), "");
    tree.check_error(
        &format!("{CPU}/cpu1"),
        "more than one node<N> entry (node0, node1)",
    );

    let tree = TempTree::minimal("cpu-in-two-nodes");
    tree.write(&format!("{NODE}/online"), "0-1\n");
    tree.write(&format!("{NODE}/node1/cpulist"), "1\n");
    tree.write(&format!("{NODE}/node1/meminfo"), "Node 1 MemTotal: 0 kB\n");
    tree.write(&format!("{NODE}/node1/distance"), "20 10\n");
    tree.check_error(
        &format!("{NODE}/node1/cpulist"),
        "CPU 1 is also in NUMA node 0",
    );

    // A memory-only node has an empty cpulist; `possible` stands in for `online`.
    let tree = TempTree::minimal("memory-only-node");
    tree.remove(&format!("{NODE}/online"));
    tree.write(&format!("{NODE}/possible"), "0-1\n");
    tree.write(&format!("{NODE}/node1/cpulist"), "\n");
    tree.write(
        &format!("{NODE}/node1/meminfo"),
        "Node 1 MemTotal: 2048 kB\n",
    );
    tree.write(&format!("{NODE}/node1/distance"), "20 10\n");
    let topology = tree.read().unwrap();
    assert_eq!(topology.numa_nodes[1].cpus, Vec::<u32>::new());
    assert_eq!(topology.numa_nodes[1].memory_bytes, 2048 * 1024);
}

/// `-1` is the kernel's "unknown" for package, die and cluster ids.
#[test]
fn unknown_ids() {
    let tree = TempTree::minimal("unknown-ids");
    for cpu in 0..2 {
        tree.write(
            &format!("{CPU}/cpu{cpu}/topology/physical_package_id"),
            "-1\n",
        );
        tree.write(&format!("{CPU}/cpu{cpu}/topology/die_id"), "-1\n");
        tree.write(&format!("{CPU}/cpu{cpu}/topology/cluster_id"), "-1\n");
    }
    let topology = tree.read().unwrap();
    assert!(
        topology
            .cpus
            .iter()
            .all(|cpu| cpu.socket_id == 0 && cpu.die_id.is_none() && cpu.cluster_id.is_none())
    );
}

/// The L3 is found by its `level`, not by its index number.
#[test]
fn l3_found_by_level() {
    let tree = TempTree::minimal("l3-by-level");
    let cache = format!("{CPU}/cpu0/cache");
    tree.write(&format!("{cache}/index0/level"), "1\n");
    tree.write(&format!("{cache}/index0/id"), "0\n");
    tree.write(&format!("{cache}/index2/level"), "2\n");
    tree.write(&format!("{cache}/index2/id"), "4\n");
    tree.write(&format!("{cache}/index10/level"), "3\n");
    tree.write(&format!("{cache}/index10/id"), "7\n");
    tree.write(&format!("{cache}/uevent"), "");
    let topology = tree.read().unwrap();
    assert_eq!(topology.cpus[0].uncore_cache_id, Some(7));
    assert_eq!(topology.cpus[1].uncore_cache_id, None);

    tree.write(&format!("{cache}/index10/id"), "seven\n");
    tree.check_error(&format!("{cache}/index10/id"), "`seven`");
}
