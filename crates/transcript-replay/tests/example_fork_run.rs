//! `examples/fork_run.rs` (#61 item 5) runs as documented: the recording's `plan` is served
//! from the tape (the live server sees one request per trial), the trials' report names the
//! one trial whose answer differs as diverging at `answer`, and the money adds up: three live
//! parts of the recording's live price each, the replayed prefix saved three times.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn the_fork_example_serves_the_prefix_and_reports_the_trials() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "run",
            "-q",
            "-p",
            "transcript-replay",
            "--example",
            "fork_run",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("the live server answered 3 requests"),
        "{text}"
    );
    assert!(
        text.contains("passed 3 of 3 (pass^3: yes); forked at answer"),
        "{text}"
    );
    assert!(
        text.contains("first divergence: answer ×1, same as recorded ×2"),
        "{text}"
    );
    assert_eq!(
        text.matches("diverged at step answer turn 2 (turns[1].blocks[0].text)")
            .count(),
        1,
        "{text}"
    );
    // gpt-4o-mini at LiteLLM's embedded prices: 60,000 input tokens and 1 or 3 output tokens
    // live per trial ($0.0090 each), 40,000 + 600 for the served plan ($0.0064 a trial).
    assert!(
        text.contains("cost: trials' live parts $0.0270 (the recording's live part $0.0090); the replayed prefix saved $0.0191"),
        "{text}"
    );
}
