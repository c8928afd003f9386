//! What the provider modules share: the per-response context and delta chunking.

use serde_json::Value;

use super::script::Turn;
use super::sse::SseEvent;

/// Everything a provider module needs to render one answer.
#[derive(Debug, Clone)]
pub(crate) struct Ctx<'a> {
    /// The turn to render.
    pub turn: &'a Turn,
    /// The model the request named (echoed back).
    pub model: String,
    /// This response's number on this server, unique: ids derive from it.
    pub seq: usize,
}

impl Ctx<'_> {
    /// A unique id with a provider prefix, e.g. `msg_testkit_0003`.
    pub fn id(&self, prefix: &str) -> String {
        format!("{prefix}_testkit_{:04}", self.seq)
    }

    /// A unique id for the `index`-th item of this response, e.g. `toolu_testkit_0003_1`.
    pub fn item_id(&self, prefix: &str, index: usize) -> String {
        format!("{prefix}_testkit_{:04}_{index}", self.seq)
    }
}

/// A rendered answer.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// SSE events of a streaming answer.
    Stream(Vec<SseEvent>),
    /// The JSON body of a non-streaming answer.
    Json(Value),
}

/// Splits `s` in two at a character boundary near its middle, so every delta stream has more
/// than one delta to assemble (a client that keeps only the last delta fails a test).
pub(crate) fn pieces(s: &str) -> Vec<&str> {
    if s.chars().count() < 2 {
        return vec![s];
    }
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid += 1;
    }
    vec![&s[..mid], &s[mid..]]
}

/// The JSON text of tool arguments (objects stay objects; anything else is serialized as is).
pub(crate) fn arguments_text(arguments: &Value) -> String {
    arguments.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_split_on_char_boundaries_and_rejoin() {
        for s in ["", "a", "ab", "héllo wörld", "日本語テキスト"] {
            assert_eq!(pieces(s).concat(), s);
        }
        assert_eq!(pieces("abcd"), vec!["ab", "cd"]);
    }
}
