//! A run as the comparison and the expectations read it: the domain's step tree
//! ([`transcript_domain::tree::build_run_tree`]) with, on each step execution, what it
//! produced (status, exit code, output), its own messages and tool calls, and its bill
//! (`StepNode::bill`: one request, one bill). Built once from the events; everything after
//! it is pure comparison.
//!
//! What belongs to a step: the `message.*` and `tool.*` events of its exact path and iteration
//! from its start event to its completion (its whole future when it never completed). A step
//! that ran twice under one path and iteration (a retried `~n` re-run) owns the events of its
//! own seq range only.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;
use transcript_domain::bill::{Bill, PriceFn, billed_model, step_model};
use transcript_domain::tree::{RunTree, Status, StepNode, build_run_tree};
use transcript_domain::{DecodedEvent, EventType, RunId, Usage};
use transcript_providers::SYNTHETIC_MODEL;

use crate::record_turns::turns_and_calls;
pub use crate::record_turns::{BlockRecord, ToolCallRecord, TurnRecord};

/// One run, ready to compare or check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// The run id.
    pub run_id: RunId,
    /// Workflow name from `run.started` (an imported session: its provider's session).
    pub workflow: Option<String>,
    /// Outcome (incomplete without `run.completed`).
    pub status: Status,
    /// Error of `run.completed`.
    pub error: Option<String>,
    /// Milliseconds from start to completion (`None` while incomplete).
    pub duration_ms: Option<i64>,
    /// Tokens and cost of every step of the run and of its child runs.
    pub spend: Spend,
    /// Top-level step executions, in start order.
    pub steps: Vec<StepRecord>,
    /// Inconsistencies found while rebuilding the tree (a missing child run, …), as text.
    pub problems: Vec<String>,
}

/// One step execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRecord {
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
    /// Error of the completion event.
    pub error: Option<String>,
    /// A command step's exit code (`result.exit_code`).
    pub exit_code: Option<i64>,
    /// A command step's command as it ran (`result.command`: the rendered string or argv).
    pub command: Option<Value>,
    /// What the step produced, as text: see [`output_of`].
    pub output: Option<String>,
    /// The completion's `result`, verbatim (a value too deep for serde_json is a string of
    /// its JSON text).
    pub result: Option<Value>,
    /// Milliseconds from start to completion.
    pub duration_ms: Option<i64>,
    /// The step's own messages (`message.user` prompts and `message.assistant` turns), in order.
    pub turns: Vec<TurnRecord>,
    /// The step's own `tool.call` / `tool.result` events paired by call id, in call order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens and cost of the step's own assistant turns.
    pub spend: Spend,
    /// The child run a `call_workflow` step started.
    pub child_run_id: Option<RunId>,
    /// That child run, when its events were found.
    pub child: Option<Box<RunRecord>>,
    /// Nested step executions, in start order.
    pub steps: Vec<StepRecord>,
}

/// Tokens and cost of a set of assistant turns (from the domain's [`Bill`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Spend {
    /// Assistant turns.
    pub turns: u64,
    /// Turns that reported usage.
    pub billed_turns: u64,
    /// Their summed usage.
    pub usage: Usage,
    /// Their priced cost in US dollars: `Some(0.0)` with nothing billed, `None` when a billed
    /// turn's model has no price (or no price function was given): never $0 for unknown.
    /// Claude Code's `<synthetic>` turns (its own messages, no API request) cost 0.
    pub cost_usd: Option<f64>,
    /// The models of billed turns that have no price (sorted, once each): why `cost_usd` is
    /// unknown.
    pub unpriced_models: Vec<String>,
}

impl Spend {
    fn of(bill: &Bill, unpriced_models: Vec<String>) -> Self {
        Spend {
            turns: bill.turns,
            billed_turns: bill.billed_turns,
            usage: bill.usage.clone(),
            cost_usd: if bill.billed_turns == 0 {
                Some(0.0)
            } else {
                bill.cost_usd()
            },
            unpriced_models,
        }
    }

    /// The bill of one step's own turns, with the models `price` has no price for.
    fn of_step(node: &StepNode, price: &PriceFn<'_>) -> Self {
        let step = step_model(node.turns.iter().map(|t| t.model.as_deref()));
        let mut unpriced: Vec<String> = node
            .turns
            .iter()
            .filter_map(|t| {
                let usage = t.usage.as_ref()?;
                let model = billed_model(t.model.as_deref(), step);
                price(model, usage).is_none().then(|| model.to_owned())
            })
            .collect();
        unpriced.sort();
        unpriced.dedup();
        Spend::of(&node.bill(Some(price)), unpriced)
    }

    /// Input, output, cache-read and cache-write tokens summed (reasoning tokens are counted
    /// within output by the providers that report them).
    pub fn total_tokens(&self) -> u64 {
        let u = &self.usage;
        [
            u.input_tokens,
            u.output_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
        ]
        .iter()
        .map(|t| t.unwrap_or(0))
        .fold(0u64, u64::saturating_add)
    }
}

/// What a step produced, as text, read from its completion's `result`:
/// a string result itself; a command's `stdout`; an agent's `output` (a result that carries
/// warnings); an imported session's final `result` text (its other fields, the clock, the
/// diagnostics and the source file, are not output); any other value as pretty JSON.
/// `None` without a result.
pub fn output_of(result: &Value) -> Option<String> {
    match result {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => {
            if map.contains_key("clock") && map.contains_key("diagnostics") {
                return map.get("result").and_then(Value::as_str).map(str::to_owned);
            }
            for key in ["stdout", "output"] {
                if let Some(Value::String(s)) = map.get(key) {
                    return Some(s.clone());
                }
            }
            serde_json::to_string_pretty(result).ok()
        }
        other => serde_json::to_string_pretty(other).ok(),
    }
}

impl RunRecord {
    /// Builds the record of a run from its events (file order) and, through `lookup`, the
    /// events of its child runs (as [`build_run_tree`] takes them); costs are priced with
    /// `price` when given (the providers crate's `Pricing::cost` is one).
    pub fn build(
        events: &[DecodedEvent],
        lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
        price: Option<&PriceFn<'_>>,
    ) -> RunRecord {
        // Every child run's events are kept as the tree asks for them, so each child's steps
        // find their content without a second lookup.
        let mut children: HashMap<RunId, Vec<DecodedEvent>> = HashMap::new();
        let tree = build_run_tree(events, &mut |id| {
            let found = lookup(id)?;
            children.insert(id, found.clone());
            Some(found)
        });
        // Claude Code's `<synthetic>` turns made no API request: never billed, never unknown,
        // whatever table `price` reads.
        let priced = |model: &str, usage: &Usage| {
            if model == SYNTHETIC_MODEL {
                Some(0.0)
            } else {
                price.and_then(|p| p(model, usage))
            }
        };
        record_run(&tree, events, &children, &priced)
    }

    /// Whether the run is an agent CLI's session imported by `transcript import`: a workflow
    /// named `import <log file name>` whose one top-level step is the agent step `agent`
    /// (transcript-import writes exactly that, and adds no field to `run.started`).
    pub fn is_import(&self) -> bool {
        self.workflow
            .as_deref()
            .is_some_and(|w| w.starts_with("import "))
            && matches!(self.steps.as_slice(), [s] if s.path == "agent" && s.kind == "agent")
    }

    /// Every warning an agent step kept in its result (`"warnings"`: a `--match fifo` replay's
    /// differences), with the step's name as [`RunRecord::walk`] gives it, in walk order.
    pub fn warnings(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, step) in self.walk() {
            let warnings = step
                .result
                .as_ref()
                .and_then(|r| r.get("warnings"))
                .and_then(Value::as_array);
            for w in warnings.into_iter().flatten() {
                let text = w.as_str().map_or_else(|| w.to_string(), str::to_owned);
                out.push((name.clone(), text));
            }
        }
        out
    }

    /// Every step execution, depth first, with the name expectations use for it: its path,
    /// prefixed by `<call path>/` for each child run it is in (`child/upper` is step `upper`
    /// of the run the step `child` called).
    pub fn walk(&self) -> Vec<(String, &StepRecord)> {
        fn go<'a>(steps: &'a [StepRecord], prefix: &str, out: &mut Vec<(String, &'a StepRecord)>) {
            for s in steps {
                let name = format!("{prefix}{}", s.path);
                out.push((name.clone(), s));
                if let Some(child) = &s.child {
                    go(&child.steps, &format!("{name}/"), out);
                }
                go(&s.steps, prefix, out);
            }
        }
        let mut out = Vec::new();
        go(&self.steps, "", &mut out);
        out
    }
}

impl StepRecord {
    /// This execution and every one below it (nested steps, child runs), depth first, named
    /// as [`RunRecord::walk`] names them, relative to this step's run.
    pub fn walk(&self) -> Vec<(String, &StepRecord)> {
        let mut out = vec![(self.path.clone(), self)];
        if let Some(child) = &self.child {
            out.extend(
                child
                    .walk()
                    .into_iter()
                    .map(|(name, s)| (format!("{}/{name}", self.path), s)),
            );
        }
        for s in &self.steps {
            out.extend(s.walk());
        }
        out
    }

    /// The assistant turns of the step itself.
    pub fn assistant_turns(&self) -> usize {
        self.turns.iter().filter(|t| t.is_assistant()).count()
    }

    /// Tokens and cost of the step, its nested steps and its child run.
    pub fn total_spend(&self) -> Spend {
        let mut bills = vec![self.spend.clone()];
        for s in &self.steps {
            bills.push(s.total_spend());
        }
        if let Some(child) = &self.child {
            bills.push(child.spend.clone());
        }
        sum(&bills)
    }
}

fn sum(parts: &[Spend]) -> Spend {
    let mut total = Spend {
        cost_usd: Some(0.0),
        ..Spend::default()
    };
    for p in parts {
        total.turns += p.turns;
        total.billed_turns += p.billed_turns;
        total.usage.accumulate(&p.usage);
        total.cost_usd = match (total.cost_usd, p.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        total
            .unpriced_models
            .extend(p.unpriced_models.iter().cloned());
    }
    total.unpriced_models.sort();
    total.unpriced_models.dedup();
    total
}

fn record_run(
    tree: &RunTree,
    events: &[DecodedEvent],
    children: &HashMap<RunId, Vec<DecodedEvent>>,
    price: &PriceFn<'_>,
) -> RunRecord {
    let content = Content::index(events);
    RunRecord {
        run_id: tree.run_id,
        workflow: tree.workflow.clone(),
        status: tree.status,
        error: tree.error.clone(),
        duration_ms: tree.duration_ms(),
        spend: run_spend(tree, price),
        steps: tree
            .steps
            .iter()
            .map(|n| record_step(n, &content, children, price))
            .collect(),
        problems: tree.problems.iter().map(ToString::to_string).collect(),
    }
}

/// The bill of a run's steps and their child runs, with every unpriced model.
fn run_spend(tree: &RunTree, price: &PriceFn<'_>) -> Spend {
    let mut unpriced = Vec::new();
    for (_, node) in tree.walk() {
        unpriced.extend(Spend::of_step(node, price).unpriced_models);
    }
    unpriced.sort();
    unpriced.dedup();
    Spend::of(&tree.bill(Some(price)), unpriced)
}

/// The content events of one run by (path, iteration), in file order.
struct Content<'a> {
    by_step: HashMap<(&'a str, u64), Vec<&'a DecodedEvent>>,
}

impl<'a> Content<'a> {
    fn index(events: &'a [DecodedEvent]) -> Self {
        let mut by_step: HashMap<(&str, u64), Vec<&DecodedEvent>> = HashMap::new();
        for e in events {
            let content = matches!(
                e.kind.known(),
                Some(
                    EventType::MessageUser
                        | EventType::MessageAssistant
                        | EventType::ToolCall
                        | EventType::ToolResult
                )
            );
            if content {
                by_step
                    .entry((e.path.as_str(), e.iteration))
                    .or_default()
                    .push(e);
            }
        }
        Self { by_step }
    }

    /// The events of `node`: its path and iteration, within its seq range.
    fn of(&self, node: &StepNode) -> Vec<&'a DecodedEvent> {
        let (start, end) = (node.start_seq, node.end_seq.unwrap_or(u64::MAX));
        self.by_step
            .get(&(node.path.as_str(), node.iteration))
            .into_iter()
            .flatten()
            .copied()
            .filter(|e| e.seq > start && e.seq < end)
            .collect()
    }
}

fn record_step(
    node: &StepNode,
    content: &Content<'_>,
    children: &HashMap<RunId, Vec<DecodedEvent>>,
    price: &PriceFn<'_>,
) -> StepRecord {
    let result = node.result.as_ref().map(|r| r.to_value());
    let field = |key: &str| result.as_ref().and_then(|r| r.get(key)).cloned();
    let command_like = result
        .as_ref()
        .is_some_and(|r| r.get("exit_code").is_some());
    let (turns, tool_calls) = turns_and_calls(content.of(node));
    let child = node.child.as_ref().map(|tree| {
        let events = children.get(&tree.run_id).map(Vec::as_slice).unwrap_or(&[]);
        Box::new(record_run(tree, events, children, price))
    });
    StepRecord {
        path: node.path.clone(),
        name: node.name.clone(),
        kind: node.kind.clone(),
        iteration: node.iteration,
        status: node.status,
        error: node.error.clone(),
        exit_code: field("exit_code").and_then(|v| v.as_i64()),
        command: if command_like { field("command") } else { None },
        output: result.as_ref().and_then(output_of),
        result,
        duration_ms: node.duration_ms(),
        turns,
        tool_calls,
        spend: Spend::of_step(node, price),
        child_run_id: node.child_run_id,
        child,
        steps: node
            .children
            .iter()
            .map(|n| record_step(n, content, children, price))
            .collect(),
    }
}
