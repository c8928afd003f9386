//! One API request, one bill (issue #29 item 1): usage is keyed by the
//! provider's request identity, whatever way its records are split or
//! interleaved. Expected values come from jq over the raw capture (the
//! expression is in the comment beside each number), never from this parser.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;

use common::*;
use transcript_domain::Usage;
use transcript_providers::{Output, Provider};

fn real(folder: &str, name: &str) -> Option<Vec<u8>> {
    let Some(root) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is not set"
        );
        println!("skipped: TRANSCRIPT_REAL_FIXTURES is not set");
        return None;
    };
    let mut root = PathBuf::from(root);
    if root.is_relative() {
        root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(root);
    }
    let path = root.join(folder).join(name);
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// (input, output, cache read, cache write) of every turn that has usage.
fn turn_usages(out: &[Output]) -> Vec<[u64; 4]> {
    out.iter()
        .filter_map(|o| match o {
            Output::Turn(m) => m.usage.as_ref(),
            _ => None,
        })
        .map(|u: &Usage| {
            [
                u.input_tokens.unwrap_or(0),
                u.output_tokens.unwrap_or(0),
                u.cache_read_tokens.unwrap_or(0),
                u.cache_write_tokens.unwrap_or(0),
            ]
        })
        .collect()
}

/// `spotter-session-log-v2.1.38-tool_heavy.jsonl` holds a request
/// (`msg_019BN3…`) whose two tool_use records are split by the tool_result of
/// the first, its output growing 25 → 173: one turn per request, carrying the
/// request's last record.
#[test]
fn claude_a_message_split_by_its_tool_results_is_one_turn_billed_once() {
    let Some(bytes) = real(
        "claude-code",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ) else {
        return;
    };
    let out = run_chunked(Provider::Claude, &bytes, &[4096]);
    let mut got = turn_usages(&out);
    got.sort();
    // jq -c -s '[.[] | select(.type=="assistant" and .message.usage != null)
    //   | {k: [.message.id, .requestId], u: .message.usage}] | group_by(.k)
    //   | map(last.u | [.input_tokens, .output_tokens, .cache_read_input_tokens,
    //   .cache_creation_input_tokens]) | sort' <capture>
    let want = vec![
        [1, 1, 25798, 208],
        [3, 11, 18014, 8490],
        [3, 27, 17915, 7883],
        [47, 173, 26504, 1115],
    ];
    assert_eq!(got, want);
    // The split message's turn holds both calls, then both results.
    let shapes = transcript_providers::turn_block_types(&out);
    assert!(
        shapes.contains(&vec!["tool_use", "tool_use", "tool_result", "tool_result"]),
        "{shapes:?}"
    );
}

/// Same rule on the sub-agent session: 12 requests, 12 billed turns.
#[test]
fn claude_every_request_of_a_session_is_billed_on_exactly_one_turn() {
    let Some(bytes) = real("claude-code", "spotter-session-log-v2.1.38-subagent.jsonl") else {
        return;
    };
    let out = run_chunked(Provider::Claude, &bytes, &[777]);
    let got = turn_usages(&out);
    // jq -s '[.[] | select(.type=="assistant" and .message.usage != null)
    //   | [.message.id, .requestId]] | unique | length' <capture>  → 12
    assert_eq!(got.len(), 12, "{got:?}");
}

fn claude_line(id: &str, req: &str, sidechain: bool, block: &str, out_tokens: u64) -> String {
    format!(
        r#"{{"type":"assistant","isSidechain":{sidechain},"requestId":"{req}","timestamp":"2026-01-01T00:00:00Z","uuid":"u-{id}-{out_tokens}","message":{{"id":"{id}","model":"claude-opus-4-6","content":[{block}],"usage":{{"input_tokens":7,"output_tokens":{out_tokens},"cache_read_input_tokens":1000,"cache_creation_input_tokens":100}}}}}}"#
    ) + "\n"
}

/// A sidechain's request interleaved with a main-chain request (older logs
/// kept sub-agents in the main file): the main request's second record comes
/// after another turn was emitted, and adds only its output growth.
#[test]
fn claude_a_request_resumed_after_an_interleaved_sidechain_is_billed_once() {
    let text = r#"{"type":"text","text":"hi"}"#;
    let mut log = String::new();
    log += &claude_line("msg_main", "req_main", false, text, 2);
    log += &claude_line("msg_side", "req_side", true, text, 5);
    log += &claude_line(
        "msg_main",
        "req_main",
        false,
        r#"{"type":"tool_use","id":"t1","name":"Read","input":{}}"#,
        40,
    );
    let out = run_by_line(Provider::Claude, log.as_bytes());
    let mut total = Usage::default();
    for o in &out {
        if let Output::Turn(m) = o
            && let Some(u) = &m.usage
        {
            total.accumulate(u);
        }
    }
    // Two requests: main (7 in, 40 out, 1000 read, 100 write) and side
    // (7 in, 5 out, 1000 read, 100 write).
    assert_eq!(total.input_tokens, Some(14));
    assert_eq!(total.output_tokens, Some(45));
    assert_eq!(total.cache_read_tokens, Some(2000));
    assert_eq!(total.cache_write_tokens, Some(200));
}

/// Usage summed over all turns.
fn total(out: &[Output]) -> Usage {
    let mut t = Usage::default();
    for o in out {
        if let Output::Turn(m) = o
            && let Some(u) = &m.usage
        {
            t.accumulate(u);
        }
    }
    t
}

/// Codex rollouts: `token_count` carries the session's cumulative total;
/// Codex may repeat one with an unchanged total after the turn ended. The
/// real rollout with its token_count line (line 22) repeated after
/// `task_complete` (line 25) bills the same as the capture itself.
#[test]
fn codex_a_repeated_cumulative_token_count_is_not_billed_twice() {
    let Some(bytes) = real(
        "codex",
        "agent-sessions-codex-rollout-session-schema-fixture.jsonl",
    ) else {
        return;
    };
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[21].contains(r#""type":"token_count""#),
        "{}",
        lines[21]
    );
    assert!(
        lines[24].contains(r#""type":"task_complete""#),
        "{}",
        lines[24]
    );
    let mut grown: Vec<&str> = lines.clone();
    grown.insert(25, lines[21]);
    let grown = grown.join("\n") + "\n";
    let u = total(&run_by_line(Provider::Codex, grown.as_bytes()));
    // jq -s '[.[] | select(.type=="event_msg" and .payload.type=="token_count"
    //   and .payload.info != null) | .payload.info.total_token_usage] | .[0]
    //   | [.input_tokens - .cached_input_tokens, .output_tokens,
    //   .cached_input_tokens, .reasoning_output_tokens]' <capture>
    //   → [12757, 81, 3584, 63] (the next total, all zeros, is a new session)
    assert_eq!(u.input_tokens, Some(12757));
    assert_eq!(u.output_tokens, Some(81));
    assert_eq!(u.cache_read_tokens, Some(3584));
    assert_eq!(u.reasoning_tokens, Some(63));
}

/// Gemini `--output-format json`: `stats.models` names each model with its
/// tokens; each gets its own usage (never one sum under one name).
#[test]
fn gemini_each_model_of_stats_models_is_billed_under_its_name() {
    let Some(bytes) = real("gemini", "gemini-cli-docs-headless-json-output-france.json") else {
        return;
    };
    let out = run_by_line(Provider::Gemini, &bytes);
    let mut got: Vec<(String, [u64; 4])> = out
        .iter()
        .filter_map(|o| match o {
            Output::Turn(m) => m.usage.as_ref().map(|u| {
                (
                    m.model.clone().unwrap_or_default(),
                    [
                        u.input_tokens.unwrap_or(0),
                        u.output_tokens.unwrap_or(0),
                        u.cache_read_tokens.unwrap_or(0),
                        u.reasoning_tokens.unwrap_or(0),
                    ],
                )
            }),
            _ => None,
        })
        .collect();
    got.sort();
    // jq -c '.stats.models | to_entries | map([.key, [.value.tokens.prompt
    //   - .value.tokens.cached + .value.tokens.tool, .value.tokens.candidates,
    //   .value.tokens.cached, .value.tokens.thoughts]]) | sort' <capture>
    // (`tool`, the tool-use prompt tokens, is input outside `prompt`.)
    let want = vec![
        ("gemini-2.5-flash".to_owned(), [8993, 10, 0, 30]),
        ("gemini-2.5-pro".to_owned(), [3676, 20, 21263, 154]),
    ];
    assert_eq!(got, want);
}

/// Gemini stream-json run with `--model auto` (the init line names the
/// router): the run's usage belongs to the model `stats.models` names. The
/// real Gemini CLI 0.61 capture of `fixtures/agent-clis`, its init model
/// set to `auto`.
#[test]
fn gemini_a_routed_run_bills_the_model_stats_models_names_not_auto() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/agent-clis/gemini/tool_round_trip.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let routed = text.replacen(r#""model":"gemini-2.5-pro""#, r#""model":"auto""#, 1);
    assert_ne!(routed, text);
    let out = run_by_line(Provider::Gemini, routed.as_bytes());
    let billed: Vec<(Option<String>, Usage)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Turn(m) => m.usage.clone().map(|u| (m.model.clone(), u)),
            _ => None,
        })
        .collect();
    // jq -c 'select(.type=="result") | .stats.models | to_entries
    //   | map([.key, .value.input - 0, .value.cached, .value.output_tokens])'
    //   → [["gemini-2.5-pro", 2800, 1700, 52]]
    assert_eq!(billed.len(), 1, "{billed:?}");
    let (model, u) = &billed[0];
    assert_eq!(model.as_deref(), Some("gemini-2.5-pro"));
    assert_eq!(
        (u.input_tokens, u.cache_read_tokens, u.output_tokens),
        (Some(2800), Some(1700), Some(52))
    );
}

/// Copilot: usage per `messageId` (its last report). The real session with its
/// `assistant.message` repeated after `assistant.turn_end` (a resumed session replays
/// it) bills the message once.
#[test]
fn copilot_a_message_reported_again_after_its_turn_ended_is_billed_once() {
    let Some(bytes) = real(
        "copilot",
        "sortie-copilot-cli-output-format-json-simple_session.jsonl",
    ) else {
        return;
    };
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let msg = lines
        .iter()
        .position(|l| l.contains(r#""type":"assistant.message""#))
        .unwrap();
    let end = lines
        .iter()
        .position(|l| l.contains(r#""type":"assistant.turn_end""#))
        .unwrap();
    assert!(end > msg);
    let mut replayed = lines.clone();
    replayed.insert(end + 1, lines[msg]);
    let replayed = replayed.join("\n") + "\n";
    let u = total(&run_by_line(Provider::Copilot, replayed.as_bytes()));
    // jq -R 'fromjson? // empty | select(.type=="assistant.message") | .data.outputTokens'
    //   <capture> → 6
    assert_eq!(u.output_tokens, Some(6));
}
