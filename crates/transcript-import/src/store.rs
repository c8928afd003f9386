//! Incremental import of the agent CLIs' own session stores (issue #29 item 3):
//! `transcript import <provider> --store` reads the provider's store (Claude Code
//! `$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`; Codex `$CODEX_HOME/sessions`,
//! else `~/.codex/sessions`; Gemini CLI `$GEMINI_CLI_HOME/.gemini/tmp`, else
//! `~/.gemini/tmp`, its `chats/` files only; Copilot CLI `~/.copilot/session-state`), and a
//! directory argument is read the same way. Verified on real data: Claude Code session logs
//! (sub-agent logs included), Codex rollouts, and the saved sessions the real Gemini CLI 0.61
//! writes (`tests/import_gemini_store.rs`: append-only JSONL whose messages are appended again
//! whole as they grow; see `transcript_providers`' Gemini chats reader). Copilot's
//! `events.jsonl` records are the ones its normalizer reads (real captures).
//!
//! Every session file is one run, tracked in `<storage>/import-index.json` (path → run id,
//! size, modification time, a hash of its first 4 KiB, how many normalizer items its
//! content produced before the end of the stream, the turn the end of the stream flushed,
//! and the working directory the file records, see [`crate::project`]):
//!
//! - **unchanged** (same size and modification time): skipped without being opened;
//! - **grown** (larger, same head): the run is resumed (same run id, the sequence
//!   continues) and only what is new is appended. The normalizer is deterministic and
//!   chunking-invariant, so the file is normalized again from its start and the items
//!   already written are skipped by count; the turn the previous import flushed at the end
//!   of the stream is compared with the one the longer stream emits in its place, and only
//!   its new blocks and the usage it grew by are appended (a message split by the results of
//!   its own tool calls keeps growing across imports);
//! - **new**, shrunk or rewritten: imported as a new run.
//!
//! A session log has no end: these runs have `run.started` and the agent step's
//! `step.started` but no completion, so appending never writes after `run.completed`.
//! None of the stores marks a session as ended (Claude Code logs and Gemini CLI chats have
//! no closing record; a Codex `task_complete` ends a task, and `codex resume` continues the
//! session), so no completion is ever written: it would be contradicted by the next
//! append. Such a run is **open**, not incomplete: the index lists it
//! ([`Index::session_runs`]), which is how a reader tells "an imported session, may grow"
//! from "a run that crashed". The wire stays as seed 000 and the wire decisions define it:
//! no field is added to `run.started` (decision 2 fixes its `name` and `kind`; decision 8
//! lets our writer add only the listed fields).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use transcript_domain::{Clock, Payload, RunId, RunIdGenerator, Timestamp};
use transcript_infra::{DurableBatch, Unsynced};
use transcript_providers::{Fact, Item, Output, Provider};

mod continuation;
mod locate;

pub use crate::index::{Index, IndexEntry, TailDigest};
use continuation::continuation;
use locate::is_session_file;
pub use locate::{default_store, parse_day, session_files};

use super::clock::ImportClock;
use super::{ImportContext, ImportWriter, Via, bad, first_time, user_message};
use crate::ImportError;
use crate::index::HEAD;

/// One session file's import, once durable (or why not).
pub struct StoreDone {
    /// The session file.
    pub file: PathBuf,
    /// Its index key (canonical path).
    pub key: String,
    /// What happened, and its new index entry.
    pub result: Result<(StoreOutcome, Option<IndexEntry>), ImportError>,
}

/// Imports every session file of `provider` under `dirs` (see [`crate::Importer::import_store`]); each outcome
/// is final: a new or appended run is reported only once its file is durable (the batch
/// syncs them together, see `transcript_infra::DurableBatch`), so the index never claims a
/// file whose transcript could be lost or was cut back. In file order.
pub fn import_store_files(
    ctx: &ImportContext,
    provider: Provider,
    dirs: &[PathBuf],
    since: Option<i64>,
    index: &Index,
    via: Via,
) -> Vec<StoreDone> {
    let (clock, ids) = crate::clock::clock_and_ids(ctx.deterministic);
    let mut done = Vec::new();
    let mut batch = DurableBatch::new();
    for dir in dirs {
        for file in session_files(dir, since) {
            if !is_session_file(provider, &file) {
                continue;
            }
            let key = std::fs::canonicalize(&file)
                .unwrap_or_else(|_| file.clone())
                .to_string_lossy()
                .into_owned();
            let known = index.files.get(&key);
            let result = import_store_file(ctx, &clock, ids.as_ref(), provider, &file, known, via)
                .map(|(outcome, entry, written)| {
                    if let Some(written) = written {
                        batch.submit(done.len() as u64, written);
                    }
                    (outcome, entry)
                });
            done.push(StoreDone { file, key, result });
        }
    }
    for (token, result) in batch.finish() {
        if let (Err(e), Some(d)) = (result, done.get_mut(token as usize)) {
            d.result = Err(super::not_durable(&d.file, &e));
        }
    }
    done
}

/// What happened to one session file.
#[derive(Debug)]
pub enum StoreOutcome {
    /// Same size and time: not read.
    Unchanged(RunId),
    /// A new run: its events and what its turns cost.
    New(RunId, u64, super::ImportBill),
    /// Events appended to its run, and what the appended turns cost.
    Appended(RunId, u64, super::ImportBill),
    /// No agent output (yet): no run; read again once it changes.
    NoOutput,
}

fn file_stamp(path: &Path) -> Result<(u64, u128), ImportError> {
    let meta = std::fs::metadata(path).map_err(|e| bad(path, format!("cannot read: {e}")))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok((meta.len(), mtime))
}

/// What importing one session file did, its new index entry, and its transcript's file,
/// written but not yet durable (`None` when nothing was written, or through the live
/// recorder, which synced at close).
pub type StoreFileImport = (StoreOutcome, Option<IndexEntry>, Option<Unsynced>);

/// Imports one session file of a store: skipped when unchanged, appended to its run when
/// grown, a new run otherwise.
pub fn import_store_file(
    ctx: &ImportContext,
    clock: &Arc<dyn Clock>,
    ids: &dyn RunIdGenerator,
    provider: Provider,
    input: &Path,
    known: Option<&IndexEntry>,
    via: Via,
) -> Result<StoreFileImport, ImportError> {
    let (size, mtime_ns) = file_stamp(input)?;
    if let Some(e) = known.filter(|e| e.size == size && e.mtime_ns == mtime_ns) {
        return Ok((unchanged(e), Some(e.clone()), None));
    }
    let (file, head) = read_head(input)?;
    if let Some(e) = known.filter(|e| e.closed && e.size == size && same_head(e, &head)) {
        // A file import's completed run of the same content (only its time changed).
        return Ok((unchanged(e), Some(e.clone()), None));
    }
    let mut entry = IndexEntry {
        run_id: String::new(),
        provider: provider.name().to_owned(),
        size,
        mtime_ns,
        head: crate::index::sha256_hex(&head),
        head_len: head.len() as u64,
        items_fed: 0,
        tail: None,
        project: crate::project::recorded_project(input),
        closed: false,
    };
    let resume = resumable(known, size, provider, &head);
    let import_clock = Arc::new(ImportClock::new(clock.clone()));
    if let Some(t) = first_time(provider, &head) {
        import_clock.pin(t);
    }
    let factory = ctx.recorder_factory(import_clock.clone());
    let mut writer = ImportWriter::new(factory, via, ids, input, provider);
    if let Some(e) = resume {
        let run = RunId::parse(&e.run_id)
            .map_err(|err| bad(input, format!("bad run id in the index: {err}")))?;
        writer.resume(run)?;
    }
    let mut feed = StoreFeed {
        writer,
        clock: import_clock,
        latest: None,
        skip: resume.map_or(0, |e| e.items_fed),
        old_tail: resume.and_then(|e| e.tail.clone()),
        tail: None,
        counted: 0,
        items_fed: 0,
    };
    feed.stream(provider, head, file)?;
    let Some((run, written)) = feed.writer.finish()? else {
        // Nothing to record (no agent output yet, e.g. a log of summaries only): remembered
        // without a run, so it is read again only once it changes.
        return Ok((StoreOutcome::NoOutput, Some(entry), None));
    };
    entry.run_id = run.to_string();
    entry.items_fed = feed.items_fed;
    entry.tail = feed.tail;
    let events = feed.writer.events;
    let bill = feed.writer.bill.clone();
    let outcome = if resume.is_some() {
        StoreOutcome::Appended(run, events, bill)
    } else {
        StoreOutcome::New(run, events, bill)
    };
    Ok((outcome, Some(entry), written))
}

/// The outcome of a file with the size and time the index knows: not read again.
fn unchanged(e: &IndexEntry) -> StoreOutcome {
    match RunId::parse(&e.run_id) {
        Ok(run) => StoreOutcome::Unchanged(run),
        Err(_) => StoreOutcome::NoOutput,
    }
}

/// Opens the file and reads its head (the first [`HEAD`] bytes, fewer in a smaller file).
fn read_head(input: &Path) -> Result<(std::fs::File, Vec<u8>), ImportError> {
    let read_err = |e: std::io::Error| bad(input, format!("cannot read: {e}"));
    let mut file = std::fs::File::open(input).map_err(read_err)?;
    let mut head = Vec::with_capacity(HEAD);
    file.by_ref()
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(read_err)?;
    Ok((file, head))
}

/// The index entry whose run the file's new content continues: same provider, not smaller,
/// and the head the index hashed (the first min(4 KiB, size) bytes of the file back then) is
/// unchanged.
fn resumable<'a>(
    known: Option<&'a IndexEntry>,
    size: u64,
    provider: Provider,
    head: &[u8],
) -> Option<&'a IndexEntry> {
    known.filter(|e| {
        // A file import's run is completed: never appended to (a grown file is a new run).
        !e.run_id.is_empty()
            && !e.closed
            && size >= e.size
            && e.provider == provider.name()
            && same_head(e, head)
    })
}

/// Whether `head` begins with the bytes the index entry `e` hashed.
fn same_head(e: &IndexEntry, head: &[u8]) -> bool {
    usize::try_from(e.head_len)
        .ok()
        .and_then(|n| head.get(..n))
        .is_some_and(|h| crate::index::sha256_hex(h) == e.head)
}

/// One session file being fed into its run: the items an earlier import already recorded
/// are skipped, and the last turn is kept to continue it.
struct StoreFeed<'a> {
    writer: ImportWriter<'a>,
    clock: Arc<ImportClock>,
    /// The latest provider time seen before the run was opened.
    latest: Option<Timestamp>,
    /// Items the index says were fed already.
    skip: u64,
    /// The last turn recorded before, which the first new turn may continue.
    old_tail: Option<TailDigest>,
    /// The last turn of the file's final items, for the next import to continue.
    tail: Option<TailDigest>,
    /// Items seen so far.
    counted: u64,
    /// Items fed before the normalizer was finished (the ones a grown file reproduces).
    items_fed: u64,
}

impl StoreFeed<'_> {
    /// Normalizes the file (its head, then the rest in chunks) into the run.
    fn stream(
        &mut self,
        provider: Provider,
        head: Vec<u8>,
        file: std::fs::File,
    ) -> Result<(), ImportError> {
        let input = self.writer.input;
        let mut feed = super::feed::ChunkFeed::new(provider, head, file);
        let mut items = Vec::new();
        loop {
            let fed = feed
                .next(&mut items)
                .map_err(|e| bad(input, format!("cannot read: {e}")))?;
            let finishing = match fed {
                super::feed::Fed::More => false,
                super::feed::Fed::Last { before_finish } => {
                    self.items_fed = self.counted + before_finish as u64;
                    true
                }
            };
            for item in items.drain(..) {
                self.item(item, finishing)?;
            }
            if finishing {
                return Ok(());
            }
        }
    }

    /// One normalized item: times move the clock; past the skipped ones, turns (continuing
    /// the last recorded one) and prompts are recorded, opening the run at the first.
    fn item(&mut self, item: Item, finishing: bool) -> Result<(), ImportError> {
        let index = self.counted;
        self.counted += 1;
        let in_tail = finishing && index >= self.items_fed;
        if let Item::Fact(Fact::Time(t)) = &item {
            if self.writer.is_open() {
                self.clock.pin(*t);
            } else {
                self.latest = Some(*t);
            }
        }
        if index < self.skip {
            return Ok(());
        }
        let payload = match item {
            Item::Output(Output::Turn(turn)) => {
                if in_tail {
                    self.tail = Some(TailDigest::of(&turn));
                }
                match self.old_tail.take() {
                    Some(old) => continuation(&turn, &old).map(Payload::MessageAssistant),
                    None => Some(Payload::MessageAssistant(turn)),
                }
            }
            Item::Output(o) => o.to_payload(),
            Item::Fact(Fact::Prompt { text, system }) => Some(user_message(text, system)),
            Item::Fact(_) => None,
        };
        let Some(payload) = payload else {
            return Ok(());
        };
        if !self.writer.is_open()
            && let Some(t) = self.latest.take()
        {
            // The run starts at the latest time seen before its first event.
            self.clock.pin(t);
        }
        self.writer.record(payload)
    }
}

impl Index {
    /// Records the new index entries of a store import's outcomes; whether anything changed
    /// (nothing new: the index on disk already says all of it, and need not be written).
    pub fn record(&mut self, done: &[StoreDone]) -> bool {
        let mut changed = false;
        for d in done {
            if let Ok((_, Some(entry))) = &d.result
                && self.files.get(&d.key) != Some(entry)
            {
                self.files.insert(d.key.clone(), entry.clone());
                changed = true;
            }
        }
        changed
    }
}
