//! One measured run of a sequence of processes: wall time from the first spawn to the last
//! exit, and the peak resident set of their process trees.
//!
//! The peak is the largest `VmHWM` of any process of the trees (what `getrusage`'s
//! `RUSAGE_CHILDREN` `ru_maxrss` reports: the biggest single process, not a sum), sampled from
//! `/proc` every millisecond while the processes run (`VmHWM` only grows, so a sample misses
//! at most what a process grew in its last millisecond). The workspace forbids `unsafe`, which
//! a `getrusage` call through libc would need.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Error;

/// What one measured sequence took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// From the first spawn to the last exit.
    pub wall: Duration,
    /// Largest peak resident set of any process of the trees, KiB (0: never sampled).
    pub peak_kib: u64,
}

/// Runs `cmds` one after another (each with stdout to `out_dir/<i>.out`, stderr to
/// `out_dir/<i>.err`), sampling their process trees; fails naming the command and its stderr
/// when one exits unsuccessfully.
pub fn run_sequence(cmds: Vec<Command>, out_dir: &Path) -> Result<Measured, Error> {
    let mut peak_kib = 0;
    let started = Instant::now();
    for (i, mut cmd) in cmds.into_iter().enumerate() {
        let err_path = out_dir.join(format!("{i}.err"));
        cmd.stdin(Stdio::null())
            .stdout(File::create(out_dir.join(format!("{i}.out")))?)
            .stderr(File::create(&err_path)?);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
        let mut peaks: HashMap<u32, u64> = HashMap::new();
        let status = loop {
            sample_tree(child.id(), &mut peaks);
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        peak_kib = peaks.values().copied().fold(peak_kib, u64::max);
        if !status.success() {
            let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
            return Err(format!("{cmd:?} exited with {status}:\n{}", stderr.trim()).into());
        }
    }
    Ok(Measured {
        wall: started.elapsed(),
        peak_kib,
    })
}

/// Records the `VmHWM` of `root` and of every descendant (children of every thread).
fn sample_tree(root: u32, peaks: &mut HashMap<u32, u64>) {
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Some(kib) = vm_hwm_kib(pid) {
            let p = peaks.entry(pid).or_default();
            *p = (*p).max(kib);
        }
        stack.extend(children(pid));
    }
}

/// `VmHWM` of `pid` in KiB (`None`: gone, a zombie, or not Linux).
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm(&status)
}

/// The `VmHWM:` value of a `/proc/PID/status` text, in KiB.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The child processes of every thread of `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_from_a_status_text() {
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(1234));
        assert_eq!(parse_vm_hwm("Name:\tx\n"), None);
    }

    #[test]
    fn a_process_the_command_starts_sets_the_peak_when_it_outgrows_it() {
        // sh (small) starts a child that holds ~64 MiB for a moment: the peak is the child's.
        let dir = std::env::temp_dir().join(format!("xtask-measure-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "python3 -c 'import time; b = bytearray(64 << 20); time.sleep(0.3)'; true",
        ]);
        let m = run_sequence(vec![cmd], &dir);
        let _ = std::fs::remove_dir_all(&dir);
        let m = m.unwrap();
        assert!(m.peak_kib > 60 * 1024, "peak {} KiB", m.peak_kib);
        assert!(m.wall >= Duration::from_millis(300));
    }

    #[test]
    fn a_failing_command_is_an_error_with_its_stderr() {
        let dir = std::env::temp_dir().join(format!("xtask-measure-f-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo boom >&2; exit 3"]);
        let err = run_sequence(vec![cmd], &dir).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.contains("boom"), "{err}");
    }
}
