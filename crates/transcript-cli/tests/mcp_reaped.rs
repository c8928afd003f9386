//! #40 item 4 through the binary with the real Gemini CLI against the scripted model server:
//! the step's stdio MCP server escapes its process group before it serves (a `setsid` child
//! and a double fork, each `sleep <tag>` with a tag unique to this test run), like a daemonizing
//! server would. A later command step of the same run finds neither in the process table (they
//! ended with the agent step), and after the run `/proc` holds none (see `no_pid_survives.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use serde_json::json;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

fn fault_server() -> PathBuf {
    common::mcp_fault_server()
}

/// The pids whose command line is exactly `sleep <tag>`.
fn sleeping(tag: &str) -> Vec<u32> {
    let want = format!("sleep\0{tag}\0");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == want.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// A tag unique to this test process: `sleep` parses it as seconds.
fn tag(n: u32) -> String {
    format!("{}{n:02}.25", 4000 + std::process::id() % 1000)
}

#[test]
fn a_stdio_server_that_escapes_its_group_is_killed_at_step_end() {
    let cli = AgentCli::Gemini;
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = AgentSandbox::new().unwrap();
    let server = ModelServer::start(Script::new([
        Turn::text("Done.").with_usage(Usage::new(100, 5))
    ]))
    .unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    let tags = [tag(1), tag(2)];
    // The server's escapees hold none of its stdio (the MCP pipe stays the server's).
    let wrapper = sb.tmp().join("escaping-server.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsetsid sleep {a} </dev/null >/dev/null 2>&1 &\n\
             sh -c '(sleep {b} </dev/null >/dev/null 2>&1 &) &' </dev/null >/dev/null 2>&1\n\
             until pgrep -xf 'sleep {a}' >/dev/null && pgrep -xf 'sleep {b}' >/dev/null; do sleep 0.01; done\n\
             exec '{server}'\n",
            a = tags[0],
            b = tags[1],
            server = fault_server().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let var = "GOOGLE_GEMINI_BASE_URL";
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let workflow = format!(
        "name: escape\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
         provider: gemini\n    model: gemini-2.5-pro\n    timeout_ms: 120000\n    \
         prompt: Say done.\n    tools: [mcp__fault__echo]\n    env:\n      \
         {var}: \"{{{{inputs.endpoint}}}}\"\n    mcp_servers: [{{name: fault, command: {}}}]\n    \
         sandbox: {{ read: [{}] }}\n  \
         - name: gone\n    type: command\n    command: [\"sh\", \"-c\", \"for t in \\\"$@\\\"; do \
         if pgrep -xf \\\"sleep $t\\\" >/dev/null; then echo \\\"sleep $t survived its step\\\" >&2; \
         exit 1; fi; done\", \"sh\", \"{}\", \"{}\"]\n",
        json!(wrapper.display().to_string()),
        json!(fault_server().parent().unwrap().display().to_string()),
        tags[0],
        tags[1],
    );
    let (storage, run_id, output) = common::RealCliRun {
        workflow: &workflow,
        dir: &sb.tmp(),
        workspace: &sb.work(),
        env: &inv.env,
        step_var: var,
        bin: (cli.bin_var(), &bin),
        endpoint: &endpoint,
    }
    .run();
    let survivors: Vec<(String, Vec<u32>)> = tags
        .iter()
        .map(|t| (t.clone(), sleeping(t)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    // Test hygiene only: what a failed assertion would leave behind.
    for (_, pids) in &survivors {
        for pid in pids {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
    let transcript =
        std::fs::read_to_string(storage.path().join(format!("{run_id}.jsonl"))).unwrap_or_default();
    let why = format!(
        "{workflow}\nexit {:?}\nstderr:\n{}\ntranscript:\n{transcript}",
        output.status.code(),
        common::text(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{why}");
    assert!(
        survivors.is_empty(),
        "processes of the run outlived it: {survivors:?}\n{why}"
    );
}
