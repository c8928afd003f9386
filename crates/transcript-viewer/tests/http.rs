//! The viewer over HTTP, in-process on a storage directory: every page carries the
//! Content-Security-Policy whose hash is its one script's; the JSON API's shapes and filters;
//! the token rule; the event stream of a run and of the list; search, the step link, the
//! receipts; and hostile transcripts whose values stay text on every page.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};
use sha2::Digest as _;

const A: &str = "0000aaaa-0000-4000-8000-000000000001";
const B: &str = "0000bbbb-0000-4000-8000-000000000002";

fn two_runs(storage: &std::path::Path) {
    simple_run(
        storage,
        A,
        "build-wf",
        ("compiled ok", "found the needle-42 here", "model-x"),
    );
    simple_run(
        storage,
        B,
        "other-wf",
        ("compiled with warnings", "nothing", "model-y"),
    );
}

/// The page's scripts: exactly one, inline, whose sha256 the CSP names.
fn one_script_by_hash(page: &str, csp: &str) {
    let scripts: Vec<&str> = page
        .match_indices("<script")
        .map(|(i, _)| &page[i..])
        .collect();
    assert_eq!(scripts.len(), 1, "one script per page");
    let body = &scripts[0]["<script>".len()..scripts[0].find("</script>").unwrap()];
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body));
    assert!(
        csp.contains(&format!("script-src 'sha256-{hash}'")),
        "{csp}"
    );
}

#[test]
fn every_page_carries_the_csp_that_allows_only_its_own_script() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let server = serve(tmp.path(), None);
    for path in [
        "/".to_owned(),
        format!("/runs/{A}"),
        "/search?q=needle".to_owned(),
        "/receipts".to_owned(),
        "/diff".to_owned(),
        format!("/diff?a={A}&b={B}"),
        "/no/such/page".to_owned(),
    ] {
        let r = get(server.addr, &path, &[]);
        let csp = r.header("content-security-policy");
        assert!(
            csp.starts_with("default-src 'none'; script-src 'sha256-"),
            "{path}: {csp}"
        );
        for directive in [
            "connect-src 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "base-uri 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-eval") && !csp.contains("script-src 'unsafe-inline'"));
        assert_eq!(r.header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(r.header("cache-control"), "no-store", "{path}");
        assert!(r.header("content-type").starts_with("text/html"), "{path}");
        // The export's and the diff's own CSP meta is gone (theirs would forbid our script).
        assert!(!r.body.contains("http-equiv"), "{path}");
        one_script_by_hash(&r.body, csp);
        assert_eq!(
            r.status,
            if path.starts_with("/no/") { 404 } else { 200 },
            "{path}"
        );
    }
}

#[test]
fn the_json_api_lists_filters_and_gives_a_runs_events_as_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let server = serve(tmp.path(), None);
    let r = get(server.addr, "/api/runs", &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").starts_with("application/json"));
    let list: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (
            list["total"].as_u64(),
            list["page"].as_u64(),
            list["per_page"].as_u64()
        ),
        (Some(2), Some(1), Some(100))
    );
    let run = &list["runs"][0];
    for key in [
        "run_id",
        "parent_run_id",
        "workflow",
        "status",
        "started_at",
        "duration_ms",
        "events",
        "cost_usd",
        "tokens",
        "models",
        "replay_of",
        "location",
    ] {
        assert!(run.get(key).is_some(), "no {key} in {run}");
    }
    // Both started at the same time: ordered by id.
    assert_eq!(run["run_id"], A);
    assert_eq!(
        (
            run["status"].as_str(),
            run["events"].as_u64(),
            run["tokens"].as_u64()
        ),
        (Some("succeeded"), Some(10), Some(1500))
    );
    assert_eq!(run["cost_usd"].as_f64(), Some(1.5));
    assert_eq!(run["models"], json!(["model-x"]));
    let by = |q: &str| -> Vec<String> {
        let r = get(server.addr, &format!("/api/runs?{q}"), &[]);
        assert_eq!(r.status, 200, "{q}: {}", r.body);
        let v: Value = serde_json::from_str(&r.body).unwrap();
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(by("model=model-y"), [B]);
    assert_eq!(by("workflow=build-wf"), [A]);
    assert_eq!(by("status=failed"), Vec::<String>::new());
    assert_eq!(by("day=2026-05-28&sort=workflow&order=desc"), [B, A]);
    assert_eq!(by("sort=cost&order=asc"), [A, B]);
    assert_eq!(get(server.addr, "/api/runs?sort=nonsense", &[]).status, 400);

    let r = get(server.addr, &format!("/api/runs/{}", &A[..8]), &[]);
    assert_eq!(r.status, 200);
    let run: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (run["run_id"].as_str(), run["state"].as_str()),
        (Some(A), Some("succeeded"))
    );
    let events = run["events"].as_array().unwrap();
    let file = std::fs::read_to_string(tmp.path().join(format!("{A}.jsonl"))).unwrap();
    let recorded: Vec<Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events, &recorded);
    assert_eq!(
        get(
            server.addr,
            "/api/runs/0000ffff-0000-4000-8000-000000000009",
            &[]
        )
        .status,
        404
    );
}

#[test]
fn a_token_is_required_of_every_request_and_a_public_address_needs_one() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let token = "s3cret-token-0123456789";
    let server = serve(tmp.path(), Some(token));
    for path in [
        "/",
        "/api/runs",
        "/receipts",
        &format!("/api/runs/{A}/events"),
    ] {
        let r = get(server.addr, path, &[]);
        assert_eq!(r.status, 401, "{path}");
        assert!(!r.body.contains(A), "{path}");
        assert!(!r.header("content-security-policy").is_empty());
    }
    let wrong = "s3cret-token-0123456780";
    assert_eq!(
        get(
            server.addr,
            "/",
            &[&format!("Authorization: Bearer {wrong}")]
        )
        .status,
        401
    );
    assert_eq!(
        get(server.addr, &format!("/?token={wrong}"), &[]).status,
        401
    );
    assert_eq!(
        get(
            server.addr,
            "/",
            &[&format!("Authorization: Bearer {token}")]
        )
        .status,
        200
    );
    assert_eq!(
        get(
            server.addr,
            "/",
            &[&format!("Cookie: transcript_token={token}")]
        )
        .status,
        200
    );
    let r = get(server.addr, &format!("/?token={token}"), &[]);
    assert_eq!(r.status, 200);
    assert!(
        r.header("set-cookie").contains("HttpOnly")
            && r.header("set-cookie").contains("SameSite=Strict")
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = std::sync::Arc::new(transcript_infra::DirRunStore::new(tmp.path()));
    let clock = std::sync::Arc::new(transcript_infra::SystemClock);
    let config = transcript_viewer::ViewerConfig::new(store, clock);
    let refused = runtime.block_on(transcript_viewer::Viewer::bind(
        "0.0.0.0:0".parse().unwrap(),
        config,
    ));
    assert!(matches!(
        refused,
        Err(transcript_viewer::ViewerError::TokenRequired { .. })
    ));
}

#[test]
fn a_runs_event_stream_sends_what_follows_since_and_ends_with_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let server = serve(tmp.path(), None);
    let r = get(server.addr, &format!("/api/runs/{A}/events?since=7"), &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").starts_with("text/event-stream"));
    let ids: Vec<&str> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids, ["8", "9", "10"], "{}", r.body);
    assert!(
        r.body
            .contains("event: end\ndata: {\"status\":\"succeeded\"}"),
        "{}",
        r.body
    );
    // A reconnecting browser's Last-Event-ID wins over an older `since`.
    let r = get(
        server.addr,
        &format!("/api/runs/{A}/events?since=2"),
        &["Last-Event-ID: 9"],
    );
    let ids: Vec<&str> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids, ["10"]);
}

#[test]
fn the_live_list_sends_a_run_that_appears_after_the_page_was_rendered() {
    let tmp = tempfile::tempdir().unwrap();
    simple_run(tmp.path(), A, "first", ("x", "y", "m"));
    let server = serve(tmp.path(), None);
    let page = get(server.addr, "/", &[]).body;
    let at = page.find("data-version=\"").unwrap() + "data-version=\"".len();
    let version: u64 = page[at..at + page[at..].find('"').unwrap()]
        .parse()
        .unwrap();
    // Appears between the render and the subscription: still sent.
    simple_run(tmp.path(), B, "second", ("x", "y", "m"));
    let mut stream = request(
        server.addr,
        &format!("/api/runs/live?version={version}"),
        &[],
    );
    // The next look at the store (a render, or the poller once someone watches) sees it.
    let _ = get(server.addr, "/api/runs", &[]);
    let seen = read_until(&mut stream, B, Duration::from_secs(30));
    assert!(seen.contains("event: run"), "{seen}");
    assert!(seen.contains("\"workflow\":\"second\""), "{seen}");
}

#[test]
fn search_finds_a_tool_output_newest_first_and_links_to_its_step() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let server = serve(tmp.path(), None);
    let r = get(server.addr, "/search?q=NEEDLE-42", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("1 matches"), "{}", r.body);
    assert!(
        r.body.contains("found the <mark>needle-42</mark> here"),
        "{}",
        r.body
    );
    let link = format!("/runs/{A}/at/8");
    assert!(r.body.contains(&format!("href=\"{link}\"")), "{}", r.body);
    // The link opens the page at the step's section.
    let r = get(server.addr, &link, &[]);
    assert_eq!(r.status, 303);
    let location = r.header("location").to_owned();
    let anchor = location.strip_prefix(&format!("/runs/{A}#")).unwrap();
    let page = get(server.addr, &format!("/runs/{A}"), &[]).body;
    let section = &page[page.find(&format!("id=\"{anchor}\"")).unwrap()..];
    assert!(
        section[..300].contains("ask"),
        "{anchor} is not the step ask: {}",
        &section[..300]
    );
    // A key or an envelope field is no hit.
    assert!(
        get(server.addr, "/search?q=call_id", &[])
            .body
            .contains("0 matches")
    );
}

#[test]
fn receipts_group_by_day_model_workflow_and_project() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    let server = serve(tmp.path(), None);
    let r = get(server.addr, "/receipts", &[]);
    assert_eq!(r.status, 200);
    for (table, key) in [
        ("day", "2026-05-28"),
        ("model", "model-x"),
        ("workflow", "other-wf"),
        // Not imported: its workflow, as `receipts --by project` says.
        ("project", "other-wf"),
    ] {
        let at = r
            .body
            .find(&format!("id=\"by-{table}\""))
            .unwrap_or_else(|| panic!("no {table}"));
        assert!(r.body[at..].contains(&format!("<td>{key}</td>")), "{table}");
    }
    assert!(
        r.body.contains("$3.0000"),
        "the day's two runs cost 3 x 1000 tokens"
    );
}

/// Tags a page may hold: ours, the export's and the diff's.
const ELEMENTS: &[&str] = &[
    "!doctype", "html", "head", "meta", "title", "style", "body", "header", "nav", "main", "form",
    "input", "select", "option", "label", "button", "table", "thead", "tbody", "tr", "th", "td",
    "a", "code", "div", "span", "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "li", "section",
    "details", "summary", "pre", "strong", "mark", "script", "em", "br", "small",
];

#[test]
fn hostile_values_are_text_on_every_page() {
    let tmp = tempfile::tempdir().unwrap();
    let values = hostile();
    for (id, tag) in [(A, ""), (B, "<b>!</b>")] {
        let mut events = vec![(
            "run.started".to_owned(),
            String::new(),
            json!({"name": values[0], "kind": "workflow", "workspace": format!("/w/{}", values[4])}),
        )];
        for (i, h) in values.iter().enumerate() {
            let h = format!("{h}{tag}");
            let p = format!("s{i}");
            events.push((
                "step.started".into(),
                p.clone(),
                json!({"name": h, "kind": h}),
            ));
            events.push(("message.assistant".into(), p.clone(), json!({"role": "assistant", "model": h,
                "usage": {"input_tokens": 1}, "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": h}]})));
            events.push((
                "tool.result".into(),
                p.clone(),
                json!({"name": h, "call_id": "c", "output": h, "error": h, "fidelity": "router"}),
            ));
            events.push((
                "step.completed".into(),
                p,
                json!({"name": h, "kind": h, "error": h, "result": {"stdout": h}}),
            ));
        }
        events.push((
            "run.completed".into(),
            String::new(),
            json!({"name": "w", "kind": "workflow", "error": values[1]}),
        ));
        let events: Vec<(&str, &str, Value)> = events
            .iter()
            .map(|(t, p, v)| (t.as_str(), p.as_str(), v.clone()))
            .collect();
        write_run(tmp.path(), id, &events);
    }
    let server = serve(tmp.path(), None);
    let pages = [
        "/".to_owned(),
        "/?all=1&sort=cost".to_owned(),
        format!("/runs/{A}"),
        format!("/diff?a={A}&b={B}"),
        "/search?q=alert".to_owned(),
        "/search?q=%3Cscript%3E".to_owned(),
        "/receipts".to_owned(),
        "/diff?a=%3Cscript%3E&b=x".to_owned(),
    ];
    for path in &pages {
        let r = get(server.addr, path, &[]);
        assert!(
            r.status == 200 || path.contains("a=%3C"),
            "{path}: {}",
            r.status
        );
        for (name, attrs) in tags(&r.body) {
            assert!(
                ELEMENTS.contains(&name.as_str()),
                "{path}: <{name}> {attrs:?}"
            );
            for (attr, value) in &attrs {
                assert!(
                    !attr.starts_with("on"),
                    "{path}: handler {attr} on <{name}>"
                );
                assert!(
                    !(attr == "src" || attr == "srcset" || attr == "data"),
                    "{path}: {attr} on <{name}>"
                );
                if attr == "href" || attr == "action" {
                    assert!(
                        value.starts_with('/') || value.starts_with('#') || value.starts_with("?"),
                        "{path}: {attr}={value}"
                    );
                }
            }
        }
        for raw in ["\u{1b}", "\u{7}", "\u{202e}"] {
            assert!(!r.body.contains(raw), "{path}: raw {raw:?}");
        }
    }
    let run = get(server.addr, &format!("/runs/{A}"), &[]).body;
    assert!(run.contains("\\u{1b}[2J"), "controls shown as text");
    assert!(run.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn a_trial_is_marked_with_its_recording_and_fork_step_in_the_list() {
    let tmp = tempfile::tempdir().unwrap();
    two_runs(tmp.path());
    // B becomes a trial of A forked at its `build` step (decision 22).
    let file = tmp.path().join(format!("{B}.jsonl"));
    let text = std::fs::read_to_string(&file).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let mut started: Value = serde_json::from_str(first).unwrap();
    started["payload"]["replay_of"] = json!(A);
    started["payload"]["forked_at"] = json!("build<b>");
    std::fs::write(&file, format!("{started}\n{rest}")).unwrap();
    let server = serve(tmp.path(), None);
    let list: Value = serde_json::from_str(&get(server.addr, "/api/runs", &[]).body).unwrap();
    let trial = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == B)
        .unwrap();
    assert_eq!(trial["replay_of"], A, "{trial}");
    assert_eq!(trial["forked_at"], "build<b>", "{trial}");
    let page = get(server.addr, "/", &[]).body;
    assert!(
        page.contains("<span class=\"fork\">trial from build&lt;b&gt;</span>"),
        "{page}"
    );
}
