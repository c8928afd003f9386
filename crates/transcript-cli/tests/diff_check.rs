//! `transcript diff` and `transcript check` through the binary (issue #50): two real runs of
//! one deterministic workflow diff equal; a changed command output is named in its step only;
//! a changed tool argument in an agent turn shows both values; `check` holds, fails naming the
//! step, writes JUnit XML that parses with one failure per failed expectation, and refuses a
//! misspelled key naming it and its line; `diff --html` passes the HTML export's escaping
//! attack (`fixtures/hostile/markup.json` in every field of both runs), parsed, and rendered
//! in headless Chromium: no script runs, nothing loads (a listener the values point at sees
//! no connection), every value shows as text; both commands on two imported real session logs, with jq over the raw captures as
//! the truth.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, repo, text};
use serde_json::{Value, json};

const WORKFLOW: &str = r#"
name: pipeline
inputs:
  - name: who
    default: world
steps:
  - name: greet
    type: command
    command: 'echo "hello $WHO"'
    env: { WHO: "{{inputs.who}}" }
  - name: count
    type: command
    command: ["printf", "%s\n", "one", "two", "three"]
  - name: review
    type: agent
    provider: claude
    command: ["cat", "{{workflow.dir}}/stream.jsonl"]
    prompt: "Review greeting.txt."
  - name: each
    type: for_each
    items: [a, b]
    steps:
      - name: cell
        type: command
        command: ["printf", "%s\n", "{{loop.item}}"]
  - name: both
    type: parallel
    mode: all_succeed
    branches:
      - name: left
        type: command
        command: ["echo", "left"]
      - name: right
        type: command
        command: ["echo", "right"]
  - name: sub
    type: call_workflow
    workflow: child.yaml
    inputs: { text: "x" }
"#;

const CHILD: &str = r#"
name: child
inputs:
  - name: text
    type: enum
    values: [x]
steps:
  - name: inner
    type: command
    command: ["echo", "{{inputs.text}}"]
"#;

/// A workflow directory whose agent replays the recorded Claude stream, its `Read` of
/// `greeting.txt` turned into a read of `read_path`.
fn workflow_dir(root: &Path, name: &str, read_path: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("workflow.yaml"), WORKFLOW).unwrap();
    std::fs::write(dir.join("child.yaml"), CHILD).unwrap();
    let stream = std::fs::read_to_string(repo().join("fixtures/agents/claude-review.jsonl"))
        .unwrap()
        .replace(
            r#""input":{"path":"greeting.txt"}"#,
            &format!(r#""input":{{"path":"{read_path}"}}"#),
        );
    std::fs::write(dir.join("stream.jsonl"), stream).unwrap();
    dir
}

/// Runs the workflow of `dir` (real clock, random ids) into `storage`; returns the run's file.
fn run(dir: &Path, storage: &Path, inputs: &[&str]) -> String {
    let mut c = bin();
    c.arg("run").arg(dir.join("workflow.yaml"));
    for i in inputs {
        c.args(["--input", i]);
    }
    let out = c
        .arg("--storage")
        .arg(storage)
        .arg("--workspace")
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let id = common::printed_run_id(&text(&out.stdout));
    storage.join(format!("{id}.jsonl")).display().to_string()
}

fn transcript(args: &[&str]) -> Output {
    bin()
        .args(["--color", "never"])
        .args(args)
        .output()
        .unwrap()
}

fn diff_json(a: &str, b: &str) -> (Option<i32>, Value) {
    let out = transcript(&["diff", a, b, "--json"]);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr));
    });
    (out.status.code(), doc)
}

/// The names `diff` gives the steps that differ, from its JSON (child runs as `call/step`).
fn differing(doc: &Value) -> Vec<String> {
    fn go(steps: &Value, prefix: &str, out: &mut Vec<String>) {
        for s in steps.as_array().unwrap() {
            let name = format!("{prefix}{}", s["path"].as_str().unwrap());
            if s["side"] != "both" || !s["changes"].as_array().unwrap().is_empty() {
                out.push(name.clone());
            }
            if s["child"].is_object() {
                go(&s["child"]["steps"], &format!("{name}/"), out);
            }
            go(&s["steps"], prefix, out);
        }
    }
    let mut out = Vec::new();
    go(&doc["run"]["steps"], "", &mut out);
    out
}

#[test]
fn two_runs_of_one_deterministic_workflow_diff_equal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = workflow_dir(tmp.path(), "wf", "greeting.txt");
    let a = run(&dir, &tmp.path().join("s1"), &[]);
    let b = run(&dir, &tmp.path().join("s2"), &[]);
    let out = transcript(&["diff", &a, &b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("equal (11 steps compared)"),
        "{}",
        text(&out.stdout)
    );
    let (code, doc) = diff_json(&a, &b);
    assert_eq!(code, Some(0));
    assert_eq!(doc["equal"], true);
    assert_eq!(doc["summary"]["compared"], 11);
    // With ids compared, the run ids (and the child run's) differ; nothing else does.
    let out = transcript(&["diff", &a, &b, "--strict-ids", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["run"]["changes"][0]["field"], "run_id");
    assert_eq!(differing(&doc), ["sub"]);
}

#[test]
fn a_changed_command_output_is_named_in_its_step_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = workflow_dir(tmp.path(), "wf", "greeting.txt");
    let a = run(&dir, &tmp.path().join("s1"), &[]);
    let b = run(&dir, &tmp.path().join("s2"), &["who=there"]);
    let (code, doc) = diff_json(&a, &b);
    assert_eq!(code, Some(1));
    assert_eq!(differing(&doc), ["greet"]);
    let changes = &doc["run"]["steps"][0]["changes"];
    assert_eq!(changes.as_array().unwrap().len(), 1, "{changes:#}");
    assert_eq!(changes[0]["field"], "output");
    assert_eq!(changes[0]["a"], "hello world\n");
    assert_eq!(changes[0]["b"], "hello there\n");
    // The terminal shows that branch only, old and new.
    let out = transcript(&["diff", &a, &b]);
    assert_eq!(out.status.code(), Some(1));
    let shown = text(&out.stdout);
    assert!(shown.contains("greet [command] greet #0"), "{shown}");
    assert!(
        shown.contains("    -hello world\n    +hello there\n"),
        "{shown}"
    );
    for other in ["count", "review", "each", "both", "sub"] {
        assert!(
            !shown.contains(&format!("\n{other} [")),
            "{other} shown:\n{shown}"
        );
    }
}

#[test]
fn a_changed_tool_argument_in_an_agent_turn_shows_both_values() {
    let tmp = tempfile::tempdir().unwrap();
    let a = run(
        &workflow_dir(tmp.path(), "wa", "greeting.txt"),
        &tmp.path().join("s1"),
        &[],
    );
    let b = run(
        &workflow_dir(tmp.path(), "wb", "notes.txt"),
        &tmp.path().join("s2"),
        &[],
    );
    let (code, doc) = diff_json(&a, &b);
    assert_eq!(code, Some(1));
    assert_eq!(differing(&doc), ["review"]);
    let review = &doc["run"]["steps"][2];
    let input = review["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["field"].as_str().unwrap().ends_with("tool_use.input"))
        .unwrap_or_else(|| panic!("{review:#}"));
    assert_eq!(input["a"], json!({"path": "greeting.txt"}));
    assert_eq!(input["b"], json!({"path": "notes.txt"}));
    let shown = text(&transcript(&["diff", &a, &b]).stdout);
    assert!(
        shown.contains(r#"tool_use.input: {"path":"greeting.txt"} → {"path":"notes.txt"}"#),
        "{shown}"
    );
}

/// Every `testcase` of a JUnit document with its classname and failure message, read by a
/// real XML parser (quick-xml's reader).
fn junit_cases(xml: &str) -> Vec<(String, Option<String>)> {
    use quick_xml::Reader;
    use quick_xml::events::{BytesStart, Event};
    let attr = |t: &BytesStart<'_>, name: &[u8]| {
        t.attributes()
            .map(|a| a.unwrap())
            .find(|a| a.key.as_ref() == name)
            .map(|a| a.unescape_value().unwrap().into_owned())
            .unwrap()
    };
    let mut reader = Reader::from_str(xml);
    let mut cases: Vec<(String, Option<String>)> = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            Event::Start(t) | Event::Empty(t) if t.name().as_ref() == b"testcase" => {
                cases.push((attr(&t, b"classname"), None));
            }
            Event::Start(t) if t.name().as_ref() == b"failure" => {
                cases.last_mut().unwrap().1 = Some(attr(&t, b"message"));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    cases
}

#[test]
fn check_holds_fails_naming_the_step_writes_junit_and_refuses_a_misspelled_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = workflow_dir(tmp.path(), "wf", "greeting.txt");
    let storage = tmp.path().join("s");
    let run_file = run(&dir, &storage, &[]);
    let expect = tmp.path().join("expect.yaml");
    std::fs::write(
        &expect,
        "run:\n  status: succeeded\n  max_duration_ms: 600000\nsteps:\n  greet:\n    output: {equals: hello world}\n\
         \x20 review:\n    tools_used: [Read]\n    tool_args: {Read: {path: {equals: greeting.txt}}}\n    tool_failed: false\n    max_turns: 2\n\
         \x20 each.cell#1:\n    output: {matches: \"^b$\"}\n  sub/inner:\n    output: {contains: x}\n",
    )
    .unwrap();
    let out = transcript(&["check", &run_file, "--expect", expect.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("9 of 9 expectations hold, 0 failed"));

    // Failing ones, by run id through the storage, with JUnit XML.
    std::fs::write(
        &expect,
        "steps:\n  greet:\n    status: succeeded\n  review:\n    tools_used: [Bash]\n    tool_sequence: [Read, Write]\n  count:\n    output: {contains: four}\n",
    )
    .unwrap();
    let id = Path::new(&run_file).file_stem().unwrap().to_str().unwrap();
    let junit = tmp.path().join("junit.xml");
    let out = bin()
        .args(["--color", "never", "check", &id[..8], "--expect"])
        .arg(&expect)
        .arg("--junit")
        .arg(&junit)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("FAIL review: tools_used: [Bash] (")
            && shown.contains("never called Bash; called [Read]"),
        "{shown}"
    );
    assert!(
        shown.contains("FAIL count: output contains \"four\""),
        "{shown}"
    );
    assert!(
        shown.contains("1 of 4 expectations hold, 3 failed"),
        "{shown}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let cases = junit_cases(&xml);
    assert_eq!(cases.len(), 4, "{xml}");
    let failed: Vec<&str> = cases
        .iter()
        .filter(|(_, f)| f.is_some())
        .map(|(c, _)| c.as_str())
        .collect();
    assert_eq!(failed, ["review", "review", "count"]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&junit).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // A misspelled key: exit 2 naming it and its line, before the run is even read.
    std::fs::write(
        &expect,
        "steps:\n  greet:\n    status: succeeded\n    tool_sequense: [a]\n",
    )
    .unwrap();
    std::fs::remove_file(&junit).unwrap();
    let out = transcript(&[
        "check",
        "no-such-run",
        "--expect",
        expect.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("line 4: unknown field `tool_sequense`"),
        "{err}"
    );
    // CI still has a file to read: one error case naming the key and the line (#58 item 5).
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(junit_cases(&xml).len(), 1, "{xml}");
    assert!(
        xml.contains("<error") && xml.contains("tool_sequense") && xml.contains("line 4"),
        "{xml}"
    );
    // A run that does not exist is the CLI's not-found code.
    std::fs::write(&expect, "run: {status: succeeded}\n").unwrap();
    let out = transcript(&["check", "no-such-run", "--expect", expect.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    // So is a diff with one side missing; a bad flag is usage.
    assert_eq!(
        transcript(&["diff", &run_file, "no-such-run"])
            .status
            .code(),
        Some(3)
    );
    assert_eq!(transcript(&["diff", &run_file]).status.code(), Some(2));
}

/// The hostile values of every attack test of a rendered view (`fixtures/hostile/markup.json`).
fn hostile() -> Vec<String> {
    serde_json::from_str(include_str!("../../../fixtures/hostile/markup.json")).unwrap()
}

/// A hand-written run `id` in `storage` whose every field holds one of `values`, `tag` added
/// to each so that A and B differ everywhere.
fn hostile_run(storage: &Path, id: &str, tag: &str, values: &[String]) {
    std::fs::create_dir_all(storage).unwrap();
    let mut events = vec![(
        "run.started",
        String::new(),
        json!({"name": format!("{}{tag}", values[0]), "kind": "workflow"}),
    )];
    for (i, h) in values.iter().enumerate() {
        let h = format!("{h}{tag}");
        let path = format!("s{i}");
        events.push(("step.started", path.clone(), json!({"name": h, "kind": h})));
        events.push((
            "message.assistant",
            path.clone(),
            json!({"role": "assistant", "model": h,
            "blocks": [{"type": "text", "fidelity": "agent_emitted", "text": format!("1\n{h}\n2")},
                       {"type": "tool_use", "fidelity": "agent_emitted", "tool_name": h,
                        "tool_id": h, "tool_input": {"q": h}}]}),
        ));
        events.push((
            "tool.call",
            path.clone(),
            json!({"name": h, "call_id": format!("c{i}"),
            "input": {"q": h}, "output": null, "fidelity": "router"}),
        ));
        events.push((
            "tool.result",
            path.clone(),
            json!({"name": h, "call_id": format!("c{i}"),
            "input": null, "output": h, "error": h, "fidelity": "router"}),
        ));
        events.push((
            "step.completed",
            path,
            json!({"name": h, "kind": h, "error": h,
            "result": {"command": h, "stdout": format!("a\n{h}\nb"), "exit_code": 1}}),
        ));
    }
    events.push((
        "step.started",
        format!("only{tag}"),
        json!({"name": values[3], "kind": "x"}),
    ));
    events.push((
        "run.completed",
        String::new(),
        json!({"name": "w", "kind": "workflow", "error": values[1]}),
    ));
    let mut lines = String::new();
    for (seq, (ty, path, payload)) in events.into_iter().enumerate() {
        let e = json!({"seq": seq + 1, "run_id": id, "type": ty, "path": path, "iteration": 0,
            "timestamp": "2026-05-28T10:00:00.000Z", "payload": payload});
        lines.push_str(&e.to_string());
        lines.push('\n');
    }
    std::fs::write(storage.join(format!("{id}.jsonl")), lines).unwrap();
}

/// Every tag of a page whose text and attribute values are escaped: name and attributes
/// (the parser of transcript-export's tests/injection.rs).
fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let end = after.find('>').expect("every tag is closed");
        let body = after[..end].trim_end_matches('/');
        rest = &after[end + 1..];
        let name_len = body.find(char::is_whitespace).unwrap_or(body.len());
        let name = body[..name_len].trim_start_matches('/').to_lowercase();
        let mut attrs = Vec::new();
        let mut a = body[name_len..].trim_start();
        while !a.is_empty() {
            let n = a
                .find(|c: char| c == '=' || c.is_whitespace())
                .unwrap_or(a.len());
            let attr = a[..n].to_lowercase();
            a = &a[n..];
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
        out.push((name, attrs));
    }
    out
}

#[test]
fn diff_html_passes_the_html_exports_escaping_attack() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("s");
    let (a, b) = (
        "0000abcd-0000-4000-8000-00000000000a",
        "0000abcd-0000-4000-8000-00000000000b",
    );
    let values = hostile();
    hostile_run(&storage, a, "", &values);
    hostile_run(&storage, b, "<b>!</b>", &values);
    let page = tmp.path().join("diff.html");
    let out = bin()
        .args(["diff", a, b, "--html"])
        .arg(&page)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // `--html` writes the page only (#58): nothing on stdout.
    assert_eq!(text(&out.stdout), "");
    let html = std::fs::read_to_string(&page).unwrap();
    let own_tags = [
        "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div",
        "section", "strong", "span", "pre", "a",
    ];
    let own_attrs = [
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
    for (name, attrs) in tags(&html) {
        assert!(
            own_tags.contains(&name.as_str()),
            "tag <{name}> in the page"
        );
        for (attr, value) in attrs {
            assert!(
                own_attrs.contains(&attr.as_str()),
                "attribute {attr}={value:?} on <{name}>"
            );
            if attr == "class" {
                assert!(
                    value.chars().all(|c| c.is_ascii_lowercase() || c == ' '),
                    "class {value:?}"
                );
            }
            // The page's one link and its target: its first divergence (#61), ours.
            if attr == "href" || attr == "id" {
                let want = if attr == "href" {
                    "#first-divergence"
                } else {
                    "first-divergence"
                };
                assert_eq!(value, want, "{attr} on <{name}>");
            }
        }
    }
    // Every hostile value is on the page as text, on both sides.
    for h in values.iter().filter(|h| !h.contains('\n')) {
        let escaped = h
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&#39;");
        assert!(html.contains(&escaped), "{h} not shown as text");
    }
    assert!(!html.to_ascii_lowercase().contains("<script"));
    // Nothing recorded reaches the terminal unescaped either.
    let out = bin()
        .args(["diff", a, b, "--color", "never", "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let shown = text(&out.stdout);
    for c in ['\u{1b}', '\u{7}', '\u{202e}'] {
        assert!(!shown.contains(c), "{c:?} reached the terminal:\n{shown}");
    }
    assert!(shown.contains("\\u{1b}[2J"), "{shown}");
}

/// The page's own elements, as Chromium's DOM serializes them.
const PAGE_ELEMENTS: &[&str] = &[
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "section", "strong",
    "span", "pre", "a",
];

#[test]
fn diff_html_in_chromium_runs_nothing_loads_nothing_and_shows_hostile_values_as_text() {
    let Some(browser) = common::html_page::browser_or_skip() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let storage = tmp.path().join("s");
    // Every value that would load something points at this listener: a connection is a load.
    let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let at = format!("http://{}", trap.local_addr().unwrap());
    let mut values = hostile();
    values.extend([
        format!("<img src={at}/img.png>"),
        format!("<script src={at}/x.js></script>"),
        format!("<link rel=stylesheet href={at}/x.css>"),
        format!("<iframe src={at}/frame></iframe>"),
        format!(
            "</style><style>@import url({at}/i.css);body{{background:url({at}/b.png)}}</style>"
        ),
        format!("\"><img src={at}/attr.png>"),
        format!("<meta http-equiv=refresh content=\"0;url={at}/go\">"),
        format!("<video src={at}/v.mp4 autoplay></video><object data={at}/o></object>"),
    ]);
    let (a, b) = (
        "0000abcd-0000-4000-8000-00000000000a",
        "0000abcd-0000-4000-8000-00000000000b",
    );
    hostile_run(&storage, a, "", &values);
    hostile_run(&storage, b, "<b>!</b>", &values);
    let page = tmp.path().join("diff.html");
    let out = bin()
        .args(["diff", a, b, "--html"])
        .arg(&page)
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let dom = common::html_page::headless(&browser, &tmp.path().join("profile"))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(dom.status.success(), "{}", text(&dom.stderr));
    // No script ran into an error or was refused, nothing was blocked or failed to load...
    let log = text(&dom.stderr);
    for bad in [
        "Uncaught",
        "Refused to",
        "net::ERR_",
        "Failed to load",
        "CONSOLE",
    ] {
        assert!(
            !log.lines()
                .any(|l| l.contains(bad) && l.contains("diff.html")),
            "{bad} in the browser log:\n{log}"
        );
    }
    // ...and nothing asked for anything: the listener saw no connection.
    match trap.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the page loaded something from {at} (peer {peer})"),
        Err(e) => panic!("{e}"),
    }
    let dom = text(&dom.stdout);
    // Only the page's own elements; no handler ran (it would have marked the body or title).
    let elements: Vec<String> = dom
        .match_indices('<')
        .filter_map(|(i, _)| {
            let name: String = dom[i + 1..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            (!name.is_empty()).then(|| name.to_ascii_lowercase())
        })
        .collect();
    assert!(elements.len() > 100, "{dom}");
    for name in &elements {
        assert!(
            PAGE_ELEMENTS.contains(&name.as_str()),
            "<{name}> in the DOM"
        );
    }
    assert!(!dom.contains("data-pwned=\""), "a handler ran");
    // One link, ours: to the first divergence on this page.
    assert_eq!(dom.matches("<a ").count(), 1, "{dom}");
    assert!(dom.contains("<a href=\"#first-divergence\">"), "{dom}");
    let title = &dom[dom.find("<title>").unwrap()..dom.find("</title>").unwrap()];
    assert!(!title.contains("pwned"), "a script ran: {title}");
    // Every value is there as text (Chromium escapes `&`, `<` and `>` in text), on both sides.
    for h in values.iter().filter(|h| !h.contains(['\n', '\r'])) {
        let shown = h
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        let tagged = format!("{shown}&lt;b&gt;!&lt;/b&gt;");
        assert!(dom.contains(&shown), "{h:?} not shown as text");
        assert!(dom.contains(&tagged), "{h:?} not shown as text on B's side");
    }
}

/// jq over a raw Claude capture: the names of the tools its assistant messages called.
fn jq_tool_names(capture: &Path) -> Vec<String> {
    let out = std::process::Command::new("jq")
        .args([
            "-r",
            r#"select(.type == "assistant") | .message.content[]? | select(.type == "tool_use") | .name"#,
        ])
        .arg(capture)
        .output()
        .expect("jq is installed (.ci/run needs it)");
    assert!(out.status.success());
    let mut names: Vec<String> = text(&out.stdout).lines().map(str::to_owned).collect();
    names.dedup();
    names
}

/// `transcript import claude <capture>` into `storage`; the run's file.
fn import(capture: &Path, storage: &Path) -> String {
    let out = bin()
        .args(["import", "claude"])
        .arg(capture)
        .arg("--storage")
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .trim_end()
        .split('\t')
        .nth(2)
        .unwrap()
        .to_owned()
}

#[test]
fn both_commands_on_two_imported_real_session_logs() {
    let Some(dir) = common::real_fixtures() else {
        return;
    };
    let short = dir.join("claude-code/spotter-session-log-v2.1.38-short.jsonl");
    let heavy = dir.join("claude-code/spotter-session-log-v2.1.38-tool_heavy.jsonl");
    let tmp = tempfile::tempdir().unwrap();
    let a = import(&short, &tmp.path().join("s1"));
    let b = import(&heavy, &tmp.path().join("s1"));
    let again = import(&heavy, &tmp.path().join("s2"));
    // The same log imported twice (other run ids, other import times) is equal.
    let (code, doc) = diff_json(&b, &again);
    assert_eq!(code, Some(0), "{doc:#}");
    // Two sessions differ in their one agent step: its turns and its tokens.
    let (code, doc) = diff_json(&a, &b);
    assert_eq!(code, Some(1));
    assert_eq!(differing(&doc), ["agent"]);
    let fields: Vec<&str> = doc["run"]["steps"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"turns") && fields.contains(&"usage.output_tokens"),
        "{fields:?}"
    );

    // check: the tools jq finds in the raw capture were used, in that order; one it never
    // names was not; a tool it never called fails, naming the step.
    let tools = jq_tool_names(&heavy);
    assert!(tools.len() >= 3, "{tools:?}");
    let expect = tmp.path().join("expect.yaml");
    std::fs::write(
        &expect,
        format!(
            "run: {{status: succeeded}}\nsteps:\n  agent:\n    tools_used: [{0}]\n    tool_sequence: [{0}]\n    tools_not_used: [NoSuchTool]\n",
            tools.join(", ")
        ),
    )
    .unwrap();
    let out = transcript(&["check", &b, "--expect", expect.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    std::fs::write(&expect, "steps:\n  agent:\n    tools_used: [NoSuchTool]\n").unwrap();
    let out = transcript(&["check", &b, "--expect", expect.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("FAIL agent: tools_used: [NoSuchTool]"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn both_commands_work_on_nats_storage_as_on_files() {
    let Some(server) = transcript_nats::testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let nats = format!("{}/COMPARE", server.url());
    let ids: Vec<String> = [("wa", "greeting.txt"), ("wb", "notes.txt")]
        .iter()
        .map(|(name, read)| {
            let dir = workflow_dir(tmp.path(), name, read);
            let out = bin()
                .arg("run")
                .arg(dir.join("workflow.yaml"))
                .args(["--storage", &nats, "--workspace"])
                .arg(&dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
            common::printed_run_id(&text(&out.stdout))
        })
        .collect();
    // By full id and by prefix, child runs copied along: only the agent's Read differs.
    let out = transcript(&["diff", &ids[0], &ids[1][..8], "--json", "--storage", &nats]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(differing(&doc), ["review"]);
    assert_eq!(doc["summary"]["compared"], 11);
    let out = transcript(&["diff", &ids[0], &ids[0], "--storage", &nats]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let expect = tmp.path().join("expect.yaml");
    std::fs::write(
        &expect,
        "steps:\n  review:\n    tool_args: {Read: {path: {equals: notes.txt}}}\n  sub/inner:\n    status: succeeded\n",
    )
    .unwrap();
    let expect = expect.to_str().unwrap();
    let out = transcript(&["check", &ids[1], "--expect", expect, "--storage", &nats]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = transcript(&["check", &ids[0], "--expect", expect, "--storage", &nats]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("FAIL review: tool_args: Read"));
}
