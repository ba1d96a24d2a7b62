//! Upstream Kubernetes' own unit tests of the static memory manager policy,
//! transcribed case by case.
//!
//! Source: kubernetes/kubernetes `pkg/kubelet/cm/memorymanager/policy_static_test.go`
//! at commit 1c9cf914f2f951313b8e9f7c321f5bd50b5e3d9f (the stored version
//! read; `TestStaticPolicyNew`, `TestStaticPolicyStart`,
//! `TestStaticPolicyAllocate`, `TestStaticPolicyAllocateWithInitContainers`,
//! `TestStaticPolicyAllocateWithRestartableInitContainers`,
//! `TestStaticPolicyRemoveContainer`, `TestStaticPolicyGetTopologyHints`).
//! Each test names the upstream test and case; the expected values are
//! upstream's. Blocks are compared regardless of order (upstream
//! `areMemoryBlocksEqual`), NUMA groups (`Cells`) as sets.
//!
//! [`start_memory`] is upstream's `NewPolicyStatic` + `Start`: the system
//! reservation check, the default machine state and the static policy's
//! own [`start`], as `managers::container_manager::start` calls them.
//!
//! A NUMA node whose hugepages and system reservation exceed its memory is
//! not refused when the policy is built: `getDefaultMachineState` computes
//! the allocatable memory in `uint64`, wraps around, and `Start` then finds
//! the loaded state different, as upstream.

use std::collections::BTreeMap;

use super::{
    Block, HugePagesInfo, MEMORY, MemoryContainer, MemoryError, MemoryPod, MemoryState,
    MemoryTable, NumaNodeMap, NumaNodeMemory, NumaNodeState, PodLevelGates, SystemReservedMemory,
    allocate, check_system_reserved, default_machine_state, get_topology_hints, remove_container,
};
use crate::topology::{BitMask, TopologyHint};

const MB: u64 = 1 << 20;
const GB: u64 = 1 << 30;
const HP1G: &str = "hugepages-1Gi";
const HP2M: &str = "hugepages-2Mi";
/// `pageSize1Gb`, in KiB.
const PAGE_SIZE_1GB: u64 = 1_048_576;

/// The Kubernetes defaults of the pinned version: `PodLevelResources` on,
/// `PodLevelResourceManagers` off (no pod here sets pod-level resources).
fn gates() -> PodLevelGates {
    PodLevelGates {
        pod_level_resources: true,
        pod_level_resource_managers: false,
    }
}

/// A `MemoryTable` in upstream's field order: Allocatable, Free, Reserved,
/// SystemReserved, TotalMemSize.
fn t(allocatable: u64, free: u64, reserved: u64, system_reserved: u64, total: u64) -> MemoryTable {
    MemoryTable {
        total,
        system_reserved,
        allocatable,
        reserved,
        free,
    }
}

/// A `NUMANodeState` with these tables (name, table), cells and number of assignments.
fn node(tables: &[(&str, MemoryTable)], cells: &[usize], assignments: i64) -> NumaNodeState {
    NumaNodeState {
        number_of_assignments: assignments,
        memory_map: tables
            .iter()
            .map(|(name, table)| (name.to_string(), *table))
            .collect(),
        cells: cells.to_vec(),
    }
}

/// A node with `memory` and `hugepages-1Gi` tables.
fn node2(mem: MemoryTable, hp: MemoryTable, cells: &[usize], assignments: i64) -> NumaNodeState {
    node(&[(MEMORY, mem), (HP1G, hp)], cells, assignments)
}

fn ms(nodes: Vec<(usize, NumaNodeState)>) -> NumaNodeMap {
    nodes.into_iter().collect()
}

fn blk(affinity: &[usize], resource: &str, size: u64) -> Block {
    Block {
        numa_affinity: affinity.to_vec(),
        resource: resource.to_string(),
        size,
    }
}

type Assignments = BTreeMap<String, BTreeMap<String, Vec<Block>>>;

fn assignments(entries: Vec<(&str, &str, Vec<Block>)>) -> Assignments {
    let mut out = Assignments::new();
    for (pod, container, blocks) in entries {
        out.entry(pod.to_string())
            .or_default()
            .insert(container.to_string(), blocks);
    }
    out
}

fn state_of(machine: NumaNodeMap, assigned: Assignments) -> MemoryState {
    MemoryState {
        machine_state: machine,
        assignments: assigned,
        ..MemoryState::default()
    }
}

/// Upstream `areContainerMemoryAssignmentsEqual`: blocks in any order.
fn assert_assignments(got: &Assignments, want: &Assignments) {
    let norm = |a: &Assignments| {
        let mut a = a.clone();
        for containers in a.values_mut() {
            for blocks in containers.values_mut() {
                blocks.sort_by(|x, y| {
                    (&x.resource, &x.numa_affinity, x.size).cmp(&(
                        &y.resource,
                        &y.numa_affinity,
                        y.size,
                    ))
                });
            }
        }
        a
    };
    assert_eq!(norm(got), norm(want), "assignments");
}

/// Machine states compared field by field, NUMA groups as sets.
fn assert_machine(got: &NumaNodeMap, want: &NumaNodeMap) {
    let norm = |m: &NumaNodeMap| {
        let mut m = m.clone();
        for n in m.values_mut() {
            n.cells.sort_unstable();
        }
        m
    };
    assert_eq!(norm(got), norm(want), "machine state");
}

/// An app or init container requesting `memory` and `hugepages-1Gi` bytes, with
/// equal limits (equivalent-Guaranteed).
fn c(name: &str, memory: u64, hugepages: u64) -> MemoryContainer {
    MemoryContainer {
        name: name.to_string(),
        restartable: false,
        requests: BTreeMap::from([(MEMORY.to_string(), memory), (HP1G.to_string(), hugepages)]),
        equivalent_guaranteed: true,
    }
}

fn sidecar(name: &str, memory: u64, hugepages: u64) -> MemoryContainer {
    MemoryContainer {
        restartable: true,
        ..c(name, memory, hugepages)
    }
}

/// `getPod(uid, name, requirementsGuaranteed)`.
fn guaranteed_pod(uid: &str, name: &str) -> MemoryPod {
    MemoryPod {
        uid: uid.to_string(),
        guaranteed: true,
        containers: vec![c(name, GB, GB)],
        ..MemoryPod::default()
    }
}

/// `getPodWithInitContainers(uid, containers, initContainers)`.
fn pod_with_init(uid: &str, apps: Vec<MemoryContainer>, inits: Vec<MemoryContainer>) -> MemoryPod {
    MemoryPod {
        uid: uid.to_string(),
        guaranteed: true,
        init_containers: inits,
        containers: apps,
        ..MemoryPod::default()
    }
}

fn no_hint() -> TopologyHint {
    TopologyHint::any(false)
}

fn mask(bits: &[usize]) -> BitMask {
    BitMask::new(bits).unwrap()
}

// ---------------------------------------------------------------------------
// TestStaticPolicyNew

/// TestStaticPolicyNew: "should fail, when machine does not have reserved memory for the system workloads"
#[test]
fn test_static_policy_new_fails_without_reserved_memory() {
    let err = check_system_reserved(&SystemReservedMemory::new()).unwrap_err();
    assert_eq!(err, MemoryError::NoSystemReservedMemory);
    assert_eq!(
        err.to_string(),
        "[memorymanager] you should specify the system reserved memory"
    );
}

/// TestStaticPolicyNew: "should succeed, when at least one NUMA node has reserved memory"
#[test]
fn test_static_policy_new_succeeds_with_one_node_reserved() {
    let reserved: SystemReservedMemory = BTreeMap::from([
        (0, BTreeMap::new()),
        (1, BTreeMap::from([(MEMORY.to_string(), 512 * MB)])),
    ]);
    assert_eq!(check_system_reserved(&reserved), Ok(()));
}

// ---------------------------------------------------------------------------
// TestStaticPolicyStart

/// cAdvisor nodes of `memory` bytes with `pages` 1Gi hugepages each.
fn machine_info(nodes: &[(usize, u64, u64)]) -> Vec<NumaNodeMemory> {
    nodes
        .iter()
        .map(|&(id, memory, pages)| NumaNodeMemory {
            id,
            memory,
            hugepages: vec![HugePagesInfo {
                page_size_kib: PAGE_SIZE_1GB,
                num_pages: pages,
            }],
        })
        .collect()
}

/// `systemReservedMemory` of 512Mi regular memory on each node.
fn reserved_512(nodes: &[usize]) -> SystemReservedMemory {
    nodes
        .iter()
        .map(|&id| (id, BTreeMap::from([(MEMORY.to_string(), 512 * MB)])))
        .collect()
}

/// `NewPolicyStatic` + `Start` on a machine of `nodes` with `reserved`.
fn start_memory(
    nodes: &[NumaNodeMemory],
    reserved: &SystemReservedMemory,
    state: &MemoryState,
) -> Result<MemoryState, String> {
    check_system_reserved(reserved).map_err(|e| e.to_string())?;
    let default = default_machine_state(nodes, reserved).map_err(|e| e.to_string())?;
    let mut next = state.clone();
    super::start(&default, &mut next, gates().pod_level_resource_managers)
        .map(|()| next)
        .map_err(|e| e.message)
}

const DIFFERENT: &str = "[memorymanager] the expected machine state is different from the real one";

/// A 2Gi node 0 with one 1Gi hugepage (the usual `machineInfo` of the Start cases).
fn one_node_2g() -> Vec<NumaNodeMemory> {
    machine_info(&[(0, 2 * GB, 1)])
}

/// TestStaticPolicyStart: "should fail, if machine state is empty, but it has memory assignments"
#[test]
fn test_static_policy_start_empty_machine_state_with_assignments() {
    let s = state_of(
        NumaNodeMap::new(),
        assignments(vec![(
            "pod",
            "container1",
            vec![blk(&[0], MEMORY, 512 * MB)],
        )]),
    );
    // Upstream's machineInfo is nil here; any machine shows the same check.
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        "[memorymanager] machine state can not be empty when it has memory assignments"
    );
}

/// TestStaticPolicyStart: "should fill the state with default values, when the state is empty"
#[test]
fn test_static_policy_start_fills_default_state() {
    let got = start_memory(
        &machine_info(&[(0, 3 * GB, 1)]),
        &reserved_512(&[0]),
        &MemoryState::default(),
    )
    .unwrap();
    assert_assignments(&got.assignments, &Assignments::new());
    assert_machine(
        &got.machine_state,
        &ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 3 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                0,
            ),
        )]),
    );
}

/// TestStaticPolicyStart: "should fail when machine state does not have all NUMA nodes"
#[test]
fn test_static_policy_start_missing_numa_node() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                0,
            ),
        )]),
        Assignments::new(),
    );
    let nodes = machine_info(&[(0, 2 * GB, 1), (1, 2 * GB, 1)]);
    assert_eq!(
        start_memory(&nodes, &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state does not have memory resource"
#[test]
fn test_static_policy_start_missing_memory_resource() {
    let s = state_of(
        ms(vec![(0, node(&[(HP1G, t(GB, GB, 0, 0, GB))], &[0], 0))]),
        Assignments::new(),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state has wrong size of total memory"
#[test]
fn test_static_policy_start_wrong_total_memory() {
    let s = state_of(
        ms(vec![(
            0,
            node(
                &[(MEMORY, t(1536 * MB, 1536 * MB, 0, 512 * MB, 1536 * MB))],
                &[0],
                0,
            ),
        )]),
        Assignments::new(),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state has wrong size of system reserved memory"
#[test]
fn test_static_policy_start_wrong_system_reserved() {
    let s = state_of(
        ms(vec![(
            0,
            node(
                &[(MEMORY, t(1536 * MB, 1536 * MB, 0, 1024, 2 * GB))],
                &[0],
                0,
            ),
        )]),
        Assignments::new(),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state reserved memory is different from the memory of all containers memory assignments"
#[test]
fn test_static_policy_start_reserved_differs_from_assignments() {
    let s = state_of(
        ms(vec![(
            0,
            node(
                &[(MEMORY, t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB))],
                &[0],
                1,
            ),
        )]),
        assignments(vec![(
            "pod",
            "container1",
            vec![blk(&[0], MEMORY, 512 * MB)],
        )]),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state has wrong size of hugepages"
#[test]
fn test_static_policy_start_wrong_hugepages_size() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                0,
            ),
        )]),
        Assignments::new(),
    );
    // machineInfo: 2Gi of memory and two 1Gi pages: allocatable is
    // 2Gi - 512Mi - 2Gi in uint64 (wraps), so the states differ.
    assert_eq!(
        start_memory(&machine_info(&[(0, 2 * GB, 2)]), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state has wrong size of system reserved hugepages"
#[test]
fn test_static_policy_start_wrong_system_reserved_hugepages() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, GB, 2 * GB),
                &[0],
                0,
            ),
        )]),
        Assignments::new(),
    );
    assert_eq!(
        start_memory(&machine_info(&[(0, 2 * GB, 2)]), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when the hugepages reserved machine state is different from the hugepages of all containers memory assignments"
#[test]
fn test_static_policy_start_hugepages_reserved_differs_from_assignments() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(4 * GB, GB, 3 * GB, 0, 4 * GB),
                &[0],
                2,
            ),
        )]),
        assignments(vec![
            ("pod1", "container1", vec![blk(&[0], HP1G, GB)]),
            ("pod2", "container2", vec![blk(&[0], HP1G, GB)]),
        ]),
    );
    // machineInfo: 2Gi of memory and four 1Gi pages (regular memory wraps).
    assert_eq!(
        start_memory(&machine_info(&[(0, 2 * GB, 4)]), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should fail when machine state does not have NUMA node that used under the memory assignment"
#[test]
fn test_static_policy_start_assignment_on_unknown_numa_node() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                0,
            ),
        )]),
        assignments(vec![("pod1", "container1", vec![blk(&[1], MEMORY, GB)])]),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses the NUMA that does not exist"
    );
}

/// TestStaticPolicyStart: "should fail when machine state does not have resource that used under the memory assignment"
#[test]
fn test_static_policy_start_assignment_of_unknown_resource() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                2,
            ),
        )]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP2M, GB)],
        )]),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses memory resource that does not exist"
    );
}

/// TestStaticPolicyStart: "should fail when machine state number of assignments is different from the expected one"
#[test]
fn test_static_policy_start_number_of_assignments_differs() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(1536 * MB, 1536 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                1,
            ),
        )]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP1G, GB)],
        )]),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        DIFFERENT
    );
}

/// TestStaticPolicyStart: "should validate cross NUMA reserved memory vs container assignments"
#[test]
fn test_static_policy_start_cross_numa_reserved_memory() {
    let assigned = assignments(vec![
        (
            "pod1",
            "container1",
            vec![blk(&[0, 1], MEMORY, 768 * MB), blk(&[0, 1], HP1G, GB)],
        ),
        (
            "pod2",
            "container2",
            vec![blk(&[0, 1], MEMORY, 256 * MB), blk(&[0, 1], HP1G, GB)],
        ),
    ]);
    let machine = ms(vec![
        (
            0,
            node2(
                t(640 * MB, 0, 640 * MB, 512 * MB, 2176 * MB),
                t(GB, 0, GB, 0, GB),
                &[0, 1],
                4,
            ),
        ),
        (
            1,
            node2(
                t(640 * MB, 256 * MB, 384 * MB, 512 * MB, 2176 * MB),
                t(GB, 0, GB, 0, GB),
                &[0, 1],
                4,
            ),
        ),
    ]);
    let s = state_of(machine.clone(), assigned.clone());
    let got = start_memory(
        &machine_info(&[(0, 2176 * MB, 1), (1, 2176 * MB, 1)]),
        &reserved_512(&[0, 1]),
        &s,
    )
    .unwrap();
    assert_assignments(&got.assignments, &assigned);
    assert_machine(&got.machine_state, &machine);
}

/// Derived from TestStaticPolicyStart "should fail when machine state does not
/// have NUMA node that used under the memory assignment" with a machine state
/// that is otherwise right (upstream's own case also has a wrong allocatable,
/// which would fail the comparison anyway): the unknown node alone fails.
#[test]
fn derived_static_policy_start_unknown_numa_node_on_consistent_state() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(512 * MB, 512 * MB, 0, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                0,
            ),
        )]),
        assignments(vec![("pod1", "container1", vec![blk(&[1], MEMORY, GB)])]),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses the NUMA that does not exist"
    );
}

/// Derived from TestStaticPolicyStart "should fail when machine state does not
/// have resource that used under the memory assignment" with the memory block
/// reserved in the machine state: upstream still fails on `hugepages-2Mi`.
#[test]
fn derived_static_policy_start_unknown_resource_on_consistent_state() {
    let s = state_of(
        ms(vec![(
            0,
            node2(
                t(512 * MB, 0, 512 * MB, 512 * MB, 2 * GB),
                t(GB, GB, 0, 0, GB),
                &[0],
                2,
            ),
        )]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, 512 * MB), blk(&[0], HP2M, GB)],
        )]),
    );
    assert_eq!(
        start_memory(&one_node_2g(), &reserved_512(&[0]), &s).unwrap_err(),
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses memory resource that does not exist"
    );
}

// ---------------------------------------------------------------------------
// TestStaticPolicyAllocate

/// The one-node machine of the first Allocate cases: 1536Mi allocatable memory, one 1Gi page.
fn allocate_node0(mem_free: u64, hp_free: u64, cells: &[usize], n: i64) -> NumaNodeState {
    node2(
        t(1536 * MB, mem_free, 1536 * MB - mem_free, 512 * MB, 2 * GB),
        t(GB, hp_free, GB - hp_free, 0, GB),
        cells,
        n,
    )
}

/// TestStaticPolicyAllocate: "should do nothing for non-guaranteed pods"
#[test]
fn test_static_policy_allocate_non_guaranteed_pod() {
    let machine = ms(vec![(0, allocate_node0(1536 * MB, GB, &[], 0))]);
    let s = state_of(machine.clone(), Assignments::new());
    let mut pod = guaranteed_pod("pod1", "container1");
    // requirementsBurstable: limits 2Gi, requests 1Gi.
    pod.guaranteed = false;
    pod.containers[0].equivalent_guaranteed = false;
    let got = allocate(gates(), &s, &pod, "container1", no_hint()).unwrap();
    assert_assignments(&got.assignments, &Assignments::new());
    assert_machine(&got.machine_state, &machine);
}

/// TestStaticPolicyAllocate: "should do nothing once container already exists under the state file"
#[test]
fn test_static_policy_allocate_container_already_exists() {
    let machine = ms(vec![(0, allocate_node0(512 * MB, GB, &[], 0))]);
    let assigned = assignments(vec![("pod1", "container1", vec![blk(&[0], MEMORY, GB)])]);
    let s = state_of(machine.clone(), assigned.clone());
    let got = allocate(
        gates(),
        &s,
        &guaranteed_pod("pod1", "container1"),
        "container1",
        no_hint(),
    )
    .unwrap();
    assert_assignments(&got.assignments, &assigned);
    assert_machine(&got.machine_state, &machine);
}

/// TestStaticPolicyAllocate: "should calculate a default topology hint when no NUMA affinity was provided by the topology manager hint"
#[test]
fn test_static_policy_allocate_default_hint() {
    let s = state_of(
        ms(vec![(0, allocate_node0(1536 * MB, GB, &[0], 0))]),
        Assignments::new(),
    );
    let got = allocate(
        gates(),
        &s,
        &guaranteed_pod("pod1", "container1"),
        "container1",
        no_hint(),
    )
    .unwrap();
    assert_assignments(
        &got.assignments,
        &assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP1G, GB)],
        )]),
    );
    assert_machine(
        &got.machine_state,
        &ms(vec![(0, allocate_node0(512 * MB, 0, &[0], 2))]),
    );
}

/// TestStaticPolicyAllocate: "should fail when no NUMA affinity was provided under the topology manager hint and calculation of the default hint failed"
#[test]
fn test_static_policy_allocate_default_hint_fails() {
    let s = state_of(
        ms(vec![(0, allocate_node0(512 * MB, 0, &[0], 2))]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP1G, GB)],
        )]),
    );
    let err = allocate(
        gates(),
        &s,
        &guaranteed_pod("pod2", "container2"),
        "container2",
        no_hint(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    );
}

/// Nodes 1 and 2 of the preferred-hint cases: 512Mi allocatable and free each.
fn small_node(id: usize) -> NumaNodeState {
    node2(
        t(512 * MB, 512 * MB, 0, 512 * MB, 1536 * MB),
        t(GB, GB, 0, 0, GB),
        &[id],
        0,
    )
}

/// The three-node machine of the "preferred false" cases: node 0 holds 512Mi of pod1.
fn preferred_false_state() -> MemoryState {
    state_of(
        ms(vec![
            (
                0,
                node2(
                    t(GB, 512 * MB, 512 * MB, 512 * MB, 1536 * MB),
                    t(GB, GB, 0, 0, GB),
                    &[0],
                    1,
                ),
            ),
            (1, small_node(1)),
            (2, small_node(2)),
        ]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, 512 * MB)],
        )]),
    )
}

/// TestStaticPolicyAllocate: "should fail when no NUMA affinity was provided under the topology manager preferred hint and default hint has preferred false"
#[test]
fn test_static_policy_allocate_default_hint_not_preferred() {
    let err = allocate(
        gates(),
        &preferred_false_state(),
        &guaranteed_pod("pod2", "container2"),
        "container2",
        TopologyHint::any(true),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to find the default preferred hint"
    );
}

/// TestStaticPolicyAllocate: "should fail when NUMA affinity provided under the topology manager hint did not satisfy container requirements and extended hint generation failed"
#[test]
fn test_static_policy_allocate_extend_hint_fails() {
    let grouped = |_: usize| {
        node2(
            t(1536 * MB, 512 * MB, GB, 512 * MB, 2 * GB),
            t(GB, GB, 0, 0, GB),
            &[1, 2],
            1,
        )
    };
    let s = state_of(
        ms(vec![
            (
                0,
                node2(
                    t(512 * MB, 512 * MB, 0, 512 * MB, GB),
                    t(GB, GB, 0, 0, GB),
                    &[0],
                    0,
                ),
            ),
            (1, grouped(1)),
            (2, grouped(2)),
        ]),
        Assignments::new(),
    );
    let err = allocate(
        gates(),
        &s,
        &guaranteed_pod("pod1", "container1"),
        "container1",
        TopologyHint::new(mask(&[0]), false),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
    );
}

/// TestStaticPolicyAllocate: "should fail when the topology manager provided the preferred hint and extended hint has preferred false"
#[test]
fn test_static_policy_allocate_extended_hint_not_preferred() {
    let err = allocate(
        gates(),
        &preferred_false_state(),
        &guaranteed_pod("pod2", "container2"),
        "container2",
        TopologyHint::new(mask(&[1]), true),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[memorymanager] failed to find the extended preferred hint"
    );
}

/// TestStaticPolicyAllocate: "should succeed to allocate memory from multiple NUMA nodes"
#[test]
fn test_static_policy_allocate_multiple_numa_nodes() {
    let free_node = |id: usize| {
        node2(
            t(512 * MB, 512 * MB, 0, 512 * MB, GB),
            t(GB, GB, 0, 0, GB),
            &[id],
            0,
        )
    };
    let s = state_of(
        ms((0..4).map(|id| (id, free_node(id))).collect()),
        Assignments::new(),
    );
    let got = allocate(
        gates(),
        &s,
        &guaranteed_pod("pod1", "container1"),
        "container1",
        TopologyHint::any(true),
    )
    .unwrap();
    assert_assignments(
        &got.assignments,
        &assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0, 1], MEMORY, GB), blk(&[0, 1], HP1G, GB)],
        )]),
    );
    assert_machine(
        &got.machine_state,
        &ms(vec![
            (
                0,
                node2(
                    t(512 * MB, 0, 512 * MB, 512 * MB, GB),
                    t(GB, 0, GB, 0, GB),
                    &[0, 1],
                    2,
                ),
            ),
            (
                1,
                node2(
                    t(512 * MB, 0, 512 * MB, 512 * MB, GB),
                    t(GB, GB, 0, 0, GB),
                    &[0, 1],
                    2,
                ),
            ),
            (2, free_node(2)),
            (3, free_node(3)),
        ]),
    );
}

// ---------------------------------------------------------------------------
// TestStaticPolicyAllocateWithInitContainers (and ...WithRestartableInitContainers):
// every init container, then every app container, is allocated in order with
// an empty topology hint.

fn allocate_all(mut s: MemoryState, pod: &MemoryPod) -> MemoryState {
    let names: Vec<String> = pod.all_containers().map(|c| c.name.clone()).collect();
    for name in names {
        s = allocate(gates(), &s, pod, &name, no_hint())
            .unwrap_or_else(|e| panic!("allocate {name}: {e}"));
    }
    s
}

fn both(size: u64) -> Vec<Block> {
    vec![blk(&[0], MEMORY, size), blk(&[0], HP1G, size)]
}

/// Runs one init-container case: apps and inits as (name, Gi), expected block
/// sizes per container (Gi), expected reserved (Gi) of both resources.
fn run_init_case(
    machine_gb: u64,
    apps: &[(&str, u64)],
    inits: &[(&str, u64)],
    want_sizes: &[(&str, u64)],
    want_reserved_gb: u64,
    reusable: Option<MemoryState>,
) {
    let pod = pod_with_init(
        "pod1",
        apps.iter().map(|&(n, g)| c(n, g * GB, g * GB)).collect(),
        inits.iter().map(|&(n, g)| c(n, g * GB, g * GB)).collect(),
    );
    let total = machine_gb * GB;
    // Upstream: Allocatable 7680Mi of TotalMemSize 8Gi (and 10240Mi of 10Gi).
    let mem_alloc = if machine_gb == 8 {
        7680 * MB
    } else {
        10240 * MB
    };
    let start = ms(vec![(
        0,
        node2(
            t(mem_alloc, mem_alloc, 0, 512 * MB, total),
            t(total, total, 0, 0, total),
            &[0],
            0,
        ),
    )]);
    let mut s = reusable.unwrap_or_default();
    s.machine_state = start;
    let got = allocate_all(s, &pod);
    assert_assignments(
        &got.assignments,
        &assignments(
            want_sizes
                .iter()
                .map(|&(n, g)| ("pod1", n, both(g * GB)))
                .collect(),
        ),
    );
    let r = want_reserved_gb * GB;
    assert_machine(
        &got.machine_state,
        &ms(vec![(
            0,
            node2(
                t(mem_alloc, mem_alloc - r, r, 512 * MB, total),
                t(total, total - r, r, 0, total),
                &[0],
                8,
            ),
        )]),
    );
}

/// TestStaticPolicyAllocateWithInitContainers: "should re-use init containers memory, init containers requests 1Gi and 2Gi, apps containers 3Gi and 4Gi"
#[test]
fn test_static_policy_allocate_with_init_containers_1_2_then_3_4() {
    run_init_case(
        8,
        &[("container1", 3), ("container2", 4)],
        &[("initContainer1", 1), ("initContainer2", 2)],
        &[
            ("initContainer1", 0),
            ("initContainer2", 0),
            ("container1", 3),
            ("container2", 4),
        ],
        7,
        None,
    );
}

/// TestStaticPolicyAllocateWithInitContainers: "should re-use init containers memory, init containers requests 4Gi and 3Gi, apps containers 2Gi and 1Gi"
#[test]
fn test_static_policy_allocate_with_init_containers_4_3_then_2_1() {
    run_init_case(
        8,
        &[("container1", 2), ("container2", 1)],
        &[("initContainer1", 4), ("initContainer2", 3)],
        &[
            ("initContainer1", 0),
            ("initContainer2", 1),
            ("container1", 2),
            ("container2", 1),
        ],
        4,
        None,
    );
}

/// TestStaticPolicyAllocateWithInitContainers: "should re-use init containers memory, init containers requests 7Gi and 4Gi, apps containers 4Gi and 3Gi"
#[test]
fn test_static_policy_allocate_with_init_containers_7_4_then_4_3() {
    run_init_case(
        8,
        &[("container1", 4), ("container2", 3)],
        &[("initContainer1", 7), ("initContainer2", 4)],
        &[
            ("initContainer1", 0),
            ("initContainer2", 0),
            ("container1", 4),
            ("container2", 3),
        ],
        7,
        None,
    );
}

/// TestStaticPolicyAllocateWithInitContainers: "should re-use init containers memory, init containers requests 7Gi and 4Gi, apps containers 5Gi and 2Gi"
/// (the policy starts with `initContainersReusableMemory{"pod0": {}}`).
#[test]
fn test_static_policy_allocate_with_init_containers_7_4_then_5_2() {
    let mut s = MemoryState::default();
    s.init_reusable.insert("pod0".to_string(), BTreeMap::new());
    run_init_case(
        10,
        &[("container1", 5), ("container2", 2)],
        &[("initContainer1", 7), ("initContainer2", 4)],
        &[
            ("initContainer1", 0),
            ("initContainer2", 0),
            ("container1", 5),
            ("container2", 2),
        ],
        7,
        Some(s),
    );
}

/// TestStaticPolicyAllocateWithRestartableInitContainers: "should do nothing once containers already exist under the state file"
#[test]
fn test_static_policy_allocate_with_restartable_init_containers_already_exist() {
    let machine = ms(vec![(
        0,
        node2(
            t(2560 * MB, 512 * MB, 2048 * MB, 512 * MB, 3 * GB),
            t(2 * GB, 2 * GB, 0, 0, 2 * GB),
            &[],
            0,
        ),
    )]);
    let assigned = assignments(vec![
        ("pod1", "initContainer1", vec![blk(&[0], MEMORY, GB)]),
        ("pod1", "container1", vec![blk(&[0], MEMORY, GB)]),
    ]);
    let pod = pod_with_init(
        "pod1",
        vec![c("container1", GB, GB)],
        vec![sidecar("initContainer1", GB, GB)],
    );
    let got = allocate_all(state_of(machine.clone(), assigned.clone()), &pod);
    assert_assignments(&got.assignments, &assigned);
    assert_machine(&got.machine_state, &machine);
}

/// TestStaticPolicyAllocateWithRestartableInitContainers: "should not re-use restartable init containers memory"
#[test]
fn test_static_policy_allocate_with_restartable_init_containers_not_reused() {
    let pod = pod_with_init(
        "pod1",
        vec![c("container1", GB, GB)],
        vec![
            c("initContainer1", GB, GB),
            sidecar("restartableInitContainer2", 2 * GB, 2 * GB),
            c("initContainer3", 3 * GB, 3 * GB),
            sidecar("restartableInitContainer4", 4 * GB, 4 * GB),
        ],
    );
    let start = ms(vec![(
        0,
        node2(
            t(7 * GB, 7 * GB, 0, 512 * MB, 7680 * MB),
            t(7 * GB, 7 * GB, 0, 0, 7 * GB),
            &[0],
            0,
        ),
    )]);
    let got = allocate_all(state_of(start, Assignments::new()), &pod);
    assert_assignments(
        &got.assignments,
        &assignments(vec![
            ("pod1", "initContainer1", both(0)),
            ("pod1", "restartableInitContainer2", both(2 * GB)),
            ("pod1", "initContainer3", both(0)),
            ("pod1", "restartableInitContainer4", both(4 * GB)),
            ("pod1", "container1", both(GB)),
        ]),
    );
    assert_machine(
        &got.machine_state,
        &ms(vec![(
            0,
            node2(
                t(7 * GB, 0, 7 * GB, 512 * MB, 7680 * MB),
                t(7 * GB, 0, 7 * GB, 0, 7 * GB),
                &[0],
                10,
            ),
        )]),
    );
}

// ---------------------------------------------------------------------------
// TestStaticPolicyRemoveContainer: RemoveContainer(s, "pod1", "container1").

/// TestStaticPolicyRemoveContainer: "should do nothing when the container does not exist under the state"
#[test]
fn test_static_policy_remove_container_unknown() {
    let machine = ms(vec![(0, allocate_node0(1536 * MB, GB, &[], 0))]);
    let got = remove_container(
        gates(),
        &state_of(machine.clone(), Assignments::new()),
        "pod1",
        "container1",
    );
    assert_assignments(&got.assignments, &Assignments::new());
    assert_machine(&got.machine_state, &machine);
}

/// TestStaticPolicyRemoveContainer: "should delete the container assignment and update the machine state"
#[test]
fn test_static_policy_remove_container_updates_machine_state() {
    let s = state_of(
        ms(vec![(0, allocate_node0(512 * MB, 0, &[0], 2))]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP1G, GB)],
        )]),
    );
    let got = remove_container(gates(), &s, "pod1", "container1");
    assert_assignments(&got.assignments, &Assignments::new());
    assert_machine(
        &got.machine_state,
        &ms(vec![(0, allocate_node0(1536 * MB, GB, &[0], 0))]),
    );
}

/// TestStaticPolicyRemoveContainer: "should delete the cross NUMA container assignment and update the machine state"
#[test]
fn test_static_policy_remove_container_cross_numa() {
    let s = state_of(
        ms(vec![
            (
                0,
                node2(
                    t(512 * MB, 0, 512 * MB, 512 * MB, GB),
                    t(GB, 0, GB, 0, GB),
                    &[0, 1],
                    2,
                ),
            ),
            (
                1,
                node2(
                    t(512 * MB, 0, 512 * MB, 512 * MB, GB),
                    t(GB, GB, 0, 0, GB),
                    &[0, 1],
                    2,
                ),
            ),
        ]),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0, 1], MEMORY, GB), blk(&[0, 1], HP1G, GB)],
        )]),
    );
    let got = remove_container(gates(), &s, "pod1", "container1");
    assert_assignments(&got.assignments, &Assignments::new());
    let free = |id: usize| {
        node2(
            t(512 * MB, 512 * MB, 0, 512 * MB, GB),
            t(GB, GB, 0, 0, GB),
            &[id],
            0,
        )
    };
    assert_machine(&got.machine_state, &ms(vec![(0, free(0)), (1, free(1))]));
}

// ---------------------------------------------------------------------------
// TestStaticPolicyGetTopologyHints: the cases the JSON vectors leave out.

/// TestStaticPolicyGetTopologyHints: "should fail when number of existing memory assignment resources are different from resources requested by container"
#[test]
fn test_static_policy_get_topology_hints_fewer_resources_assigned() {
    let s = state_of(
        NumaNodeMap::new(),
        assignments(vec![("pod1", "container1", vec![blk(&[0], MEMORY, GB)])]),
    );
    let pod = guaranteed_pod("pod1", "container1");
    assert_eq!(get_topology_hints(gates(), &s, &pod, "container1"), None);
}

/// TestStaticPolicyGetTopologyHints: "should fail when existing memory assignment resources are different from resources requested by container"
#[test]
fn test_static_policy_get_topology_hints_other_resources_assigned() {
    let s = state_of(
        NumaNodeMap::new(),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP2M, GB)],
        )]),
    );
    let pod = guaranteed_pod("pod1", "container1");
    assert_eq!(get_topology_hints(gates(), &s, &pod, "container1"), None);
}

/// TestStaticPolicyGetTopologyHints: "should fail when existing memory assignment size is different from one requested by the container"
#[test]
fn test_static_policy_get_topology_hints_other_size_assigned() {
    let s = state_of(
        NumaNodeMap::new(),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, 512 * MB), blk(&[0], HP1G, GB)],
        )]),
    );
    let pod = guaranteed_pod("pod1", "container1");
    assert_eq!(get_topology_hints(gates(), &s, &pod, "container1"), None);
}

/// TestStaticPolicyGetTopologyHints: "should provide topology hints based on the existent memory assignment"
#[test]
fn test_static_policy_get_topology_hints_existing_assignment() {
    let s = state_of(
        NumaNodeMap::new(),
        assignments(vec![(
            "pod1",
            "container1",
            vec![blk(&[0], MEMORY, GB), blk(&[0], HP1G, GB)],
        )]),
    );
    let pod = guaranteed_pod("pod1", "container1");
    let want = BTreeMap::from([
        (
            MEMORY.to_string(),
            vec![TopologyHint::new(mask(&[0]), true)],
        ),
        (HP1G.to_string(), vec![TopologyHint::new(mask(&[0]), true)]),
    ]);
    assert_eq!(
        get_topology_hints(gates(), &s, &pod, "container1"),
        Some(want)
    );
}
