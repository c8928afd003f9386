//! Opaque JSON values kept verbatim (decision 14).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON value carried verbatim: tool inputs and outputs, step results,
/// `tool_input` / `tool_content`, unknown payloads.
///
/// Keeping the text as received means a line we wrote re-encodes byte for
/// byte and foreign key order is preserved. Equality compares the JSON text.
///
/// **Compact by construction.** Every constructor (including `Deserialize`) drops the
/// insignificant whitespace between tokens, so a `RawJson` never holds a line break and an
/// event carrying it always encodes as exactly one line. Keys, their order, numbers and string
/// escapes are kept exactly as received; only whitespace outside strings goes.
#[derive(Clone)]
pub struct RawJson(Box<RawValue>);

impl RawJson {
    /// The JSON `null`.
    pub fn null() -> Self {
        Self(RawValue::NULL.to_owned())
    }

    /// Serializes any value (compact form).
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Self)
    }

    /// A JSON string value.
    pub fn string(text: &str) -> Self {
        // Serializing a &str cannot fail.
        Self::from_value(text).unwrap_or_else(|_| Self::null())
    }

    /// Validates `json` and keeps it verbatim but compact (whitespace between tokens dropped).
    pub fn from_json(json: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(json).map(Self::from_raw)
    }

    /// Wraps an owned raw value, dropping whitespace between its tokens.
    pub fn from_raw(raw: Box<RawValue>) -> Self {
        match compact(raw.get()) {
            // The compacted text is the same JSON value minus whitespace, so it parses again;
            // the fallback keeps the original rather than losing it.
            Some(text) => Self(RawValue::from_string(text).unwrap_or(raw)),
            None => Self(raw),
        }
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Whether the value is JSON `null`.
    pub fn is_null(&self) -> bool {
        self.0.get().trim() == "null"
    }

    /// Parses the text into a [`serde_json::Value`], never losing it: a value serde_json
    /// refuses to build (nested deeper than its recursion limit of 128, which `RawJson` itself
    /// accepts) comes back as a JSON string holding the verbatim text. Use
    /// [`RawJson::try_to_value`] to tell the two apart.
    pub fn to_value(&self) -> serde_json::Value {
        self.try_to_value()
            .unwrap_or_else(|_| serde_json::Value::String(self.0.get().to_owned()))
    }

    /// Parses the text into a [`serde_json::Value`]; fails for values nested deeper than
    /// serde_json's recursion limit (128), which `RawJson` keeps verbatim.
    pub fn try_to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// Deserializes the text into `T`.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.0.get())
    }

    /// Length of the JSON text in bytes.
    pub fn len(&self) -> usize {
        self.0.get().len()
    }

    /// Whether the JSON text is empty (never true for a valid value).
    pub fn is_empty(&self) -> bool {
        self.0.get().is_empty()
    }
}

impl Default for RawJson {
    fn default() -> Self {
        Self::null()
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RawJson {}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawJson({})", self.get())
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl From<serde_json::Value> for RawJson {
    fn from(value: serde_json::Value) -> Self {
        Self::from_value(&value).unwrap_or_else(|_| Self::null())
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(Self::from_raw)
    }
}

const fn is_json_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// `text` (valid JSON) without the whitespace between its tokens, or `None` when it has none.
///
/// Linear, no recursion (so no depth limit is needed): only string boundaries matter, and a
/// string's content is copied untouched (its whitespace is significant; raw line breaks cannot
/// occur inside a valid JSON string). Text with no whitespace outside its strings (what every
/// writer of ours and most providers produce) allocates nothing.
fn compact(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    // One pass that jumps over string contents (`memchr2`) says whether there is anything to
    // drop; most values have nothing, and then nothing is allocated. (A byte-by-byte scan of
    // the whole value for any whitespace first cost the tolerant reader ~7% of its
    // instructions, #29: the bytes of a value are mostly string contents.)
    let first = first_loose_whitespace(bytes)?;
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..first]);
    let mut i = first;
    while i < bytes.len() {
        let b = bytes[i];
        if is_json_whitespace(b) {
            i += 1;
            continue;
        }
        let start = i;
        if b == b'"' {
            i = after_string(bytes, i + 1);
        } else {
            i += 1;
            while i < bytes.len() && !is_json_whitespace(bytes[i]) && bytes[i] != b'"' {
                i += 1;
            }
        }
        // Every stop is at an ASCII byte or the end, so a char boundary.
        out.push_str(&text[start..i]);
    }
    Some(out)
}

/// The index of the first whitespace byte outside strings, if any.
fn first_loose_whitespace(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = after_string(bytes, i + 1),
            b if is_json_whitespace(b) => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The index just past the string whose content starts at `i` (past its closing quote),
/// jumping from quote or backslash to the next (`memchr2`), or the end of `bytes`.
fn after_string(bytes: &[u8], mut i: usize) -> usize {
    while let Some(k) = bytes
        .get(i..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        let j = i + k;
        if bytes[j] == b'"' {
            return j + 1;
        }
        // A backslash escapes the next byte (a quote, a backslash or an ASCII letter).
        i = j + 2;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_text_verbatim_but_compact() {
        let raw = RawJson::from_json("{\"b\": 1,  \"a\":[2]}".to_owned()).unwrap();
        assert_eq!(raw.get(), "{\"b\":1,\"a\":[2]}");
        assert_eq!(serde_json::to_string(&raw).unwrap(), "{\"b\":1,\"a\":[2]}");
        assert!(RawJson::from_json("{".to_owned()).is_err());
        assert!(RawJson::null().is_null());
        assert_eq!(RawJson::string("a\0b").get(), "\"a\\u0000b\"");
        assert_eq!(raw.to_value()["a"][0], 2);
    }

    #[test]
    fn compaction_skips_strings_whatever_they_escape() {
        // Whitespace only inside strings (escaped quotes and backslashes around it): untouched.
        assert_eq!(compact(r#"{"a":"x \" y\\","b":[" ",1]}"#), None);
        assert_eq!(compact("\"a b\""), None);
        assert_eq!(compact("12"), None);
        // Outside: dropped, strings copied whole.
        assert_eq!(
            compact(r#"{ "a" : "x \" y\\" , "b":[ " " ,1 ] }"#).as_deref(),
            Some(r#"{"a":"x \" y\\","b":[" ",1]}"#)
        );
        assert_eq!(compact(" 1 ").as_deref(), Some("1"));
        // An escape at the very end (not valid JSON, but never a panic).
        assert_eq!(compact("\"a\\"), None);
    }

    #[test]
    fn pretty_printed_values_become_one_line_with_strings_untouched() {
        let pretty = "{\n  \"path\": \"a b\\n\\\" }\",\r\n\t\"n\": [ 1.50 , -0 ]\n}\n";
        let raw = RawJson::from_json(pretty.to_owned()).unwrap();
        assert_eq!(raw.get(), "{\"path\":\"a b\\n\\\" }\",\"n\":[1.50,-0]}");
        let via_serde: RawJson = serde_json::from_str(pretty).unwrap();
        assert_eq!(via_serde, raw);
        let boxed = RawValue::from_string(pretty.to_owned()).unwrap();
        assert_eq!(RawJson::from_raw(boxed), raw);
        assert_eq!(compact("[1,\"  \"]"), None);
    }

    #[test]
    fn values_too_deep_for_serde_json_are_kept_verbatim_never_null() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let raw = RawJson::from_json(deep.clone()).unwrap();
        assert_eq!(raw.get(), deep);
        assert!(raw.try_to_value().is_err());
        assert_eq!(raw.to_value(), serde_json::Value::String(deep));
    }
}
