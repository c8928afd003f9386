//! `transcript replay` with the real agent CLIs (Claude Code, Codex, Gemini CLI): a run is
//! recorded against the scripted model server (the CLI reads a file and answers), the server
//! is stopped, and the run is replayed with its transcript as the model. The replay is equal
//! (exit 0, the same tool calls and results per step, read from both raw files), reaches no
//! other address (the step's recorded endpoint is a fresh server that must see no request);
//! a changed file fails the strict replay naming the step and the differing result (exit 1);
//! a changed prompt in a copy of the workflow fails it naming the prompt (exit 1).
//!
//! A missing CLI skips its test (fails it under `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::describe;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use tempfile::TempDir;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

const NOTES: &str = "the launch code is 7-alpha-tango\nsecond line of notes\n";
const PROMPT: &str = "Read notes.txt and tell me the launch code.";
const FINAL_TEXT: &str = "The notes say the launch code is 7-alpha-tango.";

fn read_call(cli: AgentCli, work: &Path) -> Turn {
    match cli {
        AgentCli::Claude => Turn::tool_call("Read", json!({"file_path": work.join("notes.txt")})),
        AgentCli::Codex => Turn::tool_call("exec_command", json!({"cmd": "cat notes.txt"})),
        AgentCli::Gemini => Turn::tool_call("read_file", json!({"file_path": "notes.txt"})),
    }
}

fn workflow(cli: AgentCli, prompt: &str) -> String {
    let model = match cli {
        AgentCli::Claude => String::new(),
        AgentCli::Codex => "    model: gpt-5.5\n".to_owned(),
        AgentCli::Gemini => "    model: gemini-2.5-pro\n".to_owned(),
    };
    format!(
        "name: replay-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
         type: agent\n    provider: {name}\n    timeout_ms: 60000\n    prompt: {prompt}\n\
         {model}    tools: [read_file, run_command]\n    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n",
        name = cli.executable(),
        prompt = json!(prompt),
        var = common::step_env_var(cli),
    )
}

/// A run recorded against the scripted server, which is stopped once the run is recorded.
struct Recording {
    cli: AgentCli,
    sb: AgentSandbox,
    storage: TempDir,
    run_id: String,
    env: Vec<(String, String)>,
    bin: PathBuf,
}

impl Recording {
    fn make(cli: AgentCli) -> Option<Recording> {
        let bin = cli.require()?;
        let sb = AgentSandbox::new().unwrap();
        std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
        let server = ModelServer::start(Script::new([
            read_call(cli, &sb.work()).with_usage(Usage::new(1200, 45)),
            Turn::text(FINAL_TEXT).with_usage(Usage::new(1500, 17)),
        ]))
        .unwrap();
        let common::Recorded {
            storage,
            run_id,
            output,
            env,
            ..
        } = common::record_real(cli, &bin, &sb, &server, &workflow(cli, PROMPT));
        assert!(
            output.status.success(),
            "recording with {cli:?} failed:\n{}",
            common::text(&output.stderr)
        );
        assert_eq!(server.generation_requests().len(), 2);
        drop(server);
        Some(Recording {
            cli,
            sb,
            storage,
            run_id,
            env,
            bin,
        })
    }

    /// `transcript replay <run> --storage S --workspace W` plus `args`.
    fn replay(&self, args: &[&std::ffi::OsStr]) -> Output {
        common::real_replay(
            (self.cli, &self.bin),
            &self.env,
            &self.run_id,
            (self.storage.path(), &self.sb.work()),
        )
        .args(args)
        .output()
        .unwrap()
    }

    /// [`Recording::replay`] of `workflow` with the step's endpoint input naming `endpoint`.
    fn replay_with(&self, workflow: &Path, endpoint: &str) -> Output {
        let input = format!("endpoint={endpoint}");
        self.replay(&[
            "--workflow".as_ref(),
            workflow.as_os_str(),
            "--input".as_ref(),
            input.as_ref(),
        ])
    }

    fn events(&self, run_id: &str) -> Vec<Value> {
        let path = self.storage.path().join(format!("{run_id}.jsonl"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Per step, the tool calls (name, input) and results (content) of its assistant turns, in
/// order, read from the raw lines (as `jq '[.[] | select(.type == "message.assistant")
/// | .payload.blocks[] | select(.type == "tool_use" or .type == "tool_result")]'` would).
fn tool_traffic(events: &[Value]) -> Vec<(String, String, Value)> {
    events
        .iter()
        .filter(|e| e["type"] == "message.assistant")
        .flat_map(|e| {
            let path = e["path"].as_str().unwrap_or_default().to_owned();
            e["payload"]["blocks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(move |b| match b["type"].as_str() {
                    Some("tool_use") => Some((
                        path.clone(),
                        format!("use {}", b["tool_name"]),
                        b["tool_input"].clone(),
                    )),
                    Some("tool_result") => {
                        Some((path.clone(), "result".to_owned(), b["tool_content"].clone()))
                    }
                    _ => None,
                })
        })
        .collect()
}

fn printed_run_id(out: &Output) -> String {
    common::text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("run_id: "))
        .unwrap_or_else(|| panic!("no run id:\n{}", describe(out)))
        .to_owned()
}

fn replays_like_the_recording(cli: AgentCli) {
    let Some(rec) = Recording::make(cli) else {
        return;
    };
    let bill = || {
        let out = common::bin()
            .args(["receipts", "--by", "day", "--json", "--storage"])
            .arg(rec.storage.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        common::text(&out.stdout)
    };
    let day = bill();
    assert!(day.contains("\"input_tokens\": 2700"), "{day}");
    // The workflow file and inputs from the recorded run.started (wire decision 16): the
    // recorded endpoint is a stopped server, so an agent reaching it would fail the replay.
    let out = rec.replay(&[]);
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{why}");
    assert!(common::text(&out.stdout).contains("\nequal ("), "{why}");
    let replayed = printed_run_id(&out);
    assert_ne!(replayed, rec.run_id);
    let events = rec.events(&replayed);
    assert_eq!(events[0]["type"], "run.started");
    assert_eq!(
        events[0]["payload"]["replay_of"],
        rec.run_id.as_str(),
        "{why}"
    );
    let (before, after) = (
        tool_traffic(&rec.events(&rec.run_id)),
        tool_traffic(&events),
    );
    assert!(before.len() >= 2, "{before:?}");
    assert_eq!(before, after, "{why}");
    // Replays are not spend: the day's bill is what the recording billed, and the replay's
    // own receipts say so.
    assert_eq!(bill(), day);
    let receipts = common::bin()
        .args(["receipts", &replayed, "--storage"])
        .arg(rec.storage.path())
        .output()
        .unwrap();
    assert!(
        common::text(&receipts.stdout)
            .contains(&format!("replayed: this run replays {}", rec.run_id)),
        "{}",
        describe(&receipts)
    );

    // The step's recorded endpoint is a live server now: nothing may reach it.
    let guard = ModelServer::start(Script::default()).unwrap();
    let endpoint = match cli {
        AgentCli::Codex => rec.sb.config().display().to_string(),
        _ => guard.url(),
    };
    if cli == AgentCli::Codex {
        // The recorded CODEX_HOME now points Codex at the guard.
        let config = std::fs::read_to_string(rec.sb.config().join("config.toml")).unwrap();
        let config = common::codex_config_with_base_url(&config, &guard.openai_base_url());
        std::fs::write(rec.sb.config().join("config.toml"), config).unwrap();
    }
    // An agent's endpoint is the author's, never data (#48): the workflow names it literally.
    let guarded = rec.sb.tmp().join("workflow-guarded.yaml");
    let at_guard = |prompt: &str| workflow(cli, prompt).replace("{{inputs.endpoint}}", &endpoint);
    std::fs::write(&guarded, at_guard(PROMPT)).unwrap();
    let out = rec.replay_with(&guarded, &endpoint);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(guard.requests().is_empty(), "{:?}", guard.requests());

    // The file changed: the agent sends another result than the recorded one.
    std::fs::write(
        rec.sb.work().join("notes.txt"),
        "the launch code is 9-zulu\n",
    )
    .unwrap();
    let out = rec.replay_with(&guarded, &endpoint);
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let stdout = common::text(&out.stdout);
    assert!(
        stdout.contains("ask [agent] ask #0\n  status: \"succeeded\" → \"failed\""),
        "{why}"
    );
    assert!(stdout.contains("turn 2: the result of tool call"), "{why}");
    assert!(
        stdout.contains("7-alpha-tango") && stdout.contains("9-zulu"),
        "{why}"
    );
    // Under fifo the recorded turns are served anyway: the step succeeds with the mismatch
    // as a warning in its result, and the comparison still shows the differing result.
    let input = format!("endpoint={endpoint}");
    let out = rec.replay(&[
        "--workflow".as_ref(),
        guarded.as_os_str(),
        "--input".as_ref(),
        input.as_ref(),
        "--match".as_ref(),
        "fifo".as_ref(),
    ]);
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let fifo = rec.events(&printed_run_id(&out));
    let completed = fifo
        .iter()
        .find(|e| e["type"] == "step.completed" && e["path"] == "ask")
        .unwrap();
    assert!(completed["payload"]["error"].is_null(), "{why}");
    let warnings = completed["payload"]["result"]["warnings"].to_string();
    assert!(
        warnings.contains("turn 2: the result of tool call"),
        "{why}\n{warnings}"
    );
    assert!(
        !common::text(&out.stdout).contains("\"succeeded\" → \"failed\""),
        "{why}"
    );
    std::fs::write(rec.sb.work().join("notes.txt"), NOTES).unwrap();

    // A copy of the workflow with another prompt.
    let copy = rec.sb.tmp().join("workflow-v2.yaml");
    std::fs::write(&copy, at_guard("Read notes.txt and tell me the code.")).unwrap();
    let out = rec.replay_with(&copy, &endpoint);
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{why}");
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains("turn 1: the prompt differs"), "{why}");
    assert!(
        stdout.contains("-Read notes.txt and tell me the launch code."),
        "{why}"
    );
    assert!(guard.requests().is_empty(), "{:?}", guard.requests());
}

/// Parallel branches and loop iterations, recorded with branches one after the other
/// (`--deterministic`), replay equal with the branches running at once: each execution gets
/// its own turns, whatever order the requests come in.
#[test]
fn a_run_with_parallel_branches_and_a_loop_replays_equal() {
    let cli = AgentCli::Claude;
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
    let server = ModelServer::start(Script::new([
        read_call(cli, &sb.work()).with_usage(Usage::new(100, 5)),
        Turn::text("left: 7-alpha-tango").with_usage(Usage::new(110, 6)),
        Turn::text("right: hello").with_usage(Usage::new(120, 7)),
        Turn::text("item one").with_usage(Usage::new(130, 8)),
        Turn::text("item two").with_usage(Usage::new(140, 9)),
    ]))
    .unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    let agent = |name: &str, prompt: &str, indent: &str| {
        format!(
            "{indent}- name: {name}\n{indent}  type: agent\n{indent}  provider: claude\n\
             {indent}  timeout_ms: 60000\n{indent}  prompt: {prompt}\n\
             {indent}  tools: [read_file]\n\
             {indent}  env: {{ ANTHROPIC_BASE_URL: \"{{{{inputs.endpoint}}}}\" }}\n",
            prompt = json!(prompt)
        )
    };
    let text = format!(
        "name: replay-branches\ninputs:\n  - name: endpoint\nsteps:\n  - name: both\n    \
         type: parallel\n    branches:\n{}{}  - name: each\n    type: for_each\n    \
         items: [one, two]\n    steps:\n{}",
        agent("left", "Read notes.txt (left).", "      "),
        agent("right", "Say hello (right).", "      "),
        agent("ask", "Item {{loop.item}}.", "      "),
    );
    let wf = sb.tmp().join("branches.yaml");
    // An agent's endpoint is the author's, never data (#48): named literally.
    std::fs::write(&wf, text.replace("{{inputs.endpoint}}", &server.url())).unwrap();
    let storage = TempDir::new().unwrap();
    let env: Vec<(String, String)> = inv
        .env
        .into_iter()
        .filter(|(k, _)| k != "ANTHROPIC_BASE_URL")
        .collect();
    let command = |args: &[&std::ffi::OsStr]| {
        common::bin()
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env(cli.bin_var(), &bin)
            .arg("--storage")
            .arg(storage.path())
            .args(args)
            .output()
            .unwrap()
    };
    let input = format!("endpoint={}", server.url());
    let work = sb.work();
    let recorded = command(&[
        "run".as_ref(),
        "--deterministic".as_ref(),
        wf.as_os_str(),
        "--workspace".as_ref(),
        work.as_os_str(),
        "--input".as_ref(),
        input.as_ref(),
    ]);
    assert!(recorded.status.success(), "{}", describe(&recorded));
    assert_eq!(server.generation_requests().len(), 5);
    drop(server);
    let run_id = printed_run_id(&recorded);
    let out = command(&[
        "replay".as_ref(),
        run_id.as_ref(),
        "--workspace".as_ref(),
        work.as_os_str(),
    ]);
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{why}");
    assert!(common::text(&out.stdout).contains("\nequal ("), "{why}");
    let read = |id: &str| -> Vec<Value> {
        std::fs::read_to_string(storage.path().join(format!("{id}.jsonl")))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let texts = |events: &[Value]| {
        let mut t: Vec<(String, u64, String)> = events
            .iter()
            .filter(|e| e["type"] == "message.assistant")
            .flat_map(|e| {
                e["payload"]["blocks"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|b| b["type"] == "text")
                    .map(|b| {
                        (
                            e["path"].as_str().unwrap().to_owned(),
                            e["iteration"].as_u64().unwrap(),
                            b["text"].as_str().unwrap().to_owned(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        t.sort();
        t
    };
    let replayed = read(&printed_run_id(&out));
    assert_eq!(texts(&read(&run_id)), texts(&replayed), "{why}");
    assert_eq!(
        texts(&replayed),
        [
            ("both.left".to_owned(), 0, "left: 7-alpha-tango".to_owned()),
            ("both.right".to_owned(), 0, "right: hello".to_owned()),
            ("each.ask".to_owned(), 0, "item one".to_owned()),
            ("each.ask".to_owned(), 1, "item two".to_owned()),
        ]
    );
    assert_eq!(tool_traffic(&read(&run_id)), tool_traffic(&replayed));
}

#[test]
fn claude_code_replays_like_its_recording() {
    replays_like_the_recording(AgentCli::Claude);
}

#[test]
fn codex_replays_like_its_recording() {
    replays_like_the_recording(AgentCli::Codex);
}

#[test]
fn gemini_cli_replays_like_its_recording() {
    replays_like_the_recording(AgentCli::Gemini);
}
