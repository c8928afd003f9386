//! umask is process-wide, so this test has its own binary: with umask 0 the
//! transcript is still 0o600 and the storage directory 0o700.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;
use rustix::fs::Mode;
use transcript_domain::Recorder;

#[tokio::test]
async fn umask_zero_still_yields_private_modes() {
    rustix::process::umask(Mode::empty());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("storage");
    let run = run_id(1);
    let rec = builder(&dir, run).open().unwrap();
    rec.record(step("a")).await.unwrap();
    rec.close().await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.join(run.file_name())), 0o600);
    assert_eq!(mode(&dir), 0o700);

    // A torn tail's side file too.
    let path = dir.join(run.file_name());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"seq\":2");
    std::fs::write(&path, bytes).unwrap();
    let rec = builder(&dir, run).resume().unwrap();
    drop(rec);
    assert_eq!(mode(&dir.join(format!("{}.torn", run.file_name()))), 0o600);

    // An existing file with loose permissions is tightened.
    let other = run_id(2);
    let loose = dir.join(other.file_name());
    std::fs::write(&loose, b"").unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o666)).unwrap();
    let rec = builder(&dir, other).open().unwrap();
    assert_eq!(mode(&loose), 0o600);
    drop(rec);
}
