//! Provider normalizers: agent CLI and API output to canonical content blocks.
//!
//! Pure (no I/O): parsers are incremental state machines fed bytes. Depends on
//! `transcript-domain` only.
#![forbid(unsafe_code)]
