//! `import` into NATS storage (#52 item 3), against real nats-servers started on free loopback
//! ports and stopped by PID: a real Claude Code session log
//! (`$TRANSCRIPT_REAL_FIXTURES/claude-code/spotter-session-log-v2.1.38-subagent.jsonl`)
//! imported into NATS is byte for byte its import into a directory (read back by `mirror`),
//! gapless and in seq order, and `receipts --by day` bills the same; importing it again, or by
//! file after `--store`, writes no second run; a grown session file appends only what is new;
//! on a 3-node cluster with three replicas too; and a stream that refuses events mid-import
//! makes the import fail, never report success.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, text};
use transcript_nats::testing;

const LOG: &str = "spotter-session-log-v2.1.38-subagent.jsonl";

fn ok(o: Output) -> String {
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout)
}

/// `import claude <args>` into `storage`, deterministic (the same run ids and clock on
/// files and on NATS), with the store at `config/projects`.
fn import(storage: &str, config: &Path, args: &[&str]) -> Output {
    let mut c = bin();
    c.env("CLAUDE_CONFIG_DIR", config)
        .args(["import", "--deterministic", "--storage", storage, "claude"])
        .args(args);
    c.output().unwrap()
}

/// Every run's lines as `mirror` copies them from the stream into `dir`.
fn mirrored(url: &str, dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut c = bin();
    c.args(["mirror", url, "--to"]).arg(dir);
    ok(c.output().unwrap());
    runs_of(dir)
}

/// Every transcript of a storage directory by file name, with its bytes.
fn runs_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut runs: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    runs.sort();
    runs
}

/// The seqs of a transcript's lines, in file order.
fn seqs(bytes: &[u8]) -> Vec<u64> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// `receipts --by <by> --json` on `storage`.
fn bill_by(storage: &str, by: &str) -> serde_json::Value {
    let mut c = bin();
    c.args(["receipts", "--by", by, "--json", "--storage", storage]);
    serde_json::from_str(&ok(c.output().unwrap())).unwrap()
}

/// A Claude store holding `lines` of the log as one session file; its path.
fn session(config: &Path, lines: &[&str]) -> PathBuf {
    let project = config.join("projects/-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    let file = project.join("5c1e0a8e-session.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    file
}

/// The same import steps on files and on NATS give the same transcripts and the same bill.
fn same_as_files(url: &str, files: &Path, tmp: &Path) {
    let on_nats = mirrored(url, &tmp.join("mirror"));
    let on_files = runs_of(files);
    assert!(!on_files.is_empty());
    assert_eq!(
        on_nats.iter().map(|r| &r.0).collect::<Vec<_>>(),
        on_files.iter().map(|r| &r.0).collect::<Vec<_>>()
    );
    for ((name, nats), (_, file)) in on_nats.iter().zip(&on_files) {
        let s = seqs(nats);
        assert_eq!(
            s,
            (1..=s.len() as u64).collect::<Vec<_>>(),
            "{name}: gapless, in order"
        );
        assert!(nats == file, "{name}: NATS differs from the file import");
    }
    // The same receipts wherever the runs live (#59 item 5): an imported session groups by
    // its session and project on NATS as on files.
    for by in ["day", "month", "session", "project", "model"] {
        let (nats, file) = (bill_by(url, by), bill_by(&files.display().to_string(), by));
        assert_eq!(nats, file, "--by {by}");
    }
}

#[test]
fn a_claude_log_imported_into_nats_is_its_file_import_and_bills_the_same_once() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/IMPORTS", server.url());
    let files = tmp.path().join("files");
    let config = tmp.path().join("claude");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let session = session(&config, &lines);
    let file_arg = session.to_str().unwrap();
    for storage in [url.as_str(), files.to_str().unwrap()] {
        // The store, then the same file by path, then the store again: one run.
        let first = ok(import(storage, &config, &["--store"]));
        assert!(first.trim_end().ends_with("\tnew"), "{first}");
        let run = first.split('\t').next().unwrap().to_owned();
        if storage == url {
            // The location it prints is the one every command prints, and `show` opens it.
            let location = first.split('\t').nth(2).unwrap();
            assert_eq!(location, format!("{url}#{run}"));
            ok(bin().args(["show", location]).output().unwrap());
        }
        let again = ok(import(storage, &config, &[file_arg]));
        assert!(again.starts_with(&run), "{again}");
        let store = ok(import(storage, &config, &["--store"]));
        assert!(store.trim_end().ends_with("\tunchanged"), "{store}");
    }
    same_as_files(&url, &files, tmp.path());
    // One run, open on both (a session imported from the store may grow), as `list`, `show`
    // and `tree` say through the read port.
    let status = |storage: &str| {
        let mut list = bin();
        list.args(["list", "--json", "--storage", storage]);
        let listed: serde_json::Value = serde_json::from_str(&ok(list.output().unwrap())).unwrap();
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
        let mut tree = bin();
        tree.args(["tree", "--json", "latest", "--storage", storage]);
        let tree: serde_json::Value = serde_json::from_str(&ok(tree.output().unwrap())).unwrap();
        (listed[0]["status"].clone(), tree["open_session"].clone())
    };
    let open = (serde_json::json!("open"), serde_json::json!(true));
    assert_eq!(status(&url), open);
    assert_eq!(status(files.to_str().unwrap()), open);
}

#[test]
fn a_grown_session_file_appends_only_what_is_new_on_nats_as_on_files() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/GROWN", server.url());
    let files = tmp.path().join("files");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines.len() / 2;
    for storage in [url.as_str(), files.to_str().unwrap()] {
        let config = tmp.path().join(format!("claude-{}", storage.len()));
        session(&config, &lines[..cut]);
        let first = ok(import(storage, &config, &["--store"]));
        assert!(first.trim_end().ends_with("\tnew"), "{first}");
        session(&config, &lines);
        let grown = ok(import(storage, &config, &["--store"]));
        assert!(grown.trim_end().ends_with("\tappended"), "{grown}");
    }
    same_as_files(&url, &files, tmp.path());
}

#[test]
fn a_file_imported_into_a_three_node_cluster_is_replicated_and_its_file_import() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    let Some(nodes) = testing::cluster(3).expect("nats-server cluster") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("{}/CLUSTER", testing::urls(&nodes));
    let files = tmp.path().join("files");
    for storage in [url.as_str(), files.to_str().unwrap()] {
        let mut c = bin();
        c.env("TRANSCRIPT_NATS_REPLICAS", "3")
            .args(["import", "--deterministic", "--storage", storage, "claude"])
            .arg(&log);
        let out = ok(c.output().unwrap());
        assert!(out.contains("\tclaude\t"), "{out}");
    }
    same_as_files(&url, &files, tmp.path());
    // Created as a runner creates it: three copies of each event.
    let mut c = bin();
    c.env("TRANSCRIPT_NATS_REPLICAS", "3")
        .args(["import", "--deterministic", "--storage", &url, "claude"])
        .arg(&log);
    let again = ok(c.output().unwrap());
    assert!(again.contains("\tclaude\t"), "{again}");
    let mut c = bin();
    c.env("TRANSCRIPT_NATS_REPLICAS", "5")
        .args(["import", "--storage", &url, "claude"])
        .arg(&log);
    let refused = c.output().unwrap();
    assert!(!refused.status.success());
}

#[test]
fn an_import_whose_events_the_servers_refuse_midway_fails_and_never_says_done() {
    let Some(log) = common::real_fixture("claude-code", LOG) else {
        return;
    };
    // Servers whose JetStream holds 64 KiB: they store the run's first events and refuse the
    // rest (insufficient resources), as servers that stop answering fail each publish.
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("small.conf");
    std::fs::write(&conf, "jetstream { max_file_store: 64KB }\n").unwrap();
    let Some(server) = testing::single_with(&["-c", conf.to_str().unwrap()]).expect("nats-server")
    else {
        return;
    };
    let mut server = server;
    let url = format!("{}/SMALL", server.url());
    let import = |url: &str| {
        let mut c = bin();
        c.env("TRANSCRIPT_NATS_ACK_TIMEOUT_MS", "500")
            .env("TRANSCRIPT_NATS_PUBLISH_ATTEMPTS", "2")
            .args(["import", "--deterministic", "--storage", url, "claude"])
            .arg(&log);
        c.output().unwrap()
    };
    let out = import(&url);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(4), "{stdout}{stderr}");
    assert!(stdout.is_empty(), "reported as imported: {stdout}");
    assert!(stderr.contains("publishing event"), "{stderr}");
    assert!(stderr.contains("of run "), "{stderr}");
    assert!(!stderr.contains("transcript: imported "), "{stderr}");

    // The servers come back with room; the import again: what the first left half written is
    // rolled back, and the store holds what a clean import writes (#59 item 4).
    server.kill();
    std::fs::write(&conf, "jetstream { max_file_store: 64MB }\n").unwrap();
    server.restart().unwrap();
    ok(import(&url));
    let Some(clean) = testing::single().expect("nats-server") else {
        return;
    };
    let clean_url = format!("{}/SMALL", clean.url());
    ok(import(&clean_url));
    let recovered = mirrored(&url, &tmp.path().join("recovered"));
    assert!(!recovered.is_empty());
    assert!(recovered == mirrored(&clean_url, &tmp.path().join("clean")));
    let mut list = bin();
    list.args(["list", "--all", "--json", "--storage", &url]);
    let listed: serde_json::Value = serde_json::from_str(&ok(list.output().unwrap())).unwrap();
    let statuses: Vec<_> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].clone())
        .collect();
    assert_eq!(statuses.len(), recovered.len(), "{listed}");
    assert!(
        !statuses.contains(&serde_json::json!("abandoned")),
        "{listed}"
    );
}
