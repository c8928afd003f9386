//! Recorder benchmark (placeholder created by the lead so the workspace manifest parses; the infra helper replaces it).

fn main() {}
