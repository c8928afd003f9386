//! Fuzz target: the openai normalizer on arbitrary bytes, fed whole and in
//! chunks whose sizes come from the first byte. Asserts no panic, valid JSON
//! output, and chunking invariance.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcript_providers::{Output, Provider};

fn run(data: &[u8], chunk: usize) -> Vec<String> {
    let mut n = Provider::OpenAi.normalizer();
    let mut out: Vec<Output> = Vec::new();
    for c in data.chunks(chunk.max(1)) {
        n.feed(c, &mut out);
    }
    n.finish(&mut out);
    out.iter()
        .map(|o| {
            let line = serde_json::to_string(o).expect("outputs serialize");
            serde_json::from_str::<serde_json::Value>(&line).expect("valid JSON");
            line
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let chunk = data.first().map_or(1, |b| usize::from(*b % 31) + 1);
    assert_eq!(run(data, data.len()), run(data, chunk));
});
