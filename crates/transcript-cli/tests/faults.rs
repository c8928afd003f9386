//! Faults as inputs, through the binary: a full disk, secrets in failure messages, unbounded
//! and hostile inputs. Every case asserts the exit code, that the message names the cause, that
//! the files on disk validate, and that nothing acknowledged is missing.
//!
//! The full-disk cases mount a small tmpfs, which needs root or passwordless sudo (CI has one of them); elsewhere they
//! say they are skipped.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, repo, text};

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
    /// Mounted through sudo: unmounted the same way.
    sudo: bool,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size`: directly as root, else through passwordless `sudo` (a CI
    /// user that `.ci/run` may run as).
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        for sudo in [false, true] {
            let mut cmd = Command::new(if sudo { "sudo" } else { "mount" });
            if sudo {
                cmd.args(["-n", "mount"]);
            }
            let ok = cmd
                .args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size},mode=1777"),
                    "tmpfs",
                ])
                .arg(dir.path())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return Some(Self { dir, sudo });
            }
        }
        eprintln!("skipped: cannot mount a tmpfs here (needs root or passwordless sudo)");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves `free` bytes (about) on the disk.
    fn fill_leaving(&self, free: u64) {
        let stat = Command::new("df")
            .args(["--output=avail", "-B1"])
            .arg(self.path())
            .output()
            .unwrap();
        let avail: u64 = text(&stat.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let fill = avail.saturating_sub(free);
        std::fs::write(self.path().join("filler"), vec![0u8; fill as usize]).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let mut cmd = Command::new(if self.sudo { "sudo" } else { "umount" });
        if self.sudo {
            cmd.args(["-n", "umount"]);
        }
        let _ = cmd.arg(self.dir.path()).status();
    }
}

/// Under CI=true a skip is a failure (CI runs as root, or with the passwordless sudo that
/// `.ci/run` uses to install packages).
fn require_mount() -> bool {
    std::env::var_os("CI").is_some_and(|v| v == "true")
}

fn transcripts(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.strip_suffix(".jsonl"))
                        .is_some_and(|s| transcript_domain::RunId::parse(s).is_ok())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The progress lines on stderr name events only after they are written (write, then
/// broadcast): every `seq` shown for the root run must be in its file.
fn shown_seqs(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter(|l| !l.starts_with('[') && !l.starts_with("transcript:"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn a_full_disk_fails_the_run_with_its_cause_and_keeps_what_was_written_valid() {
    let Some(disk) = SmallDisk::mount("64k") else {
        assert!(
            !require_mount(),
            "under CI (root or passwordless sudo) the tmpfs must mount"
        );
        return;
    };
    let storage = disk.path().join("st");
    std::fs::create_dir(&storage).unwrap();
    disk.fill_leaving(12 * 1024);
    let work = tempfile::tempdir().unwrap();
    let out = bin()
        .current_dir(repo())
        .args([
            "run",
            "fixtures/workflows/demo.yaml",
            "--color",
            "never",
            "--storage",
        ])
        .arg(&storage)
        .arg("--workspace")
        .arg(work.path())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "storage failure: {stderr}");
    assert!(
        stderr.contains("No space left on device") || stderr.contains("os error 28"),
        "the cause is named: {stderr}"
    );
    assert!(
        !stderr.contains(" succeeded"),
        "never reports success: {stderr}"
    );
    let incomplete = stderr
        .matches("error: the transcript is incomplete")
        .count();
    assert_eq!(incomplete, 1, "reported once: {stderr}");
    // What is on disk validates, and holds every event the progress view showed.
    let root = transcripts(&storage)
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(p)
                .map(|t| {
                    t.lines()
                        .next()
                        .is_some_and(|l| !l.contains("parent_run_id"))
                })
                .unwrap_or(false)
        })
        .expect("the root transcript exists");
    let lines = std::fs::read_to_string(&root).unwrap();
    for (i, line) in lines.lines().enumerate() {
        let decoded = transcript_domain::decode_str(line).unwrap();
        assert_eq!(decoded.event.seq, i as u64 + 1, "gapless from 1");
    }
    let written = lines.lines().count() as u64;
    for seq in shown_seqs(&stderr) {
        assert!(
            seq <= written,
            "seq {seq} was shown but not written ({written} lines)"
        );
    }
    let v = bin().arg("validate").arg(&root).output().unwrap();
    assert!(!text(&v.stdout).contains("INVALID"), "{}", text(&v.stdout));
}

#[test]
fn a_full_disk_during_import_writes_nothing_invalid() {
    let Some(disk) = SmallDisk::mount("64k") else {
        assert!(
            !require_mount(),
            "under CI (root or passwordless sudo) the tmpfs must mount"
        );
        return;
    };
    let storage = disk.path().join("st");
    std::fs::create_dir(&storage).unwrap();
    // A Claude stream-json capture of our own, repeated until it is larger than the disk.
    let one = std::fs::read_to_string(
        repo().join("fixtures/providers/claude/scenario-stream-json.jsonl"),
    )
    .unwrap();
    let input = tempfile::NamedTempFile::new().unwrap();
    let body: String = std::iter::repeat_n(one.as_str(), 200).collect();
    std::fs::write(input.path(), body).unwrap();
    disk.fill_leaving(8 * 1024);
    let out = bin()
        .args(["import", "claude"])
        .arg(input.path())
        .arg("--storage")
        .arg(&storage)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("No space left on device") || stderr.contains("os error 28"),
        "the cause is named: {stderr}"
    );
    for file in transcripts(&storage) {
        let v = bin().arg("validate").arg(&file).output().unwrap();
        assert!(!text(&v.stdout).contains("INVALID"), "{}", text(&v.stdout));
    }
}

#[test]
fn messages_about_a_redacted_run_are_masked_too() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHH";
    let wf = dir.path().join("leak.yaml");
    std::fs::write(
        &wf,
        format!("name: leak\nsteps:\n  - name: fail\n    type: command\n    command: \"echo key={secret} >&2; exit 3\"\n"),
    )
    .unwrap();
    let storage = dir.path().join("s");
    let out = bin()
        .args(["run", "--redact", "--color", "never", "--storage"])
        .arg(&storage)
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("sk-ant-"),
        "the kind stays visible: {stderr}"
    );
    assert!(!stderr.contains("AAAABBBB"), "secret on stderr: {stderr}");
    for file in std::fs::read_dir(&storage).unwrap() {
        let body = std::fs::read_to_string(file.unwrap().path()).unwrap();
        assert!(!body.contains("AAAABBBB"), "secret on disk");
    }
}

#[test]
fn validate_refuses_what_is_not_a_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, vec![b'x'; 3 * 1024 * 1024]).unwrap();
    for file in [&empty, &junk] {
        let out = bin().arg("validate").arg(file).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}: {}",
            file.display(),
            text(&out.stdout)
        );
        assert!(
            text(&out.stdout).contains("INVALID"),
            "{}",
            text(&out.stdout)
        );
    }
}

/// Whether the long variants run (`cargo xtask faults` sets it): bigger inputs, more trials.
fn long() -> bool {
    std::env::var_os("TRANSCRIPT_FAULTS_LONG").is_some()
}

/// Runs the binary with `args` under python3's `getrusage(RUSAGE_CHILDREN)`: exit code, stdout,
/// stderr and peak RSS in KiB — the OS's account, not ours.
fn peak_rss(args: &[&str]) -> (Option<i32>, String, String, u64) {
    let script = "import resource, subprocess, sys\n\
                  p = subprocess.run(sys.argv[1:], capture_output=True)\n\
                  sys.stdout.buffer.write(p.stdout)\n\
                  sys.stderr.buffer.write(p.stderr)\n\
                  sys.stderr.write('\\nPEAK_RSS_KIB=%d EXIT=%d\\n' % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode))\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_transcript"))
        .args(args)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    let tail = stderr.rsplit("PEAK_RSS_KIB=").next().unwrap();
    let mut parts = tail.split_whitespace();
    let peak: u64 = parts.next().unwrap().parse().unwrap();
    let code: i32 = parts
        .next()
        .unwrap()
        .trim_start_matches("EXIT=")
        .parse()
        .unwrap();
    (Some(code), text(&out.stdout), stderr, peak)
}

/// Readers stream with the shared line cap: a transcript holding a line far over the cap, and
/// an import of a capture that is one endless record, stay in bounded memory and say what they
/// skipped.
#[test]
fn readers_stay_in_bounded_memory_on_huge_lines() {
    let size_mb: usize = if long() { 400 } else { 64 };
    let dir = tempfile::tempdir().unwrap();
    // seq 1 is fine, line 2 is one huge line, seq 2 follows it.
    let run = "550e8400-e29b-41d4-a716-446655440000";
    let path = dir.path().join(format!("{run}.jsonl"));
    let line = |seq: u64| {
        format!(
            r#"{{"seq":{seq},"run_id":"{run}","type":"step.started","path":"a","iteration":0,"timestamp":"2026-06-08T08:14:42.100Z","payload":{{"name":"a","kind":"command"}}}}"#
        )
    };
    let mut body = line(1).into_bytes();
    body.push(b'\n');
    body.extend(std::iter::repeat_n(b'x', size_mb << 20));
    body.push(b'\n');
    body.extend(line(2).into_bytes());
    body.push(b'\n');
    std::fs::write(&path, body).unwrap();
    let p = path.to_str().unwrap();
    // Far below the line itself: the readers never hold it.
    let bound_kib = 48 * 1024;
    for args in [vec!["tail", p], vec!["validate", p], vec!["stats", p]] {
        let (_, stdout, stderr, peak) = peak_rss(&args);
        assert!(
            peak < bound_kib,
            "{args:?}: peak RSS {peak} KiB for a {size_mb} MB line"
        );
        assert!(
            stderr.contains("line 2") || stdout.contains(":2:"),
            "{args:?} names the skipped line: {stdout}{stderr}"
        );
    }
    // An import of a capture that is one endless record: bounded too, and it says so.
    let capture = dir.path().join("endless.jsonl");
    let mut body = b"{\"type\":\"assistant\",\"x\":\"".to_vec();
    body.extend(std::iter::repeat_n(b'a', size_mb << 20));
    std::fs::write(&capture, body).unwrap();
    let storage = dir.path().join("st");
    let (code, _, stderr, peak) = peak_rss(&[
        "import",
        "claude",
        capture.to_str().unwrap(),
        "--storage",
        storage.to_str().unwrap(),
    ]);
    assert!(
        peak < bound_kib,
        "import: peak RSS {peak} KiB for a {size_mb} MB record"
    );
    assert_eq!(code, Some(3), "nothing to import: {stderr}");
    assert!(stderr.contains("malformed"), "{stderr}");
}

/// SIGTERM during parallel steps whose commands started grandchildren: the run is cancelled
/// cleanly and no process of the run survives.
#[test]
fn sigterm_leaves_no_process_of_the_run_behind() {
    use std::io::BufRead;
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // The storage beside the workspace, not in it (a confined step cannot create entries
    // directly in a workspace that holds the storage).
    let store = tempfile::tempdir().unwrap();
    let wf = dir.path().join("tree.yaml");
    std::fs::write(
        &wf,
        "name: tree\nsteps:\n  - name: fan\n    type: parallel\n    branches:\n      - name: a\n        type: command\n        command: \"sleep 300 & echo $! > a.pid; echo a > ready; wait\"\n      - name: b\n        type: command\n        command: \"sh -c 'sleep 300 & echo $! > b.pid; echo b > ready; wait' & wait\"\n",
    )
    .unwrap();
    // The branches announce their grandchildren through a FIFO: the test waits on that fact.
    let ready = dir.path().join("ready");
    assert!(
        Command::new("mkfifo")
            .arg(&ready)
            .status()
            .unwrap()
            .success()
    );
    let mut child = bin()
        .args(["run", "--color", "never", "--storage"])
        .arg(store.path())
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut announced = 0;
    while announced < 2 {
        // Each writer opens, writes a line and closes: reopen after each end of file.
        let fifo = std::io::BufReader::new(std::fs::File::open(&ready).unwrap());
        announced += fifo.lines().count();
    }
    let pids: Vec<String> = ["a.pid", "b.pid"]
        .iter()
        .map(|f| {
            std::fs::read_to_string(dir.path().join(f))
                .unwrap()
                .trim()
                .to_owned()
        })
        .collect();
    let mut stderr = child.stderr.take().unwrap();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let mut rest = String::new();
    // Ends when every holder of the pipe is gone: the run and every process it started.
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{rest}");
    for pid in pids {
        // A process closes its files before it becomes a zombie: the pipe's end says it is
        // exiting, its pidfd turning readable says it has exited (bounded: a survivor fails).
        common::wait_until_exited(&pid, std::time::Duration::from_secs(30));
        // Gone or a zombie nobody reaps (PID 1 here does not): not running either way.
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = state
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next())
            .is_some_and(|s| s != "Z" && s != "X");
        assert!(!running, "grandchild {pid} survived the run: {state}");
    }
    // The grandchildren hold the stderr pipe: had one survived, reading it to the end would
    // have lasted its 300 s.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "a grandchild held the pipe"
    );
}

/// Under umask 0 every file and directory we create is still private, and a symlink planted
/// where the transcript or the audit trail goes is refused, not followed.
#[test]
fn umask_zero_and_planted_symlinks_do_not_widen_or_redirect_anything() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("deep/st");
    let wf = dir.path().join("one.yaml");
    std::fs::write(
        &wf,
        "name: one\nsteps:\n  - name: hi\n    type: command\n    command: \"echo hi\"\n",
    )
    .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 0; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_transcript"))
        .args(["run", "--color", "never", "--storage"])
        .arg(&storage)
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&storage), 0o700);
    assert_eq!(mode(&dir.path().join("deep")), 0o700);
    for file in std::fs::read_dir(&storage).unwrap() {
        let file = file.unwrap().path();
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    // A planted symlink at the audit trail: refused, the target untouched.
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "keep").unwrap();
    let storage2 = dir.path().join("st2");
    std::fs::create_dir(&storage2).unwrap();
    std::os::unix::fs::symlink(&target, storage2.join("audit.jsonl")).unwrap();
    let out = bin()
        .args(["run", "--color", "never", "--storage"])
        .arg(&storage2)
        .arg("--workspace")
        .arg(dir.path())
        .arg(&wf)
        .output()
        .unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    assert!(
        text(&out.stderr).contains("symbolic link"),
        "{}",
        text(&out.stderr)
    );
}
