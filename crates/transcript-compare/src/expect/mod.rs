//! Expectations: what a run should have done, read from YAML and checked against a
//! [`crate::RunRecord`].
//!
//! ```yaml
//! run:
//!   status: succeeded          # succeeded | failed | cancelled | incomplete
//!   max_cost_usd: 0.50         # priced total, child runs included; unknown cost fails
//!   max_tokens: 200000         # input + output + cache read + cache write
//!   max_duration_ms: 600000
//! steps:
//!   agent:                     # a step path; `path#2` one iteration; `call/inner` a step of
//!                              # the child run the step `call` started
//!     status: succeeded
//!     tools_used: [Bash, Read]
//!     tools_not_used: [WebFetch]
//!     tool_sequence: [Read, Edit, Bash]   # an ordered subsequence of the calls
//!     tool_args:
//!       Bash:
//!         command: {matches: "cargo test"}   # or {equals: value} or {subset: json}
//!     tool_failed: false
//!     output: {contains: "done"}          # and/or matches: regex, equals: text
//!     max_turns: 30
//!     max_cost_usd: 0.25
//!     judge: {rubric: "The agent ran the tests before it committed."}
//! ```
//!
//! `judge: {rubric}` (on `run:` or a step) asks a model to grade what the transcript shows
//! against the rubric; the file's top-level `judge:` configures that model (see
//! [`crate::judge`]): `model`, `base_url`, `api_key_env` (the variable holding the key, never
//! the key), `max_context_tokens`, `max_chunks`, `max_retries`, `timeout_s`. [`check`] leaves
//! judge expectations ungraded (an error outcome); [`crate::check_judged`] grades them.
//!
//! A step path names every execution of it (each iteration, each re-run): `status`, `output`
//! and `max_turns` must hold for each; the tool expectations read the calls of all of them,
//! nested steps and child runs included, in that order; `max_cost_usd` bounds their summed
//! cost. A path the run does not have fails every expectation under it.

mod eval;
mod junit;
mod spec;

use std::collections::BTreeMap;

use serde_json::Value;
use serde_saphyr::Spanned;

pub use eval::check;
pub(crate) use eval::{errored, outcome, select};
pub use junit::junit_xml;

use crate::judge_settings::JudgeSettings;
use spec::{ArgDef, FileDef, JudgeDef, RunDef, StatusDef, StepDef, TextDef};

/// A parsed, compiled expectations file.
#[derive(Debug, Clone)]
pub struct Expectations {
    /// Every expectation, in the order of the file (run first, then steps by line).
    pub items: Vec<Expectation>,
    /// The model that grades the `judge:` expectations (the file's top-level `judge:`, else
    /// the defaults).
    pub judge: JudgeSettings,
}

/// One expectation: where it applies, what it says, the line it is on.
#[derive(Debug, Clone)]
pub struct Expectation {
    /// `run`, or the step path as written (`agent`, `each.cell#1`, `child/inner`).
    pub scope: String,
    /// Its line in the file (1-based).
    pub line: u64,
    /// What is expected.
    pub rule: Rule,
}

/// What is expected of a run or a step.
#[derive(Debug, Clone)]
pub enum Rule {
    /// The run's or each execution's status.
    Status(String),
    /// A cost bound in US dollars (run: its total; step: the sum over its executions).
    MaxCostUsd(f64),
    /// The run's tokens (input + output + cache read + cache write) at most this.
    MaxTokens(u64),
    /// The run's duration at most this many milliseconds.
    MaxDurationMs(u64),
    /// Each tool was called at least once.
    ToolsUsed(Vec<String>),
    /// No tool of these was called.
    ToolsNotUsed(Vec<String>),
    /// These tools were called in this order (other calls may come between).
    ToolSequence(Vec<String>),
    /// Some call of `tool` has arguments that match every matcher.
    ToolArgs {
        /// The tool.
        tool: String,
        /// Argument name and matcher.
        args: Vec<(String, ArgMatcher)>,
    },
    /// Whether some tool call failed.
    ToolFailed(bool),
    /// Each execution's output matches.
    Output(TextMatcher),
    /// Each execution has at most this many assistant turns.
    MaxTurns(u64),
    /// A model grades what the transcript shows of the run or the step against this rubric
    /// ([`crate::check_judged`]).
    Judge {
        /// What the run or step should have done, in words.
        rubric: String,
    },
}

/// How one tool argument must look.
#[derive(Debug, Clone)]
pub enum ArgMatcher {
    /// Equal to this JSON value.
    Equals(Value),
    /// This JSON value is a subset of it: objects' keys recursively, arrays element by element
    /// in order as a prefix-free subsequence, scalars equal.
    Subset(Value),
    /// A string the regex finds a match in (other values: their JSON text).
    Matches(regex::Regex),
}

/// How a step's output must look. The output is matched as a workflow's
/// `{{steps.<name>.output}}` renders it: without one final line break.
#[derive(Debug, Clone)]
pub enum TextMatcher {
    /// Contains this text.
    Contains(String),
    /// The regex finds a match in it.
    Matches(regex::Regex),
    /// Equals this text.
    Equals(String),
}

/// A bad expectations file: its YAML, a key or a value; always with the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: line {line}: {message}")]
pub struct ExpectError {
    /// The file, as the caller named it.
    pub file: String,
    /// 1-based line (0 when the YAML parser could not say).
    pub line: u64,
    /// What is wrong, naming the key.
    pub message: String,
}

impl Expectations {
    /// Parses `text`; `file` names it in errors. Unknown keys, misspelled ones included, are
    /// errors naming the key and its line, as are regexes that do not compile, a `tool_args`
    /// argument without exactly one matcher, an `output` without one, and a file that
    /// expects nothing.
    pub fn parse(text: &str, file: &str) -> Result<Self, ExpectError> {
        let def: FileDef = serde_saphyr::from_str(text).map_err(|e| {
            let shown = e.to_string();
            let first = shown.lines().next().unwrap_or_default();
            // serde-saphyr says `error: line L column C: message`; the line is ours to say.
            let message = first.strip_prefix("error: ").unwrap_or(first);
            let message = match message.split_once(": ") {
                Some((head, rest)) if head.starts_with("line ") => rest,
                _ => message,
            };
            ExpectError {
                file: file.to_owned(),
                line: e.location().map_or(0, |l| l.line()),
                message: message.to_owned(),
            }
        })?;
        let bad = |line: u64, message: String| ExpectError {
            file: file.to_owned(),
            line,
            message,
        };
        let judge = judge_settings(def.judge).map_err(|(l, m)| bad(l, m))?;
        let mut items = Vec::new();
        if let Some(run) = def.run {
            items.extend(run_items(run));
        }
        let mut steps: Vec<(String, Spanned<StepDef>)> = def.steps.into_iter().collect();
        steps.sort_by_key(|(_, s)| s.referenced.line());
        for (path, step) in steps {
            let line = step.referenced.line();
            if path.trim().is_empty() {
                return Err(bad(line, "steps: an empty step path".to_owned()));
            }
            let before = items.len();
            step_items(&path, step.value, &mut items).map_err(|(l, m)| bad(l, m))?;
            if items.len() == before {
                return Err(bad(line, format!("steps.{path}: no expectation")));
            }
        }
        if items.is_empty() {
            return Err(bad(
                1,
                "no expectation (expected `run:` or `steps:`)".to_owned(),
            ));
        }
        items.sort_by_key(|e| (e.scope != "run", e.line));
        Ok(Expectations { items, judge })
    }
}

fn item(scope: &str, line: u64, rule: Rule) -> Expectation {
    Expectation {
        scope: scope.to_owned(),
        line,
        rule,
    }
}

fn status(s: &Spanned<StatusDef>) -> Rule {
    Rule::Status(s.value.as_str().to_owned())
}

fn run_items(run: RunDef) -> Vec<Expectation> {
    let mut out = Vec::new();
    if let Some(s) = &run.status {
        out.push(item("run", s.referenced.line(), status(s)));
    }
    if let Some(c) = run.max_cost_usd {
        out.push(item("run", c.referenced.line(), Rule::MaxCostUsd(c.value)));
    }
    if let Some(t) = run.max_tokens {
        out.push(item("run", t.referenced.line(), Rule::MaxTokens(t.value)));
    }
    if let Some(d) = run.max_duration_ms {
        out.push(item(
            "run",
            d.referenced.line(),
            Rule::MaxDurationMs(d.value),
        ));
    }
    if let Some(j) = run.judge {
        out.push(judge_item("run", j));
    }
    out
}

fn judge_item(scope: &str, j: Spanned<spec::RubricDef>) -> Expectation {
    let rubric = j.value.rubric;
    item(scope, j.referenced.line(), Rule::Judge { rubric })
}

/// The top-level `judge:` over the defaults; a bound of 0 is refused.
fn judge_settings(def: Option<JudgeDef>) -> Result<JudgeSettings, Bad> {
    let mut s = JudgeSettings::default();
    let Some(d) = def else {
        return Ok(s);
    };
    if let Some(m) = d.model {
        s.model = m;
    }
    s.base_url = d.base_url.filter(|b| !b.is_empty());
    if let Some(k) = d.api_key_env {
        s.api_key_env = k;
    }
    if let Some(t) = d.max_context_tokens {
        if t.value == 0 {
            return Err((
                t.referenced.line(),
                "judge.max_context_tokens: must be more than 0".to_owned(),
            ));
        }
        s.max_context_tokens = t.value;
    }
    if let Some(c) = d.max_chunks {
        if c.value == 0 {
            return Err((
                c.referenced.line(),
                "judge.max_chunks: must be at least 1".to_owned(),
            ));
        }
        s.max_chunks = c.value;
    }
    s.max_retries = d.max_retries.unwrap_or(s.max_retries);
    s.timeout_s = d.timeout_s.unwrap_or(s.timeout_s);
    Ok(s)
}

type Bad = (u64, String);

fn regex(pattern: &str, line: u64, key: &str) -> Result<regex::Regex, Bad> {
    regex::Regex::new(pattern).map_err(|e| (line, format!("{key}: invalid regex: {e}")))
}

fn step_items(path: &str, step: StepDef, out: &mut Vec<Expectation>) -> Result<(), Bad> {
    if let Some(s) = &step.status {
        out.push(item(path, s.referenced.line(), status(s)));
    }
    for (list, make) in [
        (&step.tools_used, Rule::ToolsUsed as fn(Vec<String>) -> Rule),
        (&step.tools_not_used, Rule::ToolsNotUsed),
        (&step.tool_sequence, Rule::ToolSequence),
    ] {
        if let Some(l) = list {
            out.push(item(path, l.referenced.line(), make(l.value.clone())));
        }
    }
    for (tool, args) in step.tool_args {
        out.push(tool_args_item(path, tool, args)?);
    }
    if let Some(f) = &step.tool_failed {
        out.push(item(path, f.referenced.line(), Rule::ToolFailed(f.value)));
    }
    if let Some(o) = step.output {
        output_items(path, o, out)?;
    }
    if let Some(t) = step.max_turns {
        out.push(item(path, t.referenced.line(), Rule::MaxTurns(t.value)));
    }
    if let Some(c) = step.max_cost_usd {
        out.push(item(path, c.referenced.line(), Rule::MaxCostUsd(c.value)));
    }
    if let Some(j) = step.judge {
        out.push(judge_item(path, j));
    }
    Ok(())
}

/// One `tool_args: <tool>:` entry: each argument with exactly one matcher.
fn tool_args_item(
    path: &str,
    tool: String,
    args: Spanned<BTreeMap<String, Spanned<ArgDef>>>,
) -> Result<Expectation, Bad> {
    let at = |key: &str| format!("steps.{path}.{key}");

    let line = args.referenced.line();
    let mut matchers = Vec::new();
    let mut named: Vec<(String, Spanned<ArgDef>)> = args.value.into_iter().collect();
    named.sort_by_key(|(_, a)| a.referenced.line());
    for (name, arg) in named {
        let key = at(&format!("tool_args.{tool}.{name}"));
        let l = arg.referenced.line();
        let ArgDef {
            equals,
            subset,
            matches,
        } = arg.value;
        let matcher = match (equals, subset, matches) {
            (Some(v), None, None) => ArgMatcher::Equals(v),
            (None, Some(v), None) => ArgMatcher::Subset(v),
            (None, None, Some(p)) => ArgMatcher::Matches(regex(&p, l, &key)?),
            _ => {
                return Err((
                    l,
                    format!("{key}: needs exactly one of `equals`, `subset`, `matches`"),
                ));
            }
        };
        matchers.push((name, matcher));
    }
    if matchers.is_empty() {
        return Err((
            line,
            format!("{}: no argument", at(&format!("tool_args.{tool}"))),
        ));
    }
    Ok(item(
        path,
        line,
        Rule::ToolArgs {
            tool,
            args: matchers,
        },
    ))
}

/// `output:`: one expectation per matcher, at least one.
fn output_items(path: &str, o: Spanned<TextDef>, out: &mut Vec<Expectation>) -> Result<(), Bad> {
    let at = |key: &str| format!("steps.{path}.{key}");

    let l = o.referenced.line();
    let TextDef {
        contains,
        matches,
        equals,
    } = o.value;
    let before = out.len();
    if let Some(c) = contains {
        out.push(item(path, l, Rule::Output(TextMatcher::Contains(c))));
    }
    if let Some(p) = matches {
        let r = regex(&p, l, &at("output.matches"))?;
        out.push(item(path, l, Rule::Output(TextMatcher::Matches(r))));
    }
    if let Some(e) = equals {
        out.push(item(path, l, Rule::Output(TextMatcher::Equals(e))));
    }
    if out.len() == before {
        return Err((
            l,
            format!("{}: needs `contains`, `matches` or `equals`", at("output")),
        ));
    }
    Ok(())
}

impl Rule {
    /// The expectation as the file says it: `status: succeeded`, `tools_used: [Bash]`, …
    pub fn describe(&self) -> String {
        let list = |l: &[String]| format!("[{}]", l.join(", "));
        match self {
            Rule::Status(s) => format!("status: {s}"),
            Rule::MaxCostUsd(c) => format!("max_cost_usd: {c}"),
            Rule::MaxTokens(t) => format!("max_tokens: {t}"),
            Rule::MaxDurationMs(d) => format!("max_duration_ms: {d}"),
            Rule::ToolsUsed(l) => format!("tools_used: {}", list(l)),
            Rule::ToolsNotUsed(l) => format!("tools_not_used: {}", list(l)),
            Rule::ToolSequence(l) => format!("tool_sequence: {}", list(l)),
            Rule::ToolArgs { tool, args } => {
                let shown: Vec<String> = args
                    .iter()
                    .map(|(name, m)| match m {
                        ArgMatcher::Equals(v) => format!("{name} equals {v}"),
                        ArgMatcher::Subset(v) => format!("{name} has subset {v}"),
                        ArgMatcher::Matches(r) => format!("{name} matches /{}/", r.as_str()),
                    })
                    .collect();
                format!("tool_args: {tool}({})", shown.join(", "))
            }
            Rule::ToolFailed(b) => format!("tool_failed: {b}"),
            Rule::Output(TextMatcher::Contains(t)) => format!("output contains {t:?}"),
            Rule::Output(TextMatcher::Matches(r)) => format!("output matches /{}/", r.as_str()),
            Rule::Output(TextMatcher::Equals(t)) => format!("output equals {t:?}"),
            Rule::MaxTurns(n) => format!("max_turns: {n}"),
            Rule::Judge { rubric } => {
                let mut shown: String = rubric.chars().take(80).collect();
                if rubric.chars().count() > 80 {
                    shown.push('…');
                }
                format!("judge: {shown:?}")
            }
        }
    }
}

/// The outcome of one expectation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// `run` or the step path as written.
    pub scope: String,
    /// The expectation ([`Rule::describe`]).
    pub expectation: String,
    /// Its line in the file.
    pub line: u64,
    /// Whether it holds.
    pub passed: bool,
    /// Whether it could not be decided (never passed): a judge whose endpoint failed, whose
    /// answer was not a verdict, or that was given a transcript too large to grade. JUnit
    /// calls it an error, the CLI exits 4.
    pub errored: bool,
    /// What the run did (for a failure: why it does not hold; for an error: its cause).
    pub detail: String,
}

/// What the outcomes of a check add up to (the CLI's exit code: 0, 1, 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summary {
    /// Every expectation holds.
    Held,
    /// Some expectation does not hold, and every one was decided.
    Failed,
    /// Some expectation could not be decided (a judge that could not grade), whatever the
    /// others did: the check is incomplete.
    Errored,
}

impl Summary {
    /// The summary of `outcomes`.
    pub fn of(outcomes: &[Outcome]) -> Summary {
        if outcomes.iter().any(|o| o.errored) {
            Summary::Errored
        } else if outcomes.iter().all(|o| o.passed) {
            Summary::Held
        } else {
            Summary::Failed
        }
    }
}
