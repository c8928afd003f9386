//! Exports a transcript file (and its child runs beside it) as Markdown,
//! JSON or HTML on stdout.
//!
//! Run: `cargo run -p transcript-export --example export_file -- <run.jsonl> [markdown|json|html]`

use std::path::{Path, PathBuf};

use transcript_domain::{DecodedEvent, RunId, decode_line};
use transcript_export::{ExportOptions, build_document, to_html, to_markdown};

fn read_events(path: &Path) -> std::io::Result<Vec<DecodedEvent>> {
    let bytes = std::fs::read(path)?;
    Ok(bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| decode_line(line).ok().map(|d| d.event))
        .collect())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(
        args.next()
            .ok_or("usage: export_file <run.jsonl> [markdown|json|html]")?,
    );
    let format = args.next().unwrap_or_else(|| "markdown".to_owned());
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let events = read_events(&path)?;
    let mut lookup = |child: RunId| read_events(&dir.join(child.file_name())).ok();
    let doc = build_document(&events, &mut lookup, &ExportOptions::default());
    let out = match format.as_str() {
        "json" => serde_json::to_string_pretty(&doc)?,
        "html" => to_html(&doc),
        _ => to_markdown(&doc),
    };
    println!("{out}");
    Ok(())
}
