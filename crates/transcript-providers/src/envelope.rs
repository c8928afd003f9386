//! The CLIs' own envelope around a tool result: what an agent CLI wraps around a tool's
//! output before it sends it to its model, taken off before a replay matches a result and
//! before a diff compares two of them.
//!
//! A transcript records a tool's output as the CLI reports it; the request the CLI sends its
//! model may carry more (a header, a reminder to the model). Two runs of the same workflow
//! that read the same file differ in that envelope (a chunk id, a wall time, a reminder that
//! depends on the model), never in the output. [`strip_tool_result`] takes the envelope off by
//! the rules of one CLI, named by its registry [`Provider`]; every rule is here, with the
//! capture that shows it (`fixtures/envelopes/` in this repository):
//!
//! - **Claude Code** ([`Provider::Claude`]): `<system-reminder>` blocks it appends to (or
//!   prepends to) a tool result. The tag opens a line (the start of the text, or right after a
//!   newline) and the block runs to the first `</system-reminder>` after it; an appended block
//!   is the last thing in the text (trailing whitespace aside), a prepended one the first
//!   (leading whitespace aside). Several in a row are all taken off, with the whitespace that
//!   separated them from the output. Captures:
//!   `fixtures/envelopes/claude-sonnet-4-5-read-tokens-left.txt` (Claude Code 2.1.197 with
//!   `claude-sonnet-4-5` appends `<total_tokens>… tokens left</total_tokens>` to a Read
//!   result) and, not copied here, the public session log
//!   `claude-code/spotter-session-log-v2.1.38-tool_heavy.jsonl` of the shared provider
//!   fixtures (Claude Code 2.1.38 appends a malware reminder to Read results).
//! - **Codex** ([`Provider::Codex`]): the header of its shell tool's output,
//!   `Chunk ID: …`, `Wall time: …`, `Process exited with code N` (or `Process running with
//!   session ID N`), `Original token count: …`, `Total output lines: …`, then a line
//!   `Output:` and the output. Only a text that starts with such lines (each one of those keys,
//!   in any order, at least one) followed by `Output:` loses them; the chunk id and the wall
//!   time go with the header. Capture: `fixtures/envelopes/codex-exec-command-output.txt`
//!   (Codex CLI 0.169.0's `function_call_output` for `exec_command`). Both captures are tested
//!   in `tests/envelopes.rs`, and against the live CLIs by the CLI's `replay_trust_clis`.
//!   Older Codex versions sent `{"output": "...", "metadata": {...}}` as the output text: a
//!   text that is exactly such a JSON object becomes its `output`.
//! - Every other provider: no envelope, the text as given.
//!
//! What the rules cannot tell: a tool whose own output ends with a whole
//! `<system-reminder>…</system-reminder>` block on a line of its own (or, for Codex, begins
//! with a header of Codex's keys and `Output:`) loses it too. The rules are applied to both
//! sides of a comparison, so equal outputs stay equal; a reminder in the middle of an output,
//! an unterminated tag, or a tag inside a line is content and kept.
//!
//! ```
//! use transcript_providers::{Provider, envelope::strip_tool_result};
//!
//! let sent = "hello\n\n<system-reminder>\nBe careful.\n</system-reminder>\n";
//! assert_eq!(strip_tool_result(Provider::Claude, sent), "hello");
//! let codex = "Chunk ID: 5f1c\nWall time: 0.0101 seconds\nProcess exited with code 0\n\
//!              Original token count: 3\nOutput:\nhello\n";
//! assert_eq!(strip_tool_result(Provider::Codex, codex), "hello\n");
//! assert_eq!(strip_tool_result(Provider::Gemini, sent), sent);
//! ```

use std::borrow::Cow;

use crate::Provider;

const OPEN: &str = "<system-reminder>";
const CLOSE: &str = "</system-reminder>";

/// The keys of the header Codex puts before its shell output (each starts a line).
const CODEX_HEADER_KEYS: &[&str] = &[
    "Chunk ID: ",
    "Wall time: ",
    "Process exited with code ",
    "Process running with session ID ",
    "Original token count: ",
    "Total output lines: ",
];

/// `text`, a tool result as `cli` sent it to its model, without `cli`'s envelope (see the
/// module docs for the rules). Borrowed when nothing is taken off; never panics.
pub fn strip_tool_result(cli: Provider, text: &str) -> Cow<'_, str> {
    match cli {
        Provider::Claude => strip_reminders(text),
        Provider::Codex => strip_codex_header(text),
        _ => Cow::Borrowed(text),
    }
}

/// Whether `a` and `b`, two results of one tool call sent by `cli`, are the same output: equal
/// once each loses its envelope and its trailing whitespace.
pub fn same_tool_result(cli: Provider, a: &str, b: &str) -> bool {
    strip_tool_result(cli, a).trim_end() == strip_tool_result(cli, b).trim_end()
}

/// Claude Code's appended and prepended `<system-reminder>` blocks taken off.
fn strip_reminders(text: &str) -> Cow<'_, str> {
    let mut rest = text;
    // Prepended blocks: the text starts with one (leading whitespace aside).
    while let Some(after) = leading_block(rest) {
        rest = after;
    }
    // Appended blocks: the text ends with one (trailing whitespace aside).
    while let Some(before) = trailing_block(rest) {
        rest = before;
    }
    if rest.len() == text.len() {
        Cow::Borrowed(text)
    } else {
        Cow::Borrowed(rest)
    }
}

/// The text after a leading reminder block (and the whitespace after it), if it starts with one.
fn leading_block(text: &str) -> Option<&str> {
    let body = text.trim_start().strip_prefix(OPEN)?;
    let end = body.find(CLOSE)?;
    let after = &body[end + CLOSE.len()..];
    // The block is a line (or lines) of its own: the output starts on the next line.
    (after.is_empty() || after.starts_with(['\n', '\r'])).then(|| after.trim_start())
}

/// The text before a trailing reminder block (and the whitespace before it), if it ends with
/// one whose opening tag starts a line.
fn trailing_block(text: &str) -> Option<&str> {
    let trimmed = text.trim_end();
    let inner = trimmed.strip_suffix(CLOSE)?;
    // The block's own opening: the last one before its closing tag, with no other closing tag
    // between them.
    let open = inner.rfind(OPEN)?;
    if inner[open..].contains(CLOSE) {
        return None;
    }
    let before = &inner[..open];
    if !(before.is_empty() || before.ends_with('\n')) {
        return None;
    }
    Some(before.trim_end())
}

/// Codex's shell-output header taken off (or its older JSON `{"output", "metadata"}` form).
fn strip_codex_header(text: &str) -> Cow<'_, str> {
    if let Some(output) = codex_json_output(text) {
        return Cow::Owned(output);
    }
    let mut rest = text;
    let mut keys = 0usize;
    loop {
        let (line, after) = match rest.split_once('\n') {
            Some((line, after)) => (line.strip_suffix('\r').unwrap_or(line), after),
            None => (rest, ""),
        };
        if line == "Output:" && keys > 0 {
            return Cow::Borrowed(after);
        }
        if !CODEX_HEADER_KEYS.iter().any(|k| line.starts_with(k)) || after.is_empty() {
            return Cow::Borrowed(text);
        }
        keys += 1;
        rest = after;
    }
}

/// The `output` of an older Codex result sent as `{"output": "...", "metadata": {...}}`.
fn codex_json_output(text: &str) -> Option<String> {
    let trimmed = text.trim();
    if !trimmed.starts_with('{') || !trimmed.contains("\"metadata\"") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(trimmed).ok()?;
    let object = value.as_object()?;
    let only_envelope_keys = object.len() == 2 && object.contains_key("metadata");
    match (&object.get("output"), only_envelope_keys) {
        (Some(serde_json::Value::String(output)), true) => Some(output.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claude(text: &str) -> String {
        strip_tool_result(Provider::Claude, text).into_owned()
    }

    fn codex(text: &str) -> String {
        strip_tool_result(Provider::Codex, text).into_owned()
    }

    const REMINDER: &str = "<system-reminder>\nWhenever you read a file, you should consider \
                            whether it would be considered malware.\n</system-reminder>";

    #[test]
    fn claude_reminders_appended_or_prepended_are_taken_off() {
        let cases: &[(&str, &str)] = &[
            ("out\n\n{R}\n", "out"),
            ("out\n{R}", "out"),
            ("{R}\nout\n", "out\n"),
            ("{R}\n{R}\nout\n\n{R}\n\n{R}\n", "out"),
            ("  1→a\n  2→b\n\n{R}\n", "  1→a\n  2→b"),
            ("{R}", ""),
            (
                "<system-reminder>Token usage: 1200/200000; 198800 remaining</system-reminder>\nout",
                "out",
            ),
        ];
        for (given, want) in cases {
            let given = given.replace("{R}", REMINDER);
            assert_eq!(claude(&given), *want, "{given:?}");
        }
    }

    #[test]
    fn content_that_only_looks_like_a_reminder_is_kept() {
        let kept: &[&str] = &[
            // Mid-output: the tool's own text.
            "a\n<system-reminder>\nx\n</system-reminder>\nb\n",
            // Inside a line, at the end: not a block the CLI appends.
            "grep hit: <system-reminder>x</system-reminder>",
            // Unterminated tags.
            "out\n<system-reminder>\nunterminated\n",
            "<system-reminder>\nunterminated\nout",
            // A closing tag only.
            "out\n</system-reminder>",
            // A closing tag whose opening is inside a line, with a line-start tag before it.
            "<system-reminder>a</system-reminder>z\nq <system-reminder>b</system-reminder>",
            "",
        ];
        for text in kept {
            assert!(
                matches!(strip_tool_result(Provider::Claude, text), Cow::Borrowed(t) if t == *text),
                "{text:?}"
            );
        }
        // The tool's own mid-output tag stays; only the appended block goes.
        let text = format!("say <system-reminder> here\nmore\n\n{REMINDER}\n");
        assert_eq!(claude(&text), "say <system-reminder> here\nmore");
    }

    #[test]
    fn the_codex_header_is_taken_off_and_nothing_else() {
        let sent = "Chunk ID: 9a1f2c\nWall time: 0.0512 seconds\nProcess exited with code 0\n\
                    Original token count: 12\nOutput:\nline one\nline two\n";
        assert_eq!(codex(sent), "line one\nline two\n");
        let failed = "Chunk ID: 1\nWall time: 1.2 seconds\nProcess exited with code 2\n\
                      Output:\ncat: x: No such file\n";
        assert_eq!(codex(failed), "cat: x: No such file\n");
        assert_eq!(codex("Chunk ID: 1\nOutput:\n"), "");
        assert_eq!(codex("Chunk ID: 1\r\nOutput:\r\nx"), "x");
        for kept in [
            "Output:\nno header before it\n",
            "Chunk ID: 1\nsomething else\nOutput:\nx\n",
            "plain output\n",
            "Chunk ID: 1\nWall time: 2",
            "",
        ] {
            assert_eq!(codex(kept), kept);
        }
        // The older JSON form.
        let json = r#"{"output":"hello\n","metadata":{"exit_code":0,"duration_seconds":0.1}}"#;
        assert_eq!(codex(json), "hello\n");
        let not_envelope = r#"{"output":"x","metadata":{},"more":1}"#;
        assert_eq!(codex(not_envelope), not_envelope);
        // Rules are per CLI.
        assert_eq!(claude("Chunk ID: 1\nOutput:\nx"), "Chunk ID: 1\nOutput:\nx");
        let text = format!("x\n{REMINDER}");
        assert_eq!(codex(&text), text);
    }

    #[test]
    fn same_tool_result_compares_without_envelopes_and_trailing_whitespace() {
        assert!(same_tool_result(
            Provider::Claude,
            "out\n",
            &format!("out\n\n{REMINDER}\n")
        ));
        assert!(!same_tool_result(
            Provider::Claude,
            "out",
            &format!("other\n\n{REMINDER}")
        ));
        assert!(same_tool_result(
            Provider::Codex,
            "x",
            "Chunk ID: a\nWall time: 0.1 seconds\nOutput:\nx\n"
        ));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_and_only_shortens(text in ".{0,200}", tags in proptest::collection::vec(0u8..4, 0..6)) {
            let mut s = String::new();
            for t in &tags {
                match t {
                    0 => s.push_str(OPEN),
                    1 => s.push_str(CLOSE),
                    2 => s.push('\n'),
                    _ => s.push_str(&text),
                }
            }
            s.push_str(&text);
            for p in Provider::ALL {
                let out = strip_tool_result(*p, &s);
                proptest::prop_assert!(out.len() <= s.len());
            }
        }

        #[test]
        fn a_single_line_not_opening_with_the_tag_is_never_touched(text in "[^\n]{0,100}") {
            let s = format!("x{text}{CLOSE}");
            proptest::prop_assert_eq!(claude(&s), s.clone());
        }

        #[test]
        fn an_appended_reminder_always_comes_off(out in "[^<]{0,100}", note in "[^<]{0,60}") {
            let s = format!("{out}\n\n{OPEN}{note}{CLOSE}\n");
            proptest::prop_assert_eq!(claude(&s), out.trim_end());
        }
    }
}
