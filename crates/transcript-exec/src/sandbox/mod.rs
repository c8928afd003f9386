//! Every process a run starts is confined by the kernel (#56): Landlock bounds what any code
//! a step runs can read, write and execute, whatever program it is and whatever its data says.
//!
//! # Model
//!
//! * **Who is confined.** Command steps, `run_command`, plugins, the MCP servers the proxy
//!   starts and agent CLIs, and everything each of them starts: a Landlock domain is
//!   inherited across `fork` and `exec` and can never be left (`no_new_privs` is set with it,
//!   so no set-uid program regains rights either).
//! * **What a confined process may do** ([`Confinement`]):
//!   - **write** (create, remove, rename, truncate) only beneath the workspace, its private
//!     temporary directory (`TMPDIR`, `TMP` and `TEMP` point at it, and `HOME` too unless the
//!     step sets one or it is an agent CLI; mode `0o700`, a random name, removed when the
//!     process and everything it left have ended), what the step
//!     declares (`sandbox: { write: [...] }`) and, for an agent CLI, its own state directory;
//!     plus the character devices every program expects (`/dev/null`, `/dev/zero`,
//!     `/dev/full`, `/dev/tty`, `/dev/ptmx`, `/dev/pts`, `/dev/random`, `/dev/urandom`);
//!   - **read and execute** only the system ([`SYSTEM_READ`]: `/usr`, `/bin`, `/sbin`,
//!     `/lib*`, `/etc`, `/opt`, `/proc`, `/sys`, `/dev`, `/run`), the directories on the
//!     process's `PATH` (for a version manager's `shims` directory, its whole tree: pyenv's
//!     `~/.pyenv`), the package tree its program resolves into (the outermost
//!     `node_modules` of a CLI installed by npm, else the program's directory), the
//!     workspace, the private temporary directory, what the step declares
//!     (`sandbox: { read: [...] }`) and the existing files outside the workspace a command
//!     line names literally in the workflow (an absolute argv element or agent `command:`
//!     element without a template but `{{workflow.dir}}`, a plugin's script: the author's,
//!     never data's). Never the rest of the home directory, the transcript
//!     storage, other runs' files or the runner's configuration ([`SandboxPolicy::hide`]).
//!   - A `PATH` directory, a program directory or a state directory that is `/`, the home
//!     directory or an ancestor of either or of a hidden path is never granted whole (a
//!     `PATH=/root:…` would otherwise open the home): only the program file itself is.
//! * **Hidden paths beneath a granted tree.** Landlock only allows: a rule on a directory
//!   covers everything beneath it. When a hidden path (the storage, say `./storage` inside
//!   the workspace) lies beneath a granted tree, that tree is granted entry by entry instead,
//!   every entry beside the hidden path whole, and the directories on the way down only
//!   listable: the hidden path's content is neither readable nor writable, and no new entry
//!   can be made directly in those directories (only inside their existing subdirectories).
//!   [`Confinement::carved`] says which directories lost that, so the runner can say so.
//!   Symbolic links among those entries are never followed to grant their target.
//! * **Scopes.** Where the kernel has them (Landlock ABI 6), a confined process can neither
//!   signal a process outside its domain (the runner, another step) nor connect to an
//!   abstract Unix socket made outside it.
//! * **How it is applied.** Landlock restricts the calling *thread* and everything it starts
//!   afterwards; so each confined spawn happens on a short-lived thread that first restricts
//!   itself, then forks and execs the program ([`spawn`]): the runner itself is never
//!   restricted, and no `unsafe` `pre_exec` hook is needed. A spawn whose restriction the
//!   kernel did not enforce fails; it never runs unconfined.
//! * **Opting out.** `sandbox: off` on a step, or [`SandboxMode::Off`] for the run
//!   (`--sandbox off`), starts the step's processes unconfined; the step's `step.started`
//!   says `"sandbox": "off"`, and the CLI warns once.
//!
//! # Threat model
//!
//! What a step's data can make a program do (an interpreter fed free text on stdin, a
//! configuration file named by data, an agent's tool call after a prompt injection) is
//! bounded by these rules, not by any list of programs or options: the load-time refusals
//! of known interpreters are a lint. A denied access is the program's own `EACCES`. Not
//! bounded here: the network (bounded by [`net`]: a namespace of its own per process), what
//! the step may legitimately write in the workspace, and reads of the system directories
//! (which hold no user data).
//!
//! # Versioning
//!
//! The rights requested are every right of the newest Landlock ABI the `landlock` crate
//! knows; on an older kernel the crate keeps those the kernel has (best effort). A kernel
//! without Landlock at all refuses confined runs ([`probe`]).

mod caps;
pub mod net;
mod program;
pub(crate) mod rules;
mod seccomp;

pub(crate) mod spawn;

use std::path::{Path, PathBuf};

pub use program::resolve_program;
pub use rules::{Grant, Rights, SYSTEM_READ};
pub use spawn::{PrivateTmp, probe, spawn, spawn_bounded, spawn_maybe};

/// The variables that say where an agent CLI keeps its state (see
/// [`crate::agent_sandbox`]): what a confined agent may write, so never templated.
pub const AGENT_STATE_ENV: &[&str] =
    &["HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"];

/// Whether a run's processes are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// Every process is confined (the default, `--sandbox on`).
    #[default]
    Confined,
    /// Nothing is confined (`--sandbox off`): every step's `step.started` says so.
    Off,
}

/// What a workflow step declares under `sandbox:`: `off`, or more paths to read or write
/// (literal, relative to the workspace or absolute, `~/` for the runner's home).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepSandbox {
    /// `sandbox: off`: the step's processes run unconfined.
    pub off: bool,
    /// `sandbox: { read: [...] }`: more trees the step may read and execute.
    pub read: Vec<PathBuf>,
    /// `sandbox: { write: [...] }`: more trees the step may write (and read).
    pub write: Vec<PathBuf>,
}

impl StepSandbox {
    /// `sandbox: off`.
    pub fn off() -> Self {
        Self {
            off: true,
            ..Self::default()
        }
    }

    /// Whether the step declares anything.
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }
}

/// The run's confinement settings: on or off, and the paths no step may reach even beneath a
/// granted tree (the transcript storage, the runner's configuration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// On or off for the whole run.
    pub mode: SandboxMode,
    hidden: Vec<PathBuf>,
    /// A workflow of the run lies where steps write (the workspace): its literals widen
    /// nothing (see [`SandboxPolicy::workflow_in_workspace`]).
    untrusted_literals: bool,
    /// Every process uses the host's network (`--network all`), whatever its step declares.
    host_network: bool,
    /// The network namespace helper ([`net::helper_main`]); `None`: [`net::default_helper`].
    helper: Option<PathBuf>,
}

impl SandboxPolicy {
    /// Confinement on, nothing hidden beyond what is never granted.
    pub fn confined() -> Self {
        Self::default()
    }

    /// Confinement off for the whole run.
    pub fn off() -> Self {
        Self {
            mode: SandboxMode::Off,
            ..Self::default()
        }
    }

    /// Every process of the run uses the host's network (`--network all`): each step's
    /// `step.started` says `"network": "all"`.
    pub fn host_network(mut self) -> Self {
        self.host_network = true;
        self
    }

    /// Whether every process of the run uses the host's network.
    pub fn is_host_network(&self) -> bool {
        self.host_network
    }

    /// Starts bounded processes through `helper` (the `transcript` binary passes itself).
    pub fn with_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.helper = Some(helper.into());
        self
    }

    /// The network bounds of a process of a step declaring (or inheriting) `network`;
    /// `None` when it uses the host's network (`network: all`, or the run's
    /// [`SandboxPolicy::host_network`]).
    pub fn net_for_step(&self, network: Option<&net::StepNetwork>) -> Option<net::NetBounds> {
        if self.host_network {
            return None;
        }
        let allow = match network {
            Some(net::StepNetwork::All) => return None,
            Some(net::StepNetwork::Allow(list)) => list.clone(),
            None => Vec::new(),
        };
        let helper = self
            .helper
            .clone()
            .or_else(net::default_helper)
            // No helper found: the spawn fails, naming it (never unbounded silently).
            .unwrap_or_else(|| PathBuf::from("transcript-netns"));
        Some(net::NetBounds::new(helper).allowing(allow))
    }

    /// A workflow of the run lies beneath the workspace, where an earlier run's steps could
    /// have rewritten it: what it writes literally no longer widens the bounds (no file its
    /// command lines name is granted, an agent's state is only where the runner's environment
    /// says). Its `sandbox: off` and declared paths outside the workspace are refused before
    /// the run ([`SandboxPolicy::check_declared`]).
    pub fn workflow_in_workspace(mut self) -> Self {
        self.untrusted_literals = true;
        self
    }

    /// Whether the run's workflows' literals may widen the bounds (see
    /// [`SandboxPolicy::workflow_in_workspace`]).
    pub fn trusts_literals(&self) -> bool {
        !self.untrusted_literals
    }

    /// Hides `path` (a file or a directory, existing or not) from every step, even where it
    /// lies beneath the workspace or a declared path.
    pub fn hide(mut self, path: impl Into<PathBuf>) -> Self {
        self.hidden.push(absolute(&path.into()));
        self
    }

    /// A declared path as granted: `~/` under the runner's home, relative under `workspace`,
    /// made absolute with its existing part's links resolved.
    pub fn expand_declared(path: &Path, workspace: &Path) -> PathBuf {
        absolute(&expand(path, &absolute(workspace)))
    }

    /// The hidden paths (absolute, symbolic links of their existing part resolved).
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// The confinement of a process started for a step declaring `step` in `workspace`;
    /// `None` when the run or the step is unconfined.
    pub fn for_step(&self, workspace: &Path, step: &StepSandbox) -> Option<Confinement> {
        if self.mode == SandboxMode::Off || step.off {
            return None;
        }
        let workspace = absolute(workspace);
        let resolve = |p: &PathBuf| lexical(&expand(p, &workspace));
        Some(Confinement {
            read: step.read.iter().map(resolve).collect(),
            write: step.write.iter().map(resolve).collect(),
            hidden: self.hidden.clone(),
            workspace,
            private_home: true,
            trusts_step_env: !self.untrusted_literals,
        })
    }
}

/// What one confined process may reach, before its program and private temporary directory
/// are known (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    workspace: PathBuf,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    /// `HOME` points at the private temporary directory unless the command sets its own
    /// (every process but an agent CLI, whose state lives in its home).
    private_home: bool,
    /// The step's own environment may say where an agent CLI keeps its state (not when the
    /// workflow lies where steps write).
    trusts_step_env: bool,
}

impl Confinement {
    /// A confinement to `workspace` with nothing declared and nothing hidden.
    pub fn new(workspace: &Path) -> Self {
        Self {
            workspace: absolute(workspace),
            read: Vec::new(),
            write: Vec::new(),
            hidden: Vec::new(),
            private_home: true,
            trusts_step_env: true,
        }
    }

    /// Whether the step's own environment may say where an agent CLI keeps its state.
    pub fn trusts_step_env(&self) -> bool {
        self.trusts_step_env
    }

    /// Keeps the runner's `HOME` (an agent CLI's state lives there; only its state directory
    /// is granted). Otherwise a confined process whose command sets no `HOME` gets its
    /// private temporary directory as `HOME`: a program then finds no configuration of the
    /// runner's user (`git` reading `~/.gitconfig`) instead of failing on a denied one.
    pub fn keep_home(mut self) -> Self {
        self.private_home = false;
        self
    }

    /// Whether `HOME` is the private temporary directory (see [`Confinement::keep_home`]).
    pub fn private_home(&self) -> bool {
        self.private_home
    }

    /// Adds a tree the process may read and execute (not when it lies in a tree the steps
    /// write: see [`Confinement::beneath_writable`]).
    pub fn read(mut self, path: impl AsRef<Path>) -> Self {
        self.read.push(lexical(path.as_ref()));
        self
    }

    /// Adds a tree the process may write (and read).
    pub fn write(mut self, path: impl AsRef<Path>) -> Self {
        self.write.push(lexical(path.as_ref()));
        self
    }

    /// The paths hidden from the process.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// Whether `path` (relative to the workspace, or absolute; as written) is or lies
    /// beneath a hidden path: what the file tools refuse too.
    pub fn hides(&self, path: &Path) -> bool {
        let p = lexical(&self.workspace.join(path));
        self.hidden.iter().any(|h| p.starts_with(h))
    }

    /// Hides `path` from the process, even beneath a granted tree.
    pub fn hide(mut self, path: impl AsRef<Path>) -> Self {
        self.hidden.push(absolute(path.as_ref()));
        self
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The state directory of an agent CLI: written like the workspace unless it is `/`, the
    /// home directory or an ancestor of it or of a hidden path (then nothing is granted).
    pub fn state_dir(self, path: impl AsRef<Path>) -> Self {
        let path = absolute(path.as_ref());
        if rules::too_wide(&path, &self.hidden) {
            return self;
        }
        self.write(path)
    }

    /// A file or directory the workflow's author named literally in a command line (an argv
    /// element, a plugin's script): readable, unless it is `/`, the home directory or an
    /// ancestor of either or of a hidden path (then nothing is granted).
    pub fn read_named(self, path: impl AsRef<Path>) -> Self {
        if rules::too_wide(&absolute(path.as_ref()), &self.hidden) {
            return self;
        }
        self.read(path)
    }

    /// A plugin's confinement: its command line is the author's (literal), so it may read
    /// the files and directories `args` name relative to `cwd` (its script), and `cwd`.
    pub fn for_plugin(self, cwd: Option<&Path>, args: &[String]) -> Self {
        let base = cwd.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let named: Vec<PathBuf> = args
            .iter()
            .map(|a| base.join(a))
            .filter(|p| p.exists())
            .collect();
        named
            .into_iter()
            .fold(self.read_named(&base), |c, p| c.read_named(p))
    }

    /// The directories granted entry by entry because a hidden path lies beneath them: no
    /// new entry can be made directly in them (see the module docs).
    pub fn carved(&self) -> Vec<PathBuf> {
        let mut carved = Vec::new();
        for root in std::iter::once(&self.workspace).chain(&self.write) {
            for hidden in &self.hidden {
                if hidden != root && hidden.starts_with(root) {
                    let mut dir = hidden.parent();
                    while let Some(d) = dir {
                        if !d.starts_with(root) {
                            break;
                        }
                        if !carved.iter().any(|c: &PathBuf| c == d) {
                            carved.push(d.to_path_buf());
                        }
                        dir = d.parent();
                    }
                }
            }
        }
        carved
    }

    /// Every rule for a process running `program` (as found, then with its links resolved)
    /// with `path_env` as the `PATH` whose directories are granted and `tmp` as its private
    /// temporary directory.
    pub fn grants(
        &self,
        program: Option<(&Path, &Path)>,
        path_env: Option<&str>,
        tmp: &Path,
    ) -> Vec<Grant> {
        rules::grants(self, program, path_env, tmp)
    }

    /// Whether `path` (as written: absolute, `..` removed, no link resolved) lies in a tree a
    /// confined step may write: the workspace, the private temporary directory or a declared
    /// write path. Such a path is never resolved into a grant of its own (a symbolic link
    /// there is data's).
    pub fn beneath_writable(&self, path: &Path, tmp: &Path) -> bool {
        let p = lexical(path);
        let real = absolute(path);
        [&self.workspace, &tmp.to_path_buf()]
            .into_iter()
            .chain(&self.write)
            .any(|w| p.starts_with(w) || real.starts_with(w) || p.starts_with(lexical(w)))
    }
}

/// `~/x` under the runner's home, a relative path under `workspace`.
fn expand(path: &Path, workspace: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return Path::new(&home).join(rest);
    }
    if path.is_relative() {
        workspace.join(path)
    } else {
        path.to_path_buf()
    }
}

/// `path` made absolute (against the current directory) and lexically clean (`.` and `..`
/// removed), no symbolic link resolved.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let path = if path.is_relative() {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    } else {
        path.to_path_buf()
    };
    let mut clean = PathBuf::from("/");
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                clean.pop();
            }
            std::path::Component::Normal(n) => clean.push(n),
            _ => {}
        }
    }
    clean
}

/// `path` made absolute and lexically clean, with the symbolic links of its longest existing
/// prefix resolved (what Landlock will see once a rule is opened on it).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    let clean = lexical(path);
    // Resolve the longest existing prefix; keep the rest as written.
    let mut existing = clean.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for n in rest.iter().rev() {
                out.push(n);
            }
            return out;
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return clean,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn step_paths_are_relative_to_the_workspace_and_literal() {
        let ws = tempfile::tempdir().unwrap();
        let step = StepSandbox {
            off: false,
            read: vec![PathBuf::from("/usr/share")],
            write: vec![PathBuf::from("build/out")],
        };
        let c = SandboxPolicy::confined()
            .for_step(ws.path(), &step)
            .unwrap();
        let ws_real = std::fs::canonicalize(ws.path()).unwrap();
        assert_eq!(c.write, vec![ws_real.join("build/out")]);
        assert_eq!(c.read, vec![PathBuf::from("/usr/share")]);
        assert!(SandboxPolicy::off().for_step(ws.path(), &step).is_none());
        assert!(
            SandboxPolicy::confined()
                .for_step(ws.path(), &StepSandbox::off())
                .is_none()
        );
    }

    #[test]
    fn absolute_resolves_the_existing_prefix_and_cleans_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
        assert_eq!(
            absolute(&real.join("link/a/../b/c")),
            real.join("b/c"),
            "the link resolved, `..` removed lexically past it"
        );
    }

    #[test]
    fn carved_names_the_directories_on_the_way_to_a_hidden_path() {
        let dir = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(dir.path()).unwrap();
        let c = Confinement::new(&ws).hide(ws.join("storage/transcripts"));
        assert_eq!(c.carved(), vec![ws.join("storage"), ws.clone()]);
        assert!(Confinement::new(&ws).hide("/var/x").carved().is_empty());
    }
}
