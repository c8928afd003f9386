//! Masks secrets in text read from stdin with the built-in rules and prints
//! the result and the number of masks made.
//!
//! Run: `echo 'Bearer abcdefghijklmnop' | cargo run -p transcript-redact --example mask_text`
//!
//! Keys are found as a reader sees them, e.g. highlighted by `grep --color`:
//! `echo sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2 | grep --color=always api03 | cargo run -p transcript-redact --example mask_text`
//! prints `sk-ant-…(N chars)`, the colour codes inside the key masked with it.

use std::io::Read;

use transcript_redact::Redactor;

fn main() -> std::io::Result<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let redactor = Redactor::builtin();
    print!("{}", redactor.mask_text(&text));
    eprintln!("{} masks", redactor.masks_made());
    Ok(())
}
