//! The static Memory Manager core: per-NUMA memory accounting, topology hints
//! and exclusive memory allocation, as pure state-in, state-out functions.
//!
//! Mirrors upstream `pkg/kubelet/cm/memorymanager/policy_static.go` in its
//! KEP-5526 form (`AllocatePod`, `validatePodScopeResources`, the pod entry of
//! the state). Vocabulary, as upstream:
//! - **machine state**: per NUMA node and per resource (`memory`,
//!   `hugepages-<size>`) a [`MemoryTable`] with `total`, `system_reserved`,
//!   `allocatable` (= total - system reserved, minus all hugepages for
//!   `memory`), `reserved` (held by containers) and `free`.
//! - **cells**: the NUMA group a node belongs to. A multi-NUMA allocation ties
//!   its nodes into one group; a node with single-node allocations never joins
//!   a group, and a grouped node only serves masks equal to its group. The
//!   group dissolves when the node's `number_of_assignments` (one per block
//!   per node) drops to zero.
//! - **blocks**: what a container (or, with pod-level resources, the pod)
//!   holds: `{numa_affinity, resource, size}`.
//! - **init reuse**: memory of finished regular init containers is reused by
//!   later containers of the same pod; sidecars' memory is never reused.
//!
//! Everything a pod contributes is plain data ([`MemoryPod`]): the caller
//! computes the pod QoS, container eligibility (`IsContainerEquivalentQOSGuaranteed`)
//! and request sizes in bytes. Hints use [`crate::topology`] types; `None`
//! where upstream returns a nil map. Topology hints from the topology manager
//! come in as an argument instead of the affinity store.

use std::collections::BTreeMap;
use std::fmt;

use crate::features::FeatureGates;
use crate::quantity::{Format, Quantity};
use crate::topology::{BitMask, BitMaskError, TopologyHint, iterate_bit_masks};

/// The regular memory resource name.
pub const MEMORY: &str = "memory";
/// The admission reason of a rejected pod-level partition (`ErrorReasonEmptyPodSharedPool`).
pub const ERROR_EMPTY_POD_SHARED_POOL: &str = "EmptyPodSharedPoolError";
/// The admission reason of any other allocation failure (`ErrorReasonUnexpected`).
pub const ERROR_UNEXPECTED_ADMISSION: &str = "UnexpectedAdmissionError";

/// Whether the memory manager accounts `name`: `memory` or `hugepages-<size>`.
pub fn is_memory_resource(name: &str) -> bool {
    name == MEMORY || name.starts_with("hugepages-")
}

/// The feature gates the static policy reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodLevelGates {
    /// `PodLevelResources` (KEP-2837).
    pub pod_level_resources: bool,
    /// `PodLevelResourceManagers` (KEP-5526).
    pub pod_level_resource_managers: bool,
}

impl PodLevelGates {
    /// Both gates on: pod-level resources are managed.
    pub const fn both(self) -> bool {
        self.pod_level_resources && self.pod_level_resource_managers
    }
}

impl From<&FeatureGates> for PodLevelGates {
    fn from(gates: &FeatureGates) -> PodLevelGates {
        PodLevelGates {
            pod_level_resources: gates.pod_level_resources,
            pod_level_resource_managers: gates.pod_level_resource_managers,
        }
    }
}

/// One resource on one NUMA node, in bytes (upstream `MemoryTable`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryTable {
    /// Physical size (`total`).
    pub total: u64,
    /// Reserved for the system (`systemReserved`).
    pub system_reserved: u64,
    /// What containers may get (`allocatable`).
    pub allocatable: u64,
    /// Held by containers now (`reserved`).
    pub reserved: u64,
    /// Still free (`free`).
    pub free: u64,
}

/// One NUMA node's state (upstream `NUMANodeState`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaNodeState {
    /// Blocks placed on this node (`numberOfAssignments`); a Go int.
    pub number_of_assignments: i64,
    /// Per resource name.
    pub memory_map: BTreeMap<String, MemoryTable>,
    /// The node's group: `[id]` alone, or the nodes of its multi-NUMA group.
    pub cells: Vec<usize>,
}

/// NUMA node id to its state (upstream `NUMANodeMap`).
pub type NumaNodeMap = BTreeMap<usize, NumaNodeState>;

/// Memory held on a set of NUMA nodes (upstream `state.Block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The NUMA nodes, ascending.
    pub numa_affinity: Vec<usize>,
    /// The resource name (`type`).
    pub resource: String,
    /// Bytes.
    pub size: u64,
}

/// Reusable init-container memory of one pod: mask, resource, bytes.
pub type ReusableMemory = BTreeMap<BitMask, BTreeMap<String, u64>>;

/// Everything the static policy reads and writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryState {
    /// Per NUMA node accounting.
    pub machine_state: NumaNodeMap,
    /// Pod UID, container name, blocks (`entries`).
    pub assignments: BTreeMap<String, BTreeMap<String, Vec<Block>>>,
    /// Pod UID to the pod-level blocks (KEP-5526 `podEntries`).
    pub pod_assignments: BTreeMap<String, Vec<Block>>,
    /// Upstream `initContainersReusableMemory`: policy memory, not
    /// checkpointed; only the pod being admitted keeps an entry.
    pub init_reusable: BTreeMap<String, ReusableMemory>,
}

/// A hugepage pool of one NUMA node, as cAdvisor reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HugePagesInfo {
    /// Page size in KiB.
    pub page_size_kib: u64,
    /// Number of pages.
    pub num_pages: u64,
}

/// One NUMA node's memory, as cAdvisor reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaNodeMemory {
    /// The NUMA node id.
    pub id: usize,
    /// Total memory in bytes, hugepages included.
    pub memory: u64,
    /// Its hugepage pools.
    pub hugepages: Vec<HugePagesInfo>,
}

/// `--reserved-memory`: NUMA node id, resource name, bytes.
pub type SystemReservedMemory = BTreeMap<usize, BTreeMap<String, u64>>;

/// A container as the memory manager sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryContainer {
    /// The container name.
    pub name: String,
    /// For init containers: `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
    /// Requests in bytes; only `memory` and `hugepages-*` are read.
    pub requests: BTreeMap<String, u64>,
    /// `IsContainerEquivalentQOSGuaranteed`: cpu and memory requests set and equal to the limits.
    pub equivalent_guaranteed: bool,
}

/// A pod as the memory manager sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryPod {
    /// The pod UID.
    pub uid: String,
    /// The pod QoS class is Guaranteed.
    pub guaranteed: bool,
    /// `spec.initContainers`, in order.
    pub init_containers: Vec<MemoryContainer>,
    /// `spec.containers`, in order.
    pub containers: Vec<MemoryContainer>,
    /// `IsPodLevelResourcesSet`: `spec.resources` has a cpu, memory or hugepages request or limit.
    pub pod_level_resources_set: bool,
    /// `spec.resources.requests` in bytes; only `memory` and `hugepages-*` are read.
    pub pod_requests: BTreeMap<String, u64>,
}

impl MemoryPod {
    /// Init containers then app containers, the kubelet's admission order.
    pub fn all_containers(&self) -> impl Iterator<Item = &MemoryContainer> {
        self.init_containers.iter().chain(&self.containers)
    }

    fn container(&self, name: &str) -> Option<&MemoryContainer> {
        self.all_containers().find(|c| c.name == name)
    }

    /// Upstream `isRegularInitContainer`.
    fn is_regular_init_container(&self, name: &str) -> bool {
        self.init_containers
            .iter()
            .find(|c| c.name == name)
            .is_some_and(|c| !c.restartable)
    }
}

/// Why a pod-level partition is rejected (`validatePodScopeResources`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodScopeError {
    /// A regular init container asks for more than the pod budget minus the sidecars before it.
    InitContainerTooLarge {
        /// Its request in bytes.
        requested: u64,
        /// The resource.
        resource: String,
        /// What is left for it in bytes.
        available: u64,
    },
    /// A shared regular init container would see an empty pool.
    NoMemoryForSharedInitContainers {
        /// The resource.
        resource: String,
    },
    /// Shared long-running containers would see an empty pool.
    NoMemoryForSharedContainers {
        /// The resource.
        resource: String,
    },
}

impl fmt::Display for PodScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodScopeError::InitContainerTooLarge {
                requested,
                resource,
                available,
            } => write!(
                f,
                "pod rejected, largest exclusive init container requests {requested} of {resource}, but only {available} available"
            ),
            PodScopeError::NoMemoryForSharedInitContainers { resource } => {
                write!(
                    f,
                    "pod rejected, pod has shared init containers but no {resource} available for them"
                )
            }
            PodScopeError::NoMemoryForSharedContainers { resource } => write!(
                f,
                "pod rejected, sum of exclusive container {resource} requests equals pod budget, leaving no memory for shared containers"
            ),
        }
    }
}

impl core::error::Error for PodScopeError {}

/// Static policy errors, with upstream texts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryError {
    /// `NewPolicyStatic` without any reserved regular memory.
    NoSystemReservedMemory,
    /// No NUMA mask can hold the request.
    DefaultAffinityNotFound,
    /// The topology manager's hint was preferred, the default one is not.
    DefaultPreferredHintNotFound,
    /// No mask containing the hint can hold the request.
    ExtendHintNotFound,
    /// The topology manager's hint was preferred, the extended one is not.
    ExtendedPreferredHintNotFound,
    /// The mask mixes single-node and multi-NUMA allocations, or two groups.
    AffinityViolatesNumaAllocations,
    /// KEP-5526: the pod-level partition leaves a shared pool empty.
    EmptyPodSharedPool(PodScopeError),
    /// A NUMA node the machine state does not have (upstream would panic).
    UnknownNumaNode(usize),
    /// A NUMA node id a mask cannot hold.
    InvalidNumaAffinity(BitMaskError),
    /// System-reserved memory above the node's capacity.
    ReservedExceedsCapacity {
        /// The NUMA node.
        node: usize,
        /// The resource.
        resource: String,
    },
    /// A hugepage pool whose size does not fit 64 bits.
    SizeOverflow {
        /// The NUMA node.
        node: usize,
    },
    /// The container is not part of the pod.
    UnknownContainer {
        /// The pod UID.
        pod: String,
        /// The container name.
        container: String,
    },
    /// A pod without containers cannot get pod-level memory.
    PodWithoutContainers {
        /// The pod UID.
        pod: String,
    },
}

impl MemoryError {
    /// The admission reason the kubelet reports.
    pub fn reason(&self) -> &'static str {
        match self {
            MemoryError::EmptyPodSharedPool(_) => ERROR_EMPTY_POD_SHARED_POOL,
            _ => ERROR_UNEXPECTED_ADMISSION,
        }
    }
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryError::NoSystemReservedMemory => {
                f.write_str("[memorymanager] you should specify the system reserved memory")
            }
            MemoryError::DefaultAffinityNotFound => f.write_str(
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available",
            ),
            MemoryError::DefaultPreferredHintNotFound => {
                f.write_str("[memorymanager] failed to find the default preferred hint")
            }
            MemoryError::ExtendHintNotFound => {
                f.write_str("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
            }
            MemoryError::ExtendedPreferredHintNotFound => {
                f.write_str("[memorymanager] failed to find the extended preferred hint")
            }
            MemoryError::AffinityViolatesNumaAllocations => {
                f.write_str("[memorymanager] preferred hint violates NUMA node allocation")
            }
            MemoryError::EmptyPodSharedPool(err) => write!(f, "{err}"),
            MemoryError::UnknownNumaNode(node) => {
                write!(f, "[memorymanager] NUMA node {node} is not in the machine state")
            }
            MemoryError::InvalidNumaAffinity(err) => write!(f, "[memorymanager] {err}"),
            MemoryError::ReservedExceedsCapacity { node, resource } => {
                write!(f, "[memorymanager] system reserved {resource} exceeds the capacity of NUMA node {node}")
            }
            MemoryError::SizeOverflow { node } => {
                write!(f, "[memorymanager] hugepages size of NUMA node {node} overflows")
            }
            MemoryError::UnknownContainer { pod, container } => {
                write!(f, "[memorymanager] container {container:?} is not part of pod {pod:?}")
            }
            MemoryError::PodWithoutContainers { pod } => {
                write!(f, "[memorymanager] pod {pod:?} has no containers")
            }
        }
    }
}

impl core::error::Error for MemoryError {}

/// Upstream `HugePageResourceName`: `hugepages-` plus the page size as a
/// canonical binary quantity (`2048` KiB gives `hugepages-2Mi`).
pub fn hugepage_resource_name(page_size_bytes: u64) -> String {
    let bytes = i64::try_from(page_size_bytes).unwrap_or(i64::MAX);
    format!(
        "hugepages-{}",
        Quantity::from_value(bytes, Format::BinarySI).to_canonical_string()
    )
}

/// Upstream `NewPolicyStatic`'s check: some regular memory must be reserved.
pub fn check_system_reserved(reserved: &SystemReservedMemory) -> Result<(), MemoryError> {
    let total = reserved
        .values()
        .filter_map(|r| r.get(MEMORY))
        .fold(0u64, |a, &b| a.saturating_add(b));
    if total == 0 {
        Err(MemoryError::NoSystemReservedMemory)
    } else {
        Ok(())
    }
}

/// Upstream `getDefaultMachineState`: everything free, every node its own
/// group. Hugepages: `pages * size`; regular memory: the node's memory minus
/// its system reservation and all its hugepages.
pub fn default_machine_state(
    nodes: &[NumaNodeMemory],
    reserved: &SystemReservedMemory,
) -> Result<NumaNodeMap, MemoryError> {
    let reserved_of = |node: usize, resource: &str| {
        reserved
            .get(&node)
            .and_then(|r| r.get(resource))
            .copied()
            .unwrap_or(0)
    };
    let mut machine = NumaNodeMap::new();
    for node in nodes {
        let mut state = NumaNodeState {
            number_of_assignments: 0,
            memory_map: BTreeMap::new(),
            cells: vec![node.id],
        };
        let mut hugepages_total = 0u64;
        for pool in &node.hugepages {
            let overflow = || MemoryError::SizeOverflow { node: node.id };
            let page_bytes = pool.page_size_kib.checked_mul(1024).ok_or_else(overflow)?;
            let total = pool
                .num_pages
                .checked_mul(page_bytes)
                .ok_or_else(overflow)?;
            let resource = hugepage_resource_name(page_bytes);
            let system_reserved = reserved_of(node.id, &resource);
            let allocatable = total.checked_sub(system_reserved).ok_or_else(|| {
                MemoryError::ReservedExceedsCapacity {
                    node: node.id,
                    resource: resource.clone(),
                }
            })?;
            hugepages_total = hugepages_total.checked_add(total).ok_or_else(overflow)?;
            state
                .memory_map
                .insert(resource, table(total, system_reserved, allocatable));
        }
        let system_reserved = reserved_of(node.id, MEMORY);
        let allocatable = node
            .memory
            .checked_sub(system_reserved)
            .and_then(|m| m.checked_sub(hugepages_total))
            .ok_or_else(|| MemoryError::ReservedExceedsCapacity {
                node: node.id,
                resource: MEMORY.to_string(),
            })?;
        state.memory_map.insert(
            MEMORY.to_string(),
            table(node.memory, system_reserved, allocatable),
        );
        machine.insert(node.id, state);
    }
    Ok(machine)
}

fn table(total: u64, system_reserved: u64, allocatable: u64) -> MemoryTable {
    MemoryTable {
        total,
        system_reserved,
        allocatable,
        reserved: 0,
        free: allocatable,
    }
}

/// Upstream `getContainerRequestedResources`: the container's memory and
/// hugepages requests. With `PodLevelResourceManagers` on and pod-level
/// resources set, a container that is not equivalent-Guaranteed gets none.
pub fn get_container_requested_resources(
    gates: PodLevelGates,
    pod: &MemoryPod,
    container: &MemoryContainer,
) -> BTreeMap<String, u64> {
    if gates.pod_level_resource_managers
        && pod.pod_level_resources_set
        && !container.equivalent_guaranteed
    {
        return BTreeMap::new();
    }
    memory_requests(&container.requests)
}

fn memory_requests(requests: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    requests
        .iter()
        .filter(|(name, _)| is_memory_resource(name))
        .map(|(name, &size)| (name.clone(), size))
        .collect()
}

/// Upstream `getPodRequestedResources`. With `PodLevelResourceManagers` on and
/// pod-level resources set: the positive pod-level memory and hugepages
/// requests. Otherwise the KEP-753 rule per resource:
/// `max(max over regular init containers of (sidecars before it + its request),
/// sum(app containers) + sum(sidecars))`. Quirk kept from upstream: only
/// resources some app container requests appear in the result.
pub fn get_pod_requested_resources(gates: PodLevelGates, pod: &MemoryPod) -> BTreeMap<String, u64> {
    if gates.pod_level_resource_managers && pod.pod_level_resources_set {
        return memory_requests(&pod.pod_requests)
            .into_iter()
            .filter(|&(_, size)| size > 0)
            .collect();
    }
    let mut by_init: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_sidecars: BTreeMap<String, u64> = BTreeMap::new();
    for container in &pod.init_containers {
        for (name, size) in get_container_requested_resources(gates, pod, container) {
            let init_max = by_init.entry(name.clone()).or_insert(0);
            let sidecars = by_sidecars.entry(name).or_insert(0);
            if container.restartable {
                *sidecars = sidecars.saturating_add(size);
            } else {
                *init_max = (*init_max).max(sidecars.saturating_add(size));
            }
        }
    }
    let mut by_apps: BTreeMap<String, u64> = BTreeMap::new();
    for container in &pod.containers {
        for (name, size) in get_container_requested_resources(gates, pod, container) {
            let sum = by_apps.entry(name).or_insert(0);
            *sum = sum.saturating_add(size);
        }
    }
    by_apps
        .into_iter()
        .map(|(name, apps)| {
            let long_running = apps.saturating_add(by_sidecars.get(&name).copied().unwrap_or(0));
            let size = long_running.max(by_init.get(&name).copied().unwrap_or(0));
            (name, size)
        })
        .collect()
}

/// Upstream `validatePodScopeResources` (KEP-5526): every shared pool of the
/// pod-level partition must be non-empty, and each exclusive regular init
/// container must fit the budget left by the sidecars before it. The pool for
/// init containers saturates at zero where upstream's `uint64` would wrap.
pub fn validate_pod_scope_resources(
    gates: PodLevelGates,
    pod: &MemoryPod,
) -> Result<(), PodScopeError> {
    let total = get_pod_requested_resources(gates, pod);
    let mut has_shared_long_running = false;
    let mut exclusive_long_running: BTreeMap<String, u64> = BTreeMap::new();
    let exclusive_of =
        |sums: &BTreeMap<String, u64>, name: &str| sums.get(name).copied().unwrap_or(0);

    for container in &pod.init_containers {
        let requests = get_container_requested_resources(gates, pod, container);
        if !container.restartable {
            if requests.is_empty() {
                for (resource, &budget) in &total {
                    if exclusive_of(&exclusive_long_running, resource) >= budget {
                        return Err(PodScopeError::NoMemoryForSharedInitContainers {
                            resource: resource.clone(),
                        });
                    }
                }
            } else {
                for (resource, &budget) in &total {
                    let available =
                        budget.saturating_sub(exclusive_of(&exclusive_long_running, resource));
                    let requested = requests.get(resource).copied().unwrap_or(0);
                    if requested > available {
                        return Err(PodScopeError::InitContainerTooLarge {
                            requested,
                            resource: resource.clone(),
                            available,
                        });
                    }
                }
            }
            continue;
        }
        if requests.is_empty() {
            has_shared_long_running = true;
            continue;
        }
        add_all(&mut exclusive_long_running, &requests);
    }
    for container in &pod.containers {
        let requests = get_container_requested_resources(gates, pod, container);
        if requests.is_empty() {
            has_shared_long_running = true;
            continue;
        }
        add_all(&mut exclusive_long_running, &requests);
    }
    if has_shared_long_running {
        for (resource, &budget) in &total {
            if exclusive_of(&exclusive_long_running, resource) >= budget {
                return Err(PodScopeError::NoMemoryForSharedContainers {
                    resource: resource.clone(),
                });
            }
        }
    }
    Ok(())
}

fn add_all(sums: &mut BTreeMap<String, u64>, more: &BTreeMap<String, u64>) {
    for (name, &size) in more {
        let sum = sums.entry(name.clone()).or_insert(0);
        *sum = sum.saturating_add(size);
    }
}

fn memory_table<'a>(
    machine: &'a NumaNodeMap,
    node: usize,
    resource: &str,
) -> Option<&'a MemoryTable> {
    machine
        .get(&node)
        .and_then(|state| state.memory_map.get(resource))
}

fn groups_equal(group: &[usize], bits: &[usize]) -> bool {
    let mut sorted = group.to_vec();
    sorted.sort_unstable();
    sorted == bits
}

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

fn container_blocks<'a>(
    state: &'a MemoryState,
    pod_uid: &str,
    container: &str,
) -> Option<&'a Vec<Block>> {
    state
        .assignments
        .get(pod_uid)
        .and_then(|containers| containers.get(container))
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
fn find_best_hint(hints: &[TopologyHint]) -> TopologyHint {
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
fn reserve(machine: &mut NumaNodeMap, bits: &[usize], resource: &str, mut size: u64) {
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
/// the topology manager's `hint` (see the module docs for the rules), taking
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

/// Upstream `validateState`'s expected machine state: `default` with every
/// block of `state` reserved again, pod-level blocks once per pod (the
/// container blocks of such a pod overlap them and are skipped). Blocks on
/// unknown nodes or resources reserve nothing there.
pub fn expected_machine_state(default: &NumaNodeMap, state: &MemoryState) -> NumaNodeMap {
    let mut machine = default.clone();
    for blocks in state.pod_assignments.values() {
        for block in blocks {
            reserve(
                &mut machine,
                &block.numa_affinity,
                &block.resource,
                block.size,
            );
        }
    }
    for (pod_uid, containers) in &state.assignments {
        if state.pod_assignments.contains_key(pod_uid) {
            continue;
        }
        for block in containers.values().flatten() {
            reserve(
                &mut machine,
                &block.numa_affinity,
                &block.resource,
                block.size,
            );
        }
    }
    machine
}

/// State `Delete`: the container entry, and the pod entry once it is empty.
fn delete_container(state: &mut MemoryState, pod_uid: &str, container_name: &str) {
    if let Some(containers) = state.assignments.get_mut(pod_uid) {
        containers.remove(container_name);
        if containers.is_empty() {
            state.assignments.remove(pod_uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const GI: u64 = 1 << 30;

    fn mask(bits: &[usize]) -> BitMask {
        BitMask::new(bits).unwrap()
    }

    fn gates_on() -> PodLevelGates {
        PodLevelGates {
            pod_level_resources: true,
            pod_level_resource_managers: true,
        }
    }

    fn gates_default() -> PodLevelGates {
        PodLevelGates {
            pod_level_resources: true,
            pod_level_resource_managers: false,
        }
    }

    /// `n` NUMA nodes with 10Gi memory each (1Gi reserved) and four 1Gi hugepages.
    fn machine(n: usize) -> NumaNodeMap {
        let nodes: Vec<NumaNodeMemory> = (0..n)
            .map(|id| NumaNodeMemory {
                id,
                memory: 10 * GI,
                hugepages: vec![HugePagesInfo {
                    page_size_kib: 1 << 20,
                    num_pages: 4,
                }],
            })
            .collect();
        let reserved: SystemReservedMemory = (0..n)
            .map(|id| (id, BTreeMap::from([(MEMORY.to_string(), GI)])))
            .collect();
        check_system_reserved(&reserved).unwrap();
        default_machine_state(&nodes, &reserved).unwrap()
    }

    fn state(n: usize) -> MemoryState {
        MemoryState {
            machine_state: machine(n),
            ..MemoryState::default()
        }
    }

    fn container(name: &str, memory: u64) -> MemoryContainer {
        let requests = if memory == 0 {
            BTreeMap::new()
        } else {
            BTreeMap::from([(MEMORY.to_string(), memory)])
        };
        MemoryContainer {
            name: name.into(),
            restartable: false,
            equivalent_guaranteed: memory > 0,
            requests,
        }
    }

    fn pod(uid: &str, init: Vec<MemoryContainer>, apps: Vec<MemoryContainer>) -> MemoryPod {
        MemoryPod {
            uid: uid.into(),
            guaranteed: true,
            init_containers: init,
            containers: apps,
            ..MemoryPod::default()
        }
    }

    fn hint(bits: &[usize], preferred: bool) -> TopologyHint {
        TopologyHint::new(mask(bits), preferred)
    }

    #[test]
    fn default_machine_state_tables() {
        let m = machine(2);
        let mem = m[&0].memory_map[MEMORY];
        // 10Gi - 1Gi reserved - 4Gi hugepages.
        assert_eq!(
            mem,
            MemoryTable {
                total: 10 * GI,
                system_reserved: GI,
                allocatable: 5 * GI,
                reserved: 0,
                free: 5 * GI
            }
        );
        let huge = m[&1].memory_map["hugepages-1Gi"];
        assert_eq!(
            huge,
            MemoryTable {
                total: 4 * GI,
                system_reserved: 0,
                allocatable: 4 * GI,
                reserved: 0,
                free: 4 * GI
            }
        );
        assert_eq!(m[&1].cells, vec![1]);
        assert_eq!(hugepage_resource_name(2 << 20), "hugepages-2Mi");
        assert_eq!(
            check_system_reserved(&BTreeMap::new()),
            Err(MemoryError::NoSystemReservedMemory)
        );
        assert_eq!(
            MemoryError::NoSystemReservedMemory.to_string(),
            "[memorymanager] you should specify the system reserved memory"
        );
        let too_much = BTreeMap::from([(0, BTreeMap::from([(MEMORY.to_string(), 11 * GI)]))]);
        let nodes = [NumaNodeMemory {
            id: 0,
            memory: 10 * GI,
            hugepages: vec![],
        }];
        assert!(matches!(
            default_machine_state(&nodes, &too_much),
            Err(MemoryError::ReservedExceedsCapacity { .. })
        ));
    }

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

    fn pod_level_pod() -> MemoryPod {
        let mut sidecar = container("sidecar", GI);
        sidecar.restartable = true;
        let shared_sidecar = MemoryContainer {
            restartable: true,
            ..container("shared-sidecar", 0)
        };
        let mut p = pod(
            "pod1",
            vec![
                container("init-shared", 0),
                sidecar,
                container("init-excl", 2 * GI),
                shared_sidecar,
            ],
            vec![container("app", 2 * GI), container("app-shared", 0)],
        );
        p.pod_level_resources_set = true;
        p.pod_requests = BTreeMap::from([(MEMORY.to_string(), 4 * GI), ("cpu".to_string(), 4000)]);
        p
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
    fn pod_scope_validation() {
        let start = state(2);
        let mut p = pod_level_pod();
        // Exclusive requests use the whole budget while shared containers exist.
        p.containers[0].requests.insert(MEMORY.into(), 3 * GI);
        let err = validate_pod_scope_resources(gates_on(), &p).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pod rejected, sum of exclusive container memory requests equals pod budget, leaving no memory for shared containers"
        );
        let hints = get_pod_topology_hints(gates_on(), &start, &p).unwrap();
        assert_eq!(hints, BTreeMap::from([(MEMORY.to_string(), vec![])]));
        let err = allocate_pod(gates_on(), &start, &p, hint(&[0], true)).unwrap_err();
        assert_eq!(err.reason(), ERROR_EMPTY_POD_SHARED_POOL);

        let mut p = pod_level_pod();
        p.init_containers[2].requests.insert(MEMORY.into(), 4 * GI);
        assert_eq!(
            validate_pod_scope_resources(gates_on(), &p)
                .unwrap_err()
                .to_string(),
            format!(
                "pod rejected, largest exclusive init container requests {} of memory, but only {} available",
                4 * GI,
                3 * GI
            )
        );

        // A sidecar takes the whole budget; the next regular init container is shared.
        let mut p = pod_level_pod();
        p.init_containers[1].requests.insert(MEMORY.into(), 4 * GI);
        p.init_containers[2] = container("init-excl", 0);
        assert_eq!(
            validate_pod_scope_resources(gates_on(), &p)
                .unwrap_err()
                .to_string(),
            "pod rejected, pod has shared init containers but no memory available for them"
        );
        // Below the budget is fine: the rest is reserved but unused.
        let mut p = pod_level_pod();
        p.init_containers.clear();
        p.containers.truncate(1);
        assert!(validate_pod_scope_resources(gates_on(), &p).is_ok());
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
