//! GitHub Copilot CLI: `--output-format json` events and the session-state
//! `events.jsonl` files (same event vocabulary: `assistant.message` with
//! `toolRequests`, `tool.execution_start` / `_complete` by `toolCallId`,
//! reasoning, ephemeral deltas, a final `result`).
//!
//! The session store is `~/.copilot/session-state/<session-id>/events.jsonl`
//! (`$COPILOT_HOME` relocates `~/.copilot`), one `{type, data, id, timestamp,
//! parentId}` event per line. Usage, as third-party readers of real sessions
//! report it (no schema is published): each `assistant.message` carries its
//! `outputTokens`; input and cache counts exist only per model in
//! `session.shutdown`'s `modelMetrics.<model>.usage` (`inputTokens`, which
//! includes `cacheReadTokens` and `cacheWriteTokens`, and `outputTokens`),
//! billed here as each model's remainder. Sources:
//! <https://github.com/mag123c/toktrack/pull/211> (the `modelMetrics` shape),
//! <https://github.com/kenn-io/agentsview/pull/577> (input includes the cache;
//! one shutdown per segment), <https://github.com/tenequm/pond/issues/206> and
//! <https://github.com/ingo-eichhorst/Irrlicht/issues/1256> (the layout).

use crate::json::Value;
use transcript_domain::Usage;

use crate::frame::Record;
use crate::output::{Diagnostic, DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{Mapper, diag, error_text, json_arguments, ne, rtype, synth, text_of, u};

/// The terminal records: `result` (`--output-format json`) or
/// `session.shutdown` (session `events.jsonl`).
const TERMINAL: &str = "`result` or `session.shutdown`";

/// Fields of `session.*` events that name the model in use.
const MODEL_FIELDS: &[&str] = &[
    "model",
    "newModel",
    "currentModel",
    "selectedModel",
    "chosenModel",
];

#[derive(Debug, Default)]
pub(crate) struct Copilot {
    /// The last `system.message`, the system prompt of the next user message.
    system: Option<String>,
    /// A line that is not JSON and reads as an error (`Error: Not
    /// authenticated`): Copilot prints it before failing, so the failure
    /// quotes it.
    error_line: Option<(Position, String)>,
    /// Output tokens each `assistant.message` of this session segment billed, by message id
    /// (its latest report) with its model: `session.shutdown` bills the rest of each model's
    /// usage.
    billed: std::collections::BTreeMap<String, (Option<String>, u64)>,
}

impl Mapper for Copilot {
    fn framing(&mut self, d: &Diagnostic) {
        if let Some(line) = d.detail.strip_prefix("not JSON: ")
            && line
                .get(..6)
                .is_some_and(|p| p.eq_ignore_ascii_case("error:"))
        {
            self.error_line = Some((d.position, line.to_owned()));
        }
    }

    fn finish(&mut self, _turns: &mut Turns, out: &mut Vec<Output>) {
        // An error line no `result` quoted: the run ended on it.
        if let Some((pos, line)) = self.error_line.take() {
            diag(out, K::ProviderError, pos, "-", line);
        }
    }

    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = &rec.value;
        let pos = rec.position;
        let t = rtype(v);
        let null = Value::Null;
        let d = v.get("data").unwrap_or(&null);
        if t.starts_with("assistant.") || t.starts_with("tool.") || t == "user.message" {
            turns.expect(TERMINAL);
        }
        if t.starts_with("session.")
            && let Some(m) = MODEL_FIELDS.iter().find_map(|f| ne(d, f))
        {
            turns.default_model = Some(m.to_owned());
        }
        match t {
            "assistant.message" => {
                if let Some(n) = u(d, "outputTokens") {
                    let fallback = synth(format_args!("line{}", pos.line));
                    let id = ne(d, "messageId").unwrap_or(&fallback).to_owned();
                    let model = ne(d, "model")
                        .map(str::to_owned)
                        .or_else(|| turns.default_model.clone());
                    self.billed.insert(id, (model, n));
                }
                assistant_message(d, pos, turns, out)
            }
            "assistant.reasoning" => {
                let text = text_of(d, "content", pos, t, out);
                turns.thinking(text, out)
            }
            "assistant.turn_start" => {
                if let Some(m) = ne(d, "model") {
                    turns.default_model = Some(m.to_owned());
                }
                diag(out, K::Metadata, pos, t, "");
            }
            "assistant.turn_end" => {
                turns.end_turn(out);
                diag(out, K::Metadata, pos, t, "");
            }
            "tool.execution_start" => tool_start(d, pos, turns, out),
            "tool.execution_complete" => tool_complete(d, pos, turns, out),
            "assistant.message_delta"
            | "assistant.reasoning_delta"
            | "assistant.streaming_delta"
            | "tool.execution_partial_result"
            | "tool.execution_progress"
            | "assistant.intent" => diag(out, K::Progress, pos, t, ""),
            "system.message" => match ne(d, "content") {
                Some(text) if turns.collecting() => self.system = Some(text.to_owned()),
                _ => diag(out, K::Extra, pos, t, "prompt message"),
            },
            "user.message" => match ne(d, "content") {
                Some(text) => {
                    let system = self.system.take();
                    turns.prompt(text.to_owned(), system, pos, t, out)
                }
                None => diag(out, K::Extra, pos, t, "prompt message"),
            },
            "session.error" | "abort" => {
                let detail = ne(d, "message")
                    .or_else(|| ne(d, "reason"))
                    .unwrap_or_default();
                diag(out, K::ProviderError, pos, t, detail);
            }
            "result" => self.result(v, pos, turns, out),
            "session.shutdown" => {
                self.shutdown(d, turns, out);
                turns.terminal();
                diag(out, K::Metadata, pos, t, "");
            }
            _ if ["session.", "hook.", "subagent.", "system.", "skill."]
                .iter()
                .any(|p| t.starts_with(p)) =>
            {
                diag(out, K::Metadata, pos, t, "")
            }
            _ => diag(out, K::Unknown, pos, t, ""),
        }
    }
}

impl Copilot {
    /// `session.shutdown` of a session-state `events.jsonl`: its
    /// `modelMetrics.<model>.usage` is the segment's usage per model (`inputTokens`
    /// includes the cache reads and writes). The messages billed their `outputTokens`; each
    /// model's remainder (input, cache, the output no message reported) is billed once on a
    /// usage-only turn of that model. A resumed session writes one shutdown per segment,
    /// each counting its own segment.
    fn shutdown(&mut self, d: &Value, turns: &mut Turns, out: &mut Vec<Output>) {
        let billed = std::mem::take(&mut self.billed);
        let Some(Value::Object(metrics)) = d.get("modelMetrics") else {
            return;
        };
        let mut rest = Vec::new();
        for (model, m) in metrics.keys().zip(metrics.values()) {
            let Some(usage) = m.get("usage") else {
                continue;
            };
            let seen: u64 = billed
                .values()
                .filter(|(m, _)| m.as_deref() == Some(model))
                .map(|(_, n)| n)
                .sum();
            let (read, write) = (u(usage, "cacheReadTokens"), u(usage, "cacheWriteTokens"));
            let input = u(usage, "inputTokens").map(|i| {
                i.saturating_sub(read.unwrap_or(0))
                    .saturating_sub(write.unwrap_or(0))
            });
            let remainder = Usage {
                input_tokens: input,
                output_tokens: u(usage, "outputTokens").map(|o| o.saturating_sub(seen)),
                cache_read_tokens: read,
                cache_write_tokens: write,
                reasoning_tokens: None,
                cost_usd: None,
                ..Default::default()
            };
            let nothing = [
                remainder.input_tokens,
                remainder.output_tokens,
                remainder.cache_read_tokens,
                remainder.cache_write_tokens,
            ]
            .iter()
            .all(|n| n.unwrap_or(0) == 0);
            if !nothing {
                rest.push((model.to_owned(), remainder));
            }
        }
        if !rest.is_empty() {
            turns.usage_only_turns(rest, out);
        }
    }

    /// The final `result` of `--output-format json`: a non-zero exit code fails the run,
    /// quoting the error line printed before it.
    fn result(&mut self, v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
        turns.terminal();
        let code = v.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        if code != 0 {
            let detail = match self.error_line.take() {
                Some((_, line)) => format!("exit code {code}: {line}"),
                None => format!("exit code {code}"),
            };
            diag(out, K::ProviderError, pos, "result", detail);
        } else {
            diag(out, K::Metadata, pos, "result", "");
        }
    }
}

/// `assistant.message`: one response's reasoning, text, tool requests and output tokens.
fn assistant_message(d: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let fallback = synth(format_args!("line{}", pos.line));
    let id = ne(d, "messageId").unwrap_or(&fallback);
    turns.message(Some(id), ne(d, "model"), out);
    let r = text_of(d, "reasoningText", pos, "assistant.message", out);
    if !r.is_empty() {
        turns.thinking(r, out);
    }
    let text = text_of(d, "content", pos, "assistant.message", out);
    if !text.is_empty() {
        turns.text(text, out);
    }
    if d.get("reasoningOpaque").is_some_and(|x| !x.is_null())
        || d.get("encryptedContent").is_some_and(|x| !x.is_null())
    {
        diag(
            out,
            K::Extra,
            pos,
            "assistant.message/reasoningOpaque",
            "encrypted reasoning",
        );
    }
    if let Some(Value::Array(reqs)) = d.get("toolRequests") {
        for (i, r) in reqs.iter().enumerate() {
            let id = ne(r, "toolCallId")
                .map(str::to_owned)
                .unwrap_or_else(|| synth(format_args!("{id}#{i}")));
            turns.tool_use(
                ne(r, "name").unwrap_or("unknown"),
                &id,
                json_arguments(r.get("arguments")),
                out,
            );
        }
    }
    if let Some(n) = u(d, "outputTokens") {
        // One bill per message, however its events are split.
        turns.set_request_usage(
            id.to_owned(),
            Usage {
                output_tokens: Some(n),
                ..Usage::default()
            },
        );
    }
}

/// `tool.execution_start`: a tool call no `toolRequests` announced opens here.
fn tool_start(d: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let id = ne(d, "toolCallId")
        .map(str::to_owned)
        .unwrap_or_else(|| synth(format_args!("line{}", pos.line)));
    if turns.is_pending(&id) {
        diag(out, K::Progress, pos, "tool.execution_start", "");
    } else {
        turns.tool_use(
            ne(d, "toolName").unwrap_or("unknown"),
            &id,
            json_arguments(d.get("arguments")),
            out,
        );
    }
}

/// `tool.execution_complete`: the call's result, failed when `success` is false.
fn tool_complete(d: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let id = ne(d, "toolCallId").unwrap_or_default();
    let result = d.get("result");
    let content = result.and_then(|r| r.get("content")).or(result);
    let error = (d.get("success").and_then(Value::as_bool) == Some(false)).then(|| {
        d.get("error")
            .map(error_text)
            .or_else(|| content.map(error_text))
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "failed".to_owned())
    });
    let raw = match result {
        Some(r) if r.get("content").is_some() => r.raw("content"),
        _ => d.raw("result"),
    };
    turns.tool_result(id, raw, error, pos, "tool.execution_complete", out);
}
