//! KEP-5526 resource managers natively (`podpolicy_fuzz::checks::allocation`):
//! a machine (a fixtures/sysfs machine, a synthetic or a raw topology), node
//! settings for the CPU, memory and topology managers, and a sequence of
//! admissions, releases and manager operations; every state invariant of
//! `podpolicy_fuzz::sequence` holds after every step, and releasing
//! everything gives the started state back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podpolicy_fuzz::alloc::AllocCase;

fuzz_target!(
    init: podpolicy_fuzz::seeds::write_seed_corpus("allocation"),
    |case: AllocCase| podpolicy_fuzz::checks::allocation(&case)
);
