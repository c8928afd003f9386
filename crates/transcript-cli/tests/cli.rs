//! End-to-end tests of the built `transcript` binary: the demo run, every
//! inspection command on it (snapshots with deterministic ids and times),
//! the seed's jq recipes, corrupted inputs, tail -f, import and redaction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{bin, demo_command, repo, text};

struct Demo {
    _dir: tempfile::TempDir,
    storage: PathBuf,
    root: PathBuf,
    run_id: String,
}

/// Runs the demo deterministically into a fresh storage directory.
fn demo() -> Demo {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("transcripts");
    let workspace = dir.path().join("workspace");
    let out = demo_command(&storage, &workspace).output().unwrap();
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let run_id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("run_id: "))
        .expect("run id printed")
        .to_owned();
    let root = storage.join(format!("{run_id}.jsonl"));
    assert!(root.exists());
    Demo {
        _dir: dir,
        storage,
        root,
        run_id,
    }
}

fn run_ok(args: &[&str], storage: &Path) -> String {
    let out = bin()
        .args(args)
        .arg("--storage")
        .arg(storage)
        .arg("--color")
        .arg("never")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn demo_runs_and_every_view_matches_its_snapshot() {
    let d = demo();
    assert_eq!(d.run_id, "00000000-0000-4000-8000-000000000001");
    let validate = run_ok(&["validate", &d.run_id], &d.storage);
    assert!(validate.contains(": ok ("), "{validate}");
    let storage = d.storage.display().to_string();
    let scrub = |s: String| s.replace(&storage, "[storage]");
    insta::assert_snapshot!("validate", scrub(validate));
    insta::assert_snapshot!("tree", run_ok(&["tree", &d.run_id], &d.storage));
    insta::assert_snapshot!("show", run_ok(&["show", &d.run_id], &d.storage));
    insta::assert_snapshot!("stats", run_ok(&["stats", &d.run_id], &d.storage));
    insta::assert_snapshot!("tail", run_ok(&["tail", &d.run_id], &d.storage));
    insta::assert_snapshot!("receipts", run_ok(&["receipts", &d.run_id], &d.storage));
    insta::assert_snapshot!(
        "export_markdown",
        run_ok(&["export", &d.run_id, "--format", "markdown"], &d.storage)
    );
    insta::assert_snapshot!(
        "export_json",
        run_ok(&["export", &d.run_id, "--format", "json"], &d.storage)
    );
    // The tree is rebuilt from the files only and covers the child runs.
    let tree = run_ok(&["tree", &d.run_id, "--json"], &d.storage);
    let v: serde_json::Value = serde_json::from_str(&tree).unwrap();
    assert_eq!(v["status"], "succeeded");
    assert!(tree.contains("\"child\""), "child run nested");
    // stats over the whole directory.
    let all = run_ok(&["stats", &storage], &d.storage);
    assert!(all.contains("runs: 3"), "{all}");
}

#[test]
fn seed_jq_recipes_work_on_the_demo_transcript() {
    if Command::new("jq").arg("--version").output().is_err() {
        panic!("jq is required (.ci/run installs it)");
    }
    let d = demo();
    let jq = |args: &[&str], file: &Path| {
        let out = Command::new("jq").args(args).arg(file).output().unwrap();
        assert!(out.status.success(), "jq {args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    // Verify monotonic seq.
    assert_eq!(
        jq(&["-s", "[.[].seq] | . == (sort)"], &d.root).trim(),
        "true"
    );
    // Decode every event.
    let all = jq(&["-c", "."], &d.root);
    let lines = std::fs::read_to_string(&d.root).unwrap().lines().count();
    assert_eq!(all.lines().count(), lines);
    // Pair tool calls with their results.
    let pairs = jq(
        &[
            "-s",
            r#"[.[] | select(.type == "tool.call" or .type == "tool.result")] | group_by(.payload.call_id) | map({call_id: .[0].payload.call_id, name: .[0].payload.name, input: (map(select(.type == "tool.call"))[0].payload.input), output: (map(select(.type == "tool.result"))[0].payload.output)})"#,
        ],
        &d.root,
    );
    let pairs: serde_json::Value = serde_json::from_str(&pairs).unwrap();
    let pairs = pairs.as_array().unwrap();
    assert!(pairs.len() >= 4);
    assert!(
        pairs
            .iter()
            .all(|p| !p["output"].is_null() || p["name"] == "list_dir"),
        "{pairs:?}"
    );
    assert!(
        pairs
            .iter()
            .any(|p| p["name"] == "upper" && p["output"] == "HELLO WORLD")
    );
    // Extract every assistant text response.
    let texts = jq(
        &[
            "-r",
            r#"select(.type == "message.assistant") | .payload.blocks[] | select(.type == "text") | .text"#,
        ],
        &d.root,
    );
    assert!(texts.contains("The greeting is friendly."), "{texts}");
    // Reconstruct a step tree.
    let steps = jq(
        &[
            "-r",
            r#"select(.type == "step.started") | "\(.seq)\t\(.path)\t\(.payload.kind)\t\(.payload.name)""#,
        ],
        &d.root,
    );
    assert!(steps.contains("\tagents.review\tagent\treview"), "{steps}");
    assert!(steps.contains("\teach.inner.cell\tcommand\tcell"));
    // Walk parent -> child runs.
    let children = jq(
        &[
            "-r",
            r#"select(.type == "step.call_workflow.started") | .child_run_id"#,
        ],
        &d.root,
    );
    let child = children.lines().next().unwrap();
    let child_file = d.storage.join(format!("{child}.jsonl"));
    assert!(child_file.exists());
    let parents = jq(&["-r", ".parent_run_id"], &child_file);
    assert!(parents.lines().all(|l| l == d.run_id));
    // Distinguish router-fidelity vs agent-emitted tool calls.
    let fidelity = jq(
        &[
            "-s",
            "-c",
            r#"[.[] | select(.type == "tool.call")] | group_by(.payload.fidelity) | map({fidelity: .[0].payload.fidelity, count: length})"#,
        ],
        &d.root,
    );
    assert!(
        fidelity.contains(r#"{"fidelity":"agent_emitted","count":2}"#),
        "{fidelity}"
    );
    assert!(fidelity.contains(r#""fidelity":"router""#), "{fidelity}");
}

/// Corrupted transcripts: name, path, and how many of their lines are bad (torn or
/// malformed), known from how each is made.
fn corrupted_set(dir: &Path, good: &Path) -> Vec<(String, PathBuf, usize)> {
    let good_text = std::fs::read_to_string(good).unwrap();
    let lines: Vec<&str> = good_text.lines().collect();
    let mut cases = Vec::new();
    let mut write = |name: &str, bytes: Vec<u8>| {
        let p = dir.join(name);
        // Torn: a last line without its newline. Malformed: a line that is not a JSON object
        // with an integer seq (NUL bytes, a string seq, garbage).
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let torn = usize::from(!text.is_empty() && !text.ends_with('\n'));
        let complete = text.matches('\n').count();
        let malformed = text
            .lines()
            .take(complete)
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .is_none_or(|v| !v["seq"].is_u64())
            })
            .count();
        std::fs::write(&p, bytes).unwrap();
        cases.push((name.to_owned(), p, torn + malformed));
    };
    let truncated = format!(
        "{}\n{}",
        lines[..5].join("\n"),
        &lines[5][..lines[5].len() / 2]
    );
    write("truncated.jsonl", truncated.into_bytes());
    let mut garbage = lines[..3].join("\n").into_bytes();
    garbage.extend_from_slice(b"\n\x00\x01garbage\xff\xfe\n");
    garbage.extend_from_slice(lines[3..6].join("\n").as_bytes());
    garbage.push(b'\n');
    write("garbage.jsonl", garbage);
    let nul = format!("{}\n", lines[..4].join("\n"))
        .replace("\"path\":\"greet\"", "\"path\":\"gr\u{0}eet\"");
    write("nul.jsonl", nul.into_bytes());
    let wrong = format!("{}\n", lines[..4].join("\n")).replacen("\"seq\":2", "\"seq\":\"two\"", 1);
    write("wrong-types.jsonl", wrong.into_bytes());
    // A parent whose child file is missing.
    let parent_id = "00000000-0000-4000-8000-0000000000aa";
    let missing_child = good_text.replace(
        &lines[0][lines[0].find("\"run_id\":\"").unwrap() + 10..][..36],
        parent_id,
    );
    write(&format!("{parent_id}.jsonl"), missing_child.into_bytes());
    write("empty.jsonl", Vec::new());
    cases
}

#[test]
fn corrupted_inputs_give_one_line_errors_and_never_panic() {
    let d = demo();
    let dir = tempfile::tempdir().unwrap();
    let cases = corrupted_set(dir.path(), &d.root);
    let bad: Vec<usize> = cases.iter().map(|c| c.2).collect();
    // The set has the bad lines it is meant to have (truncated, garbage, NUL on two lines,
    // a string seq, a parent of missing children, an empty file).
    assert_eq!(bad, [1, 1, 2, 1, 0, 0], "{cases:?}");
    for (name, path, bad_lines) in &cases {
        let p = path.display().to_string();
        for args in [
            vec!["validate", p.as_str()],
            vec!["tree", p.as_str()],
            vec!["show", p.as_str()],
            vec!["stats", p.as_str()],
            vec!["tail", p.as_str()],
            vec!["receipts", p.as_str()],
            vec!["export", p.as_str(), "--format", "json"],
            vec!["export", p.as_str(), "--format", "html"],
        ] {
            let out = bin()
                .args(&args)
                .arg("--color")
                .arg("never")
                .output()
                .unwrap();
            let stderr = text(&out.stderr);
            assert!(
                !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
                "{name} {args:?}: {stderr}"
            );
            assert!(
                out.status.code().is_some(),
                "{name} {args:?} killed by a signal"
            );
            if args[0] == "validate" {
                // A torn tail (decision 13) is a warning; the rest, an empty file included (it
                // holds no run), are errors.
                let expected = if name == "truncated.jsonl" { 0 } else { 1 };
                assert_eq!(
                    out.status.code(),
                    Some(expected),
                    "{name}: {}",
                    text(&out.stdout)
                );
                if name == "truncated.jsonl" {
                    assert!(text(&out.stdout).contains(":6: warning: unterminated final line"));
                }
                // The report is on stdout; stderr gets the one-line verdict when invalid.
                assert_eq!(
                    stderr.lines().count(),
                    usize::from(expected == 1),
                    "{name} {args:?}: {stderr}"
                );
            } else if args[0] == "tree" && name == "empty.jsonl" {
                // Nothing to draw (#42 item 6; tests/tree_invalid.rs has the shapes).
                assert_eq!(out.status.code(), Some(3), "{name} {args:?}: {stderr}");
            } else {
                // The views read tolerantly: they show what they can, exit 0, and say on
                // stderr, one line per bad line naming the file and the line, what they skipped.
                assert_eq!(out.status.code(), Some(0), "{name} {args:?}: {stderr}");
                // `stats` also names each model the price table lacks (one line per model, the
                // receipts rule): not a problem of the file's lines.
                let stderr: String = stderr
                    .lines()
                    .filter(|l| {
                        !l.contains(": no price for model ")
                            && !l.contains(": some turns name no model")
                            // `tail` says what became of a run without run.completed.
                            && !l.contains(": no run.completed yet: ")
                    })
                    .map(|l| format!("{l}\n"))
                    .collect();
                assert_eq!(
                    stderr.lines().count(),
                    *bad_lines,
                    "{name} {args:?}: {stderr}"
                );
                for line in stderr.lines() {
                    assert!(
                        line.contains(&p) && line.contains("line "),
                        "{name} {args:?}: {line}"
                    );
                }
            }
            for line in stderr.lines() {
                assert!(line.len() < 400, "{name}: diagnostic too long: {line}");
            }
        }
    }
    // Malformed lines are named with file and line.
    let garbage = dir.path().join("garbage.jsonl");
    let out = bin()
        .args(["validate", &garbage.display().to_string()])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(stdout.contains("garbage.jsonl:4: error"), "{stdout}");
    // Missing paths and bad arguments.
    let out = bin()
        .args(["show", "/nonexistent/file.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "not found is exit 3");
    assert_eq!(text(&out.stderr).lines().count(), 1);
    assert!(text(&out.stderr).contains("/nonexistent/file.jsonl"));
    let out = bin()
        .args(["export", "x", "--format", "pdf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let storage = dir.path().join("invalid-storage");
    let out = bin()
        .args(["run", "fixtures/workflows/invalid_kind.yaml", "--storage"])
        .arg(&storage)
        .current_dir(repo())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "an invalid workflow is invalid input"
    );
    // No transcript for a run that never started (the shared audit.jsonl
    // trail may exist: it is opened with the service).
    let transcripts = std::fs::read_dir(&storage).map_or(0, |d| {
        d.filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .strip_suffix(".jsonl")
                .is_some_and(|stem| transcript_domain::RunId::parse(stem).is_ok())
        })
        .count()
    });
    assert_eq!(transcripts, 0, "an invalid workflow records nothing");
    assert!(
        text(&out.stderr).contains("invalid_kind.yaml"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn tail_follows_a_file_that_appears_later_through_a_torn_tail() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    use std::time::Duration;
    /// The lines of a pipe, on a channel (every wait below is bounded).
    fn lines_of(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                if tx.send(line.unwrap_or_default()).is_err() {
                    return;
                }
            }
        });
        rx
    }
    let next = |rx: &mpsc::Receiver<String>, what: &str| {
        rx.recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {what} within 60 s"))
    };
    let d = demo();
    let dir = tempfile::tempdir().unwrap();
    let target = dir
        .path()
        .join("00000000-0000-4000-8000-0000000000bb.jsonl");
    let mut child = bin()
        .args(["tail", "-f", "--until-complete", "--color", "never"])
        .arg(&target)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = lines_of(child.stdout.take().unwrap());
    let stderr = lines_of(child.stderr.take().unwrap());
    // 1. The follower waits for a file that does not exist yet.
    let waiting = next(&stderr, "waiting line");
    assert!(waiting.contains("waiting for"), "{waiting}");
    // 2. The file appears with its first half, the last line torn: the complete lines are
    //    shown (the torn one cannot be: it is not a line yet).
    let good = std::fs::read(&d.root).unwrap();
    let cut = good.len() / 2;
    assert_ne!(good[cut - 1], b'\n', "the cut tears a line");
    let complete = good[..cut].iter().filter(|&&b| b == b'\n').count();
    // Written as a recorder does, holding the run's lease (#52): a run without run.completed
    // that no writer holds is abandoned, and `tail -f` would end there.
    let mut writer = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&target)
        .unwrap();
    let lease = transcript_infra::WriterLease::hold(&writer).unwrap();
    std::io::Write::write_all(&mut writer, &good[..cut]).unwrap();
    let mut shown: Vec<String> = (0..complete)
        .map(|_| next(&stdout, "line of the first half"))
        .collect();
    // 3. The rest completes the torn line: it is shown once, whole, with the rest.
    std::io::Write::write_all(&mut writer, &good[cut..]).unwrap();
    drop(lease);
    let total = String::from_utf8(good).unwrap().lines().count();
    while shown.len() < total {
        shown.push(next(&stdout, "line of the second half"));
    }
    let status = child.wait().unwrap();
    assert!(status.success());
    let rest: Vec<String> = stderr.iter().collect();
    assert!(rest.is_empty(), "no warning about the torn line: {rest:?}");
    assert!(
        stdout.iter().next().is_none(),
        "nothing after run.completed"
    );
    for (i, line) in shown.iter().enumerate() {
        let seq: usize = line.split_whitespace().next().unwrap().parse().unwrap();
        assert_eq!(seq, i + 1, "{shown:#?}");
    }
    assert!(shown.last().unwrap().contains("run.completed"));
}

fn real_fixtures() -> Option<PathBuf> {
    match std::env::var_os("TRANSCRIPT_REAL_FIXTURES") {
        None => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is unset"
            );
            eprintln!("skipped: TRANSCRIPT_REAL_FIXTURES is unset");
            None
        }
        Some(p) => {
            let p = PathBuf::from(p);
            assert!(
                p.is_dir(),
                "TRANSCRIPT_REAL_FIXTURES={} is not a directory",
                p.display()
            );
            Some(p)
        }
    }
}

#[test]
fn import_every_real_fixture_and_validate_the_result() {
    let Some(root) = real_fixtures() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = Vec::new();
    for provider in std::fs::read_dir(&root).unwrap() {
        let provider = provider.unwrap().path();
        if !provider.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&provider).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    files.sort();
    assert!(files.len() >= 30, "{files:?}");
    let mut imported = 0;
    for file in &files {
        let provider = file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = match provider.as_str() {
            "claude-code" => "claude",
            "_synthetic" => "auto",
            other => other,
        };
        let out = bin()
            .args(["import", name])
            .arg(file)
            .arg("--storage")
            .arg(dir.path())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert!(!stderr.contains("panicked"), "{}: {stderr}", file.display());
        if !out.status.success() {
            // Only documents that hold no agent output may be refused, with a reason.
            assert!(stderr.contains(&file.display().to_string()), "{stderr}");
            eprintln!("not imported: {}", stderr.trim());
            continue;
        }
        imported += 1;
        let run_id = text(&out.stdout).split('\t').next().unwrap().to_owned();
        let v = bin()
            .args(["validate", &run_id, "--storage"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            v.status.success(),
            "{}: {}",
            file.display(),
            text(&v.stdout)
        );
    }
    assert!(
        imported * 10 >= files.len() * 8,
        "imported {imported} of {}",
        files.len()
    );
}

#[test]
fn import_refuses_bad_input_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let garbage = dir.path().join("garbage.bin");
    std::fs::write(&garbage, [0u8, 159, 146, 150, 255, 1, 2, 3, b'\n', 7]).unwrap();
    let prose = dir.path().join("notes.txt");
    std::fs::write(&prose, "just some notes\nnothing else\n").unwrap();
    for (file, provider) in [
        (&empty, "auto"),
        (&garbage, "auto"),
        (&prose, "auto"),
        (&prose, "claude"),
    ] {
        let out = bin()
            .args(["import", provider])
            .arg(file)
            .arg("--storage")
            .arg(&storage)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "invalid input: {}",
            file.display()
        );
        let stderr = text(&out.stderr);
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
        assert!(!stderr.contains("panicked"));
        let written = std::fs::read_dir(&storage)
            .map(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "jsonl")
                })
                .count()
            })
            .unwrap_or(0);
        assert_eq!(written, 0, "nothing written for {}", file.display());
    }
    let out = bin()
        .args(["import", "mystery"])
        .arg(&prose)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn import_our_own_provider_fixtures_deterministically() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = repo().join("fixtures/agents/claude-review.jsonl");
    let out = bin()
        .args(["import", "auto", "--deterministic"])
        .arg(&fixture)
        .arg("--storage")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    assert!(
        line.starts_with("00000000-0000-4000-8000-000000000001\tclaude\t"),
        "{line}"
    );
    let shown = run_ok(
        &["show", "00000000-0000-4000-8000-000000000001"],
        dir.path(),
    );
    insta::assert_snapshot!("import_show", shown);
}

#[test]
fn redaction_keeps_planted_secrets_off_disk_and_out_of_exports() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-proj-PLANTEDsecretVALUE0123456789abcdef";
    let wf = dir.path().join("secret.yaml");
    std::fs::write(
        &wf,
        format!(
            "name: secrets\nsteps:\n  - name: leak\n    type: command\n    command: \"echo token={secret}\"\n  - name: write\n    type: operation\n    tool: write_file\n    input: {{ path: k.txt, content: \"Bearer {secret}\", password: hunter2hunter2 }}\n"
        ),
    )
    .unwrap();
    let storage = dir.path().join("s");
    let out = bin()
        .args(["run", "--redact", "--storage"])
        .arg(&storage)
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .arg(&wf)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    // Masking must not cost the run: both steps ran and it succeeded.
    assert!(out.status.success(), "the masked run failed: {stderr}");
    assert!(stderr.contains("run secrets succeeded"), "{stderr}");
    assert!(
        !stderr.contains(secret),
        "live progress showed the secret: {stderr}"
    );
    for entry in std::fs::read_dir(&storage).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "jsonl")
            && path.file_name().unwrap() != "audit.jsonl"
        {
            let body = std::fs::read_to_string(&path).unwrap();
            assert!(!body.contains(secret), "{}: {body}", path.display());
            assert!(!body.contains("hunter2hunter2"));
            assert!(body.contains("chars)"), "masks are visible: {body}");
        }
    }
    // Unmasked run, masked export.
    let storage2 = dir.path().join("s2");
    let out = bin()
        .args(["run", "--storage"])
        .arg(&storage2)
        .arg("--workspace")
        .arg(dir.path().join("ws2"))
        .arg(&wf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run_id = text(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("run_id: ").map(str::to_owned))
        .unwrap();
    for format in ["markdown", "json", "html"] {
        let exported = run_ok(
            &["export", &run_id, "--format", format, "--redact"],
            &storage2,
        );
        assert!(!exported.contains(secret), "{format}");
        let plain = run_ok(&["export", &run_id, "--format", format], &storage2);
        assert!(
            plain.contains(secret) || format == "html" && plain.contains("sk-proj"),
            "{format}: unmasked export keeps content"
        );
    }
    let structure = run_ok(
        &[
            "export",
            &run_id,
            "--format",
            "json",
            "--privacy",
            "structure-only",
        ],
        &storage2,
    );
    assert!(!structure.contains(secret) && structure.contains("\"leak\""));
}

/// Receipts derive usage only from the transcript; Claude Code repeats a
/// message's usage on every line of that message, and it must count once:
/// totals equal the jq-established (deduplicated) figures of the manifest.
#[test]
fn receipts_count_claude_usage_once_per_message() {
    let Some(root) = real_fixtures() else { return };
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("fixtures/real-manifest/claude.json")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (file, expected) in manifest["files"].as_object().unwrap() {
        let input_tokens = expected["input_tokens"].as_u64().unwrap();
        if input_tokens == 0 {
            continue;
        }
        let path = root.join("claude-code").join(file);
        let out = bin()
            .args(["import", "claude"])
            .arg(&path)
            .arg("--storage")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {}", text(&out.stderr));
        let run_id = text(&out.stdout).split('\t').next().unwrap().to_owned();
        let receipts: serde_json::Value =
            serde_json::from_str(&run_ok(&["receipts", &run_id, "--json"], dir.path())).unwrap();
        assert_eq!(
            receipts["receipts"].as_array().unwrap().len(),
            1,
            "{file}: one agent step"
        );
        assert_eq!(
            receipts["total"]["input_tokens"].as_u64(),
            Some(input_tokens),
            "{file}"
        );
        assert_eq!(
            receipts["total"]["output_tokens"], expected["output_tokens"],
            "{file}"
        );
        checked += 1;
    }
    assert!(checked >= 4, "checked {checked} captures with usage");
}
