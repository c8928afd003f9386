//! Robustness: arbitrary bytes with arbitrary chunk boundaries never panic,
//! every output serializes to valid JSON, and the output does not depend on
//! the chunking. Also mutations of real-shaped fixtures (bytes flipped,
//! inserted or cut), which reach deeper into each mapper than random bytes,
//! and nesting up to 256 KB deep inside every provider's records (issue #23:
//! the other strategies stop at 2 KB, far below the depth that overflowed).
#![allow(clippy::unwrap_used)]

mod common;

use common::deep::{SHAPES, nested, templates};
use common::*;
use proptest::prelude::*;
use transcript_providers::{AutoNormalizer, Normalizer, Provider};

fn provider() -> impl Strategy<Value = Provider> {
    proptest::sample::select(Provider::ALL.to_vec())
}

/// Bytes biased toward JSON / SSE syntax so records actually form.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"[".to_vec()),
        Just(b"]".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\\".to_vec()),
        Just(b"\n".to_vec()),
        Just(b":".to_vec()),
        Just(b",".to_vec()),
        Just(b"\x00".to_vec()),
        Just(b"\xff".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"event: message_start\n".to_vec()),
        Just(br#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]}}"#.to_vec()),
        Just(br#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#.to_vec()),
        Just(br#"{"type":"item.completed","item":{"id":"i","type":"command_execution","command":"ls","exit_code":1}}"#.to_vec()),
        Just(br#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}"#.to_vec()),
        Just(br#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#.to_vec()),
        Just(br#"{"object":"chat.completion.chunk","id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f","arguments":"{"}}]}}]}"#.to_vec()),
        Just(br#"{"type":"tool.execution_complete","data":{"toolCallId":"t","success":false}}"#.to_vec()),
        Just(br#"{"type":"tool_result","tool_id":"t","status":"error"}"#.to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|v| v.concat())
}

fn check(p: Provider, input: &[u8], lens: &[usize]) {
    let whole = to_jsonl(&transcript_providers::normalize(p, input));
    let chunked = to_jsonl(&run_chunked(p, input, lens));
    assert_eq!(whole, chunked);
    // Auto-detection never panics either.
    let mut auto = AutoNormalizer::new();
    let mut out = Vec::new();
    for c in input.chunks(lens.first().copied().unwrap_or(1).max(1)) {
        auto.feed(c, &mut out);
    }
    auto.finish(&mut out);
    to_jsonl(&out);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(p in provider(), input in proptest::collection::vec(any::<u8>(), 0..2048),
                                   lens in proptest::collection::vec(1usize..64, 1..16)) {
        check(p, &input, &lens);
    }

    #[test]
    fn jsonish_bytes_never_panic(p in provider(), input in jsonish(),
                                 lens in proptest::collection::vec(1usize..32, 1..16)) {
        check(p, &input, &lens);
    }

    #[test]
    fn mutated_fixtures_never_panic(idx in any::<prop::sample::Index>(),
                                    edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
                                    lens in proptest::collection::vec(1usize..64, 1..8)) {
        let mut files = Vec::new();
        for p in Provider::ALL {
            for f in inputs(&own_fixtures().join(p.name())) {
                files.push((*p, f));
            }
        }
        let (p, file) = &files[idx.index(files.len())];
        let mut bytes = std::fs::read(file).unwrap();
        for (at, byte, op) in edits {
            if bytes.is_empty() { break; }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => bytes.truncate(i),
            }
        }
        check(*p, &bytes, &lens);
    }
}

proptest! {
    // Few cases: each input is up to a few hundred KB.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn deep_nesting_never_panics(p in provider(), shape in proptest::sample::select(SHAPES.to_vec()),
                                 template in any::<prop::sample::Index>(), bytes in 1usize..256 * 1024,
                                 cut in any::<prop::sample::Index>(),
                                 lens in proptest::collection::vec(1usize..4096, 1..8)) {
        let deep = nested(shape, bytes);
        let ts = templates(p);
        let t = ts[template.index(ts.len())];
        let deep_string = serde_json::to_string(&deep).unwrap();
        let mut input = t.replace("DEEP_STRING", &deep_string).replace("DEEP", &deep).into_bytes();
        input.extend_from_slice(b"\n");
        input.extend_from_slice(deep.as_bytes());
        // Sometimes cut short (a truncated capture).
        if cut.index(4) == 0 {
            input.truncate(cut.index(input.len()));
        }
        check(p, &input, &lens);
    }
}
