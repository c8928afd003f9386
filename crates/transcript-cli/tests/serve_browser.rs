//! `transcript serve` in a real browser (#60): headless Chromium driven over the DevTools
//! protocol (`serve_support::Browser`) against the binary. A running run turns completed in
//! the list and on its page without a reload, and a new run appears; search finds a tool
//! output and its link opens the step; the diff picked from the list shows the changed step;
//! a store full of hostile strings runs no script, opens no dialog, asks nothing of another
//! origin and logs nothing. `TRANSCRIPT_SERVE_SHOTS=DIR` writes the README's screenshots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use serve_support::{Browser, Serve, simple_run, write_run};

const LIMIT: Duration = Duration::from_secs(60);

/// Where to write screenshots, when asked.
fn shots() -> Option<PathBuf> {
    std::env::var_os("TRANSCRIPT_SERVE_SHOTS").map(PathBuf::from)
}

#[test]
fn a_running_run_turns_completed_without_a_reload_and_a_new_run_appears() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("s");
    let (serve, list, run) =
        serve_support::a_live_run_turns_completed(&mut browser, &storage, tmp.path(), LIMIT);
    // A run that starts now appears at the top, without a reload either.
    simple_run(
        &storage,
        "0000abcd-0000-4000-8000-0000000000f1",
        "late",
        "x",
    );
    browser.wait_for(&list, "window.notReloaded && document.querySelectorAll('#runs tbody tr').length === 2 && document.getElementById('run-0000abcd-0000-4000-8000-0000000000f1') !== null", LIMIT);
    if let Some(dir) = shots() {
        browser.screenshot(&run, &dir.join("serve-run.png"));
    }
    let bad = browser.misdeeds(&serve.origin);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn search_finds_a_tool_output_and_its_link_opens_the_step() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let id = "0000abcd-0000-4000-8000-000000000051";
    simple_run(
        tmp.path(),
        id,
        "built",
        "the answer is needle-browser-77, found",
    );
    simple_run(
        tmp.path(),
        "0000abcd-0000-4000-8000-000000000052",
        "built",
        "nothing",
    );
    let serve = Serve::start(tmp.path(), &["--addr", "127.0.0.1:0"], 1);
    let page = browser.open(&format!("{}/", serve.origin));
    // The bar's search box, as a person uses it (a plain GET form).
    browser.eval(&page, "document.querySelector('header input[name=q]').value = 'NEEDLE-browser-77'; document.querySelector('header form').submit()");
    browser.wait_for(
        &page,
        "location.pathname === '/search' && document.querySelectorAll('.hit').length === 1",
        LIMIT,
    );
    let mark = browser.eval(&page, "document.querySelector('.hit mark').textContent");
    assert_eq!(mark, json!("needle-browser-77"));
    browser.eval(&page, "document.querySelector('.hit a.open').click()");
    browser.wait_for(
        &page,
        &format!("location.pathname === '/runs/{id}' && location.hash.startsWith('#n') && document.readyState === 'complete'"),
        LIMIT,
    );
    let target = browser.eval(
        &page,
        "document.querySelector(':target h1, :target h2, :target h3, :target h4').textContent",
    );
    assert!(
        target.as_str().unwrap().contains("ask"),
        "the link opened {target}"
    );
    let bad = browser.misdeeds(&serve.origin);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_diff_picked_in_the_list_shows_the_changed_step() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (
        "0000abcd-0000-4000-8000-0000000000d1",
        "0000abcd-0000-4000-8000-0000000000d2",
    );
    simple_run(tmp.path(), a, "compiled 3 files", "same");
    simple_run(tmp.path(), b, "compiled 4 files", "same");
    let serve = Serve::start(tmp.path(), &["--addr", "127.0.0.1:0"], 1);
    let page = browser.open(&format!("{}/", serve.origin));
    if let Some(dir) = shots() {
        browser.screenshot(&page, &dir.join("serve-list.png"));
    }
    browser.eval(&page, &format!("document.querySelector('#run-{a} input[name=a]').click(); document.querySelector('#run-{b} input[name=b]').click(); document.querySelector('#runs').closest('form').querySelector('button').click()"));
    browser.wait_for(
        &page,
        "location.pathname === '/diff' && document.querySelector('.differs') !== null",
        LIMIT,
    );
    let changed = browser.eval(&page, "Array.from(document.querySelectorAll('.step.differs')).map(s => s.textContent).join('\\n')");
    let changed = changed.as_str().unwrap();
    assert!(
        changed.contains("build")
            && changed.contains("compiled 3 files")
            && changed.contains("compiled 4 files"),
        "{changed}"
    );
    assert!(!changed.contains("ask"), "only build changed: {changed}");
    if let Some(dir) = shots() {
        browser.screenshot(&page, &dir.join("serve-diff.png"));
    }
    let bad = browser.misdeeds(&serve.origin);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The hostile values of every attack test of a rendered view, and values pointing at `trap`.
fn hostile(trap: &str) -> Vec<String> {
    let mut values: Vec<String> =
        serde_json::from_str(include_str!("../../../fixtures/hostile/markup.json")).unwrap();
    values.extend([
        format!("<img src={trap}/img.png>"),
        format!("<script src={trap}/x.js></script>"),
        format!("<link rel=stylesheet href={trap}/x.css>"),
        format!("<iframe src={trap}/frame></iframe>"),
        format!(
            "</style><style>@import url({trap}/i.css);body{{background:url({trap}/b.png)}}</style>"
        ),
        format!("\"><img src={trap}/attr.png>"),
        format!("<meta http-equiv=refresh content=\"0;url={trap}/go\">"),
        format!("</script><script>fetch('{trap}/f')</script>"),
        format!("javascript:fetch('{trap}/j')"),
    ]);
    values
}

fn hostile_run(storage: &Path, id: &str, tag: &str, values: &[String]) {
    let mut events = vec![(
        "run.started",
        String::new(),
        json!({"name": values[0], "kind": "workflow", "workspace": format!("/w/{}", values[4])}),
    )];
    for (i, h) in values.iter().enumerate() {
        let h = format!("{h}{tag}");
        let p = format!("s{i}");
        events.push(("step.started", p.clone(), json!({"name": h, "kind": h})));
        events.push(("message.assistant", p.clone(), json!({"role": "assistant", "model": h,
            "usage": {"input_tokens": 1}, "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": h},
            {"type": "tool_use", "fidelity": "agent_emitted", "tool_name": h, "tool_id": h, "tool_input": {"q": h}}]})));
        events.push(("tool.call", p.clone(), json!({"name": h, "call_id": format!("c{i}"), "input": {"q": h}, "output": null, "fidelity": "router"})));
        events.push(("tool.result", p.clone(), json!({"name": h, "call_id": format!("c{i}"), "input": null, "output": h, "error": h, "fidelity": "router"})));
        events.push((
            "step.completed",
            p,
            json!({"name": h, "kind": h, "error": h, "result": {"command": h, "stdout": h}}),
        ));
    }
    events.push((
        "run.completed",
        String::new(),
        json!({"name": "w", "kind": "workflow", "error": values[1]}),
    ));
    let events: Vec<(&str, &str, serde_json::Value)> = events
        .iter()
        .map(|(t, p, v)| (*t, p.as_str(), v.clone()))
        .collect();
    write_run(storage, id, &events);
}

#[test]
fn a_hostile_transcript_runs_no_script_and_loads_nothing() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // Every value that would load something points at this listener: a connection is a load.
    let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let at = format!("http://{}", trap.local_addr().unwrap());
    let values = hostile(&at);
    let (a, b) = (
        "0000abcd-0000-4000-8000-00000000000a",
        "0000abcd-0000-4000-8000-00000000000b",
    );
    hostile_run(tmp.path(), a, "", &values);
    hostile_run(tmp.path(), b, "<b>!</b>", &values);
    let serve = Serve::start(tmp.path(), &["--addr", "127.0.0.1:0"], 1);
    let tab = browser.open(&format!("{}/", serve.origin));
    for path in [
        "/".to_owned(),
        format!("/runs/{a}"),
        format!("/diff?a={a}&b={b}"),
        "/search?q=alert".to_owned(),
        "/search?q=%3Cscript".to_owned(),
        "/receipts".to_owned(),
        "/?all=1&sort=cost".to_owned(),
    ] {
        browser.navigate(&tab, &format!("{}{path}", serve.origin));
        // Links the values could have become are ours, and no element carries a handler.
        let foreign = browser.eval(&tab, "Array.from(document.querySelectorAll('[href],[src],[action]')).map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action')).filter(v => !/^[\\/#?]/.test(v))");
        assert_eq!(foreign, json!([]), "{path}");
        let handlers = browser.eval(&tab, "Array.from(document.querySelectorAll('*')).filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length");
        assert_eq!(handlers, json!(0), "{path}");
        let scripts = browser.eval(&tab, "document.scripts.length");
        assert_eq!(scripts, json!(1), "{path}: our one script only");
        let pwned = browser.eval(
            &tab,
            "document.title.includes('pwned') || document.querySelector('[data-pwned]') !== null",
        );
        assert_eq!(pwned, json!(false), "{path}");
    }
    // The values are there, as text.
    browser.navigate(&tab, &format!("{}/runs/{a}", serve.origin));
    let text = browser.eval(&tab, "document.body.textContent");
    assert!(text.as_str().unwrap().contains("<script>alert(1)</script>"));
    let bad = browser.misdeeds(&serve.origin);
    assert!(bad.is_empty(), "{bad:#?}");
    match trap.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("a page loaded something from {at} (peer {peer})"),
        Err(e) => panic!("{e}"),
    }
}

/// The harness sees what the tests forbid: a console message, a script error, a load the CSP
/// refused, a dialog (so the tests above pass because nothing happened, not because nothing
/// is watched).
#[test]
fn the_browser_harness_sees_what_the_tests_forbid() {
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    simple_run(tmp.path(), "0000abcd-0000-4000-8000-0000000000e1", "x", "y");
    let serve = Serve::start(tmp.path(), &["--addr", "127.0.0.1:0"], 1);
    let tab = browser.open(&format!("{}/", serve.origin));
    assert!(browser.misdeeds(&serve.origin).is_empty());
    for (act, seen) in [
        ("console.log('hello')", "console:"),
        (
            "setTimeout(() => { throw new Error('boom') }, 0)",
            "exception:",
        ),
        (
            "document.body.appendChild(new Image()).src = 'http://127.0.0.1:9/x.png'",
            "log:",
        ),
    ] {
        browser.eval(&tab, act);
        let deadline = std::time::Instant::now() + LIMIT;
        while !browser
            .misdeeds(&serve.origin)
            .iter()
            .any(|m| m.starts_with(seen))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{act}: not seen as {seen}"
            );
            browser.eval(&tab, "1");
        }
    }
}
