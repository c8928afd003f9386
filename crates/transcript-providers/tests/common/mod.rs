//! Shared helpers for the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod deep;

use std::path::{Path, PathBuf};

use transcript_providers::{Normalizer, Output, Provider};

/// `fixtures/providers` of the repository.
pub fn own_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/providers")
}

/// The folder of real captures (`$TRANSCRIPT_REAL_FIXTURES`, relative to the repository
/// root): `None` (printed) when unset, a failure when unset under `CI=true` or not a folder.
pub fn real_root() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is not set"
        );
        println!("skipped: TRANSCRIPT_REAL_FIXTURES is not set");
        return None;
    };
    let mut dir = PathBuf::from(dir);
    if dir.is_relative() {
        // CI sets it relative to the repository root.
        dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir);
    }
    assert!(
        dir.is_dir(),
        "TRANSCRIPT_REAL_FIXTURES={} is set but is not a directory",
        dir.display()
    );
    Some(dir)
}

/// Runs a normalizer over `input` split at the given chunk lengths (cycled).
pub fn run_chunked(provider: Provider, input: &[u8], chunk_lens: &[usize]) -> Vec<Output> {
    let mut n = provider.normalizer();
    let mut out = Vec::new();
    let mut rest = input;
    let mut i = 0;
    while !rest.is_empty() {
        let len = chunk_lens
            .get(i % chunk_lens.len().max(1))
            .copied()
            .unwrap_or(rest.len())
            .clamp(1, rest.len());
        n.feed(&rest[..len], &mut out);
        rest = &rest[len..];
        i += 1;
    }
    n.finish(&mut out);
    out
}

/// Runs a normalizer fed line by line.
pub fn run_by_line(provider: Provider, input: &[u8]) -> Vec<Output> {
    let mut n = provider.normalizer();
    let mut out = Vec::new();
    for line in input.split_inclusive(|&b| b == b'\n') {
        n.feed(line, &mut out);
    }
    n.finish(&mut out);
    out
}

/// Serializes outputs as JSON lines, asserting each line is valid JSON.
pub fn to_jsonl(outputs: &[Output]) -> String {
    let mut s = String::new();
    for o in outputs {
        let line = serde_json::to_string(o).unwrap();
        // Validated without building a tree: any nesting depth passes
        // (serde_json::Value stops at 128 levels; the transcript does not).
        serde_json::from_str::<Box<serde_json::value::RawValue>>(&line).unwrap();
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// Pseudo-random chunk lengths from a seed (deterministic, no RNG crate).
pub fn chunk_lens(seed: u64, max: usize) -> Vec<usize> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..64)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % max as u64) as usize + 1
        })
        .collect()
}

/// Every file of a directory, sorted, skipping expected outputs and PROVENANCE.md.
pub fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && !p.to_string_lossy().ends_with(".expected.jsonl")
                && p.file_name().is_some_and(|n| n != "PROVENANCE.md")
        })
        .collect();
    files.sort();
    files
}

/// Asserts the chunking invariance of one input: whole, by line and two
/// pseudo-random byte chunkings give identical output.
pub fn assert_chunking_invariant(provider: Provider, input: &[u8], name: &str) -> Vec<Output> {
    let whole = transcript_providers::normalize(provider, input);
    let expected = to_jsonl(&whole);
    assert_eq!(
        to_jsonl(&run_by_line(provider, input)),
        expected,
        "{name}: by line"
    );
    for seed in [1, 7] {
        let lens = chunk_lens(seed, 17);
        assert_eq!(
            to_jsonl(&run_chunked(provider, input, &lens)),
            expected,
            "{name}: random chunks (seed {seed})"
        );
    }
    assert_eq!(
        to_jsonl(&run_chunked(provider, input, &[1])),
        expected,
        "{name}: single bytes"
    );
    whole
}

pub fn provider_of_dir(dir: &str) -> Provider {
    Provider::from_name(dir).unwrap()
}

/// Feeds a whole input to a normalizer built elsewhere.
pub fn run_with(mut n: Box<dyn Normalizer>, input: &[u8]) -> Vec<Output> {
    let mut out = Vec::new();
    n.feed(input, &mut out);
    n.finish(&mut out);
    out
}
