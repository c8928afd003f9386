//! The runner's own variables that no process it starts inherits (hardening of #44).
//!
//! What the composition root consumed from its environment for its own storage connection
//! (`NATS_TOKEN`, `NATS_USER`/`NATS_PASSWORD`, `NATS_CREDS`, …) is the runner's, not the
//! workflow's: a command step printing its environment, an agent CLI told to by a prompt
//! injection or a plugin would otherwise put the fleet's credential into the transcript. The
//! composition root names those variables ([`crate::ServiceBuilder::withheld_env`],
//! [`crate::PluginLimits::withheld_env`]); every process the engine starts (command steps,
//! `run_command`, CLI agents, plugins) is spawned without them, by `env_remove` on its
//! command, before the step's own `env:` is applied: a step that sets one of them explicitly
//! keeps its own value (the workflow author's choice). The rule is structural (what the
//! runner consumed), not a list of secret-looking names: nothing else is withheld (`OTEL_*`
//! included: agent CLIs read them for their own telemetry).

use std::sync::Arc;

/// Names of environment variables the processes the engine starts do not inherit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WithheldEnv(Arc<[String]>);

impl WithheldEnv {
    /// Withholds `names` (an empty name is skipped).
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(
            names
                .into_iter()
                .map(Into::into)
                .filter(|n: &String| !n.is_empty())
                .collect(),
        )
    }

    /// Withholds those of `names` that are set in this process's environment: what the
    /// composition root consumed for itself.
    pub fn present(names: &[&str]) -> Self {
        Self::new(
            names
                .iter()
                .copied()
                .filter(|name| std::env::var_os(name).is_some()),
        )
    }

    /// The withheld names.
    pub fn names(&self) -> &[String] {
        &self.0
    }

    /// Removes the withheld names from what `cmd` passes on; call it before the step's own
    /// variables are set, so that those win.
    pub fn apply<'c>(
        &self,
        cmd: &'c mut tokio::process::Command,
    ) -> &'c mut tokio::process::Command {
        for name in self.0.iter() {
            cmd.env_remove(name);
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn printenv(cmd: &mut tokio::process::Command) -> String {
        let out = cmd.output().await.unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[tokio::test]
    async fn a_withheld_variable_is_gone_unless_the_step_sets_it() {
        let withheld = WithheldEnv::new(["PATH", ""]);
        assert_eq!(withheld.names(), ["PATH".to_owned()]);
        let absent = "TRANSCRIPT_WITHHELD_ENV_TEST_NEVER_SET";
        assert_eq!(WithheldEnv::present(&["PATH", absent]), withheld);
        let mut cmd = tokio::process::Command::new("/usr/bin/env");
        withheld.apply(&mut cmd);
        let env = printenv(&mut cmd).await;
        assert!(!env.lines().any(|l| l.starts_with("PATH=")), "{env}");
        let mut cmd = tokio::process::Command::new("/usr/bin/env");
        withheld.apply(&mut cmd).env("PATH", "/own");
        assert!(printenv(&mut cmd).await.lines().any(|l| l == "PATH=/own"));
    }
}
