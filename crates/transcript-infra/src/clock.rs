//! Production implementations of the domain's clock and run-id ports.

use std::time::{SystemTime, UNIX_EPOCH};

use transcript_domain::{Clock, RunId, RunIdGenerator, Timestamp};

/// The system wall clock (UTC, millisecond precision).
///
/// A wall clock can step backwards; the recorder never lets timestamps go
/// backwards in file order (it keeps the later of the clock and the previous
/// event's timestamp), so this type does not have to.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // This is the one wall-clock adapter.
    fn now(&self) -> Timestamp {
        let ms = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX),
        };
        Timestamp::saturating_from_unix_millis(ms)
    }
}

/// Random version-4 run ids (decision 9: we generate v4).
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomRunIds;

impl RunIdGenerator for RandomRunIds {
    #[allow(clippy::disallowed_methods)] // This is the one random run-id adapter.
    fn next_run_id(&self) -> RunId {
        RunId::from_uuid(uuid::Uuid::new_v4())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)] // Compares the adapter with the real clock.
    fn system_clock_is_close_to_now() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let t = SystemClock.now().unix_millis();
        assert!(
            (t as i128 - before as i128).abs() < 60_000,
            "{t} vs {before}"
        );
    }

    #[test]
    fn random_run_ids_are_v4_and_distinct() {
        let a = RandomRunIds.next_run_id();
        let b = RandomRunIds.next_run_id();
        assert_ne!(a, b);
        assert_eq!(a.as_uuid().get_version_num(), 4);
        assert_eq!(RunId::parse(&a.to_string()).ok(), Some(a));
    }
}
