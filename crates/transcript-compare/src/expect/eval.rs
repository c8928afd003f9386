//! Holding a run to its expectations: one [`Outcome`] per expectation, saying what the run did.

use serde_json::Value;

use super::{ArgMatcher, Expectation, Expectations, Outcome, Rule, TextMatcher};
use crate::calls::CallView;
use crate::record::{RunRecord, Spend, StepRecord};
use crate::values::usd;

/// How much of a recorded value a detail quotes.
const QUOTE_CHARS: usize = 200;

/// Checks `run` against every expectation, in order. A `judge:` expectation needs a model:
/// here it is an error outcome ("not graded"); [`crate::check_judged`] grades it.
pub fn check(run: &RunRecord, expectations: &Expectations) -> Vec<Outcome> {
    let steps = run.walk();
    expectations
        .items
        .iter()
        .map(|e| {
            if matches!(e.rule, Rule::Judge { .. }) {
                let why = "not graded: no judge model was given (transcript_compare::check_judged grades it)";
                return errored(e, why.to_owned());
            }
            let result = if e.scope == "run" {
                run_rule(run, &e.rule)
            } else {
                let selected = select(&steps, &e.scope);
                if selected.is_empty() {
                    Err(format!("the run has no step {:?}", e.scope))
                } else {
                    step_rule(&selected, &e.rule)
                }
            };
            outcome(e, result)
        })
        .collect()
}

/// The outcome of `e`: `Ok(detail)` holds, `Err(detail)` does not.
pub(crate) fn outcome(e: &Expectation, result: Result<String, String>) -> Outcome {
    let (passed, detail) = match result {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    Outcome {
        scope: e.scope.clone(),
        expectation: e.rule.describe(),
        line: e.line,
        passed,
        errored: false,
        detail,
    }
}

/// The outcome of an expectation that could not be decided.
pub(crate) fn errored(e: &Expectation, detail: String) -> Outcome {
    Outcome {
        errored: true,
        ..outcome(e, Err(detail))
    }
}

/// The executions a scope names: `path` every one, `path#N` those of iteration N.
pub(crate) fn select<'a>(steps: &[(String, &'a StepRecord)], scope: &str) -> Vec<&'a StepRecord> {
    let by_iteration = scope
        .rsplit_once('#')
        .and_then(|(p, n)| Some((p, n.parse::<u64>().ok()?)));
    steps
        .iter()
        .filter(|(name, s)| match by_iteration {
            Some((p, n)) => name == p && s.iteration == n,
            None => name == scope,
        })
        .map(|(_, s)| *s)
        .collect()
}

fn quote(text: &str) -> String {
    let mut out: String = text.chars().take(QUOTE_CHARS).collect();
    if text.chars().count() > QUOTE_CHARS {
        out.push('…');
    }
    format!("{out:?}")
}

/// A cost to hold under a bound, or why it is unknown: each model without a price and the
/// steps it answered in (`steps`: the executions to look in, with their names).
fn cost_of(spend: &Spend, steps: &[(String, &StepRecord)]) -> Result<f64, String> {
    if let Some(cost) = spend.cost_usd {
        return Ok(cost);
    }
    let mut named: Vec<String> = Vec::new();
    for model in &spend.unpriced_models {
        let mut at: Vec<&str> = steps
            .iter()
            .filter(|(_, s)| s.spend.unpriced_models.contains(model))
            .map(|(name, _)| name.as_str())
            .collect();
        at.dedup();
        named.push(match at.as_slice() {
            [] => format!("model {model}"),
            _ => format!("model {model} (step {})", at.join(", ")),
        });
    }
    if named.is_empty() {
        return Err(
            "cost unknown: no price for a billed model, so it cannot be held under a bound"
                .to_owned(),
        );
    }
    Err(format!("cost unknown: no price for {}", named.join("; ")))
}

fn run_rule(run: &RunRecord, rule: &Rule) -> Result<String, String> {
    match rule {
        Rule::Status(want) => {
            let got = run.status.as_str();
            let error = run
                .error
                .as_deref()
                .map(|e| format!(" ({})", quote(e)))
                .unwrap_or_default();
            verdict(got == want, format!("the run {got}{error}"))
        }
        Rule::MaxCostUsd(max) => {
            let cost = cost_of(&run.spend, &run.walk())?;
            verdict(cost <= *max, format!("the run cost {}", usd(Some(cost))))
        }
        Rule::MaxTokens(max) => {
            let tokens = run.spend.total_tokens();
            verdict(tokens <= *max, format!("the run used {tokens} tokens"))
        }
        Rule::MaxDurationMs(max) => match run.duration_ms {
            Some(ms) => verdict(
                ms >= 0 && ms as u64 <= *max,
                format!("the run took {ms} ms"),
            ),
            None => Err("the run has no completion, so no duration".to_owned()),
        },
        other => Err(format!(
            "{} applies to steps, not to the run",
            other.describe()
        )),
    }
}

fn verdict(holds: bool, detail: String) -> Result<String, String> {
    if holds { Ok(detail) } else { Err(detail) }
}

fn names(calls: &[CallView<'_>]) -> String {
    if calls.is_empty() {
        return "no tool".to_owned();
    }
    let shown: Vec<&str> = calls.iter().map(|c| c.name).take(30).collect();
    let more = calls.len().saturating_sub(shown.len());
    format!(
        "[{}{}]",
        shown.join(", "),
        if more > 0 {
            format!(", … {more} more")
        } else {
            String::new()
        }
    )
}

fn step_rule(steps: &[&StepRecord], rule: &Rule) -> Result<String, String> {
    match rule {
        Rule::Status(_) | Rule::Output(_) | Rule::MaxTurns(_) => each_execution(steps, rule),
        Rule::MaxCostUsd(max) => {
            let mut total = 0.0;
            for s in steps {
                total += cost_of(&s.total_spend(), &s.walk())?;
            }
            verdict(total <= *max, format!("the step cost {}", usd(Some(total))))
        }
        Rule::ToolsUsed(_)
        | Rule::ToolsNotUsed(_)
        | Rule::ToolSequence(_)
        | Rule::ToolArgs { .. }
        | Rule::ToolFailed(_) => {
            let calls: Vec<CallView<'_>> = steps.iter().flat_map(|s| s.all_calls()).collect();
            tool_rule(&calls, rule)
        }
        other => Err(format!(
            "{} applies to the run, not to a step",
            other.describe()
        )),
    }
}

/// The rules every execution of a step must meet.
fn each_execution(steps: &[&StepRecord], rule: &Rule) -> Result<String, String> {
    let runs = steps.len();
    match rule {
        Rule::Status(want) => {
            let off: Vec<String> = steps
                .iter()
                .filter(|s| s.status.as_str() != want)
                .map(|s| {
                    let error = s
                        .error
                        .as_deref()
                        .map(|e| format!(": {}", quote(e)))
                        .unwrap_or_default();
                    format!("#{} {}{error}", s.iteration, s.status.as_str())
                })
                .collect();
            if off.is_empty() {
                Ok(format!("{want} ({runs} execution(s))"))
            } else {
                Err(off.join("; "))
            }
        }
        Rule::Output(m) => {
            let off: Vec<String> = steps
                .iter()
                .filter(|s| !text_holds(s.output.as_deref().unwrap_or(""), m))
                .map(|s| match &s.output {
                    Some(o) => format!("#{} output {}", s.iteration, quote(o)),
                    None => format!("#{} has no output", s.iteration),
                })
                .collect();
            if off.is_empty() {
                Ok(format!("{runs} execution(s) match"))
            } else {
                Err(off.join("; "))
            }
        }
        Rule::MaxTurns(max) => {
            let off: Vec<String> = steps
                .iter()
                .filter(|s| s.assistant_turns() as u64 > *max)
                .map(|s| format!("#{} took {} turns", s.iteration, s.assistant_turns()))
                .collect();
            if off.is_empty() {
                let most = steps.iter().map(|s| s.assistant_turns()).max().unwrap_or(0);
                Ok(format!("at most {most} turns"))
            } else {
                Err(off.join("; "))
            }
        }
        other => Err(format!("{} is not checked per execution", other.describe())),
    }
}

/// The rules over a step's tool calls (its executions', nested steps' and child runs').
fn tool_rule(calls: &[CallView<'_>], rule: &Rule) -> Result<String, String> {
    match rule {
        Rule::ToolsUsed(want) => {
            let missing: Vec<&str> = want
                .iter()
                .filter(|t| !calls.iter().any(|c| c.name == t.as_str()))
                .map(String::as_str)
                .collect();
            let called = format!("called {}", names(calls));
            if missing.is_empty() {
                Ok(called)
            } else {
                Err(format!("never called {}; {called}", missing.join(", ")))
            }
        }
        Rule::ToolsNotUsed(banned) => {
            let used: Vec<String> = banned
                .iter()
                .filter_map(|t| {
                    let n = calls.iter().filter(|c| c.name == t.as_str()).count();
                    (n > 0).then(|| format!("{t} ({n}×)"))
                })
                .collect();
            verdict(
                used.is_empty(),
                if used.is_empty() {
                    format!("called {}", names(calls))
                } else {
                    format!("called {}", used.join(", "))
                },
            )
        }
        Rule::ToolSequence(want) => {
            let mut next = want.iter().peekable();
            for c in calls {
                if next.peek().is_some_and(|w| w.as_str() == c.name) {
                    next.next();
                }
            }
            match next.next() {
                None => Ok(format!("called {}", names(calls))),
                Some(missing) => Err(format!(
                    "no {missing} after the earlier tools of the sequence; called {}",
                    names(calls)
                )),
            }
        }
        Rule::ToolArgs { tool, args } => tool_args(calls, tool, args),
        Rule::ToolFailed(want) => {
            let failed: Vec<&str> = calls.iter().filter(|c| c.failed).map(|c| c.name).collect();
            let detail = if failed.is_empty() {
                format!("no tool call failed (of {})", calls.len())
            } else {
                format!("failed: {}", failed.join(", "))
            };
            verdict(failed.is_empty() != *want, detail)
        }
        other => Err(format!("{} is not a tool rule", other.describe())),
    }
}

fn tool_args(
    calls: &[CallView<'_>],
    tool: &str,
    args: &[(String, ArgMatcher)],
) -> Result<String, String> {
    let of_tool: Vec<&CallView<'_>> = calls.iter().filter(|c| c.name == tool).collect();
    if of_tool.is_empty() {
        return Err(format!("never called {tool}; called {}", names(calls)));
    }
    if of_tool
        .iter()
        .any(|c| args.iter().all(|(name, m)| arg_holds(c.input.get(name), m)))
    {
        return Ok(format!("a call of {tool} matches"));
    }
    let shown: Vec<String> = of_tool
        .iter()
        .take(5)
        .map(|c| quote(&c.input.to_string()))
        .collect();
    Err(format!(
        "no call of {tool} matches; its {} call(s) had {}",
        of_tool.len(),
        shown.join(", ")
    ))
}

/// Matched against the output as a workflow's `{{steps.<name>.output}}` renders it: without
/// one final line break.
fn text_holds(output: &str, m: &TextMatcher) -> bool {
    let output = output
        .strip_suffix('\n')
        .map(|o| o.strip_suffix('\r').unwrap_or(o))
        .unwrap_or(output);
    match m {
        TextMatcher::Contains(t) => output.contains(t.as_str()),
        TextMatcher::Matches(r) => r.is_match(output),
        TextMatcher::Equals(t) => output == t,
    }
}

fn arg_holds(value: Option<&Value>, m: &ArgMatcher) -> bool {
    let Some(value) = value else {
        return false;
    };
    match m {
        ArgMatcher::Equals(want) => value == want,
        ArgMatcher::Subset(want) => is_subset(want, value),
        ArgMatcher::Matches(r) => match value {
            Value::String(s) => r.is_match(s),
            other => r.is_match(&other.to_string()),
        },
    }
}

/// Whether `want` is a subset of `have`: every key of an object (recursively), every element
/// of an array found in order, anything else equal. Values come from serde_json, at most 128
/// levels deep, so the recursion into arrays is bounded.
pub(crate) fn is_subset(want: &Value, have: &Value) -> bool {
    let mut pending = vec![(want, have)];
    while let Some((w, h)) = pending.pop() {
        match (w, h) {
            (Value::Object(wm), Value::Object(hm)) => {
                for (k, wv) in wm {
                    match hm.get(k) {
                        Some(hv) => pending.push((wv, hv)),
                        None => return false,
                    }
                }
            }
            (Value::Array(wa), Value::Array(ha)) => {
                // Each wanted element matches a later element of `have` than the one before.
                let mut rest = ha.iter();
                for wv in wa {
                    if !rest.any(|hv| is_subset(wv, hv)) {
                        return false;
                    }
                }
            }
            _ => {
                if w != h {
                    return false;
                }
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subsets_of_objects_arrays_and_scalars() {
        let have = json!({"a": 1, "b": {"c": [1, 2, 3], "d": "x"}});
        assert!(is_subset(&json!({}), &have));
        assert!(is_subset(&json!({"b": {"c": [1, 3]}}), &have));
        assert!(!is_subset(&json!({"b": {"c": [3, 1]}}), &have));
        assert!(!is_subset(&json!({"b": {"e": 1}}), &have));
        assert!(!is_subset(&json!({"a": "1"}), &have));
        assert!(is_subset(&json!(5), &json!(5)));
    }
}
