//! A native driver for instruction-count profiling of the policy.
//!
//! This machine has no hardware counters and its timings are noisy, so
//! policy-side changes are judged by instruction counts under callgrind:
//!
//! ```sh
//! cargo build --release -p podpolicy --example profile_native
//! valgrind --tool=callgrind target/release/examples/profile_native evaluate 500
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! ```
//!
//! It runs one export of the native policy (`evaluate`, `default` or
//! `validate`) on the defaulted 3-container pod of the criterion benchmarks
//! (`host/benches/policy.rs`) on `fixtures/nodes/node-1000gi.yaml`.

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

#[path = "../../fuzz/src/convert.rs"]
mod convert;
use convert::to_native;

/// The benchmarks' pod: a quarter sidecars, cpu and memory requests and
/// limits on every container, pod-level limits.
fn pod_json(count: usize) -> Value {
    let sidecars = (count + 2) / 4;
    let container = |i: usize, sidecar: bool| {
        let mut c = json!({
            "name": format!("c{i}"),
            "image": "registry.example/app:1",
            "resources": {
                "requests": { "cpu": format!("{}m", 100 * (i % 5 + 1)), "memory": format!("{}Mi", 64 * (i % 4 + 1)) },
                "limits": { "cpu": "1", "memory": format!("{}Mi", 256 * (i % 4 + 1)) },
            },
        });
        if sidecar {
            c["restartPolicy"] = "Always".into();
        }
        c
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": format!("bench-{count}"), "namespace": "default" },
        "spec": {
            "initContainers": (0..sidecars).map(|i| container(i, true)).collect::<Vec<_>>(),
            "containers": (sidecars..count).map(|i| container(i, false)).collect::<Vec<_>>(),
            "resources": { "limits": { "cpu": count.to_string(), "memory": format!("{}Gi", count) } },
        },
    })
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let export = args.next().unwrap_or_else(|| "evaluate".into());
    let iterations: u32 = args.next().map_or(Ok(20_000), |n| n.parse())?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let node =
        podpolicy::node_input::read_node(&workspace.join("fixtures/nodes/node-1000gi.yaml"))?;
    let node = to_native(&node);
    let pod = to_native(&podpolicy::pod_input::pod_from_json(&pod_json(3))?);
    let pod = policy_wasm::evaluate::default_pod(&pod, &node)
        .map_err(|e| anyhow::anyhow!("{e:?}"))?
        .pod;
    let start = Instant::now();
    for _ in 0..iterations {
        match export.as_str() {
            "evaluate" => {
                let _ = black_box(policy_wasm::evaluate::evaluate(black_box(&pod), &node));
            }
            "default" => {
                let _ = black_box(policy_wasm::evaluate::default_pod(black_box(&pod), &node));
            }
            "validate" => {
                black_box(policy_wasm::evaluate::validate_pod(black_box(&pod), &node));
            }
            other => anyhow::bail!("unknown export {other:?}: evaluate, default or validate"),
        }
    }
    eprintln!(
        "{export}: {:?} per call",
        start.elapsed() / iterations.max(1)
    );
    Ok(())
}
