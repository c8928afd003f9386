//! Text renderings shared by every crate: lowercase hex of bytes and an error with its chain of
//! causes. One home each, so a digest or an error reads the same whichever crate prints it.

/// Lowercase hex of `bytes`, two digits per byte (`[0xab, 0x01]` → `"ab01"`): the form every
/// digest in a transcript, a marker or an export takes.
pub fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// `error` and its sources joined by `": "`, each cause once: a cause whose text the message
/// already holds is not repeated (`write failed: No space left on device (os error 28)`, not
/// `... (os error 28): No space left on device (os error 28)`).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let part = cause.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_hex_is_two_lowercase_digits_per_byte() {
        assert_eq!(lower_hex(&[]), "");
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        let all: Vec<u8> = (0..=255).collect();
        let expected: String = all.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower_hex(&all), expected);
    }

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn error_chain_joins_each_cause_once() {
        let leaf = Layer("connection refused", None);
        let mid = Layer("error sending request", Some(Box::new(leaf)));
        let top = Layer("export failed", Some(Box::new(mid)));
        assert_eq!(
            error_chain(&top),
            "export failed: error sending request: connection refused"
        );
        // A message that already quotes its cause does not repeat it.
        let quoted = Layer(
            "write failed: disk full",
            Some(Box::new(Layer("disk full", None))),
        );
        assert_eq!(error_chain(&quoted), "write failed: disk full");
        assert_eq!(error_chain(&Layer("alone", None)), "alone");
    }
}
