//! The `agent` step: records the rendered prompt as the user message,
//! picks the provider's runner (registered, or the CLI runner for a
//! command or preset) and runs it behind an [`AgentSeam`] that routes and
//! records its tool calls.

use std::sync::Arc;

use serde_json::Value;
use transcript_domain::{ContentBlock, Fidelity, MessagePayload, Payload, Role};

use crate::agent::{AgentRequest, AgentRunner, AgentSeam};
use crate::catch_unwind::CatchUnwind;
use crate::model_endpoint::{EndpointOutcome, EndpointStart, StepEndpoint};
use crate::service::context::{Flow, KindOut, StepCtx, with_grace};
use crate::template::Scope;
use crate::workflow::AgentSpec;

/// The runner's request: `spec` with its templates rendered in the step's
/// scope (an error names the field whose template did not compile).
fn request(sc: &StepCtx<'_>, spec: &AgentSpec) -> Result<AgentRequest, String> {
    let scope: &Scope = sc.scope;
    let prompt = spec
        .prompt
        .render(scope)
        .map_err(|e| format!("prompt: {e}"))?;
    let system_prompt = match &spec.system_prompt {
        Some(s) => s.render(scope).map_err(|e| format!("system_prompt: {e}"))?,
        None => String::new(),
    };
    let command: Vec<String> = spec
        .command
        .iter()
        .map(|a| a.render(scope))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("command: {e}"))?;
    crate::workflow::argv_rule::check_options(&command, |i| spec.command.get(i)?.compiled().ok())
        .map_err(|e| format!("command: {e}"))?;
    let env = spec
        .env
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.render(scope)?)))
        .collect::<Result<_, crate::template::TemplateError>>()
        .map_err(|e| format!("env: {e}"))?;
    Ok(AgentRequest {
        step: sc.step.name.clone(),
        provider: spec.provider.clone(),
        command,
        prompt,
        system_prompt,
        model: spec.model.clone(),
        max_turns: spec.max_turns,
        tools: spec.tools.clone(),
        env,
        workspace: sc.run.inner.workspace.clone(),
        private_dirs: Vec::new(),
        reach: crate::agent_network::model_destinations(spec.provider.name(), &literal_env(spec)),
    })
}

/// The step's `env:` values written literally (a templated one, data's choice, never says
/// where the model is: #57).
fn literal_env(spec: &AgentSpec) -> std::collections::BTreeMap<String, String> {
    spec.env
        .iter()
        .filter(|(_, t)| !t.source().contains("{{") && !t.source().contains("{%"))
        .map(|(k, t)| (k.clone(), t.source().to_owned()))
        .collect()
}

/// Runs `sc`'s step, an agent step described by `spec`.
pub(in crate::service) async fn run(sc: &StepCtx<'_>, spec: &AgentSpec) -> KindOut {
    let (ctx, cancel) = (sc.run, sc.cancel);
    let (path, iteration) = (sc.path, sc.iteration);
    let mut request = match request(sc, spec) {
        Ok(r) => r,
        Err(e) => return KindOut::flow(Flow::Failed(e)),
    };
    let (prompt, system_prompt) = (request.prompt.clone(), request.system_prompt.clone());
    ctx.emitter
        .emit(path, iteration, || {
            let mut blocks = vec![ContentBlock::text(Fidelity::Router, prompt)];
            if !system_prompt.is_empty() {
                blocks.push(ContentBlock::text(Fidelity::Router, system_prompt));
            }
            Payload::MessageUser(MessagePayload::new(Role::User, blocks))
        })
        .await;
    // CLI agents (a command, or a provider preset) need no registration.
    let runner = match ctx.inner.agents.get(spec.provider.name()) {
        Some(r) => r.clone(),
        None if !spec.command.is_empty()
            || crate::preset::Preset::of_agent(&spec.provider).is_some() =>
        {
            Arc::new(crate::cli_agent::CliAgentRunner) as Arc<dyn AgentRunner>
        }
        None => {
            return KindOut::flow(Flow::Failed(format!(
                "no agent runner for provider '{}'",
                spec.provider
            )));
        }
    };
    // The runner's model endpoint (a replay's recorded turns), before the MCP wiring, which
    // reads the homes it sets.
    let endpoint = match open_endpoint(sc, spec, &mut request).await {
        Ok(e) => e,
        Err(e) => return KindOut::flow(Flow::Failed(e)),
    };
    let prefix = ctx.agent_call_prefix(path, iteration);
    // The step's MCP proxy, when it has servers: started before the CLI, stopped after it.
    let proxy = match start_mcp_proxy(sc, spec, &mut request, prefix.clone()).await {
        Ok(p) => p,
        Err(e) => {
            finish_endpoint(endpoint).await;
            return KindOut::flow(Flow::Failed(e));
        }
    };
    let seam = AgentSeam::new(
        sc.call_scope(),
        ctx.inner.router.clone(),
        spec.provider.name(),
    )
    .with_offered_tools(spec.tools.iter().cloned())
    .with_call_id_prefix(prefix)
    .with_configured_model(spec.model.clone())
    .with_clock(ctx.inner.observers.clock.clone());
    let fut = CatchUnwind::new(async { runner.run(request, &seam).await });
    // A cancelled agent is cancelled whatever it returned within the grace.
    let finished = with_grace(fut, cancel, ctx.inner.cancel_grace).await;
    // Whatever the outcome; a lost observation fails a step that would have succeeded.
    let lost = crate::mcp::step::finish(proxy).await;
    let judged = finish_endpoint(endpoint).await;
    if cancel.is_cancelled() {
        return KindOut::flow(Flow::Cancelled);
    }
    judged_outcome(finished, lost, judged)
}

/// The outcome of an agent that was not cancelled: the endpoint's failure first (a replay
/// that diverged), then a lost MCP observation of a step that would have succeeded, else what
/// the agent returned, the endpoint's warnings added to a reply's.
fn judged_outcome<P: std::fmt::Display>(
    finished: Option<Result<Result<crate::agent::AgentReply, crate::agent::AgentError>, P>>,
    lost: Result<(), String>,
    judged: EndpointOutcome,
) -> KindOut {
    if let Some(failure) = judged.failure {
        return KindOut::flow(Flow::Failed(failure));
    }
    if let Err(lost) = lost
        && matches!(finished, Some(Ok(Ok(_))))
    {
        return KindOut::flow(Flow::Failed(lost));
    }
    outcome(finished.map(|r| {
        r.map(|r| {
            r.map(|mut reply| {
                reply.warnings.extend(judged.warnings);
                reply
            })
        })
    }))
}

/// Opens the runner's model endpoint for this execution, its environment added to
/// `request`'s; `None` without one.
async fn open_endpoint(
    sc: &StepCtx<'_>,
    spec: &AgentSpec,
    request: &mut AgentRequest,
) -> Result<Option<StepEndpoint>, String> {
    let Some(endpoints) = &sc.run.inner.model_endpoints else {
        return Ok(None);
    };
    let start = EndpointStart {
        callers: sc.run.callers.clone(),
        path: sc.path.to_owned(),
        iteration: sc.iteration,
        provider: spec.provider.name().to_owned(),
        prompt: request.prompt.clone(),
        system_prompt: request.system_prompt.clone(),
        config_dir: std::path::PathBuf::new(),
    };
    let before = request.env.clone();
    let endpoint = StepEndpoint::open(endpoints.as_ref(), start, &mut request.env).await?;
    request.private_dirs.push(endpoint.dir().to_path_buf());
    // The runner's own endpoint is reached by a bounded CLI (#57).
    let set: std::collections::BTreeMap<String, String> = request
        .env
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    request
        .reach
        .extend(crate::agent_network::model_destinations(
            spec.provider.name(),
            &set,
        ));
    Ok(Some(endpoint))
}

async fn finish_endpoint(endpoint: Option<StepEndpoint>) -> EndpointOutcome {
    match endpoint {
        Some(e) => e.finish().await,
        None => EndpointOutcome::default(),
    }
}

/// Starts the MCP proxy of `spec`'s servers, pointing `request` at it; for a CLI preset step
/// (no `command:`, no registered runner) even without servers, so that the CLI starts none
/// of the user's own MCP servers either (#40 follow-up).
async fn start_mcp_proxy(
    sc: &StepCtx<'_>,
    spec: &AgentSpec,
    request: &mut AgentRequest,
    call_id_prefix: String,
) -> Result<Option<crate::mcp::step::StepProxy>, String> {
    let cli_preset = sc.run.inner.agents.get(spec.provider.name()).is_none()
        && request.command.is_empty()
        && crate::preset::Preset::of_agent(&spec.provider).is_some();
    if spec.mcp_servers.is_empty() && !cli_preset {
        return Ok(None);
    }
    let (recorder, (max_value_bytes, max_line_bytes)) = sc.run.emitter.recorder_and_cap();
    let limits = sc.limits();
    let target = crate::mcp::step::Target {
        recorder,
        run_id: sc.run.run_id,
        max_value_bytes,
        max_line_bytes,
        path: sc.path.to_owned(),
        iteration: sc.iteration,
        call_id_prefix,
        confinement: limits.confinement,
        network: limits.network,
    };
    let gateway = sc.run.inner.mcp_gateway.as_ref();
    crate::mcp::step::start(
        gateway,
        &spec.mcp_servers,
        request,
        target,
        sc.step.timeout,
        sc.cancel,
    )
    .await
}

/// The step's outcome from what its agent returned (`None`: cancelled).
fn outcome<P: std::fmt::Display>(
    finished: Option<Result<Result<crate::agent::AgentReply, crate::agent::AgentError>, P>>,
) -> KindOut {
    match finished {
        None => KindOut::flow(Flow::Cancelled),
        Some(Ok(Ok(reply))) => {
            // Warnings the agent survived stay visible in the result.
            let result = if reply.warnings.is_empty() {
                Value::String(reply.output.clone())
            } else {
                serde_json::json!({"output": reply.output.clone(), "warnings": reply.warnings})
            };
            KindOut::done(Value::String(reply.output), Some(result))
        }
        Some(Ok(Err(e))) => KindOut::flow(Flow::Failed(e.to_string())),
        Some(Err(panic)) => KindOut::flow(Flow::Failed(format!("agent panicked: {panic}"))),
    }
}
