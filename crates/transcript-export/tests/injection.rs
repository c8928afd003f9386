//! Hostile values in every field of an export document cannot become markup.
//!
//! The Markdown is rendered with a real CommonMark renderer (`pulldown-cmark`,
//! plain and with every extension) and the result is checked at two levels:
//! the parser's events (no raw HTML but our own `<details>` wrappers, no link,
//! no image) and the rendered HTML's tags (only the tags and attributes a
//! renderer makes for our own structure). The HTML export is checked the same
//! way against the tags and attributes `html.rs` writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pulldown_cmark::{Event, Options, Parser, Tag};
use serde_json::{Value, json};
use transcript_domain::Usage;
use transcript_export::{
    CostSummary, Entry, ExportBlock, ExportDocument, ExportOptionsRecord, MessageExport, ModelCost,
    RunExport, StepExport, ToolCallExport, to_html, to_markdown,
};

/// The hostile values of every attack test of a rendered view (`fixtures/hostile/markup.json`).
fn hostile() -> Vec<String> {
    serde_json::from_str(include_str!("../../../fixtures/hostile/markup.json")).unwrap()
}

fn step(v: &str, path: String, child: Option<RunExport>, entries: Vec<Entry>) -> StepExport {
    StepExport {
        path,
        name: v.to_owned(),
        kind: v.to_owned(),
        iteration: 1,
        status: v.to_owned(),
        started_at: v.to_owned(),
        completed_at: Some(v.to_owned()),
        duration_ms: Some(5),
        error: Some(v.to_owned()),
        result: Some(json!(v)),
        usage: Some(Usage {
            input_tokens: Some(1),
            ..Usage::default()
        }),
        network_refused: None,
        cost_usd: Some(0.5),
        entries,
        steps: Vec::new(),
        child_run_id: child.is_none().then(|| v.to_owned()),
        child_run: child.map(Box::new),
    }
}

fn entries(v: &str) -> Vec<Entry> {
    let blocks = vec![
        ExportBlock::Text {
            fidelity: v.to_owned(),
            text: v.to_owned(),
        },
        // A user message's later text block renders as the system prompt.
        ExportBlock::Text {
            fidelity: v.to_owned(),
            text: v.to_owned(),
        },
        ExportBlock::Thinking {
            fidelity: v.to_owned(),
            thinking: v.to_owned(),
        },
        ExportBlock::ToolUse {
            fidelity: v.to_owned(),
            tool_name: v.to_owned(),
            tool_id: v.to_owned(),
            tool_input: json!({ v: v }),
        },
        ExportBlock::ToolResult {
            fidelity: v.to_owned(),
            tool_id: v.to_owned(),
            tool_content: json!(v),
        },
        ExportBlock::Command {
            fidelity: v.to_owned(),
            command: v.to_owned(),
        },
        ExportBlock::Stream {
            fidelity: v.to_owned(),
            text: v.to_owned(),
        },
        ExportBlock::Other {
            original_type: v.to_owned(),
            raw: json!(v),
        },
        ExportBlock::Unknown,
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
    vec![
        message("user"),
        message("assistant"),
        Entry::ToolCall(ToolCallExport {
            seq: 2,
            call_id: v.to_owned(),
            name: v.to_owned(),
            fidelity: v.to_owned(),
            input: json!(v),
            output: json!({ v: [v] }),
            error: Some(v.to_owned()),
            completed: true,
            started_at: v.to_owned(),
            completed_at: Some(v.to_owned()),
        }),
    ]
}

fn run(v: &str, depth: u32) -> RunExport {
    let child = (depth == 0).then(|| run(v, depth + 1));
    let mut outer = step(v, format!("{v}.{v}"), None, entries(v));
    outer.steps.push(step(v, v.to_owned(), child, entries(v)));
    RunExport {
        run_id: v.to_owned(),
        parent_run_id: Some(v.to_owned()),
        workflow: Some(v.to_owned()),
        status: v.to_owned(),
        started_at: Some(v.to_owned()),
        completed_at: Some(v.to_owned()),
        duration_ms: Some(1),
        error: Some(v.to_owned()),
        result: Some(json!(v)),
        usage: None,
        cost_usd: None,
        steps: vec![outer],
        entries: entries(v),
        problems: vec![v.to_owned()],
    }
}

/// Every string field of the document holds `v`.
fn hostile_document(v: &str) -> ExportDocument {
    ExportDocument {
        schema_version: v.to_owned(),
        generator: v.to_owned(),
        options: ExportOptionsRecord {
            reasoning_included: true,
            truncate_outputs_bytes: None,
            redacted: false,
        },
        run: run(v, 0),
        // A priced document: the cost section names models and the table as recorded.
        cost: Some(CostSummary {
            price_table: v.to_owned(),
            total_usd: None,
            reported_usd: Some(1.0),
            by_model: vec![ModelCost {
                model: v.to_owned(),
                turns: 1,
                usage: Usage::default(),
                cost_usd: None,
            }],
            unpriced_models: vec![v.to_owned()],
        }),
    }
}

/// One tag of an HTML text: its name and its attributes (name, value).
#[derive(Debug)]
struct TagInfo {
    name: String,
    attrs: Vec<(String, String)>,
}

/// Every tag in `html`. Text and attribute values of both outputs are
/// escaped, so each `<` opens a tag and each tag ends at the next `>`.
fn tags(html: &str) -> Vec<TagInfo> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after.find('>').expect("every tag is closed");
        let body = after[..end].trim_end_matches('/');
        rest = &after[end + 1..];
        let name_len = body.find(|c: char| c.is_whitespace()).unwrap_or(body.len());
        let name = body[..name_len].trim_start_matches('/').to_lowercase();
        let mut attrs = Vec::new();
        let mut a = body[name_len..].trim_start();
        while !a.is_empty() {
            let n_len = a
                .find(|c: char| c == '=' || c.is_whitespace())
                .unwrap_or(a.len());
            let attr = a[..n_len].to_lowercase();
            a = &a[n_len..];
            let mut value = String::new();
            if let Some(v) = a.strip_prefix('=') {
                let v = v.strip_prefix('"').expect("attribute values are quoted");
                let close = v.find('"').expect("quoted value closes");
                value = v[..close].to_owned();
                a = &v[close + 1..];
            }
            attrs.push((attr, value));
            a = a.trim_start();
        }
        out.push(TagInfo { name, attrs });
    }
    out
}

/// The raw HTML the Markdown renderer writes itself: the `<details>`
/// wrappers for thinking and system prompts.
const OUR_MARKDOWN_HTML: &[&str] = &[
    "<details><summary>Thinking</summary>",
    "<details><summary>System prompt</summary>",
    "</details>",
];

fn markdown_options() -> [(&'static str, Options); 2] {
    let mut all = Options::all();
    // Smart punctuation rewrites quotes and dashes: not markup, but it would
    // break the check that text comes through unchanged.
    all.remove(Options::ENABLE_SMART_PUNCTUATION);
    [("commonmark", Options::empty()), ("all extensions", all)]
}

#[test]
fn markdown_renders_hostile_values_as_text_only() {
    for v in &hostile() {
        let md = to_markdown(&hostile_document(v));
        for (label, options) in markdown_options() {
            let mut text = String::new();
            for event in Parser::new_ext(&md, options) {
                match &event {
                    Event::Html(h) | Event::InlineHtml(h) => assert!(
                        OUR_MARKDOWN_HTML.contains(&h.trim()),
                        "{label}: raw HTML {h:?} from value {v:?}\n{md}"
                    ),
                    Event::Start(Tag::Link { .. } | Tag::Image { .. }) => {
                        panic!("{label}: link or image from value {v:?}: {event:?}\n{md}")
                    }
                    Event::Start(Tag::Heading {
                        id, classes, attrs, ..
                    }) => assert!(
                        id.is_none() && classes.is_empty() && attrs.is_empty(),
                        "{label}: heading attributes from value {v:?}: {event:?}"
                    ),
                    Event::Text(t) | Event::Code(t) => text.push_str(t),
                    _ => {}
                }
            }
            // Faithful as well as safe: a single-line value shows as written.
            if !v.contains(['\n', '\r']) && !v.trim().is_empty() {
                assert!(
                    text.contains(v.trim()),
                    "{label}: value {v:?} not shown verbatim in {text:?}"
                );
            }
            let mut html = String::new();
            pulldown_cmark::html::push_html(&mut html, Parser::new_ext(&md, options));
            for tag in tags(&html) {
                assert!(
                    [
                        "h1", "h2", "h3", "h4", "h5", "h6", "p", "ul", "li", "code", "pre",
                        "strong", "em", "hr", "br", "details", "summary"
                    ]
                    .contains(&tag.name.as_str()),
                    "{label}: tag {tag:?} from value {v:?}\n{md}"
                );
                for (name, value) in &tag.attrs {
                    assert!(
                        tag.name == "code"
                            && name == "class"
                            && ["language-text", "language-json"].contains(&value.as_str()),
                        "{label}: attribute {name}={value:?} on {tag:?} from value {v:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn markdown_fences_and_spans_outlast_content_backticks() {
    let v = "a ```` b ````` c";
    let md = to_markdown(&hostile_document(v));
    assert!(md.contains("``````text\n"), "fence longer than the 5-run");
    assert!(
        md.contains("``````a ```` b ````` c``````"),
        "span delimiter too"
    );
    // Every fenced block ends where it was opened: the rendered code blocks
    // hold exactly the value, never our own text after it.
    let mut in_code = false;
    let mut code = String::new();
    for event in Parser::new(&md) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(pulldown_cmark::TagEnd::CodeBlock) => {
                let body = std::mem::take(&mut code);
                let value: Value =
                    serde_json::from_str(&body).unwrap_or_else(|_| Value::String(body.clone()));
                assert!(
                    body.trim_end() == v || value.to_string().contains(v),
                    "code block {body:?}"
                );
                in_code = false;
            }
            Event::Text(t) if in_code => code.push_str(&t),
            _ => {}
        }
    }
}

/// Tags and attributes `html.rs` writes itself.
const HTML_TAGS: &[&str] = &[
    "!doctype", "html", "head", "meta", "title", "style", "body", "nav", "strong", "ul", "li", "a",
    "main", "p", "section", "h1", "h2", "h3", "h4", "h5", "h6", "code", "span", "div", "details",
    "summary", "pre",
];
const HTML_ATTRS: &[&str] = &[
    "html",
    "lang",
    "charset",
    "name",
    "content",
    "http-equiv",
    "aria-label",
    "href",
    "class",
    "id",
    "open",
    // The timeline and the money chart (#42): positions and our own keys.
    "style",
    "aria-hidden",
    "data-run",
    "data-path",
    "data-model",
    "data-total-usd",
];

#[test]
fn html_export_escapes_hostile_values_in_every_field() {
    for v in &hostile() {
        let html = to_html(&hostile_document(v));
        for tag in tags(&html) {
            assert!(
                HTML_TAGS.contains(&tag.name.as_str()),
                "tag {tag:?} from value {v:?}"
            );
            for (name, value) in &tag.attrs {
                assert!(
                    HTML_ATTRS.contains(&name.as_str()),
                    "attribute {name} on {tag:?} from value {v:?}"
                );
                if name == "href" {
                    assert!(value.starts_with("#n"), "link {value:?} from value {v:?}");
                }
                if name == "style" {
                    // Only the page's own lengths: no value reaches a style attribute.
                    assert!(
                        value
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || ":;.%-".contains(c)),
                        "style {value:?} from value {v:?}"
                    );
                }
            }
        }
        if v.contains("<img src=x onerror=alert(1)>") {
            assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        }
    }
}
