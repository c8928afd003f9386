//! Fuzz target: the anthropic normalizer (see `src/lib.rs` for what is checked).
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcript_providers::Provider;

fuzz_target!(|data: &[u8]| transcript_providers_fuzz::check(Provider::Anthropic, data));
