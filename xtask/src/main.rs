//! Developer tooling for the transcript workspace.
#![forbid(unsafe_code)]

fn main() {
    eprintln!("usage: cargo xtask <arch-check|schema|bench|stress|fuzz>");
    std::process::exit(2);
}
