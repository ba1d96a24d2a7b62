//! Host (wasmtime `bindgen!`) WIT values -> policy-wasm (wit-bindgen) WIT
//! values, so one input runs through the component and natively.
//!
//! Shared by the fuzz targets and `host/benches/policy.rs` (which includes
//! this file with `#[path]`); it needs only the `podpolicy` and `policy-wasm`
//! crates. The record field lists name every field, so a field added to the
//! WIT breaks the build here instead of going unconverted.

use podpolicy::bindings as host;
use policy_wasm::wit as native;

/// Conversion from the host's (wasmtime) WIT types to policy-wasm's (wit-bindgen).
pub trait ToNative {
    /// The policy-wasm type.
    type Native;
    /// Convert.
    fn native(&self) -> Self::Native;
}

/// Convert a host WIT value to policy-wasm's type.
pub fn to_native<T: ToNative>(value: &T) -> T::Native {
    value.native()
}

impl<T: ToNative> ToNative for Vec<T> {
    type Native = Vec<T::Native>;
    fn native(&self) -> Self::Native {
        self.iter().map(T::native).collect()
    }
}

impl<T: ToNative> ToNative for Option<T> {
    type Native = Option<T::Native>;
    fn native(&self) -> Self::Native {
        self.as_ref().map(T::native)
    }
}

macro_rules! same {
    ($($t:ty),*) => {$(
        impl ToNative for $t {
            type Native = $t;
            fn native(&self) -> $t {
                self.clone()
            }
        }
    )*};
}
same!(String, bool, u32, u64, i32, i64, f64, (String, String));

/// Records whose fields all convert.
macro_rules! record {
    ($name:ident { $($field:ident),* $(,)? }) => {
        impl ToNative for host::$name {
            type Native = native::$name;
            fn native(&self) -> native::$name {
                let host::$name { $($field),* } = self;
                native::$name { $($field: $field.native()),* }
            }
        }
    };
}

macro_rules! enumeration {
    ($name:ident { $($case:ident),* $(,)? }) => {
        impl ToNative for host::$name {
            type Native = native::$name;
            fn native(&self) -> native::$name {
                match self {
                    $(host::$name::$case => native::$name::$case),*
                }
            }
        }
    };
}

record!(ResourceQuantity { name, quantity });
record!(ResourceRequirements { requests, limits });
record!(ContainerResizePolicy {
    resource_name,
    restart_policy
});
record!(Container {
    name,
    resources,
    restart_policy,
    resize_policy
});
record!(ContainerStatus {
    name,
    allocated_resources,
    resources
});
record!(PodCondition {
    condition_type,
    status,
    reason
});
record!(ClaimOverhead {
    name,
    per_pod,
    per_container
});
record!(NodeAllocatableClaimStatus {
    claim_name,
    containers,
    mapping,
    overhead
});
record!(PodStatus {
    qos_class,
    resources,
    allocated_resources,
    container_statuses,
    init_container_statuses,
    conditions,
    node_allocatable_claim_statuses,
});
record!(PodSpec {
    containers,
    init_containers,
    ephemeral_containers,
    resources,
    overhead,
    priority,
    priority_class_name,
    os_name,
    restart_policy,
    node_name,
});
record!(Pod {
    name,
    namespace,
    uid,
    annotations,
    spec,
    status
});
record!(FeatureGate { name, enabled });
record!(PolicyOption { name, value });
record!(NumaReservedMemory { numa_node, limits });
record!(NodeSettings {
    name,
    capacity,
    allocatable,
    kube_reserved,
    system_reserved,
    cgroup_version,
    cgroup_driver,
    cgroups_per_qos,
    enforce_node_allocatable,
    cpu_cfs_quota,
    cpu_cfs_quota_period_us,
    memory_throttling_factor,
    memory_reservation_policy,
    page_size_bytes,
    cpu_weight_curve,
    single_process_oom_kill,
    cpu_manager_policy,
    cpu_manager_policy_options,
    reserved_system_cpus,
    memory_manager_policy,
    reserved_memory,
    topology_manager_policy,
    topology_manager_scope,
    topology_manager_policy_options,
    feature_gates,
    kernel_version,
    eviction_hard,
});
record!(PodResourcesOptions {
    exclude_overhead,
    use_status_resources,
    in_place_pod_level_resources_vertical_scaling_enabled,
    non_missing_container_requests,
    skip_pod_level_resources,
    skip_container_level_resources,
});
enumeration!(CgroupVersion { V1, V2 });
enumeration!(CpuManagerPolicy { None, Static });
enumeration!(MemoryManagerPolicy { None, Static });
enumeration!(TopologyManagerPolicy {
    None,
    BestEffort,
    Restricted,
    SingleNumaNode
});
enumeration!(TopologyManagerScope { Container, Pod });
enumeration!(CgroupDriver { Cgroupfs, Systemd });
enumeration!(CpuWeightCurve {
    Linear,
    Logarithmic
});
enumeration!(MemoryReservationPolicy {
    None,
    HardReservation,
    TieredReservation
});
enumeration!(QosClass {
    Guaranteed,
    Burstable,
    BestEffort
});

// KEP-5526 resource managers: topology, state, hints and manager requests.
record!(TopologyCpu {
    id,
    core_id,
    socket_id,
    numa_node,
    uncore_cache_id
});
record!(HugepagePool {
    page_size_bytes,
    pages
});
record!(NumaNodeInfo {
    id,
    memory_bytes,
    hugepages,
    distances
});
record!(NodeTopology { cpus, numa_nodes });
record!(ContainerCpuset { container, cpuset });
record!(PodCpuEntries {
    pod_uid,
    containers
});
record!(PodCpuset { pod_uid, cpuset });
record!(CpuManagerState {
    policy_name,
    default_cpuset,
    entries,
    pod_entries
});
record!(MemoryTable {
    resource_name,
    total,
    system_reserved,
    allocatable,
    reserved,
    free
});
record!(NumaMemoryState {
    numa_node,
    number_of_assignments,
    memory_map,
    cells
});
record!(MemoryBlock {
    numa_affinity,
    resource_name,
    size
});
record!(ContainerMemory { container, blocks });
record!(PodMemoryEntries {
    pod_uid,
    containers
});
record!(PodMemory { pod_uid, blocks });
record!(MemoryManagerState {
    policy_name,
    machine_state,
    entries,
    pod_entries
});
record!(ManagerState { cpu, memory });
record!(TopologyHint {
    numa_affinity,
    preferred
});
record!(ResourceHints {
    resource_name,
    hints
});
record!(TakeCpusRequest {
    algorithm,
    available,
    num_cpus,
    cpu_group_size,
    sorting,
    prefer_align_by_uncore_cache
});
record!(AllocateCpusRequest {
    state,
    num_cpus,
    numa_affinity,
    reusable
});
record!(HintsRequest {
    manager,
    state,
    pod,
    container
});
record!(ContainerRequest {
    manager,
    state,
    pod,
    container,
    hint
});
record!(PodRequest {
    manager,
    state,
    pod,
    hint
});
record!(RemoveRequest {
    manager,
    state,
    pod_uid,
    container
});
record!(PodRequestedRequest { manager, pod });
enumeration!(ResourceManager { Cpu, Memory });
enumeration!(TakeAlgorithm {
    NumaPacked,
    NumaDistributed
});
enumeration!(CpuSortingStrategy { Packed, Spread });

impl ToNative for host::ManagerRequest {
    type Native = native::ManagerRequest;
    fn native(&self) -> native::ManagerRequest {
        use host::ManagerRequest as H;
        use native::ManagerRequest as N;
        match self {
            H::Start(v) => N::Start(v.native()),
            H::TopologyMerge(v) => N::TopologyMerge(v.native()),
            H::TakeCpus(v) => N::TakeCpus(v.native()),
            H::AllocateCpus(v) => N::AllocateCpus(v.native()),
            H::TopologyHints(v) => N::TopologyHints(v.native()),
            H::Allocate(v) => N::Allocate(v.native()),
            H::AllocatePod(v) => N::AllocatePod(v.native()),
            H::AllocateContainers(v) => N::AllocateContainers(v.native()),
            H::RemoveContainer(v) => N::RemoveContainer(v.native()),
            H::PodRequested(v) => N::PodRequested(v.native()),
        }
    }
}
