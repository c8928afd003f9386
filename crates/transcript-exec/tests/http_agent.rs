//! The HTTP agent against a server on 127.0.0.1 inside the test process that
//! replays recorded Chat Completions responses (a real HTTP round trip).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{BlockType, EventType, Fidelity};
use transcript_exec::{
    AgentSpec, ExecutionService, HttpAgentRunner, Status, Step, StepKind, Workflow, WorkflowSet,
};

use support::*;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers the Chat Completions route with `responses` in order (a real HTTP round trip to
/// a wiremock server on 127.0.0.1); the server keeps what it received for the assertions, and
/// verifies on drop that every scripted response was asked for exactly once.
async fn replay_server(responses: Vec<Value>) -> MockServer {
    let server = MockServer::start().await;
    let n = responses.len() as u64;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("content-type", "application/json"))
        .respond_with(InOrder::new(responses))
        .up_to_n_times(n)
        .expect(n)
        .mount(&server)
        .await;
    server
}

/// Replies with the next scripted body on each request.
struct InOrder {
    responses: Vec<Value>,
    next: AtomicUsize,
}

impl InOrder {
    fn new(responses: Vec<Value>) -> Self {
        Self {
            responses,
            next: AtomicUsize::new(0),
        }
    }
}

impl Respond for InOrder {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let i = self.next.fetch_add(1, Ordering::SeqCst);
        ResponseTemplate::new(200).set_body_json(&self.responses[i])
    }
}

/// The server's base URL as the agent is configured with it.
fn base_url(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// The JSON bodies the server received, in order.
async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect()
}

fn recorded() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("agents/openai-tool-loop.json")).unwrap();
    serde_json::from_str::<Vec<Value>>(&text).unwrap()
}

fn http_step(max_turns: Option<u32>) -> Step {
    Step::new(
        "ask",
        StepKind::Agent(AgentSpec {
            provider: "openai".into(),
            prompt: "What do the notes say?".into(),
            system_prompt: Some("Use tools.".into()),
            max_turns,
            tools: vec!["read_file".into()],
            ..AgentSpec::default()
        }),
    )
}

#[tokio::test]
async fn tool_loop_runs_calls_through_the_router_and_records_turns() {
    let server = replay_server(recorded()).await;
    let runner = HttpAgentRunner::new(base_url(&server)).with_api_key("test-key");
    let (factory, out, _d, _ws) = run_step(runner, http_step(None), |ws| {
        std::fs::write(ws.join("notes.txt"), "buy milk").unwrap()
    })
    .await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        types(&events),
        [
            "run.started",
            "step.started",
            "message.user",
            // Causal order: the turn that asked for the tool, then the call it caused.
            "message.assistant",
            "tool.call",
            "tool.result",
            "message.assistant",
            "step.completed",
            "run.completed"
        ]
    );
    // The router executed the model's call under the model's id.
    let call = events[4].tool().unwrap();
    assert_eq!(
        (call.call_id.as_str(), call.fidelity),
        ("ask#0/call_read_1", Fidelity::Router)
    );
    assert_eq!(call.input.to_value(), json!({"path": "notes.txt"}));
    assert_eq!(
        events[5].tool().unwrap().output.to_value(),
        json!("buy milk")
    );
    // Turn 1 holds its text and the tool_use; the result is the router's tool.result.
    let turn1 = events[3].message().unwrap().to_message().unwrap();
    let kinds: Vec<BlockType> = turn1.blocks.iter().map(|b| b.block_type()).collect();
    assert_eq!(kinds, [BlockType::Text, BlockType::ToolUse]);
    assert_eq!(turn1.blocks[1].tool_id(), Some("ask#0/call_read_1"));
    assert_eq!(turn1.model.as_deref(), Some("gpt-demo"));
    let usage = turn1.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.cache_read_tokens),
        (Some(30), Some(20))
    );
    let done = events[7].step().unwrap();
    assert_eq!(
        done.result.as_ref().unwrap().to_value(),
        json!("The notes say: buy milk.")
    );
    // What the server received: prompts, tools, then the tool result, each with the key.
    for r in server.received_requests().await.unwrap() {
        assert_eq!(
            r.headers.get("authorization").map(|v| v.to_str().unwrap()),
            Some("Bearer test-key")
        );
    }
    let requests = bodies(&server).await;
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["messages"][0],
        json!({"role": "system", "content": "Use tools."})
    );
    assert_eq!(
        requests[0]["tools"][0]["function"]["name"],
        json!("read_file")
    );
    // The model is told what the tool does, not just its name.
    assert_eq!(
        requests[0]["tools"][0]["function"]["description"],
        json!("Reads a text file of the workspace.")
    );
    assert_eq!(
        requests[1]["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_read_1", "content": "buy milk"})
    );
    assert_eq!(
        of_type_count(&events, EventType::ToolCall),
        1,
        "one call per call_id, router fidelity only"
    );
}

fn of_type_count(events: &[transcript_domain::DecodedEvent], t: EventType) -> usize {
    events.iter().filter(|e| e.kind.known() == Some(t)).count()
}

#[tokio::test]
async fn turn_limit_and_http_errors_fail_the_step() {
    // One turn allowed: only the first scripted response is asked for.
    let server = replay_server(recorded().into_iter().take(1).collect()).await;
    let runner = HttpAgentRunner::new(base_url(&server));
    let (factory, out, _d, ws) = run_step(runner, http_step(Some(1)), |_| {}).await;
    assert_eq!(out.status, Status::Failed);
    assert_eq!(
        out.error.as_deref(),
        Some("step 'ask' failed: turn limit of 1 reached without a final answer")
    );
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    // The missing file is the tool's error, recorded and sent back to the model.
    assert_eq!(
        types(&events)[3..6],
        ["message.assistant", "tool.call", "tool.result"]
    );
    assert!(events[5].tool().unwrap().error.is_some());

    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .agent_runner(
            "openai",
            Arc::new(
                HttpAgentRunner::new("https://example.invalid/v1")
                    .with_retry(transcript_exec::RetryPolicy::none()),
            ),
        )
        .build()
        .unwrap();
    let out = svc
        .run(
            &WorkflowSet::new("l", Workflow::new("tls").step(http_step(None))),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    // https is spoken now; the name does not resolve: a connection error naming the URL.
    let error = out.error.unwrap();
    assert!(
        error.contains("POST https://example.invalid/v1/chat/completions: ")
            && error.contains("(after 1 attempt)"),
        "{error}"
    );
}

fn completion(message: Value) -> Value {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": "gpt-scripted",
        "choices": [{"index": 0, "message": message}],
    })
}

#[tokio::test]
async fn tools_outside_the_step_list_are_refused_recorded_and_never_run() {
    // The model asks for run_command (registered, not offered) and an
    // unknown tool; only read_file is in the step's tools.
    let server = replay_server(vec![
        completion(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [
                {"id": "call_evil", "type": "function", "function": {
                    "name": "run_command", "arguments": "{\"command\":\"touch PWNED\"}"}},
                {"id": "call_ghost", "type": "function", "function": {
                    "name": "teleport", "arguments": "{}"}},
            ],
        })),
        completion(json!({"role": "assistant", "content": "I may not run commands."})),
    ])
    .await;
    let runner = HttpAgentRunner::new(base_url(&server));
    let (factory, out, _d, ws) = run_step(runner, http_step(None), |_| {}).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert!(!ws.join("PWNED").exists(), "run_command must not run");

    // The transcript has a router pair per refused call, the error in the result.
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let tool_events: Vec<(String, String, String, Option<String>)> = events
        .iter()
        .filter_map(|e| {
            e.tool().map(|t| {
                (
                    e.kind.as_str().to_owned(),
                    t.name.clone(),
                    t.call_id.clone(),
                    t.error.clone(),
                )
            })
        })
        .collect();
    assert_eq!(tool_events.len(), 4, "{tool_events:?}");
    for (i, (id, name)) in [("call_evil", "run_command"), ("call_ghost", "teleport")]
        .into_iter()
        .enumerate()
    {
        let (call_kind, call_name, call_id, call_err) = &tool_events[2 * i];
        assert_eq!(
            (call_kind.as_str(), call_name.as_str(), call_id.as_str()),
            ("tool.call", name, format!("ask#0/{id}").as_str())
        );
        assert!(call_err.is_none());
        let (res_kind, res_name, res_id, res_err) = &tool_events[2 * i + 1];
        assert_eq!(
            (res_kind.as_str(), res_name.as_str(), res_id.as_str()),
            ("tool.result", name, format!("ask#0/{id}").as_str())
        );
        let err = res_err.as_deref().unwrap();
        assert!(
            err.contains(&format!(
                "tool '{name}' is not offered to this step (offered: read_file)"
            )),
            "{err}"
        );
    }

    // The model got each refusal as that call's tool result; no key was configured, so none
    // was sent.
    let received = server.received_requests().await.unwrap();
    assert!(
        received
            .iter()
            .all(|r| !r.headers.contains_key("authorization"))
    );
    let requests = bodies(&server).await;
    assert_eq!(requests.len(), 2);
    let tool_msgs: Vec<&Value> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_msgs.len(), 2);
    assert_eq!(tool_msgs[0]["tool_call_id"], "call_evil");
    assert!(
        tool_msgs[0]["content"]
            .as_str()
            .unwrap()
            .contains("not offered"),
        "{}",
        tool_msgs[0]
    );
    assert_eq!(tool_msgs[1]["tool_call_id"], "call_ghost");

    // Tools are offered with their real parameter schemas.
    let offered = requests[0]["tools"].as_array().unwrap();
    assert_eq!(offered.len(), 1);
    assert_eq!(
        offered[0]["function"]["parameters"],
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "A file path relative to the workspace."}},
            "required": ["path"],
            "additionalProperties": false
        })
    );
}

/// A one-step service whose `openai` runner is `runner`, recording into `factory`.
fn openai_service(
    ws: &std::path::Path,
    factory: &Arc<MemoryFactory>,
    runner: HttpAgentRunner,
) -> ExecutionService {
    ExecutionService::deterministic_builder(ws, ts0())
        .recorder_factory(factory.clone())
        .agent_runner("openai", Arc::new(runner))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_429_is_retried_and_the_streamed_answer_is_recorded_once() {
    let server = MockServer::start().await;
    // First attempt: rate limited (Retry-After: 0, so the retry waits no backoff).
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "0"))
        .up_to_n_times(1)
        .expect(1)
        .with_priority(1)
        .mount(&server)
        .await;
    // Then: a Chat Completions stream (deltas, a usage chunk, [DONE]).
    let chunk = |v: Value| format!("data: {v}\n\n");
    let sse = [
        chunk(
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-s", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]}),
        ),
        chunk(
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-s", "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}),
        ),
        chunk(
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-s", "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}),
        ),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;

    let runner = HttpAgentRunner::new(base_url(&server)).with_retry(quick_retries(2));
    let (factory, out, _d) = run_against(runner).await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(
        types(&events),
        [
            "run.started",
            "step.started",
            "message.user",
            "message.assistant",
            "step.completed",
            "run.completed"
        ],
        "the refused attempt leaves no trace; the answer is one turn"
    );
    let turn = events[3].message().unwrap().to_message().unwrap();
    assert_eq!(turn.model.as_deref(), Some("gpt-s"));
    let usage = turn.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (Some(7), Some(2))
    );
    assert_eq!(
        events[4]
            .step()
            .unwrap()
            .result
            .as_ref()
            .unwrap()
            .to_value(),
        json!("Hello")
    );
    // Both attempts asked for a stream with usage.
    let requests = bodies(&server).await;
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r["stream"], json!(true));
        assert_eq!(r["stream_options"], json!({"include_usage": true}));
    }
}

#[tokio::test]
async fn a_response_over_the_body_cap_fails_the_step_and_records_no_turn() {
    let big = completion(json!({"role": "assistant", "content": "x".repeat(5000)}));
    let server = replay_server(vec![big]).await;
    let runner = HttpAgentRunner::new(base_url(&server)).with_max_body_bytes(1000);
    let (factory, out, _d) = run_against(runner).await;
    assert_eq!(out.status, Status::Failed);
    let error = out.error.unwrap();
    assert!(
        error.contains("/v1/chat/completions: response body exceeds 1000 bytes"),
        "{error}"
    );
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(of_type_count(&events, EventType::MessageAssistant), 0);
}

/// Runs `step` alone with `runner` as the `openai` agent, after `setup` prepared the
/// workspace; the temporary directory lives as long as the returned guard.
async fn run_step(
    runner: HttpAgentRunner,
    step: Step,
    setup: impl FnOnce(&std::path::Path),
) -> (
    Arc<MemoryFactory>,
    transcript_exec::RunOutcome,
    tempfile::TempDir,
    std::path::PathBuf,
) {
    let (d, ws) = workspace();
    setup(&ws);
    let factory = MemoryFactory::new();
    let svc = openai_service(&ws, &factory, runner);
    let out = svc
        .run(
            &WorkflowSet::new("w", Workflow::new("w").step(step)),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    (factory, out, d, ws)
}

/// [`run_step`] of the usual agent step in an empty workspace.
async fn run_against(
    runner: HttpAgentRunner,
) -> (
    Arc<MemoryFactory>,
    transcript_exec::RunOutcome,
    tempfile::TempDir,
) {
    let (factory, out, d, _) = run_step(runner, http_step(None), |_| {}).await;
    (factory, out, d)
}

fn quick_retries(max_retries: u32) -> transcript_exec::RetryPolicy {
    transcript_exec::RetryPolicy {
        max_retries,
        initial_backoff: std::time::Duration::from_millis(1),
        max_backoff: std::time::Duration::from_millis(10),
    }
}

#[tokio::test]
async fn a_request_that_times_out_is_retried_then_fails_the_step() {
    let server = MockServer::start().await;
    // Answers long after the client's 200 ms request timeout.
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion(json!({"role": "assistant", "content": "late"})))
                .set_delay(std::time::Duration::from_secs(30)),
        )
        .expect(2)
        .mount(&server)
        .await;
    let runner = HttpAgentRunner::new(base_url(&server))
        .with_timeout(std::time::Duration::from_millis(200))
        .with_retry(quick_retries(1));
    let (factory, out, _d) = run_against(runner).await;
    assert_eq!(out.status, Status::Failed);
    let error = out.error.unwrap();
    assert!(
        error.contains("/v1/chat/completions: ") && error.contains("(after 2 attempts)"),
        "{error}"
    );
    assert!(error.contains("timed out"), "{error}");
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(of_type_count(&events, EventType::MessageAssistant), 0);
}

#[tokio::test]
async fn a_stream_that_ends_without_its_finish_fails_the_step() {
    let server = MockServer::start().await;
    // One delta, then the body ends: no finish_reason, no [DONE].
    let sse = format!(
        "data: {}\n\n",
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-s", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Half an ans"}}]})
    );
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let runner = HttpAgentRunner::new(base_url(&server)).with_retry(quick_retries(2));
    let (factory, out, _d) = run_against(runner).await;
    assert_eq!(out.status, Status::Failed);
    let error = out.error.unwrap();
    assert!(error.contains("incomplete answer"), "{error}");
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    assert_eq!(of_type_count(&events, EventType::MessageAssistant), 0);
}

#[tokio::test]
async fn a_refusal_is_recorded_as_the_answer_and_flagged_in_the_result() {
    let server = replay_server(vec![completion(json!({
        "role": "assistant",
        "content": null,
        "refusal": "I can't help with that."
    }))])
    .await;
    let (factory, out, _d) = run_against(HttpAgentRunner::new(base_url(&server))).await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_well_formed(&events);
    let turn = events
        .iter()
        .find_map(|e| {
            e.message()
                .filter(|_| e.kind.known() == Some(EventType::MessageAssistant))
        })
        .unwrap()
        .to_message()
        .unwrap();
    assert_eq!(turn.blocks.len(), 1);
    assert_eq!(turn.blocks[0].block_type(), BlockType::Text);
    let done = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::StepCompleted))
        .and_then(|e| e.step())
        .unwrap();
    let result = done.result.as_ref().unwrap().to_value();
    assert_eq!(
        result["output"],
        json!("I can't help with that."),
        "{result}"
    );
    assert_eq!(
        result["warnings"],
        json!(["the model refused: I can't help with that."]),
        "{result}"
    );
}

/// `Retry-After` as an HTTP-date (RFC 9110 IMF-fixdate) is read against the service's clock,
/// not the machine's: the service's clock says 2100, the server asks to wait until 2050 (in
/// the past by that clock, 24 years ahead by the machine's), so the retry goes at once. The
/// backoff is an hour: a runner that ignored the date (or read it against the machine's
/// clock) would wait that hour, and the watchdog fails the test.
#[tokio::test]
async fn a_retry_after_date_in_the_past_of_the_service_clock_is_no_wait() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(503)
                .insert_header("retry-after", "Sat, 01 Jan 2050 00:00:00 GMT"),
        )
        .up_to_n_times(1)
        .expect(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(
            json!({"role": "assistant", "content": "after the date"}),
        )))
        .expect(1)
        .mount(&server)
        .await;
    let hour = std::time::Duration::from_secs(3600);
    let runner = HttpAgentRunner::new(base_url(&server)).with_retry(transcript_exec::RetryPolicy {
        max_retries: 1,
        initial_backoff: hour,
        max_backoff: hour,
    });
    let (d, ws) = workspace();
    let factory = MemoryFactory::new();
    let year_2100 = transcript_domain::Timestamp::parse("2100-01-01T00:00:00.000Z").unwrap();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .clock(Arc::new(transcript_domain::ManualClock::new(year_2100)))
        .recorder_factory(factory.clone())
        .agent_runner("openai", Arc::new(runner))
        .build()
        .unwrap();
    let set = WorkflowSet::new("w", Workflow::new("w").step(http_step(None)));
    let run = svc.run(&set, Map::new(), CancellationToken::new());
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("the retry waited for the backoff: the Retry-After date was not honoured")
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    assert_eq!(bodies(&server).await.len(), 2);
    drop(d);
}
