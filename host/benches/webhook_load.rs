//! Load on the admission webhook over HTTPS on loopback (BENCHMARKS.md).
//!
//! Starts `podpolicy webhook` in-process (TLS with a self-signed rcgen
//! certificate, the embedded policy, default options) on its own tokio
//! runtime, then opens N keep-alive HTTPS connections from a client thread
//! of its own and, for a fixed time, sends AdmissionReviews of a 3-container pod, each
//! connection one request at a time. Prints throughput and latency
//! percentiles. Client and server share the machine.
//!
//! ```text
//! cargo bench -p podpolicy --bench webhook_load
//! cargo bench -p podpolicy --bench webhook_load -- --connections 16 --seconds 20 --mode mixed
//! ```
//!
//! `--mode mutate` (default) sends /mutate only; `mixed` alternates /mutate
//! and /validate on every connection.

#[path = "../../tests/e2e/webhook/client.rs"]
#[allow(dead_code)]
mod client;
mod product_allocator;
mod targets;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use podpolicy::runtime::{Cache, Limits, PolicyRuntime, PreparedPolicy};
use podpolicy::swap::PolicySlot;
use podpolicy::webhook::{WebhookOptions, start};
use serde_json::json;

struct Settings {
    connections: usize,
    seconds: u64,
    warmup_seconds: u64,
    mixed: bool,
    breakdown: bool,
    max_concurrency: Option<usize>,
}

fn settings() -> Result<Settings> {
    let mut settings = Settings {
        connections: 8,
        seconds: 10,
        warmup_seconds: 2,
        mixed: false,
        breakdown: false,
        max_concurrency: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            // cargo bench passes --bench to harness=false targets.
            "--bench" => {}
            "--connections" => settings.connections = value("--connections")?.parse()?,
            "--seconds" => settings.seconds = value("--seconds")?.parse()?,
            "--warmup" => settings.warmup_seconds = value("--warmup")?.parse()?,
            "--breakdown" => settings.breakdown = true,
            "--max-concurrency" => {
                settings.max_concurrency = Some(value("--max-concurrency")?.parse()?)
            }
            "--mode" => {
                settings.mixed = match value("--mode")?.as_str() {
                    "mutate" => false,
                    "mixed" => true,
                    other => bail!("--mode is mutate or mixed, not {other}"),
                }
            }
            other if other.starts_with('-') => bail!("unknown option {other}"),
            // A benchmark name filter: this bench has one.
            _ => {}
        }
    }
    if settings.connections == 0 || settings.seconds == 0 {
        bail!("--connections and --seconds must be at least 1");
    }
    Ok(settings)
}

/// A 3-container pod as a Deployment makes it: labels, images, ports, env,
/// probes, a pod-level limit (so /mutate answers with a patch).
fn pod() -> serde_json::Value {
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({
            "name": name,
            "image": format!("registry.local/shop/{name}:1.4.2"),
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "production"}, {"name": "LOG_LEVEL", "value": "info"}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10},
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "checkout-7d9f8b6c5-",
            "namespace": "shop",
            "labels": {"app": "checkout", "pod-template-hash": "7d9f8b6c5"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "checkout-7d9f8b6c5",
                "uid": "5e0c1a7e-2b1d-4c1e-9a4e-0a1b2c3d4e5f", "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "resources": {"limits": {"cpu": "4", "memory": "4Gi"}},
            "containers": [
                container("app", "1", "1Gi"),
                container("cache", "500m", "512Mi"),
                container("proxy", "250m", "256Mi"),
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        },
    })
}

/// The review body with `UID` where the uid goes: the client only splices
/// the uid in, so it spends little of the shared CPUs.
const UID: &str = "@@UID@@";

fn review(uid: &str, object: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }
    }))
    .expect("serialisable")
}

/// How an allowed review starts its answer (cheaper than parsing it).
const ALLOWED: &[u8] = b"\"allowed\":true";

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
}

/// CPU seconds used so far by this process's threads, grouped by role
/// (thread name prefix), from `/proc/self/task/*/stat`.
fn cpu_by_role() -> std::collections::BTreeMap<&'static str, f64> {
    let mut roles = std::collections::BTreeMap::new();
    let ticks = 100.0; // USER_HZ on Linux
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return roles;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the `(comm)`: state is 3rd, utime 14th, stime 15th.
        let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let time = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let seconds = (time(11) + time(12)) / ticks;
        let role = if comm.starts_with("webhook-server") {
            "server (TLS, HTTP, JSON)"
        } else if comm.starts_with("podpolicy-eval") {
            "server (evaluation threads)"
        } else if comm.starts_with("webhook-client") {
            "client"
        } else {
            "other"
        };
        *roles.entry(role).or_insert(0.0) += seconds;
    }
    roles
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    f64::from(sorted[rank.min(sorted.len() - 1)]) / 1000.0
}

/// Median time of `f` over `n` runs, in µs.
fn median_us(n: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[n / 2]
}

/// Where one /mutate review's server time goes, stage by stage, on one
/// thread without HTTP or TLS (`--breakdown`).
fn breakdown(policy: Arc<PolicyRuntime>) -> Result<()> {
    use podpolicy::webhook::review::{self, Endpoint};
    let body = review("breakdown", &pod());
    let request = review::parse(&body).map_err(|e| anyhow::anyhow!("{e}"))?;
    let object: serde_json::Value =
        serde_json::from_str(request.object.as_ref().context("object")?.get())?;
    let pod = podpolicy::pod_input::pod_from_json(&object)?;
    let node = podpolicy::empty_node();
    // What each evaluation thread keeps: the node prepared in a warm instance.
    let mut prepared = PreparedPolicy::new(policy.clone(), node.clone(), None)?.map_err(|e| {
        anyhow::anyhow!(
            "the node settings do not prepare: {}",
            podpolicy::format_field_errors(&e)
        )
    })?;
    let n = 2000;
    let parse = median_us(n, || {
        let _ = review::parse(&body);
    });
    let convert = median_us(n, || {
        let _ = podpolicy::pod_input::pod_from_json(&object);
    });
    let call_prepared = median_us(n, || {
        let _ = prepared.default_pod(&pod);
    });
    let call_fresh = median_us(n, || {
        let _ = policy.default_pod(&pod, &node);
    });
    let whole = median_us(n, || {
        let _ = review::review(&mut prepared, Endpoint::Mutate, &request);
    });
    let verdict = review::review(&mut prepared, Endpoint::Mutate, &request)?;
    let respond = median_us(n, || {
        let _ = review::to_body(&verdict.response);
    });
    println!("per /mutate review, one thread, medians of {n}:");
    println!(
        "  parse the AdmissionReview ({} bytes):  {parse:.1} µs",
        body.len()
    );
    println!(
        "  JSON tree -> WIT pod (pod_from_json):  {convert:.1} µs (the general path; reviews read the object directly)"
    );
    println!("  default-pod, prepared node (warm):     {call_prepared:.1} µs");
    println!("  default-pod, fresh instance:           {call_fresh:.1} µs");
    println!("  review() on the prepared node:         {whole:.1} µs (convert + call + patch)");
    println!("  serialise the response:                {respond:.1} µs");
    Ok(())
}

fn main() -> Result<()> {
    let settings = settings()?;
    if settings.breakdown {
        let cache = Cache::Dir(std::env::temp_dir().join("podpolicy-bench-cache"));
        return breakdown(Arc::new(PolicyRuntime::embedded(
            &cache,
            Limits::default(),
        )?));
    }
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let cert = client::test_cert();

    // The server: its own runtime, as in the `podpolicy webhook` process.
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cpus)
        .thread_name("webhook-server")
        .enable_all()
        .build()?;
    let mut options = WebhookOptions {
        listen: "127.0.0.1:0".parse()?,
        ..WebhookOptions::default()
    };
    if let Some(n) = settings.max_concurrency {
        options.max_concurrency = n;
    }
    let max_concurrency = options.max_concurrency;
    // A warm instance per evaluation thread: the pool is sized before the
    // policy is loaded into it, as `podpolicy webhook` does.
    podpolicy::runtime::reserve_instances(max_concurrency)?;
    let cache = Cache::Dir(std::env::temp_dir().join("podpolicy-bench-cache"));
    let policy = PolicyRuntime::embedded(&cache, Limits::default())?;
    let slot = Arc::new(PolicySlot::new(policy));
    let tls = podpolicy::webhook::tls::server_config_from_pem(
        cert.cert_pem.as_bytes(),
        cert.key_pem.as_bytes(),
    )?;
    let server = server_runtime.block_on(start(options, Arc::new(tls), slot))?;
    let addr = server.local_addr();

    // The clients: one thread of their own, like a separate API server
    // process; it drives every connection (TLS on this side is cheap).
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let object = pod();
    let body_bytes = review("sizing", &object).len();
    let client_tls = client::client_config(&cert.cert_der);
    let warmup = Duration::from_secs(settings.warmup_seconds);
    let measure = Duration::from_secs(settings.seconds);
    let mixed = settings.mixed;

    let start_at = Instant::now() + Duration::from_millis(200);
    let measure_from = start_at + warmup;
    let stop_at = measure_from + measure;
    // CPU use over the measured window, by role: the first snapshot when
    // measuring starts, the second when it ends (the server still runs).
    let sampler = std::thread::spawn(move || {
        std::thread::sleep(measure_from.saturating_duration_since(Instant::now()));
        let before = cpu_by_role();
        std::thread::sleep(stop_at.saturating_duration_since(Instant::now()));
        let after = cpu_by_role();
        after
            .into_iter()
            .map(|(role, seconds)| (role, seconds - before.get(role).copied().unwrap_or(0.0)))
            .collect::<Vec<_>>()
    });
    let client_thread = std::thread::Builder::new().name("webhook-client".into());
    let clients = client_thread.spawn(move || {
        client_runtime.block_on(async move {
            let mut tasks = Vec::new();
            for connection in 0..settings.connections {
                let tls = client_tls.clone();
                let template = String::from_utf8(review(UID, &object)).expect("JSON is UTF-8");
                let (head, tail) = template.split_once(UID).expect("one uid placeholder");
                let (head, tail) = (head.as_bytes().to_vec(), tail.as_bytes().to_vec());
                tasks.push(tokio::spawn(async move {
                    let mut tally = Tally::default();
                    let mut client = client::Client::connect(addr, tls.clone()).await?;
                    tokio::time::sleep_until(start_at.into()).await;
                    let mut i = 0u64;
                    loop {
                        let now = Instant::now();
                        if now >= stop_at {
                            break;
                        }
                        let uid = format!("c{connection}-r{i}");
                        let path = if mixed && i % 2 == 1 {
                            "/validate"
                        } else {
                            "/mutate"
                        };
                        let body = [head.as_slice(), uid.as_bytes(), tail.as_slice()].concat();
                        let sent = Instant::now();
                        let outcome = client.post(path, "application/json", body).await;
                        let elapsed = sent.elapsed();
                        let broken = outcome.is_err();
                        let ok = match &outcome {
                            Ok(reply) => {
                                reply.status == 200
                                    && reply.body.windows(ALLOWED.len()).any(|w| w == ALLOWED)
                            }
                            Err(_) => false,
                        };
                        if sent >= measure_from {
                            if ok {
                                tally
                                    .latencies_us
                                    .push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
                            } else {
                                tally.errors += 1;
                                if tally.first_error.is_none() {
                                    tally.first_error = Some(match outcome {
                                        Ok(reply) => {
                                            format!("HTTP {}: {}", reply.status, reply.text())
                                        }
                                        Err(e) => format!("{e:#}"),
                                    });
                                }
                            }
                        }
                        if broken {
                            // The connection is gone: count the error, carry on with a new one.
                            client = client::Client::connect(addr, tls.clone()).await?;
                        }
                        i += 1;
                    }
                    anyhow::Ok(tally)
                }));
            }
            let mut tallies = Vec::new();
            for task in tasks {
                tallies.push(task.await??);
            }
            anyhow::Ok((tallies, measure))
        })
    })?;
    let (tallies, measured) = clients
        .join()
        .map_err(|_| anyhow::anyhow!("the client thread panicked"))??;

    let cpu = sampler.join().unwrap_or_default();
    server_runtime.block_on(server.shutdown())?;

    let mut latencies: Vec<u32> = tallies
        .iter()
        .flat_map(|t| t.latencies_us.iter().copied())
        .collect();
    latencies.sort_unstable();
    let errors: u64 = tallies.iter().map(|t| t.errors).sum();
    let reviews = latencies.len();
    let rate = reviews as f64 / measured.as_secs_f64();
    println!(
        "webhook load: {} over HTTPS (TLS 1.3, HTTP/1.1 keep-alive), 3-container pod, review body {body_bytes} bytes",
        if mixed {
            "/mutate and /validate alternating"
        } else {
            "/mutate"
        },
    );
    println!(
        "  {} connections, {} s measured after {} s warm-up, {cpus} CPUs shared by client and server, server --max-concurrency {max_concurrency}",
        settings.connections, settings.seconds, settings.warmup_seconds
    );
    println!("  reviews: {reviews} ({rate:.0}/s), errors: {errors}");
    println!(
        "  latency: p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&latencies, 50.0),
        percentile(&latencies, 90.0),
        percentile(&latencies, 99.0),
        latencies.last().map_or(0.0, |&us| f64::from(us) / 1000.0),
    );
    let p99 = percentile(&latencies, 99.0);
    targets::report(
        "webhook-reviews-per-second",
        errors == 0 && rate >= targets::WEBHOOK_REVIEWS_PER_SECOND,
        format!("{rate:.0}/s with {errors} errors"),
        format!(">= {:.0}/s", targets::WEBHOOK_REVIEWS_PER_SECOND),
    );
    targets::report(
        "webhook-p99",
        reviews > 0 && p99 <= targets::WEBHOOK_P99_MS,
        format!("{p99:.2} ms"),
        format!("<= {} ms", targets::WEBHOOK_P99_MS),
    );
    let total: f64 = cpu.iter().map(|(_, seconds)| seconds).sum();
    if reviews > 0 {
        let per_review = |seconds: f64| seconds / reviews as f64 * 1e6;
        println!(
            "  CPU: {:.2} of {cpus} CPUs busy; per review {:.0} µs in all, of which",
            total / measured.as_secs_f64(),
            per_review(total)
        );
        for (role, seconds) in &cpu {
            println!("    {role}: {:.0} µs", per_review(*seconds));
        }
        let server: f64 = cpu
            .iter()
            .filter(|(role, _)| role.starts_with("server"))
            .map(|(_, seconds)| seconds)
            .sum();
        println!(
            "  => the server alone on {cpus} CPUs: about {:.0} reviews/s",
            cpus as f64 / (server / reviews as f64)
        );
    }
    if let Some(error) = tallies.iter().find_map(|t| t.first_error.clone()) {
        println!("  first error: {error}");
    }
    Ok(())
}
