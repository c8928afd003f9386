//! Gemini CLI: `--output-format stream-json` (init, message deltas to
//! accumulate, tool_use / tool_result by `tool_id`, error, result stats) and
//! `--output-format json` (one document: `response`, `stats`, `error`).

use crate::json::Value;
use transcript_domain::Usage;

use crate::facts::Fact;
use crate::frame::Record;
use crate::output::{DiagnosticKind as K, Output, Position};
use crate::turns::Turns;
use crate::util::{
    Mapper, diag, error_text, json_arguments, minus, ne, rtype, s, synth, text_of, u,
};

/// The terminal record of stream-json.
const TERMINAL: &str = "`result`";

#[derive(Debug, Default)]
pub(crate) struct Gemini;

impl Mapper for Gemini {
    fn record(&mut self, rec: Record, turns: &mut Turns, out: &mut Vec<Output>) {
        let v = &rec.value;
        let pos = rec.position;
        if v.get("response").is_some() || (v.get("stats").is_some() && v.get("type").is_none()) {
            return json_document(v, pos, turns, out);
        }
        let t = rtype(v);
        if matches!(t, "init" | "message" | "user" | "tool_use" | "tool_result") {
            turns.expect(TERMINAL);
        }
        match t {
            "init" => {
                if let Some(m) = ne(v, "model") {
                    turns.default_model = Some(m.to_owned());
                }
                // The session id names the CLI's own session file
                // (crate::gemini_session::gemini_session_id).
                diag(
                    out,
                    K::Metadata,
                    pos,
                    t,
                    ne(v, "session_id").unwrap_or_default(),
                );
            }
            "message" | "user" => message(v, t, pos, turns, out),
            "tool_use" => {
                let id = ne(v, "tool_id")
                    .map(str::to_owned)
                    .unwrap_or_else(|| synth(format_args!("line{}", pos.line)));
                turns.tool_use(
                    ne(v, "tool_name").unwrap_or("unknown"),
                    &id,
                    json_arguments(v.get("parameters")),
                    out,
                );
            }
            "tool_result" => {
                let id = ne(v, "tool_id").unwrap_or_default();
                let error = (s(v, "status") == Some("error")).then(|| {
                    v.get("error")
                        .map(error_text)
                        .filter(|e| !e.is_empty())
                        .unwrap_or_else(|| "error".to_owned())
                });
                turns.tool_result(id, v.raw("output"), error, pos, t, out);
            }
            "error" => diag(
                out,
                K::ProviderError,
                pos,
                t,
                s(v, "message").unwrap_or_default(),
            ),
            "result" => result(v, pos, turns, out),
            _ => diag(out, K::Unknown, pos, t, ""),
        }
    }
}

/// A `message` (or `user`) event: a prompt, or the assistant's text (whole or a delta) and,
/// in the older hand-written shape, its tool calls.
fn message(v: &Value, t: &str, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let role = s(v, "role").unwrap_or(if t == "user" { "user" } else { "assistant" });
    if role != "assistant" {
        let record = format!("message/{role}");
        return match ne(v, "content") {
            Some(text) if role == "user" => turns.prompt(text.to_owned(), None, pos, &record, out),
            _ => diag(out, K::Extra, pos, record, "prompt message"),
        };
    }
    let text = text_of(v, "content", pos, t, out);
    let text = text.as_ref();
    if v.get("delta").and_then(Value::as_bool) == Some(true) {
        turns.append_text(text, out);
    } else if !text.is_empty() || v.get("toolCalls").is_none() {
        turns.text(text, out);
    }
    // Older hand-written shape: tool calls inside the message.
    if let Some(Value::Array(calls)) = v.get("toolCalls") {
        for (i, c) in calls.iter().enumerate() {
            let id = ne(c, "id")
                .map(str::to_owned)
                .unwrap_or_else(|| synth(format_args!("line{}#{i}", pos.line)));
            turns.tool_use(
                ne(c, "name").unwrap_or("unknown"),
                &id,
                json_arguments(c.get("arguments")),
                out,
            );
        }
    }
}

/// The terminal `result` event: the run's duration, usage (per model when given) and status.
fn result(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    let t = "result";
    turns.terminal();
    if let Some(ms) = v.get("stats").and_then(|st| u(st, "duration_ms")) {
        turns.fact(Fact::Duration(ms), out);
    }
    if let Some(stats) = v.get("stats") {
        let models = per_model(stats, stream_usage);
        if models.is_empty() {
            turns.set_usage(stream_usage(stats));
        } else {
            turns.usage_per_model(models, out);
        }
    }
    if s(v, "status").is_some_and(|st| st != "success") {
        let detail = v.get("error").map(error_text).unwrap_or_default();
        diag(out, K::ProviderError, pos, t, detail);
    } else if v.get("stats").is_none() {
        diag(out, K::Metadata, pos, t, "result without stats");
    }
}

/// `result.stats` of stream-json: totals for the whole run (`input_tokens`
/// includes `cached`).
/// Gemini CLI's `result.stats`. Thought tokens are not part of `output_tokens` (the Gemini
/// API counts them apart); CLI versions that omit `thoughts` (0.61) still count them in
/// `total_tokens`, so they are what `total_tokens` has beyond input and output.
fn stream_usage(st: &Value) -> Usage {
    let cached = u(st, "cached");
    let input = u(st, "input_tokens").or_else(|| u(st, "input"));
    let output = u(st, "output_tokens");
    let thoughts = u(st, "thoughts").or_else(|| {
        let (total, input, output) = (u(st, "total_tokens")?, input?, output?);
        total
            .checked_sub(input.saturating_add(output))
            .filter(|t| *t > 0)
    });
    Usage {
        input_tokens: minus(input, cached),
        output_tokens: output,
        cache_read_tokens: cached,
        cache_write_tokens: None,
        reasoning_tokens: thoughts,
        cost_usd: None,
        ..Default::default()
    }
}

/// `stats.models`: the usage of each model the run used, by name (the
/// model a run reports, e.g. `auto`, is a router, not a model: a routed run
/// names a pro model and a flash-lite routing call here). Empty when absent.
fn per_model(stats: &Value, usage: fn(&Value) -> Usage) -> Vec<(String, Usage)> {
    let Some(models) = stats.get("models").and_then(Value::as_object) else {
        return Vec::new();
    };
    models
        .keys()
        .zip(models.values())
        .map(|(name, m)| (name.to_owned(), usage(m)))
        .filter(|(_, u)| !u.is_empty())
        .collect()
}

/// A `stats.models` entry of the `--output-format json` document. Its tool-use prompt tokens
/// (`tool`, the API's `toolUsePromptTokenCount`) are outside `prompt` (`total` = `prompt` +
/// `candidates` + `thoughts` + `tool`) and billed as input, as in the saved sessions.
fn document_usage(m: &Value) -> Usage {
    let Some(t) = m.get("tokens") else {
        return Usage::default();
    };
    let cached = u(t, "cached");
    let tool = u(t, "tool").unwrap_or(0);
    Usage {
        input_tokens: minus(u(t, "prompt"), cached).map(|i| i.saturating_add(tool)),
        output_tokens: u(t, "candidates"),
        cache_read_tokens: cached,
        cache_write_tokens: None,
        reasoning_tokens: u(t, "thoughts"),
        cost_usd: None,
        ..Default::default()
    }
}

fn json_document(v: &Value, pos: Position, turns: &mut Turns, out: &mut Vec<Output>) {
    if let Some(text) = ne(v, "response") {
        turns.text(text, out);
    }
    if let Some(stats) = v.get("stats") {
        let models = per_model(stats, document_usage);
        if !models.is_empty() {
            turns.usage_per_model(models, out);
        }
    }
    let tool_calls = v
        .get("stats")
        .and_then(|s| s.get("tools"))
        .and_then(|t| u(t, "totalCalls"))
        .unwrap_or(0);
    if tool_calls > 0 {
        diag(
            out,
            K::Extra,
            pos,
            "stats/tools",
            format!("{tool_calls} tool call(s) reported only as statistics"),
        );
    }
    if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
        diag(out, K::ProviderError, pos, "error", error_text(e));
    }
}
