//! The short polling that saves a record the cost of a thread wake-up, and
//! the process-wide cap that keeps many busy recorders from burning the
//! CPUs on it.
//!
//! A producer awaiting its answer, and the writer thread awaiting the next
//! record, poll for at most [`SPIN`] before they suspend or block. That
//! pays off only while a CPU is free to run the other side: with 200
//! recorders busy at once on 2 CPUs, 200 writer threads polling took the
//! CPUs from the threads with work (flat out: 34 µs of CPU per event
//! against 10 µs without polling, `cargo bench -p transcript-infra --bench
//! recorder`, `scale` group). So polling takes one of as many
//! [`PollSlot`]s as there are CPUs; whoever finds none suspends or blocks
//! at once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// How long the writer thread, and a producer awaiting its answer (yielding
/// between polls), poll for what they wait for before they block or
/// suspend. A blocked thread's wake-up is the whole cost of a record on a
/// virtual machine: a bare round trip between two threads measured 28 µs
/// blocking and 0.46 µs polling on this project's 2-vCPU machines. Twenty
/// microseconds cover a record's round trip many times over and cost
/// nothing when idle (once per batch, then the thread blocks).
const SPIN: Duration = Duration::from_micros(20);

fn parallelism() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// [`SPIN`], or nothing on a single CPU, where the awaited thread cannot
/// run while we poll.
pub(super) fn poll_budget() -> Duration {
    if parallelism() > 1 {
        SPIN
    } else {
        Duration::ZERO
    }
}

/// Threads (writers and producers) polling right now, process-wide.
static POLLING: AtomicUsize = AtomicUsize::new(0);

/// The right to poll, held while polling: at most one per CPU at a time.
pub(super) struct PollSlot(());

impl PollSlot {
    /// A free slot, if any.
    pub(super) fn take() -> Option<Self> {
        if POLLING.fetch_add(1, Ordering::Relaxed) < parallelism() {
            Some(Self(()))
        } else {
            POLLING.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }
}

impl Drop for PollSlot {
    fn drop(&mut self) {
        POLLING.fetch_sub(1, Ordering::Relaxed);
    }
}
