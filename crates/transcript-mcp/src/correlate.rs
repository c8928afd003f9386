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
/// `<server>/<tool>` (as the providers crate records it), Gemini CLI's bare `<tool>` or
/// `<server>__<tool>`, and `<server>.<tool>`.
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
}

/// The output a CLI reports is the result's content as the CLI renders it, not the MCP
/// envelope: when the router output is an MCP result (`{"content": [...]}`), its text blocks
/// joined are compared with the agent's text too.
fn outputs_agree(router: &Value, agent: &Value) -> bool {
    if router == agent {
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
