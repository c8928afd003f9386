//! Where two runs first diverge: the first step, in the run's order (depth first, a step's
//! own changes before its nested steps and its child run), whose comparison differs, and the
//! turn when a turn differs (#61). `transcript diff` prints it first, the HTML diff shows it on
//! top, a trial's report names it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{RunDiff, StepDiff};

/// Where run B first differs from run A (a trial from its recording).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Divergence {
    /// The step (dot-separated path, `#N` for an iteration past the first).
    pub step: String,
    /// The turn (from 0) when the first difference is in a turn.
    pub turn: Option<u64>,
    /// The first field that differs (`turns[2].blocks[0].text`, `status`, `only in B`, …).
    pub field: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.turn {
            Some(t) => write!(f, "step {} turn {} ({})", self.step, t + 1, self.field),
            None => write!(f, "step {} ({})", self.step, self.field),
        }
    }
}

/// The first divergence of two aligned runs (a [`crate::DiffDocument`]'s `run`): depth first
/// through its steps in order, `None` when they behaved the same. A block or a call is looked
/// into first (the step in it that behaved otherwise, not the block's status). Within a step,
/// the earliest turn that differs names it, else its first change. A changed definition
/// (`definition.<key>`) is the cause of a divergence, not one, and counted tokens and money
/// are not behaviour: a step whose only changes are those behaved as recorded.
pub fn first_divergence(run: &RunDiff) -> Option<Divergence> {
    fn in_steps(steps: &[StepDiff], prefix: &str) -> Option<Divergence> {
        steps.iter().find_map(|s| in_step(s, prefix))
    }
    fn in_step(s: &StepDiff, prefix: &str) -> Option<Divergence> {
        if s.equal {
            return None;
        }
        let step = match s.iteration {
            0 => format!("{prefix}{}", s.path),
            n => format!("{prefix}{}#{n}", s.path),
        };
        // Look inside first: a block or a call fails because a step in it did, and that
        // step is where the run behaved otherwise.
        let inside = in_steps(&s.steps, prefix).or_else(|| {
            s.child
                .as_ref()
                .and_then(|c| in_steps(&c.steps, &format!("{step}/")))
        });
        if inside.is_some() {
            return inside;
        }
        let behaved = s.changes.iter().filter(|c| behaves(&c.field));
        let earliest_turn = behaved
            .clone()
            .filter_map(|c| turn_of(&c.field).map(|t| (t, c)))
            .min_by_key(|(t, _)| *t)
            .map(|(_, c)| c);
        if let Some(c) = earliest_turn.or_else(|| behaved.clone().next()) {
            return Some(Divergence {
                turn: turn_of(&c.field),
                field: c.field.clone(),
                step,
            });
        }
        if s.side != crate::model::Side::Both {
            let field = match s.side {
                crate::model::Side::OnlyA => "only in the recording",
                _ => "only in the trial",
            }
            .to_owned();
            return Some(Divergence {
                step,
                turn: None,
                field,
            });
        }
        None
    }
    in_steps(&run.steps, "")
}

/// Whether a change of `field` is behaviour: not the definition (the cause), nor the tokens
/// and money a provider counts (a replay server reports zeros where the recording had none;
/// a live turn's cache reads vary with the same answer).
fn behaves(field: &str) -> bool {
    let tail = field.rsplit('.').next().unwrap_or(field);
    !(field.starts_with("definition.")
        || field.starts_with("usage.")
        || field.contains(".usage.")
        || tail == "cost_usd"
        || tail.ends_with("_tokens"))
}

/// The turn a field names: `turns[3]…` or `turns[3→4]…` (A's index).
fn turn_of(field: &str) -> Option<u64> {
    let rest = field.strip_prefix("turns[")?;
    let end = rest.find([']', '→'])?;
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::turn_of;

    #[test]
    fn a_fields_turn_is_as_index() {
        assert_eq!(turn_of("turns[2].blocks[0].text"), Some(2));
        assert_eq!(turn_of("turns[3→4].model"), Some(3));
        assert_eq!(turn_of("status"), None);
        assert_eq!(turn_of("turns"), None);
    }
}
