//! `transcript import gemini --store` (issue #29 item 3) on the saved sessions the real Gemini
//! CLI 0.61 writes (`$GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-*.jsonl`) while it
//! talks to the scripted model server: the receipts equal the jq truth over the raw file the
//! CLI wrote and the server's bill (cache and thoughts included); the same session resumed
//! (`--resume latest`) grows the file, and the second import appends only what is new to
//! the same run (same id, the first import's bytes untouched, seqs continuing); a third
//! import finds the file unchanged. A file cut between two records of the same message
//! (the CLI appends a message again whole when its tool calls arrive) grows without a tool
//! call recorded twice.
//!
//! The CLI is found by [`AgentCli::require`]; absent, the test says "skipped" (a failure
//! under `CI=true` or `TRANSCRIPT_REQUIRE_AGENTS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, text};
use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Provider, Script, Turn, Usage};

/// The saved chat files under `home/.gemini/tmp/*/chats/`.
fn chat_files(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for project in std::fs::read_dir(home.join(".gemini/tmp"))
        .into_iter()
        .flatten()
    {
        let chats = project.unwrap().path().join("chats");
        for f in std::fs::read_dir(chats).into_iter().flatten() {
            out.push(f.unwrap().path());
        }
    }
    out.sort();
    out
}

/// Runs the real Gemini CLI once in `sb` with `prompt` (`--resume latest` when `resume`).
fn run_gemini(
    bin_path: &Path,
    sb: &AgentSandbox,
    server: &ModelServer,
    prompt: &str,
    resume: bool,
) {
    let mut inv = sb
        .invocation(
            AgentCli::Gemini,
            bin_path,
            server,
            prompt,
            &CliOptions::default(),
        )
        .unwrap();
    if resume {
        inv.args
            .splice(0..0, ["--resume".to_owned(), "latest".to_owned()]);
    }
    let out = inv.command(120).output().unwrap();
    assert!(
        out.status.success(),
        "gemini: {:?}\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// `transcript import gemini --store`, the store found through `GEMINI_CLI_HOME` only (HOME
/// points elsewhere).
fn import_store(storage: &Path, gemini_home: &Path) -> Output {
    let out = bin()
        .args(["import", "gemini", "--store", "--storage"])
        .arg(storage)
        .env("GEMINI_CLI_HOME", gemini_home)
        .env("HOME", storage.join("no-such-home"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// `transcript import auto FILE` (detected as Gemini CLI's).
fn import_file(storage: &Path, file: &Path) -> Output {
    let out = bin()
        .args(["import", "auto", "--storage"])
        .arg(storage)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// The `run<TAB>provider<TAB>path<TAB>what` lines.
fn lines(out: &Output) -> Vec<Vec<String>> {
    text(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn receipts_total(storage: &Path, run: &str) -> Value {
    let out = bin()
        .args(["receipts", run, "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let mut total = r["total"].as_object().cloned().unwrap();
    total.remove("cost_usd");
    total.retain(|_, v| v != &json!(0));
    Value::Object(total)
}

/// The truth from the raw file, with jq: the last record of each `gemini` message id holds
/// its tokens; input excludes the cached part and adds tool-use prompt tokens.
const JQ_TRUTH: &str = r#"[.[] | select(.type == "gemini")] | group_by(.id) | map(last.tokens | select(. != null))
  | {input_tokens: (map(.input - .cached + .tool) | add), output_tokens: (map(.output) | add),
     cache_read_tokens: (map(.cached) | add), reasoning_tokens: (map(.thoughts) | add)}
  | with_entries(select(.value != 0))"#;

fn jq_truth(file: &Path) -> Value {
    let out = std::process::Command::new("jq")
        .arg("-s")
        .arg(JQ_TRUTH)
        .arg(file)
        .output()
        .expect("jq is installed");
    assert!(out.status.success(), "jq: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The server's bill in receipt terms: Gemini counts thoughts apart from output, so the
/// receipt's output is the billed output without the reasoning share.
fn bill(server: &ModelServer) -> Value {
    let b = server.billed(Provider::Gemini);
    let mut u = serde_json::Map::new();
    for (k, v) in [
        ("input_tokens", b.input_tokens),
        ("output_tokens", b.output_tokens - b.reasoning_tokens),
        ("cache_read_tokens", b.cache_read_input_tokens),
        ("reasoning_tokens", b.reasoning_tokens),
    ] {
        if v > 0 {
            u.insert(k.to_owned(), json!(v));
        }
    }
    Value::Object(u)
}

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[test]
fn a_real_gemini_session_resumed_between_two_imports_appends_only_what_is_new() {
    let Some(gemini) = AgentCli::Gemini.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    std::fs::write(
        sb.work().join("notes.txt"),
        "the launch code is 7-alpha-tango\n",
    )
    .unwrap();
    let script = Script::new([
        Turn::default()
            .then_thinking("Read the notes first.", "sig")
            .then_tool_call("read_file", json!({"file_path": "notes.txt"}))
            .with_usage(Usage::new(1200, 45).with_cache(300, 0).with_reasoning(9)),
        Turn::text("The launch code is 7-alpha-tango.")
            .with_usage(Usage::new(1700, 17).with_cache(1600, 0)),
        Turn::text("Still 7-alpha-tango.").with_usage(Usage::new(1900, 11).with_cache(1700, 0)),
    ]);
    let server = ModelServer::start(script).unwrap();
    let storage = tempfile::tempdir().unwrap();

    // First CLI run: read the notes (thinking, a tool call), answer.
    run_gemini(
        &gemini,
        &sb,
        &server,
        "Read notes.txt and tell me the launch code.",
        false,
    );
    let files = chat_files(&sb.home());
    assert_eq!(files.len(), 1, "{files:?}");
    let chat = &files[0];
    let first = import_store(storage.path(), &sb.home());
    let l = lines(&first);
    assert_eq!(l.len(), 1, "{}", text(&first.stderr));
    assert_eq!(l[0][1], "gemini");
    assert_eq!(l[0][3], "new");
    let run = l[0][0].clone();
    let transcript = PathBuf::from(&l[0][2]);
    let before = std::fs::read(&transcript).unwrap();
    let truth = jq_truth(chat);
    assert_eq!(truth, bill(&server), "jq over the raw file = the bill");
    assert_eq!(receipts_total(storage.path(), &run), truth);
    let ev = events(&transcript);
    let user = of_type(&ev, "message.user");
    assert_eq!(user.len(), 1);
    assert_eq!(
        user[0]["payload"]["blocks"][0]["text"],
        "Read notes.txt and tell me the launch code."
    );
    let results = of_type(&ev, "tool.result");
    assert_eq!(of_type(&ev, "tool.call").len(), 1);
    assert_eq!(results.len(), 1);
    // The saved session holds what the stream-json output leaves out: the file's content.
    assert!(
        results[0]["payload"]["output"]
            .to_string()
            .contains("7-alpha-tango"),
        "{}",
        results[0]
    );
    let turns = of_type(&ev, "message.assistant");
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["payload"]["blocks"][0]["type"], "thinking");
    assert_eq!(turns[0]["payload"]["model"], "gemini-2.5-pro");

    // The same session resumed: the CLI appends to the same file.
    run_gemini(&gemini, &sb, &server, "Is it still the same?", true);
    assert_eq!(chat_files(&sb.home()), files, "resumed in the same file");
    let second = import_store(storage.path(), &sb.home());
    let l = lines(&second);
    assert_eq!(
        l,
        vec![vec![
            run.clone(),
            "gemini".to_owned(),
            transcript.display().to_string(),
            "appended".to_owned()
        ]]
    );
    let after = std::fs::read(&transcript).unwrap();
    assert!(
        after.starts_with(&before),
        "the first import's bytes are kept"
    );
    let ev = events(&transcript);
    let seqs: Vec<u64> = ev.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=ev.len() as u64).collect::<Vec<_>>());
    assert_eq!(of_type(&ev, "message.user").len(), 2);
    assert_eq!(of_type(&ev, "message.assistant").len(), 3);
    assert_eq!(of_type(&ev, "tool.call").len(), 1);
    let truth = jq_truth(chat);
    assert_eq!(truth, bill(&server), "jq over the grown file = the bill");
    assert_eq!(receipts_total(storage.path(), &run), truth);

    // Open, not completed: the session may grow again; the index lists the run.
    assert!(of_type(&ev, "run.completed").is_empty());
    assert!(of_type(&ev, "step.completed").is_empty());
    assert!(
        text(&second.stderr)
            .contains("1 imported session run(s) in this storage stay open (no run.completed)"),
        "{}",
        text(&second.stderr)
    );
    let index: Value =
        serde_json::from_slice(&std::fs::read(storage.path().join("import-index.json")).unwrap())
            .unwrap();
    let indexed: Vec<&Value> = index["files"].as_object().unwrap().values().collect();
    assert_eq!(indexed.len(), 1);
    assert_eq!(indexed[0]["run_id"], run.as_str());

    let third = import_store(storage.path(), &sb.home());
    assert_eq!(lines(&third)[0][3], "unchanged");
    assert_eq!(std::fs::read(&transcript).unwrap(), after);

    // Cut between the two records of the first `gemini` message (before its tool call was
    // added): the grown file adds the call once and its usage is not billed twice.
    let raw = std::fs::read_to_string(chat).unwrap();
    let all: Vec<&str> = raw.lines().collect();
    let first_gemini = all
        .iter()
        .position(|l| l.contains("\"type\":\"gemini\""))
        .unwrap();
    let id = serde_json::from_str::<Value>(all[first_gemini]).unwrap()["id"].clone();
    assert!(
        all[first_gemini + 1..]
            .iter()
            .any(|l| serde_json::from_str::<Value>(l).unwrap()["id"] == id),
        "the CLI wrote the message again"
    );
    assert!(
        !all[first_gemini].contains("toolCalls"),
        "{}",
        all[first_gemini]
    );
    let store = tempfile::tempdir().unwrap();
    let cut = store.path().join("chats/session-cut.jsonl");
    std::fs::create_dir_all(cut.parent().unwrap()).unwrap();
    std::fs::write(&cut, all[..=first_gemini].join("\n") + "\n").unwrap();
    let storage2 = tempfile::tempdir().unwrap();
    let dir_import = |s: &Path| {
        let out = bin()
            .args(["import", "gemini", "--storage"])
            .arg(s)
            .arg(store.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        lines(&out)
    };
    let l = dir_import(storage2.path());
    assert_eq!(l[0][3], "new");
    assert_eq!(receipts_total(storage2.path(), &l[0][0]), jq_truth(&cut));
    std::fs::write(&cut, &raw).unwrap();
    let l2 = dir_import(storage2.path());
    assert_eq!(l2[0][0], l[0][0]);
    assert_eq!(l2[0][3], "appended");
    assert_eq!(receipts_total(storage2.path(), &l[0][0]), jq_truth(chat));
    let ev2 = events(&PathBuf::from(&l2[0][2]));
    assert_eq!(of_type(&ev2, "tool.call").len(), 1, "the call once");
    assert_eq!(of_type(&ev2, "tool.result").len(), 1);

    // One file imported whole, its provider detected, reads the same.
    let storage3 = tempfile::tempdir().unwrap();
    let one = import_file(storage3.path(), chat);
    let l3 = lines(&one);
    assert_eq!(l3[0][1], "gemini");
    assert_eq!(receipts_total(storage3.path(), &l3[0][0]), jq_truth(chat));
}
