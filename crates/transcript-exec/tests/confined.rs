//! The file tools are confined by the kernel (#28 item 2): a concurrent swap of a file and a
//! symlink pointing out of the workspace never lets a read or a write through; FIFOs, devices
//! and hard links are refused quickly, without blocking; `read_file` reads at most its cap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use transcript_exec::{CallScope, Emitter, ToolError, ToolRouter};

/// How long a refusal may take before the test calls it a hang.
const QUICK: Duration = Duration::from_secs(10);

struct Fixture {
    _outer: tempfile::TempDir,
    outer: PathBuf,
    ws: PathBuf,
}

/// `outer/ws` is the workspace; `outer/secret.txt` and `outer/victim.txt` lie outside it.
fn fixture() -> Fixture {
    let outer = tempfile::tempdir().unwrap();
    let path = outer.path().canonicalize().unwrap();
    let ws = path.join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(path.join("secret.txt"), "TOP-SECRET-OUTSIDE").unwrap();
    std::fs::write(path.join("victim.txt"), "victim unchanged").unwrap();
    std::fs::create_dir(path.join("outdir")).unwrap();
    std::fs::write(path.join("outdir/secret.txt"), "TOP-SECRET-OUTSIDE").unwrap();
    std::fs::write(path.join("outdir/victim.txt"), "victim unchanged").unwrap();
    Fixture {
        _outer: outer,
        outer: path,
        ws,
    }
}

fn scope(ws: &Path) -> CallScope {
    CallScope::new(
        Emitter::new(None),
        "s",
        0,
        ws.to_path_buf(),
        CancellationToken::new(),
    )
}

/// Calls a tool on a thread of its own with its own runtime and waits at most [`QUICK`] for the
/// answer: a FIFO or a device that blocked the call shows as a timeout, not a hung test.
fn call_bounded(ws: &Path, tool: &'static str, input: Value) -> Result<Value, ToolError> {
    let (tx, rx) = mpsc::channel();
    let ws = ws.to_path_buf();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let router = ToolRouter::with_builtins();
        let out = rt.block_on(router.call_tool(&scope(&ws), tool, input, None));
        let _ = tx.send(out);
    });
    rx.recv_timeout(QUICK)
        .unwrap_or_else(|_| panic!("{tool} did not answer within {QUICK:?}: it blocked"))
}

#[test]
fn a_swapping_symlink_never_lets_a_read_or_a_write_out() {
    let f = fixture();
    let ws = f.ws.clone();
    let stop = Arc::new(AtomicBool::new(false));
    // The attacker: keeps turning `ws/f.txt` into a symlink to the outside secret and back,
    // and `ws/d` into a symlink to an outside directory and back.
    let swapper = {
        let (ws, outer, stop) = (ws.clone(), f.outer.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let tmp = ws.join("f.tmp");
                let _ = std::fs::remove_file(&tmp);
                if swaps.is_multiple_of(2) {
                    std::os::unix::fs::symlink(outer.join("secret.txt"), &tmp).unwrap();
                } else {
                    std::fs::write(&tmp, "inside").unwrap();
                }
                std::fs::rename(&tmp, ws.join("f.txt")).unwrap();
                let dtmp = ws.join("d.tmp");
                let _ = std::fs::remove_file(&dtmp);
                let _ = std::fs::remove_dir_all(&dtmp);
                if swaps.is_multiple_of(2) {
                    std::os::unix::fs::symlink(outer.join("outdir"), &dtmp).unwrap();
                } else {
                    std::fs::create_dir(&dtmp).unwrap();
                }
                let _ = std::fs::remove_dir_all(ws.join("d"));
                let _ = std::fs::remove_file(ws.join("d"));
                let _ = std::fs::rename(&dtmp, ws.join("d"));
                swaps += 1;
            }
            swaps
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let router = ToolRouter::with_builtins();
    let sc = scope(&ws);
    let (mut reads, mut writes, mut ok_reads, mut ok_writes) = (0, 0, 0, 0);
    let mut leaked = Vec::new();
    rt.block_on(async {
        for i in 0..3000 {
            for path in ["f.txt", "d/secret.txt"] {
                reads += 1;
                if let Ok(v) = router
                    .call_tool(&sc, "read_file", json!({ "path": path }), None)
                    .await
                {
                    ok_reads += 1;
                    if v.as_str().unwrap_or_default().contains("SECRET") {
                        leaked.push(format!("read {path}: {v}"));
                    }
                }
            }
            for path in ["f.txt", "d/victim.txt"] {
                writes += 1;
                let content = format!("written {i}");
                if router
                    .call_tool(
                        &sc,
                        "write_file",
                        json!({ "path": path, "content": content }),
                        None,
                    )
                    .await
                    .is_ok()
                {
                    ok_writes += 1;
                }
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!(
        "{swaps} swaps; {reads} reads ({ok_reads} inside), {writes} writes ({ok_writes} inside)"
    );
    assert!(leaked.is_empty(), "outside content read: {leaked:?}");
    for file in ["victim.txt", "outdir/victim.txt"] {
        assert_eq!(
            std::fs::read_to_string(f.outer.join(file)).unwrap(),
            "victim unchanged",
            "{file} was written"
        );
    }
    for file in ["secret.txt", "outdir/secret.txt"] {
        assert_eq!(
            std::fs::read_to_string(f.outer.join(file)).unwrap(),
            "TOP-SECRET-OUTSIDE",
            "{file} was written"
        );
    }
    // The race was real: both states were seen, so some calls got through inside.
    assert!(swaps > 100, "{swaps} swaps");
    assert!(ok_reads > 0 && ok_writes > 0, "{ok_reads} {ok_writes}");
}

#[test]
fn symlinks_are_refused_even_pointing_inside_and_absolute_or_climbing_paths_too() {
    let f = fixture();
    std::fs::write(f.ws.join("real.txt"), "inside").unwrap();
    std::os::unix::fs::symlink(f.ws.join("real.txt"), f.ws.join("alias.txt")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", f.ws.join("zero")).unwrap();
    for path in [
        "alias.txt",
        "zero",
        "../secret.txt",
        "/etc/hostname",
        "sub/../../secret.txt",
    ] {
        let e = call_bounded(&f.ws, "read_file", json!({ "path": path })).unwrap_err();
        assert_eq!(e, ToolError::PathEscapes(path.into()), "{path}");
        let e =
            call_bounded(&f.ws, "write_file", json!({ "path": path, "content": "x" })).unwrap_err();
        assert!(
            matches!(e, ToolError::PathEscapes(_) | ToolError::InvalidInput(_)),
            "{path}: {e}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.join("real.txt")).unwrap(),
        "inside"
    );
    // What stays inside works, `..` included.
    std::fs::create_dir(f.ws.join("sub")).unwrap();
    assert_eq!(
        call_bounded(&f.ws, "read_file", json!({"path": "sub/../real.txt"})).unwrap(),
        json!("inside")
    );
    call_bounded(
        &f.ws,
        "write_file",
        json!({"path": "sub/new.txt", "content": "new"}),
    )
    .unwrap();
    assert_eq!(
        call_bounded(&f.ws, "list_dir", json!({"path": "."})).unwrap(),
        json!(["alias.txt", "real.txt", "sub/", "zero"])
    );
}

#[test]
fn a_fifo_is_refused_at_once_for_reading_and_writing() {
    let f = fixture();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.ws.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let e = call_bounded(&f.ws, "read_file", json!({"path": "pipe"})).unwrap_err();
    assert!(
        matches!(e, ToolError::NotRegular { kind: "a FIFO", .. }),
        "{e}"
    );
    let e = call_bounded(&f.ws, "write_file", json!({"path": "pipe", "content": "x"})).unwrap_err();
    assert!(
        matches!(e, ToolError::NotRegular { kind: "a FIFO", .. }),
        "{e}"
    );
}

#[test]
fn a_device_node_is_refused_without_being_read() {
    let f = fixture();
    // /dev/zero's numbers (1, 5); creating a device node needs CAP_MKNOD.
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        f.ws.join("zero"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(1, 5),
    );
    if let Err(e) = made {
        eprintln!(
            "cannot create a device node here ({e}): the /dev/zero symlink case of \
             symlinks_are_refused_even_pointing_inside_and_absolute_or_climbing_paths_too \
             stands in for it"
        );
        return;
    }
    let e = call_bounded(&f.ws, "read_file", json!({"path": "zero"})).unwrap_err();
    assert!(
        matches!(
            e,
            ToolError::NotRegular {
                kind: "a character device",
                ..
            }
        ),
        "{e}"
    );
    let e = call_bounded(&f.ws, "write_file", json!({"path": "zero", "content": "x"})).unwrap_err();
    assert!(matches!(e, ToolError::NotRegular { .. }), "{e}");
}

#[test]
fn a_hard_link_to_an_outside_file_is_neither_read_nor_written() {
    let f = fixture();
    std::fs::hard_link(f.outer.join("secret.txt"), f.ws.join("linked_secret.txt")).unwrap();
    std::fs::hard_link(f.outer.join("victim.txt"), f.ws.join("linked_victim.txt")).unwrap();
    let e = call_bounded(&f.ws, "read_file", json!({"path": "linked_secret.txt"})).unwrap_err();
    assert!(matches!(e, ToolError::HardLinked { links: 2, .. }), "{e}");
    let e = call_bounded(
        &f.ws,
        "write_file",
        json!({"path": "linked_victim.txt", "content": "overwritten"}),
    )
    .unwrap_err();
    assert!(matches!(e, ToolError::HardLinked { links: 2, .. }), "{e}");
    assert_eq!(
        std::fs::read_to_string(f.outer.join("victim.txt")).unwrap(),
        "victim unchanged"
    );
}

#[test]
fn read_file_reads_at_most_its_cap() {
    let f = fixture();
    // A 64 GiB sparse file: reading it whole would take minutes and all memory.
    let big = std::fs::File::create(f.ws.join("big.bin")).unwrap();
    big.set_len(64 << 30).unwrap();
    drop(big);
    std::fs::write(f.ws.join("small.txt"), "héllo").unwrap();
    let text = call_bounded(&f.ws, "read_file", json!({"path": "big.bin"})).unwrap();
    let text = text.as_str().unwrap();
    let cap = transcript_exec::ProcessLimits::default().max_output_bytes;
    assert!(text.len() <= cap, "{}", text.len());
    assert!(
        text.ends_with(&format!(
            "…[truncated: {} bytes; read_file reads the first {}]",
            64u64 << 30,
            cap - 128
        )),
        "{}",
        &text[text.len() - 80..]
    );
    assert_eq!(
        call_bounded(&f.ws, "read_file", json!({"path": "small.txt"})).unwrap(),
        json!("héllo")
    );
}
