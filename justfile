# podpolicy tasks. `just` is optional: every recipe is a plain command.

# Build the host (and, through host/build.rs, the policy component).
build:
    cargo build --workspace --locked

# The whole test suite (what .ci/run runs).
test:
    cargo test --workspace --locked

# Run every shared vector file through the component.
conformance:
    cargo run --locked -p podpolicy -- conformance ../shared/vectors/*/*.json

# Rewrite the golden `explain` outputs in fixtures/pods after an intended change.
bless:
    PODPOLICY_BLESS=1 cargo test --locked -p podpolicy --test e2e fixtures

# Export the built policy component to policy.wasm.
component:
    cargo run --locked -p podpolicy -- policy export policy.wasm

# Fuzz each target (quantity, evaluate_native, differential) for FUZZ_SECONDS
# (default 60) on stable Rust: `--sanitizer none` needs no nightly. Seeds
# come from fixtures/; findings land in fuzz/artifacts/<target>/.
# Needs cargo-fuzz: `cargo install cargo-fuzz --locked`.
fuzz seconds=env_var_or_default("FUZZ_SECONDS", "60"):
    #!/usr/bin/env bash
    set -euo pipefail
    for target in quantity evaluate_native differential; do
        cargo fuzz run --sanitizer none "$target" -- -max_total_time={{seconds}}
    done

# Criterion benchmarks, native vs component (BENCHMARKS.md); arguments
# filter benchmarks, e.g. `just bench evaluate`.
bench *args:
    cargo bench --locked -p podpolicy --bench policy -- {{args}}

# Load on the admission webhook over HTTPS on loopback (BENCHMARKS.md);
# e.g. `just webhook-load --connections 16 --seconds 20 --mode mixed`.
webhook-load *args:
    cargo bench --locked -p podpolicy --bench webhook_load -- {{args}}

# Real-kernel cgroup v2 test: `podpolicy apply` in a qemu (TCG) VM; installs qemu with apt-get if missing.
vm-test:
    bash tests/vm/run.sh
