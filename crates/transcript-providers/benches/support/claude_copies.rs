//! Real Claude Code session logs copied to any size with fresh ids: the input of the `bill`
//! bench (in memory) and of `cargo xtask bench-cli` (as a `~/.claude/projects` store on disk),
//! one generator for both (the bench includes it as a module, xtask by `#[path]`).
//!
//! The `spotter-session-log-*` captures of `$TRANSCRIPT_REAL_FIXTURES` are repeated; every copy
//! gets its number in its `msg_` and `req_` ids and its `sessionId`, so each copy is other API
//! requests in another session (one request, one bill: a copy never merges with another).

/// The captures copied, relative to `$TRANSCRIPT_REAL_FIXTURES`.
pub const LOGS: [&str; 3] = [
    "claude-code/spotter-session-log-v2.1.38-short.jsonl",
    "claude-code/spotter-session-log-v2.1.38-subagent.jsonl",
    "claude-code/spotter-session-log-v2.1.38-tool_heavy.jsonl",
];

/// `log` with the copy number `copy` in its `msg_`, `req_` and session ids.
pub fn fresh_ids(log: &str, copy: usize) -> String {
    log.replace("\"msg_", &format!("\"msg_c{copy}_"))
        .replace("\"req_", &format!("\"req_c{copy}_"))
        .replace("\"sessionId\":\"", &format!("\"sessionId\":\"c{copy}-"))
}

/// Copies of `logs` (whole rounds of every log, so the mix stays that of the captures) until
/// at least `target` bytes: calls `each(copy, index in logs, text)` per copy and returns the
/// bytes produced.
pub fn copies(logs: &[String], target: usize, mut each: impl FnMut(usize, usize, String)) -> usize {
    let mut bytes = 0;
    let mut copy = 0;
    while bytes < target && !logs.is_empty() {
        for (i, log) in logs.iter().enumerate() {
            let text = fresh_ids(log, copy);
            bytes += text.len();
            each(copy, i, text);
        }
        copy += 1;
    }
    bytes
}
