//! Benchmarks of the policy, natively and through the component.
//!
//! - `evaluate/*`: the full evaluation of a defaulted 3-container and
//!   20-container pod: native (`policy_wasm::evaluate`), a warm component
//!   instance reused across calls (`PolicyRuntime::warm`), and a fresh pooled
//!   instance per call (`PolicyRuntime::evaluate`, what `explain` does).
//! - `admit/*`: validation + defaulting of the 3-container pod, the same three ways.
//! - `load/*`: instantiation alone (store + `InstancePre::instantiate`),
//!   compiling the component, loading it precompiled from the on-disk cache,
//!   and loading it precompiled plus the first decision.
//!
//! `cargo bench -p podpolicy --bench policy` (or `just bench`); BENCHMARKS.md
//! records a run and the targets.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use podpolicy::runtime::{Cache, EMBEDDED_POLICY, Limits, PolicyRuntime};

#[path = "../../fuzz/src/convert.rs"]
mod convert;
use convert::to_native;

mod common;
mod product_allocator;
use common::{agreed_pod, defaulted_pod, node};

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-policy-cache")
}

fn runtime(cache: &Cache) -> PolicyRuntime {
    PolicyRuntime::from_bytes(EMBEDDED_POLICY, cache, Limits::default()).expect("the policy loads")
}

fn evaluate(c: &mut Criterion) {
    let policy = runtime(&Cache::Off);
    let node = node();
    let native_node = to_native(&node);
    let mut warm = policy.warm().expect("a warm instance");
    for count in [3, 20] {
        // Both sides agree before they are timed.
        let (pod, native_pod) = agreed_pod(&policy, &node, count);

        let mut group = c.benchmark_group(format!("evaluate/{count} containers"));
        group.bench_function("native", |b| {
            b.iter(|| {
                policy_wasm::evaluate::evaluate(black_box(&native_pod), black_box(&native_node))
            })
        });
        group.bench_function("component warm", |b| {
            b.iter(|| {
                warm.call(|p, s| p.call_evaluate(s, black_box(&pod), black_box(&node)))
                    .expect("call")
            })
        });
        group.bench_function("component fresh", |b| {
            b.iter(|| {
                policy
                    .evaluate(black_box(&pod), black_box(&node))
                    .expect("call")
            })
        });
        group.finish();
    }
}

fn admit(c: &mut Criterion) {
    let policy = runtime(&Cache::Off);
    let node = node();
    let native_node = to_native(&node);
    let mut warm = policy.warm().expect("a warm instance");
    let (pod, _) = defaulted_pod(&policy, &node, 3);
    let native_pod = to_native(&pod);
    let mut group = c.benchmark_group("admit/3 containers");
    group.bench_function("native", |b| {
        b.iter(|| {
            let errors = policy_wasm::evaluate::validate_pod(black_box(&native_pod), &native_node);
            let defaulted =
                policy_wasm::evaluate::default_pod(black_box(&native_pod), &native_node);
            (errors, defaulted)
        })
    });
    group.bench_function("component warm", |b| {
        b.iter(|| {
            let errors = warm
                .call(|p, s| p.call_validate_pod(s, black_box(&pod), &node))
                .expect("call");
            let defaulted = warm
                .call(|p, s| p.call_default_pod(s, black_box(&pod), &node))
                .expect("call");
            (errors, defaulted)
        })
    });
    group.bench_function("component fresh", |b| {
        b.iter(|| {
            let errors = policy.validate_pod(black_box(&pod), &node).expect("call");
            let defaulted = policy.default_pod(black_box(&pod), &node).expect("call");
            (errors, defaulted)
        })
    });
    group.finish();
}

fn load(c: &mut Criterion) {
    let node = node();
    let cache = Cache::Dir(cache_dir());
    let policy = runtime(&cache); // fills the cache
    assert!(runtime(&cache).compiled_from_cache());
    let (_, pod) = defaulted_pod(&policy, &node, 3);

    let mut group = c.benchmark_group("load");
    group.bench_function("instantiate", |b| {
        b.iter(|| policy.call(|_, _| Ok(())).expect("instantiates"))
    });
    group.bench_function("precompiled load", |b| b.iter(|| runtime(&cache)));
    group.bench_function("precompiled load + first decision", |b| {
        b.iter(|| {
            let fresh = runtime(&cache);
            fresh
                .evaluate(black_box(&pod), &node)
                .expect("call")
                .expect("evaluates")
        })
    });
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("compile", |b| b.iter(|| runtime(&Cache::Off)));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = evaluate, admit, load
}
criterion_main!(benches);
