//! Gemini CLI's turns, held until the CLI exited and then given the model and usage of each
//! from the CLI's own session file (#41 item 9).
//!
//! Why hold: Gemini CLI's `stream-json` names no model per turn (`auto` when it routes) and
//! bills the run once, per model, at its end; the transcript is append-only, so a turn
//! recorded early could never be corrected. The CLI's tool calls and results are still
//! recorded as they happen; only its `message.assistant` turns wait for the exit (the turn
//! that asked for a tool was already recorded after the tool's result before: a turn is
//! complete only once its results are in).
//!
//! The file: `<home>/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`, `<home>` being
//! the CLI's (`GEMINI_CLI_HOME`, else `HOME`: the step's `env:` first, then the runner's; the
//! MCP wiring's private home links the user's `tmp`), `<id8>` the first 8 characters of the
//! session id the stream's `init` announced; the one whose first record names that session
//! is read. It is read bounded ([`MAX_SESSION_BYTES`], at most [`MAX_ENTRIES`] directory
//! entries looked at), `O_NOFOLLOW | O_NONBLOCK` and only when it is a regular file, so a
//! symlink, a FIFO, a device or a huge file is refused. Whatever goes wrong (no session id,
//! no file, a file that does not agree with the stream:
//! [`transcript_providers::SessionMismatch`]) never fails the step: the turns are recorded
//! as the stream had them, with a warning in the step's result saying why.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use transcript_domain::MessagePayload;
use transcript_providers::gemini_turns_from_session;

/// Most bytes of a session file read (a longer one is refused).
pub(crate) const MAX_SESSION_BYTES: u64 = 64 << 20;

/// Most entries looked at in one directory (projects, then chats of a project).
pub(crate) const MAX_ENTRIES: usize = 4096;

/// A Gemini CLI run's turns and session id, as its stream gave them.
#[derive(Debug, Default)]
pub(crate) struct Held {
    /// The session id of the stream's `init`.
    pub(crate) session_id: Option<String>,
    /// The turns the normalizer emitted, in order.
    pub(crate) turns: Vec<MessagePayload>,
}

impl Held {
    /// The turns to record, each with its model and usage from the session file when it can
    /// be read and agrees; else the stream's turns and the warning saying why.
    pub(crate) async fn release(
        self,
        env: &BTreeMap<String, String>,
    ) -> (Vec<MessagePayload>, Option<String>) {
        if self.turns.is_empty() {
            return (self.turns, None);
        }
        let Some(id) = self.session_id else {
            return (self.turns, Some(warning("its stream named no session")));
        };
        let home = home(env);
        let lookup = id.clone();
        let read = tokio::task::spawn_blocking(move || match home {
            Some(home) => read_session(&home, &lookup),
            None => Err("no HOME or GEMINI_CLI_HOME".to_owned()),
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        let corrected = read.and_then(|bytes| {
            gemini_turns_from_session(&self.turns, &id, &bytes).map_err(|e| e.to_string())
        });
        match corrected {
            Ok(turns) => (turns, None),
            Err(why) => (self.turns, Some(warning(&why))),
        }
    }
}

fn warning(why: &str) -> String {
    format!(
        "Gemini CLI's session file not used ({why}): its turns keep the stream's model and usage"
    )
}

/// The home Gemini CLI used: `GEMINI_CLI_HOME`, else `HOME`, each from `env` (the step's)
/// first, then the runner's environment; empty values do not count.
pub(crate) fn home(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let var = |k: &str| {
        env.get(k)
            .cloned()
            .or_else(|| std::env::var(k).ok())
            .filter(|v| !v.is_empty())
    };
    var("GEMINI_CLI_HOME")
        .or_else(|| var("HOME"))
        .map(PathBuf::from)
}

/// The bytes of session `session_id`'s file under `home` (see the module docs), or why
/// there are none.
pub(crate) fn read_session(home: &Path, session_id: &str) -> Result<Vec<u8>, String> {
    let id8: String = session_id.chars().take(8).collect();
    let suffixes = [format!("-{id8}.jsonl"), format!("-{id8}.json")];
    let tmp = home.join(".gemini").join("tmp");
    let projects = std::fs::read_dir(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let mut candidates = Vec::new();
    for project in projects.take(MAX_ENTRIES).flatten() {
        let Ok(files) = std::fs::read_dir(project.path().join("chats")) else {
            continue;
        };
        for file in files.take(MAX_ENTRIES).flatten() {
            let name = file.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("session-") && suffixes.iter().any(|s| name.ends_with(s.as_str())) {
                candidates.push(file.path());
            }
        }
    }
    candidates.sort();
    let mut why = Vec::new();
    for path in candidates {
        match read_bounded(&path) {
            Ok(bytes) if first_session_id(&bytes).as_deref() == Some(session_id) => {
                return Ok(bytes);
            }
            Ok(_) => why.push(format!("{} is another session's", path.display())),
            Err(e) => why.push(format!("{}: {e}", path.display())),
        }
    }
    if why.is_empty() {
        why.push(format!(
            "no file of session {session_id} under {}",
            tmp.display()
        ));
    }
    Err(why.join("; "))
}

/// The `sessionId` of a session file's first record (first line, or the whole document).
fn first_session_id(bytes: &[u8]) -> Option<String> {
    let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_slice(first)
        .or_else(|_| serde_json::from_slice(bytes))
        .ok()?;
    v["sessionId"].as_str().map(str::to_owned)
}

/// A regular file's bytes, at most [`MAX_SESSION_BYTES`]; a symlink is never followed and a
/// FIFO never waited on.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "a symlink, not followed".to_owned(),
            _ => e.to_string(),
        })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".to_owned());
    }
    if meta.len() > MAX_SESSION_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_SESSION_BYTES} read",
            meta.len()
        ));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SESSION_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_SESSION_BYTES {
        return Err(format!("grew past the {MAX_SESSION_BYTES} bytes read"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use transcript_providers::{Output, Provider, normalize};

    const ID: &str = "a90f1604-11b0-4cd4-af34-8d53f845c569";
    const PRO: &str = "gemini-3.1-pro-preview";
    const LITE: &str = "gemini-3.5-flash-lite";

    /// Gemini CLI 0.61's stream-json of a routed run: one tool call, then the answer; the
    /// models' totals (pro: two requests; flash-lite: the classifier's).
    fn stream() -> String {
        [
            format!(r#"{{"type":"init","session_id":"{ID}","model":"auto"}}"#),
            r#"{"type":"message","role":"user","content":"Read notes.txt."}"#.to_owned(),
            r#"{"type":"tool_use","tool_name":"read_file","tool_id":"read_1","parameters":{"file_path":"notes.txt"}}"#.to_owned(),
            r#"{"type":"tool_result","tool_id":"read_1","status":"success","output":""}"#.to_owned(),
            r#"{"type":"message","role":"assistant","content":"Done.","delta":true}"#.to_owned(),
            format!(
                r#"{{"type":"result","status":"success","stats":{{"total_tokens":3262,"input_tokens":3200,"output_tokens":62,"cached":1600,"models":{{"{PRO}":{{"total_tokens":2850,"input_tokens":2800,"output_tokens":50,"cached":1600}},"{LITE}":{{"total_tokens":412,"input_tokens":400,"output_tokens":12,"cached":0}}}}}}}}"#
            ),
        ]
        .join("\n")
    }

    /// The CLI's session file of that run (each message written again when it grows).
    fn session_lines(id: &str) -> Vec<String> {
        let read = |calls: &str| {
            format!(
                r#"{{"id":"m1","type":"gemini","content":"","tokens":{{"input":1500,"output":45,"cached":300,"thoughts":0,"tool":0,"total":1545}},"model":"{PRO}"{calls}}}"#
            )
        };
        vec![
            format!(
                r#"{{"sessionId":"{id}","projectHash":"h","startTime":"t","lastUpdated":"t","kind":"main"}}"#
            ),
            r#"{"id":"u1","type":"user","content":[{"text":"Read notes.txt."}]}"#.to_owned(),
            read(""),
            read(
                r#","toolCalls":[{"id":"read_1","name":"read_file","args":{"file_path":"notes.txt"},"result":[{"functionResponse":{"id":"read_1","name":"read_file","response":{"output":""}}}],"status":"success"}]"#,
            ),
            format!(
                r#"{{"id":"m2","type":"gemini","content":"Done.","tokens":{{"input":1300,"output":5,"cached":1300,"thoughts":0,"tool":0,"total":1305}},"model":"{PRO}"}}"#
            ),
            r#"{"$set":{"lastUpdated":"t2"}}"#.to_owned(),
        ]
    }

    fn held() -> Held {
        let mut held = Held::default();
        for o in normalize(Provider::Gemini, stream().as_bytes()) {
            match o {
                Output::Turn(m) => held.turns.push(m),
                Output::Diagnostic(d) => {
                    if let Some(id) = transcript_providers::gemini_session_id(&d) {
                        held.session_id = Some(id.to_owned());
                    }
                }
                _ => {}
            }
        }
        held
    }

    /// A home with `.gemini/tmp/work/chats/`; the file name for `id`.
    fn home() -> (tempfile::TempDir, PathBuf) {
        let home = tempfile::tempdir().unwrap();
        let chats = home.path().join(".gemini/tmp/work/chats");
        std::fs::create_dir_all(&chats).unwrap();
        let file = chats.join(format!("session-2026-11-28T12-59-{}.jsonl", &ID[..8]));
        (home, file)
    }

    fn env(home: &Path) -> BTreeMap<String, String> {
        BTreeMap::from([("GEMINI_CLI_HOME".to_owned(), home.display().to_string())])
    }

    /// (model, input, output, cache read) of each turn.
    fn rows(turns: &[MessagePayload]) -> Vec<(String, bool, [u64; 3])> {
        turns
            .iter()
            .map(|m| {
                let u = m.usage.clone().unwrap_or_default();
                (
                    m.model.clone().unwrap_or_default(),
                    !m.blocks.is_empty(),
                    [
                        u.input_tokens.unwrap_or(0),
                        u.output_tokens.unwrap_or(0),
                        u.cache_read_tokens.unwrap_or(0),
                    ],
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn each_turn_gets_its_model_and_usage_and_the_classifier_its_own() {
        let (home, file) = home();
        std::fs::write(&file, session_lines(ID).join("\n")).unwrap();
        let (turns, warning) = held().release(&env(home.path())).await;
        assert_eq!(warning, None);
        assert_eq!(
            rows(&turns),
            [
                (PRO.to_owned(), true, [1200, 45, 300]),
                (PRO.to_owned(), true, [0, 5, 1300]),
                (LITE.to_owned(), false, [400, 12, 0]),
            ]
        );
    }

    /// The stream's turns as the normalizer made them (model `auto`, usage per model at
    /// the end), and the warning saying why.
    async fn falls_back(home: &Path, why: &str) {
        let stream = held().turns;
        let (turns, warning) = held().release(&env(home)).await;
        assert_eq!(turns, stream);
        let warning = warning.expect("a warning");
        assert!(warning.contains(why), "{warning}");
    }

    #[tokio::test]
    async fn a_missing_file_falls_back_with_a_warning() {
        let (home, _) = home();
        falls_back(home.path(), "no file of session").await;
        let empty = tempfile::tempdir().unwrap();
        falls_back(empty.path(), ".gemini/tmp").await;
    }

    #[tokio::test]
    async fn a_symlink_to_dev_zero_is_not_followed() {
        let (home, file) = home();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        falls_back(home.path(), "a symlink, not followed").await;
    }

    #[tokio::test]
    async fn a_fifo_is_not_waited_on() {
        let (home, file) = home();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &file,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        falls_back(home.path(), "not a regular file").await;
    }

    #[tokio::test]
    async fn a_huge_file_is_not_read() {
        let (home, file) = home();
        let f = std::fs::File::create(&file).unwrap();
        // Sparse: no disk used.
        f.set_len(MAX_SESSION_BYTES + 1).unwrap();
        falls_back(home.path(), "more than the").await;
    }

    #[tokio::test]
    async fn another_sessions_file_is_not_used() {
        let (home, file) = home();
        let other = format!("{}-0000-0000-0000-000000000000", &ID[..8]);
        std::fs::write(&file, session_lines(&other).join("\n")).unwrap();
        falls_back(home.path(), "another session's").await;
    }

    #[tokio::test]
    async fn a_torn_last_line_costs_only_what_it_held() {
        let (home, file) = home();
        // Torn in the last `$set`: every message is whole.
        let mut lines = session_lines(ID);
        let last = lines.pop().unwrap();
        lines.push(last[..last.len() / 2].to_owned());
        std::fs::write(&file, lines.join("\n")).unwrap();
        let (turns, warning) = held().release(&env(home.path())).await;
        assert_eq!(warning, None);
        assert_eq!(turns.len(), 3);
        // Torn in the answer's record: that message is lost, the turns no longer agree.
        let mut lines = session_lines(ID);
        lines.pop();
        let answer = lines.pop().unwrap();
        lines.push(answer[..answer.len() / 2].to_owned());
        std::fs::write(&file, lines.join("\n")).unwrap();
        falls_back(home.path(), "1 model message(s), the stream 2").await;
    }

    #[tokio::test]
    async fn a_stream_without_a_session_id_falls_back() {
        let mut h = held();
        h.session_id = None;
        let (turns, warning) = h.release(&BTreeMap::new()).await;
        assert_eq!(turns, held().turns);
        assert!(warning.unwrap().contains("named no session"));
    }
}
