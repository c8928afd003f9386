//! The comparison `transcript replay` prints at the end (until `transcript diff`'s library is
//! merged): per step, the status, and per agent execution the tool calls (name and arguments)
//! and their results, recorded against replayed. Steps are keyed as the replay keys them
//! (calling `call_workflow` steps, path, iteration), so parallel branches, loop iterations and
//! child runs are compared each with its own.

use std::collections::BTreeMap;

use transcript_domain::tree::{RunTree, Status};
use transcript_replay::server::Block;
use transcript_replay::{StepKey, Tape};

/// One step as compared.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct StepFacts {
    status: Option<String>,
    error: Option<String>,
    /// Per agent execution: `name(arguments)` of each call, in order.
    calls: Vec<Vec<String>>,
    /// Per agent execution: each result's text, in order.
    results: Vec<Vec<String>>,
}

/// A run's facts, by step.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunFacts {
    steps: BTreeMap<StepKey, StepFacts>,
}

impl RunFacts {
    /// The facts of a run from its step tree (child runs included) and its tape.
    pub fn of(tree: &RunTree, tape: &Tape) -> RunFacts {
        let mut facts = RunFacts::default();
        facts.walk(tree, &[]);
        for key in tape.keys() {
            let step = facts.steps.entry(key.clone()).or_default();
            for execution in tape.executions(key) {
                step.calls.push(
                    execution
                        .turns
                        .iter()
                        .flat_map(|t| &t.blocks)
                        .filter_map(|b| match b {
                            Block::ToolCall {
                                name, arguments, ..
                            } => Some(format!("{name}({arguments})")),
                            _ => None,
                        })
                        .collect(),
                );
                step.results.push(
                    execution
                        .turns
                        .iter()
                        .flat_map(|t| t.results.iter().map(|(_, text)| text.clone()))
                        .collect(),
                );
            }
        }
        facts
    }

    fn walk(&mut self, tree: &RunTree, callers: &[(String, u64)]) {
        let mut stack: Vec<&transcript_domain::tree::StepNode> = tree.steps.iter().rev().collect();
        while let Some(node) = stack.pop() {
            let key = StepKey {
                callers: callers.to_vec(),
                path: node.path.clone(),
                iteration: node.iteration,
            };
            let step = self.steps.entry(key).or_default();
            step.status = Some(status_word(node.status).to_owned());
            step.error.clone_from(&node.error);
            if let Some(child) = &node.child {
                let mut deeper = callers.to_vec();
                deeper.push((node.path.clone(), node.iteration));
                self.walk(child, &deeper);
            }
            stack.extend(node.children.iter().rev());
        }
    }

    /// The differences of `replayed` from `self` (the recording), one line each (empty when
    /// equal), in step order.
    pub fn differences(&self, replayed: &RunFacts) -> Vec<String> {
        let mut out = Vec::new();
        let none = StepFacts::default();
        let keys: std::collections::BTreeSet<&StepKey> =
            self.steps.keys().chain(replayed.steps.keys()).collect();
        for key in keys {
            let (a, b) = (
                self.steps.get(key).unwrap_or(&none),
                replayed.steps.get(key).unwrap_or(&none),
            );
            if a.status != b.status {
                let word = |s: &Option<String>| s.clone().unwrap_or_else(|| "absent".to_owned());
                let why = b
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default();
                out.push(format!(
                    "step {key}: recorded {}, replay {}{why}",
                    word(&a.status),
                    word(&b.status)
                ));
            }
            if a.calls != b.calls {
                out.push(format!(
                    "step {key}: tool calls differ: recorded {}, replay {}",
                    listed(&a.calls),
                    listed(&b.calls)
                ));
            } else if let Some(line) = first_result_difference(key, &a.results, &b.results) {
                out.push(line);
            }
        }
        out
    }

    /// How many steps and tool calls were compared.
    pub fn counts(&self) -> (usize, usize) {
        let calls = self
            .steps
            .values()
            .map(|s| s.calls.iter().map(Vec::len).sum::<usize>())
            .sum();
        (self.steps.len(), calls)
    }
}

fn first_result_difference(key: &StepKey, a: &[Vec<String>], b: &[Vec<String>]) -> Option<String> {
    for (execution, (x, y)) in a.iter().zip(b).enumerate() {
        for (n, (rx, ry)) in x.iter().zip(y).enumerate() {
            if rx.trim_end() != ry.trim_end() {
                let diff = similar::TextDiff::from_lines(rx.as_str(), ry.as_str())
                    .unified_diff()
                    .header("recorded", "replay")
                    .to_string();
                let which = if a.len() > 1 {
                    format!(" (execution {})", execution + 1)
                } else {
                    String::new()
                };
                return Some(format!(
                    "step {key}{which}: result of tool call {} differs\n{}",
                    n + 1,
                    diff.trim_end()
                ));
            }
        }
        if x.len() != y.len() {
            return Some(format!(
                "step {key}: recorded {} tool result(s), replay {}",
                x.len(),
                y.len()
            ));
        }
    }
    None
}

fn listed(calls: &[Vec<String>]) -> String {
    let all: Vec<&str> = calls.iter().flatten().map(String::as_str).collect();
    if all.is_empty() {
        "none".to_owned()
    } else {
        all.join(", ")
    }
}

fn status_word(status: Status) -> &'static str {
    match status {
        Status::Incomplete => "incomplete",
        Status::Succeeded => "succeeded",
        Status::Failed => "failed",
        Status::Cancelled => "cancelled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(status: &str, calls: &[&str], results: &[&str]) -> RunFacts {
        let mut f = RunFacts::default();
        f.steps.insert(
            StepKey::new("ask", 0),
            StepFacts {
                status: Some(status.to_owned()),
                error: (status == "failed").then(|| "boom".to_owned()),
                calls: vec![calls.iter().map(|c| (*c).to_owned()).collect()],
                results: vec![results.iter().map(|c| (*c).to_owned()).collect()],
            },
        );
        f
    }

    #[test]
    fn equal_runs_have_no_difference_and_each_kind_of_difference_is_named() {
        let recorded = facts("succeeded", &["Read({})"], &["a\nb"]);
        assert!(recorded.differences(&recorded.clone()).is_empty());
        let failed = facts("failed", &["Read({})"], &["a\nb"]);
        assert_eq!(
            recorded.differences(&failed),
            ["step ask: recorded succeeded, replay failed: boom"]
        );
        let other_call = facts("succeeded", &["Bash({})"], &["a\nb"]);
        assert!(recorded.differences(&other_call)[0].contains("tool calls differ"));
        let other_result = facts("succeeded", &["Read({})"], &["a\nB"]);
        let d = recorded.differences(&other_result);
        assert!(
            d[0].starts_with("step ask: result of tool call 1 differs"),
            "{d:?}"
        );
        assert!(d[0].contains("-b\n+B"), "{d:?}");
    }
}
