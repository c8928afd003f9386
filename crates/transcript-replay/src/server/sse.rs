//! Server-sent events: the framing every provider streams in, and a parser so tests can read
//! back what the server produced.

use serde_json::Value;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (Anthropic and OpenAI Responses name their events; Gemini and Chat
    /// Completions do not).
    pub event: Option<String>,
    /// The `data:` payload (JSON, or `[DONE]` for Chat Completions).
    pub data: String,
}

impl SseEvent {
    /// A named event carrying JSON.
    pub fn named(event: &str, data: &Value) -> Self {
        SseEvent {
            event: Some(event.to_owned()),
            data: data.to_string(),
        }
    }

    /// An unnamed event carrying JSON.
    pub fn data(data: &Value) -> Self {
        SseEvent {
            event: None,
            data: data.to_string(),
        }
    }

    /// The wire form: `event:` line when named, one `data:` line per payload line, blank line.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Some(event) = &self.event {
            out.push_str("event: ");
            out.push_str(event);
            out.push('\n');
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out
    }

    /// The payload parsed as JSON.
    pub fn json(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_str(&self.data)
    }
}

/// Parses an SSE stream (as the clients do): events end at a blank line, `data:` lines join
/// with `\n`, comments (`:`) and unknown fields are ignored, `\r\n` is accepted. A trailing
/// event without its blank line (a cut stream) is not returned, as a client would drop it.
pub fn parse(text: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    let mut event: Option<String> = None;
    let mut data: Vec<&str> = Vec::new();
    let mut seen_field = false;
    for line in text.split_inclusive('\n') {
        let complete = line.ends_with('\n');
        let line = line.trim_end_matches('\n').trim_end_matches('\r');
        if !complete {
            break;
        }
        if line.is_empty() {
            if seen_field {
                out.push(SseEvent {
                    event: event.take(),
                    data: data.join("\n"),
                });
            }
            data.clear();
            seen_field = false;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => {
                event = Some(value.to_owned());
                seen_field = true;
            }
            "data" => {
                data.push(value);
                seen_field = true;
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encode_then_parse_round_trips_named_unnamed_and_multiline() {
        let events = vec![
            SseEvent::named("message_start", &json!({"a": 1})),
            SseEvent::data(&json!({"b": "x"})),
            SseEvent {
                event: None,
                data: "line1\nline2".to_owned(),
            },
        ];
        let wire: String = events.iter().map(SseEvent::encode).collect();
        assert_eq!(parse(&wire), events);
    }

    #[test]
    fn parse_accepts_crlf_comments_and_drops_an_unterminated_event() {
        let wire = ": ping\r\nevent: e\r\ndata: {}\r\n\r\ndata: cut";
        let events = parse(wire);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event.as_deref(), Some("e"));
        assert_eq!(events[0].data, "{}");
    }
}
