//! Sample workflow execution service, tools router and agent seam.
//!
//! Emits transcripts only through the `transcript_domain::Recorder` port.
#![forbid(unsafe_code)]
