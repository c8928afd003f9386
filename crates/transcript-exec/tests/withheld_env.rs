//! `ServiceBuilder::withheld_env` and `PluginLimits::withheld_env` (hardening of #44): every
//! process the engine starts (a shell and an argv command step, `run_command`, a CLI agent, a
//! plugin) is spawned without the withheld variables of the runner's environment; a step that
//! sets one in its own `env:` keeps its value; without the setting nothing changes. `HOME`
//! stands for the runner's own variable (set in every test process; this crate forbids
//! `unsafe`, so the test does not set one of its own). The end-to-end proof with a real NATS
//! server and its token is the cli's `nats_env_withheld.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use serde_json::Map;
use tokio_util::sync::CancellationToken;
use transcript_exec::{
    ExecutionService, ExternalPlugin, PluginLimits, ToolRouter, WithheldEnv, Workflow, WorkflowSet,
};

use support::*;

const YAML: &str = r#"
name: w
steps:
  - name: shell
    type: command
    command: 'printf %s "${HOME-withheld}" > shell.txt'
  - name: argv
    type: command
    command: ["sh", "-c", "printf %s \"${HOME-withheld}\" > argv.txt"]
  - name: tool
    type: operation
    tool: run_command
    input: { command: 'printf %s "${HOME-withheld}" > tool.txt' }
  - name: agent
    type: agent
    provider: claude
    prompt: hi
    command: ["sh", "-c", "printf %s \"${HOME-withheld}\" > agent.txt; exit 3"]
    continue_on_error: true
  - name: own
    type: command
    env: { HOME: /own-home }
    command: 'printf %s "$HOME" > own.txt'
"#;

fn read(ws: &Path, name: &str) -> String {
    std::fs::read_to_string(ws.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn run(ws: &Path, withheld: Option<WithheldEnv>) {
    run_in(
        ws,
        withheld,
        transcript_exec::sandbox::SandboxPolicy::confined(),
    )
    .await;
}

async fn run_in(
    ws: &Path,
    withheld: Option<WithheldEnv>,
    sandbox: transcript_exec::sandbox::SandboxPolicy,
) {
    let mut builder = ExecutionService::deterministic_builder(ws, ts0()).sandbox(sandbox);
    if let Some(withheld) = withheld {
        builder = builder.withheld_env(withheld);
    }
    let set = WorkflowSet::new("w.yaml", Workflow::from_yaml(YAML, "w.yaml").unwrap());
    let out = builder
        .build()
        .unwrap()
        .run(&set, Map::new(), CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
}

#[tokio::test]
async fn no_process_of_a_run_inherits_a_withheld_variable_unless_its_step_sets_it() {
    let home = std::env::var("HOME").expect("HOME is set");
    let (_d, ws) = workspace();
    run(&ws, Some(WithheldEnv::new(["HOME"]))).await;
    for shape in ["shell", "argv", "tool", "agent"] {
        assert_eq!(read(&ws, &format!("{shape}.txt")), "withheld", "{shape}");
    }
    assert_eq!(read(&ws, "own.txt"), "/own-home");

    // Without the setting, unconfined, every process inherits it as before.
    let (_d2, ws2) = workspace();
    run_in(&ws2, None, transcript_exec::sandbox::SandboxPolicy::off()).await;
    for shape in ["shell", "argv", "tool", "agent"] {
        assert_eq!(read(&ws2, &format!("{shape}.txt")), home, "{shape}");
    }
    // Confined (#56), a command's HOME is its private temporary directory (the runner's is
    // not its to read); an agent CLI keeps the runner's (its state lives there).
    let (_d3, ws3) = workspace();
    run(&ws3, None).await;
    for shape in ["shell", "argv", "tool"] {
        let got = read(&ws3, &format!("{shape}.txt"));
        assert!(got.contains("transcript-step-"), "{shape}: {got}");
    }
    assert_eq!(read(&ws3, "agent.txt"), home);
}

#[tokio::test]
async fn a_plugin_does_not_inherit_a_withheld_variable() {
    let (_d, ws) = workspace();
    let script = format!(
        "printf %s \"${{HOME-withheld}}\" > '{}/plugin.txt'; read line; \
         echo '{{\"id\":1,\"result\":{{\"name\":\"p\",\"protocol\":1,\"operations\":[\"op\"]}}}}'; cat >/dev/null",
        ws.display()
    );
    let argv = vec!["sh".to_owned(), "-c".to_owned(), script];
    let limits = PluginLimits::withholding(WithheldEnv::new(["HOME"]));
    let plugin = ExternalPlugin::start_with(&argv, None, limits)
        .await
        .unwrap();
    let mut router = ToolRouter::with_builtins();
    router.register_plugin(std::sync::Arc::new(plugin)).unwrap();
    assert_eq!(read(&ws, "plugin.txt"), "withheld");
}
