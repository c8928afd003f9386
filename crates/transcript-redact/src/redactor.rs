//! The [`Redactor`]: pattern rules, sensitive key names, privacy mode.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::{Captures, Regex};
use serde_json::Value;
use transcript_domain::{
    BlockBody, ContentBlock, DecodedBlock, DecodedEvent, DecodedPayload, EventMask, Payload,
    RawJson, StepPayload, ToolPayload,
};

use crate::mask::{MARKER_WITH_KIND, mask_around, mask_value};

/// How much content survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Privacy {
    /// Keep content, mask what the patterns find.
    #[default]
    MaskSecrets,
    /// Keep structure only (envelopes, names, timings, usage); drop content.
    StructureOnly,
}

/// A user pattern that is not a valid regular expression.
#[derive(Debug, thiserror::Error)]
#[error("invalid redaction pattern {pattern:?}: {source}")]
pub struct InvalidPattern {
    /// The pattern as given.
    pub pattern: String,
    /// The regex error.
    #[source]
    pub source: regex::Error,
}

#[derive(Debug)]
struct Rule {
    name: String,
    regex: Regex,
}

/// Masks secrets in events. Cheap to share (`Arc<Redactor>`); counts the
/// masks it made.
#[derive(Debug)]
pub struct Redactor {
    rules: Vec<Rule>,
    sensitive_key: Option<Regex>,
    /// Earlier masks (with their kept kind prefix), never masked again.
    marker: Option<Regex>,
    privacy: Privacy,
    masks: AtomicU64,
}

/// Built-in rules: (name, pattern). A named group `secret` marks the part
/// to mask (otherwise the whole match is masked); a group `kind` at the
/// start of it is the key's published prefix (`sk-ant-`, `ghp_`, `AKIA`),
/// which names the kind of key, holds no secret material and stays visible.
const BUILTIN: &[(&str, &str)] = &[
    (
        "private_key_block",
        r"(?P<secret>(?P<kind>-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----)[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----)",
    ),
    (
        "jwt",
        r"\b(?P<secret>(?P<kind>eyJ)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,})",
    ),
    (
        "openai_anthropic_key",
        r"\b(?P<secret>(?P<kind>sk-(?:ant-|proj-|svcacct-)?)[A-Za-z0-9_-]{20,})",
    ),
    (
        "google_api_key",
        r"\b(?P<secret>(?P<kind>AIza)[0-9A-Za-z_-]{35})",
    ),
    (
        "github_token",
        r"\b(?P<secret>(?P<kind>gh[pousr]_)[A-Za-z0-9]{36,})",
    ),
    (
        "github_fine_grained_token",
        r"\b(?P<secret>(?P<kind>github_pat_)[A-Za-z0-9_]{22,})",
    ),
    (
        "slack_token",
        r"\b(?P<secret>(?P<kind>xox[abposr]-)[A-Za-z0-9-]{10,})",
    ),
    (
        "huggingface_token",
        r"\b(?P<secret>(?P<kind>hf_)[A-Za-z0-9]{30,})",
    ),
    (
        "aws_access_key_id",
        r"\b(?P<secret>(?P<kind>AKIA|ASIA)[0-9A-Z]{16})\b",
    ),
    (
        "aws_secret_access_key",
        r#"(?i)aws_?secret_?access_?key["']?\s*[:=]\s*["']?(?P<secret>[A-Za-z0-9/+=]{40})"#,
    ),
    (
        "bearer_token",
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
    ),
    (
        "secret_assignment",
        r#"(?i)\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret)["']?\s*[:=]\s*["']?(?P<secret>[^\s"',;]{4,})"#,
    ),
];

/// Upper bound on extra masking passes (see [`Redactor::mask_text`]).
const MAX_PASSES: usize = 16;

/// Keys whose string values are masked whole in structured values.
const SENSITIVE_KEY: &str = r"(?i)^(?:.*[_-])?(?:password|passwd|secret|token|api[_-]?key|apikey|credentials?|private[_-]?key|authorization|access[_-]?key|session[_-]?key|cookie)(?:[_-].*)?$";

impl Redactor {
    /// Only the built-in rules and sensitive-key masking.
    pub fn builtin() -> Self {
        let rules = BUILTIN
            .iter()
            .filter_map(|(name, pattern)| {
                // The built-in patterns are constants covered by tests.
                Regex::new(pattern).ok().map(|regex| Rule {
                    name: (*name).to_owned(),
                    regex,
                })
            })
            .collect();
        Self {
            rules,
            sensitive_key: Regex::new(SENSITIVE_KEY).ok(),
            marker: Regex::new(MARKER_WITH_KIND).ok(),
            privacy: Privacy::MaskSecrets,
            masks: AtomicU64::new(0),
        }
    }

    /// No rules at all (add user patterns with [`Redactor::with_pattern`]).
    pub fn empty() -> Self {
        Self {
            rules: Vec::new(),
            sensitive_key: None,
            marker: Regex::new(MARKER_WITH_KIND).ok(),
            privacy: Privacy::MaskSecrets,
            masks: AtomicU64::new(0),
        }
    }

    /// Structure-only privacy: drops all content.
    pub fn structure_only() -> Self {
        Self {
            privacy: Privacy::StructureOnly,
            ..Self::empty()
        }
    }

    /// Adds a user pattern (every match is masked; a named group `secret`
    /// limits the mask to that group).
    pub fn with_pattern(mut self, pattern: &str) -> Result<Self, InvalidPattern> {
        let regex = Regex::new(pattern).map_err(|source| InvalidPattern {
            pattern: pattern.to_owned(),
            source,
        })?;
        self.rules.push(Rule {
            name: format!("user:{pattern}"),
            regex,
        });
        Ok(self)
    }

    /// The privacy mode.
    pub fn privacy(&self) -> Privacy {
        self.privacy
    }

    /// Names of the active rules, in application order.
    pub fn rule_names(&self) -> Vec<&str> {
        self.rules.iter().map(|r| r.name.as_str()).collect()
    }

    /// Masks made so far by this redactor.
    pub fn masks_made(&self) -> u64 {
        self.masks.load(Ordering::Relaxed)
    }

    /// Masks every rule's matches in `text`: each keeps its `kind` prefix
    /// (built-in rules) and its length. Earlier masks inside a match are
    /// kept as they are, so masking masked text changes nothing.
    ///
    /// Passes repeat until nothing changes: a mask can expose a match that
    /// was not one before (a key glued to a masked value gains the word
    /// boundary its rule needs), and masking must be idempotent. Each
    /// changing pass leaves fewer characters outside masks, so this ends;
    /// the cap is a guard.
    pub fn mask_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(mut masked) = self.mask_pass(text) else {
            return Cow::Borrowed(text);
        };
        for _ in 0..MAX_PASSES {
            match self.mask_pass(&masked) {
                Some(again) => masked = again,
                None => break,
            }
        }
        Cow::Owned(masked)
    }

    /// One pass of every rule; `None` when nothing changed.
    fn mask_pass(&self, text: &str) -> Option<String> {
        let mut current: Cow<'_, str> = Cow::Borrowed(text);
        for rule in &self.rules {
            if !rule.regex.is_match(&current) {
                continue;
            }
            let hay: &str = &current;
            let markers = self.markers(hay);
            let replaced = rule.regex.replace_all(hay, |caps: &Captures<'_>| {
                let Some(whole) = caps.get(0) else {
                    return String::new();
                };
                let target = caps.name("secret").unwrap_or(whole);
                let kept = caps
                    .name("kind")
                    .filter(|k| k.start() == target.start() && k.end() <= target.end())
                    .map_or(target.start(), |k| k.end());
                let (masked, made) = mask_around(hay, kept..target.end(), &markers);
                self.masks.fetch_add(made, Ordering::Relaxed);
                format!(
                    "{}{masked}{}",
                    &hay[whole.start()..kept],
                    &hay[target.end()..whole.end()]
                )
            });
            if let Cow::Owned(s) = replaced {
                current = Cow::Owned(s);
            }
        }
        match current {
            Cow::Owned(s) if s != text => Some(s),
            _ => None,
        }
    }

    /// Byte ranges of the masks already in `hay`.
    fn markers(&self, hay: &str) -> Vec<std::ops::Range<usize>> {
        self.marker
            .as_ref()
            .map(|m| m.find_iter(hay).map(|f| f.range()).collect())
            .unwrap_or_default()
    }

    /// Whether `s` is exactly one mask (a sensitive key's value that was
    /// already masked).
    fn is_mask(&self, s: &str) -> bool {
        self.marker
            .as_ref()
            .and_then(|m| m.find(s))
            .is_some_and(|f| f.start() == 0 && f.end() == s.len())
    }

    fn mask_string(&self, s: &mut String) {
        if let Cow::Owned(masked) = self.mask_text(s) {
            *s = masked;
        }
    }

    fn mask_json(&self, value: &mut Value, under_sensitive_key: bool) -> bool {
        match value {
            Value::String(s) => {
                if under_sensitive_key && !s.is_empty() && !self.is_mask(s) {
                    self.masks.fetch_add(1, Ordering::Relaxed);
                    *s = mask_value(s);
                    true
                } else if let Cow::Owned(masked) = self.mask_text(s) {
                    *s = masked;
                    true
                } else {
                    false
                }
            }
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= self.mask_json(item, under_sensitive_key);
                }
                changed
            }
            Value::Object(map) => {
                let mut changed = false;
                for (key, item) in map.iter_mut() {
                    let sensitive = under_sensitive_key
                        || self.sensitive_key.as_ref().is_some_and(|r| r.is_match(key));
                    changed |= self.mask_json(item, sensitive);
                }
                changed
            }
            _ => false,
        }
    }

    /// Masks a verbatim value; returns it unchanged (same bytes) when
    /// nothing matched.
    pub fn mask_raw(&self, raw: &RawJson) -> RawJson {
        if self.privacy == Privacy::StructureOnly {
            return RawJson::null();
        }
        let mut value = raw.to_value();
        if self.mask_json(&mut value, false) {
            RawJson::from(value)
        } else {
            raw.clone()
        }
    }

    fn mask_raw_in_place(&self, raw: &mut RawJson) {
        *raw = self.mask_raw(raw);
    }

    fn mask_error(&self, error: &mut Option<String>) {
        if let Some(e) = error {
            if self.privacy == Privacy::StructureOnly {
                *e = "[redacted]".to_owned();
            } else {
                self.mask_string(e);
            }
        }
    }

    fn mask_block(&self, block: &mut ContentBlock) {
        let structure = self.privacy == Privacy::StructureOnly;
        match &mut block.body {
            BlockBody::Text { text } | BlockBody::Stream { text } => {
                if structure {
                    text.clear();
                } else {
                    self.mask_string(text);
                }
            }
            BlockBody::Thinking { thinking } => {
                if structure {
                    thinking.clear();
                } else {
                    self.mask_string(thinking);
                }
            }
            BlockBody::Command { command } => {
                if structure {
                    command.clear();
                } else {
                    self.mask_string(command);
                }
            }
            BlockBody::ToolUse { tool_input, .. } => self.mask_raw_in_place(tool_input),
            BlockBody::ToolResult { tool_content, .. } => self.mask_raw_in_place(tool_content),
        }
    }

    fn mask_step(&self, step: &mut StepPayload) {
        self.mask_error(&mut step.error);
        if self.privacy == Privacy::StructureOnly {
            step.result = None;
        } else if let Some(r) = &mut step.result {
            self.mask_raw_in_place(r);
        }
    }

    fn mask_tool(&self, tool: &mut ToolPayload) {
        self.mask_raw_in_place(&mut tool.input);
        self.mask_raw_in_place(&mut tool.output);
        self.mask_error(&mut tool.error);
    }

    /// Masks a recorded (decoded) event in place: the same rules as for
    /// drafts, plus unknown blocks and raw payloads.
    pub fn mask_decoded(&self, event: &mut DecodedEvent) {
        match &mut event.payload {
            DecodedPayload::Null => {}
            DecodedPayload::Step(s) => self.mask_step(s),
            DecodedPayload::Tool(t) => self.mask_tool(t),
            DecodedPayload::Message(m) => self.mask_decoded_blocks(&mut m.blocks),
            DecodedPayload::Blocks(b) => self.mask_decoded_blocks(b),
            DecodedPayload::Raw(r) => self.mask_raw_in_place(r),
        }
    }

    fn mask_decoded_blocks(&self, blocks: &mut [DecodedBlock]) {
        for block in blocks {
            match block {
                DecodedBlock::Known(b) => self.mask_block(b),
                DecodedBlock::Unknown(u) => self.mask_raw_in_place(&mut u.raw),
            }
        }
    }
}

impl EventMask for Redactor {
    fn mask(&self, payload: &mut Payload) {
        if let Some(step) = payload.as_step_mut() {
            self.mask_step(step);
        } else if let Some(tool) = payload.as_tool_mut() {
            self.mask_tool(tool);
        } else if let Some(message) = payload.as_message_mut() {
            for block in &mut message.blocks {
                self.mask_block(block);
            }
        }
    }
}
