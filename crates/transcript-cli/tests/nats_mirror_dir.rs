//! A mirror's durable consumer belongs to one directory (#44). Its acknowledgements say what
//! that directory holds, so a directory emptied (a disk replaced, a mirror rebuilt) or a
//! second directory on the same consumer got nothing and `mirror` said "mirrored 0 runs",
//! exit 0. Now an emptied directory is mirrored again from the start, a moved one goes on, and
//! another directory is refused naming the consumer's own and the way out (`--consumer`).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{DEMO_RUN_ID, bin, demo_command, text};
use transcript_nats::testing;

fn mirror(url: &str, dir: &Path, consumer: Option<&str>) -> std::process::Output {
    let mut c = bin();
    c.args(["mirror", url, "--to"]).arg(dir);
    if let Some(name) = consumer {
        c.args(["--consumer", name]);
    }
    c.output().unwrap()
}

fn runs_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".jsonl")
        })
        .count()
}

#[test]
fn an_emptied_mirror_is_rebuilt_and_another_directory_is_refused() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let o = demo_command(Path::new(&url), &tmp.path().join("ws"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let first = tmp.path().join("first");
    let o = mirror(&url, &first, None);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(runs_in(&first), 3);

    // Emptied (removed and made again): mirrored again from the start.
    std::fs::remove_dir_all(&first).unwrap();
    let o = mirror(&url, &first, None);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("mirrored 3 runs"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(runs_in(&first), 3);
    let root = std::fs::read_to_string(first.join(format!("{DEMO_RUN_ID}.jsonl"))).unwrap();
    assert_eq!(root.lines().count(), 64);

    // Moved: its run files say it is the consumer's directory.
    let moved = tmp.path().join("moved");
    std::fs::rename(&first, &moved).unwrap();
    let o = mirror(&url, &moved, None);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(runs_in(&moved), 3);

    // Another directory on the same consumer: refused, nothing reported as mirrored.
    let second = tmp.path().join("second");
    let o = mirror(&url, &second, None);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{}{err}", text(&o.stdout));
    assert!(err.contains(&first.display().to_string()), "{err}");
    assert!(err.contains("--consumer"), "{err}");
    // With a consumer of its own: everything.
    let o = mirror(&url, &second, Some("second"));
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(runs_in(&second), 3);
}
