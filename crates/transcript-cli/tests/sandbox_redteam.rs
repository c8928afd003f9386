//! The escapes a red-team review found in the first confinement of #56, each as the attack
//! that worked, now contained: a symlink planted by one step into a path a later step is
//! granted (a declared write, a program), a `PATH` the command sets, the file tools on the
//! storage inside the workspace, capabilities of a root runner, device nodes, another step's
//! `| file` values, terminals, `/run` and `/dev/shm`, a declared path that is `/`, and an
//! agent's state directory given by an input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::sandbox::{Layout, SECRET, step_completed, walk, yq};
use common::{describe, text};

fn stdout_of(l: &Layout, step: &str) -> String {
    step_completed(&l.storage, step)["payload"]["result"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Step 1 (data run by a shell) plants `build/cache -> outside`; step 2 declares
/// `sandbox: { write: [build/cache] }` and reads through it: the declared path inside the
/// workspace is never resolved into a grant.
#[test]
fn a_symlink_planted_into_a_declared_path_leads_nowhere() {
    let l = Layout::new();
    let plant = format!(
        "mkdir -p build && ln -s {} build/cache && printf 'cat build/cache/secret.txt > leak.txt; touch build/cache/MARKER\\n' > build.sh",
        l.outside.display()
    );
    let wf = "name: plant\ninputs: [{name: v}]\nsteps:\n  - name: untrusted\n    type: command\n    command: [sh, -s, --, x]\n    stdin: \"{{ inputs.v }}\"\n  - name: build\n    type: command\n    sandbox: { write: [build/cache] }\n    command: [sh, build.sh]\n    continue_on_error: true\n";
    let out = l.run(wf, &["--input", &format!("v={plant}")]);
    l.assert_contained("planted declared path", &out);
}

/// `./tool` is a symlink (planted in the workspace) to a script outside: running it does
/// not make the outside directory readable or executable.
#[test]
fn a_program_symlink_in_the_workspace_grants_nothing_outside() {
    let l = Layout::new();
    let script = l.outside.join("deploy.sh");
    std::fs::write(&script, format!("#!/bin/sh\ncat {}\n", l.secret())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&script, l.ws.join("tool")).unwrap();
    let wf = "name: tool\nsteps:\n  - name: s\n    type: command\n    command: [\"./tool\"]\n    continue_on_error: true\n";
    let out = l.run(wf, &[]);
    l.assert_contained("program symlink", &out);
}

/// A `PATH` the command sets (literal here; an agent's tool call may choose one) never
/// widens what is granted: only the runner's `PATH` is.
#[test]
fn a_path_the_command_sets_grants_nothing() {
    let l = Layout::new();
    let wf = format!(
        "name: p\nsteps:\n  - name: s\n    type: command\n    env: {{ PATH: {} }}\n    command: 'cat {} > leak.txt; ls {} > list.txt'\n    continue_on_error: true\n",
        yq(&format!("{}:/usr/bin:/bin", l.outside.display())),
        l.secret(),
        l.outside.display()
    );
    let out = l.run(&wf, &[]);
    l.assert_contained("PATH from the command", &out);
    let list = std::fs::read_to_string(l.ws.join("list.txt")).unwrap_or_default();
    assert!(!list.contains("secret.txt"), "{list}");
}

/// With the storage inside the workspace (the default layout), the router's file tools
/// neither read, list nor overwrite a transcript or the audit file.
#[test]
fn the_file_tools_never_reach_the_storage_inside_the_workspace() {
    let l = Layout::new();
    let storage = l.ws.join("storage");
    let first = "name: one\nsteps:\n  - name: s\n    type: command\n    command: \"echo first-run-content\"\n";
    let file = l.ws.parent().unwrap().join("wf.yaml");
    let run = |wf: &str, args: &[&str]| l.run_at(&file, wf, &storage, args);
    let out = run(first, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let transcript = walk(&storage)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "jsonl") && !p.ends_with("audit.jsonl"))
        .unwrap();
    let before = std::fs::read(&transcript).unwrap();
    let rel = transcript
        .strip_prefix(&l.ws)
        .unwrap()
        .display()
        .to_string();
    let spy = "name: two\ninputs: [{name: p, type: path}]\nsteps:\n  - name: read\n    type: operation\n    tool: read_file\n    input: { path: \"{{ inputs.p }}\" }\n    continue_on_error: true\n  - name: list\n    type: operation\n    tool: list_dir\n    input: { path: storage }\n    continue_on_error: true\n  - name: forge\n    type: operation\n    tool: write_file\n    input: { path: \"{{ inputs.p }}\", content: \"FORGED\" }\n    continue_on_error: true\n";
    let out = run(spy, &["--input", &format!("p={rel}")]);
    assert_eq!(
        std::fs::read(&transcript).unwrap(),
        before,
        "not overwritten"
    );
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!all.contains("first-run-content"), "{}", describe(&out));
    assert!(!all.contains("audit.jsonl"), "{}", describe(&out));
}

/// A confined process has no capability, even under a root runner, and makes no device
/// node in its workspace; it reaches no terminal, no `/run`, no `/dev/shm`.
#[test]
fn no_capability_no_device_node_no_terminal_no_run() {
    let l = Layout::new();
    let wf = "name: caps\nsteps:\n  - name: s\n    type: command\n    command: 'grep -E \"^Cap(Eff|Prm|Bnd|Amb)\" /proc/self/status; mknod kmsg c 1 11 2>/dev/null && echo mknod-ok; ls /run >/dev/null 2>&1 && echo run-ok; ls /dev/shm >/dev/null 2>&1 && echo shm-ok; ls /dev/pts >/dev/null 2>&1 && echo pts-ok; (: > /dev/ptmx) 2>/dev/null && echo ptmx-ok; echo done'\n";
    let out = l.run(wf, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = stdout_of(&l, "s");
    for line in stdout.lines().filter(|l| l.starts_with("Cap")) {
        assert!(line.ends_with("0000000000000000"), "{line}\n{stdout}");
    }
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("Cap")).count(),
        4,
        "{stdout}"
    );
    for denied in ["mknod-ok", "run-ok", "shm-ok", "pts-ok", "ptmx-ok"] {
        assert!(!stdout.contains(denied), "{denied}: {stdout}");
    }
    assert!(stdout.contains("done"));
}

/// One step's `| file` value (a secret handed to a deploy step) is not readable by another
/// step that lists the run's file directory.
#[test]
fn a_step_reads_only_its_own_file_values() {
    let l = Layout::new();
    let wf = "name: files\ninputs:\n  - {name: tok, secret: true}\n  - {name: v}\nsteps:\n  - name: deploy\n    type: command\n    command: [sh, -c, 'test -s \"$1\" && echo has-token', sh, \"{{ inputs.tok | file }}\"]\n  - name: untrusted\n    type: command\n    command: [bash, -eo, pipefail, \"{{ inputs.v | file }}\"]\n    continue_on_error: true\n";
    let payload =
        "d=$(dirname \"$0\"); for f in \"$d\"/*; do rev \"$f\" >> leak.txt; done; echo looked";
    let out = l.run(
        wf,
        &[
            "--input",
            &format!("tok={SECRET}"),
            "--input",
            &format!("v={payload}"),
        ],
    );
    assert_eq!(stdout_of(&l, "deploy"), "has-token\n", "{}", describe(&out));
    let reversed: String = SECRET.chars().rev().collect();
    let leak = std::fs::read_to_string(l.ws.join("leak.txt")).unwrap_or_default();
    assert!(!leak.contains(&reversed[..12]), "{leak}");
}

/// A declared path that is `/`, the home directory or holds the storage is refused before
/// the run (exit 2), never granted whole.
#[test]
fn a_declared_path_that_holds_everything_is_refused() {
    for path in ["/", "~", ".."] {
        let l = Layout::new();
        let wf = format!(
            "name: wide\nsteps:\n  - name: s\n    type: command\n    sandbox: {{ write: [{}] }}\n    command: 'touch {}'\n",
            yq(path),
            l.marker()
        );
        let out = l.run(&wf, &[]);
        assert_eq!(out.status.code(), Some(2), "{path}: {}", describe(&out));
        assert!(
            text(&out.stderr).contains("never granted"),
            "{}",
            describe(&out)
        );
        assert!(!std::path::Path::new(&l.marker()).exists());
    }
}

/// Where an agent CLI keeps its state is what it may write: never from an input, a secret
/// one included.
#[test]
fn an_agent_state_directory_is_never_an_input() {
    let l = Layout::new();
    let wf = "name: state\ninputs:\n  - {name: d, secret: true}\nsteps:\n  - name: a\n    type: agent\n    provider: codex\n    prompt: hi\n    env: { CODEX_HOME: \"{{ inputs.d }}\" }\n";
    let out = l.run(wf, &["--input", &format!("d={}", l.outside.display())]);
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("CODEX_HOME"),
        "{}",
        describe(&out)
    );
}

/// A daemon listening on a Unix socket outside the workspace (`docker.sock`, an agent's
/// socket) gets no connection from a confined step, whatever the kernel's Landlock ABI; a
/// private `socketpair` still works.
#[test]
fn no_unix_socket_reaches_a_daemon_outside() {
    let l = Layout::new();
    let sock = l.outside.join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    let wf = format!(
        "name: us\nsteps:\n  - name: s\n    type: command\n    command: [python3, -c, {}]\n",
        yq(&format!(
            "import socket\ntry:\n  s=socket.socket(socket.AF_UNIX); s.connect({:?}); s.send(b'cat secret'); print('connected')\nexcept OSError as e: print('refused', e.errno)\na,b=socket.socketpair(); a.send(b'x'); print('pair', b.recv(1).decode())\n",
            sock.display().to_string()
        ))
    );
    let out = l.run(&wf, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = stdout_of(&l, "s");
    assert!(stdout.contains("refused 13"), "{stdout}");
    assert!(stdout.contains("pair x"), "{stdout}");
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the daemon got a connection"
    );
}

/// A workflow inside the workspace (where an earlier run's step could have rewritten it)
/// cannot widen the sandbox: `sandbox: off` and a declared path outside the workspace are
/// refused before the run, and the files its command lines name are not granted.
#[test]
fn a_workflow_in_the_workspace_widens_nothing() {
    let l = Layout::new();
    let run_in_ws = |wf: &str| l.run_at(&l.ws.join("wf.yaml"), wf, &l.storage, &[]);
    let off = format!(
        "name: w\nsteps:\n  - name: later\n    type: command\n    sandbox: off\n    command: 'touch {}'\n",
        l.marker()
    );
    let out = run_in_ws(&off);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("lies in the workspace"),
        "{}",
        describe(&out)
    );
    let outside = format!(
        "name: w\nsteps:\n  - name: later\n    type: command\n    sandbox: {{ read: [{}] }}\n    command: 'true'\n",
        yq(&l.outside.display().to_string())
    );
    let out = run_in_ws(&outside);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let named = format!(
        "name: w\nsteps:\n  - name: later\n    type: command\n    command: [cat, {}]\n    continue_on_error: true\n",
        yq(&l.secret())
    );
    let out = run_in_ws(&named);
    l.assert_contained("a literal path in a workflow in the workspace", &out);
}
