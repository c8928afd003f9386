//! The signal dispositions a process inherited: which signals it started with ignored
//! (`nohup` ignores `SIGHUP`, a shell's `trap '' HUP` too). Ignored dispositions survive
//! `exec`; a runner that installs a handler for such a signal would undo what its caller
//! asked for (#59 item 10: `nohup transcript run …` cancelled by the hangup it was told to
//! ignore).
//!
//! Read from `/proc/self/status` (`SigIgn:`, a hexadecimal mask whose bit `N-1` is signal
//! `N`): a plain file read, no `sigaction` call (which has no safe wrapper that only reads).
//! Linux only, like the rest of the process handling.

/// The ignored-signal mask of the `SigIgn:` line of a `/proc/PID/status` text, if it has one.
pub fn ignored_mask(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    u64::from_str_radix(line.trim(), 16).ok()
}

/// Whether `signal` (1–64) is in `mask`.
pub fn in_mask(mask: u64, signal: i32) -> bool {
    match u32::try_from(signal) {
        Ok(n @ 1..=64) => mask & (1u64 << (n - 1)) != 0,
        _ => false,
    }
}

/// Whether this process ignores `signal` now (read before any handler is installed, this is
/// the disposition it inherited). `false` when `/proc` cannot say.
pub fn is_ignored(signal: i32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| ignored_mask(&s))
        .is_some_and(|mask| in_mask(mask, signal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mask_is_read_from_the_status_text() {
        let status = "Name:\tsh\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000001\n";
        let mask = ignored_mask(status);
        assert_eq!(mask, Some(1));
        assert!(mask.is_some_and(|m| in_mask(m, 1)));
        assert!(!in_mask(1, 15));
        assert!(in_mask(1 << 14, 15));
        assert!(!in_mask(u64::MAX, 0) && !in_mask(u64::MAX, 65));
        assert_eq!(ignored_mask("Name:\tsh\n"), None);
        assert_eq!(ignored_mask("SigIgn:\tzz\n"), None);
    }

    #[test]
    fn this_process_reads_its_own_dispositions() {
        // The test harness ignores nothing it could not also not ignore: only check that
        // the read works and SIGKILL (never ignorable) is not reported.
        assert!(!is_ignored(9));
    }
}
