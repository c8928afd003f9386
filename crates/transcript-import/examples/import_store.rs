//! A team's own store import (issue #43 item 4): a Claude Code projects folder into a storage,
//! then a day-by-day bill of every run in that storage through transcript-export's library
//! calls (the `transcript receipts --by day` sums, priced by the embedded LiteLLM table).
//!
//! ```text
//! cargo run -p transcript-import --example import_store -- <projects-dir> <storage> [--json]
//! ```
//!
//! Run it twice: the second import finds every session unchanged and the bill is the same.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use transcript_domain::Usage;
use transcript_export::{ExportOptions, Groups, billed_turns, build_document, each_step};
use transcript_import::store::StoreOutcome;
use transcript_import::{Importer, Notice, Store};
use transcript_infra::{ReadItem, TranscriptReader};
use transcript_providers::{Pricing, Provider};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(projects), Some(storage)) = (args.first(), args.get(1)) else {
        eprintln!("usage: import_store <claude-projects-dir> <storage> [--json]");
        return ExitCode::from(2);
    };
    let json = args.iter().any(|a| a == "--json");
    match run(Path::new(projects), Path::new(storage), json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("import_store: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(projects: &Path, storage: &Path, json: bool) -> Result<(), Box<dyn std::error::Error>> {
    // 1. Import: one run per session file, appended to when the session grew.
    let importer = Importer::new(storage).with_progress(Arc::new(|n| {
        if let Notice::Diagnostics {
            input, kind, count, ..
        } = n
        {
            eprintln!("{}: {count} {kind} diagnostic(s)", input.display());
        }
    }));
    let store = Store {
        provider: Provider::Claude,
        dirs: vec![projects.to_path_buf()],
    };
    for done in importer.import_store(&store, None)? {
        match done.result {
            Ok((outcome, _)) => eprintln!("{}: {}", done.file.display(), said(&outcome)),
            Err(e) => eprintln!("not imported: {e}"),
        }
    }
    // 2. Bill: every billed turn of every run, grouped by the day of its provider time.
    let pricing = Pricing::embedded();
    let price = |model: &str, u: &Usage| pricing.cost(model, u).map(|c| c.usd);
    let mut groups = Groups::new(&price);
    for file in transcripts(storage)? {
        let mut events = Vec::new();
        for item in TranscriptReader::open(&file)? {
            if let Ok(ReadItem::Event(e)) = item {
                events.push(e.event);
            }
        }
        let doc = build_document(&events, &mut |_| None, &ExportOptions::default());
        each_step(&doc.run, &mut |step| {
            for turn in billed_turns(step) {
                let day = turn.message.timestamp.get(..10).unwrap_or("?").to_owned();
                groups.add(day, &doc.run.run_id, &turn);
            }
        });
    }
    let (days, unpriced) = groups.finish();
    for model in unpriced {
        eprintln!("warning: no price for model {model}");
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&days)?);
    } else {
        print!("{}", transcript_export::render_groups("day", &days));
    }
    Ok(())
}

/// What a session file's import did, in a word or two.
fn said(outcome: &StoreOutcome) -> String {
    match outcome {
        StoreOutcome::New(run, events, bill) => {
            format!("new run {run} ({events} events; {})", bill.describe())
        }
        StoreOutcome::Appended(run, events, _) => format!("{events} events appended to {run}"),
        StoreOutcome::Unchanged(run) => format!("unchanged (run {run})"),
        StoreOutcome::NoOutput => "no agent output yet".to_owned(),
    }
}

/// The storage's transcripts (`<run-id>.jsonl`), sorted.
fn transcripts(storage: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(storage)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}
