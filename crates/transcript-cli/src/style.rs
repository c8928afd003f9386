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

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
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

/// Makes transcript content safe to print on a terminal: control characters
/// (ANSI escapes included) other than newline and tab are shown as `\u{..}`,
/// so a recorded value cannot move the cursor or recolor the screen.
pub fn clean(text: &str) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
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
