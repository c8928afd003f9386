//! Escaping recorded values for the Markdown export.
//!
//! Every value in a transcript (workflow and step names, provider, model,
//! tool names, errors, prompts, answers) may come from someone other than
//! the workflow author, so none of it may become Markdown or HTML syntax.
//! Three forms, each safe in the context it is used in:
//!
//! * [`text`]: one line of prose. `<`, `>` and `&` become entities
//!   (`pulldown-cmark-escape`), so no raw HTML, autolink or entity can form;
//!   the characters that open inline constructs (emphasis, code, links,
//!   tables, strikethrough, math, heading attributes) are backslash-escaped
//!   (CommonMark §2.4: any ASCII punctuation may be); line endings become
//!   spaces, since a line ending would let the next line start a block.
//!   Bare URLs and e-mail addresses do not become links under GFM's
//!   autolink extension (what GitHub renders): the characters it triggers
//!   on are backslash-escaped (`@`, a `:` right after letters, the `.` of
//!   `www.`), which ends each candidate without changing the rendered text
//!   (`tests/autolink.rs` renders the output with comrak, autolinks on).
//! * [`paragraphs`]: multi-line prose (prompts, answers, thinking). Each
//!   line as [`text`], plus what only matters at a line start (list,
//!   heading, setext and definition markers, indentation that would open
//!   an indented code block); lines are joined with hard breaks so the
//!   line structure shows.
//! * [`code_span`]: identifiers (paths, ids, names) as inline code, with a
//!   backtick delimiter longer than any backtick run inside, so content
//!   cannot close it; code-span content is literal in every renderer.
//!
//! Fenced blocks (tool inputs and outputs) are written by the Markdown
//! renderer with the same longer-than-any-run rule.

use std::fmt::Write as _;

/// Characters escaped with a backslash wherever they appear: each can open
/// an inline construct in CommonMark or in a common extension (GFM tables
/// and strikethrough, math, super/subscript, heading attributes,
/// footnotes, wikilinks). `!` needs no escape: an image needs the `[`
/// that follows it, which is escaped.
///
/// `@` is GFM's e-mail autolink trigger (`bob@evil.example`,
/// `mailto:…`, `xmpp:…`): escaped, no address becomes a link.
const INLINE_SPECIAL: &[char] = &[
    '\\', '`', '*', '_', '[', ']', '{', '}', '|', '~', '^', '$', '@',
];

/// Characters that only start a block at the beginning of a line (ATX
/// heading, bullet list, setext underline, thematic break, definition).
const LINE_START_SPECIAL: &[char] = &['#', '-', '+', '=', ':'];

/// One line of prose, safe inline after some text of ours on the same line
/// (line-start markers are left alone: they cannot start a block there).
pub fn text(value: &str) -> String {
    let one_line: String = value
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    line(&one_line, false)
}

/// Multi-line prose as paragraphs: blank lines separate paragraphs, other
/// line endings become hard breaks; nothing in it can start a block.
pub fn paragraphs(value: &str) -> String {
    let normalized = value.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = normalized.split('\n').collect();
    let blank = |l: &str| l.trim().is_empty();
    let mut out = String::with_capacity(value.len() + value.len() / 8);
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if blank(l) {
            continue;
        }
        out.push_str(&line(l, true));
        // A hard break only between two lines of one paragraph: at the end
        // of a paragraph a trailing backslash would show literally.
        if lines.get(i + 1).is_some_and(|next| !blank(next)) {
            out.push('\\');
        }
    }
    out
}

/// Inline code with a delimiter no content can close.
pub fn code_span(value: &str) -> String {
    let content: String = value
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if content.is_empty() {
        // "``" would be a literal pair of backticks, not an empty span.
        return "` `".to_owned();
    }
    let delimiter = "`".repeat(longest_backtick_run(&content) + 1);
    // CommonMark strips one space on each side when both are present, so
    // padding keeps content that starts or ends with a backtick (which
    // would merge with the delimiter) or a space intact.
    let pad = content.starts_with(['`', ' ']) || content.ends_with(['`', ' ']);
    let sp = if pad { " " } else { "" };
    format!("{delimiter}{sp}{content}{sp}{delimiter}")
}

/// Length of the longest run of backticks in `s`.
pub fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// One line (no line endings): inline specials and HTML-significant
/// characters escaped, and with `line_start` what could start a block.
fn line(l: &str, line_start: bool) -> String {
    let mut out = String::with_capacity(l.len() + 8);
    let rest = if line_start {
        l.trim_start_matches([' ', '\t'])
    } else {
        l
    };
    let indent = &l[..l.len() - rest.len()];
    // An entity for the first indentation character: the line then starts
    // with `&`, so its indentation is zero and no indented code block (or
    // list continuation) can open; the rendered text keeps the whitespace.
    let mut indent_chars = indent.chars();
    if let Some(first) = indent_chars.next() {
        let _ = write!(out, "&#{};", u32::from(first));
        out.extend(indent_chars);
    }
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let chars: Vec<char> = rest.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let starts_block = line_start
            && ((i == 0 && LINE_START_SPECIAL.contains(&c))
            // `1.` / `1)` ordered-list markers (at most 9 digits).
            || (i == digits && (1..=9).contains(&digits) && (c == '.' || c == ')')));
        match c {
            '<' | '>' | '&' => {
                let mut buf = [0u8; 4];
                // Writing to a String cannot fail.
                let _ =
                    pulldown_cmark_escape::escape_html_body_text(&mut out, c.encode_utf8(&mut buf));
            }
            // `snake_case`: one `_` between alphanumerics can neither open
            // nor close emphasis (CommonMark §6.2 flanking rules), so
            // identifiers stay readable.
            '_' if !starts_block && intraword(&chars, i) => out.push(c),
            // GFM's URL autolink triggers on a `:` right after letters (the
            // scheme: `http://`, `ftp://`, any with relaxed autolinks) and
            // its www autolink on `www.`: an escaped `:` or `.` there ends
            // the candidate. Other `:` (times, ratios) stay as they are.
            ':' if i > 0 && chars[i - 1].is_ascii_alphabetic() => out.push_str("\\:"),
            '.' if after_www(&chars, i) => out.push_str("\\."),
            c if starts_block || INLINE_SPECIAL.contains(&c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether `chars[i]` follows `www` (any case).
fn after_www(chars: &[char], i: usize) -> bool {
    i >= 3 && chars[i - 3..i].iter().all(|c| c.eq_ignore_ascii_case(&'w'))
}

/// Whether `chars[i]` sits between two alphanumerics.
fn intraword(chars: &[char], i: usize) -> bool {
    let alnum = |j: Option<usize>| {
        j.and_then(|j| chars.get(j))
            .is_some_and(|c| c.is_alphanumeric())
    };
    alnum(i.checked_sub(1)) && alnum(Some(i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_span_outlasts_content_backticks() {
        assert_eq!(code_span("a`b"), "``a`b``");
        assert_eq!(code_span("`x"), "`` `x ``");
        assert_eq!(code_span("a\nb"), "`a b`");
        assert_eq!(code_span(""), "` `");
    }

    #[test]
    fn text_escapes_html_and_inline_openers() {
        assert_eq!(text("<b>&x"), "&lt;b&gt;&amp;x");
        assert_eq!(text("*a* [l](u)"), "\\*a\\* \\[l\\](u)");
        assert_eq!(text("<h\nb"), "&lt;h b");
        assert_eq!(text("1. one"), "1. one");
        assert_eq!(text("for_each _x_ a__b"), "for_each \\_x\\_ a\\_\\_b");
        assert_eq!(text("well-known 2026-05-28"), "well-known 2026-05-28");
    }

    #[test]
    fn text_escapes_autolink_triggers_only() {
        assert_eq!(text("https://x.y"), "https\\://x.y");
        assert_eq!(text("a@b.c"), "a\\@b.c");
        assert_eq!(text("WWW.x.y www"), "WWW\\.x.y www");
        assert_eq!(text("10:00 1:2 :x"), "10:00 1:2 :x");
    }

    #[test]
    fn paragraphs_keep_lines_and_block_nothing() {
        assert_eq!(paragraphs("a\nb\n\nc"), "a\\\nb\n\nc");
        assert_eq!(paragraphs("    code"), "&#32;   code");
        assert_eq!(paragraphs("- item\n2) x"), "\\- item\\\n2\\) x");
    }
}
