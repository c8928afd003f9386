//! # transcript-viewer: a live, read-only viewer of a whole store
//!
//! `transcript serve` (#60) is this crate behind a few lines of the CLI: one HTTP server over
//! the read port ([`transcript_domain::run_store::RunStore`]), so a directory and a NATS
//! JetStream store are viewed by the same code paths as `list`, `show` and `tail -f`.
//!
//! ## Model
//!
//! Pages are rendered on the server and usable without JavaScript; one small script of our
//! own (`assets/live.js`, inline, allowed by its hash) adds live updates over Server-Sent
//! Events. Routes:
//!
//! * `/`: the runs (id, workflow, status, start, duration, cost, tokens, models, replays
//!   marked), filtered by `status`, `workflow`, `model`, `day`, sorted by `sort`/`order`,
//!   in pages of [`PAGE_SIZE`] (`page`); `all=1` lists child runs too. Live: a run that starts
//!   appears and a status that changes changes (`/api/runs/live`).
//! * `/runs/<id>`: the export's HTML page of the run (transcript-export's `to_html`: its
//!   waterfall, money chart, step tree, messages, tool calls, receipt), embedded in ours; a
//!   running run grows live and the page says when it ends. `/runs/<id>/at/<seq>` redirects to
//!   the step that recorded event `seq`.
//! * `/diff?a=&b=`: transcript-compare's `render_html` of the two runs' diff.
//! * `/search?q=`: text search over messages, prompts, tool inputs and outputs, step results
//!   of every run, newest first: a streaming scan, case ignored by Unicode simple case
//!   folding (`regex`'s case-insensitive literal search).
//! * `/receipts`: billed turns by day, model, workflow and project, with bars: what
//!   `transcript receipts --by` bills (transcript-export's `group_runs`).
//! * JSON: `/api/runs` (the list, same filters), `/api/runs/<id>` (its events as recorded),
//!   `/api/runs/<id>/events?since=SEQ` (SSE: every event after `SEQ`, live, then `end`).
//!
//! ## Invariants
//!
//! * Read-only: the viewer calls the read port only (`RunStore`'s `runs`, `resolve`,
//!   `read`, `follow`); it has no way to write a store.
//! * Hostile content stays text: every recorded value reaches a page through
//!   `transcript_export::escape_html` (ours, the export's and the diff's pages alike), the live
//!   script writes with `textContent` only, and the Content-Security-Policy allows no script
//!   but ours (by hash), no inline handler, and nothing from another origin
//!   (`tests/http.rs`; in Chromium, `crates/transcript-cli/tests/serve_browser.rs`).
//! * Never panics on input: a malformed line, an unknown run, a bad query are typed
//!   [`ViewerError`]s answered with a status code.
//! * Bounded reads: lines longer than `transcript_domain::MAX_LINE_BYTES` are skipped, never
//!   buffered; the search holds one chunk and one matching line at a time.
//!
//! ## Threat model
//!
//! Recorded content comes from models and tools and is untrusted. The server binds loopback by
//! default; [`Viewer::bind`] refuses any other address without a token, and with a token every
//! request must carry it (`Authorization: Bearer`, the `transcript_token` cookie, or
//! `?token=` once, which sets the cookie), compared in constant time, else 401. The viewer
//! adds no authentication beyond that shared secret and no TLS: put it behind a proxy to
//! expose it further. Pages get `Cache-Control: no-store`, `X-Content-Type-Options: nosniff`,
//! `Referrer-Policy: no-referrer` and `frame-ancestors 'none'`.
//!
//! ## Versioning
//!
//! The JSON of `/api/runs` and `/api/runs/<id>` and the SSE events are an interface: fields
//! may be added in a minor version (readers ignore what they do not know); a field is never
//! renamed or removed without a major version. `/api/runs/<id>` carries each event exactly as
//! recorded (the transcript's own versioning applies). HTML pages are not an interface.
#![forbid(unsafe_code)]

mod auth;
mod config;
mod error;
mod format;
mod http;
mod list;
mod live;
mod page;
mod read;
mod receipts;
mod rows;
mod run_page;
mod search;
mod search_page;
mod server;
mod snapshot;
mod state;
mod summary;

pub use auth::generate_token;
pub use config::{Definitions, OriginFn, Origins, Price, ViewerConfig, is_loopback};
pub use error::ViewerError;
pub use rows::PAGE_SIZE;
pub use server::Viewer;
