//! The YAML layer of an expectations file: one strict struct per level (`deny_unknown_fields`,
//! so a misspelled key is an error with serde-saphyr's line and column), each expectation
//! `Spanned` so its outcome can name its line.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileDef {
    #[serde(default)]
    pub judge: Option<JudgeDef>,
    #[serde(default)]
    pub run: Option<RunDef>,
    #[serde(default)]
    pub steps: BTreeMap<String, Spanned<StepDef>>,
}

/// A step or run status, as the tree says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StatusDef {
    Succeeded,
    Failed,
    Cancelled,
    Incomplete,
}

impl StatusDef {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusDef::Succeeded => "succeeded",
            StatusDef::Failed => "failed",
            StatusDef::Cancelled => "cancelled",
            StatusDef::Incomplete => "incomplete",
        }
    }
}

/// `run:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunDef {
    #[serde(default)]
    pub status: Option<Spanned<StatusDef>>,
    #[serde(default)]
    pub max_cost_usd: Option<Spanned<f64>>,
    #[serde(default)]
    pub max_tokens: Option<Spanned<u64>>,
    #[serde(default)]
    pub max_duration_ms: Option<Spanned<u64>>,
    #[serde(default)]
    pub judge: Option<Spanned<RubricDef>>,
}

/// `steps: <path>:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepDef {
    #[serde(default)]
    pub status: Option<Spanned<StatusDef>>,
    #[serde(default)]
    pub tools_used: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub tools_not_used: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub tool_sequence: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub tool_args: BTreeMap<String, Spanned<BTreeMap<String, Spanned<ArgDef>>>>,
    #[serde(default)]
    pub tool_failed: Option<Spanned<bool>>,
    #[serde(default)]
    pub output: Option<Spanned<TextDef>>,
    #[serde(default)]
    pub max_turns: Option<Spanned<u64>>,
    #[serde(default)]
    pub max_cost_usd: Option<Spanned<f64>>,
    #[serde(default)]
    pub judge: Option<Spanned<RubricDef>>,
}

/// `judge:` on the run or a step: what the model grades against.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RubricDef {
    pub rubric: String,
}

/// The file's top-level `judge:`: the model that grades (every key optional; no key: the
/// API key is only ever named, by its environment variable).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JudgeDef {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub max_context_tokens: Option<Spanned<u64>>,
    #[serde(default)]
    pub max_chunks: Option<Spanned<u32>>,
    #[serde(default)]
    pub max_retries: Option<u32>,
    #[serde(default)]
    pub timeout_s: Option<u64>,
}

/// One argument of `tool_args`: exactly one of the three.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ArgDef {
    #[serde(default)]
    pub equals: Option<Value>,
    #[serde(default)]
    pub subset: Option<Value>,
    #[serde(default)]
    pub matches: Option<String>,
}

/// `output:`: one or more of the three.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TextDef {
    #[serde(default)]
    pub contains: Option<String>,
    #[serde(default)]
    pub matches: Option<String>,
    #[serde(default)]
    pub equals: Option<String>,
}
