//! Portable recordings: the recorded run's workspace root mapped to the replay's own.
//!
//! A run recorded in `/home/a/proj` names that directory in its prompts, its tool-call
//! arguments and its tool results; replayed in `/tmp/ci/proj`, the agent sends the new root.
//! [`WorkspaceRoots`] maps one to the other: turns served to the agent map the recorded root
//! to the new one (texts, thinking, and every string inside tool-call arguments), and what the
//! agent sends (its prompt, its tool results) maps the new root back to the recorded one
//! before it is matched, so a recording replays equal in another checkout.
//!
//! Mapping is on path-prefix boundaries: a root is replaced only where it stands as a whole
//! path prefix: not preceded by a path character (a letter, digit, `.`, `_`, `-`, `~` or
//! `/`) and followed by the end of the text, a `/`, or any character that is none of those
//! (`/a/work` is not inside `/a/workshop` nor `/x/a/work`).

use std::borrow::Cow;
use std::path::Path;

use serde_json::Value;

/// The recorded workspace root and the replay's own (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoots {
    recorded: String,
    now: String,
}

impl WorkspaceRoots {
    /// A mapping between `recorded` and `now` (trailing `/` ignored); `None` when they are
    /// equal, empty or `/` (nothing to map).
    pub fn new(recorded: &Path, now: &Path) -> Option<Self> {
        let clean = |p: &Path| {
            let s = p.to_string_lossy();
            s.trim_end_matches('/').to_owned()
        };
        let (recorded, now) = (clean(recorded), clean(now));
        (!recorded.is_empty() && !now.is_empty() && recorded != now)
            .then_some(WorkspaceRoots { recorded, now })
    }

    /// `text` with the recorded root replaced by the new one (what is served to the agent).
    pub fn to_now<'a>(&self, text: &'a str) -> Cow<'a, str> {
        replace_root(text, &self.recorded, &self.now)
    }

    /// `text` with the new root replaced by the recorded one (what the agent sent, before it
    /// is matched).
    pub fn to_recorded<'a>(&self, text: &'a str) -> Cow<'a, str> {
        replace_root(text, &self.now, &self.recorded)
    }

    /// `event` with the new root written as the recorded one in every string of its line (a
    /// replay's events before they are compared with the recording's); kept as it is when it
    /// does not re-encode. A root holding a character JSON escapes (`"`, `\`, a control) is not
    /// found in the line and maps nothing.
    pub fn event_to_recorded(
        &self,
        event: transcript_domain::DecodedEvent,
    ) -> transcript_domain::DecodedEvent {
        let Some(line) = event.to_event().ok().and_then(|e| e.to_line().ok()) else {
            return event;
        };
        match self.to_recorded(&line) {
            Cow::Borrowed(_) => event,
            Cow::Owned(mapped) => transcript_domain::decode_line(mapped.as_bytes())
                .map(|d| d.event)
                .unwrap_or(event),
        }
    }

    /// `value` with every string in it (not the object keys) mapped to the new root.
    pub fn value_to_now(&self, value: &Value) -> Value {
        map_strings(value, &|s| self.to_now(s).into_owned())
    }
}

/// Whether `c` may be part of a path component (or separate components).
fn path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '~' | '/')
}

/// `text` with each whole-prefix occurrence of `from` replaced by `to`.
fn replace_root<'a>(text: &'a str, from: &str, to: &str) -> Cow<'a, str> {
    if from.is_empty() || !text.contains(from) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut changed = false;
    for (at, _) in text.match_indices(from) {
        if at < done {
            continue;
        }
        let before = text[..at].chars().next_back();
        let after = text[at + from.len()..].chars().next();
        let starts = before.is_none_or(|c| !path_char(c));
        let ends = after.is_none_or(|c| c == '/' || !path_char(c));
        if starts && ends {
            out.push_str(&text[done..at]);
            out.push_str(to);
            done = at + from.len();
            changed = true;
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

/// `value` with `f` applied to every string, iteratively (no recursion per nesting level).
fn map_strings(value: &Value, f: &dyn Fn(&str) -> String) -> Value {
    match value {
        Value::String(s) => Value::String(f(s)),
        Value::Array(_) | Value::Object(_) => {
            let mut v = value.clone();
            let mut stack: Vec<&mut Value> = vec![&mut v];
            while let Some(node) = stack.pop() {
                match node {
                    Value::String(s) => *s = f(s),
                    Value::Array(items) => stack.extend(items.iter_mut()),
                    Value::Object(map) => stack.extend(map.values_mut()),
                    _ => {}
                }
            }
            v
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roots(a: &str, b: &str) -> WorkspaceRoots {
        WorkspaceRoots::new(Path::new(a), Path::new(b)).unwrap()
    }

    #[test]
    fn a_replays_event_names_the_recorded_root_again() {
        let r = roots("/rec/ws", "/now/ws");
        let line = r#"{"seq":1,"run_id":"00000000-0000-4000-8000-000000000001","type":"step.completed","path":"ask","iteration":0,"timestamp":"2026-01-01T00:00:00.000Z","payload":{"name":"ask","kind":"agent","result":{"file_path":"/now/ws/notes.txt"}}}"#;
        let event = transcript_domain::decode_line(line.as_bytes())
            .unwrap()
            .event;
        let mapped = r.event_to_recorded(event);
        let text = mapped.to_event().unwrap().to_line().unwrap();
        assert!(
            text.contains(r#""file_path":"/rec/ws/notes.txt""#),
            "{text}"
        );
        let other = line.replace("/now/ws/", "/now/wsx/");
        let event = transcript_domain::decode_line(other.as_bytes())
            .unwrap()
            .event;
        let kept = r
            .event_to_recorded(event)
            .to_event()
            .unwrap()
            .to_line()
            .unwrap();
        assert!(kept.contains("/now/wsx/notes.txt"), "{kept}");
    }

    #[test]
    fn roots_map_on_path_prefix_boundaries_only() {
        let r = roots("/a/work", "/tmp/ci/w");
        let cases = [
            ("/a/work", "/tmp/ci/w"),
            ("/a/work/notes.txt", "/tmp/ci/w/notes.txt"),
            ("cat /a/work/x /a/work/y", "cat /tmp/ci/w/x /tmp/ci/w/y"),
            ("\"/a/work\"", "\"/tmp/ci/w\""),
            ("(/a/work).", "(/tmp/ci/w)."),
            ("/a/workshop/x", "/a/workshop/x"),
            ("/x/a/work/y", "/x/a/work/y"),
            ("/a/work-old", "/a/work-old"),
            ("/a/work.bak", "/a/work.bak"),
            ("no path here", "no path here"),
            ("", ""),
        ];
        for (given, want) in cases {
            assert_eq!(r.to_now(given), want, "{given}");
            assert_eq!(r.to_recorded(want), given);
        }
        assert!(matches!(r.to_now("/a/workshop"), Cow::Borrowed(_)));
        // Back and forth.
        assert_eq!(r.to_recorded("see /tmp/ci/w/a.txt"), "see /a/work/a.txt");
    }

    #[test]
    fn no_mapping_for_equal_or_empty_roots_and_a_trailing_slash_is_ignored() {
        assert_eq!(WorkspaceRoots::new(Path::new("/a"), Path::new("/a/")), None);
        assert_eq!(WorkspaceRoots::new(Path::new("/"), Path::new("/b")), None);
        let r = roots("/a/w/", "/b");
        assert_eq!(r.to_now("/a/w/x"), "/b/x");
    }

    #[test]
    fn strings_inside_arguments_are_mapped_keys_are_not() {
        let r = roots("/a/work", "/b");
        let args = json!({"file_path": "/a/work/n.txt", "/a/work": 1,
            "list": ["/a/work", {"deep": "cd /a/work && ls"}], "n": 3});
        assert_eq!(
            r.value_to_now(&args),
            json!({"file_path": "/b/n.txt", "/a/work": 1,
                "list": ["/b", {"deep": "cd /b && ls"}], "n": 3})
        );
    }
}
