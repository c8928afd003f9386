//! Runs the proxy in front of one stdio MCP server and prints what each agent CLI needs to use
//! it, then every recorded tool event as a JSON line, until Ctrl-C.
//!
//! ```text
//! cargo run -p transcript-mcp --example proxy -- ALLOWED_TOOL[,..] COMMAND [ARGS...]
//! cargo run -p transcript-mcp --example proxy -- mcp__everything__echo mcp-server-everything stdio
//! ```
//!
//! The server is named `everything`; the allowlist uses the step's `tools:` spelling
//! (`mcp__<server>__<tool>` or `mcp__<server>`).

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use transcript_domain::{EventDraft, RecordError, Recorder, RunId, Seq, Subscription};
use transcript_mcp::{Allowlist, McpProxy, McpServer, ProxyLimits, RecordTarget, Upstream, preset};

/// A recorder that prints each draft's payload as a JSON line.
struct Print(std::sync::atomic::AtomicU64);

#[async_trait]
impl Recorder for Print {
    fn run_id(&self) -> RunId {
        RunId::parse("00000000-0000-4000-8000-000000000000").expect("a valid run id")
    }
    fn parent_run_id(&self) -> Option<RunId> {
        None
    }
    async fn record(&self, draft: EventDraft) -> Result<Seq, RecordError> {
        let line = serde_json::to_string(&draft.payload)
            .map_err(|e| RecordError::Encode(e.to_string()))?;
        println!("{} {line}", draft.payload.event_type());
        Ok(self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
    }
    async fn subscribe(&self, _: Option<Seq>) -> Result<Box<dyn Subscription>, RecordError> {
        Err(RecordError::Closed)
    }
    async fn close(&self) -> Result<(), RecordError> {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // RUST_LOG=transcript_mcp=debug shows every request the agent CLI makes.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let (Some(tools), Some(command)) = (args.next(), args.next()) else {
        eprintln!("usage: proxy ALLOWED_TOOL[,..] COMMAND [ARGS...]");
        std::process::exit(2);
    };
    let server = McpServer {
        name: "everything".into(),
        upstream: Upstream::Stdio {
            command,
            args: args.collect(),
            env: Default::default(),
        },
    };
    let target = RecordTarget {
        recorder: Arc::new(Print(Default::default())),
        path: "agent".into(),
        iteration: 0,
        call_id_prefix: "agent#0".into(),
    };
    let cancel = CancellationToken::new();
    let proxy = McpProxy::start(
        &[server],
        Allowlist::from_step_tools(tools.split(',')),
        target,
        ProxyLimits::default(),
        cancel.clone(),
    )
    .await?;
    let endpoints = proxy.endpoints();
    eprintln!(
        "Claude Code --mcp-config file:\n{}\n",
        preset::claude_mcp_config(endpoints)
    );
    eprintln!(
        "Codex config.toml:\n{}",
        preset::codex_config_toml("", endpoints)?
    );
    eprintln!(
        "Gemini CLI settings.json:\n{}\n",
        preset::gemini_settings(serde_json::json!({}), endpoints)?
    );
    tokio::signal::ctrl_c().await?;
    cancel.cancel();
    proxy.shutdown().await?;
    Ok(())
}
