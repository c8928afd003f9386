//! The bulk path against the live recorder (issue #29 item 4): every real capture under
//! `$TRANSCRIPT_REAL_FIXTURES` and every fixture of ours under `fixtures/providers`, imported
//! once through [`Via::Recorder`] (the path `import` took before) and once through
//! [`Via::Bulk`] with the deterministic clock and ids, gives byte-identical storages: file
//! imports, and store imports of session files that grow between two imports (appends that
//! continue seqs and a split turn).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::store::{Index, import_store_files};
use super::*;

/// Every file under `dir`, sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Real captures (skipped with a message when unset; under `CI=true` a skip fails).
fn real_fixtures() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("TRANSCRIPT_REAL_FIXTURES") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "under CI=true a skip is a failure: TRANSCRIPT_REAL_FIXTURES is unset"
        );
        eprintln!("skipped: TRANSCRIPT_REAL_FIXTURES is unset");
        return None;
    };
    let dir = PathBuf::from(dir);
    let dir = if dir.is_absolute() {
        dir
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(dir)
    };
    assert!(
        dir.is_dir(),
        "TRANSCRIPT_REAL_FIXTURES names no folder: {}",
        dir.display()
    );
    Some(dir)
}

fn our_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/providers")
}

fn context(storage: &Path, provider: Option<Provider>) -> ImportContext {
    ImportContext {
        storage: storage.to_path_buf(),
        provider,
        mask: None,
        deterministic: true,
        progress: None,
    }
}

/// Every file of `storage` by name, with its bytes.
fn storage_bytes(storage: &Path) -> BTreeMap<String, Vec<u8>> {
    if !storage.exists() {
        return BTreeMap::new();
    }
    files_under(storage)
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(storage).unwrap().display().to_string();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// What a file import reported: per input, the run and events, or the error.
fn file_import(storage: &Path, input: &Path, via: Via) -> Vec<String> {
    let (done, failed) = import_all(&context(storage, None), &[input.to_path_buf()], via);
    let mut seen: Vec<String> = done
        .iter()
        .map(|i| format!("{} {} {} {}", i.run_id, i.provider, i.events, i.status))
        .collect();
    let storage = storage.display().to_string();
    seen.extend(
        failed
            .iter()
            .map(|e| e.to_string().replace(&storage, "<storage>")),
    );
    seen
}

fn assert_same_storage(a: &Path, b: &Path, what: &str) {
    let (x, y) = (storage_bytes(a), storage_bytes(b));
    assert_eq!(
        x.keys().collect::<Vec<_>>(),
        y.keys().collect::<Vec<_>>(),
        "{what}: the same files"
    );
    for (name, bytes) in &x {
        assert!(
            *bytes == y[name],
            "{what}: {name} differs:\n--- recorder\n{}\n--- bulk\n{}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(&y[name])
        );
    }
}

#[test]
fn file_imports_are_byte_identical_through_the_recorder_and_the_bulk_writer() {
    let mut inputs = files_under(&our_fixtures());
    let ours = inputs.len();
    if let Some(real) = real_fixtures() {
        inputs.extend(files_under(&real));
    }
    assert!(ours > 20, "our fixtures are found: {ours}");
    let mut runs = 0;
    for input in &inputs {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let live = file_import(a.path(), input, Via::Recorder);
        let bulk = file_import(b.path(), input, Via::Bulk);
        assert_eq!(live, bulk, "{}", input.display());
        assert_same_storage(a.path(), b.path(), &input.display().to_string());
        runs += storage_bytes(b.path()).len();
    }
    assert!(runs > 20, "most inputs import: {runs} runs");
}

/// A store of `provider` holding, per capture of `folder`, its first `percent` % of lines.
fn write_store(store: &Path, folder: &Path, percent: usize) {
    for (i, src) in files_under(folder).iter().enumerate() {
        let text = std::fs::read_to_string(src).unwrap();
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let keep = lines.len() * percent / 100;
        let dir = store.join(format!("p{}", i % 2)).join("chats");
        std::fs::create_dir_all(&dir).unwrap();
        let name = src.file_name().unwrap().to_string_lossy().into_owned();
        let name = if name.starts_with("session-") {
            name
        } else {
            format!("session-{name}")
        };
        std::fs::write(dir.join(name), lines[..keep].concat()).unwrap();
    }
}

fn store_import(storage: &Path, store: &Path, provider: Provider, via: Via) -> Vec<String> {
    let ctx = context(storage, Some(provider));
    let mut index = Index::load(storage).unwrap();
    let done = import_store_files(&ctx, provider, &[store.to_path_buf()], None, &index, via);
    let mut seen = Vec::new();
    for d in done {
        match d.result {
            Ok((outcome, entry)) => {
                seen.push(format!("{outcome:?}"));
                if let Some(entry) = entry {
                    index.files.insert(d.key, entry);
                }
            }
            Err(e) => seen.push(
                e.to_string()
                    .replace(&storage.display().to_string(), "<storage>"),
            ),
        }
    }
    index.save(storage).unwrap();
    seen
}

#[test]
fn store_imports_that_append_are_byte_identical_through_both_writers() {
    let Some(real) = real_fixtures() else {
        return;
    };
    let folders = [
        ("claude-code", Provider::Claude),
        ("codex", Provider::Codex),
        ("copilot", Provider::Copilot),
        ("gemini", Provider::Gemini),
    ];
    let mut appended = 0;
    for (folder, provider) in folders {
        let store = tempfile::tempdir().unwrap();
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for percent in [40, 70, 100] {
            write_store(store.path(), &real.join(folder), percent);
            let live = store_import(a.path(), store.path(), provider, Via::Recorder);
            let bulk = store_import(b.path(), store.path(), provider, Via::Bulk);
            assert_eq!(live, bulk, "{folder} at {percent} %");
            assert_same_storage(a.path(), b.path(), &format!("{folder} at {percent} %"));
            appended += bulk.iter().filter(|o| o.starts_with("Appended")).count();
        }
    }
    assert!(appended > 5, "grown files were appended to: {appended}");
}
