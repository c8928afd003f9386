//! The model server over real HTTP: framing on the wire, recording, cuts and readable errors.

use std::io::Read;

use serde_json::{Value, json};
use transcript_replay::server::{Fault, Handling, ModelServer, Provider, Script, Turn, Usage, sse};

/// One HTTP exchange through ureq: (status, headers as `name: value` lines in lowercase, body,
/// ended cleanly). A cut stream keeps the bytes that arrived before the cut and reports
/// `ended == false`.
fn exchange(
    server: &ModelServer,
    method: &str,
    target: &str,
    body: &Value,
) -> (u16, String, String, bool) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        // 127.0.0.1 only: never through a proxy from the environment.
        .proxy(None)
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{}{target}", server.addr()))
        .header("content-type", "application/json")
        .header("x-api-key", "k1")
        .body(body.to_string())
        .expect("request");
    let mut response = agent.run(request).expect("an HTTP answer");
    let status = response.status().as_u16();
    let head: String = response
        .headers()
        .iter()
        .map(|(k, v)| format!("{}: {}\n", k, v.to_str().unwrap_or("")).to_ascii_lowercase())
        .collect();
    let mut reader = response.body_mut().as_reader();
    let (mut raw, mut chunk, mut ended) = (Vec::new(), [0u8; 4096], false);
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => {
                ended = true;
                break;
            }
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            // A cut connection ends with an error: keep what arrived.
            Err(_) => break,
        }
    }
    (
        status,
        head,
        String::from_utf8_lossy(&raw).into_owned(),
        ended,
    )
}

#[test]
fn anthropic_stream_over_http_is_recorded_and_billed() {
    let server = ModelServer::start(Script::new([
        Turn::text("hello there").with_usage(Usage::new(10, 4).with_cache(2, 3))
    ]))
    .expect("start");
    let (status, head, body, ended) = exchange(
        &server,
        "POST",
        "/v1/messages?beta=true",
        &json!({"model": "claude-x", "stream": true, "messages": []}),
    );
    assert_eq!(status, 200);
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains("request-id: req_testkit_0001"), "{head}");
    assert!(ended, "the stream ends with its last chunk");
    let events = sse::parse(&body);
    assert_eq!(
        events.first().and_then(|e| e.event.as_deref()),
        Some("message_start")
    );
    assert_eq!(
        events.last().and_then(|e| e.event.as_deref()),
        Some("message_stop")
    );
    let text: String = events
        .iter()
        .filter_map(|e| e.json().ok())
        .filter_map(|v| v["delta"]["text"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(text, "hello there");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].query.as_deref(), Some("beta=true"));
    assert_eq!(requests[0].header("X-Api-Key"), Some("k1"));
    assert_eq!(requests[0].provider, Some(Provider::Anthropic));
    assert_eq!(requests[0].body.as_ref().unwrap()["model"], "claude-x");
    assert_eq!(
        server.billed(Provider::Anthropic),
        Usage::new(10, 4).with_cache(2, 3)
    );
    assert_eq!(server.billed_total(), server.billed(Provider::Anthropic));
    assert!(server.unexpected_requests().is_empty());
}

#[test]
fn a_cut_stream_delivers_its_first_events_then_drops_the_connection() {
    let server = ModelServer::start(Script::new([Turn::text("never finished")
        .with_usage(Usage::new(5, 5))
        .with_fault(Fault::CutAfterEvents(2))]))
    .expect("start");
    let (status, _, body, ended) = exchange(
        &server,
        "POST",
        "/v1/responses",
        &json!({"model": "gpt-x", "stream": true}),
    );
    assert_eq!(status, 200);
    assert!(!ended, "no terminating chunk after a cut");
    let names: Vec<_> = sse::parse(&body)
        .into_iter()
        .filter_map(|e| e.event)
        .collect();
    assert_eq!(names, ["response.created", "response.in_progress"]);
    assert_eq!(server.billed(Provider::OpenAiResponses), Usage::default());
}

#[test]
fn requests_beyond_the_script_get_a_readable_error_and_are_reported() {
    let server = ModelServer::start(Script::new([])).expect("start");
    let (status, _, body, _) = exchange(
        &server,
        "POST",
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse",
        &json!({"contents": []}),
    );
    assert_eq!(status, 400);
    assert!(body.contains("the script has only 0 turn(s)"), "{body}");
    assert!(body.contains("INVALID_ARGUMENT"), "{body}");
    let (status, _, body, _) = exchange(&server, "POST", "/api/event_logging/batch", &json!({}));
    assert_eq!(status, 404);
    assert!(
        body.contains("no such endpoint POST /api/event_logging/batch"),
        "{body}"
    );
    let unexpected = server.unexpected_requests();
    assert_eq!(unexpected.len(), 2);
    assert_eq!(unexpected[0].handling, Handling::Unscripted);
    assert_eq!(unexpected[1].handling, Handling::Unknown);
}

#[test]
fn a_provider_that_is_down_answers_every_request_with_its_fault() {
    let server = ModelServer::start(Script::always(Fault::Overloaded)).expect("start");
    for _ in 0..2 {
        let (status, _, body, _) =
            exchange(&server, "POST", "/v1/messages", &json!({"stream": true}));
        assert_eq!(status, 529);
        assert!(body.contains("overloaded_error"), "{body}");
    }
    let (status, _, body, _) = exchange(
        &server,
        "POST",
        "/v1/chat/completions",
        &json!({"stream": true}),
    );
    assert_eq!(status, 503);
    assert!(body.contains("server_is_overloaded"), "{body}");
    assert_eq!(server.generation_requests().len(), 3);
    assert_eq!(server.turns_served(), 0);
}

#[test]
fn chat_completions_non_streaming_and_token_counting() {
    let server = ModelServer::start(Script::new([Turn::tool_call(
        "shell",
        json!({"cmd": "ls"}),
    )
    .with_usage(Usage::new(7, 2))]))
    .expect("start");
    let (status, _, body, _) = exchange(
        &server,
        "POST",
        "/v1/chat/completions",
        &json!({"model": "local", "messages": []}),
    );
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"cmd":"ls"}"#
    );
    assert_eq!(v["usage"]["prompt_tokens"], 7);
    let (status, _, body, _) = exchange(
        &server,
        "POST",
        "/v1/messages/count_tokens",
        &json!({"x": "abcd"}),
    );
    assert_eq!(status, 200);
    assert!(body.contains("input_tokens"), "{body}");
    assert_eq!(server.requests()[1].handling, Handling::Auxiliary);
}
