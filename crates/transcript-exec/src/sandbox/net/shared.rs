//! What the threads serving one bounded process's network share: the list, the refusal log,
//! and the connections open (shut down when the session ends).

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{Destination, RefusedLog};

/// What the threads of one session share.
#[derive(Debug)]
pub(crate) struct Shared {
    allow: Arc<[Destination]>,
    refused: Arc<RefusedLog>,
    stopped: AtomicBool,
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
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        }
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
