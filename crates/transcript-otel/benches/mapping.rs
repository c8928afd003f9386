//! Placeholder, replaced by the mapping bench.
fn main() {}
