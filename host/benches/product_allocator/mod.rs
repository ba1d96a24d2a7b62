//! The allocator of the `podpolicy` binary (`src/main.rs`), for the benches
//! that run the library in-process: the host's lowering and lifting, the
//! webhook's server, and the native side of every ratio then allocate as
//! the product does. (The native policy allocates many small maps and
//! strings per call; on glibc's malloc it took a quarter to a third longer,
//! which made the ratios look better than the product's: BENCHMARKS.md,
//! "The benches on the product's allocator".) The component is unaffected:
//! it allocates inside its own memory, from its call arena.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
