//! The static policy's `Start`: a loaded state is checked against the
//! blocks it holds ([`start`]), or, when it has no machine state yet, gets
//! the default one.
//!
//! Mirrors upstream `pkg/kubelet/cm/memorymanager/policy_static.go`
//! (`Start`, `validateState`, `updateExpectedMachineState`,
//! `areMachineStatesEqual`).

use std::collections::BTreeMap;

use super::policy_static::reserve;
use super::{Block, MemoryState, NumaNodeMap};

/// Why `Start` refuses a loaded state: the state field at fault and
/// upstream's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartError {
    /// The field of the manager state (`state.memory.machineState`, ...).
    pub field: &'static str,
    /// Upstream's error text.
    pub message: String,
}

impl StartError {
    fn new(field: &'static str, message: impl Into<String>) -> StartError {
        StartError {
            field,
            message: message.into(),
        }
    }
}

/// Upstream static policy `Start` (`validateState`) of `state`, in place,
/// on a machine whose default machine state is `default`: an empty machine
/// state becomes the default one (unless containers already hold blocks:
/// upstream looks at the container assignments only); any other must be
/// the one its blocks imply. `pod_level_managers` is the
/// `PodLevelResourceManagers` gate (see [`expected_machine_state`]).
/// Every admission starts the managers on its state, so the state is not
/// copied here.
pub fn start(
    default: &NumaNodeMap,
    state: &mut MemoryState,
    pod_level_managers: bool,
) -> Result<(), StartError> {
    const MACHINE_STATE: &str = "state.memory.machineState";
    if state.machine_state.is_empty() {
        if !state.assignments.is_empty() {
            return Err(StartError::new(
                MACHINE_STATE,
                "[memorymanager] machine state can not be empty when it has memory assignments",
            ));
        }
        state.machine_state = default.clone();
        return Ok(());
    }
    let expected = expected_machine_state(default, state, pod_level_managers)
        .map_err(|message| StartError::new("state.memory.assignments", message))?;
    if !machine_states_match(&state.machine_state, &expected) {
        return Err(StartError::new(
            MACHINE_STATE,
            "[memorymanager] the expected machine state is different from the real one",
        ));
    }
    Ok(())
}

/// Upstream `validateState`'s expected machine state: `default` with every
/// block of `state` reserved again. With `pod_level_managers` (the
/// `PodLevelResourceManagers` gate), a pod that has pod-level blocks counts
/// them once instead of its containers' (which overlap them); without it,
/// the containers' blocks count, as upstream reads the checkpoint then.
/// A block on a NUMA node or of a memory resource the machine does not
/// have is an error, in upstream's words.
pub fn expected_machine_state(
    default: &NumaNodeMap,
    state: &MemoryState,
    pod_level_managers: bool,
) -> Result<NumaNodeMap, String> {
    let mut machine = default.clone();
    for (pod_uid, containers) in &state.assignments {
        if pod_level_managers
            && let Some(blocks) = state.pod_assignments.get(pod_uid)
            && !blocks.is_empty()
        {
            reserve_expected(&mut machine, blocks, pod_uid, "")?;
            continue;
        }
        for (container, blocks) in containers {
            reserve_expected(&mut machine, blocks, pod_uid, container)?;
        }
    }
    Ok(machine)
}

/// Upstream `updateExpectedMachineState`: reserve every block, after
/// checking that each of its NUMA nodes exists and has its memory resource
/// (a checkpoint from another machine, or an edited one, names others).
fn reserve_expected(
    machine: &mut NumaNodeMap,
    blocks: &[Block],
    pod_uid: &str,
    container: &str,
) -> Result<(), String> {
    for block in blocks {
        for node in &block.numa_affinity {
            let problem = match machine.get(node) {
                None => "the memory assignment uses the NUMA that does not exist",
                Some(state) if !state.memory_map.contains_key(&block.resource) => {
                    "the memory assignment uses memory resource that does not exist"
                }
                Some(_) => continue,
            };
            return Err(format!(
                "[memorymanager] (pod: {pod_uid}, container: {container}) {problem}"
            ));
        }
        reserve(machine, &block.numa_affinity, &block.resource, block.size);
    }
    Ok(())
}

/// Whether a loaded machine state matches the one its blocks imply
/// (upstream `areMachineStatesEqual`). Blocks over several NUMA nodes are
/// compared by group sums: how such a block splits across its nodes
/// depends on the order of earlier allocations and releases.
pub(super) fn machine_states_match(got: &NumaNodeMap, want: &NumaNodeMap) -> bool {
    if got.keys().ne(want.keys()) {
        return false;
    }
    let mut groups: BTreeMap<(Vec<usize>, String), (u64, u64)> = BTreeMap::new();
    for (id, got_node) in got {
        let Some(want_node) = want.get(id) else {
            return false;
        };
        let mut got_cells = got_node.cells.clone();
        got_cells.sort_unstable();
        let mut want_cells = want_node.cells.clone();
        want_cells.sort_unstable();
        if got_node.number_of_assignments != want_node.number_of_assignments
            || got_cells != want_cells
            || got_node.memory_map.keys().ne(want_node.memory_map.keys())
        {
            return false;
        }
        for (resource, got_table) in &got_node.memory_map {
            let Some(want_table) = want_node.memory_map.get(resource) else {
                return false;
            };
            if got_table.total != want_table.total
                || got_table.system_reserved != want_table.system_reserved
                || got_table.allocatable != want_table.allocatable
                || got_table.reserved.checked_add(got_table.free) != Some(got_table.allocatable)
            {
                return false;
            }
            let sums = groups
                .entry((want_cells.clone(), resource.clone()))
                .or_insert((0, 0));
            sums.0 = sums.0.saturating_add(got_table.reserved);
            sums.1 = sums.1.saturating_add(want_table.reserved);
        }
    }
    groups.values().all(|(got, want)| got == want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_manager::{MEMORY, MemoryTable, NumaNodeState};

    const GIB: u64 = 1 << 30;

    /// [`start`] on a copy of `state`: the started state, or why not.
    fn started(
        default: &NumaNodeMap,
        state: &MemoryState,
        pod_level_managers: bool,
    ) -> Result<MemoryState, StartError> {
        let mut next = state.clone();
        start(default, &mut next, pod_level_managers).map(|()| next)
    }

    /// One NUMA node of 4Gi with `reserved` bytes reserved by `assignments` blocks.
    fn one_node(reserved: u64, assignments: i64) -> NumaNodeMap {
        BTreeMap::from([(
            0,
            NumaNodeState {
                number_of_assignments: assignments,
                memory_map: BTreeMap::from([(
                    MEMORY.to_string(),
                    MemoryTable {
                        total: 4 * GIB,
                        system_reserved: 0,
                        allocatable: 4 * GIB,
                        reserved,
                        free: 4 * GIB - reserved,
                    },
                )]),
                cells: vec![0],
            },
        )])
    }

    fn block(size: u64) -> Block {
        Block {
            numa_affinity: vec![0],
            resource: MEMORY.to_string(),
            size,
        }
    }

    /// A pod-level pod: a 2Gi pod block, and a 1Gi exclusive container
    /// block plus the 1Gi shared pool of its other container.
    fn pod_level_state(machine_state: NumaNodeMap) -> MemoryState {
        MemoryState {
            machine_state,
            assignments: BTreeMap::from([(
                "pod".to_string(),
                BTreeMap::from([
                    ("exclusive".to_string(), vec![block(GIB)]),
                    ("shared".to_string(), vec![block(GIB)]),
                ]),
            )]),
            pod_assignments: BTreeMap::from([("pod".to_string(), vec![block(2 * GIB)])]),
            init_reusable: BTreeMap::new(),
        }
    }

    #[test]
    fn pod_level_blocks_count_once_with_the_gate_and_the_containers_without_it() {
        let default = one_node(0, 0);
        // The checkpoint as the gate-on kubelet wrote it: the pod block once.
        let written = pod_level_state(one_node(2 * GIB, 1));
        assert!(started(&default, &written, true).is_ok());
        // Read without the gate, the container blocks count (two of them).
        let error = started(&default, &written, false).unwrap_err();
        assert_eq!(error.field, "state.memory.machineState");
        assert!(started(&default, &pod_level_state(one_node(2 * GIB, 2)), false).is_ok());
    }

    #[test]
    fn a_block_on_a_missing_node_or_resource_is_named() {
        let default = one_node(0, 0);
        let mut state = pod_level_state(one_node(2 * GIB, 1));
        state.pod_assignments.clear();
        state.assignments.get_mut("pod").unwrap().insert(
            "far".to_string(),
            vec![Block {
                numa_affinity: vec![3],
                resource: MEMORY.to_string(),
                size: GIB,
            }],
        );
        let error = started(&default, &state, false).unwrap_err();
        assert_eq!(error.field, "state.memory.assignments");
        assert_eq!(
            error.message,
            "[memorymanager] (pod: pod, container: far) the memory assignment uses the NUMA that does not exist"
        );
    }

    #[test]
    fn an_empty_machine_state_is_refused_only_next_to_container_blocks() {
        let default = one_node(0, 0);
        let mut state = pod_level_state(NumaNodeMap::new());
        assert_eq!(
            started(&default, &state, true).unwrap_err().message,
            "[memorymanager] machine state can not be empty when it has memory assignments"
        );
        state.assignments.clear();
        let after = started(&default, &state, true).expect("upstream checks container blocks only");
        assert_eq!(after.machine_state, default);
    }

    #[test]
    fn multi_numa_blocks_compare_by_group() {
        let table = |reserved: u64| MemoryTable {
            total: 4 * GIB,
            system_reserved: 0,
            allocatable: 4 * GIB,
            reserved,
            free: 4 * GIB - reserved,
        };
        let node = |reserved: u64| NumaNodeState {
            number_of_assignments: 1,
            memory_map: BTreeMap::from([(MEMORY.to_string(), table(reserved))]),
            cells: vec![0, 1],
        };
        let want: NumaNodeMap = BTreeMap::from([(0, node(4 * GIB)), (1, node(GIB))]);
        // The same 5Gi, split the other way after a release: still consistent.
        let got: NumaNodeMap = BTreeMap::from([(0, node(3 * GIB)), (1, node(2 * GIB))]);
        assert!(machine_states_match(&got, &want));
        let short: NumaNodeMap = BTreeMap::from([(0, node(3 * GIB)), (1, node(GIB))]);
        assert!(!machine_states_match(&short, &want));
    }
}
