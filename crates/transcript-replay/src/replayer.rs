//! A replay in progress: each agent execution opens its own model server playing its recorded
//! turns ([`Replayer::open`]), and its [`Verdict`] says whether it followed the recording.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::WorkspaceRoots;
use crate::server::{Handling, Matching, Mismatch, ModelServer, Script, ServerError};
use crate::tape::{Execution, StepKey, Tape};
use crate::wiring::{Wiring, wiring};

/// Plays a [`Tape`]: one model server per agent execution, in whatever order the executions
/// run (parallel branches, loop iterations and child runs each have their own turns).
#[derive(Debug)]
pub struct Replayer {
    tape: Mutex<Tape>,
    matching: Matching,
    roots: Option<WorkspaceRoots>,
}

/// One agent execution about to run.
#[derive(Debug, Clone, Copy)]
pub struct StepStart<'a> {
    /// Where it runs.
    pub key: &'a StepKey,
    /// Its provider's name (`claude`, `codex`, `gemini`, `openai`).
    pub provider: &'a str,
    /// The prompt it renders now.
    pub prompt: &'a str,
    /// The system prompt it renders now (`""` when none).
    pub system_prompt: &'a str,
    /// A private directory for the wiring's files (the caller creates and removes it).
    pub dir: &'a Path,
}

/// Why an execution could not be replayed at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The step's provider cannot be pointed at a local server.
    #[error("step {step}: replay cannot point provider '{provider}' at its model server")]
    Provider {
        /// The step.
        step: String,
        /// The provider.
        provider: String,
    },
    /// The server did not start.
    #[error("step {step}: {source}")]
    Server {
        /// The step.
        step: String,
        /// The cause.
        #[source]
        source: ServerError,
    },
    /// A wiring file could not be written.
    #[error("step {step}: cannot write {path}: {source}")]
    Write {
        /// The step.
        step: String,
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Replayer {
    /// A replayer of `tape` matching requests as `matching` says.
    pub fn new(tape: Tape, matching: Matching) -> Self {
        Replayer {
            tape: Mutex::new(tape),
            matching,
            roots: None,
        }
    }

    /// Replays a run recorded in workspace `recorded` in workspace `now` (a portable
    /// recording: another checkout, another machine). Every turn served maps the recorded
    /// root to `now` in its texts and in the strings of its tool-call arguments; the prompt
    /// and system prompt each step renders, and the tool results its agent sends, map `now`
    /// back to `recorded` before they are matched. Roots are replaced on path-prefix
    /// boundaries only (`/a/work` is not inside `/a/workshop`); equal roots map nothing.
    /// `recorded` is the recording's workspace (its `run.started` `workspace`, wire decision
    /// 20), `now` the replay's `--workspace`.
    ///
    /// ```
    /// use transcript_replay::{Matching, Replayer, Tape};
    ///
    /// let replayer = Replayer::new(Tape::default(), Matching::Strict)
    ///     .with_workspace_roots("/home/a/proj".into(), "/tmp/ci/proj".into());
    /// # let _ = replayer;
    /// ```
    pub fn with_workspace_roots(mut self, recorded: PathBuf, now: PathBuf) -> Self {
        self.roots = WorkspaceRoots::new(&recorded, &now);
        self
    }

    /// Takes the next recorded outcome of the command step at `key` (`--commands record`).
    pub fn take_command(&self, key: &StepKey) -> Option<crate::tape::CommandOutcome> {
        self.tape
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_command(key)
    }

    /// Starts the model server of the next recorded execution of `start.key`, and writes its
    /// wiring's files. A step the recording does not have, or whose prompt differs under
    /// strict matching, gets a server that refuses every request with the reason, so the
    /// agent stops at once and [`StepReplay::finish`] names it.
    pub fn open(&self, start: StepStart<'_>) -> Result<StepReplay, ReplayError> {
        let step = start.key.to_string();
        let execution = self
            .tape
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(start.key);
        let mut before = Vec::new();
        let mut script = match &execution {
            Some(e) => {
                before.extend(prompt_mismatch(e, start, self.roots.as_ref()));
                e.script(self.matching)
            }
            None => Script::default(),
        };
        script.conversation = Some(start.prompt.to_owned());
        script.roots = self.roots.clone();
        let missing = execution.is_none();
        if missing {
            script.refusal = Some(format!(
                "transcript replay: step {step} has no recorded execution"
            ));
        } else if self.matching == Matching::Strict
            && let Some(first) = before.first()
        {
            script.refusal = Some(format!("transcript replay: step {step}: {first}"));
        }
        let recorded = script.turns.len();
        let server = ModelServer::start(script).map_err(|source| ReplayError::Server {
            step: step.clone(),
            source,
        })?;
        let wiring = wiring(start.provider, &server.url(), start.dir).ok_or_else(|| {
            ReplayError::Provider {
                step: step.clone(),
                provider: start.provider.to_owned(),
            }
        })?;
        for (path, contents) in &wiring.files {
            write_private(path, contents).map_err(|source| ReplayError::Write {
                step: step.clone(),
                path: path.display().to_string(),
                source,
            })?;
        }
        Ok(StepReplay {
            key: start.key.clone(),
            server,
            wiring,
            before,
            recorded,
            missing,
            matching: self.matching,
        })
    }
}

/// The prompt and system prompt compared with the recorded ones (turn 1), the replay's
/// workspace root mapped back to the recorded one.
fn prompt_mismatch(
    e: &Execution,
    start: StepStart<'_>,
    roots: Option<&WorkspaceRoots>,
) -> Vec<Mismatch> {
    let recorded_system = e.system_prompt.as_deref().unwrap_or("");
    let pairs = [
        ("the prompt", e.prompt.as_str(), start.prompt),
        ("the system prompt", recorded_system, start.system_prompt),
    ];
    pairs
        .into_iter()
        .filter_map(|(subject, expected, now)| {
            let got = roots.map_or(now.into(), |r| r.to_recorded(now));
            (!crate::server::same_text(expected, &got)).then(|| Mismatch {
                turn: 1,
                subject: subject.to_owned(),
                expected: expected.to_owned(),
                got: Some(got.into_owned()),
                sent: Vec::new(),
            })
        })
        .collect()
}

/// Writes `contents` to a new file at `path` (mode `0o600`), its directories created `0o700`.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(parent) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents.as_bytes())
}

/// One agent execution's replay server, running.
#[derive(Debug)]
pub struct StepReplay {
    key: StepKey,
    server: ModelServer,
    wiring: Wiring,
    before: Vec<Mismatch>,
    recorded: usize,
    missing: bool,
    matching: Matching,
}

impl StepReplay {
    /// What points the agent at the server (add it to the agent's environment last).
    pub fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// The server's base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Stops the server and judges the execution.
    pub fn finish(self) -> Verdict {
        let requests = self.server.generation_requests();
        let beyond = requests
            .iter()
            .filter(|r| r.handling == Handling::Unscripted)
            .count();
        let mut mismatches = self.before;
        mismatches.extend(self.server.mismatches());
        Verdict {
            key: self.key,
            matching: self.matching,
            mismatches,
            missing: self.missing,
            recorded: self.recorded,
            served: self.server.turns_served(),
            beyond,
        }
    }
}

/// Whether one agent execution followed its recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The step.
    pub key: StepKey,
    /// The matching it ran under.
    pub matching: Matching,
    /// Every mismatch seen (prompt first).
    pub mismatches: Vec<Mismatch>,
    /// Whether the recording has no execution of this step.
    pub missing: bool,
    /// How many turns the recording has.
    pub recorded: usize,
    /// How many were served.
    pub served: usize,
    /// How many generation requests came after the last recorded turn.
    pub beyond: usize,
}

impl Verdict {
    /// Why the step fails: a step the recording lacks, a request beyond the recording (any
    /// matching), or under strict matching the first mismatch or a recorded turn never asked
    /// for. `None` when the step may succeed.
    pub fn failure(&self) -> Option<String> {
        let step = &self.key;
        if self.missing {
            return Some(format!(
                "replay: step {step} has no recorded execution in the replayed run"
            ));
        }
        if self.matching == Matching::Strict
            && let Some(m) = self.mismatches.first()
        {
            return Some(format!("replay: step {step}: {m}"));
        }
        if self.beyond > 0 {
            return Some(format!(
                "replay: step {step}: request {} is beyond the recording ({} turn(s) recorded)",
                self.recorded + 1,
                self.recorded
            ));
        }
        if self.matching == Matching::Strict && self.served < self.recorded {
            return Some(format!(
                "replay: step {step}: the agent stopped after {} of {} recorded turn(s)",
                self.served, self.recorded
            ));
        }
        None
    }

    /// What a fifo replay reports instead of failing: each mismatch.
    pub fn warnings(&self) -> Vec<String> {
        if self.matching == Matching::Strict {
            return Vec::new();
        }
        let step = &self.key;
        self.mismatches
            .iter()
            .map(|m| format!("replay: step {step}: {m}"))
            .collect()
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.failure() {
            Some(failure) => f.write_str(&failure),
            None => write!(
                f,
                "replay: step {}: {} of {} turn(s) replayed",
                self.key, self.served, self.recorded
            ),
        }
    }
}
