//! The [`Redactor`]: pattern rules, sensitive key names, privacy mode.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use regex::Regex;
use serde_json::Value;
use transcript_domain::RawJson;

use crate::mask::{MARKER_WITH_KIND, mask_around, mask_value};
use crate::rules::{BUILTIN_RULES, BuiltinRule};
use crate::{spans, view};

/// The marker regex, compiled once; its error is reported by
/// [`Redactor::try_builtin`] through the tests, never ignored.
static MARKER_REGEX: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(MARKER_WITH_KIND));

/// `key` without the ` #N` a masked key gets when two keys mask alike.
fn strip_rank(key: &str) -> &str {
    match key.rsplit_once(" #") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => key,
    }
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
    /// The secret values ([`Redactor::with_secret`]): a text cut inside one (a bounded
    /// output's prefix, right before its truncation marker) ends with a part of it that no
    /// whole-value rule matches (#56 item 3).
    secrets: Vec<String>,
}

/// How a cut text's truncation marker starts (`transcript_domain::truncate`).
const CUT_MARKER: &str = "…[truncated: ";

/// Upper bound on extra masking passes (see [`Redactor::mask_text`]).
const MAX_PASSES: usize = 16;

/// How far (in bytes) from the start of a match, and from the end of what
/// is matched so far, a search restarts inside a match (see
/// [`Redactor::collect`]).
const RESTART_WINDOW: usize = 64;

/// The first character boundary of `s` at or after `i`.
fn ceil_char_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

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
            secrets: Vec::new(),
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

    /// Structure-only privacy: drops all content; the strings it keeps
    /// (step, tool and model names, call ids, paths) are masked by the
    /// built-in rules.
    ///
    /// # Panics
    ///
    /// As [`Redactor::builtin`].
    pub fn structure_only() -> Self {
        Self {
            privacy: Privacy::StructureOnly,
            ..Self::builtin()
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

    /// Adds a secret value (an input declared `secret: true`, #48): every occurrence of the
    /// literal text is masked, in its stored and decoded views like any rule's match. The
    /// rule is named `secret:<label>`, never after the value.
    pub fn with_secret(mut self, label: &str, value: &str) -> Result<Self, InvalidPattern> {
        self.rules.push(Rule {
            name: format!("secret:{label}"),
            // An error names the label, never the value.
            regex: Regex::new(&regex::escape(value)).map_err(|source| InvalidPattern {
                pattern: format!("secret:{label}"),
                source,
            })?,
            folds: false,
        });
        self.secrets.push(value.to_owned());
        Ok(self)
    }

    /// Where a secret was cut: the text right before each truncation marker that ends with
    /// the start of a secret (its first 4 characters at least), in `text`'s bytes.
    fn cut_secrets(&self, text: &str) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        for (at, _) in text.match_indices(CUT_MARKER) {
            let before = &text[..at];
            for secret in &self.secrets {
                // The longest start of the secret the text before the marker ends with.
                let longest = secret
                    .char_indices()
                    .map(|(i, c)| i + c.len_utf8())
                    .filter(|&end| end < secret.len())
                    .rev()
                    .find(|&end| before.ends_with(&secret[..end]));
                if let Some(end) = longest
                    && secret[..end].chars().count() >= 4
                {
                    out.push(at - end..at);
                }
            }
        }
        out
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
        let spans = self.find(text);
        if spans.is_empty() {
            return None;
        }
        self.apply(text, &spans)
    }

    /// What every rule masks in `text` and in its decoded views
    /// ([`crate::view`]), in `text`'s bytes: sorted, disjoint ranges.
    ///
    /// Every rule matches the same text, and the union of what they mask is
    /// masked: a rule never hides from another the context it needs (a
    /// bearer token glued to `password="…"` would otherwise swallow the
    /// `password=` that marks the quoted value). Kind prefixes are taken out
    /// of the union: they hold no secret and stay visible wherever they are.
    fn find(&self, text: &str) -> Vec<Range<usize>> {
        let mut spans = Vec::new();
        let mut kinds = Vec::new();
        if self.rules.is_empty() {
            return spans;
        }
        for rule in &self.rules {
            self.collect(rule, text, &mut spans, &mut kinds);
        }
        let chain = view::views(text);
        for depth in 1..=chain.len() {
            let (mut found, mut found_kinds) = (Vec::new(), Vec::new());
            for rule in &self.rules {
                self.collect(rule, &chain[depth - 1].text, &mut found, &mut found_kinds);
            }
            let source = |r| view::to_source(&chain[..depth], r);
            spans.extend(found.into_iter().filter(|r| !r.is_empty()).map(source));
            kinds.extend(
                found_kinds
                    .into_iter()
                    .filter(|r| !r.is_empty())
                    .map(source),
            );
        }
        spans.extend(self.cut_secrets(text));
        if spans.is_empty() {
            return spans;
        }
        spans::subtract(spans::union(spans), &spans::union(kinds))
    }

    /// `text` with `spans` (sorted, disjoint) masked, earlier masks inside
    /// them kept; `None` when that changes nothing.
    fn apply(&self, text: &str, spans: &[Range<usize>]) -> Option<String> {
        let markers = self.markers(text);
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        for span in spans {
            let first = markers.partition_point(|m| m.end <= span.start);
            let (masked, made) = mask_around(text, span.clone(), &markers[first..]);
            self.masks.fetch_add(made, Ordering::Relaxed);
            out.push_str(&text[done..span.start]);
            out.push_str(&masked);
            done = span.end;
        }
        out.push_str(&text[done..]);
        (out != text).then_some(out)
    }

    /// Masks `parts` (adjacent blocks of one message) as one text, so that
    /// a secret split between two of them is found, and each alone (a key
    /// at the start of a part is at the start of a text): each part is
    /// masked where a match covers it. Passes repeat as in
    /// [`Redactor::mask_text`].
    pub(crate) fn mask_parts(&self, parts: &mut [&mut String]) {
        if parts.len() < 2 {
            parts.iter_mut().for_each(|p| self.mask_string(p));
            return;
        }
        for _ in 0..=MAX_PASSES {
            let joined: String = parts.iter().map(|p| p.as_str()).collect();
            let mut found = self.find(&joined);
            let mut base = 0;
            for part in parts.iter() {
                found.extend(
                    self.find(part)
                        .into_iter()
                        .map(|r| r.start + base..r.end + base),
                );
                base += part.len();
            }
            let spans = spans::union(found);
            if spans.is_empty() {
                return;
            }
            let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
            let mut changed = false;
            for (part, local) in parts.iter_mut().zip(spans::split_at_parts(&spans, &lens)) {
                if let Some(masked) = (!local.is_empty())
                    .then(|| self.apply(part, &local))
                    .flatten()
                {
                    **part = masked;
                    changed = true;
                }
            }
            if !changed {
                return;
            }
        }
    }

    /// Adds the byte ranges `rule` masks in `hay` (each match's `secret`
    /// group past its `kind` prefix, with its folded lines) to `spans`, and
    /// the ranges of those kind prefixes to `kinds`.
    ///
    /// Matches may overlap: a match can hide the start of another (a
    /// `password='` glued before `passwd: 'a b c'`), so searches restart
    /// one character after a match's start, not at its end. Restarts stay
    /// within [`RESTART_WINDOW`] bytes of the start of the outermost match
    /// and of the end of everything matched so far (where the context of a
    /// match that reaches further starts); in between, the next search
    /// starts near that end. Every search then starts inside a region no
    /// other outermost match scans, at most twice [`RESTART_WINDOW`] times
    /// each, so the work stays linear in `hay` (a text of `password=`
    /// repeated would otherwise be scanned once per repetition).
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
        let mut pos = 0;
        let mut outer = 0;
        let mut reached = 0;
        // What this rule masks so far, merged: a match inside it adds
        // nothing, and its groups (the costly part of a long match) are not
        // computed.
        let mut cover = 0..0;
        while pos <= hay.len() {
            let Some(whole) = rule.regex.find_at(hay, pos) else {
                break;
            };
            if whole.start() >= reached {
                outer = whole.start();
            }
            reached = reached.max(whole.end());
            let inside = cover.start <= whole.start() && whole.end() <= cover.end;
            if !inside && let Some(caps) = rule.regex.captures_at(hay, whole.start()) {
                let (kind, span) = Self::ranges(rule, hay, &caps);
                kinds.extend(kind);
                if let Some(span) = span {
                    reached = reached.max(span.end);
                    if span.start <= cover.end && cover.start <= span.start {
                        cover.end = cover.end.max(span.end);
                    } else {
                        cover = span.clone();
                    }
                    spans.push(span);
                }
            }
            let next = whole.start()
                + hay[whole.start()..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8);
            pos = if next < outer + RESTART_WINDOW {
                next
            } else {
                next.max(ceil_char_boundary(
                    hay,
                    reached.saturating_sub(RESTART_WINDOW),
                ))
            };
        }
    }

    /// One match's kind prefix (kept visible) and the span it masks (its
    /// `secret` group past the kind prefix, with its folded lines).
    fn ranges(
        rule: &Rule,
        hay: &str,
        caps: &regex::Captures<'_>,
    ) -> (Option<Range<usize>>, Option<Range<usize>>) {
        let Some(whole) = caps.get(0) else {
            return (None, None);
        };
        let target = caps.name("secret").unwrap_or(whole);
        let kept = caps
            .name("kind")
            .filter(|k| k.start() == target.start() && k.end() <= target.end())
            .map_or(target.start(), |k| k.end());
        let mut end = target.end();
        if rule.folds && end == whole.end() {
            end = spans::fold_end(hay, end);
        }
        (
            (kept > target.start()).then_some(target.start()..kept),
            (kept < end).then_some(kept..end),
        )
    }

    /// Byte ranges of the masks already in `hay`.
    fn markers(&self, hay: &str) -> Vec<Range<usize>> {
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

    pub(crate) fn mask_string(&self, s: &mut String) {
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
            // A secret made of digits travels as a JSON number (a PIN handed to a child
            // workflow, #56): a number holding a secret input's value becomes its masked
            // text. Other rules leave numbers alone (a `--redact-pattern` of digits never
            // turns a count or an exit code into a string).
            Value::Number(n) => {
                let text = n.to_string();
                let secret = self
                    .rules
                    .iter()
                    .any(|r| r.name.starts_with("secret:") && r.regex.is_match(&text));
                match self.mask_text(&text) {
                    Cow::Owned(masked) if secret => {
                        *value = Value::String(masked);
                        true
                    }
                    _ => false,
                }
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
}
