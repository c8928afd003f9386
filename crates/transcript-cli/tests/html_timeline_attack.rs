//! The attacker's side of the HTML timeline (issue #42 item 3): hostile step, workflow,
//! tool and model names and tool outputs never become markup or a link in the timeline
//! or the cost chart, read from the DOM headless Chromium parsed; and a run of 10,000
//! events opens and draws (every bar present in the DOM, a screenshot written).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::html_page::*;

use std::path::Path;

use serde_json::{Value, json};

/// Hostile values in several shapes: tags, attribute breaks, URLs and schemes a linkifier
/// or a sloppy escaper would turn into markup or a link, entities, CSS and comment breaks.
const HOSTILE: &[&str] = &[
    "<script>alert(1)</script>",
    "\"><a href=\"https://evil.example/\">x</a>",
    "' onfocus='alert(1)' x='",
    "<img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "https://evil.example/phish",
    "mailto:a@evil.example",
    "&lt;b&gt;bold&lt;/b&gt;",
    "</style><a href=#n1>y</a><style>",
    "--><!--<a href=x>",
    "<svg/onload=alert(1)>",
    "%3Ca href=x%3E",
];

fn hostile_run(storage: &Path) {
    let mut events = vec![(
        "run.started",
        String::new(),
        0,
        json!({"name": HOSTILE[0], "kind": "workflow"}),
    )];
    for (i, h) in HOSTILE.iter().enumerate() {
        let path = format!("s{i}");
        let at = 10 * i as i64;
        events.push((
            "step.started",
            path.clone(),
            at,
            json!({"name": h, "kind": "agent"}),
        ));
        events.push((
            "tool.call",
            path.clone(),
            at + 1,
            json!({"name": h, "call_id": format!("c{i}"), "input": {"q": h}, "output": null, "fidelity": "router"}),
        ));
        events.push((
            "tool.result",
            path.clone(),
            at + 2,
            json!({"name": h, "call_id": format!("c{i}"), "input": null, "output": h, "error": h, "fidelity": "router"}),
        ));
        events.push((
            "message.assistant",
            path.clone(),
            at + 3,
            json!({"role": "assistant", "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": h}],
                   "provider": h, "model": h, "usage": {"input_tokens": 10 + i, "output_tokens": 2}}),
        ));
        events.push((
            "step.completed",
            path,
            at + 4,
            json!({"name": h, "kind": "agent", "error": h}),
        ));
    }
    events.push((
        "run.completed",
        String::new(),
        200,
        json!({"name": HOSTILE[0], "kind": "workflow"}),
    ));
    let events: Vec<(&str, &str, i64, Value)> = events
        .iter()
        .map(|(t, p, a, v)| (*t, p.as_str(), *a, v.clone()))
        .collect();
    write_run(storage, &events);
}

/// The tag names of `section` (as Chromium serialized its DOM).
fn tags(section: &str) -> Vec<String> {
    section
        .match_indices('<')
        .filter_map(|(i, _)| {
            let name: String = section[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            (!name.is_empty()).then_some(name.to_ascii_lowercase())
        })
        .collect()
}

#[test]
fn hostile_values_stay_text_in_the_timeline_and_the_chart() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    hostile_run(&storage);
    let dom = export_and_dump(&browser, &storage, RUN, dir.path());
    let section = timeline(&dom);
    // Run, 12 steps, each with a tool call and an agent turn: exactly these links, each a
    // bar to a section of this page.
    let bars = bars(section);
    assert_eq!(bars.len(), 1 + 3 * HOSTILE.len(), "{bars:#?}");
    for b in &bars {
        assert!(
            b.href.starts_with("#n") && b.href[2..].parse::<u32>().is_ok(),
            "{b:?}"
        );
        assert!(b.class.starts_with("bar k-"), "{b:?}");
    }
    // Only the timeline's own elements: no script, image, svg, style, nor a second link.
    let allowed = ["section", "h2", "div", "span", "a"];
    for t in tags(section) {
        assert!(
            allowed.contains(&t.as_str()),
            "element <{t}> in the timeline:\n{section}"
        );
    }
    // Each hostile value is there as text (Chromium re-escapes `<`, `>` and `&` in text).
    for h in HOSTILE {
        let text = h
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(section.contains(&text), "{h} not shown as text");
    }
    let money = &dom[dom.find("<section class=\"money\"").expect("no chart")..];
    let money = &money[..money.find("</section>").unwrap()];
    for t in tags(money) {
        assert!(
            ["section", "h2", "h3", "p", "span", "div"].contains(&t.as_str()),
            "<{t}> in the chart"
        );
    }
    assert!(!dom.to_ascii_lowercase().contains("<script"));
}

#[test]
fn ten_thousand_events_open_and_draw() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    // 2 + 2,500 steps × (started, tool.call, tool.result, completed) = 10,002 events.
    let mut events = vec![(
        "run.started",
        String::new(),
        0,
        json!({"name": "big", "kind": "workflow"}),
    )];
    for i in 0..2500i64 {
        let path = format!("s{i}");
        let at = i * 20;
        events.push((
            "step.started",
            path.clone(),
            at,
            json!({"name": format!("step {i}"), "kind": "operation"}),
        ));
        events.push(("tool.call", path.clone(), at + 2, json!({"name": "read", "call_id": format!("c{i}"), "input": {"i": i}, "output": null, "fidelity": "router"})));
        events.push(("tool.result", path.clone(), at + 9, json!({"name": "read", "call_id": format!("c{i}"), "input": null, "output": "x".repeat(200), "fidelity": "router"})));
        events.push((
            "step.completed",
            path,
            at + 10 + i % 7,
            json!({"name": format!("step {i}"), "kind": "operation"}),
        ));
    }
    events.push((
        "run.completed",
        String::new(),
        50_000,
        json!({"name": "big", "kind": "workflow"}),
    ));
    assert_eq!(events.len(), 10_002);
    let events: Vec<(&str, &str, i64, Value)> = events
        .iter()
        .map(|(t, p, a, v)| (*t, p.as_str(), *a, v.clone()))
        .collect();
    write_run(&storage, &events);
    let dom = export_and_dump(&browser, &storage, RUN, dir.path());
    let bars = bars(timeline(&dom));
    assert_eq!(bars.len(), 1 + 2 * 2500);
    let shot = dir.path().join("big.png");
    let s = headless(&browser, &dir.path().join("profile2"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1280,2000")
        .arg(format!("file://{}", dir.path().join("run.html").display()))
        .output()
        .unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    assert_eq!(&std::fs::read(&shot).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
}
