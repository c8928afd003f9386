//! Every executed tool call is recorded (#28 item 3), through the `transcript` binary: an
//! OpenAI-compatible model (the testkit's scripted server) that reuses call ids (`dup` for a
//! `read_file`, then `dup` for a `write_file`; an id reused after a refused call; the same id
//! twice in one turn) gets each executed call recorded with its own `tool.call` and
//! `tool.result` under a distinct id, its `tool_use` blocks carrying the same ids, and
//! `transcript stats` counts every one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{bin, text};
use serde_json::{Value, json};
use transcript_testkit::model_server::{Block, ModelServer, Script, Turn};

fn call(id: &str, name: &str, arguments: Value) -> Block {
    Block::ToolCall {
        id: Some(id.into()),
        name: name.into(),
        arguments,
    }
}

fn turn(blocks: Vec<Block>) -> Turn {
    Turn {
        blocks,
        ..Turn::default()
    }
}

fn events(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_model_reusing_call_ids_gets_every_executed_call_recorded() {
    let ws = tempfile::tempdir().unwrap();
    let storage = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "the notes").unwrap();
    let server = ModelServer::start(Script::new([
        turn(vec![call("dup", "read_file", json!({"path": "notes.txt"}))]),
        turn(vec![call(
            "dup",
            "write_file",
            json!({"path": "one.txt", "content": "1"}),
        )]),
        // Refused (not offered), then the same id for a call that runs.
        turn(vec![call(
            "ref",
            "run_command",
            json!({"command": "touch RAN"}),
        )]),
        turn(vec![call(
            "ref",
            "write_file",
            json!({"path": "two.txt", "content": "2"}),
        )]),
        // The same id twice in one turn.
        turn(vec![
            call(
                "twin",
                "write_file",
                json!({"path": "a.txt", "content": "a"}),
            ),
            call(
                "twin",
                "write_file",
                json!({"path": "b.txt", "content": "b"}),
            ),
        ]),
        Turn::text("done"),
    ]))
    .unwrap();
    let workflow = storage.path().join("dup.yaml");
    std::fs::write(
        &workflow,
        format!(
            "name: dup\nsteps:\n  - name: ask\n    type: agent\n    provider: openai\n    prompt: Work.\n    max_turns: 10\n    tools: [read_file, write_file]\n    env: {{ OPENAI_BASE_URL: \"{}\", OPENAI_API_KEY: k }}\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    let store = storage.path().join("store");
    let out = bin()
        .arg("run")
        .arg(&workflow)
        .arg("--storage")
        .arg(&store)
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    // The OS's truth: what ran and what did not.
    for (file, content) in [
        ("one.txt", "1"),
        ("two.txt", "2"),
        ("a.txt", "a"),
        ("b.txt", "b"),
    ] {
        assert_eq!(
            std::fs::read_to_string(ws.path().join(file)).unwrap(),
            content,
            "{file}"
        );
    }
    assert!(!ws.path().join("RAN").exists(), "a refused call ran");

    let file = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().is_some_and(|n| n != "audit.jsonl"))
        .unwrap();
    let events = events(&file);
    // id -> (tool name, calls, results)
    let mut by_id: BTreeMap<String, (String, u32, u32)> = BTreeMap::new();
    for e in &events {
        let kind = e["type"].as_str().unwrap();
        if kind == "tool.call" || kind == "tool.result" {
            let p = &e["payload"];
            let entry = by_id
                .entry(p["call_id"].as_str().unwrap().to_owned())
                .or_insert_with(|| (p["name"].as_str().unwrap().to_owned(), 0, 0));
            if kind == "tool.call" {
                entry.1 += 1;
            } else {
                entry.2 += 1;
            }
        }
    }
    let expected: BTreeMap<String, (String, u32, u32)> = [
        ("ask#0/dup", "read_file"),
        ("ask#0/dup~2", "write_file"),
        ("ask#0/ref", "run_command"),
        ("ask#0/ref~2", "write_file"),
        ("ask#0/twin", "write_file"),
        ("ask#0/twin~2", "write_file"),
    ]
    .into_iter()
    .map(|(id, name)| (id.to_owned(), (name.to_owned(), 1, 1)))
    .collect();
    assert_eq!(by_id, expected);
    // The refused call is recorded as refused, the others as run.
    let result_error = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool.result" && e["payload"]["call_id"] == id)
            .map(|e| e["payload"]["error"].clone())
            .unwrap()
    };
    assert!(
        result_error("ask#0/ref")
            .as_str()
            .unwrap()
            .contains("not offered")
            || result_error("ask#0/ref")
                .as_str()
                .unwrap()
                .contains("offer"),
        "{}",
        result_error("ask#0/ref")
    );
    for id in [
        "ask#0/dup",
        "ask#0/dup~2",
        "ask#0/ref~2",
        "ask#0/twin",
        "ask#0/twin~2",
    ] {
        assert!(result_error(id).is_null(), "{id}: {}", result_error(id));
    }
    // The tool_use blocks of the recorded turns carry the same ids.
    let block_ids: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "message.assistant")
        .flat_map(|e| {
            e["payload"]["blocks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["tool_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        block_ids,
        [
            "ask#0/dup",
            "ask#0/dup~2",
            "ask#0/ref",
            "ask#0/ref~2",
            "ask#0/twin",
            "ask#0/twin~2"
        ]
    );

    // `transcript stats` counts every call.
    let stats = bin()
        .arg("stats")
        .arg("--json")
        .arg(&file)
        .output()
        .unwrap();
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["event_types"]["tool.call"], json!(6), "{stats}");
    assert_eq!(stats["event_types"]["tool.result"], json!(6), "{stats}");
    assert_eq!(
        stats["tool_calls"],
        json!({
            "read_file": {"router": 1},
            "write_file": {"router": 4},
            "run_command": {"router": 1}
        }),
        "{stats}"
    );
}
