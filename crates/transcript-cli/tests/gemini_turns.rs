//! #41 item 9: a real Gemini CLI run (preset `provider: gemini` without `model:`, so the CLI's
//! `auto` router: a flash-lite classifier call, then a pro model) records every turn with the
//! model that answered it and its own usage. The truth is the scripted server's own log of
//! the requests it answered ([`ModelServer::bills`]: the model each request named, the usage
//! billed for it); the transcript side is read with `jq` over the run's JSONL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{Bill, ModelServer, Script, Turn, Usage};

const NOTES: &str = "the launch code is 7-alpha-tango\n";
const FINAL_TEXT: &str = "The notes say the launch code is 7-alpha-tango.";
/// The answer Gemini CLI's numerical router expects from its classifier call: a high score
/// routes the prompt to the pro model.
const CLASSIFIER: &str = r#"{"complexity_reasoning": "Needs care.", "complexity_score": 90}"#;

/// One turn of a transcript or one bill of the server, as compared: the model, then input
/// (uncached), output (thoughts excluded), cache read and reasoning tokens.
type Row = (String, [u64; 4]);

/// The server's bill as the Gemini API reported it (`promptTokenCount` − cached,
/// `candidatesTokenCount`, `cachedContentTokenCount`, `thoughtsTokenCount`).
fn billed(b: &Bill) -> Row {
    let u = b.usage;
    (
        b.model.clone(),
        [
            u.input_tokens + u.cache_creation_input_tokens,
            u.output_tokens - u.reasoning_tokens,
            u.cache_read_input_tokens,
            u.reasoning_tokens,
        ],
    )
}

/// `jq` over the transcript: the assistant turns, each as `[has_blocks, model, input,
/// output, cache_read, reasoning]` (a count the turn does not carry is 0).
fn turns(jsonl: &Path) -> Vec<(bool, Row)> {
    let out = std::process::Command::new("jq")
        .args([
            "-c",
            r#"select(.type == "message.assistant") | .payload
               | [(.blocks | length > 0), .model, (.usage.input_tokens // 0),
                  (.usage.output_tokens // 0), (.usage.cache_read_tokens // 0),
                  (.usage.reasoning_tokens // 0)]"#,
        ])
        .arg(jsonl)
        .output()
        .expect("jq is installed");
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    common::text(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let n = |i: usize| v[i].as_u64().unwrap();
            (
                v[0].as_bool().unwrap(),
                (
                    v[1].as_str().unwrap_or("").to_owned(),
                    [n(2), n(3), n(4), n(5)],
                ),
            )
        })
        .collect()
}

#[test]
fn every_gemini_turn_carries_the_model_that_answered_it_and_its_own_usage() {
    routed_run(|_| {});
}

/// The user has run Gemini CLI before: `~/.gemini/tmp` exists, so the step's private Gemini
/// home (#40) links it. The turns are corrected from the session file read through that link,
/// and the session file stays in the user's own home after the run.
#[test]
fn a_users_existing_gemini_tmp_keeps_the_session_and_the_turns_use_it() {
    let Some(sb) = routed_run(|sb| {
        std::fs::create_dir_all(sb.home().join(".gemini/tmp")).unwrap();
    }) else {
        return;
    };
    assert_eq!(session_files(&sb.home()), 1);
}

/// A first Gemini CLI run: the user's home has no `~/.gemini/tmp` yet. The CLI's session file
/// still lands in the user's home, not in the step's private home removed at its end.
#[test]
fn a_first_gemini_run_keeps_its_session_in_the_users_home() {
    let Some(sb) = routed_run(|sb| {
        let _ = std::fs::remove_dir_all(sb.home().join(".gemini/tmp"));
    }) else {
        return;
    };
    assert_eq!(session_files(&sb.home()), 1);
}

/// How many session files Gemini CLI left under `home/.gemini/tmp/*/chats`.
fn session_files(home: &Path) -> usize {
    let chats: Vec<_> = std::fs::read_dir(home.join(".gemini/tmp"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|p| {
            std::fs::read_dir(p.path().join("chats"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .collect();
    assert!(chats.len() <= 1, "{chats:?}");
    chats.len()
}

/// Runs the routed three-turn workflow (after `prepare` on the sandbox) and checks every turn
/// against the server's log; the sandbox, for more checks. `None`: the CLI is not installed.
fn routed_run(prepare: impl Fn(&AgentSandbox)) -> Option<AgentSandbox> {
    let cli = AgentCli::Gemini;
    let bin = cli.require()?;
    let sb = AgentSandbox::new().unwrap();
    std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
    let script = Script::new([
        Turn::text(CLASSIFIER).with_usage(Usage::new(400, 12)),
        Turn::tool_call("read_file", json!({"file_path": "notes.txt"}))
            .with_usage(Usage::new(1200, 45).with_cache(300, 0)),
        Turn::default()
            .then_thinking("**Running it**\n\nThe shell has the answer.", "sig-1")
            .then_tool_call("run_shell_command", json!({"command": "echo shell-42"}))
            .with_usage(Usage::new(1500, 29).with_cache(1400, 0).with_reasoning(8)),
        Turn::text(FINAL_TEXT).with_usage(Usage::new(1700, 17).with_cache(1600, 0)),
    ]);
    let server = ModelServer::start(script).unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    prepare(&sb);
    let var = "GOOGLE_GEMINI_BASE_URL";
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    // No `model:`: the CLI's own default, its `auto` router.
    let workflow = format!(
        "name: turns\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
         provider: gemini\n    timeout_ms: 120000\n    prompt: Read notes.txt.\n    \
         tools: [read_file, run_command]\n    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n"
    );
    let (storage, run_id, output) = common::RealCliRun {
        workflow: &workflow,
        dir: &sb.tmp(),
        workspace: &sb.work(),
        env: &inv.env,
        step_var: var,
        bin: (cli.bin_var(), &bin),
        endpoint: &endpoint,
    }
    .run();
    let jsonl = storage.path().join(format!("{run_id}.jsonl"));
    let recorded = turns(&jsonl);
    let bills = server.bills();
    let all = format!(
        "exit {:?}\nstderr:\n{}\nrequests: {:#?}\nbills: {bills:#?}\nturns: {recorded:#?}\n\
         transcript:\n{}",
        output.status.code(),
        common::text(&output.stderr),
        server
            .requests()
            .iter()
            .map(|r| format!("#{} {} {:?}", r.index, r.path, r.handling))
            .collect::<Vec<_>>(),
        std::fs::read_to_string(&jsonl).unwrap()
    );
    assert!(output.status.success(), "{all}");
    assert!(server.unexpected_requests().is_empty(), "{all}");
    // The run did route: a flash-lite classifier call, then the pro model.
    assert_eq!(bills.len(), 4, "{all}");
    assert!(bills[0].model.contains("flash-lite"), "{all}");
    assert!(bills[1..].iter().all(|b| b.model.contains("pro")), "{all}");

    // The turns with content, in order, are the main model's requests, in order.
    let content: Vec<Row> = recorded
        .iter()
        .filter(|(blocks, _)| *blocks)
        .map(|(_, r)| r.clone())
        .collect();
    let main: Vec<Row> = bills[1..].iter().map(billed).collect();
    assert_eq!(content, main, "{all}");
    // Every turn carrying usage is one request the server billed, and every bill is one turn.
    let mut with_usage: Vec<Row> = recorded
        .iter()
        .filter(|(_, (_, u))| u.iter().any(|n| *n > 0))
        .map(|(_, r)| r.clone())
        .collect();
    let mut truth: Vec<Row> = bills.iter().map(billed).collect();
    with_usage.sort();
    truth.sort();
    assert_eq!(with_usage, truth, "{all}");
    assert!(
        recorded.iter().all(|(_, (m, _))| m != "auto"),
        "no turn is named after the router: {all}"
    );
    // The thinking only the CLI's session file has is on its turn, before the tool call.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let shell_turn: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "message.assistant" && e.to_string().contains("shell-42"))
        .expect("the shell turn");
    let kinds: Vec<&str> = shell_turn["payload"]["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[..2], ["thinking", "tool_use"], "{all}");
    assert!(
        shell_turn.to_string().contains("The shell has the answer."),
        "{all}"
    );
    Some(sb)
}
