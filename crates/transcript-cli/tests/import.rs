//! `transcript import` on real captures (issue #18): provider time, user prompts, truncated
//! captures, errors and refusals, orphans, single-record captures, models. Captures are read
//! from `$TRANSCRIPT_REAL_FIXTURES` at run time (skipped, and said so, when it is unset; a
//! failure when it is set but the folder is missing). Expected values were computed with jq
//! over the raw capture: each is written with its jq expression in a comment.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{bin, text};
use serde_json::Value;

fn real() -> Option<PathBuf> {
    common::real_fixtures()
}

/// An import's events, its stderr, and what `show` prints of it.
struct Import {
    events: Vec<Value>,
    stderr: String,
    show: String,
}

impl Import {
    fn of_type(&self, t: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == t).collect()
    }

    fn one(&self, t: &str) -> &Value {
        let found = self.of_type(t);
        assert_eq!(found.len(), 1, "one {t}: {:#?}", self.events);
        found[0]
    }

    fn step_result(&self) -> &Value {
        &self.one("step.completed")["payload"]["result"]
    }
}

/// Imports `file` with `provider` (deterministic ids and clock) and reads the transcript back.
fn import(provider: &str, file: &Path) -> Import {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["import", provider, "--deterministic"])
        .arg(file)
        .arg("--storage")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", file.display());
    let path = text(&out.stdout)
        .trim_end()
        .split('\t')
        .nth(2)
        .unwrap()
        .to_owned();
    let events = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let show = text(
        &bin()
            .args(["show", &path, "--color", "never"])
            .output()
            .unwrap()
            .stdout,
    );
    Import {
        events,
        stderr,
        show,
    }
}

/// Writes `bytes` to a temporary file named `name` and imports it.
fn import_bytes(provider: &str, name: &str, bytes: &[u8]) -> Import {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).unwrap();
    import(provider, &file)
}

fn millis(ts: &Value) -> i64 {
    let s = ts.as_str().unwrap();
    // YYYY-MM-DDTHH:MM:SS.mmmZ, all within one day in these captures.
    let h: i64 = s[11..13].parse().unwrap();
    let m: i64 = s[14..16].parse().unwrap();
    let sec: i64 = s[17..19].parse().unwrap();
    let ms: i64 = s[20..23].parse().unwrap();
    ((h * 60 + m) * 60 + sec) * 1000 + ms
}

#[test]
fn gemini_times_come_from_the_records() {
    let Some(root) = real() else { return };
    let run = import(
        "gemini",
        &root.join("gemini/hyperyolo-stream-json-v0.19.3-shell-tool.jsonl"),
    );
    // jq -s 'first.timestamp' → "2025-12-09T21:40:36.123Z"
    assert_eq!(
        run.one("run.started")["timestamp"],
        "2025-12-09T21:40:36.123Z"
    );
    // jq -s 'map(select(.type=="tool_use"))[0].timestamp' → "2025-12-09T21:40:36.789Z"
    assert_eq!(
        run.one("tool.call")["timestamp"],
        "2025-12-09T21:40:36.789Z"
    );
    // jq -s 'last.timestamp' → "2025-12-09T21:40:37.210Z"
    assert_eq!(
        run.one("run.completed")["timestamp"],
        "2025-12-09T21:40:37.210Z"
    );
    assert_eq!(run.step_result()["clock"], "provider");
    assert_eq!(
        run.one("run.completed")["payload"]["result"]["clock"],
        "provider"
    );
    assert!(
        run.stderr.contains("times from the provider clock"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_record_earlier_than_the_previous_keeps_the_previous_time_with_a_warning() {
    let Some(root) = real() else { return };
    let raw =
        std::fs::read_to_string(root.join("gemini/hyperyolo-stream-json-v0.19.3-shell-tool.jsonl"))
            .unwrap();
    let mut lines: Vec<&str> = raw.lines().collect();
    // tool_result (36.990) before tool_use (36.789): the result is kept as an orphan,
    // and the call's earlier time yields to the result's.
    lines.swap(2, 3);
    let run = import_bytes("gemini", "swapped.jsonl", lines.join("\n").as_bytes());
    let call = run.one("tool.call");
    assert_eq!(call["timestamp"], "2025-12-09T21:40:36.990Z");
    let d = &run.step_result()["diagnostics"]["warning"];
    assert_eq!(d["count"], 1, "{d}");
    assert!(d["first"].as_str().unwrap().contains("earlier"), "{d}");
    // Timestamps never go back in file order.
    let times: Vec<i64> = run.events.iter().map(|e| millis(&e["timestamp"])).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn claude_stream_json_is_placed_by_its_duration() {
    let Some(root) = real() else { return };
    let run = import(
        "claude",
        &root.join("claude-code/gleam-sdk-golden-basic-query-v2.1.7.jsonl"),
    );
    // jq 'select(.type=="result").duration_ms' → 2360
    let start = millis(&run.one("run.started")["timestamp"]);
    let end = millis(&run.one("run.completed")["timestamp"]);
    assert_eq!(end - start, 2360);
    assert_eq!(run.step_result()["clock"], "duration");
    assert_eq!(run.step_result()["duration_ms"], 2360);
    // jq 'select(.type=="result").result' → "4"
    assert_eq!(run.step_result()["result"], "4");
}

#[test]
fn prompts_become_message_user() {
    let Some(root) = real() else { return };
    for (provider, file, prompt) in [
        // jq -r 'select(.role=="user").content'
        (
            "gemini",
            "gemini/hyperyolo-stream-json-v0.19.3-shell-tool.jsonl",
            "Respond with OK only.",
        ),
        // jq -r 'select(.type=="user.message").data.content'
        (
            "copilot",
            "copilot/sortie-copilot-cli-output-format-json-simple_session.jsonl",
            "Say exactly: hello world",
        ),
        // jq -r 'select(.prompt).prompt'
        (
            "codex",
            "codex/vibe-kanban-legacy-msg-config-prompt-error.jsonl",
            "project_id: f61fbd6a-9552-4b68-a1fe-10561f028dfc\n            \nTask title: describe this repo",
        ),
    ] {
        let run = import(provider, &root.join(file));
        let user = run.one("message.user");
        assert_eq!(user["payload"]["blocks"][0]["text"], prompt, "{file}");
        // The prompt comes before the reply.
        let first_content = run
            .events
            .iter()
            .position(|e| e["type"].as_str().unwrap().starts_with("message."))
            .unwrap();
        assert_eq!(run.events[first_content]["type"], "message.user", "{file}");
    }
    // A Claude Code session log's typed prompts (text, neither meta nor a compact summary):
    // jq -s 'map(select(.type=="user" and (.isMeta|not) and (.isCompactSummary|not)
    //   and ([.message.content]|flatten|map(if type=="string" then "text" else .type end)
    //   |index("text")))) | length' → 6
    let run = import(
        "claude",
        &root.join("claude-code/agent-sessions-claude-session-jsonl-schema-fixture.jsonl"),
    );
    assert_eq!(run.of_type("message.user").len(), 6);
    // jq -r 'select(.type=="user" and (.message.content|type)=="string")|.message.content' | head -1 → Hello
    assert_eq!(
        run.of_type("message.user")[0]["payload"]["blocks"][0]["text"],
        "Hello"
    );
    assert_eq!(run.step_result()["clock"], "provider");
}

#[test]
fn a_truncated_capture_is_incomplete_and_its_torn_line_reported() {
    let Some(root) = real() else { return };
    let raw = std::fs::read(
        root.join("claude-code/tielec-ai-workflow-stream-json-v2.0.21-multi-tool.jsonl"),
    )
    .unwrap();
    // Cut mid-record: the last line is torn and the `result` record is gone.
    let cut = &raw[..raw.len() * 6 / 10];
    assert_ne!(cut.last(), Some(&b'\n'));
    let run = import_bytes("claude", "cut.jsonl", cut);
    assert!(run.of_type("run.completed").is_empty(), "no run.completed");
    let step = &run.one("step.completed")["payload"];
    let error = step["error"].as_str().unwrap();
    assert!(error.contains("`result`"), "{error}");
    assert!(error.contains("torn"), "{error}");
    assert!(run.stderr.contains("run incomplete"), "{}", run.stderr);
    assert!(!run.stderr.contains("succeeded"), "{}", run.stderr);
    // The whole capture is complete.
    let run = import(
        "claude",
        &root.join("claude-code/tielec-ai-workflow-stream-json-v2.0.21-multi-tool.jsonl"),
    );
    assert_eq!(run.of_type("run.completed").len(), 1);
}

#[test]
fn refusals_and_provider_errors_are_kept() {
    let Some(root) = real() else { return };
    let run = import(
        "openai",
        &root.join("openai/openai-python-chat-completions-stream-refusal.sse"),
    );
    // grep '^data: {' | sed 's/^data: //' | jq -rj '.choices[0].delta.refusal // empty'
    //   → I'm sorry, I can't assist with that request.
    let want = "I'm sorry, I can't assist with that request.";
    let refusal = &run.step_result()["diagnostics"]["refusal"];
    assert_eq!(refusal["count"], 1, "{refusal}");
    let first = refusal["first"].as_str().unwrap();
    assert!(first.ends_with(want), "{first}");
    let blocks = &run.one("message.assistant")["payload"]["blocks"];
    assert_eq!(blocks[0]["text"], want);
    assert!(
        run.stderr.contains("refusal diagnostic(s)"),
        "{}",
        run.stderr
    );
    // `show` displays the diagnostics kept in the transcript.
    assert!(run.show.contains("! refusal ×1:"), "{}", run.show);

    // Copilot prints its error as a plain line before a failing `result`.
    let raw = std::fs::read_to_string(
        root.join("copilot/sortie-copilot-cli-output-format-json-simple_session.jsonl"),
    )
    .unwrap();
    let lines: Vec<&str> = raw.lines().collect();
    // jq -c 'select(.type=="user.message")' is line 3; the `result` line is the last.
    let result = lines
        .last()
        .unwrap()
        .replace("\"exitCode\":0", "\"exitCode\":1");
    let capture = format!(
        "{}\nError: Not authenticated\n{result}\n",
        lines[..3].join("\n")
    );
    let run = import_bytes("copilot", "auth.jsonl", capture.as_bytes());
    let error = run.one("step.completed")["payload"]["error"]
        .as_str()
        .unwrap();
    assert!(error.contains("Error: Not authenticated"), "{error}");
    let run_error = run.one("run.completed")["payload"]["error"]
        .as_str()
        .unwrap();
    assert!(
        run_error.contains("Error: Not authenticated"),
        "{run_error}"
    );
}

#[test]
fn every_gemini_capture_is_auto_detected() {
    let Some(root) = real() else { return };
    let mut n = 0;
    for f in std::fs::read_dir(root.join("gemini")).unwrap() {
        let f = f.unwrap().path();
        let dir = tempfile::tempdir().unwrap();
        let out = bin()
            .args(["import", "auto"])
            .arg(&f)
            .arg("--storage")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout).split('\t').nth(1),
            Some("gemini"),
            "{}",
            f.display()
        );
        n += 1;
    }
    assert!(n >= 3);
}

#[test]
fn an_orphan_result_is_kept_and_flagged() {
    let Some(root) = real() else { return };
    let raw =
        std::fs::read_to_string(root.join("gemini/hyperyolo-stream-json-v0.19.3-shell-tool.jsonl"))
            .unwrap();
    // jq -c 'select(.type != "tool_use")': the fragment without its tool_use.
    let fragment: Vec<&str> = raw
        .lines()
        .filter(|l| !l.contains("\"tool_use\""))
        .collect();
    let run = import_bytes("gemini", "fragment.jsonl", fragment.join("\n").as_bytes());
    assert!(run.of_type("tool.call").is_empty());
    // jq -r 'select(.type=="tool_result").tool_id' → tool_1
    assert_eq!(run.one("tool.result")["payload"]["call_id"], "tool_1");
    let orphan = &run.step_result()["diagnostics"]["orphan"];
    assert_eq!(orphan["count"], 1, "{orphan}");
    assert!(run.stderr.contains("orphan"), "{}", run.stderr);
}

#[test]
fn single_record_captures_are_runs() {
    let Some(root) = real() else { return };
    // A lone `result`: its answer and usage are kept.
    let run = import(
        "claude",
        &root.join("claude-code/gleam-sdk-real-v2.1.x-result_success.json"),
    );
    // jq -r '.result' → Here are the files in the current directory.
    assert_eq!(
        run.step_result()["result"],
        "Here are the files in the current directory."
    );
    // jq '.usage.output_tokens' → 424
    let usage = &run.one("message.assistant")["payload"]["usage"];
    assert_eq!(usage["output_tokens"], 424);
    assert_eq!(run.of_type("run.completed").len(), 1);

    // A lone `system/init`: a run, incomplete (no `result`).
    let run = import(
        "claude",
        &root.join("claude-code/gleam-sdk-real-v2.1.x-system_message.json"),
    );
    assert!(run.of_type("run.completed").is_empty());
    assert!(run.step_result()["diagnostics"]["metadata"]["count"] == 1);

    // Codex legacy: config, prompt, task_started, error.
    let run = import(
        "codex",
        &root.join("codex/vibe-kanban-legacy-msg-config-prompt-error.jsonl"),
    );
    // jq -r 'select(.msg.type=="error").msg.message' → "Missing environment variable: `OPENAI_API_KEY`. …"
    let error = run.one("step.completed")["payload"]["error"]
        .as_str()
        .unwrap();
    assert!(
        error.contains("Missing environment variable: `OPENAI_API_KEY`"),
        "{error}"
    );
}

#[test]
fn copilot_model_and_provider_are_recorded() {
    let Some(root) = real() else { return };
    let run = import(
        "copilot",
        &root.join("copilot/sortie-copilot-cli-output-format-json-simple_session.jsonl"),
    );
    let m = &run.one("message.assistant")["payload"];
    // jq -r 'select(.type=="session.tools_updated").data.model' → claude-opus-4.6
    assert_eq!(m["model"], "claude-opus-4.6");
    assert_eq!(m["provider"], "copilot");
}
