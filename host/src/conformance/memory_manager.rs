//! The memory manager's vectors (`memory-static-policy` files): upstream's
//! static memory policy functions on a machine and a state given in the
//! checkpoint's JSON names (`machineState`: `total`, `systemReserved`,
//! `allocatable`, `reserved`, `free`, `cells`; blocks: `numaAffinity`,
//! `type`, `size`), run through the component's `manager-operation`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    CaseResultText, Checked, ERROR_KEYS, NodeSettings, PolicyRuntime, as_u32, check_eq,
    check_manager_error, expected_fields, finish, input_fields, known_keys, manager_want_messages,
    node_with_gates, operation, opt_str, opt_u64, parse_q, req_str, unexpected_response,
    vector_hint, vector_input_pod, vector_mask, vector_pod, wit,
};

/// `notes`: the memory vectors' machine (upstream's test machine info is
/// irrelevant to them): two NUMA nodes of 10Gi with four 1Gi huge pages,
/// 1Gi of memory reserved on each.
fn memory_test_machine() -> (wit::NodeTopology, Vec<wit::NumaReservedMemory>) {
    let gib: u64 = 1 << 30;
    let topology = wit::NodeTopology {
        cpus: Vec::new(),
        numa_nodes: (0..2)
            .map(|id| wit::NumaNodeInfo {
                id,
                memory_bytes: 10 * gib,
                hugepages: vec![wit::HugepagePool {
                    page_size_bytes: gib,
                    pages: 4,
                }],
                distances: vec![10, 20],
            })
            .collect(),
    };
    let reserved = (0..2)
        .map(|numa_node| wit::NumaReservedMemory {
            numa_node,
            limits: vec![wit::ResourceQuantity {
                name: "memory".into(),
                quantity: "1Gi".into(),
            }],
        })
        .collect();
    (topology, reserved)
}

/// The memory vectors' state: `assignments` (pod -> container -> blocks) on
/// the given machine state (empty = the default one).
fn vector_memory_state(
    what: &str,
    assignments: &Value,
    machine_state: Vec<wit::NumaMemoryState>,
) -> Checked<wit::ManagerState> {
    let mut state = crate::empty_manager_state();
    state.memory.policy_name = "Static".into();
    state.memory.machine_state = machine_state;
    let pods = match assignments {
        Value::Null => return Ok(state),
        Value::Object(pods) => pods,
        other => return Err(format!("{what} is not a map: {other}")),
    };
    for (uid, containers) in pods {
        let mut entry = wit::PodMemoryEntries {
            pod_uid: uid.clone(),
            containers: Vec::new(),
        };
        let containers = containers
            .as_object()
            .ok_or_else(|| format!("{what}[{uid}] is not a map: {containers}"))?;
        for (name, blocks) in containers {
            let blocks = blocks
                .as_array()
                .ok_or_else(|| format!("{what}[{uid}][{name}] is not a list of blocks"))?
                .iter()
                .map(|b| {
                    let what = format!("{what}[{uid}][{name}] block");
                    known_keys(&what, b, &["numaAffinity", "type", "size"])?;
                    Ok(wit::MemoryBlock {
                        numa_affinity: vector_mask(&b["numaAffinity"])?.unwrap_or_default(),
                        resource_name: req_str(b, "type")
                            .map_err(|e| format!("{what}: {e}"))?
                            .to_string(),
                        size: b["size"]
                            .as_u64()
                            .ok_or_else(|| format!("{what}: size is not a byte count"))?,
                    })
                })
                .collect::<Checked<Vec<_>>>()?;
            entry.containers.push(wit::ContainerMemory {
                container: name.clone(),
                blocks,
            });
        }
        state.memory.entries.push(entry);
    }
    Ok(state)
}

/// `input.machine_state`: absent, or a sentence saying it is the default
/// one (`"default (irrelevant)"`), is the default machine state of the
/// notes' machine; a map is the checkpoint's `machineState`: NUMA id ->
/// `{numberOfAssignments, memoryMap: {resource: {total, systemReserved,
/// allocatable, reserved, free}}, cells}` (a missing number is 0, missing
/// `cells` the node alone), passed to the component as the state's machine
/// state. `{}` is upstream's empty `NUMANodeMap{}` (a new checkpoint).
fn vector_machine_state(what: &str, value: &Value) -> Checked<Option<Vec<wit::NumaMemoryState>>> {
    let nodes = match value {
        Value::Null => return Ok(None),
        Value::String(text) if text.trim_start().to_lowercase().starts_with("default") => {
            return Ok(None);
        }
        Value::String(text) => {
            return Err(format!(
                "{what} {text:?} is neither the default one nor a machine state map"
            ));
        }
        Value::Object(nodes) => nodes,
        other => return Err(format!("{what} is not a map: {other}")),
    };
    let mut out = Vec::new();
    for (id, node) in nodes {
        let what = format!("{what}[{id}]");
        let numa_node: u32 = id
            .parse()
            .map_err(|_| format!("{what}: the key is not a NUMA node id"))?;
        known_keys(&what, node, &["numberOfAssignments", "memoryMap", "cells"])?;
        let number_of_assignments = match &node["numberOfAssignments"] {
            Value::Null => 0,
            v => v
                .as_i64()
                .ok_or_else(|| format!("{what}.numberOfAssignments is not an integer: {v}"))?,
        };
        let mut memory_map = Vec::new();
        match &node["memoryMap"] {
            Value::Null => {}
            Value::Object(tables) => {
                for (resource, table) in tables {
                    let what = format!("{what}.memoryMap[{resource}]");
                    known_keys(
                        &what,
                        table,
                        &["total", "systemReserved", "allocatable", "reserved", "free"],
                    )?;
                    let field = |key: &str| -> Checked<u64> {
                        opt_u64(table, key)
                            .map(Option::unwrap_or_default)
                            .map_err(|e| format!("{what}.{e}"))
                    };
                    memory_map.push(wit::MemoryTable {
                        resource_name: resource.clone(),
                        total: field("total")?,
                        system_reserved: field("systemReserved")?,
                        allocatable: field("allocatable")?,
                        reserved: field("reserved")?,
                        free: field("free")?,
                    });
                }
            }
            other => return Err(format!("{what}.memoryMap is not a map: {other}")),
        }
        let cells = match &node["cells"] {
            Value::Null => vec![numa_node],
            Value::Array(ids) => ids
                .iter()
                .map(|c| as_u32(c, "cells entry"))
                .collect::<Checked<Vec<_>>>()?,
            other => return Err(format!("{what}.cells is not a list: {other}")),
        };
        out.push(wit::NumaMemoryState {
            numa_node,
            number_of_assignments,
            memory_map,
            cells,
        });
    }
    Ok(Some(out))
}

/// The page size of a `hugepages-<size>` resource, in bytes.
fn hugepage_size(resource: &str) -> Checked<Option<u64>> {
    let Some(size) = resource.strip_prefix("hugepages-") else {
        return Ok(None);
    };
    let q = parse_q(size)?;
    u64::try_from(q.value())
        .ok()
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| format!("bad huge page size in {resource}"))
}

/// `input.machine_info`: cAdvisor's NUMA nodes as `NewPolicyStatic` gets
/// them, `[{"id", "memory", "hugepages": [{"page_size", "num_pages"}]}]`
/// (`node_id` as cAdvisor's JSON spells it; page sizes in KiB, as cAdvisor
/// gives them).
fn vector_machine_info(value: &Value) -> Checked<Vec<wit::NumaNodeInfo>> {
    let nodes = value
        .as_array()
        .ok_or_else(|| format!("input.machine_info is not a list of NUMA nodes: {value}"))?;
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let what = format!("input.machine_info[{i}]");
            known_keys(&what, node, &["id", "node_id", "memory", "hugepages"])?;
            let id = match (&node["id"], &node["node_id"]) {
                (Value::Null, Value::Null) => return Err(format!("{what} has no id")),
                (id, Value::Null) | (Value::Null, id) => as_u32(id, &format!("{what}.id"))?,
                _ => return Err(format!("{what} has both id and node_id")),
            };
            let memory_bytes = opt_u64(node, "memory")
                .map_err(|e| format!("{what}.{e}"))?
                .ok_or_else(|| format!("{what} has no memory"))?;
            let hugepages = match &node["hugepages"] {
                Value::Null => Vec::new(),
                Value::Array(pools) => pools
                    .iter()
                    .enumerate()
                    .map(|(j, pool)| {
                        let what = format!("{what}.hugepages[{j}]");
                        known_keys(&what, pool, &["page_size", "num_pages"])?;
                        let number = |key: &str| -> Checked<u64> {
                            opt_u64(pool, key)
                                .map_err(|e| format!("{what}.{e}"))?
                                .ok_or_else(|| format!("{what} has no {key}"))
                        };
                        let page_size_kib = number("page_size")?;
                        Ok(wit::HugepagePool {
                            page_size_bytes: page_size_kib.checked_mul(1024).ok_or_else(|| {
                                format!("{what}.page_size {page_size_kib} KiB overflows")
                            })?,
                            pages: number("num_pages")?,
                        })
                    })
                    .collect::<Checked<Vec<_>>>()?,
                other => return Err(format!("{what}.hugepages is not a list: {other}")),
            };
            Ok(wit::NumaNodeInfo {
                id,
                memory_bytes,
                hugepages,
                distances: Vec::new(),
            })
        })
        .collect()
}

/// `input.system_reserved`: upstream's `systemReservedMemory`, NUMA id ->
/// resource -> bytes, as the node's `reservedMemory`.
fn vector_system_reserved(value: &Value) -> Checked<Vec<wit::NumaReservedMemory>> {
    let nodes = value
        .as_object()
        .ok_or_else(|| format!("input.system_reserved is not a map: {value}"))?;
    nodes
        .iter()
        .map(|(id, resources)| {
            let what = format!("input.system_reserved[{id}]");
            let numa_node: u32 = id
                .parse()
                .map_err(|_| format!("{what}: the key is not a NUMA node id"))?;
            let resources = resources
                .as_object()
                .ok_or_else(|| format!("{what} is not a map: {resources}"))?;
            let limits = resources
                .iter()
                .map(|(name, bytes)| {
                    let bytes = bytes
                        .as_u64()
                        .ok_or_else(|| format!("{what}[{name}] is not a byte count: {bytes}"))?;
                    Ok(wit::ResourceQuantity {
                        name: name.clone(),
                        quantity: bytes.to_string(),
                    })
                })
                .collect::<Checked<Vec<_>>>()?;
            Ok(wit::NumaReservedMemory { numa_node, limits })
        })
        .collect()
}

/// The machine a machine state describes: each node's memory and huge
/// pages from its tables' `total`, the reservations from `systemReserved`.
fn machine_of_state(
    states: &[wit::NumaMemoryState],
) -> Checked<(Vec<wit::NumaNodeInfo>, Vec<wit::NumaReservedMemory>)> {
    let mut numa_nodes = Vec::new();
    let mut reserved = Vec::new();
    for state in states {
        let mut hugepages = Vec::new();
        let mut limits = Vec::new();
        for table in &state.memory_map {
            if let Some(page) = hugepage_size(&table.resource_name)? {
                hugepages.push(wit::HugepagePool {
                    page_size_bytes: page,
                    pages: table.total / page,
                });
            }
            if table.system_reserved > 0 {
                limits.push(wit::ResourceQuantity {
                    name: table.resource_name.clone(),
                    quantity: table.system_reserved.to_string(),
                });
            }
        }
        // cAdvisor's node memory is the memory table's total (upstream's
        // `TotalMemSize: node.Memory`), hugepages included.
        let memory_bytes = state
            .memory_map
            .iter()
            .find(|t| t.resource_name == "memory")
            .map_or(0, |t| t.total);
        numa_nodes.push(wit::NumaNodeInfo {
            id: state.numa_node,
            memory_bytes,
            hugepages,
            distances: Vec::new(),
        });
        if !limits.is_empty() {
            reserved.push(wit::NumaReservedMemory {
                numa_node: state.numa_node,
                limits,
            });
        }
    }
    Ok((numa_nodes, reserved))
}

/// The node a memory case runs on, the Static memory policy with the
/// case's feature gates:
/// - `machine_info` (and `system_reserved`, none when absent) when the
///   case gives them, as upstream's `NewPolicyStatic` gets them;
/// - else, for a case with its own machine state, the machine that state
///   describes ([`machine_of_state`]; `system_reserved` still wins);
/// - else the notes' machine and its reservations.
fn memory_node(
    input: &Value,
    machine_state: Option<&[wit::NumaMemoryState]>,
) -> Checked<(wit::NodeTopology, NodeSettings)> {
    let given_reserved = match &input["system_reserved"] {
        Value::Null => None,
        value => Some(vector_system_reserved(value)?),
    };
    let (numa_nodes, reserved) = match (&input["machine_info"], machine_state) {
        (Value::Null, Some(states)) if !states.is_empty() => machine_of_state(states)?,
        (Value::Null, _) => {
            let (topology, reserved) = memory_test_machine();
            (topology.numa_nodes, reserved)
        }
        (info, _) => (vector_machine_info(info)?, Vec::new()),
    };
    let node = NodeSettings {
        memory_manager_policy: Some(wit::MemoryManagerPolicy::Static),
        reserved_memory: given_reserved.unwrap_or(reserved),
        ..node_with_gates(input)?
    };
    let topology = wit::NodeTopology {
        cpus: Vec::new(),
        numa_nodes,
    };
    Ok((topology, node))
}

/// `container_resources` given by the name of upstream's test fixture (the
/// notes define `requirementsGuaranteed`; `requirementsBurstable` has
/// requests below limits).
fn named_requirements(name: &str) -> Checked<Value> {
    if name.starts_with("requirementsGuaranteed") {
        let list = serde_json::json!({"cpu": "1000Mi", "memory": "1Gi", "hugepages-1Gi": "1Gi"});
        Ok(serde_json::json!({"requests": list.clone(), "limits": list}))
    } else if name.starts_with("requirementsBurstable") {
        Ok(serde_json::json!({
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "2", "memory": "2Gi"},
        }))
    } else {
        Err(format!(
            "input.container_resources names unknown requirements {name:?}"
        ))
    }
}

/// Whether a case of a function both static policies have (`Start`,
/// `Allocate`, `RemoveContainer`, `GetTopologyHints`, ...) is the memory
/// manager's: its file is a `memory-static-policy` one, or it carries the
/// memory state's fields (the CPU files carry `state` and `topology`).
pub(super) fn is_memory_case(file: &Value, input: &Value) -> bool {
    file["area"]
        .as_str()
        .is_some_and(|area| area.starts_with("memory"))
        || [
            "machine_state",
            "machine_info",
            "system_reserved",
            "assignments",
            "container_resources",
        ]
        .iter()
        .any(|key| input.get(key).is_some())
}

/// The memory operations this adapter runs, and the input fields each reads
/// besides the machine's (`machine_info`, `system_reserved`,
/// `machine_state`, `assignments`, the gates).
fn operation_fields(function: &str) -> Option<&'static [&'static str]> {
    Some(match function {
        "Start" => &[],
        "Allocate" => &[
            "pod",
            "pod_uid",
            "container",
            "container_resources",
            "topology_hint",
        ],
        "Allocate all (init then app)" | "AllocatePod" => &["pod", "topology_hint"],
        "RemoveContainer" => &["pod_uid", "container"],
        "GetTopologyHints" => &["pod", "pod_uid", "container", "container_resources"],
        // `container` only names the one container of `container_resources`.
        "GetPodTopologyHints" => &["pod", "pod_uid", "container", "container_resources"],
        _ => return None,
    })
}

const MACHINE_FIELDS: [&str; 6] = [
    "machine_info",
    "system_reserved",
    "machine_state",
    "assignments",
    "featureGates",
    "feature_gates",
];

/// The case's pod: `input.pod` (the CPU files' vector pod), or one
/// container of `container_resources` (named upstream fixture or
/// `{requests, limits}`) called `container` in pod `pod_uid`, as the
/// shared `GetTopologyHints` cases give it.
fn memory_pod(input: &Value) -> Checked<(String, wit::Pod)> {
    if input.get("pod").is_some() {
        if input.get("container_resources").is_some() {
            return Err("input gives both pod and container_resources".into());
        }
        let (uid, pod) = vector_input_pod(input)?;
        if let Some(given) = opt_str(input, "pod_uid")?
            && given != uid
        {
            return Err(format!(
                "input.pod_uid {given:?} is not input.pod.uid {uid:?}"
            ));
        }
        return Ok((uid, pod));
    }
    let uid = req_str(input, "pod_uid")?;
    let name = req_str(input, "container")?;
    let resources = match &input["container_resources"] {
        Value::String(text) => named_requirements(text)?,
        v @ Value::Object(_) => {
            known_keys("input.container_resources", v, &["requests", "limits"])?;
            v.clone()
        }
        other => return Err(format!("input.container_resources: unexpected {other}")),
    };
    let container = serde_json::json!({
        "name": name,
        "requests": resources["requests"],
        "limits": resources["limits"],
    });
    Ok((
        uid.to_string(),
        vector_pod(&serde_json::json!({"containers": [container]}), uid)?,
    ))
}

/// A memory block as compared: NUMA nodes in their order (Go's
/// `reflect.DeepEqual` on the `[]int`), then resource and size.
type BlockKey = (Vec<u32>, String, u64);

/// Assignments as compared: pod -> container -> blocks in any order
/// (upstream's `areMemoryBlocksEqual`); a pod without containers is no
/// pod (upstream's state deletes it with its last container).
fn assignment_key(
    state: &wit::MemoryManagerState,
) -> BTreeMap<String, BTreeMap<String, Vec<BlockKey>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<BlockKey>>> = BTreeMap::new();
    for pod in &state.entries {
        for container in &pod.containers {
            let mut blocks: Vec<BlockKey> = container
                .blocks
                .iter()
                .map(|b| (b.numa_affinity.clone(), b.resource_name.clone(), b.size))
                .collect();
            blocks.sort();
            out.entry(pod.pod_uid.clone())
                .or_default()
                .insert(container.container.clone(), blocks);
        }
    }
    out
}

/// Upstream's `areContainerMemoryAssignmentsEqual` (policy_static_test.go),
/// `got` being the state after the call: the same number of pods, and every
/// container of `got` in `want` with the same blocks in any order. A
/// container `want` has and `got` lacks is not noticed, as upstream's.
fn assignments_equal(
    got: &wit::MemoryManagerState,
    want: &wit::MemoryManagerState,
) -> CaseResultText {
    let (got, want) = (assignment_key(got), assignment_key(want));
    if got.len() != want.len() {
        return Err(format!(
            "assignments: expected pods {:?}, got {:?}",
            want.keys().collect::<Vec<_>>(),
            got.keys().collect::<Vec<_>>()
        ));
    }
    for (uid, containers) in &got {
        let Some(wanted) = want.get(uid) else {
            return Err(format!("assignments: pod {uid} is not expected"));
        };
        for (name, blocks) in containers {
            match wanted.get(name) {
                None => return Err(format!("assignments: {uid}/{name} is not expected")),
                Some(want) if want != blocks => {
                    return Err(format!(
                        "assignments of {uid}/{name}: expected {want:?}, got {blocks:?}"
                    ));
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Upstream's `areMachineStatesEqual` (policy_static.go), `got` being the
/// state after the call: the same NUMA nodes; per node the same number of
/// assignments, the same group (`cells`, as a set) and the same resources;
/// per resource the same total, system reservation and allocatable; and
/// `free` and `reserved` equal as sums over the node's group (a group's
/// memory may sit on any of its nodes).
fn machine_states_equal(
    got: &[wit::NumaMemoryState],
    want: &[wit::NumaMemoryState],
) -> CaseResultText {
    let index = |states: &[wit::NumaMemoryState]| -> BTreeMap<u32, wit::NumaMemoryState> {
        states.iter().map(|s| (s.numa_node, s.clone())).collect()
    };
    let (got, want) = (index(got), index(want));
    let nodes = |m: &BTreeMap<u32, wit::NumaMemoryState>| m.keys().copied().collect::<Vec<_>>();
    if nodes(&got) != nodes(&want) {
        return Err(format!(
            "machine state: expected NUMA nodes {:?}, got {:?}",
            nodes(&want),
            nodes(&got)
        ));
    }
    let table = |m: &BTreeMap<u32, wit::NumaMemoryState>, node: u32, resource: &str| {
        m.get(&node)
            .and_then(|s| s.memory_map.iter().find(|t| t.resource_name == resource))
            .cloned()
    };
    for (id, node) in &got {
        let other = &want[id];
        let group = |s: &wit::NumaMemoryState| {
            let mut cells = s.cells.clone();
            cells.sort_unstable();
            cells
        };
        if node.number_of_assignments != other.number_of_assignments || group(node) != group(other)
        {
            return Err(format!(
                "machine state of NUMA node {id}: expected {} assignments on cells {:?}, got {} on {:?}",
                other.number_of_assignments,
                group(other),
                node.number_of_assignments,
                group(node)
            ));
        }
        fn resources(s: &wit::NumaMemoryState) -> Vec<&str> {
            let mut names: Vec<&str> = s
                .memory_map
                .iter()
                .map(|t| t.resource_name.as_str())
                .collect();
            names.sort_unstable();
            names
        }
        if resources(node) != resources(other) {
            return Err(format!(
                "machine state of NUMA node {id}: expected resources {:?}, got {:?}",
                resources(other),
                resources(node)
            ));
        }
        for mine in &node.memory_map {
            let resource = mine.resource_name.as_str();
            let theirs = table(&want, *id, resource).expect("same resources");
            let fixed = |t: &wit::MemoryTable| (t.total, t.system_reserved, t.allocatable);
            if fixed(mine) != fixed(&theirs) {
                return Err(format!(
                    "machine state of NUMA node {id} {resource}: expected total, systemReserved, allocatable {:?}, got {:?}",
                    fixed(&theirs),
                    fixed(mine)
                ));
            }
            let sums = |m: &BTreeMap<u32, wit::NumaMemoryState>| -> Checked<(u128, u128)> {
                node.cells.iter().try_fold((0u128, 0u128), |(free, reserved), cell| {
                    let t = table(m, *cell, resource).ok_or_else(|| {
                        format!("machine state: NUMA node {id}'s group names node {cell}, which has no {resource}")
                    })?;
                    Ok((free + u128::from(t.free), reserved + u128::from(t.reserved)))
                })
            };
            let (got_sums, want_sums) = (sums(&got)?, sums(&want)?);
            if got_sums != want_sums {
                return Err(format!(
                    "machine state of NUMA node {id} {resource}: expected free, reserved over cells {:?} {want_sums:?}, got {got_sums:?}",
                    node.cells
                ));
            }
        }
    }
    Ok(())
}

/// `expected.hints`: `null` is a nil map; a resource's `null` list is a nil
/// list. Hint lists are compared in order (upstream's `IterateBitMasks`
/// order, as the file notes say).
pub(super) type HintsKey = Option<BTreeMap<String, Option<Vec<wit::TopologyHint>>>>;

/// `expected.hints` as a [`HintsKey`] (missing is an error).
pub(super) fn expected_hints(expected: &Value) -> Checked<HintsKey> {
    let Some(value) = expected.get("hints") else {
        return Err("expected.hints is missing".into());
    };
    match value {
        Value::Null => Ok(None),
        Value::Object(map) => map
            .iter()
            .map(|(resource, list)| {
                let list = match list {
                    Value::Null => None,
                    Value::Array(list) => Some(
                        list.iter()
                            .map(vector_hint)
                            .collect::<Checked<Vec<_>>>()
                            .map_err(|e| format!("expected.hints[{resource}]: {e}"))?,
                    ),
                    other => {
                        return Err(format!("expected.hints[{resource}] is not a list: {other}"));
                    }
                };
                Ok((resource.clone(), list))
            })
            .collect::<Checked<BTreeMap<_, _>>>()
            .map(Some),
        other => Err(format!("expected.hints: unexpected {other}")),
    }
}

/// A provider's answered hints as a [`HintsKey`] (resource -> hint list).
pub(super) fn hints_key(hints: wit::ProviderHints) -> HintsKey {
    hints.map(|list| {
        list.into_iter()
            .map(|r| (r.resource_name, r.hints))
            .collect()
    })
}

/// A static memory policy function (`Start`, `Allocate`, `Allocate all
/// (init then app)`, `AllocatePod`, `RemoveContainer`, `GetTopologyHints`,
/// `GetPodTopologyHints`) on the case's machine and state. `expected`
/// carries the error (exact Go text), and the assignments and machine
/// state after the call, or the hints; what it omits is not compared.
pub(super) fn memory_policy_case(
    policy: &PolicyRuntime,
    function: &str,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    let Some(own) = operation_fields(function) else {
        return Err(format!(
            "the memory manager adapter has no function `{function}`"
        ));
    };
    let known: Vec<&str> = MACHINE_FIELDS.iter().chain(own).copied().collect();
    input_fields(input, &known)?;
    let hints_op = function.ends_with("TopologyHints");
    let mut expected_known = if hints_op {
        vec!["hints"]
    } else {
        vec!["assignments", "machine_state"]
    };
    expected_known.extend(ERROR_KEYS);
    expected_fields(expected, &expected_known)?;

    let machine_state = vector_machine_state("input.machine_state", &input["machine_state"])?;
    let (topology, node) = memory_node(input, machine_state.as_deref())?;
    let state = vector_memory_state(
        "input.assignments",
        &input["assignments"],
        machine_state.unwrap_or_default(),
    )?;
    let memory = wit::ResourceManager::Memory;
    let request = match function {
        "Start" => wit::ManagerRequest::Start(state),
        "RemoveContainer" => wit::ManagerRequest::RemoveContainer(wit::RemoveRequest {
            manager: memory,
            state,
            pod_uid: req_str(input, "pod_uid")?.to_string(),
            container: req_str(input, "container")?.to_string(),
        }),
        "Allocate" => {
            let (_, pod) = memory_pod(input)?;
            wit::ManagerRequest::Allocate(wit::ContainerRequest {
                manager: memory,
                state,
                pod,
                container: req_str(input, "container")?.to_string(),
                hint: vector_hint(&input["topology_hint"])?,
            })
        }
        "GetTopologyHints" | "GetPodTopologyHints" => {
            if function == "GetPodTopologyHints"
                && input.get("pod").is_some()
                && input.get("container").is_some()
            {
                return Err(
                    "input.container is not read by GetPodTopologyHints of input.pod (the whole pod)"
                        .into(),
                );
            }
            let (_, pod) = memory_pod(input)?;
            let container = if function == "GetTopologyHints" {
                Some(req_str(input, "container")?.to_string())
            } else {
                None
            };
            wit::ManagerRequest::TopologyHints(wit::HintsRequest {
                manager: memory,
                state,
                pod,
                container,
            })
        }
        _ => {
            let (_, pod) = vector_input_pod(input)?;
            let request = wit::PodRequest {
                manager: memory,
                state,
                pod,
                hint: vector_hint(&input["topology_hint"])?,
            };
            if function == "AllocatePod" {
                wit::ManagerRequest::AllocatePod(request)
            } else {
                wit::ManagerRequest::AllocateContainers(request)
            }
        }
    };
    let want_error = manager_want_messages(expected)?;
    let mut problems = Vec::new();
    let after = match operation(policy, &request, &topology, &node)? {
        Err(e) => {
            check_manager_error(&mut problems, &want_error, Some(&e));
            // Upstream's tests stop at the error: nothing else is compared,
            // so a case that expects more cannot pass here.
            for key in ["assignments", "machine_state", "hints"] {
                if expected.get(key).is_some() {
                    problems.push(format!("expected.{key} given, but the call failed"));
                }
            }
            return finish(problems);
        }
        Ok(response) => {
            check_manager_error(&mut problems, &want_error, None);
            response
        }
    };
    let state = match after {
        wit::ManagerResponse::Hints(hints) if hints_op => {
            check_eq(
                &mut problems,
                "hints",
                hints_key(hints),
                expected_hints(expected)?,
            );
            return finish(problems);
        }
        wit::ManagerResponse::State(state) if !hints_op => state.memory,
        wit::ManagerResponse::Allocated(allocation) if !hints_op => allocation.state.memory,
        other => return Err(unexpected_response(&other)),
    };
    if let Some(want) = expected.get("assignments") {
        let want = vector_memory_state("expected.assignments", want, Vec::new())?;
        assignments_equal(&state, &want.memory).unwrap_or_else(|p| problems.push(p));
    }
    if let Some(want) = expected.get("machine_state") {
        let want = vector_machine_state("expected.machine_state", want)?
            .ok_or("expected.machine_state is not a machine state map")?;
        machine_states_equal(&state.machine_state, &want).unwrap_or_else(|p| problems.push(p));
    }
    finish(problems)
}

/// Memory manager `getPodRequestedResources` (the pod's fields at the top of `input`).
pub(super) fn memory_requested_case(
    policy: &PolicyRuntime,
    input: &Value,
    expected: &Value,
) -> CaseResultText {
    input_fields(
        input,
        &[
            "containers",
            "init_containers",
            "pod_level_resources",
            "featureGates",
            "feature_gates",
        ],
    )?;
    expected_fields(expected, &["requested"])?;
    let pod = vector_pod(input, "pod")?;
    let (topology, node) = memory_node(input, None)?;
    let request = wit::ManagerRequest::PodRequested(wit::PodRequestedRequest {
        manager: wit::ResourceManager::Memory,
        pod,
    });
    let got: BTreeMap<String, u64> = match operation(policy, &request, &topology, &node)? {
        Ok(wit::ManagerResponse::Requested(list)) => list
            .into_iter()
            .map(|r| (r.resource_name, r.amount))
            .collect(),
        Ok(other) => return Err(unexpected_response(&other)),
        Err(e) => return Err(format!("unexpected error {:?}", e.message)),
    };
    let want: BTreeMap<String, u64> = expected["requested"]
        .as_object()
        .ok_or("expected.requested is not a map")?
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.as_u64().ok_or("not a byte count")?)))
        .collect::<Checked<_>>()?;
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want:?}, got {got:?}"))
    }
}
