//! A message of many large blocks on NATS storage (#44): exec caps each value so that two of
//! them fit one message, but an agent turn carrying four large tool results (terminal output
//! full of control bytes, 6× once escaped) made a line over the servers' `max_payload`, and
//! the run failed with exit 4 where file storage succeeds. The runner now gives exec the
//! servers' `max_payload` as the line budget too, so such a message is cut further (exec's
//! marker) and the run succeeds. Truth: the servers' setting (default 1 MiB), the bytes the
//! fixture holds, and the lines the mirror writes.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, text};
use transcript_nats::testing;

/// Results in the one user turn, and control bytes in each (`\u0001` in JSON: 6 bytes each).
const RESULTS: usize = 4;
const BYTES_EACH: usize = 200_000;

/// A Claude stream: four Bash calls, one user turn with their four large results, a reply.
fn claude_stream(dir: &Path) -> std::path::PathBuf {
    let uses: Vec<String> = (0..RESULTS)
        .map(|i| {
            format!(
                r#"{{"type":"tool_use","id":"toolu_{i}","name":"Bash","input":{{"command":"cat log{i}"}}}}"#
            )
        })
        .collect();
    let body = "\\u0001".repeat(BYTES_EACH);
    let results: Vec<String> = (0..RESULTS)
        .map(|i| {
            format!(
                r#"{{"tool_use_id":"toolu_{i}","type":"tool_result","content":"{body}","is_error":false}}"#
            )
        })
        .collect();
    let lines = [
        r#"{"type":"system","subtype":"init","session_id":"s","model":"claude-demo-1","tools":["Bash"],"uuid":"c-0"}"#.to_owned(),
        format!(
            r#"{{"type":"assistant","message":{{"id":"m1","model":"claude-demo-1","role":"assistant","content":[{}],"usage":{{"input_tokens":5,"output_tokens":7}}}},"session_id":"s","uuid":"c-1"}}"#,
            uses.join(",")
        ),
        format!(
            r#"{{"type":"user","message":{{"role":"user","content":[{}]}},"session_id":"s","uuid":"c-2"}}"#,
            results.join(",")
        ),
        r#"{"type":"assistant","message":{"id":"m2","model":"claude-demo-1","role":"assistant","content":[{"type":"text","text":"Four logs read."}],"usage":{"input_tokens":9,"output_tokens":3}},"session_id":"s","uuid":"c-3"}"#.to_owned(),
        r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"Four logs read.","session_id":"s","uuid":"c-4"}"#.to_owned(),
    ];
    let path = dir.join("logs.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn run(dir: &Path, storage: &str, stream: &Path) -> std::process::Output {
    let workflow = dir.join("logs.yaml");
    std::fs::write(
        &workflow,
        format!(
            "name: logs\nsteps:\n  - name: read\n    type: agent\n    provider: claude\n    command: [\"cat\", \"{}\"]\n    prompt: \"Read the logs.\"\n",
            stream.display()
        ),
    )
    .unwrap();
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    bin()
        .current_dir(dir)
        .args(["run", "--deterministic", "--storage", storage])
        .arg(&workflow)
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap()
}

#[test]
fn a_turn_of_many_large_blocks_fits_the_servers_max_payload() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let max_payload = 1 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let stream = claude_stream(tmp.path());
    let files = tmp.path().join("files");
    let o = run(tmp.path(), files.to_str().unwrap(), &stream);
    assert!(o.status.success(), "on files: {}", text(&o.stderr));
    let url = server.url();
    let o = run(tmp.path(), &url, &stream);
    assert!(o.status.success(), "on NATS: {}", text(&o.stderr));

    let mirror = tmp.path().join("mirror");
    let m = bin()
        .args(["mirror", &url, "--to"])
        .arg(&mirror)
        .output()
        .unwrap();
    assert!(m.status.success(), "{}", text(&m.stderr));
    let run_file = std::fs::read_dir(&mirror).unwrap().next().unwrap().unwrap();
    let bytes = std::fs::read(run_file.path()).unwrap();
    let mut turns = 0;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        assert!(line.len() < max_payload, "a line of {} bytes", line.len());
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        let results: Vec<&serde_json::Value> = v["payload"]["blocks"]
            .as_array()
            .map(|b| b.iter().filter(|b| b["type"] == "tool_result").collect())
            .unwrap_or_default();
        if results.len() == RESULTS {
            turns += 1;
            for block in results {
                let content = block["tool_content"].as_str().unwrap();
                assert!(
                    content.contains("…[truncated: "),
                    "{}",
                    &content[content.len() - 100..]
                );
            }
        }
    }
    assert_eq!(turns, 1, "the turn with its {RESULTS} results");
    let v = bin().arg("validate").arg(run_file.path()).output().unwrap();
    assert!(v.status.success(), "{}", text(&v.stdout));
}
