//! Validation of a [`WorkflowSet`] before a run: names, references and
//! templates, step kinds, and `call_workflow` targets and cycles, each
//! error naming the file, the step path and the reason.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::{CommandLine, Items, Step, StepKind, Workflow, WorkflowError, WorkflowSet, join_path};
use crate::condition::Condition;
use crate::template::{Reference, Template, templates_in};

impl WorkflowSet {
    /// Full validation: structure plus every custom kind known to `is_custom`.
    pub fn validate(&self, is_custom: &dyn Fn(&str) -> bool) -> Result<(), WorkflowError> {
        self.validate_structure()?;
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort();
        for key in keys {
            let Some(wf) = self.workflows.get(key) else {
                continue;
            };
            check_kinds(key, "", &wf.steps, is_custom)?;
        }
        Ok(())
    }

    /// Runs `check` on every step of every workflow (keys sorted, steps in
    /// document order); the first `Some(reason)` becomes the error.
    pub fn check_steps(
        &self,
        check: &dyn Fn(&Step) -> Option<String>,
    ) -> Result<(), WorkflowError> {
        fn walk(
            file: &str,
            prefix: &str,
            steps: &[Step],
            check: &dyn Fn(&Step) -> Option<String>,
        ) -> Result<(), WorkflowError> {
            for s in steps {
                let path = join_path(prefix, &s.name);
                if let Some(reason) = check(s) {
                    return Err(WorkflowError::new(file, Some(&path), reason));
                }
                walk(file, &path, s.kind.children(), check)?;
            }
            Ok(())
        }
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort();
        for key in keys {
            if let Some(wf) = self.workflows.get(key) {
                walk(key, "", &wf.steps, check)?;
            }
        }
        Ok(())
    }

    pub(super) fn validate_structure(&self) -> Result<(), WorkflowError> {
        if !self.workflows.contains_key(&self.root) {
            return Err(WorkflowError::new(
                &self.root,
                None,
                "root workflow missing from the set",
            ));
        }
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort();
        for key in &keys {
            if let Some(wf) = self.workflows.get(*key) {
                validate_workflow(key, wf, &self.workflows)?;
            }
        }
        // call_workflow cycles (static; the runtime depth limit is separate).
        let mut done = HashSet::new();
        for key in keys {
            let mut stack = Vec::new();
            self.find_cycle(key, &mut stack, &mut done)?;
        }
        Ok(())
    }

    fn find_cycle(
        &self,
        key: &str,
        stack: &mut Vec<String>,
        done: &mut HashSet<String>,
    ) -> Result<(), WorkflowError> {
        if done.contains(key) {
            return Ok(());
        }
        if let Some(pos) = stack.iter().position(|k| k == key) {
            let mut cycle: Vec<String> = stack[pos..].to_vec();
            cycle.push(key.to_owned());
            return Err(WorkflowError::new(
                &stack[stack.len() - 1],
                None,
                format!("call_workflow cycle: {}", cycle.join(" -> ")),
            ));
        }
        let Some(wf) = self.workflows.get(key) else {
            return Ok(());
        };
        stack.push(key.to_owned());
        let mut calls = Vec::new();
        collect_calls(&wf.steps, "", &mut calls);
        for (_, target) in calls {
            self.find_cycle(&target, stack, done)?;
        }
        stack.pop();
        done.insert(key.to_owned());
        Ok(())
    }
}

fn collect_calls(steps: &[Step], prefix: &str, out: &mut Vec<(String, String)>) {
    for s in steps {
        let path = join_path(prefix, &s.name);
        if let StepKind::CallWorkflow { workflow, .. } = &s.kind {
            out.push((path.clone(), workflow.clone()));
        }
        collect_calls(s.kind.children(), &path, out);
    }
}

fn check_kinds(
    file: &str,
    prefix: &str,
    steps: &[Step],
    is_custom: &dyn Fn(&str) -> bool,
) -> Result<(), WorkflowError> {
    for s in steps {
        let path = join_path(prefix, &s.name);
        if let StepKind::Custom { type_name, .. } = &s.kind
            && !is_custom(type_name)
        {
            return Err(WorkflowError::new(
                file,
                Some(&path),
                format!("unknown step kind '{type_name}' (not built in and not registered)"),
            ));
        }
        check_kinds(file, &path, s.kind.children(), is_custom)?;
    }
    Ok(())
}

/// What templates may see at a point of the workflow.
#[derive(Clone, Default)]
struct Visible {
    steps: HashSet<String>,
    /// Innermost loop: Some(true) for for_each (has item), Some(false) for while.
    innermost_loop: Option<bool>,
}

fn validate_workflow(
    key: &str,
    wf: &Workflow,
    all: &HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    if wf.name.trim().is_empty() {
        return Err(WorkflowError::new(key, None, "workflow has no name"));
    }
    let inputs: HashSet<&str> = wf.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut visible = Visible::default();
    validate_seq(key, "", &wf.steps, &inputs, &mut visible, all)?;
    // Outputs may read any step of the top-level sequence (and inputs).
    for (name, text) in &wf.outputs {
        let t = Template::parse(text)
            .map_err(|e| WorkflowError::new(key, None, format!("output '{name}': {e}")))?;
        check_refs(t.references(), &inputs, &visible).map_err(|reason| {
            WorkflowError::new(key, None, format!("output '{name}': {reason}"))
        })?;
    }
    Ok(())
}

fn validate_seq(
    file: &str,
    prefix: &str,
    steps: &[Step],
    inputs: &HashSet<&str>,
    visible: &mut Visible,
    all: &HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    let mut names = HashSet::new();
    for s in steps {
        let path = join_path(prefix, &s.name);
        let err = |reason: String| WorkflowError::new(file, Some(&path), reason);
        if s.name.is_empty() || s.name.contains('.') {
            return Err(err(
                "step names must be non-empty and contain no '.' (paths are dot-separated)".into(),
            ));
        }
        if !names.insert(s.name.as_str()) {
            return Err(err(format!("duplicate step name '{}'", s.name)));
        }
        let check = |text: &str, what: &str, vis: &Visible| -> Result<(), WorkflowError> {
            let t = Template::parse(text).map_err(|e| err(format!("{what}: {e}")))?;
            check_refs(t.references(), inputs, vis).map_err(|r| err(format!("{what}: {r}")))
        };
        let check_json = |v: &Value, what: &str, vis: &Visible| -> Result<(), WorkflowError> {
            for t in templates_in(v).map_err(|e| err(format!("{what}: {e}")))? {
                check_refs(t.references(), inputs, vis).map_err(|r| err(format!("{what}: {r}")))?;
            }
            Ok(())
        };
        match &s.kind {
            StepKind::Command { command, env } => {
                match command {
                    CommandLine::Shell(command) => {
                        check(command, "command", visible)?;
                        Template::parse(command)
                            .and_then(|t| t.check_shell_source())
                            .map_err(|e| err(format!("command: {e}")))?;
                    }
                    CommandLine::Argv(argv) => {
                        if argv.is_empty() {
                            return Err(err("command: the argv list is empty".into()));
                        }
                        for arg in argv {
                            check(arg, "command", visible)?;
                        }
                        check_code_arguments(argv).map_err(err)?;
                    }
                }
                for (name, value) in env {
                    check(value, &format!("env {name}"), visible)?;
                    check_env_entry(name, value).map_err(|r| err(format!("env: {r}")))?;
                }
            }
            StepKind::Operation { tool, input } => {
                if tool.is_empty() {
                    return Err(err("operation needs a tool name".into()));
                }
                check_json(input, "input", visible)?;
                if tool == crate::tools::SHELL_TOOL {
                    if let Some(Value::String(line)) = input.get("command") {
                        Template::parse(line)
                            .and_then(|t| t.check_shell_source())
                            .map_err(|e| err(format!("input: command: {e}")))?;
                    }
                    if let Some(Value::Array(items)) = input.get("command") {
                        let argv: Vec<String> = items
                            .iter()
                            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                            .collect();
                        check_code_arguments(&argv).map_err(|e| err(format!("input: {e}")))?;
                    }
                    match input.get("env") {
                        None => {}
                        Some(Value::Object(map)) => {
                            for (name, value) in map {
                                // A literal number or boolean is its text.
                                let text = match value {
                                    Value::String(v) => v.as_str(),
                                    Value::Number(_) | Value::Bool(_) => "",
                                    _ => {
                                        return Err(err(format!(
                                            "input: env: '{name}' must be a string, a number or a boolean"
                                        )));
                                    }
                                };
                                check_env_entry(name, text)
                                    .map_err(|r| err(format!("input: env: {r}")))?;
                            }
                        }
                        Some(_) => {
                            return Err(err(
                                "input: env must be a mapping of names to strings".into()
                            ));
                        }
                    }
                }
            }
            StepKind::Terminal { message, .. } => check(message, "message", visible)?,
            StepKind::Agent(a) => {
                check(&a.prompt, "prompt", visible)?;
                if let Some(sp) = &a.system_prompt {
                    check(sp, "system_prompt", visible)?;
                }
                for arg in &a.command {
                    check(arg, "command", visible)?;
                }
                for (name, value) in &a.env {
                    check(value, "env", visible)?;
                    check_env_entry(name, value).map_err(|r| err(format!("env: {r}")))?;
                }
                if a.provider.is_empty() {
                    return Err(err("agent needs a provider".into()));
                }
                if a.command.is_empty()
                    && let Some(preset) = crate::preset::Preset::of(&a.provider)
                {
                    preset
                        .check(a.max_turns, &a.tools)
                        .map_err(|e| err(e.to_string()))?;
                }
            }
            StepKind::Custom { params, .. } => check_json(params, "with", visible)?,
            StepKind::CallWorkflow {
                workflow,
                inputs: ci,
            } => {
                let Some(target) = all.get(workflow) else {
                    return Err(err(format!(
                        "call_workflow target '{workflow}' is not in the workflow set"
                    )));
                };
                for (k, v) in ci {
                    if !target.inputs.iter().any(|i| &i.name == k) {
                        return Err(err(format!(
                            "input '{k}' is not declared by workflow '{}'",
                            target.name
                        )));
                    }
                    check_json(v, &format!("input '{k}'"), visible)?;
                }
                for i in &target.inputs {
                    if i.default.is_none() && !ci.contains_key(&i.name) {
                        return Err(err(format!(
                            "required input '{}' of workflow '{}' is not given",
                            i.name, target.name
                        )));
                    }
                }
            }
            StepKind::Parallel { branches, .. } => {
                if branches.is_empty() {
                    return Err(err("parallel needs at least one branch".into()));
                }
                // Branches see what precedes the block, never each other.
                let mut names = HashSet::new();
                for b in branches {
                    if !names.insert(b.name.as_str()) {
                        return Err(err(format!("duplicate branch name '{}'", b.name)));
                    }
                    let mut vis = visible.clone();
                    validate_seq(file, &path, std::slice::from_ref(b), inputs, &mut vis, all)?;
                }
                for b in branches {
                    visible.steps.insert(b.name.clone());
                }
            }
            StepKind::ForEach { items, steps } => {
                match items {
                    Items::List(list) => {
                        for v in list {
                            check_json(v, "items", visible)?;
                        }
                    }
                    Items::Template(t) => check(t, "items", visible)?,
                }
                let mut vis = visible.clone();
                vis.innermost_loop = Some(true);
                validate_seq(file, &path, steps, inputs, &mut vis, all)?;
            }
            StepKind::While {
                condition,
                max_iterations,
                steps,
            } => {
                if *max_iterations == 0 {
                    return Err(err("max_iterations must be at least 1".into()));
                }
                let mut vis = visible.clone();
                vis.innermost_loop = Some(false);
                // The condition may read the body's steps (previous iteration).
                let mut cond_vis = vis.clone();
                collect_names(steps, &mut cond_vis.steps);
                let cond =
                    Condition::parse(condition).map_err(|e| err(format!("condition: {e}")))?;
                check_refs(cond.references(), inputs, &cond_vis)
                    .map_err(|r| err(format!("condition: {r}")))?;
                validate_seq(file, &path, steps, inputs, &mut vis, all)?;
            }
        }
        visible.steps.insert(s.name.clone());
    }
    Ok(())
}

/// Environment variables a shell, bash or the dynamic loader reads as code
/// or configuration: a templated (untrusted) value never goes there.
const INTERPRETED_ENV: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "PATH",
    "CDPATH",
    "GLOBIGNORE",
];

/// An `env:` entry: a portable name (`[A-Za-z_][A-Za-z0-9_]*`), and no
/// templated value in a variable the shell or the loader interprets
/// (`BASH_ENV`, `PATH`, `LD_*`, …).
pub(crate) fn check_env_entry(name: &str, value: &str) -> Result<(), String> {
    let portable = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Err(format!(
            "'{name}' is not a variable name a shell can read ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    let templated = value.contains("{{");
    if templated
        && (INTERPRETED_ENV.contains(&name)
            || name.starts_with("LD_")
            || name.starts_with("BASH_FUNC_"))
    {
        return Err(format!(
            "'{name}' is read by the shell or the loader as code or configuration: it takes no templated value"
        ));
    }
    Ok(())
}

fn collect_names(steps: &[Step], out: &mut HashSet<String>) {
    for s in steps {
        out.insert(s.name.clone());
    }
}

fn check_refs<'a>(
    refs: impl Iterator<Item = &'a Reference>,
    inputs: &HashSet<&str>,
    vis: &Visible,
) -> Result<(), String> {
    for r in refs {
        match r {
            Reference::Input(n) if !inputs.contains(n.as_str()) => {
                return Err(format!("'{{{{{r}}}}}' names an undeclared input"));
            }
            Reference::Step { step, .. } if !vis.steps.contains(step) => {
                return Err(format!(
                    "'{{{{{r}}}}}' names no step that has run before this point"
                ));
            }
            Reference::LoopIndex if vis.innermost_loop.is_none() => {
                return Err(format!("'{{{{{r}}}}}' used outside a loop body"));
            }
            Reference::LoopItem(_) if vis.innermost_loop != Some(true) => {
                return Err(format!("'{{{{{r}}}}}' used outside a for_each body"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Refuses a value spliced into an argument that a program of the list reads as code
/// (`[sh, -c, "echo {{x}}"]`, `[python3, -c, …]`, `[ssh, host, …]`): the list form keeps
/// values out of *our* shell, not out of the one the author starts (see `inline_script`).
fn check_code_arguments(argv: &[String]) -> Result<(), String> {
    for i in super::inline_script::code_arguments(argv) {
        let code = &argv[i];
        let template = Template::parse(code).map_err(|e| format!("command: {e}"))?;
        if let Err(e) = template.check_shell_source() {
            return Err(format!(
                "command: element {i} ({code:?}) is code that `{}` runs: {e}; pass the value as an \
                 argument after the code (`[sh, -c, 'echo \"$1\"', sh, \"{{{{inputs.x}}}}\"]`) \
                 or through env:",
                argv[..i]
                    .iter()
                    .rev()
                    .find(|a| !a.starts_with('-'))
                    .map_or("the program", String::as_str)
            ));
        }
    }
    Ok(())
}
