//! The real agent CLIs (Claude Code, Codex, Gemini CLI) run by `transcript run` through their
//! provider presets (`provider: claude | codex | gemini`, no `command:`) against the scripted
//! model server of transcript-testkit: the tools really run in `--workspace`, the transcript
//! holds the prompt, every assistant turn and the tool calls with their real results, the
//! receipts equal what the server billed, warnings survive and real failures fail the step
//! with the provider's message.
//!
//! A CLI is found by [`AgentCli::require`] (`TRANSCRIPT_<CLI>_BIN`, `PATH`, the cache folder of
//! `.ci/install-agent-clis`) and handed to the preset through `TRANSCRIPT_<CLI>_BIN`. When it
//! is absent a test says "skipped" and passes, unless `TRANSCRIPT_REQUIRE_AGENTS=1` or `CI=true`. Each step
//! has a 60 s `timeout_ms`: a hanging CLI fails the test instead of blocking it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use tempfile::TempDir;
use transcript_testkit::agent_cli::{AgentCli, AgentSandbox, CliOptions};
use transcript_testkit::model_server::{Fault, ModelServer, Provider, Script, Turn, Usage};

const NOTES: &str = "the launch code is 7-alpha-tango\nsecond line of notes\n";
const PROMPT: &str = "Read notes.txt and tell me the launch code.";
const FINAL_TEXT: &str = "The notes say the launch code is 7-alpha-tango.";
/// A shell command whose output only a real shell produces (a pipe: Gemini CLI refuses
/// command substitution, `$((...))` included).
const SHELL: &str = "echo shell-42 | tr a-z A-Z";
const SHELL_OUT: &str = "SHELL-42";
/// A model Codex has metadata for (with an unknown one it prints its "Model metadata ... not
/// found" warning: `codex_preset_survives_its_unknown_model_warning`).
const CODEX_MODEL: &str = "gpt-5.5";

/// One `transcript run` of a preset workflow in a sandbox.
struct Run {
    cli: AgentCli,
    sb: AgentSandbox,
    storage: TempDir,
    output: Output,
    events: Vec<Value>,
    run_id: String,
}

impl Run {
    /// Runs the workflow of one agent step with `extra` YAML lines (model, tools, max_turns).
    fn start(
        cli: AgentCli,
        sb: AgentSandbox,
        server: &ModelServer,
        prompt: &str,
        extra: &str,
    ) -> Option<Run> {
        let bin = cli.require()?;
        // Writes Codex's config.toml and Gemini CLI's settings.json; the arguments are the
        // preset's business, only the environment is used.
        let inv = sb
            .invocation(cli, &bin, server, "unused", &CliOptions::default())
            .unwrap();
        let var = common::step_env_var(cli);
        let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
        let model = match cli {
            _ if extra.contains("model:") => String::new(),
            AgentCli::Claude => String::new(),
            AgentCli::Codex => format!("    model: {CODEX_MODEL}\n"),
            AgentCli::Gemini => format!(
                "    model: {}\n",
                CliOptions::default_model(cli).unwrap_or("gemini-2.5-pro")
            ),
        };
        let workflow = format!(
            "name: real-{name}\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    \
             type: agent\n    provider: {name}\n    timeout_ms: 60000\n    prompt: {prompt}\n\
             {model}{extra}    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n",
            name = cli.executable(),
            prompt = json!(prompt),
        );
        let (storage, run_id, output) = common::RealCliRun {
            workflow: &workflow,
            dir: &sb.tmp(),
            workspace: &sb.work(),
            env: &inv.env,
            step_var: var,
            bin: (cli.bin_var(), &bin),
            endpoint: &endpoint,
        }
        .run();
        let events = read_events(&storage.path().join(format!("{run_id}.jsonl")));
        Some(Run {
            cli,
            sb,
            storage,
            output,
            events,
            run_id,
        })
    }

    fn describe(&self, server: &ModelServer) -> String {
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| format!("#{} {} {} -> {:?}", r.index, r.method, r.path, r.handling))
            .collect();
        format!(
            "{}: exit {:?}\nrequests:\n  {}\nstderr:\n{}\ntranscript:\n{}",
            self.cli.executable(),
            self.output.status.code(),
            requests.join("\n  "),
            common::text(&self.output.stderr),
            self.events
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        )
    }

    fn of_type(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["type"] == kind).collect()
    }

    fn step_completed(&self) -> &Value {
        self.events
            .iter()
            .find(|e| e["type"] == "step.completed" && e["path"] == "ask")
            .expect("step.completed of the agent step")
    }

    /// `transcript receipts <run> --json`.
    fn receipts(&self) -> Value {
        receipts(self.storage.path(), &self.run_id)
    }
}

fn read_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn receipts(storage: &Path, run_id: &str) -> Value {
    let out = common::bin()
        .arg("--storage")
        .arg(storage)
        .args(["receipts", run_id, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The server's bill in the transcript's terms (decision 10: input excludes cache reads and
/// writes; OpenAI and Gemini count cached input inside their input total).
fn expected_usage(provider: Provider, billed: Usage) -> Value {
    let mut u = serde_json::Map::new();
    let mut set = |k: &str, v: u64| {
        if v > 0 {
            u.insert(k.to_owned(), json!(v));
        }
    };
    set("input_tokens", billed.input_tokens);
    set("output_tokens", billed.output_tokens);
    set("cache_read_tokens", billed.cache_read_input_tokens);
    set("cache_write_tokens", billed.cache_creation_input_tokens);
    if provider != Provider::Anthropic {
        set("reasoning_tokens", billed.reasoning_tokens);
    }
    Value::Object(u)
}

/// The token fields of a receipt's usage (cost left out: the server bills tokens only).
fn tokens(usage: &Value) -> Value {
    let mut u = usage.as_object().cloned().unwrap_or_default();
    u.remove("cost_usd");
    u.retain(|_, v| v != &json!(0));
    Value::Object(u)
}

/// Receipts equal the server's bill: the one agent step and the total.
fn assert_receipts_equal_billing(run: &Run, server: &ModelServer, turns: usize) {
    let why = run.describe(server);
    let provider = run.cli.provider();
    let want = expected_usage(provider, server.billed(provider));
    let r = run.receipts();
    let steps = r["receipts"].as_array().unwrap();
    assert_eq!(steps.len(), 1, "{r}\n{why}");
    assert_eq!(steps[0]["path"], "ask");
    assert_eq!(steps[0]["turns"], turns, "{r}\n{why}");
    assert_eq!(tokens(&steps[0]["usage"]), want, "per step: {r}\n{why}");
    assert_eq!(tokens(&r["total"]), want, "total: {r}\n{why}");
    assert_eq!(otlp_usage(run), want, "OTLP usage attributes\n{why}");
}

/// The usage attributes of the run's spans in its OTLP/JSON export, in receipt terms: summed
/// over the per-call `chat` spans, which must equal the sum over the `invoke_agent` spans (their
/// `transcript.usage.*` sums: the transcript's counts). The conventions count cached input
/// inside `gen_ai.usage.input_tokens`, and reasoning inside `gen_ai.usage.output_tokens` (added
/// for Gemini, which counts it apart): both are taken back out to compare with the receipt.
fn otlp_usage(run: &Run) -> Value {
    let file = run.storage.path().join("spans.json");
    let out = common::bin()
        .arg("--storage")
        .arg(run.storage.path())
        .args(["export", &run.run_id, "--format", "otlp-json", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let spans: Vec<&Value> = doc["resourceSpans"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["scopeSpans"].as_array().into_iter().flatten())
        .flat_map(|s| s["spans"].as_array().into_iter().flatten())
        .collect();
    let attr = |span: &Value, key: &str| -> Option<Value> {
        span["attributes"]
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"].clone())
    };
    let int = |span: &Value, key: &str| -> u64 {
        attr(span, key)
            .map(|v| {
                let v = &v["intValue"];
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .unwrap_or(0)
            })
            .unwrap_or(0)
    };
    let sum = |operation: &str| -> Value {
        let mut totals = [0u64; 5];
        for span in spans
            .iter()
            .filter(|s| attr(s, "gen_ai.operation.name") == Some(json!({"stringValue": operation})))
        {
            if operation == "invoke_agent" {
                // Agent spans: the step's sums under our names only (the transcript's
                // counts), so a backend summing gen_ai.usage.* counts each request once.
                let ours = [
                    "transcript.usage.input_tokens",
                    "transcript.usage.output_tokens",
                    "transcript.usage.cache_read_tokens",
                    "transcript.usage.cache_write_tokens",
                    "transcript.usage.reasoning_tokens",
                ];
                for (total, name) in totals.iter_mut().zip(ours) {
                    *total += int(span, name);
                }
                assert_eq!(attr(span, "gen_ai.usage.input_tokens"), None);
                continue;
            }
            let read = int(span, "gen_ai.usage.cache_read.input_tokens");
            let write = int(span, "gen_ai.usage.cache_creation.input_tokens");
            let reasoning = int(span, "gen_ai.usage.reasoning.output_tokens");
            let gemini =
                attr(span, "transcript.provider") == Some(json!({"stringValue": "gemini"}));
            let output = int(span, "gen_ai.usage.output_tokens");
            totals[0] += int(span, "gen_ai.usage.input_tokens") - read - write;
            totals[1] += if gemini { output - reasoning } else { output };
            totals[2] += read;
            totals[3] += write;
            totals[4] += reasoning;
            assert_eq!(attr(span, "transcript.usage.reasoning_tokens"), None);
        }
        let names = [
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        ];
        let mut sums = serde_json::Map::new();
        for (name, total) in names.iter().zip(totals) {
            if total > 0 {
                sums.insert((*name).to_owned(), json!(total));
            }
        }
        Value::Object(sums)
    };
    let per_call = sum("chat");
    assert_eq!(
        per_call,
        sum("invoke_agent"),
        "chat spans and their agent span count the same tokens"
    );
    per_call
}

/// The provider's tool names for reading `notes.txt` and running [`SHELL`].
fn read_call(cli: AgentCli, sb_work: &Path) -> Turn {
    match cli {
        AgentCli::Claude => {
            Turn::tool_call("Read", json!({"file_path": sb_work.join("notes.txt")}))
        }
        AgentCli::Codex => Turn::tool_call("exec_command", json!({"cmd": "cat notes.txt"})),
        AgentCli::Gemini => Turn::tool_call("read_file", json!({"file_path": "notes.txt"})),
    }
}

fn shell_call(cli: AgentCli) -> Turn {
    match cli {
        AgentCli::Claude => Turn::tool_call("Bash", json!({"command": SHELL})),
        AgentCli::Codex => Turn::tool_call("exec_command", json!({"cmd": SHELL})),
        AgentCli::Gemini => Turn::tool_call("run_shell_command", json!({"command": SHELL})),
    }
}

/// Usage of a turn: Anthropic reports cache creation separately, the others count it inside
/// their input (so it stays 0 there to keep the mapping exact).
/// Reasoning: Anthropic bills none separately; Gemini CLI's stream-json stats leave the
/// thought tokens out of `output_tokens` (only `total_tokens` counts them), so they stay 0 there.
fn usage(cli: AgentCli, input: u64, output: u64, read: u64) -> Usage {
    let creation = if cli == AgentCli::Claude { 100 } else { 0 };
    let reasoning = if cli == AgentCli::Codex { 7 } else { 0 };
    Usage::new(input, output)
        .with_cache(read, creation)
        .with_reasoning(reasoning)
}

fn with_thinking(cli: AgentCli, turn: Turn) -> Turn {
    let mut t = Turn::default().then_thinking("Read the notes first.", format!("sig-{cli:?}"));
    t.blocks.extend(turn.blocks);
    t
}

/// A sandbox whose working directory (the run's workspace) holds `notes.txt`.
fn sandbox() -> AgentSandbox {
    let sb = AgentSandbox::new().unwrap();
    std::fs::write(sb.work().join("notes.txt"), NOTES).unwrap();
    sb
}

/// Read the notes, run a shell command, answer.
fn three_turn_script(cli: AgentCli, work: &Path) -> Script {
    Script::new([
        with_thinking(cli, read_call(cli, work)).with_usage(usage(cli, 1200, 45, 300)),
        shell_call(cli).with_usage(usage(cli, 1500, 21, 1400)),
        Turn::text(FINAL_TEXT).with_usage(usage(cli, 1700, 17, 1600)),
    ])
}

/// The full round trip: prompt, turns with blocks, tool calls with real results, receipts.
fn round_trip(cli: AgentCli) {
    let sb = sandbox();
    let script = three_turn_script(cli, &sb.work());
    let server = ModelServer::start(script.clone()).unwrap();
    let Some(run) = Run::start(
        cli,
        sb,
        &server,
        PROMPT,
        "    tools: [read_file, run_command]\n",
    ) else {
        return;
    };
    let why = run.describe(&server);
    assert!(run.output.status.success(), "{why}");
    assert!(server.unexpected_requests().is_empty(), "{why}");
    assert_eq!(server.generation_requests().len(), 3, "{why}");

    // message.user: the resolved prompt.
    let user = run.of_type("message.user");
    assert_eq!(user.len(), 1, "{why}");
    assert_eq!(user[0]["payload"]["blocks"][0]["text"], PROMPT, "{why}");

    // One message.assistant per model turn, with its blocks.
    let turns = run.of_type("message.assistant");
    assert_eq!(turns.len(), 3, "{why}");
    let kinds = |t: &Value| -> Vec<String> {
        t["payload"]["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = kinds(turns[0]);
    if cli != AgentCli::Gemini {
        // Gemini CLI's stream-json does not print thoughts.
        assert!(first.contains(&"thinking".to_owned()), "{first:?}\n{why}");
    }
    assert!(first.contains(&"tool_use".to_owned()), "{first:?}\n{why}");
    let last = turns[2]["payload"]["blocks"].as_array().unwrap();
    assert!(
        last.iter()
            .any(|b| b["type"] == "text" && b["text"] == FINAL_TEXT),
        "{why}"
    );
    for t in &turns {
        assert_eq!(t["payload"]["provider"], cli.executable(), "{why}");
    }

    // tool.call / tool.result at agent_emitted fidelity, with the real outputs.
    let calls = run.of_type("tool.call");
    let results = run.of_type("tool.result");
    assert_eq!(calls.len(), 2, "{why}");
    assert_eq!(results.len(), 2, "{why}");
    for e in calls.iter().chain(&results) {
        assert_eq!(e["payload"]["fidelity"], "agent_emitted", "{why}");
        let id = e["payload"]["call_id"].as_str().unwrap();
        assert!(id.starts_with("ask#0/"), "qualified call id {id}");
    }
    let output = |i: usize| results[i]["payload"]["output"].to_string();
    if cli == AgentCli::Gemini {
        // Gemini CLI's stream-json prints `"output": ""` for read_file (the content goes to the
        // model only): the transcript cannot hold more than the CLI printed. The model got it.
        assert_eq!(results[0]["payload"]["output"], "", "{why}");
        let sent = server.generation_requests()[1].tool_results();
        assert!(sent.iter().any(|r| r.contains("7-alpha-tango")), "{sent:?}");
    } else {
        assert!(output(0).contains("7-alpha-tango"), "{}\n{why}", output(0));
    }
    assert!(output(1).contains(SHELL_OUT), "{}\n{why}", output(1));
    assert!(
        !output(1).contains("tr a-z"),
        "the shell ran the command: {}",
        output(1)
    );

    let done = run.step_completed();
    assert!(done["payload"]["error"].is_null(), "{why}");
    assert_receipts_equal_billing(&run, &server, 3);
    assert_eq!(
        server.billed(cli.provider()),
        script.total_usage(),
        "the whole script was served\n{why}"
    );
    if cli == AgentCli::Claude {
        claude_session_log_imports_the_same(&run, &server);
    }
    assert_eq!(done["payload"]["result"], FINAL_TEXT, "{why}");
    // What a person sees of it (`--nocapture`; the README tour quotes this).
    for view in [&["tree", &run.run_id][..], &["receipts", &run.run_id][..]] {
        let out = common::bin()
            .arg("--storage")
            .arg(run.storage.path())
            .args(["--color", "never"])
            .args(view)
            .output()
            .unwrap();
        println!(
            "$ transcript {}\n{}",
            view.join(" "),
            common::text(&out.stdout)
        );
    }
}

/// The session log the same Claude Code run wrote under `CLAUDE_CONFIG_DIR/projects/...`
/// imports to the same assistant blocks and the same usage.
fn claude_session_log_imports_the_same(run: &Run, server: &ModelServer) {
    let why = run.describe(server);
    let logs = run.sb.claude_session_logs();
    assert_eq!(logs.len(), 1, "{logs:?}\n{why}");
    let storage = tempfile::tempdir().unwrap();
    let out = common::bin()
        .arg("--storage")
        .arg(storage.path())
        .args(["import", "claude"])
        .arg(&logs[0])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let line = common::text(&out.stdout);
    let mut fields = line.trim().split('\t');
    let run_id = fields.next().unwrap().to_owned();
    let imported = read_events(&PathBuf::from(fields.nth(1).unwrap()));
    // Blocks without the run's call id qualification (`ask#0/`) nor the step path.
    let blocks = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == "message.assistant")
            .flat_map(|e| e["payload"]["blocks"].as_array().cloned().unwrap())
            .filter(|b| b["type"] != "tool_result")
            .map(|mut b| {
                if let Some(id) = b["tool_id"].as_str() {
                    b["tool_id"] = json!(id.rsplit('/').next().unwrap());
                }
                b
            })
            .collect()
    };
    assert!(blocks(&run.events).len() >= 4, "{why}");
    assert_eq!(
        blocks(&imported),
        blocks(&run.events),
        "imported session log\n{}",
        imported
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let r = receipts(storage.path(), &run_id);
    let want = expected_usage(Provider::Anthropic, server.billed(Provider::Anthropic));
    assert_eq!(tokens(&r["total"]), want, "imported receipts: {r}");
    // Wire decision 17: the live run names each billed request by its message id (stream-json
    // has no requestId), the imported log by `<message.id>/<requestId>`, the same message.
    let request_ids = |events: &[Value]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["type"] == "message.assistant" && e["payload"]["usage"].is_object())
            .map(|e| e["payload"]["request_id"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    let live = request_ids(&run.events);
    let logged: Vec<String> = request_ids(&imported)
        .iter()
        .map(|r| r.split('/').next().unwrap().to_owned())
        .collect();
    assert!(
        live.iter().all(|r| r.starts_with("msg_")),
        "{live:?}\n{why}"
    );
    assert!(
        request_ids(&imported).iter().all(|r| r.contains('/')),
        "{why}"
    );
    let (mut a, mut b) = (live.clone(), logged);
    a.dedup();
    b.dedup();
    assert_eq!(a, b, "{why}");
    // The live run and the import of its session log in one storage: one bill (#51).
    std::fs::copy(
        run.storage.path().join(format!("{}.jsonl", run.run_id)),
        storage.path().join(format!("{}.jsonl", run.run_id)),
    )
    .unwrap();
    let out = common::bin()
        .args(["receipts", "--by", "day", "--json", "--storage"])
        .arg(storage.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out.stderr));
    let by_day: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups = by_day["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{by_day}");
    assert_eq!(
        tokens(&groups[0]["usage"]),
        want,
        "live + imported: {by_day}\nimported: {}\n{why}",
        imported
            .iter()
            .filter(|e| e["type"] == "message.assistant")
            .map(|e| e["payload"].to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(by_day["duplicates"], live.len(), "{by_day}");
}

/// One turn, no tools: receipts equal the bill.
fn one_turn(cli: AgentCli) {
    let script = Script::new([Turn::text("Hello.").with_usage(usage(cli, 900, 12, 200))]);
    let server = ModelServer::start(script.clone()).unwrap();
    let Some(run) = Run::start(cli, sandbox(), &server, "Say hello.", "") else {
        return;
    };
    let why = run.describe(&server);
    assert!(run.output.status.success(), "{why}");
    assert_eq!(run.of_type("message.assistant").len(), 1, "{why}");
    assert!(run.of_type("tool.call").is_empty(), "{why}");
    assert_eq!(server.billed(cli.provider()), script.total_usage(), "{why}");
    assert_receipts_equal_billing(&run, &server, 1);
}

/// The provider fails with `fault` on every request: the run fails, the step's error carries
/// the provider's message (`needle`), nothing is billed or receipted.
fn fails(cli: AgentCli, fault: Fault, needle: &str) {
    let server = ModelServer::start(Script::always(fault)).unwrap();
    let Some(run) = Run::start(cli, sandbox(), &server, "Say hi.", "") else {
        return;
    };
    let why = run.describe(&server);
    assert_eq!(run.output.status.code(), Some(1), "{why}");
    let error = run.step_completed()["payload"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("the step failed\n{why}"))
        .to_owned();
    assert!(error.contains(needle), "{error:?} names {needle:?}\n{why}");
    println!("{}: {error}", cli.executable());
    assert_eq!(server.billed_total(), Usage::default(), "{why}");
    let r = run.receipts();
    assert_eq!(tokens(&r["total"]), json!({}), "{r}");
}

// ---- Claude Code -------------------------------------------------------------------------

#[test]
fn claude_preset_reads_a_file_runs_a_command_and_answers() {
    round_trip(AgentCli::Claude);
}

#[test]
fn claude_preset_one_turn_receipts_equal_billing() {
    one_turn(AgentCli::Claude);
}

/// Issue #29, one request, one bill in a live run: one model turn makes two tool calls at
/// once (Read and Bash). Claude Code prints that message's blocks on separate lines and
/// writes the tool results between them in its session log; the live receipts and the
/// imported session log's receipts still equal what the server billed.
#[test]
fn claude_preset_parallel_tool_calls_bill_each_request_once() {
    let cli = AgentCli::Claude;
    let sb = sandbox();
    let both = with_thinking(
        cli,
        read_call(cli, &sb.work()).then_tool_call("Bash", json!({"command": SHELL})),
    );
    let script = Script::new([
        both.with_usage(usage(cli, 1200, 45, 300)),
        Turn::text(FINAL_TEXT).with_usage(usage(cli, 1700, 17, 1600)),
    ]);
    let server = ModelServer::start(script.clone()).unwrap();
    let Some(run) = Run::start(
        cli,
        sb,
        &server,
        PROMPT,
        "    tools: [read_file, run_command]\n",
    ) else {
        return;
    };
    let why = run.describe(&server);
    assert!(run.output.status.success(), "{why}");
    assert_eq!(run.of_type("tool.call").len(), 2, "{why}");
    assert_eq!(run.of_type("tool.result").len(), 2, "{why}");
    assert_eq!(server.billed(cli.provider()), script.total_usage(), "{why}");
    assert_receipts_equal_billing(&run, &server, 2);
    claude_session_log_imports_the_same(&run, &server);
}

#[test]
fn claude_preset_fails_when_the_api_is_overloaded() {
    fails(AgentCli::Claude, Fault::Overloaded, "Overloaded");
}

#[test]
fn claude_preset_fails_when_the_stream_is_cut() {
    fails(AgentCli::Claude, Fault::CutAfterEvents(2), "API Error");
}

#[test]
fn claude_preset_fails_when_the_cli_stops_at_max_turns() {
    // --max-turns 1: the model asks for a tool, Claude Code stops after one turn with an
    // error result and a non-zero exit.
    let server = ModelServer::start(Script::new([
        Turn::tool_call("Bash", json!({"command": SHELL})).with_usage(Usage::new(10, 5)),
        Turn::text("never reached"),
    ]))
    .unwrap();
    let Some(run) = Run::start(
        AgentCli::Claude,
        sandbox(),
        &server,
        "Run it.",
        "    tools: [run_command]\n    max_turns: 1\n",
    ) else {
        return;
    };
    let why = run.describe(&server);
    assert_eq!(run.output.status.code(), Some(1), "{why}");
    let error = run.step_completed()["payload"]["error"].to_string();
    assert!(error.contains("max"), "{error}\n{why}");
}

// ---- Codex -------------------------------------------------------------------------------

#[test]
fn codex_preset_reads_a_file_runs_a_command_and_answers() {
    round_trip(AgentCli::Codex);
}

#[test]
fn codex_preset_one_turn_receipts_equal_billing() {
    one_turn(AgentCli::Codex);
}

/// Codex prints an `error` item for a model it has no metadata for, before the turn starts,
/// and then carries on: a warning kept with the step, not a failure.
#[test]
fn codex_preset_survives_its_unknown_model_warning() {
    let cli = AgentCli::Codex;
    let script = Script::new([Turn::text("Hello.").with_usage(usage(cli, 900, 12, 200))]);
    let server = ModelServer::start(script.clone()).unwrap();
    let extra = "    model: testkit-unknown-model\n";
    let Some(run) = Run::start(cli, sandbox(), &server, "Say hello.", extra) else {
        return;
    };
    let why = run.describe(&server);
    assert!(run.output.status.success(), "{why}");
    let completed = run.step_completed();
    assert!(completed["payload"]["error"].is_null(), "{why}");
    let result = completed["payload"]["result"].to_string();
    assert!(
        result.contains("Model metadata"),
        "the warning is kept: {result}\n{why}"
    );
    assert_receipts_equal_billing(&run, &server, 1);
}

#[test]
fn codex_preset_fails_when_the_api_is_overloaded() {
    fails(
        AgentCli::Codex,
        Fault::Overloaded,
        "Selected model is at capacity",
    );
}

#[test]
fn codex_preset_fails_when_the_stream_is_cut() {
    fails(
        AgentCli::Codex,
        Fault::CutAfterEvents(2),
        "stream disconnected before completion",
    );
}

// ---- Gemini CLI --------------------------------------------------------------------------

#[test]
fn gemini_preset_reads_a_file_runs_a_command_and_answers() {
    round_trip(AgentCli::Gemini);
}

#[test]
fn gemini_preset_one_turn_receipts_equal_billing() {
    one_turn(AgentCli::Gemini);
}

#[test]
fn gemini_preset_fails_when_the_api_is_overloaded() {
    fails(AgentCli::Gemini, Fault::Overloaded, "API Error: Overloaded");
}

#[test]
fn gemini_preset_fails_when_the_stream_is_cut() {
    fails(AgentCli::Gemini, Fault::CutAfterEvents(2), "API Error");
}

// ---- The OpenAI-compatible HTTP agent (provider: openai) ---------------------------------

/// `provider: openai` from the binary against the server's Chat Completions (streamed): the
/// router runs the model's tool call at `router` fidelity, once; the assistant turn that asked
/// for it comes first; receipts equal the bill; the key is sent as a Bearer token.
#[test]
fn openai_http_agent_runs_its_router_tool_loop_from_the_binary() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), NOTES).unwrap();
    let script = Script::new([
        Turn::default()
            .then_thinking("I should read the notes.", "unused")
            .then_tool_call("read_file", json!({"path": "notes.txt"}))
            .with_usage(Usage::new(300, 20).with_cache(100, 0).with_reasoning(5)),
        Turn::text(FINAL_TEXT).with_usage(Usage::new(400, 15).with_cache(300, 0)),
    ]);
    let server = ModelServer::start(script.clone()).unwrap();
    let storage = tempfile::tempdir().unwrap();
    let wf = ws.path().join("openai.yaml");
    std::fs::write(
        &wf,
        "name: http\nsteps:\n  - name: ask\n    type: agent\n    provider: openai\n    \
         model: gpt-scripted\n    prompt: Read notes.txt\n    tools: [read_file]\n    \
         env: { OPENAI_API_KEY: sk-from-the-step }\n",
    )
    .unwrap();
    let output = common::bin()
        .env("OPENAI_BASE_URL", server.openai_base_url())
        .env("OPENAI_API_KEY", "sk-from-the-environment")
        .arg("run")
        .arg(&wf)
        .arg("--storage")
        .arg(storage.path())
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    let stderr = common::text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let run_id = common::text(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("run_id: ").map(str::to_owned))
        .unwrap();
    let events = read_events(&storage.path().join(format!("{run_id}.jsonl")));
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "run.started",
            "step.started",
            "message.user",
            "message.assistant",
            "tool.call",
            "tool.result",
            "message.assistant",
            "step.completed",
            "run.completed"
        ],
        "{stderr}"
    );
    let turn1 = &events[3]["payload"];
    assert_eq!(turn1["blocks"][0]["type"], "thinking", "{turn1}");
    assert_eq!(turn1["blocks"][1]["type"], "tool_use", "{turn1}");
    for e in &events[4..6] {
        assert_eq!(e["payload"]["fidelity"], "router", "{e}");
        assert_eq!(e["payload"]["call_id"], turn1["blocks"][1]["tool_id"]);
    }
    assert_eq!(events[5]["payload"]["output"], NOTES);
    assert_eq!(events[7]["payload"]["result"], FINAL_TEXT);

    let requests = server.generation_requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.header("authorization"),
            Some("Bearer sk-from-the-step"),
            "the step's key wins over the environment's"
        );
        assert_eq!(r.body.as_ref().unwrap()["stream"], true);
    }
    assert!(
        requests[1]
            .tool_results()
            .iter()
            .any(|t| t.contains("7-alpha-tango")),
        "the tool's output went back to the model"
    );
    let want = expected_usage(Provider::OpenAiChat, server.billed(Provider::OpenAiChat));
    assert_eq!(
        want,
        expected_usage(Provider::OpenAiChat, script.total_usage())
    );
    let r = receipts(storage.path(), &run_id);
    assert_eq!(tokens(&r["receipts"][0]["usage"]), want, "{r}");
    assert_eq!(tokens(&r["total"]), want, "{r}");
}

/// 500 until the agent's bounded retries give up: the step fails with the provider's message.
#[test]
fn openai_http_agent_fails_with_the_providers_message_after_its_retries() {
    let ws = tempfile::tempdir().unwrap();
    let server = ModelServer::start(Script::always(Fault::ServerError)).unwrap();
    let storage = tempfile::tempdir().unwrap();
    let wf = ws.path().join("openai.yaml");
    std::fs::write(
        &wf,
        "name: http\nsteps:\n  - name: ask\n    type: agent\n    provider: openai\n    prompt: hi\n",
    )
    .unwrap();
    let output = common::bin()
        .env("OPENAI_BASE_URL", server.openai_base_url())
        .env("OPENAI_MAX_RETRIES", "1")
        .arg("run")
        .arg(&wf)
        .arg("--storage")
        .arg(storage.path())
        .arg("--workspace")
        .arg(ws.path())
        .output()
        .unwrap();
    let stderr = common::text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("HTTP 500") && stderr.contains("(after 2 attempts)"),
        "{stderr}"
    );
    assert_eq!(
        server.generation_requests().len(),
        2,
        "1 + OPENAI_MAX_RETRIES=1"
    );
}

/// #41 item 8: the Gemini preset confines the step's tools with a policy file, not the
/// deprecated `--allowed-tools`. The preset's binary is a wrapper keeping the CLI's stderr
/// (where Gemini CLI prints its warnings); the listed tool (`run_command`) runs, an unlisted
/// one (`write_file`) is refused, and neither the CLI's stderr, the runner's output nor the
/// transcript says "deprecated".
#[test]
fn gemini_preset_confines_its_tools_by_policy_without_the_deprecation_warning() {
    let cli = AgentCli::Gemini;
    let Some(bin) = cli.require() else {
        return;
    };
    let sb = sandbox();
    let script = Script::new([
        Turn::tool_call("run_shell_command", json!({"command": "touch ran.txt"}))
            .with_usage(Usage::new(100, 10)),
        Turn::tool_call(
            "write_file",
            json!({"file_path": "written.txt", "content": "should not be"}),
        )
        .with_usage(Usage::new(100, 10)),
        Turn::text(FINAL_TEXT).with_usage(Usage::new(100, 5)),
    ]);
    let server = ModelServer::start(script).unwrap();
    let inv = sb
        .invocation(cli, &bin, &server, "unused", &CliOptions::default())
        .unwrap();
    let stderr_log = sb.tmp().join("gemini-stderr.log");
    let wrapper = sb.tmp().join("gemini-wrapper.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\" 2>>'{}'\n",
            bin.display(),
            stderr_log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let var = common::step_env_var(cli);
    let endpoint = inv.env.iter().find(|(k, _)| k == var).unwrap().1.clone();
    let workflow = format!(
        "name: policy\ninputs:\n  - name: endpoint\nsteps:\n  - name: ask\n    type: agent\n    \
         provider: gemini\n    model: {}\n    timeout_ms: 120000\n    prompt: Run it.\n    \
         tools: [run_command]\n    env:\n      {var}: \"{{{{inputs.endpoint}}}}\"\n    \
         sandbox: {{ write: [{}], read: [{}] }}\n",
        CliOptions::default_model(cli).unwrap_or("gemini-2.5-pro"),
        // The wrapper's stderr log lives in the sandbox's tmp, and it runs the CLI from its
        // npm tree (#56: the step declares both).
        json!(sb.tmp().display().to_string()),
        json!(
            bin.parent()
                .and_then(|b| b.parent())
                .unwrap()
                .display()
                .to_string()
        )
    );
    let (storage, run_id, output) = common::RealCliRun {
        workflow: &workflow,
        dir: &sb.tmp(),
        workspace: &sb.work(),
        env: &inv.env,
        step_var: var,
        bin: (cli.bin_var(), &wrapper),
        endpoint: &endpoint,
    }
    .run();
    let events = read_events(&storage.path().join(format!("{run_id}.jsonl")));
    let transcript: Vec<String> = events.iter().map(Value::to_string).collect();
    let all = format!(
        "exit {:?}\nCLI stderr:\n{}\nstdout:\n{}\nstderr:\n{}\ntranscript:\n{}",
        output.status.code(),
        std::fs::read_to_string(&stderr_log).unwrap_or_default(),
        common::text(&output.stdout),
        common::text(&output.stderr),
        transcript.join("\n")
    );
    assert!(output.status.success(), "{all}");
    assert!(sb.work().join("ran.txt").exists(), "{all}");
    assert!(!sb.work().join("written.txt").exists(), "{all}");
    assert!(!all.contains("deprecated"), "{all}");
    let done = events
        .iter()
        .find(|e| e["type"] == "step.completed" && e["path"] == "ask")
        .unwrap();
    assert_eq!(done["payload"]["result"], FINAL_TEXT, "{all}");
}
