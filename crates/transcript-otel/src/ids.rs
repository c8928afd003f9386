//! Deterministic trace and span ids.
//!
//! Every id is the prefix of a SHA-256 over a domain-separated, length-prefixed
//! key built from what identifies the span in the transcript (run id, path,
//! iteration, seq, call id). Exporting the same transcript twice therefore
//! yields the same ids, so a backend deduplicates or overwrites rather than
//! showing a second copy. An all-zero digest prefix (invalid in OTLP) is
//! replaced by a fixed non-zero value.

use opentelemetry::trace::{SpanId, TraceId};
use sha2::{Digest, Sha256};
use transcript_domain::{RunId, Seq};

/// Incremental key builder: each part is tagged with its length so that
/// `("ab", "c")` and `("a", "bc")` hash differently.
struct Key(Sha256);

impl Key {
    fn new(domain: &str) -> Self {
        let mut key = Key(Sha256::new());
        key.bytes(b"transcript-otel/v1");
        key.bytes(domain.as_bytes());
        key
    }

    fn bytes(&mut self, part: &[u8]) -> &mut Self {
        self.0.update((part.len() as u64).to_le_bytes());
        self.0.update(part);
        self
    }

    fn run(&mut self, run: RunId) -> &mut Self {
        self.bytes(run.as_uuid().as_bytes())
    }

    fn num(&mut self, n: u64) -> &mut Self {
        self.bytes(&n.to_le_bytes())
    }

    fn digest(&mut self) -> [u8; 32] {
        std::mem::take(&mut self.0).finalize().into()
    }
}

fn span_id_of(key: &mut Key) -> SpanId {
    let digest = key.digest();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    if bytes == [0; 8] {
        bytes[7] = 1;
    }
    SpanId::from_bytes(bytes)
}

/// The trace of a root run (child runs share their root's trace).
pub fn trace_id(root: RunId) -> TraceId {
    let digest = Key::new("trace").run(root).digest();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    if bytes == [0; 16] {
        bytes[15] = 1;
    }
    TraceId::from_bytes(bytes)
}

/// The `invoke_workflow` span of a run.
pub fn run_span_id(run: RunId) -> SpanId {
    span_id_of(Key::new("run").run(run))
}

/// The span of one step execution, identified by its start event.
pub fn step_span_id(run: RunId, path: &str, iteration: u64, start_seq: Seq) -> SpanId {
    span_id_of(
        Key::new("step")
            .run(run)
            .bytes(path.as_bytes())
            .num(iteration)
            .num(start_seq),
    )
}

/// The span of one tool call, identified by its `tool.call` event (or by the
/// `tool.result` event when the call was never recorded).
pub fn tool_span_id(run: RunId, call_id: &str, seq: Seq) -> SpanId {
    span_id_of(Key::new("tool").run(run).bytes(call_id.as_bytes()).num(seq))
}

/// The `chat` span of one provider turn, identified by its `message.assistant` event.
pub fn chat_span_id(run: RunId, seq: Seq) -> SpanId {
    span_id_of(Key::new("chat").run(run).num(seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: u8) -> RunId {
        RunId::from_bytes([n; 16])
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(trace_id(run(1)), trace_id(run(1)));
        assert_ne!(trace_id(run(1)), trace_id(run(2)));
        assert_eq!(run_span_id(run(1)), run_span_id(run(1)));
        assert_ne!(run_span_id(run(1)), step_span_id(run(1), "", 0, 0));
        // Length prefixes keep adjacent parts apart.
        assert_ne!(tool_span_id(run(1), "ab", 1), tool_span_id(run(1), "a", 1));
        assert_ne!(
            step_span_id(run(1), "a", 0, 3),
            step_span_id(run(1), "a", 1, 3)
        );
        assert!(trace_id(run(0)).to_bytes() != [0; 16]);
        assert_ne!(chat_span_id(run(1), 3), chat_span_id(run(1), 4));
        assert_ne!(chat_span_id(run(1), 3), run_span_id(run(1)));
    }
}
