//! A secret cut by a bound (a command's output kept up to its cap, then the truncation
//! marker) is masked in its kept part too (#56 item 3): the whole-value rule no longer
//! matches there, so the start of a secret right before a truncation marker is masked.
#![allow(clippy::unwrap_used)]

use transcript_redact::Redactor;

const SECRET: &str = "Zq7-secret-value-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTU";

#[test]
fn the_kept_start_of_a_cut_secret_is_masked() {
    assert_eq!(SECRET.len(), 76);
    let r = Redactor::empty().with_secret("token", SECRET).unwrap();
    for keep in [4, 8, 20, 60, 75] {
        let text = format!(
            "lots of output {}…[truncated: 2000000 bytes, sha256 {}]",
            &SECRET[..keep],
            "0".repeat(64)
        );
        let masked = r.mask_text(&text);
        for w in 0..=keep.saturating_sub(4) {
            let part = &SECRET[w..w + 4.min(keep)];
            assert!(
                !masked.contains(part) || part.len() < 4,
                "keep {keep}: {part:?} left in {masked}"
            );
        }
        assert!(masked.contains("…[truncated: 2000000 bytes"), "{masked}");
        assert!(masked.starts_with("lots of output "), "{masked}");
    }
    // Three characters are no secret's start; text without a marker is left alone.
    let short = format!("x {}…[truncated: 9 bytes]", &SECRET[..3]);
    assert_eq!(r.mask_text(&short), short);
    let unmarked = format!("x {}", &SECRET[..20]);
    assert_eq!(r.mask_text(&unmarked), unmarked);
}
