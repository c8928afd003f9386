//! The engine's replay ports ([`transcript_exec::model_endpoint::ModelEndpoints`],
//! [`RecordedCommands`]) over a [`Replayer`]: each agent execution of a replay gets its own
//! server playing its recorded turns, and the execution's [`crate::Verdict`] becomes the
//! step's failure (or, under fifo matching, its warnings). A runner registers one value for
//! both: `ServiceBuilder::model_endpoints(e.clone()).recorded_commands(e)`. With `--commands record` it also
//! serves command steps their recorded outcome ([`RecordedCommands`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::{Replayer, StepKey, StepReplay, StepStart};
use async_trait::async_trait;
use transcript_exec::model_endpoint::{
    EndpointOutcome, EndpointSession, EndpointStart, ModelEndpoints, RecordedCommand,
    RecordedCommands,
};

/// Opens replay servers from one [`Replayer`].
#[derive(Debug, Clone)]
pub struct ReplayEndpoints {
    replayer: Arc<Replayer>,
}

impl ReplayEndpoints {
    /// Endpoints playing `replayer`'s tape.
    pub fn new(replayer: Replayer) -> Self {
        ReplayEndpoints {
            replayer: Arc::new(replayer),
        }
    }
}

#[async_trait]
impl ModelEndpoints for ReplayEndpoints {
    async fn open(&self, start: EndpointStart) -> Result<Box<dyn EndpointSession>, String> {
        let key = StepKey {
            callers: start.callers,
            path: start.path,
            iteration: start.iteration,
        };
        let replayer = self.replayer.clone();
        // Binding, starting the server's thread and writing the wiring's files: off the
        // runtime's workers.
        let step = tokio::task::spawn_blocking(move || {
            replayer.open(StepStart {
                key: &key,
                provider: &start.provider,
                prompt: &start.prompt,
                system_prompt: &start.system_prompt,
                dir: &start.config_dir,
            })
        })
        .await
        .map_err(|e| format!("replay: {e}"))?
        .map_err(|e| format!("replay: {e}"))?;
        Ok(Box::new(ReplaySession { step }))
    }
}

impl RecordedCommands for ReplayEndpoints {
    fn take(
        &self,
        callers: &[(String, u64)],
        path: &str,
        iteration: u64,
    ) -> Option<RecordedCommand> {
        let key = StepKey {
            callers: callers.to_vec(),
            path: path.to_owned(),
            iteration,
        };
        let outcome = self.replayer.take_command(&key)?;
        Some(RecordedCommand {
            stdout: outcome.stdout,
            exit_code: outcome.exit_code,
            error: outcome.error,
        })
    }
}

/// One execution's replay server.
struct ReplaySession {
    step: StepReplay,
}

#[async_trait]
impl EndpointSession for ReplaySession {
    fn env(&self) -> BTreeMap<String, String> {
        self.step.wiring().env.clone()
    }

    async fn finish(self: Box<Self>) -> EndpointOutcome {
        let step = self.step;
        // Stopping the server joins its thread.
        match tokio::task::spawn_blocking(move || step.finish()).await {
            Ok(verdict) => EndpointOutcome {
                failure: verdict.failure(),
                warnings: verdict.warnings(),
            },
            Err(e) => EndpointOutcome {
                failure: Some(format!("replay: the step's model server failed: {e}")),
                warnings: Vec::new(),
            },
        }
    }
}
