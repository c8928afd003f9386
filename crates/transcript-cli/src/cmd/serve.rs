//! `transcript serve`: transcript-viewer's live viewer over the store's read port (files or
//! NATS), with the price table and the recorded step definitions composed in. Loopback by
//! default; another address needs a token (one is generated and printed when none is given).
//! The first stdout line is `serving http://ADDR/`; SIGINT or SIGTERM ends it with exit 0.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use transcript_viewer::{Viewer, ViewerConfig, ViewerError};

use crate::CliError;
use crate::exit::stdout_result;

// `transcript serve`'s arguments (no doc comment: the variant's is the command's help).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Where to listen (port 0 picks one); an address other than loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub addr: SocketAddr,
    /// The token every request must carry (`Authorization: Bearer T`, or `?token=T` once);
    /// generated and printed when --addr is not loopback and none is given.
    #[arg(long, env = "TRANSCRIPT_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A LiteLLM-format price table instead of the embedded one.
    #[arg(long, value_name = "FILE")]
    pub pricing: Option<PathBuf>,
}

/// Runs the viewer until SIGINT or SIGTERM.
pub fn run(
    args: ServeArgs,
    store: crate::store::Store,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let failed = |e: ViewerError| match e {
        ViewerError::TokenRequired { .. } | ViewerError::BadToken => CliError::Usage(e.to_string()),
        e => CliError::Failed(e.to_string()),
    };
    let generate = args.token.is_none() && !transcript_viewer::is_loopback(&args.addr);
    let token = match args.token {
        None if generate => Some(transcript_viewer::generate_token().map_err(failed)?),
        token => token,
    };
    let table = super::receipts::pricing(args.pricing.as_deref())?.into_owned();
    let mut config = ViewerConfig::new(store, Arc::new(transcript_infra::SystemClock));
    config.token = token.clone();
    config.price = Some(Arc::new(move |m, u| table.cost(m, u).map(|c| c.usd)));
    config.price_table = super::receipts::table_name(args.pricing.as_deref());
    config.definitions = Some(Arc::new(super::diff::definitions));
    config.origins = Some(super::receipts::viewer_origins(&config.store));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let viewer = Viewer::bind(args.addr, config).await.map_err(failed)?;
        let addr = viewer.local_addr().map_err(failed)?;
        let mut text = format!("serving http://{addr}/\n");
        if let Some(t) = &token {
            text += &format!(
                "open http://{addr}/?token={t}{}\n",
                if generate { " (generated token)" } else { "" }
            );
        }
        stdout_result(out.write_all(text.as_bytes()).and_then(|()| out.flush()))?;
        viewer.serve(stopped()).await.map_err(failed)
    })
}

/// Resolves at the first SIGINT or SIGTERM.
async fn stopped() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
        }
        _ => std::future::pending().await,
    }
}
