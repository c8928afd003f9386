//! [`WorkflowSet`]: a root workflow and the workflows its `call_workflow`
//! steps reach, built in Rust or loaded from YAML files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::parse::load_file;
use super::{PluginSpec, Workflow, WorkflowError};

/// A root workflow and every workflow reachable through `call_workflow`.
#[derive(Debug, Clone)]
pub struct WorkflowSet {
    pub(super) root: String,
    pub(super) workflows: HashMap<String, Arc<Workflow>>,
}

impl WorkflowSet {
    /// A set whose root is `workflow`, keyed `key` (used in errors).
    pub fn new(key: impl Into<String>, workflow: Workflow) -> Self {
        let key = key.into();
        let mut workflows = HashMap::new();
        workflows.insert(key.clone(), Arc::new(workflow));
        Self {
            root: key,
            workflows,
        }
    }

    /// Adds a workflow that `call_workflow` steps can name by `key`.
    pub fn with(mut self, key: impl Into<String>, workflow: Workflow) -> Self {
        self.workflows.insert(key.into(), Arc::new(workflow));
        self
    }

    /// Loads a YAML workflow file and, recursively, the files its
    /// `call_workflow` steps name (relative to the naming file). Keys are
    /// the files' canonical paths; targets are rewritten to those keys.
    /// Runs [`WorkflowSet::validate`] with no custom step types known to
    /// catch every structural problem early; the service validates again
    /// with its registry before a run.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, WorkflowError> {
        let mut workflows = HashMap::new();
        let path = path.as_ref();
        let root = load_file(path, path.display().to_string(), &mut workflows)?;
        let set = Self { root, workflows };
        set.validate_structure()?;
        Ok(set)
    }

    /// Every plugin the set's workflows declare, once each, root first.
    pub fn plugins(&self) -> Vec<PluginSpec> {
        let mut keys: Vec<&String> = self.workflows.keys().collect();
        keys.sort_by_key(|k| (*k != &self.root, (*k).clone()));
        let mut out: Vec<PluginSpec> = Vec::new();
        for key in keys {
            if let Some(wf) = self.workflows.get(key) {
                for argv in &wf.plugins {
                    let spec = PluginSpec {
                        argv: argv.clone(),
                        cwd: wf.dir.clone(),
                    };
                    if !out.contains(&spec) {
                        out.push(spec);
                    }
                }
            }
        }
        out
    }

    /// Every workflow's key, sorted.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.workflows.keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    /// The root workflow's key.
    pub fn root_key(&self) -> &str {
        &self.root
    }

    /// The root workflow.
    pub fn root(&self) -> Option<&Arc<Workflow>> {
        self.workflows.get(&self.root)
    }

    /// A workflow by key.
    pub fn get(&self, key: &str) -> Option<&Arc<Workflow>> {
        self.workflows.get(key)
    }
}
