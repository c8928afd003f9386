//! One test per GenAI convention rule applied by the mapping (the registry version is pinned
//! in `transcript_otel::semconv`), plus the OpenInference kinds and the per-call `chat` spans.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use opentelemetry::Value;
use transcript_domain::{
    ContentBlock, EventDraft, Fidelity, MessagePayload, Payload, RawJson, Role, Usage,
};
use transcript_otel::semconv::*;
use transcript_otel::{MapOptions, SpanData, ids, map_run, span_time};

/// One agent step `agents.review` whose turns are given, then a tool call, in run `review`.
fn agent_run(workflow: &str, turns: Vec<MessagePayload>) -> RunBuilder {
    let mut run = RunBuilder::new(ROOT, None, BASE_MS);
    run.run_started(workflow)
        .step_started("agents.review", 0, "review", "agent");
    for turn in turns {
        run.push(EventDraft::new(
            "agents.review",
            0,
            Payload::MessageAssistant(turn),
        ));
    }
    run.step_completed("agents.review", 0, "review", "agent", None)
        .run_completed(workflow, None);
    run
}

fn turn(provider: &str, model: &str, usage: Usage) -> MessagePayload {
    let mut m = MessagePayload::new(
        Role::Assistant,
        vec![ContentBlock::text(Fidelity::AgentEmitted, "ok")],
    );
    m.provider = Some(provider.into());
    m.model = Some(model.into());
    m.usage = Some(usage);
    m
}

fn spans_of(run: &RunBuilder, options: MapOptions) -> Vec<SpanData> {
    let trace = map_run(&run.decoded(), &mut |_| None, options);
    assert!(trace.problems.is_empty(), "{:?}", trace.problems);
    trace.spans
}

fn chats(spans: &[SpanData]) -> Vec<&SpanData> {
    let mut chats: Vec<_> = spans
        .iter()
        .filter(|s| attr_str(s, GEN_AI_OPERATION_NAME).as_deref() == Some(OP_CHAT))
        .collect();
    chats.sort_by_key(|s| attr_i64(s, TRANSCRIPT_SEQ));
    chats
}

#[test]
fn provider_names_are_the_registry_well_known_values() {
    for (ours, registry) in [
        ("claude", "anthropic"),
        ("anthropic", "anthropic"),
        ("codex", "openai"),
        ("openai", "openai"),
        ("gemini", "gcp.gemini"),
        // No registry value for GitHub Copilot: a custom value, the transcript's name.
        ("copilot", "copilot"),
    ] {
        let run = agent_run("wf", vec![turn(ours, "m", usage(1, 1, None))]);
        let spans = spans_of(&run, MapOptions::default());
        let agent = one(&spans, "invoke_agent review");
        assert_eq!(
            attr_str(agent, GEN_AI_PROVIDER_NAME).as_deref(),
            Some(registry),
            "{ours}"
        );
        assert_eq!(attr_str(agent, TRANSCRIPT_PROVIDER).as_deref(), Some(ours));
        let chat = chats(&spans)[0];
        assert_eq!(
            attr_str(chat, GEN_AI_PROVIDER_NAME).as_deref(),
            Some(registry)
        );
    }
}

#[test]
fn input_tokens_include_cache_reads_and_creations() {
    // The issue's figures: Anthropic input 12, cache read 100, cache creation 50 -> 162.
    let u = Usage {
        input_tokens: Some(12),
        output_tokens: Some(7),
        cache_read_tokens: Some(100),
        cache_write_tokens: Some(50),
        ..Usage::default()
    };
    let run = agent_run("wf", vec![turn("claude", "claude-x", u)]);
    let spans = spans_of(&run, MapOptions::default());
    let span = chats(&spans)[0];
    assert_eq!(attr_i64(span, GEN_AI_USAGE_INPUT_TOKENS), Some(162));
    assert_eq!(attr_i64(span, GEN_AI_USAGE_OUTPUT_TOKENS), Some(7));
    assert_eq!(
        attr_i64(span, GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
        Some(100)
    );
    assert_eq!(
        attr_i64(span, GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
        Some(50)
    );
    // The agent span keeps the step's sum under our names only (the transcript's counts),
    // so a backend summing `gen_ai.usage.*` over the trace counts the request once.
    let agent = one(&spans, "invoke_agent review");
    assert_eq!(attr_i64(agent, GEN_AI_USAGE_INPUT_TOKENS), None);
    assert_eq!(attr_i64(agent, TRANSCRIPT_USAGE_INPUT_TOKENS), Some(12));
    assert_eq!(attr_i64(agent, TRANSCRIPT_USAGE_OUTPUT_TOKENS), Some(7));
    assert_eq!(
        attr_i64(agent, TRANSCRIPT_USAGE_CACHE_READ_TOKENS),
        Some(100)
    );
    assert_eq!(
        attr_i64(agent, TRANSCRIPT_USAGE_CACHE_WRITE_TOKENS),
        Some(50)
    );
    // OpenInference's prompt count is the same total.
    assert_eq!(
        attr_i64(chats(&spans)[0], "llm.token_count.prompt"),
        Some(162)
    );
    assert_eq!(
        attr_i64(chats(&spans)[0], "llm.token_count.total"),
        Some(169)
    );
}

#[test]
fn reasoning_tokens_use_the_conventions_name_and_count_in_output() {
    let u = |output| Usage {
        input_tokens: Some(1),
        output_tokens: Some(output),
        reasoning_tokens: Some(30),
        ..Usage::default()
    };
    // Codex reports reasoning inside output tokens; Gemini apart from them.
    let codex = agent_run("wf", vec![turn("codex", "gpt", u(100))]);
    let gemini = agent_run("wf", vec![turn("gemini", "gemini-pro", u(70))]);
    for (run, output, reported) in [(codex, 100, 100), (gemini, 100, 70)] {
        let spans = spans_of(&run, MapOptions::default());
        let span = chats(&spans)[0];
        assert_eq!(
            attr_i64(span, GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
            Some(30)
        );
        assert_eq!(attr_i64(span, GEN_AI_USAGE_OUTPUT_TOKENS), Some(output));
        assert_eq!(attr(span, TRANSCRIPT_USAGE_REASONING_TOKENS), None);
        // The agent span: the step's sums as the transcript counts them, under our names.
        let agent = one(&spans, "invoke_agent review");
        assert_eq!(attr_i64(agent, TRANSCRIPT_USAGE_REASONING_TOKENS), Some(30));
        assert_eq!(
            attr_i64(agent, TRANSCRIPT_USAGE_OUTPUT_TOKENS),
            Some(reported)
        );
        assert_eq!(attr(agent, GEN_AI_USAGE_REASONING_OUTPUT_TOKENS), None);
    }
}

#[test]
fn error_type_is_set_on_every_span_that_ends_in_error_and_only_there() {
    let (root, child) = demo();
    let trace = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default());
    let spans = &trace.spans;
    for name in [
        "invoke_workflow review",
        "invoke_workflow inner",
        "invoke_agent fix",
        "execute_tool write",
    ] {
        assert_eq!(
            attr_str(one(spans, name), ERROR_TYPE).as_deref(),
            Some("_OTHER"),
            "{name}"
        );
    }
    for name in ["invoke_agent plan", "execute_tool grep"] {
        assert_eq!(attr(one(spans, name), ERROR_TYPE), None, "{name}");
    }
    // A run that never completed: its spans end as "incomplete", a low-cardinality class.
    let mut crashed = RunBuilder::new(ROOT, None, BASE_MS);
    crashed
        .run_started("wf")
        .step_started("a", 0, "a", "agent")
        .tool_call("a", "grep", "c1", Fidelity::Router);
    let spans = spans_of(&crashed, MapOptions::default());
    for name in ["invoke_workflow wf", "invoke_agent a", "execute_tool grep"] {
        assert_eq!(
            attr_str(one(&spans, name), ERROR_TYPE).as_deref(),
            Some(INCOMPLETE),
            "{name}"
        );
    }
}

#[test]
fn tool_call_id_is_the_providers_raw_id() {
    let f = Fidelity::AgentEmitted;
    let mut run = RunBuilder::new(ROOT, None, BASE_MS);
    run.run_started("wf")
        .step_started("agents.review", 0, "review", "agent")
        .tool_call("agents.review", "grep", "agents.review#0/toolu_demo_1", f)
        .tool_result(
            "agents.review",
            "grep",
            "agents.review#0/toolu_demo_1",
            f,
            None,
        )
        // A second execution of the same step in the same iteration gets `~1`.
        .tool_call(
            "agents.review",
            "cat",
            "agents.review#0~1/call/with/slash",
            f,
        )
        .tool_result(
            "agents.review",
            "cat",
            "agents.review#0~1/call/with/slash",
            f,
            None,
        )
        // Not our prefix (another path, another iteration): kept whole.
        .tool_call("agents.review", "ls", "other#0/x", f)
        .tool_result("agents.review", "ls", "other#0/x", f, None)
        .tool_call("agents.review", "rm", "agents.review#3/y", f)
        .tool_result("agents.review", "rm", "agents.review#3/y", f, None)
        .step_completed("agents.review", 0, "review", "agent", None)
        .run_completed("wf", None);
    let spans = spans_of(&run, MapOptions::default());
    let ids = |name: &str| {
        let s = one(&spans, name);
        (
            attr_str(s, GEN_AI_TOOL_CALL_ID).unwrap(),
            attr_str(s, TRANSCRIPT_CALL_ID),
        )
    };
    assert_eq!(
        ids("execute_tool grep"),
        (
            "toolu_demo_1".into(),
            Some("agents.review#0/toolu_demo_1".into())
        )
    );
    assert_eq!(ids("execute_tool cat").0, "call/with/slash");
    // Captured content names the same raw id in its tool_call / tool_call_response parts.
    let mut run = RunBuilder::new(ROOT, None, BASE_MS);
    let prefixed = "agents.review#0/toolu_demo_1";
    let mut m = MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::tool_use(
                f,
                "grep",
                prefixed,
                RawJson::from_json("{}".into()).unwrap(),
            ),
            ContentBlock::tool_result(f, prefixed, RawJson::string("x")),
        ],
    );
    m.model = Some("m".into());
    run.run_started("wf")
        .step_started("agents.review", 0, "review", "agent")
        .push(EventDraft::new(
            "agents.review",
            0,
            Payload::MessageAssistant(m),
        ))
        .step_completed("agents.review", 0, "review", "agent", None)
        .run_completed("wf", None);
    let spans = spans_of(&run, MapOptions::with_content(true));
    for span in [one(&spans, "invoke_agent review"), one(&spans, "chat m")] {
        let output = attr_str(span, GEN_AI_OUTPUT_MESSAGES).unwrap();
        assert!(output.contains(r#""id":"toolu_demo_1""#), "{output}");
        assert!(!output.contains(prefixed), "{output}");
    }
    assert_eq!(ids("execute_tool ls"), ("other#0/x".into(), None));
    assert_eq!(ids("execute_tool rm"), ("agents.review#3/y".into(), None));
}

#[test]
fn an_imported_runs_workflow_name_is_low_cardinality() {
    let run = agent_run(
        "import claude-cache.jsonl",
        vec![turn("claude", "m", usage(1, 1, None))],
    );
    let spans = spans_of(&run, MapOptions::default());
    let wf = one(&spans, "invoke_workflow import");
    assert_eq!(
        attr_str(wf, GEN_AI_WORKFLOW_NAME).as_deref(),
        Some("import")
    );
    assert_eq!(
        attr_str(wf, TRANSCRIPT_NAME).as_deref(),
        Some("import claude-cache.jsonl")
    );
    // An ordinary workflow keeps its name.
    let run = agent_run("review", vec![]);
    let spans = spans_of(&run, MapOptions::default());
    let wf = one(&spans, "invoke_workflow review");
    assert_eq!(
        attr_str(wf, GEN_AI_WORKFLOW_NAME).as_deref(),
        Some("review")
    );
}

#[test]
fn openinference_kinds_sit_beside_the_genai_names() {
    let (root, child) = demo();
    let trace = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default());
    let kind = |s: &SpanData| attr_str(s, OPENINFERENCE_SPAN_KIND).unwrap_or_default();
    for s in &trace.spans {
        let expected = match attr_str(s, GEN_AI_OPERATION_NAME).as_deref() {
            Some("invoke_workflow") | None => "CHAIN",
            Some("invoke_agent") => "AGENT",
            Some("execute_tool") => "TOOL",
            Some("chat") => "LLM",
            other => panic!("unexpected operation {other:?}"),
        };
        assert_eq!(kind(s), expected, "{}", s.name);
    }
    // The GenAI operation names are still there.
    assert_eq!(
        attr_str(
            one(&trace.spans, "invoke_agent plan"),
            GEN_AI_OPERATION_NAME
        )
        .as_deref(),
        Some("invoke_agent")
    );
}

#[test]
fn each_model_call_is_a_chat_span_under_its_agent() {
    let (root, child) = demo();
    let trace = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default());
    let spans = &trace.spans;
    let plan = one(spans, "invoke_agent plan");
    let calls = chats(spans);
    assert_eq!(calls.len(), 2, "{calls:#?}");
    let (a, b) = (calls[0], calls[1]);
    assert_eq!(a.name, "chat model-a");
    assert_eq!(b.name, "chat model-b");
    for c in [a, b] {
        assert_eq!(c.span_kind, opentelemetry::trace::SpanKind::Client);
        assert_eq!(c.parent_span_id, plan.span_context.span_id());
        assert_eq!(c.span_context.trace_id(), plan.span_context.trace_id());
        assert_eq!(
            attr_str(c, GEN_AI_PROVIDER_NAME).as_deref(),
            Some("anthropic")
        );
    }
    // Each with its own model and usage (the agent span keeps the sum).
    assert_eq!(
        attr_str(a, GEN_AI_REQUEST_MODEL).as_deref(),
        Some("model-a")
    );
    assert_eq!(
        attr_str(a, GEN_AI_RESPONSE_MODEL).as_deref(),
        Some("model-a")
    );
    assert_eq!(
        attr_str(b, GEN_AI_RESPONSE_MODEL).as_deref(),
        Some("model-b")
    );
    assert_eq!(attr_i64(a, GEN_AI_USAGE_INPUT_TOKENS), Some(13));
    assert_eq!(attr_i64(a, GEN_AI_USAGE_OUTPUT_TOKENS), Some(5));
    assert_eq!(attr_i64(b, GEN_AI_USAGE_INPUT_TOKENS), Some(4));
    assert_eq!(attr_i64(b, GEN_AI_USAGE_OUTPUT_TOKENS), Some(2));
    assert_eq!(attr_i64(plan, GEN_AI_USAGE_INPUT_TOKENS), None);
    assert_eq!(attr_i64(plan, TRANSCRIPT_USAGE_INPUT_TOKENS), Some(14));
    assert_eq!(plan.span_kind, opentelemetry::trace::SpanKind::Internal);
    // A step whose kind is `chat` is no inference span.
    let mut run = RunBuilder::new(ROOT, None, BASE_MS);
    run.run_started("wf")
        .step_started("c", 0, "x", "chat")
        .step_completed("c", 0, "x", "chat", None)
        .run_completed("wf", None);
    let step = spans_of(&run, MapOptions::default());
    assert_eq!(
        one(&step, "chat x").span_kind,
        opentelemetry::trace::SpanKind::Internal
    );
    // Times from the transcript: the first call from the step's start to its message
    // (seq 6), the second from the first's message to its own (seq 7).
    assert_eq!(attr_i64(a, TRANSCRIPT_SEQ), Some(6));
    assert_eq!(attr_i64(b, TRANSCRIPT_SEQ), Some(7));
    assert_eq!(a.start_time, plan.start_time);
    assert_eq!(a.end_time, span_time(root.at(6)));
    assert_eq!(b.start_time, span_time(root.at(6)));
    assert_eq!(b.end_time, span_time(root.at(7)));
    assert_eq!(a.span_context.span_id(), ids::chat_span_id(ROOT, 6));
    // The child run's agent made no model call: no chat span under it.
    let fix = one(spans, "invoke_agent fix");
    assert!(
        spans
            .iter()
            .all(|s| s.parent_span_id != fix.span_context.span_id() || s.name != "chat")
    );
}

/// A turn's `f64` attribute `name`.
fn f64_attr(s: &SpanData, name: &str) -> Option<f64> {
    match attr(s, name) {
        Some(Value::F64(c)) => Some(*c),
        _ => None,
    }
}

/// Each request's price on its `chat` span, under the names backends sum (and nowhere else);
/// the step's sum on its agent span under our name only; a turn naming no model is priced
/// under its step's one model (the rule of `receipts`); what the CLI reported itself is the
/// step's, never a request's price.
#[test]
fn cost_is_each_requests_price_on_chat_spans_and_the_steps_sum_on_the_agent_span() {
    let reported = Usage {
        cost_usd: Some(0.25),
        ..usage(10, 10, None)
    };
    let mut unnamed = turn("claude", "ignored", usage(5, 5, None));
    unnamed.model = None;
    let run = agent_run(
        "wf",
        vec![
            turn("claude", "priced", usage(1000, 100, None)),
            turn("claude", "priced", reported),
            unnamed.clone(),
        ],
    );
    let backend = [LLM_COST_TOTAL, GEN_AI_USAGE_COST];
    // Without a price table no price is exported; the CLI's own figure stays on the step.
    let spans = spans_of(&run, MapOptions::default());
    let agent = one(&spans, "invoke_agent review");
    for s in &spans {
        for name in backend {
            assert_eq!(f64_attr(s, name), None, "{name} on {}", s.name);
        }
        assert_eq!(f64_attr(s, TRANSCRIPT_USAGE_COST_USD), None, "{}", s.name);
    }
    assert_eq!(
        f64_attr(agent, TRANSCRIPT_USAGE_REPORTED_COST_USD),
        Some(0.25)
    );
    // With one, every billed turn is priced, the unnamed one under the step's model.
    let pricing = Arc::new(|model: &str, u: &Usage| {
        (model == "priced").then(|| u.input_tokens.unwrap_or(0) as f64 * 0.001)
    });
    let spans = spans_of(&run, MapOptions::default().with_pricing(pricing.clone()));
    let c = chats(&spans);
    let agent = one(&spans, "invoke_agent review");
    for name in backend {
        assert_eq!(
            c.iter().map(|s| f64_attr(s, name)).collect::<Vec<_>>(),
            vec![Some(1.0), Some(0.01), Some(0.005)],
            "{name}"
        );
        assert_eq!(f64_attr(agent, name), None, "{name}");
    }
    assert!(
        c.iter()
            .all(|s| attr(s, TRANSCRIPT_USAGE_COST_USD).is_none())
    );
    assert_eq!(f64_attr(agent, TRANSCRIPT_USAGE_COST_USD), Some(1.015));
    assert_eq!(
        f64_attr(agent, TRANSCRIPT_USAGE_REPORTED_COST_USD),
        Some(0.25)
    );
    // A model without a price: its request has no cost and the step's sum is unknown, never
    // a partial sum; in a step naming two models an unnamed turn has no model to be priced
    // under.
    let run = agent_run(
        "wf",
        vec![
            turn("claude", "priced", usage(1000, 100, None)),
            turn("claude", "unknown-model", usage(5, 5, None)),
            unnamed,
        ],
    );
    let spans = spans_of(&run, MapOptions::default().with_pricing(pricing));
    assert_eq!(
        chats(&spans)
            .iter()
            .map(|s| f64_attr(s, LLM_COST_TOTAL))
            .collect::<Vec<_>>(),
        vec![Some(1.0), None, None]
    );
    assert_eq!(
        f64_attr(
            one(&spans, "invoke_agent review"),
            TRANSCRIPT_USAGE_COST_USD
        ),
        None
    );
}
