//! Decoded views of a text: what a reader sees once terminal escape
//! sequences are interpreted, and once `%XX` escapes are decoded, each with a
//! map back to the bytes it came from.
//!
//! Rules match on every view as well as on the text itself, and a match in a
//! view is masked over the source bytes it covers, escapes included: a key
//! split by colour codes (`sk-ant-\e[01;31m\e[Kapi03…\e[m…`, as
//! `grep --color` prints it) is masked whole, and a fully URL-encoded key
//! (`%73%6B%2D…`) is masked in its encoded form.
//!
//! Neither grammar is ours: escape sequences are recognised by
//! `anstyle-parse`'s VT500 state machine (the parser behind `anstream`'s
//! stripping, used the way `anstream::adapter::strip_str` uses it, byte by
//! byte so that positions are known), and `%XX` escapes by
//! `percent-encoding`.

use std::ops::Range;

use anstyle_parse::state::{Action, State, state_change};

/// How many nested levels of `%XX` encoding are decoded (`%2573` is `%73`
/// once, `s` twice).
const PERCENT_LEVELS: usize = 3;

/// A run of view bytes mapped to source bytes: view byte `view + i` comes
/// from source bytes `src + i * stride .. src + (i + 1) * stride` (stride 1:
/// copied; 3: a `%XX` escape).
#[derive(Debug, Clone, Copy)]
struct Seg {
    view: usize,
    src: usize,
    stride: usize,
}

/// One decoded view of a source text.
#[derive(Debug)]
pub(crate) struct View {
    /// The decoded text.
    pub(crate) text: String,
    /// Sorted by `view`; the first starts at 0 (when `text` is not empty).
    segs: Vec<Seg>,
}

impl View {
    fn new(capacity: usize) -> Self {
        Self {
            text: String::with_capacity(capacity),
            segs: Vec::new(),
        }
    }

    /// Records that the view's next `len` bytes come from `src` with
    /// `stride` (merged with the previous run when it continues it).
    fn map_next(&mut self, view: usize, src: usize, stride: usize) {
        if let Some(last) = self.segs.last()
            && last.stride == stride
            && last.src + (view - last.view) * stride == src
        {
            return;
        }
        self.segs.push(Seg { view, src, stride });
    }

    fn seg(&self, pos: usize) -> Seg {
        let i = self.segs.partition_point(|s| s.view <= pos);
        self.segs.get(i.saturating_sub(1)).copied().unwrap_or(Seg {
            view: 0,
            src: 0,
            stride: 1,
        })
    }

    /// The source bytes that view bytes `r` (not empty) come from, escapes
    /// between them included.
    fn source(&self, r: &Range<usize>) -> Range<usize> {
        let first = self.seg(r.start);
        let last_byte = r.end - 1;
        let last = self.seg(last_byte);
        let start = first.src + (r.start - first.view) * first.stride;
        let end = last.src + (last_byte - last.view + 1) * last.stride;
        start..end
    }
}

/// The views of `text` worth matching, each decoding the previous one
/// further (escape sequences removed, then up to [`PERCENT_LEVELS`] levels
/// of `%XX` decoded); empty when `text` holds neither.
pub(crate) fn views(text: &str) -> Vec<View> {
    let mut chain: Vec<View> = Vec::new();
    if let Some(v) = without_escapes(text) {
        chain.push(v);
    }
    for _ in 0..PERCENT_LEVELS {
        let current = chain.last().map_or(text, |v| v.text.as_str());
        match percent_decoded(current) {
            Some(v) => chain.push(v),
            None => break,
        }
    }
    chain
}

/// Where view bytes `r` of `chain[last]` come from in the source text.
pub(crate) fn to_source(chain: &[View], r: Range<usize>) -> Range<usize> {
    chain
        .iter()
        .rev()
        .fold(r, |r, view| if r.is_empty() { r } else { view.source(&r) })
}

/// What `anstream` keeps of a byte: printable text, the start of a UTF-8
/// character, or blank space (`\t`, `\n`, `\r`, form feed); DEL is not kept.
fn printable(action: Action, byte: u8) -> bool {
    (action == Action::Print && byte != 0x7f)
        || action == Action::BeginUtf8
        || (action == Action::Execute && byte.is_ascii_whitespace())
}

/// `text` as a terminal shows it: escape sequences (CSI, OSC, DCS…) and
/// other control characters removed; `None` when it holds none.
fn without_escapes(text: &str) -> Option<View> {
    let bytes = text.as_bytes();
    let control = |b: &u8| (*b < 0x20 && !b.is_ascii_whitespace()) || *b == 0x7f;
    if !bytes.iter().any(control) {
        return None;
    }
    let mut view = View::new(text.len());
    let mut state = State::Ground;
    let mut pos = 0;
    while pos < bytes.len() {
        // Skip what is not printable, following the escape's state.
        let skip = bytes[pos..].iter().position(|&b| {
            let (next, action) = state_change(state, b);
            if next != State::Anywhere {
                state = next;
            }
            printable(action, b)
        });
        let Some(skip) = skip else { break };
        pos += skip;
        state = State::Ground;
        // Take the printable run (UTF-8 continuations included).
        let run = bytes[pos..]
            .iter()
            .position(|&b| {
                let (_, action) = state_change(State::Ground, b);
                !(printable(action, b) || (0x80..=0xbf).contains(&b))
            })
            .unwrap_or(bytes.len() - pos);
        let mut end = pos + run.max(1);
        while !text.is_char_boundary(end) {
            end += 1;
        }
        if text.is_char_boundary(pos) {
            view.map_next(view.text.len(), pos, 1);
            view.text.push_str(&text[pos..end]);
        }
        pos = end;
    }
    Some(view)
}

/// `text` with its `%XX` escapes decoded; `None` when it holds none. Escapes
/// whose bytes would not form UTF-8 are decoded only when they are ASCII.
fn percent_decoded(text: &str) -> Option<View> {
    if !text.contains('%') {
        return None;
    }
    let view = decode_escapes(text, false).or_else(|| decode_escapes(text, true))?;
    (view.text != text).then_some(view)
}

fn decode_escapes(text: &str, ascii_only: bool) -> Option<View> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut view = View::new(0);
    let mut pos = 0;
    while pos < bytes.len() {
        let escape = bytes.get(pos..pos + 3).filter(|e| e[0] == b'%');
        let decoded = escape.and_then(|e| {
            let mut it = percent_encoding::percent_decode(e);
            match (it.next(), it.next()) {
                (Some(b), None) if !ascii_only || b.is_ascii() => Some(b),
                _ => None,
            }
        });
        match decoded {
            Some(b) => {
                view.map_next(out.len(), pos, 3);
                out.push(b);
                pos += 3;
            }
            None => {
                view.map_next(out.len(), pos, 1);
                out.push(bytes[pos]);
                pos += 1;
            }
        }
    }
    view.text = String::from_utf8(out).ok()?;
    Some(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_of<'a>(text: &'a str, chain: &[View], needle: &str) -> &'a str {
        let view = &chain[chain.len() - 1].text;
        let at = view
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in {view:?}"));
        &text[to_source(chain, at..at + needle.len())]
    }

    #[test]
    fn colour_codes_are_removed_and_a_match_covers_the_codes_inside_it() {
        let text = "x sk-ant-\x1b[01;31m\x1b[Kapi03\x1b[m\x1b[Kabc\ny";
        let chain = views(text);
        assert_eq!(chain.len(), 1);
        assert_eq!(chain[0].text, "x sk-ant-api03abc\ny");
        assert_eq!(source_of(text, &chain, "api03abc"), "api03\x1b[m\x1b[Kabc");
        assert_eq!(source_of(text, &chain, "sk-ant-"), "sk-ant-");
    }

    #[test]
    fn osc_hyperlinks_and_other_controls_are_removed() {
        let text = "\x1b]8;;https://x\x1b\\li\x07nk\x1b]8;;\x1b\\ é\x00!";
        let chain = views(text);
        assert_eq!(chain[0].text, "link é!");
        assert_eq!(source_of(text, &chain, "é!"), "é\x00!");
    }

    #[test]
    fn percent_escapes_are_decoded_in_levels() {
        let text = "k=%73%6B%2D%2541%C3%A9%zz%";
        let chain = views(text);
        assert_eq!(chain.len(), 2);
        assert_eq!(chain[0].text, "k=sk-%41é%zz%");
        assert_eq!(chain[1].text, "k=sk-Aé%zz%");
        assert_eq!(source_of(text, &chain, "sk-A"), "%73%6B%2D%2541");
        assert_eq!(source_of(text, &chain, "é"), "%C3%A9");
    }

    #[test]
    fn escapes_that_are_not_utf8_are_decoded_only_when_ascii() {
        let chain = views("%FF%41");
        assert_eq!(chain[0].text, "%FFA");
    }

    #[test]
    fn plain_text_has_no_view() {
        assert!(views("plain text\twith\nblanks").is_empty());
    }
}
