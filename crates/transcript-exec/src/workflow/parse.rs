//! The YAML form of a workflow (serde-saphyr): the raw definitions, their
//! conversion into the model (fields of another kind rejected), and
//! loading a file with the files its `call_workflow` steps name.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{
    AgentSpec, CommandLine, InputDef, Items, ParallelMode, Step, StepKind, Workflow, WorkflowError,
    join_path,
};

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
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    inputs: Vec<InputDef>,
    #[serde(default)]
    outputs: BTreeMap<String, String>,
    #[serde(default)]
    plugins: Vec<Vec<String>>,
    steps: Vec<StepDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepDef {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    continue_on_error: bool,
    // command
    #[serde(default)]
    command: Option<Value>,
    // operation
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    // terminal
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    message: Option<String>,
    // parallel
    #[serde(default)]
    mode: Option<ParallelMode>,
    #[serde(default)]
    branches: Option<Vec<StepDef>>,
    // for_each / while
    #[serde(default)]
    items: Option<Value>,
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    max_iterations: Option<u64>,
    #[serde(default)]
    steps: Option<Vec<StepDef>>,
    // call_workflow
    #[serde(default)]
    workflow: Option<String>,
    #[serde(default)]
    inputs: Option<BTreeMap<String, Value>>,
    // agent
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    system_prompt: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_turns: Option<u32>,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
    // custom
    #[serde(default)]
    with: Option<Value>,
}

impl WorkflowDef {
    fn into_workflow(self, file: &str) -> Result<Workflow, WorkflowError> {
        let steps = self
            .steps
            .into_iter()
            .map(|s| s.into_step(file, ""))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(empty) = self.plugins.iter().position(Vec::is_empty) {
            return Err(WorkflowError::new(
                file,
                None,
                format!("plugins[{empty}]: empty command"),
            ));
        }
        Ok(Workflow {
            name: self.name,
            inputs: self.inputs,
            outputs: self.outputs,
            steps,
            plugins: self.plugins,
            dir: None,
        })
    }
}

impl StepDef {
    fn into_step(self, file: &str, prefix: &str) -> Result<Step, WorkflowError> {
        let path = join_path(prefix, &self.name);
        let err = |reason: String| WorkflowError::new(file, Some(&path), reason);
        let need = |field: &str| err(format!("a '{}' step needs '{field}'", self.kind));
        let mut used: Vec<&str> = Vec::new();
        let kind = match self.kind.as_str() {
            "command" => {
                used.push("command");
                let command = match self.command.clone() {
                    Some(Value::String(s)) => CommandLine::Shell(s),
                    Some(Value::Array(a)) if !a.is_empty() => CommandLine::Argv(
                        a.into_iter()
                            .map(|v| match v {
                                Value::String(s) => Ok(s),
                                _ => Err(err("a 'command' list must hold strings (argv)".into())),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    Some(_) => {
                        return Err(err(
                            "'command' must be a string (run by sh -c) or a non-empty list of strings (argv, no shell)".into(),
                        ));
                    }
                    None => return Err(need("command")),
                };
                StepKind::Command { command }
            }
            "operation" => {
                used.extend(["tool", "input"]);
                StepKind::Operation {
                    tool: self.tool.clone().ok_or_else(|| need("tool"))?,
                    input: self
                        .input
                        .clone()
                        .unwrap_or(Value::Object(Default::default())),
                }
            }
            "terminal" => {
                used.extend(["status", "message"]);
                let success = match self.status.as_deref() {
                    Some("success") => true,
                    Some("failure") => false,
                    Some(other) => {
                        return Err(err(format!(
                            "terminal status must be 'success' or 'failure', not '{other}'"
                        )));
                    }
                    None => return Err(need("status")),
                };
                StepKind::Terminal {
                    success,
                    message: self.message.clone().unwrap_or_default(),
                }
            }
            "parallel" => {
                used.extend(["mode", "branches"]);
                let branches = self.branches.ok_or_else(|| need("branches"))?;
                StepKind::Parallel {
                    mode: self.mode.unwrap_or_default(),
                    branches: branches
                        .into_iter()
                        .map(|b| b.into_step(file, &path))
                        .collect::<Result<_, _>>()?,
                }
            }
            "for_each" => {
                used.extend(["items", "steps"]);
                let items = match self.items.clone() {
                    Some(Value::Array(a)) => Items::List(a),
                    Some(Value::String(s)) => Items::Template(s),
                    Some(_) => {
                        return Err(err("'items' must be a list or a template string".into()));
                    }
                    None => return Err(need("items")),
                };
                let steps = self.steps.ok_or_else(|| need("steps"))?;
                StepKind::ForEach {
                    items,
                    steps: steps
                        .into_iter()
                        .map(|b| b.into_step(file, &path))
                        .collect::<Result<_, _>>()?,
                }
            }
            "while" => {
                used.extend(["condition", "max_iterations", "steps"]);
                let condition = self.condition.clone().ok_or_else(|| need("condition"))?;
                let max_iterations = self.max_iterations.ok_or_else(|| need("max_iterations"))?;
                let steps = self.steps.ok_or_else(|| need("steps"))?;
                StepKind::While {
                    condition,
                    max_iterations,
                    steps: steps
                        .into_iter()
                        .map(|b| b.into_step(file, &path))
                        .collect::<Result<_, _>>()?,
                }
            }
            "call_workflow" => {
                used.extend(["workflow", "inputs"]);
                StepKind::CallWorkflow {
                    workflow: self.workflow.clone().ok_or_else(|| need("workflow"))?,
                    inputs: self.inputs.clone().unwrap_or_default(),
                }
            }
            "agent" => {
                used.extend([
                    "provider",
                    "command",
                    "prompt",
                    "system_prompt",
                    "model",
                    "max_turns",
                    "tools",
                    "env",
                ]);
                let command = match self.command.clone() {
                    None => Vec::new(),
                    Some(Value::Array(a)) => a
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => Ok(s),
                            _ => Err(err("agent 'command' must be a list of strings".into())),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => {
                        return Err(err(
                            "agent 'command' must be a list of strings (argv)".into()
                        ));
                    }
                };
                StepKind::Agent(AgentSpec {
                    provider: self.provider.clone().ok_or_else(|| need("provider"))?,
                    command,
                    prompt: self.prompt.clone().ok_or_else(|| need("prompt"))?,
                    system_prompt: self.system_prompt.clone(),
                    model: self.model.clone(),
                    max_turns: self.max_turns,
                    tools: self.tools.clone().unwrap_or_default(),
                    env: self.env.clone().unwrap_or_default(),
                })
            }
            other => {
                used.push("with");
                StepKind::Custom {
                    type_name: other.to_owned(),
                    params: self.with.clone().unwrap_or(Value::Null),
                }
            }
        };
        // Fields of another kind are mistakes worth reporting, not ignoring.
        let present: [(&str, bool); 21] = [
            ("command", self.command.is_some()),
            ("tool", self.tool.is_some()),
            ("input", self.input.is_some()),
            ("status", self.status.is_some()),
            ("message", self.message.is_some()),
            ("mode", self.mode.is_some()),
            ("branches", false),
            ("items", self.items.is_some()),
            ("condition", self.condition.is_some()),
            ("max_iterations", self.max_iterations.is_some()),
            ("steps", false),
            ("workflow", self.workflow.is_some()),
            ("inputs", self.inputs.is_some()),
            ("provider", self.provider.is_some()),
            ("prompt", self.prompt.is_some()),
            ("system_prompt", self.system_prompt.is_some()),
            ("model", self.model.is_some()),
            ("max_turns", self.max_turns.is_some()),
            ("tools", self.tools.is_some()),
            ("env", self.env.is_some()),
            ("with", self.with.is_some()),
        ];
        if let Some((field, _)) = present.iter().find(|(f, p)| *p && !used.contains(f)) {
            return Err(err(format!(
                "field '{field}' does not apply to a '{}' step",
                self.kind
            )));
        }
        Ok(Step {
            name: self.name,
            kind,
            timeout: self.timeout_ms.map(Duration::from_millis),
            continue_on_error: self.continue_on_error,
        })
    }
}

pub(super) fn load_file(
    path: &Path,
    workflows: &mut HashMap<String, Arc<Workflow>>,
) -> Result<String, WorkflowError> {
    let shown = path.display().to_string();
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
    workflows.insert(key.clone(), Arc::new(wf));
    Ok(key)
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
                *workflow = load_file(&target, workflows)?;
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
