//! Run identifiers and sequence numbers (decision 9).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// Per-file sequence number of an event: strictly increasing from 1, no gaps.
pub type Seq = u64;

/// The identifier of one workflow run, and so of one transcript file.
///
/// Parses only from the 36-character hyphenated UUID form (any version, either
/// case) and always prints lowercase, so one run has exactly one file name
/// (`<run_id>.jsonl`). Because the accepted alphabet is `[0-9a-fA-F-]`, a
/// `RunId` can never carry a path separator, `..` or a NUL byte into a file
/// name: this type is the guard between untrusted input and the filesystem.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(Uuid);

/// A string that is not a 36-character hyphenated UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run id {value:?}: expected a 36-character hyphenated UUID")]
pub struct InvalidRunId {
    /// The rejected text (truncated to 64 characters).
    pub value: String,
}

impl RunId {
    /// Wraps a UUID.
    pub const fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    /// Builds a run id from 16 raw bytes (used by id generators).
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(Uuid::from_bytes(bytes))
    }

    /// The underlying UUID.
    pub const fn as_uuid(&self) -> &Uuid {
        &self.0
    }

    /// Parses the 36-character hyphenated form only.
    pub fn parse(text: &str) -> Result<Self, InvalidRunId> {
        let invalid = || InvalidRunId {
            value: text.chars().take(64).collect(),
        };
        if text.len() != 36 {
            return Err(invalid());
        }
        let bytes = text.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            let ok = match i {
                8 | 13 | 18 | 23 => *b == b'-',
                _ => b.is_ascii_hexdigit(),
            };
            if !ok {
                return Err(invalid());
            }
        }
        Uuid::try_parse(text).map(Self).map_err(|_| invalid())
    }

    /// The file name of this run's transcript: `<run_id>.jsonl`.
    pub fn file_name(&self) -> String {
        format!("{self}.jsonl")
    }

    /// Writes the lowercase hyphenated form into `out` without allocating.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let mut buf = [0u8; 36];
        out.extend_from_slice(self.0.hyphenated().encode_lower(&mut buf).as_bytes());
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl fmt::Debug for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RunId({})", self.0.hyphenated())
    }
}

impl FromStr for RunId {
    type Err = InvalidRunId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for RunId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 36];
        serializer.serialize_str(self.0.hyphenated().encode_lower(&mut buf))
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        RunId::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hyphenated_any_case_and_prints_lowercase() {
        let id = RunId::parse("550E8400-E29B-41D4-A716-446655440000").unwrap();
        assert_eq!(id.to_string(), "550e8400-e29b-41d4-a716-446655440000");
        assert_eq!(id.file_name(), "550e8400-e29b-41d4-a716-446655440000.jsonl");
        let v7 = RunId::parse("01890a5d-ac96-774b-bcce-b302099a8057").unwrap();
        assert_eq!(v7.to_string(), "01890a5d-ac96-774b-bcce-b302099a8057");
    }

    #[test]
    fn rejects_other_forms() {
        for bad in [
            "",
            "550e8400e29b41d4a716446655440000",
            "{550e8400-e29b-41d4-a716-446655440000}",
            "urn:uuid:550e8400-e29b-41d4-a716-446655440000",
            "../../../../etc/passwd-aaaaaaaaaaaaaaaaaaaa",
            "550e8400-e29b-41d4-a716-44665544000g",
            "550e8400-e29b-41d4-a716_446655440000",
            "run-abc",
        ] {
            assert!(RunId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn write_to_matches_display() {
        let id = RunId::parse("550e8400-e29b-41d4-a716-446655440000").unwrap();
        let mut out = Vec::new();
        id.write_to(&mut out);
        assert_eq!(out, id.to_string().as_bytes());
    }
}
