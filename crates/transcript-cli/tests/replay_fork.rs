//! What if (#61): `transcript replay <RUN> --live-from STEP --trials K --expect FILE` against
//! scripted model servers. A 4-step workflow (a command, two agent steps on the HTTP agent, a
//! command) is recorded, then forked at its third step with K = 5: the second step is served
//! from the recording (the live server sees no request for it), the third reaches the live
//! server once per trial, whose answers a seed picks (pass or fail); the report names the
//! divergence step and the pass count the seed implies, JUnit has a case per trial, and the
//! exit code follows the passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

const WORKFLOW: &str = "name: whatif\nsteps:\n  - name: prep\n    type: command\n    \
     command: 'echo ready'\n  - name: plan\n    type: agent\n    provider: openai\n    \
     model: gpt-scripted\n    prompt: Make a plan.\n  - name: answer\n    type: agent\n    \
     provider: openai\n    model: gpt-scripted\n    prompt: Answer the question.\n  \
     - name: done\n    type: command\n    command: 'echo done'\n";

/// Records `wf` (its agents against `server`), returning the run id it printed.
fn record(
    wf: &std::path::Path,
    server: Option<&ModelServer>,
    (storage, ws): (&std::path::Path, &std::path::Path),
) -> String {
    let mut cmd = common::bin();
    if let Some(server) = server {
        cmd.env("OPENAI_BASE_URL", server.openai_base_url())
            .env("OPENAI_API_KEY", "sk-test");
    }
    let out = cmd
        .arg("run")
        .arg(wf)
        .arg("--storage")
        .arg(storage)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    common::printed_run_id(&common::text(&out.stdout))
}

fn answer_turn(pass: bool) -> Turn {
    let text = if pass { "PASS: 42" } else { "FAIL: no idea" };
    Turn::text(text).with_usage(Usage::new(100, 10))
}

#[test]
fn a_run_forked_at_its_third_step_runs_the_rest_live_k_times_and_says_where_it_diverges() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, storage) = (dir.path().join("ws"), dir.path().join("s"));
    std::fs::create_dir_all(&ws).unwrap();
    let wf = dir.path().join("whatif.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let recording_server = ModelServer::start(Script::new([
        Turn::text("the plan").with_usage(Usage::new(50, 5)),
        answer_turn(true),
    ]))
    .unwrap();
    let recording = record(&wf, Some(&recording_server), (&storage, &ws));
    drop(recording_server);

    let picks = common::seeded_picks(7, 5);
    let live = ModelServer::start(Script::new(picks.iter().map(|p| answer_turn(*p)))).unwrap();
    let expect = dir.path().join("expect.yaml");
    std::fs::write(&expect, "steps:\n  answer:\n    output: {contains: PASS}\n").unwrap();
    let junit = dir.path().join("junit.xml");
    let out = common::bin()
        .env("OPENAI_BASE_URL", live.openai_base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
        .args([
            "--workspace",
            ws.to_str().unwrap(),
            "--live-from",
            "answer",
            "--trials",
            "5",
            "--jobs",
            "3",
        ])
        .args([
            "--expect",
            expect.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ])
        .arg("--json")
        .output()
        .unwrap();
    let passes = picks.iter().filter(|p| **p).count();
    let code = if passes == 5 { 0 } else { 1 };
    assert_eq!(out.status.code(), Some(code), "{}", common::describe(&out));
    // The replayed prefix reached no live server: one request per trial, all for `answer`.
    assert_eq!(live.generation_requests().len(), 5);
    let report = common::json_after_progress(&common::text(&out.stdout));
    assert_eq!(report["passed"], passes, "{report}");
    assert_eq!(report["forked_at"], "answer");
    let trials = report["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 5);
    // Three at a time (`--jobs 3`): which trial got which answer is the order the requests
    // reached the server, so each trial is judged against the answer in its own transcript.
    for t in trials {
        // Each trial's run.started names the recording and the step it forked at (decision
        // 22), as the file on disk says.
        let file = storage.join(format!("{}.jsonl", t["run_id"].as_str().unwrap()));
        let first = std::fs::read_to_string(&file).unwrap();
        let started: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
        assert_eq!(started["type"], "run.started");
        assert_eq!(
            started["payload"]["replay_of"],
            recording.as_str(),
            "{started}"
        );
        assert_eq!(started["payload"]["forked_at"], "answer", "{started}");
        let pass = first.contains("PASS: 42");
        assert_ne!(pass, first.contains("FAIL: no idea"), "{first}");
        assert_eq!(t["passed"], pass, "{t}");
        // A passing trial answers as recorded; a failing one diverges at `answer`.
        if pass {
            assert!(t["divergence"].is_null(), "{t}");
        } else {
            assert_eq!(t["divergence"]["step"], "answer", "{t}");
        }
    }
    let fails = 5 - passes;
    if fails > 0 {
        assert_eq!(report["divergence"]["answer"], fails, "{report}");
    }
    // `diff` between the recording and a failing trial names the divergence first (after the
    // two runs' header lines), then the rest; between two trials as well.
    let failing: Vec<&str> = trials
        .iter()
        .filter(|t| t["passed"] == false)
        .map(|t| t["run_id"].as_str().unwrap())
        .collect();
    let passing = trials.iter().find(|t| t["passed"] == true);
    for (a, b) in [
        Some((recording.as_str(), failing.first().copied())),
        passing.map(|p| (p["run_id"].as_str().unwrap(), failing.first().copied())),
    ]
    .into_iter()
    .flatten()
    {
        let Some(b) = b else { continue };
        let out = common::bin()
            .args(["diff", a, b, "--storage", storage.to_str().unwrap()])
            .args(["--color", "never"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", common::describe(&out));
        let text = common::text(&out.stdout);
        let third = text.lines().nth(2).unwrap_or_default();
        assert!(third.starts_with("first divergence: step answer"), "{text}");
    }
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase").count(), 5, "{xml}");
    // The text report: a line per trial, then passed k of K and where they diverged.
    let live = ModelServer::start(Script::new(picks.iter().map(|p| answer_turn(*p)))).unwrap();
    let out = common::bin()
        .env("OPENAI_BASE_URL", live.openai_base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
        .args([
            "--workspace",
            ws.to_str().unwrap(),
            "--live-from",
            "answer",
            "--trials",
            "5",
        ])
        .args(["--expect", expect.to_str().unwrap(), "--color", "never"])
        .output()
        .unwrap();
    let text = common::text(&out.stdout);
    assert!(
        text.contains(&format!("passed {passes} of 5 (pass^5: ")),
        "{text}"
    );
    assert_eq!(
        text.matches("\ntrial ").count() + usize::from(text.starts_with("trial ")),
        5,
        "{text}"
    );
    if fails > 0 {
        assert!(text.contains(&format!("answer ×{fails}")), "{text}");
    }
    // Unknown step: named, with what the recording ran.
    let out = common::bin()
        .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
        .args(["--live-from", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", common::describe(&out));
    assert!(common::text(&out.stderr).contains("prep, plan, answer, done"));
}

const PARENT: &str = "name: outer\nsteps:\n  - name: plan\n    type: agent\n    provider: openai\n    \
     model: gpt-4o-mini\n    prompt: Plan.\n  - name: sub\n    type: call_workflow\n    \
     workflow: child.yaml\n  - name: done\n    type: agent\n    provider: openai\n    \
     model: gpt-4o-mini\n    prompt: Sum up.\n";
const CHILD: &str = "name: inner\nsteps:\n  - name: a\n    type: agent\n    provider: openai\n    \
     model: gpt-4o-mini\n    prompt: Step a.\n  - name: b\n    type: agent\n    provider: openai\n    \
     model: gpt-4o-mini\n    prompt: Step b.\n";

#[test]
fn a_fork_inside_a_child_run_serves_its_earlier_steps_and_bills_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, storage) = (dir.path().join("ws"), dir.path().join("s"));
    std::fs::create_dir_all(&ws).unwrap();
    let wf = dir.path().join("outer.yaml");
    std::fs::write(&wf, PARENT).unwrap();
    std::fs::write(dir.path().join("child.yaml"), CHILD).unwrap();
    // plan, a, b, done: input tokens priced by gpt-4o-mini's published $0.15 per million.
    let turn = |text: &str, input: u64| Turn::text(text).with_usage(Usage::new(input, 0));
    let recording_server = ModelServer::start(Script::new([
        turn("the plan", 100_000),
        turn("a done", 200_000),
        turn("b done", 300_000),
        turn("all done", 400_000),
    ]))
    .unwrap();
    let recording = record(&wf, Some(&recording_server), (&storage, &ws));
    drop(recording_server);

    // Two trials from `sub/b`: each asks the live server for b and done, nothing else.
    let live = ModelServer::start(Script::new([
        turn("b again", 300_000),
        turn("all done", 400_000),
        turn("b otherwise", 300_000),
        turn("all done", 400_000),
    ]))
    .unwrap();
    let out = common::bin()
        .env("OPENAI_BASE_URL", live.openai_base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
        .args(["--workspace", ws.to_str().unwrap()])
        .args(["--live-from", "sub/b", "--trials", "2", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    let prompts: Vec<String> = live
        .generation_requests()
        .iter()
        .map(|r| r.raw_body.clone())
        .collect();
    assert_eq!(prompts.len(), 4, "{prompts:#?}");
    for (i, p) in prompts.iter().enumerate() {
        let want = if i % 2 == 0 { "Step b." } else { "Sum up." };
        assert!(p.contains(want), "request {i} is not {want}: {p}");
    }
    let report = common::json_after_progress(&common::text(&out.stdout));
    assert_eq!(report["forked_at"], "sub/b");
    let trials = report["trials"].as_array().unwrap();
    assert!(trials[0]["divergence"]["step"] == "sub/b", "{report}");
    // Money: each trial's live part is b + done (700,000 tokens: $0.105), the recording's
    // the same; the served prefix (plan + a: 300,000 tokens, $0.045) is saved per trial.
    let usd = |v: &Value| (v.as_f64().unwrap() * 10_000.0).round() / 10_000.0;
    for t in trials {
        assert_eq!(usd(&t["live_cost_usd"]), 0.105, "{t}");
    }
    assert_eq!(usd(&report["live_cost_usd"]), 0.21, "{report}");
    assert_eq!(usd(&report["recording_live_cost_usd"]), 0.105, "{report}");
    assert_eq!(usd(&report["saved_cost_usd"]), 0.09, "{report}");
    // The bill: the recording (1,000,000 input tokens) and each trial's live part, b and done
    // (700,000 each); the served plan and a are not spend.
    let out = common::bin()
        .args([
            "receipts",
            "--by",
            "model",
            "--json",
            "--storage",
            storage.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let bill: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = bill["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{bill}");
    assert_eq!(
        groups[0]["usage"]["input_tokens"],
        1_000_000 + 2 * 700_000,
        "{bill}"
    );
    assert_eq!(groups[0]["turns"], 4 + 2 * 2, "{bill}");
    // `list` marks each trial with its recording and the step it was forked at.
    let out = common::bin()
        .args([
            "list",
            "--storage",
            storage.to_str().unwrap(),
            "--color",
            "never",
        ])
        .output()
        .unwrap();
    let listed = common::text(&out.stdout);
    let mark = format!("trial of {} from sub/b", &recording[..8]);
    assert_eq!(listed.matches(&mark).count(), 2, "{listed}");
    // A level that called no child run, and a step the child never ran, are named.
    for (step, says) in [
        ("plan/a", "step 'plan' called no child run"),
        ("sub/zz", "the child run of 'sub' has no step 'zz'"),
    ] {
        let out = common::bin()
            .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
            .args(["--live-from", step])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", common::describe(&out));
        assert!(
            common::text(&out.stderr).contains(says),
            "{}",
            common::describe(&out)
        );
    }
}

/// A step that ends only when `NEED` runs of it are in it at once: each leaves a file in the
/// shared workspace and waits (bounded: 30 s, then it fails) for `NEED` files.
const MEET: &str = "name: meet\ninputs:\n  - name: need\n    default: \"1\"\nsteps:\n  \
     - name: prep\n    type: command\n    command: 'echo ready'\n  - name: meet\n    \
     type: command\n    command: 'mktemp arrive.XXXXXX >/dev/null; n=0; while [ \"$(ls arrive.* | wc -l)\" -lt \"$NEED\" ]; \
     do n=$((n+1)); [ $n -gt 600 ] && exit 1; sleep 0.05; done; echo met'\n    \
     env: { NEED: \"{{inputs.need}}\" }\n";

#[test]
fn jobs_run_trials_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, storage) = (dir.path().join("ws"), dir.path().join("s"));
    std::fs::create_dir_all(&ws).unwrap();
    let wf = dir.path().join("meet.yaml");
    std::fs::write(&wf, MEET).unwrap();
    let recording = record(&wf, None, (&storage, &ws));
    for f in std::fs::read_dir(&ws).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let expect = dir.path().join("expect.yaml");
    std::fs::write(&expect, "steps:\n  meet:\n    output: {contains: met}\n").unwrap();
    // Three trials that each end only when all three are running: they pass only together.
    let out = common::bin()
        .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
        .args(["--workspace", ws.to_str().unwrap(), "--input", "need=3"])
        .args(["--live-from", "meet", "--trials", "3", "--jobs", "3"])
        .args(["--expect", expect.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    let arrived = std::fs::read_dir(&ws).unwrap().count();
    assert_eq!(arrived, 3, "one arrival per trial");
    let stdout = common::text(&out.stdout);
    assert!(stdout.contains("\"passed\": 3"), "{stdout}");
}

/// A step that waits until it is cancelled, after leaving a file saying it started.
const HANG: &str = "name: hang\nsteps:\n  - name: prep\n    type: command\n    command: 'echo ready'\n  \
     - name: work\n    type: command\n    command: 'mktemp started.XXXXXX >/dev/null; \
     while [ \"$(cat go 2>/dev/null)\" != go ]; do sleep 0.05; done; echo done'\n";

#[test]
fn a_signal_ends_the_running_trial_and_starts_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, storage) = (dir.path().join("ws"), dir.path().join("s"));
    std::fs::create_dir_all(&ws).unwrap();
    let wf = dir.path().join("hang.yaml");
    std::fs::write(&wf, HANG).unwrap();
    std::fs::write(ws.join("go"), "go").unwrap();
    let recording = record(&wf, None, (&storage, &ws));
    for f in std::fs::read_dir(&ws).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let child = common::bin()
        .args(["replay", &recording, "--storage", storage.to_str().unwrap()])
        .args(["--workspace", ws.to_str().unwrap()])
        .args(["--live-from", "work", "--trials", "3", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first trial's step has started (its file is there: a condition, not a delay).
    let started = || {
        std::fs::read_dir(&ws)
            .unwrap()
            .filter(|f| {
                f.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("started.")
            })
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while started() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first trial never started"
        );
        std::thread::yield_now();
    }
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", common::describe(&out));
    assert_eq!(started(), 1, "no trial started after the signal");
    // The recording and the one trial; the trial's transcript ends with its run.completed.
    let files: Vec<_> = std::fs::read_dir(&storage)
        .unwrap()
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl") && !p.ends_with("audit.jsonl"))
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "run.completed", "{}", f.display());
    }
}
