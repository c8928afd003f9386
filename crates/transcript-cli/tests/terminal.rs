//! The CLI as people at a terminal and scripts use it: hostile content cannot reach the
//! terminal as control sequences, a closed pipe ends a command quietly, every exit code is the
//! documented one, runs are found by prefix, `latest` and `list`, and signals cancel cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, demo_command, repo, text};

const RUN: &str = "550e8400-e29b-41d4-a716-446655440000";
/// An OSC window-title sequence, a screen clear, a C1 CSI and a bidi override.
const HOSTILE: &str = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{9b}31m\u{202e}";

fn hostile_transcript(dir: &Path) -> std::path::PathBuf {
    let h = HOSTILE;
    let lines = [
        serde_json::json!({"seq":1,"run_id":RUN,"type":"run.started","path":"","iteration":0,"timestamp":"2026-06-08T08:14:42.100Z","payload":{"name":format!("wf{h}"),"kind":"workflow"}}),
        serde_json::json!({"seq":2,"run_id":RUN,"type":"step.started","path":format!("s{h}"),"iteration":0,"timestamp":"2026-06-08T08:14:42.101Z","payload":{"name":format!("n{h}"),"kind":format!("agent{h}")}}),
        serde_json::json!({"seq":3,"run_id":RUN,"type":"message.assistant","path":format!("s{h}"),"iteration":0,"timestamp":"2026-06-08T08:14:42.102Z","payload":{"role":"assistant","provider":format!("p{h}"),"model":format!("m{h}"),"blocks":[{"type":"text","fidelity":"agent_emitted","text":format!("hello{h}")},{"type":"tool_use","fidelity":"agent_emitted","tool_name":format!("T{h}"),"tool_id":format!("id{h}"),"tool_input":{"k":h}}]}}),
        serde_json::json!({"seq":4,"run_id":RUN,"type":"tool.call","path":format!("s{h}"),"iteration":0,"timestamp":"2026-06-08T08:14:42.103Z","payload":{"name":format!("T{h}"),"call_id":format!("c{h}"),"input":{"k":h},"output":null,"fidelity":"router"}}),
        serde_json::json!({"seq":5,"run_id":RUN,"type":"tool.result","path":format!("s{h}"),"iteration":0,"timestamp":"2026-06-08T08:14:42.104Z","payload":{"name":format!("T{h}"),"call_id":format!("c{h}"),"input":null,"output":h,"error":format!("e{h}"),"fidelity":"router"}}),
        serde_json::json!({"seq":6,"run_id":RUN,"type":"step.completed","path":format!("s{h}"),"iteration":0,"timestamp":"2026-06-08T08:14:42.105Z","payload":{"name":format!("n{h}"),"kind":format!("agent{h}"),"error":format!("boom{h}")}}),
        serde_json::json!({"seq":7,"run_id":RUN,"type":"run.completed","path":"","iteration":0,"timestamp":"2026-06-08T08:14:42.106Z","payload":{"name":format!("wf{h}"),"kind":"workflow","error":format!("failed{h}")}}),
    ];
    let path = dir.join(format!("{RUN}.jsonl"));
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, body).unwrap();
    path
}

/// No control character but newline and tab, no bidi override; with `--color always`, only
/// our own SGR color sequences.
fn assert_terminal_safe(what: &str, output: &str, colored: bool) {
    let mut chars = output.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && colored {
            // Ours: ESC [ digits m
            assert_eq!(chars.next(), Some('['), "{what}: raw escape in {output:?}");
            let mut code = String::new();
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
                code.push(d);
            }
            assert!(
                code.chars().all(|d| d.is_ascii_digit()),
                "{what}: foreign sequence ESC[{code} in {output:?}"
            );
            continue;
        }
        assert!(
            !(c.is_control() && c != '\n' && c != '\t'),
            "{what}: control U+{:04X} reached the terminal: {output:?}",
            c as u32
        );
        assert!(
            !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'),
            "{what}: bidi override reached the terminal"
        );
    }
}

#[test]
fn hostile_content_never_reaches_the_terminal_as_control_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let file = hostile_transcript(dir.path());
    let file = file.to_str().unwrap();
    // A second hostile run for `diff` (other text and error on every side) and expectations
    // for `check`, whose details quote recorded values.
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other = other_dir.join(format!("{RUN}.jsonl"));
    let body = std::fs::read_to_string(file).unwrap();
    std::fs::write(&other, body.replace("hello", "bye").replace("boom", "bang")).unwrap();
    let other = other.to_str().unwrap();
    let expect = dir.path().join("expect.yaml");
    std::fs::write(&expect, "run: {status: succeeded}\n").unwrap();
    let expect = expect.to_str().unwrap();
    for color in ["never", "always"] {
        for args in [
            vec!["tail", file],
            vec!["tree", file],
            vec!["show", file],
            vec!["stats", file],
            vec!["receipts", file],
            vec!["validate", file],
            vec!["list", "--storage", dir.path().to_str().unwrap()],
            vec!["diff", file, other],
            vec!["check", file, "--expect", expect],
        ] {
            let out = bin().args(&args).args(["--color", color]).output().unwrap();
            let what = format!("{args:?} --color {color}");
            assert!(!text(&out.stderr).contains("panicked"), "{what}");
            assert_terminal_safe(&what, &text(&out.stdout), color == "always");
            assert_terminal_safe(&what, &text(&out.stderr), false);
        }
    }
    // The live progress of a run whose command fails with hostile stderr.
    let wf = dir.path().join("hostile.yaml");
    std::fs::write(
        &wf,
        "name: hostile\nsteps:\n  - name: evil\n    type: command\n    command: \"printf '\\\\033]0;PWNED\\\\007\\\\033[2J' >&2; exit 1\"\n",
    )
    .unwrap();
    let out = bin()
        .args(["run", "--color", "never", "--storage"])
        .arg(dir.path().join("st"))
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("PWNED"),
        "the error is shown, escaped: {stderr}"
    );
    assert_terminal_safe("run progress", &stderr, false);
}

/// A pipe whose reader is already closed: every write to it fails with EPIPE.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

/// Waits for `child`, failing (instead of hanging) if it has not exited after a minute.
fn wait_bounded(child: std::process::Child, what: &str) -> std::process::ExitStatus {
    output_within(child, Duration::from_secs(60), what).status
}

/// `child`'s output, failing (and killing it) if it has not exited within `limit`.
fn output_within(child: std::process::Child, limit: Duration, what: &str) -> std::process::Output {
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || tx.send(child.wait_with_output().unwrap()));
    match rx.recv_timeout(limit) {
        Ok(output) => output,
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("{what} did not exit");
        }
    }
}

#[test]
fn a_closed_stdout_ends_commands_quietly_with_141() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("w"))
        .stdout(closed_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(141), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("panicked"));
    // The run itself completed and its transcript is whole.
    let valid = bin()
        .args(["validate", DEMO_RUN_ID, "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(valid.status.success(), "{}", text(&valid.stdout));
    for args in [
        ["tail", DEMO_RUN_ID],
        ["show", DEMO_RUN_ID],
        ["tree", DEMO_RUN_ID],
    ] {
        let out = bin()
            .args(args)
            .arg("--storage")
            .arg(&storage)
            .stdout(closed_pipe())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(141), "{args:?}");
        assert_eq!(text(&out.stderr), "", "{args:?}: quiet");
    }
    // The export formats too, the OTLP/JSON writer included (its I/O error is wrapped).
    for format in ["otlp-json", "json", "markdown", "html"] {
        let out = bin()
            .args(["export", DEMO_RUN_ID, "--format", format, "--storage"])
            .arg(&storage)
            .stdout(closed_pipe())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(141), "export {format}");
        // Quiet about the pipe: the only lines left are the price table's warnings about the
        // demo's models (printed before the output is written).
        let noise: Vec<String> = text(&out.stderr)
            .lines()
            .filter(|l| !l.starts_with("transcript: warning: ") || l.contains("pipe"))
            .map(str::to_owned)
            .collect();
        assert!(noise.is_empty(), "export {format}: quiet: {noise:?}");
    }
    // `tail -f R | head -1`: the follower notices its reader is gone while idle (`--forever`:
    // the run has completed, and plain `tail -f` would end with it, #42).
    let mut child = bin()
        .args(["tail", "-f", "--forever", DEMO_RUN_ID, "--storage"])
        .arg(&storage)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("run.started"), "{first}");
    let status = wait_bounded(child, "tail -f after its reader left");
    assert_eq!(status.code(), Some(141));
}

/// `tail -f R | head -1` for a run that never starts: nothing will fail a write, so the
/// follower must see the closed pipe while it waits for the file.
#[test]
fn tail_follow_waiting_for_a_run_ends_when_its_reader_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let child = bin()
        .args(["tail", "-f", RUN, "--storage"])
        .arg(dir.path())
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(
        child,
        Duration::from_secs(60),
        "tail -f waiting for a run, its reader gone",
    );
    assert_eq!(out.status.code(), Some(141), "{}", text(&out.stderr));
}

/// A torn tail longer than `list`'s first backwards read (64 KiB) does not hide the last
/// complete line: the run keeps its status and event count.
#[test]
fn list_sees_the_last_event_past_a_long_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    assert!(
        demo_command(&storage, &dir.path().join("w"))
            .output()
            .unwrap()
            .status
            .success()
    );
    let file = storage.join(format!("{DEMO_RUN_ID}.jsonl"));
    let events = std::fs::read_to_string(&file).unwrap().lines().count();
    for torn in [10, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 300 * 1024] {
        let mut body = std::fs::read_to_string(&file).unwrap();
        body.truncate(body.rfind('\n').unwrap() + 1);
        body.push_str(&"x".repeat(torn));
        std::fs::write(&file, body).unwrap();
        let list = bin()
            .args(["list", "--json", "--storage"])
            .arg(&storage)
            .output()
            .unwrap();
        assert!(list.status.success(), "{}", text(&list.stderr));
        let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        assert_eq!(runs[0]["events"], events, "torn tail of {torn} bytes");
        assert_eq!(runs[0]["status"], "succeeded", "torn tail of {torn} bytes");
    }
}

/// Diagnostics to a closed stderr are lost, never a panic: warnings about malformed lines
/// (`show`) and the OTLP/JSON export's summary line.
#[test]
fn a_closed_stderr_loses_diagnostics_but_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    assert!(
        demo_command(&storage, &dir.path().join("w"))
            .output()
            .unwrap()
            .status
            .success()
    );
    let file = storage.join(format!("{DEMO_RUN_ID}.jsonl"));
    let mut body = std::fs::read_to_string(&file).unwrap();
    body.push_str("not json\n");
    std::fs::write(&file, body).unwrap();
    let spans = dir.path().join("spans.json");
    for args in [
        vec!["show", DEMO_RUN_ID],
        vec!["tree", DEMO_RUN_ID],
        vec![
            "export",
            DEMO_RUN_ID,
            "--format",
            "otlp-json",
            "-o",
            spans.to_str().unwrap(),
        ],
    ] {
        let out = bin()
            .args(&args)
            .arg("--storage")
            .arg(&storage)
            .stdout(Stdio::null())
            .stderr(closed_pipe())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}

/// A child run's file that exists but cannot be read is an error naming it (exit 3), not a
/// child run shown as missing with exit 0.
#[test]
fn an_unreadable_child_run_is_an_error_not_a_missing_child() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    assert!(
        demo_command(&storage, &dir.path().join("w"))
            .output()
            .unwrap()
            .status
            .success()
    );
    // A directory where the child's file is: it opens, and every read fails (even as root).
    let child = storage.join("00000000-0000-4000-8000-000000000002.jsonl");
    std::fs::remove_file(&child).unwrap();
    std::fs::create_dir(&child).unwrap();
    for args in [
        vec!["tree", DEMO_RUN_ID],
        vec!["show", DEMO_RUN_ID],
        vec!["export", DEMO_RUN_ID, "--format", "json"],
        vec!["export", DEMO_RUN_ID, "--format", "otlp-json"],
        vec!["receipts", DEMO_RUN_ID],
    ] {
        let out = bin()
            .args(&args)
            .arg("--storage")
            .arg(&storage)
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        // The last line is the error (the OTLP mapping warns and counts before it).
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.contains("00000000-0000-4000-8000-000000000002.jsonl")
                && last.contains("not a regular file"),
            "{args:?} names the file and the cause: {stderr}"
        );
    }
}

#[test]
fn runs_resolve_by_prefix_and_latest_and_list_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    assert!(
        demo_command(&storage, &dir.path().join("w"))
            .output()
            .unwrap()
            .status
            .success()
    );
    let run = |args: &[&str]| {
        bin()
            .args(args)
            .args(["--color", "never", "--storage"])
            .arg(&storage)
            .output()
            .unwrap()
    };
    let by_id = run(&["tree", DEMO_RUN_ID]);
    assert!(by_id.status.success());
    for alias in [
        "latest",
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-0000000000",
    ] {
        let out = run(&["tree", alias]);
        if alias.len() == 34 {
            // Three runs start with it: ambiguous, named, exit 3.
            assert_eq!(out.status.code(), Some(3), "{alias}");
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains("ambiguous") && stderr.contains("3 runs"),
                "{stderr}"
            );
            assert!(stderr.contains(DEMO_RUN_ID), "{stderr}");
        } else {
            assert!(out.status.success(), "{alias}: {}", text(&out.stderr));
            assert_eq!(out.stdout, by_id.stdout, "{alias}");
        }
    }
    let unknown = run(&["show", "abcdef12"]);
    assert_eq!(unknown.status.code(), Some(3));
    let list = run(&["list", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 1, "root runs only: {runs}");
    assert_eq!(runs[0]["run_id"], DEMO_RUN_ID);
    assert_eq!(runs[0]["workflow"], "demo");
    assert_eq!(runs[0]["status"], "succeeded");
    let events = std::fs::read_to_string(storage.join(format!("{DEMO_RUN_ID}.jsonl")))
        .unwrap()
        .lines()
        .count();
    assert_eq!(runs[0]["events"], events);
    let all = run(&["list", "--all", "--json"]);
    let all: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 3, "with both child runs");
    let table = text(&run(&["list"]).stdout);
    assert!(
        table.lines().nth(1).unwrap().starts_with(DEMO_RUN_ID),
        "{table}"
    );
    // validate a whole directory: every transcript once.
    let dir_report = bin()
        .args(["validate", "--json"])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(dir_report.status.success(), "{}", text(&dir_report.stdout));
    let reports: serde_json::Value = serde_json::from_slice(&dir_report.stdout).unwrap();
    let files: usize = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["files"].as_array().map_or(1, Vec::len))
        .sum();
    assert_eq!(files, 3);
}

#[test]
fn bad_input_creates_nothing_and_exports_keep_the_transcript_mode() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("w"))
        .args(["--input", "nope=1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("nope"), "{}", text(&out.stderr));
    assert!(
        !storage.exists(),
        "nothing created for a run that never started"
    );

    assert!(
        demo_command(&storage, &dir.path().join("w"))
            .output()
            .unwrap()
            .status
            .success()
    );
    let exported = dir.path().join("run.md");
    std::fs::write(&exported, "old").unwrap();
    std::fs::set_permissions(&exported, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = bin()
        .args(["export", DEMO_RUN_ID, "--format", "markdown", "-o"])
        .arg(&exported)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mode = std::fs::metadata(&exported).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "same mode as the 0o600 transcript");
    assert!(std::fs::read_to_string(&exported).unwrap().contains("demo"));
}

#[test]
fn tail_follow_says_what_it_is_waiting_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = bin()
        .args(["tail", "-f", RUN, "--storage"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("waiting for") && line.contains(RUN), "{line}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn help_documents_exit_codes_and_examples() {
    let out = bin().arg("--help").output().unwrap();
    let help = text(&out.stdout);
    for needle in ["Exit codes:", "130", "141", "not found or invalid input"] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    for sub in [
        "run", "import", "validate", "export", "receipts", "tree", "show", "tail", "stats", "list",
        "diff", "check",
    ] {
        let out = bin().args([sub, "--help"]).output().unwrap();
        assert!(text(&out.stdout).contains("Examples:"), "{sub}");
    }
}

#[test]
fn plugin_commands_are_split_like_a_shell_so_paths_may_have_spaces() {
    let dir = tempfile::tempdir().unwrap();
    let spaced = dir.path().join("my plugins");
    std::fs::create_dir(&spaced).unwrap();
    std::fs::copy(
        repo().join("fixtures/plugins/text_plugin.py"),
        spaced.join("text plugin.py"),
    )
    .unwrap();
    let wf = dir.path().join("up.yaml");
    std::fs::write(
        &wf,
        "name: up\nsteps:\n  - name: shout\n    type: operation\n    tool: upper\n    input:\n      text: hello\n",
    )
    .unwrap();
    let plugin = format!("python3 '{}'", spaced.join("text plugin.py").display());
    let out = bin()
        .args(["run", "--color", "never", "--plugin", &plugin, "--storage"])
        .arg(dir.path().join("s"))
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("HELLO"), "{}", text(&out.stderr));
    let bad = bin()
        .args(["run", "--plugin", "python3 'unclosed", "--storage"])
        .arg(dir.path().join("s2"))
        .arg(&wf)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        !dir.path().join("s2").exists(),
        "a usage error creates nothing"
    );
}

/// An OTLP/HTTP endpoint that reads each request and answers an hour later: a dedicated
/// wiremock server (not a pooled one: its held connections end with the test), and the runtime
/// its async API needs.
fn silent_otlp_endpoint() -> (tokio::runtime::Runtime, wiremock::MockServer) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(async {
        let server = wiremock::MockServer::builder().start().await;
        wiremock::Mock::given(wiremock::matchers::any())
            .respond_with(wiremock::ResponseTemplate::new(200).set_delay(Duration::from_secs(3600)))
            .mount(&server)
            .await;
        server
    });
    (rt, server)
}

/// The number before `what` in `text` ("3 spans sent" → 3 for " spans sent").
fn count_before(text: &str, what: &str) -> u64 {
    let end = text
        .find(what)
        .unwrap_or_else(|| panic!("{what:?} in {text}"));
    let start = text[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    text[start..end].parse().unwrap()
}

/// An OTLP endpoint that accepts connections and never answers costs the run at most its flush
/// timeout; the run id is printed before the wait, and the warning says what was not sent.
#[test]
fn a_silent_otlp_endpoint_delays_the_exit_by_the_flush_timeout_only() {
    let (rt, server) = silent_otlp_endpoint();
    let dir = tempfile::tempdir().unwrap();
    let child = demo_command(&dir.path().join("s"), &dir.path().join("w"))
        .args(["--otlp-endpoint", &server.uri()])
        .args(["--otlp-flush-timeout", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Far below the exporter's own 3 × 10 s of request timeouts.
    let out = output_within(
        child,
        Duration::from_secs(20),
        "the run waiting for a silent OTLP endpoint",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let warning = stderr
        .lines()
        .find(|l| l.contains("did not finish within 1s"))
        .unwrap_or_else(|| panic!("{stderr}"));
    // Nothing was accepted; the spans of the request that never returned are counted unsent.
    assert_eq!(count_before(warning, " spans sent"), 0, "{warning}");
    assert_eq!(count_before(warning, " failed"), 0, "{warning}");
    assert!(count_before(warning, " not sent") > 0, "{warning}");
    // The id came first (to follow the run from elsewhere), the wait after it.
    let id_at = stderr
        .find(&format!("transcript: run {DEMO_RUN_ID}"))
        .unwrap();
    assert!(id_at < stderr.find("did not finish").unwrap(), "{stderr}");
    assert!(text(&out.stdout).contains("run_id:"));
    // The endpoint was reached (not refused): the export request arrived and went unanswered.
    let received = rt.block_on(server.received_requests()).unwrap();
    assert!(!received.is_empty(), "the exporter reached the endpoint");
}

/// The first Ctrl-C cancels the run and lets the command finish its work (here an OTLP flush
/// that would wait an hour); the second one exits at once, with the transcript already whole.
#[test]
fn a_second_ctrl_c_exits_at_once() {
    let (_rt, server) = silent_otlp_endpoint();
    let dir = tempfile::tempdir().unwrap();
    let wf = dir.path().join("slow.yaml");
    std::fs::write(
        &wf,
        "name: slow\nsteps:\n  - name: wait\n    type: command\n    command: \"echo started; sleep 60\"\n",
    )
    .unwrap();
    let storage = dir.path().join("s");
    let mut child = bin()
        .args(["run", "--color", "never", "--otlp-flush-timeout", "3600"])
        .args(["--otlp-endpoint", &server.uri()])
        .arg("--storage")
        .arg(&storage)
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // Stderr lines arrive on a channel, so every wait below is bounded.
    let (tx, lines) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                return;
            }
        }
    });
    let mut seen = String::new();
    let mut wait_for = |what: &str| loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(what) {
                    return;
                }
            }
            Err(_) => {
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
                panic!("no {what:?} on stderr within 60 s: {seen}");
            }
        }
    };
    let interrupt = || {
        let kill = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(kill.success());
    };
    wait_for("step.started");
    interrupt();
    // The run ends cancelled (the progress view shows its last event); the command is now in
    // its hour-long flush wait. The second signal is sent only after the first was handled
    // (two signals sent together could merge into one).
    wait_for("cancelling the run");
    wait_for("run.completed");
    interrupt();
    wait_for("second signal: exiting now");
    let status = wait_bounded(child, "a run after its second Ctrl-C");
    assert_eq!(status.code(), Some(130), "{seen}");
    // The transcript ended before the flush wait: it holds its cancelled run.completed.
    let file = std::fs::read_dir(&storage)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl") && !p.ends_with("audit.jsonl"))
        .unwrap();
    let lines = std::fs::read_to_string(&file).unwrap();
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "run.completed", "{lines}");
    assert_eq!(last["payload"]["error"], "cancelled", "{last}");
    let valid = bin().arg("validate").arg(&file).output().unwrap();
    assert!(valid.status.success(), "{}", text(&valid.stdout));
}

/// A run id that already has a transcript is refused (one run per file): the second
/// deterministic run into the same storage exits 3 and leaves the first run's file as it was.
#[test]
fn a_second_run_with_the_same_id_is_refused_and_the_first_kept() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    assert!(
        demo_command(&storage, &dir.path().join("w"))
            .output()
            .unwrap()
            .status
            .success()
    );
    let file = storage.join(format!("{DEMO_RUN_ID}.jsonl"));
    let before = std::fs::read(&file).unwrap();
    let out = demo_command(&storage, &dir.path().join("w"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

/// The exit code of a transcript that cannot be opened comes from the error's kind, not its
/// text: in a storage directory whose name says "already exists", a planted symlink is a
/// storage failure (4), not an existing run (3).
#[test]
fn a_storage_failure_is_not_taken_for_an_existing_run() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("run already exists");
    std::fs::create_dir(&storage).unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("elsewhere"),
        storage.join(format!("{DEMO_RUN_ID}.jsonl")),
    )
    .unwrap();
    let out = demo_command(&storage, &dir.path().join("w"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert!(!dir.path().join("elsewhere").exists());
}

/// `--input` names are checked by exec's one input rule (`Workflow::resolve_inputs`) before
/// anything is created: an unknown name and a missing one are exit 3 with the CLI's wording,
/// and no transcript is left behind.
#[test]
fn inputs_are_checked_by_the_workflows_rule_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("st");
    let run = |extra: &[&str]| {
        bin()
            .current_dir(repo())
            .args(["run", "fixtures/workflows/child.yaml", "--storage"])
            .arg(&storage)
            .arg("--workspace")
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let unknown = run(&["--input", "text=a", "--input", "txet=b"]);
    assert_eq!(unknown.status.code(), Some(3), "{}", text(&unknown.stderr));
    assert!(
        text(&unknown.stderr).contains("workflow 'child' has no input 'txet' (declared: text)"),
        "{}",
        text(&unknown.stderr)
    );
    let missing = run(&[]);
    assert_eq!(missing.status.code(), Some(3), "{}", text(&missing.stderr));
    assert!(
        text(&missing.stderr).contains("workflow 'child' needs --input text=VALUE"),
        "{}",
        text(&missing.stderr)
    );
    assert!(
        !storage.exists() || std::fs::read_dir(&storage).unwrap().next().is_none(),
        "nothing was created"
    );
}
