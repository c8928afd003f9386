//! The model that grades `judge:` expectations, as the expectations file's top-level
//! `judge:` sets it (read by [`crate::Expectations::parse`], used by [`crate::judge`]).

/// The model asked when the file names none: the HTTP agent's default, OpenAI's small chat
/// model.
pub const DEFAULT_JUDGE_MODEL: &str = "gpt-4o-mini";

/// The model that grades, from the expectations file's top-level `judge:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeSettings {
    /// The model (`model:`; default [`DEFAULT_JUDGE_MODEL`]).
    pub model: String,
    /// The OpenAI-compatible base URL (`base_url:`; `None`: `OPENAI_BASE_URL`, else
    /// `https://api.openai.com/v1`).
    pub base_url: Option<String>,
    /// The environment variable holding the API key (`api_key_env:`; default
    /// `OPENAI_API_KEY`). The key itself is never in the file.
    pub api_key_env: String,
    /// The model's context window in tokens (`max_context_tokens:`; default 128,000).
    pub max_context_tokens: u64,
    /// Most parts one transcript is graded in (`max_chunks:`; default 8; 1: never cut).
    pub max_chunks: u32,
    /// Retries of a request answered 429 or 5xx, or whose connection failed (`max_retries:`;
    /// default 3).
    pub max_retries: u32,
    /// Longest one request may take, in seconds (`timeout_s:`; default 300).
    pub timeout_s: u64,
}

impl Default for JudgeSettings {
    fn default() -> Self {
        Self {
            model: DEFAULT_JUDGE_MODEL.to_owned(),
            base_url: None,
            api_key_env: "OPENAI_API_KEY".to_owned(),
            max_context_tokens: 128_000,
            max_chunks: 8,
            max_retries: 3,
            timeout_s: 300,
        }
    }
}
