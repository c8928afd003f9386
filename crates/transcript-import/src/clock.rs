//! The recorder's clock during one import (issue #18).

use std::sync::Arc;

use transcript_domain::RunIdGenerator;

use transcript_domain::{Clock, Timestamp};

/// The recorder's clock during one import: the provider's times once the
/// capture gives them (issue #18), else the import's own clock, moved to the
/// run's start plus its reported duration when only that is known.
pub(super) struct ImportClock {
    inner: Arc<dyn Clock>,
    state: std::sync::Mutex<ClockState>,
}

#[derive(Default)]
struct ClockState {
    /// A fixed time every event gets until the next change.
    pinned: Option<Timestamp>,
    /// The first time handed out (the run's start).
    first: Option<Timestamp>,
    /// The last time handed out: never goes back.
    last: Option<Timestamp>,
}

impl ImportClock {
    pub(super) fn new(inner: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            state: std::sync::Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every event from now on gets `t` (a provider time).
    pub(super) fn pin(&self, t: Timestamp) {
        self.state().pinned = Some(t);
    }

    /// Every event from now on gets the run's start plus `ms`.
    pub(super) fn pin_after_start(&self, ms: u64) {
        let mut s = self.state();
        let start = s.first.unwrap_or_else(|| self.inner.now());
        s.pinned = Some(start.saturating_add_millis(i64::try_from(ms).unwrap_or(i64::MAX)));
    }
}

impl Clock for ImportClock {
    fn now(&self) -> Timestamp {
        let mut s = self.state();
        let mut t = s.pinned.unwrap_or_else(|| self.inner.now());
        if let Some(last) = s.last
            && t < last
        {
            t = last;
        }
        s.first.get_or_insert(t);
        s.last = Some(t);
        t
    }
}

/// The clock and run-id generator of an import: sequential ids and a manual clock stepping
/// 1 ms from 2026-05-28 when `deterministic` (goldens), else the system's.
pub fn clock_and_ids(deterministic: bool) -> (Arc<dyn Clock>, Arc<dyn RunIdGenerator>) {
    if deterministic {
        let start = transcript_domain::Timestamp::from_unix_millis(1_780_000_000_000)
            .unwrap_or(transcript_domain::Timestamp::UNIX_EPOCH);
        (
            Arc::new(transcript_domain::ManualClock::stepping(start, 1)),
            Arc::new(transcript_domain::SequentialRunIds::new()),
        )
    } else {
        (
            Arc::new(transcript_infra::SystemClock),
            Arc::new(transcript_infra::RandomRunIds),
        )
    }
}
