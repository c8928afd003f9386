//! A trial is billed for its live part on NATS storage as on files (#61 item 3), against a
//! real nats-server: a two-step run recorded, then forked at its second step twice; `receipts
//! --by model` bills the recording whole and each trial's live step, not the served one, the
//! same from the NATS runs index as from a directory, and `list` marks the trials there too.
#![allow(clippy::unwrap_used)]

mod common;

use serde_json::Value;
use transcript_nats::testing;
use transcript_testkit::model_server::{ModelServer, Script, Turn, Usage};

const WORKFLOW: &str = "name: twostep\nsteps:\n  - name: plan\n    type: agent\n    \
     provider: openai\n    model: gpt-4o-mini\n    prompt: Plan.\n  - name: answer\n    \
     type: agent\n    provider: openai\n    model: gpt-4o-mini\n    prompt: Answer.\n";

fn turn(text: &str, input: u64) -> Turn {
    Turn::text(text).with_usage(Usage::new(input, 0))
}

/// Records the workflow into `storage`, forks it at `answer` twice, and returns the bill.
fn record_and_fork(storage: &str, dir: &std::path::Path) -> Value {
    let ws = dir.join(format!("ws-{}", storage.len()));
    std::fs::create_dir_all(&ws).unwrap();
    let wf = dir.join("twostep.yaml");
    std::fs::write(&wf, WORKFLOW).unwrap();
    let server =
        ModelServer::start(Script::new([turn("plan", 100_000), turn("42", 200_000)])).unwrap();
    let out = common::bin()
        .current_dir(dir)
        .env("OPENAI_BASE_URL", server.openai_base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .args(["run", "--storage", storage, "--workspace"])
        .arg(&ws)
        .arg(&wf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    let recording = common::printed_run_id(&common::text(&out.stdout));
    let live = ModelServer::start(Script::new([turn("42", 200_000), turn("43", 200_000)])).unwrap();
    let out = common::bin()
        .current_dir(dir)
        .env("OPENAI_BASE_URL", live.openai_base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .args(["replay", &recording, "--storage", storage, "--workspace"])
        .arg(&ws)
        .args(["--live-from", "answer", "--trials", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", common::describe(&out));
    assert_eq!(live.generation_requests().len(), 2, "plan was served");
    let out = common::bin()
        .current_dir(dir)
        .args(["list", "--storage", storage, "--color", "never"])
        .output()
        .unwrap();
    let listed = common::text(&out.stdout);
    let mark = format!("trial of {} from answer", &recording[..8]);
    assert_eq!(listed.matches(&mark).count(), 2, "{listed}");
    let out = common::bin()
        .current_dir(dir)
        .args(["receipts", "--by", "model", "--json", "--storage", storage])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::describe(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn trials_are_billed_for_their_live_part_on_nats_as_on_files() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let nats = format!("{}/TRIALS", server.url());
    let files = tmp.path().join("files").display().to_string();
    let on_nats = record_and_fork(&nats, tmp.path());
    let on_files = record_and_fork(&files, tmp.path());
    for bill in [&on_nats, &on_files] {
        let group = &bill["groups"][0];
        // The recording (300,000) and each trial's answer (200,000); the served plans not.
        assert_eq!(
            group["usage"]["input_tokens"],
            300_000 + 2 * 200_000,
            "{bill}"
        );
        assert_eq!(group["turns"], 2 + 2, "{bill}");
        assert_eq!(group["runs"], 3, "{bill}");
    }
    assert_eq!(on_nats["groups"], on_files["groups"]);
}
