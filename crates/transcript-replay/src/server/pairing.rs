//! Which sent tool result answers which recorded one: the results of one turn match as a set.
//!
//! A recorded result is answered by the sent result with its call id (Gemini CLI's
//! `<tool>__<id>` answered with `<id>`); a recorded result no id answers (an API without call
//! ids, such as Gemini's) by a result of the request's last turn of results, not yet taken,
//! whose call has the same tool and arguments (numbers compared as numbers), else the same
//! tool, else the next one in order. Never by position alone when the calls say more.

use serde_json::Value;

use super::record::{Provider, SentResult};
use super::script::ExpectedResult;

/// Whether a result sent with call id `sent` answers the call recorded as `recorded`. Gemini
/// CLI names a call `<tool>__<id>` in its output but answers it with `<id>` alone.
pub(crate) fn same_call(provider: Provider, recorded: &str, sent: &str) -> bool {
    recorded == sent
        || (provider == Provider::Gemini
            && recorded
                .strip_suffix(sent)
                .is_some_and(|name| name.ends_with("__") && !name.contains('/')))
}

/// One way a recorded result and a sent one may belong together.
type Rule = dyn Fn(&ExpectedResult, &SentResult) -> bool;

/// For each expected result, in order, the index in `sent` of the result answering it.
pub(crate) fn pair(
    provider: Provider,
    expected: &[ExpectedResult],
    sent: &[SentResult],
) -> Vec<Option<usize>> {
    let mut taken = vec![false; sent.len()];
    let mut out: Vec<Option<usize>> = expected
        .iter()
        .map(|e| {
            let found = sent.iter().enumerate().position(|(k, r)| {
                !taken[k]
                    && r.id
                        .as_deref()
                        .is_some_and(|id| same_call(provider, &e.id, id))
            });
            if let Some(k) = found {
                taken[k] = true;
            }
            found
        })
        .collect();
    // The results no id answered, from the request's last turn of results.
    let last = sent
        .iter()
        .enumerate()
        .filter(|(k, _)| !taken[*k])
        .map(|(_, r)| r.group)
        .max();
    let free = |taken: &[bool], k: usize| !taken[k] && Some(sent[k].group) == last;
    let rules: [&Rule; 3] = [
        &|e, r| {
            r.call
                .as_ref()
                .is_some_and(|(t, a)| *t == e.tool && json_eq(a, &e.arguments))
        },
        &|e, r| r.call.as_ref().is_some_and(|(t, _)| *t == e.tool),
        &|_, _| true,
    ];
    for rule in rules {
        for (i, e) in expected.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            let found = (0..sent.len()).find(|&k| free(&taken, k) && rule(e, &sent[k]));
            if let Some(k) = found {
                taken[k] = true;
                out[i] = Some(k);
            }
        }
    }
    out
}

/// JSON equality with numbers compared as numbers (`1` equals `1.0`), objects as maps.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let same = match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                    (Some(p), Some(q), _, _) => p == q,
                    (_, _, Some(p), Some(q)) => p == q,
                    _ => x.as_f64() == y.as_f64(),
                };
                if !same {
                    return false;
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                stack.extend(x.iter().zip(y));
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => stack.push((v, w)),
                        None => return false,
                    }
                }
            }
            (Value::Array(_) | Value::Object(_), _) => return false,
            (a, b) if a != b => return false,
            _ => {}
        }
    }
    true
}

/// A call named for a reader: its tool and short arguments, `Read(notes.txt)`,
/// `Bash(ls -la)`, `exec_command(cat x)`; the tool alone without arguments to show.
pub(crate) fn call_label(tool: &str, arguments: &Value) -> String {
    const KEYS: &[&str] = &[
        "file_path",
        "absolute_path",
        "path",
        "command",
        "cmd",
        "pattern",
        "url",
        "query",
    ];
    let main = KEYS
        .iter()
        .find_map(|k| arguments.get(k).and_then(Value::as_str).map(|v| (*k, v)))
        .or_else(|| {
            arguments.as_object().and_then(|o| {
                o.iter()
                    .find_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
            })
        });
    let tool = if tool.is_empty() { "a tool" } else { tool };
    let Some((key, value)) = main else {
        return tool.to_owned();
    };
    // A path is named by its file name.
    let value = if key.ends_with("path") {
        value.rsplit('/').find(|s| !s.is_empty()).unwrap_or(value)
    } else {
        value
    };
    let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
    const MAX: usize = 40;
    let short: String = value.chars().take(MAX).collect();
    let dots = if value.chars().count() > MAX {
        "…"
    } else {
        ""
    };
    format!("{tool}({short}{dots})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sent(id: Option<&str>, group: usize, call: Option<(&str, Value)>) -> SentResult {
        SentResult {
            id: id.map(str::to_owned),
            text: String::new(),
            raw: Value::Null,
            group,
            call: call.map(|(t, a)| (t.to_owned(), a)),
        }
    }

    fn expected(id: &str, tool: &str, args: Value) -> ExpectedResult {
        ExpectedResult::new(id, "").for_call(tool, args)
    }

    #[test]
    fn results_pair_by_id_in_any_order() {
        let e = [
            expected("a", "Read", json!({})),
            expected("b", "Read", json!({})),
        ];
        let s = [sent(Some("b"), 1, None), sent(Some("a"), 1, None)];
        assert_eq!(pair(Provider::Anthropic, &e, &s), [Some(1), Some(0)]);
        let s = [sent(Some("a"), 1, None)];
        assert_eq!(pair(Provider::Anthropic, &e, &s), [Some(0), None]);
    }

    #[test]
    fn idless_results_pair_by_tool_and_arguments_not_position() {
        let e = [
            expected("x1", "read_file", json!({"path": "a", "limit": 10})),
            expected("x2", "read_file", json!({"path": "b", "limit": 10})),
            expected("x3", "glob", json!({"pattern": "*"})),
        ];
        // Sent in another order, numbers spelled otherwise, and an older turn's result.
        let s = [
            sent(
                None,
                1,
                Some(("read_file", json!({"path": "a", "limit": 10}))),
            ),
            sent(None, 3, Some(("glob", json!({"pattern": "*"})))),
            sent(
                None,
                3,
                Some(("read_file", json!({"limit": 10.0, "path": "b"}))),
            ),
            sent(
                None,
                3,
                Some(("read_file", json!({"path": "a", "limit": 10}))),
            ),
        ];
        assert_eq!(pair(Provider::Gemini, &e, &s), [Some(3), Some(2), Some(1)]);
        // Changed arguments: paired by tool, then by order.
        let s = [
            sent(None, 2, Some(("glob", json!({"pattern": "?"})))),
            sent(None, 2, Some(("read_file", json!({"path": "c"})))),
        ];
        assert_eq!(pair(Provider::Gemini, &e, &s), [Some(1), None, Some(0)]);
    }

    #[test]
    fn gemini_answers_its_own_tool_prefixed_ids() {
        assert!(same_call(Provider::Gemini, "read_file__g1", "g1"));
        assert!(!same_call(Provider::Anthropic, "read_file__g1", "g1"));
        assert!(!same_call(Provider::Gemini, "a/b__g1", "g1"));
    }

    #[test]
    fn numbers_compare_as_numbers() {
        assert!(json_eq(
            &json!({"n": 1, "a": [1.0, 2]}),
            &json!({"a": [1, 2.0], "n": 1.0})
        ));
        assert!(!json_eq(&json!({"n": 1}), &json!({"n": 2})));
        assert!(!json_eq(&json!({"n": 1}), &json!({"n": "1"})));
        assert!(!json_eq(&json!([1]), &json!([1, 2])));
        assert!(!json_eq(&json!({"a": 1}), &json!({"b": 1})));
        assert!(json_eq(&json!(u64::MAX), &json!(u64::MAX)));
    }

    #[test]
    fn calls_are_named_by_tool_and_short_arguments() {
        assert_eq!(
            call_label("Read", &json!({"file_path": "/tmp/w/notes.txt"})),
            "Read(notes.txt)"
        );
        assert_eq!(
            call_label("Bash", &json!({"command": "ls -la", "description": "list"})),
            "Bash(ls -la)"
        );
        assert_eq!(
            call_label("exec_command", &json!({"cmd": "cat x"})),
            "exec_command(cat x)"
        );
        assert_eq!(call_label("todo", &json!({"n": 1})), "todo");
        assert_eq!(call_label("t", &json!({"text": "a\nb  c"})), "t(a b c)");
        let long = "x".repeat(100);
        assert_eq!(
            call_label("Bash", &json!({"command": long})),
            format!("Bash({}…)", "x".repeat(40))
        );
    }
}
