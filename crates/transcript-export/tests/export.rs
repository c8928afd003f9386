//! Export views on a deterministic sample run with a child run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::{Value, json};
use transcript_domain::{
    Clock, ContentBlock, DecodedEvent, EventDraft, Fidelity, ManualClock, MessagePayload, Payload,
    RawJson, Role, RunId, RunIdGenerator, SequentialRunIds, StepPayload, Timestamp, ToolPayload,
    Usage,
};
use transcript_export::{
    ExportDocument, ExportOptions, build_document, export_schema, receipts, to_html, to_markdown,
};

struct Builder {
    run: RunId,
    parent: Option<RunId>,
    clock: ManualClock,
    events: Vec<DecodedEvent>,
}

impl Builder {
    fn new(run: RunId, parent: Option<RunId>, start_ms: i64) -> Self {
        Self {
            run,
            parent,
            clock: ManualClock::stepping(
                Timestamp::from_unix_millis(1_780_000_000_000 + start_ms).unwrap(),
                25,
            ),
            events: Vec::new(),
        }
    }
    fn push(&mut self, draft: EventDraft) -> &mut Self {
        let seq = self.events.len() as u64 + 1;
        let event = draft.into_event(seq, self.run, self.parent, self.clock.now());
        // Through the wire, as a reader would see it.
        let line = event.to_line().unwrap();
        self.events
            .push(transcript_domain::decode_str(&line).unwrap().event);
        self
    }
    fn step(
        &mut self,
        path: &str,
        iteration: u64,
        kind: &str,
        started: bool,
        error: Option<&str>,
    ) -> &mut Self {
        let name = path.rsplit('.').next().unwrap();
        let mut p = StepPayload::new(name, kind);
        if let Some(e) = error {
            p = p.with_error(e);
        }
        let payload = if started {
            Payload::StepStarted(p)
        } else {
            Payload::StepCompleted(p)
        };
        self.push(EventDraft::new(path, iteration, payload))
    }
}

fn sample() -> (Vec<DecodedEvent>, RunId, Vec<DecodedEvent>) {
    let ids = SequentialRunIds::with_prefix(0xe7);
    let root = ids.next_run_id();
    let child = ids.next_run_id();
    let mut b = Builder::new(root, None, 0);
    b.push(EventDraft::run_level(Payload::RunStarted(
        StepPayload::new("review", "workflow"),
    )));
    b.step("analyze", 0, "agent", true, None);
    b.push(EventDraft::new(
        "analyze",
        0,
        Payload::MessageUser(MessagePayload::new(
            Role::User,
            vec![
                ContentBlock::text(Fidelity::Router, "Review <main.go> & report `bugs`."),
                ContentBlock::text(Fidelity::Router, "You are a careful reviewer."),
            ],
        )),
    ));
    b.push(EventDraft::new(
        "analyze",
        0,
        Payload::ToolCall(ToolPayload::call(
            "Read",
            "toolu_01",
            RawJson::from_value(&json!({"path": "main.go"})).unwrap(),
            Fidelity::AgentEmitted,
        )),
    ));
    b.push(EventDraft::new(
        "analyze",
        0,
        Payload::ToolResult(ToolPayload::result(
            "Read",
            "toolu_01",
            RawJson::string(&"package main // é\n".repeat(20)),
            None,
            Fidelity::AgentEmitted,
        )),
    ));
    let mut turn = MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::thinking(
                Fidelity::AgentEmitted,
                "SECRET-REASONING: check nil maps first.",
            ),
            ContentBlock::text(Fidelity::AgentEmitted, "Reading the file."),
            ContentBlock::tool_use(
                Fidelity::AgentEmitted,
                "Read",
                "toolu_01",
                RawJson::from_value(&json!({"path": "main.go"})).unwrap(),
            ),
            ContentBlock::tool_result(
                Fidelity::AgentEmitted,
                "toolu_01",
                RawJson::string(&"package main // é\n".repeat(20)),
            ),
        ],
    );
    turn.provider = Some("claude".into());
    turn.model = Some("claude-sonnet-4-5".into());
    turn.usage = Some(Usage {
        input_tokens: Some(1200),
        output_tokens: Some(80),
        cache_read_tokens: Some(1000),
        cost_usd: Some(0.01),
        ..Usage::default()
    });
    b.push(EventDraft::new(
        "analyze",
        0,
        Payload::MessageAssistant(turn),
    ));
    let mut answer = MessagePayload::new(
        Role::Assistant,
        vec![ContentBlock::text(
            Fidelity::AgentEmitted,
            "Found 2 issues: <script>alert(1)</script> ```",
        )],
    );
    answer.provider = Some("claude".into());
    answer.usage = Some(Usage {
        input_tokens: Some(1300),
        output_tokens: Some(40),
        ..Usage::default()
    });
    b.push(EventDraft::new(
        "analyze",
        0,
        Payload::MessageAssistant(answer),
    ));
    b.push(EventDraft::new(
        "analyze",
        0,
        Payload::StepCompleted(
            StepPayload::new("analyze", "agent").with_result(RawJson::string("Found 2 issues")),
        ),
    ));
    b.step("checks", 0, "for_each", true, None);
    for i in 0..2 {
        b.step("checks.lint", i, "operation", true, None);
        b.push(EventDraft::new(
            "checks.lint",
            i,
            Payload::ToolCall(ToolPayload::call(
                "run_command",
                format!("call-{i}"),
                RawJson::from_value(&json!({"argv": ["go", "vet"], "i": i})).unwrap(),
                Fidelity::Router,
            )),
        ));
        let error = (i == 1).then(|| "exit status 1".to_owned());
        b.push(EventDraft::new(
            "checks.lint",
            i,
            Payload::ToolResult(ToolPayload::result(
                "run_command",
                format!("call-{i}"),
                RawJson::from_value(&json!({"exit_code": i, "stdout": "x".repeat(300)})).unwrap(),
                error.clone(),
                Fidelity::Router,
            )),
        ));
        b.step("checks.lint", i, "operation", false, error.as_deref());
    }
    b.step("checks", 0, "for_each", false, Some("iteration 1 failed"));
    b.push(
        EventDraft::new(
            "delegate",
            0,
            Payload::CallWorkflowStarted(StepPayload::new("delegate", "call_workflow")),
        )
        .with_child(child),
    );
    let mut c = Builder::new(child, Some(root), 500);
    c.push(EventDraft::run_level(Payload::RunStarted(
        StepPayload::new("summarize", "workflow"),
    )));
    c.step("sum", 0, "agent", true, None);
    let mut t = MessagePayload::new(
        Role::Assistant,
        vec![ContentBlock::text(Fidelity::AgentEmitted, "Summary.")],
    );
    t.provider = Some("codex".into());
    t.model = Some("gpt-5-codex".into());
    t.usage = Some(Usage {
        input_tokens: Some(10),
        output_tokens: Some(5),
        reasoning_tokens: Some(3),
        ..Usage::default()
    });
    c.push(EventDraft::new("sum", 0, Payload::MessageAssistant(t)));
    c.step("sum", 0, "agent", false, None);
    c.push(EventDraft::run_level(Payload::RunCompleted(
        StepPayload::new("summarize", "workflow"),
    )));
    b.push(
        EventDraft::new(
            "delegate",
            0,
            Payload::CallWorkflowCompleted(StepPayload::new("delegate", "call_workflow")),
        )
        .with_child(child),
    );
    b.push(EventDraft::run_level(Payload::RunCompleted(
        StepPayload::new("review", "workflow").with_error("step checks failed"),
    )));
    (b.events.clone(), child, c.events.clone())
}

fn document(options: &ExportOptions) -> ExportDocument {
    let (root, child_id, child) = sample();
    build_document(
        &root,
        &mut |id| (id == child_id).then(|| child.clone()),
        options,
    )
}

fn schema_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema/export-document.schema.json")
}

#[test]
fn checked_in_schema_is_current() {
    let fresh = serde_json::to_string_pretty(&export_schema()).unwrap() + "\n";
    if std::env::var("TRANSCRIPT_UPDATE_SCHEMA").is_ok_and(|v| v == "1") {
        std::fs::write(schema_path(), &fresh).unwrap();
    }
    let checked_in = std::fs::read_to_string(schema_path())
        .expect("schema/export-document.schema.json missing: run with TRANSCRIPT_UPDATE_SCHEMA=1");
    assert_eq!(
        checked_in, fresh,
        "export schema changed: rerun with TRANSCRIPT_UPDATE_SCHEMA=1 and review"
    );
}

#[test]
fn json_export_validates_against_checked_in_schema() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for options in [
        ExportOptions::default(),
        ExportOptions {
            include_reasoning: false,
            truncate_outputs: Some(64),
            redacted: true,
        },
    ] {
        let doc = serde_json::to_value(document(&options)).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }
}

#[test]
fn document_has_tree_entries_children_and_usage() {
    let doc = document(&ExportOptions::default());
    assert_eq!(doc.schema_version, "1.2.0");
    let run = &doc.run;
    assert_eq!(run.status, "failed");
    assert_eq!(
        run.steps
            .iter()
            .map(|s| s.path.as_str())
            .collect::<Vec<_>>(),
        ["analyze", "checks", "delegate"]
    );
    let analyze = &run.steps[0];
    assert_eq!(
        analyze.entries.len(),
        4,
        "user, tool call (paired), two turns"
    );
    assert_eq!(analyze.usage.as_ref().unwrap().input_tokens, Some(2500));
    let checks = &run.steps[1];
    assert_eq!(checks.steps.len(), 2);
    let transcript_export::Entry::ToolCall(failed) = &checks.steps[1].entries[0] else {
        panic!()
    };
    assert_eq!(failed.error.as_deref(), Some("exit status 1"));
    assert!(failed.completed);
    let child = run.steps[2].child_run.as_ref().unwrap();
    assert_eq!(child.workflow.as_deref(), Some("summarize"));
    assert_eq!(child.parent_run_id.as_deref(), Some(run.run_id.as_str()));
    // Round trip through JSON.
    let text = serde_json::to_string(&doc).unwrap();
    let back: ExportDocument = serde_json::from_str(&text).unwrap();
    assert_eq!(back, doc);
}

#[test]
fn reader_accepts_newer_minor_versions() {
    let mut v = serde_json::to_value(document(&ExportDocument_default())).unwrap();
    v["schema_version"] = json!("1.4.0");
    v["new_top_level"] = json!({"x": 1});
    v["run"]["new_run_field"] = json!(true);
    let entries = v["run"]["steps"][0]["entries"].as_array_mut().unwrap();
    let Value::Object(msg) = &mut entries[2] else {
        panic!()
    };
    msg.insert("sentiment".into(), json!("calm"));
    msg["blocks"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "image", "fidelity": "agent_emitted", "url": "x"}));
    let doc: ExportDocument = serde_json::from_value(v).unwrap();
    let transcript_export::Entry::Message(m) = &doc.run.steps[0].entries[2] else {
        panic!()
    };
    assert_eq!(
        m.blocks.last(),
        Some(&transcript_export::ExportBlock::Unknown)
    );
}

#[allow(non_snake_case)]
fn ExportDocument_default() -> ExportOptions {
    ExportOptions::default()
}

#[test]
fn no_reasoning_leaves_no_thinking_text() {
    let options = ExportOptions {
        include_reasoning: false,
        ..ExportOptions::default()
    };
    let doc = document(&options);
    let outputs = [
        serde_json::to_string(&doc).unwrap(),
        to_markdown(&doc),
        to_html(&doc),
    ];
    for out in outputs {
        assert!(!out.contains("SECRET-REASONING"), "thinking leaked");
        assert!(!out.contains("\"thinking\""));
    }
    // And it is there by default.
    assert!(to_markdown(&document(&ExportOptions::default())).contains("SECRET-REASONING"));
}

#[test]
fn truncation_applies_to_tool_values_everywhere() {
    let options = ExportOptions {
        truncate_outputs: Some(64),
        ..ExportOptions::default()
    };
    let doc = document(&options);
    let analyze = &doc.run.steps[0];
    let transcript_export::Entry::ToolCall(read) = &analyze.entries[1] else {
        panic!()
    };
    let out = read.output.as_str().unwrap();
    // The domain's one rule: never longer than the limit, marker included; 64 bytes
    // cannot hold the sha256, so the marker names the size alone.
    assert!(out.ends_with("…[truncated: 380 bytes]"), "{out}");
    assert_eq!(out.len(), 64, "{out}");
    assert_eq!(read.input, json!({"path": "main.go"}), "small values stay");
    // A limit that holds it: the full marker, within the limit.
    let doc200 = document(&ExportOptions {
        truncate_outputs: Some(200),
        ..ExportOptions::default()
    });
    let transcript_export::Entry::ToolCall(read200) = &doc200.run.steps[0].entries[1] else {
        panic!()
    };
    let out = read200.output.as_str().unwrap();
    assert!(out.contains("…[truncated: 380 bytes, sha256 "), "{out}");
    assert!(out.len() <= 200, "{}", out.len());
    let transcript_export::Entry::ToolCall(lint) = &doc.run.steps[1].steps[0].entries[0] else {
        panic!()
    };
    assert_eq!(lint.output["_truncated"], true);
    assert!(lint.output["original_size_bytes"].as_u64().unwrap() > 300);
    let transcript_export::Entry::Message(turn) = &analyze.entries[2] else {
        panic!()
    };
    let transcript_export::ExportBlock::ToolResult { tool_content, .. } = &turn.blocks[3] else {
        panic!()
    };
    assert!(tool_content.as_str().unwrap().contains("…[truncated"));
}

#[test]
fn content_is_escaped() {
    let doc = document(&ExportOptions::default());
    let html = to_html(&doc);
    assert!(!html.contains("<script>"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<script"), "no script anywhere in the page");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing loaded from the network"
    );
    let md = to_markdown(&doc);
    assert!(md.contains("&lt;script&gt;"));
    assert!(md.contains("Review &lt;main.go&gt; &amp; report \\`bugs\\`."));
}

#[test]
fn receipts_cover_agent_steps_and_child_runs() {
    let r = receipts(&document(&ExportOptions::default()));
    assert_eq!(r.receipts.len(), 2);
    assert_eq!(r.receipts[0].path, "analyze");
    assert_eq!(r.receipts[0].turns, 2);
    assert_eq!(r.receipts[0].usage.input_tokens, Some(2500));
    assert_eq!(r.receipts[0].model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(r.receipts[1].provider.as_deref(), Some("codex"));
    assert_eq!(r.total.input_tokens, Some(2510));
    assert_eq!(r.total.reasoning_tokens, Some(3));
    assert_eq!(r.per_run.len(), 2);
    insta::assert_snapshot!("receipts", r.render());
}

#[test]
fn snapshots_of_each_format() {
    let doc = document(&ExportOptions::default());
    insta::assert_snapshot!("markdown", to_markdown(&doc));
    insta::assert_snapshot!("html", to_html(&doc));
    insta::assert_snapshot!("json", serde_json::to_string_pretty(&doc).unwrap());
}

#[test]
fn priced_receipts_cost_each_turn_and_never_price_an_unknown_model_at_zero() {
    let doc = document(&ExportOptions::default());
    // A price function of one known model: $1 per million input tokens,
    // $2 per million of every other count.
    let price = |model: &str, u: &transcript_domain::Usage| {
        (model == "claude-sonnet-4-5").then(|| {
            u.input_tokens.unwrap_or(0) as f64 * 1e-6
                + (u.output_tokens.unwrap_or(0)
                    + u.cache_read_tokens.unwrap_or(0)
                    + u.cache_write_tokens.unwrap_or(0)) as f64
                    * 2e-6
        })
    };
    let r = transcript_export::priced_receipts(&doc, &price);
    let analyze = &r.receipts[0];
    let u = &analyze.usage;
    let want = u.input_tokens.unwrap() as f64 * 1e-6
        + (u.output_tokens.unwrap_or(0)
            + u.cache_read_tokens.unwrap_or(0)
            + u.cache_write_tokens.unwrap_or(0)) as f64
            * 2e-6;
    let got = analyze.cost_usd.unwrap();
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    // Per turn: the step's turns with usage, summing to the step's cost.
    let turns: f64 = analyze.turn_costs.iter().map(|t| t.cost_usd.unwrap()).sum();
    assert!((turns - want).abs() < 1e-12);
    // The codex step's model has no price: unknown, never $0, and named.
    let codex = &r.receipts[1];
    assert_eq!(codex.cost_usd, None, "{codex:?}");
    assert_eq!(r.cost_usd, None);
    assert!(!r.unpriced_models.is_empty());
    assert!(!r.unpriced_models.contains(&"claude-sonnet-4-5".to_owned()));
    let sonnet = r
        .by_model
        .iter()
        .find(|m| m.model == "claude-sonnet-4-5")
        .unwrap();
    assert!((sonnet.cost_usd.unwrap() - want).abs() < 1e-12);
    let text = r.render();
    assert!(text.contains("model claude-sonnet-4-5:"), "{text}");
    // Unpriced receipts: no cost anywhere, no model reported unpriced.
    let plain = receipts(&doc);
    assert_eq!(plain.cost_usd, None);
    assert!(plain.unpriced_models.is_empty());
}

/// $1 per million input tokens and $2 per million of every other count, for
/// `claude-sonnet-4-5` only.
fn sonnet_price(model: &str, u: &transcript_domain::Usage) -> Option<f64> {
    (model == "claude-sonnet-4-5").then(|| {
        u.input_tokens.unwrap_or(0) as f64 * 1e-6
            + (u.output_tokens.unwrap_or(0)
                + u.cache_read_tokens.unwrap_or(0)
                + u.cache_write_tokens.unwrap_or(0)) as f64
                * 2e-6
    })
}

#[test]
fn priced_documents_show_cost_per_turn_step_run_and_model_in_every_format() {
    let mut doc = document(&ExportOptions::default());
    let plain = (to_markdown(&doc), to_html(&doc));
    assert!(doc.cost.is_none() && !plain.0.contains("Cost") && !plain.1.contains("cost "));
    transcript_export::price_document(&mut doc, &sonnet_price, "test table 1.0");
    // The analyze step: its turns priced under the step's one model, summing to the step.
    let analyze = &doc.run.steps[0];
    let u = analyze.usage.as_ref().unwrap();
    let want = sonnet_price("claude-sonnet-4-5", u).unwrap();
    assert!((analyze.cost_usd.unwrap() - want).abs() < 1e-12);
    let turns: f64 = analyze
        .entries
        .iter()
        .filter_map(|e| match e {
            transcript_export::Entry::Message(m) => m.cost_usd,
            _ => None,
        })
        .sum();
    assert!((turns - want).abs() < 1e-12, "{turns} vs {want}");
    // The root run holds only sonnet turns; the child run's codex model has no price:
    // unknown (absent), never $0, and so is the total; the model is named.
    assert!((doc.run.cost_usd.unwrap() - want).abs() < 1e-12);
    let child = doc.run.steps[2].child_run.as_ref().unwrap();
    assert_eq!(child.cost_usd, None);
    assert_eq!(child.steps[0].cost_usd, None);
    let cost = doc.cost.as_ref().unwrap();
    assert_eq!(cost.total_usd, None);
    assert_eq!(
        cost.reported_usd,
        Some(0.01),
        "the CLI's own figure beside ours"
    );
    assert_eq!(cost.unpriced_models, ["gpt-5-codex"]);
    let models: Vec<_> = cost
        .by_model
        .iter()
        .map(|m| (m.model.as_str(), m.cost_usd))
        .collect();
    assert_eq!(models.len(), 2);
    assert_eq!(models[1], ("gpt-5-codex", None));
    assert!((models[0].1.unwrap() - want).abs() < 1e-12);
    let shown = format!("${want:.4}");
    let md = to_markdown(&doc);
    assert!(
        md.contains(&format!("- Cost: {shown} (the CLI reported $0.0100)")),
        "{md}"
    );
    assert!(md.contains("## Cost by model"), "{md}");
    assert!(
        md.contains(&format!(
            "- `claude-sonnet-4-5`: 2 turns · 2500 in / 120 out / 1000 cache read · cost {shown} (the CLI reported $0.0100)"
        )),
        "{md}"
    );
    assert!(
        md.contains("- `gpt-5-codex`: 1 turns · 10 in / 5 out / 3 reasoning · cost —\n"),
        "{md}"
    );
    assert!(md.contains("- ⚠ No price for `gpt-5-codex`: its cost shows —, never $0"));
    assert!(md.contains("- Total (with child runs): — · the CLIs reported $0.0100"));
    assert!(md.contains("_Priced with test table 1.0._"));
    assert!(
        !md.contains("$0.0000"),
        "an unknown price is never $0\n{md}"
    );
    let html = to_html(&doc);
    assert!(
        html.contains(&format!(" · cost {shown} (the CLI reported $0.0100)")),
        "{html}"
    );
    assert!(html.contains("<h2>Cost by model</h2>"));
    assert!(
        html.contains(
            "<li><code>gpt-5-codex</code>: 1 turns · 10 in / 5 out / 3 reasoning · cost —</li>"
        ),
        "{html}"
    );
    assert!(!html.contains("$0.0000"));
    // JSON: the priced document validates against the checked-in schema and round-trips.
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path()).unwrap()).unwrap();
    let value = serde_json::to_value(&doc).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&value), "{value:#}");
    assert_eq!(value["cost"]["by_model"][1]["cost_usd"], Value::Null);
    let step_cost = value["run"]["steps"][0]["cost_usd"].as_f64().unwrap();
    assert!((step_cost - want).abs() < 1e-12);
    let back: ExportDocument = serde_json::from_value(value).unwrap();
    assert_eq!(back, doc);
}
