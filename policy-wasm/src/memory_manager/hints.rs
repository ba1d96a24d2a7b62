//! The static policy's topology hints: every NUMA mask that can hold a
//! request ([`calculate_hints`]), for a container ([`get_topology_hints`])
//! or a whole pod ([`get_pod_topology_hints`]).
//!
//! Mirrors the hint half of upstream
//! `pkg/kubelet/cm/memorymanager/policy_static.go` (`GetTopologyHints`,
//! `GetPodTopologyHints`, `calculateHints`, `regenerateHints`, `findBestHint`).

use std::collections::BTreeMap;

use super::state::{container_blocks, groups_equal, memory_table};
use super::{
    Block, MemoryPod, MemoryState, MemoryTable, NumaNodeMap, PodLevelGates, ReusableMemory,
    get_container_requested_resources, get_pod_requested_resources, validate_pod_scope_resources,
};
use crate::topology::{BitMask, TopologyHint, iterate_bit_masks};

/// Upstream `calculateHints`: for every mask of the machine's NUMA nodes (in
/// [`iterate_bit_masks`] order) that has enough allocatable memory, respects
/// the group rules and has enough free (plus reusable) memory, a hint for
/// every requested resource. Preferred: the mask is as narrow as the
/// narrowest mask with enough *allocatable* memory, whatever is free now. A
/// missing node or resource table counts as zero. Resources without a
/// fitting mask are absent (an empty map is "no preference" to the topology
/// manager).
pub fn calculate_hints(
    machine: &NumaNodeMap,
    reusable: Option<&ReusableMemory>,
    requested: &BTreeMap<String, u64>,
) -> BTreeMap<String, Vec<TopologyHint>> {
    // Ids above 63 cannot be in a mask; the machine state never has them in practice.
    let nodes: Vec<usize> = machine.keys().copied().filter(|&id| id < 64).collect();
    let mut min_affinity_size = nodes.len();
    let mut fitting: Vec<BitMask> = Vec::new();
    let sum_over = |bits: &[usize], resource: &str, field: fn(&MemoryTable) -> u64| {
        bits.iter()
            .filter_map(|&node| memory_table(machine, node, resource))
            .fold(0u64, |acc, t| acc.saturating_add(field(t)))
    };
    let iterated = iterate_bit_masks(&nodes, |mask| {
        let bits = mask.bits();
        let single = bits.len() == 1;
        if requested
            .iter()
            .any(|(resource, &size)| sum_over(&bits, resource, |t| t.allocatable) < size)
        {
            return;
        }
        min_affinity_size = min_affinity_size.min(mask.count());
        let state_of = |node: usize| machine.get(&node);
        if single && state_of(bits[0]).is_some_and(|s| s.cells.len() > 1) {
            return;
        }
        if !single {
            for &node in &bits {
                let Some(state) = state_of(node) else {
                    continue;
                };
                if state.number_of_assignments > 0
                    && (state.cells.len() == 1 || !groups_equal(&state.cells, &bits))
                {
                    return;
                }
            }
        }
        for (resource, &size) in requested {
            let reuse = reusable
                .and_then(|r| r.get(&mask))
                .and_then(|r| r.get(resource))
                .copied()
                .unwrap_or(0);
            if sum_over(&bits, resource, |t| t.free).saturating_add(reuse) < size {
                return;
            }
        }
        fitting.push(mask);
    });
    debug_assert!(iterated.is_ok(), "node ids were filtered to 0..=63");
    let mut hints = BTreeMap::new();
    for resource in requested.keys() {
        if fitting.is_empty() {
            break;
        }
        let list = fitting
            .iter()
            .map(|&mask| TopologyHint::new(mask, mask.count() == min_affinity_size))
            .collect();
        hints.insert(resource.clone(), list);
    }
    hints
}

/// Upstream `regenerateHints`: the hints of an existing allocation, one
/// preferred hint per block; `None` when the blocks do not match the request
/// (count, resource or size).
fn regenerate_hints(
    blocks: &[Block],
    requested: &BTreeMap<String, u64>,
) -> Option<BTreeMap<String, Vec<TopologyHint>>> {
    let mut hints: BTreeMap<String, Vec<TopologyHint>> = requested
        .keys()
        .map(|name| (name.clone(), Vec::new()))
        .collect();
    if blocks.len() != requested.len() {
        return None;
    }
    for block in blocks {
        if requested.get(&block.resource) != Some(&block.size) {
            return None;
        }
        let mask = BitMask::new(&block.numa_affinity).ok()?;
        hints
            .get_mut(&block.resource)?
            .push(TopologyHint::new(mask, true));
    }
    Some(hints)
}

/// Upstream `GetTopologyHints` (container scope): `None` for a non-Guaranteed
/// pod, an unknown container, or a pod with pod-level resources unless both
/// gates are on; the regenerated hints of an existing allocation; else
/// [`calculate_hints`] for the container's request.
pub fn get_topology_hints(
    gates: PodLevelGates,
    state: &MemoryState,
    pod: &MemoryPod,
    container_name: &str,
) -> Option<BTreeMap<String, Vec<TopologyHint>>> {
    if !pod.guaranteed {
        return None;
    }
    let container = pod.container(container_name)?;
    let requested = get_container_requested_resources(gates, pod, container);
    if !gates.both() && pod.pod_level_resources_set {
        return None;
    }
    if let Some(blocks) = container_blocks(state, &pod.uid, container_name) {
        return regenerate_hints(blocks, &requested);
    }
    Some(calculate_hints(
        &state.machine_state,
        state.init_reusable.get(&pod.uid),
        &requested,
    ))
}

/// Upstream `GetPodTopologyHints` (pod scope). As [`get_topology_hints`] for the
/// pod total ([`get_pod_requested_resources`]); with both gates on and
/// pod-level resources set, a partition [`validate_pod_scope_resources`]
/// rejects yields an empty list per resource (unsatisfiable). No request:
/// `None`. The first container with blocks has its hints regenerated.
pub fn get_pod_topology_hints(
    gates: PodLevelGates,
    state: &MemoryState,
    pod: &MemoryPod,
) -> Option<BTreeMap<String, Vec<TopologyHint>>> {
    if !pod.guaranteed {
        return None;
    }
    let requested = get_pod_requested_resources(gates, pod);
    if !gates.both() && pod.pod_level_resources_set {
        return None;
    }
    if gates.pod_level_resource_managers
        && pod.pod_level_resources_set
        && validate_pod_scope_resources(gates, pod).is_err()
    {
        return Some(
            requested
                .keys()
                .map(|name| (name.clone(), Vec::new()))
                .collect(),
        );
    }
    if requested.is_empty() {
        return None;
    }
    for container in pod.all_containers() {
        if let Some(blocks) = container_blocks(state, &pod.uid, &container.name) {
            return regenerate_hints(blocks, &requested);
        }
    }
    Some(calculate_hints(
        &state.machine_state,
        state.init_reusable.get(&pod.uid),
        &requested,
    ))
}

/// Upstream `findBestHint`: preferred first, then narrower.
pub(super) fn find_best_hint(hints: &[TopologyHint]) -> TopologyHint {
    let mut best = TopologyHint::default();
    for hint in hints {
        let (Some(mask), Some(best_mask)) = (hint.numa_affinity, best.numa_affinity) else {
            if best.numa_affinity.is_none() {
                best = *hint;
            }
            continue;
        };
        let more_preferred = hint.preferred && !best.preferred;
        let same_but_narrower =
            hint.preferred == best.preferred && mask.is_narrower_than(best_mask);
        if more_preferred || same_but_narrower {
            best = *hint;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    use crate::memory_manager::test_support::{GI, gates_default, hint, mask, state};
    use crate::memory_manager::{MEMORY, MemoryContainer, is_memory_resource};
    use crate::quantity::Quantity;

    #[test]
    fn hints_order_and_preference() {
        let s = state(3);
        let req = BTreeMap::from([(MEMORY.to_string(), 3 * GI)]);
        let hints = calculate_hints(&s.machine_state, None, &req);
        let got: Vec<(Vec<usize>, bool)> = hints[MEMORY]
            .iter()
            .map(|h| (h.numa_affinity.unwrap().bits(), h.preferred))
            .collect();
        assert_eq!(
            got,
            vec![
                (vec![0], true),
                (vec![1], true),
                (vec![2], true),
                (vec![0, 1], false),
                (vec![0, 2], false),
                (vec![1, 2], false),
                (vec![0, 1, 2], false),
            ]
        );
        // Too big for one node: two-node masks are preferred.
        let req = BTreeMap::from([(MEMORY.to_string(), 6 * GI)]);
        let hints = calculate_hints(&s.machine_state, None, &req);
        assert_eq!(hints[MEMORY][0], hint(&[0, 1], true));
        assert_eq!(hints[MEMORY][3], hint(&[0, 1, 2], false));
        // Too big for the machine: an empty map (no preference to the topology manager).
        let req = BTreeMap::from([(MEMORY.to_string(), 16 * GI)]);
        assert!(calculate_hints(&s.machine_state, None, &req).is_empty());
    }

    // ---- Vectors: tests/vectors/k8s-managers/memory-static-policy.json ----

    fn vectors() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/vectors/k8s-managers/memory-static-policy.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|err| {
            panic!(
                "memory vectors missing at {path}: {err}; tests/vectors is part of the repository"
            )
        });
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("{path}: invalid JSON: {err}"))
    }

    fn bytes(value: &Value) -> u64 {
        let text = value.as_str().expect("quantity string");
        let quantity = Quantity::parse(text).unwrap_or_else(|err| panic!("quantity {text}: {err}"));
        u64::try_from(quantity.value()).expect("non-negative quantity")
    }

    fn byte_map(value: &Value) -> BTreeMap<String, u64> {
        value
            .as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| is_memory_resource(k))
                    .map(|(k, v)| (k.clone(), bytes(v)))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn json_container(value: &Value) -> MemoryContainer {
        let requests = byte_map(&value["requests"]);
        MemoryContainer {
            name: value["name"].as_str().expect("name").to_string(),
            restartable: value["restart_policy"].as_str() == Some("Always"),
            equivalent_guaranteed: !requests.is_empty(),
            requests,
        }
    }

    fn json_blocks(value: &Value) -> Vec<Block> {
        value
            .as_array()
            .expect("blocks")
            .iter()
            .map(|b| Block {
                numa_affinity: b["numaAffinity"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_u64().unwrap() as usize)
                    .collect(),
                resource: b["type"].as_str().unwrap().to_string(),
                size: b["size"].as_u64().unwrap(),
            })
            .collect()
    }

    fn json_hints(value: &Value) -> Option<BTreeMap<String, Vec<TopologyHint>>> {
        let map = value.as_object()?;
        Some(
            map.iter()
                .map(|(resource, list)| {
                    let hints = list
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| {
                            let bits: Vec<usize> = h["mask"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|b| b.as_u64().unwrap() as usize)
                                .collect();
                            TopologyHint::new(mask(&bits), h["preferred"].as_bool().unwrap())
                        })
                        .collect();
                    (resource.clone(), hints)
                })
                .collect(),
        )
    }

    fn run_get_topology_hints(input: &Value) -> Option<BTreeMap<String, Vec<TopologyHint>>> {
        let resources = &input["container_resources"];
        // A string describes upstream's burstable requirements: requests != limits.
        let guaranteed = resources.is_object() && resources["requests"] == resources["limits"];
        let name = input["container"].as_str().unwrap();
        let app = MemoryContainer {
            name: name.to_string(),
            restartable: false,
            requests: byte_map(&resources["requests"]),
            equivalent_guaranteed: guaranteed,
        };
        let uid = input["pod_uid"].as_str().unwrap();
        let p = MemoryPod {
            uid: uid.into(),
            guaranteed,
            containers: vec![app],
            ..MemoryPod::default()
        };
        let mut s = state(2);
        for (pod_uid, containers) in input["assignments"].as_object().unwrap() {
            for (container_name, blocks) in containers.as_object().unwrap() {
                s.assignments
                    .entry(pod_uid.clone())
                    .or_default()
                    .insert(container_name.clone(), json_blocks(blocks));
            }
        }
        get_topology_hints(gates_default(), &s, &p, name)
    }

    fn run_get_pod_requested_resources(input: &Value) -> BTreeMap<String, u64> {
        assert!(
            input["pod_level_resources"].is_null(),
            "pod-level vectors are not expected here"
        );
        let list = |key: &str| {
            input[key]
                .as_array()
                .unwrap()
                .iter()
                .map(json_container)
                .collect()
        };
        let p = MemoryPod {
            uid: "pod".into(),
            guaranteed: true,
            init_containers: list("init_containers"),
            containers: list("containers"),
            ..MemoryPod::default()
        };
        get_pod_requested_resources(gates_default(), &p)
    }

    #[test]
    fn memory_static_policy_vectors() {
        let doc = vectors();
        let cases = doc["cases"].as_array().expect("cases");
        assert_eq!(cases.len(), 8, "unexpected number of memory vectors");
        let mut failures = Vec::new();
        for case in cases {
            let name = case["name"].as_str().unwrap_or("?");
            let input = &case["input"];
            let expected = &case["expected"];
            match input["operation"].as_str() {
                Some("GetTopologyHints") => {
                    let got = run_get_topology_hints(input);
                    let want = json_hints(&expected["hints"]);
                    if got != want {
                        failures.push(format!("{name}: got {got:?}, want {want:?}"));
                    }
                }
                Some("getPodRequestedResources") => {
                    let got = run_get_pod_requested_resources(input);
                    let want: BTreeMap<String, u64> = expected["requested"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
                        .collect();
                    if got != want {
                        failures.push(format!("{name}: got {got:?}, want {want:?}"));
                    }
                }
                other => failures.push(format!("{name}: unknown operation {other:?}")),
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} vectors failed:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
