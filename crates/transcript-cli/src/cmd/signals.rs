//! Signals during `transcript run`.
//!
//! * The first SIGINT, SIGTERM or SIGHUP cancels the run: the execution service ends every
//!   started step (commands get SIGTERM, then SIGKILL after the kill grace), writes
//!   `run.completed` and the command exits with 128+N.
//! * A second one does not wait for the grace: every process group the run started is killed
//!   at once (SIGKILL), the command waits a bounded time for the transcript to be closed
//!   (killing its processes is what lets the service complete the cancelled steps and write
//!   `run.completed`), then exits with 128+N. A third one exits without waiting.
//!
//! * A signal the runner started with ignored (`nohup` ignores SIGHUP) stays ignored: no
//!   handler is installed for it, so `nohup transcript run …` outlives its terminal (#59).
//!
//! The handlers are registered synchronously by [`Signals::register`], before the transcript
//! is created: a signal cannot arrive in a window where it would kill the process with the
//! default action and leave a transcript with no end.
//!
//! Finding the run's processes: the execution service does not expose its process groups,
//! but every subprocess it starts (commands, `run_command`, CLI agents) is a direct child of
//! this process that leads its own group, and stays our child until it is reaped. So the
//! groups of the run are the groups led by our children, read from the OS (`/proc/*/stat`:
//! `/proc/self/task/*/children` needs a kernel option that is often off). A group whose
//! leader was already reaped was killed by the service when it reaped it (cancellation), or
//! belongs to a command that ended on its own (what it left behind is its business, as in a
//! shell). Our children in our own group (tool plugins) are killed one by one. The /proc scan
//! and the kills run on a plain thread: async workers do no file I/O.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use tokio_util::sync::CancellationToken;

/// How long the second signal waits for the cancelled run to close its transcript once its
/// processes are killed.
const CLOSE_WAIT: Duration = Duration::from_secs(3);
/// How often, during that wait, the children are looked for again (a step that was starting
/// a process when the signal came).
const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// The signal handlers of a run.
pub struct Signals {
    /// The number of the first signal received, 0 before.
    first: Arc<AtomicI32>,
    /// Whether no transcript is open (none yet, or closed): the second signal need not wait.
    closed: Arc<(Mutex<bool>, Condvar)>,
}

impl Signals {
    /// Registers SIGINT, SIGTERM and SIGHUP now (before this returns) and starts the task that
    /// handles them: the first cancels `cancel`, the second kills the run's process groups and
    /// exits (see the module docs). Must be called within the runtime.
    pub fn register(cancel: CancellationToken) -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let first = Arc::new(AtomicI32::new(0));
        let closed = Arc::new((Mutex::new(true), Condvar::new()));
        let kinds = [
            (SignalKind::interrupt(), 2),
            (SignalKind::terminate(), 15),
            (SignalKind::hangup(), 1),
        ];
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for (kind, number) in kinds {
            // Read before any handler of ours replaces the inherited disposition.
            if transcript_exec::inherited_signals::is_ignored(number) {
                continue;
            }
            // `signal` installs the OS handler before it returns; what arrives from now on is
            // delivered to the stream, even before it is first polled.
            let mut stream = match signal(kind) {
                Ok(s) => s,
                Err(e) => {
                    crate::diag!("transcript: warning: cannot watch signal {number}: {e}");
                    continue;
                }
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    if tx.send(number).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let seen = first.clone();
        let done = closed.clone();
        tokio::spawn(async move {
            let mut count = 0u32;
            while let Some(number) = rx.recv().await {
                count += 1;
                match count {
                    1 => {
                        seen.store(number, Ordering::SeqCst);
                        crate::diag!(
                            "transcript: signal {number} received, cancelling the run (again to exit now)…"
                        );
                        cancel.cancel();
                    }
                    2 => {
                        let done = done.clone();
                        // /proc reads and the bounded wait: not on an async worker.
                        std::thread::spawn(move || kill_and_exit(number, &done));
                    }
                    _ => std::process::exit(128 + number),
                }
            }
        });
        Self { first, closed }
    }

    /// The number of the first signal received, if any.
    pub fn received(&self) -> Option<i32> {
        match self.first.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n),
        }
    }

    /// Says the transcript is about to be created: from now until [`Self::transcript_closed`],
    /// a second signal waits (a bounded time) for the cancelled run to be recorded.
    pub fn transcript_opening(&self) {
        self.set_closed(false);
    }

    /// Says the transcript is closed: a second signal exits without waiting for it.
    pub fn transcript_closed(&self) {
        self.set_closed(true);
    }

    fn set_closed(&self, value: bool) {
        let (lock, cvar) = &*self.closed;
        let mut closed = lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *closed = value;
        cvar.notify_all();
    }
}

/// The second signal: kills every process group of the run, waits up to [`CLOSE_WAIT`] for
/// the transcript to be closed (killing again what started meanwhile), then exits 128+N.
fn kill_and_exit(number: i32, closed: &(Mutex<bool>, Condvar)) -> ! {
    kill_children();
    crate::diag!("transcript: second signal: exiting now (the run's processes are killed)");
    let deadline = Instant::now() + CLOSE_WAIT;
    let (lock, cvar) = closed;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        {
            let done = lock
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (done, _) = cvar
                .wait_timeout_while(done, left.min(SWEEP_EVERY), |done| !*done)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *done {
                break;
            }
        }
        if left.is_zero() {
            crate::diag!(
                "transcript: warning: the cancelled run did not close its transcript within {}s",
                CLOSE_WAIT.as_secs()
            );
            break;
        }
        // Outside the lock: the run's side never waits on a /proc scan.
        kill_children();
    }
    std::process::exit(128 + number)
}

/// SIGKILL to every process group led by a child of this process, and to each child that
/// leads no group (one in our own group: a tool plugin). Returns how many were signalled.
fn kill_children() -> usize {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut signalled = 0;
    for (pid, pgrp) in children_of(me) {
        let Some(pid) = Pid::from_raw(pid) else {
            continue;
        };
        // A leader's pid is not reused while it is our child, even a zombie one: the group
        // is the one it started. ESRCH (gone meanwhile) is fine: nothing left to kill.
        let sent = if pgrp == pid.as_raw_nonzero().get() {
            kill_process_group(pid, Signal::KILL)
        } else {
            kill_process(pid, Signal::KILL)
        };
        signalled += usize::from(sent.is_ok());
    }
    signalled
}

/// `(pid, process group)` of every process whose parent is `parent`, from `/proc/*/stat`.
fn children_of(parent: i32) -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let entry = entry.ok()?;
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let (ppid, pgrp) = parent_and_group(&stat)?;
        (ppid == parent).then_some((pid, pgrp))
    })
    .collect()
}

/// Parent pid and process group from a `/proc/PID/stat` line: `pid (comm) state ppid pgrp …`,
/// where `comm` may hold spaces and parentheses (the last `)` ends it).
fn parent_and_group(stat: &str) -> Option<(i32, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let _state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((ppid, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        assert_eq!(
            parent_and_group("42 (sh) S 7 42 7 0 -1 4194560"),
            Some((7, 42))
        );
        assert_eq!(parent_and_group("42 (a) b) (c) Z 7 40 7 0"), Some((7, 40)));
        assert_eq!(parent_and_group("42 (sh"), None);
        assert_eq!(parent_and_group("42 (sh) S x 42"), None);
    }
}
