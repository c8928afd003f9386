//! What a fleet operator types (#59 items 6 and 7), on real servers:
//!
//! - every location a command prints is one `show` and `tail` accept: `run`'s
//!   `nats://…/TRANSCRIPTS#<id>` and the file form `nats://…/TRANSCRIPTS/<id>.jsonl`, without
//!   `--storage` (the location names the store); `tail -f` on a mistyped stream name ends with
//!   exit 4 naming the stream that holds the runs instead of waiting;
//! - the runner reads its token from a file (`TRANSCRIPT_NATS_CREDS_FILE`, or `?creds=PATH`
//!   in the URL), no credential in any environment; a file open to group or others is refused
//!   (exit 4, before any step) naming its mode.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{DEMO_RUN_ID, bin, demo_command, finish, text};
use transcript_nats::testing;

#[test]
fn run_and_import_locations_are_read_by_show_and_tail_and_a_mistyped_stream_ends_tail() {
    let Some(server) = testing::single().expect("nats-server") else {
        return;
    };
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let o = demo_command(Path::new(&url), &tmp.path().join("ws"))
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let printed = format!("{url}/TRANSCRIPTS#{DEMO_RUN_ID}");
    assert!(err.contains(&printed), "{err}");
    for location in [printed, format!("{url}/TRANSCRIPTS/{DEMO_RUN_ID}.jsonl")] {
        for (args, says) in [
            (vec!["show", &location], "succeeded"),
            (vec!["tail", &location], "run.completed"),
        ] {
            // No --storage: the location names the store.
            let o = bin().current_dir(tmp.path()).args(&args).output().unwrap();
            assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
            assert!(
                text(&o.stdout).contains(says),
                "{args:?}: {}",
                text(&o.stdout)
            );
        }
    }

    let typo = format!("{url}/TRANSCRIPTZ");
    let follower = bin()
        .current_dir(tmp.path())
        .args(["tail", "-f", DEMO_RUN_ID, "--storage", &typo])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = finish(
        follower,
        Duration::from_secs(30),
        "tail -f on a mistyped stream",
    );
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("stream TRANSCRIPTS holds the runs"), "{err}");
}

#[test]
fn the_runner_reads_its_token_from_a_file_and_refuses_one_others_can_read() {
    const TOKEN: &str = "fleet-t0ken-from-a-file";
    let tmp = tempfile::tempdir().unwrap();
    let conf = tmp.path().join("server.conf");
    std::fs::write(&conf, format!("authorization {{ token: \"{TOKEN}\" }}\n")).unwrap();
    let Some(server) = testing::single_with(&["-c", conf.to_str().unwrap()]).unwrap() else {
        return;
    };
    let url = server.url();
    let file = tmp.path().join("fleet.token");
    std::fs::write(&file, format!("# the fleet's runner\ntoken={TOKEN}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let no_env = |mut c: std::process::Command| {
        for name in transcript_nats::CREDENTIAL_ENV {
            c.env_remove(name);
        }
        c
    };

    let ws = tmp.path().join("ws");
    let o = no_env(demo_command(Path::new(&url), &ws))
        .env("TRANSCRIPT_NATS_CREDS_FILE", &file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains(TOKEN));
    // The URL form: `?creds=PATH`, read by a reader too.
    let with_creds = format!("{url}?creds={}", file.display());
    let mut list = no_env(bin());
    let o = list
        .args(["list", "--json", "--storage", &with_creds])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(DEMO_RUN_ID));
    // Without the file: refused.
    let o = no_env(bin())
        .args(["list", "--storage", &url])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));

    // A file others can read is refused before any step runs, naming its mode.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ws = tmp.path().join("ws2");
    let o = no_env(demo_command(Path::new(&with_creds), &ws))
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("mode 0644") && err.contains("chmod 600"),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "{err}");
    assert!(!ws.join("greeting.txt").exists());
}
