//! Compare two transcript files and render the differences yourself from the public model.
//!
//! ```text
//! cargo run -p transcript-compare --example diff_runs -- A.jsonl B.jsonl
//! ```
//!
//! Without arguments it compares the golden demo run with a copy whose `greet` step printed
//! something else. Child runs are read from the files beside each run.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use transcript_compare::{DiffOptions, RunRecord, Side, diff};
use transcript_domain::{DecodedEvent, RunId, decode_str};

fn read(path: &Path) -> Vec<DecodedEvent> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| decode_str(l).ok().map(|d| d.event))
        .collect()
}

fn record(path: &Path, events: &[DecodedEvent]) -> RunRecord {
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    RunRecord::build(
        events,
        &mut |id: RunId| Some(read(&dir.join(id.file_name()))).filter(|e| !e.is_empty()),
        None,
    )
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let (a, b) = match args.as_slice() {
        [a, b] => {
            let (ea, eb) = (read(a), read(b));
            (record(a, &ea), record(b, &eb))
        }
        _ => {
            let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/golden/demo-run/00000000-0000-4000-8000-000000000001.jsonl");
            let events = read(&golden);
            let mut changed = events.clone();
            for e in &mut changed {
                if let transcript_domain::DecodedPayload::Step(s) = &mut e.payload
                    && e.path == "greet"
                    && s.result.is_some()
                {
                    s.result = transcript_domain::RawJson::from_value(&serde_json::json!(
                        {"command": "echo", "stdout": "hello there\n", "exit_code": 0}
                    ))
                    .ok();
                }
            }
            (record(&golden, &events), record(&golden, &changed))
        }
    };
    let doc = diff(&a, &b, &DiffOptions::default());
    println!(
        "equal: {} ({} steps compared, {} changed, {} only in A, {} only in B)",
        doc.equal,
        doc.summary.compared,
        doc.summary.changed,
        doc.summary.only_in_a,
        doc.summary.only_in_b
    );
    for (name, step) in doc.differing_steps() {
        match step.side {
            Side::OnlyA => println!("{name}: only in A"),
            Side::OnlyB => println!("{name}: only in B"),
            Side::Both => {
                for c in &step.changes {
                    println!("{name}: {}: {} -> {}", c.field, c.a, c.b);
                }
            }
        }
    }
}
