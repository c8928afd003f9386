//! Live updates over Server-Sent Events.
//!
//! The list: [`Snapshot`] is the viewer's last look at the store (each run's state and event
//! count, and the version it last changed at). Every look ([`observe`]: a render of `/`, or
//! the poller while a page watches) bumps the version, marks what changed and broadcasts
//! those runs' rows. A page carries the version it was rendered at; `/api/runs/live?version=V`
//! first sends every run changed after `V`, then what is broadcast, so nothing between the
//! render and the subscription is lost (a run sent twice is harmless: rows are states).
//!
//! A run: `/api/runs/<id>/events?since=SEQ` follows the run through the read port's `follow`
//! on a blocking thread, sends each event after `SEQ` (`id:` its seq, `data:` the line as
//! recorded) and ends with an `end` event (`{"status": …}`) after `run.completed`, or when its
//! runner no longer holds it; a closed connection or a shutdown ends the follow at its next
//! idle tick.

use std::convert::Infallible;
use std::ops::ControlFlow;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt as _};
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};
use transcript_domain::run_store::{FollowEnd, FollowItem};
use transcript_domain::{EventType, RunId, Seq, decode_line};

use crate::ViewerError;
use crate::rows::{Index, observe, row_json};
use crate::state::{AppState, blocking};

/// The poller: while a page watches, looks at the store every `poll`.
pub async fn poll(state: AppState) {
    let mut tick = tokio::time::interval(state.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = state.cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        if state.snapshot.sender.receiver_count() == 0 {
            continue;
        }
        let looked = state.clone();
        let _ = blocking(move || {
            let index = Index::new(looked.store.runs()?);
            observe(&looked, &index);
            Ok(())
        })
        .await;
    }
}

/// The query of `/api/runs/live`.
#[derive(Debug, Deserialize)]
pub struct LiveQuery {
    /// The snapshot version the page was rendered at.
    #[serde(default)]
    version: u64,
}

/// `/api/runs/live`: `run` events, each a row (`run_id`, `status`, display `cells`).
pub async fn list_events(
    State(state): State<AppState>,
    Query(query): Query<LiveQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ViewerError> {
    let receiver = state.snapshot.sender.subscribe();
    let caught_up = {
        let state = state.clone();
        blocking(move || {
            let since: Vec<RunId> = {
                let seen = state.snapshot.lock();
                seen.runs
                    .iter()
                    .filter(|(_, (_, _, changed))| *changed > query.version)
                    .map(|(id, _)| *id)
                    .collect()
            };
            if since.is_empty() {
                return Ok(Vec::new());
            }
            let index = Index::new(state.store.runs()?);
            Ok(since
                .into_iter()
                .filter_map(|id| row_json(&state, &index, id))
                .collect())
        })
        .await?
    };
    let first = stream::iter(caught_up.into_iter().map(|json| Ok(run_event(json))));
    let live = stream::unfold(receiver, |mut rx| async move {
        let event = match rx.recv().await {
            Ok((_, json)) => run_event(json),
            Err(broadcast::error::RecvError::Lagged(_)) => {
                Event::default().event("stale").data("{}")
            }
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok(event), rx))
    });
    let stream = first
        .chain(live)
        .take_until(state.cancel.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

fn run_event(json: String) -> Event {
    Event::default().event("run").data(json)
}

/// The query of `/api/runs/<id>/events`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    /// Send the events after this seq (default 0: all).
    #[serde(default)]
    since: Seq,
}

/// What the follower thread hands the stream.
enum Item {
    Line(Seq, String),
    End(&'static str),
}

/// `/api/runs/<id>/events?since=SEQ`: the run's events after `SEQ` (or after the
/// `Last-Event-ID` a reconnecting browser sends), live, then `end`.
pub async fn run_events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ViewerError> {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<Seq>().ok())
        .unwrap_or(0);
    let since = query.since.max(last);
    let store = state.store.clone();
    let run = blocking(move || crate::read::resolve(store.as_ref(), &id)).await?;
    let (tx, rx) = mpsc::channel::<Item>(256);
    let (store, cancel) = (state.store.clone(), state.cancel.clone());
    tokio::task::spawn_blocking(move || follow(store.as_ref(), run, since, &tx, &cancel));
    let stream = stream::unfold(rx, |mut rx| async move {
        let item = rx.recv().await?;
        let event = match item {
            Item::Line(seq, json) => Event::default().id(seq.to_string()).data(json),
            Item::End(status) => Event::default()
                .event("end")
                .data(format!("{{\"status\":\"{status}\"}}")),
        };
        Some((Ok(event), rx))
    })
    .take_until(state.cancel.clone().cancelled_owned());
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Follows `run`, sending lines after `since`, then its end.
fn follow(
    store: &dyn transcript_domain::run_store::RunStore,
    run: RunId,
    since: Seq,
    tx: &mpsc::Sender<Item>,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let mut ended: Option<&'static str> = None;
    let result = store.follow(run, true, &mut |item| match item {
        FollowItem::Line(bytes) => {
            let Ok(decoded) = decode_line(bytes) else {
                return ControlFlow::Continue(());
            };
            let event = decoded.event;
            if event.seq > since {
                let json = sse_safe(bytes);
                if tx.blocking_send(Item::Line(event.seq, json)).is_err() {
                    return ControlFlow::Break(());
                }
            }
            if event.kind.as_str() == EventType::RunCompleted.as_str() {
                let failed = matches!(&event.payload,
                    transcript_domain::DecodedPayload::Step(s) if s.error.is_some());
                ended = Some(if failed { "failed" } else { "succeeded" });
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
        FollowItem::Skipped { .. } => ControlFlow::Continue(()),
        FollowItem::Idle if tx.is_closed() || cancel.is_cancelled() => ControlFlow::Break(()),
        FollowItem::Idle => ControlFlow::Continue(()),
    });
    let status = match (ended, result) {
        (Some(s), _) => s,
        (None, Ok(FollowEnd::Abandoned)) => "abandoned",
        (None, Ok(FollowEnd::Stopped)) => return,
        (None, Ok(FollowEnd::Ended)) => "ended",
        (None, Err(_)) => "unavailable",
    };
    let _ = tx.blocking_send(Item::End(status));
}

/// A line as one SSE `data:` field: JSON holds no raw newline, but may hold a raw `\r` as
/// whitespace between tokens, which SSE would read as a line end; such a line is re-encoded.
fn sse_safe(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    if !text.contains(['\r', '\n']) {
        return text.into_owned();
    }
    serde_json::from_str::<serde_json::Value>(&text)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| text.replace(['\r', '\n'], " "))
}
