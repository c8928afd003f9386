//! `transcript serve --storage nats://…` (#60): the viewer reads the fleet's JetStream store
//! through the same read port as a directory, so the list and a live run work the same: a
//! run recording on NATS shows running in the list, its page follows it, and both say
//! succeeded without a reload. A real `nats-server` (skipped without one, a failure under
//! `CI=true`) and headless Chromium.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_support;

use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use serve_support::{Browser, Serve, gate, start_run};
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
    let (workflow, fifo) = gate(tmp.path());
    let mut runner = start_run(storage, &workflow, &fifo, tmp.path());
    let mut gate = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let serve = Serve::start(storage, &["--addr", "127.0.0.1:0"], 1);
    let list = browser.open(&format!("{}/", serve.origin));
    browser.wait_for(
        &list,
        "document.querySelector('#runs td[data-col=status]').textContent === 'running'",
        LIMIT,
    );
    let id = browser.eval(
        &list,
        "document.querySelector('#runs tbody tr').id.slice(4)",
    );
    let id = id.as_str().unwrap().to_owned();
    let run = browser.open(&format!("{}/runs/{id}", serve.origin));
    browser.wait_for(
        &run,
        "document.getElementById('tv-live').textContent.includes('recording')",
        LIMIT,
    );
    browser.eval(&list, "window.notReloaded = true");
    browser.eval(&run, "window.notReloaded = true");
    gate.write_all(b"go\n").unwrap();
    drop(gate);
    assert!(runner.wait().unwrap().success());
    browser.wait_for(
        &list,
        &format!("window.notReloaded && document.querySelector('#run-{id} td[data-col=status]').textContent === 'succeeded'"),
        LIMIT,
    );
    browser.wait_for(
        &run,
        "window.notReloaded && document.body.getAttribute('data-ended') === 'succeeded' && document.querySelector('main').textContent.includes('after')",
        LIMIT,
    );
    let bad = browser.misdeeds(&serve.origin);
    assert!(bad.is_empty(), "{bad:#?}");
}
