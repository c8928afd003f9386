//! How each agent is pointed at a replay server and kept offline: the environment it gets and
//! the private files it reads (Codex's `config.toml`, Gemini CLI's `settings.json`), the same
//! settings the tests use against the scripted server.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

/// The key every agent sends to the replay server (any value works; it never leaves
/// 127.0.0.1).
pub const REPLAY_API_KEY: &str = "transcript-replay";

/// The variable Codex reads its key from ([`wiring`] names it in `config.toml`).
pub const CODEX_KEY_ENV: &str = "TRANSCRIPT_REPLAY_API_KEY";

/// What points one agent at the server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wiring {
    /// Variables added to (and overriding) the agent's environment.
    pub env: BTreeMap<String, String>,
    /// Files to write before the agent starts: `(path, contents)`, paths inside the directory
    /// given to [`wiring`].
    pub files: Vec<(PathBuf, String)>,
}

impl Wiring {
    fn set(&mut self, key: &str, value: impl Into<String>) {
        self.env.insert(key.to_owned(), value.into());
    }
}

/// The wiring of `provider` (the step's provider name: `claude`, `codex`, `gemini`, or an
/// HTTP agent's `openai`) against the server at `url` (`http://127.0.0.1:PORT`), its files
/// under `dir` (a private directory the caller creates and removes). `None` for a provider
/// replay cannot point at the server.
pub fn wiring(provider: &str, url: &str, dir: &Path) -> Option<Wiring> {
    let mut w = Wiring::default();
    match provider {
        "claude" => {
            w.set("ANTHROPIC_BASE_URL", url);
            w.set("ANTHROPIC_API_KEY", REPLAY_API_KEY);
            w.set("DISABLE_TELEMETRY", "1");
            w.set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
            w.set("DISABLE_AUTOUPDATER", "1");
            w.set("DISABLE_ERROR_REPORTING", "1");
            // A refused request (a strict mismatch) ends the run at once instead of retrying.
            w.set("CLAUDE_CODE_MAX_RETRIES", "0");
        }
        "codex" => {
            let home = dir.join("codex-home");
            let config = format!(
                "model_provider = \"replay\"\n\n[model_providers.replay]\nname = \"replay\"\n\
                 base_url = {}\nenv_key = \"{CODEX_KEY_ENV}\"\nwire_api = \"responses\"\n\
                 request_max_retries = 0\nstream_max_retries = 0\n",
                json!(format!("{url}/v1"))
            );
            w.files.push((home.join("config.toml"), config));
            w.set("CODEX_HOME", home.display().to_string());
            w.set(CODEX_KEY_ENV, REPLAY_API_KEY);
        }
        "gemini" => {
            let home = dir.join("gemini-home");
            let settings = json!({
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": false},
                "telemetry": {"enabled": false},
                "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false,
                    "maxAttempts": 1},
            });
            w.files
                .push((home.join(".gemini/settings.json"), settings.to_string()));
            w.set("GEMINI_CLI_HOME", home.display().to_string());
            w.set("GOOGLE_GEMINI_BASE_URL", url);
            w.set("GEMINI_API_KEY", REPLAY_API_KEY);
            w.set("GEMINI_CLI_NO_RELAUNCH", "true");
        }
        "openai" => {
            w.set("OPENAI_BASE_URL", format!("{url}/v1"));
            w.set("OPENAI_API_KEY", REPLAY_API_KEY);
        }
        _ => return None,
    }
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_points_at_the_server_only() {
        let dir = Path::new("/private");
        let url = "http://127.0.0.1:4000";
        let claude = wiring("claude", url, dir).unwrap();
        assert_eq!(claude.env["ANTHROPIC_BASE_URL"], url);
        assert_eq!(claude.env["DISABLE_TELEMETRY"], "1");
        let codex = wiring("codex", url, dir).unwrap();
        assert_eq!(codex.env["CODEX_HOME"], "/private/codex-home");
        assert!(
            codex.files[0]
                .1
                .contains("base_url = \"http://127.0.0.1:4000/v1\"")
        );
        let gemini = wiring("gemini", url, dir).unwrap();
        assert_eq!(gemini.env["GOOGLE_GEMINI_BASE_URL"], url);
        assert!(
            gemini.files[0]
                .1
                .contains("\"telemetry\":{\"enabled\":false}")
        );
        assert_eq!(
            wiring("openai", url, dir).unwrap().env["OPENAI_BASE_URL"],
            format!("{url}/v1")
        );
        assert_eq!(wiring("copilot", url, dir), None);
    }
}
