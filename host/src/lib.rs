//! podpolicy's host: the imperative shell around the policy component.
//!
//! It reads pods ([`pod_input`]) and node settings ([`node_input`]), runs the
//! policy component in wasmtime ([`runtime`]), renders results
//! ([`output`]) and runs conformance vectors ([`conformance`]). It decides
//! no policy: every number it prints or writes comes from the component.
//! The machine's CPU and NUMA topology is read from sysfs ([`sysfs`]) and
//! handed to the resource managers as a WIT topology ([`topology_input`]).
//!
//! Embedding the policy in another wasmtime host needs only the component
//! and the WIT file; [`runtime::PolicyRuntime`] is one way to do it:
//!
//! ```no_run
//! use podpolicy::runtime::{Cache, Limits, PolicyRuntime};
//! let policy = PolicyRuntime::embedded(&Cache::Off, Limits::default())?;
//! println!("policy {}", policy.info().policy_version);
//! # Ok::<(), anyhow::Error>(())
//! ```
#![warn(missing_docs)]

pub mod bindings {
    //! Host-side types and call stubs generated from `wit/policy.wit`.
    #![allow(missing_docs)]
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "pod-policy-conformance",
        additional_derives: [serde::Serialize, PartialEq],
    });

    // Every type under its own name, whichever interface defines it.
    policy_wasm::contract_types!(exports::podpolicy::policy);
    // `Display` and `parse` for cgroup file names and values: the policy's
    // own formatter, so the host spells every file as the guest means it.
    policy_wasm::cgroup_file_text!();
    policy_wasm::evaluation_text!();

    /// The policy prepared for instantiation: the generated pre-instance,
    /// which type-checks every export of the component once.
    pub type PodPolicyPre<T> = PodPolicyConformancePre<T>;
    type Errors = Vec<FieldError>;

    /// One `call_<function>` per export on [`PodPolicy`], whatever interface
    /// holds it, so callers name the function, not where the contract files
    /// it; and [`ExportIndices`], where each export sits in the component.
    ///
    /// Why not the generated `PodPolicyConformance`: loading it from an
    /// instance type-checks all 18 exports (the big pod and topology records
    /// included) on every instance, which cost more than the instantiation
    /// itself. Here the exports are found once per component, checked once
    /// against these signatures ([`ExportIndices::check`], at load), and
    /// each instance only looks them up by index.
    macro_rules! calls {
        ($($call:ident => $iface:literal.$func:literal($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
            /// Where each export of the policy sits in its component.
            pub struct ExportIndices {
                $($call: wasmtime::component::ComponentExportIndex,)*
            }

            impl ExportIndices {
                /// Find every export in `component`: interface
                /// `podpolicy:policy/<interface>@<WIT_VERSION>`, then the function in it.
                pub fn new(component: &wasmtime::component::Component) -> wasmtime::Result<Self> {
                    let find = |iface: &str, func: &str| {
                        let iface = format!("podpolicy:policy/{iface}@{}", policy_wasm::WIT_VERSION);
                        let instance = component
                            .get_export_index(None, &iface)
                            .ok_or_else(|| wasmtime::format_err!("no export `{iface}`"))?;
                        component
                            .get_export_index(Some(&instance), func)
                            .ok_or_else(|| wasmtime::format_err!("no export `{iface}#{func}`"))
                    };
                    Ok(ExportIndices { $($call: find($iface, $func)?,)* })
                }

                /// Type-check every export of `instance` against the
                /// signature its `call_` uses (once per component, at load).
                pub fn check(
                    &self,
                    mut store: impl wasmtime::AsContextMut,
                    instance: &wasmtime::component::Instance,
                ) -> wasmtime::Result<()> {
                    $(
                        instance
                            .get_typed_func::<($($ty,)*), ($ret,)>(&mut store, &self.$call)
                            .map_err(|e| e.context(concat!("export `", $iface, "#", $func, "`")))?;
                    )*
                    Ok(())
                }
            }

            impl PodPolicy {
                $(
                    #[doc = concat!("`", $func, "` of interface `", $iface, "`.")]
                    #[allow(clippy::ptr_arg)] // `&ResourceList`, as the WIT names it
                    pub fn $call(
                        &self,
                        mut store: impl wasmtime::AsContextMut,
                        $($arg: $ty),*
                    ) -> wasmtime::Result<$ret> {
                        let func = self
                            .instance
                            .get_func(&mut store, &self.exports.$call)
                            .ok_or_else(|| wasmtime::format_err!(concat!("no export `", $func, "`")))?;
                        // SAFETY: `ExportIndices::check` type-checked this
                        // export of this component against exactly these
                        // parameter and result types when it was loaded, and
                        // every instance of a component has its types.
                        let typed = unsafe {
                            wasmtime::component::TypedFunc::<($($ty,)*), ($ret,)>::new_unchecked(func)
                        };
                        let (result,) = typed.call(&mut store, ($($arg,)*))?;
                        Ok(result)
                    }
                )*
            }
        };
    }

    /// One instance of the policy component, its exports found by index.
    pub struct PodPolicy {
        instance: wasmtime::component::Instance,
        exports: std::sync::Arc<ExportIndices>,
    }

    impl PodPolicy {
        /// An instance of `component` in `store` (for embedders: the
        /// component must implement `pod-policy-conformance` at this
        /// host's contract version).
        pub fn instantiate<T: 'static>(
            mut store: impl wasmtime::AsContextMut<Data = T>,
            component: &wasmtime::component::Component,
            linker: &wasmtime::component::Linker<T>,
        ) -> wasmtime::Result<PodPolicy> {
            let pre = linker.instantiate_pre(component)?;
            PodPolicyPre::new(pre.clone())?;
            let exports = ExportIndices::new(component)?;
            let instance = pre.instantiate(&mut store)?;
            exports.check(&mut store, &instance)?;
            Ok(PodPolicy::from_instance(
                instance,
                std::sync::Arc::new(exports),
            ))
        }

        /// Wrap an instance of a component whose exports `exports` found
        /// and checked.
        pub fn from_instance(
            instance: wasmtime::component::Instance,
            exports: std::sync::Arc<ExportIndices>,
        ) -> PodPolicy {
            PodPolicy { instance, exports }
        }
    }

    calls! {
        call_policy_info => "node"."info"() -> PolicyInfo;
        call_validate_node => "node"."validate-node"(node: &NodeSettings) -> Errors;
        call_managers_active => "node"."managers-active"(node: &NodeSettings) -> bool;
        call_default_pod => "pod"."default-pod"(pod: &Pod, node: &NodeSettings)
            -> Result<DefaultedPod, Errors>;
        call_validate_pod => "pod"."validate-pod"(pod: &Pod, node: &NodeSettings) -> Errors;
        call_pod_warnings => "pod"."pod-warnings"(pod: &Pod) -> Vec<PodWarning>;
        call_effective_resources => "pod"."pod-resources"(
            pod: &Pod, options: &PodResourcesOptions, node: &NodeSettings
        ) -> Result<EffectiveResources, Errors>;
        call_qos_class => "pod"."pod-qos"(pod: &Pod, node: &NodeSettings)
            -> Result<QosClass, Errors>;
        call_pod_resource_config => "evaluate"."pod-resource-config"(
            pod: &Pod, node: &NodeSettings
        ) -> Result<ResourceConfig, Errors>;
        call_oom_score_adjust => "evaluate"."oom-score-adjust"(
            pod: &Pod, node: &NodeSettings
        ) -> Result<Vec<(String, i32)>, Errors>;
        call_container_memory_high => "evaluate"."container-memory-high"(
            request_bytes: Option<u64>, limit_bytes: Option<u64>, qos: QosClass, node: &NodeSettings
        ) -> Result<Option<u64>, Errors>;
        call_node_cgroups => "evaluate"."node-level-cgroups"(
            pods: &[Pod], node: &NodeSettings
        ) -> Result<NodeCgroups, Errors>;
        call_evaluate => "evaluate"."evaluate"(pod: &Pod, node: &NodeSettings)
            -> Result<PodEvaluation, Errors>;
        call_explain_values => "evaluate"."explain-values"(
            pod: &Pod, node: &NodeSettings
        ) -> Result<Vec<ValueReason>, Errors>;
        call_resize_plan => "resize"."plan"(
            current: &Pod, desired: &Pod, others: &[ResourceQuantity], node: &NodeSettings
        ) -> Result<ResizePlan, Errors>;
        call_admit => "managers"."admit"(
            pod: &Pod, topology: &NodeTopology, state: &ManagerState, node: &NodeSettings
        ) -> Result<Admission, Errors>;
        call_release => "managers"."release"(
            pod_uid: &str, container: &str, topology: &NodeTopology, state: &ManagerState,
            node: &NodeSettings
        ) -> Result<ManagerState, Errors>;
        call_prepare => "prepared"."[static]prepared-node.prepare"(
            node: &NodeSettings, topology: Option<&NodeTopology>
        ) -> Result<wasmtime::component::ResourceAny, Errors>;
        call_prepared_validate_pod => "prepared"."[method]prepared-node.validate-pod"(
            prepared: wasmtime::component::ResourceAny, pod: &Pod
        ) -> Errors;
        call_prepared_default_pod => "prepared"."[method]prepared-node.default-pod"(
            prepared: wasmtime::component::ResourceAny, pod: &Pod
        ) -> Result<DefaultedPod, Errors>;
        call_prepared_evaluate => "prepared"."[method]prepared-node.evaluate"(
            prepared: wasmtime::component::ResourceAny, pod: &Pod
        ) -> Result<PodEvaluation, Errors>;
        call_prepared_admit => "prepared"."[method]prepared-node.admit"(
            prepared: wasmtime::component::ResourceAny, pod: &Pod, state: &ManagerState
        ) -> Result<Admission, Errors>;
        call_prepared_release => "prepared"."[method]prepared-node.release"(
            prepared: wasmtime::component::ResourceAny, pod_uid: &str, container: &str,
            state: &ManagerState
        ) -> Result<ManagerState, Errors>;
        call_prepared_node_cgroups_sum => "prepared"."[method]prepared-node.node-cgroups-sum"(
            prepared: wasmtime::component::ResourceAny
        ) -> wasmtime::component::ResourceAny;
        call_sum_add_pod => "prepared"."[method]node-cgroups-sum.add-pod"(
            sum: wasmtime::component::ResourceAny, pod: &Pod
        ) -> Result<(), Errors>;
        call_sum_node_cgroups => "prepared"."[method]node-cgroups-sum.node-cgroups"(
            sum: wasmtime::component::ResourceAny
        ) -> NodeCgroups;
        call_manager_operation => "testing"."manager-operation"(
            request: &ManagerRequest, topology: &NodeTopology, node: &NodeSettings
        ) -> Result<Result<ManagerResponse, ManagerError>, Errors>;
    }

    /// The kubelet configuration's spelling of each closed set the contract
    /// types as an enum: [`KubeletName::kubelet_name`] writes it and
    /// [`KubeletName::from_kubelet_name`] reads it (case-sensitive, as the
    /// kubelet compares them).
    pub trait KubeletName: Sized + Copy + 'static {
        /// Every value, in the kubelet's documentation order.
        const ALL: &'static [Self];
        /// The name as a KubeletConfiguration writes it.
        fn kubelet_name(self) -> &'static str;
        /// The value a KubeletConfiguration name stands for.
        fn from_kubelet_name(name: &str) -> Option<Self> {
            Self::ALL.iter().copied().find(|v| v.kubelet_name() == name)
        }
    }

    macro_rules! kubelet_names {
        ($ty:ident { $($variant:ident => $name:literal),* $(,)? }) => {
            impl KubeletName for $ty {
                const ALL: &'static [Self] = &[$($ty::$variant),*];
                fn kubelet_name(self) -> &'static str {
                    match self { $($ty::$variant => $name),* }
                }
            }
        };
    }
    kubelet_names!(CpuManagerPolicy { None => "none", Static => "static" });
    kubelet_names!(MemoryManagerPolicy { None => "None", Static => "Static" });
    kubelet_names!(TopologyManagerPolicy {
        None => "none",
        BestEffort => "best-effort",
        Restricted => "restricted",
        SingleNumaNode => "single-numa-node",
    });
    kubelet_names!(TopologyManagerScope { Container => "container", Pod => "pod" });
    kubelet_names!(ResizeResource { Cpu => "cpu", Memory => "memory" });
    kubelet_names!(PatchOp { Add => "add", Replace => "replace" });

    impl ManagerErrorKind {
        /// The admission reason the kubelet reports in the pod status
        /// (upstream's error type name); `""` for configuration errors,
        /// which are no admission result. The names are the policy crate's.
        pub fn reason(&self) -> &'static str {
            use policy_wasm::{
                cpu_manager::policy_static as cpu, memory_manager as mm, topology as tm,
            };
            match self {
                ManagerErrorKind::Configuration => "",
                ManagerErrorKind::TopologyAffinity => tm::ERROR_TOPOLOGY_AFFINITY,
                ManagerErrorKind::SmtAlignment(_) => cpu::ERROR_SMT_ALIGNMENT,
                ManagerErrorKind::EmptyPodSharedPool => mm::ERROR_EMPTY_POD_SHARED_POOL,
                ManagerErrorKind::UnexpectedAdmission => mm::ERROR_UNEXPECTED_ADMISSION,
            }
        }
    }

    impl ManagerError {
        /// [`ManagerErrorKind::reason`] of this error.
        pub fn reason(&self) -> &'static str {
            self.kind.reason()
        }
    }

    impl std::fmt::Display for PodWarning {
        /// `<field>: <message>`, the text the API server returns as a warning.
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

pub mod admit;
pub mod agent;
pub mod apply;
pub mod bounded_read;
pub mod cgroupfs;
pub mod checkpoint;
pub mod compiler_process;
pub mod conformance;
pub mod evaluation;
pub mod kubelet_config;
pub mod metrics;
pub mod node_input;
pub mod nri;
pub mod output;
pub mod pod_input;
pub mod policy_diff;
pub mod policy_dir;
pub mod progress;
pub mod resize_cmd;
pub mod resize_exec;
pub mod review_cmd;
pub mod runtime;
pub mod state_dir;
pub mod swap;
pub mod sysfs;
pub mod topology_input;
pub mod topology_view;
pub mod webhook;
pub mod write_deadline;

use anyhow::Result;

use bindings::{
    DefaultedPod, EffectiveResources, FieldError, NodeSettings, Pod, PodEvaluation,
    PodResourcesOptions, QosClass, ResourceConfig,
};
use runtime::PolicyRuntime;

/// A policy answer that may be a list of field errors.
pub type PolicyResult<T> = std::result::Result<T, Vec<FieldError>>;

impl PolicyRuntime {
    /// `validate-pod`, then `default-pod`, then `evaluate` of the defaulted
    /// pod, as the API server and the kubelet run them for one pod, in one
    /// fresh instance (the next pod gets another): two instantiations fewer
    /// per pod than three separate calls. The deadline and the fuel budget
    /// cover the three together. `Err` in the answer: the first step's
    /// field errors.
    pub fn validate_default_evaluate(
        &self,
        pod: &Pod,
        node: &NodeSettings,
    ) -> Result<PolicyResult<(DefaultedPod, PodEvaluation)>> {
        self.call(|p, s| {
            let errors = p.call_validate_pod(&mut *s, pod, node)?;
            if !errors.is_empty() {
                return Ok(Err(errors));
            }
            let defaulted = match p.call_default_pod(&mut *s, pod, node)? {
                Ok(defaulted) => defaulted,
                Err(errors) => return Ok(Err(errors)),
            };
            Ok(p.call_evaluate(&mut *s, &defaulted.pod, node)?
                .map(|evaluation| (defaulted, evaluation)))
        })
    }

    /// Export `explain-values`: `evaluate`'s values with the rule behind each.
    pub fn explain_values(
        &self,
        pod: &Pod,
        node: &NodeSettings,
    ) -> Result<PolicyResult<Vec<bindings::ValueReason>>> {
        self.call(|p, s| p.call_explain_values(s, pod, node))
    }

    /// Export `evaluate`.
    pub fn evaluate(&self, pod: &Pod, node: &NodeSettings) -> Result<PolicyResult<PodEvaluation>> {
        self.call(|p, s| p.call_evaluate(s, pod, node))
    }
    /// Export `default-pod`.
    pub fn default_pod(
        &self,
        pod: &Pod,
        node: &NodeSettings,
    ) -> Result<PolicyResult<DefaultedPod>> {
        self.call(|p, s| p.call_default_pod(s, pod, node))
    }
    /// Export `validate-pod`.
    pub fn validate_pod(&self, pod: &Pod, node: &NodeSettings) -> Result<Vec<FieldError>> {
        self.call(|p, s| p.call_validate_pod(s, pod, node))
    }
    /// Export `validate-node`.
    pub fn validate_node(&self, node: &NodeSettings) -> Result<Vec<FieldError>> {
        self.call(|p, s| p.call_validate_node(s, node))
    }

    /// Export `managers-active`.
    pub fn managers_active(&self, node: &NodeSettings) -> Result<bool> {
        self.call(|p, s| p.call_managers_active(s, node))
    }
    /// Export `effective-resources`.
    pub fn effective_resources(
        &self,
        pod: &Pod,
        options: &PodResourcesOptions,
        node: &NodeSettings,
    ) -> Result<PolicyResult<EffectiveResources>> {
        self.call(|p, s| p.call_effective_resources(s, pod, options, node))
    }
    /// Export `qos-class`.
    pub fn qos_class(&self, pod: &Pod, node: &NodeSettings) -> Result<PolicyResult<QosClass>> {
        self.call(|p, s| p.call_qos_class(s, pod, node))
    }
    /// Export `pod-resource-config`.
    pub fn pod_resource_config(
        &self,
        pod: &Pod,
        node: &NodeSettings,
    ) -> Result<PolicyResult<ResourceConfig>> {
        self.call(|p, s| p.call_pod_resource_config(s, pod, node))
    }
    /// Export `container-memory-high`.
    pub fn container_memory_high(
        &self,
        request: Option<u64>,
        limit: Option<u64>,
        qos: QosClass,
        node: &NodeSettings,
    ) -> Result<PolicyResult<Option<u64>>> {
        self.call(|p, s| p.call_container_memory_high(s, request, limit, qos, node))
    }
    /// Export `node-memory-qos`.
    pub fn node_cgroups(
        &self,
        pods: &[Pod],
        node: &NodeSettings,
    ) -> Result<PolicyResult<bindings::NodeCgroups>> {
        self.call(|p, s| p.call_node_cgroups(s, pods, node))
    }
    /// Export `resize-plan`.
    pub fn resize_plan(
        &self,
        current: &Pod,
        desired: &Pod,
        others: &[bindings::ResourceQuantity],
        node: &NodeSettings,
    ) -> Result<PolicyResult<bindings::ResizePlan>> {
        self.call(|p, s| p.call_resize_plan(s, current, desired, others, node))
    }
    /// Export `oom-score-adjust`.
    pub fn oom_score_adjust(
        &self,
        pod: &Pod,
        node: &NodeSettings,
    ) -> Result<PolicyResult<Vec<(String, i32)>>> {
        self.call(|p, s| p.call_oom_score_adjust(s, pod, node))
    }
    /// Export `admit`: KEP-5526 admission of `pod` by the topology, CPU and
    /// memory managers on `state` (state in, state out).
    pub fn admit(
        &self,
        pod: &Pod,
        topology: &bindings::NodeTopology,
        state: &bindings::ManagerState,
        node: &NodeSettings,
    ) -> Result<PolicyResult<bindings::Admission>> {
        self.call(|p, s| p.call_admit(s, pod, topology, state, node))
    }
    /// Export `release`: `RemoveContainer` of one container on both managers.
    pub fn release(
        &self,
        pod_uid: &str,
        container: &str,
        topology: &bindings::NodeTopology,
        state: &bindings::ManagerState,
        node: &NodeSettings,
    ) -> Result<PolicyResult<bindings::ManagerState>> {
        self.call(|p, s| p.call_release(s, pod_uid, container, topology, state, node))
    }
    /// Export `manager-operation`: one upstream manager function; the inner
    /// `Err` is the error that function returned.
    pub fn manager_operation(
        &self,
        request: &bindings::ManagerRequest,
        topology: &bindings::NodeTopology,
        node: &NodeSettings,
    ) -> Result<PolicyResult<ManagerOutcome<bindings::ManagerResponse>>> {
        self.call(|p, s| p.call_manager_operation(s, request, topology, node))
    }
    /// The `start` manager operation: check a loaded state (a checkpoint)
    /// against the node's configuration, or initialise a new one.
    pub fn start_managers(
        &self,
        topology: &bindings::NodeTopology,
        state: &bindings::ManagerState,
        node: &NodeSettings,
    ) -> Result<PolicyResult<ManagerOutcome<bindings::ManagerState>>> {
        let request = bindings::ManagerRequest::Start(state.clone());
        Ok(self
            .manager_operation(&request, topology, node)?
            .map(|outcome| {
                outcome.and_then(|response| match response {
                    bindings::ManagerResponse::State(state) => Ok(state),
                    _ => Err(bindings::ManagerError {
                        kind: bindings::ManagerErrorKind::UnexpectedAdmission,
                        message: "the policy answered `start` with another response".into(),
                        function: "Start".into(),
                    }),
                })
            }))
    }
}

/// What a manager function answers: its result, or the error it returned.
pub type ManagerOutcome<T> = std::result::Result<T, bindings::ManagerError>;

/// A manager state with nothing in it: what a node without checkpoints
/// starts from (`admit` and `start_managers` initialise it).
pub fn empty_manager_state() -> bindings::ManagerState {
    bindings::ManagerState {
        cpu: bindings::CpuManagerState {
            policy_name: String::new(),
            default_cpuset: String::new(),
            entries: Vec::new(),
            pod_entries: Vec::new(),
        },
        memory: bindings::MemoryManagerState {
            policy_name: String::new(),
            machine_state: Vec::new(),
            entries: Vec::new(),
            pod_entries: Vec::new(),
        },
    }
}

/// The Kubernetes spelling of an error reason (`field.ErrorType`).
pub fn reason_name(reason: bindings::ErrorReason) -> &'static str {
    use bindings::ErrorReason as R;
    match reason {
        R::Invalid => "Invalid",
        R::Forbidden => "Forbidden",
        R::NotSupported => "NotSupported",
        R::Required => "Required",
        R::Duplicate => "Duplicate",
        R::TooLong => "TooLong",
    }
}

/// Render field errors one per line: `field: message (Reason, value)`.
pub fn format_field_errors(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(|e| match &e.bad_value {
            Some(v) => format!(
                "{}: {} ({}: `{v}`)",
                e.field,
                e.message,
                reason_name(e.reason)
            ),
            None => format!("{}: {} ({})", e.field, e.message, reason_name(e.reason)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A node with every kubelet default and no capacity (for tests and vectors).
pub fn empty_node() -> NodeSettings {
    NodeSettings {
        name: String::new(),
        capacity: Vec::new(),
        allocatable: None,
        kube_reserved: Vec::new(),
        system_reserved: Vec::new(),
        cgroup_version: bindings::CgroupVersion::V2,
        cgroup_driver: bindings::CgroupDriver::Cgroupfs,
        cgroups_per_qos: None,
        enforce_node_allocatable: None,
        cpu_cfs_quota: None,
        cpu_cfs_quota_period_us: None,
        memory_throttling_factor: None,
        memory_reservation_policy: None,
        page_size_bytes: None,
        cpu_weight_curve: None,
        single_process_oom_kill: None,
        cpu_manager_policy: None,
        cpu_manager_policy_options: Vec::new(),
        reserved_system_cpus: None,
        memory_manager_policy: None,
        reserved_memory: Vec::new(),
        topology_manager_policy: None,
        topology_manager_scope: None,
        topology_manager_policy_options: Vec::new(),
        feature_gates: Vec::new(),
        kernel_version: None,
        eviction_hard: None,
    }
}

/// Where the resource managers place pods, for `explain` and `apply` on a
/// node that runs them: the machine's topology and the manager state the
/// placements start from (a checkpoint, or a new state).
#[derive(Clone, Debug)]
pub struct Placement {
    /// The machine.
    pub topology: bindings::NodeTopology,
    /// The managers' state; after [`explain_all`], with the explained pods admitted.
    pub state: bindings::ManagerState,
}

/// Evaluate pods on a node: each pod validated, defaulted and evaluated,
/// then the node-level values over the valid ones (what `explain` shows
/// and `apply` writes).
///
/// With a [`Placement`], the valid pods are also admitted, in order, by the
/// resource managers (as the kubelet admits them); a pod they refuse is
/// [`evaluation::Verdict::NotAdmitted`], and every admitted pod's files
/// carry the component's placement files (cpusets, `cpu.max` without quota
/// for exclusive CPUs) over `evaluate`'s, as `admit` and the agent write
/// them. The placement files come from a second admission on the final
/// state, where every admitted pod is already placed (an admitted pod is
/// admitted again unchanged), so every pod sees the node's final shared pool.
pub fn explain_all(
    policy: &PolicyRuntime,
    docs: &[pod_input::PodDocument],
    node: &NodeSettings,
    placement: Option<&mut Placement>,
) -> Result<evaluation::Evaluations> {
    let mut pods = Vec::new();
    let mut progress = progress::Progress::on_stderr("evaluating pods", docs.len());
    for (done, doc) in docs.iter().enumerate() {
        progress.update(done);
        pods.push(explain(policy, doc, node)?);
    }
    progress.update(docs.len());
    drop(progress);
    if let Some(placement) = placement {
        let mut placed = Vec::new();
        let mut progress = progress::Progress::on_stderr("admitting pods", pods.len());
        for (i, outcome) in pods.iter_mut().enumerate() {
            progress.update(i);
            let evaluation::Verdict::Evaluated(pod) = &outcome.verdict else {
                continue;
            };
            let admission = admit_call(policy, &pod.defaulted, placement, node)?;
            match admission.rejection.clone() {
                Some(error) => {
                    outcome.verdict =
                        evaluation::Verdict::NotAdmitted(Box::new(evaluation::Refusal {
                            error,
                            admission,
                        }))
                }
                None => {
                    placement.state = admission.state;
                    placed.push(i);
                }
            }
        }
        for i in placed {
            if let evaluation::Verdict::Evaluated(pod) = &mut pods[i].verdict {
                let admission = admit_call(policy, &pod.defaulted, placement, node)?;
                pod.place(&admission.files);
            }
        }
    }
    let admitted: Vec<Pod> = pods
        .iter()
        .filter_map(|p| p.evaluated().map(|e| e.defaulted.clone()))
        .collect();
    let node_cgroups = match policy.node_cgroups(&admitted, node)? {
        Ok(values) => values,
        Err(errors) => anyhow::bail!(
            "node-level evaluation failed:\n{}",
            format_field_errors(&errors)
        ),
    };
    Ok(evaluation::Evaluations {
        pods,
        node: node_cgroups,
    })
}

fn admit_call(
    policy: &PolicyRuntime,
    pod: &Pod,
    placement: &Placement,
    node: &NodeSettings,
) -> Result<bindings::Admission> {
    match policy.admit(pod, &placement.topology, &placement.state, node)? {
        Ok(admission) => Ok(admission),
        Err(errors) => anyhow::bail!(
            "{}/{}: the resource managers could not evaluate the pod:\n{}",
            pod.namespace,
            pod.name,
            format_field_errors(&errors)
        ),
    }
}

/// [`explain_all`] without placements, streaming: each pod from `visit`
/// is validated, defaulted and evaluated on `prepared` (one warm instance
/// for the run) and handed to `each` before the next is read; the valid
/// ones are counted in a node-cgroups sum in the component, whose
/// node-level values are returned at the end. Nothing of a pod is kept
/// after `each` returns, so memory does not grow with the pod count.
/// `visit` is given the function to call with each pod read (e.g. a
/// closure over [`pod_input::visit_pods`]).
pub fn explain_stream(
    prepared: &mut runtime::PreparedPolicy,
    visit: impl FnOnce(&mut dyn FnMut(pod_input::PodDocument) -> Result<()>) -> Result<()>,
    mut each: impl FnMut(evaluation::PodOutcome) -> Result<()>,
) -> Result<bindings::NodeCgroups> {
    let sum = prepared.node_cgroups_sum()?;
    let mut index = 0usize;
    let mut progress = progress::Progress::counting_on_stderr("evaluating pods");
    let mut one = |doc: pod_input::PodDocument| -> Result<()> {
        let outcome = explain_prepared(prepared, &doc)?;
        drop(doc);
        if let Some(pod) = outcome.evaluated()
            && let Err(errors) = prepared.add_to_sum(&sum, &pod.defaulted)?
        {
            let errors: Vec<FieldError> = errors
                .into_iter()
                .map(|mut e| {
                    e.field = format!("pods[{index}].{}", e.field);
                    e
                })
                .collect();
            anyhow::bail!(
                "node-level evaluation failed:\n{}",
                format_field_errors(&errors)
            );
        }
        index += 1;
        progress.count(index);
        each(outcome)
    };
    visit(&mut one)?;
    progress.finish_count(index);
    drop(progress);
    let node = prepared.sum_node_cgroups(&sum)?;
    prepared.close_sum(sum)?;
    Ok(node)
}

/// Evaluate one pod: validate, default, evaluate.
pub fn explain(
    policy: &PolicyRuntime,
    doc: &pod_input::PodDocument,
    node: &NodeSettings,
) -> Result<evaluation::PodOutcome> {
    Ok(pod_outcome(
        doc,
        policy.validate_default_evaluate(&doc.pod, node)?,
    ))
}

/// [`explain`] on a node prepared in a warm instance (the long-lived
/// hosts' way: only the pod crosses).
pub fn explain_prepared(
    prepared: &mut runtime::PreparedPolicy,
    doc: &pod_input::PodDocument,
) -> Result<evaluation::PodOutcome> {
    Ok(pod_outcome(
        doc,
        prepared.validate_default_evaluate(&doc.pod)?,
    ))
}

/// A pod's outcome from its validate-default-evaluate answer.
fn pod_outcome(
    doc: &pod_input::PodDocument,
    answer: PolicyResult<(bindings::DefaultedPod, PodEvaluation)>,
) -> evaluation::PodOutcome {
    let name = if doc.pod.namespace.is_empty() {
        doc.pod.name.clone()
    } else {
        format!("{}/{}", doc.pod.namespace, doc.pod.name)
    };
    let outcome = |verdict| evaluation::PodOutcome {
        name: name.clone(),
        source: doc.origin.clone(),
        verdict,
    };
    match answer {
        Ok((defaulted, evaluation)) => outcome(evaluation::Verdict::Evaluated(Box::new(
            evaluation::EvaluatedPod {
                defaulted: defaulted.pod,
                patch: defaulted.patch,
                evaluation,
            },
        ))),
        Err(errors) => outcome(evaluation::Verdict::Invalid(errors)),
    }
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Wait for SIGTERM or SIGINT (the long-running commands stop on either);
/// an error when a handler cannot be installed.
pub async fn termination_signal() -> anyhow::Result<()> {
    use anyhow::Context as _;
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing a SIGINT handler")?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}
