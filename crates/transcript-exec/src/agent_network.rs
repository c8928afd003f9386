//! Where an agent CLI's model lives (#57): the destinations a bounded agent step reaches
//! besides what its `network:` declares. Its model endpoint is the base URL its preset or
//! `env:` sets (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, `GOOGLE_GEMINI_BASE_URL`, the
//! `base_url` of the model providers in Codex's `config.toml`), else the provider's default
//! host; the runner's own doors for the execution (its MCP proxy, a replay's model server)
//! come with the request ([`crate::agent::AgentRequest::reach`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::sandbox::net::Destination;

/// The model endpoints of a CLI of `provider` run with `env` over the runner's environment.
pub fn model_destinations(provider: &str, env: &BTreeMap<String, String>) -> Vec<Destination> {
    let var = |k: &str| {
        env.get(k)
            .cloned()
            .or_else(|| std::env::var(k).ok())
            .filter(|v| !v.is_empty())
    };
    let (vars, default): (&[&str], &str) = match provider {
        "claude" => (&["ANTHROPIC_BASE_URL"], "api.anthropic.com:443"),
        "codex" => (&["OPENAI_BASE_URL"], "api.openai.com:443"),
        "gemini" => (
            &["GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL"],
            "generativelanguage.googleapis.com:443",
        ),
        _ => return Vec::new(),
    };
    let mut out: Vec<Destination> = vars
        .iter()
        .filter_map(|k| var(k))
        .filter_map(|url| of_url(&url))
        .collect();
    if provider == "codex" {
        let home = var("CODEX_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".codex")));
        if let Some(home) = home {
            out.extend(codex_providers(&home.join("config.toml")));
        }
    }
    if out.is_empty()
        && let Ok(d) = default.parse()
    {
        out.push(d);
    }
    out
}

/// The `host:port` of a base URL (`http://127.0.0.1:8080/v1` → `127.0.0.1:8080`).
pub fn of_url(url: &str) -> Option<Destination> {
    let url = url::Url::parse(url).ok()?;
    Destination::new(url.host_str()?, url.port_or_known_default()?).ok()
}

/// The `base_url` of every `[model_providers.*]` of a Codex `config.toml`.
fn codex_providers(config: &std::path::Path) -> Vec<Destination> {
    let Ok(text) = std::fs::read_to_string(config) else {
        return Vec::new();
    };
    let Ok(doc) = text.parse::<toml_edit::DocumentMut>() else {
        return Vec::new();
    };
    let Some(providers) = doc.get("model_providers").and_then(|p| p.as_table_like()) else {
        return Vec::new();
    };
    providers
        .iter()
        .filter_map(|(_, p)| {
            p.as_table_like()?
                .get("base_url")?
                .as_str()
                .map(str::to_owned)
        })
        .filter_map(|u| of_url(&u))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(d: Vec<Destination>) -> Vec<String> {
        d.into_iter().map(|d| d.to_string()).collect()
    }

    #[test]
    fn a_base_url_in_env_wins_over_the_default_host() {
        let env = BTreeMap::from([(
            "ANTHROPIC_BASE_URL".to_owned(),
            "http://127.0.0.1:4242".to_owned(),
        )]);
        assert_eq!(
            names(model_destinations("claude", &env)),
            ["127.0.0.1:4242"]
        );
        let env = BTreeMap::from([(
            "GOOGLE_GEMINI_BASE_URL".to_owned(),
            "https://gw.example.com/g".to_owned(),
        )]);
        assert_eq!(
            names(model_destinations("gemini", &env)),
            ["gw.example.com:443"]
        );
        assert!(model_destinations("my-agent", &env).is_empty());
    }

    #[test]
    fn codex_reaches_the_providers_of_its_config() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "model_provider = \"t\"\n[model_providers.t]\nname = \"t\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
        )
        .unwrap();
        let env = BTreeMap::from([("CODEX_HOME".to_owned(), home.path().display().to_string())]);
        assert_eq!(names(model_destinations("codex", &env)), ["127.0.0.1:9"]);
        let empty = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([("CODEX_HOME".to_owned(), empty.path().display().to_string())]);
        assert_eq!(
            names(model_destinations("codex", &env)),
            ["api.openai.com:443"]
        );
    }
}
