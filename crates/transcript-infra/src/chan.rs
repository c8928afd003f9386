//! Per-subscriber bounded buffers with coalesced wake-ups.
//!
//! A subscriber that keeps up is usually parked waiting for the next event;
//! waking its task for every single event costs the writer a cross-thread
//! wake-up (often a syscall) per event and subscriber, far more than the
//! copying. So the writer wakes a parked subscriber only when its buffer is a
//! quarter full; otherwise a per-recorder *linger* thread wakes it at most
//! [`LINGER`] later. Live delivery latency is therefore at most about 1 ms.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest a pushed event waits before a parked subscriber is woken.
pub(crate) const LINGER: Duration = Duration::from_millis(1);

struct State<T> {
    buf: VecDeque<T>,
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Chan<T> {
    state: Mutex<State<T>>,
    capacity: usize,
    watermark: usize,
}

impl<T> Chan<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes a parked receiver that has something to read.
    fn flush(&self) {
        let waker = {
            let mut s = self.lock();
            if s.buf.is_empty() {
                None
            } else {
                s.waker.take()
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// Why a push did not happen.
pub(crate) enum PushError {
    /// The buffer is full (the caller drops the event for this receiver).
    Full,
    /// The receiver is gone.
    Closed,
}

/// What a successful push left behind.
pub(crate) enum Pushed {
    /// The receiver is running, or was woken now.
    Signalled,
    /// The receiver is parked and was not woken: the linger thread must.
    Deferred,
}

pub(crate) struct Sender<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Sender<T> {
    pub(crate) fn try_send(&self, value: T) -> Result<Pushed, PushError> {
        let (waker, pushed) = {
            let mut s = self.chan.lock();
            if s.receiver_gone {
                return Err(PushError::Closed);
            }
            if s.buf.len() >= self.chan.capacity {
                return Err(PushError::Full);
            }
            s.buf.push_back(value);
            if s.waker.is_none() {
                (None, Pushed::Signalled)
            } else if s.buf.len() >= self.chan.watermark {
                (s.waker.take(), Pushed::Signalled)
            } else {
                (None, Pushed::Deferred)
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(pushed)
    }

    /// Whether a push would be accepted now (open and not full).
    pub(crate) fn has_room(&self) -> bool {
        let s = self.chan.lock();
        !s.receiver_gone && s.buf.len() < self.chan.capacity
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.chan.lock().receiver_gone
    }

    /// Wakes the receiver now if it is parked with values waiting.
    pub(crate) fn flush(&self) {
        self.chan.flush();
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut s = self.chan.lock();
            s.sender_gone = true;
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// `try_recv` outcome when nothing was received.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TryRecvError {
    Empty,
    Disconnected,
}

pub(crate) struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> Receiver<T> {
    pub(crate) fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let mut s = self.chan.lock();
        match s.buf.pop_front() {
            Some(v) => Ok(v),
            None if s.sender_gone => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// The next value; `None` once the sender is gone and the buffer empty.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| {
            let mut s = self.chan.lock();
            if let Some(v) = s.buf.pop_front() {
                return Poll::Ready(Some(v));
            }
            if s.sender_gone || s.receiver_gone {
                return Poll::Ready(None);
            }
            if !s.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                s.waker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    /// Stops receiving; buffered values are discarded.
    pub(crate) fn close(&mut self) {
        let mut s = self.chan.lock();
        s.receiver_gone = true;
        s.buf.clear();
        s.waker = None;
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.close();
    }
}

/// A bounded channel of `capacity` values (at least 1).
pub(crate) fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>, Weak<dyn Flush>)
where
    T: Send + 'static,
{
    let capacity = capacity.max(1);
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            buf: VecDeque::with_capacity(capacity.min(1024)),
            waker: None,
            sender_gone: false,
            receiver_gone: false,
        }),
        capacity,
        watermark: capacity.div_ceil(4),
    });
    let weak: Weak<dyn Flush> = Arc::downgrade(&chan) as Weak<dyn Flush>;
    (
        Sender {
            chan: Arc::clone(&chan),
        },
        Receiver { chan },
        weak,
    )
}

/// Type-erased flush for the linger thread.
pub(crate) trait Flush: Send + Sync {
    fn flush_parked(&self);
}

impl<T: Send> Flush for Chan<T> {
    fn flush_parked(&self) {
        self.flush();
    }
}

struct LingerShared {
    armed: AtomicBool,
    stop: Mutex<bool>,
    cv: Condvar,
    chans: Mutex<Vec<Weak<dyn Flush>>>,
}

/// The thread that wakes parked subscribers whose events were deferred.
pub(crate) struct Linger {
    shared: Arc<LingerShared>,
    thread: Option<JoinHandle<()>>,
}

impl Linger {
    pub(crate) fn start() -> Self {
        let shared = Arc::new(LingerShared {
            armed: AtomicBool::new(false),
            stop: Mutex::new(false),
            cv: Condvar::new(),
            chans: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("transcript-fanout".to_owned())
            .spawn(move || linger_loop(&s))
            .ok();
        if thread.is_none() {
            tracing::error!(
                "cannot start the fan-out linger thread; deferred wake-ups fall back to immediate"
            );
        }
        Self { shared, thread }
    }

    /// Whether the thread runs (if not, the writer must wake immediately).
    pub(crate) fn running(&self) -> bool {
        self.thread.is_some()
    }

    pub(crate) fn watch(&self, chan: Weak<dyn Flush>) {
        self.shared
            .chans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(chan);
    }

    /// Some parked subscriber has unsignalled events: wake it within LINGER.
    pub(crate) fn arm(&self) {
        if !self.shared.armed.swap(true, Ordering::SeqCst) {
            // Take the lock so the notification cannot slip between the
            // thread's check of `armed` and its wait.
            let _guard = self.shared.stop.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.cv.notify_one();
        }
    }
}

fn linger_loop(s: &LingerShared) {
    loop {
        {
            let mut stop = s.stop.lock().unwrap_or_else(|e| e.into_inner());
            while !*stop && !s.armed.load(Ordering::SeqCst) {
                stop = s.cv.wait(stop).unwrap_or_else(|e| e.into_inner());
            }
            if *stop {
                return;
            }
            // Let more events accumulate (this is the coalescing).
            let (stop, _) =
                s.cv.wait_timeout_while(stop, LINGER, |stop| !*stop)
                    .unwrap_or_else(|e| e.into_inner());
            if *stop {
                return;
            }
        }
        // Disarm before flushing: a push after this re-arms.
        s.armed.store(false, Ordering::SeqCst);
        let chans: Vec<Arc<dyn Flush>> = {
            let mut list = s.chans.lock().unwrap_or_else(|e| e.into_inner());
            list.retain(|w| w.strong_count() > 0);
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for c in chans {
            c.flush_parked();
        }
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        *self.shared.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parked_receiver_gets_a_deferred_value_through_the_linger_thread() {
        let linger = Linger::start();
        let (tx, mut rx, flush) = channel::<u32>(8);
        linger.watch(flush);
        let reader = tokio::spawn(async move { rx.recv().await });
        // Wait until the reader is parked (its waker registered).
        while tx.chan.lock().waker.is_none() {
            tokio::task::yield_now().await;
        }
        assert!(matches!(tx.try_send(7), Ok(Pushed::Deferred)));
        linger.arm();
        assert_eq!(reader.await.unwrap(), Some(7));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_watermark_wakes_without_the_linger_thread() {
        let (tx, mut rx, _flush) = channel::<u32>(8);
        let reader = tokio::spawn(async move {
            let first = rx.recv().await;
            (first, rx.try_recv(), rx)
        });
        while tx.chan.lock().waker.is_none() {
            tokio::task::yield_now().await;
        }
        assert!(matches!(tx.try_send(1), Ok(Pushed::Deferred)));
        // A quarter of 8 is 2: the second push wakes the reader.
        assert!(matches!(tx.try_send(2), Ok(Pushed::Signalled)));
        let (first, second, mut rx) = reader.await.unwrap();
        assert_eq!((first, second), (Some(1), Ok(2)));
        drop(tx);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(rx.recv().await, None);
    }

    #[test]
    fn full_and_closed_are_reported() {
        let (tx, mut rx, _flush) = channel::<u32>(1);
        assert!(matches!(tx.try_send(1), Ok(Pushed::Signalled)));
        assert!(matches!(tx.try_send(2), Err(PushError::Full)));
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        rx.close();
        assert!(tx.is_closed());
        assert!(matches!(tx.try_send(3), Err(PushError::Closed)));
    }
}
