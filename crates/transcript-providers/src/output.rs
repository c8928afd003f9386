//! What a normalizer emits: tool calls, tool results, assistant turns and
//! diagnostics, in stream order.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use transcript_domain::{BlockType, MessagePayload, Payload, ToolPayload, Usage};

/// One item produced by a normalizer, emitted as soon as it is known.
///
/// The order of items is the order in which the agent seam writes events:
/// a [`Output::ToolCall`] as soon as the `tool_use` is seen, a
/// [`Output::ToolResult`] as soon as its result is seen, and the
/// [`Output::Turn`] holding both blocks when the turn's results are in
/// (the next turn starts or the stream ends; decision 11).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub enum Output {
    /// An agent-emitted tool invocation (`tool.call`, output `null`).
    ToolCall(ToolPayload),
    /// An agent-emitted tool result (`tool.result`, input `null`).
    ToolResult(ToolPayload),
    /// One assistant turn (`message.assistant`): thinking / text / tool_use
    /// blocks in order, then the tool_result blocks answering them, with
    /// provider, model and usage (decision 10).
    Turn(MessagePayload),
    /// Something in the input that did not become a block or event, or that
    /// was repaired, flagged or reported as an error by the provider.
    Diagnostic(Diagnostic),
}

impl Output {
    /// The canonical payload for `tool.*` and `message.assistant` items;
    /// `None` for diagnostics, which are not transcript events.
    pub fn to_payload(&self) -> Option<Payload> {
        match self {
            Output::ToolCall(p) => Some(Payload::ToolCall(p.clone())),
            Output::ToolResult(p) => Some(Payload::ToolResult(p.clone())),
            Output::Turn(m) => Some(Payload::MessageAssistant(m.clone())),
            Output::Diagnostic(_) => None,
        }
    }

    /// The diagnostic, if this item is one.
    pub fn as_diagnostic(&self) -> Option<&Diagnostic> {
        match self {
            Output::Diagnostic(d) => Some(d),
            _ => None,
        }
    }
}

/// Where in the input a record started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Position {
    /// 1-based line number of the record's first byte.
    pub line: u64,
    /// 0-based byte offset of the record's first byte.
    pub offset: u64,
    /// For records nested in a document (array elements, HTTP exchanges,
    /// SSE bodies inside a recording): the 0-based element index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub element: Option<u32>,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} (byte {})", self.line, self.offset)?;
        if let Some(e) = self.element {
            write!(f, " element {e}")?;
        }
        Ok(())
    }
}

/// Why a diagnostic was recorded. The mapping table in the crate docs says
/// which provider record produces which kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosticKind {
    /// Session, configuration or bookkeeping record with no content for
    /// blocks (init lines, turn markers, summaries, snapshots).
    Metadata,
    /// Intermediate state superseded by a later record that is mapped
    /// (deltas, `item.updated`, duplicated event messages, pings).
    Progress,
    /// Content the canonical vocabulary has no block for (user prompts,
    /// images, thinking signatures, encrypted reasoning, todo lists).
    Extra,
    /// A record or block type this normalizer does not know (forward
    /// compatibility: counted, never fatal).
    Unknown,
    /// Not JSON, or JSON of the wrong shape (a required field missing).
    Malformed,
    /// The input was repaired to be parsed: raw control bytes inside
    /// strings escaped (U+0000 preserved), invalid UTF-8 replaced.
    Repaired,
    /// The provider reported an error (failed turn, error result, API error).
    ProviderError,
    /// The provider reported an error it then survived (a Codex error item
    /// followed by a completed turn): kept, but not a failure of the run.
    Warning,
    /// The model refused (refusal text or stop reason).
    Refusal,
    /// Content cut off: a stream ended mid-block, tool input JSON that never
    /// completed (recorded as a JSON string and flagged here).
    Incomplete,
    /// A tool result whose call was never seen (kept, with this flag).
    Orphan,
}

impl DiagnosticKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [DiagnosticKind] = &[
        DiagnosticKind::Metadata,
        DiagnosticKind::Progress,
        DiagnosticKind::Extra,
        DiagnosticKind::Unknown,
        DiagnosticKind::Malformed,
        DiagnosticKind::Repaired,
        DiagnosticKind::ProviderError,
        DiagnosticKind::Warning,
        DiagnosticKind::Refusal,
        DiagnosticKind::Incomplete,
        DiagnosticKind::Orphan,
    ];

    /// The snake_case name used in JSON and in the manifest.
    pub const fn as_str(self) -> &'static str {
        match self {
            DiagnosticKind::Metadata => "metadata",
            DiagnosticKind::Progress => "progress",
            DiagnosticKind::Extra => "extra",
            DiagnosticKind::Unknown => "unknown",
            DiagnosticKind::Malformed => "malformed",
            DiagnosticKind::Repaired => "repaired",
            DiagnosticKind::ProviderError => "provider_error",
            DiagnosticKind::Warning => "warning",
            DiagnosticKind::Refusal => "refusal",
            DiagnosticKind::Incomplete => "incomplete",
            DiagnosticKind::Orphan => "orphan",
        }
    }
}

/// A record (or part of one) that was not mapped to blocks or events, or
/// that needs attention. Nothing is dropped silently: every unmapped record
/// yields at least one diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// Why it was recorded.
    pub kind: DiagnosticKind,
    /// Where the record started.
    pub position: Position,
    /// The provider's record type (e.g. `system/init`, `item.updated`,
    /// `content_block_delta/signature_delta`); `-` when there is none.
    pub record: String,
    /// Human-readable detail (error messages, what was cut off, …).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} at {}",
            self.kind.as_str(),
            self.record,
            self.position
        )?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// Counts over a normalizer's output: what the real-corpus manifest states
/// per file.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Assistant turns.
    pub turns: u64,
    /// Blocks by type (`text`, `thinking`, `tool_use`, `tool_result`, …).
    pub blocks: BTreeMap<String, u64>,
    /// `tool.call` items.
    pub tool_calls: u64,
    /// `tool.result` items.
    pub tool_results: u64,
    /// Calls that got a result with the same id.
    pub tool_pairs: u64,
    /// Calls that never got a result.
    pub dangling_calls: u64,
    /// Usage summed over turns.
    pub usage: Usage,
    /// Diagnostics by kind.
    pub diagnostics: BTreeMap<String, u64>,
}

impl Summary {
    /// Summarizes a complete output sequence.
    pub fn of(outputs: &[Output]) -> Self {
        let mut s = Summary::default();
        let mut calls: Vec<&str> = Vec::new();
        let mut results: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for o in outputs {
            match o {
                Output::ToolCall(p) => {
                    s.tool_calls += 1;
                    calls.push(&p.call_id);
                }
                Output::ToolResult(p) => {
                    s.tool_results += 1;
                    results.insert(&p.call_id);
                }
                Output::Turn(m) => {
                    s.turns += 1;
                    for b in &m.blocks {
                        *s.blocks
                            .entry(b.block_type().as_str().to_owned())
                            .or_default() += 1;
                    }
                    if let Some(u) = &m.usage {
                        s.usage.accumulate(u);
                    }
                }
                Output::Diagnostic(d) => {
                    *s.diagnostics.entry(d.kind.as_str().to_owned()).or_default() += 1;
                }
            }
        }
        for c in calls {
            if results.contains(c) {
                s.tool_pairs += 1;
            } else {
                s.dangling_calls += 1;
            }
        }
        s
    }

    /// Blocks of one type.
    pub fn blocks_of(&self, t: BlockType) -> u64 {
        self.blocks.get(t.as_str()).copied().unwrap_or(0)
    }
}

/// The block types of each turn, in order: the shape compared by the
/// cross-provider equivalence test.
pub fn turn_block_types(outputs: &[Output]) -> Vec<Vec<&'static str>> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Turn(m) => Some(m.blocks.iter().map(|b| b.block_type().as_str()).collect()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use transcript_domain::{EventType, Fidelity, RawJson};

    use super::*;

    #[test]
    fn payloads_summary_and_display() {
        let call = ToolPayload::call("Read", "t1", RawJson::null(), Fidelity::AgentEmitted);
        let d = Diagnostic {
            kind: DiagnosticKind::Refusal,
            position: Position {
                line: 3,
                offset: 10,
                element: Some(2),
            },
            record: "message".to_owned(),
            detail: "no".to_owned(),
        };
        let outs = vec![
            Output::ToolCall(call.clone()),
            Output::Diagnostic(d.clone()),
        ];
        assert_eq!(
            outs[0].to_payload().map(|p| p.event_type()),
            Some(EventType::ToolCall)
        );
        assert!(outs[1].to_payload().is_none());
        assert_eq!(outs[1].as_diagnostic(), Some(&d));
        assert_eq!(
            d.to_string(),
            "refusal: message at line 3 (byte 10) element 2: no"
        );
        let s = Summary::of(&outs);
        assert_eq!((s.tool_calls, s.dangling_calls, s.tool_pairs), (1, 1, 0));
        assert_eq!(s.blocks_of(BlockType::Text), 0);
        assert_eq!(s.diagnostics.get("refusal"), Some(&1));
        for k in DiagnosticKind::ALL {
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
    }
}
