//! The one-pass path of [`decode_str`](super::decode_str): a line whose `type` comes before its
//! `payload` (every writer of ours puts it there) gets a step or tool payload typed while the
//! line is parsed, instead of being kept as raw text first and parsed a second time.
//!
//! Anything it cannot decide exactly like the two-pass path (a syntax error, a missing or
//! repeated field, an escaped string, an invalid id or timestamp, a payload that does not fit
//! its type, ...) makes it give up, and the two-pass path decodes the line as before, errors and
//! warnings included. Payloads it does not type (a message, an unknown or later type) go
//! through the same `decode_payload` as there. So both paths give the same result for every
//! line (tested in `tests/decode_one_pass.rs`); this one is only faster (the reader bench's
//! payloads were scanned twice: ~25% of the decoder's instructions, #29).

use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};

use super::*;

/// The decoded line, or `None` when the two-pass path must decide.
pub(super) fn decode(text: &str) -> Option<Decoded> {
    let wire: OnePass<'_> = serde_json::from_str(text).ok()?;
    let run_id = RunId::parse(wire.run_id).ok()?;
    let parent_run_id = optional_id("parent_run_id", wire.parent_run_id).ok()?;
    let child_run_id = optional_id("child_run_id", wire.child_run_id).ok()?;
    let timestamp = Timestamp::parse(wire.timestamp).ok()?;
    let mut warnings = Vec::new();
    let kind = match EventType::from_wire(wire.ty) {
        Some(t) => EventKind::Known(t),
        None => {
            warnings.push(DecodeWarning::UnknownEventType {
                type_name: wire.ty.to_owned(),
            });
            EventKind::Unknown(wire.ty.to_owned())
        }
    };
    let payload = match wire.payload {
        Field::Typed(p) => p,
        Field::Absent => decode_payload(&kind, None, &mut warnings),
        Field::Raw(raw) => decode_payload(&kind, raw, &mut warnings),
    };
    Some(Decoded {
        event: DecodedEvent {
            seq: wire.seq,
            run_id,
            parent_run_id,
            child_run_id,
            kind,
            path: wire.path.unwrap_or_default().to_owned(),
            iteration: wire.iteration.unwrap_or(0),
            timestamp,
            payload,
        },
        warnings,
    })
}

/// The payload as met in the line.
// One short-lived value per decoded line, never stored in a collection: boxing the typed
// payload (larger since `Usage` carries the 5m/1h cache-write split) would cost an
// allocation per line for nothing.
#[allow(clippy::large_enum_variant)]
enum Field<'a> {
    /// No `payload` key (yet).
    Absent,
    /// Kept raw (`None`: `null`): the type was unknown, came later, or calls for a message.
    Raw(Option<&'a RawValue>),
    /// Typed while parsing (a step or tool payload of a known type that came first).
    Typed(DecodedPayload),
}

/// The envelope, read in one pass. Strings are borrowed: an escaped one gives up.
struct OnePass<'a> {
    seq: u64,
    run_id: &'a str,
    parent_run_id: Option<&'a str>,
    child_run_id: Option<&'a str>,
    ty: &'a str,
    path: Option<&'a str>,
    iteration: Option<u64>,
    timestamp: &'a str,
    payload: Field<'a>,
}

impl<'de> Deserialize<'de> for OnePass<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

/// Sets a field met once; a second time is an error (the two-pass path reports it).
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    if slot.replace(value).is_some() {
        return Err(E::custom("duplicate field"));
    }
    Ok(())
}

impl<'de> Visitor<'de> for EnvelopeVisitor {
    type Value = OnePass<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a transcript event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut seq, mut run_id, mut parent, mut child) = (None, None, None, None);
        let (mut ty, mut path, mut iteration, mut timestamp) = (None, None, None, None);
        let mut payload = Field::Absent;
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "seq" => once(&mut seq, map.next_value::<u64>()?)?,
                "run_id" => once(&mut run_id, map.next_value::<&'de str>()?)?,
                "parent_run_id" => once(&mut parent, map.next_value::<Option<&'de str>>()?)?,
                "child_run_id" => once(&mut child, map.next_value::<Option<&'de str>>()?)?,
                "type" => once(&mut ty, map.next_value::<&'de str>()?)?,
                "path" => once(&mut path, map.next_value::<Option<&'de str>>()?)?,
                "iteration" => once(&mut iteration, map.next_value::<Option<u64>>()?)?,
                "timestamp" => once(&mut timestamp, map.next_value::<&'de str>()?)?,
                "payload" => {
                    if !matches!(payload, Field::Absent) {
                        return Err(de::Error::custom("duplicate field"));
                    }
                    payload = map.next_value_seed(PayloadSeed(ty))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let missing = || de::Error::custom("missing field");
        Ok(OnePass {
            seq: seq.ok_or_else(missing)?,
            run_id: run_id.ok_or_else(missing)?,
            parent_run_id: parent.flatten(),
            child_run_id: child.flatten(),
            ty: ty.ok_or_else(missing)?,
            path: path.flatten(),
            iteration: iteration.flatten(),
            timestamp: timestamp.ok_or_else(missing)?,
            payload,
        })
    }
}

/// The payload, typed when the event type already read calls for a step or a tool payload.
struct PayloadSeed<'a>(Option<&'a str>);

impl<'de> DeserializeSeed<'de> for PayloadSeed<'_> {
    type Value = Field<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        let kind = self
            .0
            .and_then(EventType::from_wire)
            .map(EventType::payload_kind);
        // `null` stays raw (`None`): the two-pass rules for a null payload apply.
        Ok(match kind {
            Some(PayloadKind::StepOrNull | PayloadKind::Step) => {
                match Option::<StepPayload>::deserialize(d)? {
                    Some(p) => Field::Typed(DecodedPayload::Step(p)),
                    None => Field::Raw(None),
                }
            }
            Some(PayloadKind::Tool) => match Option::<ToolPayload>::deserialize(d)? {
                Some(p) => Field::Typed(DecodedPayload::Tool(p)),
                None => Field::Raw(None),
            },
            Some(PayloadKind::Message) | None => Field::Raw(Option::<&RawValue>::deserialize(d)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{decode_str, two_pass};
    use super::decode;

    const GOLDEN: &str = include_str!("../../../../fixtures/golden/wire-examples.jsonl");
    const R: &str = "0000be7c-0000-4000-8000-000000000001";
    const TS: &str = "1970-01-01T00:00:00.000Z";

    fn line(rest: &str) -> String {
        format!("{{\"seq\":1,\"run_id\":\"{R}\",{rest}}}")
    }

    fn tool(payload: &str) -> String {
        line(&format!(
            "\"type\":\"tool.call\",\"path\":\"a\",\"iteration\":0,\"timestamp\":\"{TS}\",\"payload\":{payload}"
        ))
    }

    /// Lines the one-pass path must decode itself, equal to the two-pass result.
    fn fast_lines() -> Vec<String> {
        let call = r#"{"name":"bash","call_id":"c","input":{"cmd":"x y"},"output":null,"fidelity":"router"}"#;
        let mut lines: Vec<String> = GOLDEN.lines().map(str::to_owned).collect();
        lines.extend([
            tool(call),
            // Whitespace outside strings (compacted), an empty error (absent), unknown keys.
            tool(r#"{ "name" : "bash", "call_id":"c", "input" : { "a" : [1, 2] }, "output":null, "error":"", "fidelity":"router", "x":1, "x":2 }"#),
            // Null and absent payloads, where a step payload or null is expected and not.
            line(&format!("\"type\":\"run.started\",\"timestamp\":\"{TS}\",\"payload\":null")),
            line(&format!("\"type\":\"run.started\",\"timestamp\":\"{TS}\"")),
            line(&format!("\"type\":\"step.started\",\"timestamp\":\"{TS}\",\"payload\":null")),
            line(&format!("\"type\":\"tool.result\",\"timestamp\":\"{TS}\"")),
            // Payload before type, unknown type, optional fields null or empty.
            line(&format!("\"payload\":{call},\"type\":\"tool.call\",\"timestamp\":\"{TS}\"")),
            line(&format!("\"type\":\"x.y\",\"timestamp\":\"{TS}\",\"payload\":{call}")),
            line(&format!(
                "\"type\":\"tool.call\",\"timestamp\":\"{TS}\",\"path\":null,\"iteration\":null,\"parent_run_id\":\"\",\"child_run_id\":null,\"payload\":{call}"
            )),
            // A message: kept raw, typed by the same code as the two-pass path.
            line(&format!(
                "\"type\":\"message.user\",\"timestamp\":\"{TS}\",\"payload\":{{\"role\":\"user\",\"blocks\":[{{\"type\":\"new\",\"x\":1}}]}}"
            )),
        ]);
        lines
    }

    /// Lines the one-pass path must leave to the two-pass path (errors, warnings, escapes).
    fn slow_lines() -> Vec<String> {
        let call = r#"{"name":"bash","call_id":"c","input":1,"output":null,"fidelity":"router"}"#;
        vec![
            // Payload that does not fit its type: the probe decides, with a warning.
            tool(r#"{"name":"x","kind":"agent"}"#),
            tool(r#"{"name":"bash","call_id":"c","fidelity":"nobody"}"#),
            tool("[1,2]"),
            // Duplicates of known fields.
            line(&format!(
                "\"type\":\"tool.call\",\"type\":\"tool.call\",\"timestamp\":\"{TS}\",\"payload\":{call}"
            )),
            line(&format!(
                "\"type\":\"tool.call\",\"timestamp\":\"{TS}\",\"payload\":{call},\"payload\":{call}"
            )),
            line(&format!(
                "\"seq\":2,\"type\":\"tool.call\",\"timestamp\":\"{TS}\",\"payload\":{call}"
            )),
            // Escaped strings.
            line(&format!(
                "\"type\":\"tool\\u002ecall\",\"timestamp\":\"{TS}\",\"payload\":{call}"
            )),
            line(&format!(
                "\"t\\u0079pe\":\"tool.call\",\"timestamp\":\"{TS}\",\"payload\":{call}"
            )),
            format!(
                "{{\"seq\":1,\"run_id\":\"\\u0030{}\",\"type\":\"tool.call\",\"timestamp\":\"{TS}\"}}",
                &R[1..]
            ),
            // Missing, null or invalid required fields; invalid ids and timestamps.
            format!("{{\"run_id\":\"{R}\",\"type\":\"tool.call\",\"timestamp\":\"{TS}\"}}"),
            format!(
                "{{\"seq\":null,\"run_id\":\"{R}\",\"type\":\"tool.call\",\"timestamp\":\"{TS}\"}}"
            ),
            line(&format!("\"type\":\"tool.call\",\"payload\":{call}")),
            line("\"type\":\"tool.call\",\"timestamp\":\"yesterday\""),
            line(&format!(
                "\"type\":\"tool.call\",\"timestamp\":\"{TS}\",\"parent_run_id\":\"nope\""
            )),
            format!(
                "{{\"seq\":1,\"run_id\":\"0000BE7C-0000-4000-8000-00000000000g\",\"type\":\"run.started\",\"timestamp\":\"{TS}\"}}"
            ),
            // Not an object, trailing characters, truncated.
            format!("[1,\"{R}\",null,null,\"run.started\",\"\",0,\"{TS}\",null]"),
            format!("{} x", tool(call)),
            tool(call)[..40].to_owned(),
            "42".to_owned(),
        ]
    }

    #[test]
    fn the_one_pass_path_decodes_our_lines_exactly_like_the_two_pass_path() {
        for l in fast_lines() {
            let fast = decode(&l);
            assert!(fast.is_some(), "the one-pass path gave up on {l}");
            assert_eq!(fast.map(Ok), Some(two_pass(&l)), "{l}");
            assert_eq!(decode_str(&l), two_pass(&l), "{l}");
        }
    }

    #[test]
    fn everything_else_is_left_to_the_two_pass_path_and_decodes_as_before() {
        for l in slow_lines() {
            match decode(&l) {
                None => assert_eq!(decode_str(&l), two_pass(&l), "{l}"),
                Some(d) => assert_eq!(Ok(d), two_pass(&l), "{l}"),
            }
        }
        // At least the mismatched payloads and every error go the two-pass way.
        for l in &slow_lines()[..3] {
            assert!(decode(l).is_none(), "{l}");
            assert!(!two_pass(l).unwrap().warnings.is_empty(), "{l}");
        }
    }
}
