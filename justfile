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

# Fuzz targets: filled by issue 9 (fuzzing and differential testing).
fuzz:
    @echo "fuzz targets arrive with issue 9 (fuzz/ crate, cargo fuzz --sanitizer none)"; exit 1

# Benchmarks: filled by issue 9 (criterion suite, BENCHMARKS.md).
bench:
    @echo "the benchmark suite arrives with issue 9"; exit 1

# Real-kernel cgroup v2 test: `podpolicy apply` in a qemu (TCG) VM; installs qemu with apt-get if missing.
vm-test:
    bash tests/vm/run.sh
