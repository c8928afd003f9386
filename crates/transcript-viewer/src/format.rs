//! How numbers and values read on the pages: durations, money, query values.

use std::fmt::Write as _;

/// `1.2s`, `3m04s`, `—`.
pub fn duration(ms: Option<i64>) -> String {
    match ms {
        None => "—".to_owned(),
        Some(ms) if ms < 1000 => format!("{ms}ms"),
        Some(ms) if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        Some(ms) => format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// `$0.0123`, or `—` for an unknown cost.
pub fn usd(cost: Option<f64>) -> String {
    cost.map_or("—".to_owned(), |c| format!("${c:.4}"))
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn pct(value: &str) -> String {
    let mut out = String::new();
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
