//! [`mirror`]: the stream copied into the file layout (`<dir>/<run_id>.jsonl`) by a durable
//! consumer, byte-identical to the files the file recorder writes for the same events.
//!
//! Resumable and idempotent: lines are appended in seq order and synced before the consumer
//! acknowledges them; a line a file already holds is skipped; a torn last line (a mirror killed
//! inside a write) is cut off when the file is opened again. On start the consumer is reset to
//! its ack floor, so what was delivered but not acknowledged comes again at once (the consumer
//! reset API needs nats-server 2.14 or later).
//!
//! A run with events missing from the stream (its limits removed them, or they were deleted)
//! cannot be mirrored byte for byte: its file keeps the lines before the gap, the run is
//! reported in [`MirrorReport::incomplete`], and the other runs go on (a gap never stops the
//! mirror for good). A message that is not a transcript line is corruption of trusted storage:
//! the mirror stops at it, naming its subject.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, PullConsumer, pull};
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use futures_util::StreamExt;
use transcript_domain::{RunId, Seq};

use crate::store::SUBJECT_PREFIX;
use crate::{NatsError, NatsStore};

/// What to mirror where.
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// The directory the run files go to (created private to the user).
    pub dir: PathBuf,
    /// The durable consumer's name: one per mirror directory (the consumer's description names
    /// it; another directory is refused, see [`mirror`]).
    pub consumer: String,
    /// Keep going for new events instead of stopping once caught up, through servers going
    /// away for less than `ack_timeout × publish_attempts` at a time (a restart).
    pub follow: bool,
    /// Messages per fetch (and per sync).
    pub batch: usize,
}

impl MirrorOptions {
    /// Mirror into `dir` with the consumer `transcript-mirror`, stopping once caught up.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            consumer: "transcript-mirror".to_owned(),
            follow: false,
            batch: 512,
        }
    }

    /// Whether `name` may name the durable consumer: letters, digits, `-` and `_`, not empty
    /// (what JetStream accepts in a consumer name, and safe in subjects).
    pub fn valid_consumer(name: &str) -> bool {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }
}

/// What one mirror pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MirrorReport {
    /// Lines appended to files.
    pub written: u64,
    /// Lines delivered that the files already held (a restart after a crash).
    pub skipped: u64,
    /// The runs touched.
    pub runs: BTreeSet<RunId>,
    /// Runs found with events missing from the stream (removed by its `max_age` or
    /// `max_bytes`, or deleted), and the gap: their files keep the lines before it and nothing
    /// after; the other runs are mirrored all the same.
    pub incomplete: BTreeMap<RunId, String>,
}

/// The most run files a pass holds open: past it they are synced and closed (a fleet's
/// stream holds far more runs than a process may open files).
const MAX_OPEN_FILES: usize = 64;

/// One run's file and the seq of its last complete line.
struct RunFile {
    file: File,
    path: PathBuf,
    last_seq: Seq,
}

fn io_error(path: &Path, what: &str, e: &std::io::Error) -> NatsError {
    NatsError::Io {
        path: path.display().to_string(),
        message: format!("{what}: {e}"),
    }
}

/// The seq at the start of a line (`{"seq":N,…`).
fn line_seq(line: &[u8]) -> Option<Seq> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let end = rest.iter().position(|b| !b.is_ascii_digit())?;
    std::str::from_utf8(&rest[..end]).ok()?.parse().ok()
}

/// The offset of the last `\n` before offset `before`, read backwards in 64 KiB chunks (a
/// run file is not read whole to resume it).
fn rfind_newline(file: &mut File, before: u64) -> std::io::Result<Option<u64>> {
    let mut chunk = vec![0u8; 64 * 1024];
    let mut end = before;
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let buf = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
            return Ok(Some(start + i as u64));
        }
        end = start;
    }
    Ok(None)
}

impl RunFile {
    /// Opens (or creates) the run's file, cuts a torn last line and reads its last seq.
    fn open(dir: &Path, run_id: RunId) -> Result<Self, NatsError> {
        let path = dir.join(run_id.file_name());
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            // A symlink planted at a run's path is refused, not followed.
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error(&path, "cannot open the mirrored run", &e))?;
        let len = file
            .metadata()
            .map_err(|e| io_error(&path, "cannot read the mirrored run", &e))?
            .len();
        let read = |file: &mut File, before| {
            rfind_newline(file, before)
                .map_err(|e| io_error(&path, "cannot read the mirrored run", &e))
        };
        let complete = read(&mut file, len)?.map_or(0, |i| i + 1);
        if complete < len {
            file.set_len(complete)
                .map_err(|e| io_error(&path, "cannot cut a torn last line", &e))?;
        }
        let last_seq = if complete == 0 {
            0
        } else {
            let last_line = read(&mut file, complete - 1)?.map_or(0, |i| i + 1);
            let mut head = Vec::with_capacity(32);
            file.seek(SeekFrom::Start(last_line))
                .and_then(|_| Read::by_ref(&mut file).take(32).read_to_end(&mut head))
                .map_err(|e| io_error(&path, "cannot read the mirrored run", &e))?;
            line_seq(&head).ok_or_else(|| NatsError::Io {
                path: path.display().to_string(),
                message: "the last line of the mirrored run has no seq".to_owned(),
            })?
        };
        file.seek(SeekFrom::Start(complete))
            .map_err(|e| io_error(&path, "cannot seek", &e))?;
        Ok(Self {
            file,
            path,
            last_seq,
        })
    }

    /// Appends `line` if it is the next one; says so when the file already holds it, or when
    /// lines are missing before it.
    fn append(&mut self, seq: Seq, line: &[u8]) -> Result<Appended, NatsError> {
        if seq <= self.last_seq {
            return Ok(Appended::Held);
        }
        if seq != self.last_seq + 1 {
            return Ok(Appended::Gap(format!(
                "gap in the stream: line {seq} follows line {} (were events removed by the \
                 stream's limits?); {} keeps the lines before it",
                self.last_seq,
                self.path.display()
            )));
        }
        self.file
            .write_all(line)
            .map_err(|e| io_error(&self.path, "cannot append", &e))?;
        self.last_seq = seq;
        Ok(Appended::Written)
    }
}

/// What [`RunFile::append`] did with a line.
enum Appended {
    Written,
    /// The file holds it already (a restart).
    Held,
    /// Lines are missing before it: why.
    Gap(String),
}

/// The start of a mirror consumer's description; the directory it mirrors into follows.
const MIRRORS_INTO: &str = "transcript mirror into ";

/// Makes sure the consumer's acknowledgements describe this directory (its description names
/// the directory it mirrors into), when the directory holds no run file while the consumer
/// acknowledged messages: for another directory it is refused (those lines are not here); for
/// this one (emptied, made again) it is deleted, so everything comes again. One of an earlier
/// version (no directory in its description) is used as it is.
async fn claim_consumer(store: &NatsStore, options: &MirrorOptions) -> Result<(), NatsError> {
    let here = mirror_dir(options)?;
    let error =
        |e: &dyn std::fmt::Display| store.js_error(format!("consumer {}", options.consumer), e);
    let info = match store.stream.consumer_info(&options.consumer).await {
        Ok(info) => info,
        Err(e) if e.kind() == ConsumerInfoErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(error(&e)),
    };
    let theirs = info.config.description.as_deref();
    match theirs.and_then(|d| d.strip_prefix(MIRRORS_INTO)) {
        // Nothing acknowledged yet, or run files here (this directory, maybe moved since).
        _ if info.ack_floor.stream_sequence == 0 || holds_a_run(&options.dir)? => Ok(()),
        Some(dir) if dir != here => Err(error(&format!(
            "it mirrors into {dir}, and {here} holds no run file: mirror here with a consumer \
             of its own (--consumer NAME), or delete consumer {} to mirror everything here",
            options.consumer
        ))),
        Some(_) => store
            .stream
            .delete_consumer(&options.consumer)
            .await
            .map(drop)
            .map_err(|e| error(&e)),
        None => Ok(()),
    }
}

/// Whether `dir` holds a run file.
fn holds_a_run(dir: &Path) -> Result<bool, NatsError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| io_error(dir, "cannot read the mirror directory", &e))?;
    Ok(entries
        .filter_map(Result::ok)
        .any(|e| RunId::from_file_name(&e.path()).is_some()))
}

/// The mirror directory's canonical path, as a consumer's description names it.
fn mirror_dir(options: &MirrorOptions) -> Result<String, NatsError> {
    options
        .dir
        .canonicalize()
        .map(|p| p.display().to_string())
        .map_err(|e| io_error(&options.dir, "cannot resolve the mirror directory", &e))
}

/// The durable consumer of `options`, reset to its ack floor (what a killed mirror had
/// delivered but not acknowledged comes again, now).
async fn open_consumer(
    store: &NatsStore,
    options: &MirrorOptions,
) -> Result<PullConsumer, NatsError> {
    let consumer = store
        .stream
        .get_or_create_consumer(
            &options.consumer,
            pull::Config {
                durable_name: Some(options.consumer.clone()),
                description: Some(format!("{MIRRORS_INTO}{}", mirror_dir(options)?)),
                filter_subject: format!("{SUBJECT_PREFIX}>"),
                deliver_policy: DeliverPolicy::All,
                ack_policy: AckPolicy::All,
                ack_wait: Duration::from_secs(30),
                max_ack_pending: -1,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| store.js_error(format!("consumer {}", options.consumer), e))?;
    store
        .stream
        .reset_consumer(&options.consumer, None)
        .await
        .map_err(|e| store.js_error(format!("resetting consumer {}", options.consumer), e))?;
    Ok(consumer)
}

/// [`open_consumer`], its JetStream errors retried (50 ms apart, doubling up to 1 s) until
/// `ack_timeout × publish_attempts` has passed: on a cluster a consumer just created may not
/// have its leader yet, and resetting it times out meanwhile.
async fn open_consumer_patiently(
    store: &NatsStore,
    options: &MirrorOptions,
) -> Result<PullConsumer, NatsError> {
    let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(50);
    loop {
        match open_consumer(store, options).await {
            Ok(consumer) => return Ok(consumer),
            Err(NatsError::JetStream { .. }) if tokio::time::Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The files of one mirror pass.
struct Files<'a> {
    dir: &'a Path,
    open: HashMap<RunId, RunFile>,
    report: MirrorReport,
    touched: BTreeSet<RunId>,
}

impl Files<'_> {
    /// Writes one message's line to its run's file, unless the file holds it already.
    fn take(&mut self, subject: &str, line: &[u8]) -> Result<(), NatsError> {
        let Some(run_id) = subject
            .strip_prefix(SUBJECT_PREFIX)
            .and_then(|s| RunId::parse(s).ok())
        else {
            return Ok(());
        };
        let seq = line_seq(line).ok_or_else(|| NatsError::Io {
            path: subject.to_owned(),
            message: "a message is not a transcript line".to_owned(),
        })?;
        if self.report.incomplete.contains_key(&run_id) {
            return Ok(());
        }
        if !self.open.contains_key(&run_id) && self.open.len() >= MAX_OPEN_FILES {
            // Synced before closed: what the next ack covers is on disk all the same.
            self.sync()?;
            self.open.clear();
        }
        let file = match self.open.entry(run_id) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(RunFile::open(self.dir, run_id)?)
            }
        };
        match file.append(seq, line)? {
            Appended::Written => {
                self.report.written += 1;
                self.touched.insert(run_id);
            }
            Appended::Held => self.report.skipped += 1,
            Appended::Gap(why) => {
                // A run whose first line is gone gets no file (the open made an empty one).
                if file.last_seq == 0 {
                    let path = file.path.clone();
                    self.open.remove(&run_id);
                    std::fs::remove_file(&path)
                        .map_err(|e| io_error(&path, "cannot remove an empty run file", &e))?;
                }
                self.report.incomplete.insert(run_id, why);
            }
        }
        self.report.runs.insert(run_id);
        Ok(())
    }

    /// One fetch: its lines written, synced, then acknowledged. Whether the pass is over:
    /// caught up (without `follow`), or runs found incomplete (with it).
    async fn batch(
        &mut self,
        store: &NatsStore,
        consumer: &PullConsumer,
        options: &MirrorOptions,
    ) -> Result<bool, NatsError> {
        let mut batch = consumer
            .fetch()
            .max_messages(options.batch)
            .expires(Duration::from_millis(500))
            .messages()
            .await
            .map_err(|e| store.js_error("fetching", e))?;
        let mut last = None;
        let mut pending = 0;
        while let Some(message) = batch.next().await {
            let message = message.map_err(|e| store.js_error("fetching", e))?;
            self.take(message.subject.as_str(), &message.payload)?;
            pending = message.info().map(|i| i.pending).unwrap_or(0);
            last = Some(message);
        }
        // Synced before acknowledged: an acknowledged line is on disk.
        self.sync()?;
        let Some(message) = last else {
            return Ok(!options.follow);
        };
        message
            .double_ack_with(AckKind::Ack)
            .await
            .map_err(|e| store.js_error("acknowledging", e))?;
        let caught_up = !options.follow && pending == 0;
        Ok(caught_up || options.follow && !self.report.incomplete.is_empty())
    }

    /// Syncs the files written since the last sync.
    fn sync(&mut self) -> Result<(), NatsError> {
        for run_id in std::mem::take(&mut self.touched) {
            if let Some(file) = self.open.get(&run_id) {
                file.file
                    .sync_data()
                    .map_err(|e| io_error(&file.path, "cannot sync", &e))?;
            }
        }
        Ok(())
    }
}

/// Mirrors the stream of `store` into `options.dir` (see the module docs). Returns once caught
/// up (no message pending); with `follow`, only when an error stops it or when a batch found
/// runs incomplete ([`MirrorReport::incomplete`]), so the caller can say so and call again.
/// Following, a JetStream error (the servers restarting) is retried from the consumer's ack
/// floor until `ack_timeout × publish_attempts` passed without a batch going through.
/// A consumer that acknowledged messages for another directory is refused; one whose own
/// directory holds no run file any more is deleted first, so everything is mirrored again.
pub async fn mirror(store: &NatsStore, options: &MirrorOptions) -> Result<MirrorReport, NatsError> {
    if !MirrorOptions::valid_consumer(&options.consumer) {
        return Err(store.js_error(
            format!("consumer {:?}", options.consumer),
            "a consumer name holds letters, digits, '-' and '_' only",
        ));
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&options.dir)
        .map_err(|e| io_error(&options.dir, "cannot create the mirror directory", &e))?;
    claim_consumer(store, options).await?;
    let mut consumer = open_consumer_patiently(store, options).await?;
    let mut files = Files {
        dir: &options.dir,
        open: HashMap::new(),
        report: MirrorReport::default(),
        touched: BTreeSet::new(),
    };
    let budget = store.options.ack_timeout * store.options.publish_attempts.max(1);
    let mut failing_since = None;
    loop {
        let error = match files.batch(store, &consumer, options).await {
            Ok(true) => return Ok(files.report),
            Ok(false) => {
                failing_since = None;
                continue;
            }
            Err(e) => e,
        };
        // Following, servers going away (a restart) are waited out: the consumer is opened
        // again at its ack floor, and the files skip the lines they hold.
        let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
        let transient = matches!(error, NatsError::JetStream { .. });
        if !(options.follow && transient && since.elapsed() < budget) {
            return Err(error);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Ok(again) = open_consumer(store, options).await {
            consumer = again;
        }
    }
}
