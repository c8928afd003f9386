//! Step tree reconstruction from transcript events alone (US1, SC-001).
//!
//! Pure logic: the caller supplies the events of a run and a lookup that
//! returns the events of a child run (infra reads them from files). Nesting
//! follows decision 4: a step whose path is `a.b` is a child of the step `a`
//! that is open (started, not yet completed) when `a.b` starts; a completion
//! closes the most recent open step with the same path and iteration.

use std::collections::HashSet;

use serde::Serialize;

use crate::bill::{Bill, PriceFn, Turn};
use crate::decode::DecodedEvent;
use crate::ids::{RunId, Seq};
use crate::payload::Usage;
use crate::raw::RawJson;
use crate::timestamp::Timestamp;
use crate::vocab::EventType;

/// Where a step or run ended up: the one status vocabulary of the workspace (the tree, the
/// engine's outcomes, the audit trail, `parallel` and `terminal` results all say these words).
///
/// On the wire a status is never a field: it is read from the completion event. No
/// completion is [`Status::Incomplete`]; a completion without `error` is
/// [`Status::Succeeded`]; one whose `error` is exactly [`CANCELLED`] is
/// [`Status::Cancelled`] (the engine writes that word for a cancelled run or step, and
/// nothing else); any other `error` is [`Status::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Started, never completed (crashed or still running).
    Incomplete,
    /// Completed without error.
    Succeeded,
    /// Completed with an error.
    Failed,
    /// Completed because the run was cancelled (error [`CANCELLED`]).
    Cancelled,
}

/// The `error` of a completion event that ended by cancellation.
pub const CANCELLED: &str = "cancelled";

impl Status {
    /// Lowercase name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Incomplete => "incomplete",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// The status a completion event with `error` says.
    pub fn of_completion(error: Option<&str>) -> Self {
        match error {
            None => Status::Succeeded,
            Some(CANCELLED) => Status::Cancelled,
            Some(_) => Status::Failed,
        }
    }
}

/// One step execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepNode {
    /// Dot-separated path.
    pub path: String,
    /// Step name.
    pub name: String,
    /// Step kind.
    pub kind: String,
    /// Innermost loop iteration.
    pub iteration: u64,
    /// Outcome.
    pub status: Status,
    /// Seq of the start event.
    pub start_seq: Seq,
    /// Seq of the completion event.
    pub end_seq: Option<Seq>,
    /// Start time.
    pub started_at: Timestamp,
    /// Completion time.
    pub completed_at: Option<Timestamp>,
    /// Error of the completion event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Result of the completion event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<RawJson>,
    /// The destinations its processes were refused (decision 19), from the completion event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_refused: Option<crate::NetworkRefused>,
    /// The child run started by a `call_workflow` step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child_run_id: Option<RunId>,
    /// That child run's tree, when its events were found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub child: Option<Box<RunTree>>,
    /// Nested step executions, in start order.
    pub children: Vec<StepNode>,
    /// This step's own assistant turns (`message.assistant` events on its path and iteration
    /// while it is open), with their model and usage: see [`StepNode::bill`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Turn>,
}

impl StepNode {
    /// Milliseconds from start to completion.
    pub fn duration_ms(&self) -> Option<i64> {
        self.completed_at.map(|c| c.millis_since(self.started_at))
    }

    /// Usage and cost of this step's own turns (one request, one bill: see [`crate::bill`]),
    /// priced with `price` when given.
    pub fn bill(&self, price: Option<&PriceFn<'_>>) -> Bill {
        Bill::of_step(&self.turns, price)
    }

    /// Usage and cost of this step, its nested steps and its child run.
    pub fn total_bill(&self, price: Option<&PriceFn<'_>>) -> Bill {
        let mut bill = self.bill(price);
        for node in &self.children {
            bill.merge(&node.total_bill(price));
        }
        if let Some(child) = &self.child {
            bill.merge(&child.bill(price));
        }
        bill
    }

    /// Summed usage of this step, its nested steps and its child run.
    pub fn usage(&self) -> Usage {
        self.total_bill(None).usage
    }
}

/// A run and its steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunTree {
    /// The run.
    pub run_id: RunId,
    /// Its parent run, if it is a child run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<RunId>,
    /// Workflow name from `run.started`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Outcome from `run.completed` (incomplete when absent).
    pub status: Status,
    /// Time of `run.started` (or of the first event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// Time of `run.completed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Timestamp>,
    /// Error of `run.completed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Top-level step executions in start order.
    pub steps: Vec<StepNode>,
    /// Inconsistencies found while rebuilding (nothing is dropped for them).
    pub problems: Vec<TreeProblem>,
}

impl RunTree {
    /// Milliseconds from run start to completion.
    pub fn duration_ms(&self) -> Option<i64> {
        Some(self.completed_at?.millis_since(self.started_at?))
    }

    /// Usage and cost of every step of this run and of its child runs.
    pub fn bill(&self, price: Option<&PriceFn<'_>>) -> Bill {
        let mut bill = Bill::default();
        for node in &self.steps {
            bill.merge(&node.total_bill(price));
        }
        bill
    }

    /// Summed usage of this run and its child runs.
    pub fn usage(&self) -> Usage {
        self.bill(None).usage
    }

    /// Every step execution, depth first, with its depth (child runs included,
    /// nested under their `call_workflow` step).
    pub fn walk(&self) -> Vec<(usize, &StepNode)> {
        fn go<'a>(nodes: &'a [StepNode], depth: usize, out: &mut Vec<(usize, &'a StepNode)>) {
            for node in nodes {
                out.push((depth, node));
                if let Some(child) = &node.child {
                    go(&child.steps, depth + 1, out);
                }
                go(&node.children, depth + 1, out);
            }
        }
        let mut out = Vec::new();
        go(&self.steps, 0, &mut out);
        out
    }

    /// A compact, time-free outline, one line per step execution:
    /// `<indent><path>#<iteration> <kind> <name> <status>`. Two trees with the
    /// same shape, names and outcomes have equal outlines.
    pub fn outline(&self) -> String {
        let mut out = String::new();
        for (depth, node) in self.walk() {
            for _ in 0..depth {
                out.push_str("  ");
            }
            out.push_str(&format!(
                "{}#{} {} {} {}\n",
                node.path,
                node.iteration,
                node.kind,
                node.name,
                node.status.as_str()
            ));
        }
        out
    }

    /// Problems of this run and of every child run.
    pub fn all_problems(&self) -> Vec<&TreeProblem> {
        let mut out: Vec<&TreeProblem> = self.problems.iter().collect();
        for (_, node) in self.walk() {
            if let Some(child) = &node.child {
                out.extend(child.problems.iter());
            }
        }
        out
    }
}

/// An inconsistency met while rebuilding a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum TreeProblem {
    /// A completion with no open start of the same path and iteration.
    #[error("seq {seq}: completion of {path:?} (iteration {iteration}) without a start")]
    CompletedWithoutStart {
        /// Seq of the completion.
        seq: Seq,
        /// Its path.
        path: String,
        /// Its iteration.
        iteration: u64,
    },
    /// A `call_workflow` step whose child run could not be found.
    #[error("child run {child_run_id} not found")]
    ChildMissing {
        /// The child run id.
        child_run_id: RunId,
    },
    /// A child run whose events do not name this run as their parent.
    #[error("child run {child_run_id} does not name {expected_parent} as its parent")]
    ParentMismatch {
        /// The child run id.
        child_run_id: RunId,
        /// The run that called it.
        expected_parent: RunId,
    },
    /// Child runs nested deeper than [`MAX_DEPTH`].
    #[error("child run {child_run_id} is nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The child run id not followed.
        child_run_id: RunId,
    },
    /// A child run that is already being rebuilt higher up (a link cycle).
    #[error("child run {child_run_id} forms a cycle")]
    Cycle {
        /// The child run id.
        child_run_id: RunId,
    },
    /// A child run already attached under another `call_workflow` step. Each child run has
    /// exactly one caller; a second link is reported and not expanded again (expanding shared
    /// links would make the tree, and the work, exponential in the number of runs).
    #[error("child run {child_run_id} is already attached under another step")]
    SharedChild {
        /// The child run id.
        child_run_id: RunId,
    },
}

/// Rebuilds the tree of a run from its events (file order) and, through
/// `lookup`, the events of its child runs. Returns a tree even for empty or
/// inconsistent input; inconsistencies are listed in `problems`.
///
/// Work is linear in the number of distinct runs: `lookup` is called at most once per child
/// run id, a run linked from two steps is expanded under the first and reported
/// ([`TreeProblem::SharedChild`]) under the others, and nesting stops at [`MAX_DEPTH`].
pub fn build_run_tree(
    events: &[DecodedEvent],
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
) -> RunTree {
    let mut links = Links::default();
    build(events, lookup, &mut links)
}

/// The child links followed so far.
#[derive(Default)]
struct Links {
    /// Runs on the current path from the root (cycle detection and depth).
    visiting: HashSet<RunId>,
    /// Every run already looked up, anywhere in the tree.
    seen: HashSet<RunId>,
}

/// An index path from the root list to a node.
type Slot = Vec<usize>;

fn build(
    events: &[DecodedEvent],
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    links: &mut Links,
) -> RunTree {
    let run_id = events
        .first()
        .map(|e| e.run_id)
        .unwrap_or_else(|| RunId::from_bytes([0; 16]));
    let newly_visited = links.visiting.insert(run_id);
    links.seen.insert(run_id);
    let mut builder = Builder {
        tree: RunTree {
            run_id,
            parent_run_id: events.first().and_then(|e| e.parent_run_id),
            workflow: None,
            status: Status::Incomplete,
            started_at: events.first().map(|e| e.timestamp),
            completed_at: None,
            error: None,
            steps: Vec::new(),
            problems: Vec::new(),
        },
        open: Vec::new(),
    };
    for event in events {
        builder.apply(event);
    }
    let mut tree = builder.tree;
    attach_children(&mut tree.steps, run_id, lookup, links, &mut tree.problems);
    if newly_visited {
        links.visiting.remove(&run_id);
    }
    tree
}

/// One run's tree while its events are applied in file order.
struct Builder {
    tree: RunTree,
    /// Open step executions: (slot, path, iteration), in start order.
    open: Vec<(Slot, String, u64)>,
}

impl Builder {
    fn apply(&mut self, event: &DecodedEvent) {
        let Some(event_type) = event.kind.known() else {
            return;
        };
        match event_type {
            EventType::RunStarted => {
                self.tree.started_at = Some(event.timestamp);
                if let Some(p) = event.step() {
                    self.tree.workflow = Some(p.name.clone());
                }
            }
            EventType::RunCompleted => self.run_completed(event),
            EventType::StepStarted | EventType::CallWorkflowStarted => {
                self.step_started(event, event_type);
            }
            EventType::StepCompleted | EventType::CallWorkflowCompleted => {
                self.step_completed(event);
            }
            EventType::MessageAssistant => self.assistant_turn(event),
            _ => {}
        }
    }

    fn run_completed(&mut self, event: &DecodedEvent) {
        let step = event.step();
        let tree = &mut self.tree;
        tree.completed_at = Some(event.timestamp);
        tree.error = step.and_then(|p| p.error.clone());
        tree.status = Status::of_completion(tree.error.as_deref());
        if tree.workflow.is_none() {
            tree.workflow = step.map(|p| p.name.clone());
        }
    }

    fn step_started(&mut self, event: &DecodedEvent, event_type: EventType) {
        let step = event.step();
        let node = StepNode {
            path: event.path.clone(),
            name: step.map(|p| p.name.clone()).unwrap_or_default(),
            kind: step.map(|p| p.kind.clone()).unwrap_or_else(|| {
                if event_type == EventType::CallWorkflowStarted {
                    "call_workflow".to_owned()
                } else {
                    String::new()
                }
            }),
            iteration: event.iteration,
            status: Status::Incomplete,
            start_seq: event.seq,
            end_seq: None,
            started_at: event.timestamp,
            completed_at: None,
            error: None,
            result: None,
            network_refused: None,
            child_run_id: event.child_run_id,
            child: None,
            children: Vec::new(),
            turns: Vec::new(),
        };
        let parent = self
            .open
            .iter()
            .rev()
            .filter(|(_, p, _)| is_proper_prefix(p, &event.path))
            .max_by_key(|(_, p, _)| p.len())
            .map(|(slot, _, _)| slot.clone());
        let siblings = match parent
            .as_deref()
            .and_then(|s| node_at(&mut self.tree.steps, s))
        {
            Some(parent_node) => &mut parent_node.children,
            None => &mut self.tree.steps,
        };
        siblings.push(node);
        let mut slot = parent.unwrap_or_default();
        slot.push(siblings.len() - 1);
        self.open.push((slot, event.path.clone(), event.iteration));
    }

    /// The open step execution of the event's path and iteration (the most recent one).
    fn open_index(&self, event: &DecodedEvent) -> Option<usize> {
        self.open
            .iter()
            .rposition(|(_, p, i)| *p == event.path && *i == event.iteration)
    }

    fn step_completed(&mut self, event: &DecodedEvent) {
        let Some(index) = self.open_index(event) else {
            self.tree.problems.push(TreeProblem::CompletedWithoutStart {
                seq: event.seq,
                path: event.path.clone(),
                iteration: event.iteration,
            });
            return;
        };
        let (slot, _, _) = self.open.remove(index);
        let Some(node) = node_at(&mut self.tree.steps, &slot) else {
            return;
        };
        let step = event.step();
        node.end_seq = Some(event.seq);
        node.completed_at = Some(event.timestamp);
        node.error = step.and_then(|p| p.error.clone());
        node.result = step.and_then(|p| p.result.clone());
        node.network_refused = step.and_then(|p| p.network_refused.clone());
        node.status = Status::of_completion(node.error.as_deref());
        if node.child_run_id.is_none() {
            node.child_run_id = event.child_run_id;
        }
    }

    /// An assistant turn belongs to the open step of its path and iteration; a turn outside
    /// any open step (run level, or after its step completed) is billed to no step.
    fn assistant_turn(&mut self, event: &DecodedEvent) {
        let Some(message) = event.message() else {
            return;
        };
        let Some(index) = self.open_index(event) else {
            return;
        };
        let slot = self.open[index].0.clone();
        if let Some(node) = node_at(&mut self.tree.steps, &slot) {
            node.turns.push(Turn {
                seq: event.seq,
                model: message.model.clone(),
                usage: message.usage.clone(),
            });
        }
    }
}

/// Child-run nesting deeper than this is reported, not followed (guards the
/// stack against hostile link chains).
pub const MAX_DEPTH: usize = 128;

fn attach_children(
    nodes: &mut [StepNode],
    run_id: RunId,
    lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    links: &mut Links,
    problems: &mut Vec<TreeProblem>,
) {
    for node in nodes.iter_mut() {
        if let Some(child_id) = node.child_run_id {
            if links.visiting.contains(&child_id) {
                problems.push(TreeProblem::Cycle {
                    child_run_id: child_id,
                });
            } else if links.visiting.len() >= MAX_DEPTH {
                problems.push(TreeProblem::TooDeep {
                    child_run_id: child_id,
                });
            } else if !links.seen.insert(child_id) {
                problems.push(TreeProblem::SharedChild {
                    child_run_id: child_id,
                });
            } else {
                match lookup(child_id) {
                    Some(events) if !events.is_empty() => {
                        if events.iter().any(|e| e.parent_run_id != Some(run_id)) {
                            problems.push(TreeProblem::ParentMismatch {
                                child_run_id: child_id,
                                expected_parent: run_id,
                            });
                        }
                        links.visiting.insert(child_id);
                        node.child = Some(Box::new(build(&events, lookup, links)));
                        links.visiting.remove(&child_id);
                    }
                    _ => problems.push(TreeProblem::ChildMissing {
                        child_run_id: child_id,
                    }),
                }
            }
        }
        attach_children(&mut node.children, run_id, lookup, links, problems);
    }
}

fn is_proper_prefix(parent: &str, path: &str) -> bool {
    path.len() > parent.len()
        && path.starts_with(parent)
        && path.as_bytes().get(parent.len()) == Some(&b'.')
}

/// The node at `slot`. Slots are built by `build` from pushes only, so they
/// are always valid; `None` would mean an internal bug, never bad input.
fn node_at<'a>(nodes: &'a mut [StepNode], slot: &[usize]) -> Option<&'a mut StepNode> {
    let (first, rest) = slot.split_first()?;
    let mut node = nodes.get_mut(*first)?;
    for &i in rest {
        node = node.children.get_mut(i)?;
    }
    Some(node)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_says_its_status_in_the_one_vocabulary() {
        assert_eq!(Status::of_completion(None), Status::Succeeded);
        assert_eq!(Status::of_completion(Some(CANCELLED)), Status::Cancelled);
        assert_eq!(Status::of_completion(Some("exit 1")), Status::Failed);
        // Only the exact word is a cancellation.
        assert_eq!(
            Status::of_completion(Some("cancelled: by hand")),
            Status::Failed
        );
        let words: Vec<&str> = [
            Status::Incomplete,
            Status::Succeeded,
            Status::Failed,
            Status::Cancelled,
        ]
        .iter()
        .map(|s| s.as_str())
        .collect();
        assert_eq!(words, ["incomplete", "succeeded", "failed", "cancelled"]);
    }
    use crate::{EventDraft, Payload, RunIdGenerator, SequentialRunIds, StepPayload};

    struct Run {
        id: RunId,
        parent: Option<RunId>,
        events: Vec<DecodedEvent>,
    }

    impl Run {
        fn new(id: RunId, parent: Option<RunId>) -> Self {
            Self {
                id,
                parent,
                events: Vec::new(),
            }
        }
        fn push(&mut self, draft: EventDraft) {
            let seq = self.events.len() as u64 + 1;
            let ts = Timestamp::from_unix_millis(seq as i64 * 10).unwrap();
            self.events
                .push(draft.into_event(seq, self.id, self.parent, ts).into());
        }
        fn start(&mut self, path: &str, it: u64, kind: &str) {
            let name = path.rsplit('.').next().unwrap().to_owned();
            self.push(EventDraft::new(
                path,
                it,
                Payload::StepStarted(StepPayload::new(name, kind)),
            ));
        }
        fn end(&mut self, path: &str, it: u64, kind: &str, error: Option<&str>) {
            let name = path.rsplit('.').next().unwrap().to_owned();
            let mut p = StepPayload::new(name, kind);
            if let Some(e) = error {
                p = p.with_error(e);
            }
            self.push(EventDraft::new(path, it, Payload::StepCompleted(p)));
        }
    }

    #[test]
    fn nested_loops_inside_parallel_branches_rebuild_exactly() {
        let ids = SequentialRunIds::new();
        let mut run = Run::new(ids.next_run_id(), None);
        run.push(EventDraft::run_level(Payload::RunStarted(
            StepPayload::new("wf", "workflow"),
        )));
        run.start("par", 0, "parallel");
        run.start("par.a", 0, "for_each");
        run.start("par.b", 0, "while");
        for i in 0..2 {
            run.start("par.a.s", i, "command");
            run.start("par.b.t", i, "operation");
            run.end("par.a.s", i, "command", None);
            run.end("par.b.t", i, "operation", (i == 1).then_some("boom"));
        }
        run.end("par.b", 0, "while", Some("boom"));
        run.end("par.a", 0, "for_each", None);
        run.end("par", 0, "parallel", Some("branch b failed"));
        run.push(EventDraft::run_level(Payload::RunCompleted(
            StepPayload::new("wf", "workflow").with_error("branch b failed"),
        )));
        let tree = build_run_tree(&run.events, &mut |_| None);
        assert_eq!(tree.workflow.as_deref(), Some("wf"));
        assert_eq!(tree.status, Status::Failed);
        assert!(tree.problems.is_empty(), "{:?}", tree.problems);
        assert_eq!(
            tree.outline(),
            "par#0 parallel par failed\n\
             \x20 par.a#0 for_each a succeeded\n\
             \x20   par.a.s#0 command s succeeded\n\
             \x20   par.a.s#1 command s succeeded\n\
             \x20 par.b#0 while b failed\n\
             \x20   par.b.t#0 operation t succeeded\n\
             \x20   par.b.t#1 operation t failed\n"
        );
        assert_eq!(tree.steps[0].duration_ms(), Some(130));
        assert_eq!(tree.duration_ms(), Some(150));
    }

    fn turn(run: &mut Run, path: &str, model: Option<&str>, input: Option<u64>) {
        let mut m = crate::MessagePayload::new(crate::Role::Assistant, Vec::new());
        m.model = model.map(str::to_owned);
        m.usage = input.map(|i| Usage {
            input_tokens: Some(i),
            ..Usage::default()
        });
        run.push(EventDraft::new(path, 0, Payload::MessageAssistant(m)));
    }

    /// Each step keeps its own turns; totals add nested steps and the child run, each request
    /// once; a usage-only turn is priced under its step's model.
    #[test]
    fn usage_is_billed_per_step_and_summed_over_nested_steps_and_child_runs() {
        let ids = SequentialRunIds::new();
        let (root_id, child_id) = (ids.next_run_id(), ids.next_run_id());
        let mut root = Run::new(root_id, None);
        root.start("a", 0, "agent");
        turn(&mut root, "a", Some("m"), None);
        turn(&mut root, "a", None, Some(100));
        root.end("a", 0, "agent", None);
        turn(&mut root, "a", Some("m"), Some(1000)); // after its step: nobody's
        root.push(
            EventDraft::new(
                "call",
                0,
                Payload::CallWorkflowStarted(StepPayload::new("call", "call_workflow")),
            )
            .with_child(child_id),
        );
        root.push(EventDraft::new(
            "call",
            0,
            Payload::CallWorkflowCompleted(StepPayload::new("call", "call_workflow")),
        ));
        let mut child = Run::new(child_id, Some(root_id));
        child.start("b", 0, "agent");
        turn(&mut child, "b", Some("m"), Some(7));
        child.end("b", 0, "agent", None);
        let child_events = child.events.clone();
        let tree = build_run_tree(&root.events, &mut |_| Some(child_events.clone()));
        let price =
            |model: &str, u: &Usage| (model == "m").then(|| u.input_tokens.unwrap_or(0) as f64);
        let a = tree.steps[0].bill(Some(&price));
        assert_eq!(
            (a.turns, a.billed_turns, a.usage.input_tokens),
            (2, 1, Some(100))
        );
        assert_eq!(a.cost_usd(), Some(100.0));
        assert_eq!(tree.steps[1].usage().input_tokens, Some(7));
        assert_eq!(tree.usage().input_tokens, Some(107));
        assert_eq!(tree.bill(Some(&price)).cost_usd(), Some(107.0));
    }

    #[test]
    fn child_runs_are_followed_and_checked() {
        let ids = SequentialRunIds::new();
        let root_id = ids.next_run_id();
        let child_id = ids.next_run_id();
        let grandchild_id = ids.next_run_id();
        let mut root = Run::new(root_id, None);
        root.push(
            EventDraft::new(
                "call",
                0,
                Payload::CallWorkflowStarted(StepPayload::new("call", "call_workflow")),
            )
            .with_child(child_id),
        );
        root.push(
            EventDraft::new(
                "call",
                0,
                Payload::CallWorkflowCompleted(StepPayload::new("call", "call_workflow")),
            )
            .with_child(child_id),
        );
        let mut child = Run::new(child_id, Some(root_id));
        child.push(
            EventDraft::new(
                "deeper",
                0,
                Payload::CallWorkflowStarted(StepPayload::new("deeper", "call_workflow")),
            )
            .with_child(grandchild_id),
        );
        let mut grandchild = Run::new(grandchild_id, Some(child_id));
        grandchild.start("leaf", 0, "command");
        grandchild.end("leaf", 0, "command", None);
        let child_events = child.events.clone();
        let grandchild_events = grandchild.events.clone();
        let tree = build_run_tree(&root.events, &mut |id| {
            if id == child_id {
                Some(child_events.clone())
            } else if id == grandchild_id {
                Some(grandchild_events.clone())
            } else {
                None
            }
        });
        assert_eq!(
            tree.outline(),
            "call#0 call_workflow call succeeded\n\
             \x20 deeper#0 call_workflow deeper incomplete\n\
             \x20   leaf#0 command leaf succeeded\n"
        );
        assert!(tree.all_problems().is_empty());

        // Missing child, wrong parent and cycles are reported, not fatal.
        let missing = build_run_tree(&root.events, &mut |_| None);
        assert_eq!(
            missing.problems,
            vec![TreeProblem::ChildMissing {
                child_run_id: child_id
            }]
        );
        let root_events = root.events.clone();
        let cyclic = build_run_tree(&root.events, &mut |_| Some(root_events.clone()));
        assert!(
            cyclic
                .all_problems()
                .iter()
                .any(|p| matches!(p, TreeProblem::Cycle { .. }))
        );
        assert!(
            cyclic
                .all_problems()
                .iter()
                .any(|p| matches!(p, TreeProblem::ParentMismatch { .. }))
        );
    }

    #[test]
    fn shared_children_are_expanded_once_so_work_stays_linear() {
        // 18 runs, each calling the next from two steps: expanding every link would take
        // 2^18 lookups; each run is looked up once and the second links are reported.
        let ids = SequentialRunIds::new();
        let run_ids: Vec<RunId> = (0..18).map(|_| ids.next_run_id()).collect();
        let mut files = std::collections::HashMap::new();
        for (i, id) in run_ids.iter().enumerate() {
            let mut run = Run::new(*id, i.checked_sub(1).map(|p| run_ids[p]));
            if let Some(next) = run_ids.get(i + 1) {
                for step in ["a", "b"] {
                    run.push(
                        EventDraft::new(
                            step,
                            0,
                            Payload::CallWorkflowStarted(StepPayload::new(step, "call_workflow")),
                        )
                        .with_child(*next),
                    );
                }
            }
            files.insert(*id, run.events);
        }
        let mut lookups = 0;
        let tree = build_run_tree(&files[&run_ids[0]], &mut |id| {
            lookups += 1;
            files.get(&id).cloned()
        });
        assert_eq!(lookups, 17);
        let shared = tree
            .all_problems()
            .into_iter()
            .filter(|p| matches!(p, TreeProblem::SharedChild { .. }))
            .count();
        assert_eq!(shared, 17);
        assert_eq!(tree.walk().len(), 2 * 17);
    }

    #[test]
    fn orphan_completion_and_empty_input_do_not_fail() {
        let ids = SequentialRunIds::new();
        let mut run = Run::new(ids.next_run_id(), None);
        run.end("ghost", 3, "command", None);
        run.start("open", 0, "agent");
        let tree = build_run_tree(&run.events, &mut |_| None);
        assert_eq!(tree.status, Status::Incomplete);
        assert_eq!(tree.steps.len(), 1);
        assert_eq!(tree.steps[0].status, Status::Incomplete);
        assert!(matches!(
            tree.problems[0],
            TreeProblem::CompletedWithoutStart { seq: 1, .. }
        ));
        let empty = build_run_tree(&[], &mut |_| None);
        assert!(empty.steps.is_empty());
        assert_eq!(empty.duration_ms(), None);
    }
}
