//! What templates read at one point of a run ([`Scope`]): the run's inputs, the values the
//! steps before left ([`StepValue`]), the innermost loop's item and index ([`LoopFrame`]),
//! the workflow's directory and, for `{{ x | file }}`, the run's private file channel; in a
//! run, the workspace (where `| path` is resolved, #56) and the run's secret mask (applied to
//! a value before a shape error cuts it).
//! Rendering ([`crate::template`]) reads it; the engine writes it as steps run.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Reference, StepField};
use crate::audit::TextMask;
use crate::file_channel::FileChannel;

/// What a step left for later templates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepValue {
    /// `steps.NAME.output`
    pub output: Value,
    /// `steps.NAME.exit_code` (commands only).
    pub exit_code: Option<i64>,
    /// `steps.NAME.error` (failed steps that continued).
    pub error: Option<String>,
}

/// The innermost loop's variables.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopFrame {
    /// `loop.item` (null in a `while` body).
    pub item: Value,
    /// `loop.index`
    pub index: u64,
}

/// Values visible to templates at one point of a run. Each concurrent
/// branch and each loop body works on its own copy, so no loop state is
/// shared between branches; step values are shared (`Arc`) between the
/// copies, so a copy costs one pointer per step whatever the size of the
/// outputs (#22: a 20 MB earlier output no longer slows every iteration).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    workflow_dir: Option<Arc<str>>,
    inputs: Arc<Map<String, Value>>,
    steps: HashMap<String, Arc<StepValue>>,
    /// Shared like the step values: a copy of the scope inside a nested loop or a branch does
    /// not copy the outer loop's item.
    loop_frame: Option<Arc<LoopFrame>>,
    /// Where `| file` writes (the run's private directory); none outside a run.
    files: Option<Arc<FileChannel>>,
    /// The run's workspace, where a `| path` value is resolved; none outside a run.
    workspace: Option<Arc<std::path::Path>>,
    /// The run's secret mask; none when the run has no mask.
    mask: Option<RunMask>,
}

/// The run's [`TextMask`], shared by every copy of the scope.
#[derive(Clone)]
struct RunMask(Arc<dyn TextMask>);

impl std::fmt::Debug for RunMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunMask")
    }
}

impl Scope {
    /// A scope with the run's inputs and nothing else.
    pub fn new(inputs: Map<String, Value>) -> Self {
        Self {
            workflow_dir: None,
            inputs: Arc::new(inputs),
            steps: HashMap::new(),
            loop_frame: None,
            files: None,
            workspace: None,
            mask: None,
        }
    }

    /// Sets the workspace a `| path` value is resolved beneath (#56).
    pub fn with_workspace(mut self, workspace: &std::path::Path) -> Self {
        self.workspace = Some(Arc::from(workspace));
        self
    }

    /// The workspace a `| path` value is resolved beneath, in a run.
    pub fn workspace(&self) -> Option<&std::path::Path> {
        self.workspace.as_deref()
    }

    /// Sets the mask applied to a value before a message shows (part of) it.
    pub fn with_mask(mut self, mask: Option<Arc<dyn TextMask>>) -> Self {
        self.mask = mask.map(RunMask);
        self
    }

    /// `text` with the run's secrets masked (as it is without a mask).
    pub fn mask_text(&self, text: &str) -> String {
        match &self.mask {
            Some(RunMask(m)) => m.mask(text),
            None => text.to_owned(),
        }
    }

    /// Where `{{ x | file }}` writes its files, in a run.
    pub fn files(&self) -> Option<&FileChannel> {
        self.files.as_deref()
    }

    /// Sets where `{{ x | file }}` writes its files.
    pub fn with_files(mut self, files: Arc<FileChannel>) -> Self {
        self.files = Some(files);
        self
    }

    /// Sets what `{{workflow.dir}}` reads.
    pub fn with_workflow_dir(mut self, dir: Option<&std::path::Path>) -> Self {
        self.workflow_dir = dir.map(|d| Arc::from(d.display().to_string()));
        self
    }

    /// Records a step's value.
    pub fn set_step(&mut self, name: &str, value: StepValue) {
        self.steps.insert(name.to_owned(), Arc::new(value));
    }

    /// Sets the innermost loop frame.
    pub fn set_loop(&mut self, frame: LoopFrame) {
        self.loop_frame = Some(Arc::new(frame));
    }

    /// The value of a reference; unknown values read as null (validation
    /// has already rejected references to names that do not exist).
    pub fn lookup(&self, r: &Reference) -> Value {
        match r {
            Reference::Input(n) => self.inputs.get(n).cloned().unwrap_or(Value::Null),
            Reference::Step { step, field } => match (self.steps.get(step).map(Arc::as_ref), field)
            {
                (Some(v), StepField::Output) => v.output.clone(),
                (Some(v), StepField::ExitCode) => v.exit_code.map(Value::from).unwrap_or_default(),
                (Some(v), StepField::Error) => Value::String(v.error.clone().unwrap_or_default()),
                (None, _) => Value::Null,
            },
            Reference::WorkflowDir => {
                Value::String(self.workflow_dir.as_deref().unwrap_or_default().to_owned())
            }
            Reference::LoopIndex => self
                .loop_frame
                .as_ref()
                .map(|f| Value::from(f.index))
                .unwrap_or_default(),
            Reference::LoopItem(path) => {
                let mut v = match &self.loop_frame {
                    Some(f) => &f.item,
                    None => return Value::Null,
                };
                for p in path {
                    v = match v {
                        Value::Object(m) => m.get(p).unwrap_or(&Value::Null),
                        Value::Array(a) => p
                            .parse::<usize>()
                            .ok()
                            .and_then(|i| a.get(i))
                            .unwrap_or(&Value::Null),
                        _ => &Value::Null,
                    };
                }
                v.clone()
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scope_copies_share_step_values() {
        let mut scope = Scope::new(Map::new());
        scope.set_step(
            "big",
            StepValue {
                output: Value::String("x".repeat(1 << 20)),
                ..StepValue::default()
            },
        );
        // An outer loop's (large) item is shared by the copies too.
        scope.set_loop(LoopFrame {
            item: Value::String("y".repeat(1 << 20)),
            index: 0,
        });
        let copies: Vec<Scope> = (0..100).map(|_| scope.clone()).collect();
        let shared = scope.steps.get("big").map(Arc::strong_count);
        assert_eq!(shared, Some(101));
        assert_eq!(scope.loop_frame.as_ref().map(Arc::strong_count), Some(101));
        drop(copies);
    }
}
