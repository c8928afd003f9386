//! The server's memory and its decisions: which turn a request gets, what is recorded and
//! billed, and the bytes of the reply. No I/O here; `http` only moves bytes.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::conversation::Conversation;
use super::mismatch::{self, Mismatch};
use super::record::{Bill, Handling, Provider, RecordedRequest};
use super::render::{Answer, Ctx};
use super::route::{Route, route};
use super::script::{Block, Fault, Matching, Script, Turn, Usage};
use super::sse::SseEvent;
use super::{anthropic, chat, gemini, responses};

/// A request as the transport received it.
#[derive(Debug, Clone)]
pub(crate) struct Incoming {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// The reply to send.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    /// Extra headers (request ids).
    pub headers: Vec<(&'static str, String)>,
    /// The body, one chunk per SSE event for streams.
    pub chunks: Vec<String>,
    /// Whether the connection is cut after the chunks instead of ending the body.
    pub cut: bool,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            chunks: vec![body.to_string()],
            cut: false,
        }
    }
}

/// A generation request as routed.
struct Request<'a> {
    provider: Provider,
    stream: bool,
    include_usage: bool,
    model: String,
    body: Option<&'a Value>,
}

/// Everything the server remembers.
#[derive(Debug)]
pub(crate) struct State {
    script: Script,
    next_turn: usize,
    seq: usize,
    requests: Vec<RecordedRequest>,
    billed: HashMap<Provider, Usage>,
    bills: Vec<Bill>,
    mismatches: Vec<Mismatch>,
    /// Set once a strict mismatch happened (or by the script): every later generation
    /// request is refused with it.
    refused: Option<String>,
    /// Which generation requests are the step's conversation (`None`: all of them).
    conversation: Option<Conversation>,
}

impl State {
    pub fn new(script: Script) -> Self {
        State {
            next_turn: 0,
            seq: 0,
            requests: Vec::new(),
            billed: HashMap::new(),
            bills: Vec::new(),
            mismatches: Vec::new(),
            refused: script.refusal.clone(),
            conversation: script
                .conversation
                .as_deref()
                .map(|p| Conversation::new(Some(p))),
            script,
        }
    }

    pub fn mismatches(&self) -> &[Mismatch] {
        &self.mismatches
    }

    pub fn requests(&self) -> &[RecordedRequest] {
        &self.requests
    }

    pub fn billed(&self, provider: Provider) -> Usage {
        self.billed.get(&provider).copied().unwrap_or_default()
    }

    pub fn turns_served(&self) -> usize {
        self.next_turn
    }

    pub fn bills(&self) -> &[Bill] {
        &self.bills
    }

    /// Records the request and decides the reply.
    pub fn handle(&mut self, incoming: Incoming) -> Reply {
        let body: Option<Value> = serde_json::from_slice(&incoming.body).ok();
        let route = route(&incoming.method, &incoming.path, body.as_ref());
        let index = self.requests.len();
        let (provider, handling, reply) = match route {
            Route::Generate {
                provider,
                stream,
                include_usage,
                model,
            } => {
                let (handling, reply) = self.generate(
                    Request {
                        provider,
                        stream,
                        include_usage,
                        model,
                        body: body.as_ref(),
                    },
                    &incoming,
                );
                (Some(provider), handling, reply)
            }
            Route::CountTokens(provider) => {
                let body = match provider {
                    Provider::Gemini => gemini::count_tokens(incoming.body.len()),
                    _ => anthropic::count_tokens(incoming.body.len()),
                };
                (Some(provider), Handling::Auxiliary, Reply::json(200, &body))
            }
            Route::ListModels(provider) => (
                provider,
                Handling::Auxiliary,
                Reply::json(200, &models_list()),
            ),
            Route::Unknown(provider) => {
                let message = format!(
                    "transcript-testkit model server: no such endpoint {} {}",
                    incoming.method, incoming.path
                );
                (
                    provider,
                    Handling::Unknown,
                    Reply::json(404, &error_body(provider, 404, &message)),
                )
            }
        };
        self.requests.push(RecordedRequest {
            index,
            method: incoming.method,
            path: incoming.path,
            query: incoming.query,
            headers: incoming.headers,
            body,
            raw_body: String::from_utf8_lossy(&incoming.body).into_owned(),
            provider,
            handling,
        });
        reply
    }

    fn generate(&mut self, request: Request<'_>, incoming: &Incoming) -> (Handling, Reply) {
        let Request {
            provider,
            stream,
            include_usage,
            model,
            body,
        } = request;
        if let Some(conversation) = &mut self.conversation
            && !conversation.admits(provider, body)
        {
            return (
                Handling::Auxiliary,
                self.beside(provider, stream, model, body),
            );
        }
        if let Some(refusal) = &self.refused {
            return (
                Handling::Refused,
                Reply::json(400, &error_body(Some(provider), 400, refusal)),
            );
        }
        let Some(turn) = self.script.turns.get(self.next_turn) else {
            return self.beyond(provider, incoming);
        };
        let turn = match &self.script.roots {
            Some(roots) => served_in(roots, turn),
            None => turn.clone(),
        };
        if let Some(expect) = &turn.expect
            && let Some(refused) = self.check(provider, body, expect)
        {
            return refused;
        }
        let turn_index = self.next_turn;
        self.next_turn += 1;
        self.seq += 1;
        let named = model.clone();
        let ctx = Ctx {
            turn: &turn,
            model: turn.model.clone().unwrap_or(model),
            seq: self.seq,
        };
        let answer = match provider {
            Provider::Anthropic => anthropic::answer(&ctx, stream),
            Provider::OpenAiResponses => responses::answer(&ctx, stream),
            Provider::Gemini => gemini::answer(&ctx, stream),
            Provider::OpenAiChat => chat::answer(&ctx, stream, include_usage),
        };
        let events = match &answer {
            Answer::Stream(events) => events.clone(),
            Answer::Json(_) => Vec::new(),
        };
        if let Some(fault) = turn.fault {
            let why = format!("script turn {turn_index}");
            return (
                Handling::Turn(turn_index),
                fault_reply(provider, fault, &events, &why),
            );
        }
        self.bill(provider, named, turn.usage);
        let ids = vec![
            ("request-id", ctx.id("req")),
            ("x-request-id", ctx.id("req")),
        ];
        let reply = match answer {
            Answer::Stream(events) => Reply {
                status: 200,
                content_type: "text/event-stream",
                headers: ids,
                chunks: events.iter().map(SseEvent::encode).collect(),
                cut: false,
            },
            Answer::Json(body) => Reply {
                headers: ids,
                ..Reply::json(200, &body)
            },
        };
        (Handling::Turn(turn_index), reply)
    }

    /// The minimal answer to a generation request beside the conversation: a short text (or
    /// the smallest value of the JSON schema it asks for, `side`), no usage, in the API and
    /// form (stream or not) it asked for. Not billed, not matched.
    fn beside(
        &mut self,
        provider: Provider,
        stream: bool,
        model: String,
        body: Option<&Value>,
    ) -> Reply {
        self.seq += 1;
        let text = match body.and_then(|b| super::side::schema(provider, b)) {
            Some(schema) => super::side::answer(schema, self.script.recorded_model.as_deref()),
            None => "ok".to_owned(),
        };
        let turn = Turn {
            blocks: vec![Block::Text(text)],
            ..Turn::default()
        };
        let ctx = Ctx {
            turn: &turn,
            model,
            seq: self.seq,
        };
        let answer = match provider {
            Provider::Anthropic => anthropic::answer(&ctx, stream),
            Provider::OpenAiResponses => responses::answer(&ctx, stream),
            Provider::Gemini => gemini::answer(&ctx, stream),
            Provider::OpenAiChat => chat::answer(&ctx, stream, true),
        };
        match answer {
            Answer::Stream(events) => Reply {
                status: 200,
                content_type: "text/event-stream",
                headers: Vec::new(),
                chunks: events.iter().map(SseEvent::encode).collect(),
                cut: false,
            },
            Answer::Json(body) => Reply::json(200, &body),
        }
    }

    /// The answer to a generation request beyond the script's turns.
    fn beyond(&self, provider: Provider, incoming: &Incoming) -> (Handling, Reply) {
        match self.script.after_end {
            Some(fault) => (
                Handling::AfterEnd,
                fault_reply(provider, fault, &[], "the script's after_end fault"),
            ),
            None => {
                let message = format!(
                    "transcript-testkit model server: {} {} is generation request #{} but \
                     the script has only {} turn(s); extend the test's script",
                    incoming.method,
                    incoming.path,
                    self.generation_count() + 1,
                    self.script.turns.len()
                );
                (
                    Handling::Unscripted,
                    Reply::json(400, &error_body(Some(provider), 400, &message)),
                )
            }
        }
    }

    /// Checks the request against what its turn expects: under strict matching a mismatch is
    /// the refusal to answer, under fifo a warning kept.
    fn check(
        &mut self,
        provider: Provider,
        body: Option<&Value>,
        expect: &super::script::Expect,
    ) -> Option<(Handling, Reply)> {
        let found = mismatch::check(
            provider,
            body,
            expect,
            self.next_turn + 1,
            self.script.roots.as_ref(),
        )?;
        self.mismatches.push(found.clone());
        if self.script.matching != Matching::Strict {
            return None;
        }
        let message = format!("transcript replay: {found}");
        self.refused = Some(message.clone());
        Some((
            Handling::Refused,
            Reply::json(400, &error_body(Some(provider), 400, &message)),
        ))
    }

    /// Bills `usage` to `provider` for the request being handled, which named `model`.
    fn bill(&mut self, provider: Provider, model: String, usage: Usage) {
        *self.billed.entry(provider).or_default() += usage;
        self.bills.push(Bill {
            request: self.requests.len(),
            provider,
            model,
            usage,
        });
    }

    fn generation_count(&self) -> usize {
        self.requests.iter().filter(|r| r.is_generation()).count()
    }
}

/// `turn` as served in the replay's workspace: its texts and the strings of its tool-call
/// arguments name the new root.
fn served_in(roots: &crate::WorkspaceRoots, turn: &Turn) -> Turn {
    let blocks = turn
        .blocks
        .iter()
        .map(|b| match b {
            Block::Text(t) => Block::Text(roots.to_now(t).into_owned()),
            Block::Thinking { text, signature } => Block::Thinking {
                text: roots.to_now(text).into_owned(),
                signature: signature.clone(),
            },
            Block::ToolCall {
                id,
                name,
                arguments,
            } => Block::ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: roots.value_to_now(arguments),
            },
        })
        .collect();
    Turn {
        blocks,
        ..turn.clone()
    }
}

/// The reply for a fault; `events` is the full stream the cut truncates.
fn fault_reply(provider: Provider, fault: Fault, events: &[SseEvent], why: &str) -> Reply {
    match fault.status(provider) {
        None => {
            let n = match fault {
                Fault::CutAfterEvents(n) => n,
                _ => 0,
            };
            Reply {
                status: 200,
                content_type: "text/event-stream",
                headers: Vec::new(),
                chunks: events.iter().take(n).map(SseEvent::encode).collect(),
                cut: true,
            }
        }
        Some(status) => {
            let message = match fault {
                Fault::Overloaded => format!("Overloaded (transcript-testkit: {why})"),
                Fault::RateLimited => format!("Rate limit exceeded (transcript-testkit: {why})"),
                _ => format!("Internal server error (transcript-testkit: {why})"),
            };
            Reply::json(status, &error_body(Some(provider), status, &message))
        }
    }
}

fn error_body(provider: Option<Provider>, status: u16, message: &str) -> Value {
    match provider {
        Some(Provider::Anthropic) | None => anthropic::error_body(status, message),
        Some(Provider::OpenAiResponses | Provider::OpenAiChat) => {
            responses::error_body(status, message)
        }
        Some(Provider::Gemini) => gemini::error_body(status, message),
    }
}

/// One model in the shapes Anthropic, OpenAI and Gemini list models in (extra keys are ignored
/// by each client).
fn models_list() -> Value {
    let model = json!({
        "id": "testkit-model", "type": "model", "object": "model", "display_name": "testkit",
        "created": 0, "created_at": "1970-01-01T00:00:00Z", "owned_by": "transcript-testkit",
        "name": "models/testkit-model",
    });
    json!({"object": "list", "data": [model.clone()], "has_more": false,
        "first_id": "testkit-model", "last_id": "testkit-model", "models": [model]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::script::Turn;

    fn post(path: &str, body: Value) -> Incoming {
        Incoming {
            method: "POST".into(),
            path: path.into(),
            query: None,
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
        }
    }

    #[test]
    fn turns_are_consumed_in_order_billed_and_recorded() {
        let mut state = State::new(Script::new([
            Turn::text("a").with_usage(Usage::new(1, 2)),
            Turn::text("b").with_usage(Usage::new(3, 4)),
        ]));
        let r1 = state.handle(post("/v1/messages", json!({"stream": true})));
        assert_eq!(r1.status, 200);
        assert_eq!(r1.content_type, "text/event-stream");
        let aux = state.handle(post("/v1/messages/count_tokens", json!({})));
        assert_eq!(aux.status, 200);
        let r2 = state.handle(post("/v1/chat/completions", json!({})));
        assert_eq!(r2.status, 200);
        assert!(r2.chunks.concat().contains("chatcmpl_testkit_0002"));
        let r3 = state.handle(post("/v1/responses", json!({"stream": true})));
        assert_eq!(r3.status, 400);
        assert!(r3.chunks.concat().contains("only 2 turn(s)"));
        assert_eq!(state.billed(Provider::Anthropic), Usage::new(1, 2));
        assert_eq!(state.billed(Provider::OpenAiChat), Usage::new(3, 4));
        let handling: Vec<_> = state
            .requests()
            .iter()
            .map(|r| r.handling.clone())
            .collect();
        assert_eq!(
            handling,
            [
                Handling::Turn(0),
                Handling::Auxiliary,
                Handling::Turn(1),
                Handling::Unscripted
            ]
        );
    }

    #[test]
    fn faults_answer_provider_errors_and_bill_nothing() {
        let mut state = State::new(Script::new([
            Turn::text("x")
                .with_usage(Usage::new(5, 5))
                .with_fault(Fault::Overloaded),
            Turn::text("hello world")
                .with_usage(Usage::new(5, 5))
                .with_fault(Fault::CutAfterEvents(2)),
        ]));
        let r = state.handle(post("/v1/messages", json!({"stream": true})));
        assert_eq!(r.status, 529);
        assert!(r.chunks[0].contains("overloaded_error"));
        let r = state.handle(post("/v1/messages", json!({"stream": true})));
        assert_eq!((r.status, r.cut, r.chunks.len()), (200, true, 2));
        assert_eq!(state.billed(Provider::Anthropic), Usage::default());
    }

    #[test]
    fn always_failing_script_repeats_its_fault_in_each_providers_shape() {
        let mut state = State::new(Script::always(Fault::ServerError));
        for (path, marker) in [
            ("/v1/messages", "api_error"),
            ("/v1/responses", "server_error"),
            ("/v1beta/models/g:streamGenerateContent", "INTERNAL"),
        ] {
            let r = state.handle(post(path, json!({})));
            assert_eq!(r.status, 500);
            assert!(r.chunks[0].contains(marker), "{path}: {}", r.chunks[0]);
        }
        assert!(
            state
                .requests()
                .iter()
                .all(|r| r.handling == Handling::AfterEnd)
        );
        let r = state.handle(Incoming {
            method: "GET".into(),
            ..post("/nowhere", json!(null))
        });
        assert_eq!(r.status, 404);
    }

    fn replay_script(matching: Matching) -> Script {
        let expect = super::super::script::Expect {
            results: vec![super::super::script::ExpectedResult::new(
                "toolu_1",
                "recorded text",
            )],
        };
        Script {
            turns: vec![
                Turn::text("first"),
                Turn::text("second").with_expect(expect.clone()),
                Turn::text("third").with_expect(expect),
            ],
            matching,
            ..Script::default()
        }
    }

    fn sending(result: &str) -> Incoming {
        post(
            "/v1/messages",
            json!({"messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}]}),
        )
    }

    #[test]
    fn strict_matching_refuses_the_first_mismatch_and_everything_after_it() {
        let mut state = State::new(replay_script(Matching::Strict));
        assert_eq!(state.handle(sending("x")).status, 200);
        let refused = state.handle(sending("changed text"));
        assert_eq!(refused.status, 400);
        assert!(
            refused.chunks[0].contains("turn 2: the result of tool call toolu_1 (turn 1) differs"),
            "{}",
            refused.chunks[0]
        );
        // Even a request that now matches is refused: the replay has already diverged.
        assert_eq!(state.handle(sending("recorded text")).status, 400);
        assert_eq!(state.mismatches().len(), 1);
        assert_eq!(state.mismatches()[0].got.as_deref(), Some("changed text"));
        assert_eq!(state.turns_served(), 1);
    }

    #[test]
    fn fifo_matching_serves_in_order_and_keeps_each_mismatch() {
        let mut state = State::new(replay_script(Matching::Fifo));
        for result in ["x", "changed", "recorded text"] {
            assert_eq!(state.handle(sending(result)).status, 200);
        }
        assert_eq!(state.turns_served(), 3);
        assert_eq!(state.mismatches().len(), 1);
        assert_eq!(state.mismatches()[0].turn, 2);
        // Beyond the recording: refused whatever the matching.
        assert_eq!(state.handle(sending("recorded text")).status, 400);
    }

    #[test]
    fn a_refusing_script_refuses_every_generation_request_but_answers_side_requests() {
        let mut state = State::new(Script {
            refusal: Some("step x has no recorded execution".to_owned()),
            ..Script::default()
        });
        let r = state.handle(post("/v1/responses", json!({})));
        assert_eq!(r.status, 400);
        assert!(r.chunks[0].contains("no recorded execution"));
        let aux = state.handle(post("/v1/messages/count_tokens", json!({})));
        assert_eq!(aux.status, 200);
    }

    #[test]
    fn requests_beside_the_conversation_get_a_minimal_answer_and_consume_no_turn() {
        let mut script = replay_script(Matching::Strict);
        script.conversation = Some("Read notes.txt".to_owned());
        let mut state = State::new(script);
        let conversation = |extra: Vec<serde_json::Value>| {
            let mut messages = vec![json!({"role": "user", "content": "Read notes.txt"})];
            messages.extend(extra);
            post(
                "/v1/messages",
                json!({"system": "agent", "messages": messages}),
            )
        };
        let probe = post(
            "/v1/messages",
            json!({"system": "", "messages": [{"role": "user", "content": "quota"}]}),
        );
        let title = post(
            "/v1/messages",
            json!({"system": "Write a title", "messages": [{"role": "user", "content": "Read notes.txt"}]}),
        );
        let side = state.handle(probe);
        assert_eq!(side.status, 200);
        assert!(side.chunks[0].contains("\"ok\""), "{}", side.chunks[0]);
        let first = state.handle(conversation(vec![]));
        assert!(first.chunks.concat().contains("first"));
        assert_eq!(state.handle(title).status, 200);
        let result = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "recorded text"}]});
        let second = state.handle(conversation(vec![result]));
        assert!(
            second.chunks.concat().contains("second"),
            "{:?}",
            second.chunks
        );
        assert_eq!(state.turns_served(), 2);
        assert!(state.mismatches().is_empty());
        assert_eq!(state.bills().len(), 2);
        let handled: Vec<_> = state
            .requests()
            .iter()
            .map(|r| r.handling.clone())
            .collect();
        assert_eq!(
            handled,
            [
                Handling::Auxiliary,
                Handling::Turn(0),
                Handling::Auxiliary,
                Handling::Turn(1)
            ]
        );
    }
}
