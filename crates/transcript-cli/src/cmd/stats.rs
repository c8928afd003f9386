//! `transcript stats`: counts per event and block type, tool calls per name
//! and fidelity, step durations, and token usage per step and provider.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use transcript_domain::bill::{billed_model, step_model};
use transcript_domain::{DecodedEvent, EventKind, EventType, Usage};

use crate::cmd::tree::duration;

/// Aggregated statistics over one or more runs.
#[derive(Debug, Default, Serialize)]
pub struct Stats {
    /// Runs seen.
    pub runs: usize,
    /// Runs without `run.completed` whose runner holds them (still recording).
    #[serde(skip_serializing_if = "is_zero")]
    pub running: usize,
    /// Runs without `run.completed` that no runner holds (it died or was killed).
    #[serde(skip_serializing_if = "is_zero")]
    pub abandoned: usize,
    /// Events seen.
    pub events: usize,
    /// Events per type (unknown types as written).
    pub event_types: BTreeMap<String, u64>,
    /// Blocks per type.
    pub block_types: BTreeMap<String, u64>,
    /// Tool calls per `name` and fidelity.
    pub tool_calls: BTreeMap<String, BTreeMap<String, u64>>,
    /// Failed tool results per name.
    pub tool_errors: BTreeMap<String, u64>,
    /// Step executions per path.
    pub steps: BTreeMap<String, StepStats>,
    /// Token usage per step path (assistant turns).
    pub usage_by_step: BTreeMap<String, Usage>,
    /// Token usage per provider.
    pub usage_by_provider: BTreeMap<String, Usage>,
    /// Cost per step path from the price table (`null`: a model without a price).
    pub cost_by_step: BTreeMap<String, Option<f64>>,
    /// Cost per provider from the price table (`null`: a model without a price).
    pub cost_by_provider: BTreeMap<String, Option<f64>>,
    /// Models of billed turns the price table has no price for.
    pub unpriced_models: std::collections::BTreeSet<String>,
    /// MCP calls whose two observations (the proxy's `router` record and the agent CLI's
    /// `agent_emitted` report) disagree.
    pub mcp_disagreements: Vec<McpDisagreement>,
}

/// One MCP call seen by the run's proxy whose agent report disagrees with it (#33).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpDisagreement {
    /// The run.
    pub run_id: String,
    /// Step path.
    pub path: String,
    /// Iteration.
    pub iteration: u64,
    /// The qualified tool name, `mcp__<server>__<tool>`.
    pub tool: String,
    /// The proxy's call id.
    pub router_call_id: String,
    /// The CLI's call id, when it reported the call.
    pub agent_call_id: Option<String>,
    /// `not_reported_by_agent`, `no_agent_result` or `output_differs`.
    pub disagreement: &'static str,
    /// The proxy's output (`output_differs`), as JSON text.
    pub router_output: Option<String>,
    /// The CLI's output (`output_differs`), as JSON text.
    pub agent_output: Option<String>,
}

impl McpDisagreement {
    /// One line for people: the call, the tool and what differs.
    pub fn describe(&self) -> String {
        let short = |s: &Option<String>| {
            let s = s.as_deref().unwrap_or("");
            match s.char_indices().nth(200) {
                Some((i, _)) => format!("{}…", &s[..i]),
                None => s.to_owned(),
            }
        };
        let what = match self.disagreement {
            "not_reported_by_agent" => "the agent did not report this call".to_owned(),
            "no_agent_result" => "the agent reported no result; the proxy saw one".to_owned(),
            _ => format!(
                "outputs differ: server {} / agent {}",
                short(&self.router_output),
                short(&self.agent_output)
            ),
        };
        let agent = self
            .agent_call_id
            .as_deref()
            .map(|id| format!(" (agent {id})"))
            .unwrap_or_default();
        format!(
            "{} #{} {} {}{agent}: {what}",
            self.path, self.iteration, self.tool, self.router_call_id
        )
    }
}

/// The MCP calls of one run's `events` whose two observations disagree
/// (`transcript_mcp::correlate::pair_observations`).
pub fn mcp_disagreements(events: &[DecodedEvent]) -> Vec<McpDisagreement> {
    use transcript_mcp::correlate::{Disagreement, pair_observations};
    let tools: Vec<transcript_domain::ExchangeEvent> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Known(EventType::ToolCall | EventType::ToolResult)
            )
        })
        .filter_map(|e| e.to_event().ok())
        .collect();
    let run_id = events
        .first()
        .map(|e| e.run_id.to_string())
        .unwrap_or_default();
    pair_observations(&tools)
        .into_iter()
        .filter_map(|call| {
            let (disagreement, router_output, agent_output) = match call.disagreement? {
                Disagreement::NotReportedByAgent => ("not_reported_by_agent", None, None),
                Disagreement::NoAgentResult => ("no_agent_result", None, None),
                Disagreement::OutputDiffers { router, agent } => {
                    ("output_differs", Some(router), Some(agent))
                }
            };
            Some(McpDisagreement {
                run_id: run_id.clone(),
                path: call.path,
                iteration: call.iteration,
                tool: call.name,
                router_call_id: call.router_call_id,
                agent_call_id: call.agent_call_id,
                disagreement,
                router_output,
                agent_output,
            })
        })
        .collect()
}

/// Adds `cost` to a sum that stays unknown once a part is.
/// Each step execution's model ([`step_model`] of its assistant turns), by path and iteration.
fn step_models(events: &[DecodedEvent]) -> BTreeMap<(&str, u64), Option<&str>> {
    let mut named: BTreeMap<(&str, u64), Vec<Option<&str>>> = BTreeMap::new();
    for e in events {
        if let Some(m) = e
            .message()
            .filter(|_| e.kind == EventKind::Known(EventType::MessageAssistant))
        {
            named
                .entry((e.path.as_str(), e.iteration))
                .or_default()
                .push(m.model.as_deref());
        }
    }
    named
        .into_iter()
        .map(|(k, models)| (k, step_model(models)))
        .collect()
}

fn add_cost(sum: &mut Option<f64>, cost: Option<f64>) {
    match (sum.as_mut(), cost) {
        (Some(s), Some(c)) => *s += c,
        (_, None) => *sum = None,
        (None, Some(_)) => {}
    }
}

/// Durations of the executions of one step path.
#[derive(Debug, Default, Serialize)]
pub struct StepStats {
    /// Step kind.
    pub kind: String,
    /// Completed executions.
    pub count: u64,
    /// Failed executions.
    pub failed: u64,
    /// Total milliseconds.
    pub total_ms: i64,
    /// Longest execution.
    pub max_ms: i64,
}

impl Stats {
    /// Adds one run's events, pricing each billed turn with `price` (model, usage → US
    /// dollars, `None` when the model has no price).
    pub fn add_run(
        &mut self,
        events: &[DecodedEvent],
        price: &dyn Fn(&str, &Usage) -> Option<f64>,
    ) {
        self.runs += 1;
        self.events += events.len();
        let step_models = step_models(events);
        let mut started: BTreeMap<(String, u64), transcript_domain::Timestamp> = BTreeMap::new();
        for e in events {
            *self
                .event_types
                .entry(e.kind.as_str().to_owned())
                .or_default() += 1;
            if let Some(m) = e.message() {
                for b in &m.blocks {
                    *self.block_types.entry(b.type_str().to_owned()).or_default() += 1;
                }
                if let Some(u) = &m.usage {
                    self.add_usage(
                        e,
                        (m.provider.as_deref(), m.model.as_deref()),
                        u,
                        &step_models,
                        price,
                    );
                }
            }
            match e.kind {
                EventKind::Known(EventType::ToolCall) => {
                    if let Some(t) = e.tool() {
                        *self
                            .tool_calls
                            .entry(t.name.clone())
                            .or_default()
                            .entry(t.fidelity.as_str().to_owned())
                            .or_default() += 1;
                    }
                }
                EventKind::Known(EventType::ToolResult) => {
                    if let Some(t) = e.tool().filter(|t| t.error.is_some()) {
                        *self.tool_errors.entry(t.name.clone()).or_default() += 1;
                    }
                }
                EventKind::Known(EventType::StepStarted | EventType::CallWorkflowStarted) => {
                    started.insert((e.path.clone(), e.iteration), e.timestamp);
                }
                EventKind::Known(EventType::StepCompleted | EventType::CallWorkflowCompleted) => {
                    let entry = self.steps.entry(e.path.clone()).or_default();
                    if let Some(s) = e.step() {
                        entry.kind = s.kind.clone();
                        if s.error.is_some() {
                            entry.failed += 1;
                        }
                    }
                    entry.count += 1;
                    if let Some(start) = started.remove(&(e.path.clone(), e.iteration)) {
                        let ms = e.timestamp.millis_since(start);
                        entry.total_ms += ms;
                        entry.max_ms = entry.max_ms.max(ms);
                    }
                }
                _ => {}
            }
        }
    }

    /// Adds one billed turn's usage and cost, priced under the one billing rule.
    fn add_usage(
        &mut self,
        e: &DecodedEvent,
        (provider, model): (Option<&str>, Option<&str>),
        u: &Usage,
        step_models: &BTreeMap<(&str, u64), Option<&str>>,
        price: &dyn Fn(&str, &Usage) -> Option<f64>,
    ) {
        self.usage_by_step
            .entry(e.path.clone())
            .or_default()
            .accumulate(u);
        let provider = provider.unwrap_or("unknown").to_owned();
        self.usage_by_provider
            .entry(provider.clone())
            .or_default()
            .accumulate(u);
        // The one billing rule of every report: the turn's model, else its step's.
        let step_model = step_models
            .get(&(e.path.as_str(), e.iteration))
            .copied()
            .flatten();
        let model = billed_model(model, step_model);
        let cost = price(model, u);
        if cost.is_none() {
            self.unpriced_models.insert(model.to_owned());
        }
        add_cost(
            self.cost_by_step.entry(e.path.clone()).or_insert(Some(0.0)),
            cost,
        );
        add_cost(
            self.cost_by_provider.entry(provider).or_insert(Some(0.0)),
            cost,
        );
    }

    /// Renders the tables.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = write!(out, "runs: {}  events: {}", self.runs, self.events);
        for (n, what) in [(self.running, "running"), (self.abandoned, "abandoned")] {
            if n > 0 {
                let _ = write!(out, "  {what}: {n}");
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "\nevents by type");
        for (t, n) in &self.event_types {
            let _ = writeln!(out, "  {t:<32} {n:>8}");
        }
        let _ = writeln!(out, "\nblocks by type");
        for (t, n) in &self.block_types {
            let _ = writeln!(out, "  {t:<32} {n:>8}");
        }
        let _ = writeln!(out, "\ntool calls by name and fidelity");
        for (name, by) in &self.tool_calls {
            for (fidelity, n) in by {
                let errors = self.tool_errors.get(name).copied().unwrap_or(0);
                let _ = writeln!(out, "  {name:<24} {fidelity:<14} {n:>6}  errors {errors}");
            }
        }
        let _ = writeln!(out, "\nsteps (completed executions)");
        let _ = writeln!(
            out,
            "  {:<32} {:<14} {:>5} {:>6} {:>10} {:>10}",
            "path", "kind", "runs", "failed", "total", "max"
        );
        for (path, s) in &self.steps {
            let _ = writeln!(
                out,
                "  {path:<32} {:<14} {:>5} {:>6} {:>10} {:>10}",
                s.kind,
                s.count,
                s.failed,
                duration(Some(s.total_ms)),
                duration(Some(s.max_ms))
            );
        }
        let _ = writeln!(out, "\ntoken usage by step");
        render_usage(&mut out, &self.usage_by_step, &self.cost_by_step);
        let _ = writeln!(out, "\ntoken usage by provider");
        render_usage(&mut out, &self.usage_by_provider, &self.cost_by_provider);
        if !self.mcp_disagreements.is_empty() {
            let _ = writeln!(out, "\nMCP calls whose two observations disagree");
            for d in &self.mcp_disagreements {
                let _ = writeln!(out, "  {}", d.describe());
            }
        }
        out
    }
}

fn render_usage(
    out: &mut String,
    usage: &BTreeMap<String, Usage>,
    cost: &BTreeMap<String, Option<f64>>,
) {
    if usage.is_empty() {
        let _ = writeln!(out, "  (no provider reported usage)");
        return;
    }
    let _ = writeln!(
        out,
        "  {:<24} {:>9} {:>9} {:>11} {:>11} {:>9} {:>9} {:>9}",
        "", "input", "output", "cache_read", "cache_write", "reasoning", "cost", "reported"
    );
    let n = |v: Option<u64>| v.map_or("—".to_owned(), |v| v.to_string());
    for (key, u) in usage {
        let _ = writeln!(
            out,
            "  {key:<24} {:>9} {:>9} {:>11} {:>11} {:>9} {:>9} {:>9}",
            n(u.input_tokens),
            n(u.output_tokens),
            n(u.cache_read_tokens),
            n(u.cache_write_tokens),
            n(u.reasoning_tokens),
            cost.get(key)
                .copied()
                .flatten()
                .map_or("—".to_owned(), |c| format!("${c:.4}")),
            u.cost_usd.map_or("—".to_owned(), |c| format!("${c:.4}"))
        );
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Runs `stats` on a transcript, a run id (prefix, `latest`) or a directory of transcripts,
/// priced with `pricing_file` (LiteLLM's format) or the embedded table.
pub fn run(
    target: &str,
    store: &crate::store::Store,
    json: bool,
    pricing_file: Option<&std::path::Path>,
    out: &mut dyn std::io::Write,
) -> Result<(), crate::CliError> {
    use transcript_domain::run_store::RunState;
    let table = crate::cmd::receipts::pricing(pricing_file)?;
    let price = |model: &str, u: &Usage| table.cost(model, u).map(|c| c.usd);
    let mut stats = Stats::default();
    let mut add = |decoded: Vec<DecodedEvent>, state: RunState| {
        stats.add_run(&decoded, &price);
        let completed = decoded
            .iter()
            .any(|e| e.kind == EventKind::Known(EventType::RunCompleted));
        if !completed && !decoded.is_empty() {
            match state {
                RunState::Running => stats.running += 1,
                _ => stats.abandoned += 1,
            }
        }
        stats.mcp_disagreements.extend(mcp_disagreements(&decoded));
    };
    // A directory, or a store named by its URL: every run of it, through the read port.
    let whole = if std::path::Path::new(target).is_dir() {
        let dir = crate::store::directory(std::path::Path::new(target));
        Some(std::sync::Arc::new(dir) as crate::store::Store)
    } else {
        transcript_nats::StorageUrl::is_nats(target)
            .then(|| crate::store::open(std::path::Path::new(target)))
            .transpose()?
    };
    match whole {
        Some(whole) => {
            let mut runs = whole.runs().map_err(crate::store::error)?;
            runs.sort_by_key(|r| r.run_id);
            for run in runs {
                let Some(lines) = whole.read(run.run_id).map_err(crate::store::error)? else {
                    continue;
                };
                let state = lines.state;
                let loaded = crate::source::decode(lines)?;
                crate::source::report_read_problems(&loaded);
                add(loaded.decoded(), state);
            }
        }
        None => {
            let run = crate::source::open_run(target, store, None)?;
            add(run.events, run.state);
        }
    }
    let unpriced: Vec<String> = stats.unpriced_models.iter().cloned().collect();
    crate::cmd::receipts::warn_unpriced(&unpriced, pricing_file, &mut std::io::stderr());
    let text = if json {
        super::to_json(&stats)? + "\n"
    } else {
        crate::style::clean(&stats.render())
    };
    crate::exit::stdout_result(out.write_all(text.as_bytes()))
}
