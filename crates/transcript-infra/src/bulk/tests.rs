//! The bulk writer against the recorder: the same drafts and clock give the same bytes (new
//! runs, resumed ones, torn tails, masks, clocks going back, refused drafts); a failed write
//! names the file and undoes the import; a batch makes files durable with hardened modes.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use transcript_domain::{
    Clock, ContentBlock, EventDraft, EventMask, Fidelity, MessagePayload, Payload, RawJson,
    RecordError, Recorder, Role, RunId, StepPayload, Timestamp, Usage,
};

use super::*;
use crate::JsonlRecorderFactory;
use crate::recorder::OpenMode;
use crate::sink::{FileSink, Sink};

fn run_id(n: u8) -> RunId {
    RunId::from_bytes([n; 16])
}

/// A clock that hands out `times` (ms since the epoch) in turn, then repeats the last: it
/// goes back too, so the never-backwards rule is exercised.
struct Script(Mutex<Vec<i64>>);

impl Clock for Script {
    fn now(&self) -> Timestamp {
        let mut t = self.0.lock().unwrap();
        let ms = if t.len() > 1 { t.remove(0) } else { t[0] };
        Timestamp::saturating_from_unix_millis(ms)
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(Script(Mutex::new(vec![
        1_780_000_000_000,
        1_780_000_000_005,
        1_780_000_000_001, // back: the line keeps ..005
        1_780_000_003_000,
        1_780_000_003_000,
        1_780_000_009_999,
    ])))
}

/// Replaces every text block's text with `[masked]`.
struct Mask;

impl EventMask for Mask {
    fn mask(&self, payload: &mut Payload) {
        if let Payload::MessageAssistant(m) | Payload::MessageUser(m) = payload {
            for b in &mut m.blocks {
                *b = ContentBlock::text(Fidelity::AgentEmitted, "[masked]");
            }
        }
    }
}

/// A run like an import writes: started, prompt, turns with usage, an invalid draft among
/// them (refused, no seq), completions.
fn drafts() -> Vec<EventDraft> {
    let mut turn = MessagePayload::new(
        Role::Assistant,
        vec![
            ContentBlock::text(Fidelity::AgentEmitted, "héllo \u{2028} \"quoted\""),
            ContentBlock::text(Fidelity::AgentEmitted, "second"),
        ],
    );
    turn.model = Some("claude-opus-4".to_owned());
    turn.usage = Some(Usage {
        input_tokens: Some(3),
        output_tokens: Some(400),
        cache_read_tokens: Some(20_000),
        ..Usage::default()
    });
    let user = MessagePayload::new(
        Role::User,
        vec![ContentBlock::text(Fidelity::AgentEmitted, "do it")],
    );
    let result = RawJson::from_value(&serde_json::json!({"clock": "provider"})).unwrap();
    vec![
        EventDraft::run_level(Payload::RunStarted(StepPayload::new(
            "import x", "workflow",
        ))),
        EventDraft::new(
            "agent",
            0,
            Payload::StepStarted(StepPayload::new("claude", "agent")),
        ),
        EventDraft::new("agent", 0, Payload::MessageUser(user)),
        EventDraft::new("agent", 0, Payload::MessageAssistant(turn.clone())),
        // Invalid: a run-level event at a step path.
        EventDraft::new(
            "agent",
            0,
            Payload::RunStarted(StepPayload::new("x", "workflow")),
        ),
        EventDraft::new("agent", 0, Payload::MessageAssistant(turn)),
        EventDraft::new(
            "agent",
            0,
            Payload::StepCompleted(StepPayload::new("claude", "agent").with_result(result)),
        ),
        EventDraft::run_level(Payload::RunCompleted(StepPayload::new(
            "import x", "workflow",
        ))),
    ]
}

fn factory(dir: &Path, mask: bool) -> JsonlRecorderFactory {
    let f = JsonlRecorderFactory::new(dir).with_clock(clock());
    if mask { f.with_mask(Arc::new(Mask)) } else { f }
}

/// The drafts through the recorder (one record awaited after another, as the import did);
/// the outcome of each.
fn through_recorder(dir: &Path, run: RunId, mode: OpenMode, mask: bool) -> Vec<String> {
    let f = factory(dir, mask);
    let r = match mode {
        OpenMode::New => f.open(run, Some(run_id(9))).unwrap(),
        OpenMode::Resume => f.resume(run, Some(run_id(9))).unwrap(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let outcomes = drafts()
        .into_iter()
        .map(|d| format!("{:?}", rt.block_on(r.record(d)).map_err(|e| e.to_string())))
        .collect();
    rt.block_on(Recorder::close(&r)).unwrap();
    outcomes
}

fn through_bulk(dir: &Path, run: RunId, mode: OpenMode, mask: bool) -> Vec<String> {
    let f = factory(dir, mask);
    let mut w = match mode {
        OpenMode::New => f.open_bulk(run, Some(run_id(9))).unwrap(),
        OpenMode::Resume => f.resume_bulk(run, Some(run_id(9))).unwrap(),
    };
    let outcomes = drafts()
        .into_iter()
        .map(|d| format!("{:?}", w.record(d).map_err(|e| e.to_string())))
        .collect();
    let synced = w.finish().unwrap().sync().unwrap();
    assert_eq!(synced.created, mode == OpenMode::New);
    outcomes
}

fn bytes(dir: &Path, run: RunId) -> Vec<u8> {
    std::fs::read(dir.join(run.file_name())).unwrap()
}

#[test]
fn a_new_run_is_byte_identical_to_the_recorders() {
    for mask in [false, true] {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let live = through_recorder(a.path(), run_id(1), OpenMode::New, mask);
        let bulk = through_bulk(b.path(), run_id(1), OpenMode::New, mask);
        assert_eq!(live, bulk);
        assert!(live[4].starts_with("Err"), "{live:?}");
        let (x, y) = (bytes(a.path(), run_id(1)), bytes(b.path(), run_id(1)));
        assert_eq!(String::from_utf8_lossy(&x), String::from_utf8_lossy(&y));
        assert_eq!(x.iter().filter(|&&c| c == b'\n').count(), 7);
        assert_eq!(
            String::from_utf8_lossy(&x).contains("[masked]"),
            mask,
            "the mask applies"
        );
        let mode = std::fs::metadata(b.path().join(run_id(1).file_name()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

#[test]
fn a_resumed_run_and_its_torn_tail_are_byte_identical_to_the_recorders() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    through_recorder(a.path(), run_id(2), OpenMode::New, false);
    let mut first = bytes(a.path(), run_id(2));
    // A torn last line, as a crash leaves it: moved to .torn by both.
    first.extend_from_slice(b"{\"seq\":8,\"run_id\":\"torn");
    for dir in [a.path(), b.path()] {
        std::fs::write(dir.join(run_id(2).file_name()), &first).unwrap();
    }
    let live = through_recorder(a.path(), run_id(2), OpenMode::Resume, false);
    let bulk = through_bulk(b.path(), run_id(2), OpenMode::Resume, false);
    assert_eq!(live, bulk);
    assert!(live[0].contains("Ok(8)"), "seqs continue: {live:?}");
    assert_eq!(bytes(a.path(), run_id(2)), bytes(b.path(), run_id(2)));
    let torn = format!("{}.torn", run_id(2).file_name());
    assert_eq!(
        std::fs::read(a.path().join(&torn)).unwrap(),
        std::fs::read(b.path().join(&torn)).unwrap()
    );
    // And a new run is refused where the file holds events, as by the recorder.
    let err = factory(b.path(), false)
        .open_bulk(run_id(2), None)
        .unwrap_err();
    assert!(err.to_string().contains("run already exists"), "{err}");
}

/// Fails every write after `allow` bytes with ENOSPC.
struct FullDisk {
    inner: FileSink,
    allow: Arc<Mutex<usize>>,
}

impl Sink for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut allow = self.allow.lock().unwrap();
        if *allow == 0 {
            return Err(io::Error::from_raw_os_error(28));
        }
        let n = buf.len().min(*allow);
        *allow -= n;
        self.inner.write(&buf[..n])
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

fn full_disk_writer(dir: &Path, run: RunId, mode: OpenMode, allow: usize) -> BulkWriter {
    let allow = Arc::new(Mutex::new(allow));
    let settings = BulkSettings {
        storage_dir: dir.to_path_buf(),
        run_id: run,
        parent_run_id: None,
        clock: clock(),
        mask: None,
    };
    BulkWriter::open_with(settings, mode, move |inner| {
        Box::new(FullDisk { inner, allow })
    })
    .unwrap()
}

/// A turn big enough that a few of them make the writer flush.
fn big_turn() -> EventDraft {
    let text = "x".repeat(100 * 1024);
    EventDraft::new(
        "agent",
        0,
        Payload::MessageAssistant(MessagePayload::new(
            Role::Assistant,
            vec![ContentBlock::text(Fidelity::AgentEmitted, text)],
        )),
    )
}

fn write_until_error(w: &mut BulkWriter) -> RecordError {
    for _ in 0..100 {
        if let Err(e) = w.record(big_turn()) {
            return e;
        }
    }
    panic!("no write failed");
}

#[test]
fn a_full_disk_names_the_file_fails_what_follows_and_leaves_no_half_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_id(3);
    let mut w = full_disk_writer(dir.path(), run, OpenMode::New, 300 * 1024);
    let e = write_until_error(&mut w);
    let text = format!("{e}: {:?}", std::error::Error::source(&e));
    assert!(matches!(e, RecordError::Storage { .. }), "{e:?}");
    assert!(text.contains(&run.file_name()), "names the file: {text}");
    assert!(text.contains("os error 28"), "names the cause: {text}");
    // Part of it reached the file; later records fail too.
    assert!(dir.path().join(run.file_name()).exists());
    assert!(w.record(big_turn()).is_err());
    drop(w);
    assert!(
        !dir.path().join(run.file_name()).exists(),
        "a failed new run is removed"
    );
}

#[test]
fn a_failed_append_leaves_the_run_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_id(4);
    through_bulk(dir.path(), run, OpenMode::New, false);
    let before = bytes(dir.path(), run);
    let mut w = full_disk_writer(dir.path(), run, OpenMode::Resume, 200 * 1024);
    write_until_error(&mut w);
    assert!(bytes(dir.path(), run).len() > before.len(), "it did write");
    drop(w);
    assert_eq!(bytes(dir.path(), run), before, "cut back to what it held");
    // A finished but unsynced append is undone the same way.
    let mut w = factory(dir.path(), false).resume_bulk(run, None).unwrap();
    w.record(big_turn()).unwrap();
    let unsynced = w.finish().unwrap();
    assert!(bytes(dir.path(), run).len() > before.len());
    unsynced.abandon();
    assert_eq!(bytes(dir.path(), run), before);
}

#[test]
fn a_batch_reports_every_file_durable_by_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("st");
    let mut batch = DurableBatch::new();
    for n in 0..40u8 {
        let mut w = factory(&storage, false)
            .open_bulk(run_id(n + 10), None)
            .unwrap();
        w.record(drafts().remove(0)).unwrap();
        batch.submit(u64::from(n), w.finish().unwrap());
    }
    let mut results = batch.finish();
    results.sort_by_key(|(t, _)| *t);
    assert_eq!(results.len(), 40);
    for (t, r) in results {
        let path = r.unwrap();
        assert_eq!(path, storage.join(run_id(t as u8 + 10).file_name()));
        assert_eq!(
            std::fs::read(&path)
                .unwrap()
                .iter()
                .filter(|&&c| c == b'\n')
                .count(),
            1
        );
    }
    let mode = std::fs::metadata(&storage).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn a_file_is_replaced_whole_with_mode_0600_and_never_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    replace_file_durably(dir.path(), "index.json", |w| w.write_all(b"old")).unwrap();
    replace_file_durably(dir.path(), "index.json", |w| w.write_all(b"new")).unwrap();
    let path = dir.path().join("index.json");
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, b"keep").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("index.json.tmp")).unwrap();
    let e = replace_file_durably(dir.path(), "index.json", |w| w.write_all(b"evil")).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
    // A failing producer leaves the old file.
    std::fs::remove_file(dir.path().join("index.json.tmp")).unwrap();
    let e = replace_file_durably(dir.path(), "index.json", |_| Err(io::Error::other("boom")));
    assert!(e.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), b"new");
}
