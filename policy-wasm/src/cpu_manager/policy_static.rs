//! The static CPU manager policy (`pkg/kubelet/cm/cpumanager/policy_static.go`).
//!
//! The policy gives containers of Guaranteed pods with an integral CPU
//! request exclusive CPUs. It keeps these CPU sets:
//!
//! - SHARED: the default CPU set in the state. Burstable, BestEffort and
//!   non-integral Guaranteed containers run here. It starts as every CPU
//!   (every CPU but the reserved ones with `strict-cpu-reservation`) and
//!   shrinks and grows as exclusive allocations come and go.
//! - RESERVED: CPUs never handed out exclusively, `--reserved-cpus` or, when
//!   that is empty, `numReservedCPUs` CPUs taken by topology from the
//!   lowest cores. RESERVED PHYSICAL adds their core siblings
//!   (`full-pcpus-only` counts free cores without them).
//! - ASSIGNABLE: SHARED − RESERVED; exclusive CPUs come from here, plus the
//!   CPUs of the pod's finished standard init containers (`cpusToReuse`).
//! - EXCLUSIVE ALLOCATIONS: container assignments in the state.
//!
//! With KEP-5526 (gates `PodLevelResources` and `PodLevelResourceManagers`)
//! and the topology manager's pod scope, a pod with pod-level resources gets
//! one CPU set sized by `spec.resources.requests.cpu` ([`StaticPolicy::allocate_pod`]).
//! Containers that are individually Guaranteed with integral CPUs get
//! exclusive slices of it; all others share the rest, the pod shared pool.
//! In the container scope ([`StaticPolicy::allocate_container_scope`]) only
//! individually Guaranteed containers get exclusive CPUs and the others run
//! in the node's shared pool.
//!
//! Every function takes the state and returns a new one; on error the input
//! state is the state to keep (upstream may leave partial changes behind).
//! `Start`'s consistency checks are numbered as upstream's `validateState`:
//! (1) the reserved CPUs are in the shared pool (none of them with
//! `strict-cpu-reservation`), because kube/system-reserved may have grown or
//! the file been edited; (2) no assignment overlaps the shared pool; (3) the
//! shared pool and all assignments cover exactly the machine's CPUs, which
//! fails when CPUs went offline while the kubelet was down.

use std::collections::BTreeMap;
use std::fmt;

use crate::cpu_manager::CpuManagerError;
use crate::cpu_manager::cpu_assignment::{
    take_by_topology_numa_distributed, take_by_topology_numa_packed,
};
use crate::cpu_manager::pod::{ContainerSpec, PodSpec, QosClass, is_integral_cpu};
use crate::cpu_manager::policy_options::StaticPolicyOptions;
use crate::cpu_manager::state::CpuManagerState;
use crate::cpu_topology::{CpuTopology, mask_bits};
use crate::cpuset::CpuSet;
use crate::features::FeatureGates;

/// The static policy name (`PolicyStatic`).
pub const POLICY_STATIC: &str = "static";

/// The admission reason of an [`SmtAlignmentError`] (`ErrorSMTAlignment`).
pub const ERROR_SMT_ALIGNMENT: &str = "SMTAlignmentError";

/// The admission reason of an empty pod shared pool (`admission.ErrorEmptyPodSharedPool`).
pub const ERROR_EMPTY_POD_SHARED_POOL: &str = "EmptyPodSharedPoolError";

/// A request that `full-pcpus-only` cannot place on whole cores (upstream `SMTAlignmentError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmtAlignmentError {
    /// The CPUs requested.
    pub requested_cpus: usize,
    /// Threads per physical core.
    pub cpus_per_core: usize,
    /// Free CPUs outside the reserved cores (when `caused_by_physical_cpus`).
    pub available_physical_cpus: usize,
    /// True: not enough free cores; false: the request is not a multiple of `cpus_per_core`.
    pub caused_by_physical_cpus: bool,
}

impl fmt::Display for SmtAlignmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.caused_by_physical_cpus {
            write!(
                f,
                "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {}, requested CPUs = {}, CPUs per core = {}",
                self.available_physical_cpus, self.requested_cpus, self.cpus_per_core
            )
        } else {
            write!(
                f,
                "SMT Alignment Error: requested {} cpus not multiple cpus per core = {}",
                self.requested_cpus, self.cpus_per_core
            )
        }
    }
}

impl std::error::Error for SmtAlignmentError {}

/// How isolated a container's CPUs are (KEP-5526 `ResourceIsolationLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResourceIsolationLevel {
    /// No CPU set of its own: the node's shared pool (`host`); CFS quota stays.
    Host,
    /// The pod shared pool of a pod-scope pod (`pod`); CFS quota stays.
    Pod,
    /// Exclusive CPUs (`container`); CFS quota may be disabled.
    Container,
}

impl ResourceIsolationLevel {
    /// The upstream spelling: `host`, `pod` or `container`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceIsolationLevel::Host => "host",
            ResourceIsolationLevel::Pod => "pod",
            ResourceIsolationLevel::Container => "container",
        }
    }
}

/// The static policy: the topology, the options and the reserved CPUs (upstream `staticPolicy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticPolicy {
    topology: CpuTopology,
    options: StaticPolicyOptions,
    reserved: CpuSet,
    reserved_physical: CpuSet,
    cpu_group_size: usize,
}

impl StaticPolicy {
    /// `NewStaticPolicy`: validate the options and pick the reserved CPUs.
    ///
    /// `reserved_cpus` is `--reserved-cpus`; when empty, `num_reserved_cpus`
    /// CPUs are taken by topology from all CPUs. `topology_manager_policy` is
    /// the topology manager policy name (`align-by-socket` excludes `single-numa-node`).
    pub fn new(
        topology: CpuTopology,
        num_reserved_cpus: u64,
        reserved_cpus: &CpuSet,
        options: StaticPolicyOptions,
        topology_manager_policy: &str,
    ) -> Result<StaticPolicy, CpuManagerError> {
        options.check_combinations()?;
        options.validate(&topology, topology_manager_policy)?;
        let cpu_group_size = topology.cpus_per_core();
        let mut policy = StaticPolicy {
            topology,
            options,
            reserved: CpuSet::new(),
            reserved_physical: CpuSet::new(),
            cpu_group_size,
        };
        let reserved = if reserved_cpus.is_empty() {
            // Upstream ignores the error here; the size check below reports it.
            // (A count past usize, on wasm32, is more than any machine has.)
            usize::try_from(num_reserved_cpus)
                .ok()
                .and_then(|n| policy.take_by_topology(&policy.topology.cpus(), n).ok())
                .unwrap_or_default()
        } else {
            reserved_cpus.clone()
        };
        if reserved.len() as u64 != num_reserved_cpus {
            return Err(CpuManagerError::UnableToReserve {
                reserved,
                num_reserved_cpus,
            });
        }
        let mut reserved_physical = CpuSet::new();
        for cpu in reserved.iter() {
            let core = policy
                .topology
                .cpu_core_id(cpu)
                .ok_or(CpuManagerError::UnknownReservedCpu { cpu })?;
            let siblings = CpuSet::from_vec(policy.topology.core_cpus(core).to_vec());
            reserved_physical = reserved_physical.union(&siblings);
        }
        policy.reserved = reserved;
        policy.reserved_physical = reserved_physical;
        Ok(policy)
    }

    /// The policy name, `static`.
    pub fn name(&self) -> &'static str {
        POLICY_STATIC
    }

    /// The machine topology.
    pub fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    /// The options in force.
    pub fn options(&self) -> &StaticPolicyOptions {
        &self.options
    }

    /// The reserved CPUs.
    pub fn reserved_cpus(&self) -> &CpuSet {
        &self.reserved
    }

    /// The reserved CPUs and their core siblings.
    pub fn reserved_physical_cpus(&self) -> &CpuSet {
        &self.reserved_physical
    }

    /// `GetAllocatableCPUs`: every CPU but the reserved ones.
    pub fn allocatable_cpus(&self) -> CpuSet {
        self.topology.cpus().difference(&self.reserved)
    }

    /// `GetAvailableCPUs`: the shared pool minus the reserved CPUs.
    pub fn available_cpus(&self, state: &CpuManagerState) -> CpuSet {
        state.default_cpuset.difference(&self.reserved)
    }

    /// `Start`: check a loaded state, or initialise an empty one; returns the state to use.
    pub fn start(
        &self,
        state: &CpuManagerState,
        gates: &FeatureGates,
    ) -> Result<CpuManagerState, CpuManagerError> {
        let mut all_cpus = self.topology.cpus();
        if self.options.strict_cpu_reservation {
            all_cpus = all_cpus.difference(&self.reserved);
        }
        let default = &state.default_cpuset;
        if default.is_empty() {
            if !state.assignments.is_empty() {
                return Err(CpuManagerError::DefaultCpuSetEmpty);
            }
            let mut next = state.clone();
            next.default_cpuset = all_cpus;
            return Ok(next);
        }
        // 1. The reserved CPUs must be in the shared pool (none of them with strict reservation).
        let reserved_in_default = self.reserved.intersection(default);
        if self.options.strict_cpu_reservation {
            if !reserved_in_default.is_empty() {
                return Err(CpuManagerError::StrictReservedInDefault {
                    overlap: reserved_in_default,
                    default: default.clone(),
                });
            }
        } else if reserved_in_default != self.reserved {
            return Err(CpuManagerError::ReservedNotInDefault {
                reserved: self.reserved.clone(),
                default: default.clone(),
            });
        }
        // 2. No assignment may overlap the shared pool.
        for (pod, containers) in &state.assignments {
            for (container, cpus) in containers {
                if !cpus.is_disjoint(default) {
                    return Err(CpuManagerError::AssignmentOverlapsDefault {
                        pod: pod.clone(),
                        container: container.clone(),
                        cpus: cpus.clone(),
                        default: default.clone(),
                    });
                }
            }
        }
        // 3. The state must account for exactly the CPUs the machine has.
        let mut known = default.clone();
        for cpus in state
            .assignments
            .values()
            .flat_map(|containers| containers.values())
        {
            known = known.union(cpus);
        }
        if gates.pod_level_resource_managers {
            for cpus in state.pod_assignments.values() {
                known = known.union(cpus);
            }
        }
        if known != all_cpus {
            return Err(CpuManagerError::CpusMismatch {
                all: all_cpus,
                known,
            });
        }
        Ok(state.clone())
    }

    /// `takeByTopology`: pick `num_cpus` of `available` with the configured algorithm and strategy.
    pub fn take_by_topology(
        &self,
        available: &CpuSet,
        num_cpus: usize,
    ) -> Result<CpuSet, CpuManagerError> {
        let strategy = self.options.cpu_sorting_strategy();
        let taken = if self.options.distribute_cpus_across_numa {
            let group = if self.options.full_physical_cpus_only {
                self.cpu_group_size
            } else {
                1
            };
            take_by_topology_numa_distributed(&self.topology, available, num_cpus, group, strategy)
        } else {
            take_by_topology_numa_packed(
                &self.topology,
                available,
                num_cpus,
                strategy,
                self.options.prefer_align_by_uncore_cache,
            )
        };
        taken.map_err(CpuManagerError::from)
    }

    /// `enforceSMTAlignment`: with `full-pcpus-only`, whole free cores must fit the request.
    /// `pre_allocated` CPUs (the container's own, on re-admission) count as available (kubernetes#129079).
    fn enforce_smt_alignment(
        &self,
        state: &CpuManagerState,
        num_cpus: usize,
        pre_allocated: usize,
    ) -> Result<(), SmtAlignmentError> {
        if !self.options.full_physical_cpus_only {
            return Ok(());
        }
        let per_core = self.cpu_group_size.max(1);
        if !num_cpus.is_multiple_of(per_core) {
            return Err(SmtAlignmentError {
                requested_cpus: num_cpus,
                cpus_per_core: per_core,
                available_physical_cpus: 0,
                caused_by_physical_cpus: false,
            });
        }
        let available_physical = state
            .default_cpuset
            .difference(&self.reserved_physical)
            .len()
            .saturating_add(pre_allocated);
        if num_cpus > available_physical {
            return Err(SmtAlignmentError {
                requested_cpus: num_cpus,
                cpus_per_core: per_core,
                available_physical_cpus: available_physical,
                caused_by_physical_cpus: true,
            });
        }
        Ok(())
    }

    /// The allocatable CPUs inside the NUMA nodes of `mask` (their sockets with `align-by-socket`).
    fn aligned_cpus(&self, mask: u64, allocatable: &CpuSet) -> CpuSet {
        let unit = if self.options.align_by_socket {
            let details = self.topology.details();
            details.cpus_in_sockets(&details.sockets_in_numa_nodes(&mask_bits(mask)))
        } else {
            // The NUMA nodes' CPU lists, instead of a scan of every CPU.
            self.topology.cpus_in_numa_mask(mask)
        };
        allocatable.intersection(&unit)
    }

    /// `allocateCPUs`: take `num_cpus` from the assignable CPUs plus `reusable`, from the NUMA
    /// nodes of `numa_affinity` first; returns the CPUs and the state without them in the shared pool.
    pub fn allocate_cpus(
        &self,
        state: &CpuManagerState,
        num_cpus: usize,
        numa_affinity: Option<u64>,
        reusable: &CpuSet,
    ) -> Result<(CpuSet, CpuManagerState), CpuManagerError> {
        let allocatable = self.available_cpus(state).union(reusable);
        let mut result = CpuSet::new();
        if let Some(mask) = numa_affinity {
            let aligned = self.aligned_cpus(mask, &allocatable);
            let count = num_cpus.min(aligned.len());
            result = self.take_by_topology(&aligned, count)?;
        }
        let remaining = self.take_by_topology(
            &allocatable.difference(&result),
            num_cpus.saturating_sub(result.len()),
        )?;
        result = result.union(&remaining);
        let mut next = state.clone();
        next.default_cpuset = next.default_cpuset.difference(&result);
        Ok((result, next))
    }

    /// `guaranteedCPUs`: the exclusive CPUs a container asks for (0 = shared pool).
    pub fn guaranteed_cpus(
        &self,
        pod: &PodSpec,
        container: &ContainerSpec,
        gates: &FeatureGates,
    ) -> usize {
        self.guaranteed_cpus_with(pod, pod.qos_class(gates), container, gates)
    }

    fn guaranteed_cpus_with(
        &self,
        pod: &PodSpec,
        qos: QosClass,
        container: &ContainerSpec,
        gates: &FeatureGates,
    ) -> usize {
        if qos != QosClass::Guaranteed {
            return 0;
        }
        if gates.pod_level_resource_managers
            && pod.is_pod_level_resources_set()
            && !container.is_equivalent_guaranteed()
        {
            return 0;
        }
        whole_cpus(container.cpu_request_millis.unwrap_or(0))
    }

    /// `podGuaranteedCPUs`: the CPUs of the whole pod (pod-level request, else the sidecar-aware container sum).
    pub fn pod_guaranteed_cpus(&self, pod: &PodSpec, gates: &FeatureGates) -> usize {
        self.pod_guaranteed_cpus_with(pod, pod.qos_class(gates), gates)
    }

    fn pod_guaranteed_cpus_with(
        &self,
        pod: &PodSpec,
        qos: QosClass,
        gates: &FeatureGates,
    ) -> usize {
        if gates.pod_level_resource_managers && pod.is_pod_level_resources_set() {
            if qos != QosClass::Guaranteed {
                return 0;
            }
            return pod.pod_level.cpu_request_millis.map_or(0, whole_cpus);
        }
        let mut by_init = 0usize;
        let mut by_sidecars = 0usize;
        for container in pod
            .init_containers
            .iter()
            .filter(|c| c.cpu_request_millis.is_some())
        {
            let cpus = self.guaranteed_cpus_with(pod, qos, container, gates);
            if container.is_restartable() {
                by_sidecars = by_sidecars.saturating_add(cpus);
            } else {
                by_init = by_init.max(by_sidecars.saturating_add(cpus));
            }
        }
        let by_apps = pod
            .containers
            .iter()
            .filter(|c| c.cpu_request_millis.is_some())
            .fold(0usize, |sum, c| {
                sum.saturating_add(self.guaranteed_cpus_with(pod, qos, c, gates))
            });
        by_init.max(by_apps.saturating_add(by_sidecars))
    }

    /// `validatePodScopeResources`: reject pod-scope pods whose shared containers would get no CPUs.
    pub fn validate_pod_scope_resources(
        &self,
        pod: &PodSpec,
        gates: &FeatureGates,
    ) -> Result<(), String> {
        let qos = pod.qos_class(gates);
        let total = to_i128(self.pod_guaranteed_cpus_with(pod, qos, gates));
        let mut long_running = 0i128;
        let mut shared_long_running = false;
        for container in &pod.init_containers {
            let cpus = to_i128(self.guaranteed_cpus_with(pod, qos, container, gates));
            if !container.is_restartable() {
                if cpus > 0 {
                    let pool = total - long_running;
                    if cpus > pool {
                        return Err(format!(
                            "pod rejected, largest exclusive init container requests {cpus} cpus, but only {pool} available"
                        ));
                    }
                } else if long_running >= total {
                    return Err("pod rejected, pod has shared init containers but no cpus available for them".to_string());
                }
                continue;
            }
            if cpus == 0 {
                shared_long_running = true;
            } else {
                long_running = long_running.saturating_add(cpus);
            }
        }
        for container in &pod.containers {
            let cpus = to_i128(self.guaranteed_cpus_with(pod, qos, container, gates));
            if cpus == 0 {
                shared_long_running = true;
            } else {
                long_running = long_running.saturating_add(cpus);
            }
        }
        if shared_long_running && long_running >= total {
            return Err("pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers".to_string());
        }
        Ok(())
    }

    /// `updateCPUsToReuse`: keep only this pod's entry; add a standard init container's CPUs, remove anyone else's.
    fn update_cpus_to_reuse(
        &self,
        state: &mut CpuManagerState,
        pod: &PodSpec,
        container: &ContainerSpec,
        cpus: &CpuSet,
    ) {
        state.cpus_to_reuse.retain(|uid, _| *uid == pod.uid);
        let entry = state.cpus_to_reuse.entry(pod.uid.clone()).or_default();
        let standard_init = pod
            .init_containers
            .iter()
            .any(|c| c.name == container.name && !c.is_restartable());
        *entry = if standard_init {
            entry.union(cpus)
        } else {
            entry.difference(cpus)
        };
    }

    /// Upstream `Allocate` on a working copy of the state.
    fn allocate_into(
        &self,
        state: &mut CpuManagerState,
        pod: &PodSpec,
        qos: QosClass,
        container: &ContainerSpec,
        numa_affinity: Option<u64>,
        gates: &FeatureGates,
    ) -> Result<(), CpuManagerError> {
        let num_cpus = self.guaranteed_cpus_with(pod, qos, container, gates);
        if num_cpus == 0 {
            return Ok(());
        }
        if (!gates.pod_level_resource_managers || !gates.pod_level_resources)
            && pod.is_pod_level_resources_set()
        {
            // Pod-level resources without the KEP-5526 gates: no exclusive CPUs.
            return Ok(());
        }
        let existing = state.cpuset(&pod.uid, &container.name).cloned();
        self.enforce_smt_alignment(state, num_cpus, existing.as_ref().map_or(0, CpuSet::len))?;
        if let Some(cpus) = existing {
            self.update_cpus_to_reuse(state, pod, container, &cpus);
            return Ok(());
        }
        let reusable = state
            .cpus_to_reuse
            .get(&pod.uid)
            .cloned()
            .unwrap_or_default();
        let (cpus, next) = self.allocate_cpus(state, num_cpus, numa_affinity, &reusable)?;
        *state = next;
        state.set_cpuset(&pod.uid, &container.name, cpus.clone());
        self.update_cpus_to_reuse(state, pod, container, &cpus);
        Ok(())
    }

    /// `Allocate`: exclusive CPUs for one container if it qualifies; idempotent.
    ///
    /// `numa_affinity` is the topology manager hint for the container: a bitmask
    /// of NUMA node ids (bit n = node n), `None` for no preference.
    pub fn allocate(
        &self,
        state: &CpuManagerState,
        pod: &PodSpec,
        container_name: &str,
        numa_affinity: Option<u64>,
        gates: &FeatureGates,
    ) -> Result<CpuManagerState, CpuManagerError> {
        pod.validate()
            .map_err(|message| CpuManagerError::InvalidPod { message })?;
        let container =
            pod.container(container_name)
                .ok_or_else(|| CpuManagerError::ContainerNotFound {
                    pod: pod.uid.clone(),
                    container: container_name.to_string(),
                })?;
        let mut next = state.clone();
        self.allocate_into(
            &mut next,
            pod,
            pod.qos_class(gates),
            container,
            numa_affinity,
            gates,
        )?;
        Ok(next)
    }

    /// Topology manager container scope: `Allocate` for every init container, then every app container.
    ///
    /// The same `numa_affinity` is used for every container; callers with a
    /// hint per container call [`StaticPolicy::allocate`] for each. Fails as a
    /// whole: on error no container of the pod is allocated.
    pub fn allocate_container_scope(
        &self,
        state: &CpuManagerState,
        pod: &PodSpec,
        numa_affinity: Option<u64>,
        gates: &FeatureGates,
    ) -> Result<CpuManagerState, CpuManagerError> {
        pod.validate()
            .map_err(|message| CpuManagerError::InvalidPod { message })?;
        let qos = pod.qos_class(gates);
        let mut next = state.clone();
        for container in pod.all_containers() {
            self.allocate_into(&mut next, pod, qos, container, numa_affinity, gates)?;
        }
        Ok(next)
    }

    /// Topology manager pod scope: with both KEP-5526 gates and pod-level resources set,
    /// the pod-level `AllocatePod`; otherwise `Allocate` for every container in order.
    ///
    /// `numa_affinity` is the pod's topology manager hint. Pod-level allocation:
    /// the pod's CPU set is sized by `spec.resources.requests.cpu` and taken from
    /// the assignable CPUs; init containers that qualify get exclusive slices of
    /// it minus the sidecars' slices so far, standard shared init containers get
    /// all of it minus those sidecar slices, qualifying app containers get
    /// exclusive slices of what sidecars left, and everyone else shares the
    /// remaining pod shared pool. Fails with `EmptyPodSharedPoolError` when the
    /// exclusive requests leave nothing for containers that need the pool.
    /// A pod that already has a pod-level set is left as it is.
    pub fn allocate_pod(
        &self,
        state: &CpuManagerState,
        pod: &PodSpec,
        numa_affinity: Option<u64>,
        gates: &FeatureGates,
    ) -> Result<CpuManagerState, CpuManagerError> {
        pod.validate()
            .map_err(|message| CpuManagerError::InvalidPod { message })?;
        let qos = pod.qos_class(gates);
        let mut next = state.clone();
        if gates.pod_level_resource_managers
            && gates.pod_level_resources
            && pod.is_pod_level_resources_set()
        {
            self.allocate_pod_level(&mut next, pod, qos, numa_affinity, gates)?;
        } else {
            for container in pod.all_containers() {
                self.allocate_into(&mut next, pod, qos, container, numa_affinity, gates)?;
            }
        }
        Ok(next)
    }

    /// Upstream `AllocatePod` on a working copy of the state.
    fn allocate_pod_level(
        &self,
        state: &mut CpuManagerState,
        pod: &PodSpec,
        qos: QosClass,
        numa_affinity: Option<u64>,
        gates: &FeatureGates,
    ) -> Result<(), CpuManagerError> {
        let total = self.pod_guaranteed_cpus_with(pod, qos, gates);
        if total == 0 || state.pod_cpuset(&pod.uid).is_some() {
            return Ok(());
        }
        self.validate_pod_scope_resources(pod, gates)
            .map_err(|message| CpuManagerError::EmptyPodSharedPool { message })?;
        self.enforce_smt_alignment(state, total, 0)?;
        let (pod_cpus, next) = self.allocate_cpus(state, total, numa_affinity, &CpuSet::new())?;
        *state = next;
        state
            .pod_assignments
            .insert(pod.uid.clone(), pod_cpus.clone());

        let mut own: BTreeMap<&str, CpuSet> = BTreeMap::new();
        let mut sidecar_cpus = CpuSet::new();
        for container in &pod.init_containers {
            let num_cpus = self.guaranteed_cpus_with(pod, qos, container, gates);
            let runnable = pod_cpus.difference(&sidecar_cpus);
            if num_cpus > 0 {
                let cpus = self.take_by_topology(&runnable, num_cpus)?;
                if container.is_restartable() {
                    sidecar_cpus = sidecar_cpus.union(&cpus);
                }
                own.insert(&container.name, cpus);
            } else if !container.is_restartable() {
                own.insert(&container.name, runnable);
            }
        }
        let mut pod_shared_pool = pod_cpus.difference(&sidecar_cpus);
        for container in &pod.containers {
            let num_cpus = self.guaranteed_cpus_with(pod, qos, container, gates);
            if num_cpus > 0 {
                let cpus = self.take_by_topology(&pod_shared_pool, num_cpus)?;
                pod_shared_pool = pod_shared_pool.difference(&cpus);
                own.insert(&container.name, cpus);
            }
        }
        for container in pod.all_containers() {
            let cpus = own
                .get(container.name.as_str())
                .cloned()
                .unwrap_or_else(|| pod_shared_pool.clone());
            state.set_cpuset(&pod.uid, &container.name, cpus);
        }
        Ok(())
    }

    /// `RemoveContainer`: forget a container and return CPUs no sibling still uses to the
    /// shared pool; a pod-level set goes back only with the pod's last container.
    pub fn remove_container(
        &self,
        state: &CpuManagerState,
        pod_uid: &str,
        container_name: &str,
        gates: &FeatureGates,
    ) -> CpuManagerState {
        let mut next = state.clone();
        let Some(to_release) = next.cpuset(pod_uid, container_name).cloned() else {
            return next;
        };
        next.delete(pod_uid, container_name);
        let last_container = !next.assignments.contains_key(pod_uid);
        if gates.pod_level_resource_managers
            && let Some(pod_cpus) = next.pod_cpuset(pod_uid).cloned()
        {
            if last_container {
                next.default_cpuset = next.default_cpuset.union(&pod_cpus);
                next.delete_pod(pod_uid);
            }
            return next;
        }
        let mut in_use = CpuSet::new();
        if let Some(siblings) = next.assignments.get(pod_uid) {
            for cpus in siblings.values() {
                in_use = in_use.union(cpus);
            }
        }
        next.default_cpuset = next.default_cpuset.union(&to_release.difference(&in_use));
        if last_container {
            next.cpus_to_reuse.remove(pod_uid);
        }
        next
    }

    /// `GetResourceIsolationLevel`: `host` without a CPU set, `pod` for the pod shared pool, else `container`.
    pub fn resource_isolation_level(
        &self,
        state: &CpuManagerState,
        pod: &PodSpec,
        container_name: &str,
        gates: &FeatureGates,
    ) -> ResourceIsolationLevel {
        if state.cpuset(&pod.uid, container_name).is_none() {
            return ResourceIsolationLevel::Host;
        }
        if gates.pod_level_resource_managers && pod.is_pod_level_resources_set() {
            let qualifies = pod.container(container_name).is_some_and(|c| {
                c.is_equivalent_guaranteed() && c.cpu_limit_millis.is_some_and(is_integral_cpu)
            });
            if !qualifies {
                return ResourceIsolationLevel::Pod;
            }
        }
        ResourceIsolationLevel::Container
    }
}

/// Whole CPUs of an integral positive millicore amount, else 0.
fn whole_cpus(millis: i64) -> usize {
    if millis <= 0 || !is_integral_cpu(millis) {
        return 0;
    }
    usize::try_from(millis / 1000).unwrap_or(usize::MAX)
}

fn to_i128(n: usize) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}
