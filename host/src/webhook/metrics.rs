//! `/metrics`: request counts by endpoint and result, a latency histogram
//! per endpoint, evaluations in flight, warm instances, open connections,
//! which policy serves (digest and versions, refreshed at every scrape
//! because the slot can swap) and the swaps so far (a counter: it only
//! grows, so `rate()` and `increase()` work on it).

use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::swap::PolicySlot;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    digest: String,
    policy_version: String,
    wit_version: String,
    kubernetes_version: String,
}

/// 100 µs to ~3.3 s, doubling: admission latency lives in the first half.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// The webhook's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
    policy: Family<PolicyLabels, Gauge>,
    swaps: Counter,
    warm_instances: Gauge,
    connections: Gauge,
    /// The digest `policy` shows, to rebuild it only after a swap.
    shown_digest: Mutex<String>,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("podpolicy_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Admission reviews by endpoint and result (allowed, patched, denied, ignored, bad_request, too_large, unsupported_media_type, timeout, error)",
            requests.clone(),
        );
        let latency = Family::<EndpointLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "request_duration_seconds",
            "Time from the request's headers to the response, by endpoint",
            latency.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "evaluations_in_flight",
            "Policy evaluations running now (bounded by --max-concurrency)",
            in_flight.clone(),
        );
        let policy = Family::<PolicyLabels, Gauge>::default();
        registry.register(
            "policy_info",
            "The serving policy: 1 for its digest and versions",
            policy.clone(),
        );
        // prometheus-client adds `_total` to a counter's name.
        let swaps = Counter::default();
        registry.register(
            "policy_swaps",
            "Policy swaps and rollbacks since start",
            swaps.clone(),
        );
        let warm_instances = Gauge::default();
        registry.register(
            "warm_instances",
            "Evaluation threads holding a warm policy instance with the node settings prepared in it (one per --max-concurrency thread when healthy)",
            warm_instances.clone(),
        );
        let connections = Gauge::default();
        registry.register(
            "connections",
            "Open client connections (at most --max-connections)",
            connections.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            in_flight,
            policy,
            swaps,
            warm_instances,
            connections,
            shown_digest: Mutex::new(String::new()),
        }
    }

    pub(crate) fn record(&self, endpoint: &'static str, result: &'static str, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels { endpoint, result })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels { endpoint })
            .observe(elapsed.as_secs_f64());
    }

    pub(crate) fn in_flight(&self) -> &Gauge {
        &self.in_flight
    }

    pub(crate) fn warm_instances(&self) -> &Gauge {
        &self.warm_instances
    }

    pub(crate) fn connections(&self) -> &Gauge {
        &self.connections
    }

    /// The OpenMetrics text, with the policy gauge showing the serving version.
    pub(crate) fn render(&self, slot: &PolicySlot) -> String {
        let current = slot.current();
        {
            let mut shown = self.shown_digest.lock().unwrap_or_else(|p| p.into_inner());
            if *shown != current.digest() {
                let info = current.info();
                self.policy.clear();
                self.policy
                    .get_or_create(&PolicyLabels {
                        digest: current.digest().to_string(),
                        policy_version: info.policy_version.clone(),
                        wit_version: info.wit_version.clone(),
                        kubernetes_version: info.kubernetes_version.clone(),
                    })
                    .set(1);
                *shown = current.digest().to_string();
            }
        }
        // The slot counts the swaps; the counter shows its count (which only grows).
        self.swaps
            .inner()
            .fetch_max(slot.swaps(), Ordering::Relaxed);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
