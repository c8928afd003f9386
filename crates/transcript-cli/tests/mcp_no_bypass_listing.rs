//! #40 item 2 through the binary with the real CLIs: the step's MCP server answers `tools/list`
//! with a `nextCursor` on every page (the fault server's `TRANSCRIPT_MCP_FAULT_LIST=endless`).
//! The proxy stops at its page cap and answers the CLI with a JSON-RPC error; each CLI goes on
//! without that server's tools (the run ends, successfully, long before the step's timeout),
//! and the transcript holds the proxy's `tools/list` diagnostic saying why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

fn fault_server() -> PathBuf {
    common::mcp_fault_server()
}

fn endless_list(cli: AgentCli) {
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
    let var = match cli {
        AgentCli::Claude => "ANTHROPIC_BASE_URL",
        AgentCli::Codex => "CODEX_HOME",
        AgentCli::Gemini => "GOOGLE_GEMINI_BASE_URL",
    };
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let model = match cli {
        AgentCli::Claude => String::new(),
        AgentCli::Codex => "    model: gpt-5.5\n".to_owned(),
        AgentCli::Gemini => "    model: gemini-2.5-pro\n".to_owned(),
    };
    let workflow = format!(
        "name: endless-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
         type: agent\n    provider: {name}\n    timeout_ms: 120000\n    \
         prompt: Say done.\n{model}    tools: [mcp__fault__echo]\n    env:\n      \
         {var}: \"{{{{inputs.endpoint}}}}\"\n    mcp_servers: [{{name: fault, command: {}, \
         env: {{TRANSCRIPT_MCP_FAULT_LIST: endless}}}}]\n",
        json!(fault_server().display().to_string()),
        name = cli.executable(),
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
    let text = std::fs::read_to_string(storage.path().join(format!("{run_id}.jsonl"))).unwrap();
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let why = format!(
        "{workflow}\nexit {:?}\nstderr:\n{}\ntranscript:\n{text}",
        output.status.code(),
        common::text(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{why}");
    let diagnostics: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool.result" && e["payload"]["name"] == "tools/list")
        .map(|e| &e["payload"])
        .collect();
    assert!(!diagnostics.is_empty(), "{why}");
    for d in &diagnostics {
        assert_eq!(d["fidelity"], "router", "{why}");
        let error = d["error"].as_str().unwrap_or_default();
        assert!(error.contains("more than 100 pages"), "{error}\n{why}");
    }
    // No request offered the server's tools to the model.
    for r in server.generation_requests() {
        assert!(
            !r.raw_body.contains("mcp__fault") && !r.raw_body.contains("mcp_fault_"),
            "{why}"
        );
    }
}

#[test]
fn claude_code_goes_on_without_a_server_whose_list_never_ends() {
    endless_list(AgentCli::Claude);
}

#[test]
fn codex_goes_on_without_a_server_whose_list_never_ends() {
    endless_list(AgentCli::Codex);
}

#[test]
fn gemini_cli_goes_on_without_a_server_whose_list_never_ends() {
    endless_list(AgentCli::Gemini);
}
