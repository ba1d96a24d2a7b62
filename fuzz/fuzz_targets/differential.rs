//! The component against the native policy (`podpolicy_fuzz::checks::differential`):
//! the same case through every pod export of both gives identical results, and
//! the component never traps (a spent fuel or time budget aside). One compiled
//! component per process, a fresh pooled instance per call.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podpolicy_fuzz::Case;

fuzz_target!(
    init: podpolicy_fuzz::seeds::write_seed_corpus("differential"),
    |case: Case| podpolicy_fuzz::checks::differential(&case)
);
