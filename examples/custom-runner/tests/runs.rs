//! The example, run as a team would run it, against the scripted model server: every run (the
//! child run too) is seen live, the agent step's usage equals the server's bill, the custom
//! tool's call is one router-fidelity `tool.call` / `tool.result` pair, and the run verifies.
//! Truth comes from outside the runner: the server's bill and the raw JSONL lines.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use transcript_testkit::model_server::{ModelServer, Provider, Script, Turn, Usage};

fn lines(path: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_runner_sees_every_run_live_and_bills_what_the_server_billed() {
    let script = Script::new([Turn::text("A greeting.")
        .with_usage(Usage::new(120, 8).with_cache(40, 0).with_reasoning(3))]);
    let server = ModelServer::start(script).unwrap();
    let storage = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_custom-runner"))
        .arg(storage.path())
        .arg(workspace.path())
        .env("OPENAI_BASE_URL", server.openai_base_url())
        .env("OPENAI_API_KEY", "sk-scripted")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid = true"), "{stdout}");

    // Every run's file, each line seen live exactly once.
    let mut files: Vec<_> = std::fs::read_dir(storage.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "the root run and the child run: {files:?}");
    for file in &files {
        for e in lines(file) {
            let live = format!(
                "live {} {} {} {}",
                e["run_id"].as_str().unwrap(),
                e["seq"],
                e["type"].as_str().unwrap(),
                e["path"].as_str().unwrap()
            );
            assert_eq!(
                stdout.lines().filter(|l| *l == live).count(),
                1,
                "{live}\n{stdout}"
            );
        }
    }
    let child = files
        .iter()
        .map(|f| lines(f))
        .find(|l| l[0]["parent_run_id"].is_string());
    assert!(child.is_some(), "a child run: {files:?}");

    // The agent step's usage (and the run's total) equal the server's bill.
    let billed = server.billed(Provider::OpenAiChat);
    let want = json!({
        "input_tokens": billed.input_tokens,
        "output_tokens": billed.output_tokens,
        "cache_read_tokens": billed.cache_read_input_tokens,
        "reasoning_tokens": billed.reasoning_tokens,
    });
    let ask = stdout
        .lines()
        .find(|l| l.starts_with("usage ask "))
        .unwrap();
    let mut parts = ask.splitn(3, ' ').nth(2).unwrap().rsplitn(2, ' ');
    let cost = parts.next().unwrap();
    let usage: Value = serde_json::from_str(parts.next().unwrap()).unwrap();
    assert_eq!(usage, want, "{stdout}");
    assert!(cost.starts_with('$'), "gpt-4o-mini is priced: {ask}");
    let total = stdout
        .lines()
        .find_map(|l| l.strip_prefix("total "))
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(total).unwrap(), want);

    // The custom tool: one tool.call / tool.result pair at router fidelity, same call_id.
    let root = files
        .iter()
        .map(|f| lines(f))
        .find(|l| l[0]["parent_run_id"].is_null())
        .unwrap();
    let tool: Vec<&Value> = root
        .iter()
        .filter(|e| e["payload"]["name"] == "word_count")
        .collect();
    let kinds: Vec<&str> = tool.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool.call", "tool.result"]);
    assert_eq!(tool[0]["payload"]["call_id"], tool[1]["payload"]["call_id"]);
    for e in &tool {
        assert_eq!(e["payload"]["fidelity"], "router", "{e}");
    }
    assert_eq!(tool[1]["payload"]["output"], json!({"words": 4}));
}
