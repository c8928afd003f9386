//! The real agent CLIs (Claude Code, Codex, Gemini CLI, from the npm registry) against the
//! scripted model server: each runs a tool that reads a file we put in its working directory,
//! then answers; and each fails cleanly when the provider is overloaded or a stream is cut.
//!
//! A CLI is found by [`AgentCli::require`]: `TRANSCRIPT_<CLI>_BIN`, then `PATH`, then the cache
//! folder `.ci/install-agent-clis` installs into. When it is absent the test says it is skipped
//! and passes, unless `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`. Every run goes through coreutils `timeout`,
//! so a CLI that hangs fails the test instead of blocking it.
//!
//! `TRANSCRIPT_CAPTURE_AGENT_CLIS=<dir>` writes each run's stdout to `<dir>/<cli>/<test>.jsonl`
//! (how `fixtures/agent-clis/` was produced).

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{Fault, ModelServer, Provider, Script, Turn, Usage};

/// Longest a single CLI run may take before `timeout` kills it (a hang, not a slow run: runs
/// take one to three seconds).
const RUN_LIMIT_SECS: u64 = 60;
const NOTES: &str = "the launch code is 7-alpha-tango\nsecond line of notes\n";
const FINAL_TEXT: &str = "The notes say the launch code is 7-alpha-tango.";
const PROMPT: &str = "Read notes.txt and tell me the launch code.";

/// A sandbox whose working directory holds `notes.txt`.
fn sandbox() -> AgentSandbox {
    let sb = AgentSandbox::new().expect("sandbox");
    std::fs::write(sb.work().join("notes.txt"), NOTES).expect("notes");
    sb
}

/// What a run produced.
struct Run {
    output: Output,
    elapsed: Duration,
}

impl Run {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// stdout's JSON lines (other lines skipped).
    fn lines(&self) -> Vec<Value> {
        self.stdout()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
    fn describe(&self, server: &ModelServer) -> String {
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| {
                format!(
                    "#{} {} {}{} stream={} -> {:?}",
                    r.index,
                    r.method,
                    r.path,
                    r.query
                        .as_deref()
                        .map(|q| format!("?{q}"))
                        .unwrap_or_default(),
                    r.body.as_ref().map_or(Value::Null, |b| b["stream"].clone()),
                    r.handling
                )
            })
            .collect();
        format!(
            "exit: {:?} (code {:?}) after {:?}\nrequests:\n  {}\nstdout:\n{}\nstderr:\n{}",
            self.output.status,
            self.output.status.code(),
            self.elapsed,
            requests.join("\n  "),
            self.stdout(),
            self.stderr()
        )
    }
}

/// Runs `cli` against `server` in the sandbox with `prompt`; `test` names the capture.
fn run(
    cli: AgentCli,
    test: &str,
    server: &ModelServer,
    sb: &AgentSandbox,
    prompt: &str,
) -> Option<Run> {
    let bin = cli.require()?;
    let invocation = sb
        .invocation(cli, &bin, server, prompt, &CliOptions::default())
        .expect("prepare the CLI's configuration");
    let started = Instant::now();
    let output = invocation
        .command(RUN_LIMIT_SECS)
        .output()
        .expect("run timeout(1)");
    let elapsed = started.elapsed();
    assert_ne!(
        output.status.code(),
        Some(124),
        "{} did not finish within {RUN_LIMIT_SECS}s",
        cli.executable()
    );
    println!(
        "{} {test}: exit code {:?} in {:?}",
        cli.executable(),
        output.status.code(),
        elapsed
    );
    capture(cli, &format!("{test}.jsonl"), &output.stdout);
    Some(Run { output, elapsed })
}

/// Saves `bytes` as `<TRANSCRIPT_CAPTURE_AGENT_CLIS>/<cli>/<file>` when capturing.
fn capture(cli: AgentCli, file: &str, bytes: &[u8]) {
    if let Some(dir) = std::env::var_os("TRANSCRIPT_CAPTURE_AGENT_CLIS") {
        let dir = PathBuf::from(dir).join(cli.executable());
        std::fs::create_dir_all(&dir).expect("capture dir");
        std::fs::write(dir.join(file), bytes).expect("capture");
    }
}

/// Asserts the shared outcome of a 2-turn tool run: clean exit, the tool result carrying the
/// real file content in the second request, and the script's usage billed.
fn assert_tool_round_trip(run: &Run, server: &ModelServer, provider: Provider, script: &Script) {
    let why = run.describe(server);
    assert!(run.output.status.success(), "{why}");
    assert!(server.unexpected_requests().is_empty(), "{why}");
    let generations = server.generation_requests();
    assert_eq!(generations.len(), 2, "{why}");
    assert!(generations[0].tool_results().is_empty(), "{why}");
    let results = generations[1].tool_results();
    assert!(
        results.iter().any(|r| r.contains("7-alpha-tango")),
        "the second request carries the file content as the tool result: {results:?}\n{why}"
    );
    assert_eq!(server.billed(provider), script.total_usage(), "{why}");
}

/// Asserts a failed run: non-zero exit, nothing billed, `needle` in stdout (the provider's
/// message as the CLI reports it), at most `max_requests` generation requests (no retry storm).
fn assert_failed(run: &Run, server: &ModelServer, needle: &str, max_requests: usize) {
    let why = run.describe(server);
    println!("{why}");
    assert!(!run.output.status.success(), "{why}");
    assert!(
        run.stdout().contains(needle),
        "stdout names the failure ({needle}): {why}"
    );
    assert_eq!(server.billed_total(), Usage::default(), "{why}");
    let n = server.generation_requests().len();
    assert!((1..=max_requests).contains(&n), "{n} requests: {why}");
}

fn two_turns(first: Turn) -> Script {
    Script::new([
        first.with_usage(Usage::new(1200, 45).with_cache(300, 100).with_reasoning(10)),
        Turn::text(FINAL_TEXT).with_usage(Usage::new(1500, 17).with_cache(1400, 0)),
    ])
}

// ---- Claude Code -------------------------------------------------------------------------

#[test]
fn claude_code_reads_a_file_with_its_read_tool_and_answers() {
    let sb = sandbox();
    let script = two_turns(
        Turn::default()
            .then_thinking("The user wants the notes; read the file.", "sig-claude-1")
            .then_tool_call("Read", json!({"file_path": sb.work().join("notes.txt")})),
    );
    let server = ModelServer::start(script.clone()).expect("server");
    let Some(run) = run(AgentCli::Claude, "tool_round_trip", &server, &sb, PROMPT) else {
        return;
    };
    assert_tool_round_trip(&run, &server, Provider::Anthropic, &script);
    let why = run.describe(&server);
    let second = &server.generation_requests()[1];
    assert!(
        second.raw_body.contains("sig-claude-1"),
        "the thinking block goes back with its signature\n{why}"
    );
    let lines = run.lines();
    let result = lines
        .iter()
        .find(|l| l["type"] == "result")
        .unwrap_or_else(|| panic!("a result line\n{why}"));
    assert_eq!(result["result"], FINAL_TEXT, "{why}");
    assert_eq!(result["is_error"], false, "{why}");
    // The result line's usage is the authoritative total: equal to what the server billed.
    let billed = server.billed(Provider::Anthropic);
    let usage = &result["usage"];
    assert_eq!(usage["input_tokens"], billed.input_tokens, "{why}");
    assert_eq!(usage["output_tokens"], billed.output_tokens, "{why}");
    assert_eq!(
        usage["cache_read_input_tokens"], billed.cache_read_input_tokens,
        "{why}"
    );
    assert_eq!(
        usage["cache_creation_input_tokens"], billed.cache_creation_input_tokens,
        "{why}"
    );
    // Each assistant line carries the message_start snapshot (output_tokens 1), not the bill.
    let snapshots: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "assistant")
        .map(|l| &l["message"]["usage"]["output_tokens"])
        .collect();
    assert!(
        !snapshots.is_empty() && snapshots.iter().all(|o| **o == 1),
        "{why}"
    );
    // The session log the same run wrote (for `transcript import`) stays in the sandbox.
    let logs = sb.claude_session_logs();
    assert_eq!(
        logs.len(),
        1,
        "one session log under CLAUDE_CONFIG_DIR: {logs:?}"
    );
    let log = std::fs::read(&logs[0]).expect("session log");
    assert!(
        String::from_utf8_lossy(&log).contains("msg_testkit_0002"),
        "{why}"
    );
    capture(AgentCli::Claude, "tool_round_trip.session.jsonl", &log);
}

#[test]
fn claude_code_fails_when_the_api_is_overloaded() {
    let sb = sandbox();
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("server");
    let Some(run) = run(AgentCli::Claude, "overloaded", &server, &sb, "Say hi.") else {
        return;
    };
    assert_failed(&run, &server, "Overloaded", 1);
    let result = run.lines().into_iter().find(|l| l["type"] == "result");
    // A failed run still says subtype "success"; is_error tells.
    assert!(
        result.is_some_and(|r| r["is_error"] == true),
        "{}",
        run.describe(&server)
    );
}

#[test]
fn claude_code_fails_when_the_stream_is_cut() {
    let sb = sandbox();
    let server = ModelServer::start(Script::always(Fault::CutAfterEvents(2))).expect("server");
    let Some(run) = run(AgentCli::Claude, "stream_cut", &server, &sb, "Say hi.") else {
        return;
    };
    // After a cut it tries once more without streaming, even with retries off; the message
    // names the transport error ("Connection to the API was lost (ECONNRESET)" here).
    assert_failed(&run, &server, "API Error", 2);
}

// ---- Codex -------------------------------------------------------------------------------

#[test]
fn codex_runs_cat_with_exec_command_and_answers() {
    let sb = sandbox();
    let script = two_turns(
        Turn::default()
            .then_thinking("Read the notes with cat.", "enc-codex-1")
            .then_tool_call("exec_command", json!({"cmd": "cat notes.txt"})),
    );
    let server = ModelServer::start(script.clone()).expect("server");
    let Some(run) = run(AgentCli::Codex, "tool_round_trip", &server, &sb, PROMPT) else {
        return;
    };
    assert_tool_round_trip(&run, &server, Provider::OpenAiResponses, &script);
    let why = run.describe(&server);
    let tools = server.generation_requests()[0].tool_names();
    assert!(
        tools.iter().any(|t| t == "exec_command"),
        "Codex offers exec_command: {tools:?}"
    );
    let lines = run.lines();
    let completed_item = |kind: &str| {
        lines
            .iter()
            .find(|l| l["type"] == "item.completed" && l["item"]["type"] == kind)
            .unwrap_or_else(|| panic!("an item.completed of type {kind}\n{why}"))
    };
    assert_eq!(completed_item("agent_message")["item"]["text"], FINAL_TEXT);
    assert_eq!(
        completed_item("command_execution")["item"]["aggregated_output"],
        NOTES
    );
    // The unknown model's metadata warning arrives as an "error" item, and the run succeeds.
    let warning = completed_item("error")["item"]["message"].as_str();
    assert!(
        warning.is_some_and(|m| m.contains("Model metadata")),
        "{why}"
    );
    let completed = lines
        .iter()
        .find(|l| l["type"] == "turn.completed")
        .unwrap_or_else(|| panic!("a turn.completed line\n{why}"));
    let billed = server.billed(Provider::OpenAiResponses);
    let usage = &completed["usage"];
    assert_eq!(usage["input_tokens"], billed.total_input(), "{why}");
    assert_eq!(
        usage["cached_input_tokens"], billed.cache_read_input_tokens,
        "{why}"
    );
    assert_eq!(usage["output_tokens"], billed.output_tokens, "{why}");
    assert_eq!(
        usage["reasoning_output_tokens"], billed.reasoning_tokens,
        "{why}"
    );
}

#[test]
fn codex_fails_when_the_api_is_overloaded() {
    let sb = sandbox();
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("server");
    let Some(run) = run(AgentCli::Codex, "overloaded", &server, &sb, "Say hi.") else {
        return;
    };
    // A 503 whose code is server_is_overloaded becomes Codex's own "at capacity" message.
    assert_failed(&run, &server, "Selected model is at capacity", 1);
    assert!(run.lines().iter().any(|l| l["type"] == "turn.failed"));
}

#[test]
fn codex_fails_when_the_stream_is_cut() {
    let sb = sandbox();
    let server = ModelServer::start(Script::always(Fault::CutAfterEvents(2))).expect("server");
    let Some(run) = run(AgentCli::Codex, "stream_cut", &server, &sb, "Say hi.") else {
        return;
    };
    assert_failed(&run, &server, "stream disconnected before completion", 1);
    assert!(run.lines().iter().any(|l| l["type"] == "turn.failed"));
}

// ---- Gemini CLI --------------------------------------------------------------------------

#[test]
fn gemini_cli_reads_a_file_with_read_file_and_answers() {
    let sb = sandbox();
    let script = two_turns(
        Turn::default()
            .then_thinking("I should read the notes file.", "ts-gemini-1")
            .then_tool_call("read_file", json!({"file_path": "notes.txt"})),
    );
    let server = ModelServer::start(script.clone()).expect("server");
    let Some(run) = run(AgentCli::Gemini, "tool_round_trip", &server, &sb, PROMPT) else {
        return;
    };
    assert_tool_round_trip(&run, &server, Provider::Gemini, &script);
    let why = run.describe(&server);
    let lines = run.lines();
    let text: String = lines
        .iter()
        .filter(|l| l["type"] == "message" && l["role"] == "assistant")
        .filter_map(|l| l["content"].as_str())
        .collect();
    assert_eq!(
        text, FINAL_TEXT,
        "assistant deltas concatenate to the answer\n{why}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "tool_use" && l["tool_name"] == "read_file"),
        "{why}"
    );
    let result = lines
        .iter()
        .find(|l| l["type"] == "result")
        .unwrap_or_else(|| panic!("a result line\n{why}"));
    assert_eq!(result["status"], "success", "{why}");
    let billed = server.billed(Provider::Gemini);
    let stats = &result["stats"];
    // Gemini CLI's stats: input_tokens = prompt (cache included), input = uncached, cached =
    // cache read, output_tokens = candidates only (thoughts left out), total = everything.
    assert_eq!(stats["input_tokens"], billed.total_input(), "{why}");
    assert_eq!(
        stats["input"],
        billed.total_input() - billed.cache_read_input_tokens,
        "{why}"
    );
    assert_eq!(stats["cached"], billed.cache_read_input_tokens, "{why}");
    assert_eq!(
        stats["output_tokens"],
        billed.output_tokens - billed.reasoning_tokens,
        "{why}"
    );
    assert_eq!(
        stats["total_tokens"],
        billed.total_input() + billed.output_tokens,
        "{why}"
    );
}

#[test]
fn gemini_cli_fails_when_the_api_is_overloaded() {
    let sb = sandbox();
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("server");
    let Some(run) = run(AgentCli::Gemini, "overloaded", &server, &sb, "Say hi.") else {
        return;
    };
    assert_failed(&run, &server, "Overloaded", 1);
    let result = run.lines().into_iter().find(|l| l["type"] == "result");
    assert!(result.is_some_and(|r| r["status"] == "error"));
}

#[test]
fn gemini_cli_fails_when_the_stream_is_cut() {
    let sb = sandbox();
    let server = ModelServer::start(Script::always(Fault::CutAfterEvents(1))).expect("server");
    let Some(run) = run(AgentCli::Gemini, "stream_cut", &server, &sb, "Say hi.") else {
        return;
    };
    assert_failed(&run, &server, "terminated", 1);
}
