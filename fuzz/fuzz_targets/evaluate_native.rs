//! Structure-aware pods and node settings through the native policy
//! (`podpolicy_fuzz::checks::evaluate_native`): validation, defaulting and
//! evaluation never panic, and an accepted pod defaults and evaluates.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podpolicy_fuzz::Case;

fuzz_target!(
    init: podpolicy_fuzz::seeds::write_seed_corpus("evaluate_native"),
    |case: Case| podpolicy_fuzz::checks::evaluate_native(&case)
);
