//! Deep nesting (issue #23 item 4): ~200 KB of `[[[[…` or `{"error":{…`
//! inside a valid record of every provider, and as a whole record, neither
//! overflows the stack nor is lost: values too deep to walk are kept
//! verbatim (compacted when they span lines), error texts are cut at a
//! bounded depth, and framing continues with the next record.
#![allow(clippy::unwrap_used)]

mod common;

use common::deep::{Shape, deep_inputs, nested, nested_exchanges};
use common::*;
use transcript_providers::{DiagnosticKind, Output, Provider, normalize};

/// About 200 KB: well past the depth at which the recursive walks aborted.
const BYTES: usize = 200 * 1024;

#[test]
fn every_provider_survives_deep_nesting_and_keeps_going() {
    for p in Provider::ALL {
        for (i, (name, input)) in deep_inputs(*p, BYTES).into_iter().enumerate() {
            let whole = to_jsonl(&normalize(*p, &input));
            assert!(!whole.is_empty(), "{p}: {name}: nothing reported");
            // Chunked feeding takes the byte scanner instead of the
            // single-line fast path; every third input keeps the test fast.
            if i % 3 == 0 {
                let chunked = to_jsonl(&run_chunked(*p, &input, &chunk_lens(3, 4096)));
                assert_eq!(whole, chunked, "{p}: {name}: chunking changed the output");
            }
        }
    }
}

fn tool_input(out: &[Output]) -> String {
    out.iter()
        .find_map(|o| match o {
            Output::ToolCall(c) => Some(c.input.get().to_owned()),
            _ => None,
        })
        .unwrap()
}

#[test]
fn a_deep_tool_input_is_kept_verbatim_or_compacted() {
    for shape in [Shape::Arrays, Shape::ArraysMultiline] {
        let deep = nested(shape, BYTES);
        let record = format!(
            r#"{{"type":"assistant","message":{{"id":"m","content":[{{"type":"tool_use","id":"t","name":"x","input":{deep}}}]}}}}"#
        );
        let out = normalize(Provider::Claude, format!("{record}\n").as_bytes());
        let compact: String = deep.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        assert_eq!(tool_input(&out), compact, "{shape:?}");
    }
    // A small record (parsed eagerly) deeper than serde_json's limit of 128
    // is still kept, not reported as malformed.
    let deep = nested(Shape::Arrays, 400);
    let record =
        format!(r#"{{"type":"tool_use","tool_id":"t","tool_name":"x","parameters":{deep}}}"#);
    assert!(record.len() < transcript_providers::json::EAGER_LIMIT);
    let out = normalize(Provider::Gemini, format!("{record}\n").as_bytes());
    assert_eq!(tool_input(&out), deep);
}

#[test]
fn a_deep_error_chain_is_cut_at_a_bounded_depth_with_the_rest_verbatim() {
    let deep = nested(Shape::Errors, BYTES);
    let out = normalize(
        Provider::Anthropic,
        format!("{{\"type\":\"error\",\"error\":{deep}}}\n").as_bytes(),
    );
    let d = out.iter().find_map(Output::as_diagnostic).unwrap();
    assert_eq!(d.kind, DiagnosticKind::ProviderError);
    // The remaining value is carried as its JSON text (not walked further).
    assert!(
        d.detail.starts_with("{\"error\":{\"error\":"),
        "{}",
        &d.detail[..80]
    );
    assert!(d.detail.contains("\"x\"}}") && d.detail.ends_with("}}"));
    let short = normalize(
        Provider::Anthropic,
        b"{\"type\":\"error\",\"error\":{\"error\":{\"message\":\"overloaded\"}}}\n",
    );
    assert_eq!(short[0].as_diagnostic().unwrap().detail, "overloaded");
}

#[test]
fn nested_recorded_exchanges_are_reported_not_walked() {
    let out = normalize(
        Provider::Anthropic,
        format!("{}\n", nested_exchanges(BYTES / 40)).as_bytes(),
    );
    let malformed: Vec<_> = out
        .iter()
        .filter_map(Output::as_diagnostic)
        .filter(|d| d.kind == DiagnosticKind::Malformed)
        .collect();
    assert_eq!(malformed.len(), 1, "{out:?}");
    assert!(malformed[0].detail.contains("nested"), "{}", malformed[0]);
    // One level (a body that is a message) is still read.
    let one = normalize(
        Provider::Anthropic,
        format!("{}\n", nested_exchanges(1)).as_bytes(),
    );
    assert!(one.iter().all(|o| {
        o.as_diagnostic()
            .is_none_or(|d| d.kind != DiagnosticKind::Malformed)
    }));
}

/// The fuzz targets' deep seeds (`fuzz/seeds/parse_<provider>/deep-*`) are
/// what `common::deep::fuzz_seeds` generates (`UPDATE_FUZZ_SEEDS=1` rewrites
/// them), so they cannot drift from the shapes tested here.
#[test]
fn fuzz_seeds_are_current() {
    let update = std::env::var("UPDATE_FUZZ_SEEDS").is_ok_and(|v| v == "1");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    for p in Provider::ALL {
        let dir = root.join(format!("parse_{}", p.name()));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
        }
        for (name, bytes) in common::deep::fuzz_seeds(*p) {
            let path = dir.join(&name);
            if update {
                std::fs::write(&path, &bytes).unwrap();
            }
            let on_disk = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_FUZZ_SEEDS=1)", path.display()));
            assert!(
                on_disk == bytes,
                "{} is stale (UPDATE_FUZZ_SEEDS=1)",
                path.display()
            );
        }
    }
}
