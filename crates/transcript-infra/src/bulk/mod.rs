//! Writing whole runs at once (`transcript import`): [`BulkWriter`] writes one run's
//! transcript from the calling thread through one buffer, byte-identical to the recorder's
//! file for the same drafts and clock, and [`DurableBatch`] makes many such files durable
//! together before anything may claim them imported (see `durable.rs` for the measurements
//! behind it).
//!
//! The live recorder ([`JsonlRecorder`](crate::JsonlRecorder)) serves runs that are watched
//! while they happen: a writer thread per run, an acknowledgement per event, fan-out. An
//! import has no watcher and no concurrent producer; through the recorder, importing a
//! store of 1,044 session files took 1,044 writer threads, one `write(2)` per event (54,597)
//! and one `fdatasync` per file in sequence (`cargo xtask bench-cli`, perf and strace).

mod durable;
mod writer;

pub use durable::{DurableBatch, replace_file_durably};
pub(crate) use writer::BulkSettings;
pub use writer::{BulkWriter, Synced, Unsynced};

#[cfg(test)]
mod tests;
