//! A command step's standard error through the binary (#59 item 8, wire decision 21):
//! recorded beside stdout, masked by `--redact` on disk, shown by `show`, the Markdown and
//! JSON exports, and visible (not folded) on the HTML page as headless Chromium renders it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{bin, describe, text};

const SECRET: &str = "sk-proj-PLANTEDsecretVALUE0123456789abcdef";

/// Runs `workflow` (extra `run` arguments first) into `dir/s`; the output and the transcript.
fn run(dir: &Path, workflow: &str, extra: &[&str]) -> (std::process::Output, PathBuf) {
    let wf = dir.join("wf.yaml");
    std::fs::write(&wf, workflow).unwrap();
    std::fs::create_dir_all(dir.join("w")).unwrap();
    let out = bin()
        .args(["run", "--color", "never"])
        .args(extra)
        .arg("--storage")
        .arg(dir.join("s"))
        .arg("--workspace")
        .arg(dir.join("w"))
        .arg(&wf)
        .output()
        .unwrap();
    let file = std::fs::read_dir(dir.join("s"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".jsonl"))
                .is_some_and(|id| transcript_domain::RunId::parse(id).is_ok())
        })
        .expect("a transcript");
    (out, file)
}

/// The `step.completed` result of step `path`.
fn result_of(file: &Path, path: &str) -> serde_json::Value {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "step.completed" && e["path"] == path)
        .unwrap_or_else(|| panic!("no step.completed for {path}"))["payload"]["result"]
        .clone()
}

const FAILING: &str = "name: both\nsteps:\n  - name: c\n    type: command\n    command: \"echo out; echo err >&2; exit 3\"\n";

#[test]
fn both_streams_are_recorded_and_every_view_shows_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let (out, file) = run(dir.path(), FAILING, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let result = result_of(&file, "c");
    assert_eq!(result["stdout"], "out\n", "{result}");
    assert_eq!(result["stderr"], "err\n", "{result}");
    assert_eq!(result["exit_code"], 3, "{result}");
    let show = bin()
        .args(["show", "--color", "never"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(show.status.success(), "{}", describe(&show));
    assert!(
        text(&show.stdout).contains("stderr: err⏎"),
        "{}",
        text(&show.stdout)
    );
    let export = |format: &str| {
        let o = bin()
            .args(["export", "--format", format])
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", describe(&o));
        text(&o.stdout)
    };
    let md = export("markdown");
    assert!(md.contains("- Stderr:\n\n```text\nerr\n\n```"), "{md}");
    let json: serde_json::Value = serde_json::from_str(&export("json")).unwrap();
    let doc = json.to_string();
    assert!(doc.contains(r#""stderr":"err\n""#), "{doc}");
}

#[test]
fn a_secret_written_to_stderr_is_masked_with_redact() {
    let dir = tempfile::tempdir().unwrap();
    let wf = format!(
        "name: leak\nsteps:\n  - name: c\n    type: command\n    command: \"echo token={SECRET} >&2\"\n"
    );
    let (out, file) = run(dir.path(), &wf, &["--redact"]);
    assert!(out.status.success(), "{}", describe(&out));
    let body = std::fs::read_to_string(&file).unwrap();
    assert!(!body.contains(SECRET), "{body}");
    let stderr = result_of(&file, "c")["stderr"].as_str().unwrap().to_owned();
    assert!(
        stderr.starts_with("token=") && stderr.contains("chars)"),
        "{stderr}"
    );
}

/// The HTML page, rendered by Chromium: the stderr block is in the DOM outside any folded
/// `<details>`, its text escaped.
#[test]
fn the_html_page_shows_stderr_open() {
    let Some(browser) = common::html_page::browser_or_skip() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let wf = "name: h\nsteps:\n  - name: c\n    type: command\n    command: \"echo '<b>err</b>' >&2; exit 4\"\n";
    let (out, file) = run(dir.path(), wf, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let id = file.file_stem().unwrap().to_str().unwrap().to_owned();
    let dom = common::html_page::export_and_dump(&browser, &dir.path().join("s"), &id, dir.path());
    let start = dom.find("<div class=\"stderr\">").expect("a stderr block");
    let block = &dom[start..start + dom[start..].find("</div>").unwrap()];
    assert!(block.contains("&lt;b&gt;err&lt;/b&gt;"), "{block}");
    assert!(!block.contains("<b>"), "{block}");
    // Not folded: no `<details>` is open around it.
    let before = &dom[..start];
    assert_eq!(
        before.matches("<details").count(),
        before.matches("</details>").count(),
        "the stderr block is inside a <details>"
    );
}
