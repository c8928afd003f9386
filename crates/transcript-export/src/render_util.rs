//! Helpers shared by the Markdown and HTML renderers.

use serde_json::Value;
use transcript_domain::Usage;

/// Human-readable duration.
pub fn duration(ms: Option<i64>) -> String {
    match ms {
        None => "—".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms} ms"),
        Some(ms) if ms < 60_000 => format!("{:.2} s", ms as f64 / 1000.0),
        Some(ms) => format!("{} min {:02} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// `1200 in / 85 out / 1000 cache read / $0.0123`.
pub fn usage_line(u: &Usage) -> String {
    let mut parts = Vec::new();
    if let Some(n) = u.input_tokens {
        parts.push(format!("{n} in"));
    }
    if let Some(n) = u.output_tokens {
        parts.push(format!("{n} out"));
    }
    if let Some(n) = u.cache_read_tokens {
        parts.push(format!("{n} cache read"));
    }
    if let Some(n) = u.cache_write_tokens {
        parts.push(format!("{n} cache write"));
    }
    if let Some(n) = u.reasoning_tokens {
        parts.push(format!("{n} reasoning"));
    }
    if let Some(c) = u.cost_usd {
        parts.push(format!("${c:.4}"));
    }
    parts.join(" / ")
}

/// Escapes `& < > " '` for HTML text and double- or single-quoted
/// attribute values (the maintained escaper of `pulldown-cmark`).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Writing to a String cannot fail.
    let _ = pulldown_cmark_escape::escape_html(&mut out, text);
    out
}

/// A token count, `—` when unknown.
pub fn count(v: Option<u64>) -> String {
    v.map_or("—".to_owned(), |v| v.to_string())
}

/// US dollars to four decimals, `—` when unknown (never $0 for a missing price).
pub fn usd(c: Option<f64>) -> String {
    c.map_or("—".to_owned(), |c| format!("${c:.4}"))
}

/// The cost of a priced run, step or model that reported `usage`: `$0.1603`, or `—` when a
/// model has no price, with what the CLI reported itself beside it
/// (`$0.1603 (the CLI reported $0.1700)`). `None` for an unpriced document or no usage.
pub fn cost_note(priced: bool, cost: Option<f64>, usage: Option<&Usage>) -> Option<String> {
    let usage = usage.filter(|_| priced)?;
    Some(match usage.cost_usd {
        Some(reported) => format!("{} (the CLI reported ${reported:.4})", usd(cost)),
        None => usd(cost),
    })
}

/// The tokens of a model's line in a cost section: [`usage_line`] without the reported
/// cost (shown by [`cost_note`] beside the priced one), `—` when none.
pub fn model_tokens(u: &Usage) -> String {
    let tokens = usage_line(&Usage {
        cost_usd: None,
        ..u.clone()
    });
    if tokens.is_empty() {
        "—".to_owned()
    } else {
        tokens
    }
}

/// What a command step wrote to its standard error (wire decision 21: `stderr` in its
/// `result`, absent when it wrote none), for a step of `kind` with `result`.
pub fn command_stderr<'a>(kind: &str, result: Option<&'a Value>) -> Option<&'a Value> {
    result
        .filter(|_| kind == "command")?
        .get("stderr")
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
}
