//! Events to spans: an incremental state machine shared by offline export
//! ([`map_run`]) and live export ([`crate::LiveExporter`]).
//!
//! Files: this module (the API, the per-run state and event dispatch), `run` (workflow
//! spans), `steps` (step spans), `agent` (agent spans), `tools` (tool spans).

mod agent;
mod run;
mod steps;
mod tools;

use agent::agent_attributes;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use transcript_domain::StepPayload;
use transcript_domain::bill::CostSum;
use transcript_domain::tree::MAX_DEPTH;
use transcript_domain::{DecodedEvent, EventType, Fidelity, RunId, Seq, Timestamp, Usage};

use crate::content::{Conversation, raw_value};
use crate::ids;
use crate::semconv::*;

/// The instrumentation scope name on every exported span.
pub const SCOPE_NAME: &str = "transcript-otel";

/// The cost seam: US dollars for one provider turn (one API request) of `model` with
/// `usage`, or `None` when the model's price is unknown. Called for every turn that reported
/// usage, under its billed model (its own, else its step's: [`transcript_domain::bill`]).
///
/// **Seam**: this crate does no pricing itself; a price table (e.g. the pure pricing API of
/// `transcript-providers`) is plugged in here by the composition root.
pub type Pricing = Arc<dyn Fn(&str, &Usage) -> Option<f64> + Send + Sync>;

/// What the mapping puts on spans beyond structure and metadata.
#[derive(Clone, Default)]
pub struct MapOptions {
    /// Attach message content, tool arguments and tool results
    /// (`gen_ai.input.messages`, `gen_ai.output.messages`,
    /// `gen_ai.system_instructions`, `gen_ai.tool.call.arguments`,
    /// `gen_ai.tool.call.result`). Off by default: content may hold secrets.
    pub capture_content: bool,
    /// Prices each provider turn (`llm.cost.total` and `gen_ai.usage.cost` on its `chat`
    /// span, the step's sum as `transcript.usage.cost_usd` on its agent span). `None`: no
    /// priced cost is exported (what a CLI reported itself still is, on agent spans, as
    /// `transcript.usage.reported_cost_usd`).
    pub pricing: Option<Pricing>,
}

impl std::fmt::Debug for MapOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapOptions")
            .field("capture_content", &self.capture_content)
            .field("pricing", &self.pricing.as_ref().map(|_| "Fn"))
            .finish()
    }
}

impl MapOptions {
    /// Options with content capture switched on or off.
    pub fn with_content(capture_content: bool) -> Self {
        Self {
            capture_content,
            pricing: None,
        }
    }

    /// Sets the cost seam (see [`Pricing`]).
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(pricing);
        self
    }
}

/// An inconsistency met while mapping. Nothing is dropped for it: the
/// affected span is still produced, as well as it can be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MapProblem {
    /// A step completion with no open start of the same path and iteration.
    #[error(
        "run {run_id} seq {seq}: completion of {path:?} (iteration {iteration}) without a start"
    )]
    CompletedWithoutStart {
        /// The run.
        run_id: RunId,
        /// Seq of the completion.
        seq: Seq,
        /// Its path.
        path: String,
        /// Its iteration.
        iteration: u64,
    },
    /// A `tool.result` with no open `tool.call` of the same `call_id`; it
    /// becomes a zero-length span at the result's time.
    #[error("run {run_id} seq {seq}: result of tool call {call_id:?} without a call")]
    ResultWithoutCall {
        /// The run.
        run_id: RunId,
        /// Seq of the result.
        seq: Seq,
        /// Its call id.
        call_id: String,
    },
    /// A `call_workflow` step whose child run's events could not be found.
    #[error("child run {child_run_id} not found")]
    ChildMissing {
        /// The child run id.
        child_run_id: RunId,
    },
    /// A child run already mapped (a link cycle or a duplicated link).
    #[error("child run {child_run_id} is linked more than once")]
    Cycle {
        /// The child run id.
        child_run_id: RunId,
    },
    /// Child runs nested deeper than [`MAX_DEPTH`].
    #[error("child run {child_run_id} is nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The child run id not followed.
        child_run_id: RunId,
    },
    /// Events of a child run whose `call_workflow` step was never seen (live
    /// mode); the run was exported as the root of its own trace.
    #[error("run {run_id} names parent {parent_run_id}, whose call_workflow step was never seen")]
    Unlinked {
        /// The run.
        run_id: RunId,
        /// The parent it names.
        parent_run_id: RunId,
    },
}

/// The spans of one root run and its child runs.
#[derive(Debug, Clone)]
pub struct MappedTrace {
    /// The trace id (derived from the root run id); invalid for no events.
    pub trace_id: TraceId,
    /// Every span, children before parents where both ended together.
    pub spans: Vec<SpanData>,
    /// Inconsistencies met (the spans are produced regardless).
    pub problems: Vec<MapProblem>,
}

/// Maps a stored run and, through `lookup`, its child runs (the contract of
/// [`transcript_domain::tree::build_run_tree`]) to spans: one trace, rooted
/// at the run's `invoke_workflow` span. The first event's run is the root,
/// whatever its `parent_run_id`. Child runs are followed with cycle and depth
/// guards; a missing child is a [`MapProblem::ChildMissing`].
pub fn map_run(
    events: &[DecodedEvent],
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    options: MapOptions,
) -> MappedTrace {
    let mut mapper = SpanMapper::new(options);
    let Some(root) = events.first().map(|e| e.run_id) else {
        return mapper.finish();
    };
    mapper.add_root(root);
    for event in events {
        mapper.ingest(event);
    }
    let mut visited: HashSet<RunId> = HashSet::from([root]);
    while let Some((child, depth)) = mapper.next_child() {
        if !visited.insert(child) {
            mapper.problems.push(MapProblem::Cycle {
                child_run_id: child,
            });
            continue;
        }
        if mapper.runs.contains_key(&child) {
            // Its events came with the parent's (one file holding both).
            continue;
        }
        if depth > MAX_DEPTH {
            mapper.problems.push(MapProblem::TooDeep {
                child_run_id: child,
            });
            continue;
        }
        match lookup(child) {
            Some(child_events) => {
                for event in &child_events {
                    mapper.ingest(event);
                }
            }
            None => mapper.problems.push(MapProblem::ChildMissing {
                child_run_id: child,
            }),
        }
    }
    mapper.finish()
}

/// Where a run's spans hang in the trace.
#[derive(Debug, Clone, Copy)]
struct Link {
    trace_id: TraceId,
    parent_span: SpanId,
    parent_run: Option<RunId>,
    depth: usize,
}

#[derive(Debug, Default)]
struct AgentInfo {
    provider: Option<String>,
    request_model: Option<String>,
    response_model: Option<String>,
    usage: Option<Usage>,
    /// The priced cost of its billed turns (unknown as soon as one is).
    cost: CostSum,
    /// The distinct models its turns named (the step's model, when there is one).
    models: Vec<String>,
    /// Turns naming no model, whose `chat` spans wait for the step's end.
    held: Vec<agent::Turn>,
    /// Messages without usage since the last usage report: items of the request whose usage
    /// comes later (one request, one `chat` span), merged into it when it arrives.
    pending: Option<agent::Turn>,
    /// When the agent's previous turn ended: where the next turn's `chat` span starts.
    last_turn: Option<Timestamp>,
    conversation: Conversation,
}

#[derive(Debug)]
struct OpenStep {
    path: String,
    iteration: u64,
    span_id: SpanId,
    parent_span: SpanId,
    start: Timestamp,
    start_seq: Seq,
    name: String,
    kind: String,
    child_run_id: Option<RunId>,
    agent: Option<Box<AgentInfo>>,
}

#[derive(Debug)]
struct OpenTool {
    call_id: String,
    /// The provider's id when `call_id` carries the executor's prefix.
    provider_call_id: Option<String>,
    fidelity: Fidelity,
    name: String,
    span_id: SpanId,
    parent_span: SpanId,
    start: Timestamp,
    start_seq: Seq,
    arguments: Option<serde_json::Value>,
}

#[derive(Debug)]
struct RunState {
    run_id: RunId,
    parent_run_id: Option<RunId>,
    link: Link,
    span_id: SpanId,
    workflow: Option<String>,
    start: Timestamp,
    start_seq: Seq,
    last: Timestamp,
    done: bool,
    steps: Vec<OpenStep>,
    tools: Vec<OpenTool>,
}

/// The incremental mapper: feed events in file order per run (runs may
/// interleave), collect finished spans with [`SpanMapper::take_spans`], and
/// close whatever is still open with [`SpanMapper::finish`].
///
/// A span is produced as soon as its closing event arrives (`run.completed`,
/// `step.*completed`, `tool.result`); spans still open at `finish` end at
/// their run's last event with status error `"incomplete"`.
///
/// Events of a child run are held back until the parent's
/// `step.call_workflow.started` naming it has been seen, so its spans land
/// under that step whatever order the runs' events arrive in.
pub struct SpanMapper {
    capture_content: bool,
    pricing: Option<Pricing>,
    scope: InstrumentationScope,
    runs: HashMap<RunId, RunState>,
    /// Run ids in the order their state was created (deterministic finish).
    order: Vec<RunId>,
    links: HashMap<RunId, Link>,
    roots: HashSet<RunId>,
    first_trace: Option<TraceId>,
    pending: HashMap<RunId, Vec<DecodedEvent>>,
    pending_order: Vec<RunId>,
    children: Vec<(RunId, usize)>,
    next_child: usize,
    spans: Vec<SpanData>,
    problems: Vec<MapProblem>,
}

impl SpanMapper {
    /// An empty mapper.
    pub fn new(options: MapOptions) -> Self {
        Self {
            capture_content: options.capture_content,
            pricing: options.pricing,
            scope: InstrumentationScope::builder(SCOPE_NAME)
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            runs: HashMap::new(),
            order: Vec::new(),
            links: HashMap::new(),
            roots: HashSet::new(),
            first_trace: None,
            pending: HashMap::new(),
            pending_order: Vec::new(),
            children: Vec::new(),
            next_child: 0,
            spans: Vec::new(),
            problems: Vec::new(),
        }
    }

    /// Declares `run` a root even if its events name a parent (exporting a
    /// child run on its own). Runs without `parent_run_id` are roots anyway.
    pub fn add_root(&mut self, run: RunId) {
        self.roots.insert(run);
    }

    /// Feeds one event.
    pub fn ingest(&mut self, event: &DecodedEvent) {
        if !self.runs.contains_key(&event.run_id) {
            let link = match self.links.get(&event.run_id) {
                Some(link) => *link,
                None if event.parent_run_id.is_none() || self.roots.contains(&event.run_id) => {
                    self.root_link(event.run_id)
                }
                None => {
                    let held = self.pending.entry(event.run_id).or_default();
                    if held.is_empty() {
                        self.pending_order.push(event.run_id);
                    }
                    held.push(event.clone());
                    return;
                }
            };
            self.open_run(event, link);
        }
        self.apply(event);
    }

    /// Spans finished so far (removed from the mapper).
    pub fn take_spans(&mut self) -> Vec<SpanData> {
        std::mem::take(&mut self.spans)
    }

    /// Number of finished spans waiting in [`SpanMapper::take_spans`].
    pub fn ready(&self) -> usize {
        self.spans.len()
    }

    /// Problems met so far.
    pub fn problems(&self) -> &[MapProblem] {
        &self.problems
    }

    /// Closes everything still open (status error `"incomplete"`, ending at
    /// the run's last event), maps runs whose parent link never arrived as
    /// roots of their own traces, and returns every span not yet taken.
    pub fn finish(mut self) -> MappedTrace {
        let unlinked = std::mem::take(&mut self.pending_order);
        for run in unlinked {
            let Some(events) = self.pending.remove(&run) else {
                continue;
            };
            if let Some(parent) = events.first().and_then(|e| e.parent_run_id) {
                self.problems.push(MapProblem::Unlinked {
                    run_id: run,
                    parent_run_id: parent,
                });
            }
            self.roots.insert(run);
            for event in &events {
                self.ingest(event);
            }
        }
        let order = std::mem::take(&mut self.order);
        for run in order.iter().rev() {
            let Some(mut state) = self.runs.remove(run) else {
                continue;
            };
            let end = state.last;
            self.close_open(&mut state, end);
            if !state.done {
                self.emit_run(&state, end, Status::error(INCOMPLETE));
            }
        }
        MappedTrace {
            trace_id: self.first_trace.unwrap_or(TraceId::INVALID),
            spans: self.spans,
            problems: self.problems,
        }
    }

    fn apply(&mut self, event: &DecodedEvent) {
        // A child run's activity keeps its ancestors' incomplete spans open
        // until its own last event.
        self.touch(event.run_id, event.timestamp);
        let Some(kind) = event.kind.known() else {
            return;
        };
        let Some(mut state) = self.runs.remove(&event.run_id) else {
            return;
        };
        match kind {
            EventType::RunStarted => {
                state.start = event.timestamp;
                state.start_seq = event.seq;
                if let Some(p) = event.step() {
                    state.workflow = Some(p.name.clone());
                }
            }
            EventType::RunCompleted => {
                if state.workflow.is_none() {
                    state.workflow = event.step().map(|p| p.name.clone());
                }
                self.close_open(&mut state, event.timestamp);
                let status = match event.step().and_then(|p| p.error.as_deref()) {
                    Some(error) => Status::error(error.to_owned()),
                    None => Status::Unset,
                };
                if !state.done {
                    self.emit_run(&state, event.timestamp, status);
                }
                state.done = true;
            }
            EventType::StepStarted | EventType::CallWorkflowStarted => {
                self.start_step(&mut state, event, kind);
            }
            EventType::StepCompleted | EventType::CallWorkflowCompleted => {
                self.complete_step(&mut state, event);
            }
            EventType::MessageUser | EventType::MessageAssistant => {
                self.message(&mut state, event, kind);
            }
            EventType::ToolCall => self.tool_call(&mut state, event),
            EventType::ToolResult => self.tool_result(&mut state, event),
        }
        self.runs.insert(event.run_id, state);
    }

    fn touch(&mut self, run: RunId, at: Timestamp) {
        let mut current = Some(run);
        // Bounded by the link depth guard; the counter is a belt and braces.
        for _ in 0..=MAX_DEPTH + 1 {
            let Some(id) = current else { break };
            let Some(state) = self.runs.get_mut(&id) else {
                break;
            };
            if at > state.last {
                state.last = at;
            }
            current = state.link.parent_run;
        }
    }

    /// The open step a message or tool event belongs to (decision 5: it
    /// carries its step's path and iteration).
    fn owner(state: &RunState, path: &str, iteration: u64) -> Option<usize> {
        if path.is_empty() {
            return None;
        }
        let steps = &state.steps;
        steps
            .iter()
            .rposition(|s| s.path == path && s.iteration == iteration)
            .or_else(|| steps.iter().rposition(|s| s.path == path))
            .or_else(|| parent_of(steps, path))
    }

    fn push_span(&mut self, span: NewSpan) {
        self.push_span_of_kind(SpanKind::Internal, span);
    }

    /// [`Self::push_span`] with a span kind (`Client` for inference spans, the client side
    /// of a call to the provider, as the conventions say).
    fn push_span_of_kind(&mut self, kind: SpanKind, span: NewSpan) {
        let NewSpan {
            trace_id,
            span_id,
            parent_span_id,
            name,
            start,
            end,
            attributes,
            status,
        } = span;
        let end = if end < start { start } else { end };
        let mut attributes = attributes;
        if let Status::Error { description } = &status {
            let class = if description == INCOMPLETE {
                INCOMPLETE
            } else {
                ERROR_TYPE_OTHER
            };
            attributes.push(KeyValue::new(ERROR_TYPE, class));
        }
        self.spans.push(SpanData {
            span_context: SpanContext::new(
                trace_id,
                span_id,
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id,
            parent_span_is_remote: false,
            span_kind: kind,
            name: Cow::Owned(name),
            start_time: span_time(start),
            end_time: span_time(end),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }
}

/// One span to emit: where it sits in the trace, its name, when it ran, what it says and how
/// it ended (the value the span builders hand to [`SpanMapper::push_span`]).
struct NewSpan {
    trace_id: TraceId,
    span_id: SpanId,
    parent_span_id: SpanId,
    name: String,
    start: Timestamp,
    end: Timestamp,
    attributes: Vec<KeyValue>,
    status: Status,
}

impl std::fmt::Debug for SpanMapper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanMapper")
            .field("capture_content", &self.capture_content)
            .field("runs", &self.runs.len())
            .field("ready", &self.spans.len())
            .field("problems", &self.problems)
            .finish_non_exhaustive()
    }
}

/// The innermost open step whose path is a proper dotted prefix of `path`
/// (decision 4), most recent first.
fn parent_of(steps: &[OpenStep], path: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (i, s) in steps.iter().enumerate().rev() {
        let is_prefix = path.len() > s.path.len()
            && path.starts_with(s.path.as_str())
            && path.as_bytes()[s.path.len()] == b'.'
            && !s.path.is_empty();
        if is_prefix && best.is_none_or(|(_, len)| s.path.len() > len) {
            best = Some((i, s.path.len()));
        }
    }
    best.map(|(i, _)| i)
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Event time as `SystemTime` (times before 1970 clamp to the epoch, which
/// OTLP cannot express anyway).
pub fn span_time(ts: Timestamp) -> SystemTime {
    u64::try_from(ts.unix_millis())
        .ok()
        .and_then(|ms| SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        .unwrap_or(SystemTime::UNIX_EPOCH)
}
