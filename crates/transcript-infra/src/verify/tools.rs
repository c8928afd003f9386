//! The tool pairing check of `verify` (issue 18): every `tool.result`
//! answers an earlier `tool.call` with the same `call_id`, and every
//! `tool.call` gets a result. Warnings, not errors: a run that was
//! interrupted leaves calls without results, and a foreign importer may
//! not have seen both halves.

use std::collections::{HashMap, VecDeque};

use super::{Finding, FindingCode};

/// Calls waiting for their result, per `call_id`, oldest first (an id
/// reused by a later call pairs in order).
#[derive(Default)]
pub(super) struct ToolPairing {
    open: HashMap<String, VecDeque<(u64, u64)>>,
}

impl ToolPairing {
    pub(super) fn call(&mut self, call_id: &str, line: u64, offset: u64) {
        self.open
            .entry(call_id.to_owned())
            .or_default()
            .push_back((line, offset));
    }

    pub(super) fn result(
        &mut self,
        call_id: &str,
        line: u64,
        offset: u64,
        warnings: &mut Vec<Finding>,
    ) {
        let paired = self
            .open
            .get_mut(call_id)
            .and_then(VecDeque::pop_front)
            .is_some();
        if !paired {
            warnings.push(Finding::at(
                FindingCode::ToolResultWithoutCall,
                line,
                offset,
                format!("tool.result for call_id {call_id:?} without an earlier tool.call"),
            ));
        }
    }

    /// Warns about every call still waiting, in file order.
    pub(super) fn finish(self, warnings: &mut Vec<Finding>) {
        let mut dangling: Vec<(u64, u64, String)> = self
            .open
            .into_iter()
            .flat_map(|(id, calls)| calls.into_iter().map(move |(l, o)| (l, o, id.clone())))
            .collect();
        dangling.sort_unstable_by_key(|(line, _, _)| *line);
        for (line, offset, id) in dangling {
            warnings.push(Finding::at(
                FindingCode::ToolCallWithoutResult,
                line,
                offset,
                format!("tool.call with call_id {id:?} has no tool.result"),
            ));
        }
    }
}
