//! Event timestamps (decision 3): written as UTC with exactly three
//! fractional digits and `Z`; read from any RFC 3339 form.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A point in time with millisecond precision, UTC.
///
/// Stored as milliseconds since the Unix epoch, restricted to years
/// 0000..=9999 so that it always prints as a valid RFC 3339 timestamp.
/// Finer precision in a foreign timestamp is truncated on read.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    unix_ms: i64,
}

/// A timestamp that is not RFC 3339 or lies outside years 0000..=9999.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid timestamp {value:?}: {reason}")]
pub struct InvalidTimestamp {
    /// The rejected text (truncated to 64 characters).
    pub value: String,
    /// Why it was rejected.
    pub reason: String,
}

const MIN_MS: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00.000Z
const MAX_MS: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z

impl Timestamp {
    /// The Unix epoch, `1970-01-01T00:00:00.000Z`.
    pub const UNIX_EPOCH: Timestamp = Timestamp { unix_ms: 0 };
    /// The earliest representable instant, `0000-01-01T00:00:00.000Z`.
    pub const MIN: Timestamp = Timestamp { unix_ms: MIN_MS };
    /// The latest representable instant, `9999-12-31T23:59:59.999Z`.
    pub const MAX: Timestamp = Timestamp { unix_ms: MAX_MS };

    /// From milliseconds since the Unix epoch; `None` outside years 0000..=9999.
    pub const fn from_unix_millis(unix_ms: i64) -> Option<Self> {
        if unix_ms < MIN_MS || unix_ms > MAX_MS {
            None
        } else {
            Some(Self { unix_ms })
        }
    }

    /// Like [`Timestamp::from_unix_millis`] but clamps into range.
    pub const fn saturating_from_unix_millis(unix_ms: i64) -> Self {
        if unix_ms < MIN_MS {
            Self::MIN
        } else if unix_ms > MAX_MS {
            Self::MAX
        } else {
            Self { unix_ms }
        }
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_millis(self) -> i64 {
        self.unix_ms
    }

    /// From a `time` value (truncated to milliseconds, converted to UTC).
    pub fn from_offset_date_time(value: OffsetDateTime) -> Option<Self> {
        let ms = value.unix_timestamp_nanos().div_euclid(1_000_000);
        i64::try_from(ms).ok().and_then(Self::from_unix_millis)
    }

    /// As a `time` value in UTC.
    pub fn to_offset_date_time(self) -> OffsetDateTime {
        // In range by construction, so this cannot fail; fall back to the epoch
        // rather than panic.
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.unix_ms) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH)
    }

    /// Milliseconds from `earlier` to `self` (negative if `earlier` is later).
    pub const fn millis_since(self, earlier: Timestamp) -> i64 {
        self.unix_ms - earlier.unix_ms
    }

    /// This instant plus `ms` milliseconds, clamped into range.
    pub const fn saturating_add_millis(self, ms: i64) -> Timestamp {
        Self::saturating_from_unix_millis(self.unix_ms.saturating_add(ms))
    }

    /// Parses any RFC 3339 timestamp (any offset, any fractional precision).
    pub fn parse(text: &str) -> Result<Self, InvalidTimestamp> {
        let invalid = |reason: String| InvalidTimestamp {
            value: text.chars().take(64).collect(),
            reason,
        };
        let parsed = OffsetDateTime::parse(text, &Rfc3339).map_err(|e| invalid(e.to_string()))?;
        Self::from_offset_date_time(parsed)
            .ok_or_else(|| invalid("outside years 0000..=9999".to_owned()))
    }

    /// Appends the canonical form `YYYY-MM-DDTHH:MM:SS.mmmZ` (24 bytes).
    pub fn write_to(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.canonical_bytes());
    }

    /// The canonical form as fixed-size bytes (no allocation). The calendar arithmetic is the
    /// `time` crate's; only the fixed-width digits are written here.
    pub fn canonical_bytes(self) -> [u8; 24] {
        let dt = self.to_offset_date_time();
        let mut b = *b"0000-00-00T00:00:00.000Z";
        put_digits(&mut b[0..4], i64::from(dt.year()));
        put_digits(&mut b[5..7], i64::from(u8::from(dt.month())));
        put_digits(&mut b[8..10], i64::from(dt.day()));
        put_digits(&mut b[11..13], i64::from(dt.hour()));
        put_digits(&mut b[14..16], i64::from(dt.minute()));
        put_digits(&mut b[17..19], i64::from(dt.second()));
        put_digits(&mut b[20..23], i64::from(dt.millisecond()));
        b
    }
}

fn put_digits(slot: &mut [u8], mut value: i64) {
    for byte in slot.iter_mut().rev() {
        *byte = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.canonical_bytes();
        // The canonical form is ASCII by construction.
        f.write_str(std::str::from_utf8(&bytes).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_has_three_digits_and_z() {
        let t = Timestamp::parse("2026-06-08T08:14:42.1Z").unwrap();
        assert_eq!(t.to_string(), "2026-06-08T08:14:42.100Z");
        let t = Timestamp::parse("2026-06-08T10:14:42.123456789+02:00").unwrap();
        assert_eq!(t.to_string(), "2026-06-08T08:14:42.123Z");
        let t = Timestamp::parse("2026-06-08T08:14:42Z").unwrap();
        assert_eq!(t.to_string(), "2026-06-08T08:14:42.000Z");
    }

    #[test]
    fn extremes_and_pre_epoch_format_correctly() {
        assert_eq!(Timestamp::MIN.to_string(), "0000-01-01T00:00:00.000Z");
        assert_eq!(Timestamp::MAX.to_string(), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            Timestamp::from_unix_millis(-1).unwrap().to_string(),
            "1969-12-31T23:59:59.999Z"
        );
        assert_eq!(Timestamp::from_unix_millis(MAX_MS + 1), None);
        assert_eq!(
            Timestamp::from_unix_millis(951_782_400_000)
                .unwrap()
                .to_string(),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn agrees_with_time_crate_across_range() {
        let mut ms = MIN_MS;
        while ms < MAX_MS {
            let ours = Timestamp::from_unix_millis(ms).unwrap();
            let theirs = ours.to_offset_date_time().format(&Rfc3339).unwrap();
            assert_eq!(Timestamp::parse(&theirs).unwrap(), ours);
            assert_eq!(Timestamp::parse(&ours.to_string()).unwrap(), ours);
            ms += 7_777_777_777_777 / 13;
        }
    }

    #[test]
    fn rejects_non_rfc3339() {
        for bad in ["", "yesterday", "2026-06-08", "2026-13-01T00:00:00Z"] {
            assert!(Timestamp::parse(bad).is_err(), "{bad}");
        }
    }
}
