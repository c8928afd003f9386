//! #57 with the real agent CLIs (Claude Code, Codex, Gemini CLI) run by `transcript run`
//! through their presets against the scripted model server: the CLI reaches its model
//! endpoint (the step ends with the model's final answer), while the shell tool call the
//! model makes, `curl` to a listener the test owns, reaches nothing (the listener's first
//! request is the test's sentinel) and the destination is in the step's `network_refused`.
//!
//! A CLI is found as in `real_agents.rs` ([`AgentCli::require`]): when it is absent a test
//! says "skipped" and passes, unless `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

use common::network::{Listener, refused};

const PROMPT: &str = "Fetch the page of the local listener.";
const FINAL_TEXT: &str = "The listener could not be reached from here.";
/// The proxy's answer to a refused destination (the tool's output the model gets back).
const REFUSAL: &str = "is not in this step's `network:` list";

/// The provider's shell tool running `command` (a plain command: Gemini CLI refuses
/// substitutions).
fn shell_call(cli: AgentCli, command: &str) -> Turn {
    match cli {
        AgentCli::Claude => Turn::tool_call("Bash", json!({"command": command})),
        AgentCli::Codex => Turn::tool_call("exec_command", json!({"cmd": command})),
        AgentCli::Gemini => Turn::tool_call("run_shell_command", json!({"command": command})),
    }
}

/// The `model:` line of the step (Claude Code uses its own default).
fn model_line(cli: AgentCli) -> String {
    match cli {
        AgentCli::Claude => String::new(),
        AgentCli::Codex => "    model: gpt-5.5\n".to_owned(),
        AgentCli::Gemini => format!(
            "    model: {}\n",
            CliOptions::default_model(cli).unwrap_or("gemini-2.5-pro")
        ),
    }
}

fn read_events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The model asks for `curl` to the listener, then answers: the answer arrives, the request
/// does not.
fn the_model_is_reached_and_its_tool_call_is_not(cli: AgentCli) {
    let Some(bin) = cli.require() else {
        return;
    };
    let target = Listener::answering("LEAKED-BODY");
    let command = format!("curl -sS --max-time 10 {}/", target.url());
    let script = Script::new([
        shell_call(cli, &command).with_usage(Usage::new(900, 20)),
        Turn::text(FINAL_TEXT).with_usage(Usage::new(1000, 12)),
    ]);
    let server = ModelServer::start(script).unwrap();
    let sb = AgentSandbox::new().unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    let var = common::step_env_var(cli);
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let workflow = format!(
        "name: net-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
         type: agent\n    provider: {name}\n    timeout_ms: 90000\n    prompt: {prompt}\n\
         {model}    tools: [run_command]\n    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n",
        name = cli.executable(),
        prompt = json!(PROMPT),
        model = model_line(cli),
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
    let events = read_events(&storage.path().join(format!("{run_id}.jsonl")));
    let requests: Vec<String> = server
        .requests()
        .iter()
        .map(|r| format!("#{} {} {} -> {:?}", r.index, r.method, r.path, r.handling))
        .collect();
    let why = format!(
        "{}: {}\nrequests:\n  {}\ntranscript:\n{}",
        cli.executable(),
        common::describe(&output),
        requests.join("\n  "),
        events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The CLI reached its endpoint: both turns were served and the answer is the step's.
    assert!(output.status.success(), "{why}");
    assert_eq!(server.generation_requests().len(), 2, "{why}");
    let done = events
        .iter()
        .find(|e| e["type"] == "step.completed" && e["path"] == "ask")
        .unwrap_or_else(|| panic!("no step.completed\n{why}"));
    assert_eq!(done["payload"]["result"], FINAL_TEXT, "{why}");
    // The tool call ran and got the proxy's refusal, which went back to the model.
    let sent = server.generation_requests()[1].tool_results();
    assert!(
        sent.iter().any(|r| r.contains(REFUSAL)),
        "the tool's output: {sent:?}\n{why}"
    );
    // Nothing reached the listener, and the step names it among its refusals (a CLI may be
    // refused more: Codex also tries its own hosts).
    target.assert_untouched(&why);
    let refused = refused(done);
    assert!(refused.contains(&target.dest()), "{refused:?}\n{why}");
    let url = server.url();
    let model = url.trim_start_matches("http://");
    assert!(
        !refused.iter().any(|d| d == model),
        "the model endpoint {model} was refused: {refused:?}\n{why}"
    );
}

#[test]
fn claude_code_reaches_its_model_but_its_bash_curl_reaches_nothing() {
    the_model_is_reached_and_its_tool_call_is_not(AgentCli::Claude);
}

#[test]
fn codex_reaches_its_model_but_its_shell_curl_reaches_nothing() {
    the_model_is_reached_and_its_tool_call_is_not(AgentCli::Codex);
}

#[test]
fn gemini_cli_reaches_its_model_but_its_shell_curl_reaches_nothing() {
    the_model_is_reached_and_its_tool_call_is_not(AgentCli::Gemini);
}
