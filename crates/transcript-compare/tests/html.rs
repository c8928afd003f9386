//! The diff page under the HTML export's escaping attack: the hostile values of every
//! rendered view's attack test (`fixtures/hostile/markup.json`) in every recorded field of two runs (step paths,
//! names, kinds, outputs, errors, agent text, thinking, tool names, arguments and results,
//! workflow names) never become a tag or an attribute; the page has only its own tags, no
//! link, no script, and each value shows as text.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use transcript_compare::{DiffOptions, diff, render_html};

/// The hostile values of every attack test of a rendered view (`fixtures/hostile/markup.json`).
fn hostile() -> Vec<String> {
    serde_json::from_str(include_str!("../../../fixtures/hostile/markup.json")).unwrap()
}

/// A run whose every recorded field carries `v` (B gets `v` plus a suffix, so every field
/// differs and is shown on both sides).
fn hostile_run(id: &str, v: &str, suffix: &str) -> Run {
    let h = format!("{v}{suffix}");
    let mut r = Run::new(id);
    r.events.clear();
    r.push(
        "run.started",
        "",
        0,
        json!({"name": h, "kind": "workflow"}),
        None,
    );
    let path = format!("p{v}");
    r.push(
        "step.started",
        &path,
        0,
        json!({"name": h, "kind": h}),
        None,
    );
    r.push(
        "message.user",
        &path,
        0,
        json!({"role": "user", "blocks": [
        {"type": "text", "fidelity": "router", "text": h}]}),
        None,
    );
    r.push(
        "message.assistant",
        &path,
        0,
        json!({"role": "assistant", "model": h,
        "blocks": [{"type": "thinking", "fidelity": "agent_emitted", "thinking": h},
                   {"type": "tool_use", "fidelity": "agent_emitted", "tool_name": h,
                    "tool_id": h, "tool_input": {h.clone(): h}},
                   {"type": "text", "fidelity": "agent_emitted", "text": format!("a\n{h}\nb")}]}),
        None,
    );
    r.push(
        "tool.call",
        &path,
        0,
        json!({"name": h, "call_id": h, "input": {"q": h},
        "output": null, "fidelity": "router"}),
        None,
    );
    r.push(
        "tool.result",
        &path,
        0,
        json!({"name": h, "call_id": h, "input": null,
        "output": h, "error": h, "fidelity": "router"}),
        None,
    );
    r.push(
        "step.completed",
        &path,
        0,
        json!({"name": h, "kind": h, "error": h,
        "result": {"command": h, "stdout": format!("1\n{h}\n3"), "exit_code": 1}}),
        None,
    );
    // A step on one side only.
    let only = format!("{path}{suffix}");
    r.push(
        "step.started",
        &only,
        0,
        json!({"name": h, "kind": h}),
        None,
    );
    r.push(
        "step.completed",
        &only,
        0,
        json!({"name": h, "kind": h}),
        None,
    );
    r.push(
        "run.completed",
        "",
        0,
        json!({"name": h, "kind": "workflow", "error": h}),
        None,
    );
    r
}

/// One tag of an HTML text: its name and its attributes (name, value). Our text and
/// attribute values are escaped, so each `<` opens a tag and each tag ends at the next `>`
/// (the parser of transcript-export's tests/injection.rs).
#[derive(Debug)]
struct TagInfo {
    name: String,
    attrs: Vec<(String, String)>,
}

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

const PAGE_TAGS: &[&str] = &[
    "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div",
    "section", "strong", "span", "pre", "a",
];
const PAGE_ATTRS: &[&str] = &[
    "html",
    "lang",
    "charset",
    "name",
    "content",
    "http-equiv",
    "class",
    "href",
    "id",
];
const PAGE_CLASSES: &[&str] = &[
    "sides",
    "head",
    "equal",
    "differs",
    "run",
    "step",
    "step differs",
    "step only",
    "meta",
    "change",
    "field",
    "field changed",
    "was",
    "now",
    "key",
    "absent",
    "divergence",
    "eq",
    "del",
    "ins",
];

#[test]
fn hostile_values_in_every_field_stay_text_on_the_diff_page() {
    for v in &hostile() {
        let a = hostile_run(A, v, "");
        let b = hostile_run(B, v, "!");
        let doc = diff(
            &a.record(&[]),
            &b.record(&[]),
            &DiffOptions { strict_ids: true },
        );
        assert!(!doc.equal);
        let page = render_html(&doc, v, v);
        for tag in tags(&page) {
            assert!(
                PAGE_TAGS.contains(&tag.name.as_str()),
                "tag {tag:?} from value {v:?}"
            );
            for (name, value) in &tag.attrs {
                assert!(
                    PAGE_ATTRS.contains(&name.as_str()),
                    "attribute {name} on {tag:?} from value {v:?}"
                );
                if name == "class" {
                    assert!(PAGE_CLASSES.contains(&value.as_str()), "class {value:?}");
                }
                // Our one link and its target: the first divergence on this page.
                if name == "href" || name == "id" {
                    let want = if name == "href" {
                        "#first-divergence"
                    } else {
                        "first-divergence"
                    };
                    assert_eq!(value, want, "{name} from value {v:?}");
                }
            }
        }
        assert!(!page.to_ascii_lowercase().contains("<script"));
        // One link: ours, to the first divergence (checked above), never one from a value.
        assert_eq!(page.matches("<a ").count(), 1, "a link from {v:?}");
        if v.contains("<img src=x onerror=alert(1)>") {
            assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
        }
    }
}

#[test]
fn the_page_shows_both_sides_of_a_change() {
    let mut a = Run::new(A);
    a.command("build", "one\ntwo\nthree\n", 0);
    a.complete(None);
    let mut b = Run::new(B);
    b.command("build", "one\n2\nthree\n", 0);
    b.complete(None);
    let doc = diff(&a.record(&[]), &b.record(&[]), &DiffOptions::default());
    let page = render_html(&doc, "a.jsonl", "b.jsonl");
    assert!(page.contains("<span class=\"del\">two</span>"), "{page}");
    assert!(page.contains("<span class=\"ins\">2</span>"), "{page}");
    assert!(page.contains("A: a.jsonl") && page.contains("B: b.jsonl"));
    assert!(page.contains("default-src 'none'"));
}
