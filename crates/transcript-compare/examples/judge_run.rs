//! Grade a recorded run with a judge: transcript-compare's `check_judged` with transcript-exec's
//! Chat Completions client plugged into its `Grader` port, as `transcript check` does.
//!
//! ```text
//! cargo run -p transcript-compare --example judge_run -- RUN.jsonl EXPECT.yaml
//! ```
//!
//! The endpoint and key come from the file's `judge:` and the environment (`OPENAI_BASE_URL`,
//! the variable `api_key_env` names). Without arguments it grades the golden demo run against
//! a scripted model on 127.0.0.1 (transcript-replay's server) that answers one verdict, so it
//! runs offline.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use transcript_compare::{Expectations, GradePrompt, RunRecord, check_judged};
use transcript_domain::{DecodedEvent, RunId, decode_str};
use transcript_exec::ChatClient;
use transcript_replay::server::{ModelServer, Script, Turn};

fn read(path: &Path) -> Vec<DecodedEvent> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| decode_str(l).ok().map(|d| d.event))
        .collect()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let mut scripted = None;
    let (run, yaml) = match args.as_slice() {
        [run, expect] => (run.clone(), std::fs::read_to_string(expect).unwrap()),
        _ => {
            let server = ModelServer::start(Script::new([Turn::text(
                r#"{"verdict": "pass", "reason": "the greet step printed a greeting"}"#,
            )]))
            .unwrap();
            let yaml = format!(
                "judge: {{model: demo-judge, base_url: {}}}\nsteps:\n  greet:\n    judge: {{rubric: It greeted someone.}}\n",
                server.openai_base_url()
            );
            scripted = Some(server);
            let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/golden/demo-run/00000000-0000-4000-8000-000000000001.jsonl");
            (golden, yaml)
        }
    };
    let expectations = Expectations::parse(&yaml, "expectations").unwrap();
    let events = read(&run);
    let dir = run.parent().unwrap_or(Path::new(".")).to_path_buf();
    let record = RunRecord::build(
        &events,
        &mut |id: RunId| Some(read(&dir.join(id.file_name()))).filter(|e| !e.is_empty()),
        None,
    );
    // The composition: the file's judge settings into the HTTP adapter, the adapter into the port.
    let j = &expectations.judge;
    let chat = ChatClient::new(&j.model)
        .with_base_url(j.base_url.clone())
        .with_api_key_env(&j.api_key_env)
        .with_max_retries(j.max_retries)
        .with_timeout(Duration::from_secs(j.timeout_s))
        .json_object(true);
    let grader = |p: GradePrompt| chat.ask(p.system, p.user);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for o in runtime.block_on(check_judged(&record, &expectations, &grader)) {
        let mark = match (o.passed, o.errored) {
            (true, _) => "ok",
            (false, false) => "FAIL",
            (false, true) => "ERR",
        };
        println!("{mark} {}: {}: {}", o.scope, o.expectation, o.detail);
    }
    if let Some(server) = scripted {
        println!(
            "the model saw {} request(s)",
            server.generation_requests().len()
        );
    }
}
