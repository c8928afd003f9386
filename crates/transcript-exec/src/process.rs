//! Running subprocesses for `command` steps, the `run_command` tool and CLI
//! agents: each in its own process group, ended as a group, with its output
//! captured under a byte cap.
//!
//! * **Process groups.** Every child starts with `process_group(0)` (it
//!   leads a new group), so whatever it spawns (`sh -c 'sleep 30 & wait'`)
//!   belongs to the group too. On cancellation or a step timeout the whole
//!   group gets `SIGTERM`; once the leader has exited, or
//!   [`ProcessLimits::kill_grace`] has passed, whatever is left in the group
//!   gets `SIGKILL`. A group that is dropped without being ended (a future
//!   abandoned mid-way) is killed at once. No group is signalled once its
//!   leader was reaped (the id may belong to someone else by then).
//! * **Every descendant is the step's** (#39). A command that finishes on its
//!   own no longer leaves anything running: every child runs in a
//!   [`ProcessScope`], and when the step ends (success too) every process of
//!   the scope dies, including those that `setsid` or double-forked away
//!   ([`crate::reaper`]).
//! * **Bounded capture.** Standard output keeps its first
//!   [`ProcessLimits::max_output_bytes`] bytes, standard error half as many
//!   ([`stderr_cap`]; both less the room for the truncation marker); the rest is counted and hashed while it streams
//!   past, so a command printing 50 MB holds at most the cap in memory and
//!   its recorded text ends with `…[truncated: N bytes, sha256 H]` (N and H
//!   of everything it printed, see [`crate::bounded`]).

use std::path::Path;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};

use crate::reaper::ProcessScope;
use crate::sandbox::net::NetBounds;
use crate::sandbox::{Confinement, PrivateTmp};
use crate::withheld_env::WithheldEnv;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use crate::bounded::marker;
use crate::tool_error::ToolError;
use transcript_domain::text::lower_hex;

/// How subprocesses are started (without the runner's own variables), ended, and how much of
/// their output is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Time between `SIGTERM` to the group and `SIGKILL` to what is left
    /// (default 2 s).
    pub kill_grace: Duration,
    /// Bytes of standard output kept, marker included (default 1 MiB); standard error keeps
    /// half of it ([`stderr_cap`]).
    pub max_output_bytes: usize,
    /// Variables of the runner's environment the process does not inherit (default none;
    /// see [`crate::withheld_env`]).
    pub withheld_env: WithheldEnv,
    /// The kernel confinement of every process started with these limits (#56, see
    /// [`crate::sandbox`]); `None`: unconfined (the default of these low-level helpers; the
    /// [`crate::ExecutionService`] confines every step unless told otherwise).
    pub confinement: Option<Confinement>,
    /// The network of every process started with these limits (#57, see
    /// [`crate::sandbox::net`]); `None`: the host's (the default of these low-level helpers;
    /// the [`crate::ExecutionService`] bounds every step unless told otherwise).
    pub network: Option<NetBounds>,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        Self {
            kill_grace: Duration::from_secs(2),
            max_output_bytes: crate::bounded::DEFAULT_MAX_VALUE_BYTES,
            withheld_env: WithheldEnv::default(),
            confinement: None,
            network: None,
        }
    }
}

/// What a shell command printed.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellOutput {
    /// Standard output (lossy UTF-8, cut with a marker past the cap).
    pub stdout: String,
    /// Standard error (lossy UTF-8, cut with a marker past the cap).
    pub stderr: String,
    /// Exit code (-1 when killed by a signal).
    pub exit_code: i64,
}

/// One output stream read under a cap: the kept prefix, the total size and
/// the sha256 of everything read.
#[derive(Debug)]
pub struct Capture {
    cap: usize,
    head: Vec<u8>,
    total: u64,
    hasher: Sha256,
}

impl Capture {
    /// A capture keeping at most `cap` bytes of text (marker included).
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            head: Vec::new(),
            total: 0,
            hasher: Sha256::new(),
        }
    }

    /// Takes the next chunk: kept while it fits, counted and hashed always.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        self.hasher.update(chunk);
        let room = self.cap.saturating_sub(self.head.len());
        if room > 0 {
            let take = room.min(chunk.len());
            // Exact reservations: the buffer never grows past the cap.
            self.head.reserve_exact(take);
            self.head.extend_from_slice(&chunk[..take]);
        }
    }

    /// Bytes read so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Allocated size of the kept prefix (never more than the cap).
    pub fn buffer_capacity(&self) -> usize {
        self.head.capacity()
    }

    /// The text: everything read when it fits the cap, else a prefix cut on
    /// a character boundary followed by the truncation marker, keeping
    /// `cap - marker.len()` bytes (the rule of
    /// [`transcript_domain::truncate`], over everything read).
    pub fn into_text(self) -> String {
        if self.total <= self.cap as u64 {
            return String::from_utf8_lossy(&self.head).into_owned();
        }
        let mark = marker(self.total, &lower_hex(&self.hasher.finalize()));
        let keep = self.cap.saturating_sub(mark.len()).min(self.head.len());
        let mut prefix = &self.head[..keep];
        // Drop a multi-byte character cut in half at the end.
        if let Err(e) = std::str::from_utf8(prefix)
            && e.error_len().is_none()
        {
            prefix = &prefix[..e.valid_up_to()];
        }
        let mut text = String::from_utf8_lossy(prefix).into_owned();
        text.push_str(&mark);
        text
    }
}

/// The cap of standard error's capture for an output cap of `cap`: half of it, so a process
/// filling both streams still records them in one value within twice the cap (a recorded
/// object over twice the value cap becomes a stub, see [`crate::bounded`], and would lose its
/// exit code; wire decision 21).
pub fn stderr_cap(cap: usize) -> usize {
    cap / 2
}

/// Reads `stream` to its end under `capture`'s cap.
async fn capture(stream: Option<impl AsyncRead + Unpin>, cap: usize) -> std::io::Result<Capture> {
    let mut c = Capture::new(cap);
    let Some(mut stream) = stream else {
        return Ok(c);
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(c);
        }
        c.push(&buf[..n]);
    }
}

/// The process group of a spawned child and its [`ProcessScope`]; ends them when dropped
/// unless [`ProcessGroup::terminate`] or [`ProcessGroup::finish`] already did.
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Option<Pid>,
    scope: Option<ProcessScope>,
    /// A confined process's private temporary directory: removed once the scope ended.
    tmp: Option<PrivateTmp>,
}

impl ProcessGroup {
    /// The group led by `child` (spawned with `process_group(0)`), before its scope is set.
    fn of(child: &tokio::process::Child) -> Self {
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw);
        Self {
            pgid,
            scope: None,
            tmp: None,
        }
    }

    /// Spawns `cmd` leading its own process group, in a new [`ProcessScope`] (every
    /// descendant, wherever it escapes, is ended with the step: see [`crate::reaper`]),
    /// unconfined.
    pub fn spawn(
        cmd: &mut tokio::process::Command,
    ) -> std::io::Result<(tokio::process::Child, Self)> {
        Self::spawn_confined(cmd, None)
    }

    /// [`ProcessGroup::spawn`] confined by `confinement` when given ([`crate::sandbox`]):
    /// the process gets a private temporary directory, removed once its scope has ended.
    pub fn spawn_confined(
        cmd: &mut tokio::process::Command,
        confinement: Option<&Confinement>,
    ) -> std::io::Result<(tokio::process::Child, Self)> {
        Self::spawn_bounded(cmd, confinement, None)
    }

    /// [`ProcessGroup::spawn_confined`], in a network namespace bounded by `network` when
    /// given (`cmd` made by [`crate::sandbox::net::command`] with the same bounds).
    pub fn spawn_bounded(
        cmd: &mut tokio::process::Command,
        confinement: Option<&Confinement>,
        network: Option<&NetBounds>,
    ) -> std::io::Result<(tokio::process::Child, Self)> {
        let mut scope = ProcessScope::new();
        own_group(cmd);
        scope.mark(cmd);
        let (child, tmp) = crate::sandbox::spawn_bounded(cmd, confinement, network)?;
        if let Some(pid) = child.id() {
            scope.started(pid);
        }
        let mut group = Self::of(&child);
        group.scope = Some(scope);
        group.tmp = tmp;
        Ok((child, group))
    }

    fn signal(&self, sig: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH (nobody left) is the expected outcome, not an error.
            let _ = kill_process_group(pgid, sig);
        }
    }

    /// `SIGTERM` to the group; waits for the leader up to `grace`; then, if the leader is
    /// still not reaped (so the group id is still ours), `SIGKILL` to the group; reaps the
    /// leader; then ends the scope (every process left of it, see [`crate::reaper`]). No
    /// group is signalled once its leader was reaped.
    pub async fn terminate(self, child: &mut tokio::process::Child, grace: Duration) {
        self.signal(Signal::TERM);
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            self.signal(Signal::KILL);
            let _ = child.start_kill();
        }
        let _ = child.wait().await;
        self.finish().await;
    }

    /// The leader was reaped: ends what is left of the scope (a step's end, success too).
    pub async fn finish(mut self) {
        let pgid = self.pgid.take().map(|p| p.as_raw_nonzero().get());
        if let Some(scope) = self.scope.take() {
            scope.end(pgid).await;
        }
        // Nothing of the scope is left to write in it.
        drop(self.tmp.take());
    }

    /// Forgets the group and its scope without signalling them.
    pub fn disarm(mut self) {
        self.pgid = None;
        self.scope = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        match self.scope.take() {
            // The leader may have been reaped: end the scope process by process.
            Some(scope) => scope.kill_now(self.pgid.map(|p| p.as_raw_nonzero().get())),
            None => self.signal(Signal::KILL),
        }
    }
}

/// Prepares `cmd` to lead its own process group (see the module docs).
pub fn own_group(cmd: &mut tokio::process::Command) -> &mut tokio::process::Command {
    cmd.process_group(0)
}

/// The shell of string commands, by absolute path: never a `sh` looked up
/// on `PATH` (a directory earlier on `PATH`, or a system whose `sh` is
/// bash, would change what runs).
pub const SHELL: &str = "/bin/sh";

/// Runs `/bin/sh -c command` in `cwd` (default limits), ending its process
/// group on cancellation.
pub async fn run_shell(
    command: &str,
    cwd: &Path,
    cancel: &CancellationToken,
) -> Result<ShellOutput, ToolError> {
    run_shell_with(command, cwd, cancel, ProcessLimits::default()).await
}

/// [`run_shell`] with explicit limits.
pub async fn run_shell_with(
    command: &str,
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    run_shell_env(command, &[], cwd, cancel, limits).await
}

/// [`run_shell_with`] with extra environment variables: how values reach a
/// shell command as data (the script reads `"$NAME"`; the command text
/// itself holds no value).
pub async fn run_shell_env(
    command: &str,
    env: &[(String, String)],
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    run_shell_input(command, env, None, cwd, cancel, limits).await
}

/// [`run_shell_env`] whose process reads `stdin` (written whole, then closed; `None`:
/// `/dev/null`): how free text reaches a program as data (#48).
pub async fn run_shell_input(
    command: &str,
    env: &[(String, String)],
    stdin: Option<&str>,
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    let mut cmd = crate::sandbox::net::command(SHELL, limits.network.as_ref());
    cmd.arg("-c").arg(command);
    limits.withheld_env.apply(&mut cmd);
    set_env(&mut cmd, env)?;
    run_process(cmd, SHELL, stdin, cwd, cancel, limits).await
}

/// Adds `env` to `cmd`; a value holding a NUL byte (which no environment
/// can carry) is refused rather than cut.
fn set_env(cmd: &mut tokio::process::Command, env: &[(String, String)]) -> Result<(), ToolError> {
    for (name, value) in env {
        if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
            return Err(ToolError::InvalidInput(format!(
                "environment variable '{name}': a name without '=' and a value without NUL bytes"
            )));
        }
        cmd.env(name, value);
    }
    Ok(())
}

/// Runs `argv` (program, then arguments) in `cwd` without a shell (default
/// limits), ending its process group on cancellation. A relative program
/// path with a `/` is taken relative to `cwd`; a bare name is looked up in
/// `PATH`.
pub async fn run_argv(
    argv: &[String],
    cwd: &Path,
    cancel: &CancellationToken,
) -> Result<ShellOutput, ToolError> {
    run_argv_with(argv, cwd, cancel, ProcessLimits::default()).await
}

/// [`run_argv`] with explicit limits.
pub async fn run_argv_with(
    argv: &[String],
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    run_argv_env(argv, &[], cwd, cancel, limits).await
}

/// [`run_argv_with`] with extra environment variables.
pub async fn run_argv_env(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    run_argv_input(argv, env, None, cwd, cancel, limits).await
}

/// [`run_argv_env`] whose process reads `stdin` (written whole, then closed; `None`:
/// `/dev/null`): how free text reaches a program as data (#48).
pub async fn run_argv_input(
    argv: &[String],
    env: &[(String, String)],
    stdin: Option<&str>,
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    let Some((program, args)) = argv.split_first().filter(|(p, _)| !p.is_empty()) else {
        return Err(ToolError::InvalidInput("empty command".into()));
    };
    let path = Path::new(program);
    let resolved = if path.is_relative() && program.contains('/') {
        cwd.join(path)
    } else {
        path.to_path_buf()
    };
    let mut cmd = crate::sandbox::net::command(resolved, limits.network.as_ref());
    cmd.args(args);
    limits.withheld_env.apply(&mut cmd);
    set_env(&mut cmd, env)?;
    run_process(cmd, program, stdin, cwd, cancel, limits).await
}

async fn run_process(
    mut cmd: tokio::process::Command,
    program: &str,
    input: Option<&str>,
    cwd: &Path,
    cancel: &CancellationToken,
    limits: ProcessLimits,
) -> Result<ShellOutput, ToolError> {
    let stdin = if input.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    };
    cmd.current_dir(cwd)
        .stdin(stdin)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let (mut child, group) = ProcessGroup::spawn_bounded(
        &mut cmd,
        limits.confinement.as_ref(),
        limits.network.as_ref(),
    )
    .map_err(|e| ToolError::Failed(format!("cannot start {program}: {e}")))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let feed = feed_stdin(child.stdin.take(), input.unwrap_or_default().as_bytes());
    let cap = limits.max_output_bytes;
    let finished = {
        let work = async {
            let (out, err, ()) =
                tokio::join!(capture(stdout, cap), capture(stderr, stderr_cap(cap)), feed);
            let status = child.wait().await;
            (out, err, status)
        };
        tokio::select! {
            r = work => Some(r),
            _ = cancel.cancelled() => None,
        }
    };
    let Some((out, err, status)) = finished else {
        group.terminate(&mut child, limits.kill_grace).await;
        return Err(ToolError::Cancelled);
    };
    // Finished on its own: what it left running ends with it (see the module docs).
    group.finish().await;
    let failed = |e: std::io::Error| ToolError::Failed(format!("command failed: {e}"));
    let status = status.map_err(failed)?;
    Ok(ShellOutput {
        stdout: out.map_err(failed)?.into_text(),
        stderr: err.map_err(failed)?.into_text(),
        exit_code: status.code().map(i64::from).unwrap_or(-1),
    })
}

/// Writes `input` to the child's standard input, then closes it. A child that exits or
/// closes its input early only stops the writing (EPIPE is not the step's failure: what the
/// program did with its input is its exit code's business).
async fn feed_stdin(stdin: Option<tokio::process::ChildStdin>, input: &[u8]) {
    use tokio::io::AsyncWriteExt;
    if let Some(mut stdin) = stdin {
        let _ = stdin.write_all(input).await;
        let _ = stdin.shutdown().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_a_bounded_prefix_and_hashes_everything() {
        let mut c = Capture::new(300);
        let chunk = vec![b'x'; 1000];
        for _ in 0..50 {
            c.push(&chunk);
        }
        assert_eq!(c.total(), 50_000);
        assert!(c.buffer_capacity() <= 300);
        let all = vec![b'x'; 50_000];
        let text = c.into_text();
        assert!(text.len() <= 300, "{}", text.len());
        assert!(text.ends_with(&marker(50_000, &crate::bounded::sha256_hex(&all))));
        let mut small = Capture::new(300);
        small.push("héllo".as_bytes());
        assert_eq!(small.into_text(), "héllo");
    }

    /// The capture keeps `cap - marker.len()` bytes: its text is exactly the
    /// cap long when the output was cut (#32 item 4: one truncation rule).
    #[test]
    fn a_cut_capture_is_exactly_the_cap_long_marker_included() {
        let mut c = Capture::new(300);
        c.push(&[b'x'; 1000]);
        let m = marker(1000, &crate::bounded::sha256_hex(&[b'x'; 1000]));
        assert_eq!(c.into_text(), format!("{}{m}", "x".repeat(300 - m.len())));
    }

    #[test]
    fn capture_never_ends_in_half_a_character() {
        let mark = marker(300, &"0".repeat(64));
        let mut c = Capture::new(mark.len() + 2);
        c.push("aé".repeat(100).as_bytes());
        let text = c.into_text();
        assert!(text.starts_with("a…[truncated: 300 bytes"), "{text}");
    }
}
