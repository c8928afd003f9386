//! A live Gemini CLI run's turns, with the model and usage of each taken from the CLI's own
//! session file (#41 item 9).
//!
//! Gemini CLI's `stream-json` names no model per turn (its `init` says `auto` when the CLI
//! routes) and reports usage once, per model, in its final `result.stats.models`: a turn
//! cannot be billed from the stream alone. The CLI's session file
//! (`<home>/.gemini/tmp/<project>/chats/session-…-<id8>.jsonl`, [`crate::gemini_chats`])
//! holds each `gemini` message with the model that answered it and the tokens billed for it.
//! A runner holds the stream's turns until the CLI exits, finds the file by the session id
//! of the stream's `init` ([`gemini_session_id`]) and passes both to
//! [`gemini_turns_from_session`].
//!
//! The stream's turns and the file's messages are matched one to one, in order, and only
//! when they agree (same count, same tool call ids, same text): each turn keeps the stream's
//! blocks, gets the file's usage, its request identity (the message id, decision 17) and its
//! thinking (the stream has none) first. Models are matched by token sums, not by name (#51):
//! the file names the model the CLI asked for, the stream's per-model totals the one that
//! answered (`modelVersion`, which differs for a `-latest` alias); each turn is named after
//! the stream model whose total covers the sums of its file model's messages. What the
//! stream's per-model totals bill beyond the file's messages (Gemini CLI's routing
//! classifier call, which is no message) becomes a usage-only turn per model, so the run's
//! totals stay the stream's. Anything that does not agree is a [`SessionMismatch`]: the
//! caller keeps the stream's turns.

use transcript_domain::{BlockBody, ContentBlock, MessagePayload, RawJson, Role, Usage};

use crate::output::{Diagnostic, DiagnosticKind, Output};
use crate::registry::Provider;

/// The session id a Gemini CLI `stream-json` `init` record announced: the detail of its
/// [`DiagnosticKind::Metadata`] diagnostic (record `init`); `None` for any other diagnostic.
pub fn gemini_session_id(d: &Diagnostic) -> Option<&str> {
    (d.kind == DiagnosticKind::Metadata && d.record == "init" && !d.detail.is_empty())
        .then_some(d.detail.as_str())
}

/// Why a session file cannot give the stream's turns their model and usage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionMismatch {
    /// The file's first record names another session (or none).
    #[error("the session file is session '{found}', not '{expected}'")]
    OtherSession {
        /// The stream's session id.
        expected: String,
        /// The file's (empty when it names none).
        found: String,
    },
    /// The file has another number of model messages with content than the stream has turns.
    #[error("the session file has {file} model message(s), the stream {stream} turn(s)")]
    TurnCount {
        /// Messages with content in the file.
        file: usize,
        /// Turns with content in the stream.
        stream: usize,
    },
    /// A file message and the stream's turn at the same place differ (tool call ids or text).
    #[error("model message {0} of the session file differs from the stream's turn")]
    TurnContent(usize),
    /// The file bills a model more of a count than the stream's total for that model.
    #[error("the session file bills {model} more {count} than the stream's total")]
    Exceeds {
        /// The model.
        model: String,
        /// The count (`input_tokens`, …).
        count: &'static str,
    },
}

/// The stream's turns (`stream`, in order, as the normalizer emitted them) with the model
/// and usage of each from the session file `session` of session `session_id` (see the module
/// docs): the content turns, then a usage-only turn per model for the file's messages
/// without content and for what the stream's totals bill beyond the file.
pub fn gemini_turns_from_session(
    stream: &[MessagePayload],
    session_id: &str,
    session: &[u8],
) -> Result<Vec<MessagePayload>, SessionMismatch> {
    let found = file_session_id(session).unwrap_or_default();
    if found != session_id {
        return Err(SessionMismatch::OtherSession {
            expected: session_id.to_owned(),
            found,
        });
    }
    let file: Vec<MessagePayload> = crate::normalize(Provider::Gemini, session)
        .into_iter()
        .filter_map(|o| match o {
            Output::Turn(m) => Some(m),
            _ => None,
        })
        .collect();
    let (file_content, file_bare): (Vec<_>, Vec<_>) =
        file.into_iter().partition(|m| !m.blocks.is_empty());
    let content: Vec<&MessagePayload> = stream.iter().filter(|m| !m.blocks.is_empty()).collect();
    if content.len() != file_content.len() {
        return Err(SessionMismatch::TurnCount {
            file: file_content.len(),
            stream: content.len(),
        });
    }
    let mut out = Vec::with_capacity(stream.len() + 2);
    for (i, (s, f)) in content.iter().zip(&file_content).enumerate() {
        if signature(s) != signature(f) {
            return Err(SessionMismatch::TurnContent(i));
        }
        // Gemini CLI's stream-json carries no thoughts: the file's come first, as they did.
        let thinking = f
            .blocks
            .iter()
            .filter(|b| matches!(b.body, BlockBody::Thinking { .. }))
            .filter(|_| {
                !s.blocks
                    .iter()
                    .any(|b| matches!(b.body, BlockBody::Thinking { .. }))
            });
        out.push(MessagePayload {
            blocks: thinking
                .cloned()
                .chain(s.blocks.iter().map(|b| with_file_result(b, f)))
                .collect(),
            model: f.model.clone().or_else(|| s.model.clone()),
            usage: f.usage.clone(),
            request_id: f.request_id.clone(),
            ..(*s).clone()
        });
    }
    out.extend(file_bare.iter().cloned());
    answered_by(stream, &mut out);
    let remainders = remainders(stream, out.iter())?;
    out.extend(remainders.into_iter().map(|(model, usage)| MessagePayload {
        role: Role::Assistant,
        blocks: Vec::new(),
        provider: Some(Provider::Gemini.name().to_owned()),
        model,
        usage: Some(usage),
        request_id: None,
    }));
    Ok(out)
}

/// A stream block, its tool result taken from the file's message `file` when the stream's is
/// empty (#49 item 5: Gemini CLI's `stream-json` carries an empty `output` for a successful
/// `read_file`, while its session file holds the result in `functionResponse.response.output`).
fn with_file_result(block: &ContentBlock, file: &MessagePayload) -> ContentBlock {
    let BlockBody::ToolResult {
        tool_id,
        tool_content,
    } = &block.body
    else {
        return block.clone();
    };
    if !is_empty_content(tool_content) {
        return block.clone();
    }
    let found = file.blocks.iter().find_map(|b| match &b.body {
        BlockBody::ToolResult {
            tool_id: id,
            tool_content,
        } if id == tool_id && !is_empty_content(tool_content) => Some(tool_content),
        _ => None,
    });
    match found {
        Some(content) => ContentBlock {
            body: BlockBody::ToolResult {
                tool_id: tool_id.clone(),
                tool_content: content.clone(),
            },
            ..block.clone()
        },
        None => block.clone(),
    }
}

/// `null` or `""`.
fn is_empty_content(content: &RawJson) -> bool {
    content.is_null() || content.get() == "\"\""
}

/// Renames the file's models to the ones that answered, by token sums, not by name: the
/// file names the model the CLI asked for (an alias such as `…-latest`), the stream's
/// per-model totals the one that answered (the API's `modelVersion`). Each model the file
/// names takes the stream model of the same name when there is one; else, of the stream
/// models no file message names, the one with the largest total whose counts cover the
/// sums of that model's messages (the routing classifier's small total is left to its own
/// usage-only turn). Without stream usage, or without a covering model, the file's names stay
/// (and [`remainders`] says what does not agree).
fn answered_by(stream: &[MessagePayload], turns: &mut [MessagePayload]) {
    let mut totals: Vec<(Option<String>, Usage)> = Vec::new();
    for m in stream {
        if let Some(u) = &m.usage {
            add(&mut totals, &m.model, u);
        }
    }
    let mut sums: Vec<(Option<String>, Usage)> = Vec::new();
    for m in turns.iter() {
        if let Some(u) = &m.usage {
            add(&mut sums, &m.model, u);
        }
    }
    let named = |model: &Option<String>| totals.iter().any(|(k, _)| k == model);
    let mut taken: Vec<Option<String>> = sums
        .iter()
        .filter(|(k, _)| named(k))
        .map(|(k, _)| k.clone())
        .collect();
    let mut renames: Vec<(Option<String>, Option<String>)> = Vec::new();
    for (model, sum) in sums.iter().filter(|(k, _)| !named(k)) {
        let best = totals
            .iter()
            .filter(|(k, total)| !taken.contains(k) && covers(total, sum))
            .max_by_key(|(_, total)| tokens(total));
        if let Some((answered, _)) = best {
            taken.push(answered.clone());
            renames.push((model.clone(), answered.clone()));
        }
    }
    for m in turns.iter_mut() {
        if let Some((_, to)) = renames.iter().find(|(from, _)| *from == m.model) {
            m.model = to.clone();
        }
    }
}

/// Whether `total` has at least `sum` of every count `sum` has.
fn covers(total: &Usage, sum: &Usage) -> bool {
    COUNTS.iter().all(|(_, get, _)| match get(sum) {
        Some(n) if n > 0 => get(total).is_some_and(|t| t >= n),
        _ => true,
    })
}

/// The sum of a usage's token counts.
fn tokens(u: &Usage) -> u64 {
    COUNTS
        .iter()
        .map(|(_, get, _)| get(u).unwrap_or(0))
        .fold(0, u64::saturating_add)
}

/// The `sessionId` of the file's first record (a `.jsonl` file's first line, or an older
/// whole-document `.json` file).
fn file_session_id(session: &[u8]) -> Option<String> {
    let first = session.split(|b| *b == b'\n').next().unwrap_or_default();
    let record: serde_json::Value = serde_json::from_slice(first)
        .or_else(|_| serde_json::from_slice(session))
        .ok()?;
    record["sessionId"].as_str().map(str::to_owned)
}

/// What must agree between a stream turn and a file message: its tool call ids and its text.
fn signature(m: &MessagePayload) -> (Vec<&str>, String) {
    let mut ids = Vec::new();
    let mut text = String::new();
    for b in &m.blocks {
        match &b.body {
            BlockBody::ToolUse { tool_id, .. } => ids.push(tool_id.as_str()),
            BlockBody::Text { text: t } => text.push_str(t),
            _ => {}
        }
    }
    (ids, text)
}

type Count = (
    &'static str,
    fn(&Usage) -> Option<u64>,
    fn(&mut Usage) -> &mut Option<u64>,
);

/// The token counts a remainder is computed for.
const COUNTS: [Count; 5] = [
    ("input_tokens", |u| u.input_tokens, |u| &mut u.input_tokens),
    (
        "output_tokens",
        |u| u.output_tokens,
        |u| &mut u.output_tokens,
    ),
    (
        "cache_read_tokens",
        |u| u.cache_read_tokens,
        |u| &mut u.cache_read_tokens,
    ),
    (
        "cache_write_tokens",
        |u| u.cache_write_tokens,
        |u| &mut u.cache_write_tokens,
    ),
    (
        "reasoning_tokens",
        |u| u.reasoning_tokens,
        |u| &mut u.reasoning_tokens,
    ),
];

/// Per model, in order of first appearance in the stream: the stream's usage minus what
/// `billed` already carries; only models with something left. Nothing when the stream has
/// no usage (a run cut before its `result`: the file's messages are all there is).
fn remainders<'a>(
    stream: &[MessagePayload],
    billed: impl Iterator<Item = &'a MessagePayload>,
) -> Result<Vec<(Option<String>, Usage)>, SessionMismatch> {
    let mut totals: Vec<(Option<String>, Usage)> = Vec::new();
    for m in stream {
        if let Some(u) = &m.usage {
            add(&mut totals, &m.model, u);
        }
    }
    if totals.is_empty() {
        return Ok(Vec::new());
    }
    for m in billed {
        let Some(u) = &m.usage else { continue };
        let name = || m.model.clone().unwrap_or_default();
        let Some((_, left)) = totals.iter_mut().find(|(k, _)| *k == m.model) else {
            return Err(SessionMismatch::Exceeds {
                model: name(),
                count: "of any count",
            });
        };
        for (count, get, slot) in COUNTS {
            let Some(n) = get(u).filter(|n| *n > 0) else {
                continue;
            };
            let have = slot(left);
            match have.and_then(|h| h.checked_sub(n)) {
                Some(rest) => *have = Some(rest),
                None => {
                    return Err(SessionMismatch::Exceeds {
                        model: name(),
                        count,
                    });
                }
            }
        }
    }
    Ok(totals
        .into_iter()
        .filter(|(_, u)| {
            COUNTS
                .iter()
                .any(|(_, get, _)| get(u).is_some_and(|n| n > 0))
        })
        .collect())
}

/// Adds `usage` to `model`'s total.
fn add(totals: &mut Vec<(Option<String>, Usage)>, model: &Option<String>, usage: &Usage) {
    match totals.iter_mut().find(|(k, _)| k == model) {
        Some((_, total)) => total.accumulate(usage),
        None => totals.push((model.clone(), usage.clone())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const STREAM: &str = r#"{"type":"init","session_id":"s-1","model":"auto"}
{"type":"tool_use","tool_name":"read_file","tool_id":"t1","parameters":{}}
{"type":"tool_result","tool_id":"t1","status":"success","output":"x"}
{"type":"message","role":"assistant","content":"Done.","delta":true}
{"type":"result","status":"success","stats":{"total_tokens":130,"input_tokens":120,"output_tokens":10,"cached":0,"models":{"pro":{"total_tokens":130,"input_tokens":120,"output_tokens":10,"cached":0}}}}"#;

    fn stream() -> (Vec<MessagePayload>, String) {
        let mut turns = Vec::new();
        let mut id = String::new();
        for o in crate::normalize(Provider::Gemini, STREAM.as_bytes()) {
            match o {
                Output::Turn(m) => turns.push(m),
                Output::Diagnostic(d) => {
                    if let Some(s) = gemini_session_id(&d) {
                        id = s.to_owned();
                    }
                }
                _ => {}
            }
        }
        (turns, id)
    }

    fn file(session: &str, call: &str, text: &str, input: u64) -> String {
        format!(
            "{{\"sessionId\":\"{session}\",\"projectHash\":\"h\"}}\n\
             {{\"id\":\"a\",\"type\":\"gemini\",\"content\":\"\",\"model\":\"pro\",\
             \"thoughts\":[{{\"subject\":\"S\",\"description\":\"D\"}}],\
             \"tokens\":{{\"input\":50,\"output\":4}},\"toolCalls\":[{{\"id\":\"{call}\",\
             \"name\":\"read_file\",\"args\":{{}}}}]}}\n\
             {{\"id\":\"b\",\"type\":\"gemini\",\"content\":\"{text}\",\"model\":\"pro\",\
             \"tokens\":{{\"input\":{input},\"output\":6}}}}\n"
        )
    }

    #[test]
    fn the_init_names_the_session_and_matching_turns_take_the_files_model_and_usage() {
        let (turns, id) = stream();
        assert_eq!(id, "s-1");
        let out = gemini_turns_from_session(&turns, &id, file("s-1", "t1", "Done.", 70).as_bytes())
            .unwrap();
        let got: Vec<_> = out
            .iter()
            .map(|m| {
                (
                    m.model.as_deref(),
                    m.usage.as_ref().and_then(|u| u.input_tokens),
                )
            })
            .collect();
        assert_eq!(got, [(Some("pro"), Some(50)), (Some("pro"), Some(70))]);
        // The file's thinking (the stream has none) comes first in its turn.
        assert!(
            matches!(&out[0].blocks[0].body, BlockBody::Thinking { thinking } if thinking == "S\nD")
        );
        assert_eq!(out[0].blocks.len(), turns[0].blocks.len() + 1);
    }

    #[test]
    fn an_empty_stream_result_is_taken_from_the_files_function_response() {
        let empty = STREAM.replace(r#""output":"x""#, r#""output":"""#);
        let mut turns = Vec::new();
        for o in crate::normalize(Provider::Gemini, empty.as_bytes()) {
            if let Output::Turn(m) = o {
                turns.push(m);
            }
        }
        let with_result = file("s-1", "t1", "Done.", 70).replace(
            r#""args":{}}"#,
            r#""args":{},"status":"success","result":[{"functionResponse":{"id":"t1","name":"read_file","response":{"output":"file text\n"}}}]}"#,
        );
        let out = gemini_turns_from_session(&turns, "s-1", with_result.as_bytes()).unwrap();
        let results: Vec<&str> = out[0]
            .blocks
            .iter()
            .filter_map(|b| match &b.body {
                BlockBody::ToolResult { tool_content, .. } => Some(tool_content.get()),
                _ => None,
            })
            .collect();
        assert_eq!(results, [r#""file text\n""#]);
        // A result the stream did carry is kept as the stream carried it.
        let (kept, _) = stream();
        let out = gemini_turns_from_session(&kept, "s-1", with_result.as_bytes()).unwrap();
        assert!(out[0].blocks.iter().any(
            |b| matches!(&b.body, BlockBody::ToolResult { tool_content, .. } if tool_content.get() == r#""x""#)
        ));
    }

    #[test]
    fn a_file_that_does_not_agree_is_refused() {
        let (turns, id) = stream();
        let refused = |f: String| gemini_turns_from_session(&turns, &id, f.as_bytes()).unwrap_err();
        assert!(matches!(
            refused(file("s-2", "t1", "Done.", 70)),
            SessionMismatch::OtherSession { .. }
        ));
        assert_eq!(
            refused(file("s-1", "t9", "Done.", 70)),
            SessionMismatch::TurnContent(0)
        );
        assert_eq!(
            refused(file("s-1", "t1", "Other.", 70)),
            SessionMismatch::TurnContent(1)
        );
        assert_eq!(
            refused(file("s-1", "t1", "Done.", 71)),
            SessionMismatch::Exceeds {
                model: "pro".into(),
                count: "input_tokens"
            }
        );
        assert!(matches!(
            refused("{\"sessionId\":\"s-1\"}\n".into()),
            SessionMismatch::TurnCount { file: 0, stream: 2 }
        ));
    }

    #[test]
    fn a_run_cut_before_its_result_takes_the_files_usage_alone() {
        let (turns, id) = stream();
        let cut: Vec<MessagePayload> = turns
            .into_iter()
            .map(|m| MessagePayload { usage: None, ..m })
            .collect();
        let out = gemini_turns_from_session(&cut, &id, file("s-1", "t1", "Done.", 99).as_bytes())
            .unwrap();
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].usage.as_ref().and_then(|u| u.input_tokens), Some(99));
    }

    /// #51: the file names the requested alias (`pro`), the stream's totals the version that
    /// answered and the classifier: the turns take the answering model's name by sums, the
    /// classifier keeps a usage-only turn, and each turn carries its file message id.
    #[test]
    fn the_model_that_answered_is_found_by_sums_not_by_name() {
        let stream_text = STREAM.replace(
            r#""models":{"pro":{"total_tokens":130,"input_tokens":120,"output_tokens":10,"cached":0}}"#,
            r#""models":{"lite":{"total_tokens":20,"input_tokens":19,"output_tokens":1,"cached":0},"pro-002":{"total_tokens":130,"input_tokens":120,"output_tokens":10,"cached":0}}"#,
        );
        assert_ne!(stream_text, STREAM);
        let mut turns = Vec::new();
        for o in crate::normalize(Provider::Gemini, stream_text.as_bytes()) {
            if let Output::Turn(m) = o {
                turns.push(m);
            }
        }
        let out =
            gemini_turns_from_session(&turns, "s-1", file("s-1", "t1", "Done.", 70).as_bytes())
                .unwrap();
        let got: Vec<_> = out
            .iter()
            .map(|m| {
                (
                    m.model.as_deref(),
                    m.usage.as_ref().and_then(|u| u.input_tokens),
                    m.request_id.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("pro-002"), Some(50), Some("a")),
                (Some("pro-002"), Some(70), Some("b")),
                (Some("lite"), Some(19), None),
            ]
        );
        // Sums the answering model cannot cover still do not agree.
        assert_eq!(
            gemini_turns_from_session(&turns, "s-1", file("s-1", "t1", "Done.", 71).as_bytes())
                .unwrap_err(),
            SessionMismatch::Exceeds {
                model: "pro".into(),
                count: "of any count"
            }
        );
    }
}
