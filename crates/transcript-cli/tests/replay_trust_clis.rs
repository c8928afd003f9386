//! A replay you can trust (#58), with the real agent CLIs: an unchanged recording replays
//! equal (exit 0) when the CLI wraps its tool results in an envelope of its own (Claude Code's
//! `<system-reminder>` blocks with `model: claude-sonnet-4-5`), when one turn calls two tools
//! (ten replays in a row, all equal), when Gemini CLI routes without a `model:` (its
//! classifier request is answered beside the conversation), and when Gemini's function calls
//! carry no id. Each run is recorded against the scripted model server (transcript-testkit),
//! which is stopped, then replayed by the `transcript` binary with its transcript as the model.
//!
//! A missing CLI skips its test (fails it under `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::describe;
use serde_json::{Value, json};
use tempfile::TempDir;
use transcript_providers::Provider;
use transcript_providers::envelope::strip_tool_result;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox};
use transcript_testkit::model_server::{
    Handling, ModelServer, RecordedRequest, Script, Turn, Usage,
};

const PROMPT: &str = "Read the notes and tell me the launch code.";
const NOTES: &str = "the launch code is 7-alpha-tango\nsecond line of notes\n";
const MORE: &str = "more notes: the backup code is 3-bravo\n";

/// A run recorded against the scripted server (stopped once recorded), with the requests the
/// server received.
struct Recording {
    cli: AgentCli,
    sb: AgentSandbox,
    storage: TempDir,
    run_id: String,
    env: Vec<(String, String)>,
    bin: PathBuf,
    requests: Vec<RecordedRequest>,
}

fn workflow(cli: AgentCli, model: Option<&str>) -> String {
    let model = model.map_or(String::new(), |m| format!("    model: {m}\n"));
    format!(
        "name: trust-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
         type: agent\n    provider: {name}\n    timeout_ms: 90000\n    prompt: {prompt}\n\
         {model}    tools: [read_file, run_command]\n    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n",
        name = cli.executable(),
        prompt = json!(PROMPT),
        var = common::step_env_var(cli),
    )
}

impl Recording {
    /// Records the workflow of `cli` (with `model:` when given) against `turns`; the step's
    /// prompt opens the conversation, so requests beside it (a router) take no turn.
    fn make(
        cli: AgentCli,
        model: Option<&str>,
        turns: impl FnOnce(&Path) -> Vec<Turn>,
    ) -> Option<Recording> {
        let bin = cli.require()?;
        let sb = AgentSandbox::new().unwrap();
        std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
        std::fs::write(sb.work().join("more.txt"), MORE).unwrap();
        let turns = turns(&sb.work());
        let n = turns.len();
        let mut script = Script::new(turns);
        script.conversation = Some(PROMPT.to_owned());
        let server = ModelServer::start(script).unwrap();
        let common::Recorded {
            storage,
            run_id,
            output,
            env,
            ..
        } = common::record_real(cli, &bin, &sb, &server, &workflow(cli, model));
        let requests = server.requests();
        assert!(
            output.status.success(),
            "recording with {cli:?} failed:\n{}\nrequests: {:#?}",
            common::text(&output.stderr),
            requests.iter().map(|r| &r.raw_body).collect::<Vec<_>>()
        );
        assert_eq!(
            server.turns_served(),
            n,
            "{:#?}",
            server.unexpected_requests()
        );
        drop(server);
        Some(Recording {
            cli,
            sb,
            storage,
            run_id,
            env,
            bin,
            requests,
        })
    }

    /// `transcript replay <run>` with the recorded workflow and inputs.
    fn replay(&self) -> Output {
        common::real_replay(
            (self.cli, &self.bin),
            &self.env,
            &self.run_id,
            (self.storage.path(), &self.sb.work()),
        )
        .output()
        .unwrap()
    }

    /// The tool results of every generation request, as the CLI sent them.
    fn sent_results(&self) -> Vec<String> {
        self.requests
            .iter()
            .filter(|r| r.is_generation())
            .flat_map(RecordedRequest::tool_results)
            .collect()
    }

    fn assert_replays_equal(&self) {
        let out = self.replay();
        let why = describe(&out);
        assert_eq!(out.status.code(), Some(0), "{why}");
        assert!(common::text(&out.stdout).contains("\nequal ("), "{why}");
    }
}

fn read(cli: AgentCli, work: &Path, file: &str) -> (String, Value) {
    match cli {
        AgentCli::Claude => ("Read".into(), json!({"file_path": work.join(file)})),
        AgentCli::Codex => ("exec_command".into(), json!({"cmd": format!("cat {file}")})),
        AgentCli::Gemini => ("read_file".into(), json!({"file_path": file})),
    }
}

fn one_read(cli: AgentCli, work: &Path) -> Vec<Turn> {
    let (name, args) = read(cli, work, "notes.txt");
    vec![
        Turn::tool_call(name, args).with_usage(Usage::new(900, 30)),
        Turn::text("The launch code is 7-alpha-tango.").with_usage(Usage::new(1100, 12)),
    ]
}

fn two_reads(cli: AgentCli, work: &Path) -> Vec<Turn> {
    let (a, a_args) = read(cli, work, "notes.txt");
    let (b, b_args) = read(cli, work, "more.txt");
    vec![
        Turn::tool_call(a, a_args)
            .then_tool_call(b, b_args)
            .with_usage(Usage::new(900, 40)),
        Turn::text("7-alpha-tango, and 3-bravo as a backup.").with_usage(Usage::new(1200, 14)),
    ]
}

/// Claude Code with `model: claude-sonnet-4-5` wraps the Read result it sends in
/// `<system-reminder>` blocks of its own; the recording's result is the file's text. The
/// replay takes the envelope off both sides and is equal.
#[test]
fn claude_sonnet_4_5_results_with_system_reminders_replay_equal() {
    let cli = AgentCli::Claude;
    let Some(rec) = Recording::make(cli, Some("claude-sonnet-4-5"), |w| one_read(cli, w)) else {
        return;
    };
    let sent = rec.sent_results();
    assert!(
        sent.iter().any(|r| r.contains("<system-reminder>")),
        "no reminder in the results Claude Code sent: {sent:#?}"
    );
    // Without its envelope, the result is the Read tool's numbered lines of the file.
    for r in &sent {
        let output = strip_tool_result(Provider::Claude, r);
        assert!(!output.contains("system-reminder"), "{output:?}");
        assert!(output.contains("7-alpha-tango"), "{output:?}");
    }
    rec.assert_replays_equal();
}

/// Two tool calls in one turn, answered in whatever order the CLI sends them: ten replays of
/// one recording, all equal.
#[test]
fn claude_two_calls_in_one_turn_replay_equal_ten_times() {
    let cli = AgentCli::Claude;
    let Some(rec) = Recording::make(cli, None, |work| two_reads(cli, work)) else {
        return;
    };
    assert_eq!(rec.sent_results().len(), 2, "{:#?}", rec.sent_results());
    for _ in 0..10 {
        rec.assert_replays_equal();
    }
}

/// Gemini CLI without `model:` routes: a classifier request comes before the conversation's
/// turns. It is answered beside the conversation (a model chosen), takes no turn, and the
/// replay is equal.
#[test]
fn gemini_without_a_model_routes_and_replays_equal() {
    let cli = AgentCli::Gemini;
    let Some(rec) = Recording::make(cli, None, |work| one_read(cli, work)) else {
        return;
    };
    // The router's request: asks for a JSON schema, offers no tools, answered beside the
    // conversation (once: a valid answer is not asked again).
    let routed = rec
        .requests
        .iter()
        .filter(|r| {
            r.body.as_ref().is_some_and(|b| {
                b["generationConfig"]["responseJsonSchema"].is_object()
                    || b["generationConfig"]["responseSchema"].is_object()
            })
        })
        .map(|r| r.handling.clone())
        .collect::<Vec<_>>();
    assert_eq!(
        routed,
        [Handling::Auxiliary],
        "Gemini CLI did not route once"
    );
    rec.assert_replays_equal();
}

/// Gemini's API answers function calls without an `id`: the recording's calls carry none, the
/// CLI's results come back without ids, paired by tool and arguments within the turn.
#[test]
fn gemini_function_calls_without_ids_replay_equal() {
    let cli = AgentCli::Gemini;
    let Some(rec) = Recording::make(cli, Some("gemini-2.5-pro"), |work| two_reads(cli, work))
    else {
        return;
    };
    let ids: Vec<Value> = rec
        .requests
        .iter()
        .filter_map(|r| r.body.as_ref())
        .flat_map(|b| b["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").map(|f| f["id"].clone()))
        .collect();
    // The API sent no ids: Gemini CLI made its own (`read_file_<ms>_<n>`), and makes new ones
    // in the replay, where the calls are served without ids too.
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(
        ids.iter()
            .all(|id| id.as_str().is_some_and(|id| id.starts_with("read_file_"))),
        "{ids:?}"
    );
    rec.assert_replays_equal();
}

/// Codex sends its shell output under a header of its own (chunk id, wall time, exit code,
/// token count, `Output:`); the envelope rule takes exactly that off, and the recording
/// replays equal.
#[test]
fn codex_results_lose_their_header_and_replay_equal() {
    let cli = AgentCli::Codex;
    let Some(rec) = Recording::make(cli, Some("gpt-5.5"), |w| one_read(cli, w)) else {
        return;
    };
    let sent = rec.sent_results();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].starts_with("Chunk ID: "), "{sent:?}");
    let output = strip_tool_result(Provider::Codex, &sent[0]);
    assert_eq!(output, NOTES, "{sent:?}");
    rec.assert_replays_equal();
}
