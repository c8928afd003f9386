//! Which generation requests belong to the step's conversation, and which a CLI makes beside
//! it (a title, a topic or routing classifier, a quota probe) on the same endpoint.
//!
//! The rule is structural, never a list of known side requests:
//! - A request's **opening** is the text of its system instructions and of its first message
//!   (Anthropic `system` + `messages[0]`; Responses `instructions` + `input[0]`; Chat the
//!   leading system messages + the first user message; Gemini `systemInstruction` +
//!   `contents[0]`). Every request of one conversation re-sends the same opening, whatever
//!   turn it asks for, because an agent loop sends its whole history each time.
//! - The conversation **opens** with the first generation request whose user messages carry
//!   the step's prompt (trimmed). Before that, a generation request that does not carry it is
//!   beside the conversation.
//! - Once open, a generation request with another opening is beside it.
//! - A request that asks for its answer in a JSON schema and offers no tools (a router, a
//!   classifier: Gemini CLI without a `model:`) is beside it, whatever it carries, and gets
//!   the smallest answer the schema accepts (module `side`).
//!
//! A side request gets a minimal answer, is neither matched nor billed, and consumes no
//! recorded turn. What the rule cannot tell: a side request that re-sends the conversation's
//! own opening (a classifier fed the whole history) is taken as a turn, and an agent that
//! compacts its history mid-step starts a new opening, whose requests then look beside it;
//! both show in the replay's comparison with the recording.

use serde_json::Value;

use super::record::{Provider, text_of};

/// The conversation a server plays, as far as it has seen it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Conversation {
    /// The step's prompt (trimmed); `None` or empty: the first generation request opens.
    prompt: Option<String>,
    /// The opening of the request that opened the conversation.
    opening: Option<String>,
}

impl Conversation {
    /// A conversation opened by the first request carrying `prompt`.
    pub fn new(prompt: Option<&str>) -> Self {
        Conversation {
            prompt: prompt
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            opening: None,
        }
    }

    /// Whether this generation request belongs to the conversation (opening it if it is the
    /// first that does).
    pub fn admits(&mut self, provider: Provider, body: Option<&Value>) -> bool {
        let Some(body) = body else {
            // Nothing to tell by: a request without a JSON body is the conversation's.
            return true;
        };
        if super::side::schema(provider, body).is_some() {
            // A router or classifier: asks for a schema, offers no tools (`side`).
            return false;
        }
        let opening = opening(provider, body);
        if let Some(open) = &self.opening {
            return *open == opening;
        }
        let carries = match &self.prompt {
            None => true,
            Some(prompt) => user_text(provider, body).contains(prompt.as_str()),
        };
        if carries {
            self.opening = Some(opening);
        }
        carries
    }
}

fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The text of a message-like item: its `content` or Gemini's `parts`, or a bare string.
fn message_text(m: &Value) -> String {
    match m {
        Value::String(s) => s.clone(),
        _ if !m["parts"].is_null() => text_of(&m["parts"]),
        _ => text_of(&m["content"]),
    }
}

/// The system instructions and first message of a request, as one text.
fn opening(provider: Provider, body: &Value) -> String {
    let (system, first) = match provider {
        Provider::Anthropic => (text_of(&body["system"]), body["messages"].get(0)),
        // `input` is a list of items, or the prompt itself as one string.
        Provider::OpenAiResponses => (text_of(&body["instructions"]), {
            let input = &body["input"];
            if input.is_string() {
                Some(input)
            } else {
                input.get(0)
            }
        }),
        Provider::Gemini => (
            message_text(&body["systemInstruction"]),
            body["contents"].get(0),
        ),
        Provider::OpenAiChat => {
            let messages = items(&body["messages"]);
            let lead = messages
                .iter()
                .take_while(|m| m["role"] == "system" || m["role"] == "developer")
                .map(message_text)
                .collect::<Vec<_>>()
                .join("\n");
            let first = messages.iter().find(|m| m["role"] == "user");
            (lead, first)
        }
    };
    let first = first.map(message_text).unwrap_or_default();
    format!("{system}\u{0}{first}")
}

/// The text of every user message of a request.
fn user_text(provider: Provider, body: &Value) -> String {
    let list: &[Value] = match provider {
        Provider::Anthropic | Provider::OpenAiChat => items(&body["messages"]),
        Provider::Gemini => items(&body["contents"]),
        Provider::OpenAiResponses => match &body["input"] {
            Value::String(s) => return s.clone(),
            input => items(input),
        },
    };
    list.iter()
        .filter(|m| m.is_string() || m["role"] == "user")
        .map(message_text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn anthropic(system: &str, messages: Value) -> Value {
        json!({"model": "m", "system": [{"type": "text", "text": system,
            "cache_control": {"type": "ephemeral"}}], "messages": messages})
    }

    #[test]
    fn the_request_carrying_the_prompt_opens_and_its_opening_keeps_later_turns_in() {
        let mut c = Conversation::new(Some("  Read notes.txt and answer.\n"));
        // A probe before the conversation: no prompt in it.
        let probe = anthropic("", json!([{"role": "user", "content": "quota"}]));
        assert!(!c.admits(Provider::Anthropic, Some(&probe)));
        let first = anthropic(
            "You are an agent.",
            json!([{"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                {"type": "text", "text": "Read notes.txt and answer.",
                 "cache_control": {"type": "ephemeral"}}]}]),
        );
        assert!(c.admits(Provider::Anthropic, Some(&first)));
        // Turn 2 re-sends the history; the cache marker moved to the last message.
        let second = anthropic(
            "You are an agent.",
            json!([{"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                {"type": "text", "text": "Read notes.txt and answer."}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x",
                 "cache_control": {"type": "ephemeral"}}]}]),
        );
        assert!(c.admits(Provider::Anthropic, Some(&second)));
        // A title or classifier request quoting the prompt under its own instructions.
        let title = anthropic(
            "Summarize this coding conversation in under 50 characters.",
            json!([{"role": "user", "content": "Read notes.txt and answer."}]),
        );
        assert!(!c.admits(Provider::Anthropic, Some(&title)));
        assert!(c.admits(Provider::Anthropic, Some(&second)));
    }

    #[test]
    fn without_a_prompt_the_first_request_opens() {
        let mut c = Conversation::new(Some("   "));
        let a = json!({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]});
        let b = json!({"messages": [{"role": "system", "content": "other"}, {"role": "user", "content": "u"}]});
        assert!(c.admits(Provider::OpenAiChat, Some(&a)));
        assert!(!c.admits(Provider::OpenAiChat, Some(&b)));
        assert!(c.admits(Provider::OpenAiChat, None));
    }

    #[test]
    fn each_api_names_its_opening_and_user_text() {
        let responses = json!({"instructions": "i", "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "env"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "do it"}]}]});
        let mut c = Conversation::new(Some("do it"));
        assert!(c.admits(Provider::OpenAiResponses, Some(&responses)));
        let other = json!({"instructions": "title", "input": "do it"});
        assert!(!c.admits(Provider::OpenAiResponses, Some(&other)));
        assert_eq!(user_text(Provider::OpenAiResponses, &other), "do it");

        let gemini = json!({"systemInstruction": {"parts": [{"text": "sys"}]},
            "contents": [{"role": "user", "parts": [{"text": "ctx"}]},
                         {"role": "user", "parts": [{"text": "do it"}]}]});
        let mut g = Conversation::new(Some("do it"));
        assert!(g.admits(Provider::Gemini, Some(&gemini)));
        let router = json!({"systemInstruction": {"parts": [{"text": "route"}]},
            "contents": [{"role": "user", "parts": [{"text": "do it"}]}]});
        assert!(!g.admits(Provider::Gemini, Some(&router)));
    }
}
