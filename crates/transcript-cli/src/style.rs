//! Terminal styling: ANSI colors only on a terminal, never with `NO_COLOR`.

use std::io::IsTerminal;

/// When to color output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// Color when the stream is a terminal and `NO_COLOR` is unset.
    Auto,
    /// Always color.
    Always,
    /// Never color.
    Never,
}

/// Applies (or not) ANSI styles.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Decides for stdout.
    pub fn for_stdout(choice: ColorChoice) -> Self {
        Self::decide(choice, std::io::stdout().is_terminal())
    }

    /// Decides for stderr.
    pub fn for_stderr(choice: ColorChoice) -> Self {
        Self::decide(choice, std::io::stderr().is_terminal())
    }

    fn decide(choice: ColorChoice, terminal: bool) -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && !no_color,
        };
        Self { color }
    }

    /// Plain output.
    pub const fn plain() -> Self {
        Self { color: false }
    }

    /// Styles `text`, escaping unsafe characters in it first: painted text is often recorded
    /// content, and only the escapes added here may reach the terminal.
    fn paint(&self, code: &str, text: &str) -> String {
        let text = clean(text);
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text
        }
    }

    /// Dimmed (thinking, metadata).
    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    /// Bold (headings).
    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    /// Red (errors).
    pub fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
    /// Green (success).
    pub fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }
    /// Yellow (warnings, tools).
    pub fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }
    /// Cyan (prompts).
    pub fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }
}

/// Whether `c` could change what a terminal shows beyond printing itself: C0/C1 controls
/// (ESC starts ANSI sequences that retitle windows, recolor or move the cursor) and the Unicode
/// bidirectional overrides and isolates (which reorder what is shown, "Trojan Source").
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// Makes transcript content safe to print on a terminal: unsafe characters (see `is_unsafe`)
/// other than newline and tab are shown as `\u{..}`, so a recorded value cannot move the
/// cursor, recolor the screen or reorder text.
pub fn clean(text: &str) -> String {
    escape(text, |c| c == '\n' || c == '\t')
}

/// Like [`clean`], for one-line outputs (`tail`, live progress): newlines and tabs are escaped
/// too, so a value cannot forge a line of its own.
pub fn one_line(text: &str) -> String {
    escape(text, |_| false)
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> String {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
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
    fn clean_escapes_terminal_controls_only() {
        assert_eq!(
            clean("a\u{1b}[31mred\u{0}\n\tb"),
            "a\\u{1b}[31mred\\u{0}\n\tb"
        );
        assert_eq!(clean("plain ünïcode"), "plain ünïcode");
        assert_eq!(clean("a\u{202e}b\u{9b}"), "a\\u{202e}b\\u{9b}");
        assert_eq!(one_line("a\nb\tc\rd"), "a\\nb\\tc\\rd");
    }

    #[test]
    fn never_and_always_override_detection() {
        assert_eq!(Style::decide(ColorChoice::Never, true).dim("x"), "x");
        assert_eq!(
            Style::decide(ColorChoice::Always, false).dim("x"),
            "\u{1b}[2mx\u{1b}[0m"
        );
        assert_eq!(Style::plain().red("x"), "x");
    }
}
