//! The runner's credentials stay the runner's (#52 item 7): `NATS_*` are withheld from a run's
//! processes (tests/nats_env_withheld.rs), but the variables the runner was started with stay
//! in its `/proc/<pid>/environ`, which a process of the same user could read
//! (`cat /proc/$PPID/environ` in a command step printed `NATS_TOKEN=…`). On NATS storage the
//! runner makes itself non-dumpable once it has read them: a command step, the `run_command`
//! tool and an agent's shell command, each a child of the runner (its command line, which
//! stays readable, proves it; it is found up the process tree, past the process guard that is
//! each step's parent), are refused its environment, against a real server with a
//! token. With file storage the runner reads no credential and stays dumpable: the same step
//! reads it, so the check can fail. Run as an unprivileged user (`setpriv` to `nobody` when
//! the tests run as root: root reads every process's `/proc`, see README, "A fleet").
#![allow(clippy::unwrap_used)]

mod common;
mod nats_auth_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::text;
use nats_auth_support::server_with_config;

const TOKEN: &str = "tok-91c4e0b27a-runner-proc";

/// The three shapes: each writes the runner's command line (`<shape>.cmd`), its environment
/// (`<shape>.env`) and how reading it went (`<shape>.err`).
fn workflow(dir: &Path) -> std::path::PathBuf {
    let peek = |shape: &str| {
        // The runner: the nearest ancestor running `transcript run` (a step's parent is its
        // process guard, `transcript __netns|__guard`, #59 item 9, whose parent is the runner).
        format!(
            "P=$PPID; while [ \"$P\" -gt 1 ] && \
             [ \"$(tr '\\0' '\\n' < /proc/$P/cmdline | sed -n 2p)\" != run ]; \
             do P=$(awk '/^PPid:/{{print $2}}' /proc/$P/status); done; tr '\\0' ' ' < /proc/$P/cmdline > {shape}.cmd; \
             cat /proc/$P/environ > {shape}.env 2> {shape}.err; echo exit=$? >> {shape}.err"
        )
    };
    let yaml = format!(
        "name: peek\nsteps:\n\
         \x20 - name: step\n    type: command\n    command: {step}\n\
         \x20 - name: tool\n    type: operation\n    tool: run_command\n    input: {{ command: {tool} }}\n\
         \x20 - name: agent\n    type: agent\n    provider: claude\n    prompt: Read your parent.\n    \
         command: [\"sh\", \"-c\", {agent}]\n    continue_on_error: true\n",
        step = serde_json::to_string(&peek("step")).unwrap(),
        tool = serde_json::to_string(&peek("tool")).unwrap(),
        agent = serde_json::to_string(&format!("{}; exit 3", peek("agent"))).unwrap(),
    );
    let path = dir.join("peek.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// `transcript run` of the peeking workflow into `storage`, holding `NATS_TOKEN`, as `nobody`
/// when the tests run as root.
fn run(dir: &Path, storage: &str) -> std::process::Output {
    run_with(dir, storage, &[])
}

fn run_with(dir: &Path, storage: &str, extra: &[&str]) -> std::process::Output {
    let root = rustix::process::geteuid().is_root();
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        c.arg(env!("CARGO_BIN_EXE_transcript"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_transcript"))
    };
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for d in [dir, &ws] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    c.env_remove("TRANSCRIPT_STORAGE")
        .env("NATS_TOKEN", TOKEN)
        .env("TRANSCRIPT_CANARY", "present")
        .current_dir(dir)
        .args(["run", "--deterministic", "--storage", storage])
        .arg(workflow(dir))
        .arg("--workspace")
        .arg(&ws)
        .args(extra);
    c.output().unwrap()
}

fn read(ws: &Path, file: &str) -> String {
    std::fs::read_to_string(ws.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn no_child_of_the_runner_reads_its_environment_on_nats_storage() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = format!("authorization {{ token: \"{TOKEN}\" }}\n");
    let Some(server) = server_with_config(tmp.path(), &conf) else {
        return;
    };
    let dir = tmp.path().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let out = run(&dir, &server.url());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ws = dir.join("ws");
    for shape in ["step", "tool", "agent"] {
        // The process asked its parent, the runner.
        let cmd = read(&ws, &format!("{shape}.cmd"));
        assert!(
            cmd.contains(" run --deterministic --storage "),
            "{shape}: {cmd}"
        );
        let env = read(&ws, &format!("{shape}.env"));
        assert!(!env.contains(TOKEN), "{shape} read the runner's token");
        assert_eq!(env, "", "{shape} read the runner's environment");
        let err = read(&ws, &format!("{shape}.err"));
        assert!(err.contains("Permission denied"), "{shape}: {err}");
        assert!(err.contains("exit=1"), "{shape}: {err}");
    }
}

#[test]
fn with_file_storage_the_runner_stays_readable_so_the_check_can_fail() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let storage = dir.join("storage");
    // Unconfined (#56 opted out) and on the host's network (#57: a process in a user and
    // network namespace of its own may not read the runner's `/proc` either), a step of the
    // same user reads the runner's environment.
    let out = run_with(
        &dir,
        storage.to_str().unwrap(),
        &["--sandbox", "off", "--network", "all"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ws = dir.join("ws");
    for shape in ["step", "tool", "agent"] {
        let env = read(&ws, &format!("{shape}.env"));
        assert!(
            env.contains(&format!("NATS_TOKEN={TOKEN}")),
            "{shape}: {env}"
        );
        assert!(env.contains("TRANSCRIPT_CANARY=present"), "{shape}");
    }
    // Confined (the default), Landlock forbids reading a process outside the step's domain:
    // the runner's environment is out of reach on files too.
    let storage = dir.join("storage-confined");
    for shape in ["step", "tool", "agent"] {
        let _ = std::fs::remove_file(ws.join(format!("{shape}.env")));
    }
    let out = run(&dir, storage.to_str().unwrap());
    assert!(out.status.success(), "{}", text(&out.stderr));
    for shape in ["step", "tool", "agent"] {
        let env = read(&ws, &format!("{shape}.env"));
        assert!(
            !env.contains(TOKEN),
            "{shape} read the runner's token: {env}"
        );
    }
}
