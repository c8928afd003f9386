//! "The same transcript exports the same ids" is a promise across versions (#30): a backend
//! deduplicates a re-export only if the ids never change. These values were computed outside
//! the code under test, by Python's hashlib from the scheme documented in `ids.rs`
//! (SHA-256 over length-prefixed parts, each prefixed by its length as a little-endian u64:
//! `b"transcript-otel/v1"`, the domain, then the run id's 16 bytes and the span's parts):
//!
//! ```text
//! import hashlib, struct
//! def key(domain, *parts):
//!     h = hashlib.sha256()
//!     def b(x): h.update(struct.pack('<Q', len(x))); h.update(x)
//!     b(b"transcript-otel/v1"); b(domain.encode())
//!     for p in parts: b(p)
//!     return h.digest()
//! run = bytes.fromhex("6f1c2a9e3b4d4e5f8a7b9c0d1e2f3a4b"); num = lambda n: struct.pack('<Q', n)
//! key("trace", run)[:16].hex()                                    # 93d27b565d8d7ff739037edb19589cfe
//! key("run", run)[:8].hex()                                       # 35ca5ed4f2c9990d
//! key("step", run, b"agents.review", num(0), num(12))[:8].hex()   # 2631d7069bcb54fc
//! key("tool", run, b"toolu_01", num(14))[:8].hex()                # 2f6205b530d43e01
//! key("chat", run, num(15))[:8].hex()                             # 0d6d0de1cc20db18
//! ```
//!
//! A change of any of them is a breaking change of the export: bump the scheme's version
//! (`transcript-otel/v2`) and say so in the changelog, never edit these values to match.
#![allow(clippy::unwrap_used)]

use transcript_domain::RunId;
use transcript_otel::ids;

fn run() -> RunId {
    "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b".parse().unwrap()
}

#[test]
fn trace_and_span_ids_are_the_pinned_values() {
    assert_eq!(
        ids::trace_id(run()).to_string(),
        "93d27b565d8d7ff739037edb19589cfe"
    );
    assert_eq!(ids::run_span_id(run()).to_string(), "35ca5ed4f2c9990d");
    assert_eq!(
        ids::step_span_id(run(), "agents.review", 0, 12).to_string(),
        "2631d7069bcb54fc"
    );
    assert_eq!(
        ids::tool_span_id(run(), "toolu_01", 14).to_string(),
        "2f6205b530d43e01"
    );
    assert_eq!(ids::chat_span_id(run(), 15).to_string(), "0d6d0de1cc20db18");
}
