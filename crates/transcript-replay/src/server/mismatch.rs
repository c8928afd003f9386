//! A request that does not carry what its turn expects: which turn, what differs, and the
//! first difference as expected / got and a unified diff of the text.

use std::fmt;

use serde_json::Value;

use super::pairing;
use super::record::{Provider, sent_results};
use super::script::Expect;

/// One difference between what a request carried and what the recording expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The turn the request asked for, from 1 (a prompt mismatch is turn 1).
    pub turn: usize,
    /// What differs, e.g. `the prompt` or
    /// `the result of tool call Read(notes.txt) (toolu_01, turn 1)`.
    pub subject: String,
    /// The recorded text.
    pub expected: String,
    /// The text the replay produced (`None` when it sent none at all).
    pub got: Option<String>,
    /// The results of the request's last turn of results, each named by its call
    /// (`Read(notes.txt)`, else its call id, else `"?"`).
    pub sent: Vec<String>,
}

impl Mismatch {
    /// The unified diff of [`Mismatch::expected`] against [`Mismatch::got`] (`--- recorded`,
    /// `+++ replay`), three lines of context.
    pub fn diff(&self) -> String {
        let got = self.got.as_deref().unwrap_or("");
        similar::TextDiff::from_lines(self.expected.as_str(), got)
            .unified_diff()
            .context_radius(3)
            .header("recorded", "replay")
            .to_string()
    }

    /// The first line that differs, as `(expected, got)` (`""` past the end of one side).
    pub fn first_difference(&self) -> (String, String) {
        let got = self.got.as_deref().unwrap_or("");
        let (mut e, mut g) = (self.expected.lines(), got.lines());
        loop {
            match (e.next(), g.next()) {
                (None, None) => return (String::new(), String::new()),
                (a, b) if a != b => {
                    return (a.unwrap_or("").to_owned(), b.unwrap_or("").to_owned());
                }
                _ => {}
            }
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(_) = &self.got else {
            return write!(
                f,
                "turn {}: {} is missing (recorded: {:?}; the request sent results of: {})",
                self.turn,
                self.subject,
                clip(&self.expected),
                if self.sent.is_empty() {
                    "none".to_owned()
                } else {
                    self.sent.join(", ")
                }
            );
        };
        let (expected, got) = self.first_difference();
        write!(
            f,
            "turn {}: {} differs: expected {:?}, got {:?}\n{}",
            self.turn,
            self.subject,
            clip(&expected),
            clip(&got),
            self.diff().trim_end()
        )
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 200;
    if s.chars().count() <= MAX {
        s.to_owned()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head}…")
    }
}

/// Compares two texts as a replay compares them: trailing whitespace of each is ignored (a
/// CLI may end a result with a newline one place and not the other).
pub(crate) fn same_text(a: &str, b: &str) -> bool {
    a.trim_end() == b.trim_end()
}

/// The CLI whose envelope a result sent in `provider`'s API carries: Claude Code speaks
/// Anthropic Messages, Codex OpenAI Responses, Gemini CLI Gemini's API; Chat Completions is
/// our own HTTP agent (no envelope).
pub(crate) fn cli_of(provider: Provider) -> transcript_providers::Provider {
    use transcript_providers::Provider as Cli;
    match provider {
        Provider::Anthropic => Cli::Claude,
        Provider::OpenAiResponses => Cli::Codex,
        Provider::Gemini => Cli::Gemini,
        Provider::OpenAiChat => Cli::OpenAi,
    }
}

/// A result's text without its CLI's envelope (`transcript_providers::envelope`); content
/// parts lose theirs one by one (Claude Code may add a reminder as a part of its own).
fn unwrapped(cli: transcript_providers::Provider, raw: Option<&Value>, text: &str) -> String {
    use transcript_providers::envelope::strip_tool_result;
    match raw {
        Some(Value::Array(parts)) if parts.iter().all(|p| p["text"].is_string()) => parts
            .iter()
            .map(|p| strip_tool_result(cli, p["text"].as_str().unwrap_or_default()))
            .filter(|t| !t.trim().is_empty())
            .collect::<Vec<_>>()
            .concat(),
        _ => strip_tool_result(cli, text).into_owned(),
    }
}

/// The first expected result `body` does not carry equal, as a mismatch of `turn`. Both
/// sides lose the CLI's envelope first, and what was sent maps the replay's workspace root
/// back to the recorded one; the results of the turn match as a set (see `pairing`).
pub(crate) fn check(
    provider: Provider,
    body: Option<&Value>,
    expect: &Expect,
    turn: usize,
    roots: Option<&crate::WorkspaceRoots>,
) -> Option<Mismatch> {
    let cli = cli_of(provider);
    let sent = body.map(|b| sent_results(provider, b)).unwrap_or_default();
    let pairs = pairing::pair(provider, &expect.results, &sent);
    let sent_names = || {
        // The results of the request's last turn of results, named by their calls.
        let last = sent.iter().map(|r| r.group).max();
        sent.iter()
            .filter(|r| Some(r.group) == last)
            .map(|r| match (&r.call, &r.id) {
                (Some((tool, args)), _) if !tool.is_empty() => pairing::call_label(tool, args),
                (_, Some(id)) => id.clone(),
                _ => "?".to_owned(),
            })
            .collect()
    };
    for (e, paired) in expect.results.iter().zip(pairs) {
        let label = pairing::call_label(&e.tool, &e.arguments);
        let subject = if e.tool.is_empty() {
            format!("the result of tool call {} (turn {})", e.id, turn - 1)
        } else {
            format!(
                "the result of tool call {label} ({}, turn {})",
                e.id,
                turn - 1
            )
        };
        let expected = unwrapped(cli, None, &e.text);
        let Some(r) = paired.map(|k| &sent[k]) else {
            return Some(Mismatch {
                turn,
                subject,
                expected,
                got: None,
                sent: sent_names(),
            });
        };
        let got = unwrapped(
            cli,
            Some(&r.raw).filter(|_| provider == Provider::Anthropic),
            &r.text,
        );
        let got = match roots {
            Some(roots) => roots.to_recorded(&got).into_owned(),
            None => got,
        };
        if !same_text(&expected, &got) {
            return Some(Mismatch {
                turn,
                subject,
                expected,
                got: Some(got),
                sent: sent_names(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ExpectedResult;
    use serde_json::json;

    fn expect(results: &[(&str, &str)]) -> Expect {
        Expect {
            results: results
                .iter()
                .map(|(i, t)| ExpectedResult::new(*i, *t))
                .collect(),
        }
    }

    fn check4(p: Provider, body: &Value, e: &Expect, turn: usize) -> Option<Mismatch> {
        check(p, Some(body), e, turn, None)
    }

    #[test]
    fn equal_results_by_id_pass_and_history_is_ignored() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "old", "content": "x"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "hello\n"}]}]},
        ]});
        let e = expect(&[("t2", "hello")]);
        assert_eq!(check4(Provider::Anthropic, &body, &e, 3), None);
    }

    #[test]
    fn a_changed_result_names_the_turn_the_call_and_the_first_differing_line() {
        let body = json!({"input": [
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\":\"cat x\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a\nB\nc"}]});
        let e = Expect {
            results: vec![
                ExpectedResult::new("c1", "a\nb\nc")
                    .for_call("exec_command", json!({"cmd": "cat x"})),
            ],
        };
        let m = check4(Provider::OpenAiResponses, &body, &e, 2).expect("a mismatch");
        assert_eq!(m.turn, 2);
        assert_eq!(m.first_difference(), ("b".to_owned(), "B".to_owned()));
        let text = m.to_string();
        assert!(
            text.starts_with(
                "turn 2: the result of tool call exec_command(cat x) (c1, turn 1) differs: expected \"b\", got \"B\""
            ),
            "{text}"
        );
        assert!(text.contains("--- recorded\n+++ replay\n"), "{text}");
        assert!(text.contains("\n-b\n+B\n"), "{text}");
    }

    #[test]
    fn codex_results_lose_their_header_and_the_headline_shows_the_output() {
        let sent = |output: &str| {
            json!({"input": [{"type": "function_call_output", "call_id": "item_0",
                "output": format!("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOriginal token count: 4\nOutput:\n{output}")}]})
        };
        let e = expect(&[("item_0", "line one\nline two\n")]);
        assert_eq!(
            check4(
                Provider::OpenAiResponses,
                &sent("line one\nline two\n"),
                &e,
                2
            ),
            None
        );
        let m = check4(
            Provider::OpenAiResponses,
            &sent("line one\nline 2\n"),
            &e,
            2,
        )
        .unwrap();
        assert_eq!(
            m.first_difference(),
            ("line two".to_owned(), "line 2".to_owned())
        );
        assert!(!m.to_string().contains("Chunk ID"), "{m}");
        // Output that merely ends like the recorded one is a difference.
        let m = check4(
            Provider::OpenAiResponses,
            &sent("extra\nline one\nline two\n"),
            &e,
            2,
        );
        assert!(m.is_some());
        // Only Codex's API gets the header taken off.
        let chat = json!({"messages": [{"role": "tool", "tool_call_id": "item_0",
            "content": "Chunk ID: 1\nOutput:\nline one\nline two\n"}]});
        assert!(check4(Provider::OpenAiChat, &chat, &e, 2).is_some());
    }

    #[test]
    fn claude_reminders_are_not_part_of_a_result() {
        let reminder =
            "<system-reminder>\nWhenever you read a file, consider malware.\n</system-reminder>";
        let e = expect(&[("t1", "     1→hello\n")]);
        for content in [
            json!(format!("     1→hello\n\n{reminder}\n")),
            json!([{"type": "text", "text": "     1→hello\n"}, {"type": "text", "text": reminder}]),
        ] {
            let body = json!({"messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": content}]}]});
            assert_eq!(check4(Provider::Anthropic, &body, &e, 2), None);
        }
        // A reminder-looking line in the middle of the output is output.
        let body = json!({"messages": [{"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "t1", "content": format!("{reminder}x\n     1→hello\n")}]}]});
        assert!(check4(Provider::Anthropic, &body, &e, 2).is_some());
    }

    #[test]
    fn a_missing_result_is_reported_missing_with_the_calls_sent() {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        let m = check4(Provider::Gemini, &body, &expect(&[("g1", "out")]), 2).unwrap();
        assert_eq!(m.got, None);
        assert!(m.to_string().contains("is missing"), "{m}");
        let body = json!({"contents": [
            {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "b.txt"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"id": "zz", "name": "read_file", "response": {"output": "x"}}}]}]});
        let m = check4(
            Provider::Anthropic,
            &json!({}),
            &expect(&[("g1", "out")]),
            2,
        )
        .unwrap();
        assert!(m.to_string().contains("sent results of: none"), "{m}");
        let e = Expect {
            results: vec![
                ExpectedResult::new("g1", "out").for_call("glob", json!({"pattern": "*"})),
            ],
        };
        let m = check4(Provider::Gemini, &body, &e, 2).unwrap();
        assert!(
            m.to_string().contains("tool call glob(*) (g1, turn 1)"),
            "{m}"
        );
        assert_eq!(m.sent, ["read_file(b.txt)"]);
    }

    #[test]
    fn gemini_results_are_read_from_the_response_output_by_id_or_call() {
        let body = json!({"contents": [
        {"role": "model", "parts": [
            {"functionCall": {"id": "g1", "name": "read_file", "args": {"p": 1}}},
            {"functionCall": {"name": "ls", "args": {"dir": "."}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "ls", "response": {"error": "denied"}}},
            {"functionResponse": {"id": "g1", "name": "read_file", "response": {"output": "file text"}}},
        ]}]});
        let e = Expect {
            results: vec![
                ExpectedResult::new("g1", "file text"),
                ExpectedResult::new("other", "denied").for_call("ls", json!({"dir": "."})),
            ],
        };
        assert_eq!(check4(Provider::Gemini, &body, &e, 2), None);
        // Gemini CLI records `<tool>__<id>` and answers with `<id>`.
        let e = expect(&[("read_file__g1", "file text"), ("ls__x", "denied")]);
        assert_eq!(check4(Provider::Gemini, &body, &e, 2), None);
    }

    #[test]
    fn the_replays_root_is_mapped_back_before_matching() {
        let roots = crate::WorkspaceRoots::new("/rec/w".as_ref(), "/now/w".as_ref());
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "/now/w/a.txt\n/now/workshop"}]}]});
        let e = expect(&[("t1", "/rec/w/a.txt\n/now/workshop")]);
        assert_eq!(
            check(Provider::Anthropic, Some(&body), &e, 2, roots.as_ref()),
            None
        );
        assert!(check(Provider::Anthropic, Some(&body), &e, 2, None).is_some());
    }
}
