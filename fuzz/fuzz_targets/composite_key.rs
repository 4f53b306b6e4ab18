#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| leasehold_fuzz::composite_key(data));
