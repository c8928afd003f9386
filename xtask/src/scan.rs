//! Token-level source scanner behind the purity rules of `arch-check`.
//!
//! Not a Rust parser: a small lexer that blanks comments and string/char literals (so that
//! documentation saying "no `std::fs` here" is not a violation), a tokenizer for identifiers
//! and `::`, an expansion of `use` trees (`use std::{fs, io::{self, stdin}}` yields
//! `std::fs`, `std::io`, `std::io::stdin`), and a matcher that looks for forbidden paths as
//! contiguous runs of path segments. Test-only code (`#[cfg(test)]` items, `#![cfg(test)]`
//! files and out-of-line `#[cfg(test)] mod tests;` files) is skipped: like dev-dependencies,
//! tests may reach for the filesystem.
//!
//! Renamed imports (`use std::time::SystemTime as T; T::now()`) escape this scanner; the
//! root `clippy.toml` `disallowed-methods` list, which resolves paths, is the second line of
//! defence for the clock and id calls.

/// A forbidden path: its segments (`"std::fs"`) and why it is forbidden.
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    /// Path segments joined with `::`, matched as a contiguous run of segments.
    pub path: &'static str,
    /// Short reason printed with a violation.
    pub why: &'static str,
}

/// One occurrence of a forbidden pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// 1-based line number.
    pub line: usize,
    /// The pattern's path, as in [`Pattern::path`].
    pub pattern: &'static str,
    /// The pattern's reason.
    pub why: &'static str,
    /// The offending source line, trimmed.
    pub text: String,
}

/// What scanning one file found.
#[derive(Debug, Default, Clone)]
pub struct FileScan {
    /// Forbidden paths outside test-only code, in source order.
    pub hits: Vec<Hit>,
    /// Names of out-of-line modules declared as `#[cfg(test)] mod name;`.
    pub test_modules: Vec<String>,
}

/// Scans one source file for the given patterns.
pub fn scan(src: &str, patterns: &[Pattern]) -> FileScan {
    let mut code = blank_comments_and_strings(src.as_bytes());
    let toks = tokenize(&code);
    if is_test_only_file(&toks) {
        return FileScan::default();
    }
    let test_modules = blank_cfg_test_items(&mut code, &toks);
    let toks = tokenize(&code);
    let line_starts = line_starts(src.as_bytes());
    let lines: Vec<&str> = src.lines().collect();

    let mut found: Vec<(usize, &'static str, &'static str)> = Vec::new();
    let mut paths = use_paths(&toks);
    paths.extend(path_runs(&toks));
    for path in &paths {
        for p in patterns {
            if let Some(offset) = match_path(path, p.path) {
                let line = line_of(&line_starts, offset);
                if !found.iter().any(|&(l, pat, _)| l == line && pat == p.path) {
                    found.push((line, p.path, p.why));
                }
            }
        }
    }
    found.sort_by_key(|&(line, pat, _)| (line, pat));
    let hits = found
        .into_iter()
        .map(|(line, pattern, why)| Hit {
            line,
            pattern,
            why,
            text: lines
                .get(line - 1)
                .map(|l| l.trim().to_owned())
                .unwrap_or_default(),
        })
        .collect();
    FileScan { hits, test_modules }
}

/// A path segment and the byte offset where it starts.
type Segment = (String, usize);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Ident(String),
    PathSep,
    Punct(u8),
}

#[derive(Debug, Clone)]
struct Tok {
    kind: Kind,
    start: usize,
    end: usize,
}

impl Tok {
    fn is_punct(&self, c: u8) -> bool {
        self.kind == Kind::Punct(c)
    }
    fn is_ident(&self, s: &str) -> bool {
        matches!(&self.kind, Kind::Ident(i) if i == s)
    }
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn blank(out: &mut [u8], from: usize, to: usize) {
    let to = to.min(out.len());
    for b in out.iter_mut().take(to).skip(from) {
        if *b != b'\n' {
            *b = b' ';
        }
    }
}

/// Replaces comments and string/char literals by spaces, keeping byte offsets and newlines.
fn blank_comments_and_strings(src: &[u8]) -> Vec<u8> {
    let n = src.len();
    let mut out = src.to_vec();
    let at = |k: usize| src.get(k).copied().unwrap_or(0);
    let mut i = 0;
    while i < n {
        let c = src[i];
        if c == b'/' && at(i + 1) == b'/' {
            let end = src[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(n, |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && at(i + 1) == b'*' {
            let (mut depth, mut j) = (1usize, i + 2);
            while j < n && depth > 0 {
                if at(j) == b'/' && at(j + 1) == b'*' {
                    depth += 1;
                    j += 2;
                } else if at(j) == b'*' && at(j + 1) == b'/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if is_ident_start(c) {
            let mut j = i;
            while j < n && is_ident_char(src[j]) {
                j += 1;
            }
            let word = &src[i..j];
            let end = match (word, at(j)) {
                (b"r" | b"br" | b"cr", b'"' | b'#') => raw_string_end(src, j),
                (b"b" | b"c", b'"') => Some(string_end(src, j)),
                (b"b", b'\'') => char_literal_end(src, j),
                _ => None,
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i = j,
            }
        } else if c == b'"' {
            let end = string_end(src, i);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'\'' {
            match char_literal_end(src, i) {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1, // a lifetime or label
            }
        } else {
            i += 1;
        }
    }
    out
}

/// End (exclusive) of the `"..."` string starting at `i`.
fn string_end(src: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < src.len() {
        match src[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    src.len()
}

/// End of the raw string whose hashes/quote start at `j` (`#"..."#`, `"..."`).
fn raw_string_end(src: &[u8], j: usize) -> Option<usize> {
    let hashes = src[j..].iter().take_while(|&&b| b == b'#').count();
    if src.get(j + hashes) != Some(&b'"') {
        return None;
    }
    let mut k = j + hashes + 1;
    while k < src.len() {
        if src[k] == b'"'
            && src[k + 1..]
                .iter()
                .take(hashes)
                .filter(|&&b| b == b'#')
                .count()
                == hashes
        {
            return Some(k + 1 + hashes);
        }
        k += 1;
    }
    Some(src.len())
}

/// End of the char literal starting at the quote `i`, or `None` for a lifetime.
fn char_literal_end(src: &[u8], i: usize) -> Option<usize> {
    let first = *src.get(i + 1)?;
    if first == b'\\' {
        let mut j = i + 3;
        while j < src.len() && src[j] != b'\'' && src[j] != b'\n' {
            j += 1;
        }
        return (src.get(j) == Some(&b'\'')).then_some(j + 1);
    }
    let len = match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    (src.get(i + 1 + len) == Some(&b'\'') && first != b'\'').then_some(i + 2 + len)
}

fn tokenize(code: &[u8]) -> Vec<Tok> {
    let mut toks = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c.is_ascii_whitespace() || !c.is_ascii() {
            i += 1;
        } else if is_ident_start(c) {
            let start = i;
            while i < code.len() && is_ident_char(code[i]) {
                i += 1;
            }
            let word = String::from_utf8_lossy(&code[start..i]).into_owned();
            toks.push(Tok {
                kind: Kind::Ident(word),
                start,
                end: i,
            });
        } else if c.is_ascii_digit() {
            // numeric literal with suffix: never part of a path
            while i < code.len() && (is_ident_char(code[i]) || code[i] == b'.') {
                i += 1;
            }
        } else if c == b':' && code.get(i + 1) == Some(&b':') {
            toks.push(Tok {
                kind: Kind::PathSep,
                start: i,
                end: i + 2,
            });
            i += 2;
        } else {
            toks.push(Tok {
                kind: Kind::Punct(c),
                start: i,
                end: i + 1,
            });
            i += 1;
        }
    }
    toks
}

/// Whether the token stream starting at `i` is `cfg(test)` wrapped in `#[...]` (or `#![...]`
/// when `inner`). Returns the index after the closing `]`.
fn cfg_test_attr(toks: &[Tok], i: usize, inner: bool) -> Option<usize> {
    let mut k = i;
    let t = |k: usize| toks.get(k);
    if !t(k)?.is_punct(b'#') {
        return None;
    }
    k += 1;
    if inner {
        if !t(k)?.is_punct(b'!') {
            return None;
        }
        k += 1;
    }
    let ok = t(k)?.is_punct(b'[')
        && t(k + 1)?.is_ident("cfg")
        && t(k + 2)?.is_punct(b'(')
        && t(k + 3)?.is_ident("test")
        && t(k + 4)?.is_punct(b')')
        && t(k + 5)?.is_punct(b']');
    ok.then_some(k + 6)
}

fn is_test_only_file(toks: &[Tok]) -> bool {
    (0..toks.len()).any(|i| cfg_test_attr(toks, i, true).is_some())
}

/// Index of the token closing the group opened at `open` (`(`, `[` or `{`).
fn matching_close(toks: &[Tok], open: usize) -> usize {
    let (o, c) = match toks[open].kind {
        Kind::Punct(b'(') => (b'(', b')'),
        Kind::Punct(b'[') => (b'[', b']'),
        _ => (b'{', b'}'),
    };
    let mut depth = 0usize;
    for (k, t) in toks.iter().enumerate().skip(open) {
        if t.is_punct(o) {
            depth += 1;
        } else if t.is_punct(c) {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    toks.len() - 1
}

/// Blanks every item annotated `#[cfg(test)]`; returns the names of out-of-line test modules.
fn blank_cfg_test_items(code: &mut [u8], toks: &[Tok]) -> Vec<String> {
    let mut modules = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let Some(mut k) = cfg_test_attr(toks, i, false) else {
            i += 1;
            continue;
        };
        // further outer attributes on the same item
        while toks.get(k).is_some_and(|t| t.is_punct(b'#'))
            && toks.get(k + 1).is_some_and(|t| t.is_punct(b'['))
        {
            k = matching_close(toks, k + 1) + 1;
        }
        let item_start = k;
        let mut end = toks.len().saturating_sub(1);
        let mut j = k;
        while j < toks.len() {
            let t = &toks[j];
            if t.is_punct(b'(') || t.is_punct(b'[') {
                j = matching_close(toks, j) + 1;
                continue;
            }
            if t.is_punct(b';') {
                end = j;
                break;
            }
            if t.is_punct(b'{') {
                end = matching_close(toks, j);
                break;
            }
            j += 1;
        }
        // `mod name;` (optionally `pub`, `pub(crate)`): the module lives in another file
        let item: Vec<&Kind> = toks[item_start..=end.min(toks.len() - 1)]
            .iter()
            .map(|t| &t.kind)
            .collect();
        if let Some(pos) = item.iter().position(|k| **k == Kind::Ident("mod".into()))
            && let (Some(Kind::Ident(name)), Some(Kind::Punct(b';'))) =
                (item.get(pos + 1), item.get(pos + 2))
        {
            modules.push(name.clone());
        }
        blank(code, toks[i].start, toks[end].end);
        i = end + 1;
    }
    modules
}

/// Every path a `use` declaration imports, with the offsets of its segments.
fn use_paths(toks: &[Tok]) -> Vec<Vec<Segment>> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let after_sep = i > 0 && toks[i - 1].kind == Kind::PathSep;
        if t.is_ident("use") && !after_sep {
            use_tree(toks, i + 1, Vec::new(), &mut out);
        }
    }
    for path in &mut out {
        while path.last().is_some_and(|(s, _)| s == "self") {
            path.pop();
        }
    }
    out
}

/// Parses one use tree starting at `i`, pushing expanded paths; returns the next index.
fn use_tree(
    toks: &[Tok],
    mut i: usize,
    mut path: Vec<Segment>,
    out: &mut Vec<Vec<Segment>>,
) -> usize {
    if toks.get(i).is_some_and(|t| t.kind == Kind::PathSep) {
        i += 1;
    }
    loop {
        let Some(t) = toks.get(i) else {
            if !path.is_empty() {
                out.push(path);
            }
            return i;
        };
        match &t.kind {
            Kind::Ident(s) => {
                path.push((s.clone(), t.start));
                i += 1;
                if toks.get(i).is_some_and(|t| t.kind == Kind::PathSep) {
                    i += 1;
                    continue;
                }
                if toks.get(i).is_some_and(|t| t.is_ident("as")) {
                    i += 2;
                }
                out.push(path);
                return i;
            }
            Kind::Punct(b'{') => {
                i += 1;
                while let Some(t) = toks.get(i) {
                    if t.is_punct(b'}') {
                        return i + 1;
                    }
                    if t.is_punct(b',') {
                        i += 1;
                        continue;
                    }
                    let next = use_tree(toks, i, path.clone(), out);
                    i = if next > i { next } else { i + 1 };
                }
                return i;
            }
            Kind::Punct(b'*') => {
                out.push(path);
                return i + 1;
            }
            _ => {
                if !path.is_empty() {
                    out.push(path);
                }
                return i;
            }
        }
    }
}

/// Maximal `a::b::c` runs of identifiers in the token stream.
fn path_runs(toks: &[Tok]) -> Vec<Vec<Segment>> {
    let mut runs = Vec::new();
    let mut cur: Vec<Segment> = Vec::new();
    let mut expect_ident = true;
    for t in toks {
        match &t.kind {
            Kind::Ident(s) if expect_ident => {
                cur.push((s.clone(), t.start));
                expect_ident = false;
            }
            Kind::PathSep if !expect_ident || cur.is_empty() => expect_ident = true,
            _ => {
                if !cur.is_empty() {
                    runs.push(std::mem::take(&mut cur));
                }
                expect_ident = true;
                if let Kind::Ident(s) = &t.kind {
                    cur.push((s.clone(), t.start));
                    expect_ident = false;
                }
            }
        }
    }
    if !cur.is_empty() {
        runs.push(cur);
    }
    runs
}

/// Offset of the last matched segment when `pattern` is a contiguous run of `path`.
fn match_path(path: &[Segment], pattern: &str) -> Option<usize> {
    let pat: Vec<&str> = pattern.split("::").collect();
    if pat.len() > path.len() {
        return None;
    }
    (0..=path.len() - pat.len()).find_map(|s| {
        let hit = pat.iter().zip(&path[s..]).all(|(p, (seg, _))| p == seg);
        hit.then(|| path[s + pat.len() - 1].1)
    })
}

fn line_starts(src: &[u8]) -> Vec<usize> {
    std::iter::once(0)
        .chain(
            src.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect()
}

fn line_of(starts: &[usize], offset: usize) -> usize {
    starts.partition_point(|&s| s <= offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATS: &[Pattern] = &[
        Pattern {
            path: "std::fs",
            why: "fs",
        },
        Pattern {
            path: "std::io::stdin",
            why: "stdin",
        },
        Pattern {
            path: "io::stdout",
            why: "stdout",
        },
        Pattern {
            path: "tokio",
            why: "tokio",
        },
        Pattern {
            path: "SystemTime::now",
            why: "clock",
        },
        Pattern {
            path: "File::open",
            why: "fs",
        },
    ];

    fn hits(src: &str) -> Vec<(usize, &'static str)> {
        scan(src, PATS)
            .hits
            .iter()
            .map(|h| (h.line, h.pattern))
            .collect()
    }

    #[test]
    fn plain_paths_are_found_with_their_line() {
        let src = "fn a() {}\nfn b() { let _ = std::fs::read(\"x\"); }\nfn c() { SystemTime :: now(); }\n";
        assert_eq!(hits(src), vec![(2, "std::fs"), (3, "SystemTime::now")]);
    }

    #[test]
    fn grouped_and_nested_use_trees_are_expanded() {
        let src =
            "use std::{\n    collections::HashMap,\n    fs,\n    io::{self, stdin as input},\n};\n";
        assert_eq!(hits(src), vec![(3, "std::fs"), (4, "std::io::stdin")]);
    }

    #[test]
    fn imported_module_then_call_is_found() {
        let src = "use std::io;\nfn f() { io::stdout(); }\nuse std::fs::File;\nfn g() { File::open(\"p\"); }\n";
        assert_eq!(
            hits(src),
            vec![(2, "io::stdout"), (3, "std::fs"), (4, "File::open")]
        );
    }

    #[test]
    fn comments_strings_and_chars_are_ignored() {
        let src = r####"//! no std::fs here
/// nor tokio::spawn
/* block /* nested std::fs */ SystemTime::now */
fn f() -> (&'static str, char, &'static [u8]) {
    let _l: &'static str = "std::fs::read";
    let _r = r#"tokio "quoted" std::fs"#;
    let _b = b"std::fs";
    ('a', '\'', b"x");
    ("SystemTime::now", '"', br##"File::open"##)
}
"####;
        assert_eq!(hits(src), vec![]);
    }

    #[test]
    fn cfg_test_items_and_files_are_skipped() {
        let src = "fn prod() {}\n#[cfg(test)]\nmod tests {\n    use std::fs;\n    #[tokio::test]\n    async fn t() { fs::read(\"x\").unwrap(); }\n}\n#[cfg(test)]\n#[path = \"t.rs\"]\nmod more;\nfn after() { tokio::spawn(async {}); }\n";
        let s = scan(src, PATS);
        assert_eq!(
            s.hits
                .iter()
                .map(|h| (h.line, h.pattern))
                .collect::<Vec<_>>(),
            vec![(11, "tokio")]
        );
        assert_eq!(s.test_modules, vec!["more".to_owned()]);
        assert_eq!(hits("#![cfg(test)]\nuse std::fs;\n"), vec![]);
    }

    #[test]
    fn lifetimes_do_not_start_char_literals() {
        let src =
            "fn f<'a>(x: &'a str) -> &'a str { x }\nfn g() { std::fs::remove_file(\"'\"); }\n";
        assert_eq!(hits(src), vec![(2, "std::fs")]);
    }

    #[test]
    fn hit_carries_the_source_line() {
        let s = scan("\n   let t = SystemTime::now();\n", PATS);
        assert_eq!(s.hits[0].text, "let t = SystemTime::now();");
        assert_eq!(s.hits[0].why, "clock");
    }

    #[test]
    fn similar_names_do_not_match() {
        let src =
            "fn f() { my_std::fs_like(); tokio_like(); SystemTime::nowish(); Filed::open(); }\n";
        assert_eq!(hits(src), vec![]);
    }
}
