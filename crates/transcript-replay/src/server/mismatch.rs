//! A request that does not carry what its turn expects: which turn, what differs, and the
//! first difference as expected / got and a unified diff of the text.

use std::fmt;

use serde_json::Value;

use super::record::{Provider, sent_results};
use super::script::Expect;

/// One difference between what a request carried and what the recording expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The turn the request asked for, from 1 (a prompt mismatch is turn 1).
    pub turn: usize,
    /// What differs, e.g. `the prompt` or `the result of tool call toolu_01 (turn 1)`.
    pub subject: String,
    /// The recorded text.
    pub expected: String,
    /// The text the replay produced (`None` when it sent none at all).
    pub got: Option<String>,
    /// The call ids of the results the request did send (`"?"` for one without an id).
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

/// Whether a result sent with call id `sent` answers the call recorded as `recorded`. Gemini
/// CLI names a call `<tool>__<id>` in its output but answers it with `<id>` alone.
fn same_call(provider: Provider, recorded: &str, sent: &str) -> bool {
    recorded == sent
        || (provider == Provider::Gemini
            && recorded
                .strip_suffix(sent)
                .is_some_and(|name| name.ends_with("__") && !name.contains('/')))
}

/// Whether a result sent in `provider`'s API carries the recorded `expected` text. Codex
/// (OpenAI Responses) sends its shell output under a header of its own (chunk id, wall time,
/// exit code, token count, `Output:`) while the transcript records the output alone: there the
/// sent text must end with the recorded one.
fn carries(provider: Provider, expected: &str, got: &str) -> bool {
    same_text(expected, got)
        || (provider == Provider::OpenAiResponses && got.trim_end().ends_with(expected.trim_end()))
}

/// The first expected result `body` does not carry equal, as a mismatch of `turn`.
pub(crate) fn check(
    provider: Provider,
    body: Option<&Value>,
    expect: &Expect,
    turn: usize,
) -> Option<Mismatch> {
    let sent = body.map(|b| sent_results(provider, b)).unwrap_or_default();
    let by_id = |id: &str| {
        sent.iter().find(|r| {
            r.id.as_deref()
                .is_some_and(|sent| same_call(provider, id, sent))
        })
    };
    // An API without ids (some Gemini answers) pairs the expected results no id matched with
    // the last id-less results sent, in order.
    let unmatched = expect
        .results
        .iter()
        .filter(|(id, _)| by_id(id).is_none())
        .count();
    let idless: Vec<_> = sent.iter().filter(|r| r.id.is_none()).collect();
    let mut by_position = idless
        .get(idless.len().saturating_sub(unmatched)..)
        .unwrap_or_default()
        .iter()
        .copied();
    for (id, expected) in &expect.results {
        let got = by_id(id).or_else(|| by_position.next());
        let subject = format!("the result of tool call {id} (turn {})", turn - 1);
        let sent_ids = || {
            sent.iter()
                .map(|r| r.id.clone().unwrap_or_else(|| "?".to_owned()))
                .collect()
        };
        match got {
            None => {
                return Some(Mismatch {
                    turn,
                    subject,
                    expected: expected.clone(),
                    got: None,
                    sent: sent_ids(),
                });
            }
            Some(r) if !carries(provider, expected, &r.text) => {
                return Some(Mismatch {
                    turn,
                    subject,
                    expected: expected.clone(),
                    got: Some(r.text.clone()),
                    sent: sent_ids(),
                });
            }
            Some(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(results: &[(&str, &str)]) -> Expect {
        Expect {
            results: results
                .iter()
                .map(|(i, t)| ((*i).to_owned(), (*t).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn equal_results_by_id_pass_and_history_is_ignored() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "old", "content": "x"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "hello\n"}]}]},
        ]});
        let e = expect(&[("t2", "hello")]);
        assert_eq!(check(Provider::Anthropic, Some(&body), &e, 3), None);
    }

    #[test]
    fn a_changed_result_names_the_turn_the_call_and_the_first_differing_line() {
        let body = json!({"input": [{"type": "function_call_output", "call_id": "c1", "output": "a\nB\nc"}]});
        let m = check(
            Provider::OpenAiResponses,
            Some(&body),
            &expect(&[("c1", "a\nb\nc")]),
            2,
        )
        .expect("a mismatch");
        assert_eq!(m.turn, 2);
        assert_eq!(m.first_difference(), ("b".to_owned(), "B".to_owned()));
        let text = m.to_string();
        assert!(
            text.starts_with(
                "turn 2: the result of tool call c1 (turn 1) differs: expected \"b\", got \"B\""
            ),
            "{text}"
        );
        assert!(text.contains("--- recorded\n+++ replay\n"), "{text}");
        assert!(text.contains("\n-b\n+B\n"), "{text}");
    }

    #[test]
    fn codex_results_must_end_with_the_recorded_output() {
        let sent = |output: &str| {
            json!({"input": [{"type": "function_call_output", "call_id": "item_0",
                "output": format!("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n{output}")}]})
        };
        let e = expect(&[("item_0", "line one\nline two\n")]);
        let equal = sent("line one\nline two\n");
        assert_eq!(check(Provider::OpenAiResponses, Some(&equal), &e, 2), None);
        let changed = sent("line one\nline 2\n");
        assert!(check(Provider::OpenAiResponses, Some(&changed), &e, 2).is_some());
        // Only Codex's API gets the header allowance.
        let chat = json!({"messages": [{"role": "tool", "tool_call_id": "item_0",
            "content": "header\nline one\nline two\n"}]});
        assert!(check(Provider::OpenAiChat, Some(&chat), &e, 2).is_some());
    }

    #[test]
    fn a_missing_result_is_reported_missing() {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
        let m = check(Provider::Gemini, Some(&body), &expect(&[("g1", "out")]), 2).unwrap();
        assert_eq!(m.got, None);
        assert!(m.to_string().contains("is missing"), "{m}");
    }

    #[test]
    fn gemini_results_are_read_from_the_response_output_by_id_or_position() {
        let body = json!({"contents": [{"role": "user", "parts": [
            {"functionResponse": {"id": "g1", "name": "read_file", "response": {"output": "file text"}}},
            {"functionResponse": {"name": "ls", "response": {"error": "denied"}}},
        ]}]});
        let e = expect(&[("g1", "file text"), ("other", "denied")]);
        assert_eq!(check(Provider::Gemini, Some(&body), &e, 2), None);
        // Gemini CLI records `<tool>__<id>` and answers with `<id>`.
        let e = expect(&[("read_file__g1", "file text"), ("ls__x", "denied")]);
        assert_eq!(check(Provider::Gemini, Some(&body), &e, 2), None);
    }
}
