//! The quantity parser: any text either parses or fails with a short error,
//! and a parsed value survives its canonical string unchanged
//! (`podpolicy_fuzz::checks::quantity`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: podpolicy_fuzz::seeds::write_seed_corpus("quantity"),
    |data: &[u8]| podpolicy_fuzz::checks::quantity(data)
);
