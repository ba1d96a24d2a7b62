//! The component against the native policy (`podpolicy_fuzz::checks::differential_all`):
//! the same pod case through every pod export of both, then the same
//! resource manager sequence (admit, release, manager-operation) through
//! both, gives identical results, and the component never traps (a spent
//! fuel or time budget aside). One compiled component per process, a fresh
//! pooled instance per call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podpolicy_fuzz::DiffCase;

fuzz_target!(
    init: podpolicy_fuzz::seeds::write_seed_corpus("differential"),
    |input: DiffCase| podpolicy_fuzz::checks::differential_all(&input)
);
