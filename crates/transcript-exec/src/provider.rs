//! [`AgentProvider`]: an agent step's `provider:`, parsed once when the
//! step is built or loaded: a provider the normalizer registry knows
//! (`claude`, `codex`, `gemini`, `copilot`, `openai`, `anthropic`, with the
//! registry's spellings) or a name an agent runner is registered under.

use std::fmt;

use serde::{Deserialize, Deserializer};
use transcript_providers::Provider;

/// Which provider an agent step asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgentProvider {
    /// A provider of the normalizer registry ([`Provider::from_name`]:
    /// case-insensitive, `claude-code` for `claude`).
    Known(Provider),
    /// Any other name: a runner registered with the service under it
    /// ([`crate::ServiceBuilder::agent_runner`]), or a CLI agent whose
    /// `command:` is given (its output then has no normalizer).
    Custom(String),
}

impl AgentProvider {
    /// Parses a `provider:` value.
    pub fn parse(name: &str) -> Self {
        match Provider::from_name(name) {
            Ok(p) => Self::Known(p),
            Err(_) => Self::Custom(name.to_owned()),
        }
    }

    /// The name runners are registered under and transcripts carry: the
    /// registry name of a known provider, the name as written otherwise.
    pub fn name(&self) -> &str {
        match self {
            Self::Known(p) => p.name(),
            Self::Custom(name) => name,
        }
    }

    /// Whether no provider was named (refused when the workflow loads).
    pub fn is_empty(&self) -> bool {
        matches!(self, Self::Custom(name) if name.trim().is_empty())
    }

    /// The registry provider, whose normalizer reads the agent's output.
    pub fn known(&self) -> Option<Provider> {
        match self {
            Self::Known(p) => Some(*p),
            Self::Custom(_) => None,
        }
    }
}

impl Default for AgentProvider {
    fn default() -> Self {
        Self::Custom(String::new())
    }
}

impl fmt::Display for AgentProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<&str> for AgentProvider {
    fn from(name: &str) -> Self {
        Self::parse(name)
    }
}

impl From<String> for AgentProvider {
    fn from(name: String) -> Self {
        match Provider::from_name(&name) {
            Ok(p) => Self::Known(p),
            Err(_) => Self::Custom(name),
        }
    }
}

impl From<Provider> for AgentProvider {
    fn from(p: Provider) -> Self {
        Self::Known(p)
    }
}

/// From the same strings as before it was parsed: any string.
impl<'de> Deserialize<'de> for AgentProvider {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_in_every_registry_spelling_and_custom_names_as_written() {
        for (written, name) in [
            ("claude", "claude"),
            ("Claude-Code", "claude"),
            ("claude_code", "claude"),
            ("CODEX", "codex"),
            ("gemini", "gemini"),
            ("copilot", "copilot"),
            ("openai", "openai"),
            ("anthropic", "anthropic"),
        ] {
            let p = AgentProvider::parse(written);
            assert!(p.known().is_some(), "{written}");
            assert_eq!(p.name(), name);
        }
        let custom = AgentProvider::parse("Scripted");
        assert_eq!(custom, AgentProvider::Custom("Scripted".into()));
        assert_eq!(custom.name(), "Scripted");
        assert!(custom.known().is_none());
        assert!(AgentProvider::parse("").is_empty());
    }

    #[test]
    fn yaml_takes_the_same_strings_parsed_once_into_the_step() {
        use crate::workflow::{StepKind, Workflow};
        for (written, expected) in [
            ("Claude-Code", AgentProvider::Known(Provider::Claude)),
            ("openai", AgentProvider::Known(Provider::OpenAi)),
            ("my-runner", AgentProvider::Custom("my-runner".into())),
        ] {
            let text = format!(
                "name: x\nsteps:\n  - name: a\n    type: agent\n    provider: {written}\n    prompt: hi\n"
            );
            let wf = Workflow::from_yaml(&text, "x.yaml").expect("parses");
            match &wf.steps[0].kind {
                StepKind::Agent(a) => assert_eq!(a.provider, expected),
                other => panic!("not an agent step: {other:?}"),
            }
        }
        let empty =
            "name: x\nsteps:\n  - name: a\n    type: agent\n    provider: ''\n    prompt: hi\n";
        let set = crate::WorkflowSet::new(
            "x.yaml",
            Workflow::from_yaml(empty, "x.yaml").expect("parses"),
        );
        let e = set.validate(&|_| false).expect_err("no provider");
        assert_eq!(e.to_string(), "x.yaml: step 'a': agent needs a provider");
    }
}
