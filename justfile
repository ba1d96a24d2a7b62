# podpolicy tasks. `just` is optional: every recipe is a plain command.

# Build the host (and, through host/build.rs, the policy component).
build:
    cargo build --workspace --locked

# The whole test suite (what .ci/run runs).
test:
    cargo test --workspace --locked

# Run every vector file of the repository through the component.
conformance:
    cargo run --locked -p podpolicy -- conformance tests/vectors/*/*.json

# Rewrite the golden `explain` outputs in fixtures/pods after an intended change.
bless:
    PODPOLICY_BLESS=1 cargo test --locked -p podpolicy --test e2e fixtures

# Export the built policy component to policy.wasm.
component:
    cargo run --locked -p podpolicy -- policy export policy.wasm

# Fuzz each target for FUZZ_SECONDS (default 60) seconds, one after the
# other, niced, on stable Rust (`--sanitizer none` needs no nightly):
# quantity, evaluate_native, allocation (KEP-5526 manager sequences with
# invariants), differential (component vs native, managers included). Seeds
# come from fixtures/ (written to fuzz/corpus/<target>/ at start); findings
# land in fuzz/artifacts/<target>/. Extra arguments go to libFuzzer, e.g.
# `just fuzz 600 -jobs=1 -workers=1`. See FUZZING.md.
# Needs cargo-fuzz: `cargo install cargo-fuzz --locked`.
fuzz seconds=env_var_or_default("FUZZ_SECONDS", "60") *args:
    #!/usr/bin/env bash
    set -euo pipefail
    for target in quantity evaluate_native allocation differential; do
        nice -n 19 cargo fuzz run --sanitizer none "$target" -- \
            -max_total_time={{seconds}} -print_final_stats=1 {{args}}
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

# Real-runtime NRI test: `podpolicy nri` under containerd 2.1.9 + runc 1.1.5
# (Debian .debs, private root, cached in target/nri-cache), driven through the
# CRI, cgroup v1 files checked against `explain`. Needs root; see tests/nri/README.md.
nri-test:
    bash tests/nri/run.sh
