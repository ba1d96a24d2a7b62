//! Prometheus metrics of the node agent, with the KEPs' names, and the
//! HTTP endpoint that serves them (`/metrics`, `/healthz`, `/readyz`).
//!
//! prometheus-client appends `_total` to counters, so counters are
//! registered without it.
//!
//! The endpoint serves at most [`ServeOptions::max_connections`]
//! connections at once (the accept loop waits for one to close before it
//! accepts another), and a connection must send each request's headers
//! within [`ServeOptions::header_timeout`] of connecting or of its previous
//! answer, and read each answer without stalling a write that long
//! ([`crate::write_deadline`]): idle, half-sent and never-read connections
//! are closed, so that clients cannot use up the agent's file descriptors.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

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

/// A pod label: `namespace/name`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodLabels {
    /// `namespace/name`.
    pub pod: String,
}

/// An outcome label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// e.g. `ok`, `rejected`, `error`.
    pub result: String,
}

/// One NRI event and how it was answered.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NriEventLabels {
    /// e.g. `create_container`, `synchronize`.
    pub event: String,
    /// `answered`, `nothing`, `error` (no change), `timeout` (no change).
    pub outcome: String,
}

/// Every metric the agent exports.
pub struct Metrics {
    registry: Registry,
    /// The serving loop's heartbeat and how stale it may get before
    /// `/healthz` fails (see [`Metrics::watch_liveness`]).
    liveness: std::sync::Mutex<Option<(Arc<crate::swap::Heartbeat>, Duration)>>,
    /// `podpolicy_pod_applied{pod}`: 1 when the pod's cgroups hold the
    /// policy's values after the last pass, 0 when they could not be
    /// written (see `agent_status.json` for why).
    pub pod_applied: Family<PodLabels, Gauge>,
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
    /// `podpolicy_nri_events_total{event,outcome}` (`podpolicy nri`).
    pub nri_events: Family<NriEventLabels, Counter>,
    /// `podpolicy_nri_answer_seconds`: time to answer one NRI request.
    pub nri_answer_seconds: Histogram,
    /// `podpolicy_nri_connections_total{result}`: `registered`, `closed`.
    pub nri_connections: Family<ResultLabels, Counter>,
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
            liveness: std::sync::Mutex::new(None),
            pod_applied: Family::default(),
            nri_events: Family::default(),
            nri_answer_seconds: Histogram::new(latency_buckets()),
            nri_connections: Family::default(),
        };
        registry.register(
            "podpolicy_pod_applied",
            "1 when the pod's cgroups hold the policy's values after the last pass, 0 when writing them failed",
            m.pod_applied.clone(),
        );
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
        registry.register(
            "podpolicy_nri_events",
            "NRI requests by event and outcome (answered, nothing, error and timeout answer no change)",
            m.nri_events.clone(),
        );
        registry.register(
            "podpolicy_nri_answer_seconds",
            "time to answer one NRI request",
            m.nri_answer_seconds.clone(),
        );
        registry.register(
            "podpolicy_nri_connections",
            "connections to the runtime's NRI socket by result (registered, closed)",
            m.nri_connections.clone(),
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

    /// Log a policy-directory poll, count its swaps, rollbacks and
    /// rejections, and record the version now serving.
    pub fn record_poll(
        &self,
        outcome: &crate::policy_dir::PollOutcome,
        serving: &crate::runtime::PolicyRuntime,
    ) {
        outcome.log();
        for swap in &outcome.swapped {
            Metrics::count(
                &self.swaps,
                if swap.rollback {
                    "rolled_back"
                } else {
                    "swapped"
                },
            );
        }
        for _ in &outcome.rejected {
            Metrics::count(&self.swaps, "rejected");
        }
        self.set_policy(&serving.info().policy_version, serving.digest());
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

    /// Make `/healthz` fail once `heartbeat` has not beaten for `max_age`
    /// (a reconcile stuck in a read, a write or a call).
    pub fn watch_liveness(&self, heartbeat: Arc<crate::swap::Heartbeat>, max_age: Duration) {
        *self.liveness.lock().unwrap_or_else(|e| e.into_inner()) = Some((heartbeat, max_age));
    }

    /// Alive unless a watched heartbeat is older than its limit; `Err` says
    /// for how long it has not beaten.
    pub fn liveness(&self) -> std::result::Result<(), String> {
        let watched = self.liveness.lock().unwrap_or_else(|e| e.into_inner());
        match &*watched {
            Some((heartbeat, max_age)) if !heartbeat.is_alive(*max_age) => Err(format!(
                "the reconcile loop has not gone round for {} s (limit {} s)",
                heartbeat.age().as_secs(),
                max_age.as_secs()
            )),
            _ => Ok(()),
        }
    }

    /// Ready once a reconcile pass has succeeded (`podpolicy_reconciles_total{result="ok"}`
    /// above zero): the agent read its pods, evaluated them and applied the
    /// result at least once. `Err` says what it is waiting for.
    pub fn readiness(&self) -> std::result::Result<(), String> {
        let ok = self
            .reconciles
            .get(&ResultLabels {
                result: "ok".to_string(),
            })
            .map_or(0, |counter| counter.get());
        if ok > 0 {
            Ok(())
        } else {
            let failed = self
                .reconciles
                .get(&ResultLabels {
                    result: "error".to_string(),
                })
                .map_or(0, |counter| counter.get());
            Err(format!(
                "no reconcile pass has succeeded yet ({failed} failed; see agent_status.json)"
            ))
        }
    }
}

/// Connection limits of the metrics endpoint.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// Connections served at once; while this many are open, further
    /// clients wait in the listen backlog.
    pub max_connections: usize,
    /// Time allowed for each request's headers, from the connection or the
    /// previous answer: an idle or half-sent connection is closed after it.
    pub header_timeout: Duration,
}

impl Default for ServeOptions {
    /// 32 connections (Prometheus servers and the kubelet's probes need a
    /// few), 10 s.
    fn default() -> Self {
        ServeOptions {
            max_connections: 32,
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// Serve `/metrics`, `/healthz` and `/readyz` on `addr` from a background
/// thread with its own small tokio runtime, with the default
/// [`ServeOptions`]. Returns the bound address (port 0 picks one). The
/// thread runs until the process ends.
pub fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> Result<SocketAddr> {
    serve_with(addr, metrics, ServeOptions::default())
}

/// [`serve`] with other connection limits.
pub fn serve_with(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    options: ServeOptions,
) -> Result<SocketAddr> {
    if options.max_connections == 0 || options.header_timeout.is_zero() {
        anyhow::bail!(
            "the metrics endpoint needs at least one connection and a header timeout above zero"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the metrics runtime")?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(addr))
        .with_context(|| format!("binding the metrics endpoint {addr}"))?;
    let bound = listener.local_addr()?;
    let scraped = metrics.clone();
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = scraped.clone();
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
        .route("/healthz", {
            let metrics = metrics.clone();
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    match metrics.liveness() {
                        Ok(()) => (axum::http::StatusCode::OK, "ok".to_string()),
                        Err(why) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("stuck: {why}\n"),
                        ),
                    }
                }
            })
        })
        .route(
            "/readyz",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    match metrics.readiness() {
                        Ok(()) => (axum::http::StatusCode::OK, "ready\n".to_string()),
                        Err(why) => (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            format!("not ready: {why}\n"),
                        ),
                    }
                }
            }),
        );
    std::thread::Builder::new()
        .name("podpolicy-metrics".into())
        .spawn(move || runtime.block_on(accept_loop(listener, app, options)))
        .context("starting the metrics thread")?;
    Ok(bound)
}

/// Accept while there is a place, serve each connection on its own task
/// with the header timeout; runs until the process ends.
async fn accept_loop(listener: tokio::net::TcpListener, app: axum::Router, options: ServeOptions) {
    let places = Arc::new(tokio::sync::Semaphore::new(options.max_connections));
    loop {
        // The semaphore is never closed.
        let Ok(place) = places.clone().acquire_owned().await else {
            return;
        };
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                tracing::warn!(error = %e, "the metrics endpoint could not accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _place = place;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(options.header_timeout)
                .keep_alive(true);
            // A scraper that stops reading loses the connection too.
            let tcp = crate::write_deadline::WriteDeadline::new(tcp, options.header_timeout);
            let connection = http.serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "metrics connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::io::{ErrorKind, Read, Write};
    use std::net::TcpStream;

    use super::*;

    /// One request on its own connection: status and body.
    fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(addr).expect("connect");
        // A guard against a hang, not a measurement.
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("write");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("an answer");
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {text}"));
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_string())
    }

    /// Whether the server has closed `stream` already (without waiting).
    fn closed_now(stream: &mut TcpStream) -> bool {
        stream.set_nonblocking(true).expect("nonblocking");
        let mut buf = [0u8; 1024];
        let closed = loop {
            match stream.read(&mut buf) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
                Err(_) => break true,
            }
        };
        stream.set_nonblocking(false).expect("blocking");
        closed
    }

    /// Wait until the server closes `stream` (a 30 s guard against a hang).
    fn wait_closed(stream: &mut TcpStream) {
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("the server kept an idle connection open for 30 s")
                }
                Err(_) => return,
            }
        }
    }

    /// A client that sends request after request and never reads the
    /// answers fills its socket buffers, and the server's write of the
    /// next answer waits; it is cut off after the header timeout, so the
    /// one place it held serves the next scrape.
    #[test]
    fn a_client_that_never_reads_its_answers_is_disconnected() {
        let metrics = Arc::new(Metrics::new());
        let options = ServeOptions {
            max_connections: 1,
            header_timeout: Duration::from_millis(300),
        };
        let addr = serve_with("127.0.0.1:0".parse().unwrap(), metrics, options).unwrap();
        let hog = TcpStream::connect(addr).unwrap();
        let mut writer = hog.try_clone().unwrap();
        // Far more answers than the socket buffers hold; the writes end
        // with an error once the server gives up on the connection.
        let pipelining = std::thread::spawn(move || {
            let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
            for _ in 0..200_000 {
                if writer.write_all(request).is_err() {
                    return;
                }
            }
        });
        // Answered only once the hog's place is free again.
        let (status, _) = get(addr, "/healthz");
        assert_eq!(status, 200);
        let _ = hog.shutdown(std::net::Shutdown::Both);
        pipelining.join().unwrap();
    }

    /// More idle and half-sent connections than the cap: the server closes
    /// them after the header timeout, and a scrape waiting behind them is
    /// answered once they are gone.
    #[test]
    fn idle_and_half_sent_connections_are_closed_and_capped() {
        let metrics = Arc::new(Metrics::new());
        let options = ServeOptions {
            max_connections: 2,
            header_timeout: Duration::from_millis(300),
        };
        let addr = serve_with("127.0.0.1:0".parse().unwrap(), metrics, options).unwrap();
        // Both places: one connection says nothing, one stops inside its headers.
        let mut idle = TcpStream::connect(addr).unwrap();
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        // Beyond the cap: waits for a place, then idles too.
        let mut beyond = TcpStream::connect(addr).unwrap();

        let (status, body) = get(addr, "/metrics");
        assert_eq!(status, 200, "{body}");
        assert!(
            body.contains("\npodpolicy_cgroup_writes_total 0\n"),
            "{body}"
        );
        // The connections accept in order: the scrape got a place only after
        // the server had closed both that held them.
        assert!(closed_now(&mut idle), "the idle connection is still open");
        assert!(closed_now(&mut half), "the half-sent request is still open");
        wait_closed(&mut beyond);
        // And the endpoint still serves.
        assert_eq!(get(addr, "/healthz"), (200, "ok".to_string()));
    }

    /// `/readyz`: 503 until a reconcile pass succeeds, then 200; `/healthz`
    /// answers throughout.
    #[test]
    fn readyz_answers_once_a_reconcile_pass_succeeded() {
        let metrics = Arc::new(Metrics::new());
        let addr = serve("127.0.0.1:0".parse().unwrap(), metrics.clone()).unwrap();
        let (status, body) = get(addr, "/readyz");
        assert_eq!(status, 503, "{body}");
        Metrics::count(&metrics.reconciles, "error");
        let (status, body) = get(addr, "/readyz");
        assert_eq!(
            (status, body.as_str()),
            (
                503,
                "not ready: no reconcile pass has succeeded yet (1 failed; see agent_status.json)\n"
            )
        );
        assert_eq!(get(addr, "/healthz"), (200, "ok".to_string()));
        Metrics::count(&metrics.reconciles, "ok");
        assert_eq!(get(addr, "/readyz"), (200, "ready\n".to_string()));
    }
}
