//! The billed requests of an export document: the one walk and the one pricing rule that
//! every report reads (`receipts`, `receipts --by day|month|session|project|model`, their
//! `--json`, the priced export formats).
//!
//! A billed turn is an assistant message of a step (at any depth, whatever the step's kind)
//! that reported usage: one API request, already deduplicated by the normalizers. It is
//! billed under the model that served it: the turn's own `model`, else its step's model (the
//! one model the step's other turns name), else `(none)` —
//! [`transcript_domain::bill::billed_model`], the rule the step tree and OTLP spans use too.
//! Messages outside any step are not billed (no normalizer writes usage there).

use transcript_domain::Role;
use transcript_domain::Usage;
use transcript_domain::bill::{billed_model, step_model};

use crate::model::{Entry, MessageExport, RunExport, StepExport};

/// One API request as billed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BilledTurn<'d> {
    /// Its `message.assistant`.
    pub message: &'d MessageExport,
    /// Its usage (this request's only).
    pub usage: &'d Usage,
    /// The model it is billed under: its own, else its step's, else `(none)`.
    pub model: &'d str,
}

/// The assistant turns of `step` itself (not of its nested steps), in seq order.
pub fn assistant_turns(step: &StepExport) -> impl Iterator<Item = &MessageExport> {
    step.entries.iter().filter_map(|e| match e {
        Entry::Message(m) if m.role_kind() == Some(Role::Assistant) => Some(m),
        _ => None,
    })
}

/// The billed turns of `step` itself (not of its nested steps), in seq order, each under the
/// model it is billed under.
pub fn billed_turns(step: &StepExport) -> Vec<BilledTurn<'_>> {
    let step = assistant_turns(step).collect::<Vec<_>>();
    let model = step_model(step.iter().map(|m| m.model.as_deref()));
    step.into_iter()
        .filter_map(|m| {
            Some(BilledTurn {
                message: m,
                usage: m.usage.as_ref()?,
                model: billed_model(m.model.as_deref(), model),
            })
        })
        .collect()
}

/// Calls `f` with every step of `run` at any depth, in tree order (a step before its nested
/// steps), not entering child runs.
pub fn each_step<'d>(run: &'d RunExport, f: &mut dyn FnMut(&'d StepExport)) {
    fn walk<'d>(step: &'d StepExport, f: &mut dyn FnMut(&'d StepExport)) {
        f(step);
        for s in &step.steps {
            walk(s, f);
        }
    }
    for step in &run.steps {
        walk(step, f);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn message(seq: u64, role: &str, model: Option<&str>, input: Option<u64>) -> Entry {
        Entry::Message(MessageExport {
            seq,
            role: role.to_owned(),
            timestamp: "2026-01-01T00:00:00Z".to_owned(),
            provider: None,
            model: model.map(str::to_owned),
            usage: input.map(|i| Usage {
                input_tokens: Some(i),
                ..Usage::default()
            }),
            cost_usd: None,
            request_id: None,
            blocks: Vec::new(),
        })
    }

    fn step(path: &str, entries: Vec<Entry>, steps: Vec<StepExport>) -> StepExport {
        StepExport {
            path: path.to_owned(),
            name: path.to_owned(),
            kind: "agent".to_owned(),
            iteration: 0,
            status: "succeeded".to_owned(),
            started_at: String::new(),
            completed_at: None,
            duration_ms: None,
            error: None,
            result: None,
            usage: None,
            network_refused: None,
            cost_usd: None,
            entries,
            steps,
            child_run: None,
            child_run_id: None,
        }
    }

    /// A usage-only turn is billed under its step's one model; without one (several models,
    /// or none) under `(none)`; user messages and turns without usage are not billed.
    #[test]
    fn a_turn_is_billed_under_its_model_else_its_steps() {
        let one = step(
            "a",
            vec![
                message(1, "user", None, Some(99)),
                message(2, "assistant", Some("m"), Some(1)),
                message(3, "assistant", None, Some(2)),
                message(4, "assistant", Some("m"), None),
            ],
            Vec::new(),
        );
        let billed: Vec<_> = billed_turns(&one)
            .iter()
            .map(|t| (t.message.seq, t.model, t.usage.input_tokens))
            .collect();
        assert_eq!(billed, [(2, "m", Some(1)), (3, "m", Some(2))]);
        let two = step(
            "b",
            vec![
                message(1, "assistant", Some("m"), Some(1)),
                message(2, "assistant", Some("n"), Some(1)),
                message(3, "assistant", None, Some(1)),
            ],
            Vec::new(),
        );
        let models: Vec<_> = billed_turns(&two).iter().map(|t| t.model).collect();
        assert_eq!(models, ["m", "n", "(none)"]);
    }

    #[test]
    fn every_step_is_walked_in_tree_order() {
        let run = RunExport {
            run_id: "r".to_owned(),
            parent_run_id: None,
            workflow: None,
            status: "succeeded".to_owned(),
            started_at: None,
            completed_at: None,
            duration_ms: None,
            error: None,
            result: None,
            usage: None,
            cost_usd: None,
            steps: vec![
                step(
                    "a",
                    Vec::new(),
                    vec![step("a.b", Vec::new(), vec![step("a.b.c", vec![], vec![])])],
                ),
                step("d", Vec::new(), Vec::new()),
            ],
            entries: Vec::new(),
            problems: Vec::new(),
        };
        let mut paths = Vec::new();
        each_step(&run, &mut |s| paths.push(s.path.clone()));
        assert_eq!(paths, ["a", "a.b", "a.b.c", "d"]);
    }
}
