//! #51 item 5: a real Gemini CLI run whose main model is answered by another version than
//! the one the CLI asked for (the API's `modelVersion`, as a `-latest` alias is answered by a
//! dated version). The session file names the model asked for, the stream's per-model totals
//! the one that answered: the turns are matched by order and token sums, not by name. Every
//! content turn gets its own usage from the file, the answering model's name (which the
//! price table knows) and its request identity (the file's message id, wire decision 17);
//! the routing classifier's call stays its usage-only turn; no "session file not used"
//! warning, no turn named `auto`. The truth is the scripted server's log of what it billed
//! ([`ModelServer::bills`]), the transcript read with `jq`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{Bill, ModelServer, Script, Turn, Usage};

/// The answering version: a name the pinned price table prices.
const ANSWERED_BY: &str = "gemini-2.5-pro";
const CLASSIFIER: &str = r#"{"complexity_reasoning": "Needs care.", "complexity_score": 90}"#;

/// `jq` over the transcript: each assistant turn as `[has_blocks, model, input, output,
/// cache_read, request_id]`.
fn turns(jsonl: &Path) -> Vec<Value> {
    let out = std::process::Command::new("jq")
        .args([
            "-c",
            r#"select(.type == "message.assistant") | .payload
               | [(.blocks | length > 0), .model, (.usage.input_tokens // 0),
                  (.usage.output_tokens // 0), (.usage.cache_read_tokens // 0), .request_id]"#,
        ])
        .arg(jsonl)
        .output()
        .expect("jq is installed");
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    common::text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A server bill as the turn's `[input (uncached), output (thoughts excluded), cache read]`.
fn billed(b: &Bill) -> [u64; 3] {
    let u = b.usage;
    [
        u.input_tokens + u.cache_creation_input_tokens,
        u.output_tokens - u.reasoning_tokens,
        u.cache_read_input_tokens,
    ]
}

#[test]
fn turns_take_the_answering_models_name_by_sums_not_by_name() {
    let cli = AgentCli::Gemini;
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    std::fs::write(sb.work().join("notes.txt"), "code 7\n").unwrap();
    let script = Script::new([
        Turn::text(CLASSIFIER).with_usage(Usage::new(400, 12)),
        Turn::tool_call("read_file", json!({"file_path": "notes.txt"}))
            .with_usage(Usage::new(1200, 45).with_cache(300, 0))
            .answered_by(ANSWERED_BY),
        Turn::text("The code is 7.")
            .with_usage(Usage::new(1700, 17).with_cache(1600, 0))
            .answered_by(ANSWERED_BY),
    ]);
    let server = ModelServer::start(script).unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    let var = "GOOGLE_GEMINI_BASE_URL";
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let workflow = format!(
        "name: answered\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
         provider: gemini\n    timeout_ms: 120000\n    prompt: Read notes.txt.\n    \
         tools: [read_file]\n    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n"
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
    let transcript = std::fs::read_to_string(&jsonl).unwrap();
    let all = format!(
        "exit {:?}\nstderr:\n{}\nbills: {bills:#?}\nturns: {recorded:#?}\ntranscript:\n{transcript}",
        output.status.code(),
        common::text(&output.stderr),
    );
    assert!(output.status.success(), "{all}");
    assert_eq!(bills.len(), 3, "{all}");
    // The CLI asked for another name than the one that answered.
    assert!(bills[1..].iter().all(|b| b.model != ANSWERED_BY), "{all}");
    assert!(
        !transcript.contains("session file not used"),
        "the session file agreed: {all}"
    );
    let content: Vec<&Value> = recorded.iter().filter(|t| t[0] == true).collect();
    assert_eq!(content.len(), 2, "{all}");
    for (turn, bill) in content.iter().zip(&bills[1..]) {
        assert_eq!(turn[1], ANSWERED_BY, "{all}");
        let usage = [turn[2].as_u64(), turn[3].as_u64(), turn[4].as_u64()].map(Option::unwrap);
        assert_eq!(usage, billed(bill), "{all}");
        assert!(turn[5].as_str().is_some_and(|r| !r.is_empty()), "{all}");
    }
    assert_ne!(
        content[0][5], content[1][5],
        "one request id per message: {all}"
    );
    // The classifier's call, which is no message of the file, stays its own usage-only turn.
    let bare: Vec<&Value> = recorded.iter().filter(|t| t[0] == false).collect();
    assert_eq!(bare.len(), 1, "{all}");
    assert_eq!(bare[0][1], bills[0].model.as_str(), "{all}");
    assert_eq!(
        [
            bare[0][2].as_u64(),
            bare[0][3].as_u64(),
            bare[0][4].as_u64()
        ]
        .map(Option::unwrap),
        billed(&bills[0]),
        "{all}"
    );
    assert!(recorded.iter().all(|t| t[1] != "auto"), "{all}");
    // Every turn has a price: no model falls to "—".
    let receipts = bin_receipts(storage.path(), &run_id);
    assert!(!receipts.contains("no price"), "{receipts}\n{all}");
}

/// `receipts RUN`'s stderr.
fn bin_receipts(storage: &Path, run: &str) -> String {
    let out = common::bin()
        .args(["receipts", run, "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    common::text(&out.stderr)
}
