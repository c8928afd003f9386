//! Panics of user code (tools, agents, custom steps) turned into values:
//! [`CatchUnwind`] polls a future inside `catch_unwind`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Polls a future inside `catch_unwind`, turning a panic into `Err(message)`.
pub(crate) struct CatchUnwind<'a, T> {
    inner: Pin<Box<dyn Future<Output = T> + Send + 'a>>,
}

impl<'a, T> CatchUnwind<'a, T> {
    pub(crate) fn new(fut: impl Future<Output = T> + Send + 'a) -> Self {
        Self {
            inner: Box::pin(fut),
        }
    }
}

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.inner;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
