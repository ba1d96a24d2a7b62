//! The component shim: each export forwards to [`crate::boundary`]
//! (`boundary::evaluate` for the pod, evaluate and resize interfaces,
//! `boundary::managers` / `boundary::testing` for the managers'), which
//! decodes, calls the core and encodes. No policy decision belongs in this
//! file.

use crate::boundary;
use crate::call_arena::CallArena;
use crate::wit::*;

// A policy call is a burst of small allocations, nearly all freed by the
// end of the call (its post-return included): they come from a bump arena
// that is reset when the last of them is freed (`call_arena`). What
// outlives a call (the shims below that keep state run inside
// `ALLOCATOR.retaining`), and whatever does not fit the arena, comes from
// talc, which takes far fewer wasm instructions per malloc/free than std's
// dlmalloc (BENCHMARKS.md, "Guest allocator"). The component is
// single-threaded.
//
// The arena's block is a static, in the module's zero-initialised memory:
// an instance starts with it, so a fresh pooled instance does not grow its
// memory at its first allocation (a `memory.grow` is an `mprotect` in
// wasmtime, and the pool's next instance of the slot undoes it with
// another; BENCHMARKS.md, "the call arena as a static").
#[global_allocator]
static ALLOCATOR: CallArena<talc::wasm::WasmDynamicTalc> = {
    // SAFETY: only the allocator ever names `CALL_ARENA_BLOCK`.
    unsafe {
        CallArena::in_block(
            talc::wasm::new_wasm_dynamic_allocator(),
            (&raw mut CALL_ARENA_BLOCK).cast(),
            CALL_ARENA_BYTES,
        )
    }
};

/// The call arena's memory (16-aligned, as `CallArena::in_block` needs).
#[repr(C, align(16))]
struct CallArenaBlock([core::mem::MaybeUninit<u8>; CALL_ARENA_BYTES]);

static mut CALL_ARENA_BLOCK: CallArenaBlock =
    CallArenaBlock([core::mem::MaybeUninit::uninit(); CALL_ARENA_BYTES]);

/// The arena's size: the calls the benches make (a 20-container
/// evaluation, a 256-CPU admission) run from it as fast as from a 1 MiB
/// one; a larger call spills to talc, still correct. It counts against the
/// instance's memory cap (`--memory-mib`) from the start, so it stays
/// small: a 2 MiB cap still serves (tests/e2e/prepared.rs).
const CALL_ARENA_BYTES: usize = 256 << 10;

struct PodPolicy;

use crate::wit::exports::podpolicy::policy as exported;

impl exported::node::Guest for PodPolicy {
    fn info() -> PolicyInfo {
        crate::policy_info()
    }
    fn validate_node(node: NodeSettings) -> Vec<FieldError> {
        boundary::evaluate::validate_node(&node)
    }
    fn managers_active(node: NodeSettings) -> bool {
        boundary::evaluate::managers_active(&node)
    }
}

impl exported::pod::Guest for PodPolicy {
    fn default_pod(pod: Pod, node: NodeSettings) -> Result<DefaultedPod, Vec<FieldError>> {
        boundary::evaluate::default_pod(&pod, &node)
    }
    fn validate_pod(pod: Pod, node: NodeSettings) -> Vec<FieldError> {
        boundary::evaluate::validate_pod(&pod, &node)
    }
    fn pod_warnings(pod: Pod) -> Vec<PodWarning> {
        boundary::evaluate::pod_warnings(&pod)
    }
    fn pod_resources(
        pod: Pod,
        options: PodResourcesOptions,
        node: NodeSettings,
    ) -> Result<EffectiveResources, Vec<FieldError>> {
        boundary::evaluate::effective_resources(&pod, &options, &node)
    }
    fn pod_qos(pod: Pod, node: NodeSettings) -> Result<QosClass, Vec<FieldError>> {
        boundary::evaluate::qos_class(&pod, &node)
    }
}

impl exported::evaluate::Guest for PodPolicy {
    fn pod_resource_config(
        pod: Pod,
        node: NodeSettings,
    ) -> Result<ResourceConfig, Vec<FieldError>> {
        boundary::evaluate::pod_resource_config(&pod, &node)
    }
    fn oom_score_adjust(
        pod: Pod,
        node: NodeSettings,
    ) -> Result<Vec<(String, i32)>, Vec<FieldError>> {
        boundary::evaluate::oom_score_adjust(&pod, &node)
    }
    fn container_memory_high(
        request_bytes: Option<u64>,
        limit_bytes: Option<u64>,
        qos: QosClass,
        node: NodeSettings,
    ) -> Result<Option<u64>, Vec<FieldError>> {
        boundary::evaluate::container_memory_high(request_bytes, limit_bytes, qos, &node)
    }
    fn node_level_cgroups(
        pods: Vec<Pod>,
        node: NodeSettings,
    ) -> Result<NodeCgroups, Vec<FieldError>> {
        boundary::evaluate::node_cgroups(&pods, &node)
    }
    fn evaluate(pod: Pod, node: NodeSettings) -> Result<PodEvaluation, Vec<FieldError>> {
        boundary::evaluate::evaluate(&pod, &node)
    }
    fn explain_values(pod: Pod, node: NodeSettings) -> Result<Vec<ValueReason>, Vec<FieldError>> {
        boundary::evaluate::explain_values(&pod, &node)
    }
}

impl exported::resize::Guest for PodPolicy {
    fn plan(
        current: Pod,
        desired: Pod,
        others: Vec<ResourceQuantity>,
        node: NodeSettings,
    ) -> Result<ResizePlan, Vec<FieldError>> {
        boundary::evaluate::resize_plan(&current, &desired, &others, &node)
    }
}

impl exported::managers::Guest for PodPolicy {
    fn admit(
        pod: Pod,
        topology: NodeTopology,
        state: ManagerState,
        node: NodeSettings,
    ) -> Result<Admission, Vec<FieldError>> {
        boundary::managers::admit(&pod, &topology, &state, &node)
    }
    fn release(
        pod_uid: String,
        container: String,
        topology: NodeTopology,
        state: ManagerState,
        node: NodeSettings,
    ) -> Result<ManagerState, Vec<FieldError>> {
        boundary::managers::release(&pod_uid, &container, &topology, &state, &node)
    }
}

/// The guest side of the `prepared-node` resource: a [`crate::prepared::PreparedNode`].
struct PreparedNodeResource(crate::prepared::PreparedNode);

/// The guest side of the `node-cgroups-sum` resource: a
/// [`crate::boundary::prepared::NodeCgroupsSum`]; its methods take `&self`,
/// and the component is single-threaded, so a `RefCell` holds it.
struct NodeCgroupsSumResource(core::cell::RefCell<boundary::prepared::NodeCgroupsSum>);

impl exported::prepared::Guest for PodPolicy {
    type PreparedNode = PreparedNodeResource;
    type NodeCgroupsSum = NodeCgroupsSumResource;
}

impl exported::prepared::GuestNodeCgroupsSum for NodeCgroupsSumResource {
    fn add_pod(&self, pod: Pod) -> Result<(), Vec<FieldError>> {
        // The running sum keeps what it learns from each pod.
        ALLOCATOR.retaining(|| self.0.borrow_mut().add_pod(&pod))
    }
    fn node_cgroups(&self) -> NodeCgroups {
        self.0.borrow().node_cgroups()
    }
}

impl exported::prepared::GuestPreparedNode for PreparedNodeResource {
    fn prepare(
        node: NodeSettings,
        topology: Option<NodeTopology>,
    ) -> Result<exported::prepared::PreparedNode, Vec<FieldError>> {
        // The prepared node outlives the call.
        ALLOCATOR.retaining(|| {
            crate::prepared::PreparedNode::prepare(&node, topology.as_ref()).map(|prepared| {
                exported::prepared::PreparedNode::new(PreparedNodeResource(prepared))
            })
        })
    }
    fn validate_pod(&self, pod: Pod) -> Vec<FieldError> {
        self.0.validate_pod(&pod)
    }
    fn default_pod(&self, pod: Pod) -> Result<DefaultedPod, Vec<FieldError>> {
        self.0.default_pod(&pod)
    }
    fn evaluate(&self, pod: Pod) -> Result<PodEvaluation, Vec<FieldError>> {
        self.0.evaluate(&pod)
    }
    fn admit(&self, pod: Pod, state: ManagerState) -> Result<Admission, Vec<FieldError>> {
        self.0.admit(&pod, &state)
    }
    fn release(
        &self,
        pod_uid: String,
        container: String,
        state: ManagerState,
    ) -> Result<ManagerState, Vec<FieldError>> {
        self.0.release(&pod_uid, &container, &state)
    }
    fn node_cgroups_sum(&self) -> exported::prepared::NodeCgroupsSum {
        // The running sum outlives the call.
        ALLOCATOR.retaining(|| {
            exported::prepared::NodeCgroupsSum::new(NodeCgroupsSumResource(
                core::cell::RefCell::new(self.0.node_cgroups_sum()),
            ))
        })
    }
}

impl exported::testing::Guest for PodPolicy {
    fn manager_operation(
        request: ManagerRequest,
        topology: NodeTopology,
        node: NodeSettings,
    ) -> Result<Result<ManagerResponse, ManagerError>, Vec<FieldError>> {
        boundary::testing::manager_operation(&request, &topology, &node)
    }
}

crate::wit::export!(PodPolicy with_types_in crate::wit);
