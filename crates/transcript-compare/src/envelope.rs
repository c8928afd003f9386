//! A tool result as the tool produced it: the agent CLI's own envelope (Claude Code's
//! `<system-reminder>` blocks, Codex's shell header `Chunk ID:` … `Output:`) taken off by the
//! CLI's rules in `transcript_providers::envelope`, so two runs that read the same file compare
//! equal whatever the CLI wrapped around it. The CLI is the turn's `provider` (its registry
//! name); a turn without one, or with a name the registry does not know, keeps its text.

use serde_json::Value;
use transcript_providers::Provider;

/// `content` (a `tool_result` block's content: a string, or an array of strings and
/// `{"type": "text", "text": …}` parts) with `provider`'s envelope taken off every text.
pub fn strip(provider: Option<&str>, content: &Value) -> Value {
    let Some(cli) = provider.and_then(|p| Provider::from_name(p).ok()) else {
        return content.clone();
    };
    match content {
        Value::String(s) => Value::String(strip_text(cli, s)),
        Value::Array(parts) => Value::Array(
            parts
                .iter()
                .map(|part| match part {
                    Value::String(s) => Value::String(strip_text(cli, s)),
                    Value::Object(map) => {
                        let mut map = map.clone();
                        if let Some(Value::String(s)) = map.get_mut("text") {
                            *s = strip_text(cli, s);
                        }
                        Value::Object(map)
                    }
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// One text without `cli`'s envelope: the one call into the providers' rules.
fn strip_text(cli: Provider, text: &str) -> String {
    transcript_providers::envelope::strip_tool_result(cli, text).into_owned()
}
