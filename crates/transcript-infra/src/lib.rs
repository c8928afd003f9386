//! Storage adapters for canonical agent exchange transcripts.
//!
//! This crate implements the `transcript_domain::Recorder` port on top of an
//! append-only JSONL file, the live fan-out to subscribers and the tolerant
//! streaming reader. It depends on `transcript-domain` only.
#![forbid(unsafe_code)]
