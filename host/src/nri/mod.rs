//! `podpolicy nri`: an NRI (Node Resource Interface) plugin. The container
//! runtime (containerd, CRI-O) calls it for every pod and container; it
//! answers with the values the policy component computes.
//!
//! - [`mux`]: the socket's frame multiplexer (conn 1 `Plugin`, conn 2 `Runtime`).
//! - [`plugin`]: the `Plugin` service: each RPC within a deadline, failing open.
//! - [`engine`]: the synchronous core: evaluate, admit, release, commit, pod cgroups.
//! - [`pod_from_nri`]: the policy's inputs rebuilt from what NRI carries.
//! - [`proto`]: messages and ttrpc services generated from the vendored
//!   NRI v0.12.2 `api.proto` (`host/proto/nri/`); it speaks to runtimes of
//!   NRI v0.8.0 and later (protobuf fields only ever get added), and
//!   subscribes only to the events the runtime's version knows.
//!
//! [`run`] dials the socket (retrying with backoff while it is missing),
//! serves conn 1, registers on conn 2, and reconnects when the runtime
//! closes the connection, until SIGTERM or SIGINT.

pub mod engine;
pub mod mux;
pub mod plugin;
pub mod pod_from_nri;

pub mod proto {
    //! Generated from `host/proto/nri/api.proto` (NRI v0.12.2) by `build.rs`.
    #![allow(missing_docs, clippy::all, clippy::pedantic, unused_qualifications)]
    #![allow(
        non_camel_case_types,
        non_snake_case,
        non_upper_case_globals,
        dead_code
    )]
    pub mod api {
        //! NRI messages.
        #![allow(missing_docs, clippy::all, unused_mut, unused_results, trivial_casts)]
        #![allow(
            non_camel_case_types,
            non_snake_case,
            non_upper_case_globals,
            dead_code
        )]
        include!(concat!(env!("OUT_DIR"), "/nri/api.rs"));
    }
    pub mod api_ttrpc {
        //! NRI's `Runtime` and `Plugin` ttrpc services (async).
        #![allow(missing_docs, clippy::all, unused_imports, unused_results, dead_code)]
        include!(concat!(env!("OUT_DIR"), "/nri/api_ttrpc.rs"));
    }
}

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt as _;
use ttrpc::r#async::transport::{Listener, Socket};

use self::engine::{Engine, EngineOptions};
use self::plugin::PluginService;
use self::proto::{api, api_ttrpc};
use crate::metrics::Metrics;
use crate::runtime::{Cache, Limits};
use crate::swap::PolicySlot;

/// The NRI release of the vendored `api.proto`, sent in `RegisterPlugin`.
pub const PROTO_VERSION: &str = "v0.12.2";

/// NRI's event numbers (`Event` in `api.proto`; stable since v0.2).
pub mod event {
    /// `RUN_POD_SANDBOX`.
    pub const RUN_POD_SANDBOX: i32 = 1;
    /// `STOP_POD_SANDBOX`.
    pub const STOP_POD_SANDBOX: i32 = 2;
    /// `REMOVE_POD_SANDBOX`.
    pub const REMOVE_POD_SANDBOX: i32 = 3;
    /// `CREATE_CONTAINER`.
    pub const CREATE_CONTAINER: i32 = 4;
    /// `UPDATE_CONTAINER`.
    pub const UPDATE_CONTAINER: i32 = 8;
    /// `STOP_CONTAINER`.
    pub const STOP_CONTAINER: i32 = 10;
    /// `REMOVE_CONTAINER`.
    pub const REMOVE_CONTAINER: i32 = 11;
    /// `UPDATE_POD_SANDBOX` (NRI v0.10.0 and later: a pod-level resize).
    pub const UPDATE_POD_SANDBOX: i32 = 12;
    /// `LAST` up to NRI v0.9: every valid event is below it (mask `0x7ff`).
    pub const LAST_BEFORE_V0_10: i32 = 12;
}

/// The bit of one event in `ConfigureResponse.events`.
pub const fn bit(event: i32) -> i32 {
    1 << (event - 1)
}

/// The events every supported runtime knows, each implemented by the
/// plugin (`CreateContainer`, `UpdateContainer`, `StopContainer`,
/// `StateChange`): a runtime closes the connection of a plugin that
/// subscribes to an event it does not know.
pub const BASE_EVENTS: i32 = bit(event::RUN_POD_SANDBOX)
    | bit(event::REMOVE_POD_SANDBOX)
    | bit(event::CREATE_CONTAINER)
    | bit(event::UPDATE_CONTAINER)
    | bit(event::STOP_CONTAINER)
    | bit(event::REMOVE_CONTAINER);

/// The mask of every event NRI v0.8.0 / v0.9 knows.
pub const EVENTS_BEFORE_V0_10: i32 = bit(event::LAST_BEFORE_V0_10) - 1;

const _: () = assert!(BASE_EVENTS & !EVENTS_BEFORE_V0_10 == 0);

/// What the plugin knows of the runtime's NRI from `Configure`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeNri {
    /// The runtime's NRI version as (major, minor, patch), when it said
    /// (`NRI_version`, NRI v0.12+) or its name and version tell.
    pub version: Option<(u64, u64, u64)>,
    /// Whether it has `UpdatePodSandbox` (NRI v0.10.0; CRI-O 1.33 ships
    /// a pre-release NRI that has it).
    pub update_pod_sandbox: bool,
    /// How that was found, for the log line.
    pub basis: String,
}

/// `v2.1.9`, `2.1.9+unknown`, `v0.9.1-0.2025...` -> (2, 1, 9) ...
fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let core = text.trim().trim_start_matches('v');
    let core = core.split(['-', '+', ' ']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// The runtime's NRI, from what `Configure` carries: the NRI version when
/// the runtime sends it, else the runtime's own release (the NRI each
/// containerd and CRI-O release vendors: containerd 2.2 and CRI-O 1.34 ship
/// v0.10.0, CRI-O 1.33 a pre-release with `UpdatePodSandbox`; the NRI
/// project's own stub infers the same way). An unknown runtime gets the
/// events every NRI version knows.
pub fn runtime_nri(runtime_name: &str, runtime_version: &str, nri_version: &str) -> RuntimeNri {
    if let Some(v) = parse_version(nri_version).filter(|_| !nri_version.is_empty()) {
        return RuntimeNri {
            version: Some(v),
            update_pod_sandbox: v >= (0, 10, 0),
            basis: format!("the runtime's NRI version {nri_version}"),
        };
    }
    let release = parse_version(runtime_version);
    let (version, update_pod_sandbox) = match (runtime_name, release) {
        ("containerd", Some(r)) if r >= (2, 2, 0) => (Some((0, 10, 0)), true),
        ("containerd", Some(r)) if r >= (1, 7, 26) => (Some((0, 8, 0)), false),
        ("cri-o", Some(r)) if r >= (1, 34, 0) => (Some((0, 10, 0)), true),
        ("cri-o", Some(r)) if r >= (1, 33, 0) => (Some((0, 9, 1)), true),
        _ => (None, false),
    };
    let basis = match version {
        Some(_) => format!("inferred from {runtime_name} {runtime_version}"),
        None => format!(
            "unknown for {runtime_name:?} {runtime_version:?}: the events every NRI version knows"
        ),
    };
    RuntimeNri {
        version,
        update_pod_sandbox,
        basis,
    }
}

impl RuntimeNri {
    /// The events to subscribe to.
    pub fn events(&self) -> i32 {
        if self.update_pod_sandbox {
            BASE_EVENTS | bit(event::UPDATE_POD_SANDBOX)
        } else {
            BASE_EVENTS
        }
    }
}

/// The longest the plugin takes to answer one request (the runtime's
/// default plugin request timeout is 2 s): past it, "no change".
pub const ANSWER_DEADLINE: Duration = Duration::from_millis(1000);

/// Where the runtime's NRI socket is by default.
pub const DEFAULT_SOCKET: &str = "/var/run/nri/nri.sock";

/// Everything `podpolicy nri` is configured with.
#[derive(Clone, Debug)]
pub struct NriOptions {
    /// The runtime's NRI socket.
    pub socket: PathBuf,
    /// The engine's settings.
    pub engine: EngineOptions,
    /// Policy versions to hot swap.
    pub policy_dir: Option<PathBuf>,
    /// Compiled-policy cache (for candidates).
    pub cache: Cache,
    /// Sandbox limits per call (candidates).
    pub limits: Limits,
    /// Prometheus endpoint, `None` = off.
    pub metrics_addr: Option<SocketAddr>,
    /// `RegisterPlugin.plugin_name`.
    pub plugin_name: String,
    /// `RegisterPlugin.plugin_idx` (two digits).
    pub plugin_idx: String,
    /// Serve one connection and exit when the runtime closes it.
    pub once_connected: bool,
    /// Per-request answer deadline.
    pub deadline: Duration,
}

/// Set by SIGTERM / SIGINT (or a test) to stop [`run_until`].
pub type StopFlag = Arc<AtomicBool>;

/// Run the plugin until SIGTERM or SIGINT.
pub fn run(options: NriOptions, slot: Arc<PolicySlot>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the NRI runtime")?;
    let stop: StopFlag = Arc::new(AtomicBool::new(false));
    let metrics = Arc::new(Metrics::new());
    runtime.block_on(async {
        let stop_signal = stop.clone();
        tokio::spawn(async move {
            match crate::termination_signal().await {
                Ok(()) => {
                    tracing::info!("signal received; stopping");
                    stop_signal.store(true, Ordering::SeqCst);
                }
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "no signal handler"),
            }
        });
        run_until(options, slot, metrics, stop).await
    })
}

async fn stopped(stop: &StopFlag) {
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Run the plugin until `stop` is set (see [`run`]).
pub async fn run_until(
    options: NriOptions,
    slot: Arc<PolicySlot>,
    metrics: Arc<Metrics>,
    stop: StopFlag,
) -> Result<()> {
    let policy = slot.current();
    metrics.set_policy(&policy.info().policy_version, policy.digest());
    let engine = {
        let (engine_options, slot) = (options.engine.clone(), slot.clone());
        let mut engine = tokio::task::spawn_blocking(move || Engine::start(engine_options, slot))
            .await
            .context("starting the NRI engine")??;
        // Every answer below is followed by `Engine::finish_recorded`
        // (`PluginService::answer`).
        engine.answer_on_durable_record(true);
        engine
    };
    let engine = Arc::new(Mutex::new(engine));
    let _watcher = match &options.policy_dir {
        Some(dir) => {
            let server = crate::policy_dir::PolicyDirServer::start(
                dir,
                &slot,
                options.cache.clone(),
                options.limits,
            )?;
            let (metrics, watched) = (metrics.clone(), slot.clone());
            Some(crate::policy_dir::watch_in_background(
                server,
                slot.clone(),
                Duration::from_millis(500),
                move |outcome| metrics.record_poll(outcome, &watched.current()),
            )?)
        }
        None => None,
    };
    if let Some(addr) = options.metrics_addr {
        // `serve` starts its own runtime: from a plain thread, not this one's.
        let served = metrics.clone();
        let bound = std::thread::spawn(move || crate::metrics::serve(addr, served))
            .join()
            .map_err(|_| anyhow::anyhow!("starting the metrics endpoint panicked"))??;
        tracing::info!(%bound, "metrics endpoint listening");
    }
    let mut backoff = Duration::from_millis(100);
    let mut waiting_logged = false;
    while !stop.load(Ordering::SeqCst) {
        let stream = match tokio::net::UnixStream::connect(&options.socket).await {
            Ok(stream) => stream,
            Err(e) => {
                if !waiting_logged {
                    tracing::info!(socket = %options.socket.display(), error = %e, "waiting for the runtime's NRI socket");
                    waiting_logged = true;
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stopped(&stop) => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        waiting_logged = false;
        match serve_connection(stream, &options, engine.clone(), metrics.clone(), &stop).await {
            Ok(()) => backoff = Duration::from_millis(100),
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "NRI connection failed"),
        }
        Metrics::count(&metrics.nri_connections, "closed");
        if options.once_connected || stop.load(Ordering::SeqCst) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stopped(&stop) => break,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
    tracing::info!("NRI plugin stopped");
    Ok(())
}

/// Serve one connection to the runtime until it closes or `stop` is set.
async fn serve_connection(
    stream: tokio::net::UnixStream,
    options: &NriOptions,
    engine: Arc<Mutex<Engine>>,
    metrics: Arc<Metrics>,
    stop: &StopFlag,
) -> Result<()> {
    let (mut mux, mut conns) = mux::Mux::split(stream, &[mux::PLUGIN_CONN, mux::RUNTIME_CONN]);
    let runtime_conn = conns.pop().expect("two connections");
    let plugin_conn = conns.pop().expect("two connections");
    // conn 1 first: the runtime may call Configure before registration returns.
    let service = Arc::new(PluginService::new(
        engine,
        metrics.clone(),
        options.deadline,
    ));
    let incoming = futures::stream::once(std::future::ready(Ok::<_, std::io::Error>(plugin_conn)))
        .chain(futures::stream::pending());
    let mut server = ttrpc::r#async::Server::new()
        .register_service(api_ttrpc::create_plugin(service.clone()))
        .add_listener(Listener::new(incoming));
    server
        .start()
        .await
        .map_err(|e| anyhow::anyhow!("serving the Plugin service: {e}"))?;
    let client =
        api_ttrpc::RuntimeClient::new(ttrpc::r#async::Client::new(Socket::new(runtime_conn)));
    let mut request = api::RegisterPluginRequest::new();
    request.plugin_name = options.plugin_name.clone();
    request.plugin_idx = options.plugin_idx.clone();
    request.NRI_version = PROTO_VERSION.into();
    let registered = tokio::select! {
        r = client.register_plugin(ttrpc::context::with_timeout(5_000_000_000), &request) => r,
        _ = mux.closed() => {
            let _ = tokio::time::timeout(Duration::from_secs(1), server.shutdown()).await;
            anyhow::bail!("the runtime closed the connection during registration");
        }
    };
    if let Err(e) = registered {
        let _ = tokio::time::timeout(Duration::from_secs(1), server.shutdown()).await;
        anyhow::bail!("RegisterPlugin failed: {e}");
    }
    service.set_runtime(client.clone());
    Metrics::count(&metrics.nri_connections, "registered");
    tracing::info!(socket = %options.socket.display(), name = %options.plugin_name, idx = %options.plugin_idx, "registered with the runtime");
    tokio::select! {
        _ = mux.closed() => tracing::info!("the runtime closed the NRI connection"),
        _ = stopped(stop) => {}
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), server.shutdown()).await;
    drop(client);
    drop(mux);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_nri_version_picks_update_pod_sandbox() {
        // containerd 2.1 vendors NRI v0.8.0 and closes a plugin that
        // subscribes to UpdatePodSandbox (seen with 2.1.9 here).
        let c21 = runtime_nri("containerd", "2.1.9+unknown", "");
        assert!(!c21.update_pod_sandbox);
        assert_eq!(c21.events(), 0x68d);
        assert_eq!(c21.events() & !EVENTS_BEFORE_V0_10, 0);
        let c22 = runtime_nri("containerd", "v2.2.0", "");
        assert!(c22.update_pod_sandbox);
        assert_eq!(c22.events(), 0x68d | 0x800);
        assert!(runtime_nri("cri-o", "1.33.2", "").update_pod_sandbox);
        assert!(!runtime_nri("cri-o", "1.32.9", "").update_pod_sandbox);
        assert!(runtime_nri("cri-o", "v1.34.1", "").update_pod_sandbox);
        // The version the runtime states wins over the inference.
        assert!(!runtime_nri("containerd", "v2.3.0", "v0.9.0").update_pod_sandbox);
        assert!(runtime_nri("something", "1.0", "v0.12.2").update_pod_sandbox);
        // Unknown runtimes and unparsable versions: the base events only.
        for (name, version) in [("stand-in", "nri-v0.8.0"), ("containerd", "main"), ("", "")] {
            let nri = runtime_nri(name, version, "unknown");
            assert_eq!(nri.events(), BASE_EVENTS, "{name} {version}");
            assert_eq!(nri.version, None);
        }
    }

    #[test]
    fn versions_parse_as_runtimes_print_them() {
        assert_eq!(parse_version("2.1.9+unknown"), Some((2, 1, 9)));
        assert_eq!(
            parse_version("v0.9.1-0.20250219030224-e597e7849f24"),
            Some((0, 9, 1))
        );
        assert_eq!(parse_version("v1.34"), Some((1, 34, 0)));
        assert_eq!(parse_version("devel"), None);
        assert_eq!(parse_version(""), None);
    }
}
