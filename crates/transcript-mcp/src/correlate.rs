//! One call, two observations: pairing the proxy's `router` record of an MCP tool call with
//! the agent CLI's own `agent_emitted` record of it, so that counting sees one call, and
//! reporting says when the two disagree. Pure: it reads decoded events.
//!
//! MCP does not carry the provider's tool id (`toolu_…`, `item_3`) to the server, so the two
//! records have different `call_id`s. They are paired by what both saw: the same step (path
//! and iteration), the same tool (the proxy's `mcp__<server>__<tool>` and the CLI's spelling
//! of it, see [`cli_spells`]), equal input (as JSON values), first unpaired in file order.

use serde_json::Value;
use transcript_domain::{ExchangeEvent, Fidelity, Payload, ToolPayload};

/// How one proxy-observed call relates to the CLI's report of it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpCall {
    /// Step path.
    pub path: String,
    /// Iteration.
    pub iteration: u64,
    /// The proxy's qualified tool name, `mcp__<server>__<tool>`.
    pub name: String,
    /// The proxy's call id.
    pub router_call_id: String,
    /// The CLI's call id for the same call, when it reported it.
    pub agent_call_id: Option<String>,
    /// Why the two observations disagree; `None` when they agree.
    pub disagreement: Option<Disagreement>,
}

/// A difference between the two observations of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Disagreement {
    /// The CLI reported no such call (it hid it, or reported it under a name we do not know).
    NotReportedByAgent,
    /// The CLI reported the call but no result for it, while the proxy saw one.
    NoAgentResult,
    /// The outputs differ: what the server answered is not what the CLI says it got.
    OutputDiffers {
        /// The proxy's recorded output (the MCP result), as JSON text.
        router: String,
        /// The CLI's recorded output, as JSON text.
        agent: String,
    },
}

/// Whether the CLI's tool name `agent_name` is its spelling of the proxy's qualified
/// `mcp__<server>__<tool>`: Claude Code's `mcp__<server>__<tool>`, Codex's
/// `<server>/<tool>` (as the providers crate records it), Gemini CLI 0.61's
/// `mcp_<server>_<tool>` (measured in `tests/real_codex_gemini.rs`; older versions used the
/// bare `<tool>` or `<server>__<tool>`), and `<server>.<tool>`.
pub fn cli_spells(agent_name: &str, qualified: &str) -> bool {
    let Some((server, tool)) = qualified
        .strip_prefix("mcp__")
        .and_then(|r| r.split_once("__"))
    else {
        return agent_name == qualified;
    };
    agent_name == qualified
        || agent_name == tool
        || agent_name == format!("{server}/{tool}")
        || agent_name == format!("{server}__{tool}")
        || agent_name == format!("{server}.{tool}")
        || agent_name == format!("mcp_{server}_{tool}")
}

/// The output a CLI reports is the result as the CLI renders it for its model, not the MCP
/// envelope. They agree when the agent's output is the router's whole result, its content
/// blocks, its text blocks joined, or its `structuredContent` (Claude Code 2.1 gives the
/// model `structuredContent` as JSON text when a result has one, measured in
/// `tests/real_claude.rs`).
fn outputs_agree(router: &Value, agent: &Value) -> bool {
    if router == agent {
        return true;
    }
    if let (Some(structured), Value::String(text)) = (router.get("structuredContent"), agent)
        && serde_json::from_str::<Value>(text).is_ok_and(|v| v == *structured)
    {
        return true;
    }
    let Some(content) = router.get("content").and_then(Value::as_array) else {
        return false;
    };
    let texts: Vec<&str> = content
        .iter()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    let joined = texts.join("\n");
    match agent {
        Value::String(s) => *s == joined || s.trim() == joined.trim(),
        Value::Array(items) => *items == *content,
        // Codex 0.169 reports `{"content": [...], "structured_content": null}` (measured in
        // crates/transcript-cli/tests/mcp_real_agents.rs).
        Value::Object(fields) => {
            let structured = fields
                .get("structured_content")
                .or_else(|| fields.get("structuredContent"))
                .filter(|s| !s.is_null());
            fields.get("content") == Some(&Value::Array(content.clone()))
                && structured.is_none_or(|s| router.get("structuredContent") == Some(s))
        }
        _ => false,
    }
}

struct Seen<'a> {
    event: &'a ExchangeEvent,
    call: &'a ToolPayload,
}

fn tool_events<'a>(events: &'a [ExchangeEvent], fidelity: Fidelity) -> Vec<Seen<'a>> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            Payload::ToolCall(call) if call.fidelity == fidelity => Some(Seen { event, call }),
            _ => None,
        })
        .collect()
}

fn result_of<'a>(
    events: &'a [ExchangeEvent],
    call_id: &str,
    fidelity: Fidelity,
) -> Option<&'a ToolPayload> {
    events.iter().find_map(|e| match &e.payload {
        Payload::ToolResult(r) if r.call_id == call_id && r.fidelity == fidelity => Some(r),
        _ => None,
    })
}

/// Pairs every proxy-observed MCP call (router `tool.call` named `mcp__…`) of `events` with
/// the CLI's report of it, and says where they disagree.
pub fn pair_observations(events: &[ExchangeEvent]) -> Vec<McpCall> {
    let agent_calls = tool_events(events, Fidelity::AgentEmitted);
    let mut used = vec![false; agent_calls.len()];
    let mut out = Vec::new();
    for seen in tool_events(events, Fidelity::Router) {
        if !seen.call.name.starts_with("mcp__") {
            continue;
        }
        let input = seen.call.input.to_value();
        let found = agent_calls.iter().enumerate().position(|(i, a)| {
            !used[i]
                && a.event.path == seen.event.path
                && a.event.iteration == seen.event.iteration
                && cli_spells(&a.call.name, &seen.call.name)
                && a.call.input.to_value() == input
        });
        let router_result = result_of(events, &seen.call.call_id, Fidelity::Router);
        let (agent_call_id, disagreement) = match found {
            None => (None, Some(Disagreement::NotReportedByAgent)),
            Some(i) => {
                used[i] = true;
                let agent = agent_calls[i].call;
                let agent_result = result_of(events, &agent.call_id, Fidelity::AgentEmitted);
                let disagreement = match (router_result, agent_result) {
                    (Some(_), None) => Some(Disagreement::NoAgentResult),
                    (Some(r), Some(a))
                        if r.error.is_none()
                            && !outputs_agree(&r.output.to_value(), &a.output.to_value()) =>
                    {
                        Some(Disagreement::OutputDiffers {
                            router: r.output.get().to_owned(),
                            agent: a.output.get().to_owned(),
                        })
                    }
                    _ => None,
                };
                (Some(agent.call_id.clone()), disagreement)
            }
        };
        out.push(McpCall {
            path: seen.event.path.clone(),
            iteration: seen.event.iteration,
            name: seen.call.name.clone(),
            router_call_id: seen.call.call_id.clone(),
            agent_call_id,
            disagreement,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use transcript_domain::{EventDraft, RawJson, RunId, Timestamp};

    fn events(drafts: Vec<(&str, Payload)>) -> Vec<ExchangeEvent> {
        let run = RunId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        let ts = Timestamp::parse("2026-01-01T00:00:00.000Z").unwrap();
        drafts
            .into_iter()
            .enumerate()
            .map(|(i, (path, p))| {
                EventDraft::new(path, 0, p).into_event(i as u64 + 1, run, None, ts)
            })
            .collect()
    }

    fn call(name: &str, id: &str, input: Value, f: Fidelity) -> Payload {
        Payload::ToolCall(ToolPayload::call(
            name,
            id,
            RawJson::from_value(&input).unwrap(),
            f,
        ))
    }

    fn result(name: &str, id: &str, output: Value, f: Fidelity) -> Payload {
        Payload::ToolResult(ToolPayload::result(
            name,
            id,
            RawJson::from_value(&output).unwrap(),
            None,
            f,
        ))
    }

    const R: Fidelity = Fidelity::Router;
    const A: Fidelity = Fidelity::AgentEmitted;

    #[test]
    fn each_cli_spelling_of_the_tool_pairs_with_the_proxys_observation() {
        for agent_name in [
            "mcp__fs__read",
            "fs/read",
            "read",
            "fs__read",
            "fs.read",
            "mcp_fs_read",
        ] {
            let out = json!({"content": [{"type": "text", "text": "data"}]});
            let ev = events(vec![
                ("s", call(agent_name, "toolu_1", json!({"p": 1}), A)),
                ("s", call("mcp__fs__read", "s#0/mcp-1", json!({"p": 1}), R)),
                ("s", result("mcp__fs__read", "s#0/mcp-1", out.clone(), R)),
                ("s", result(agent_name, "toolu_1", json!("data"), A)),
            ]);
            let pairs = pair_observations(&ev);
            assert_eq!(pairs.len(), 1, "{agent_name}");
            assert_eq!(
                pairs[0].agent_call_id.as_deref(),
                Some("toolu_1"),
                "{agent_name}"
            );
            assert_eq!(pairs[0].disagreement, None, "{agent_name}");
        }
        assert!(!cli_spells("fs/other", "mcp__fs__read"));
        assert!(!cli_spells("other/read", "mcp__fs__read"));
    }

    #[test]
    fn a_call_the_agent_did_not_report_or_reported_differently_is_a_disagreement() {
        let ev = events(vec![
            ("s", call("mcp__fs__read", "r1", json!({"p": 1}), R)),
            (
                "s",
                result(
                    "mcp__fs__read",
                    "r1",
                    json!({"content": [{"type": "text", "text": "real"}]}),
                    R,
                ),
            ),
            ("s", call("read", "a1", json!({"p": 2}), A)),
            ("s", call("mcp__fs__read", "r2", json!({"p": 2}), R)),
            (
                "s",
                result(
                    "mcp__fs__read",
                    "r2",
                    json!({"content": [{"type": "text", "text": "real"}]}),
                    R,
                ),
            ),
            ("s", result("read", "a1", json!("forged"), A)),
            ("other", call("read", "a3", json!({"p": 3}), A)),
            ("s", call("mcp__fs__read", "r3", json!({"p": 3}), R)),
            (
                "s",
                result("mcp__fs__read", "r3", json!({"content": []}), R),
            ),
        ]);
        let pairs = pair_observations(&ev);
        assert_eq!(pairs.len(), 3);
        assert_eq!(
            pairs[0].disagreement,
            Some(Disagreement::NotReportedByAgent)
        );
        assert!(matches!(
            pairs[1].disagreement,
            Some(Disagreement::OutputDiffers { .. })
        ));
        assert_eq!(pairs[1].agent_call_id.as_deref(), Some("a1"));
        // Same input but another step: not the same call.
        assert_eq!(
            pairs[2].disagreement,
            Some(Disagreement::NotReportedByAgent)
        );
    }

    #[test]
    fn repeated_identical_calls_pair_in_order_and_each_agent_report_is_used_once() {
        let ok = json!({"content": [{"type": "text", "text": "x"}]});
        let ev = events(vec![
            ("s", call("mcp__fs__read", "r1", json!({}), R)),
            ("s", result("mcp__fs__read", "r1", ok.clone(), R)),
            ("s", call("mcp__fs__read", "r2", json!({}), R)),
            ("s", result("mcp__fs__read", "r2", ok.clone(), R)),
            ("s", call("mcp__fs__read", "a1", json!({}), A)),
            ("s", result("mcp__fs__read", "a1", json!("x"), A)),
        ]);
        let pairs = pair_observations(&ev);
        assert_eq!(pairs[0].agent_call_id.as_deref(), Some("a1"));
        assert_eq!(pairs[1].agent_call_id, None);
        assert_eq!(
            pairs[1].disagreement,
            Some(Disagreement::NotReportedByAgent)
        );
    }

    #[test]
    fn structured_content_rendered_as_json_text_agrees_and_a_missing_agent_result_does_not() {
        let out =
            json!({"content": [{"type": "text", "text": "t"}], "structuredContent": {"echo": "t"}});
        let ev = events(vec![
            ("s", call("mcp__f__echo", "r1", json!({}), R)),
            ("s", result("mcp__f__echo", "r1", out.clone(), R)),
            ("s", call("mcp__f__echo", "a1", json!({}), A)),
            (
                "s",
                result("mcp__f__echo", "a1", json!("{\"echo\":\"t\"}"), A),
            ),
            ("s", call("mcp__f__echo", "r2", json!({"n": 2}), R)),
            ("s", result("mcp__f__echo", "r2", out, R)),
            ("s", call("mcp__f__echo", "a2", json!({"n": 2}), A)),
        ]);
        let pairs = pair_observations(&ev);
        assert_eq!(pairs[0].disagreement, None);
        assert_eq!(pairs[1].disagreement, Some(Disagreement::NoAgentResult));
    }

    #[test]
    fn codexs_content_object_agrees_and_a_different_one_does_not() {
        let router = json!({"content": [{"type": "text", "text": "Echo: hi"}]});
        let codex =
            json!({"content": [{"type": "text", "text": "Echo: hi"}], "structured_content": null});
        assert!(outputs_agree(&router, &codex));
        let other =
            json!({"content": [{"type": "text", "text": "Echo: no"}], "structured_content": null});
        assert!(!outputs_agree(&router, &other));
        let structured = json!({"content": [{"type": "text", "text": "Echo: hi"}], "structured_content": {"x": 1}});
        assert!(!outputs_agree(&router, &structured));
        assert!(!outputs_agree(&router, &json!({"text": "Echo: hi"})));
    }
}
