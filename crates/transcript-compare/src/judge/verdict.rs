//! Reading the model's answer, strictly: the whole answer is one JSON object with exactly the
//! keys asked for, or it is not an answer. No code fence, no prose around it, no other key,
//! no other verdict word: whatever the transcript talked the model into writing, only these
//! shapes can pass, and anything else is an error, never a pass.

use serde::Deserialize;

use super::chunk::{BYTES_PER_TOKEN, NOTES_TOKENS};

/// Most characters of a reason kept (a longer one is cut, marked with `…`).
pub const MAX_REASON_CHARS: usize = 1000;

/// A verdict: whether the rubric holds, and the model's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `"verdict": "pass"`.
    pub pass: bool,
    /// `"reason"`, at most [`MAX_REASON_CHARS`] characters.
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerdictDef {
    verdict: String,
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NotesDef {
    notes: String,
}

/// The verdict of a final answer, or why the answer is not one.
pub(crate) fn parse_verdict(answer: &str) -> Result<Verdict, String> {
    let def: VerdictDef = strict(answer, r#"{"verdict": "pass" | "fail", "reason": "…"}"#)?;
    let pass = match def.verdict.as_str() {
        "pass" => true,
        "fail" => false,
        other => {
            return Err(format!(
                "the verdict is {other:?}, not \"pass\" or \"fail\""
            ));
        }
    };
    let reason = def.reason.trim();
    if reason.is_empty() {
        return Err("the verdict gives no reason".to_owned());
    }
    let mut shown: String = reason.chars().take(MAX_REASON_CHARS).collect();
    if reason.chars().count() > MAX_REASON_CHARS {
        shown.push('…');
    }
    Ok(Verdict {
        pass,
        reason: shown,
    })
}

/// The notes of an answer to a part that is not the last, or why the answer is not that.
pub(crate) fn parse_notes(answer: &str) -> Result<String, String> {
    let def: NotesDef = strict(answer, r#"{"notes": "…"}"#)?;
    let max = (NOTES_TOKENS * BYTES_PER_TOKEN) as usize;
    if def.notes.len() > max {
        return Err(format!(
            "the notes are {} bytes, more than the {max} kept for them",
            def.notes.len()
        ));
    }
    Ok(def.notes)
}

fn strict<T: for<'de> Deserialize<'de>>(answer: &str, shape: &str) -> Result<T, String> {
    let trimmed = answer.trim();
    if !trimmed.starts_with('{') {
        return Err(format!("the answer is not a JSON object {shape}"));
    }
    serde_json::from_str(trimmed)
        .map_err(|e| format!("the answer is not the JSON object {shape} asked for: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_shape_is_a_verdict() {
        let v = parse_verdict(" {\"verdict\": \"fail\", \"reason\": \"no tests ran\"}\n").unwrap();
        assert_eq!((v.pass, v.reason.as_str()), (false, "no tests ran"));
        assert!(
            parse_verdict(r#"{"verdict":"pass","reason":"ok"}"#)
                .unwrap()
                .pass
        );
        for bad in [
            "",
            "pass",
            "PASS: it did",
            "```json\n{\"verdict\": \"pass\", \"reason\": \"x\"}\n```",
            "Sure! {\"verdict\": \"pass\", \"reason\": \"x\"}",
            "{\"verdict\": \"pass\", \"reason\": \"x\"} and more",
            "{\"verdict\": \"PASS\", \"reason\": \"x\"}",
            "{\"verdict\": \"pass\"}",
            "{\"verdict\": \"pass\", \"reason\": \"  \"}",
            "{\"verdict\": true, \"reason\": \"x\"}",
            "{\"verdict\": \"pass\", \"reason\": \"x\", \"score\": 1}",
            "{\"verdict\": \"pass\", \"reason\": \"x\"}{\"verdict\": \"fail\", \"reason\": \"y\"}",
            "[{\"verdict\": \"pass\", \"reason\": \"x\"}]",
        ] {
            assert!(
                parse_verdict(bad).is_err(),
                "{bad:?} was taken as a verdict"
            );
        }
        let long = format!(
            "{{\"verdict\": \"pass\", \"reason\": \"{}\"}}",
            "é".repeat(5000)
        );
        assert_eq!(
            parse_verdict(&long).unwrap().reason.chars().count(),
            MAX_REASON_CHARS + 1
        );
    }

    #[test]
    fn notes_are_the_notes_shape_and_bounded() {
        assert_eq!(
            parse_notes(r#"{"notes": "ran cargo test"}"#).unwrap(),
            "ran cargo test"
        );
        assert!(parse_notes(r#"{"verdict": "pass", "reason": "x"}"#).is_err());
        let long = format!("{{\"notes\": \"{}\"}}", "x".repeat(5000));
        assert!(parse_notes(&long).unwrap_err().contains("more than"));
    }
}
