//! The mask format: short prefix, short suffix, length.

/// Characters kept at each end of a masked value.
const KEEP: usize = 4;
/// Values up to this many characters keep nothing but their length.
const SHORT: usize = 12;

/// Masks a whole value: `sk-a…wxyz (51 chars)`, or `…(8 chars)` when short.
pub fn mask_value(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    let n = chars.len();
    if n <= SHORT {
        return format!("…({n} chars)");
    }
    let head: String = chars[..KEEP].iter().collect();
    let tail: String = chars[n - KEEP..].iter().collect();
    format!("{head}…{tail} ({n} chars)")
}

/// Masks a value, keeping a literal prefix visible (e.g. `Bearer `).
pub fn mask_with(prefix: &str, value: &str) -> String {
    format!("{prefix}{}", mask_value(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_prefix_suffix_and_length() {
        let key = format!("sk-a{}wxyz", "b".repeat(43));
        assert_eq!(mask_value(&key), "sk-a…wxyz (51 chars)");
        assert_eq!(mask_value("hunter22"), "…(8 chars)");
        assert_eq!(mask_value("ééééééééééééé"), "éééé…éééé (13 chars)");
        assert_eq!(
            mask_with("Bearer ", "abcdefghijklmnop"),
            "Bearer abcd…mnop (16 chars)"
        );
    }
}
