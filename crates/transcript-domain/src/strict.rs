//! `serde::Deserialize` for the writer-side types, strict: only the canonical form is accepted,
//! and the error names the field or rule at fault.
//!
//! Built on the tolerant decoder ([`crate::decode_str`] and its message and block decoders), so
//! the two can never disagree: a value deserializes exactly when the decoder reads it without a
//! warning and it converts to the writer-side type ([`crate::DecodedEvent::to_event`]). Opaque
//! values keep their key order, so `serde_json::from_str::<ExchangeEvent>(line)` followed by
//! [`crate::ExchangeEvent::encode_line`] gives back a canonical line byte for byte.
//!
//! These impls read JSON through `serde_json` (the wire format); other serde formats are not
//! supported for these types. [`crate::Payload`] has no `Deserialize` of its own: which payload
//! a JSON object is depends on the envelope's `type` (deserialize the [`crate::ExchangeEvent`]).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::block::ContentBlock;
use crate::decode::{DecodeWarning, DecodedBlock, decode_block_strict, decode_message_strict};
use crate::event::ExchangeEvent;
use crate::payload::MessagePayload;

fn warnings_error<E: serde::de::Error>(warnings: &[DecodeWarning]) -> E {
    let list: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    E::custom(format!("not canonical: {}", list.join("; ")))
}

impl<'de> Deserialize<'de> for ExchangeEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let decoded = crate::decode_str(raw.get()).map_err(D::Error::custom)?;
        if !decoded.warnings.is_empty() {
            return Err(warnings_error(&decoded.warnings));
        }
        decoded.event.to_event().map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for MessagePayload {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let mut warnings = Vec::new();
        let message = decode_message_strict(raw.get(), &mut warnings).map_err(D::Error::custom)?;
        if !warnings.is_empty() {
            return Err(warnings_error(&warnings));
        }
        message.to_message().map_err(D::Error::custom)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let mut warnings = Vec::new();
        match decode_block_strict(&raw, &mut warnings) {
            DecodedBlock::Known(block) if warnings.is_empty() => Ok(block),
            DecodedBlock::Known(_) => Err(warnings_error(&warnings)),
            DecodedBlock::Unknown(u) => Err(D::Error::custom(format!(
                "unknown block type {:?}",
                u.block_type
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Fidelity, Payload, RunEdge};

    const LINE: &str = r#"{"seq":3,"run_id":"550e8400-e29b-41d4-a716-446655440000","type":"tool.call","path":"a","iteration":0,"timestamp":"2026-06-08T08:14:42.123Z","payload":{"name":"Read","call_id":"t1","input":{"z":1,"a":2},"output":null,"fidelity":"router"}}"#;

    #[test]
    fn canonical_lines_deserialize_and_reencode_byte_for_byte() {
        let event: ExchangeEvent = serde_json::from_str(LINE).unwrap();
        assert_eq!(event.to_line().unwrap(), format!("{LINE}\n"));
        let null_run = r#"{"seq":1,"run_id":"550e8400-e29b-41d4-a716-446655440000","type":"run.started","path":"","iteration":0,"timestamp":"2026-06-08T08:14:42.123Z","payload":null}"#;
        let event: ExchangeEvent = serde_json::from_str(null_run).unwrap();
        assert_eq!(event.payload, Payload::RunNull(RunEdge::Started));
        assert_eq!(event.to_line().unwrap(), format!("{null_run}\n"));
    }

    #[test]
    fn errors_name_the_field_or_rule() {
        let cases = [
            (LINE.replace("\"seq\":3,", ""), "seq"),
            (
                LINE.replace("\"router\"", "\"somewhere\""),
                "Fidelity \"somewhere\"",
            ),
            (LINE.replace("tool.call", "tool.future"), "tool.future"),
            (LINE.replace("\"call_id\":\"t1\",", ""), "call_id"),
            (LINE.replace("550e8400-e29b", "not-a-uuid"), "run_id"),
        ];
        for (line, needle) in cases {
            let err = serde_json::from_str::<ExchangeEvent>(&line).unwrap_err();
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
    }

    #[test]
    fn messages_and_blocks_deserialize_strictly() {
        let block: ContentBlock =
            serde_json::from_str(r#"{"type":"text","fidelity":"agent_emitted","text":"hi"}"#)
                .unwrap();
        assert_eq!(block, ContentBlock::text(Fidelity::AgentEmitted, "hi"));
        assert!(serde_json::from_str::<ContentBlock>(r#"{"type":"hologram"}"#).is_err());
        let message: MessagePayload = serde_json::from_str(
            r#"{"role":"assistant","blocks":[{"type":"text","fidelity":"agent_emitted","text":"hi"}],"model":"m"}"#,
        )
        .unwrap();
        assert_eq!(message.model.as_deref(), Some("m"));
        let err = serde_json::from_str::<MessagePayload>(r#"{"role":"narrator","blocks":[]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("narrator"), "{err}");
    }
}
