//! Markdown export and GFM autolinks (issue 28 item 5): agent text holding
//! bare URLs and e-mail addresses must not become links when the export is
//! rendered by a GFM renderer with the autolink extension on (what GitHub
//! does). The renderer is comrak, a maintained GFM implementation, with
//! autolinks (strict and relaxed) and the other GFM extensions on; the
//! rendered HTML must hold no `<a` at all (our Markdown makes no links of its
//! own), and the text must still read the same.
#![allow(clippy::unwrap_used)]

use serde_json::json;
use transcript_export::{
    Entry, ExportBlock, ExportDocument, ExportOptionsRecord, MessageExport, RunExport, StepExport,
    ToolCallExport, to_markdown,
};

/// Shapes of URLs and addresses an agent could write.
const SHAPES: &[&str] = &[
    "http://evil.example/x",
    "https://evil.example/path?q=1&r=2#frag",
    "HTTPS://EVIL.EXAMPLE/UPPER",
    "Https://evil.example/mixed",
    "ftp://evil.example/file.bin",
    "see http://evil.example. Then",
    "(https://evil.example/in-parens)",
    "[https://evil.example/in-brackets]",
    "<https://evil.example/angle>",
    "https://evil.example/a_(b)_c?x=[1]",
    "\"https://evil.example/quoted\"",
    "xhttp://evil.example/glued",
    "1https://evil.example/digit",
    "http://localhost:8080/admin",
    "http://[::1]:8080/v6",
    "http://192.168.0.1/ip",
    "https://évil.example/ünïcode/路径",
    "http://例え.jp/",
    "https://evil.example/%3Cscript%3E",
    "www.evil.example",
    "WWW.EVIL.EXAMPLE/upper",
    "Www.evil.example",
    "(www.evil.example/in-parens)",
    "*www.evil.example*",
    "~www.evil.example~",
    "_www.evil.example_",
    "go to www.evil.example/path_with_under_scores now",
    "bob@evil.example",
    "first.last+tag@sub.evil.example",
    "a@b.co,c@d.io;e@f.org",
    "user@localhost",
    "José@exämple.com",
    "mailto:bob@evil.example",
    "MAILTO:BOB@EVIL.EXAMPLE",
    "xmpp:bob@evil.example/resource",
    "<bob@evil.example>",
    "@someone and @org/team",
    "email me (bob@evil.example).",
    "http://evil.example\nwww.evil.example\nbob@evil.example",
    "    https://evil.example/indented",
    "- https://evil.example/list-item",
    "> www.evil.example",
    "1. bob@evil.example",
    "**https://evil.example/bold**",
    "https://evil.example/trailing-punctuation?!.,:;",
    "javascript:alert(1)",
    "data:text/html,<b>x</b>",
    "file:///etc/passwd",
];

fn comrak_html(md: &str, relaxed: bool) -> String {
    let mut o = comrak::Options::default();
    o.extension.autolink = true;
    o.extension.strikethrough = true;
    o.extension.table = true;
    o.extension.tasklist = true;
    o.extension.footnotes = true;
    o.parse.relaxed_autolinks = relaxed;
    comrak::markdown_to_html(md, &o)
}

fn step(v: &str, entries: Vec<Entry>) -> StepExport {
    StepExport {
        path: "agent".to_owned(),
        name: v.to_owned(),
        kind: v.to_owned(),
        iteration: 0,
        status: "failed".to_owned(),
        started_at: v.to_owned(),
        completed_at: Some(v.to_owned()),
        duration_ms: Some(5),
        error: Some(v.to_owned()),
        result: Some(json!(v)),
        usage: None,
        network_refused: None,
        cost_usd: None,
        entries,
        steps: Vec::new(),
        child_run_id: None,
        child_run: None,
    }
}

/// Every prose field of a document holds `v` (identifiers and tool values
/// are code, where no autolink forms).
fn document(v: &str) -> ExportDocument {
    let blocks = vec![
        ExportBlock::Text {
            fidelity: v.to_owned(),
            text: v.to_owned(),
        },
        ExportBlock::Text {
            fidelity: v.to_owned(),
            text: v.to_owned(),
        },
        ExportBlock::Thinking {
            fidelity: v.to_owned(),
            thinking: v.to_owned(),
        },
        ExportBlock::Stream {
            fidelity: v.to_owned(),
            text: v.to_owned(),
        },
        ExportBlock::ToolResult {
            fidelity: v.to_owned(),
            tool_id: v.to_owned(),
            tool_content: json!(v),
        },
    ];
    let message = |role: &str| {
        Entry::Message(MessageExport {
            seq: 1,
            role: role.to_owned(),
            timestamp: v.to_owned(),
            provider: Some(v.to_owned()),
            model: Some(v.to_owned()),
            usage: None,
            cost_usd: None,
            request_id: None,
            blocks: blocks.clone(),
        })
    };
    let entries = vec![
        message("user"),
        message("assistant"),
        Entry::ToolCall(ToolCallExport {
            seq: 2,
            call_id: v.to_owned(),
            name: v.to_owned(),
            fidelity: v.to_owned(),
            input: json!({ "url": v }),
            output: json!(v),
            error: Some(v.to_owned()),
            completed: true,
            started_at: v.to_owned(),
            completed_at: Some(v.to_owned()),
        }),
    ];
    ExportDocument {
        schema_version: v.to_owned(),
        generator: v.to_owned(),
        options: ExportOptionsRecord {
            reasoning_included: true,
            truncate_outputs_bytes: None,
            redacted: false,
        },
        run: RunExport {
            run_id: v.to_owned(),
            parent_run_id: None,
            workflow: Some(v.to_owned()),
            status: v.to_owned(),
            started_at: Some(v.to_owned()),
            completed_at: Some(v.to_owned()),
            duration_ms: Some(1),
            error: Some(v.to_owned()),
            result: Some(json!(v)),
            usage: None,
            cost_usd: None,
            steps: vec![step(v, entries.clone())],
            entries,
            problems: vec![v.to_owned()],
        },
        cost: Some(transcript_export::CostSummary {
            price_table: v.to_owned(),
            total_usd: None,
            reported_usd: None,
            by_model: vec![transcript_export::ModelCost {
                model: v.to_owned(),
                turns: 1,
                usage: transcript_domain::Usage::default(),
                cost_usd: None,
            }],
            unpriced_models: vec![v.to_owned()],
        }),
    }
}

#[test]
fn no_link_comes_out_of_agent_text() {
    let mut failures = Vec::new();
    for shape in SHAPES {
        // Alone, and inside a sentence.
        for v in [
            shape.to_string(),
            format!("Found it at {shape} — check it."),
        ] {
            let md = to_markdown(&document(&v));
            for relaxed in [false, true] {
                let html = comrak_html(&md, relaxed);
                if let Some(at) = html.find("<a ") {
                    let end = html[at..].find("</a>").map_or(html.len(), |e| at + e + 4);
                    failures.push(format!("{v:?} (relaxed: {relaxed}): {}", &html[at..end]));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn escaped_addresses_still_read_the_same() {
    // The escapes are invisible once rendered: the text shows the address.
    for (v, shown) in [
        (
            "see http://evil.example/x now",
            "see http://evil.example/x now",
        ),
        ("mail bob@evil.example", "mail bob@evil.example"),
        ("www.evil.example", "www.evil.example"),
        ("at 2026-05-28T10:00:00Z", "at 2026-05-28T10:00:00Z"),
    ] {
        let html = comrak_html(&to_markdown(&document(v)), false);
        assert!(html.contains(shown), "{v}: {html}");
    }
}
