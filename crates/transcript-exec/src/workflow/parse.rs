//! The YAML form of a workflow (serde-saphyr): the document, its conversion
//! into the model (the steps' typed YAML layer is `yaml.rs`), and
//! loading a file with the files its `call_workflow` steps name.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use transcript_domain::WorkflowSource;

use super::yaml::{AgentDef, ForEachDef, StepDef};
use super::{
    AgentSpec, CommandLine, InputDef, Items, Step, StepKind, Workflow, WorkflowError, join_path,
};
use crate::compiled::{ConditionText, TemplateJson, TemplateText};
use crate::provider::AgentProvider;

impl Workflow {
    /// Parses YAML text; `file` names the source in errors. `call_workflow`
    /// targets are kept as written (see [`WorkflowSet::load`](super::WorkflowSet::load) for files).
    pub fn from_yaml(text: &str, file: &str) -> Result<Self, WorkflowError> {
        let def: WorkflowDef = serde_saphyr::from_str(text)
            .map_err(|e| WorkflowError::new(file, None, format!("invalid YAML: {e}")))?;
        def.into_workflow(file)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkflowDef {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    inputs: Vec<InputDef>,
    #[serde(default)]
    outputs: BTreeMap<String, String>,
    #[serde(default)]
    plugins: Vec<Vec<String>>,
    #[serde(default)]
    defaults: Option<DefaultsDef>,
    steps: Vec<StepDef>,
}

/// `defaults:`: what every step of the workflow has unless it (or an enclosing step) says
/// otherwise.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultsDef {
    /// `network:` (#57), in the step's forms.
    #[serde(default)]
    network: Option<Value>,
}

impl WorkflowDef {
    fn into_workflow(self, file: &str) -> Result<Workflow, WorkflowError> {
        let default_network = super::network_def::parse(self.defaults.and_then(|d| d.network))
            .map_err(|r| WorkflowError::new(file, None, format!("defaults.{r}")))?;
        let mut steps = self
            .steps
            .into_iter()
            .map(|s| s.into_step(file, ""))
            .collect::<Result<Vec<_>, _>>()?;
        super::network_def::inherit(&mut steps, default_network.as_ref());
        if let Some(empty) = self.plugins.iter().position(Vec::is_empty) {
            return Err(WorkflowError::new(
                file,
                None,
                format!("plugins[{empty}]: empty command"),
            ));
        }
        Ok(Workflow {
            name: self.name,
            description: self.description,
            inputs: self.inputs,
            outputs: texts(self.outputs),
            steps,
            plugins: self.plugins,
            dir: None,
            source: None,
        })
    }
}

/// The fields every kind has, and what they become.
fn common(name: String, timeout_ms: Option<u64>, continue_on_error: bool, kind: StepKind) -> Step {
    Step {
        name,
        kind,
        timeout: timeout_ms.map(Duration::from_millis),
        continue_on_error,
        sandbox: crate::sandbox::StepSandbox::default(),
        network: None,
    }
}

fn children(steps: Vec<StepDef>, file: &str, path: &str) -> Result<Vec<Step>, WorkflowError> {
    steps.into_iter().map(|s| s.into_step(file, path)).collect()
}

/// Templates by name (`outputs:`, `env:`), each compiled once.
fn texts(map: BTreeMap<String, String>) -> BTreeMap<String, TemplateText> {
    map.into_iter()
        .map(|(k, v)| (k, TemplateText::new(v)))
        .collect()
}

/// A list of strings (argv), or `None` when `v` is not one.
fn strings(v: Vec<Value>) -> Option<Vec<String>> {
    v.into_iter()
        .map(|v| match v {
            Value::String(s) => Some(s),
            _ => None,
        })
        .collect()
}

impl StepDef {
    fn into_step(mut self, file: &str, prefix: &str) -> Result<Step, WorkflowError> {
        let (name, sandbox, network) = self.take_bounds();
        let at = |r: String| WorkflowError::new(file, Some(&join_path(prefix, &name)), r);
        let sandbox = super::sandbox_def::parse(sandbox, file).map_err(at)?;
        let network = super::network_def::parse(network).map_err(at)?;
        let mut step = self.into_step_of_kind(file, prefix)?;
        step.sandbox = sandbox;
        step.network = network;
        Ok(step)
    }

    /// The step's name and its `sandbox:` and `network:` as written, taken out.
    fn take_bounds(&mut self) -> (String, Option<Value>, Option<Value>) {
        macro_rules! take {
            ($d:expr) => {
                ($d.name.clone(), $d.sandbox.take(), $d.network.take())
            };
        }
        match self {
            StepDef::Command(d) => take!(d),
            StepDef::Operation(d) => take!(d),
            StepDef::Terminal(d) => take!(d),
            StepDef::Parallel(d) => take!(d),
            StepDef::ForEach(d) => take!(d),
            StepDef::While(d) => take!(d),
            StepDef::CallWorkflow(d) => take!(d),
            StepDef::Agent(d) => take!(d),
            StepDef::Custom(_, d) => take!(d),
        }
    }

    fn into_step_of_kind(self, file: &str, prefix: &str) -> Result<Step, WorkflowError> {
        let err = |name: &str, reason: &str| {
            WorkflowError::new(file, Some(&join_path(prefix, name)), reason)
        };
        Ok(match self {
            StepDef::Command(d) => {
                let command = command_line(d.command).map_err(|r| err(&d.name, r))?;
                common(
                    d.name,
                    d.timeout_ms,
                    d.continue_on_error,
                    StepKind::Command {
                        command,
                        env: texts(d.env),
                        stdin: d.stdin.map(TemplateText::new),
                    },
                )
            }
            StepDef::Operation(d) => {
                let kind = StepKind::Operation {
                    tool: d.tool,
                    input: TemplateJson::new(d.input.unwrap_or(Value::Object(Default::default()))),
                };
                common(d.name, d.timeout_ms, d.continue_on_error, kind)
            }
            StepDef::Terminal(d) => {
                let success = terminal_success(&d.status).map_err(|r| err(&d.name, &r))?;
                let kind = StepKind::Terminal {
                    success,
                    message: TemplateText::new(d.message.unwrap_or_default()),
                };
                common(d.name, d.timeout_ms, d.continue_on_error, kind)
            }
            StepDef::Parallel(d) => {
                let path = join_path(prefix, &d.name);
                let kind = StepKind::Parallel {
                    mode: d.mode,
                    branches: children(d.branches, file, &path)?,
                };
                common(d.name, d.timeout_ms, d.continue_on_error, kind)
            }
            StepDef::ForEach(d) => for_each_step(d, file, prefix)?,
            StepDef::While(d) => {
                let path = join_path(prefix, &d.name);
                let kind = StepKind::While {
                    condition: ConditionText::new(d.condition),
                    max_iterations: d.max_iterations,
                    steps: children(d.steps, file, &path)?,
                };
                common(d.name, d.timeout_ms, d.continue_on_error, kind)
            }
            StepDef::CallWorkflow(d) => {
                let kind = StepKind::CallWorkflow {
                    workflow: d.workflow,
                    inputs: d
                        .inputs
                        .into_iter()
                        .map(|(k, v)| (k, TemplateJson::new(v)))
                        .collect(),
                };
                common(d.name, d.timeout_ms, d.continue_on_error, kind)
            }
            StepDef::Agent(d) => agent_step(d, file, prefix)?,
            StepDef::Custom(type_name, d) => {
                let kind = StepKind::Custom {
                    type_name,
                    params: TemplateJson::new(d.with.unwrap_or(Value::Null)),
                };
                common(d.name, d.timeout_ms, d.continue_on_error, kind)
            }
        })
    }
}

/// A `for_each` step: its items (a list, or a template string) and body.
fn for_each_step(d: ForEachDef, file: &str, prefix: &str) -> Result<Step, WorkflowError> {
    let path = join_path(prefix, &d.name);
    let items = match d.items {
        Value::Array(a) => Items::list(a),
        Value::String(s) => Items::Template(TemplateText::new(s)),
        _ => {
            return Err(WorkflowError::new(
                file,
                Some(&path),
                "'items' must be a list or a template string",
            ));
        }
    };
    let kind = StepKind::ForEach {
        items,
        steps: children(d.steps, file, &path)?,
    };
    Ok(common(d.name, d.timeout_ms, d.continue_on_error, kind))
}

/// An `agent` step.
fn agent_step(d: AgentDef, file: &str, prefix: &str) -> Result<Step, WorkflowError> {
    let at = |r: String| WorkflowError::new(file, Some(&join_path(prefix, &d.name)), r);
    let command = agent_command(d.command).map_err(|r| at(r.into()))?;
    let mcp_servers = super::mcp_servers::servers_of(d.mcp_servers).map_err(at)?;
    let kind = StepKind::Agent(AgentSpec {
        provider: AgentProvider::from(d.provider),
        command: command.into_iter().map(TemplateText::new).collect(),
        prompt: TemplateText::new(d.prompt),
        system_prompt: d.system_prompt.map(TemplateText::new),
        model: d.model,
        max_turns: d.max_turns,
        tools: d.tools,
        env: texts(d.env),
        mcp_servers,
    });
    Ok(common(d.name, d.timeout_ms, d.continue_on_error, kind))
}

/// A command step's `command`: a string is shell source, a non-empty list
/// of strings an argv.
fn command_line(command: Value) -> Result<CommandLine, &'static str> {
    match command {
        Value::String(s) => Ok(CommandLine::Shell(TemplateText::new(s))),
        Value::Array(a) if !a.is_empty() => strings(a)
            .map(|argv| CommandLine::Argv(argv.into_iter().map(TemplateText::new).collect()))
            .ok_or("a 'command' list must hold strings (argv)"),
        _ => Err(
            "'command' must be a string (shell source run by /bin/sh -c; values go through env:) or a non-empty list of strings (argv, no shell)",
        ),
    }
}

/// A terminal step's `status`: `succeeded` or `failed` (the status vocabulary), or the
/// older spellings `success` and `failure`, still accepted in workflow files.
fn terminal_success(status: &str) -> Result<bool, String> {
    match status {
        "succeeded" | "success" => Ok(true),
        "failed" | "failure" => Ok(false),
        other => Err(format!(
            "terminal status must be 'succeeded' or 'failed' (or 'success'/'failure'), not '{other}'"
        )),
    }
}

/// An agent step's optional `command`: a list of strings (argv).
fn agent_command(command: Option<Value>) -> Result<Vec<String>, &'static str> {
    match command {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => strings(a).ok_or("agent 'command' must be a list of strings"),
        Some(_) => Err("agent 'command' must be a list of strings (argv)"),
    }
}

/// Loads `path` (shown in errors and recorded in `run.started` as `shown`: the path as the
/// runner was given it, or a child's joined to its parent's shown directory, so a relative
/// root stays relative and byte-stable) and the files its `call_workflow` steps name.
pub(super) fn load_file(
    path: &Path,
    shown: String,
    workflows: &mut HashMap<String, Arc<Workflow>>,
) -> Result<String, WorkflowError> {
    let canonical = path
        .canonicalize()
        .map_err(|e| WorkflowError::new(&shown, None, format!("cannot open: {e}")))?;
    let key = canonical.display().to_string();
    if workflows.contains_key(&key) {
        return Ok(key);
    }
    let text = std::fs::read_to_string(&canonical)
        .map_err(|e| WorkflowError::new(&shown, None, format!("cannot read: {e}")))?;
    let mut wf = Workflow::from_yaml(&text, &shown)?;
    // Placeholder so a cycle back to this file terminates loading.
    workflows.insert(key.clone(), Arc::new(Workflow::new(wf.name.clone())));
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    rewrite_calls(&mut wf.steps, "", &dir, &shown, workflows)?;
    wf.dir = Some(dir);
    wf.source = Some(WorkflowSource::of_text(
        shown,
        hex_sha256(text.as_bytes()),
        &text,
    ));
    workflows.insert(key.clone(), Arc::new(wf));
    Ok(key)
}

/// Lowercase hex sha256 of `bytes`.
fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn rewrite_calls(
    steps: &mut [Step],
    prefix: &str,
    dir: &Path,
    file: &str,
    workflows: &mut HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    for s in steps {
        let path = join_path(prefix, &s.name);
        match &mut s.kind {
            StepKind::CallWorkflow { workflow, .. } => {
                let target = dir.join(&*workflow);
                if !target.is_file() {
                    return Err(WorkflowError::new(
                        file,
                        Some(&path),
                        format!(
                            "call_workflow target '{workflow}' not found ({})",
                            target.display()
                        ),
                    ));
                }
                let shown = Path::new(file)
                    .parent()
                    .unwrap_or_else(|| Path::new(""))
                    .join(&*workflow)
                    .display()
                    .to_string();
                *workflow = load_file(&target, shown, workflows)?;
            }
            StepKind::Parallel { branches: c, .. }
            | StepKind::ForEach { steps: c, .. }
            | StepKind::While { steps: c, .. } => {
                rewrite_calls(c, &path, dir, file, workflows)?;
            }
            _ => {}
        }
    }
    Ok(())
}
