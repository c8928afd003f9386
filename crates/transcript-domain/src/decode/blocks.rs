//! Messages and content blocks: known block types typed, unknown ones kept verbatim.

use super::*;

#[derive(Deserialize)]
struct WireMessage<'a> {
    role: String,
    #[serde(default, borrow)]
    blocks: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    request_id: Option<String>,
}

pub(super) fn decode_message(
    text: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> Result<DecodedMessage, serde_json::Error> {
    let wire: WireMessage<'_> = serde_json::from_str(text)?;
    let blocks = decode_blocks(wire.blocks.as_deref().unwrap_or(&[]), warnings);
    Ok(DecodedMessage {
        role: wire.role,
        blocks,
        provider: wire.provider,
        model: wire.model,
        usage: wire.usage,
        request_id: wire.request_id,
    })
}

#[derive(Deserialize)]
struct WireBlock {
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    fidelity: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    chunk: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default)]
    tool_input: Option<RawJson>,
    #[serde(default)]
    tool_content: Option<RawJson>,
    #[serde(default)]
    command: Option<String>,
}

/// [`decode_message`] for the strict `Deserialize` impls.
pub(crate) fn decode_message_strict(
    text: &str,
    warnings: &mut Vec<DecodeWarning>,
) -> Result<DecodedMessage, serde_json::Error> {
    decode_message(text, warnings)
}

/// [`decode_block`] for the strict `Deserialize` impls.
pub(crate) fn decode_block_strict(
    raw: &RawValue,
    warnings: &mut Vec<DecodeWarning>,
) -> DecodedBlock {
    decode_block(0, raw, warnings)
}

pub(super) fn decode_blocks(
    items: &[&RawValue],
    warnings: &mut Vec<DecodeWarning>,
) -> Vec<DecodedBlock> {
    items
        .iter()
        .enumerate()
        .map(|(index, raw)| decode_block(index, raw, warnings))
        .collect()
}

pub(super) fn decode_block(
    index: usize,
    raw: &RawValue,
    warnings: &mut Vec<DecodeWarning>,
) -> DecodedBlock {
    let keep = |block_type: String| {
        DecodedBlock::Unknown(UnknownBlock {
            block_type,
            raw: RawJson::from_raw(raw.to_owned()),
        })
    };
    let wire: WireBlock = match serde_json::from_str(raw.get()) {
        Ok(w) => w,
        Err(err) => {
            // Recover the type string for the report when there is one.
            let type_name = serde_json::from_str::<serde_json::Value>(raw.get())
                .ok()
                .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                .unwrap_or_default();
            warnings.push(DecodeWarning::InvalidBlock {
                index,
                type_name: type_name.clone(),
                reason: strip_position(err.to_string()),
            });
            return keep(type_name);
        }
    };
    let Some(block_type) = BlockType::from_wire(&wire.ty) else {
        warnings.push(DecodeWarning::UnknownBlockType {
            index,
            type_name: wire.ty.clone(),
        });
        return keep(wire.ty);
    };
    let fidelity = match wire.fidelity.as_deref().map(Fidelity::from_wire) {
        Some(Some(f)) => f,
        other => {
            let reason = match other {
                None => "missing fidelity".to_owned(),
                Some(_) => format!(
                    "unknown fidelity {:?}",
                    wire.fidelity.as_deref().unwrap_or_default()
                ),
            };
            warnings.push(DecodeWarning::InvalidBlock {
                index,
                type_name: wire.ty.clone(),
                reason,
            });
            return keep(wire.ty);
        }
    };
    let body = match block_type {
        BlockType::Text => BlockBody::Text {
            text: wire.text.unwrap_or_default(),
        },
        BlockType::Thinking => BlockBody::Thinking {
            thinking: wire.thinking.unwrap_or_default(),
        },
        BlockType::ToolUse => BlockBody::ToolUse {
            tool_name: wire.tool_name.unwrap_or_default(),
            tool_id: wire.tool_id.unwrap_or_default(),
            tool_input: wire.tool_input.unwrap_or_default(),
        },
        BlockType::ToolResult => BlockBody::ToolResult {
            tool_id: wire.tool_id.unwrap_or_default(),
            tool_content: wire.tool_content.unwrap_or_default(),
        },
        BlockType::Command => BlockBody::Command {
            command: wire.command.unwrap_or_default(),
        },
        BlockType::Stream => BlockBody::Stream {
            text: wire.text.or(wire.chunk).unwrap_or_default(),
        },
    };
    DecodedBlock::Known(ContentBlock { fidelity, body })
}
