//! Serves a storage directory with the viewer, as `transcript serve --storage DIR` does but
//! without prices or step definitions: `cargo run -p transcript-viewer --example serve_dir --
//! storage/transcripts 127.0.0.1:7700`, then open the printed URL; Ctrl-C stops it.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "storage/transcripts".to_owned());
    let addr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:7700".to_owned())
        .parse()?;
    let store = Arc::new(transcript_infra::DirRunStore::new(&dir));
    let config =
        transcript_viewer::ViewerConfig::new(store, Arc::new(transcript_infra::SystemClock));
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let viewer = transcript_viewer::Viewer::bind(addr, config).await?;
        println!("serving http://{}/", viewer.local_addr()?);
        let stop = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        viewer.serve(stop).await
    })?;
    Ok(())
}
