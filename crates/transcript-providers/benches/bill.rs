//! Billing throughput (issue #29 item 4): ~100 MB of real Claude Code session logs (the
//! `spotter-session-log-*` captures of `$TRANSCRIPT_REAL_FIXTURES`, repeated with fresh
//! session, message and request ids) normalized and billed (usage per request, summed per
//! model and priced with the embedded table), against a plain serde_json pass over the same
//! bytes measured in the same run (every line parsed to a `Value`, usage kept per
//! `message.id` + `requestId`, last record wins, and summed). Both sides must agree on the
//! totals; the ratio must stay ≥ 0.5× (printed `ok` or `MISS`, exit 1 on a miss). Peak
//! memory (VmHWM) is printed too. Run with `cargo bench -p transcript-providers --bench bill`
//! (or `cargo xtask bench`).
#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use transcript_domain::Usage;
use transcript_providers::{Output, Pricing, Provider};

#[path = "support/claude_copies.rs"]
mod claude_copies;

const TARGET: usize = 100 * 1000 * 1000;
const FLOOR: f64 = 0.5;

/// Input, output, cache read, cache write.
type Totals = [u64; 4];

fn add(t: &mut Totals, u: &Usage) {
    t[0] += u.input_tokens.unwrap_or(0);
    t[1] += u.output_tokens.unwrap_or(0);
    t[2] += u.cache_read_tokens.unwrap_or(0);
    t[3] += u.cache_write_tokens.unwrap_or(0);
}

/// The baseline: serde_json `Value` per line, last usage per request, summed.
fn plain_pass(files: &[String]) -> Totals {
    let mut total = [0; 4];
    for f in files {
        let mut per_request: HashMap<(String, String), [u64; 4]> = HashMap::new();
        for line in f.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["type"] != "assistant" {
                continue;
            }
            let u = &v["message"]["usage"];
            if u.is_null() {
                continue;
            }
            let key = (
                v["message"]["id"].as_str().unwrap_or_default().to_owned(),
                v["requestId"].as_str().unwrap_or_default().to_owned(),
            );
            let n = |k: &str| u[k].as_u64().unwrap_or(0);
            per_request.insert(
                key,
                [
                    n("input_tokens"),
                    n("output_tokens"),
                    n("cache_read_input_tokens"),
                    n("cache_creation_input_tokens"),
                ],
            );
        }
        for u in per_request.values() {
            for i in 0..4 {
                total[i] += u[i];
            }
        }
    }
    total
}

/// Ours: normalize each file, bill each turn, sum per model, price per model.
fn bill(files: &[String], pricing: &Pricing) -> (Totals, f64) {
    let mut total = [0; 4];
    let mut per_model: BTreeMap<String, f64> = BTreeMap::new();
    let mut out = Vec::new();
    for f in files {
        let mut n = Provider::Claude.normalizer();
        for chunk in f.as_bytes().chunks(64 * 1024) {
            n.feed(chunk, &mut out);
            take(&mut out, &mut total, &mut per_model, pricing);
        }
        n.finish(&mut out);
        take(&mut out, &mut total, &mut per_model, pricing);
    }
    (total, per_model.values().sum())
}

fn take(
    out: &mut Vec<Output>,
    total: &mut Totals,
    per_model: &mut BTreeMap<String, f64>,
    pricing: &Pricing,
) {
    for o in out.drain(..) {
        if let Output::Turn(m) = o
            && let Some(u) = &m.usage
        {
            add(total, u);
            let model = m.model.as_deref().unwrap_or("(none)");
            let cost = pricing.cost(model, u).map_or(0.0, |c| c.usd);
            *per_model.entry(model.to_owned()).or_default() += cost;
        }
    }
}

fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn main() {
    let Some(root) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        println!("bill bench skipped: TRANSCRIPT_REAL_FIXTURES is not set");
        return;
    };
    let mut root = PathBuf::from(root);
    if root.is_relative() {
        root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(root);
    }
    let logs: Vec<String> = claude_copies::LOGS
        .iter()
        .map(|l| std::fs::read_to_string(root.join(l)).unwrap())
        .collect();
    let mut files = Vec::new();
    let bytes = claude_copies::copies(&logs, TARGET, |_, _, f| files.push(f));
    let pricing = Pricing::embedded();
    let (mut base, mut ours) = (Duration::MAX, Duration::MAX);
    let (mut want, mut got, mut cost) = ([0; 4], [0; 4], 0.0);
    // Alternating, best of 5, so load from other processes affects both sides alike.
    for _ in 0..5 {
        let t = Instant::now();
        want = plain_pass(&files);
        base = base.min(t.elapsed());
        let t = Instant::now();
        (got, cost) = bill(&files, pricing);
        ours = ours.min(t.elapsed());
    }
    assert_eq!(
        got, want,
        "billed totals differ from the plain pass (input, output, cache read, cache write)"
    );
    let mb = bytes as f64 / 1e6;
    let ratio = base.as_secs_f64() / ours.as_secs_f64();
    println!(
        "bill: {} files, {mb:.1} MB; plain serde_json pass {:.0} ms ({:.0} MB/s); normalize + bill + price {:.0} ms ({:.0} MB/s); ratio {ratio:.2}x (floor {FLOOR}x): {}",
        files.len(),
        base.as_secs_f64() * 1e3,
        mb / base.as_secs_f64(),
        ours.as_secs_f64() * 1e3,
        mb / ours.as_secs_f64(),
        if ratio >= FLOOR { "ok" } else { "MISS" }
    );
    println!(
        "bill: totals input {} output {} cache read {} cache write {}, ${cost:.2}; peak memory {} MiB (inputs held in memory: {mb:.0} MB)",
        got[0],
        got[1],
        got[2],
        got[3],
        peak_rss_kib().map_or("?".to_owned(), |k| (k / 1024).to_string())
    );
    if ratio < FLOOR {
        std::process::exit(1);
    }
}
