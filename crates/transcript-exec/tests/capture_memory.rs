//! A command's captured output holds at most the cap in memory, measured
//! by the OS: the process's peak resident set (`VmHWM`) while a command
//! prints 50 MB must grow by far less than 50 MB. The test is alone in its
//! binary so no other test's allocations move the peak.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use tokio_util::sync::CancellationToken;
use transcript_exec::ProcessLimits;

use support::*;

const FIFTY_MB: usize = 50_000_000;

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib * 1024
}

#[tokio::test]
async fn capture_memory_is_bounded_by_the_cap() {
    let (_d, ws) = workspace();
    let limits = ProcessLimits {
        max_output_bytes: 64 * 1024,
        ..ProcessLimits::default()
    };
    // Reset the peak to the current resident set (Linux >= 4.0).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_bytes("VmRSS");
    let out = transcript_exec::tools::run_shell_with(
        &format!("head -c {FIFTY_MB} /dev/zero | tr '\\0' b; head -c 3000000 /dev/zero >&2"),
        &ws,
        &CancellationToken::new(),
        limits,
    )
    .await
    .unwrap();
    let grown = status_bytes("VmHWM").saturating_sub(before);
    // Holding the output would take at least 50 MB; the 64 KiB caps, the
    // 64 KiB read buffers and the runtime's own needs take a few MB at most.
    assert!(
        grown < 16 << 20,
        "peak resident set grew by {grown} bytes while a command printed {FIFTY_MB}"
    );
    assert!(out.stdout.len() <= 64 * 1024, "{}", out.stdout.len());
    assert!(out.stderr.len() <= 64 * 1024, "{}", out.stderr.len());
    assert!(
        out.stdout
            .contains(&format!("[truncated: {FIFTY_MB} bytes"))
    );
    assert!(out.stderr.contains("[truncated: 3000000 bytes"));
    eprintln!("peak resident set grew by {grown} bytes");
}
