//! The HTTP agent against a server on 127.0.0.1 inside the test process that
//! replays recorded Chat Completions responses (a real HTTP round trip).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use transcript_domain::{BlockType, EventType, Fidelity};
use transcript_exec::{
    AgentSpec, ExecutionService, HttpAgentRunner, Status, Step, StepKind, Workflow, WorkflowSet,
};

use support::*;

/// Serves `responses` in order, one connection each, recording request bodies.
async fn replay_server(responses: Vec<Value>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for (i, response) in responses.into_iter().enumerate() {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let body_start = loop {
                let n = sock.read(&mut chunk).await.unwrap();
                assert!(n > 0, "client closed early");
                buf.extend_from_slice(&chunk[..n]);
                if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break p + 4;
                }
            };
            let head = String::from_utf8_lossy(&buf[..body_start]).to_ascii_lowercase();
            assert!(
                head.starts_with("post /v1/chat/completions http/1.1"),
                "{head}"
            );
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            while buf.len() < body_start + len {
                let n = sock.read(&mut chunk).await.unwrap();
                buf.extend_from_slice(&chunk[..n]);
            }
            log.lock()
                .unwrap()
                .push(serde_json::from_slice(&buf[body_start..body_start + len]).unwrap());
            let body = response.to_string();
            // Alternate framing: Content-Length, then chunked.
            let reply = if i % 2 == 0 {
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                let (a, b) = body.split_at(body.len() / 2);
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                    a.len(),
                    b.len()
                )
            };
            sock.write_all(reply.as_bytes()).await.unwrap();
            sock.shutdown().await.unwrap();
        }
    });
    (format!("http://{addr}/v1"), seen)
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
    let (url, seen) = replay_server(recorded()).await;
    let (_d, ws) = workspace();
    std::fs::write(ws.join("notes.txt"), "buy milk").unwrap();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .agent_runner(
            "openai",
            Arc::new(HttpAgentRunner::new(url).with_api_key("test-key")),
        )
        .build()
        .unwrap();
    let wf = Workflow::new("http").step(http_step(None));
    let out = svc
        .run(
            &WorkflowSet::new("h", wf),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
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
    // What the server received: prompts, tools, then the tool result.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["messages"][0],
        json!({"role": "system", "content": "Use tools."})
    );
    assert_eq!(
        requests[0]["tools"][0]["function"]["name"],
        json!("read_file")
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
    let (url, _) = replay_server(recorded()).await;
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .agent_runner("openai", Arc::new(HttpAgentRunner::new(url)))
        .build()
        .unwrap();
    let wf = Workflow::new("limit").step(http_step(Some(1)));
    let out = svc
        .run(
            &WorkflowSet::new("l", wf),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, Status::Failure);
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
    let (url, seen) = replay_server(vec![
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
    let (_d, ws) = workspace();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .agent_runner("openai", Arc::new(HttpAgentRunner::new(url)))
        .build()
        .unwrap();
    let out = svc
        .run(
            &WorkflowSet::new("h", Workflow::new("allow").step(http_step(None))),
            Map::new(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
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

    // The model got each refusal as that call's tool result.
    let requests = seen.lock().unwrap().clone();
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
