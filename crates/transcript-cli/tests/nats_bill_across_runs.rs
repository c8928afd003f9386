//! One request, one bill across runs on NATS storage too (#51): a workflow whose agent step
//! replays a real Claude Code session log
//! (`$TRANSCRIPT_REAL_FIXTURES/claude-code/spotter-session-log-v2.1.38-subagent.jsonl`) runs
//! twice into a real nats-server and twice into a directory. Both runs carry the same requests
//! (`request_id` = `<message.id>/<requestId>`): `receipts --by day` bills them once, the same
//! on NATS (from the runs index) as on files, equal to jq's bill over the log's distinct
//! requests, and says how many turns it set aside.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{bin, text};
use serde_json::Value;
use transcript_nats::testing;

/// jq's tokens over the log's distinct requests (`message.id/requestId`, the last streamed
/// copy of each): `[requests, input, output, cache read, cache write]`.
const TRUTH: &str = r#"
[inputs | select(.type == "assistant" and .message.usage != null)
 | {k: (.message.id + "/" + (.requestId // "")), u: .message.usage}]
| group_by(.k) | map(max_by(.u.output_tokens) | .u)
| [length, (map(.input_tokens // 0) | add), (map(.output_tokens // 0) | add),
   (map(.cache_read_input_tokens // 0) | add), (map(.cache_creation_input_tokens // 0) | add)]
"#;

fn ok(mut c: Command) -> String {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout) + &text(&o.stderr)
}

/// `receipts --by day --json` over `storage`: `[requests, input, output, cache read, cache
/// write]` summed over the groups, the duplicates set aside, and the whole answer.
fn bill(storage: &str) -> (Vec<u64>, u64, String) {
    let mut c = bin();
    c.args(["receipts", "--by", "day", "--json", "--storage", storage]);
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = r["groups"].as_array().unwrap();
    let sum = |f: &dyn Fn(&Value) -> u64| groups.iter().map(f).sum::<u64>();
    let mut totals = vec![sum(&|g| g["turns"].as_u64().unwrap())];
    for k in [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ] {
        totals.push(sum(&|g| g["usage"][k].as_u64().unwrap_or(0)));
    }
    let duplicates = r["duplicates"].as_u64().unwrap();
    assert!(
        err.contains(&format!("note: {duplicates} duplicate turn(s) set aside")),
        "{err}"
    );
    (totals, duplicates, text(&out.stdout))
}

#[test]
fn two_runs_replaying_one_session_bill_it_once_on_nats_as_on_files() {
    let Some(log) =
        common::real_fixture("claude-code", "spotter-session-log-v2.1.38-subagent.jsonl")
    else {
        return;
    };
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let wf = tmp.path().join("replay.yaml");
    std::fs::write(
        &wf,
        format!(
            "name: replay\nsteps:\n  - name: ask\n    type: agent\n    provider: claude\n    \
             command: [\"cat\", {}]\n    prompt: Replay.\n",
            serde_json::to_string(&log.display().to_string()).unwrap()
        ),
    )
    .unwrap();
    let nats = format!("{}/BILL", server.url());
    let files = tmp.path().join("files").display().to_string();
    for storage in [&nats, &files] {
        for i in 0..2 {
            let ws = tmp.path().join(format!("ws-{}-{i}", storage.len()));
            std::fs::create_dir_all(&ws).unwrap();
            let mut c = bin();
            // On NATS the audit trail goes to the default directory: the test's own.
            c.current_dir(tmp.path())
                .args(["run", "--storage", storage, "--workspace"])
                .arg(&ws)
                .arg(&wf);
            ok(c);
        }
    }
    let jq = Command::new("jq")
        .args(["-n", "-c", TRUTH])
        .arg(Path::new(&log))
        .output()
        .expect("jq is installed");
    assert!(jq.status.success(), "{}", text(&jq.stderr));
    let truth: Vec<u64> = serde_json::from_slice(&jq.stdout).unwrap();
    let (on_nats, dup_nats, answer) = bill(&nats);
    let (on_files, dup_files, _) = bill(&files);
    assert_eq!(on_nats, truth, "NATS vs jq: {answer}");
    assert_eq!(on_files, truth, "files vs jq");
    // The second run's copy of every request was set aside.
    assert_eq!(dup_nats, truth[0], "{answer}");
    assert_eq!(dup_files, dup_nats);
}
