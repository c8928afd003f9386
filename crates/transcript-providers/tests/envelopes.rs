//! The envelope rules against the captures they document (`fixtures/envelopes/`): each
//! capture, stripped by its CLI's rule, is the tool's output alone.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use transcript_providers::Provider;
use transcript_providers::envelope::strip_tool_result;

fn capture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/envelopes")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn claude_codes_tokens_left_reminder_comes_off_a_read_result() {
    let sent = capture("claude-sonnet-4-5-read-tokens-left.txt");
    assert!(sent.contains("tokens left"));
    assert_eq!(
        strip_tool_result(Provider::Claude, &sent),
        "1\tthe launch code is 7-alpha-tango\n2\tsecond line of notes\n3"
    );
}

#[test]
fn codexs_shell_header_comes_off_its_output() {
    let sent = capture("codex-exec-command-output.txt");
    assert_eq!(
        strip_tool_result(Provider::Codex, &sent),
        "the launch code is 7-alpha-tango\nsecond line of notes\n"
    );
    // Another CLI's rule leaves it as sent.
    assert_eq!(strip_tool_result(Provider::Claude, &sent), sent);
}
