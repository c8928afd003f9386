//! The tape: a recorded run's agent executions, per step (path, iteration and the
//! `call_workflow` steps that led to its run), each with its prompt and its turns, turned into
//! the [`Script`] a step's model server plays.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;

use serde_json::Value;
use transcript_domain::{
    BlockBody, DecodedBlock, DecodedEvent, DecodedMessage, DecodedPayload, EventKind, EventType,
    RunId,
};

use crate::server::{Block, Expect, ExpectedResult, Matching, Script, Turn, Usage};

/// The deepest `call_workflow` nesting a tape follows (the engine's own limit is lower).
const MAX_DEPTH: usize = 64;

/// Where an agent execution ran: the `call_workflow` steps from the root run down to its run
/// (each `(path, iteration)`), then its own path and iteration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StepKey {
    /// The calling steps, outermost first; empty in the root run.
    pub callers: Vec<(String, u64)>,
    /// The agent step's path.
    pub path: String,
    /// Its iteration.
    pub iteration: u64,
}

impl StepKey {
    /// A step of the root run.
    pub fn new(path: impl Into<String>, iteration: u64) -> Self {
        StepKey {
            callers: Vec::new(),
            path: path.into(),
            iteration,
        }
    }
}

impl fmt::Display for StepKey {
    /// `path` or `path[iteration]` when the iteration is not 0; callers first, joined by
    /// ` > ` (`review > check[2]`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = |path: &str, iteration: u64| {
            if iteration == 0 {
                path.to_owned()
            } else {
                format!("{path}[{iteration}]")
            }
        };
        for (path, iteration) in &self.callers {
            write!(f, "{} > ", one(path, *iteration))?;
        }
        f.write_str(&one(&self.path, self.iteration))
    }
}

/// One recorded turn (one model response) of an agent execution.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RecordedTurn {
    /// Text, thinking and tool calls, in order, with the recorded call ids.
    pub blocks: Vec<Block>,
    /// The recorded results of this turn's tool calls: `(call id, text)`.
    pub results: Vec<(String, String)>,
    /// The recorded usage.
    pub usage: Usage,
    /// The model the turn named.
    pub model: Option<String>,
}

/// One recorded execution of an agent step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Execution {
    /// The prompt (the first text block of its `message.user`).
    pub prompt: String,
    /// The system prompt (its second text block), if any.
    pub system_prompt: Option<String>,
    /// Its turns, in order.
    pub turns: Vec<RecordedTurn>,
}

impl Execution {
    /// The script that replays it: turn N expects the results of turn N−1 (each named by the
    /// call it answers). Claude Code's `<synthetic>` turns (messages it wrote itself, no API
    /// request) are not served. Turns name no model: each answer names the model its request
    /// asks for, so a workflow that now asks for another model shows it in the replay's
    /// transcript (and its diff); [`Script::recorded_model`] keeps the recorded one.
    pub fn script(&self, matching: Matching) -> Script {
        let mut previous: Option<&RecordedTurn> = None;
        let served = self
            .turns
            .iter()
            .filter(|t| t.model.as_deref() != Some(transcript_providers::SYNTHETIC_MODEL));
        let turns = served
            .map(|t| {
                let mut turn = Turn {
                    blocks: t.blocks.clone(),
                    usage: t.usage,
                    ..Turn::default()
                };
                if let Some(p) = previous.filter(|p| !p.results.is_empty()) {
                    turn.expect = Some(expected(p));
                }
                previous = Some(t);
                turn
            })
            .collect::<Vec<_>>();
        Script {
            turns,
            matching,
            recorded_model: self.turns.iter().find_map(|t| {
                t.model
                    .clone()
                    .filter(|m| m != transcript_providers::SYNTHETIC_MODEL)
            }),
            ..Script::default()
        }
    }
}

/// The recorded results of `turn`, each with the tool and arguments of the call it answers.
fn expected(turn: &RecordedTurn) -> Expect {
    let results = turn
        .results
        .iter()
        .map(|(id, text)| {
            let call = turn.blocks.iter().find_map(|b| match b {
                Block::ToolCall {
                    id: Some(i),
                    name,
                    arguments,
                } if i == id => Some((name.clone(), arguments.clone())),
                _ => None,
            });
            let result = ExpectedResult::new(id.clone(), text.clone());
            match call {
                Some((name, arguments)) => result.for_call(name, arguments),
                None => result,
            }
        })
        .collect();
    Expect { results }
}

/// Why a tape could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TapeError {
    /// A `call_workflow` step names a child run that could not be found.
    #[error("child run {child} (called by step {step}) was not found")]
    MissingChild {
        /// The child run.
        child: RunId,
        /// The calling step.
        step: String,
    },
    /// Child runs nest deeper than the tape follows, or call each other in a circle.
    #[error("child run {0} nests too deep or calls itself")]
    TooDeep(RunId),
}

/// A command step's recorded outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    /// Its stdout.
    pub stdout: String,
    /// Its exit code.
    pub exit_code: i64,
    /// Its step's error, if it failed.
    pub error: Option<String>,
}

/// A recorded run's agent executions and command outcomes, child runs included.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tape {
    steps: BTreeMap<StepKey, VecDeque<Execution>>,
    commands: BTreeMap<StepKey, VecDeque<CommandOutcome>>,
}

impl Tape {
    /// Reads the run of `events`; `lookup` gives the events of a child run by id (its
    /// `step.call_workflow.*` events name it).
    pub fn build(
        events: &[DecodedEvent],
        lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
    ) -> Result<Tape, TapeError> {
        let mut tape = Tape::default();
        let mut visiting = HashSet::new();
        tape.read(events, &[], lookup, &mut visiting)?;
        Ok(tape)
    }

    /// The executions recorded for `key`, in the order they ran.
    pub fn executions(&self, key: &StepKey) -> impl Iterator<Item = &Execution> {
        self.steps.get(key).into_iter().flatten()
    }

    /// Every step key, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &StepKey> {
        self.steps.keys()
    }

    /// Takes the next recorded execution of `key` (a step that ran twice at the same path and
    /// iteration replays its executions in order).
    pub fn take(&mut self, key: &StepKey) -> Option<Execution> {
        self.steps.get_mut(key)?.pop_front()
    }

    /// Takes the next recorded outcome of the command step at `key`.
    pub fn take_command(&mut self, key: &StepKey) -> Option<CommandOutcome> {
        self.commands.get_mut(key)?.pop_front()
    }

    fn read(
        &mut self,
        events: &[DecodedEvent],
        callers: &[(String, u64)],
        lookup: &mut dyn FnMut(RunId) -> Option<Vec<DecodedEvent>>,
        visiting: &mut HashSet<RunId>,
    ) -> Result<(), TapeError> {
        // The execution in progress per step key (a message.user opens a new one).
        let mut open: BTreeMap<StepKey, Execution> = BTreeMap::new();
        let mut done_children = HashSet::new();
        for e in events {
            let key = StepKey {
                callers: callers.to_vec(),
                path: e.path.clone(),
                iteration: e.iteration,
            };
            match (&e.kind, &e.payload) {
                (EventKind::Known(EventType::MessageUser), DecodedPayload::Message(m)) => {
                    if let Some(previous) = open.remove(&key) {
                        self.push(key.clone(), previous);
                    }
                    open.insert(key, user_execution(m));
                }
                (EventKind::Known(EventType::StepCompleted), DecodedPayload::Step(s))
                    if s.kind == "command" =>
                {
                    if let Some(outcome) = command_outcome(s) {
                        self.commands.entry(key).or_default().push_back(outcome);
                    }
                }
                (EventKind::Known(EventType::MessageAssistant), DecodedPayload::Message(m)) => {
                    let turn = assistant_turn(m, &key);
                    open.entry(key).or_default().turns.push(turn);
                }
                (EventKind::Known(EventType::ToolResult), DecodedPayload::Tool(t)) => {
                    if let Some(execution) = open.get_mut(&key) {
                        router_result(execution, &key, t);
                    }
                }
                (
                    EventKind::Known(
                        EventType::CallWorkflowStarted | EventType::CallWorkflowCompleted,
                    ),
                    _,
                ) => {
                    let Some(child) = e.child_run_id else {
                        continue;
                    };
                    if !done_children.insert(child) {
                        continue;
                    }
                    if visiting.contains(&child) || callers.len() >= MAX_DEPTH {
                        return Err(TapeError::TooDeep(child));
                    }
                    let child_events = lookup(child).ok_or_else(|| TapeError::MissingChild {
                        child,
                        step: key.to_string(),
                    })?;
                    let mut deeper = callers.to_vec();
                    deeper.push((e.path.clone(), e.iteration));
                    visiting.insert(child);
                    self.read(&child_events, &deeper, lookup, visiting)?;
                    visiting.remove(&child);
                }
                _ => {}
            }
        }
        for (key, execution) in open {
            self.push(key, execution);
        }
        Ok(())
    }

    fn push(&mut self, key: StepKey, execution: Execution) {
        self.steps.entry(key).or_default().push_back(execution);
    }
}

/// A command step's outcome from its `step.completed` result (`stdout`, `exit_code`).
fn command_outcome(s: &transcript_domain::StepPayload) -> Option<CommandOutcome> {
    let result = s.result.as_ref()?.try_to_value().ok()?;
    Some(CommandOutcome {
        stdout: result["stdout"].as_str()?.to_owned(),
        exit_code: result["exit_code"].as_i64()?,
        error: s.error.clone(),
    })
}

fn texts(m: &DecodedMessage) -> impl Iterator<Item = &str> {
    m.blocks
        .iter()
        .filter_map(DecodedBlock::known)
        .filter_map(|b| match &b.body {
            BlockBody::Text { text } => Some(text.as_str()),
            _ => None,
        })
}

fn user_execution(m: &DecodedMessage) -> Execution {
    let mut texts = texts(m);
    Execution {
        prompt: texts.next().unwrap_or_default().to_owned(),
        system_prompt: texts.next().map(str::to_owned),
        turns: Vec::new(),
    }
}

fn assistant_turn(m: &DecodedMessage, key: &StepKey) -> RecordedTurn {
    let mut turn = RecordedTurn {
        model: m.model.clone(),
        usage: m.usage.as_ref().map(usage).unwrap_or_default(),
        ..RecordedTurn::default()
    };
    for block in m.blocks.iter().filter_map(DecodedBlock::known) {
        match &block.body {
            BlockBody::Text { text } => turn.blocks.push(Block::Text(text.clone())),
            BlockBody::Thinking { thinking } => turn.blocks.push(Block::Thinking {
                text: thinking.clone(),
                signature: String::new(),
            }),
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            } => {
                let arguments = tool_input.try_to_value().unwrap_or(Value::Null);
                let (name, arguments) = model_call(m.provider.as_deref(), tool_name, arguments);
                turn.blocks.push(Block::ToolCall {
                    id: Some(provider_id(key, tool_id).to_owned()),
                    name,
                    arguments,
                });
            }
            BlockBody::ToolResult {
                tool_id,
                tool_content,
            } => turn.results.push((
                provider_id(key, tool_id).to_owned(),
                result_text(&tool_content.to_value()),
            )),
            BlockBody::Command { .. } | BlockBody::Stream { .. } => {}
        }
    }
    turn
}

/// A call the tools router ran for the agent (our HTTP agent's): its `tool.result` comes after
/// the turn that asked for it, whose message holds no result block; it is that turn's result.
fn router_result(execution: &mut Execution, key: &StepKey, t: &transcript_domain::ToolPayload) {
    let id = provider_id(key, &t.call_id);
    let Some(turn) = execution.turns.iter_mut().rev().find(|turn| {
        turn.blocks
            .iter()
            .any(|b| matches!(b, Block::ToolCall { id: Some(i), .. } if i == id))
    }) else {
        return;
    };
    if turn.results.iter().all(|(i, _)| i != id) {
        let text = match &t.error {
            Some(error) if t.output.is_null() => error.clone(),
            _ => result_text(&t.output.to_value()),
        };
        turn.results.push((id.to_owned(), text));
    }
}

/// The provider's own call id of a recorded one: the engine records `<path>#<iteration>/<id>`
/// (`…#<iteration>~<n>/<id>` for a repeated execution) so that executions do not share ids;
/// the agent must get back the id it would have made.
fn provider_id<'a>(key: &StepKey, recorded: &'a str) -> &'a str {
    let prefix = format!("{}#{}", key.path, key.iteration);
    let Some(rest) = recorded.strip_prefix(prefix.as_str()) else {
        return recorded;
    };
    let rest = match rest.strip_prefix('~') {
        Some(n) => n.trim_start_matches(|c: char| c.is_ascii_digit()),
        None => rest,
    };
    rest.strip_prefix('/').unwrap_or(recorded)
}

/// The call the model made, from the call the transcript records. Codex reports the command
/// it ran (`command_execution`, `{"command": "/bin/bash -lc '<cmd>'"}`); its model called its
/// shell tool `exec_command` with `{"cmd": "<cmd>"}`. Every other call is recorded as made.
fn model_call(provider: Option<&str>, name: &str, arguments: Value) -> (String, Value) {
    if provider != Some("codex") || name != "command_execution" {
        return (name.to_owned(), arguments);
    }
    let line = arguments["command"].as_str().unwrap_or_default();
    let cmd = match shell_words::split(line).as_deref() {
        Ok([_shell, flag, cmd]) if flag == "-lc" || flag == "-c" => cmd.clone(),
        _ => line.to_owned(),
    };
    ("exec_command".to_owned(), serde_json::json!({ "cmd": cmd }))
}

/// A recorded result's text: a string as is, content parts' `text` joined, `null` empty,
/// anything else its JSON text.
pub(crate) fn result_text(v: &Value) -> String {
    crate::server::text_of(v)
}

fn usage(u: &transcript_domain::Usage) -> Usage {
    Usage {
        input_tokens: u.input_tokens.unwrap_or(0),
        output_tokens: u.output_tokens.unwrap_or(0),
        cache_read_input_tokens: u.cache_read_tokens.unwrap_or(0),
        cache_creation_input_tokens: u.cache_write_tokens.unwrap_or(0),
        reasoning_tokens: u.reasoning_tokens.unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transcript_domain::decode_line;

    fn events(lines: &[serde_json::Value]) -> Vec<DecodedEvent> {
        lines
            .iter()
            .map(|l| {
                decode_line(l.to_string().as_bytes())
                    .expect("a valid line")
                    .event
            })
            .collect()
    }

    const ROOT: &str = "00000000-0000-4000-8000-000000000001";
    const CHILD: &str = "00000000-0000-4000-8000-000000000002";

    fn line(seq: u64, run: &str, ty: &str, path: &str, it: u64, payload: Value) -> Value {
        serde_json::json!({"seq": seq, "run_id": run, "type": ty, "path": path, "iteration": it,
            "timestamp": "2026-01-01T00:00:00.000Z", "payload": payload})
    }

    fn user(prompt: &str) -> Value {
        serde_json::json!({"role": "user", "blocks": [{"type": "text", "fidelity": "router", "text": prompt}]})
    }

    #[test]
    fn turns_and_results_are_read_per_step_and_iteration_child_runs_included() {
        let root = events(&[
            line(1, ROOT, "message.user", "loop.ask", 1, user("p1")),
            line(
                2,
                ROOT,
                "message.assistant",
                "loop.ask",
                1,
                serde_json::json!({"role": "assistant", "blocks": [
                {"type": "tool_use", "fidelity": "agent_emitted", "tool_name": "Read", "tool_id": "t1", "tool_input": {"file_path": "a"}},
                {"type": "tool_result", "fidelity": "agent_emitted", "tool_id": "t1", "tool_content": [{"type": "text", "text": "A"}]}],
                "usage": {"input_tokens": 3, "output_tokens": 4}}),
            ),
            line(
                3,
                ROOT,
                "message.assistant",
                "loop.ask",
                1,
                serde_json::json!({"role": "assistant", "blocks": [
                {"type": "text", "fidelity": "agent_emitted", "text": "done"}]}),
            ),
            serde_json::json!({"seq": 4, "run_id": ROOT, "child_run_id": CHILD, "type": "step.call_workflow.completed",
                "path": "sub", "iteration": 0, "timestamp": "2026-01-01T00:00:00.000Z",
                "payload": {"name": "sub", "kind": "call_workflow"}}),
        ]);
        let child = events(&[
            line(1, CHILD, "message.user", "inner", 0, user("p2")),
            line(
                2,
                CHILD,
                "step.completed",
                "cmd",
                0,
                serde_json::json!({"name": "cmd",
                "kind": "command", "error": "command exited with code 3",
                "result": {"command": "false", "stdout": "out\n", "exit_code": 3}}),
            ),
        ]);
        let child_id: RunId = CHILD.parse().unwrap();
        let tape = Tape::build(&root, &mut |id| (id == child_id).then(|| child.clone())).unwrap();
        let ask = tape
            .executions(&StepKey::new("loop.ask", 1))
            .next()
            .unwrap();
        assert_eq!(ask.prompt, "p1");
        assert_eq!(ask.turns.len(), 2);
        assert_eq!(ask.turns[0].results, [("t1".to_owned(), "A".to_owned())]);
        assert_eq!(ask.turns[0].usage, Usage::new(3, 4));
        let script = ask.script(Matching::Strict);
        assert_eq!(script.turns[0].expect, None);
        let expect = script.turns[1].expect.as_ref().unwrap();
        assert_eq!(expect.results[0].text, "A");
        assert_eq!(
            (
                expect.results[0].tool.as_str(),
                &expect.results[0].arguments
            ),
            ("Read", &serde_json::json!({"file_path": "a"}))
        );
        let inner = StepKey {
            callers: vec![("sub".to_owned(), 0)],
            path: "inner".to_owned(),
            iteration: 0,
        };
        assert_eq!(tape.executions(&inner).next().unwrap().prompt, "p2");
        assert_eq!(inner.to_string(), "sub > inner");
        let mut tape = tape;
        let cmd = StepKey {
            callers: vec![("sub".to_owned(), 0)],
            path: "cmd".to_owned(),
            iteration: 0,
        };
        assert_eq!(
            tape.take_command(&cmd),
            Some(CommandOutcome {
                stdout: "out\n".to_owned(),
                exit_code: 3,
                error: Some("command exited with code 3".to_owned()),
            })
        );
        assert_eq!(tape.take_command(&cmd), None);
        assert_eq!(StepKey::new("loop.ask", 1).to_string(), "loop.ask[1]");
    }

    #[test]
    fn the_engines_call_id_prefix_is_taken_off_and_codex_commands_become_its_shell_calls() {
        let key = StepKey::new("b.ask", 2);
        assert_eq!(provider_id(&key, "b.ask#2/toolu_1"), "toolu_1");
        assert_eq!(provider_id(&key, "b.ask#2~1/item_0"), "item_0");
        assert_eq!(provider_id(&key, "other#2/toolu_1"), "other#2/toolu_1");
        assert_eq!(provider_id(&key, "toolu_1"), "toolu_1");
        let (name, args) = model_call(
            Some("codex"),
            "command_execution",
            serde_json::json!({"command": "/bin/bash -lc 'cat \"my notes.txt\" | wc -l'"}),
        );
        assert_eq!(name, "exec_command");
        assert_eq!(
            args,
            serde_json::json!({"cmd": "cat \"my notes.txt\" | wc -l"})
        );
        let kept = model_call(
            Some("claude"),
            "Read",
            serde_json::json!({"file_path": "a"}),
        );
        assert_eq!(
            kept,
            ("Read".to_owned(), serde_json::json!({"file_path": "a"}))
        );
    }

    #[test]
    fn a_missing_child_is_an_error_naming_it() {
        let root = events(&[
            serde_json::json!({"seq": 1, "run_id": ROOT, "child_run_id": CHILD,
            "type": "step.call_workflow.started", "path": "sub", "iteration": 0,
            "timestamp": "2026-01-01T00:00:00.000Z", "payload": {"name": "sub", "kind": "call_workflow"}}),
        ]);
        let err = Tape::build(&root, &mut |_| None).unwrap_err();
        assert!(err.to_string().contains(CHILD), "{err}");
    }
}
