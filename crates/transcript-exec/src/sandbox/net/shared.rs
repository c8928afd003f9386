//! What the threads serving one bounded process's network share: the list, the refusal log,
//! and the connections open (shut down when the session ends).

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Destination, RefusedLog};

/// The most connections one bounded process has served at once (each costs the runner one or
/// two threads).
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// One connection being served; released when dropped.
#[derive(Debug)]
pub(crate) struct Slot(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the threads of one session share.
#[derive(Debug)]
pub(crate) struct Shared {
    allow: Arc<[Destination]>,
    refused: Arc<RefusedLog>,
    stopped: AtomicBool,
    /// Connections being served (each holds a [`Slot`]).
    active: Arc<std::sync::atomic::AtomicUsize>,
    next: AtomicU64,
    /// The open connections (both ends), shut down when the session ends.
    open: Mutex<HashMap<u64, TcpStream>>,
}

impl Shared {
    /// Whether `dest` is in the list.
    pub(crate) fn allows(&self, dest: &Destination) -> bool {
        self.allow.iter().any(|d| d == dest)
    }

    /// Records a refused destination.
    pub(crate) fn refuse(&self, dest: &Destination) {
        self.refused.add(dest);
    }

    /// What a new session's threads share.
    pub(crate) fn new(allow: Arc<[Destination]>, refused: Arc<RefusedLog>) -> Self {
        Self {
            allow,
            refused,
            stopped: AtomicBool::new(false),
            active: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more connection, or `None` past [`MAX_CONNECTIONS`].
    pub(crate) fn take_slot(&self) -> Option<Slot> {
        let before = self.active.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(Arc::clone(&self.active));
        (before < MAX_CONNECTIONS).then_some(slot)
    }

    /// The session is ending: no new relay starts.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the session is ending.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Shuts every open connection down (both ends), ending their relays.
    pub(crate) fn close_all(&self) {
        let open = std::mem::take(&mut *self.open.lock().unwrap_or_else(PoisonError::into_inner));
        for s in open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Relays `inside` ↔ `outside` until both end or the session does.
    pub(crate) fn relay(&self, inside: TcpStream, outside: TcpStream) {
        let ids = [self.track(&inside), self.track(&outside)];
        if !self.stopped() {
            super::relay::both_ways(inside, outside);
        }
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        for id in ids.into_iter().flatten() {
            open.remove(&id);
        }
    }

    fn track(&self, s: &TcpStream) -> Option<u64> {
        let clone = s.try_clone().ok()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, clone);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_run_out_at_the_cap_and_come_back_when_dropped() {
        let shared = Shared::new(Arc::from(Vec::new()), Arc::new(RefusedLog::default()));
        let held: Vec<Slot> = (0..MAX_CONNECTIONS)
            .map_while(|_| shared.take_slot())
            .collect();
        assert_eq!(held.len(), MAX_CONNECTIONS);
        assert!(shared.take_slot().is_none());
        drop(held);
        assert!(shared.take_slot().is_some());
    }
}
