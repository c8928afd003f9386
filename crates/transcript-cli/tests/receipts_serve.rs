//! `transcript serve`'s `/receipts` bills what `transcript receipts --by` bills: both are
//! `transcript_export::group_runs`, composed with the same import index
//! (`cmd::receipts::Origins`). Two stores, each read by both and compared group by group:
//!
//! - two runs repeating one request id (a Claude `<message.id>/<requestId>`: one request, one
//!   bill) beside a Claude Code session imported as a store, whose project only the import
//!   index knows (the run is open: its step has no result naming its source);
//! - a recording, a trial of it (`replay_of` + `forked_at`, wire decision 22), and a plain
//!   replay: the trial is billed for its live part only (the steps from the fork on and the
//!   child run a live step called; not the steps before it, nor the child run a served step
//!   called), the replay and its child run not at all. The truth is the hand sum of the live
//!   turns. `receipts TRIAL` says what a trial's receipts are.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_support;

use std::collections::BTreeMap;
use std::path::Path;

use common::{bin, text};
use serde_json::{Value, json};
use serve_support::{Serve, get};

const MODEL: &str = "claude-sonnet-4-5-20250929";

/// One event of a hand-written run: type, step path, payload, and the child run it names.
type Event<'a> = (&'a str, &'a str, Value, Option<&'a str>);

/// A run `id` (child of `parent`) of `events`, a second apart from `minute`.
fn write_run(storage: &Path, id: &str, parent: Option<&str>, minute: u32, events: &[Event<'_>]) {
    let mut out = String::new();
    for (seq, (ty, path, payload, child)) in events.iter().enumerate() {
        let mut e = json!({"seq": seq + 1, "run_id": id, "type": ty, "path": path,
            "iteration": 0, "timestamp": format!("2026-05-28T10:{minute:02}:{:02}.000Z", seq % 60),
            "payload": payload});
        if let Some(p) = parent {
            e["parent_run_id"] = p.into();
        }
        if let Some(c) = child {
            e["child_run_id"] = (*c).into();
        }
        out.push_str(&e.to_string());
        out.push('\n');
    }
    std::fs::write(storage.join(format!("{id}.jsonl")), out).unwrap();
}

fn started<'a>(name: &str, extra: Value) -> Event<'a> {
    let mut payload = json!({"name": name, "kind": "workflow"});
    if let (Some(p), Some(e)) = (payload.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    ("run.started", "", payload, None)
}

fn completed<'a>() -> Event<'a> {
    (
        "run.completed",
        "",
        json!({"name": "w", "kind": "workflow"}),
        None,
    )
}

/// An agent step `path` with one billed turn of `input`/`output` tokens (request `request`).
fn agent_step<'a>(path: &'a str, input: u64, output: u64, request: Option<&str>) -> Vec<Event<'a>> {
    let mut message = json!({"role": "assistant", "provider": "claude", "model": MODEL,
        "usage": {"input_tokens": input, "output_tokens": output},
        "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": "ok"}]});
    if let Some(r) = request {
        message["request_id"] = r.into();
    }
    vec![
        (
            "step.started",
            path,
            json!({"name": path, "kind": "agent"}),
            None,
        ),
        ("message.assistant", path, message, None),
        (
            "step.completed",
            path,
            json!({"name": path, "kind": "agent"}),
            None,
        ),
    ]
}

/// A `call_workflow` step `path` calling `child`.
fn call_step<'a>(path: &'a str, child: &'a str) -> Vec<Event<'a>> {
    let payload = json!({"name": path, "kind": "call_workflow"});
    vec![
        (
            "step.call_workflow.started",
            path,
            payload.clone(),
            Some(child),
        ),
        ("step.call_workflow.completed", path, payload, Some(child)),
    ]
}

fn run_of<'a>(parts: Vec<Vec<Event<'a>>>) -> Vec<Event<'a>> {
    parts.into_iter().flatten().collect()
}

/// `receipts --by <by> --json`.
fn receipts_by(storage: &Path, by: &str) -> Value {
    let out = bin()
        .args(["receipts", "--by", by, "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The sums of `receipts --by --json`'s groups: requests, input and output tokens.
fn sums(v: &Value) -> (u64, u64, u64) {
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .fold((0, 0, 0), |(t, i, o), g| {
            let n = |k: &str| g["usage"][k].as_u64().unwrap_or(0);
            (
                t + g["turns"].as_u64().unwrap(),
                i + n("input_tokens"),
                o + n("output_tokens"),
            )
        })
}

/// A group as both print it: runs, requests, input, output, cost to the cent's hundredth.
type Row = (u64, u64, u64, u64, String);

/// The CLI's groups, keyed.
fn cli_rows(v: &Value) -> BTreeMap<String, Row> {
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let n = |k: &str| g["usage"][k].as_u64().unwrap_or(0);
            (
                g["key"].as_str().unwrap().to_owned(),
                (
                    g["runs"].as_u64().unwrap(),
                    g["turns"].as_u64().unwrap(),
                    n("input_tokens"),
                    n("output_tokens"),
                    g["cost_usd"]
                        .as_f64()
                        .map_or("—".to_owned(), |c| format!("${c:.4}")),
                ),
            )
        })
        .collect()
}

/// The rows of `/receipts`' table `by-<by>`.
fn page_rows(page: &str, by: &str) -> BTreeMap<String, Row> {
    let at = page
        .find(&format!("id=\"by-{by}\""))
        .unwrap_or_else(|| panic!("no table by {by}"));
    let table = &page[at..page[at..].find("</table>").map_or(page.len(), |e| at + e)];
    let body = table.split("<tbody>").nth(1).unwrap_or("");
    body.split("<tr>")
        .skip(1)
        .filter(|r| !r.contains("no billed requests"))
        .map(|row| {
            let cells: Vec<&str> = row
                .split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    &c[..c.find("</td>").unwrap()]
                })
                .collect();
            let n = |i: usize| cells[i].parse::<u64>().unwrap();
            (
                cells[0].to_owned(),
                (n(1), n(2), n(3), n(4), cells[5].to_owned()),
            )
        })
        .collect()
}

/// Serves `storage` and checks `/receipts` against `receipts --by` for `groupings`; returns
/// the page.
fn same_in_both(storage: &Path, groupings: &[&str]) -> String {
    let serve = Serve::start(storage, &["--addr", "127.0.0.1:0"], 1);
    let r = get(&serve.addr(), "/receipts", &[]);
    assert_eq!(r.status, 200, "{}", r.body);
    for by in groupings {
        let cli = cli_rows(&receipts_by(storage, by));
        assert!(!cli.is_empty(), "{by}");
        assert_eq!(
            page_rows(&r.body, by),
            cli,
            "/receipts by {by} vs receipts --by {by}"
        );
    }
    r.body
}

/// A Claude Code session in `/work/alpha`, one request (`msg_1/req_1`), under `home`'s
/// `projects/-work-alpha/`.
fn claude_session(home: &Path) {
    let dir = home.join("projects/-work-alpha");
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        json!({"type": "user", "sessionId": "s1", "cwd": "/work/alpha",
            "timestamp": "2026-05-28T09:00:00.000Z", "uuid": "u1", "parentUuid": null,
            "message": {"role": "user", "content": "hi"}}),
        json!({"type": "assistant", "sessionId": "s1", "cwd": "/work/alpha",
            "timestamp": "2026-05-28T09:00:01.000Z", "uuid": "a1", "parentUuid": "u1",
            "requestId": "req_1", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": MODEL, "content": [{"type": "text", "text": "hello"}],
            "usage": {"input_tokens": 100, "output_tokens": 20}}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("s1.jsonl"), text).unwrap();
}

#[test]
fn receipts_page_and_receipts_by_bill_a_repeated_request_and_an_indexed_project_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("store");
    std::fs::create_dir_all(&storage).unwrap();
    // Two runs repeating one request: billed once.
    for (i, id) in [
        "00000000-0000-4000-8000-00000000000a",
        "00000000-0000-4000-8000-00000000000b",
    ]
    .into_iter()
    .enumerate()
    {
        let events = run_of(vec![
            vec![started("twice", json!({}))],
            agent_step("ask", 1000, 100, Some("msg_9/req_9")),
            vec![completed()],
        ]);
        write_run(&storage, id, None, i as u32, &events);
    }
    let home = tmp.path().join("claude");
    claude_session(&home);
    let out = bin()
        .args(["import", "claude", "--store", "--storage"])
        .arg(&storage)
        .env("CLAUDE_CONFIG_DIR", &home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    let by_model = receipts_by(&storage, "model");
    assert_eq!(by_model["duplicates"], 1, "{by_model}");
    assert_eq!(sums(&by_model), (2, 1100, 120), "{by_model}");
    let by_project = cli_rows(&receipts_by(&storage, "project"));
    assert!(
        by_project.contains_key("-work-alpha"),
        "the index's project: {by_project:?}"
    );

    let page = same_in_both(&storage, &["model", "day", "project"]);
    assert!(
        page.contains("1 duplicate turn(s) set aside"),
        "{}",
        &page[..page.len().min(2000)]
    );
}

const RECORDING: &str = "00000000-0000-4000-8000-000000000001";
const TRIAL: &str = "00000000-0000-4000-8000-000000000002";
const SERVED_CHILD: &str = "00000000-0000-4000-8000-000000000003";
const LIVE_CHILD: &str = "00000000-0000-4000-8000-000000000004";
const REPLAY: &str = "00000000-0000-4000-8000-000000000005";
const REPLAY_CHILD: &str = "00000000-0000-4000-8000-000000000006";
/// The recording's own call's child run (not in the store: the bill decides by the
/// recording's order of steps, not by its children).
const RECORDED_CHILD: &str = "00000000-0000-4000-8000-000000000007";

/// The recording (gather 100/10, a call, answer 200/20, review 400/40), a trial forked at `answer`
/// (gather served, a call before the fork served with its child run; answer 300/30, a call
/// after it whose child bills 60/6, review 500/50 live), a plain replay with a child run.
fn trial_store(storage: &Path) {
    std::fs::create_dir_all(storage).unwrap();
    let recording = run_of(vec![
        vec![started("what-if", json!({}))],
        agent_step("gather", 100, 10, None),
        call_step("early", RECORDED_CHILD),
        agent_step("answer", 200, 20, None),
        agent_step("review", 400, 40, None),
        vec![completed()],
    ]);
    write_run(storage, RECORDING, None, 0, &recording);
    let trial = run_of(vec![
        vec![started(
            "what-if",
            json!({"replay_of": RECORDING, "forked_at": "answer"}),
        )],
        agent_step("gather", 100, 10, None),
        call_step("early", SERVED_CHILD),
        agent_step("answer", 300, 30, None),
        call_step("late", LIVE_CHILD),
        agent_step("review", 500, 50, None),
        vec![completed()],
    ]);
    write_run(storage, TRIAL, None, 1, &trial);
    for (child, input) in [(SERVED_CHILD, 50), (LIVE_CHILD, 60)] {
        let events = run_of(vec![
            vec![started("sub", json!({}))],
            agent_step("inner", input, input / 10, None),
            vec![completed()],
        ]);
        write_run(storage, child, Some(TRIAL), 2, &events);
    }
    let replay = run_of(vec![
        vec![started("what-if", json!({"replay_of": RECORDING}))],
        agent_step("gather", 70, 7, None),
        call_step("early", REPLAY_CHILD),
        vec![completed()],
    ]);
    write_run(storage, REPLAY, None, 3, &replay);
    let child = run_of(vec![
        vec![started("sub", json!({}))],
        agent_step("inner", 80, 8, None),
        vec![completed()],
    ]);
    write_run(storage, REPLAY_CHILD, Some(REPLAY), 4, &child);
}

#[test]
fn a_trial_is_billed_for_its_live_part_alike_by_receipts_by_and_the_receipts_page() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("store");
    trial_store(&storage);
    // By hand: the recording whole, the trial's answer and review, the live child run.
    let (input, output) = (100 + 200 + 400 + 300 + 500 + 60, 10 + 20 + 40 + 30 + 50 + 6);
    let by_day = receipts_by(&storage, "day");
    assert_eq!(sums(&by_day), (6, input, output), "{by_day}");
    let day = &by_day["groups"][0];
    assert_eq!(day["runs"], 3, "recording, trial, live child: {by_day}");
    let rows = page_rows(
        &same_in_both(&storage, &["model", "day", "project"]),
        "model",
    );
    assert_eq!(rows[MODEL].2, input);

    // A trial's own receipts say what is spend.
    let out = bin()
        .args(["receipts", TRIAL, "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!(
            "trial of {RECORDING} forked at answer: steps before it were served from the \
             recording and are not spend; the live part from answer on is"
        )),
        "{}",
        text(&out.stdout)
    );
    let out = bin()
        .args(["receipts", REPLAY, "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains(&format!("replayed: this run replays {RECORDING}")),
        "{}",
        text(&out.stdout)
    );
}
