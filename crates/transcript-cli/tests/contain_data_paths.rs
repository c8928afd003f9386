//! Issue #56 items 2 and 4 through the binary, with a marker path and a secret file outside
//! the workspace (0 markers made, 0 bytes of the secret file read):
//!
//! - a typed `path` through a symlink already in the workspace (to read the secret file, to
//!   write beside it) is refused, naming the input, and so is a `| path` reference;
//! - a typed `path` naming a hidden component (`.git/config`, `.envrc`, `.npmrc`) is refused
//!   unless the input declares `hidden: true`;
//! - free text in `run_command`'s `env:` to make (`make`, `sh -c "make …"`, a shell string
//!   running make, `MAKEFLAGS`) is refused when the workflow loads, as for a command step;
//! - the legitimate uses keep working: `cat` of a typed path, a path into a subdirectory, a
//!   path to a file not written yet, `| file` to `cat`, `env:` to a script that quotes it,
//!   and a typed value to make.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use std::os::unix::fs::symlink;

use common::{describe, text};
use typed_support::Sandbox;

/// What the secret file outside the workspace holds.
const OUTSIDE: &str = "OUTSIDE-CONTENT-k3Jq9";

/// A sandbox whose workspace holds `notes/a.txt`, `ws/away` (a symlink to the directory
/// `outside/`, which holds `secret.txt`), and `ws/leak.txt` (a symlink to that file).
fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    let outside = sb.dir().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), OUTSIDE).unwrap();
    std::fs::create_dir_all(sb.ws().join("notes")).unwrap();
    sb.ws_file("notes/a.txt", "inside\n");
    symlink(&outside, sb.ws().join("away")).unwrap();
    symlink(outside.join("secret.txt"), sb.ws().join("leak.txt")).unwrap();
    sb
}

/// Every byte the run left: its output and every file under the storage.
fn recorded(sb: &Sandbox, out: &std::process::Output) -> String {
    let mut all = text(&out.stdout) + &text(&out.stderr);
    if let Ok(entries) = std::fs::read_dir(sb.st()) {
        for e in entries {
            all.push_str(&String::from_utf8_lossy(
                &std::fs::read(e.unwrap().path()).unwrap(),
            ));
        }
    }
    all
}

const READ_AND_WRITE: &str = r#"name: paths
inputs:
  - { name: src, type: path }
  - { name: dest, type: path }
steps:
  - name: show
    type: command
    command: ["cat", "{{inputs.src}}"]
  - name: copy
    type: command
    command: ["cp", "{{inputs.src}}", "{{inputs.dest}}"]
"#;

#[test]
fn a_typed_path_through_a_symlink_is_refused_naming_the_input() {
    for (src, dest, named) in [
        ("leak.txt", "notes/b.txt", "inputs.src"),
        ("away/secret.txt", "notes/b.txt", "inputs.src"),
        ("notes/a.txt", "away/@M@", "inputs.dest"),
        ("notes/a.txt", "away/new.txt", "inputs.dest"),
    ] {
        let sb = sandbox();
        sb.write_workflow(READ_AND_WRITE, None);
        let dest = dest.replace("@M@", "MARK");
        let out = sb
            .run(&[("src", src), ("dest", &dest)], &[])
            .expect("the run hung");
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{src} {dest}: {}", describe(&out));
        assert!(
            stderr.contains(named) && stderr.contains("symlink"),
            "{src} {dest}: {stderr}"
        );
        assert!(
            !recorded(&sb, &out).contains(OUTSIDE),
            "{src} {dest}: the secret file was read"
        );
        let outside: Vec<_> = std::fs::read_dir(sb.dir().join("outside"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(outside, ["secret.txt"], "{src} {dest}: written outside");
        assert!(!sb.marker().exists());
    }
}

#[test]
fn a_path_reference_through_a_symlink_is_refused_when_rendered() {
    let sb = sandbox();
    sb.write_workflow(
        r#"name: filtered
steps:
  - name: pick
    type: command
    command: ["printf", "%s", "away/secret.txt"]
  - name: show
    type: command
    command: ["cat", "{{ steps.pick.output | path }}"]
"#,
        None,
    );
    let out = sb.run(&[], &[]).expect("the run hung");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("steps.pick.output") && stderr.contains("symlink"),
        "{stderr}"
    );
    assert!(!recorded(&sb, &out).contains(OUTSIDE));
}

#[test]
fn a_typed_path_names_a_hidden_component_only_when_the_input_declares_it() {
    for dest in [
        ".git/config",
        ".envrc",
        "notes/.npmrc",
        ".github/workflows/ci.yml",
    ] {
        let sb = sandbox();
        std::fs::create_dir_all(sb.ws().join(".git")).unwrap();
        sb.ws_file(".git/config", "[core]\n");
        sb.write_workflow(READ_AND_WRITE, None);
        let out = sb
            .run(&[("src", "notes/a.txt"), ("dest", dest)], &[])
            .expect("the run hung");
        assert_eq!(out.status.code(), Some(2), "{dest}: {}", describe(&out));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("inputs.dest") && stderr.contains("hidden"),
            "{dest}: {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(sb.ws().join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!sb.ws().join(".envrc").exists() && !sb.ws().join("notes/.npmrc").exists());
    }
    // Declared: the author means it.
    let sb = sandbox();
    sb.write_workflow(
        &READ_AND_WRITE.replace(
            "{ name: dest, type: path }",
            "{ name: dest, type: path, hidden: true }",
        ),
        None,
    );
    let out = sb
        .run(&[("src", "notes/a.txt"), ("dest", ".envrc")], &[])
        .expect("the run hung");
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(sb.ws().join(".envrc")).unwrap(),
        "inside\n"
    );
}

#[test]
fn legitimate_paths_files_and_env_keep_working() {
    let sb = sandbox();
    sb.ws_file("show.sh", "printf 'got:%s' \"$V\"\n");
    sb.ws_file("Makefile", "all:\n\t@printf 'jobs:%s' '$(J)'\n");
    sb.write_workflow(
        r#"name: legit
inputs:
  - { name: src, type: path }
  - { name: dest, type: path }
  - { name: text }
  - { name: n, type: integer }
steps:
  - name: show
    type: command
    command: ["cat", "{{inputs.src}}"]
  - name: copy
    type: command
    command: ["cp", "{{inputs.src}}", "{{inputs.dest}}"]
  - name: file
    type: command
    command: ["cat", "{{ inputs.text | file }}"]
  - name: script
    type: command
    command: ["sh", "show.sh"]
    env: { V: "{{inputs.text}}" }
  - name: tool
    type: operation
    tool: run_command
    input: { command: ["sh", "show.sh"], env: { V: "{{inputs.text}}" } }
  - name: make
    type: operation
    tool: run_command
    input: { command: ["make", "-s"], env: { J: "{{inputs.n}}" } }
"#,
        None,
    );
    let text_value = "$(touch @M@); `touch @M@` 'q'";
    let out = sb
        .run(
            &[
                ("src", "notes/a.txt"),
                ("dest", "notes/b.txt"),
                ("text", text_value),
                ("n", "4"),
            ],
            &[],
        )
        .expect("the run hung");
    assert!(out.status.success(), "{}", describe(&out));
    let filled = sb.fill(text_value);
    assert_eq!(sb.stdout_of("show").as_deref(), Some("inside\n"));
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes/b.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(sb.stdout_of("file").as_deref(), Some(filled.as_str()));
    let got = format!("got:{filled}");
    assert_eq!(sb.stdout_of("script").as_deref(), Some(got.as_str()));
    assert_eq!(sb.stdout_of("tool").as_deref(), Some(got.as_str()));
    assert_eq!(sb.stdout_of("make").as_deref(), Some("jobs:4"));
    assert!(!sb.marker().exists());
}

/// A workflow whose `run_command` runs `command` with `env: { NAME: "{{inputs.text}}" }`.
fn run_command_env(command: &str, name: &str) -> String {
    format!(
        r#"name: make_env
inputs: [{{ name: text }}]
steps:
  - name: build
    type: operation
    tool: run_command
    input: {{ command: {command}, env: {{ {name}: "{{{{inputs.text}}}}" }} }}
"#
    )
}

#[test]
fn free_text_in_run_commands_env_never_reaches_make() {
    let payload = "$(shell touch @M@)";
    let mut cases: Vec<String> = [
        r#"["make", "-s"]"#,
        r#"["sh", "-c", "make -s"]"#,
        r#"["bash", "-c", "cd . && make -s all"]"#,
        r#""make -s""#,
        r#"["env", "gmake"]"#,
    ]
    .iter()
    .map(|c| run_command_env(c, "V"))
    .collect();
    cases.push(run_command_env(r#"["sh", "-c", "make -s"]"#, "MAKEFLAGS"));
    cases.push(run_command_env(r#"["true"]"#, "MAKEFLAGS"));
    // The command step's own form, for comparison: refused the same way.
    cases.push(
        r#"name: make_env
inputs: [{ name: text }]
steps:
  - name: build
    type: command
    command: ["sh", "-c", "make -s"]
    env: { V: "{{inputs.text}}" }
"#
        .to_owned(),
    );
    for wf in cases {
        let sb = sandbox();
        sb.ws_file("Makefile", "all:\n\t@echo $(V)\n");
        sb.write_workflow(&wf, None);
        let out = sb.run(&[("text", payload)], &[]).expect("the run hung");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{wf}\n{}", describe(&out));
        assert!(
            stderr.contains("invalid workflow")
                && (stderr.contains("runs make") || stderr.contains("MAKEFLAGS")),
            "{wf}\n{stderr}"
        );
        assert!(!sb.marker().exists(), "{wf}");
        assert!(!sb.st().exists() || std::fs::read_dir(sb.st()).unwrap().next().is_none());
    }
}
