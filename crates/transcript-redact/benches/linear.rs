//! Masking work is linear in the text (issue #39 item 8): for adversarial
//! texts (every rule's worst shape repeated: overlapping `password=`
//! assignments that each run to the end, PEM blocks with no END line,
//! bearer tokens, URL credentials, keys split by colour codes, URL-encoded
//! keys, thousands of keys and masks), the time to mask a text of
//! [`transcript_domain::MAX_LINE_BYTES`] against a quarter of it, measured in
//! the same run. Linear work gives a ratio near 4; quadratic, near 16. A
//! ratio above [`CEILING`] is a `MISS` (exit 1). Prose of the same size, and
//! its ratio, are printed as the baseline. Best of [`RUNS`] runs each.
//! Run with `cargo bench -p transcript-redact --bench linear` (or
//! `cargo xtask bench`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use transcript_domain::MAX_LINE_BYTES;
use transcript_redact::Redactor;

const RUNS: usize = 3;
/// Linear is 4 (a quarter of the text in a quarter of the time); noise and
/// cache effects stay well under 8; quadratic is 16.
const CEILING: f64 = 8.0;

/// `unit` repeated to `len` bytes (cut at a character boundary).
fn repeated(unit: &str, len: usize) -> String {
    let mut s = unit.repeat(len / unit.len() + 1);
    let mut cut = len;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

fn cases() -> Vec<(&'static str, String)> {
    let key = "sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp";
    let encoded: String = key.bytes().map(|b| format!("%{b:02X}")).collect();
    vec![
        (
            "prose (baseline)",
            "The quick brown fox jumps over the lazy dog; nothing here is secret. ".to_owned(),
        ),
        ("password= overlapping", "password=".to_owned()),
        (
            "quoted password overlapping",
            "password='passwd: '".to_owned(),
        ),
        (
            "PEM without END",
            "-----BEGIN PRIVATE KEY-----\n".to_owned(),
        ),
        ("bearer tokens", "Bearer Bearer ".to_owned()),
        ("URL credentials", "a://u:a://u:".to_owned()),
        ("keys and masks", format!("{key} …(12 chars) ")),
        (
            "keys split by colour codes",
            "sk-ant-\x1b[01;31m\x1b[Kapi03-AAAA\x1b[m\x1b[KBBBBCCCCDDDDEEEE ".to_owned(),
        ),
        ("URL-encoded keys", format!("{encoded}%20")),
        ("folded key lines", format!("{key}\nABCDEFGHIJ\n")),
    ]
}

fn best(redactor: &Redactor, text: &str) -> Duration {
    (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let masked = redactor.mask_text(text);
            let took = start.elapsed();
            std::hint::black_box(masked);
            took
        })
        .min()
        .unwrap()
}

fn main() {
    let redactor = Redactor::builtin();
    let full = MAX_LINE_BYTES;
    println!(
        "{:<30} {:>12} {:>12} {:>7}",
        "text", "1/4 size", "full size", "ratio"
    );
    let mut missed = Vec::new();
    for (name, unit) in cases() {
        let quarter = best(&redactor, &repeated(&unit, full / 4));
        let whole = best(&redactor, &repeated(&unit, full));
        let ratio = whole.as_secs_f64() / quarter.as_secs_f64().max(1e-9);
        let verdict = if ratio <= CEILING { "ok" } else { "MISS" };
        println!(
            "{name:<30} {:>10.1}ms {:>10.1}ms {ratio:>7.2} {verdict}",
            quarter.as_secs_f64() * 1e3,
            whole.as_secs_f64() * 1e3,
        );
        if ratio > CEILING {
            missed.push(name);
        }
    }
    println!("full size: {full} bytes (MAX_LINE_BYTES); linear ≈ 4, quadratic ≈ 16");
    if !missed.is_empty() {
        eprintln!("MISS: super-linear masking for {missed:?}");
        std::process::exit(1);
    }
}
