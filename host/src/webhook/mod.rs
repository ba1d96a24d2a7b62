//! `podpolicy webhook`: the policy component behind a Kubernetes admission
//! webhook, over HTTPS.
//!
//! - `POST /mutate`: API-server defaulting of pod resources as a JSONPatch.
//! - `POST /validate`: validation, and the in-place resize rules for an
//!   update that changes only resources.
//! - `GET /healthz` (the process serves), `GET /readyz` (the serving policy
//!   instantiates and answers), `GET /metrics` (OpenMetrics text).
//!
//! What a review means is in [`review`]; this module is the server around
//! it. Each review takes the serving policy from the [`PolicySlot`] once, so
//! a hot swap never changes the policy under a request in flight. Evaluation
//! runs off the async runtime on `--max-concurrency` evaluation threads
//! (module `pool`), each with the node settings prepared in a warm policy
//! instance (`runtime::PreparedPolicy`), behind a semaphore of as
//! many permits; the policy keeps its own fuel, epoch and memory limits. Bodies above
//! `--max-body-bytes` get 413, a review that misses `--request-timeout` gets
//! 504, a policy failure gets 500: HTTP errors, so that the webhook
//! configuration's `failurePolicy` decides what the API server does, while a
//! pod the policy rejects gets a denied review with every field error.
//!
//! Connections: at most `--max-connections` at once (the accept loop waits
//! for one to close before it accepts another, so further clients wait in
//! the listen backlog), and each one must finish its TLS handshake, and send
//! each request's headers, within [`DEFAULT_HEADER_TIMEOUT`] of connecting or
//! of its previous answer, and no write of an answer may wait that long for
//! the client to read ([`crate::write_deadline`]): idle, half-sent and
//! never-read connections are closed, so they cannot hold the places of the
//! API servers' connections for long.
//!
//! Every flag has a range ([`WebhookOptions::validate`], and the parsers in
//! [`flags`] that `main` gives clap), and the wasmtime instance pool must
//! hold a warm instance per evaluation thread plus
//! [`crate::runtime::POOL_HEADROOM`]: [`start`] refuses a policy loaded
//! before [`crate::runtime::reserve_instances`] sized the pool.
//!
//! [`start`] binds (port 0 works), serves in the current tokio runtime and
//! returns the bound address and a handle that shuts down gracefully; tests
//! and benchmarks run the server in-process this way. [`run`] is the
//! command: its own runtime, until SIGTERM or SIGINT.

mod metrics;
mod pool;

use crate::write_deadline::WriteDeadline;
pub mod review;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use axum::Router;
use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http_body_util::BodyExt as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use crate::bindings::NodeSettings;
use crate::runtime::{MAX_POOL_INSTANCES, POOL_HEADROOM};
use crate::swap::{PolicySlot, short};
use metrics::Metrics;
use review::{Endpoint, Outcome};

/// `--listen` default.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:8443";
/// `--max-body-bytes` default: the API server stores objects up to ~1.5 MiB
/// and an UPDATE review carries two of them, base64 nowhere.
pub const DEFAULT_MAX_BODY_BYTES: usize = 6 << 20;
/// `--request-timeout` default: below the manifests' `timeoutSeconds: 5`, so
/// the API server gets our answer (a 504) rather than its own timeout.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(3000);
/// `--max-connections` default: far more than the API servers open (one
/// connection per review in flight from each), far fewer than the file
/// descriptors a container gets.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How long a connection may take for its TLS handshake, and for each
/// request's headers counted from the connection or its previous answer
/// (so also how long it may stay idle between reviews).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// `--max-concurrency` upper bound: one evaluation thread and one pooled
/// policy instance each, and every pooled instance reserves 4 GiB of
/// address space (see [`crate::runtime::MAX_POOL_INSTANCES`]).
pub const MAX_CONCURRENCY: usize = MAX_POOL_INSTANCES - POOL_HEADROOM;
/// `--max-body-bytes` lower bound: a review of an ordinary pod is a few KiB.
pub const MIN_BODY_BYTES: usize = 4 << 10;
/// `--max-body-bytes` upper bound: what the server also drains after a 413.
pub const MAX_BODY_BYTES: usize = DRAIN_LIMIT;
/// `--request-timeout` upper bound: the API server waits at most 30 s for a
/// webhook (`timeoutSeconds` 1 to 30); nobody reads a later answer.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// `--max-connections` upper bound.
pub const MAX_CONNECTIONS: usize = 65_536;

/// Reviews that may wait in the evaluation queue per evaluation thread.
/// One is enough to keep a thread busy: it finds its next review queued
/// instead of idling for the round trip that hands it one.
const QUEUED_PER_THREAD: usize = 1;

/// Readiness checks running at once, each on a fresh instance (within
/// [`POOL_HEADROOM`]); more wait for one of them.
const ONE_SHOT_CALLS: usize = 2;
/// How long shutdown waits for requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// After the body limit is hit, this much more is read and dropped so the
/// client sees the 413 instead of a reset connection; past it, we hang up.
const DRAIN_LIMIT: usize = 64 << 20;

/// How the server runs.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Node settings the policy sees: feature gates and defaults. The
    /// webhook is cluster-side, so by default [`crate::empty_node`] (every
    /// Kubernetes 1.36 default, no capacity).
    pub node: NodeSettings,
    /// Policy evaluations running at once: the number of evaluation
    /// threads. As many more may wait queued; further requests wait for a
    /// place (within their deadline) without holding any.
    pub max_concurrency: usize,
    /// Largest request body accepted (413 above).
    pub max_body_bytes: usize,
    /// Deadline for one review, from its headers to the answer (504 after).
    pub request_timeout: Duration,
    /// Connections served at once; the accept loop waits while this many
    /// are open.
    pub max_connections: usize,
    /// Time allowed for the TLS handshake, and for each request's headers
    /// from the connection or the previous answer (idle time included).
    pub header_timeout: Duration,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            listen: DEFAULT_LISTEN
                .parse()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 8443))),
            node: crate::empty_node(),
            max_concurrency: default_concurrency(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

impl WebhookOptions {
    /// Every bound the flags have, checked again for callers that build
    /// options in code; the error names the flag.
    pub fn validate(&self) -> Result<()> {
        let check = |flag: &str, value: u64, min: u64, max: u64, why: &str| {
            flags::in_range(value, min, max, why).map_err(|e| anyhow!("{flag}: {e}"))
        };
        check(
            "--max-concurrency",
            self.max_concurrency as u64,
            1,
            MAX_CONCURRENCY as u64,
            flags::CONCURRENCY_WHY,
        )?;
        check(
            "--max-body-bytes",
            self.max_body_bytes as u64,
            MIN_BODY_BYTES as u64,
            MAX_BODY_BYTES as u64,
            flags::BODY_WHY,
        )?;
        check(
            "--request-timeout",
            u64::try_from(self.request_timeout.as_millis()).unwrap_or(u64::MAX),
            1,
            MAX_REQUEST_TIMEOUT.as_millis() as u64,
            flags::TIMEOUT_WHY,
        )?;
        check(
            "--max-connections",
            self.max_connections as u64,
            1,
            MAX_CONNECTIONS as u64,
            flags::CONNECTIONS_WHY,
        )?;
        if self.header_timeout.is_zero() {
            anyhow::bail!("the header timeout must be above zero");
        }
        Ok(())
    }
}

/// The flags' parsers for clap: a number in range, or a message that says
/// the range and why (clap names the flag and exits 2).
pub mod flags {
    use super::{
        MAX_BODY_BYTES, MAX_CONCURRENCY, MAX_CONNECTIONS, MAX_REQUEST_TIMEOUT, MIN_BODY_BYTES,
    };

    pub(super) const CONCURRENCY_WHY: &str = "each evaluation thread keeps a policy instance from the wasmtime pool, and each pooled instance reserves 4 GiB of address space";
    pub(super) const BODY_WHY: &str =
        "a review of an ordinary pod is a few KiB; bodies are held in memory while they are read";
    pub(super) const TIMEOUT_WHY: &str =
        "milliseconds; the API server waits at most 30 s (timeoutSeconds) for a webhook";
    pub(super) const CONNECTIONS_WHY: &str =
        "each connection holds a file descriptor and a TLS session";

    /// `value` within `min..=max`, or why not.
    pub(super) fn in_range(value: u64, min: u64, max: u64, why: &str) -> Result<u64, String> {
        if (min..=max).contains(&value) {
            Ok(value)
        } else {
            Err(format!("{value} is not in {min}..={max} ({why})"))
        }
    }

    fn number(text: &str, min: u64, max: u64, why: &str) -> Result<u64, String> {
        let value = text
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("`{text}` is not a whole number in {min}..={max} ({why})"))?;
        in_range(value, min, max, why)
    }

    /// `--max-concurrency N`: 1 to [`MAX_CONCURRENCY`].
    pub fn max_concurrency(text: &str) -> Result<usize, String> {
        number(text, 1, MAX_CONCURRENCY as u64, CONCURRENCY_WHY).map(|v| v as usize)
    }

    /// `--max-body-bytes N`: [`MIN_BODY_BYTES`] to [`MAX_BODY_BYTES`].
    pub fn max_body_bytes(text: &str) -> Result<usize, String> {
        number(text, MIN_BODY_BYTES as u64, MAX_BODY_BYTES as u64, BODY_WHY).map(|v| v as usize)
    }

    /// `--request-timeout MS`: 1 ms to [`MAX_REQUEST_TIMEOUT`], in milliseconds.
    pub fn request_timeout_ms(text: &str) -> Result<u64, String> {
        number(text, 1, MAX_REQUEST_TIMEOUT.as_millis() as u64, TIMEOUT_WHY)
    }

    /// `--max-connections N`: 1 to [`MAX_CONNECTIONS`].
    pub fn max_connections(text: &str) -> Result<usize, String> {
        number(text, 1, MAX_CONNECTIONS as u64, CONNECTIONS_WHY).map(|v| v as usize)
    }
}

/// One evaluation per CPU: evaluation is CPU-bound, more would only queue
/// inside the blocking pool instead of in front of it. At most
/// [`MAX_CONCURRENCY`], on the largest machines too.
pub fn default_concurrency() -> usize {
    std::thread::available_parallelism()
        .map_or(2, usize::from)
        .min(MAX_CONCURRENCY)
}

/// State shared by the handlers.
struct Shared {
    slot: Arc<PolicySlot>,
    node: Arc<NodeSettings>,
    permits: Arc<Semaphore>,
    one_shot: Arc<Semaphore>,
    pool: pool::EvaluationPool,
    max_body_bytes: usize,
    request_timeout: Duration,
    metrics: Metrics,
}

/// A running server.
pub struct WebhookServer {
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookServer {
    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stop accepting connections, let requests in flight finish (up to
    /// 10 s), then return.
    pub async fn shutdown(self) -> Result<()> {
        // The loop may have ended already; then there is nobody to tell.
        let _ = self.shutdown.send(true);
        self.task
            .await
            .map_err(|e| anyhow!("the webhook server task failed: {e}"))
    }
}

/// Bind `options.listen` and serve in the current tokio runtime.
pub async fn start(
    options: WebhookOptions,
    tls: Arc<rustls::ServerConfig>,
    slot: Arc<PolicySlot>,
) -> Result<WebhookServer> {
    options.validate()?;
    let policy = slot.current();
    let needed = options.max_concurrency + POOL_HEADROOM;
    if policy.pool_instances() < needed {
        anyhow::bail!(
            "--max-concurrency {} needs {needed} policy instances (a warm one per evaluation thread and {POOL_HEADROOM} for one-shot calls), but the policy's wasmtime pool holds {}: size it with podpolicy::runtime::reserve_instances({}) before loading the policy",
            options.max_concurrency,
            policy.pool_instances(),
            options.max_concurrency
        );
    }
    let listener = TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    let local_addr = listener.local_addr().context("reading the bound address")?;
    let metrics = Metrics::new();
    // Preparing the node in a warm instance per thread takes a while for
    // many threads: off the async workers.
    let threads = options.max_concurrency;
    let warm = metrics.warm_instances().clone();
    let node = Arc::new(options.node);
    let pool = {
        let node = node.clone();
        tokio::task::spawn_blocking(move || {
            pool::EvaluationPool::start(threads, &policy, &node, &warm)
        })
        .await
        .map_err(|e| anyhow!("starting the evaluation threads: {e}"))??
    };
    let shared = Arc::new(Shared {
        slot,
        node,
        permits: Arc::new(Semaphore::new(
            options
                .max_concurrency
                .saturating_mul(QUEUED_PER_THREAD + 1),
        )),
        one_shot: Arc::new(Semaphore::new(ONE_SHOT_CALLS)),
        pool,
        max_body_bytes: options.max_body_bytes,
        request_timeout: options.request_timeout,
        metrics,
    });
    let (shutdown, shutdown_rx) = watch::channel(false);
    let limits = ConnectionLimits {
        max_connections: options.max_connections,
        header_timeout: options.header_timeout,
        open: shared.metrics.connections().clone(),
    };
    let task = tokio::spawn(accept_loop(
        listener,
        TlsAcceptor::from(tls),
        router(shared),
        limits,
        shutdown_rx,
    ));
    Ok(WebhookServer {
        local_addr,
        shutdown,
        task,
    })
}

/// The command: serve until SIGTERM or SIGINT, then shut down gracefully.
pub fn run(
    options: WebhookOptions,
    tls: rustls::ServerConfig,
    slot: Arc<PolicySlot>,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("podpolicy-webhook")
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(async move {
        let policy = slot.current();
        let server = start(options, Arc::new(tls), slot.clone()).await?;
        eprintln!(
            "podpolicy webhook: serving https://{} with policy {} (sha256:{})",
            server.local_addr(),
            policy.info().policy_version,
            short(policy.digest())
        );
        drop(policy);
        crate::termination_signal().await?;
        eprintln!("podpolicy webhook: shutting down");
        server.shutdown().await
    })
}

/// How many connections, and how long they may stay silent.
struct ConnectionLimits {
    max_connections: usize,
    header_timeout: Duration,
    /// Open connections (a gauge on /metrics).
    open: prometheus_client::metrics::gauge::Gauge,
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    limits: ConnectionLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let places = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        // A place first: at the cap, the next client waits in the listen
        // backlog until a connection closes (the timeouts bound how long).
        let place = tokio::select! {
            place = places.clone().acquire_owned() => match place {
                Ok(place) => place,
                // Never closed.
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        // Reviews are small request/response pairs: do not wait for Nagle.
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        let watcher = graceful.watcher();
        let header_timeout = limits.header_timeout;
        let open = OpenConnection::new(place, limits.open.clone());
        tokio::spawn(async move {
            let _open = open;
            // A client that stops reading its answers loses the connection
            // after the same time a silent one does.
            let tcp = WriteDeadline::new(tcp, header_timeout);
            let stream = match tokio::time::timeout(header_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true);
            let connection = http.serve_connection(TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("shutdown: connections still open after the grace period");
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(shared)
}

async fn mutate(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    handle(shared, Endpoint::Mutate, request).await
}

async fn validate(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    handle(shared, Endpoint::Validate, request).await
}

async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready when the serving policy instantiates and answers `policy-info`.
/// At most [`ONE_SHOT_CALLS`] checks run at once (each holds a fresh
/// instance from the pool's headroom); more wait for their turn.
async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    // Never closed, so this only waits.
    let turn = shared.one_shot.clone().acquire_owned().await.ok();
    let policy = shared.slot.current();
    let checked = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        policy
            .call(|p, store| p.call_policy_info(store))
            .map(|info| (info.policy_version, policy.digest().to_string()))
    })
    .await;
    match checked {
        Ok(Ok((version, digest))) => text(
            StatusCode::OK,
            format!("ready: policy {version} (sha256:{})\n", short(&digest)),
        ),
        Ok(Err(e)) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the serving policy fails: {e:#}\n"),
        ),
        Err(e) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: the readiness check failed: {e}\n"),
        ),
    }
}

async fn metrics_text(State(shared): State<Arc<Shared>>) -> Response {
    let mut response = shared.metrics.render(&shared.slot).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// What a review endpoint answers.
enum Reply {
    /// A review (allowed or denied) with HTTP 200.
    Review(review::Verdict),
    /// No review: an HTTP error with a one-line reason.
    Error {
        status: StatusCode,
        result: &'static str,
        message: String,
    },
}

impl Reply {
    fn error(status: StatusCode, result: &'static str, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            result,
            message: message.into(),
        }
    }
}

async fn handle(shared: Arc<Shared>, endpoint: Endpoint, request: Request) -> Response {
    let started = Instant::now();
    let deadline = shared.request_timeout;
    let reply = match tokio::time::timeout(deadline, answer(&shared, endpoint, request)).await {
        Ok(reply) => reply,
        Err(_) => Reply::error(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            format!(
                "podpolicy: the review did not finish within the {} ms request deadline",
                deadline.as_millis()
            ),
        ),
    };
    let (result, response) = match reply {
        Reply::Review(verdict) => {
            let mut response = Response::new(Body::from(review::to_body(&verdict.response)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            (verdict.outcome.name(), response)
        }
        Reply::Error {
            status,
            result,
            message,
        } => {
            if status.is_server_error() {
                tracing::warn!(endpoint = endpoint.name(), %status, %message, "review failed");
            } else {
                tracing::debug!(endpoint = endpoint.name(), %status, %message, "bad review");
            }
            (result, text(status, format!("{message}\n")))
        }
    };
    shared
        .metrics
        .record(endpoint.name(), result, started.elapsed());
    response
}

async fn answer(shared: &Arc<Shared>, endpoint: Endpoint, request: Request) -> Reply {
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Reply::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("expected Content-Type application/json, got `{content_type}`"),
        );
    }
    let body = match read_body(request.into_body(), shared.max_body_bytes).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => {
            return Reply::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the request body is larger than the limit of {} bytes (--max-body-bytes)",
                    shared.max_body_bytes
                ),
            );
        }
        Err(BodyError::Read(e)) => {
            return Reply::error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("reading the request body: {e}"),
            );
        }
    };
    let request = match review::parse(&body) {
        Ok(request) => request,
        Err(e) => return Reply::error(StatusCode::BAD_REQUEST, "bad_request", e.0),
    };
    drop(body);
    if !review::applies(&request) {
        return Reply::Review(review::allow(&request.uid, Outcome::Ignored));
    }
    // The semaphore is never closed, so acquiring only waits.
    let Ok(permit) = shared.permits.clone().acquire_owned().await else {
        return Reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "error",
            "the server is shutting down",
        );
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = pool::Job {
        policy: shared.slot.current(),
        node: shared.node.clone(),
        endpoint,
        request,
        reply,
        // Held until the evaluation ends, even when the request timed out
        // and nobody waits for it any more: the bound is on running work.
        guards: Box::new((permit, InFlight::new(shared.metrics.in_flight().clone()))),
    };
    if shared.pool.submit(job).is_err() {
        return Reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "error",
            "the evaluation threads are gone (shutting down)",
        );
    }
    match answer.await {
        Ok(Ok(verdict)) => Reply::Review(verdict),
        Ok(Err(e)) => Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error",
            format!("podpolicy: the policy failed on this review: {e:#}"),
        ),
        Err(_) => Reply::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "error",
            "podpolicy: the evaluation thread dropped the review",
        ),
    }
}

/// A connection's place under `--max-connections`, counted in the open
/// connections gauge, while alive.
struct OpenConnection {
    _place: tokio::sync::OwnedSemaphorePermit,
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl OpenConnection {
    fn new(
        place: tokio::sync::OwnedSemaphorePermit,
        gauge: prometheus_client::metrics::gauge::Gauge,
    ) -> OpenConnection {
        gauge.inc();
        OpenConnection {
            _place: place,
            gauge,
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Counts an evaluation in flight while alive.
struct InFlight(prometheus_client::metrics::gauge::Gauge);

impl InFlight {
    fn new(gauge: prometheus_client::metrics::gauge::Gauge) -> InFlight {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

enum BodyError {
    TooLarge,
    Read(String),
}

/// Read the body up to `limit` bytes. Past the limit, read and drop up to
/// [`DRAIN_LIMIT`] more so that the 413 reaches a client still sending
/// (closing with unread data would reset the connection first).
async fn read_body(mut body: Body, limit: usize) -> std::result::Result<Bytes, BodyError> {
    let mut data = Vec::new();
    let mut too_large = false;
    let mut drained = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        if too_large {
            drained = drained.saturating_add(chunk.len());
            if drained > DRAIN_LIMIT {
                break;
            }
        } else if data.len().saturating_add(chunk.len()) > limit {
            too_large = true;
            data = Vec::new();
        } else if data.is_empty() && body.is_end_stream() {
            // The usual case: the whole body in one frame, no copy.
            return Ok(chunk);
        } else {
            data.extend_from_slice(&chunk);
        }
    }
    if too_large {
        Err(BodyError::TooLarge)
    } else {
        Ok(Bytes::from(data))
    }
}
