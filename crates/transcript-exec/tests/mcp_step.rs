//! An agent step's `mcp_servers:` (#33, item 1): checked at load (errors name the file and the
//! step), and at run time the MCP proxy port ([`McpGateway`]) is started before the CLI, the
//! CLI is pointed at it (arguments before the prompt's `--`, files of mode 0600, environment),
//! the proxy records into the run's transcript at the step's path, and it is shut down after
//! the CLI whatever the outcome; a lost observation fails the step.
//!
//! The CLI is a shell script standing in for Claude Code (`TRANSCRIPT_CLAUDE_BIN`): it writes
//! what it was given to the workspace. The real CLIs through the real proxy are proved in
//! `crates/transcript-cli/tests/mcp_real_agents.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, EventType, Fidelity, Payload, RawJson, ToolPayload};
use transcript_exec::mcp::{
    McpError, McpFile, McpGateway, McpServerSpec, McpSession, McpStart, McpTransport, McpWiring,
};
use transcript_exec::{ExecutionService, RunOutcome, Workflow, WorkflowSet};

use support::*;

/// What the gateway was started with: servers, tools, provider, call id prefix, deadline.
type Seen = (
    Vec<McpServerSpec>,
    Vec<String>,
    String,
    String,
    Option<Duration>,
);

/// What the fake proxy saw, in order.
#[derive(Default)]
struct Log {
    events: Mutex<Vec<String>>,
    start: Mutex<Option<Seen>>,
    dir: Mutex<Option<PathBuf>>,
}

impl Log {
    fn push(&self, e: impl Into<String>) {
        self.events.lock().unwrap().push(e.into());
    }
    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}

struct FakeGateway {
    log: Arc<Log>,
    /// What shutdown answers.
    lose: bool,
    /// The CLI's marker file: shutdown notes whether the CLI had run.
    marker: PathBuf,
}

#[async_trait]
impl McpGateway for FakeGateway {
    async fn start(&self, start: McpStart) -> Result<Box<dyn McpSession>, McpError> {
        self.log.push("start");
        *self.log.start.lock().unwrap() = Some((
            start.servers.clone(),
            start.tools.clone(),
            start.provider.clone(),
            start.call_id_prefix.clone(),
            start.call_deadline,
        ));
        *self.log.dir.lock().unwrap() = Some(start.config_dir.clone());
        let mode = std::fs::metadata(&start.config_dir)
            .unwrap()
            .permissions()
            .mode();
        self.log.push(format!("dir mode {:o}", mode & 0o777));
        // One observed call, as the real proxy records it.
        let id = format!("{}/mcp-1", start.call_id_prefix);
        for payload in [
            Payload::ToolCall(ToolPayload::call(
                "mcp__fault__echo",
                &id,
                RawJson::from_value(&json!({"text": "hi"})).unwrap(),
                Fidelity::Router,
            )),
            Payload::ToolResult(ToolPayload::result(
                "mcp__fault__echo",
                &id,
                RawJson::from_value(&json!({"content": [{"type": "text", "text": "hi"}]})).unwrap(),
                None,
                Fidelity::Router,
            )),
        ] {
            start
                .recorder
                .record(EventDraft::new(&start.path, start.iteration, payload))
                .await
                .unwrap();
        }
        let file = start.config_dir.join("mcp.json");
        Ok(Box::new(FakeSession {
            log: self.log.clone(),
            lose: self.lose,
            marker: self.marker.clone(),
            wiring: McpWiring {
                args: vec![
                    "--mcp-config".into(),
                    file.display().to_string(),
                    "--strict-mcp-config".into(),
                ],
                files: vec![McpFile {
                    path: file,
                    contents: "{\"secret\":\"s3cr3t\"}".into(),
                }],
                env: [("FAKE_MCP_SECRET".to_owned(), "s3cr3t".to_owned())].into(),
                reach: vec![],
            },
        }))
    }
}

struct FakeSession {
    log: Arc<Log>,
    lose: bool,
    marker: PathBuf,
    wiring: McpWiring,
}

#[async_trait]
impl McpSession for FakeSession {
    fn wiring(&self) -> McpWiring {
        self.wiring.clone()
    }
    async fn shutdown(self: Box<Self>) -> Result<(), McpError> {
        self.log
            .push(format!("shutdown (cli ran: {})", self.marker.exists()));
        if self.lose {
            return Err(McpError::Lost("disk full".into()));
        }
        Ok(())
    }
}

/// A stand-in for Claude Code: writes its argv, the secret variable and the config file's
/// mode and contents to `seen.txt`, then runs `tail` (shell source).
fn fake_claude(dir: &Path, tail: &str) -> PathBuf {
    let path = dir.join("fake-claude");
    let script = format!(
        "#!/bin/sh\nfor a in \"$@\"; do echo \"arg:$a\"; done > seen.txt\n\
         echo \"env:$FAKE_MCP_SECRET\" >> seen.txt\n\
         cfg=\"$3\"; [ \"$1\" = -p ] || cfg=\"$2\"\n\
         for a in \"$@\"; do if [ \"$prev\" = --mcp-config ]; then cfg=\"$a\"; fi; prev=\"$a\"; done\n\
         echo \"mode:$(stat -c %a \"$cfg\")\" >> seen.txt\n\
         echo \"file:$(cat \"$cfg\")\" >> seen.txt\n{tail}\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn workflow(bin: &Path, timeout_ms: Option<u64>) -> Workflow {
    let timeout = timeout_ms
        .map(|t| format!("    timeout_ms: {t}\n"))
        .unwrap_or_default();
    let yaml = format!(
        r#"name: mcp
steps:
  - name: ask
    type: agent
    provider: claude
    prompt: Echo something.
{timeout}    tools: [mcp__fault__echo, Read]
    env:
      TRANSCRIPT_CLAUDE_BIN: {bin}
    mcp_servers:
      - name: fault
        command: fault-server
        args: [--slow]
        env: {{ LOG: /tmp/x }}
      - name: docs
        url: https://mcp.example.com/mcp
        headers: {{ Authorization: Bearer abc }}
"#,
        bin = bin.display()
    );
    Workflow::from_yaml(&yaml, "mcp.yaml").unwrap()
}

async fn run(
    ws: &Path,
    wf: Workflow,
    gateway: Option<Arc<dyn McpGateway>>,
) -> (Arc<MemoryFactory>, RunOutcome) {
    let factory = MemoryFactory::new();
    let mut builder =
        ExecutionService::deterministic_builder(ws, ts0()).recorder_factory(factory.clone());
    if let Some(g) = gateway {
        builder = builder.mcp_gateway(g);
    }
    let svc = builder.build().unwrap();
    let out = svc
        .run(
            &WorkflowSet::new("m", wf),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    (factory, out)
}

fn gateway(log: &Arc<Log>, ws: &Path, lose: bool) -> Arc<dyn McpGateway> {
    Arc::new(FakeGateway {
        log: log.clone(),
        lose,
        marker: ws.join("seen.txt"),
    })
}

fn step_error(factory: &MemoryFactory, out: &RunOutcome) -> Option<String> {
    factory
        .events(out.run_id)
        .iter()
        .find(|e| e.kind.known() == Some(EventType::StepCompleted) && e.path == "ask")
        .and_then(|e| e.step())
        .and_then(|s| s.error.clone())
}

#[tokio::test]
async fn the_cli_is_pointed_at_the_proxy_which_records_and_outlives_it() {
    let (_d, ws) = workspace();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = fake_claude(bin_dir.path(), "exit 0");
    let log = Arc::new(Log::default());
    let (factory, out) = run(
        &ws,
        workflow(&bin, Some(60_000)),
        Some(gateway(&log, &ws, false)),
    )
    .await;
    assert!(out.succeeded(), "{:?}", step_error(&factory, &out));
    assert_eq!(
        log.events(),
        ["start", "dir mode 700", "shutdown (cli ran: true)"]
    );
    let (servers, tools, provider, prefix, deadline) = log.start.lock().unwrap().clone().unwrap();
    assert_eq!(
        servers,
        [
            McpServerSpec {
                name: "fault".into(),
                transport: McpTransport::Stdio {
                    command: "fault-server".into(),
                    args: vec!["--slow".into()],
                    env: [("LOG".to_owned(), "/tmp/x".to_owned())].into(),
                },
            },
            McpServerSpec {
                name: "docs".into(),
                transport: McpTransport::Http {
                    url: "https://mcp.example.com/mcp".into(),
                    headers: [("Authorization".to_owned(), "Bearer abc".to_owned())].into(),
                },
            },
        ]
    );
    assert_eq!(tools, ["mcp__fault__echo", "Read"]);
    assert_eq!((provider.as_str(), prefix.as_str()), ("claude", "ask#0"));
    assert_eq!(deadline, Some(Duration::from_millis(60_000)));

    // What the CLI got: the wiring's arguments before the prompt's `--`, the file (0600), the
    // variable.
    let seen = std::fs::read_to_string(ws.join("seen.txt")).unwrap();
    let args: Vec<&str> = seen
        .lines()
        .filter_map(|l| l.strip_prefix("arg:"))
        .collect();
    let dir = log.dir.lock().unwrap().clone().unwrap();
    let file = dir.join("mcp.json").display().to_string();
    let at = args.iter().position(|a| *a == "--mcp-config").unwrap();
    assert_eq!(args[at + 1..at + 3], [file.as_str(), "--strict-mcp-config"]);
    assert_eq!(args[args.len() - 2..], ["--", "Echo something."], "{seen}");
    assert!(
        args.contains(&"--allowedTools=mcp__fault__echo,Read"),
        "{seen}"
    );
    assert!(seen.contains("env:s3cr3t\n"), "{seen}");
    assert!(seen.contains("mode:600\n"), "{seen}");
    assert!(seen.contains("file:{\"secret\":\"s3cr3t\"}\n"), "{seen}");
    assert!(
        !dir.exists(),
        "the proxy's directory is removed after the step"
    );

    // The proxy's observations are in the run's transcript, at the agent step.
    let events = factory.events(out.run_id);
    let router: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind.known(),
                Some(EventType::ToolCall | EventType::ToolResult)
            )
        })
        .map(|e| (e.path.clone(), e.iteration))
        .collect();
    assert_eq!(router, [("ask".to_owned(), 0), ("ask".to_owned(), 0)]);
}

#[tokio::test]
async fn a_failing_cli_still_shuts_the_proxy_down() {
    let (_d, ws) = workspace();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = fake_claude(bin_dir.path(), "echo boom >&2; exit 3");
    let log = Arc::new(Log::default());
    let (factory, out) = run(&ws, workflow(&bin, None), Some(gateway(&log, &ws, false))).await;
    assert!(!out.succeeded());
    assert!(step_error(&factory, &out).unwrap().contains("boom"));
    assert_eq!(log.events()[2], "shutdown (cli ran: true)");
    // Without a step timeout the proxy's own default deadline applies.
    assert_eq!(log.start.lock().unwrap().as_ref().unwrap().4, None);
}

#[tokio::test]
async fn a_timed_out_cli_is_killed_and_then_the_proxy_is_shut_down() {
    let (_d, ws) = workspace();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = fake_claude(bin_dir.path(), "exec sleep 30");
    let log = Arc::new(Log::default());
    let (factory, out) = run(
        &ws,
        workflow(&bin, Some(500)),
        Some(gateway(&log, &ws, false)),
    )
    .await;
    assert!(!out.succeeded());
    let error = step_error(&factory, &out).unwrap();
    assert!(error.contains("timed out"), "{error}");
    assert_eq!(log.events()[2], "shutdown (cli ran: true)");
}

#[tokio::test]
async fn a_lost_observation_fails_a_step_that_would_have_succeeded() {
    let (_d, ws) = workspace();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = fake_claude(bin_dir.path(), "exit 0");
    let log = Arc::new(Log::default());
    let (factory, out) = run(&ws, workflow(&bin, None), Some(gateway(&log, &ws, true))).await;
    assert!(!out.succeeded());
    let error = step_error(&factory, &out).unwrap();
    assert!(
        error.contains("MCP proxy lost an observation: disk full"),
        "{error}"
    );
}

#[tokio::test]
async fn a_runner_without_a_gateway_fails_the_step_saying_so() {
    let (_d, ws) = workspace();
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = fake_claude(bin_dir.path(), "exit 0");
    let (factory, out) = run(&ws, workflow(&bin, None), None).await;
    assert!(!out.succeeded());
    let error = step_error(&factory, &out).unwrap();
    assert!(error.contains("no MCP gateway"), "{error}");
    assert!(!ws.join("seen.txt").exists(), "the CLI never started");
}

/// Each mistake in `mcp_servers` is refused when the workflow is loaded, naming the file and
/// the step.
#[test]
fn mistakes_are_refused_at_load_naming_the_file_and_the_step() {
    let case = |provider_and_command: &str, servers: &str| {
        let yaml = format!(
            "name: m\nsteps:\n  - name: outer\n    type: for_each\n    items: [1]\n    steps:\n      - name: ask\n        type: agent\n{provider_and_command}        prompt: hi\n        mcp_servers:\n{servers}"
        );
        let err = match Workflow::from_yaml(&yaml, "bad.yaml") {
            Err(e) => e,
            Ok(wf) => WorkflowSet::new("bad.yaml", wf)
                .validate(&|_| false)
                .expect_err(&yaml),
        };
        let text = err.to_string();
        // A field no server has is serde-saphyr's error, with its line and column.
        let at_step = text.starts_with("bad.yaml: step 'outer.ask': ")
            || (text.starts_with("bad.yaml: invalid YAML: ") && text.contains("line 14 column 13"));
        assert!(at_step, "{text}\n{yaml}");
        text
    };
    let claude = "        provider: claude\n";
    for (provider, servers, why) in [
        (
            claude,
            "          - name: a\n",
            "either command (stdio) or url",
        ),
        (
            claude,
            "          - name: a\n            command: x\n            url: http://h/\n",
            "either command (stdio) or url",
        ),
        (
            claude,
            "          - name: a\n            url: http://h/\n            env: {A: b}\n",
            "args and env belong to command servers",
        ),
        (
            claude,
            "          - name: a\n            command: x\n            headers: {A: b}\n",
            "headers belong to url servers",
        ),
        (
            claude,
            "          - name: a/b\n            command: x\n",
            "mcp_servers: name \"a/b\" has a character outside [A-Za-z0-9_-]",
        ),
        (
            claude,
            "          - name: a__b\n            command: x\n",
            "mcp_servers: name \"a__b\" contains \"__\"",
        ),
        (
            claude,
            "          - name: a_\n            command: x\n",
            "mcp_servers: name \"a_\" ends with \"_\": mcp__<server>__<tool> would be ambiguous",
        ),
        (
            claude,
            "          - name: a\n            command: x\n          - name: a\n            command: y\n",
            "used twice",
        ),
        (
            claude,
            "          - name: a\n            command: ''\n",
            "empty command",
        ),
        (
            claude,
            "          - name: a\n            url: file:///etc/passwd\n",
            "is not http:// or https://",
        ),
        (
            claude,
            "          - name: a\n            command: x\n            env: {'A B': c}\n",
            "env: 'A B' is not a variable name",
        ),
        (
            claude,
            "          - name: a\n            command: x\n            args: ['{{inputs.x}}']\n",
            "values are literal",
        ),
        (
            "        provider: openai\n",
            "          - name: a\n            command: x\n",
            "needs a CLI preset step",
        ),
        (
            "        provider: claude\n        command: [cat, x]\n",
            "          - name: a\n            command: x\n",
            "needs a CLI preset step",
        ),
        (
            claude,
            "          - name: a\n            command: x\n            cwd: /\n",
            "unknown field `cwd`",
        ),
    ] {
        let text = case(provider, servers);
        assert!(text.contains(why), "{why}: {text}");
    }
}

/// Codex has no per-tool list: an MCP tool in `tools:` is the proxy's business and does not
/// make its preset refuse the step.
#[test]
fn a_codex_step_may_list_mcp_tools() {
    let yaml = "name: m\nsteps:\n  - name: ask\n    type: agent\n    provider: codex\n    prompt: hi\n    tools: [mcp__fault__echo, read_file]\n    mcp_servers:\n      - name: fault\n        command: x\n";
    let wf = Workflow::from_yaml(yaml, "ok.yaml").unwrap();
    WorkflowSet::new("m", wf).validate(&|_| false).unwrap();
}
