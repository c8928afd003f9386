//! `cargo xtask schema`: the checked-in JSON Schema of the wire format.
//!
//! `schema/exchange-event.schema.json` is generated from the Rust types
//! (`transcript_domain::schema::exchange_event_schema`, behind the domain's `schema`
//! feature) and checked in so that non-Rust consumers can validate transcripts. The file is
//! pretty-printed JSON with a trailing newline; `--check` (and the `checked_in_schema_is_fresh`
//! test) fail when the file differs from a fresh generation, so the schema cannot drift from
//! the types.

use std::path::{Path, PathBuf};

/// Path of the schema file, relative to the workspace root.
pub const SCHEMA_FILE: &str = "schema/exchange-event.schema.json";

/// Why the schema could not be written or checked.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// Serializing the generated schema failed.
    #[error("cannot serialize the generated schema: {0}")]
    Serialize(#[from] serde_json::Error),
    /// Reading or writing the schema file failed.
    #[error("{path}: {source}")]
    Io {
        /// The schema file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Result of comparing the checked-in file with a fresh generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freshness {
    /// Byte-identical.
    Fresh,
    /// No checked-in file.
    Missing,
    /// The first differing line (1-based) and both versions of it.
    Differs {
        /// 1-based line number.
        line: usize,
        /// The line a fresh generation has (empty past its end).
        generated: String,
        /// The line the checked-in file has (empty past its end).
        checked_in: String,
    },
}

/// The generated schema as a JSON value.
pub fn generate() -> serde_json::Value {
    transcript_domain::schema::exchange_event_schema()
}

/// The schema file's exact content: pretty JSON plus a trailing newline.
pub fn render() -> Result<String, SchemaError> {
    let mut text = serde_json::to_string_pretty(&generate())?;
    text.push('\n');
    Ok(text)
}

/// Compares a checked-in text with a freshly generated one.
pub fn compare(generated: &str, checked_in: &str) -> Freshness {
    if generated == checked_in {
        return Freshness::Fresh;
    }
    let (mut g, mut c) = (generated.split('\n'), checked_in.split('\n'));
    let mut line = 1;
    loop {
        match (g.next(), c.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (a, b) => {
                return Freshness::Differs {
                    line,
                    generated: a.unwrap_or_default().to_owned(),
                    checked_in: b.unwrap_or_default().to_owned(),
                };
            }
        }
    }
}

/// Writes the schema file under `root`; returns its path.
pub fn write(root: &Path) -> Result<PathBuf, SchemaError> {
    let path = root.join(SCHEMA_FILE);
    let io = |source| SchemaError::Io {
        path: path.clone(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(&path, render()?).map_err(io)?;
    Ok(path)
}

/// Compares the schema file under `root` with a fresh generation.
pub fn check(root: &Path) -> Result<Freshness, SchemaError> {
    let path = root.join(SCHEMA_FILE);
    let generated = render()?;
    match std::fs::read_to_string(&path) {
        Ok(checked_in) => Ok(compare(&generated, &checked_in)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Freshness::Missing),
        Err(source) => Err(SchemaError::Io { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_names_the_first_differing_line() {
        assert_eq!(compare("a\nb\n", "a\nb\n"), Freshness::Fresh);
        assert_eq!(
            compare("a\nb\nc\n", "a\nB\nc\n"),
            Freshness::Differs {
                line: 2,
                generated: "b".into(),
                checked_in: "B".into()
            }
        );
        assert_eq!(
            compare("a\n", "a"),
            Freshness::Differs {
                line: 2,
                generated: String::new(),
                checked_in: String::new()
            }
        );
    }
}
