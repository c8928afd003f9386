//! #33 item 3: `show` and `stats` say when the two observations of one MCP call (the proxy's
//! `router` record and the agent CLI's `agent_emitted` report) disagree, naming the call id,
//! the tool and what differs; `stats --json` carries them as `mcp_disagreements`. A crafted
//! transcript holds one call whose observations agree, one whose outputs differ, and one the
//! agent never reported. (A real run whose observations agree: `mcp_real_agents.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};

fn crafted(dir: &std::path::Path) -> std::path::PathBuf {
    let run = "3f1c2a7e-0000-4000-8000-000000000331";
    let mut seq = 0;
    let mut line = |kind: &str, path: &str, payload: Value| {
        seq += 1;
        json!({"seq": seq, "run_id": run, "type": kind, "path": path, "iteration": 0,
               "timestamp": format!("2026-06-08T08:14:42.{:03}Z", seq), "payload": payload})
        .to_string()
    };
    let call = |name: &str, id: &str, input: Value, f: &str| json!({"name": name, "call_id": id, "input": input, "output": null, "fidelity": f});
    let result = |name: &str, id: &str, output: Value, f: &str| json!({"name": name, "call_id": id, "input": null, "output": output, "fidelity": f});
    let text = |t: &str| json!({"content": [{"type": "text", "text": t}]});
    let lines = [
        line(
            "run.started",
            "",
            json!({"name": "mcp", "kind": "workflow"}),
        ),
        line(
            "step.started",
            "ask",
            json!({"name": "ask", "kind": "agent"}),
        ),
        // Agrees: the CLI saw the server's text.
        line(
            "tool.call",
            "ask",
            call(
                "mcp__fs__read",
                "toolu_1",
                json!({"p": "a"}),
                "agent_emitted",
            ),
        ),
        line(
            "tool.call",
            "ask",
            call("mcp__fs__read", "ask#0/mcp-1", json!({"p": "a"}), "router"),
        ),
        line(
            "tool.result",
            "ask",
            result("mcp__fs__read", "ask#0/mcp-1", text("alpha"), "router"),
        ),
        line(
            "tool.result",
            "ask",
            result("mcp__fs__read", "toolu_1", json!("alpha"), "agent_emitted"),
        ),
        // Differs: the CLI says it got something else.
        line(
            "tool.call",
            "ask",
            call(
                "mcp__fs__read",
                "toolu_2",
                json!({"p": "b"}),
                "agent_emitted",
            ),
        ),
        line(
            "tool.call",
            "ask",
            call("mcp__fs__read", "ask#0/mcp-2", json!({"p": "b"}), "router"),
        ),
        line(
            "tool.result",
            "ask",
            result("mcp__fs__read", "ask#0/mcp-2", text("beta"), "router"),
        ),
        line(
            "tool.result",
            "ask",
            result("mcp__fs__read", "toolu_2", json!("gamma"), "agent_emitted"),
        ),
        // Not reported by the CLI at all.
        line(
            "tool.call",
            "ask",
            call("mcp__fs__list", "ask#0/mcp-3", json!({}), "router"),
        ),
        line(
            "tool.result",
            "ask",
            result("mcp__fs__list", "ask#0/mcp-3", text("[]"), "router"),
        ),
        line(
            "step.completed",
            "ask",
            json!({"name": "ask", "kind": "agent"}),
        ),
        line(
            "run.completed",
            "",
            json!({"name": "mcp", "kind": "workflow"}),
        ),
    ];
    let path = dir.join(format!("{run}.jsonl"));
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

#[test]
fn stats_json_and_text_name_each_call_whose_observations_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let file = crafted(dir.path());
    let out = common::bin()
        .args(["stats", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = stats["mcp_disagreements"].as_array().unwrap();
    assert_eq!(d.len(), 2, "{stats:#}");
    assert_eq!(d[0]["router_call_id"], "ask#0/mcp-2");
    assert_eq!(d[0]["agent_call_id"], "toolu_2");
    assert_eq!(d[0]["tool"], "mcp__fs__read");
    assert_eq!(d[0]["disagreement"], "output_differs");
    assert!(d[0]["router_output"].as_str().unwrap().contains("beta"));
    assert_eq!(d[0]["agent_output"], "\"gamma\"");
    assert_eq!(d[1]["router_call_id"], "ask#0/mcp-3");
    assert_eq!(d[1]["disagreement"], "not_reported_by_agent");
    assert_eq!(d[1]["agent_call_id"], Value::Null);

    let out = common::bin().arg("stats").arg(&file).output().unwrap();
    let text = common::text(&out.stdout);
    assert!(
        text.contains("MCP calls whose two observations disagree"),
        "{text}"
    );
    assert!(
        text.contains("ask #0 mcp__fs__read ask#0/mcp-2 (agent toolu_2): outputs differ"),
        "{text}"
    );
    assert!(
        text.contains("ask #0 mcp__fs__list ask#0/mcp-3: the agent did not report this call"),
        "{text}"
    );
    assert!(
        !text.contains("mcp-1"),
        "an agreeing call is not reported\n{text}"
    );
}

#[test]
fn show_ends_with_the_calls_whose_observations_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let file = crafted(dir.path());
    let out = common::bin().arg("show").arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let text = common::text(&out.stdout);
    let at = text
        .find("MCP calls whose two observations (proxy, agent) disagree:")
        .unwrap_or_else(|| panic!("{text}"));
    let section = &text[at..];
    assert!(
        section.contains("mcp__fs__read ask#0/mcp-2 (agent toolu_2): outputs differ"),
        "{text}"
    );
    assert!(
        section.contains("mcp__fs__list ask#0/mcp-3: the agent did not report"),
        "{text}"
    );
    assert!(!section.contains("mcp-1"), "{text}");
}

#[test]
fn a_transcript_whose_observations_agree_reports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = crafted(dir.path());
    let text = std::fs::read_to_string(&file).unwrap();
    // Keep the agreeing call only.
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("mcp-2") && !l.contains("mcp-3") && !l.contains("toolu_2"))
        .collect();
    std::fs::write(&file, kept.join("\n") + "\n").unwrap();
    let out = common::bin()
        .args(["stats", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["mcp_disagreements"], json!([]));
    let out = common::bin().arg("show").arg(&file).output().unwrap();
    assert!(!common::text(&out.stdout).contains("disagree"));
}

/// The documented example (`examples/mcp-servers/workflow.yaml`) loads and validates as the
/// runner would (`WorkflowSet::load`, then the checks `transcript run` makes).
#[test]
fn the_mcp_servers_example_validates() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/mcp-servers/workflow.yaml");
    let set = transcript_exec::WorkflowSet::load(&example).unwrap();
    set.validate(&|_| false).unwrap();
    let root = set.root().unwrap();
    let transcript_exec::StepKind::Agent(agent) = &root.steps[0].kind else {
        panic!("an agent step")
    };
    assert_eq!(agent.mcp_servers.len(), 1);
    assert_eq!(agent.mcp_servers[0].name, "everything");
}
