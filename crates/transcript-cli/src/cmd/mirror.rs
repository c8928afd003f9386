//! `transcript mirror nats://… --to <dir>`: the fleet's JetStream store copied into the file
//! layout by a durable consumer (see `transcript_nats::mirror`): each run's file byte-identical
//! to what the file recorder writes, resumable after a crash, idempotent.

use std::io::Write;
use std::path::PathBuf;

use crate::CliError;
use crate::exit::stdout_result;

/// `mirror`'s arguments.
#[derive(Debug, clap::Args)]
pub struct MirrorCmd {
    /// The store: nats://host:4222[,host:4222…][/STREAM].
    pub source: String,
    /// The directory the run files go to.
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// Keep mirroring new events, through server restarts (default: stop once caught up).
    #[arg(long)]
    pub follow: bool,
    /// The durable consumer's name (one per mirror directory).
    #[arg(long, default_value = "transcript-mirror")]
    pub consumer: String,
}

/// Runs `mirror`: prints how many lines were written and skipped, and the runs touched; a run
/// missing events is named on stderr (as found, with --follow) and makes the exit code 4.
pub fn run(args: &MirrorCmd, out: &mut dyn Write) -> Result<(), CliError> {
    let url =
        crate::nats_connect::url_of(std::path::Path::new(&args.source))?.ok_or_else(|| {
            CliError::Usage(format!(
                "mirror: {:?} is not a NATS URL (nats://host:4222[/STREAM])",
                args.source
            ))
        })?;
    if !transcript_nats::MirrorOptions::valid_consumer(&args.consumer) {
        return Err(CliError::Usage(
            "mirror: --consumer may hold letters, digits, '-' and '_' only".to_owned(),
        ));
    }
    let options = transcript_nats::MirrorOptions {
        consumer: args.consumer.clone(),
        follow: args.follow,
        ..transcript_nats::MirrorOptions::new(&args.to)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    let report = runtime.block_on(async {
        // A following mirror waits for the store as for new runs; once, it needs one.
        let store = if args.follow {
            crate::nats_connect::connect_waiting(&url, "runs").await?
        } else {
            crate::nats_connect::connect(&url).await?
        };
        loop {
            let report = transcript_nats::mirror(&store, &options)
                .await
                .map_err(|e| CliError::Storage(e.to_string()))?;
            for (run, why) in &report.incomplete {
                crate::diag!("transcript: mirror: run {run} is incomplete in the stream: {why}");
            }
            if !args.follow {
                return Ok::<_, CliError>(report);
            }
        }
    })?;
    stdout_result(writeln!(
        out,
        "mirrored {} runs into {}: {} lines written, {} already there",
        report.runs.len(),
        args.to.display(),
        report.written,
        report.skipped
    ))?;
    let n = report.incomplete.len();
    (n == 0).then_some(()).ok_or_else(|| {
        CliError::Storage(format!(
            "mirror: {n} run(s) incomplete in the stream (see above)"
        ))
    })
}
