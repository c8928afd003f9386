//! The network of a run's processes (#57): each starts in a network namespace of its own,
//! with only a loopback interface, so nothing leaves it, TCP, UDP or DNS, but through the
//! doors the runner opens for the hosts its step declares.
//!
//! # Model
//!
//! * **The namespace.** A bounded process is started through a small helper
//!   ([`helper_main`]: `transcript __netns PROGRAM ARGS…`, or this crate's `transcript-netns`
//!   binary) that makes a user and a network namespace (unprivileged), brings its loopback
//!   up, opens the listening sockets below, hands them to the runner over a Unix socket in the
//!   process's private directory, drops every capability and becomes the program (`exec`).
//!   The program and everything it starts share that namespace and can never leave it.
//! * **The doors** ([`NetBounds`]), served by threads of the runner outside the namespace:
//!   - a **proxy** on `127.0.0.1:3128` inside (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and
//!     their lowercase forms point at it; `NO_PROXY` is emptied): HTTP `CONNECT` and plain
//!     HTTP in absolute form, to a declared `host:port` only; names resolve at the proxy;
//!     every other destination is answered `403` and recorded ([`RefusedLog`]);
//!   - each declared **loopback** destination (`127.0.0.1:8080`, `localhost:8080`,
//!     `[::1]:8080`) is also listened on at the same address inside and forwarded to it
//!     outside, so a client that ignores the proxy variables still reaches it.
//! * **Nothing else.** No route leaves the namespace: a direct connection anywhere else, a
//!   datagram, a DNS query fails at once (`ENETUNREACH`, `ECONNREFUSED`); only refusals at the
//!   proxy can be recorded.
//!
//! # Threat model
//!
//! What a step's data can make its programs do on the network (a configuration file chosen
//! by data for `curl` or `wget`, an agent's tool call after a prompt injection) is bounded by
//! the namespace, not by any list of programs or options. The destination is decided by what
//! the request declares (its `CONNECT` authority or absolute URI), compared literally with the
//! step's list. Not bounded: what an allowed host does with what it is sent.
//!
//! # Versioning
//!
//! Needs user namespaces (Linux 3.8, enabled by default on most distributions); as root
//! without them, a network namespace only. Where neither can be made, a bounded process does
//! not start (the error says why and names `network: all`).

mod control;
mod destination;
mod gate;
mod guard;
mod helper;
mod netlink;
mod proxy;
mod relay;
mod session;
mod shared;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

pub use control::SPEC_ENV;
pub use destination::Destination;
pub(crate) use destination::LOOPBACK_V4;
pub use gate::PROXY_ENV;
pub(crate) use gate::{complete, prepare};
pub use guard::{EXEC_ARG, GUARD_ARG, RUNNER_PID_ENV, exec_main, guard_main};
pub use helper::{HELPER_ARG, helper_main};
pub use session::NetSession;

/// What a step declares under `network:` (or inherits: see [`crate::workflow::Step::network`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepNetwork {
    /// `network: all`: the host's network, unbounded (written in `step.started`, warned).
    All,
    /// `network: [host:port, …]` (`none` or `[]`: nothing): only these, through the proxy.
    Allow(Vec<Destination>),
}

/// The network of a whole run (`--network`): each step's own (`declared`, the default), or
/// the host's for every process (`all`: each step's `step.started` says so, warned once).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunNetwork {
    /// Each step reaches what its `network:` declares.
    #[default]
    Declared,
    /// Every process uses the host's network.
    All,
}

impl std::str::FromStr for RunNetwork {
    type Err = String;

    /// `declared` or `all`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "declared" => Ok(Self::Declared),
            "all" => Ok(Self::All),
            other => Err(format!("expected `declared` or `all`, not {other:?}")),
        }
    }
}

impl std::fmt::Display for RunNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Declared => "declared",
            Self::All => "all",
        })
    }
}

/// The variable naming the helper program (see [`default_helper`]).
pub const HELPER_ENV: &str = "TRANSCRIPT_NETNS_HELPER";

/// How many refused destinations a step's result names (the count covers them all).
pub const REFUSED_SHOWN: usize = 20;

/// What one bounded process (and everything it starts) may reach: the declared destinations,
/// through the helper at [`NetBounds::helper`]; refusals go to a log shared by every process
/// of the step. Two bounds are equal when they allow the same through the same helper.
#[derive(Debug, Clone)]
pub struct NetBounds {
    allow: Vec<Destination>,
    helper: PathBuf,
    log: Arc<RefusedLog>,
}

impl PartialEq for NetBounds {
    fn eq(&self, other: &Self) -> bool {
        self.allow == other.allow && self.helper == other.helper
    }
}

impl Eq for NetBounds {}

impl NetBounds {
    /// Nothing reachable, started through `helper`.
    pub fn new(helper: impl Into<PathBuf>) -> Self {
        Self {
            allow: Vec::new(),
            helper: helper.into(),
            log: Arc::new(RefusedLog::default()),
        }
    }

    /// Adds destinations (kept once each).
    pub fn allowing(mut self, more: impl IntoIterator<Item = Destination>) -> Self {
        for d in more {
            if !self.allow.contains(&d) {
                self.allow.push(d);
            }
        }
        self
    }

    /// The destinations reachable.
    pub fn allowed(&self) -> &[Destination] {
        &self.allow
    }

    /// The helper program.
    pub fn helper(&self) -> &Path {
        &self.helper
    }

    /// The log the refusals go to.
    pub fn log(&self) -> Arc<RefusedLog> {
        Arc::clone(&self.log)
    }

    /// These bounds reporting refusals to `log` (the step's).
    pub fn with_log(mut self, log: Arc<RefusedLog>) -> Self {
        self.log = log;
        self
    }

    /// A command running `program` through the helper.
    pub fn command(&self, program: impl AsRef<OsStr>) -> tokio::process::Command {
        helped(&self.helper, HELPER_ARG, program)
    }
}

/// `helper ARG program`, with the runner's process id for the helper's guard.
fn helped(helper: &Path, arg: &str, program: impl AsRef<OsStr>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(helper);
    cmd.arg(arg).arg(program);
    cmd.env(
        RUNNER_PID_ENV,
        rustix::process::getpid().as_raw_nonzero().to_string(),
    );
    cmd
}

/// A command running `program`: through the helper of `bounds` when given (then spawn it
/// with [`crate::sandbox::spawn_bounded`] and the same bounds), else through the guard of
/// [`default_helper`] (`HELPER __guard PROGRAM`, so it dies with the runner, #59: see
/// [`guard_main`]), else, with no helper to be found, directly.
pub fn command(program: impl AsRef<OsStr>, bounds: Option<&NetBounds>) -> tokio::process::Command {
    match (bounds, default_helper()) {
        (Some(b), _) => b.command(program),
        (None, Some(helper)) => helped(&helper, GUARD_ARG, program),
        (None, None) => tokio::process::Command::new(program),
    }
}

/// The guard helper of a command [`command`] made without bounds (`HELPER __guard PROGRAM
/// …`, `HELPER` being [`default_helper`]), or `None`.
pub fn guard_of(cmd: &std::process::Command) -> Option<PathBuf> {
    if cmd.get_args().next()? != GUARD_ARG {
        return None;
    }
    default_helper().filter(|h| h.as_os_str() == cmd.get_program())
}

/// The destinations a step's processes tried and were refused.
#[derive(Debug, Default)]
pub struct RefusedLog {
    inner: Mutex<LogInner>,
}

#[derive(Debug, Default)]
struct LogInner {
    shown: Refused,
    /// Every distinct destination seen (at most [`DISTINCT_KEPT`]; past that each new name
    /// counts once more, so the count stays an upper bound).
    seen: std::collections::HashSet<String>,
}

/// How many distinct refused destinations are remembered for counting.
const DISTINCT_KEPT: usize = 4096;

/// What [`RefusedLog`] holds: how many distinct destinations were refused and the first
/// [`REFUSED_SHOWN`] of them, in the order they were first tried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refused {
    /// Distinct destinations refused.
    pub count: usize,
    /// The first of them (`host:port`).
    pub first: Vec<String>,
    /// Every refused attempt (the same destination counts again).
    pub attempts: u64,
}

impl RefusedLog {
    /// Records an attempt to reach `dest`.
    pub fn add(&self, dest: &Destination) {
        let mut log = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        log.shown.attempts += 1;
        let name = dest.to_string();
        if log.seen.contains(&name) {
            return;
        }
        log.shown.count += 1;
        if log.shown.first.len() < REFUSED_SHOWN {
            log.shown.first.push(name.clone());
        }
        if log.seen.len() < DISTINCT_KEPT {
            log.seen.insert(name);
        }
    }

    /// What was refused so far.
    pub fn snapshot(&self) -> Refused {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .shown
            .clone()
    }
}

/// Set once the running program serves as its own helper ([`serve_as_helper`]).
static SELF_HELPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes the running program its own helper, as the `transcript` binary is: call it first
/// thing in `main`, before any thread starts (so before a multi-threaded runtime is built).
/// Started as `PROGRAM __netns …` (or `PROGRAM __guard …`) by the runner, it becomes the
/// helper (or the guard, [`guard_main`]) and never returns;
/// otherwise it returns, and [`default_helper`] is this program from then on.
pub fn serve_as_helper() {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(a) if a == HELPER_ARG => std::process::exit(helper_main(args)),
        Some(a) if a == GUARD_ARG => std::process::exit(guard_main(args)),
        Some(a) if a == EXEC_ARG => std::process::exit(exec_main(args)),
        _ => {}
    }
    SELF_HELPER.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The helper a runner uses when it names none: [`HELPER_ENV`] if set, else the running
/// program when it serves as its own ([`serve_as_helper`]), else `transcript-netns` beside
/// the running program or one directory up (a test binary in `target/debug/deps`), else on
/// `PATH`.
pub fn default_helper() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(HELPER_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    if SELF_HELPER.load(std::sync::atomic::Ordering::SeqCst)
        && let Ok(exe) = std::env::current_exe()
    {
        return Some(exe);
    }
    let name = "transcript-netns";
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        for d in [Some(dir), dir.parent()].into_iter().flatten() {
            let p = d.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_log_counts_distinct_destinations_and_names_the_first_twenty() {
        let log = RefusedLog::default();
        for i in 1..=30u16 {
            let d: Destination = format!("10.0.0.1:{i}").parse().unwrap();
            log.add(&d);
            log.add(&d);
        }
        let r = log.snapshot();
        assert_eq!(r.count, 30);
        assert_eq!(r.attempts, 60);
        assert_eq!(r.first.len(), REFUSED_SHOWN);
        assert_eq!(r.first[0], "10.0.0.1:1");
        assert_eq!(r.first[19], "10.0.0.1:20");
    }

    #[test]
    fn bounds_keep_each_destination_once_and_command_goes_through_the_helper() {
        let d: Destination = "example.com:443".parse().unwrap();
        let b = NetBounds::new("/h").allowing([d.clone(), d.clone()]);
        assert_eq!(b.allowed(), &[d]);
        let cmd = b.command("curl");
        let std = cmd.as_std();
        assert_eq!(std.get_program(), "/h");
        let args: Vec<_> = std.get_args().collect();
        assert_eq!(args, [HELPER_ARG, "curl"]);
        // Without bounds: through the guard when a helper is found, else directly.
        let plain = command("curl", None);
        match default_helper() {
            Some(h) => {
                assert_eq!(plain.as_std().get_program(), h.as_os_str());
                assert_eq!(guard_of(plain.as_std()), Some(h));
            }
            None => assert_eq!(plain.as_std().get_program(), "curl"),
        }
        assert_eq!("all".parse::<RunNetwork>().unwrap(), RunNetwork::All);
        assert!("some".parse::<RunNetwork>().is_err());
    }
}
