//! Structural validation of drafts: what a writer checks before it assigns a `seq`, so that it
//! never writes a line its own reader or `verify` would flag.

use crate::event::EventDraft;
use crate::payload::{MessagePayload, Payload, StepPayload, ToolPayload};
use crate::vocab::{EventType, Role};

/// Why a draft cannot be recorded. Each variant names the field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidDraft {
    /// `child_run_id` on an event that is not `step.call_workflow.*`.
    #[error("child_run_id is only allowed on step.call_workflow.* events, not on {event_type}")]
    UnexpectedChildRunId {
        /// The draft's event type.
        event_type: EventType,
    },
    /// `step.call_workflow.*` without `child_run_id`.
    #[error("{event_type} needs a child_run_id")]
    MissingChildRunId {
        /// The draft's event type.
        event_type: EventType,
    },
    /// A `run.*` event with a step path or a non-zero iteration.
    #[error(
        "{event_type} is run-level: path must be \"\" and iteration 0 (got path {path:?}, iteration {iteration})"
    )]
    RunLevelPath {
        /// The draft's event type.
        event_type: EventType,
        /// The path given.
        path: String,
        /// The iteration given.
        iteration: u64,
    },
    /// A step, message or tool event without a step path.
    #[error("{event_type} needs the path of its step (decisions 4 and 5), got \"\"")]
    MissingPath {
        /// The draft's event type.
        event_type: EventType,
    },
    /// An empty required string field (`payload.kind`, `payload.name`, `payload.call_id`).
    #[error("{event_type}: payload.{field} must not be empty")]
    EmptyField {
        /// The draft's event type.
        event_type: EventType,
        /// The payload field.
        field: &'static str,
    },
    /// A message whose role does not match its event type.
    #[error("{event_type} must have role {expected}, got {actual}")]
    RoleMismatch {
        /// The draft's event type.
        event_type: EventType,
        /// The role the type requires.
        expected: Role,
        /// The role given.
        actual: Role,
    },
    /// `provider`, `model`, `usage` or `request_id` on a `message.user` (decisions 10 and 17:
    /// assistant turns only).
    #[error("message.user must not carry payload.{field} (decision 10: assistant turns only)")]
    AgentMetadataOnUser {
        /// The payload field.
        field: &'static str,
    },
    /// A `run.*` event with a `null` payload: readers accept it (seed 000), our writers write
    /// the workflow's `StepPayload` instead (decision 2).
    #[error("{event_type}: our writers write the workflow's StepPayload, not null (decision 2)")]
    NullRunPayload {
        /// The draft's event type.
        event_type: EventType,
    },
    /// `tool.call` with an output, or `tool.result` with an input (decision 6).
    #[error("{event_type}: payload.{field} must be null (decision 6)")]
    NonNullToolSide {
        /// The draft's event type.
        event_type: EventType,
        /// The payload field.
        field: &'static str,
    },
}

impl EventDraft {
    /// Checks the structural rules of the wire contract that the types alone cannot express:
    /// `child_run_id` exactly on `step.call_workflow.*`, run-level events at path `""` and
    /// iteration 0, every other event at a step path, non-empty `kind` / `name` / `call_id`,
    /// message role matching the event type, agent metadata only on assistant turns, and the
    /// null side of tool payloads (decision 6).
    ///
    /// A recorder calls this before assigning a `seq`; a draft that passes encodes to a line
    /// that decodes without warnings and that `verify` accepts.
    pub fn validate(&self) -> Result<(), InvalidDraft> {
        let event_type = self.event_type();
        let call = matches!(
            event_type,
            EventType::CallWorkflowStarted | EventType::CallWorkflowCompleted
        );
        match (call, self.child_run_id.is_some()) {
            (true, false) => return Err(InvalidDraft::MissingChildRunId { event_type }),
            (false, true) => return Err(InvalidDraft::UnexpectedChildRunId { event_type }),
            _ => {}
        }
        let run_level = matches!(event_type, EventType::RunStarted | EventType::RunCompleted);
        if run_level && (!self.path.is_empty() || self.iteration != 0) {
            return Err(InvalidDraft::RunLevelPath {
                event_type,
                path: self.path.clone(),
                iteration: self.iteration,
            });
        }
        if !run_level && self.path.is_empty() {
            return Err(InvalidDraft::MissingPath { event_type });
        }
        match &self.payload {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => check_step(event_type, p),
            Payload::MessageUser(m) => check_message(event_type, Role::User, m),
            Payload::MessageAssistant(m) => check_message(event_type, Role::Assistant, m),
            Payload::ToolCall(t) => check_tool(event_type, t, "output", t.output.is_null()),
            Payload::ToolResult(t) => check_tool(event_type, t, "input", t.input.is_null()),
            Payload::RunNull(_) => Err(InvalidDraft::NullRunPayload { event_type }),
        }
    }
}

fn check_step(event_type: EventType, p: &StepPayload) -> Result<(), InvalidDraft> {
    if p.kind.is_empty() {
        return Err(InvalidDraft::EmptyField {
            event_type,
            field: "kind",
        });
    }
    Ok(())
}

fn check_message(
    event_type: EventType,
    expected: Role,
    m: &MessagePayload,
) -> Result<(), InvalidDraft> {
    if m.role != expected {
        return Err(InvalidDraft::RoleMismatch {
            event_type,
            expected,
            actual: m.role,
        });
    }
    if expected == Role::User {
        let field = if m.provider.is_some() {
            Some("provider")
        } else if m.model.is_some() {
            Some("model")
        } else if m.usage.is_some() {
            Some("usage")
        } else if m.request_id.is_some() {
            Some("request_id")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(InvalidDraft::AgentMetadataOnUser { field });
        }
    }
    Ok(())
}

fn check_tool(
    event_type: EventType,
    t: &ToolPayload,
    null_side: &'static str,
    null_side_is_null: bool,
) -> Result<(), InvalidDraft> {
    for (field, value) in [("name", &t.name), ("call_id", &t.call_id)] {
        if value.is_empty() {
            return Err(InvalidDraft::EmptyField { event_type, field });
        }
    }
    if !null_side_is_null {
        return Err(InvalidDraft::NonNullToolSide {
            event_type,
            field: null_side,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fidelity, RawJson, RunId};

    fn child() -> RunId {
        RunId::parse("6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b").unwrap()
    }

    #[test]
    fn well_formed_drafts_pass() {
        let drafts = [
            EventDraft::run_level(Payload::RunStarted(StepPayload::new("wf", "workflow"))),
            EventDraft::new("a", 2, Payload::StepStarted(StepPayload::new("a", "agent"))),
            EventDraft::new(
                "c",
                0,
                Payload::CallWorkflowStarted(StepPayload::new("c", "call_workflow")),
            )
            .with_child(child()),
            EventDraft::new(
                "a",
                0,
                Payload::MessageUser(MessagePayload::new(Role::User, vec![])),
            ),
            EventDraft::new(
                "a",
                0,
                Payload::ToolCall(ToolPayload::call(
                    "Read",
                    "t1",
                    RawJson::string("x"),
                    Fidelity::Router,
                )),
            ),
            EventDraft::new(
                "a",
                0,
                Payload::ToolResult(ToolPayload::result(
                    "Read",
                    "t1",
                    RawJson::string("y"),
                    None,
                    Fidelity::Router,
                )),
            ),
        ];
        for d in drafts {
            assert_eq!(d.validate(), Ok(()), "{d:?}");
        }
    }

    #[test]
    fn each_rule_is_enforced_with_a_named_field() {
        let step = || Payload::StepStarted(StepPayload::new("a", "agent"));
        let cases: Vec<(EventDraft, &str)> = vec![
            (
                EventDraft::new("a", 0, step()).with_child(child()),
                "child_run_id is only allowed",
            ),
            (
                EventDraft::new(
                    "c",
                    0,
                    Payload::CallWorkflowCompleted(StepPayload::new("c", "call_workflow")),
                ),
                "needs a child_run_id",
            ),
            (
                EventDraft::new(
                    "x",
                    0,
                    Payload::RunStarted(StepPayload::new("wf", "workflow")),
                ),
                "is run-level",
            ),
            (EventDraft::new("", 0, step()), "needs the path"),
            (
                EventDraft::new("a", 0, Payload::StepStarted(StepPayload::new("a", ""))),
                "payload.kind must not be empty",
            ),
            (
                EventDraft::new(
                    "a",
                    0,
                    Payload::MessageUser(MessagePayload::new(Role::Assistant, vec![])),
                ),
                "must have role user",
            ),
            (
                EventDraft::new(
                    "a",
                    0,
                    Payload::MessageUser(MessagePayload {
                        model: Some("m".into()),
                        ..MessagePayload::new(Role::User, vec![])
                    }),
                ),
                "payload.model",
            ),
            (
                EventDraft::new(
                    "a",
                    0,
                    Payload::ToolCall(ToolPayload::call(
                        "Read",
                        "",
                        RawJson::null(),
                        Fidelity::Router,
                    )),
                ),
                "payload.call_id must not be empty",
            ),
            (
                EventDraft::new(
                    "a",
                    0,
                    Payload::ToolCall(ToolPayload {
                        output: RawJson::string("early"),
                        ..ToolPayload::call("Read", "t", RawJson::null(), Fidelity::Router)
                    }),
                ),
                "payload.output must be null",
            ),
        ];
        for (draft, needle) in cases {
            let err = draft.validate().expect_err(needle);
            assert!(err.to_string().contains(needle), "{err} lacks {needle:?}");
        }
    }
}
