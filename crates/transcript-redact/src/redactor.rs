//! The [`Redactor`]: pattern rules, sensitive key names, privacy mode.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::Regex;
use serde_json::Value;
use transcript_domain::{
    BlockBody, ContentBlock, DecodedBlock, DecodedEvent, DecodedPayload, EventMask, Payload,
    RawJson, StepPayload, ToolPayload,
};

use crate::mask::{MARKER_WITH_KIND, mask_around, mask_value};
use crate::rules::{BUILTIN_RULES, BuiltinRule};

/// The marker regex, compiled once; its error is reported by
/// [`Redactor::try_builtin`] through the tests, never ignored.
static MARKER_REGEX: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(MARKER_WITH_KIND));

/// Line separators a folded key continues over: real ones, and those of
/// JSON-escaped text (a backslash and `n`).
const FOLD_SEPARATORS: &[&str] = &["\r\n", "\n", r"\r\n", r"\n", "\r"];

/// Where a match ending at `end` stops once the lines folded after it are
/// included: each following line made only of key characters
/// (`[A-Za-z0-9_-]`, at least one, after an indentation of blanks and tabs
/// as in a YAML folded scalar), up to the end of the text, a line
/// separator, an escape or a closing quote, continues it.
fn fold_end(hay: &str, mut end: usize) -> usize {
    loop {
        let rest = &hay[end..];
        let Some(sep) = FOLD_SEPARATORS.iter().find(|s| rest.starts_with(**s)) else {
            return end;
        };
        let after = &rest[sep.len()..];
        let line = after.trim_start_matches([' ', '\t']);
        let indent = after.len() - line.len();
        let run = line
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
            .count();
        let ends_line = matches!(
            line.as_bytes().get(run),
            None | Some(b'\r' | b'\n' | b'\\' | b'"')
        );
        if run == 0 || !ends_line {
            return end;
        }
        end += sep.len() + indent + run;
    }
}

/// `key` without the ` #N` a masked key gets when two keys mask alike.
fn strip_rank(key: &str) -> &str {
    match key.rsplit_once(" #") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => key,
    }
}

/// Sorted, disjoint ranges covering exactly what `ranges` cover.
fn union(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// `spans` (sorted, disjoint) minus `holes` (sorted, disjoint).
fn subtract(spans: Vec<Range<usize>>, holes: Vec<Range<usize>>) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(spans.len());
    for span in spans {
        let mut pos = span.start;
        for hole in holes
            .iter()
            .filter(|h| h.start < span.end && h.end > span.start)
        {
            if hole.start > pos {
                out.push(pos..hole.start);
            }
            pos = pos.max(hole.end);
        }
        if pos < span.end {
            out.push(pos..span.end);
        }
    }
    out
}

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
    /// Continues a match over folded lines ([`BuiltinRule::folds`]).
    folds: bool,
}

fn compile(pattern: &str) -> Result<Regex, InvalidPattern> {
    Regex::new(pattern).map_err(|source| InvalidPattern {
        pattern: pattern.to_owned(),
        source,
    })
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

/// Upper bound on extra masking passes (see [`Redactor::mask_text`]).
const MAX_PASSES: usize = 16;

/// Keys whose string values are masked whole in structured values.
const SENSITIVE_KEY: &str = r"(?i)^(?:.*[_-])?(?:password|passwd|secret|token|api[_-]?key|apikey|credentials?|private[_-]?key|authorization|access[_-]?key|session[_-]?key|cookie)(?:[_-].*)?$";

impl Redactor {
    /// Only the built-in rules ([`BUILTIN_RULES`]) and sensitive-key
    /// masking.
    ///
    /// # Panics
    ///
    /// When a built-in pattern does not compile: that is a bug of this
    /// crate, which `tests/rules.rs::every_builtin_rule_compiles` (and every
    /// other test that builds a redactor) catches before a release; a rule
    /// is never dropped silently. [`Redactor::try_builtin`] returns the
    /// error instead.
    pub fn builtin() -> Self {
        match Self::try_builtin() {
            Ok(r) => r,
            Err(e) => panic!("a built-in redaction rule does not compile: {e}"),
        }
    }

    /// The built-in rules and sensitive-key masking, or the first built-in
    /// pattern that does not compile.
    pub fn try_builtin() -> Result<Self, InvalidPattern> {
        let mut r = Self::empty();
        for rule in BUILTIN_RULES {
            r = r.with_builtin_rule(rule)?;
        }
        r.sensitive_key = Some(compile(SENSITIVE_KEY)?);
        if let Err(source) = &*MARKER_REGEX {
            return Err(InvalidPattern {
                pattern: MARKER_WITH_KIND.to_owned(),
                source: source.clone(),
            });
        }
        Ok(r)
    }

    /// No rules at all (add user patterns with [`Redactor::with_pattern`]).
    pub fn empty() -> Self {
        Self {
            rules: Vec::new(),
            sensitive_key: None,
            marker: MARKER_REGEX.as_ref().ok().cloned(),
            privacy: Privacy::MaskSecrets,
            masks: AtomicU64::new(0),
        }
    }

    /// Adds one built-in rule (under its own name); the error names the
    /// pattern when it does not compile.
    pub fn with_builtin_rule(mut self, rule: &BuiltinRule) -> Result<Self, InvalidPattern> {
        self.rules.push(Rule {
            name: rule.name.to_owned(),
            regex: compile(rule.pattern)?,
            folds: rule.folds,
        });
        Ok(self)
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
        self.rules.push(Rule {
            name: format!("user:{pattern}"),
            regex: compile(pattern)?,
            folds: false,
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
    ///
    /// Every rule matches the same text, and the union of what they mask is
    /// masked: a rule never hides from another the context it needs (a
    /// bearer token glued to `password="…"` would otherwise swallow the
    /// `password=` that marks the quoted value). Kind prefixes are taken out
    /// of the union: they hold no secret and stay visible wherever they are.
    fn mask_pass(&self, text: &str) -> Option<String> {
        let mut spans = Vec::new();
        let mut kinds = Vec::new();
        for rule in &self.rules {
            self.collect(rule, text, &mut spans, &mut kinds);
        }
        if spans.is_empty() {
            return None;
        }
        let spans = subtract(union(spans), union(kinds));
        let markers = self.markers(text);
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        for span in spans {
            let (masked, made) = mask_around(text, span.clone(), &markers);
            self.masks.fetch_add(made, Ordering::Relaxed);
            out.push_str(&text[done..span.start]);
            out.push_str(&masked);
            done = span.end;
        }
        out.push_str(&text[done..]);
        (out != text).then_some(out)
    }

    /// The byte ranges `rule` masks in `hay` (each match's `secret` group
    /// past its `kind` prefix, with its folded lines), and the ranges of
    /// those kind prefixes.
    fn collect(
        &self,
        rule: &Rule,
        hay: &str,
        spans: &mut Vec<Range<usize>>,
        kinds: &mut Vec<Range<usize>>,
    ) {
        if !rule.regex.is_match(hay) {
            return;
        }
        // Matches may overlap: each search starts one character after the
        // previous match's start, so a match cannot hide the start of
        // another (`password='` glued before `passwd: 'a b c'`).
        let mut pos = 0;
        while pos <= hay.len() {
            let Some(caps) = rule.regex.captures_at(hay, pos) else {
                break;
            };
            let Some(whole) = caps.get(0) else { break };
            pos = whole.start()
                + hay[whole.start()..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8);
            let target = caps.name("secret").unwrap_or(whole);
            let kept = caps
                .name("kind")
                .filter(|k| k.start() == target.start() && k.end() <= target.end())
                .map_or(target.start(), |k| k.end());
            let mut end = target.end();
            if rule.folds && end == whole.end() {
                end = fold_end(hay, end);
            }
            if kept > target.start() {
                kinds.push(target.start()..kept);
            }
            if kept < end {
                spans.push(kept..end);
            }
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
                // Keys are content too: a secret used as a key is masked
                // like one in a value (under a sensitive key, whole).
                if let Some(masked) = self.mask_keys(map, under_sensitive_key) {
                    *map = masked;
                    changed = true;
                }
                changed
            }
            _ => false,
        }
    }

    /// The same entries with every key masked (whole when `whole`), or
    /// `None` when no key changes. Two keys that mask to the same text both
    /// stay: the later gets ` #2`, ` #3`… appended.
    fn mask_keys(
        &self,
        map: &mut serde_json::Map<String, Value>,
        whole: bool,
    ) -> Option<serde_json::Map<String, Value>> {
        let masked: Vec<Option<String>> = map
            .keys()
            .map(|key| {
                if whole && !key.is_empty() && !self.is_mask(strip_rank(key)) {
                    self.masks.fetch_add(1, Ordering::Relaxed);
                    Some(mask_value(key))
                } else {
                    match self.mask_text(key) {
                        Cow::Owned(m) => Some(m),
                        Cow::Borrowed(_) => None,
                    }
                }
            })
            .collect();
        if masked.iter().all(Option::is_none) {
            return None;
        }
        let mut out = serde_json::Map::new();
        for ((key, item), masked) in std::mem::take(map).into_iter().zip(masked) {
            let base = masked.unwrap_or(key);
            let mut unique = base.clone();
            let mut n = 1;
            while out.contains_key(&unique) {
                n += 1;
                unique = format!("{base} #{n}");
            }
            out.insert(unique, item);
        }
        Some(out)
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
