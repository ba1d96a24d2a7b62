//! The static policy's allocation: the mask a hint becomes, exclusive
//! blocks for a container ([`allocate`]) or a pod ([`allocate_pod`]),
//! and their release ([`remove_container`]). `start` checks a loaded
//! state against the blocks it holds.
//!
//! Mirrors the allocation half of upstream
//! `pkg/kubelet/cm/memorymanager/policy_static.go` (`Allocate`,
//! `AllocatePod`, `RemoveContainer`, `updateMachineState`,
//! `releaseMemory`, the init-container memory reuse).

use std::collections::BTreeMap;

use super::hints::find_best_hint;
use super::pod::add_all;
use super::state::{container_blocks, delete_container, groups_equal, memory_table};
use super::{
    Block, MEMORY, MemoryError, MemoryPod, MemoryState, NumaNodeMap, PodLevelGates, ReusableMemory,
    calculate_hints, get_container_requested_resources, get_pod_requested_resources,
    validate_pod_scope_resources,
};
use crate::topology::{BitMask, TopologyHint};

/// Upstream `isAffinitySatisfyRequest`: enough free memory (without reuse) under the mask.
fn satisfies_request(
    machine: &NumaNodeMap,
    mask: BitMask,
    requested: &BTreeMap<String, u64>,
) -> bool {
    requested.iter().all(|(resource, &size)| {
        let free = mask
            .bits()
            .iter()
            .filter_map(|&node| memory_table(machine, node, resource))
            .fold(0u64, |acc, t| acc.saturating_add(t.free));
        free >= size
    })
}

/// Upstream `isAffinityViolatingNUMAAllocations`.
fn violates_numa_allocations(machine: &NumaNodeMap, mask: BitMask) -> bool {
    let bits = mask.bits();
    if bits.len() == 1 {
        return false;
    }
    bits.iter()
        .filter_map(|node| machine.get(node))
        .any(|state| {
            state.number_of_assignments != 0
                && (state.cells.len() == 1 || !groups_equal(&state.cells, &bits))
        })
}

/// Turns the topology manager's hint into the mask to allocate on: the
/// default hint when it has no mask, extended when it cannot hold the
/// request, and checked against the group rules (upstream `Allocate` and
/// `AllocatePod`, steps shared).
fn choose_hint(
    machine: &NumaNodeMap,
    reusable: Option<&ReusableMemory>,
    requested: &BTreeMap<String, u64>,
    hint: TopologyHint,
) -> Result<BitMask, MemoryError> {
    let mut best = hint;
    if best.numa_affinity.is_none() {
        let hints = calculate_hints(machine, reusable, requested);
        if hints.is_empty() {
            return Err(MemoryError::DefaultAffinityNotFound);
        }
        // Hints of every resource are the same masks; upstream reads `memory`.
        let default = find_best_hint(hints.get(MEMORY).map_or(&[][..], Vec::as_slice));
        if default.numa_affinity.is_none() {
            return Err(MemoryError::DefaultAffinityNotFound);
        }
        if !default.preferred && best.preferred {
            return Err(MemoryError::DefaultPreferredHintNotFound);
        }
        best = default;
    }
    let mut mask = best.numa_affinity.unwrap_or_default();
    if let Some(node) = mask
        .bits()
        .into_iter()
        .find(|node| !machine.contains_key(node))
    {
        return Err(MemoryError::UnknownNumaNode(node));
    }
    if !satisfies_request(machine, mask, requested) {
        let hints = calculate_hints(machine, reusable, requested);
        let candidates: Vec<TopologyHint> = hints
            .get(MEMORY)
            .into_iter()
            .flatten()
            .filter(|h| h.numa_affinity.is_some_and(|m| m.and(mask) == mask))
            .copied()
            .collect();
        if candidates.is_empty() {
            return Err(MemoryError::ExtendHintNotFound);
        }
        let extended = find_best_hint(&candidates);
        if !extended.preferred && best.preferred {
            return Err(MemoryError::ExtendedPreferredHintNotFound);
        }
        mask = extended.numa_affinity.unwrap_or(mask);
    }
    if violates_numa_allocations(machine, mask) {
        return Err(MemoryError::AffinityViolatesNumaAllocations);
    }
    Ok(mask)
}

/// Upstream `updateMachineState`: count the block on every node of the mask,
/// tie the nodes into the mask's group, and reserve `size` from the nodes'
/// free memory in ascending node order.
pub(super) fn reserve(machine: &mut NumaNodeMap, bits: &[usize], resource: &str, mut size: u64) {
    for node in bits {
        let Some(state) = machine.get_mut(node) else {
            continue;
        };
        state.number_of_assignments = state.number_of_assignments.saturating_add(1);
        state.cells = bits.to_vec();
        if size == 0 {
            continue;
        }
        let Some(table) = state.memory_map.get_mut(resource) else {
            continue;
        };
        let taken = table.free.min(size);
        table.free -= taken;
        table.reserved = table.reserved.saturating_add(taken);
        size -= taken;
    }
}

/// Upstream `releaseMemory`: the inverse of [`reserve`] for every block;
/// a node whose last block goes leaves its group.
fn release(machine: &mut NumaNodeMap, blocks: &[Block]) {
    for block in blocks {
        let mut size = block.size;
        for node in &block.numa_affinity {
            let Some(state) = machine.get_mut(node) else {
                continue;
            };
            state.number_of_assignments = state.number_of_assignments.saturating_sub(1);
            if state.number_of_assignments == 0 {
                state.cells = vec![*node];
            }
            if size == 0 {
                continue;
            }
            let Some(table) = state.memory_map.get_mut(&block.resource) else {
                continue;
            };
            let given = table.reserved.min(size);
            table.reserved -= given;
            table.free = table.free.saturating_add(given);
            size -= given;
        }
    }
}

fn reusable_of(state: &MemoryState, pod_uid: &str, mask: BitMask, resource: &str) -> u64 {
    state
        .init_reusable
        .get(pod_uid)
        .and_then(|r| r.get(&mask))
        .and_then(|r| r.get(resource))
        .copied()
        .unwrap_or(0)
}

/// Upstream `updatePodReusableMemory`: forget other pods; a regular init
/// container's blocks become reusable (max per mask and resource); any other
/// container consumes what it reuses.
fn update_pod_reusable(
    state: &mut MemoryState,
    pod: &MemoryPod,
    container_name: &str,
    blocks: &[Block],
) {
    state.init_reusable.retain(|uid, _| *uid == pod.uid);
    let regular_init = pod.is_regular_init_container(container_name);
    for block in blocks {
        // Blocks of our own state always hold valid ids; skip anything else.
        let Ok(mask) = BitMask::new(&block.numa_affinity) else {
            continue;
        };
        if regular_init {
            let slot = state
                .init_reusable
                .entry(pod.uid.clone())
                .or_default()
                .entry(mask)
                .or_default()
                .entry(block.resource.clone())
                .or_insert(0);
            *slot = (*slot).max(block.size);
        } else if let Some(slot) = state
            .init_reusable
            .get_mut(&pod.uid)
            .and_then(|r| r.get_mut(&mask))
            .and_then(|r| r.get_mut(&block.resource))
        {
            *slot = slot.saturating_sub(block.size);
        }
    }
}

/// Upstream `updateInitContainersMemoryBlocks`: shrink the blocks of earlier
/// regular init containers by what this container reused, so the blocks of
/// all containers add up to what is really reserved.
fn update_init_containers_blocks(
    state: &mut MemoryState,
    pod: &MemoryPod,
    container_name: &str,
    blocks: &[Block],
) {
    for block in blocks {
        let mut size = block.size;
        for init in &pod.init_containers {
            if init.name == container_name || size == 0 {
                break;
            }
            if init.restartable {
                continue;
            }
            let Some(init_blocks) = state
                .assignments
                .get_mut(&pod.uid)
                .and_then(|c| c.get_mut(&init.name))
            else {
                continue;
            };
            for init_block in init_blocks.iter_mut() {
                if init_block.size == 0
                    || init_block.resource != block.resource
                    || !same_affinity(&init_block.numa_affinity, &block.numa_affinity)
                {
                    continue;
                }
                let taken = init_block.size.min(size);
                init_block.size -= taken;
                size -= taken;
            }
        }
    }
}

fn same_affinity(a: &[usize], b: &[usize]) -> bool {
    matches!((BitMask::new(a), BitMask::new(b)), (Ok(x), Ok(y)) if x == y)
}

/// Upstream `Allocate` (idempotent): exclusive blocks for one container on
/// the topology manager's `hint` (see the `memory_manager` docs for the rules), taking
/// reusable init-container memory into account. Nothing happens for a
/// non-Guaranteed pod, for a pod with pod-level resources unless both gates
/// are on, or when the container already has blocks (its reuse is still
/// accounted). A container with no memory request (pod-level resources, not
/// equivalent-Guaranteed) gets nothing: it runs in the node's shared pool (KEP-5526).
pub fn allocate(
    gates: PodLevelGates,
    state: &MemoryState,
    pod: &MemoryPod,
    container_name: &str,
    hint: TopologyHint,
) -> Result<MemoryState, MemoryError> {
    let container = pod
        .container(container_name)
        .ok_or_else(|| MemoryError::UnknownContainer {
            pod: pod.uid.clone(),
            container: container_name.to_string(),
        })?;
    if !pod.guaranteed || (!gates.both() && pod.pod_level_resources_set) {
        return Ok(state.clone());
    }
    let mut next = state.clone();
    if let Some(blocks) = container_blocks(state, &pod.uid, container_name) {
        update_pod_reusable(&mut next, pod, container_name, blocks);
        return Ok(next);
    }
    let requested = get_container_requested_resources(gates, pod, container);
    if requested.is_empty() {
        return Ok(next);
    }
    let mask = choose_hint(
        &state.machine_state,
        state.init_reusable.get(&pod.uid),
        &requested,
        hint,
    )?;
    let bits = mask.bits();
    let mut blocks = Vec::with_capacity(requested.len());
    for (resource, &size) in &requested {
        blocks.push(Block {
            numa_affinity: bits.clone(),
            resource: resource.clone(),
            size,
        });
        let to_reserve = size.saturating_sub(reusable_of(&next, &pod.uid, mask, resource));
        reserve(&mut next.machine_state, &bits, resource, to_reserve);
    }
    update_pod_reusable(&mut next, pod, container_name, &blocks);
    next.assignments
        .entry(pod.uid.clone())
        .or_default()
        .insert(container_name.to_string(), blocks.clone());
    update_init_containers_blocks(&mut next, pod, container_name, &blocks);
    Ok(next)
}

/// Upstream `AllocatePod` (KEP-5526, pod scope with pod-level resources): one
/// NUMA-aligned reservation of the pod total on `hint` (chosen as in
/// [`allocate`]), partitioned without touching the machine state again:
/// - exclusive init containers and sidecars get blocks of their request
///   (sidecars' memory leaves the pool for good);
/// - a shared regular init container gets the pod total minus the sidecars so far;
/// - exclusive app containers get blocks of their request;
/// - everybody else (shared app containers and shared sidecars) gets the
///   final shared pool: the pod total minus sidecars and exclusive app containers.
///
/// A pod that already has a pod entry is returned unchanged (idempotent, as
/// `Allocate`; upstream would reserve it twice).
pub fn allocate_pod(
    gates: PodLevelGates,
    state: &MemoryState,
    pod: &MemoryPod,
    hint: TopologyHint,
) -> Result<MemoryState, MemoryError> {
    if !pod.guaranteed || state.pod_assignments.contains_key(&pod.uid) {
        return Ok(state.clone());
    }
    if pod.all_containers().next().is_none() {
        return Err(MemoryError::PodWithoutContainers {
            pod: pod.uid.clone(),
        });
    }
    let total = get_pod_requested_resources(gates, pod);
    validate_pod_scope_resources(gates, pod).map_err(MemoryError::EmptyPodSharedPool)?;
    let mask = choose_hint(
        &state.machine_state,
        state.init_reusable.get(&pod.uid),
        &total,
        hint,
    )?;
    let bits = mask.bits();
    let blocks_of = |sizes: &BTreeMap<String, u64>| -> Vec<Block> {
        sizes
            .iter()
            .filter(|&(_, &size)| size > 0)
            .map(|(resource, &size)| Block {
                numa_affinity: bits.clone(),
                resource: resource.clone(),
                size,
            })
            .collect()
    };
    let pool_minus = |taken: &BTreeMap<String, u64>| -> BTreeMap<String, u64> {
        total
            .iter()
            .map(|(name, &size)| {
                (
                    name.clone(),
                    size.saturating_sub(taken.get(name).copied().unwrap_or(0)),
                )
            })
            .collect()
    };

    let mut exclusive: BTreeMap<&str, Vec<Block>> = BTreeMap::new();
    let mut sidecars: BTreeMap<String, u64> = BTreeMap::new();
    for container in &pod.init_containers {
        let requests = get_container_requested_resources(gates, pod, container);
        if requests.is_empty() {
            if !container.restartable {
                exclusive.insert(&container.name, blocks_of(&pool_minus(&sidecars)));
            }
            continue;
        }
        exclusive.insert(&container.name, blocks_of(&requests));
        if container.restartable {
            add_all(&mut sidecars, &requests);
        }
    }
    let mut app_pool = pool_minus(&sidecars);
    for container in &pod.containers {
        let requests = get_container_requested_resources(gates, pod, container);
        if requests.is_empty() {
            continue;
        }
        for (resource, &size) in &requests {
            if let Some(left) = app_pool.get_mut(resource) {
                *left = left.saturating_sub(size);
            }
        }
        exclusive.insert(&container.name, blocks_of(&requests));
    }
    let shared_pool = blocks_of(&app_pool);

    let mut next = state.clone();
    let pod_blocks: Vec<Block> = total
        .iter()
        .map(|(resource, &size)| Block {
            numa_affinity: bits.clone(),
            resource: resource.clone(),
            size,
        })
        .collect();
    for block in &pod_blocks {
        reserve(&mut next.machine_state, &bits, &block.resource, block.size);
    }
    next.pod_assignments.insert(pod.uid.clone(), pod_blocks);
    let containers = next.assignments.entry(pod.uid.clone()).or_default();
    for container in pod.all_containers() {
        let blocks = exclusive
            .get(container.name.as_str())
            .cloned()
            .unwrap_or_else(|| shared_pool.clone());
        containers.insert(container.name.clone(), blocks);
    }
    Ok(next)
}

/// Upstream `RemoveContainer` (idempotent). With `PodLevelResourceManagers`
/// on and a pod entry: drop the container's blocks, and release the pod
/// reservation only when its last container goes. Otherwise release the
/// container's own blocks. Unknown pods and containers change nothing.
pub fn remove_container(
    gates: PodLevelGates,
    state: &MemoryState,
    pod_uid: &str,
    container_name: &str,
) -> MemoryState {
    let mut next = state.clone();
    if gates.pod_level_resource_managers
        && let Some(pod_blocks) = state.pod_assignments.get(pod_uid)
    {
        delete_container(&mut next, pod_uid, container_name);
        if !next.assignments.contains_key(pod_uid) {
            release(&mut next.machine_state, pod_blocks);
            next.pod_assignments.remove(pod_uid);
        }
        return next;
    }
    let Some(blocks) = container_blocks(state, pod_uid, container_name) else {
        return next;
    };
    delete_container(&mut next, pod_uid, container_name);
    release(&mut next.machine_state, blocks);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::memory_manager::test_support::{
        GI, container, gates_default, gates_on, hint, mask, pod, pod_level_pod, state,
    };
    use crate::memory_manager::{get_pod_topology_hints, get_topology_hints};

    #[test]
    fn allocate_remove_round_trip() {
        let start = state(2);
        let p = pod(
            "pod1",
            vec![],
            vec![container("c1", 2 * GI), container("c2", GI)],
        );
        let s1 = allocate(gates_default(), &start, &p, "c1", hint(&[1], true)).unwrap();
        assert_eq!(
            s1.assignments["pod1"]["c1"],
            vec![Block {
                numa_affinity: vec![1],
                resource: MEMORY.into(),
                size: 2 * GI
            }]
        );
        assert_eq!(s1.machine_state[&1].memory_map[MEMORY].free, 3 * GI);
        assert_eq!(s1.machine_state[&1].number_of_assignments, 1);
        // Idempotent.
        assert_eq!(
            allocate(gates_default(), &s1, &p, "c1", hint(&[0], true)).unwrap(),
            s1
        );
        // No mask from the topology manager: the default (narrowest preferred) hint.
        let s2 = allocate(gates_default(), &s1, &p, "c2", TopologyHint::default()).unwrap();
        assert_eq!(s2.assignments["pod1"]["c2"][0].numa_affinity, vec![0]);
        let back = remove_container(gates_default(), &s2, "pod1", "c2");
        assert_eq!(back, s1);
        let back = remove_container(gates_default(), &back, "pod1", "c1");
        assert_eq!(back, start);
        // Removing again changes nothing.
        assert_eq!(
            remove_container(gates_default(), &back, "pod1", "c1"),
            start
        );
    }

    #[test]
    fn multi_numa_group() {
        let start = state(3);
        let p = pod("pod1", vec![], vec![container("big", 7 * GI)]);
        let hints = get_topology_hints(gates_default(), &start, &p, "big").unwrap();
        assert_eq!(hints[MEMORY][0], hint(&[0, 1], true));
        let s1 = allocate(gates_default(), &start, &p, "big", hint(&[0, 1], true)).unwrap();
        // Spills in ascending node order: node 0 full, 2Gi on node 1.
        assert_eq!(s1.machine_state[&0].memory_map[MEMORY].free, 0);
        assert_eq!(s1.machine_state[&1].memory_map[MEMORY].reserved, 2 * GI);
        assert_eq!(s1.machine_state[&0].cells, vec![0, 1]);
        assert_eq!(s1.machine_state[&1].cells, vec![0, 1]);

        // Grouped nodes serve only their group: single-node masks 0 and 1 are gone,
        // and masks mixing the group with node 2 too.
        let q = pod("pod2", vec![], vec![container("small", GI)]);
        let hints = get_topology_hints(gates_default(), &s1, &q, "small").unwrap();
        let masks: Vec<Vec<usize>> = hints[MEMORY]
            .iter()
            .map(|h| h.numa_affinity.unwrap().bits())
            .collect();
        assert_eq!(masks, vec![vec![2], vec![0, 1]]);
        let err = allocate(gates_default(), &s1, &q, "small", hint(&[1, 2], false)).unwrap_err();
        assert_eq!(err, MemoryError::AffinityViolatesNumaAllocations);
        assert_eq!(
            err.to_string(),
            "[memorymanager] preferred hint violates NUMA node allocation"
        );
        // A second container in the group.
        let s2 = allocate(gates_default(), &s1, &q, "small", hint(&[0, 1], false)).unwrap();
        assert_eq!(s2.machine_state[&1].number_of_assignments, 2);
        // Removing both dissolves the group and restores the start state.
        let back = remove_container(gates_default(), &s2, "pod1", "big");
        assert_eq!(back.machine_state[&0].cells, vec![0, 1]);
        let back = remove_container(gates_default(), &back, "pod2", "small");
        assert_eq!(back, start);
    }

    #[test]
    fn single_node_allocation_blocks_groups() {
        let start = state(2);
        let p = pod(
            "pod1",
            vec![],
            vec![container("a", GI), container("b", 7 * GI)],
        );
        let s1 = allocate(gates_default(), &start, &p, "a", hint(&[0], true)).unwrap();
        let err = allocate(gates_default(), &s1, &p, "b", hint(&[0, 1], true)).unwrap_err();
        assert_eq!(err, MemoryError::AffinityViolatesNumaAllocations);
        // Hint generation already leaves such masks out: nothing fits.
        let hints = get_topology_hints(gates_default(), &s1, &p, "b").unwrap();
        assert!(hints.is_empty());
    }

    #[test]
    fn hint_extension_and_default_errors() {
        let start = state(2);
        let p = pod("pod1", vec![], vec![container("big", 7 * GI)]);
        // {0} cannot hold 7Gi: extended to the narrowest preferred superset.
        let s1 = allocate(gates_default(), &start, &p, "big", hint(&[0], true)).unwrap();
        assert_eq!(s1.assignments["pod1"]["big"][0].numa_affinity, vec![0, 1]);
        let huge = pod("pod2", vec![], vec![container("huge", 50 * GI)]);
        assert_eq!(
            allocate(
                gates_default(),
                &start,
                &huge,
                "huge",
                TopologyHint::default()
            ),
            Err(MemoryError::DefaultAffinityNotFound)
        );
        assert_eq!(
            allocate(gates_default(), &start, &huge, "huge", hint(&[0], false)),
            Err(MemoryError::ExtendHintNotFound)
        );
        assert!(matches!(
            allocate(gates_default(), &start, &p, "nope", hint(&[0], true)),
            Err(MemoryError::UnknownContainer { .. })
        ));
        assert_eq!(
            allocate(gates_default(), &start, &p, "big", hint(&[5], true)),
            Err(MemoryError::UnknownNumaNode(5))
        );
    }

    #[test]
    fn init_container_memory_is_reused() {
        let start = state(2);
        let p = pod(
            "pod1",
            vec![container("init", 2 * GI)],
            vec![container("app", GI)],
        );
        let s1 = allocate(gates_default(), &start, &p, "init", hint(&[0], true)).unwrap();
        assert_eq!(s1.init_reusable["pod1"][&mask(&[0])][MEMORY], 2 * GI);
        let s2 = allocate(gates_default(), &s1, &p, "app", hint(&[0], true)).unwrap();
        // Nothing more reserved; the init block shrinks so the blocks add up.
        assert_eq!(s2.machine_state[&0].memory_map[MEMORY].reserved, 2 * GI);
        assert_eq!(s2.assignments["pod1"]["init"][0].size, GI);
        assert_eq!(s2.assignments["pod1"]["app"][0].size, GI);
        assert_eq!(s2.init_reusable["pod1"][&mask(&[0])][MEMORY], GI);
        let back = remove_container(gates_default(), &s2, "pod1", "app");
        let back = remove_container(gates_default(), &back, "pod1", "init");
        assert_eq!(back.machine_state, start.machine_state);
        assert!(back.assignments.is_empty());
    }

    fn blocks(size: u64) -> Vec<Block> {
        vec![Block {
            numa_affinity: vec![1],
            resource: MEMORY.into(),
            size,
        }]
    }

    #[test]
    fn allocate_pod_partition_and_release() {
        let start = state(2);
        let p = pod_level_pod();
        assert_eq!(
            get_pod_requested_resources(gates_on(), &p),
            BTreeMap::from([(MEMORY.to_string(), 4 * GI)])
        );
        let hints = get_pod_topology_hints(gates_on(), &start, &p).unwrap();
        assert_eq!(hints[MEMORY][0], hint(&[0], true));
        let s1 = allocate_pod(gates_on(), &start, &p, hint(&[1], true)).unwrap();
        assert_eq!(s1.pod_assignments["pod1"], blocks(4 * GI));
        assert_eq!(s1.machine_state[&1].memory_map[MEMORY].reserved, 4 * GI);
        assert_eq!(s1.machine_state[&1].number_of_assignments, 1);
        let c = &s1.assignments["pod1"];
        assert_eq!(c["init-shared"], blocks(4 * GI));
        assert_eq!(c["sidecar"], blocks(GI));
        assert_eq!(c["init-excl"], blocks(2 * GI));
        assert_eq!(c["app"], blocks(2 * GI));
        // The final shared pool: 4Gi - 1Gi sidecar - 2Gi app.
        assert_eq!(c["shared-sidecar"], blocks(GI));
        assert_eq!(c["app-shared"], blocks(GI));
        // Idempotent, and container Allocate is a no-op afterwards.
        assert_eq!(
            allocate_pod(gates_on(), &s1, &p, hint(&[0], true)).unwrap(),
            s1
        );
        let after = allocate(gates_on(), &s1, &p, "app", hint(&[1], true)).unwrap();
        assert_eq!(
            (after.machine_state, after.assignments),
            (s1.machine_state.clone(), s1.assignments.clone())
        );
        // Hints for an allocated pod are regenerated from the first container
        // with blocks; the shared init container holds the whole pod total.
        let regenerated = get_pod_topology_hints(gates_on(), &s1, &p).unwrap();
        assert_eq!(regenerated[MEMORY], vec![hint(&[1], true)]);

        // The pod reservation stays until the last container goes.
        let mut s = s1.clone();
        let names: Vec<String> = p.all_containers().map(|c| c.name.clone()).collect();
        for (i, name) in names.iter().enumerate() {
            s = remove_container(gates_on(), &s, "pod1", name);
            if i + 1 < names.len() {
                assert_eq!(s.machine_state[&1].memory_map[MEMORY].reserved, 4 * GI);
            }
        }
        assert_eq!(s, start);
    }

    #[test]
    fn pod_level_gates() {
        let start = state(2);
        let p = pod_level_pod();
        // Gate off: pod-level pods get no hints and no allocation.
        assert_eq!(get_pod_topology_hints(gates_default(), &start, &p), None);
        assert_eq!(get_topology_hints(gates_default(), &start, &p, "app"), None);
        assert_eq!(
            allocate(gates_default(), &start, &p, "app", hint(&[0], true)).unwrap(),
            start
        );
        // Container scope with the gates on: eligible containers only.
        let hints = get_topology_hints(gates_on(), &start, &p, "app").unwrap();
        assert_eq!(hints[MEMORY][0], hint(&[0], true));
        assert_eq!(
            get_topology_hints(gates_on(), &start, &p, "app-shared"),
            Some(BTreeMap::new())
        );
        assert_eq!(
            allocate(gates_on(), &start, &p, "app-shared", hint(&[0], true)).unwrap(),
            start
        );
        let s1 = allocate(gates_on(), &start, &p, "app", hint(&[0], true)).unwrap();
        assert_eq!(s1.machine_state[&0].memory_map[MEMORY].reserved, 2 * GI);
        assert!(s1.pod_assignments.is_empty());
        assert_eq!(remove_container(gates_on(), &s1, "pod1", "app"), start);
    }
}
