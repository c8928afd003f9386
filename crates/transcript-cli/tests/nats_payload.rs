//! A step at exec's value cap on NATS storage (#44 hardening). Exec cuts each recorded value
//! at its cap (1 MiB by default), but an event's line holds several values plus its envelope,
//! and JSON escaping grows a value up to 6× (a control byte is `\u0001`): with the servers'
//! default `max_payload` (1 MiB) a step printing more than the cap failed the whole run with
//! exit 4, after the step ran, where file storage succeeds. The runner now reads `max_payload`
//! at connect and lowers the cap so that the largest line exec can make fits; below a useful
//! size it refuses before any step runs. Truth: the servers' own setting (their config file),
//! the bytes the commands print (`head -c`), and the lines the mirror writes.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, text};
use serde_json::Value;
use transcript_nats::testing;

const PRINTED: usize = 3_000_000;

/// Steps printing well over the cap: ASCII, control bytes (6× when escaped), multi-byte
/// UTF-8 with quotes, backslashes and newlines (escaped 2×), and both streams at once.
const OK_WORKFLOW: &str = r#"name: big
steps:
  - name: marker
    type: operation
    tool: write_file
    input: { path: ran.txt, content: "ran" }
  - name: ascii
    type: command
    command: 'head -c 3000000 /dev/zero | tr "\0" x'
  - name: control
    type: command
    command: 'head -c 3000000 /dev/zero | tr "\0" "\001"'
  - name: utf8
    type: command
    command: 'yes "é\"\\" | head -c 3000000'
  - name: both
    type: command
    command: 'head -c 3000000 /dev/zero | tr "\0" "\002" >&2; head -c 3000000 /dev/zero | tr "\0" "\003"'
"#;

/// A step failing with a huge stderr (its error) and a huge stdout (its result): the largest
/// step event exec makes. The run fails (exit 1), as on files, never with a storage error.
const FAIL_WORKFLOW: &str = r#"name: bad
steps:
  - name: bad
    type: command
    command: 'head -c 3000000 /dev/zero | tr "\0" "\001" >&2; head -c 3000000 /dev/zero | tr "\0" "\001"; exit 3'
"#;

fn run(dir: &Path, storage: &str, name: &str, workflow: &str) -> std::process::Output {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, workflow).unwrap();
    let ws = dir.join(format!("ws-{name}"));
    std::fs::create_dir_all(&ws).unwrap();
    bin()
        .current_dir(dir)
        .args(["run", "--deterministic", "--storage", storage])
        .arg(&file)
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap()
}

/// Every mirrored line of `dir`, parsed, with its length.
fn mirrored_lines(dir: &Path) -> Vec<(usize, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            let bytes = std::fs::read(&path).unwrap();
            for line in bytes.split_inclusive(|b| *b == b'\n') {
                out.push((line.len(), serde_json::from_slice(line).unwrap()));
            }
        }
    }
    out
}

/// Runs both workflows on a server whose `max_payload` is `max_payload` bytes (None: the
/// default, 1 MiB) and checks the runs end as on files, the cap note is printed once, and the
/// mirror holds valid lines that fit, the output cut with exec's marker.
fn runs_end_as_on_files(config: Option<&str>, max_payload: usize) {
    let conf_dir = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for (name, workflow, code) in [("ok", OK_WORKFLOW, 0), ("bad", FAIL_WORKFLOW, 1)] {
        // A server per workflow: both runs have the deterministic run id.
        let server = match config {
            Some(c) => {
                let conf = conf_dir.path().join("server.conf");
                std::fs::write(&conf, c).unwrap();
                testing::single_with(&["-c", conf.to_str().unwrap()])
            }
            None => testing::single(),
        };
        let Some(server) = server.unwrap() else {
            return;
        };
        let url = server.url();
        let files = tmp.path().join(format!("files-{name}"));
        let on_files = run(tmp.path(), files.to_str().unwrap(), name, workflow);
        assert_eq!(
            on_files.status.code(),
            Some(code),
            "{}",
            text(&on_files.stderr)
        );
        let o = run(tmp.path(), &format!("{url}/{name}"), name, workflow);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{name} on NATS: {stderr}");
        let notes: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("max_payload"))
            .collect();
        assert_eq!(notes.len(), 1, "the cap note once: {stderr}");
        assert!(notes[0].contains(&max_payload.to_string()), "{}", notes[0]);

        let mirror = tmp.path().join(format!("mirror-{name}"));
        let m = bin()
            .args(["mirror", &format!("{url}/{name}"), "--to"])
            .arg(&mirror)
            .output()
            .unwrap();
        assert!(m.status.success(), "{}", text(&m.stderr));
        let lines = mirrored_lines(&mirror);
        assert!(lines.len() >= 4, "{lines:?}");
        for (len, _) in &lines {
            assert!(*len < max_payload, "a line of {len} bytes");
        }
        for file in std::fs::read_dir(&mirror).unwrap() {
            let v = bin()
                .arg("validate")
                .arg(file.unwrap().path())
                .output()
                .unwrap();
            assert!(v.status.success(), "{}", text(&v.stdout));
        }
        if name == "ok" {
            // The ASCII step's output: cut where exec cuts, with its marker naming the size
            // the command printed.
            let (_, ascii) = lines
                .iter()
                .find(|(_, l)| l["type"] == "step.completed" && l["payload"]["name"] == "ascii")
                .unwrap();
            let stdout = ascii["payload"]["result"]["stdout"].as_str().unwrap();
            let cut = stdout.find('…').unwrap();
            assert!(cut > 1000, "{cut}");
            assert!(stdout[..cut].bytes().all(|b| b == b'x'));
            assert!(
                stdout[cut..].starts_with(&format!("…[truncated: {PRINTED} bytes, sha256 ")),
                "{}",
                &stdout[cut..]
            );
            // The control bytes' result: over twice the cap once escaped, so exec's stub (its
            // size and sha256 are those of the captured result, already cut at the cap), as
            // on files.
            let (_, control) = lines
                .iter()
                .find(|(_, l)| l["type"] == "step.completed" && l["payload"]["name"] == "control")
                .unwrap();
            let result = &control["payload"]["result"];
            assert_eq!(result["_truncated"], true, "{result}");
            assert!(
                result["original_size_bytes"].as_u64().unwrap() > 6 * 1000,
                "{result}"
            );
            assert_eq!(result["sha256"].as_str().unwrap().len(), 64, "{result}");
        }
    }
}

#[test]
fn a_step_over_the_cap_succeeds_with_the_servers_default_max_payload() {
    runs_end_as_on_files(None, 1 << 20);
}

#[test]
fn a_step_over_the_cap_succeeds_with_a_64kb_max_payload() {
    runs_end_as_on_files(Some("max_payload: 64KB\n"), 64 << 10);
}

/// A `max_payload` too small for any useful cap: refused with exit 4 naming the URL and the
/// setting, before any step runs and before anything is published.
#[test]
fn a_max_payload_too_small_is_refused_before_any_step_runs() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("server.conf");
    std::fs::write(&conf, "max_payload: 8KB\n").unwrap();
    let Some(server) = testing::single_with(&["-c", conf.to_str().unwrap()]).unwrap() else {
        return;
    };
    let url = server.url();
    let o = run(dir.path(), &url, "ok", OK_WORKFLOW);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains(&url), "{stderr}");
    assert!(stderr.contains("max_payload"), "{stderr}");
    assert!(stderr.contains("8192"), "{stderr}");
    assert!(!dir.path().join("ws-ok/ran.txt").exists(), "no step ran");
    let list = bin().args(["list", "--storage", &url]).output().unwrap();
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert!(
        !text(&list.stdout).contains("big"),
        "{}",
        text(&list.stdout)
    );
}

/// The derivation's worst case, through exec's own bounding (`bound_payload`, the rule its
/// `Emitter` applies) and a real server: the events that carry two capped values, each made of
/// control bytes (6× once escaped), with a long step path. Every one is stored when the cap
/// is the one the store gives for the servers' `max_payload`, including the smallest accepted.
#[tokio::test(flavor = "multi_thread")]
async fn two_fully_escaped_values_at_the_cap_fit_the_servers_max_payload() {
    use transcript_domain::{
        ContentBlock, EventDraft, Fidelity, ManualClock, MessagePayload, Payload, RawJson,
        RecorderFactory, Role, RunId, StepPayload, Timestamp, ToolPayload,
    };
    let control = "\u{1}".repeat(PRINTED);
    let string = RawJson::from_value(&control).unwrap();
    let path = "outer/".repeat(40) + "step";
    let drafts = [
        Payload::StepCompleted(
            StepPayload::new("step", "command")
                .with_error(control.clone())
                .with_result(string.clone()),
        ),
        Payload::ToolResult(ToolPayload::result(
            "tool",
            "call-1",
            string.clone(),
            Some(control.clone()),
            Fidelity::Router,
        )),
        Payload::MessageAssistant(MessagePayload::new(
            Role::Assistant,
            vec![
                ContentBlock::text(Fidelity::Router, control.clone()),
                ContentBlock::tool_use(Fidelity::Router, "tool", "call-1", string.clone()),
            ],
        )),
    ];
    for (n, config) in ["max_payload: 16KB\n", "max_payload: 64KB\n", ""]
        .into_iter()
        .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("server.conf");
        std::fs::write(&conf, config).unwrap();
        let Some(server) = testing::single_with(&["-c", conf.to_str().unwrap()]).unwrap() else {
            return;
        };
        let url = transcript_nats::StorageUrl::parse(&server.url()).unwrap();
        let store = transcript_nats::NatsStore::connect(&url, Default::default())
            .await
            .unwrap();
        let max_payload = store.max_payload();
        let (cap, _) = store
            .value_cap(transcript_exec::bounded::DEFAULT_MAX_VALUE_BYTES)
            .unwrap();
        let factory = transcript_nats::NatsRecorderFactory::new(
            store.clone(),
            std::sync::Arc::new(ManualClock::new(Timestamp::UNIX_EPOCH)),
        );
        let run = RunId::from_bytes([u8::try_from(n).unwrap() + 1; 16]);
        let recorder = factory.create(run, None).await.unwrap();
        recorder
            .record(EventDraft::run_level(Payload::RunStarted(
                StepPayload::new("w", "workflow"),
            )))
            .await
            .unwrap();
        for payload in &drafts {
            let mut payload = payload.clone();
            transcript_exec::bounded::bound_payload(&mut payload, cap);
            let kind = payload.event_type();
            recorder
                .record(EventDraft::new(path.clone(), 0, payload))
                .await
                .unwrap_or_else(|e| panic!("{kind} at cap {cap}, max_payload {max_payload}: {e}"));
        }
        recorder.close().await.unwrap();
        let lines = store.run_lines(run).await.unwrap();
        assert_eq!(lines.len(), 1 + drafts.len());
        let longest = lines.iter().map(|l| l.len()).max().unwrap();
        assert!(longest < max_payload, "{longest} of {max_payload}");
        eprintln!("max_payload {max_payload}: cap {cap}, longest line {longest}");
    }
}

/// In a cluster `max_payload` limits what a client publishes on its own connection: routes,
/// replication and delivery to readers do not enforce it. So the cap follows the server the
/// runner is connected to (the only INFO a client sees), and its lines, larger than the other
/// servers' 64 KB, are replicated to them and read back from one of them by `mirror`.
#[test]
fn in_a_cluster_the_cap_follows_the_server_the_runner_publishes_to() {
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small.conf");
    std::fs::write(&small, "max_payload: 64KB\n").unwrap();
    let small = vec!["-c".to_owned(), small.display().to_string()];
    let Some(nodes) = testing::cluster_with(&[Vec::new(), small.clone(), small]).unwrap() else {
        return;
    };
    std::fs::write(dir.path().join("ok.yaml"), OK_WORKFLOW).unwrap();
    let o = bin()
        .current_dir(dir.path())
        .env("TRANSCRIPT_NATS_REPLICAS", "3")
        .args(["run", "--deterministic", "--storage", &nodes[0].url()])
        .arg(dir.path().join("ok.yaml"))
        .arg("--workspace")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = text(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(stderr.contains("max_payload at"), "{stderr}");
    assert!(stderr.contains("is 1048576 bytes"), "{stderr}");
    let mirror = dir.path().join("mirror");
    let m = bin()
        .args(["mirror", &nodes[1].url(), "--to"])
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(m.status.success(), "{}", text(&m.stderr));
    let lines = mirrored_lines(&mirror);
    let longest = lines.iter().map(|(len, _)| *len).max().unwrap();
    assert!(longest > 64 << 10, "{longest}");
    assert!(longest < 1 << 20, "{longest}");
    assert_eq!(lines.last().unwrap().1["type"], "run.completed");
}
