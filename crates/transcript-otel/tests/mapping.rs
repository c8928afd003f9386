//! Mapping tests on the SpanData the crate builds: tree shape, names, parent
//! links, attributes, deterministic ids, statuses, content capture.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use opentelemetry::trace::{SpanId, Status};
use transcript_domain::{DecodedEvent, EventDraft, Fidelity, Payload, StepPayload};
use transcript_otel::semconv::*;
use transcript_otel::{MapOptions, MapProblem, SpanMapper, ids, map_run, span_time};

fn mapped(capture: bool) -> transcript_otel::MappedTrace {
    let (root, child) = demo();
    map_run(
        &root.decoded(),
        &mut lookup(&child),
        MapOptions::with_content(capture),
    )
}

#[test]
fn tree_shape_names_and_parent_links() {
    let trace = mapped(false);
    assert!(trace.problems.is_empty(), "{:?}", trace.problems);
    assert_eq!(trace.trace_id, ids::trace_id(ROOT));
    let spans = &trace.spans;
    assert_eq!(spans.len(), 12, "{spans:#?}");
    assert!(
        spans
            .iter()
            .all(|s| s.span_context.trace_id() == trace.trace_id)
    );

    let run = one(spans, "invoke_workflow review");
    let plan = one(spans, "invoke_agent plan");
    let grep = one(spans, "execute_tool grep");
    let lp = one(spans, "loop loop");
    let checks = by_name(spans, "command check");
    let sub = one(spans, "call_workflow sub");
    let inner = one(spans, "invoke_workflow inner");
    let fix = one(spans, "invoke_agent fix");
    let write = one(spans, "execute_tool write");
    let id = |s: &transcript_otel::SpanData| s.span_context.span_id();

    assert_eq!(run.parent_span_id, SpanId::INVALID);
    assert_eq!(id(run), ids::run_span_id(ROOT));
    assert_eq!(plan.parent_span_id, id(run));
    assert_eq!(grep.parent_span_id, id(plan));
    assert_eq!(lp.parent_span_id, id(run));
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c.parent_span_id == id(lp)));
    assert_eq!(sub.parent_span_id, id(run));
    // The child run hangs under the call_workflow step, in the same trace.
    assert_eq!(inner.parent_span_id, id(sub));
    assert_eq!(fix.parent_span_id, id(inner));
    assert_eq!(write.parent_span_id, id(fix));
    // Every span id is distinct.
    let distinct: std::collections::HashSet<_> = spans.iter().map(id).collect();
    assert_eq!(distinct.len(), spans.len());
}

#[test]
fn attributes_follow_the_genai_conventions() {
    let trace = mapped(false);
    let spans = &trace.spans;
    let run = one(spans, "invoke_workflow review");
    assert_eq!(
        attr_str(run, GEN_AI_OPERATION_NAME).unwrap(),
        "invoke_workflow"
    );
    assert_eq!(attr_str(run, GEN_AI_WORKFLOW_NAME).unwrap(), "review");
    assert_eq!(
        attr_str(run, GEN_AI_CONVERSATION_ID).unwrap(),
        ROOT.to_string()
    );
    assert_eq!(attr_str(run, TRANSCRIPT_PARENT_RUN_ID), None);
    let inner = one(spans, "invoke_workflow inner");
    assert_eq!(
        attr_str(inner, GEN_AI_CONVERSATION_ID).unwrap(),
        CHILD.to_string()
    );
    assert_eq!(
        attr_str(inner, TRANSCRIPT_PARENT_RUN_ID).unwrap(),
        ROOT.to_string()
    );

    let plan = one(spans, "invoke_agent plan");
    assert_eq!(
        attr_str(plan, GEN_AI_OPERATION_NAME).unwrap(),
        "invoke_agent"
    );
    assert_eq!(attr_str(plan, GEN_AI_AGENT_NAME).unwrap(), "plan");
    assert_eq!(attr_str(plan, GEN_AI_PROVIDER_NAME).unwrap(), "anthropic");
    assert_eq!(attr_str(plan, GEN_AI_REQUEST_MODEL).unwrap(), "model-a");
    assert_eq!(attr_str(plan, GEN_AI_RESPONSE_MODEL).unwrap(), "model-b");
    // Usage is summed over the step's turns under our names (the transcript's counts: input
    // 10 + 4 without the 3 cache reads); unreported counts stay absent. The names backends
    // sum are on the chat spans only.
    assert_eq!(attr_i64(plan, TRANSCRIPT_USAGE_INPUT_TOKENS), Some(14));
    assert_eq!(attr_i64(plan, TRANSCRIPT_USAGE_OUTPUT_TOKENS), Some(7));
    assert_eq!(attr_i64(plan, TRANSCRIPT_USAGE_CACHE_READ_TOKENS), Some(3));
    assert_eq!(attr(plan, TRANSCRIPT_USAGE_CACHE_WRITE_TOKENS), None);
    for name in [
        GEN_AI_USAGE_INPUT_TOKENS,
        GEN_AI_USAGE_OUTPUT_TOKENS,
        GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    ] {
        assert_eq!(attr(plan, name), None, "{name}");
    }
    assert_eq!(attr_str(plan, TRANSCRIPT_KIND).unwrap(), "agent");
    assert_eq!(attr_str(plan, TRANSCRIPT_PATH).unwrap(), "plan");
    assert_eq!(attr_i64(plan, TRANSCRIPT_ITERATION), Some(0));
    assert_eq!(attr_i64(plan, TRANSCRIPT_SEQ), Some(2));

    let checks = by_name(spans, "command check");
    let iterations: Vec<_> = checks
        .iter()
        .map(|c| attr_i64(c, TRANSCRIPT_ITERATION))
        .collect();
    assert_eq!(iterations, vec![Some(0), Some(1)]);
    assert!(
        checks
            .iter()
            .all(|c| attr(c, GEN_AI_OPERATION_NAME).is_none())
    );
    assert_eq!(attr_str(checks[0], TRANSCRIPT_PATH).unwrap(), "loop.check");
    assert_eq!(attr_str(checks[0], TRANSCRIPT_NAME).unwrap(), "check");

    let sub = one(spans, "call_workflow sub");
    assert_eq!(
        attr_str(sub, TRANSCRIPT_CHILD_RUN_ID).unwrap(),
        CHILD.to_string()
    );

    let grep = one(spans, "execute_tool grep");
    assert_eq!(
        attr_str(grep, GEN_AI_OPERATION_NAME).unwrap(),
        "execute_tool"
    );
    assert_eq!(attr_str(grep, GEN_AI_TOOL_NAME).unwrap(), "grep");
    assert_eq!(attr_str(grep, GEN_AI_TOOL_CALL_ID).unwrap(), "c1");
    assert_eq!(
        attr_str(grep, TRANSCRIPT_FIDELITY).unwrap(),
        "agent_emitted"
    );
    let write = one(spans, "execute_tool write");
    assert_eq!(attr_str(write, TRANSCRIPT_FIDELITY).unwrap(), "router");
}

#[test]
fn span_times_come_from_event_timestamps() {
    let (root, child) = demo();
    let trace = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default());
    let spans = &trace.spans;
    let t = |ts| span_time(ts);
    let run = one(spans, "invoke_workflow review");
    assert_eq!(run.start_time, t(root.at(1)));
    assert_eq!(run.end_time, t(root.at(17)));
    let grep = one(spans, "execute_tool grep");
    assert_eq!(grep.start_time, t(root.at(4)));
    assert_eq!(grep.end_time, t(root.at(5)));
    let plan = one(spans, "invoke_agent plan");
    assert_eq!(
        (plan.start_time, plan.end_time),
        (t(root.at(2)), t(root.at(8)))
    );
    let inner = one(spans, "invoke_workflow inner");
    assert_eq!(inner.start_time, t(child.at(1)));
    assert_eq!(inner.end_time, t(child.at(6)));
    let sub = one(spans, "call_workflow sub");
    assert!(sub.start_time <= inner.start_time && inner.end_time <= sub.end_time);
}

#[test]
fn recorded_errors_set_error_status() {
    let trace = mapped(false);
    let spans = &trace.spans;
    let status = |name: &str| status_text(&one(spans, name).status);
    assert_eq!(status("invoke_workflow review"), "error: step loop failed");
    assert_eq!(status("loop loop"), "error: exit 1");
    assert_eq!(status("invoke_agent fix"), "error: tool denied");
    assert_eq!(status("execute_tool write"), "error: denied");
    assert_eq!(status("invoke_agent plan"), "unset");
    assert_eq!(status("execute_tool grep"), "unset");
    let checks = by_name(spans, "command check");
    assert_eq!(status_text(&checks[0].status), "unset");
    assert_eq!(status_text(&checks[1].status), "error: exit 1");
}

#[test]
fn a_crashed_run_ends_at_its_last_event_as_incomplete() {
    let (root, _) = demo();
    // Crash after `loop.check` iteration 0 started: run, loop and the check are open.
    let events: Vec<DecodedEvent> = root.decoded().into_iter().take(10).collect();
    let trace = map_run(&events, &mut |_| None, MapOptions::default());
    let spans = &trace.spans;
    // run, plan, grep, plan's two chat spans, loop, check.
    assert_eq!(spans.len(), 7, "{spans:#?}");
    let last = span_time(root.at(10));
    for name in ["invoke_workflow review", "loop loop", "command check"] {
        let span = one(spans, name);
        assert_eq!(span.status, Status::error("incomplete"), "{name}");
        assert_eq!(span.end_time, last, "{name}");
    }
    assert_eq!(one(spans, "invoke_agent plan").status, Status::Unset);

    // A tool call without result is incomplete too, ending at the last event.
    let events: Vec<DecodedEvent> = root.decoded().into_iter().take(4).collect();
    let trace = map_run(&events, &mut |_| None, MapOptions::default());
    let grep = one(&trace.spans, "execute_tool grep");
    assert_eq!(grep.status, Status::error("incomplete"));
    assert_eq!(grep.start_time, grep.end_time);
    assert_eq!(
        one(&trace.spans, "invoke_agent plan").status,
        Status::error("incomplete")
    );
}

#[test]
fn a_crashed_child_keeps_its_ancestors_open_until_its_last_event() {
    let (root, child) = demo();
    let parent: Vec<DecodedEvent> = root.decoded().into_iter().take(15).collect();
    let partial = {
        let mut c = child.decoded();
        c.truncate(3);
        c
    };
    let trace = map_run(
        &parent,
        &mut |_| Some(partial.clone()),
        MapOptions::default(),
    );
    let spans = &trace.spans;
    let end = span_time(child.at(3));
    for name in [
        "invoke_workflow review",
        "call_workflow sub",
        "invoke_workflow inner",
        "invoke_agent fix",
        "execute_tool write",
    ] {
        let span = one(spans, name);
        assert_eq!(span.status, Status::error("incomplete"), "{name}");
        assert_eq!(span.end_time, end, "{name}");
    }
}

#[test]
fn ids_are_deterministic_across_exports() {
    let a = mapped(false);
    let b = mapped(true);
    let ids_of = |t: &transcript_otel::MappedTrace| {
        let mut v: Vec<_> = t
            .spans
            .iter()
            .map(|s| {
                (
                    s.name.to_string(),
                    s.span_context.span_id(),
                    s.parent_span_id,
                )
            })
            .collect();
        v.sort_by_key(|x| (x.0.clone(), x.1.to_bytes()));
        v
    };
    assert_eq!(ids_of(&a), ids_of(&b));
    assert_eq!(a.spans, mapped(false).spans);
    let plan = one(&a.spans, "invoke_agent plan");
    assert_eq!(
        plan.span_context.span_id(),
        ids::step_span_id(ROOT, "plan", 0, 2)
    );
    let grep = one(&a.spans, "execute_tool grep");
    assert_eq!(
        grep.span_context.span_id(),
        ids::tool_span_id(ROOT, "c1", 4)
    );
}

#[test]
fn content_is_exported_only_when_asked() {
    let off = mapped(false);
    let content_keys = [
        GEN_AI_INPUT_MESSAGES,
        GEN_AI_OUTPUT_MESSAGES,
        GEN_AI_SYSTEM_INSTRUCTIONS,
        GEN_AI_TOOL_CALL_ARGUMENTS,
        GEN_AI_TOOL_CALL_RESULT,
    ];
    for span in &off.spans {
        for key in content_keys {
            assert!(attr(span, key).is_none(), "{key} on {}", span.name);
        }
    }

    let on = mapped(true);
    let plan = one(&on.spans, "invoke_agent plan");
    let json =
        |key| -> serde_json::Value { serde_json::from_str(&attr_str(plan, key).unwrap()).unwrap() };
    assert_eq!(
        json(GEN_AI_INPUT_MESSAGES),
        serde_json::json!([{"role":"user","parts":[{"type":"text","content":"Find x"}]}])
    );
    assert_eq!(
        json(GEN_AI_SYSTEM_INSTRUCTIONS),
        serde_json::json!([{"type":"text","content":"You are terse"}])
    );
    assert_eq!(
        json(GEN_AI_OUTPUT_MESSAGES),
        serde_json::json!([
            {"role":"assistant","parts":[
                {"type":"reasoning","content":"look"},
                {"type":"tool_call","id":"c1","name":"grep","arguments":{"arg":"c1"}}
            ]},
            {"role":"tool","parts":[{"type":"tool_call_response","id":"c1","response":"done"}]},
            {"role":"assistant","parts":[{"type":"text","content":"x is 1"}]}
        ])
    );
    let grep = one(&on.spans, "execute_tool grep");
    assert_eq!(
        attr_str(grep, GEN_AI_TOOL_CALL_ARGUMENTS).unwrap(),
        r#"{"arg":"c1"}"#
    );
    assert_eq!(
        attr_str(grep, GEN_AI_TOOL_CALL_RESULT).unwrap(),
        r#""done""#
    );
    // Structure is the same with or without content.
    assert_eq!(shape(&on.spans), shape(&off.spans));
}

#[test]
fn missing_and_cyclic_children_are_reported_not_fatal() {
    let (root, child) = demo();
    let trace = map_run(&root.decoded(), &mut |_| None, MapOptions::default());
    assert_eq!(
        trace.problems,
        vec![MapProblem::ChildMissing {
            child_run_id: CHILD
        }]
    );
    assert_eq!(trace.spans.len(), 9);
    assert_eq!(
        one(&trace.spans, "call_workflow sub").status,
        Status::error("tool denied")
    );

    // A child that calls its own parent: the link back is refused.
    let mut looping = common::RunBuilder::new(CHILD, Some(ROOT), BASE_MS);
    looping.run_started("inner").push(
        EventDraft::new(
            "again",
            0,
            Payload::CallWorkflowStarted(StepPayload::new("again", "call_workflow")),
        )
        .with_child(ROOT),
    );
    let trace = map_run(
        &root.decoded(),
        &mut |_| Some(looping.decoded()),
        MapOptions::default(),
    );
    assert!(
        trace
            .problems
            .contains(&MapProblem::Cycle { child_run_id: ROOT })
    );
    assert_eq!(by_name(&trace.spans, "invoke_workflow review").len(), 1);
    let _ = child;
}

#[test]
fn inconsistencies_are_reported_and_still_mapped() {
    let mut run = common::RunBuilder::new(ROOT, None, BASE_MS);
    run.run_started("w")
        .step_completed("ghost", 0, "ghost", "command", None)
        .tool_result("", "orphan", "o1", Fidelity::Router, None)
        .run_completed("w", None);
    let mut events = run.decoded();
    // An event type from a newer writer is skipped, not fatal.
    let mut unknown = events[1].clone();
    unknown.kind = transcript_domain::EventKind::Unknown("step.retried".into());
    events.insert(1, unknown);
    let trace = map_run(&events, &mut |_| None, MapOptions::default());
    assert!(matches!(
        trace.problems.as_slice(),
        [
            MapProblem::CompletedWithoutStart { path, .. },
            MapProblem::ResultWithoutCall { call_id, .. }
        ] if path == "ghost" && call_id == "o1"
    ));
    let orphan = one(&trace.spans, "execute_tool orphan");
    assert_eq!(orphan.parent_span_id, ids::run_span_id(ROOT));
    assert_eq!(orphan.start_time, orphan.end_time);
    assert_eq!(one(&trace.spans, "invoke_workflow w").status, Status::Unset);
    // Problems print a readable cause.
    assert!(trace.problems[0].to_string().contains("without a start"));
}

#[test]
fn empty_input_maps_to_nothing() {
    let trace = map_run(&[], &mut |_| None, MapOptions::default());
    assert!(trace.spans.is_empty());
    assert!(!trace.trace_id.to_bytes().iter().any(|b| *b != 0));
}

#[test]
fn incremental_mapping_holds_child_events_until_their_link_arrives() {
    let (root, child) = demo();
    let offline = map_run(&root.decoded(), &mut lookup(&child), MapOptions::default());
    // Child events first, as a separate subscription may deliver them.
    let mut mapper = SpanMapper::new(MapOptions::default());
    for e in child.decoded() {
        mapper.ingest(&e);
    }
    assert_eq!(mapper.ready(), 0, "child spans wait for their parent link");
    assert!(mapper.problems().is_empty());
    for e in root.decoded() {
        mapper.ingest(&e);
    }
    let mut spans = mapper.take_spans();
    let rest = mapper.finish();
    spans.extend(rest.spans);
    assert!(rest.problems.is_empty());
    assert_eq!(shape(&spans), shape(&offline.spans));
}

#[test]
fn a_child_run_whose_parent_never_shows_becomes_its_own_root() {
    let (_, child) = demo();
    let mut mapper = SpanMapper::new(MapOptions::default());
    for e in child.decoded() {
        mapper.ingest(&e);
    }
    let trace = mapper.finish();
    assert_eq!(
        trace.problems,
        vec![MapProblem::Unlinked {
            run_id: CHILD,
            parent_run_id: ROOT
        }]
    );
    assert_eq!(trace.trace_id, ids::trace_id(CHILD));
    assert_eq!(
        one(&trace.spans, "invoke_workflow inner").parent_span_id,
        SpanId::INVALID
    );
    assert_eq!(trace.spans.len(), 3);
}

#[test]
fn child_events_in_the_same_slice_need_no_lookup() {
    let (root, child) = demo();
    let mut events = root.decoded();
    events.extend(child.decoded());
    let mut asked = 0;
    let trace = map_run(
        &events,
        &mut |_| {
            asked += 1;
            None
        },
        MapOptions::default(),
    );
    assert_eq!(asked, 0);
    assert!(trace.problems.is_empty(), "{:?}", trace.problems);
    let offline = mapped(false);
    assert_eq!(shape(&trace.spans), shape(&offline.spans));
}

#[test]
fn child_chains_deeper_than_the_guard_stop() {
    let run = |n: u32| {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&n.to_be_bytes());
        transcript_domain::RunId::from_bytes(b)
    };
    let chain = |n: u32| {
        let parent = (n > 0).then(|| run(n - 1));
        let mut r = common::RunBuilder::new(run(n), parent, BASE_MS + i64::from(n) * 100);
        r.run_started("deep").push(
            EventDraft::new(
                "next",
                0,
                Payload::CallWorkflowStarted(StepPayload::new("next", "call_workflow")),
            )
            .with_child(run(n + 1)),
        );
        r.decoded()
    };
    let mut lookup = |id: transcript_domain::RunId| {
        let n = u32::from_be_bytes(id.as_uuid().as_bytes()[..4].try_into().unwrap());
        Some(chain(n))
    };
    let trace = map_run(&chain(0), &mut lookup, MapOptions::default());
    let limit = transcript_domain::tree::MAX_DEPTH;
    assert!(
        trace.problems.contains(&MapProblem::TooDeep {
            child_run_id: run(limit as u32 + 1)
        }),
        "{:?}",
        trace.problems.last()
    );
    // Root plus MAX_DEPTH nested runs, each with its call_workflow step.
    assert_eq!(
        by_name(&trace.spans, "invoke_workflow deep").len(),
        limit + 1
    );
}

#[test]
fn held_child_events_keep_a_crashed_parent_open_until_the_child_ends() {
    let (root, child) = demo();
    let mut mapper = SpanMapper::new(MapOptions::default());
    for e in child.decoded() {
        mapper.ingest(&e);
    }
    // The parent crashed right after starting the call_workflow step.
    for e in root.decoded().into_iter().take(15) {
        mapper.ingest(&e);
    }
    let mut spans = mapper.take_spans();
    spans.extend(mapper.finish().spans);
    let end = span_time(child.at(6));
    for name in ["invoke_workflow review", "call_workflow sub"] {
        let span = one(&spans, name);
        assert_eq!(span.status, Status::error("incomplete"), "{name}");
        assert_eq!(span.end_time, end, "{name}");
    }
}

/// Issue #17 item 8: a `for_each` (`fan`) over a `parallel` block (`b`)
/// whose branches (`ping`, `pong`) run commands. Branches interleave: both
/// start, both call their tool, and they complete in either order, with
/// results arriving out of call order. Every span must pair with its own
/// start: no problem, no "incomplete" span, one `execute_tool` per call,
/// each under the command step of its own branch and iteration.
#[test]
fn a_parallel_block_inside_a_loop_pairs_every_span() {
    const ITERATIONS: u64 = 100;
    let f = Fidelity::Router;
    let tool = |run: &mut RunBuilder, path: &str, it: u64, call: &str, result: bool| {
        let payload = if result {
            Payload::ToolResult(transcript_domain::ToolPayload::result(
                "run_command",
                call,
                transcript_domain::RawJson::string("ok"),
                None,
                f,
            ))
        } else {
            Payload::ToolCall(transcript_domain::ToolPayload::call(
                "run_command",
                call,
                transcript_domain::RawJson::string("echo"),
                f,
            ))
        };
        run.push(EventDraft::new(path, it, payload));
    };
    let mut run = RunBuilder::new(ROOT, None, BASE_MS);
    run.run_started("fanout")
        .step_started("fan", 0, "fan", "for_each");
    for it in 0..ITERATIONS {
        let (ping, pong) = (format!("call-{it}-ping"), format!("call-{it}-pong"));
        run.step_started("fan.b", it, "b", "parallel")
            .step_started("fan.b.ping", it, "ping", "command")
            .step_started("fan.b.pong", it, "pong", "command");
        tool(&mut run, "fan.b.ping", it, &ping, false);
        tool(&mut run, "fan.b.pong", it, &pong, false);
        // Alternate which branch finishes first; results come back in the
        // opposite order of the calls.
        let order = if it % 2 == 0 {
            [("ping", &ping), ("pong", &pong)]
        } else {
            [("pong", &pong), ("ping", &ping)]
        };
        tool(
            &mut run,
            &format!("fan.b.{}", order[1].0),
            it,
            order[1].1,
            true,
        );
        for (name, call) in order {
            let path = format!("fan.b.{name}");
            if name == order[0].0 {
                tool(&mut run, &path, it, call, true);
            }
            run.step_completed(&path, it, name, "command", None);
        }
        run.step_completed("fan.b", it, "b", "parallel", None);
    }
    run.step_completed("fan", 0, "fan", "for_each", None)
        .run_completed("fanout", None);

    // Offline and incremental (live) mapping share the state machine; check both.
    let offline = map_run(&run.decoded(), &mut |_| None, MapOptions::default());
    let mut live = SpanMapper::new(MapOptions::default());
    for event in run.decoded() {
        live.ingest(&event);
    }
    let live = live.finish();
    for trace in [offline, live] {
        assert!(trace.problems.is_empty(), "{:?}", trace.problems);
        let spans = &trace.spans;
        let tools = by_name(spans, "execute_tool run_command");
        assert_eq!(tools.len(), 2 * ITERATIONS as usize, "one span per call");
        assert_eq!(spans.len(), 2 + 3 * ITERATIONS as usize + tools.len());
        assert!(
            spans.iter().all(|s| s.status != Status::error(INCOMPLETE)),
            "no span is incomplete"
        );
        let by_id: std::collections::HashMap<SpanId, &transcript_otel::SpanData> = spans
            .iter()
            .map(|s| (s.span_context.span_id(), s))
            .collect();
        for t in &tools {
            let call = attr_str(t, GEN_AI_TOOL_CALL_ID).unwrap();
            let step = by_id[&t.parent_span_id];
            let block = by_id[&step.parent_span_id];
            let it = attr_i64(step, TRANSCRIPT_ITERATION).unwrap();
            let branch = attr_str(step, TRANSCRIPT_PATH).unwrap();
            assert_eq!(
                call,
                format!("call-{it}-{}", branch.trim_start_matches("fan.b.")),
                "{call} under {branch} #{it}"
            );
            assert_eq!(attr_str(block, TRANSCRIPT_PATH).as_deref(), Some("fan.b"));
            assert_eq!(attr_i64(block, TRANSCRIPT_ITERATION), Some(it));
            assert!(t.start_time >= step.start_time && t.end_time <= step.end_time);
        }
    }
}

/// A step that completes closes its own unfinished descendants (as
/// incomplete, at its completion time) and nothing else: a sibling branch
/// opened after it keeps running and completes normally.
#[test]
fn a_completion_closes_only_its_own_unfinished_descendants() {
    let mut run = RunBuilder::new(ROOT, None, BASE_MS);
    run.run_started("w")
        .step_started("par", 0, "par", "parallel")
        .step_started("par.a", 0, "a", "loop")
        .step_started("par.a.x", 0, "x", "command")
        .step_started("par.b", 0, "b", "command")
        .step_completed("par.a", 0, "a", "loop", None)
        .step_completed("par.b", 0, "b", "command", None)
        .step_completed("par", 0, "par", "parallel", None)
        .run_completed("w", None);
    let trace = map_run(&run.decoded(), &mut |_| None, MapOptions::default());
    assert!(trace.problems.is_empty(), "{:?}", trace.problems);
    let x = one(&trace.spans, "command x");
    assert_eq!(x.status, Status::error(INCOMPLETE));
    assert_eq!(x.end_time, span_time(run.at(6)));
    let b = one(&trace.spans, "command b");
    assert_eq!(b.status, Status::Unset);
    assert_eq!(b.end_time, span_time(run.at(7)));
}
