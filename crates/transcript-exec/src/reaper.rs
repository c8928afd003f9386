//! Every descendant is the run's (#39 item 7): finding and ending the processes a step left
//! behind, whatever they did to escape (`setsid`, a double fork, `nohup`, a daemon closing
//! its file descriptors), without touching anyone else's.
//!
//! # Model
//!
//! * **A scope per spawn.** Every child exec starts (command steps, `run_command`, CLI
//!   agents) gets a [`ProcessScope`]: a token unique to this runner and spawn, put in the
//!   child's environment as [`SCOPE_ENV`]. Descendants inherit it through any fork, `setsid`
//!   or `exec`, so `/proc/<pid>/environ` says whose a process is. When the step ends
//!   (success, failure or cancellation: "what it leaves running is its business" is no
//!   longer the rule), [`ProcessScope::end`] kills every process carrying the token, every
//!   descendant of those (one that cleared its environment but is still below one that
//!   did not), and the members of the step's process group when the group still holds a
//!   process carrying the token (a group id is never reused while it has members, so the
//!   group is provably the step's).
//! * **The run's end.** A process that cleared its environment *and* left its parent
//!   (`env -i setsid sleep 300 &`) carries nothing to attribute it to one step. The runner
//!   is a child subreaper (`PR_SET_CHILD_SUBREAPER`, [`become_subreaper`]), so such an
//!   orphan is re-parented to the runner instead of init; at the run's end
//!   [`end_all_descendants`] kills every descendant the runner still has. Parallel steps
//!   never kill each other's processes: a step ends its token only.
//! * **Signals by pidfd, never by a stale id.** A process is signalled through a pidfd
//!   opened on it after its start time was checked against the snapshot (a pid reused in
//!   between is never hit), and no process group is signalled here at all: groups are
//!   ended member by member.
//! * **Reaping by pid only.** `waitpid(-1)` would steal the exit statuses tokio waits for;
//!   only zombies that are the runner's children *and* were killed here (or, at the run's
//!   end, every child left) are reaped, each by its own pid. A process that escaped and
//!   exits on its own before its step ends stays a zombie child of the runner until the
//!   run's end.
//!
//! The process table is read from `/proc` (plain file reads); signals and pidfds go
//! through rustix's safe wrappers. Linux only, like the rest of the process handling.
//! The MCP proxy can reuse [`ProcessScope`] for its upstream servers.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{
    Pid, PidfdFlags, Signal, WaitOptions, getpid, pidfd_open, pidfd_send_signal, waitpid,
};

/// The environment variable that carries a spawn's scope token to all its descendants.
pub const SCOPE_ENV: &str = "TRANSCRIPT_PROCESS_SCOPE";

/// How long [`ProcessScope::end`] and [`end_all_descendants`] wait for killed processes
/// to exit (a `SIGKILL`ed process exits at once unless it is stuck in the kernel).
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// Rounds of snapshot-and-kill: a process forking while it is being killed is caught by the
/// next round (its child inherits the token).
const MAX_ROUNDS: usize = 64;

static NEXT: AtomicU64 = AtomicU64::new(1);

/// One spawn's scope: the token its descendants carry (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessScope {
    token: String,
    /// Start time (clock ticks since boot) of the scope's first process, once known: no
    /// process of the scope started earlier, so older ones are not even looked at.
    since: u64,
}

impl Default for ProcessScope {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessScope {
    /// A new scope, unique to this runner (its pid) and spawn.
    pub fn new() -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Self {
            token: format!("{}.{n}", getpid().as_raw_nonzero()),
            since: 0,
        }
    }

    /// Records that the scope's first process is `pid` (just spawned): the sweep then
    /// skips every process that started before it, reading the environment of the
    /// step's processes only.
    pub fn started(&mut self, pid: u32) {
        if let Some(p) = i32::try_from(pid).ok().and_then(stat) {
            self.since = p.start;
        }
    }

    /// The token (the value of [`SCOPE_ENV`] in the scope's processes).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Puts the scope in `cmd`'s environment (after the caller's own variables, so a
    /// workflow cannot override it).
    pub fn mark(&self, cmd: &mut tokio::process::Command) {
        cmd.env(SCOPE_ENV, &self.token);
    }

    /// Kills every process of the scope (and the members of `group` when the group is
    /// provably the scope's), waits until they have exited and reaps those that are the
    /// runner's children. Call it once the scope's leader has been waited for.
    pub async fn end(&self, group: Option<i32>) -> usize {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let killed = me.kill(group);
            settle(&killed);
            killed.len()
        })
        .await
        .unwrap_or(0)
    }

    /// Kills every process of the scope now, without waiting (for `Drop`).
    pub fn kill_now(&self, group: Option<i32>) {
        let _ = self.kill(group);
    }

    fn kill(&self, group: Option<i32>) -> Vec<Killed> {
        let needle = format!("{SCOPE_ENV}={}", self.token);
        sweep(|table| {
            let marked: HashSet<i32> = table
                .iter()
                .filter(|p| p.start >= self.since && carries(p.pid, needle.as_bytes()))
                .map(|p| p.pid)
                .collect();
            let owned_group = group.filter(|g| {
                table
                    .iter()
                    .any(|p| p.pgrp == *g && marked.contains(&p.pid))
            });
            table
                .iter()
                .filter(|p| marked.contains(&p.pid) || Some(p.pgrp) == owned_group)
                .map(|p| p.pid)
                .collect()
        })
    }
}

/// Makes the calling process a child subreaper: orphans among its descendants are
/// re-parented to it rather than to init, so they stay findable until
/// [`end_all_descendants`]. Call it once, at the start of the runner.
pub fn become_subreaper() -> std::io::Result<()> {
    rustix::process::set_child_subreaper(Some(getpid())).map_err(std::io::Error::from)
}

/// Kills every descendant of the calling process, waits until they have exited and reaps
/// every zombie child it has, each by its pid. For the runner's end, once nothing it
/// spawned is still meant to run. Returns how many processes were killed.
pub fn end_all_descendants() -> usize {
    let me = getpid().as_raw_nonzero().get();
    let killed = sweep(|table| {
        table
            .iter()
            .filter(|p| p.ppid == me)
            .map(|p| p.pid)
            .collect()
    });
    settle(&killed);
    // Zombie children left by the runner's own spawns (a runtime dropped before it
    // reaped them) and orphans that exited on their own.
    for p in table() {
        if p.ppid == me && p.state == b'Z' {
            reap(p.pid);
        }
    }
    killed.len()
}

/// One process of the table (`/proc/<pid>/stat`).
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    state: u8,
    /// Start time in clock ticks since boot: with the pid, the process's identity.
    start: u64,
}

/// A process killed here: its pidfd (readable once it has exited) and pid.
struct Killed {
    fd: OwnedFd,
    pid: i32,
}

/// `/proc/<pid>/stat` of one process, or none when it is gone.
fn stat(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Proc {
        pid,
        state: f.first()?.bytes().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// The processes a sweep looks at. In a child subreaper every process its children left
/// behind is re-parented into its own subtree, so the subtree is enough (read from
/// `/proc/<pid>/task/<tid>/children`, cheap whatever else runs on the machine); elsewhere
/// (a library runner that is no subreaper) every process visible in `/proc`.
fn candidates() -> Vec<Proc> {
    let subreaper = rustix::process::child_subreaper().is_ok_and(|p| p.is_some());
    if subreaper && let Some(subtree) = subtree(getpid().as_raw_nonzero().get()) {
        return subtree;
    }
    table()
}

/// The descendants of `root` (not `root` itself), or none when the kernel does not list
/// children (`CONFIG_PROC_CHILDREN`).
fn subtree(root: i32) -> Option<Vec<Proc>> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    let mut seen = HashSet::new();
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            if pid == root {
                return None;
            }
            continue;
        };
        for task in tasks.flatten() {
            let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
                if pid == root {
                    return None;
                }
                continue;
            };
            for child in list
                .split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if seen.insert(child)
                    && let Some(p) = stat(child)
                {
                    out.push(p);
                    todo.push(child);
                }
            }
        }
    }
    Some(out)
}

/// Every process visible in `/proc`.
fn table() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter_map(stat)
        .collect()
}

/// Whether `/proc/<pid>/environ` holds the entry `needle` (`NAME=value`).
fn carries(pid: i32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == needle))
}

/// Kills, round after round, the processes `roots` picks from a fresh table and all their
/// descendants, until a round finds none left to kill. Never the caller itself.
fn sweep(roots: impl Fn(&[Proc]) -> Vec<i32>) -> Vec<Killed> {
    let me = getpid().as_raw_nonzero().get();
    let mut killed: Vec<Killed> = Vec::new();
    let mut done: HashSet<(i32, u64)> = HashSet::new();
    for _ in 0..MAX_ROUNDS {
        let procs: Vec<Proc> = candidates()
            .into_iter()
            .filter(|p| p.state != b'Z')
            .collect();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for p in &procs {
            children.entry(p.ppid).or_default().push(p.pid);
        }
        let mut todo = roots(&procs);
        let mut targets = HashSet::new();
        while let Some(pid) = todo.pop() {
            if pid != me && targets.insert(pid) {
                todo.extend(children.get(&pid).into_iter().flatten());
            }
        }
        let by_pid: HashMap<i32, Proc> = procs.iter().map(|p| (p.pid, *p)).collect();
        let mut new = 0;
        for pid in targets {
            let Some(p) = by_pid.get(&pid) else { continue };
            if !done.insert((p.pid, p.start)) {
                continue;
            }
            if let Some(k) = kill_verified(p) {
                killed.push(k);
                new += 1;
            }
        }
        if new == 0 {
            break;
        }
    }
    killed
}

/// `SIGKILL` through a pidfd opened on `p`, after checking the pid still names the process
/// of the snapshot (same start time).
fn kill_verified(p: &Proc) -> Option<Killed> {
    let fd = pidfd_open(Pid::from_raw(p.pid)?, PidfdFlags::empty()).ok()?;
    let now = stat(p.pid)?;
    if now.start != p.start {
        return None;
    }
    pidfd_send_signal(&fd, Signal::KILL).ok()?;
    Some(Killed { fd, pid: p.pid })
}

/// Waits (at most [`EXIT_WAIT`] in all) until every killed process has exited, then reaps
/// those that are the caller's children, each by its pid.
fn settle(killed: &[Killed]) {
    let deadline = Instant::now() + EXIT_WAIT;
    for k in killed {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&k.fd, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&timeout));
    }
    let me = getpid().as_raw_nonzero().get();
    for k in killed {
        if stat(k.pid).is_some_and(|p| p.ppid == me && p.state == b'Z') {
            reap(k.pid);
        }
    }
}

/// Reaps the zombie child `pid` (never any other child: no `waitpid(-1)`).
fn reap(pid: i32) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = waitpid(Some(pid), WaitOptions::NOHANG);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subtree_holds_a_child_and_its_grandchild() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 300 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let tree = subtree(getpid().as_raw_nonzero().get()).unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        assert!(tree.iter().any(|p| p.pid == pid));
        assert!(tree.iter().any(|p| p.pid == grandchild && p.ppid == pid));
        let _ = std::process::Command::new("kill")
            .arg(grandchild.to_string())
            .status();
        let _ = child.wait();
    }

    #[test]
    fn stat_parses_a_name_with_spaces_and_parentheses() {
        let me = stat(getpid().as_raw_nonzero().get()).unwrap();
        assert_eq!(
            me.ppid,
            rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
        );
        assert!(me.start > 0);
        assert!(table().iter().any(|p| p.pid == me.pid));
    }

    #[tokio::test]
    async fn a_scope_ends_its_setsid_escapee_and_nothing_else() {
        let scope = ProcessScope::new();
        let other = ProcessScope::new();
        let spawn = |s: &ProcessScope| {
            let mut cmd = tokio::process::Command::new("/bin/sh");
            cmd.args(["-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"])
                .stdout(std::process::Stdio::piped());
            s.mark(&mut cmd);
            cmd
        };
        let mine = spawn(&scope).output().await.unwrap();
        let theirs = spawn(&other).output().await.unwrap();
        let pid = |o: &std::process::Output| -> i32 {
            String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
        };
        let (mine, theirs) = (pid(&mine), pid(&theirs));
        assert!(scope.end(None).await >= 1);
        assert!(stat(mine).is_none_or(|p| p.state == b'Z'), "mine survived");
        assert!(
            stat(theirs).is_some_and(|p| p.state != b'Z'),
            "theirs was killed"
        );
        assert!(other.end(None).await >= 1);
        assert!(stat(theirs).is_none_or(|p| p.state == b'Z'));
    }
}
