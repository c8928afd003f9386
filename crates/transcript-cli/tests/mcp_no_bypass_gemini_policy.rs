//! #41 item 8, the mechanism: Gemini CLI 0.61 says "--allowed-tools cli argument and
//! tools.allowed in settings.json are deprecated and will be removed in 1.0: Migrate to Policy
//! Engine". The Policy Engine reads TOML files (`--policy <file>`). Through the binary, a
//! Gemini step whose command line carries the policy file that
//! `transcript_exec::Preset::policy_toml` writes for `tools: [run_command]`, against the scripted
//! model server: the allowed shell command runs, an unlisted tool (`write_file`) is refused,
//! and no deprecation warning is printed (the CLI's stderr, kept by a wrapper, and the
//! transcript); the same step with `--allowed-tools` prints it.
//! The preset now writes that file (0600, in the step's private directory) and passes
//! `--policy=<file>` itself: `real_agents.rs::gemini_preset_confines_its_tools_by_policy_without_the_deprecation_warning`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};
use transcript_exec::Preset;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

/// Runs a Gemini step whose command line ends with `confine` (the tool options); the model
/// runs a shell command, then tries to write a file. The binary's output and the transcript.
fn run(confine: &dyn Fn(&std::path::Path) -> Vec<String>) -> Option<(AgentSandbox, String)> {
    let cli = AgentCli::Gemini;
    let bin = cli.require()?;
    let sb = AgentSandbox::new().unwrap();
    let script = Script::new([
        Turn::tool_call("run_shell_command", json!({"command": "touch ran.txt"}))
            .with_usage(Usage::new(100, 10)),
        Turn::tool_call(
            "write_file",
            json!({"file_path": "written.txt", "content": "should not be"}),
        )
        .with_usage(Usage::new(100, 10)),
        Turn::text("Done.").with_usage(Usage::new(100, 5)),
    ]);
    let server = ModelServer::start(script).unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    // The CLI's stderr (where Gemini CLI prints its warnings) kept in a file.
    let stderr_log = sb.tmp().join("gemini-stderr.log");
    let wrapper = sb.tmp().join("gemini-wrapper.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\" 2>>'{}'\n",
            bin.display(),
            stderr_log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut command = vec![
        wrapper.display().to_string(),
        "--output-format".into(),
        "stream-json".into(),
        "--skip-trust".into(),
        "--model=gemini-2.5-pro".into(),
    ];
    command.extend(confine(&sb.tmp()));
    command.push("--prompt=Run it.".into());
    let workflow = format!(
        "name: policy\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
         provider: gemini\n    timeout_ms: 120000\n    prompt: Run it.\n    command: {}\n    \
         env:\n      GOOGLE_GEMINI_BASE_URL: \"{{{{inputs.endpoint}}}}\"\n    \
         sandbox: {{ write: [{}], read: [{}] }}\n",
        json!(command),
        // The wrapper's stderr log and the policy file live in the sandbox's tmp, and the
        // wrapper runs the CLI from its npm tree (#56: the step declares both).
        json!(sb.tmp().display().to_string()),
        json!(
            bin.parent()
                .and_then(|b| b.parent())
                .unwrap()
                .display()
                .to_string()
        )
    );
    let endpoint = server.url();
    let (storage, run_id, output) = common::RealCliRun {
        workflow: &workflow,
        dir: &sb.tmp(),
        workspace: &sb.work(),
        env: &inv.env,
        step_var: "GOOGLE_GEMINI_BASE_URL",
        bin: (cli.bin_var(), &bin),
        endpoint: &endpoint,
    }
    .run();
    let transcript =
        std::fs::read_to_string(storage.path().join(format!("{run_id}.jsonl"))).unwrap();
    let all = format!(
        "{workflow}\nexit {:?}\nCLI stderr:\n{}\nstdout:\n{}\nstderr:\n{}\ntranscript:\n{transcript}",
        output.status.code(),
        std::fs::read_to_string(&stderr_log).unwrap_or_default(),
        common::text(&output.stdout),
        common::text(&output.stderr)
    );
    let completed: Vec<Value> = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "step.completed")
        .collect();
    assert_eq!(completed.len(), 1, "{all}");
    Some((sb, all))
}

#[test]
fn gemini_is_confined_by_a_policy_file_without_the_deprecation_warning() {
    let policy = |dir: &std::path::Path| {
        let text = Preset::Gemini
            .policy_toml(&["run_command".to_owned()])
            .unwrap()
            .unwrap();
        let file = dir.join("policy.toml");
        std::fs::write(&file, text).unwrap();
        vec![format!("--policy={}", file.display())]
    };
    let Some((sb, all)) = run(&policy) else {
        return;
    };
    assert!(sb.work().join("ran.txt").exists(), "{all}");
    assert!(!sb.work().join("written.txt").exists(), "{all}");
    assert!(!all.contains("deprecated"), "{all}");
}

#[test]
fn the_deprecated_allowed_tools_option_prints_its_warning() {
    let flag = |_: &std::path::Path| vec!["--allowed-tools=run_shell_command".to_owned()];
    let Some((sb, all)) = run(&flag) else {
        return;
    };
    assert!(sb.work().join("ran.txt").exists(), "{all}");
    assert!(!sb.work().join("written.txt").exists(), "{all}");
    assert!(all.contains("deprecated"), "{all}");
}
