//! Validation of a [`WorkflowSet`] before a run: names, references and
//! templates, step kinds, and `call_workflow` targets and cycles, each
//! error naming the file, the step path and the reason.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::argv_rule;
use super::{Items, Step, StepKind, Workflow, WorkflowError, WorkflowSet, join_path};
use crate::compiled::{ConditionText, TemplateJson, TemplateText};
use crate::template::{Reference, Template};

#[path = "validate_commands.rs"]
mod commands;

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
    /// The innermost `for_each` iterates a literal list written in the workflow (its items
    /// are the author's, so `loop.item` is typed).
    literal_item: bool,
}

fn validate_workflow(
    key: &str,
    wf: &Workflow,
    all: &HashMap<String, Arc<Workflow>>,
) -> Result<(), WorkflowError> {
    if wf.name.trim().is_empty() {
        return Err(WorkflowError::new(key, None, "workflow has no name"));
    }
    for argv in &wf.plugins {
        argv_rule::check_literal_argv(argv)
            .map_err(|r| WorkflowError::new(key, None, format!("plugins: {r}")))?;
    }
    let inputs: HashSet<&str> = wf.inputs.iter().map(|i| i.name.as_str()).collect();
    let (typed_inputs, closed_inputs) =
        super::input::shapes(&wf.inputs).map_err(|e| WorkflowError::new(key, None, e))?;
    let mut visible = Visible::default();
    SeqCheck {
        file: key,
        inputs: &inputs,
        typed_inputs: &typed_inputs,
        closed_inputs: &closed_inputs,
        secret_inputs: &wf
            .inputs
            .iter()
            .filter(|i| i.secret)
            .map(|i| i.name.as_str())
            .collect(),
        all,
    }
    .seq("", &wf.steps, &mut visible)?;
    // Outputs may read any step of the top-level sequence (and inputs).
    for (name, text) in &wf.outputs {
        let t = text
            .compiled()
            .map_err(|e| WorkflowError::new(key, None, format!("output '{name}': {e}")))?;
        check_refs(t.references(), &inputs, &visible).map_err(|reason| {
            WorkflowError::new(key, None, format!("output '{name}': {reason}"))
        })?;
    }
    Ok(())
}

/// What the steps of one workflow are checked against: its file, its
/// declared inputs and the whole set (for `call_workflow` targets).
struct SeqCheck<'a> {
    file: &'a str,
    inputs: &'a HashSet<&'a str>,
    /// The inputs declared with a type other than free text.
    typed_inputs: &'a HashSet<&'a str>,
    /// The inputs declared `secret: true`.
    secret_inputs: &'a HashSet<&'a str>,
    /// The inputs whose values are closed (enum, integer, number, boolean).
    closed_inputs: &'a HashSet<&'a str>,
    all: &'a HashMap<String, Arc<Workflow>>,
}

/// One step being checked: where it is and what it may refer to.
struct StepCheck<'a> {
    seq: &'a SeqCheck<'a>,
    path: String,
}

impl SeqCheck<'_> {
    /// Checks `steps` under `prefix`: names unique and dot-free, each step
    /// valid with what precedes it in `visible`, which it then joins.
    fn seq(
        &self,
        prefix: &str,
        steps: &[Step],
        visible: &mut Visible,
    ) -> Result<(), WorkflowError> {
        let mut names = HashSet::new();
        for s in steps {
            let c = StepCheck {
                seq: self,
                path: join_path(prefix, &s.name),
            };
            if s.name.is_empty() || s.name.contains('.') {
                return Err(c.err(
                    "step names must be non-empty and contain no '.' (paths are dot-separated)",
                ));
            }
            if !names.insert(s.name.as_str()) {
                return Err(c.err(format!("duplicate step name '{}'", s.name)));
            }
            c.step(s, visible)?;
            visible.steps.insert(s.name.clone());
        }
        Ok(())
    }
}

impl StepCheck<'_> {
    /// Which references are typed by their declaration at this point (argv rule 3).
    fn typing<'v>(&'v self, visible: &Visible) -> argv_rule::Typing<'v> {
        argv_rule::Typing {
            typed_inputs: Some(self.seq.typed_inputs),
            literal_item: visible.literal_item,
            closed_inputs: Some(self.seq.closed_inputs),
        }
    }

    fn err(&self, reason: impl Into<String>) -> WorkflowError {
        WorkflowError::new(self.seq.file, Some(&self.path), reason)
    }

    /// A template (`what` names it in errors) that parses and refers only
    /// to what is `vis`ible.
    fn text(&self, text: &TemplateText, what: &str, vis: &Visible) -> Result<(), WorkflowError> {
        let t = self.compiled(text, what)?;
        check_refs(t.references(), self.seq.inputs, vis)
            .map_err(|r| self.err(format!("{what}: {r}")))
    }

    /// The compiled form of a template (`what` names it in errors).
    fn compiled<'t>(
        &self,
        text: &'t TemplateText,
        what: &str,
    ) -> Result<&'t Template, WorkflowError> {
        text.compiled()
            .map_err(|e| self.err(format!("{what}: {e}")))
    }

    /// Every template in a JSON value, as [`Self::text`].
    fn json(&self, v: &TemplateJson, what: &str, vis: &Visible) -> Result<(), WorkflowError> {
        if let Some(e) = v.error() {
            return Err(self.err(format!("{what}: {e}")));
        }
        for t in v.templates() {
            check_refs(t.references(), self.seq.inputs, vis)
                .map_err(|r| self.err(format!("{what}: {r}")))?;
        }
        Ok(())
    }

    /// Checks the step's kind.
    fn step(&self, s: &Step, visible: &mut Visible) -> Result<(), WorkflowError> {
        match &s.kind {
            StepKind::Command {
                command,
                env,
                stdin,
            } => self.command(command, env, stdin.as_ref(), visible),
            StepKind::Operation { tool, input } => self.operation(tool, input, visible),
            StepKind::Terminal { message, .. } => self.text(message, "message", visible),
            StepKind::Agent(a) => self.agent(a, visible),
            StepKind::Custom { params, .. } => self.json(params, "with", visible),
            StepKind::CallWorkflow { workflow, inputs } => self.call(workflow, inputs, visible),
            StepKind::Parallel { branches, .. } => self.parallel(branches, visible),
            StepKind::ForEach { items, steps } => self.for_each(items, steps, visible),
            StepKind::While {
                condition,
                max_iterations,
                steps,
            } => self.while_loop(condition, *max_iterations, steps, visible),
        }
    }

    /// A `call_workflow` step: its target is in the set, and the inputs
    /// given are the ones it declares, every required one included.
    fn call(
        &self,
        workflow: &str,
        given: &BTreeMap<String, TemplateJson>,
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        let Some(target) = self.seq.all.get(workflow) else {
            return Err(self.err(format!(
                "call_workflow target '{workflow}' is not in the workflow set"
            )));
        };
        for (k, v) in given {
            if !target.inputs.iter().any(|i| &i.name == k) {
                return Err(self.err(format!(
                    "input '{k}' is not declared by workflow '{}'",
                    target.name
                )));
            }
            self.json(v, &format!("input '{k}'"), visible)?;
        }
        for i in &target.inputs {
            if i.default.is_none() && !given.contains_key(&i.name) {
                return Err(self.err(format!(
                    "required input '{}' of workflow '{}' is not given",
                    i.name, target.name
                )));
            }
        }
        Ok(())
    }

    /// A `parallel` block: branches see what precedes the block, never
    /// each other; all of them are visible after it.
    fn parallel(&self, branches: &[Step], visible: &mut Visible) -> Result<(), WorkflowError> {
        if branches.is_empty() {
            return Err(self.err("parallel needs at least one branch"));
        }
        let mut names = HashSet::new();
        for b in branches {
            if !names.insert(b.name.as_str()) {
                return Err(self.err(format!("duplicate branch name '{}'", b.name)));
            }
            let mut vis = visible.clone();
            self.seq
                .seq(&self.path, std::slice::from_ref(b), &mut vis)?;
        }
        for b in branches {
            visible.steps.insert(b.name.clone());
        }
        Ok(())
    }

    /// A `for_each`: its items' templates, then its body with `loop.item`.
    fn for_each(
        &self,
        items: &Items,
        steps: &[Step],
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        let literal = match items {
            Items::List(list) => {
                for v in list {
                    self.json(v, "items", visible)?;
                }
                list.iter().all(|v| {
                    v.templates()
                        .iter()
                        .all(|t| t.references().next().is_none())
                })
            }
            Items::Template(t) => {
                self.text(t, "items", visible)?;
                false
            }
        };
        let mut vis = visible.clone();
        vis.innermost_loop = Some(true);
        vis.literal_item = literal;
        self.seq.seq(&self.path, steps, &mut vis)
    }

    /// A `while`: at least one iteration, a condition that parses and may
    /// read the body's steps (of the previous iteration), then its body.
    fn while_loop(
        &self,
        condition: &ConditionText,
        max_iterations: u64,
        steps: &[Step],
        visible: &Visible,
    ) -> Result<(), WorkflowError> {
        if max_iterations == 0 {
            return Err(self.err("max_iterations must be at least 1"));
        }
        let mut vis = visible.clone();
        vis.innermost_loop = Some(false);
        vis.literal_item = false;
        let mut cond_vis = vis.clone();
        collect_names(steps, &mut cond_vis.steps);
        let cond = condition
            .compiled()
            .map_err(|e| self.err(format!("condition: {e}")))?;
        check_refs(cond.references(), self.seq.inputs, &cond_vis)
            .map_err(|r| self.err(format!("condition: {r}")))?;
        self.seq.seq(&self.path, steps, &mut vis)
    }
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
