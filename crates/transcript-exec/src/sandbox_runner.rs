//! What a runner (the `transcript` CLI, or any composition root) says and sets up around
//! confinement: the mode as an argument, the policy hiding the runner's own files, and the
//! one-time warnings (opted out, a storage inside the workspace).

use std::path::Path;

use crate::sandbox::{Confinement, SandboxMode, SandboxPolicy, StepSandbox};
use crate::workflow::{Step, WorkflowSet};

impl std::str::FromStr for SandboxMode {
    type Err = String;

    /// `on` (confined) or `off`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "on" => Ok(SandboxMode::Confined),
            "off" => Ok(SandboxMode::Off),
            other => Err(format!("expected `on` or `off`, not {other:?}")),
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SandboxMode::Confined => "on",
            SandboxMode::Off => "off",
        })
    }
}

impl SandboxPolicy {
    /// A runner's policy in `mode`: confined runs hide the runner's `storage` directory (its
    /// transcripts and audit trail) and the NATS credentials file it was given
    /// (`NATS_CREDS`), and are refused on a kernel without Landlock ([`crate::sandbox::probe`]).
    ///
    /// # Errors
    /// The kernel cannot confine (the message names it and the opt-out).
    pub fn for_runner(mode: SandboxMode, storage: &Path) -> Result<Self, String> {
        if mode == SandboxMode::Off {
            return Ok(Self::off());
        }
        crate::sandbox::probe()?;
        let mut policy = Self::confined().hide(storage);
        if let Some(creds) = std::env::var_os("NATS_CREDS").filter(|c| !c.is_empty()) {
            policy = policy.hide(creds);
        }
        Ok(policy)
    }

    /// The confinement of a runner's plugins: the workspace, nothing declared; `None` when
    /// the run is unconfined.
    pub fn for_plugins(&self, workspace: &Path) -> Option<Confinement> {
        self.for_step(workspace, &StepSandbox::default())
    }

    /// What to tell the person starting a run in `workspace`, once: the run or steps running
    /// unconfined, and directories where no new entry can be made because a hidden path lies
    /// beneath them ([`Confinement::carved`]).
    pub fn warnings(&self, set: &WorkflowSet, workspace: &Path) -> Vec<String> {
        if self.mode == SandboxMode::Off {
            return vec![
                "warning: --sandbox off: every process of this run runs without the kernel's \
                 confinement (each step.started says \"sandbox\": \"off\")"
                    .to_owned(),
            ];
        }
        let mut out = Vec::new();
        let mut off = Vec::new();
        for key in set.keys() {
            if let Some(wf) = set.get(key) {
                unconfined(&wf.steps, "", &mut off);
            }
        }
        if !off.is_empty() {
            out.push(format!(
                "warning: sandbox: off: step(s) {} run without the kernel's confinement",
                off.join(", ")
            ));
        }
        if let Some(c) = self.for_plugins(workspace) {
            let carved = c.carved();
            if !carved.is_empty() {
                let names: Vec<String> = carved.iter().map(|p| p.display().to_string()).collect();
                out.push(format!(
                    "warning: the storage lies inside the workspace, hidden from every step: \
                     steps cannot create entries directly in {} (only inside their \
                     subdirectories); give --workspace or --storage outside the other",
                    names.join(", ")
                ));
            }
        }
        out
    }
}

impl SandboxPolicy {
    /// A runner's whole preparation, before anything starts: the policy
    /// ([`SandboxPolicy::for_runner`], [`SandboxPolicy::for_workflows`]), its declared paths
    /// checked ([`SandboxPolicy::check_declared`]), its network
    /// ([`SandboxPolicy::with_network`]) and the warnings to print once.
    ///
    /// # Errors
    /// The kernel cannot confine, or a declared path or opt-out is refused.
    pub fn prepare(
        (mode, network): (SandboxMode, crate::sandbox::net::RunNetwork),
        storage: &Path,
        set: &WorkflowSet,
        workspace: &Path,
    ) -> Result<(Self, Vec<String>), String> {
        let policy = Self::for_runner(mode, storage)?.for_workflows(set, workspace);
        policy.check_declared(set, workspace)?;
        let mut warnings = policy.warnings(set, workspace);
        let (policy, more) = policy.with_network(network, set);
        warnings.extend(more);
        Ok((policy, warnings))
    }

    /// This policy for `set` run in `workspace`: when one of its workflow files lies beneath
    /// the workspace, [`SandboxPolicy::workflow_in_workspace`].
    pub fn for_workflows(self, set: &WorkflowSet, workspace: &Path) -> Self {
        let ws = crate::sandbox::SandboxPolicy::expand_declared(Path::new("."), workspace);
        let inside = set.keys().into_iter().filter_map(|k| set.get(k)).any(|wf| {
            wf.source.as_ref().is_some_and(|s| {
                // As given to the runner: relative to its working directory.
                crate::sandbox::absolute(Path::new(&s.path)).starts_with(&ws)
            })
        });
        if inside {
            self.workflow_in_workspace()
        } else {
            self
        }
    }

    /// Refuses a step's declared path that is `/`, the home directory or an ancestor of
    /// either or of a hidden path (the storage): granting it whole would undo the bounds.
    ///
    /// # Errors
    /// The first such path, naming its step.
    pub fn check_declared(&self, set: &WorkflowSet, workspace: &Path) -> Result<(), String> {
        if self.mode == SandboxMode::Off {
            return Ok(());
        }
        let ws = crate::sandbox::SandboxPolicy::expand_declared(Path::new("."), workspace);
        let mut steps = Vec::new();
        for key in set.keys() {
            if let Some(wf) = set.get(key) {
                declared(&wf.steps, "", &mut steps);
            }
        }
        let untrusted = !self.trusts_literals();
        let where_ = "the workflow lies in the workspace, where steps write (an earlier run \
                      could have rewritten it): it cannot widen the sandbox; move it out of \
                      the workspace, or run with --sandbox off";
        for (path, step) in steps {
            if step.sandbox.off {
                if untrusted {
                    return Err(format!("step '{path}': sandbox: off: {where_}"));
                }
                continue;
            }
            for (key, list) in [("read", &step.sandbox.read), ("write", &step.sandbox.write)] {
                for p in list {
                    let full = crate::sandbox::SandboxPolicy::expand_declared(p, workspace);
                    if untrusted && !full.starts_with(&ws) {
                        return Err(format!(
                            "step '{path}': sandbox.{key}: '{}' is outside the workspace: {where_}",
                            p.display()
                        ));
                    }
                    if crate::sandbox::rules::too_wide(&full, self.hidden()) {
                        return Err(format!(
                            "step '{path}': sandbox.{key}: '{}' is the filesystem root, the home \
                             directory or holds it or the transcript storage: never granted \
                             whole; name the directories the step needs",
                            p.display()
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

impl SandboxPolicy {
    /// This policy for a run whose network is `network` (bounded processes start through
    /// [`crate::sandbox::net::default_helper`] unless [`SandboxPolicy::with_helper`] named
    /// one), and what to tell about the network once: `--network all`, or the steps declaring
    /// `network: all`.
    pub fn with_network(
        self,
        network: crate::sandbox::net::RunNetwork,
        set: &WorkflowSet,
    ) -> (Self, Vec<String>) {
        let policy = self;
        if network == crate::sandbox::net::RunNetwork::All {
            let warning = "warning: --network all: every process of this run uses the host's \
                           network (each step.started says \"network\": \"all\")";
            return (policy.host_network(), vec![warning.to_owned()]);
        }
        let mut all = Vec::new();
        for key in set.keys() {
            if let Some(wf) = set.get(key) {
                host_network(&wf.steps, "", &mut all);
            }
        }
        let warnings = if all.is_empty() {
            Vec::new()
        } else {
            vec![format!(
                "warning: network: all: step(s) {} use the host's network",
                all.join(", ")
            )]
        };
        (policy, warnings)
    }
}

/// The paths of the steps under `steps` declaring (or inheriting) `network: all` that start
/// processes.
fn host_network(steps: &[Step], prefix: &str, out: &mut Vec<String>) {
    for step in steps {
        let path = crate::workflow::join_path(prefix, &step.name);
        if step.network == Some(crate::sandbox::net::StepNetwork::All)
            && step.kind.children().is_empty()
        {
            out.push(path.clone());
        }
        host_network(step.kind.children(), &path, out);
    }
}

/// Every step under `steps` with its path.
fn declared<'s>(steps: &'s [Step], prefix: &str, out: &mut Vec<(String, &'s Step)>) {
    for step in steps {
        let path = crate::workflow::join_path(prefix, &step.name);
        out.push((path.clone(), step));
        declared(step.kind.children(), &path, out);
    }
}

/// The paths of the steps under `steps` declaring `sandbox: off`.
fn unconfined(steps: &[Step], prefix: &str, out: &mut Vec<String>) {
    for step in steps {
        let path = crate::workflow::join_path(prefix, &step.name);
        if step.sandbox.off {
            out.push(path.clone());
        }
        unconfined(step.kind.children(), &path, out);
    }
}
