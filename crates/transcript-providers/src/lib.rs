//! Provider normalizers: agent CLI and API output to canonical content blocks.
//!
//! DOCS_PLACEHOLDER
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod anthropic;
mod claude;
mod codex;
mod copilot;
pub mod frame;
mod gemini;
pub mod json;
mod openai;
mod output;
mod registry;
mod turns;
mod util;

pub use output::{Diagnostic, DiagnosticKind, Output, Position, Summary, turn_block_types};
pub use registry::{AutoNormalizer, Provider, UnknownProvider, detect};

/// An incremental normalizer for one provider stream.
///
/// Feed it the agent's output bytes in any chunking, then call
/// [`Normalizer::finish`] once at the end of the stream. Outputs are appended
/// to `out` as soon as they are known. It never panics and never performs
/// I/O; input it cannot map becomes [`Output::Diagnostic`]s.
pub trait Normalizer: Send {
    /// The provider this normalizer parses.
    fn provider(&self) -> Provider;
    /// Consumes the next chunk of the stream.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Output>);
    /// Ends the stream: flushes pending records, partial blocks and the last turn.
    fn finish(&mut self, out: &mut Vec<Output>);
}

/// Normalizes a complete input in one call.
pub fn normalize(provider: Provider, input: &[u8]) -> Vec<Output> {
    let mut n = provider.normalizer();
    let mut out = Vec::new();
    n.feed(input, &mut out);
    n.finish(&mut out);
    out
}
