//! [`NatsSubscription`]: a recorder's events read back from the stream by an ordered consumer
//! (replay from a seq, then live; a consumer lost to a server restart is made again, as for
//! [`RunFollower`]), ending once the recorder is closed and its last event was delivered.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{mpsc, watch};
use transcript_domain::{ExchangeEvent, Seq, Subscription, decode_line};

use crate::{NatsError, NatsStore, RunFollower};

/// Events delivered ahead of the subscriber (the reader waits when it is full: nothing dropped).
const BUFFER: usize = 256;

/// A subscription to one run's subject (see the module docs). Never drops events: a slow
/// subscriber slows its own reader only, never the recorder (the stream holds the events).
#[derive(Debug)]
pub struct NatsSubscription {
    rx: mpsc::Receiver<Arc<ExchangeEvent>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl NatsSubscription {
    /// Starts reading `subject` at stream sequence `stream_start`, delivering events from
    /// `first` on, until `closed` names the last seq and it was delivered.
    pub(crate) async fn start(
        store: &NatsStore,
        subject: &str,
        stream_start: u64,
        first: Seq,
        mut closed: watch::Receiver<Option<Seq>>,
    ) -> Result<Self, NatsError> {
        let mut lines = RunFollower::start(store, subject.to_owned(), stream_start).await?;
        let (tx, rx) = mpsc::channel(BUFFER);
        let task = tokio::spawn(async move {
            let mut delivered = first - 1;
            loop {
                let end = *closed.borrow_and_update();
                if end.is_some_and(|end| delivered >= end) {
                    break;
                }
                tokio::select! {
                    line = lines.next_line() => {
                        let Some(Ok(line)) = line else { break };
                        let Ok(decoded) = decode_line(&line) else { break };
                        let Ok(event) = decoded.event.to_event() else { break };
                        if event.seq < first {
                            continue;
                        }
                        delivered = event.seq;
                        if tx.send(Arc::new(event)).await.is_err() {
                            break;
                        }
                    }
                    changed = closed.changed(), if end.is_none() => {
                        // The recorder is gone without a close: nothing more will come.
                        if changed.is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(Self {
            rx,
            task: Some(task),
        })
    }
}

#[async_trait]
impl Subscription for NatsSubscription {
    async fn next(&mut self) -> Option<Arc<ExchangeEvent>> {
        self.rx.recv().await
    }

    fn close(&mut self) {
        self.rx.close();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    fn dropped(&self) -> u64 {
        0
    }
}

impl Drop for NatsSubscription {
    fn drop(&mut self) {
        self.close();
    }
}
