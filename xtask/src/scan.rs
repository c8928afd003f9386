//! The purity scan behind `arch-check`: forbidden paths in a pure crate's non-test code.
//!
//! Sources are parsed with `syn` (see [`crate::syntax`]), so comments and string literals are
//! never mistaken for code, test-only items are skipped, and a path is matched by what it
//! resolves to through the file's imports: `use std::time::SystemTime as T; T::now()` is
//! `std::time::SystemTime::now`, and `use std::io; io::stdout()` is `std::io::stdout`. A
//! forbidden pattern matches a contiguous run of segments of the resolved path. The root
//! `clippy.toml` `disallowed-methods` list, which resolves paths through the compiler, stays
//! the second line of defence for the clock and id calls.

use crate::syntax::FileFacts;

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

/// Scans one source file for the given patterns; a file that does not parse is an error.
pub fn scan(src: &str, patterns: &[Pattern]) -> Result<FileScan, syn::Error> {
    let Some(facts) = FileFacts::of(src)? else {
        return Ok(FileScan::default());
    };
    let lines: Vec<&str> = src.lines().collect();
    let mut found: Vec<(usize, &'static str, &'static str)> = Vec::new();
    for path in facts.resolved_paths() {
        for p in patterns {
            if matches(&path.segments, p.path)
                && !found
                    .iter()
                    .any(|&(l, pat, _)| l == path.line && pat == p.path)
            {
                found.push((path.line, p.path, p.why));
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
                .get(line.saturating_sub(1))
                .map(|l| l.trim().to_owned())
                .unwrap_or_default(),
        })
        .collect();
    Ok(FileScan {
        hits,
        test_modules: facts.test_modules,
    })
}

/// True when `pattern`'s segments appear as a contiguous run in `path`.
fn matches(path: &[String], pattern: &str) -> bool {
    let want: Vec<&str> = pattern.split("::").collect();
    path.windows(want.len())
        .any(|w| w.iter().zip(&want).all(|(a, b)| a == b))
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
            .unwrap()
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
            vec![
                (2, "io::stdout"),
                (3, "std::fs"),
                (4, "File::open"),
                (4, "std::fs")
            ]
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
        let s = scan(src, PATS).unwrap();
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
        let s = scan("\nfn f() {\n   let t = SystemTime::now();\n}\n", PATS).unwrap();
        assert_eq!(s.hits[0].text, "let t = SystemTime::now();");
        assert_eq!(s.hits[0].why, "clock");
    }

    #[test]
    fn similar_names_do_not_match() {
        let src =
            "fn f() { my_std::fs_like(); tokio_like(); SystemTime::nowish(); Filed::open(); }\n";
        assert_eq!(hits(src), vec![]);
    }

    #[test]
    fn renamed_imports_do_not_slip_past() {
        let src = "use std::time::SystemTime as Wall;\nuse std::fs as disk;\nfn f() { Wall::now(); disk::read(\"x\"); }\n";
        assert_eq!(
            hits(src),
            vec![(2, "std::fs"), (3, "SystemTime::now"), (3, "std::fs")]
        );
    }

    #[test]
    fn a_file_that_does_not_parse_is_an_error() {
        assert!(scan("fn f( {", PATS).is_err());
    }
}
