//! Type-directed payload decoding (decision 14) and 000's shape probe for the rest.

use super::*;

pub(super) fn decode_payload(
    kind: &EventKind,
    raw: Option<&RawValue>,
    warnings: &mut Vec<DecodeWarning>,
) -> DecodedPayload {
    let Some(raw) = raw else {
        if let EventKind::Known(t) = kind {
            let expected = t.payload_kind();
            if expected != PayloadKind::StepOrNull {
                warnings.push(DecodeWarning::PayloadMismatch {
                    event_type: *t,
                    expected,
                    reason: "payload is null or absent".to_owned(),
                });
            }
        }
        return DecodedPayload::Null;
    };
    let EventKind::Known(event_type) = kind else {
        return probe(raw, warnings);
    };
    let expected = event_type.payload_kind();
    let typed = match expected {
        PayloadKind::StepOrNull | PayloadKind::Step => {
            serde_json::from_str::<StepPayload>(raw.get()).map(DecodedPayload::Step)
        }
        PayloadKind::Tool => {
            serde_json::from_str::<ToolPayload>(raw.get()).map(DecodedPayload::Tool)
        }
        PayloadKind::Message => {
            let mut block_warnings = Vec::new();
            let result =
                decode_message(raw.get(), &mut block_warnings).map(DecodedPayload::Message);
            if result.is_ok() {
                warnings.append(&mut block_warnings);
            }
            result
        }
    };
    match typed {
        Ok(payload) => payload,
        Err(err) => {
            warnings.push(DecodeWarning::PayloadMismatch {
                event_type: *event_type,
                expected,
                reason: strip_position(err.to_string()),
            });
            probe(raw, warnings)
        }
    }
}

#[derive(Deserialize)]
struct Probe {
    role: Option<serde::de::IgnoredAny>,
    call_id: Option<serde::de::IgnoredAny>,
    kind: Option<serde::de::IgnoredAny>,
}

/// 000's shape probe: array → blocks, `role` → message, `call_id` → tool,
/// `kind` → step, otherwise raw.
pub(super) fn probe(raw: &RawValue, warnings: &mut Vec<DecodeWarning>) -> DecodedPayload {
    let text = raw.get().trim_start();
    let verbatim = || DecodedPayload::Raw(RawJson::from_raw(raw.to_owned()));
    if text.starts_with('[') {
        return match serde_json::from_str::<Vec<&RawValue>>(text) {
            Ok(items) => DecodedPayload::Blocks(decode_blocks(&items, warnings)),
            Err(_) => verbatim(),
        };
    }
    if text.starts_with("null") {
        return DecodedPayload::Null;
    }
    if !text.starts_with('{') {
        return verbatim();
    }
    let Ok(shape) = serde_json::from_str::<Probe>(text) else {
        return verbatim();
    };
    if shape.role.is_some() {
        let mut block_warnings = Vec::new();
        if let Ok(m) = decode_message(text, &mut block_warnings) {
            warnings.append(&mut block_warnings);
            return DecodedPayload::Message(m);
        }
        return verbatim();
    }
    if shape.call_id.is_some() {
        return serde_json::from_str::<ToolPayload>(text)
            .map(DecodedPayload::Tool)
            .unwrap_or_else(|_| verbatim());
    }
    if shape.kind.is_some() {
        return serde_json::from_str::<StepPayload>(text)
            .map(DecodedPayload::Step)
            .unwrap_or_else(|_| verbatim());
    }
    verbatim()
}
