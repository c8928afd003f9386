//! The tool calls of a step as the expectations read them: each call once, whether it was
//! recorded as `tool.*` events, as a `tool_use` block, or both (matched by call id).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::record::{BlockRecord, StepRecord, ToolCallRecord};

impl StepRecord {
    /// Every tool call of the step, its nested steps and its child run, in that order:
    /// `(name, input, failed)`. A call is counted once: the `tool.*` events, plus the
    /// `tool_use` blocks of calls that have no `tool.*` event (by id).
    pub fn all_calls(&self) -> Vec<CallView<'_>> {
        let mut out = Vec::new();
        self.collect_calls(&mut out);
        out
    }

    fn collect_calls<'a>(&'a self, out: &mut Vec<CallView<'a>>) {
        let recorded: HashSet<&str> = self.tool_calls.iter().map(|c| c.call_id.as_str()).collect();
        // The order calls were made: tool_use blocks in turn order, each followed by the
        // event-recorded calls up to it; calls with events only keep their event order.
        let mut by_id: HashMap<&str, &ToolCallRecord> = HashMap::new();
        for c in &self.tool_calls {
            by_id.entry(c.call_id.as_str()).or_insert(c);
        }
        let mut emitted = HashSet::new();
        for turn in &self.turns {
            for block in &turn.blocks {
                if let BlockRecord::ToolUse { name, id, input } = block {
                    if let Some(c) = by_id.get(id.as_str()) {
                        if emitted.insert(id.as_str()) {
                            out.push(CallView::of_record(c));
                        }
                    } else if !recorded.contains(id.as_str()) {
                        let failed = self.turns.iter().flat_map(|t| &t.blocks).any(|b| {
                            matches!(b, BlockRecord::ToolResult { id: rid, content }
                                if rid == id && is_error_content(content))
                        });
                        out.push(CallView {
                            name,
                            input,
                            failed,
                        });
                    }
                }
            }
        }
        for c in &self.tool_calls {
            if emitted.insert(c.call_id.as_str()) {
                out.push(CallView::of_record(c));
            }
        }
        for s in &self.steps {
            s.collect_calls(out);
        }
        if let Some(child) = &self.child {
            for s in &child.steps {
                s.collect_calls(out);
            }
        }
    }
}

/// A tool call as the expectations see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallView<'a> {
    /// Tool name.
    pub name: &'a str,
    /// Its arguments.
    pub input: &'a Value,
    /// Whether its result was an error.
    pub failed: bool,
}

impl<'a> CallView<'a> {
    fn of_record(c: &'a ToolCallRecord) -> Self {
        CallView {
            name: &c.name,
            input: &c.input,
            failed: c.error.is_some(),
        }
    }
}

/// A `tool_result` block's content that says it failed: `{"is_error": true, …}`.
fn is_error_content(content: &Value) -> bool {
    content.get("is_error").and_then(Value::as_bool) == Some(true)
}
