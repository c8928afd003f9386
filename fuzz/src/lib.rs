//! Shared body of the `parse_<provider>` fuzz targets: a normalizer on
//! arbitrary bytes, fed whole and in chunks whose sizes come from the first
//! byte. Asserts no panic, valid JSON output, and chunking invariance.

use transcript_providers::{Output, Provider};

fn run(provider: Provider, data: &[u8], chunk: usize) -> Vec<String> {
    let mut n = provider.normalizer();
    let mut out: Vec<Output> = Vec::new();
    for c in data.chunks(chunk.max(1)) {
        n.feed(c, &mut out);
    }
    n.finish(&mut out);
    out.iter()
        .map(|o| {
            let line = serde_json::to_string(o).expect("outputs serialize");
            // RawValue validates the syntax without building a Value, so values nested
            // deeper than serde_json's 128-level limit (kept verbatim) are checked too.
            serde_json::from_str::<Box<serde_json::value::RawValue>>(&line).expect("valid JSON");
            line
        })
        .collect()
}

/// One fuzz iteration for `provider`.
pub fn check(provider: Provider, data: &[u8]) {
    let chunk = data.first().map_or(1, |b| usize::from(*b % 31) + 1);
    assert_eq!(run(provider, data, data.len()), run(provider, data, chunk));
}
