//! A templated prompt (and system prompt) that starts with `-` stays a prompt for every preset
//! (#28 item 5), checked against the real CLIs' own argument parsers: Claude Code, Codex and
//! Gemini CLI run by `transcript run` through their presets against the testkit's scripted
//! model server, and the model must receive the text. Before, Claude Code read `-p --version`
//! as its `--version` flag and Gemini CLI read `--prompt --version …` as flags too.
//!
//! A CLI that is not installed is skipped with a message (unless `TRANSCRIPT_REQUIRE_AGENTS=1`
//! or `CI=true`, see `AgentCli::require`). Each step has a 60 s timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn};

/// Looks like flags to every CLI; the canaries show it reached the model as text.
const PROMPT: &str = "--version --help -p CANARY-PROMPT-7f3";
const SYSTEM: &str = "-v --yolo CANARY-SYSTEM-91c";

fn a_dash_prompt_reaches_the_model(cli: AgentCli) {
    let Some(bin) = cli.require() else {
        return;
    };
    let server = ModelServer::start(Script::new([Turn::text("ok")])).unwrap();
    let sb = AgentSandbox::new().unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    let var = common::step_env_var(cli);
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let model = match cli {
        AgentCli::Claude => String::new(),
        AgentCli::Codex => "    model: gpt-5.5\n".to_owned(),
        AgentCli::Gemini => format!(
            "    model: {}\n",
            CliOptions::default_model(cli).unwrap_or("gemini-2.5-pro")
        ),
    };
    let workflow = format!(
        "name: dash-{name}\ninputs:\n  - name: endpoint\n  - name: p\n  - name: s\nsteps:\n  - name: ask\n    \
         type: agent\n    provider: {name}\n    timeout_ms: 60000\n    prompt: \"{{{{inputs.p}}}}\"\n    \
         system_prompt: \"{{{{inputs.s}}}}\"\n{model}    env:\n      {var}: \"{endpoint}\"\n",
        name = cli.executable(),
    );
    let wf = sb.tmp().join("workflow.yaml");
    std::fs::write(&wf, &workflow).unwrap();
    let storage = tempfile::tempdir().unwrap();
    let output = common::bin()
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(
            inv.env
                .iter()
                .filter(|(k, _)| k != var)
                .map(|(k, v)| (k, v)),
        )
        .env(cli.bin_var(), &bin)
        .arg("run")
        .arg(&wf)
        .arg("--storage")
        .arg(storage.path())
        .arg("--workspace")
        .arg(sb.work())
        .arg("--input")
        .arg(format!("endpoint={endpoint}"))
        .arg("--input")
        .arg(format!("p={PROMPT}"))
        .arg("--input")
        .arg(format!("s={SYSTEM}"))
        .output()
        .unwrap();
    let requests = server.requests();
    let generation: Vec<&Value> = requests
        .iter()
        .filter(|r| r.is_generation())
        .filter_map(|r| r.body.as_ref())
        .collect();
    let why = format!(
        "{}: exit {:?}\nstderr:\n{}\nrequests: {:?}",
        cli.executable(),
        output.status.code(),
        common::text(&output.stderr),
        requests
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
    assert!(output.status.success(), "{why}");
    let sent = json!(generation).to_string();
    assert!(
        sent.contains("--version --help -p CANARY-PROMPT-7f3"),
        "{why}"
    );
    assert!(sent.contains("-v --yolo CANARY-SYSTEM-91c"), "{why}");
}

#[test]
fn claude_code_keeps_a_dash_prompt_a_prompt() {
    a_dash_prompt_reaches_the_model(AgentCli::Claude);
}

#[test]
fn codex_keeps_a_dash_prompt_a_prompt() {
    a_dash_prompt_reaches_the_model(AgentCli::Codex);
}

#[test]
fn gemini_cli_keeps_a_dash_prompt_a_prompt() {
    a_dash_prompt_reaches_the_model(AgentCli::Gemini);
}
