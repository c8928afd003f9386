//! A recording is portable and its workflow is part of it (#58 items 3-5), with the real Claude
//! Code: a recording copied away from the checkout it was made in, with that checkout gone,
//! replays from another checkout (the recorded text of the workflow runs, the recorded
//! workspace root maps to the new one, so the agent reads the new checkout's file) and an
//! edited file there is a difference; a changed `model:` is a difference at its step and the
//! replay's transcript names the model the workflow now asks for. Exit codes: an unknown run
//! is 3, a secret input not given again is 2 (no agent needed).
//!
//! A missing CLI skips its test (fails it under `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

const NOTES: &str = "the launch code is 7-alpha-tango\n";
const PROMPT: &str = "Read notes.txt and tell me the launch code.";

fn workflow(model: &str) -> String {
    format!(
        "name: portable\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
         provider: claude\n{model}    timeout_ms: 60000\n    prompt: {}\n    tools: [read_file]\n    \
         env:\n      ANTHROPIC_BASE_URL: \"{{{{inputs.endpoint}}}}\"\n",
        json!(PROMPT)
    )
}

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `transcript replay RECORDING --storage S --workspace W ARGS…` in the sandbox's environment.
fn replay(
    env: &[(String, String)],
    bin: &Path,
    recording: &Path,
    ws: &Path,
    args: &[&str],
) -> (Output, tempfile::TempDir) {
    let storage = tempfile::tempdir().unwrap();
    let out = common::bin()
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(AgentCli::Claude.bin_var(), bin)
        .arg("replay")
        .arg(recording)
        .arg("--storage")
        .arg(storage.path())
        .arg("--workspace")
        .arg(ws)
        .args(args)
        .output()
        .unwrap();
    (out, storage)
}

/// The replay's transcript (the one file in `storage`).
fn replayed(storage: &Path) -> Vec<Value> {
    let file = std::fs::read_dir(storage)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl") && !p.ends_with("audit.jsonl"))
        .unwrap();
    events(&file)
}

#[test]
fn a_recording_replays_from_another_checkout_and_sees_its_edits() {
    let Some(bin) = AgentCli::Claude.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
    let server = ModelServer::start(Script::new([
        Turn::tool_call("Read", json!({"file_path": sb.work().join("notes.txt")}))
            .with_usage(Usage::new(1200, 45)),
        Turn::text("The launch code is 7-alpha-tango.").with_usage(Usage::new(1500, 17)),
    ]))
    .unwrap();
    let common::Recorded {
        storage,
        run_id,
        output: out,
        env,
        endpoint,
    } = common::record_real(AgentCli::Claude, &bin, &sb, &server, &workflow(""));
    assert!(out.status.success(), "{}", common::describe(&out));
    drop(server);

    // The recording alone, elsewhere; the checkout it was made in (file and workflow) gone.
    let elsewhere = tempfile::tempdir().unwrap();
    let recording = elsewhere.path().join("ask.recording.jsonl");
    std::fs::copy(storage.path().join(format!("{run_id}.jsonl")), &recording).unwrap();
    let recorded = events(&recording);
    let then = recorded[0]["payload"]["workspace"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(Path::new(&then), sb.work().canonicalize().unwrap());
    std::fs::remove_file(sb.work().join("notes.txt")).unwrap();
    std::fs::remove_file(sb.tmp().join("workflow.yaml")).unwrap();
    drop(storage);

    let checkout = tempfile::tempdir().unwrap();
    std::fs::write(checkout.path().join("notes.txt"), NOTES).unwrap();
    let (out, replay_storage) = replay(&env, &bin, &recording, checkout.path(), &[]);
    assert!(out.status.success(), "{}", common::describe(&out));
    let stderr = common::text(&out.stderr);
    assert!(
        stderr.contains("running the workflow text the recording keeps"),
        "{stderr}"
    );
    let now = replayed(replay_storage.path());
    let ws = now[0]["payload"]["workspace"].as_str().unwrap();
    assert_eq!(Path::new(ws), checkout.path().canonicalize().unwrap());
    // The agent read the new checkout's file: its call names the new root.
    let line = serde_json::to_string(&now).unwrap();
    assert!(line.contains(&format!("{ws}/notes.txt")), "{line}");
    assert!(!line.contains(&format!("{then}/notes.txt")), "{line}");

    std::fs::write(
        checkout.path().join("notes.txt"),
        "the launch code is 9-zulu\n",
    )
    .unwrap();
    let (out, _s) = replay(&env, &bin, &recording, checkout.path(), &[]);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let all = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
    assert!(all.contains("9-zulu"), "{all}");
    // Said at its step (and in the turn Claude Code made of the refusal), not again for the run.
    let stdout = common::text(&out.stdout);
    let said = stdout
        .matches("the result of tool call Read(notes.txt)")
        .count();
    assert_eq!(said, 2, "{stdout}");
    // The same under `--match fifo`: served in order, the difference said once at the end as a
    // warning, and `show` prints it in its step.
    let (out, fifo) = replay(
        &env,
        &bin,
        &recording,
        checkout.path(),
        &["--match", "fifo"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let stderr = common::text(&out.stderr);
    let (_, end) = stderr
        .split_once("warning(s) (--match fifo):")
        .expect(&stderr);
    assert!(
        end.contains("step ask: ") && end.contains("9-zulu"),
        "{stderr}"
    );
    let shown = common::bin()
        .args(["show", "latest", "--color", "never", "--storage"])
        .arg(fifo.path())
        .output()
        .unwrap();
    let shown = common::text(&shown.stdout);
    assert!(
        shown.contains("! warning: ") && shown.contains("9-zulu"),
        "{shown}"
    );

    // A changed model: a difference at its step, and the replay names the new model.
    let changed = checkout.path().join("changed.yaml");
    std::fs::write(
        &changed,
        workflow("    model: claude-sonnet-4-5\n")
            .replace("{{inputs.endpoint}}", &endpoint)
            .replace("tools: [read_file]", "tools: [read_file, run_command]"),
    )
    .unwrap();
    std::fs::write(checkout.path().join("notes.txt"), NOTES).unwrap();
    let args = ["--workflow", changed.to_str().unwrap()];
    let (out, s) = replay(&env, &bin, &recording, checkout.path(), &args);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let stdout = common::text(&out.stdout);
    assert!(
        stdout.contains("definition.model") && stdout.contains("claude-sonnet-4-5"),
        "{stdout}"
    );
    // A wider tool allowlist is a difference though no tool asked for a permission.
    assert!(
        stdout.contains("definition.tools") && stdout.contains("run_command"),
        "{stdout}"
    );
    let models: Vec<_> = replayed(s.path())
        .iter()
        .filter(|e| e["type"] == "message.assistant")
        .filter_map(|e| e["payload"]["model"].as_str().map(str::to_owned))
        .collect();
    assert!(!models.is_empty());
    assert!(
        models.iter().all(|m| m.starts_with("claude-sonnet-4-5")),
        "{models:?}"
    );
}

#[test]
fn an_unknown_run_is_3_and_a_secret_input_not_given_again_is_2() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let wf = dir.path().join("w.yaml");
    std::fs::write(
        &wf,
        "name: w\ninputs:\n  - name: token\n    secret: true\nsteps:\n  - name: s\n    \
         type: command\n    command: 'test -n \"$T\"'\n    env: { T: \"{{inputs.token}}\" }\n",
    )
    .unwrap();
    let out = common::bin()
        .args([
            "run",
            wf.to_str().unwrap(),
            "--storage",
            storage.to_str().unwrap(),
        ])
        .args([
            "--workspace",
            dir.path().to_str().unwrap(),
            "--input",
            "token=hunter2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let run = common::printed_run_id(&common::text(&out.stdout));
    let replay = |run: &str| {
        common::bin()
            .args(["replay", run, "--storage", storage.to_str().unwrap()])
            .args(["--workspace", dir.path().to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = replay(&run);
    assert_eq!(out.status.code(), Some(2), "{}", common::describe(&out));
    assert!(
        common::text(&out.stderr).contains("--input token="),
        "{}",
        common::describe(&out)
    );
    let out = replay("0badc0de-0000-4000-8000-000000000000");
    assert_eq!(out.status.code(), Some(3), "{}", common::describe(&out));
    let out = replay(dir.path().join("missing.jsonl").to_str().unwrap());
    assert_eq!(out.status.code(), Some(3), "{}", common::describe(&out));
}

/// A changed step definition the run's events would not show (an `env:` name, a tool list) is
/// a difference at its step, in `replay` and in `diff` (#58 item 3).
#[test]
fn a_changed_definition_is_a_difference_even_when_the_run_did_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let (ws, st) = (dir.path().to_str().unwrap(), storage.to_str().unwrap());
    let wf = dir.path().join("w.yaml");
    let text = "name: w\nsteps:\n  - name: hello\n    type: command\n    command: 'echo hi'\n    \
                env: { A: \"1\" }\n";
    std::fs::write(&wf, text).unwrap();
    let out = common::bin()
        .args([
            "run",
            wf.to_str().unwrap(),
            "--storage",
            st,
            "--workspace",
            ws,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let run = common::printed_run_id(&common::text(&out.stdout));
    let replay = |extra: &[&str]| {
        common::bin()
            .args([
                "replay",
                &run,
                "--storage",
                st,
                "--workspace",
                ws,
                "--color",
                "never",
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = replay(&[]);
    // `list` marks the replay and names the run it replays.
    let replay_id = common::printed_run_id(&common::text(&out.stdout));
    let list = common::bin()
        .args(["list", "--storage", st, "--color", "never"])
        .output()
        .unwrap();
    let listed = common::text(&list.stdout);
    let row = listed.lines().find(|l| l.starts_with(&replay_id)).unwrap();
    assert!(
        row.ends_with(&format!("replay of {}", &run[..8])),
        "{listed}"
    );
    let row = listed.lines().find(|l| l.starts_with(&run)).unwrap();
    assert!(!row.contains("replay of"), "{listed}");
    assert!(
        out.status.success(),
        "unchanged: {}",
        common::describe(&out)
    );
    let changed = dir.path().join("changed.yaml");
    std::fs::write(
        &changed,
        text.replace("{ A: \"1\" }", "{ A: \"1\", B: \"2\" }"),
    )
    .unwrap();
    let out = replay(&["--workflow", changed.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let stdout = common::text(&out.stdout);
    assert!(
        stdout.contains("hello") && stdout.contains("definition.env"),
        "{stdout}"
    );
    let replayed = common::printed_run_id(&stdout);
    let out = common::bin()
        .args(["diff", &run, &replayed, "--storage", st, "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut fields = Vec::new();
    let mut stack = vec![&doc];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(f)) = m.get("field") {
                    fields.push(f.clone());
                }
                stack.extend(m.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    assert_eq!(fields, ["definition.env"], "{doc}");
}
