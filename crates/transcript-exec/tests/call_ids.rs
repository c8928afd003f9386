//! Call ids are unique per run file (#20): Codex numbers its items per
//! execution (`item_1`, …), so without qualification two Codex steps in one
//! run share ids and the seed's jq pairing recipe collapses their calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use transcript_domain::ManualClock;
use transcript_exec::{ExecutionService, Workflow, WorkflowSet};
use transcript_infra::JsonlRecorderFactory;

use support::*;

/// The seed's pairing recipe, grouped by call id: `[call_id, calls, results]`.
const PAIRING: &str = r#"[.[] | select(.type == "tool.call" or .type == "tool.result")]
  | group_by(.payload.call_id)
  | map([.[0].payload.call_id,
         (map(select(.type == "tool.call")) | length),
         (map(select(.type == "tool.result")) | length)])"#;

fn jq(filter: &str, file: &Path) -> Option<Value> {
    let out = std::process::Command::new("jq")
        .args(["-s", "-c", filter])
        .arg(file)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The same computation in Rust (used when jq is not installed, and to
/// check jq's answer).
fn pairing_in_rust(file: &Path) -> Value {
    let mut groups: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for e in decode_all(&std::fs::read(file).unwrap()) {
        if let Some(t) = e.tool() {
            let g = groups.entry(t.call_id.clone()).or_default();
            if e.kind.as_str() == "tool.call" {
                g.0 += 1;
            } else {
                g.1 += 1;
            }
        }
    }
    Value::Array(
        groups
            .into_iter()
            .map(|(id, (c, r))| serde_json::json!([id, c, r]))
            .collect(),
    )
}

#[tokio::test]
async fn two_codex_steps_and_a_loop_give_every_call_its_result() {
    let (_d, ws) = workspace();
    std::fs::write(ws.join("greeting.txt"), "hello world").unwrap();
    let storage = tempfile::tempdir().unwrap();
    let factory = JsonlRecorderFactory::new(storage.path())
        .with_clock(Arc::new(ManualClock::stepping(ts0(), 1)));
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(Arc::new(factory))
        .build()
        .unwrap();
    let replay = fixtures().join("agents/codex-summary.jsonl");
    let agent = |name: &str, indent: &str| {
        format!(
            "{indent}- name: {name}\n{indent}  type: agent\n{indent}  provider: codex\n{indent}  prompt: count\n{indent}  command: [\"cat\", \"{}\"]\n{indent}  sandbox: {{ read: [\"{}\"] }}\n",
            replay.display(),
            replay.parent().unwrap().display()
        )
    };
    let yaml = format!(
        "name: twice\nsteps:\n{}{}  - name: outer\n    type: for_each\n    items: [a, b]\n    steps:\n      - name: inner\n        type: for_each\n        items: [1]\n        steps:\n{}",
        agent("one", "  "),
        agent("two", "  "),
        agent("c", "          "),
    );
    let set = WorkflowSet::new("w.yaml", Workflow::from_yaml(&yaml, "w.yaml").unwrap());
    let out = svc
        .run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    let file = storage.path().join(format!("{}.jsonl", out.run_id));

    let rust = pairing_in_rust(&file);
    let pairs = match jq(PAIRING, &file) {
        Some(v) => {
            assert_eq!(v, rust, "jq and Rust agree");
            v
        }
        None => {
            // Truth from outside the code under test: under CI it must be jq.
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "jq is not installed: under CI=true the seed's recipe must run"
            );
            eprintln!("jq not installed: pairing computed in Rust");
            rust
        }
    };
    let ids: BTreeSet<&str> = pairs
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!((p[1].as_u64(), p[2].as_u64()), (Some(1), Some(1)), "{p}");
            p[0].as_str().unwrap()
        })
        .collect();
    // 4 executions of the same replay: 4 calls, each with its result, the
    // provider's id visible after the step path and iteration. The inner
    // loop's iteration 0 runs once per outer iteration: `~1` keeps it apart.
    assert_eq!(
        ids,
        BTreeSet::from([
            "one#0/item_1",
            "two#0/item_1",
            "outer.inner.c#0/item_1",
            "outer.inner.c#0~1/item_1",
        ])
    );
}
