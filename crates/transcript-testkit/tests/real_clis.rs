//! The real agent CLIs (Claude Code, Codex, Gemini CLI, from the npm registry) against the
//! scripted model server: each runs a tool that reads a file we put in its working directory,
//! then answers; and each fails cleanly when the provider is down.
//!
//! A CLI is found through `TRANSCRIPT_<CLI>_BIN`, then `PATH`, then the cache folder
//! `.ci/install-agent-clis` installs into. When it is absent the test says it is skipped and
//! passes, unless `TRANSCRIPT_REQUIRE_AGENTS=1`. Every run goes through coreutils `timeout`, so
//! a CLI that hangs fails the test instead of blocking it.
//!
//! `TRANSCRIPT_CAPTURE_AGENT_CLIS=<dir>` writes each run's stdout to `<dir>/<cli>/<test>.jsonl`
//! (how `fixtures/agent-clis/` was produced).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use transcript_testkit::model_server::{Fault, ModelServer, Provider, Script, Turn, Usage};

/// Longest a single CLI run may take before `timeout` kills it (a hang, not a slow run: runs
/// take about a second or two).
const RUN_LIMIT_SECS: u64 = 60;
const NOTES: &str = "the launch code is 7-alpha-tango\nsecond line of notes\n";
const FINAL_TEXT: &str = "The notes say the launch code is 7-alpha-tango.";

/// One agent CLI.
struct Cli {
    /// The executable's name on PATH.
    name: &'static str,
    /// The variable naming its binary.
    bin_var: &'static str,
}

const CLAUDE: Cli = Cli {
    name: "claude",
    bin_var: "TRANSCRIPT_CLAUDE_BIN",
};
const CODEX: Cli = Cli {
    name: "codex",
    bin_var: "TRANSCRIPT_CODEX_BIN",
};
const GEMINI: Cli = Cli {
    name: "gemini",
    bin_var: "TRANSCRIPT_GEMINI_BIN",
};

impl Cli {
    fn locate(&self) -> Option<PathBuf> {
        if let Some(bin) = std::env::var_os(self.bin_var) {
            return Some(PathBuf::from(bin));
        }
        let path = std::env::var_os("PATH").unwrap_or_default();
        let cache = std::env::var_os("TRANSCRIPT_AGENT_CLIS_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| PathBuf::from(h).join(".cache/transcript-agent-clis"))
            })
            .map(|d| d.join("node_modules/.bin"));
        std::env::split_paths(&path)
            .chain(cache)
            .map(|dir| dir.join(self.name))
            .find(|p| p.is_file())
    }

    /// The binary, or `None` after saying the test is skipped (a failure when agents are
    /// required).
    fn require(&self) -> Option<PathBuf> {
        let found = self.locate();
        if found.is_none() {
            let required = std::env::var("TRANSCRIPT_REQUIRE_AGENTS").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{} not installed and TRANSCRIPT_REQUIRE_AGENTS=1 (run .ci/install-agent-clis, \
                 or set {})",
                self.name, self.bin_var
            );
            println!(
                "skipped: {} not installed (run .ci/install-agent-clis)",
                self.name
            );
        }
        found
    }
}

/// A temporary home, config dir and working directory holding `notes.txt`.
struct Sandbox {
    root: TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("tempdir");
        for dir in ["home", "work", "config", "tmp"] {
            std::fs::create_dir(root.path().join(dir)).expect("mkdir");
        }
        std::fs::write(root.path().join("work/notes.txt"), NOTES).expect("notes");
        Sandbox { root }
    }
    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }
    fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }
    fn config(&self) -> PathBuf {
        self.root.path().join("config")
    }
    fn tmp(&self) -> PathBuf {
        self.root.path().join("tmp")
    }
    fn notes(&self) -> PathBuf {
        self.work().join("notes.txt")
    }
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

/// Runs `bin args` in the sandbox's working directory with only `env` (plus PATH), stdin
/// closed, under `timeout`.
fn run(
    cli: &Cli,
    test: &str,
    bin: &Path,
    args: &[&str],
    env: &[(&str, String)],
    sb: &Sandbox,
) -> Run {
    let mut cmd = Command::new("timeout");
    cmd.arg("-k")
        .arg("5")
        .arg(RUN_LIMIT_SECS.to_string())
        .arg(bin)
        .args(args)
        .current_dir(sb.work())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", sb.home())
        // Gemini CLI writes error reports, Claude Code its sockets, under the temp dir.
        .env("TMPDIR", sb.tmp())
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let output = cmd.output().expect("run timeout(1)");
    let elapsed = started.elapsed();
    assert_ne!(
        output.status.code(),
        Some(124),
        "{} did not finish within {RUN_LIMIT_SECS}s",
        cli.name
    );
    println!(
        "{} {test}: exit code {:?} in {:?}",
        cli.name,
        output.status.code(),
        elapsed
    );
    capture(cli, &format!("{test}.jsonl"), &output.stdout);
    Run { output, elapsed }
}

/// Saves `bytes` as `<TRANSCRIPT_CAPTURE_AGENT_CLIS>/<cli>/<file>` when capturing.
fn capture(cli: &Cli, file: &str, bytes: &[u8]) {
    if let Some(dir) = std::env::var_os("TRANSCRIPT_CAPTURE_AGENT_CLIS") {
        let dir = PathBuf::from(dir).join(cli.name);
        std::fs::create_dir_all(&dir).expect("capture dir");
        std::fs::write(dir.join(file), bytes).expect("capture");
    }
}

/// The session logs Claude Code wrote under `CLAUDE_CONFIG_DIR/projects/<cwd-slug>/`.
fn claude_session_logs(sb: &Sandbox) -> Vec<PathBuf> {
    let projects = sb.config().join("projects");
    let mut logs = Vec::new();
    for project in std::fs::read_dir(projects).into_iter().flatten().flatten() {
        for entry in std::fs::read_dir(project.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry.path().extension().is_some_and(|e| e == "jsonl") {
                logs.push(entry.path());
            }
        }
    }
    logs
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

fn claude_env(server: &ModelServer, sb: &Sandbox) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", server.url()),
        ("ANTHROPIC_API_KEY", "sk-ant-testkit".to_owned()),
        ("CLAUDE_CONFIG_DIR", sb.config().display().to_string()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
    ]
}

const CLAUDE_ARGS: [&str; 6] = [
    "--output-format",
    "stream-json",
    "--verbose",
    "--allowedTools",
    "Read,Bash",
    "-p",
];

#[test]
fn claude_code_reads_a_file_with_its_read_tool_and_answers() {
    let Some(bin) = CLAUDE.require() else { return };
    let sb = Sandbox::new();
    let script = two_turns(
        Turn::default()
            .then_thinking("The user wants the notes; read the file.", "sig-claude-1")
            .then_tool_call("Read", json!({"file_path": sb.notes()})),
    );
    let server = ModelServer::start(script.clone()).expect("server");
    let mut args = CLAUDE_ARGS.to_vec();
    args.push("Read notes.txt and tell me the launch code.");
    let run = run(
        &CLAUDE,
        "tool_round_trip",
        &bin,
        &args,
        &claude_env(&server, &sb),
        &sb,
    );
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
    assert_eq!(
        result["usage"]["input_tokens"], billed.input_tokens,
        "{why}"
    );
    assert_eq!(
        result["usage"]["output_tokens"], billed.output_tokens,
        "{why}"
    );
    assert_eq!(
        result["usage"]["cache_read_input_tokens"], billed.cache_read_input_tokens,
        "{why}"
    );
    assert_eq!(
        result["usage"]["cache_creation_input_tokens"], billed.cache_creation_input_tokens,
        "{why}"
    );
    // Each assistant line carries the message_start snapshot (output_tokens 1), not the bill.
    let snapshot: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "assistant")
        .map(|l| &l["message"]["usage"]["output_tokens"])
        .collect();
    assert!(
        !snapshot.is_empty() && snapshot.iter().all(|o| **o == 1),
        "{why}"
    );
    // The session log the same run wrote (for `transcript import`) stays in the sandbox.
    let logs = claude_session_logs(&sb);
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
    capture(&CLAUDE, "tool_round_trip.session.jsonl", &log);
}

#[test]
fn claude_code_fails_when_the_api_is_overloaded() {
    let Some(bin) = CLAUDE.require() else { return };
    let sb = Sandbox::new();
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("server");
    let mut env = claude_env(&server, &sb);
    env.push(("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()));
    let mut args = CLAUDE_ARGS.to_vec();
    args.push("Say hi.");
    let run = run(&CLAUDE, "overloaded", &bin, &args, &env, &sb);
    assert_failed(&run, &server, "Overloaded", 1);
    let lines = run.lines();
    let result = lines.iter().find(|l| l["type"] == "result");
    assert!(
        result.is_some_and(|r| r["is_error"] == true),
        "{}",
        run.describe(&server)
    );
}

#[test]
fn claude_code_fails_when_the_stream_is_cut() {
    let Some(bin) = CLAUDE.require() else { return };
    let sb = Sandbox::new();
    let server = ModelServer::start(Script::always(Fault::CutAfterEvents(2))).expect("server");
    let mut env = claude_env(&server, &sb);
    env.push(("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()));
    let mut args = CLAUDE_ARGS.to_vec();
    args.push("Say hi.");
    let run = run(&CLAUDE, "stream_cut", &bin, &args, &env, &sb);
    // It tries once more after a cut even with no retries.
    assert_failed(&run, &server, "Connection to the API was lost", 2);
}

// ---- Codex -------------------------------------------------------------------------------

/// Writes `CODEX_HOME/config.toml` pointing Codex at the server. The model name is unknown to
/// Codex on purpose: it then prints its "Model metadata ... not found" warning item, which a
/// normalizer must not take for a failure.
fn codex_env(
    server: &ModelServer,
    sb: &Sandbox,
    retries: Option<u32>,
) -> Vec<(&'static str, String)> {
    let retries = retries
        .map(|n| format!("request_max_retries = {n}\nstream_max_retries = {n}\n"))
        .unwrap_or_default();
    let config = format!(
        "model = \"testkit-model\"\nmodel_provider = \"testkit\"\n\n\
         [model_providers.testkit]\nname = \"testkit\"\nbase_url = \"{}\"\n\
         env_key = \"TESTKIT_API_KEY\"\nwire_api = \"responses\"\n{retries}",
        server.openai_base_url()
    );
    std::fs::write(sb.config().join("config.toml"), config).expect("config.toml");
    vec![
        ("CODEX_HOME", sb.config().display().to_string()),
        ("TESTKIT_API_KEY", "sk-testkit".to_owned()),
    ]
}

const CODEX_ARGS: [&str; 4] = [
    "exec",
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
];

#[test]
fn codex_runs_cat_with_exec_command_and_answers() {
    let Some(bin) = CODEX.require() else { return };
    let sb = Sandbox::new();
    let script = two_turns(
        Turn::default()
            .then_thinking("Read the notes with cat.", "enc-codex-1")
            .then_tool_call("exec_command", json!({"cmd": "cat notes.txt"})),
    );
    let server = ModelServer::start(script.clone()).expect("server");
    let mut args = CODEX_ARGS.to_vec();
    args.push("Read notes.txt and tell me the launch code.");
    let run = run(
        &CODEX,
        "tool_round_trip",
        &bin,
        &args,
        &codex_env(&server, &sb, None),
        &sb,
    );
    assert_tool_round_trip(&run, &server, Provider::OpenAiResponses, &script);
    let why = run.describe(&server);
    let first = &server.generation_requests()[0];
    assert!(
        first.tool_names().iter().any(|t| t == "exec_command"),
        "Codex offers exec_command: {:?}",
        first.tool_names()
    );
    let lines = run.lines();
    let message = lines
        .iter()
        .find(|l| l["type"] == "item.completed" && l["item"]["type"] == "agent_message")
        .unwrap_or_else(|| panic!("an agent_message item\n{why}"));
    assert_eq!(message["item"]["text"], FINAL_TEXT, "{why}");
    let command = lines
        .iter()
        .find(|l| l["type"] == "item.completed" && l["item"]["type"] == "command_execution")
        .unwrap_or_else(|| panic!("a command_execution item\n{why}"));
    assert_eq!(command["item"]["aggregated_output"], NOTES, "{why}");
    // The unknown model's metadata warning arrives as an "error" item, and the run succeeds.
    assert!(
        lines.iter().any(|l| l["item"]["type"] == "error"
            && l["item"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Model metadata"))),
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
    let Some(bin) = CODEX.require() else { return };
    let sb = Sandbox::new();
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("server");
    let mut args = CODEX_ARGS.to_vec();
    args.push("Say hi.");
    let run = run(
        &CODEX,
        "overloaded",
        &bin,
        &args,
        &codex_env(&server, &sb, Some(0)),
        &sb,
    );
    // A 503 whose code is server_is_overloaded becomes Codex's own "at capacity" message.
    assert_failed(&run, &server, "Selected model is at capacity", 1);
    assert!(run.lines().iter().any(|l| l["type"] == "turn.failed"));
}

#[test]
fn codex_fails_when_the_stream_is_cut() {
    let Some(bin) = CODEX.require() else { return };
    let sb = Sandbox::new();
    let server = ModelServer::start(Script::always(Fault::CutAfterEvents(2))).expect("server");
    let mut args = CODEX_ARGS.to_vec();
    args.push("Say hi.");
    let run = run(
        &CODEX,
        "stream_cut",
        &bin,
        &args,
        &codex_env(&server, &sb, Some(0)),
        &sb,
    );
    assert_failed(&run, &server, "stream disconnected before completion", 1);
    assert!(run.lines().iter().any(|l| l["type"] == "turn.failed"));
}

// ---- Gemini CLI --------------------------------------------------------------------------

/// Gemini CLI needs its auth type chosen in settings: with `GOOGLE_GEMINI_BASE_URL` set and no
/// setting it picks the "gateway" type and refuses to start ("Invalid auth method selected.").
fn gemini_env(server: &ModelServer, sb: &Sandbox) -> Vec<(&'static str, String)> {
    let dir = sb.home().join(".gemini");
    std::fs::create_dir_all(&dir).expect("mkdir .gemini");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        // One attempt: by default it retries 10 times with a 5 s..30 s backoff (minutes).
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false,
            "maxAttempts": 1},
    });
    std::fs::write(dir.join("settings.json"), settings.to_string()).expect("settings.json");
    vec![
        ("GOOGLE_GEMINI_BASE_URL", server.url()),
        ("GEMINI_API_KEY", "testkit-key".to_owned()),
        // Skips the relaunch of node with a larger heap: a run takes ~1 s instead of ~3 s.
        ("GEMINI_CLI_NO_RELAUNCH", "true".to_owned()),
    ]
}

/// A fixed model: the default "auto" first asks a classifier model (non-streaming
/// `generateContent` on a flash-lite model) which model to route to.
const GEMINI_ARGS: [&str; 7] = [
    "--model",
    "gemini-2.5-pro",
    "--output-format",
    "stream-json",
    "--yolo",
    "--skip-trust",
    "--prompt",
];

#[test]
fn gemini_cli_reads_a_file_with_read_file_and_answers() {
    let Some(bin) = GEMINI.require() else { return };
    let sb = Sandbox::new();
    let script = two_turns(
        Turn::default()
            .then_thinking("I should read the notes file.", "ts-gemini-1")
            .then_tool_call("read_file", json!({"file_path": "notes.txt"})),
    );
    let server = ModelServer::start(script.clone()).expect("server");
    let mut args = GEMINI_ARGS.to_vec();
    args.push("Read notes.txt and tell me the launch code.");
    let run = run(
        &GEMINI,
        "tool_round_trip",
        &bin,
        &args,
        &gemini_env(&server, &sb),
        &sb,
    );
    assert_tool_round_trip(&run, &server, Provider::Gemini, &script);
    let why = run.describe(&server);
    let lines = run.lines();
    let text: String = lines
        .iter()
        .filter(|l| l["type"] == "message" && l["role"] == "assistant")
        .filter_map(|l| l["content"].as_str())
        .collect();
    assert!(text.contains(FINAL_TEXT), "{why}");
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
    let Some(bin) = GEMINI.require() else { return };
    let sb = Sandbox::new();
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("server");
    let mut args = GEMINI_ARGS.to_vec();
    args.push("Say hi.");
    let run = run(
        &GEMINI,
        "overloaded",
        &bin,
        &args,
        &gemini_env(&server, &sb),
        &sb,
    );
    assert_failed(&run, &server, "Overloaded", 1);
    let result = run.lines().into_iter().find(|l| l["type"] == "result");
    assert!(result.is_some_and(|r| r["status"] == "error"));
}

#[test]
fn gemini_cli_fails_when_the_stream_is_cut() {
    let Some(bin) = GEMINI.require() else { return };
    let sb = Sandbox::new();
    let server = ModelServer::start(Script::always(Fault::CutAfterEvents(1))).expect("server");
    let mut args = GEMINI_ARGS.to_vec();
    args.push("Say hi.");
    let run = run(
        &GEMINI,
        "stream_cut",
        &bin,
        &args,
        &gemini_env(&server, &sb),
        &sb,
    );
    assert_failed(&run, &server, "terminated", 1);
}
