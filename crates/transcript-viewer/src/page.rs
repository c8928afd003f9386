//! The frame of every page: our bar (runs, search, receipts, diff), our CSS, and our one
//! script ([`SCRIPT`], inline, allowed by its hash); [`shell`] wraps a body of ours,
//! [`embed`] adapts a whole page another crate rendered (the export's run page, the diff
//! page) by taking out its own Content-Security-Policy `<meta>` (ours is a header; theirs
//! would forbid our script) and adding the bar and the script.

use std::fmt::Write as _;

use transcript_export::escape_html as esc;

/// The live script: reads `data-live` on `<body>`; writes with `textContent` only.
pub const SCRIPT: &str = include_str!("../assets/live.js");

/// The `<meta>` the export's and the diff's pages carry.
const THEIR_CSP: &str = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">";

const CSS: &str = r#"
.tv-bar { font: 14px/1.5 system-ui, sans-serif; display:flex; gap:16px; align-items:center; padding:8px 16px; background:#24292f; color:#fff; flex:0 0 100%; box-sizing:border-box; }
.tv-bar a { color:#fff; text-decoration:none; font-weight:600; }
.tv-bar form { margin-left:auto; }
.tv-live { flex:0 0 100%; padding:4px 16px; background:#fff8c5; font: 13px system-ui, sans-serif; box-sizing:border-box; }
.tv-live:empty { display:none; }
.tv-live.ended { background:#dafbe1; }
body.tv-embed { flex-wrap: wrap; }
main.tv { font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; padding: 12px 20px; color:#1d2125; }
table.tv { border-collapse: collapse; width: 100%; }
table.tv th, table.tv td { border-bottom: 1px solid #d0d7de; padding: 3px 8px; text-align:left; white-space:nowrap; }
table.tv td.num, table.tv th.num { text-align:right; }
.st-succeeded { color:#1a7f37; } .st-failed, .st-abandoned { color:#cf222e; } .st-running, .st-open { color:#9a6700; font-weight:600; }
.meta { color:#6a737d; font-size:12px; } .error { color:#cf222e; font-weight:600; }
form.filters { display:flex; gap:8px; flex-wrap:wrap; margin: 8px 0; }
.hit { margin: 10px 0; padding: 6px 10px; border:1px solid #d0d7de; border-radius:6px; }
.hit .snippet { white-space: pre-wrap; word-break: break-word; font-family: ui-monospace, monospace; font-size: 12px; }
mark { background:#fff8c5; }
.bar { background:#54aeff; height:10px; display:inline-block; }
"#;

/// What the live script does on a page.
pub enum Live {
    /// Nothing.
    None,
    /// The runs list: follow `/api/runs/live` from snapshot `version`; `insert`: new runs are
    /// added at the top (first page, newest first, no filter), else counted.
    List {
        /// The live snapshot the page was rendered from.
        version: u64,
        /// Whether new runs go at the top of this page.
        insert: bool,
    },
    /// A run that may grow: follow its events after `since`.
    Run {
        /// The run.
        id: String,
        /// The last seq the page shows.
        since: u64,
    },
}

impl Live {
    fn attributes(&self) -> String {
        match self {
            Live::None => String::new(),
            Live::List { version, insert } => format!(
                " data-live=\"list\" data-version=\"{version}\" data-insert=\"{}\"",
                u8::from(*insert)
            ),
            Live::Run { id, since } => format!(
                " data-live=\"run\" data-run=\"{}\" data-since=\"{since}\"",
                esc(id)
            ),
        }
    }
}

/// Our bar: the pages, and a search box.
fn bar() -> &'static str {
    "<header class=\"tv-bar\"><a href=\"/\">Runs</a><a href=\"/search\">Search</a>\
     <a href=\"/receipts\">Receipts</a><a href=\"/diff\">Diff</a>\
     <form action=\"/search\" method=\"get\"><input type=\"search\" name=\"q\" \
     placeholder=\"search messages, tools, outputs\" aria-label=\"Search\"></form></header>"
}

/// A page of ours: `title` (escaped here) and `body` (already HTML, values escaped by the
/// caller).
pub fn shell(title: &str, body: &str, live: &Live) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>body {{ margin:0; }}{CSS}</style>\n</head>\n\
         <body{}>\n{}\n<div class=\"tv-live\" id=\"tv-live\" role=\"status\"></div>\n\
         <main class=\"tv\">\n{body}\n</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        esc(title),
        live.attributes(),
        bar()
    )
}

/// Another crate's whole page with our frame: its CSP `<meta>` taken out, our CSS, bar, live
/// note (holding `note`, escaped here) and script added.
pub fn embed(page: &str, live: &Live, note: &str) -> String {
    let mut page = page.replacen(THEIR_CSP, "", 1);
    page = page.replacen("</head>", &format!("<style>{CSS}</style>\n</head>"), 1);
    let open = format!(
        "<body class=\"tv-embed\"{}>\n{}\n<div class=\"tv-live\" id=\"tv-live\" role=\"status\">{}</div>\n",
        live.attributes(),
        bar(),
        esc(note)
    );
    page = page.replacen("<body>\n", &open, 1);
    let close = format!("<script>{SCRIPT}</script>\n</body>");
    match page.rfind("</body>") {
        Some(at) => page.replace_range(at..at + "</body>".len(), &close),
        None => page.push_str(&close),
    }
    page
}

/// Whether `c` is shown as `\u{…}` rather than itself: a C0 control but tab and line ends,
/// DEL, a C1 control, or a bidi control that reorders the text around it.
fn hidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}' | '\u{c}' | '\u{e}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A whole page with every [`hidden`] character written as `\u{…}` text: our templates hold
/// none, so each one came from a recorded value (ANSI sequences, a right-to-left override that
/// would reorder what a person reads).
pub fn visible_controls(page: String) -> String {
    if !page.contains(hidden) {
        return page;
    }
    let mut out = String::with_capacity(page.len() + 64);
    for c in page.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_become_visible_text() {
        let page = visible_controls("a\u{1b}[2J\u{7}\u{202e}b\n\tc".to_owned());
        assert_eq!(page, "a\\u{1b}[2J\\u{7}\\u{202e}b\n\tc");
    }

    #[test]
    fn an_embedded_page_loses_its_csp_meta_and_gains_the_frame() {
        let page = format!(
            "<!DOCTYPE html><html><head>\n{THEIR_CSP}\n<style>x</style></head>\n<body>\n<p>hi</p>\n</body>\n</html>"
        );
        let out = embed(
            &page,
            &Live::Run {
                id: "r\"1".into(),
                since: 3,
            },
            "",
        );
        assert!(!out.contains("http-equiv"));
        assert!(out.contains("data-run=\"r&quot;1\" data-since=\"3\""));
        assert!(out.contains("<header class=\"tv-bar\">"));
        assert!(out.ends_with(&format!("<script>{SCRIPT}</script>\n</body>\n</html>")));
    }
}
