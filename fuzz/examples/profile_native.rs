//! Evaluates one fixture pod natively in a loop, for profilers that cannot
//! run wasmtime (valgrind cannot reserve the pooling allocator's address
//! space): `valgrind --tool=callgrind target/release/examples/profile_native
//! [POD.yaml] [NODE.yaml] [ITERATIONS]`.

use std::path::{Path, PathBuf};

use podpolicy_fuzz::{native, to_native};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut args = std::env::args().skip(1);
    let pod = args
        .next()
        .map_or_else(|| root.join("fixtures/pods/kep-ide.yaml"), PathBuf::from);
    let node = args.next().map_or_else(
        || root.join("fixtures/nodes/node-1000gi.yaml"),
        PathBuf::from,
    );
    let iterations: usize = args.next().map_or(1000, |n| n.parse().expect("a count"));
    let docs = podpolicy::pod_input::read_pods(&pod).expect("a pod file");
    let node: native::NodeSettings =
        to_native(&podpolicy::node_input::read_node(&node).expect("a node file"));
    let pod: native::Pod = to_native(&docs[0].pod);
    let mut ok = 0;
    for _ in 0..iterations {
        ok += usize::from(policy_wasm::evaluate::evaluate(&pod, &node).is_ok());
    }
    println!("{ok} of {iterations} evaluations succeeded");
}
