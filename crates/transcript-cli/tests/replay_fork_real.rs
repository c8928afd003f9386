//! What if (#61) with the real agent CLIs (Claude Code, Codex, Gemini CLI): a 4-step workflow
//! (a command that counts its runs in a file, then three agent steps of the CLI, the first of
//! which reads a file through a tool call) is recorded against a scripted model server, which
//! is then stopped. `transcript replay --commands record --live-from answer --trials 5 --expect
//! FILE --junit OUT --json` forks it at its third step with a copy of the workflow naming a
//! second scripted server, the live one, whose answers a seed picks per request:
//!
//! - steps 1–2 are served from the recording: the command does not run again (its file keeps
//!   the recording's one line) and the trials get its recorded output; the live server's own
//!   log holds no request carrying step 2's prompt, and the trials' transcripts hold step 2's
//!   recorded answers;
//! - steps 3–4 reach the live server once each per trial, in order (its log says which prompt
//!   each request carried, the changed one when it was changed, and which script turn answered
//!   it);
//! - the report's per-trial divergence and pass count are what the seeds imply: with step 3's
//!   prompt changed every trial diverges at step 3's first turn (the prompt), and a trial
//!   passes when the seed passed both its answers (exit 1: some do not); with the prompts
//!   unchanged and every answer passing, a trial diverges at the answer turn of the first step
//!   whose answer the seed changed, or is the same as recorded (exit 0);
//! - the JUnit file has one case per trial and expectation;
//! - the bill counts the live part only: each trial's cost is the live server's bill of its
//!   two requests priced from the embedded price table (read here as JSON), the recording's
//!   live and prefix parts are the recording server's bills, and `receipts` bills the day
//!   exactly what the two servers billed (the replayed prefix is not spend).
//!
//! A missing CLI skips its test (fails it under `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::describe;
use serde_json::{Value, json};
use tempfile::TempDir;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox};
use transcript_testkit::model_server::{
    Bill, Handling, ModelServer, RecordedRequest, Script, Turn, Usage,
};

const NOTES: &str = "the launch code is 7-alpha-tango\n";

/// Step one, a command: it counts its own runs in `prep.log`, so a trial that ran it again
/// would show (served from the recording under `--commands record`, it does not run).
const PREP: &str = "echo prepared >> prep.log && wc -l < prep.log";

/// The four steps: name and prompt (step one's command). Prompts are plain text, so a
/// request's raw JSON body carries each one verbatim.
const STEPS: [(&str, &str); 4] = [
    ("prep", PREP),
    (
        "read",
        "Step two: read notes.txt and quote the launch code.",
    ),
    (
        "answer",
        "Step three: answer PASS or FAIL with the launch code.",
    ),
    (
        "review",
        "Step four: review the answer and say PASS or FAIL.",
    ),
];

/// Step three's prompt in the changed copy of the workflow.
const CHANGED: &str = "Step three, reworded: is the launch code known? Say PASS or FAIL.";

const RECORDED_ANSWER: &str = "PASS: the launch code is 7-alpha-tango.";
const RECORDED_REVIEW: &str = "PASS: the answer quotes the notes.";

const K: usize = 5;

/// Seeds checked by the tests themselves: the first fails some trials and passes some, the
/// second gives a trial diverging at each live step and one the same as recorded.
const SEED_SOME_FAIL: u64 = 7;
const SEED_ALL_PASS: u64 = 11;

const EXPECT: &str = "steps:\n  answer:\n    output: {contains: PASS}\n  review:\n    \
                      output: {contains: PASS}\n";

fn model(cli: AgentCli) -> &'static str {
    match cli {
        AgentCli::Claude => "claude-sonnet-4-5",
        AgentCli::Codex => "gpt-5.5",
        AgentCli::Gemini => "gemini-2.5-pro",
    }
}

/// The workflow of `cli` with step three's prompt `third`; `{{inputs.endpoint}}` is replaced by
/// the endpoint literally before it is written (an agent's endpoint is the author's, #48).
fn workflow(cli: AgentCli, third: &str) -> String {
    let mut text = format!(
        "name: whatif-{name}\ninputs:\n  - name: endpoint\nsteps:\n",
        name = cli.executable()
    );
    text.push_str(&format!(
        "  - name: {}\n    type: command\n    command: {}\n",
        STEPS[0].0,
        json!(PREP)
    ));
    for (i, (step, prompt)) in STEPS.iter().enumerate().skip(1) {
        let prompt = if i == 2 { third } else { prompt };
        text.push_str(&format!(
            "  - name: {step}\n    type: agent\n    provider: {name}\n    model: {model}\n    \
             timeout_ms: 60000\n    prompt: {prompt}\n    tools: [read_file, run_command]\n    \
             env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n",
            name = cli.executable(),
            model = model(cli),
            prompt = json!(prompt),
            var = common::step_env_var(cli),
        ));
    }
    text
}

fn read_call(cli: AgentCli, work: &Path) -> Turn {
    match cli {
        AgentCli::Claude => Turn::tool_call("Read", json!({"file_path": work.join("notes.txt")})),
        AgentCli::Codex => Turn::tool_call("exec_command", json!({"cmd": "cat notes.txt"})),
        AgentCli::Gemini => Turn::tool_call("read_file", json!({"file_path": "notes.txt"})),
    }
}

/// The recorded turns: one per request, steps in order (`read` calls a tool, then answers).
fn recorded_turns(cli: AgentCli, work: &Path) -> Vec<(usize, Turn)> {
    vec![
        (1, read_call(cli, work).with_usage(Usage::new(410, 23))),
        (
            1,
            Turn::text("The launch code is 7-alpha-tango.").with_usage(Usage::new(520, 13)),
        ),
        (
            2,
            Turn::text(RECORDED_ANSWER).with_usage(Usage::new(630, 17)),
        ),
        (
            3,
            Turn::text(RECORDED_REVIEW).with_usage(Usage::new(740, 19)),
        ),
    ]
}

/// A price per token, from the embedded LiteLLM table read as plain JSON (not through the
/// pricing code under test).
fn price(model: &str, usage: &Usage) -> f64 {
    let table: Value = serde_json::from_str(
        &std::fs::read_to_string(
            common::repo().join("crates/transcript-providers/src/pricing/litellm-prices.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let entry = &table[model];
    let per = |key: &str| {
        entry[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{model} has no {key} in the price table"))
    };
    assert_eq!(
        usage.cache_read_input_tokens + usage.cache_creation_input_tokens,
        0
    );
    usage.input_tokens as f64 * per("input_cost_per_token")
        + usage.output_tokens as f64 * per("output_cost_per_token")
}

fn priced(bills: &[&Bill]) -> f64 {
    bills.iter().map(|b| price(&b.model, &b.usage)).sum()
}

fn close(a: &Value, b: f64, what: &str) {
    let a = a
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: {a} is no cost"));
    assert!(
        (a - b).abs() < 1e-9,
        "{what}: the report says {a}, the bills {b}"
    );
}

/// Which step's prompt a request carries (its raw body holds it verbatim), with `third` as
/// step three's.
fn step_of(r: &RecordedRequest, third: &str) -> Option<&'static str> {
    let mut found = STEPS
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, (_, p))| r.raw_body.contains(if *i == 2 { third } else { p }))
        .map(|(_, (s, _))| *s);
    let step = found.next();
    assert!(found.next().is_none(), "two prompts in one request");
    step
}

/// The run recorded against the scripted server (stopped once recorded).
struct Recording {
    cli: AgentCli,
    bin: PathBuf,
    sb: AgentSandbox,
    storage: TempDir,
    run_id: String,
    env: Vec<(String, String)>,
    /// The recording server's bills, each with the step whose request it answered.
    bills: Vec<(&'static str, Bill)>,
}

impl Recording {
    fn make(cli: AgentCli) -> Option<Recording> {
        let bin = cli.require()?;
        let sb = AgentSandbox::new().unwrap();
        std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
        let turns = recorded_turns(cli, &sb.work());
        let server = ModelServer::start(Script::new(turns.iter().map(|(_, t)| t.clone()))).unwrap();
        let common::Recorded {
            storage,
            run_id,
            output,
            env,
            ..
        } = common::record_real(cli, &bin, &sb, &server, &workflow(cli, STEPS[2].1));
        let requests = server.requests();
        assert!(
            output.status.success(),
            "recording with {cli:?} failed:\n{}\nrequests: {:#?}",
            describe(&output),
            requests.iter().map(|r| &r.raw_body).collect::<Vec<_>>()
        );
        // One request per turn, each carrying its step's prompt, in the steps' order.
        let generation: Vec<_> = server.generation_requests();
        let seen: Vec<_> = generation.iter().map(|r| step_of(r, STEPS[2].1)).collect();
        let want: Vec<_> = turns.iter().map(|(s, _)| Some(STEPS[*s].0)).collect();
        assert_eq!(seen, want, "{:#?}", server.unexpected_requests());
        let bills = server
            .bills()
            .into_iter()
            .map(|b| {
                let r = requests.iter().find(|r| r.index == b.request).unwrap();
                (step_of(r, STEPS[2].1).unwrap(), b)
            })
            .collect();
        drop(server);
        Some(Recording {
            cli,
            bin,
            sb,
            storage,
            run_id,
            env,
            bills,
        })
    }

    /// The endpoint a copy of the workflow names for `server`: its URL, or for Codex a
    /// `CODEX_HOME` of its own whose `config.toml` names it.
    fn endpoint(&self, server: &ModelServer, name: &str) -> String {
        if self.cli != AgentCli::Codex {
            return server.url();
        }
        let config = std::fs::read_to_string(self.sb.config().join("config.toml")).unwrap();
        let config = common::codex_config_with_base_url(&config, &server.openai_base_url());
        let home = self.sb.tmp().join(name);
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), config).unwrap();
        home.display().to_string()
    }

    /// `transcript replay <run> --live-from answer --trials 5` with `workflow` written to a
    /// copy (its endpoint `endpoint`), the expectations and JUnit at `dir`: the output and the
    /// JSON report.
    fn fork(&self, workflow: &str, endpoint: &str, dir: &Path) -> (Output, Value) {
        let copy = dir.join("workflow-copy.yaml");
        std::fs::write(&copy, workflow.replace("{{inputs.endpoint}}", endpoint)).unwrap();
        let expect = dir.join("expect.yaml");
        std::fs::write(&expect, EXPECT).unwrap();
        let out = common::real_replay(
            (self.cli, &self.bin),
            &self.env,
            &self.run_id,
            (self.storage.path(), &self.sb.work()),
        )
        .arg("--workflow")
        .arg(&copy)
        .args(["--commands", "record", "--live-from", "answer"])
        .args(["--trials", &K.to_string()])
        .arg("--expect")
        .arg(&expect)
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .arg("--json")
        .output()
        .unwrap();
        let report = common::json_after_progress(&common::text(&out.stdout));
        (out, report)
    }

    fn events(&self, run_id: &str) -> Vec<Value> {
        let path = self.storage.path().join(format!("{run_id}.jsonl"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The recording server's bills of these steps, priced.
    fn priced(&self, steps: &[&str]) -> f64 {
        let bills: Vec<&Bill> = (self.bills.iter())
            .filter(|(s, _)| steps.contains(s))
            .map(|(_, b)| b)
            .collect();
        priced(&bills)
    }

    /// The day's billed input and output tokens, as `receipts --by day --json` says.
    fn day_tokens(&self) -> (u64, u64) {
        let out = common::bin()
            .args(["receipts", "--by", "day", "--json", "--storage"])
            .arg(self.storage.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        // Summed over the days (a test running across midnight bills two).
        let groups = v["groups"].as_array().unwrap();
        let sum = |key: &str| -> u64 {
            groups
                .iter()
                .map(|g| g["usage"][key].as_u64().unwrap())
                .sum()
        };
        (sum("input_tokens"), sum("output_tokens"))
    }
}

/// The assistant texts of `step` in run `events`, in order.
fn texts(events: &[Value], step: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "message.assistant" && e["path"] == step)
        .flat_map(|e| {
            e["payload"]["blocks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The `step.completed` payload of `step` in run `events`.
fn completed<'a>(events: &'a [Value], step: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "step.completed" && e["path"] == step)
        .map(|e| &e["payload"])
        .unwrap_or_else(|| panic!("no step.completed of {step}"))
}

/// What one trial's live requests get: step three's and step four's turns.
struct Live {
    answer: Turn,
    review: Turn,
}

/// Checks the live server's log (requests for steps 3–4 only, one each per trial, in order,
/// each answered by its script turn), the trials' transcripts (steps 1–2 as recorded, 3–4 as
/// the live server answered), the JUnit file and the report's costs against the bills.
fn check_live_part(
    rec: &Recording,
    live: &ModelServer,
    third: &str,
    plan: &[Live],
    report: &Value,
    junit: &Path,
) {
    let requests = live.requests();
    let why = || {
        format!(
            "{:#?}",
            requests
                .iter()
                .map(|r| (&r.handling, &r.raw_body))
                .collect::<Vec<_>>()
        )
    };
    for r in &requests {
        assert!(
            !matches!(r.handling, Handling::Unscripted | Handling::Unknown),
            "{}",
            why()
        );
    }
    let generation = live.generation_requests();
    let seen: Vec<(Option<&str>, Handling)> = generation
        .iter()
        .map(|r| (step_of(r, third), r.handling.clone()))
        .collect();
    let want: Vec<(Option<&str>, Handling)> = (0..2 * K)
        .map(|i| {
            let step = if i % 2 == 0 { "answer" } else { "review" };
            (Some(step), Handling::Turn(i))
        })
        .collect();
    assert_eq!(seen, want, "{}", why());
    // No request of any kind carried the replayed steps' prompts.
    for r in &requests {
        for (_, prompt) in &STEPS[..2] {
            assert!(!r.raw_body.contains(prompt), "{}", why());
        }
    }

    // Step one was not run again: only the recording's line is in its log.
    let log = std::fs::read_to_string(rec.sb.work().join("prep.log")).unwrap();
    assert_eq!(log, "prepared\n", "a trial ran the recorded command again");

    // The bills: per trial its two requests, priced.
    let bills = live.bills();
    assert_eq!(bills.len(), 2 * K, "{bills:#?}");
    let trials = report["trials"].as_array().unwrap();
    assert_eq!(trials.len(), K, "{report:#}");
    let recording = rec.events(&rec.run_id);
    for (t, (trial, turns)) in trials.iter().zip(plan).enumerate() {
        let pair: Vec<&Bill> = bills[2 * t..2 * t + 2].iter().collect();
        assert_eq!(pair[0].usage, turns.answer.usage);
        assert_eq!(pair[1].usage, turns.review.usage);
        close(
            &trial["live_cost_usd"],
            priced(&pair),
            &format!("trial {}", t + 1),
        );
        // Steps 1–2 as recorded, 3–4 as the live server answered.
        let run_id = trial["run_id"].as_str().unwrap();
        let events = rec.events(run_id);
        assert_eq!(events[0]["type"], "run.started");
        assert_eq!(events[0]["payload"]["replay_of"], rec.run_id.as_str());
        assert_eq!(events[0]["payload"]["forked_at"], "answer");
        // (served, not run: no `confined` of its own.)
        let (prep, recorded) = (
            &completed(&events, "prep")["result"],
            &completed(&recording, "prep")["result"],
        );
        for key in ["command", "exit_code", "stdout"] {
            assert_eq!(prep[key], recorded[key], "{prep:#}");
        }
        assert_eq!(prep["stdout"], "1\n", "{prep:#}");
        assert_eq!(texts(&events, "read"), texts(&recording, "read"));
        assert!(!texts(&events, "read").is_empty());
        for (step, turn) in [("answer", &turns.answer), ("review", &turns.review)] {
            let want: Vec<String> = turn
                .blocks
                .iter()
                .map(|b| match b {
                    transcript_testkit::model_server::Block::Text(t) => t.clone(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(texts(&events, step), want, "trial {} {step}", t + 1);
        }
    }
    let all: Vec<&Bill> = bills.iter().collect();
    close(
        &report["live_cost_usd"],
        priced(&all),
        "the trials' live parts",
    );
    close(
        &report["recording_live_cost_usd"],
        rec.priced(&["answer", "review"]),
        "the recording's live part",
    );
    close(
        &report["saved_cost_usd"],
        rec.priced(&["read"]) * K as f64,
        "the replayed prefix",
    );

    // JUnit: a case per trial and expectation, a failure per failed one.
    let xml = std::fs::read_to_string(junit).unwrap();
    assert_eq!(xml.matches("<testcase").count(), 2 * K, "{xml}");
    let failed: usize = trials
        .iter()
        .flat_map(|t| t["outcomes"].as_array().cloned().unwrap_or_default())
        .filter(|o| o["passed"] == false)
        .count();
    assert_eq!(xml.matches("<failure").count(), failed, "{xml}");
    for t in 1..=K {
        for step in ["answer", "review"] {
            assert!(xml.contains(&format!("trial {t}: {step}")), "{xml}");
        }
    }
}

/// Step three's prompt changed: every trial diverges at step three; a trial passes when both
/// of its answers do, as the seed picked them; exit 1.
fn a_changed_prompt_fails_the_trials_the_seed_fails(cli: AgentCli) {
    let Some(rec) = Recording::make(cli) else {
        return;
    };
    // The day's bill before the trials: what the recording server billed.
    let recorded = rec.day_tokens();
    let billed = rec
        .bills
        .iter()
        .fold(Usage::default(), |sum, (_, b)| sum + b.usage);
    assert_eq!(recorded, (billed.input_tokens, billed.output_tokens));
    let picks = common::seeded_picks(SEED_SOME_FAIL, 2 * K);
    let outcome = |pass: bool, i: usize| {
        let text = if pass {
            "PASS: 7-alpha-tango, as the notes say."
        } else {
            "FAIL: the notes do not say."
        };
        Turn::text(text).with_usage(Usage::new(1000 + 10 * i as u64, 20 + i as u64))
    };
    let plan: Vec<Live> = (0..K)
        .map(|t| Live {
            answer: outcome(picks[2 * t], 2 * t),
            review: outcome(picks[2 * t + 1], 2 * t + 1),
        })
        .collect();
    let passes: Vec<bool> = (0..K).map(|t| picks[2 * t] && picks[2 * t + 1]).collect();
    let passed = passes.iter().filter(|p| **p).count();
    assert!(
        0 < passed && passed < K,
        "the seed must pass some: {passes:?}"
    );
    let live = ModelServer::start(Script::new(
        plan.iter()
            .flat_map(|l| [l.answer.clone(), l.review.clone()]),
    ))
    .unwrap();
    let dir = TempDir::new().unwrap();
    let endpoint = rec.endpoint(&live, "codex-live");
    let (out, report) = rec.fork(&workflow(cli, CHANGED), &endpoint, dir.path());
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(1), "{why}");
    assert_eq!(report["passed"], passed, "{report:#}");
    assert_eq!(report["all_passed"], false, "{report:#}");
    assert_eq!(report["forked_at"], "answer", "{report:#}");
    for (t, pass) in report["trials"].as_array().unwrap().iter().zip(&passes) {
        assert_eq!(t["passed"], *pass, "{t:#}");
        assert_eq!(t["status"], "succeeded", "{t:#}");
        assert_eq!(t["divergence"]["step"], "answer", "{t:#}");
        // Asked otherwise: its first turn (the prompt) is where it diverged.
        assert_eq!(t["divergence"]["turn"], 0, "{t:#}");
        assert_eq!(t["divergence"]["field"], "turns[0].blocks[0].text", "{t:#}");
    }
    // Each expectation held where the seed passed its step's answer.
    for (t, trial) in report["trials"].as_array().unwrap().iter().enumerate() {
        let outcomes = trial["outcomes"].as_array().unwrap();
        for (step, pick) in [("answer", picks[2 * t]), ("review", picks[2 * t + 1])] {
            let o = outcomes.iter().find(|o| o["scope"] == step).unwrap();
            assert_eq!(o["passed"], pick, "trial {}: {o:#}", t + 1);
        }
    }
    assert_eq!(report["divergence"], json!({"answer": K}), "{report:#}");
    check_live_part(
        &rec,
        &live,
        CHANGED,
        &plan,
        &report,
        &dir.path().join("junit.xml"),
    );
    // The day's bill (#61 item 3): the recording and the trials' live parts, which really
    // called the model; nothing for the replayed prefix.
    let live_billed = live.billed_total();
    assert_eq!(
        rec.day_tokens(),
        (
            recorded.0 + live_billed.input_tokens,
            recorded.1 + live_billed.output_tokens
        ),
        "receipts --by day must bill the trials' live parts (the live server billed {live_billed:?}) \
         and not their replayed prefix"
    );
}

/// The prompts unchanged and every answer passing: a trial diverges at the first step whose
/// answer the seed changed, or is the same as recorded; exit 0.
fn unchanged_prompts_diverge_where_the_seed_changed_an_answer(cli: AgentCli) {
    let Some(rec) = Recording::make(cli) else {
        return;
    };
    let picks = common::seeded_picks(SEED_ALL_PASS, 2 * K);
    // `true`: the recorded answer (text and usage); `false`: another passing one.
    let answer = |same: bool, recorded: &str, usage: Usage, i: usize| {
        if same {
            Turn::text(recorded).with_usage(usage)
        } else {
            Turn::text(format!("PASS, said otherwise ({i})."))
                .with_usage(Usage::new(2000 + 10 * i as u64, 30 + i as u64))
        }
    };
    let plan: Vec<Live> = (0..K)
        .map(|t| Live {
            answer: answer(picks[2 * t], RECORDED_ANSWER, Usage::new(630, 17), 2 * t),
            review: answer(
                picks[2 * t + 1],
                RECORDED_REVIEW,
                Usage::new(740, 19),
                2 * t + 1,
            ),
        })
        .collect();
    let diverged: Vec<Option<&str>> = (0..K)
        .map(|t| match (picks[2 * t], picks[2 * t + 1]) {
            (false, _) => Some("answer"),
            (true, false) => Some("review"),
            (true, true) => None,
        })
        .collect();
    for kind in [Some("answer"), Some("review"), None] {
        assert!(
            diverged.contains(&kind),
            "the seed must give each: {diverged:?}"
        );
    }
    let live = ModelServer::start(Script::new(
        plan.iter()
            .flat_map(|l| [l.answer.clone(), l.review.clone()]),
    ))
    .unwrap();
    let dir = TempDir::new().unwrap();
    let endpoint = rec.endpoint(&live, "codex-live");
    let (out, report) = rec.fork(&workflow(cli, STEPS[2].1), &endpoint, dir.path());
    let why = describe(&out);
    assert_eq!(out.status.code(), Some(0), "{why}");
    assert_eq!(report["passed"], K, "{report:#}");
    assert_eq!(report["all_passed"], true, "{report:#}");
    let mut histogram = std::collections::BTreeMap::new();
    for (t, want) in report["trials"].as_array().unwrap().iter().zip(&diverged) {
        assert_eq!(t["passed"], true, "{t:#}");
        match want {
            Some(step) => {
                // Asked the same, it answered otherwise: the answer's turn.
                assert_eq!(t["divergence"]["step"], *step, "{t:#}");
                assert_eq!(t["divergence"]["turn"], 1, "{t:#}");
                assert_eq!(t["divergence"]["field"], "turns[1].blocks[0].text", "{t:#}");
            }
            None => assert!(t["divergence"].is_null(), "{t:#}"),
        }
        *histogram
            .entry(want.unwrap_or("same as recorded"))
            .or_insert(0) += 1;
    }
    assert_eq!(report["divergence"], json!(histogram), "{report:#}");
    check_live_part(
        &rec,
        &live,
        STEPS[2].1,
        &plan,
        &report,
        &dir.path().join("junit.xml"),
    );
}

#[test]
fn claude_code_forked_with_a_changed_prompt_passes_what_the_seed_passes() {
    a_changed_prompt_fails_the_trials_the_seed_fails(AgentCli::Claude);
}

#[test]
fn claude_code_forked_unchanged_diverges_where_the_seed_says() {
    unchanged_prompts_diverge_where_the_seed_changed_an_answer(AgentCli::Claude);
}

#[test]
fn codex_forked_with_a_changed_prompt_passes_what_the_seed_passes() {
    a_changed_prompt_fails_the_trials_the_seed_fails(AgentCli::Codex);
}

#[test]
fn codex_forked_unchanged_diverges_where_the_seed_says() {
    unchanged_prompts_diverge_where_the_seed_changed_an_answer(AgentCli::Codex);
}

#[test]
fn gemini_cli_forked_with_a_changed_prompt_passes_what_the_seed_passes() {
    a_changed_prompt_fails_the_trials_the_seed_fails(AgentCli::Gemini);
}

#[test]
fn gemini_cli_forked_unchanged_diverges_where_the_seed_says() {
    unchanged_prompts_diverge_where_the_seed_changed_an_answer(AgentCli::Gemini);
}
