//! Reading runs back from the stream: a run's stored lines, following a run live, and the runs
//! the stream holds.

use std::time::Duration;

use async_nats::jetstream::consumer::{DeliverPolicy, pull};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use bytes::Bytes;
use futures_util::StreamExt;
use transcript_domain::RunId;

use crate::store::{SUBJECT_PREFIX, run_subject};
use crate::{NatsError, NatsStore};

/// An ordered consumer's messages on `subject` from stream sequence `start`. Creating it is
/// retried (a server restarting, a leader being elected) until `ack_timeout × publish_attempts`
/// has passed.
pub(crate) async fn ordered_messages(
    store: &NatsStore,
    subject: &str,
    start: u64,
) -> Result<pull::Ordered, NatsError> {
    let deliver_policy = if start <= 1 {
        DeliverPolicy::All
    } else {
        DeliverPolicy::ByStartSequence {
            start_sequence: start,
        }
    };
    let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(50);
    loop {
        let attempt = async {
            store
                .stream
                .create_consumer(pull::OrderedConfig {
                    filter_subject: subject.to_owned(),
                    deliver_policy,
                    ..Default::default()
                })
                .await
                .map_err(|e| e.to_string())?
                .messages()
                .await
                .map_err(|e| e.to_string())
        };
        match attempt.await {
            Ok(messages) => return Ok(messages),
            Err(e) if tokio::time::Instant::now() + pause >= deadline => {
                return Err(store.js_error(format!("reading {subject}"), e));
            }
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// A run followed live: its stored lines, then each new one as it is published. A consumer
/// lost on the way (a server restarted, a leader moved) is recreated from the message after
/// the last one delivered; the follower fails only when no consumer could be made again
/// within `ack_timeout × publish_attempts`.
pub struct RunFollower {
    messages: pull::Ordered,
    store: NatsStore,
    subject: String,
    /// The stream sequence to resume from: the one after the last message delivered.
    next: u64,
    /// When the consumer first failed since the last message delivered.
    failing_since: Option<tokio::time::Instant>,
    /// The client's (re)connections: after a reconnect the consumer is made again at once
    /// (the client library would find it gone only after about 15 s of retries).
    connections: Option<tokio::sync::watch::Receiver<u64>>,
}

impl std::fmt::Debug for RunFollower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunFollower")
            .field("subject", &self.subject)
            .finish()
    }
}

impl RunFollower {
    /// The client reconnected: the consumer is made again from the next message (kept as it
    /// is when that fails; its own error then comes through `next_line`).
    async fn reconnected(&mut self) {
        if let Ok(messages) = ordered_messages(&self.store, &self.subject, self.next).await {
            self.messages = messages;
        }
    }

    /// Follows `subject` from stream sequence `start`.
    pub(crate) async fn start(
        store: &NatsStore,
        subject: String,
        start: u64,
    ) -> Result<Self, NatsError> {
        let messages = ordered_messages(store, &subject, start).await?;
        let mut connections = store.connections.clone();
        connections.mark_unchanged();
        Ok(Self {
            messages,
            store: store.clone(),
            subject,
            next: start,
            failing_since: None,
            connections: Some(connections),
        })
    }

    /// The stream sequence after the last message delivered (where a consumer made again
    /// resumes): a follower has delivered everything of its run once the run's last stream
    /// sequence ([`NatsStore::last_stream_seq`]) is below it.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// The next line (with its `\n`), waiting for it to be published.
    pub async fn next_line(&mut self) -> Option<Result<Bytes, NatsError>> {
        loop {
            let next = match self.connections.as_mut() {
                Some(connections) => tokio::select! {
                    next = self.messages.next() => next,
                    changed = connections.changed() => {
                        match changed {
                            Ok(()) => self.reconnected().await,
                            Err(_) => self.connections = None,
                        }
                        continue;
                    }
                },
                None => self.messages.next().await,
            };
            let error = match next? {
                Ok(message) => match message.info() {
                    Ok(info) => {
                        self.next = info.stream_sequence + 1;
                        self.failing_since = None;
                        return Some(Ok(message.payload.clone()));
                    }
                    Err(e) => e.to_string(),
                },
                Err(e) => e.to_string(),
            };
            let options = &self.store.options;
            let budget = options.ack_timeout * options.publish_attempts.max(1);
            let since = *self
                .failing_since
                .get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() > budget {
                return Some(Err(self.store.js_error("following the run", error)));
            }
            // A consumer that fails again at once is not recreated in a busy loop.
            tokio::time::sleep(Duration::from_millis(100)).await;
            match ordered_messages(&self.store, &self.subject, self.next).await {
                Ok(messages) => self.messages = messages,
                Err(again) => {
                    let what = format!("following the run ({error})");
                    return Some(Err(self.store.js_error(what, again)));
                }
            }
        }
    }
}

impl NatsStore {
    /// The stream sequence of `run_id`'s last event, `None` when it has none.
    pub async fn last_stream_seq(&self, run_id: RunId) -> Result<Option<u64>, NatsError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&run_subject(&run_id))
            .await
        {
            Ok(message) => Ok(Some(message.sequence)),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(self.js_error(format!("reading run {run_id}"), e)),
        }
    }

    /// The last stored line of `run_id` and its stream sequence, `None` when it has none.
    pub async fn last_message(&self, run_id: RunId) -> Result<Option<(Bytes, u64)>, NatsError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&run_subject(&run_id))
            .await
        {
            Ok(message) => Ok(Some((message.payload, message.sequence))),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(self.js_error(format!("reading run {run_id}"), e)),
        }
    }

    /// The last stored line of `run_id`, `None` when it has none.
    pub async fn last_line(&self, run_id: RunId) -> Result<Option<Bytes>, NatsError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&run_subject(&run_id))
            .await
        {
            Ok(message) => Ok(Some(message.payload)),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(self.js_error(format!("reading run {run_id}"), e)),
        }
    }

    /// Every stored line of `run_id`, in order (each with its `\n`): the bytes a file holds.
    /// Reads up to the run's last message as it stands when the read starts
    /// ([`Self::run_lines_through`]): a run still being written is read up to that point.
    pub async fn run_lines(&self, run_id: RunId) -> Result<Vec<Bytes>, NatsError> {
        let Some(last) = self.last_stream_seq(run_id).await? else {
            return Err(NatsError::NotFound {
                run_id: run_id.to_string(),
                stream: self.url.stream.clone(),
            });
        };
        self.run_lines_through(run_id, last).await
    }

    /// Every stored line of `run_id` up to its message at stream sequence `last` (the run's
    /// last message when the reader looked), in order.
    ///
    /// A reader cannot hang: when that message is removed before it is delivered (deleted, or
    /// the stream's limits), the read fails naming the run as soon as the consumer reports
    /// nothing left before it, and in any case once no message came for
    /// `ack_timeout × publish_attempts`.
    pub async fn run_lines_through(
        &self,
        run_id: RunId,
        last: u64,
    ) -> Result<Vec<Bytes>, NatsError> {
        let what = format!("reading run {run_id}");
        let options = &self.options;
        let budget = options.ack_timeout * options.publish_attempts.max(1);
        let removed = |why: String| {
            self.js_error(
                &what,
                format!(
                    "its message at stream sequence {last} (the run's last when the read \
                     started) was removed while the run was read: {why}; read it again"
                ),
            )
        };
        let mut messages = ordered_messages(self, &run_subject(&run_id), 1).await?;
        let mut lines = Vec::new();
        loop {
            let message = match tokio::time::timeout(budget, messages.next()).await {
                Err(_) => return Err(removed(format!("no message came within {budget:?}"))),
                Ok(None) => return Err(removed("the consumer ended".to_owned())),
                Ok(Some(message)) => message.map_err(|e| self.js_error(&what, e))?,
            };
            let info = message.info().map_err(|e| self.js_error(&what, e))?;
            let (at, pending) = (info.stream_sequence, info.pending);
            lines.push(message.payload.clone());
            if at >= last {
                return Ok(lines);
            }
            if pending == 0 {
                return Err(removed(format!(
                    "the stream holds nothing of the run after stream sequence {at}"
                )));
            }
        }
    }

    /// Follows `run_id` from its first event (replay, then live).
    pub async fn follow(&self, run_id: RunId) -> Result<RunFollower, NatsError> {
        RunFollower::start(self, run_subject(&run_id), 1).await
    }

    /// Every run with events in the stream, from the stream's subjects (not the index).
    pub async fn stream_run_ids(&self) -> Result<Vec<RunId>, NatsError> {
        let mut subjects = self
            .stream
            .info_with_subjects(format!("{SUBJECT_PREFIX}>"))
            .await
            .map_err(|e| self.js_error("listing runs", e))?;
        let mut ids = Vec::new();
        while let Some(subject) = subjects.next().await {
            let (subject, _count) = subject.map_err(|e| self.js_error("listing runs", e))?;
            if let Some(id) = subject
                .strip_prefix(SUBJECT_PREFIX)
                .and_then(|s| RunId::parse(s).ok())
            {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }
}
