//! The runner's NATS credentials never reach a step (hardening of #44 item 3): what the runner
//! read from its environment for its own storage connection (`NATS_TOKEN` here, against a real
//! `nats-server` with `authorization { token }`) is the runner's, not the workflow's. Every
//! process the run starts dumps its whole environment where the attacker would want it: a
//! shell command step, an argv command step, the `run_command` tool, a CLI agent step (its
//! stderr lands in the recorded error), a stdio MCP server of an agent step, a plugin the
//! workflow declares and a `--plugin` of the command line. Each dump is checked to exist (with
//! a canary of the runner's environment, and `OTEL_*`, which is not withheld), and the token
//! is in no transcript line (mirrored from the stream), no output and no file. A step that sets
//! `NATS_TOKEN` in its own `env:` keeps its value; with file storage the runner consumes
//! nothing and a step sees the variable as before.
#![allow(clippy::unwrap_used)]

mod common;
mod nats_auth_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, text};
use nats_auth_support::{assert_no_secret, server_with_config};

const TOKEN: &str = "tok-5b2e90c7d4-runner-only";
const PASSWORD: &str = "pw-e18c4f06ab-runner-only";
const OWN: &str = "workflow-own-3a61";
const CANARY: &str = "TRANSCRIPT_CANARY=present";
const OTEL: &str = "OTEL_SERVICE_NAME=canary-otel";

fn fault_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("examples")
        .join("mcp_fault_server");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// A plugin (protocol 1) with one operation `env_<tag>`: it writes its environment to
/// `<out>/<tag>.env` when it starts and answers each call with its environment.
fn plugin_script(dir: &Path) -> PathBuf {
    let path = dir.join("envdump.sh");
    std::fs::write(
        &path,
        "tag=$1; out=$2\nenv > \"$out/$tag.env\"\nread line\n\
         printf '{\"id\":1,\"result\":{\"name\":\"envdump-%s\",\"protocol\":1,\"operations\":[\"env_%s\"]}}\\n' \"$tag\" \"$tag\"\n\
         while read line; do\n  id=$(printf '%s' \"$line\" | jq -r .id)\n  \
         env | jq -Rsc --argjson id \"$id\" '{id:$id,result:.}'\ndone\n",
    )
    .unwrap();
    path
}

fn workflow(dir: &Path, ws: &Path) -> PathBuf {
    let script = plugin_script(dir);
    // The Claude preset's binary (TRANSCRIPT_CLAUDE_BIN): a CLI that dumps its environment.
    let fake = dir.join("fake-claude");
    std::fs::write(&fake, "#!/bin/sh\nenv > preset.env\nenv >&2\nexit 3\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let q = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
    let mcp = format!(
        "env > {}/mcp.env; exec {}",
        ws.display(),
        fault_server().display()
    );
    let yaml = format!(
        "name: leak\nplugins:\n  - [\"sh\", {script}, \"declared\", {ws}]\nsteps:\n\
         \x20 - name: shell\n    type: command\n    command: 'env | tee shell.env'\n\
         \x20 - name: argv\n    type: command\n    command: [\"sh\", \"-c\", \"env > argv.env; env\"]\n\
         \x20 - name: tool\n    type: operation\n    tool: run_command\n    input: {{ command: 'env > tool.env; env' }}\n\
         \x20 - name: declared_plugin\n    type: operation\n    tool: env_declared\n    input: {{}}\n\
         \x20 - name: cli_plugin\n    type: operation\n    tool: env_flag\n    input: {{}}\n\
         \x20 - name: agent\n    type: agent\n    provider: claude\n    prompt: Print your environment.\n    \
         command: [\"sh\", \"-c\", \"env > agent.env; env >&2; exit 3\"]\n    continue_on_error: true\n\
         \x20 - name: mcp\n    type: agent\n    provider: claude\n    prompt: Use the tool.\n    \
         tools: [mcp__dump__echo]\n    env: {{ TRANSCRIPT_CLAUDE_BIN: {fake} }}\n    continue_on_error: true\n    \
         mcp_servers: [{{name: dump, command: sh, args: [\"-c\", {mcp}]}}]\n    \
         sandbox: {{ read: [{server_dir}] }}\n\
         \x20 - name: own\n    type: command\n    env: {{ NATS_TOKEN: {OWN} }}\n    command: 'printf %s \"$NATS_TOKEN\" > own.txt'\n",
        script = q(&script),
        fake = q(&fake),
        ws = q(ws),
        mcp = serde_json::to_string(&mcp).unwrap(),
        server_dir = q(fault_server().parent().unwrap()),
    );
    let path = dir.join("leak.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// Every regular file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        if meta.is_dir() {
            out.extend(files(&entry.path()));
        } else if meta.is_file() {
            out.push(entry.path());
        }
    }
    out
}

/// The runner's environment for these tests: `creds`, a canary and an `OTEL_*` variable.
fn runner(
    dir: &Path,
    storage: &str,
    workflow: &Path,
    ws: &Path,
    creds: &[(&str, &str)],
) -> Command {
    let mut c = bin();
    for name in [
        "NATS_CREDS",
        "NATS_USER",
        "NATS_PASSWORD",
        "NATS_TOKEN",
        "NATS_CA",
        "NATS_CERT",
        "NATS_KEY",
    ] {
        c.env_remove(name);
    }
    c.envs(creds.iter().copied());
    c.env("TRANSCRIPT_CANARY", "present")
        .env("OTEL_SERVICE_NAME", "canary-otel")
        .current_dir(dir)
        .args(["run", "--deterministic", "--storage", storage])
        .arg(workflow)
        .arg("--workspace")
        .arg(ws);
    c
}

/// Runs the leaking workflow on a server configured with `conf`, the runner holding `creds`;
/// asserts that no process of the run saw a `NATS_*` variable (but the step that set its own)
/// and that no `secret` is in any transcript line, output or file.
fn no_process_sees(conf: &str, creds: &[(&str, &str)], secrets: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let Some(server) = server_with_config(tmp.path(), conf) else {
        return;
    };
    let url = server.url();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let wf = workflow(tmp.path(), &ws);
    let script = plugin_script(tmp.path());
    let out = runner(tmp.path(), &url, &wf, &ws, creds)
        .arg("--plugin")
        .arg(format!("sh {} flag {}", script.display(), ws.display()))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let secret: Vec<Vec<u8>> = secrets.iter().map(|s| s.as_bytes().to_vec()).collect();

    // Every shape dumped its environment (the runner's canary and OTEL_* reached it)...
    for shape in [
        "shell", "argv", "tool", "agent", "preset", "declared", "flag",
    ] {
        let dump = std::fs::read_to_string(ws.join(format!("{shape}.env")))
            .unwrap_or_else(|e| panic!("{shape}.env: {e}\n{stderr}"));
        assert!(dump.contains(CANARY), "{shape}: {dump}");
        assert!(dump.contains(OTEL), "{shape} keeps OTEL_*: {dump}");
        let nats: Vec<&str> = dump.lines().filter(|l| l.starts_with("NATS_")).collect();
        assert!(nats.is_empty(), "{shape} inherited {nats:?}");
    }
    // ...the MCP server too (its environment is an allowlist: no canary, but PATH).
    let mcp = std::fs::read_to_string(ws.join("mcp.env")).unwrap();
    assert!(mcp.contains("PATH="), "{mcp}");
    assert!(!mcp.lines().any(|l| l.starts_with("NATS_")), "{mcp}");
    // The workflow author's own value is the step's.
    assert_eq!(std::fs::read_to_string(ws.join("own.txt")).unwrap(), OWN);
    assert_no_secret(&out.stdout, &secret, "run's stdout");
    assert_no_secret(&out.stderr, &secret, "run's stderr");

    // The transcript, from the stream: the dumps are in it, the token is not.
    let mirror = {
        let mut c = bin();
        c.envs(creds.iter().copied())
            .current_dir(tmp.path())
            .args(["mirror", &url, "--to"])
            .arg(tmp.path().join("mirror"));
        c.output().unwrap()
    };
    assert!(mirror.status.success(), "{}", text(&mirror.stderr));
    let transcript = std::fs::read_to_string(
        tmp.path()
            .join("mirror")
            .join(format!("{}.jsonl", common::DEMO_RUN_ID)),
    )
    .unwrap();
    assert!(
        transcript.matches("TRANSCRIPT_CANARY=present").count() >= 5,
        "the dumps were recorded: {transcript}"
    );
    for (n, line) in transcript.lines().enumerate() {
        assert_no_secret(
            line.as_bytes(),
            &secret,
            &format!("transcript line {}", n + 1),
        );
    }
    for file in files(tmp.path()) {
        // The server's own configuration holds the secret by design.
        if file.file_name().is_some_and(|n| n == "server.conf") {
            continue;
        }
        assert_no_secret(
            &std::fs::read(&file).unwrap(),
            &secret,
            &file.display().to_string(),
        );
    }
}

#[test]
fn no_process_of_the_run_sees_the_runners_nats_token() {
    let conf = format!("authorization {{ token: \"{TOKEN}\" }}\n");
    no_process_sees(&conf, &[("NATS_TOKEN", TOKEN)], &[TOKEN]);
}

#[test]
fn no_process_of_the_run_sees_the_runners_nats_user_and_password() {
    let conf = format!("authorization {{ user: fleet-7d21, password: \"{PASSWORD}\" }}\n");
    no_process_sees(
        &conf,
        &[("NATS_USER", "fleet-7d21"), ("NATS_PASSWORD", PASSWORD)],
        &[PASSWORD, "NATS_USER=fleet-7d21"],
    );
}

#[test]
fn with_file_storage_the_runner_consumes_nothing_and_a_step_sees_its_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let wf = tmp.path().join("seen.yaml");
    std::fs::write(
        &wf,
        "name: seen\nsteps:\n  - name: seen\n    type: command\n    command: 'printf %s \"$NATS_TOKEN\" > seen.txt'\n",
    )
    .unwrap();
    let storage = tmp.path().join("storage");
    let out = runner(
        tmp.path(),
        storage.to_str().unwrap(),
        &wf,
        &ws,
        &[("NATS_TOKEN", TOKEN)],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(ws.join("seen.txt")).unwrap(), TOKEN);
}

/// The real Claude Code, against the scripted model server, told by the model to run `env`
/// with its Bash tool (what a prompt injection would do): the output reaches the model and the
/// transcript (the canary proves it), the runner's token neither.
#[test]
fn a_real_claude_running_env_for_the_model_shows_no_nats_token() {
    use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
    use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};
    let cli = AgentCli::Claude;
    let Some(claude) = cli.require() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let conf = format!("authorization {{ token: \"{TOKEN}\" }}\n");
    let Some(server) = server_with_config(tmp.path(), &conf) else {
        return;
    };
    let url = server.url();
    let model = ModelServer::start(Script::new([
        Turn::tool_call("Bash", serde_json::json!({"command": "env"}))
            .with_usage(Usage::new(10, 5)),
        Turn::text("Done.").with_usage(Usage::new(20, 5)),
    ]))
    .unwrap();
    let sb = AgentSandbox::new().unwrap();
    let inv = sb
        .invocation(cli, &claude, &model, "unused", &CliOptions::default())
        .unwrap();
    let var = "ANTHROPIC_BASE_URL";
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let wf = sb.tmp().join("workflow.yaml");
    std::fs::write(
        &wf,
        format!(
            "name: env\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
             provider: claude\n    timeout_ms: 60000\n    prompt: Print your environment.\n    \
             tools: [run_command]\n    env:\n      {var}: \"{endpoint}\"\n"
        ),
    )
    .unwrap();
    let out = bin()
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(
            inv.env
                .iter()
                .filter(|(k, _)| k != var)
                .map(|(k, v)| (k, v)),
        )
        .env(cli.bin_var(), &claude)
        .env("NATS_TOKEN", TOKEN)
        .env("TRANSCRIPT_CANARY", "present")
        .current_dir(tmp.path())
        .args(["run", "--storage", &url])
        .arg(&wf)
        .arg("--workspace")
        .arg(sb.work())
        .arg("--input")
        .arg(format!("endpoint={endpoint}"))
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let secret = vec![TOKEN.as_bytes().to_vec()];
    let sent: String = model
        .requests()
        .iter()
        .map(|r| r.raw_body.clone())
        .collect();
    assert!(
        sent.contains(CANARY),
        "Claude ran env for the model: {sent}"
    );
    assert_no_secret(sent.as_bytes(), &secret, "what Claude sent the model");
    assert_no_secret(&out.stdout, &secret, "run's stdout");
    assert_no_secret(&out.stderr, &secret, "run's stderr");
    let run_id = common::printed_run_id(&text(&out.stdout));
    let mirror = bin()
        .env("NATS_TOKEN", TOKEN)
        .args(["mirror", &url, "--to"])
        .arg(tmp.path().join("mirror"))
        .output()
        .unwrap();
    assert!(mirror.status.success(), "{}", text(&mirror.stderr));
    let transcript =
        std::fs::read_to_string(tmp.path().join("mirror").join(format!("{run_id}.jsonl"))).unwrap();
    assert!(transcript.contains(CANARY), "{transcript}");
    for (n, line) in transcript.lines().enumerate() {
        assert_no_secret(
            line.as_bytes(),
            &secret,
            &format!("transcript line {}", n + 1),
        );
    }
}
