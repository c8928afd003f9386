//! `transcript serve --storage nats://…` (#60): the viewer reads the fleet's JetStream store
//! through the same read port as a directory, so the list and a live run work the same: a
//! run recording on NATS shows running in the list, its page follows it, and both say
//! succeeded without a reload. A real `nats-server` (skipped without one, a failure under
//! `CI=true`) and headless Chromium.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_support;

use std::path::Path;
use std::time::Duration;

use serve_support::Browser;
use transcript_nats::testing;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn on_nats_the_list_and_a_live_run_work_the_same() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let Some(mut browser) = Browser::launch() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url();
    let storage = Path::new(&url);
    let (serve, _, _) =
        serve_support::a_live_run_turns_completed(&mut browser, storage, tmp.path(), LIMIT);
    let bad = browser.misdeeds(&serve.origin);
    assert!(bad.is_empty(), "{bad:#?}");
}
