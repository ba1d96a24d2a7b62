//! Issue 22's speed targets as the bench binaries report them: one line per
//! target, `target <name>: met|missed (measured <value>, limit <limit>)`, so
//! a script reads a run with `grep '^target '` instead of parsing tables.
//! The limits live here, next to the wording, and nowhere else.
//! Each bench uses only its own targets, so the others are dead code there.
#![allow(dead_code)]

use std::time::Duration;

/// Warm 3-container evaluation through the component, as a multiple of native.
pub const WARM_3_RATIO: f64 = 2.0;
/// Warm 20-container evaluation through the component, as a multiple of native.
pub const WARM_20_RATIO: f64 = 1.6;
/// A fresh pooled instance plus a 3-container evaluation.
pub const FRESH_EVALUATION: Duration = Duration::from_micros(20);
/// A KEP-5526 admission on the 256-CPU fixture through the component.
pub const ADMISSION_256: Duration = Duration::from_micros(100);
/// The same admission through the component, as a multiple of native.
pub const ADMISSION_256_RATIO: f64 = 1.3;
/// Webhook reviews per second on this 2-core machine, client included.
pub const WEBHOOK_REVIEWS_PER_SECOND: f64 = 15_000.0;
/// Webhook p99 latency at that load, in milliseconds.
pub const WEBHOOK_P99_MS: f64 = 2.0;

/// `explain` of 5,000 pods, the whole command.
pub const EXPLAIN_5000: Duration = Duration::from_secs(1);
/// `explain`'s peak memory for 5,000 pods over its peak for 1,000: memory
/// that does not grow with the pod count (the slack is the allocator's and
/// the measurement's, not a pod's share).
pub const EXPLAIN_MEMORY_GROWTH: f64 = 1.1;

/// Print one target's verdict.
pub fn report(name: &str, met: bool, measured: String, limit: String) {
    let verdict = if met { "met" } else { "missed" };
    println!("target {name}: {verdict} (measured {measured}, limit {limit})");
}

/// A ratio that must stay at or under `limit`.
pub fn ratio_at_most(name: &str, ratio: f64, limit: f64) {
    report(
        name,
        ratio <= limit,
        format!("{ratio:.2}x"),
        format!("<= {limit}x"),
    );
}

/// A duration that must stay at or under `limit`.
pub fn time_at_most(name: &str, took: Duration, limit: Duration) {
    report(
        name,
        took <= limit,
        format!("{:.1}us", took.as_secs_f64() * 1e6),
        format!("<= {:.0}us", limit.as_secs_f64() * 1e6),
    );
}
