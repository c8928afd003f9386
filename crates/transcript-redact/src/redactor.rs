//! The [`Redactor`]: pattern rules, sensitive key names, privacy mode.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::{Captures, Regex};
use serde_json::Value;
use transcript_domain::{
    BlockBody, ContentBlock, DecodedBlock, DecodedEvent, DecodedPayload, EventMask, Payload,
    RawJson, StepPayload, ToolPayload,
};

use crate::mask::mask_value;

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
    privacy: Privacy,
    masks: AtomicU64,
}

/// Built-in rules: (name, pattern). A named group `secret` marks the part
/// to mask; otherwise the whole match is masked.
const BUILTIN: &[(&str, &str)] = &[
    (
        "private_key_block",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----",
    ),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
    ),
    (
        "openai_anthropic_key",
        r"\bsk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{20,}",
    ),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}"),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("aws_access_key_id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
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
            privacy: Privacy::MaskSecrets,
            masks: AtomicU64::new(0),
        }
    }

    /// No rules at all (add user patterns with [`Redactor::with_pattern`]).
    pub fn empty() -> Self {
        Self {
            rules: Vec::new(),
            sensitive_key: None,
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

    /// Masks every rule's matches in `text`.
    pub fn mask_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut current: Cow<'a, str> = Cow::Borrowed(text);
        for rule in &self.rules {
            if !rule.regex.is_match(&current) {
                continue;
            }
            let replaced = rule.regex.replace_all(&current, |caps: &Captures<'_>| {
                let whole = caps.get(0).map_or("", |m| m.as_str());
                match caps.name("secret") {
                    Some(secret) if !secret.as_str().contains('…') => {
                        self.masks.fetch_add(1, Ordering::Relaxed);
                        let start = secret.start() - caps.get(0).map_or(0, |m| m.start());
                        let end = start + secret.as_str().len();
                        format!(
                            "{}{}{}",
                            &whole[..start],
                            mask_value(secret.as_str()),
                            &whole[end..]
                        )
                    }
                    Some(_) => whole.to_owned(),
                    None if whole.contains('…') => whole.to_owned(),
                    None => {
                        self.masks.fetch_add(1, Ordering::Relaxed);
                        mask_value(whole)
                    }
                }
            });
            if let Cow::Owned(s) = replaced {
                current = Cow::Owned(s);
            }
        }
        current
    }

    fn mask_string(&self, s: &mut String) {
        if let Cow::Owned(masked) = self.mask_text(s) {
            *s = masked;
        }
    }

    fn mask_json(&self, value: &mut Value, under_sensitive_key: bool) -> bool {
        match value {
            Value::String(s) => {
                if under_sensitive_key && !s.is_empty() && !is_mask(s) {
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

/// Whether `s` is already a mask (keeps masking idempotent).
fn is_mask(s: &str) -> bool {
    s.contains('…') && s.ends_with(" chars)")
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
