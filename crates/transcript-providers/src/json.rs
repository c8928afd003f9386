//! An order-preserving JSON value.
//!
//! Tool inputs and outputs are opaque values that the transcript keeps
//! verbatim, foreign key order included (decision 14). `serde_json::Value`
//! sorts object keys unless the workspace-wide `preserve_order` feature is
//! on, which would change key order for every crate in the build; this small
//! value type keeps objects as ordered vectors instead, and is also cheaper
//! to build than a map for the small objects provider records consist of.

use std::cell::OnceCell;
use std::fmt;
use std::ops::Deref;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Number;
use serde_json::value::RawValue;
use transcript_domain::RawJson;

/// A JSON value whose objects keep their key order.
///
/// Containers are lazy: their elements are kept as raw JSON text and parsed
/// on first access, so subtrees a mapper never reads (tool outputs, big
/// metadata) are never built, and opaque values are copied verbatim instead
/// of being re-serialized ([`Value::raw`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// `null`.
    #[default]
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as serde_json parsed it.
    Number(Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Lazy>),
    /// An object, keys in input order.
    Object(Map),
}

/// A value kept as raw JSON text until first read (or parsed eagerly, for
/// small records; see [`parse_record`]).
pub struct Lazy {
    raw: Option<Box<RawValue>>,
    parsed: OnceCell<Value>,
}

impl Lazy {
    /// Wraps raw JSON text.
    pub fn new(raw: Box<RawValue>) -> Self {
        Self {
            raw: Some(raw),
            parsed: OnceCell::new(),
        }
    }

    /// A holder of an already parsed value.
    pub fn from_value(v: Value) -> Self {
        let parsed = OnceCell::new();
        let _ = parsed.set(v);
        Self { raw: None, parsed }
    }

    /// The parsed value (parsed on first call).
    pub fn value(&self) -> &Value {
        self.parsed.get_or_init(|| match &self.raw {
            Some(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
            None => Value::Null,
        })
    }

    /// The parsed value, by value.
    pub fn into_value(self) -> Value {
        match self.parsed.into_inner() {
            Some(v) => v,
            None => match &self.raw {
                Some(raw) => serde_json::from_str(raw.get()).unwrap_or(Value::Null),
                None => Value::Null,
            },
        }
    }

    /// The value as compact JSON text: the input text verbatim (key order,
    /// number spelling and escapes preserved), with the whitespace between
    /// tokens removed by [`RawJson::from_raw`] (a JSON Lines transcript
    /// cannot carry a line break). Never walks the value, so any nesting
    /// depth is carried (issue #23: re-serializing recursed once per level).
    pub fn to_raw(&self) -> RawJson {
        match &self.raw {
            // `RawJson::from_raw` drops the whitespace between tokens itself.
            Some(raw) => RawJson::from_raw(raw.clone()),
            None => self.value().to_raw(),
        }
    }
}

impl Deref for Lazy {
    type Target = Value;
    fn deref(&self) -> &Value {
        self.value()
    }
}

impl Clone for Lazy {
    fn clone(&self) -> Self {
        Self {
            raw: self.raw.clone(),
            parsed: self.parsed.clone(),
        }
    }
}

impl PartialEq for Lazy {
    /// Two subtrees that were never parsed compare by their compact text
    /// (the input's spelling: `1.0` and `1.00` differ), so comparing never
    /// parses deeper than the parsed side of either value.
    fn eq(&self, other: &Self) -> bool {
        match (&self.raw, &other.raw) {
            (Some(a), Some(b)) if self.parsed.get().is_none() && other.parsed.get().is_none() => {
                let text = |r: &RawValue| RawJson::from_raw(r.to_owned()).get().to_owned();
                a.get() == b.get() || text(a) == text(b)
            }
            _ => self.value() == other.value(),
        }
    }
}

impl fmt::Debug for Lazy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.raw {
            Some(raw) => write!(f, "Lazy({})", raw.get()),
            None => write!(f, "Lazy({:?})", self.value()),
        }
    }
}

impl Serialize for Lazy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.parsed.get() {
            Some(v) => v.serialize(s),
            None => self.to_raw().serialize(s),
        }
    }
}

/// The entries of a JSON object, in input order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Map(pub Vec<(String, Lazy)>);

impl Map {
    /// The value of the first entry named `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entry(key).map(Lazy::value)
    }
    /// The raw holder of the first entry named `key`.
    pub fn entry(&self, key: &str) -> Option<&Lazy> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }
    /// Values in order.
    pub fn values(&self) -> impl Iterator<Item = &Value> {
        self.0.iter().map(|(_, v)| v.value())
    }
}

impl Value {
    /// Field of an object (`None` for other values).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.get(key),
            _ => None,
        }
    }
    /// A field as verbatim JSON text (`null` when absent): how opaque
    /// values (tool inputs and outputs) are carried.
    pub fn raw(&self, key: &str) -> RawJson {
        match self {
            Value::Object(m) => m.entry(key).map(Lazy::to_raw).unwrap_or_default(),
            _ => RawJson::null(),
        }
    }
    /// Element of an array.
    pub fn at(&self, index: usize) -> Option<&Value> {
        match self {
            Value::Array(a) => a.get(index).map(Lazy::value),
            _ => None,
        }
    }
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
    /// The number as `u64`, if it is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.as_u64(),
            _ => None,
        }
    }
    /// The number as `i64`, if it is an integer in range.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Number(n) => n.as_i64(),
            _ => None,
        }
    }
    /// The number as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => n.as_f64(),
            _ => None,
        }
    }
    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&Vec<Lazy>> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
    /// The entries, if this is an object.
    pub fn as_object(&self) -> Option<&Map> {
        match self {
            Value::Object(m) => Some(m),
            _ => None,
        }
    }
    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    /// Whether this is an object.
    pub fn is_object(&self) -> bool {
        matches!(self, Value::Object(_))
    }
    /// Whether this is an array.
    pub fn is_array(&self) -> bool {
        matches!(self, Value::Array(_))
    }
    /// The value as compact JSON text (object key order kept).
    pub fn to_raw(&self) -> RawJson {
        RawJson::from_value(self).unwrap_or_default()
    }
    /// An object from `(key, value)` pairs, in that order.
    pub fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
        Value::Object(Map(entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Lazy::from_value(v)))
            .collect()))
    }
}

impl From<Option<&Value>> for Value {
    fn from(v: Option<&Value>) -> Self {
        v.cloned().unwrap_or(Value::Null)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => f.write_str("null"),
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Number(n) => n.serialize(s),
            Value::String(t) => s.serialize_str(t),
            Value::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Object(m) => {
                let mut map = s.serialize_map(Some(m.len()))?;
                for (k, v) in &m.0 {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// Records up to this size are parsed eagerly: building a small tree
/// directly costs fewer allocations than keeping every field as raw text.
pub const EAGER_LIMIT: usize = 1024;

/// Parses one framed record: eagerly when small, lazily otherwise. Opaque
/// values of lazy records are carried verbatim; those of eager records are
/// re-serialized compactly (same JSON value, same key order).
///
/// A small record nested deeper than serde_json's recursion limit (128) is
/// parsed lazily instead of being refused: its deep values are then carried
/// verbatim like those of any large record.
pub fn parse_record(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    if bytes.len() <= EAGER_LIMIT {
        serde_json::from_slice::<Eager>(bytes)
            .map(|e| e.0)
            .or_else(|e| serde_json::from_slice::<Value>(bytes).map_err(|_| e))
    } else {
        serde_json::from_slice::<Value>(bytes)
    }
}

/// A value parsed with every container built immediately.
struct Eager(Value);

impl<'de> Deserialize<'de> for Eager {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EagerVisitor).map(Eager)
    }
}

struct EagerVisitor;

impl<'de> Visitor<'de> for EagerVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Eager::deserialize(d).map(|e| e.0)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Eager(e)) = seq.next_element::<Eager>()? {
            v.push(Lazy::from_value(e));
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((k, Eager(v))) = map.next_entry::<String, Eager>()? {
            entries.push((k, Lazy::from_value(v)));
        }
        Ok(Value::Object(Map(entries)))
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Deserialize::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(e) = seq.next_element::<Box<RawValue>>()? {
            v.push(Lazy::new(e));
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
            entries.push((k, Lazy::new(v)));
        }
        Ok(Value::Object(Map(entries)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_key_order_and_values() {
        let text = r#"{"z":1,"a":[true,null,"x",-2,1.5],"m":{"q":{},"b":[]}}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), text);
        assert_eq!(v.to_raw().get(), text);
        assert_eq!(
            v.get("a").and_then(|a| a.at(3)).and_then(Value::as_i64),
            Some(-2)
        );
        assert_eq!(v.get("m").and_then(Value::as_object).map(Map::len), Some(2));
        assert_eq!(v.to_string(), text);
        // Opaque fields are carried verbatim, but compact (RawJson drops whitespace between
        // tokens, so no value can carry a line break into a transcript).
        let v: Value =
            serde_json::from_str("{\"a\": {\"k\" : 1.50}, \"b\": {\"x\":\n 1}}").unwrap();
        assert_eq!(v.raw("a").get(), r#"{"k":1.50}"#);
        assert_eq!(v.raw("b").get(), r#"{"x":1}"#);
        assert!(v.raw("missing").is_null());
    }
}
