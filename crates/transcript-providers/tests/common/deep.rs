//! Deeply nested inputs (issue #23 item 4): every place a provider carries
//! an opaque or error value, filled with ~200 KB of nesting, plus the
//! nesting as a whole record. Shared by `tests/deep_nesting.rs`, the
//! proptests and the fuzz seed generator.
#![allow(dead_code)]

use transcript_providers::Provider;

/// Shapes of nesting, by what they exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `[[[[…]]]]` on one line (kept verbatim, never re-serialized).
    Arrays,
    /// `[` + newline per level (re-serialized: spans lines).
    ArraysMultiline,
    /// `{"error":{"error":…"x"…}}` (error text is looked up through `error`).
    Errors,
    /// The same, one level per line (indented, as pretty printers do).
    ErrorsMultiline,
    /// `[[[[` never closed.
    Unclosed,
}

/// Every shape.
pub const SHAPES: &[Shape] = &[
    Shape::Arrays,
    Shape::ArraysMultiline,
    Shape::Errors,
    Shape::ErrorsMultiline,
    Shape::Unclosed,
];

/// A nested value of about `bytes` bytes.
pub fn nested(shape: Shape, bytes: usize) -> String {
    match shape {
        Shape::Arrays => {
            let n = bytes / 2;
            format!("{}{}", "[".repeat(n), "]".repeat(n))
        }
        Shape::ArraysMultiline => {
            let n = bytes / 4;
            format!("{}{}", "[\n ".repeat(n), "]".repeat(n))
        }
        Shape::Errors => {
            let n = bytes / 10;
            format!("{}\"x\"{}", "{\"error\":".repeat(n), "}".repeat(n))
        }
        Shape::ErrorsMultiline => {
            let n = bytes / 12;
            format!("{}\"x\"{}", "{\"error\":\n  ".repeat(n), "}".repeat(n))
        }
        Shape::Unclosed => "[".repeat(bytes),
    }
}

/// Records of `provider` with `DEEP` where an opaque, argument or error
/// value goes. `DEEP_STRING` marks a JSON-encoded string argument.
pub fn templates(provider: Provider) -> &'static [&'static str] {
    match provider {
        Provider::Claude => &[
            r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"x","input":DEEP}],"usage":DEEP}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":DEEP}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[DEEP]}]}}"#,
            r#"{"type":"system","subtype":"api_error","error":DEEP}"#,
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":DEEP,"errors":DEEP}"#,
        ],
        Provider::Codex => &[
            r#"{"type":"item.completed","item":{"id":"i","type":"mcp_tool_call","server":"s","tool":"t","arguments":DEEP,"result":DEEP,"error":DEEP,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"j","type":"function_call","name":"f","arguments":DEEP_STRING}}"#,
            r#"{"type":"turn.failed","error":DEEP}"#,
            r#"{"id":"1","msg":{"type":"mcp_tool_call_end","call_id":"c","result":{"Err":DEEP}}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call","call_id":"k","name":"f","arguments":DEEP_STRING}}"#,
        ],
        Provider::Gemini => &[
            r#"{"type":"tool_use","tool_id":"t","tool_name":"x","parameters":DEEP}"#,
            r#"{"type":"tool_result","tool_id":"t","status":"error","output":DEEP,"error":DEEP}"#,
            r#"{"type":"result","status":"error","error":DEEP,"stats":DEEP}"#,
            r#"{"response":"x","stats":{"models":DEEP},"error":DEEP}"#,
        ],
        Provider::Copilot => &[
            r#"{"type":"assistant.message","data":{"messageId":"m","content":"x","toolRequests":[{"toolCallId":"t","name":"x","arguments":DEEP}]}}"#,
            r#"{"type":"tool.execution_complete","data":{"toolCallId":"t","success":false,"error":DEEP,"result":DEEP}}"#,
            r#"{"type":"session.error","data":DEEP}"#,
        ],
        Provider::OpenAi => &[
            r#"{"object":"chat.completion","id":"c","choices":[{"message":{"role":"assistant","content":DEEP,"tool_calls":[{"id":"t","function":{"name":"f","arguments":DEEP_STRING}}]}}],"usage":DEEP}"#,
            r#"{"type":"error","error":DEEP}"#,
            r#"{"object":"response","id":"r","status":"incomplete","incomplete_details":DEEP,"error":DEEP,"output":[{"type":"mcp_call","id":"m","arguments":DEEP,"output":DEEP,"error":DEEP}]}"#,
            r#"{"messages":[{"role":"tool","tool_call_id":"t","content":DEEP}]}"#,
        ],
        Provider::Anthropic => &[
            r#"{"type":"error","error":DEEP}"#,
            r#"{"type":"message","id":"m","content":[{"type":"tool_use","id":"t","name":"x","input":DEEP},{"type":"web_search_tool_result","tool_use_id":"t","content":DEEP}]}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":DEEP}}"#,
            r#"{"request":{"body":{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":DEEP}]}]}},"response":{"status_code":500,"body":DEEP}}"#,
        ],
    }
}

/// Anthropic recorded exchanges nested inside each other's response body.
pub fn nested_exchanges(levels: usize) -> String {
    format!(
        "{}{{\"type\":\"message\",\"id\":\"m\",\"content\":[]}}{}",
        r#"{"request":{},"response":{"body":"#.repeat(levels),
        "}}".repeat(levels)
    )
}

/// The deep inputs for one provider: each shape as a whole record, and each
/// template filled with the multi-line shapes, each followed by a valid record so
/// that framing is seen to continue.
pub fn deep_inputs(provider: Provider, bytes: usize) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for shape in SHAPES {
        let deep = nested(*shape, bytes);
        // A JSON string holding the nested text (arguments encoded as strings).
        let deep_string = serde_json::to_string(&deep).unwrap_or_default();
        v.push((
            format!("{shape:?} as a whole record"),
            format!("{deep}\n").into_bytes(),
        ));
        // Inside records: the multi-line shapes, which reach both the
        // compaction of values spanning lines and the error-chain walk.
        if !matches!(shape, Shape::ArraysMultiline | Shape::ErrorsMultiline) {
            continue;
        }
        for (i, t) in templates(provider).iter().enumerate() {
            let record = t
                .replace("DEEP_STRING", &deep_string)
                .replace("DEEP", &deep);
            v.push((
                format!("{shape:?} in template {i}"),
                format!("{record}\n{{}}\n").into_bytes(),
            ));
        }
    }
    if provider == Provider::Anthropic {
        v.push((
            "nested exchanges".to_owned(),
            format!("{}\n", nested_exchanges(bytes / 40)).into_bytes(),
        ));
    }
    v
}

/// The deep-nesting seeds of the `parse_<provider>` fuzz target
/// (`fuzz/seeds/parse_<provider>/deep-*`): each template once, its nested
/// values ~200 KB in all, alternating the multi-line shapes, and an unclosed
/// nesting as a whole record.
pub fn fuzz_seeds(provider: Provider) -> Vec<(String, Vec<u8>)> {
    let mut v = vec![(
        "deep-unclosed".to_owned(),
        nested(Shape::Unclosed, 200 * 1024).into_bytes(),
    )];
    for (i, t) in templates(provider).iter().enumerate() {
        let shape = [Shape::ArraysMultiline, Shape::ErrorsMultiline][i % 2];
        let holes = t.matches("DEEP").count().max(1);
        let deep = nested(shape, 200 * 1024 / holes);
        let deep_string = serde_json::to_string(&deep).unwrap_or_default();
        let record = t
            .replace("DEEP_STRING", &deep_string)
            .replace("DEEP", &deep);
        v.push((
            format!("deep-template-{i}"),
            format!("{record}\n{{}}\n").into_bytes(),
        ));
    }
    v
}
