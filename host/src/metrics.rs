//! Prometheus metrics of the node agent, with the KEPs' names, and the
//! loopback HTTP endpoint that serves them.
//!
//! prometheus-client appends `_total` to counters, so counters are
//! registered without it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use anyhow::{Context, Result};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A cgroup's owner: `namespace/pod`, and the container (empty for the pod).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CgroupLabels {
    /// `namespace/name`.
    pub pod: String,
    /// Container name; empty for the pod cgroup.
    pub container: String,
}

/// `resource_name` and `source` of an allocation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AllocationLabels {
    /// `cpu` or `memory`.
    pub resource_name: String,
    /// `pod` (pod-level resources) or `container`.
    pub source: String,
}

/// `resource_name` of a failed allocation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// `cpu` or `memory`.
    pub resource_name: String,
}

/// `assignment_type` of a container's CPUs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AssignmentLabels {
    /// `exclusive`, `pod_shared` or `node_shared`.
    pub assignment_type: String,
}

/// The serving policy.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    /// Policy version string.
    pub version: String,
    /// SHA-256 of the component.
    pub digest: String,
}

/// An outcome label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// e.g. `ok`, `rejected`, `error`.
    pub result: String,
}

/// Every metric the agent exports.
pub struct Metrics {
    registry: Registry,
    /// `kubelet_memory_qos_memory_min_bytes`.
    pub memory_min_bytes: Family<CgroupLabels, Gauge>,
    /// `kubelet_memory_qos_memory_high_bytes`.
    pub memory_high_bytes: Family<CgroupLabels, Gauge>,
    /// `kubelet_memory_qos_throttle_events_total` (memory.events `high`).
    pub throttle_events: Family<CgroupLabels, Counter>,
    /// `resource_manager_allocations_total`.
    pub allocations: Family<AllocationLabels, Counter>,
    /// `resource_manager_allocation_errors_total`.
    pub allocation_errors: Family<ResourceLabels, Counter>,
    /// `resource_manager_container_assignments`.
    pub container_assignments: Family<AssignmentLabels, Gauge>,
    /// `topology_manager_admission_duration_seconds`.
    pub admission_duration: Histogram,
    /// `podpolicy_policy_info`.
    pub policy_info: Family<PolicyLabels, Gauge>,
    /// `podpolicy_policy_swaps_total{result}`: swaps, rollbacks, rejections.
    pub swaps: Family<ResultLabels, Counter>,
    /// `podpolicy_evaluations_total{result}`.
    pub evaluations: Family<ResultLabels, Counter>,
    /// `podpolicy_evaluation_duration_seconds`.
    pub evaluation_duration: Histogram,
    /// `podpolicy_reconciles_total{result}`.
    pub reconciles: Family<ResultLabels, Counter>,
    /// `podpolicy_cgroup_writes_total`.
    pub cgroup_writes: Counter,
}

/// Latency buckets from 10 µs to ~5 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_01, 2.5, 15)
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A registry with every metric registered and zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            memory_min_bytes: Family::default(),
            memory_high_bytes: Family::default(),
            throttle_events: Family::default(),
            allocations: Family::default(),
            allocation_errors: Family::default(),
            container_assignments: Family::default(),
            admission_duration: Histogram::new(latency_buckets()),
            policy_info: Family::default(),
            swaps: Family::default(),
            evaluations: Family::default(),
            evaluation_duration: Histogram::new(latency_buckets()),
            reconciles: Family::default(),
            cgroup_writes: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "kubelet_memory_qos_memory_min_bytes",
            "memory.min written to a pod or container cgroup (KEP-2570)",
            m.memory_min_bytes.clone(),
        );
        registry.register(
            "kubelet_memory_qos_memory_high_bytes",
            "memory.high written to a pod or container cgroup (KEP-2570)",
            m.memory_high_bytes.clone(),
        );
        registry.register(
            "kubelet_memory_qos_throttle_events",
            "memory.high throttling events of a cgroup (memory.events `high`)",
            m.throttle_events.clone(),
        );
        registry.register(
            "resource_manager_allocations",
            "exclusive resource allocations by the CPU and memory managers (KEP-5526)",
            m.allocations.clone(),
        );
        registry.register(
            "resource_manager_allocation_errors",
            "failed resource manager allocations (admission rejections)",
            m.allocation_errors.clone(),
        );
        registry.register(
            "resource_manager_container_assignments",
            "containers by the kind of CPUs they run on",
            m.container_assignments.clone(),
        );
        registry.register(
            "topology_manager_admission_duration_seconds",
            "time to admit one pod through the topology, CPU and memory managers",
            m.admission_duration.clone(),
        );
        registry.register(
            "podpolicy_policy_info",
            "the serving policy component (value 1)",
            m.policy_info.clone(),
        );
        registry.register(
            "podpolicy_policy_swaps",
            "policy swaps by result (swapped, rolled_back, rejected)",
            m.swaps.clone(),
        );
        registry.register(
            "podpolicy_evaluations",
            "pod evaluations by result (ok, rejected, error)",
            m.evaluations.clone(),
        );
        registry.register(
            "podpolicy_evaluation_duration_seconds",
            "time to validate, default and evaluate one pod through the component",
            m.evaluation_duration.clone(),
        );
        registry.register(
            "podpolicy_reconciles",
            "reconcile passes by result (ok, error)",
            m.reconciles.clone(),
        );
        registry.register(
            "podpolicy_cgroup_writes",
            "cgroup files written",
            m.cgroup_writes.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Record the serving policy (replacing the previous one).
    pub fn set_policy(&self, version: &str, digest: &str) {
        self.policy_info.clear();
        self.policy_info
            .get_or_create(&PolicyLabels {
                version: version.to_string(),
                digest: digest.to_string(),
            })
            .set(1);
    }

    /// Count one outcome in a result family.
    pub fn count(family: &Family<ResultLabels, Counter>, result: &str) {
        family
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }

    /// Set a counter read from the kernel (e.g. memory.events).
    pub fn set_counter(counter: &Counter, value: u64) {
        let inner: &AtomicU64 = counter.inner();
        inner.store(value, std::sync::atomic::Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

/// Serve `/metrics` and `/healthz` on `addr` from a background thread with
/// its own small tokio runtime. Returns the bound address (port 0 picks
/// one). The thread runs until the process ends.
pub fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<SocketAddr> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the metrics runtime")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .with_context(|| format!("binding the metrics endpoint {addr}"))?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.render(),
                    )
                }
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }));
    std::thread::Builder::new()
        .name("podpolicy-metrics".into())
        .spawn(move || {
            if let Err(e) = runtime.block_on(async { axum::serve(listener, app).await }) {
                tracing::error!(error = %e, "the metrics endpoint stopped");
            }
        })
        .context("starting the metrics thread")?;
    Ok(bound)
}
