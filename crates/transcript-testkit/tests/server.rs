//! The model server over real HTTP: framing on the wire, recording, cuts and readable errors.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};
use transcript_testkit::model_server::{
    Fault, Handling, ModelServer, Provider, Script, Turn, Usage, sse,
};

/// A raw HTTP/1.1 exchange: (status, headers lowercase, de-chunked body, ended cleanly).
fn exchange(
    server: &ModelServer,
    method: &str,
    target: &str,
    body: &Value,
) -> (u16, String, String, bool) {
    let mut stream = TcpStream::connect(server.addr()).expect("connect");
    let body = body.to_string();
    write!(
        stream,
        "{method} {target} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\
         content-type: application/json\r\nx-api-key: k1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut raw = Vec::new();
    // A cut connection may end with a reset: keep what arrived.
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = raw.split_once("\r\n\r\n").expect("a response head");
    let status: u16 = head[9..12].parse().expect("status");
    let head = head.to_ascii_lowercase();
    if !head.contains("transfer-encoding: chunked") {
        return (status, head, rest.to_owned(), true);
    }
    let (mut body, mut rest, mut ended) = (String::new(), rest, false);
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 {
            ended = true;
            break;
        }
        if after.len() < size {
            break;
        }
        body.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    (status, head, body, ended)
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
