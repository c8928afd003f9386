//! Shell quoting for the string form of `command:` (and `run_command`
//! inputs): every value a template interpolates is quoted for the place
//! it lands in, so data never becomes shell syntax.
//!
//! A small POSIX `sh` lexer walks the template's literal text and tracks
//! where each `{{…}}` lands: unquoted (the value becomes one `'…'` word, left
//! bare when it only has characters `sh` never interprets), inside `'…'`
//! (each `'` becomes `'\''`) or inside `"…"` (`\ $ ` " ` get a backslash).
//! The quoted value leaves the lexer state as it found it, so each
//! reference's context depends on the literal text alone and is known
//! before the run. Places where no quoting is safe (inside `` `…` ``,
//! `${…}`, a comment, after `<<`, right after `\` or `$`) are refused at
//! validation; the author can switch to the list form of `command:` (no
//! shell at all) or opt out with `| raw`.
//!
//! Quoting protects one level of shell. A command that hands its
//! arguments to another interpreter (`sh -c '…{{x}}…'`, `eval`, `ssh`,
//! `python -c`) re-reads the data as code: pass such values as list-form
//! arguments, files or environment instead.

/// Where a reference lands in a shell command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellContext {
    /// Between words (also inside `$(…)`).
    Unquoted,
    /// Inside `'…'`.
    SingleQuoted,
    /// Inside `"…"`.
    DoubleQuoted,
    /// Nowhere quoting is safe; the reason.
    Unsafe(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    Top,
    /// `$(` … `)`
    Subst,
    /// `(` … `)` inside a substitution or subshell.
    Paren,
    Single,
    Double,
    Backtick,
    /// `${` … `}`
    Brace,
    Comment,
}

/// Tracks the quoting state of a command's literal text.
#[derive(Debug, Clone)]
pub struct ShellLexer {
    stack: Vec<Frame>,
    /// The last literal character was an unconsumed `\`.
    escape: bool,
    /// The last literal character (word-start detection, `$` before a value).
    prev: Option<char>,
    /// A `<<` was seen: what follows may be a here-document body.
    heredoc: bool,
    /// The unquoted word being read (to spot `case`).
    word: String,
    /// A `case` inside `$(…)` or `(…)`: its unbalanced `)` patterns make
    /// the nesting unknowable for this lexer, so nothing after is quoted.
    lost: bool,
}

impl Default for ShellLexer {
    fn default() -> Self {
        Self {
            stack: vec![Frame::Top],
            escape: false,
            prev: None,
            heredoc: false,
            word: String::new(),
            lost: false,
        }
    }
}

impl ShellLexer {
    fn top(&self) -> Frame {
        self.stack.last().copied().unwrap_or(Frame::Top)
    }

    fn pop(&mut self) {
        if self.stack.len() > 1 {
            self.stack.pop();
        }
    }

    /// Consumes literal text.
    pub fn feed(&mut self, text: &str) {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if self.escape {
                self.escape = false;
                // A line continuation or an escaped character: no state change.
                self.prev = Some('a');
                continue;
            }
            let next = chars.peek().copied();
            let frame = self.top();
            if matches!(frame, Frame::Subst | Frame::Paren) {
                if c.is_alphanumeric() || c == '_' {
                    self.word.push(c);
                } else {
                    if self.word == "case" {
                        self.lost = true;
                    }
                    self.word.clear();
                }
            } else {
                self.word.clear();
            }
            match frame {
                Frame::Top | Frame::Subst | Frame::Paren => match c {
                    '\\' => self.escape = true,
                    '\'' => self.stack.push(Frame::Single),
                    '"' => self.stack.push(Frame::Double),
                    '`' => self.stack.push(Frame::Backtick),
                    '$' if next == Some('(') => {
                        chars.next();
                        self.stack.push(Frame::Subst);
                    }
                    '$' if next == Some('{') => {
                        chars.next();
                        self.stack.push(Frame::Brace);
                    }
                    '(' => self.stack.push(Frame::Paren),
                    ')' => {
                        if matches!(self.top(), Frame::Subst | Frame::Paren) {
                            self.pop();
                        }
                    }
                    '<' if next == Some('<') => {
                        chars.next();
                        self.heredoc = true;
                    }
                    '#' if self.prev.is_none_or(|p| {
                        p.is_whitespace() || matches!(p, ';' | '&' | '|' | '(' | ')' | '<' | '>')
                    }) =>
                    {
                        self.stack.push(Frame::Comment)
                    }
                    _ => {}
                },
                Frame::Single => {
                    if c == '\'' {
                        self.pop();
                    }
                }
                Frame::Double => match c {
                    '\\' => self.escape = true,
                    '"' => self.pop(),
                    '`' => self.stack.push(Frame::Backtick),
                    '$' if next == Some('(') => {
                        chars.next();
                        self.stack.push(Frame::Subst);
                    }
                    '$' if next == Some('{') => {
                        chars.next();
                        self.stack.push(Frame::Brace);
                    }
                    _ => {}
                },
                Frame::Backtick => match c {
                    '\\' => self.escape = true,
                    '`' => self.pop(),
                    _ => {}
                },
                Frame::Brace => {
                    if c == '}' {
                        self.pop();
                    }
                }
                Frame::Comment => {
                    if c == '\n' {
                        self.pop();
                    }
                }
            }
            self.prev = Some(c);
        }
    }

    /// Where a value interpolated now would land.
    pub fn context(&self) -> ShellContext {
        if self.escape {
            return ShellContext::Unsafe("right after a backslash");
        }
        let frame = self.top();
        if self.prev == Some('$') && matches!(frame, Frame::Top | Frame::Subst | Frame::Paren) {
            return ShellContext::Unsafe("right after '$'");
        }
        if self.prev == Some('$') && frame == Frame::Double {
            return ShellContext::Unsafe("right after '$'");
        }
        if self.lost {
            return ShellContext::Unsafe(
                "after a 'case' inside (…) (its ')' patterns hide the nesting)",
            );
        }
        if self.heredoc && frame != Frame::Single {
            return ShellContext::Unsafe("after '<<' (a here-document expands its body)");
        }
        match frame {
            Frame::Top | Frame::Subst | Frame::Paren => ShellContext::Unquoted,
            Frame::Single => ShellContext::SingleQuoted,
            Frame::Double => ShellContext::DoubleQuoted,
            Frame::Backtick => ShellContext::Unsafe("inside `…` (use $(…))"),
            Frame::Brace => ShellContext::Unsafe("inside ${…}"),
            Frame::Comment => ShellContext::Unsafe("inside a comment"),
        }
    }

    /// Records that a value was interpolated (it reads as a word character).
    pub fn value(&mut self) {
        self.prev = Some('a');
    }
}

/// Quotes `value` for `context` so the shell reads it as literal text.
/// `None` for [`ShellContext::Unsafe`].
pub fn quote(value: &str, context: ShellContext) -> Option<String> {
    match context {
        ShellContext::Unquoted => {
            let bare = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.,/:@%+".contains(c));
            // `=` is left out: a bare `A=b` first word is an assignment.
            Some(if bare {
                value.to_owned()
            } else {
                format!("'{}'", value.replace('\'', r"'\''"))
            })
        }
        ShellContext::SingleQuoted => Some(value.replace('\'', r"'\''")),
        ShellContext::DoubleQuoted => {
            let mut out = String::with_capacity(value.len());
            for c in value.chars() {
                if matches!(c, '\\' | '$' | '`' | '"') {
                    out.push('\\');
                }
                out.push(c);
            }
            Some(out)
        }
        ShellContext::Unsafe(_) => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ctx(before: &str) -> ShellContext {
        let mut l = ShellLexer::default();
        l.feed(before);
        l.context()
    }

    #[test]
    fn contexts() {
        assert_eq!(ctx("echo "), ShellContext::Unquoted);
        assert_eq!(ctx("echo 'hello "), ShellContext::SingleQuoted);
        assert_eq!(ctx("echo \"it's "), ShellContext::DoubleQuoted);
        assert_eq!(ctx("echo 'a' \"b\" "), ShellContext::Unquoted);
        assert_eq!(ctx("echo \"$(cat "), ShellContext::Unquoted);
        assert_eq!(ctx("echo $(( "), ShellContext::Unquoted);
        assert_eq!(ctx("echo $(date) \"x"), ShellContext::DoubleQuoted);
        assert_eq!(ctx("echo \\'"), ShellContext::Unquoted);
        assert!(matches!(ctx("echo `"), ShellContext::Unsafe(_)));
        assert!(matches!(ctx("echo ${x:-"), ShellContext::Unsafe(_)));
        assert!(matches!(ctx("echo hi # it's "), ShellContext::Unsafe(_)));
        assert_eq!(ctx("echo hi # it's\necho "), ShellContext::Unquoted);
        assert_eq!(ctx("echo a#"), ShellContext::Unquoted);
        assert!(matches!(ctx("cat <<EOF\n"), ShellContext::Unsafe(_)));
        assert!(matches!(ctx("echo \\"), ShellContext::Unsafe(_)));
        assert!(matches!(ctx("echo $"), ShellContext::Unsafe(_)));
        assert!(matches!(ctx("echo \"$"), ShellContext::Unsafe(_)));
        assert!(matches!(
            ctx("echo \"$(case a in a) echo "),
            ShellContext::Unsafe(_)
        ));
        assert_eq!(ctx("echo \"$(cased "), ShellContext::Unquoted);
        assert_eq!(ctx("case a in a) echo "), ShellContext::Unquoted);
    }

    #[test]
    fn quoting() {
        let u = ShellContext::Unquoted;
        assert_eq!(quote("world", u).unwrap(), "world");
        assert_eq!(quote("", u).unwrap(), "''");
        assert_eq!(quote("A=b", u).unwrap(), "'A=b'");
        assert_eq!(quote("x'; y", u).unwrap(), r"'x'\''; y'");
        assert_eq!(quote("x'y", ShellContext::SingleQuoted).unwrap(), r"x'\''y");
        assert_eq!(
            quote("$(a) `b` \"c\" \\", ShellContext::DoubleQuoted).unwrap(),
            r#"\$(a) \`b\` \"c\" \\"#
        );
        assert!(quote("x", ShellContext::Unsafe("why")).is_none());
    }
}
