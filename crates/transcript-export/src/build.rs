//! Building the export document from a run's events and its child runs.

use std::collections::HashMap;

use transcript_domain::tree::{RunTree, StepNode, build_run_tree};
use transcript_domain::{
    BlockBody, DecodedBlock, DecodedEvent, DecodedMessage, DecodedPayload, EventKind, EventType,
    RunId, ToolPayload, Usage,
};

use crate::model::{
    Entry, ExportBlock, ExportDocument, ExportOptionsRecord, MessageExport, RunExport,
    SCHEMA_VERSION, StepExport, ToolCallExport,
};
use crate::truncate::truncate_raw;

/// What to include in an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// Keep thinking blocks (`--no-reasoning` clears it).
    pub include_reasoning: bool,
    /// Shorten tool inputs and outputs above this many bytes.
    pub truncate_outputs: Option<usize>,
    /// Record that the events were masked before export.
    pub redacted: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            include_reasoning: true,
            truncate_outputs: None,
            redacted: false,
        }
    }
}

/// Builds the document of the run whose events are `events`, following
/// child runs through `lookup` (as [`build_run_tree`] does).
pub fn build_document(
    events: &[DecodedEvent],
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    options: &ExportOptions,
) -> ExportDocument {
    // Keep every child run's events for the content pass.
    let mut runs: HashMap<RunId, Vec<DecodedEvent>> = HashMap::new();
    let tree = {
        let mut caching = |id: RunId| {
            let found = lookup(id);
            if let Some(events) = &found {
                runs.insert(id, events.clone());
            }
            found
        };
        build_run_tree(events, &mut caching)
    };
    ExportDocument {
        schema_version: SCHEMA_VERSION.to_owned(),
        generator: format!("transcript-export {}", env!("CARGO_PKG_VERSION")),
        options: ExportOptionsRecord {
            reasoning_included: options.include_reasoning,
            truncate_outputs_bytes: options.truncate_outputs,
            redacted: options.redacted,
        },
        run: run_export(&tree, events, &runs, options),
        cost: None,
    }
}

fn run_export(
    tree: &RunTree,
    events: &[DecodedEvent],
    runs: &HashMap<RunId, Vec<DecodedEvent>>,
    options: &ExportOptions,
) -> RunExport {
    // Intervals of step executions by (path, iteration) -> start_seq.
    let mut intervals: Intervals<'_> = HashMap::new();
    collect_intervals(&tree.steps, &mut intervals);
    let mut entries = Entries::default();
    for event in events {
        let owner = owner_of(&intervals, event);
        match (&event.kind, &event.payload) {
            (
                EventKind::Known(EventType::MessageUser | EventType::MessageAssistant),
                DecodedPayload::Message(m),
            ) => entries.message(owner, event, m, options),
            (EventKind::Known(EventType::ToolCall), DecodedPayload::Tool(t)) => {
                entries.tool_call(owner, event, t, options)
            }
            (EventKind::Known(EventType::ToolResult), DecodedPayload::Tool(t)) => {
                entries.tool_result(owner, event, t, options)
            }
            _ => {}
        }
    }
    let Entries {
        mut by_step,
        run: run_entries,
        usage: usage_total,
        ..
    } = entries;
    RunExport {
        run_id: tree.run_id.to_string(),
        parent_run_id: tree.parent_run_id.map(|p| p.to_string()),
        workflow: tree.workflow.clone(),
        status: tree.status.as_str().to_owned(),
        started_at: tree.started_at.map(|t| t.to_string()),
        completed_at: tree.completed_at.map(|t| t.to_string()),
        duration_ms: tree.duration_ms(),
        error: tree.error.clone(),
        result: run_result(events),
        usage: (!usage_total.is_empty()).then_some(usage_total),
        cost_usd: None,
        steps: tree
            .steps
            .iter()
            .map(|n| step_export(n, &mut by_step, runs, options))
            .collect(),
        entries: run_entries,
        problems: tree.problems.iter().map(ToString::to_string).collect(),
    }
}

/// The step execution (its start seq) an event belongs to: the latest one of its path and
/// iteration open at its seq; `None` for the run's own entries.
fn owner_of(intervals: &Intervals<'_>, event: &DecodedEvent) -> Option<u64> {
    intervals
        .get(&(event.path.as_str(), event.iteration))
        .and_then(|list| {
            list.iter()
                .rev()
                .find(|(start, end)| *start < event.seq && end.is_none_or(|e| event.seq < e))
                .map(|(start, _)| *start)
        })
}

/// The run's result: the `run.completed` event's.
fn run_result(events: &[DecodedEvent]) -> Option<serde_json::Value> {
    events
        .iter()
        .rev()
        .find(|e| e.kind == EventKind::Known(EventType::RunCompleted))
        .and_then(|e| e.step())
        .and_then(|s| s.result.as_ref())
        .map(|r| r.to_value())
}

/// The entries being collected: per step execution (by start seq) and the run's own.
#[derive(Default)]
struct Entries {
    by_step: HashMap<u64, Vec<Entry>>,
    run: Vec<Entry>,
    /// tool.call entries waiting for their result: call_id -> (owner, index).
    open_calls: HashMap<String, (Option<u64>, usize)>,
    usage: Usage,
}

impl Entries {
    /// The list an owner's entries go to.
    fn target(&mut self, owner: Option<u64>) -> &mut Vec<Entry> {
        match owner {
            Some(start) => self.by_step.entry(start).or_default(),
            None => &mut self.run,
        }
    }

    /// A user or assistant message; its usage counts toward the run's.
    fn message(
        &mut self,
        owner: Option<u64>,
        event: &DecodedEvent,
        m: &DecodedMessage,
        options: &ExportOptions,
    ) {
        if let Some(u) = &m.usage {
            self.usage.accumulate(u);
        }
        self.target(owner).push(Entry::Message(MessageExport {
            seq: event.seq,
            role: m.role.clone(),
            timestamp: event.timestamp.to_string(),
            provider: m.provider.clone(),
            model: m.model.clone(),
            usage: m.usage.clone(),
            cost_usd: None,
            request_id: m.request_id.clone(),
            blocks: m
                .blocks
                .iter()
                .filter_map(|b| export_block(b, options))
                .collect(),
        }));
    }

    /// A tool call, left open until its result arrives.
    fn tool_call(
        &mut self,
        owner: Option<u64>,
        event: &DecodedEvent,
        t: &ToolPayload,
        options: &ExportOptions,
    ) {
        let target = self.target(owner);
        let index = target.len();
        target.push(Entry::ToolCall(ToolCallExport {
            seq: event.seq,
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            fidelity: t.fidelity.as_str().to_owned(),
            input: truncate_raw(&t.input, options.truncate_outputs),
            output: serde_json::Value::Null,
            error: None,
            completed: false,
            started_at: event.timestamp.to_string(),
            completed_at: None,
        }));
        self.open_calls.insert(t.call_id.clone(), (owner, index));
    }

    /// A tool result: completes its open call, or stands alone (with no input) when no call is
    /// open under its id.
    fn tool_result(
        &mut self,
        owner: Option<u64>,
        event: &DecodedEvent,
        t: &ToolPayload,
        options: &ExportOptions,
    ) {
        let output = truncate_raw(&t.output, options.truncate_outputs);
        if let Some(call) = self.open_call(&t.call_id) {
            call.output = output;
            call.error = t.error.clone();
            call.completed = true;
            call.completed_at = Some(event.timestamp.to_string());
            return;
        }
        self.target(owner).push(Entry::ToolCall(ToolCallExport {
            seq: event.seq,
            call_id: t.call_id.clone(),
            name: t.name.clone(),
            fidelity: t.fidelity.as_str().to_owned(),
            input: serde_json::Value::Null,
            output,
            error: t.error.clone(),
            completed: true,
            started_at: event.timestamp.to_string(),
            completed_at: Some(event.timestamp.to_string()),
        }));
    }

    /// Takes the open call `call_id` names, if any.
    fn open_call(&mut self, call_id: &str) -> Option<&mut ToolCallExport> {
        let (call_owner, index) = self.open_calls.remove(call_id)?;
        let list = match call_owner {
            Some(start) => self.by_step.get_mut(&start),
            None => Some(&mut self.run),
        }?;
        match list.get_mut(index) {
            Some(Entry::ToolCall(call)) => Some(call),
            _ => None,
        }
    }
}

/// Step executions by (path, iteration): (start seq, end seq).
type Intervals<'a> = HashMap<(&'a str, u64), Vec<(u64, Option<u64>)>>;

fn collect_intervals<'a>(nodes: &'a [StepNode], out: &mut Intervals<'a>) {
    for n in nodes {
        out.entry((n.path.as_str(), n.iteration))
            .or_default()
            .push((n.start_seq, n.end_seq));
        collect_intervals(&n.children, out);
    }
}

fn step_export(
    node: &StepNode,
    by_step: &mut HashMap<u64, Vec<Entry>>,
    runs: &HashMap<RunId, Vec<DecodedEvent>>,
    options: &ExportOptions,
) -> StepExport {
    let entries = by_step.remove(&node.start_seq).unwrap_or_default();
    let mut usage = Usage::default();
    for e in &entries {
        if let Entry::Message(m) = e
            && let Some(u) = &m.usage
        {
            usage.accumulate(u);
        }
    }
    let child_run = node.child.as_ref().and_then(|child| {
        runs.get(&child.run_id)
            .map(|events| Box::new(run_export(child, events, runs, options)))
    });
    StepExport {
        path: node.path.clone(),
        name: node.name.clone(),
        kind: node.kind.clone(),
        iteration: node.iteration,
        status: node.status.as_str().to_owned(),
        started_at: node.started_at.to_string(),
        completed_at: node.completed_at.map(|t| t.to_string()),
        duration_ms: node.duration_ms(),
        error: node.error.clone(),
        result: node.result.as_ref().map(|r| r.to_value()),
        usage: (!usage.is_empty()).then_some(usage),
        network_refused: node.network_refused.clone(),
        cost_usd: None,
        entries,
        steps: node
            .children
            .iter()
            .map(|c| step_export(c, by_step, runs, options))
            .collect(),
        child_run_id: match (&child_run, node.child_run_id) {
            (None, Some(id)) => Some(id.to_string()),
            _ => None,
        },
        child_run,
    }
}

fn export_block(block: &DecodedBlock, options: &ExportOptions) -> Option<ExportBlock> {
    let DecodedBlock::Known(b) = block else {
        let DecodedBlock::Unknown(u) = block else {
            return None;
        };
        return Some(ExportBlock::Other {
            original_type: u.block_type.clone(),
            raw: u.raw.to_value(),
        });
    };
    let fidelity = b.fidelity.as_str().to_owned();
    Some(match &b.body {
        BlockBody::Text { text } => ExportBlock::Text {
            fidelity,
            text: text.clone(),
        },
        BlockBody::Thinking { thinking } => {
            if !options.include_reasoning {
                return None;
            }
            ExportBlock::Thinking {
                fidelity,
                thinking: thinking.clone(),
            }
        }
        BlockBody::ToolUse {
            tool_name,
            tool_id,
            tool_input,
        } => ExportBlock::ToolUse {
            fidelity,
            tool_name: tool_name.clone(),
            tool_id: tool_id.clone(),
            tool_input: truncate_raw(tool_input, options.truncate_outputs),
        },
        BlockBody::ToolResult {
            tool_id,
            tool_content,
        } => ExportBlock::ToolResult {
            fidelity,
            tool_id: tool_id.clone(),
            tool_content: truncate_raw(tool_content, options.truncate_outputs),
        },
        BlockBody::Command { command } => ExportBlock::Command {
            fidelity,
            command: command.clone(),
        },
        BlockBody::Stream { text } => ExportBlock::Stream {
            fidelity,
            text: text.clone(),
        },
    })
}
