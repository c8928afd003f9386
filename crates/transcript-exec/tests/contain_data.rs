//! Issue #56, items 2 and 4 through the library: what data can do.
//!
//! - A typed `path` (an input declared `type: path`, a `{{ x | path }}` filter) is resolved
//!   beneath the workspace by the kernel when it is checked: a symlink on it (leading out,
//!   or a dangling one planted where the file is to be written) is refused, naming the
//!   input; a hidden component (`.git/config`, `.envrc`) only when the input declares
//!   `hidden: true`. `cat` of a typed path, a path into a subdirectory and a path to a file
//!   not written yet keep working.
//! - `run_command`'s `env:` takes a command step's rules: free text to make is refused in
//!   every form a command step refuses it, and `env:` to a program that quotes it still runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_exec::confined::{BeneathError, resolve_beneath};
use transcript_exec::{ExecError, ExecutionService, RunOutcome, Workflow, WorkflowSet};

use support::*;

/// A workspace holding `notes/a.txt`, beside a directory `outside/` holding `secret.txt`;
/// `ws/link` is a symlink to `outside/`, `ws/out.txt` one to `outside/secret.txt`.
struct Places {
    _dir: tempfile::TempDir,
    ws: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn places() -> Places {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    let outside = root.join("outside");
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("notes/a.txt"), "inside\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
    symlink(&outside, ws.join("link")).unwrap();
    symlink(outside.join("secret.txt"), ws.join("out.txt")).unwrap();
    Places {
        _dir: dir,
        ws,
        outside,
    }
}

fn set(yaml: &str) -> WorkflowSet {
    WorkflowSet::new("w", Workflow::from_yaml(yaml, "w.yaml").unwrap())
}

async fn run(ws: &Path, yaml: &str, inputs: Value) -> Result<RunOutcome, ExecError> {
    let svc = ExecutionService::deterministic_builder(ws, ts0())
        .build()
        .unwrap();
    let Value::Object(inputs) = inputs else {
        panic!("inputs are a map")
    };
    svc.run(&set(yaml), inputs, CancellationToken::new()).await
}

const CAT_PATH: &str = r#"name: w
inputs:
  - { name: p, type: path }
steps:
  - name: show
    type: command
    command: ["cat", "{{inputs.p}}"]
"#;

#[test]
fn the_kernel_resolves_a_path_beneath_the_workspace() {
    let p = places();
    for ok in [
        "notes/a.txt",
        "notes",
        "notes/new.txt",
        "new/deeper/file",
        "x",
    ] {
        assert_eq!(resolve_beneath(&p.ws, ok), Ok(()), "{ok}");
    }
    for escapes in [
        "link",
        "link/secret.txt",
        "link/new.txt",
        "out.txt",
        "link/a/b/c",
    ] {
        assert_eq!(
            resolve_beneath(&p.ws, escapes),
            Err(BeneathError::Escapes),
            "{escapes}"
        );
    }
    // A symlink inside the workspace pointing inside is refused too: the program that opens
    // the path later resolves it without the kernel's bound.
    symlink("notes", p.ws.join("inner")).unwrap();
    assert_eq!(
        resolve_beneath(&p.ws, "inner/a.txt"),
        Err(BeneathError::Escapes)
    );
    // A dangling symlink where a file is to be written.
    symlink(p.outside.join("planted"), p.ws.join("dangling")).unwrap();
    assert_eq!(
        resolve_beneath(&p.ws, "dangling"),
        Err(BeneathError::Escapes)
    );
    assert_eq!(
        resolve_beneath(&p.ws, "notes/a.txt/x"),
        Err(BeneathError::NotADirectory)
    );
}

#[tokio::test]
async fn a_path_input_through_a_symlink_is_refused_naming_the_input() {
    let p = places();
    for value in ["out.txt", "link/secret.txt", "link/new.txt"] {
        let e = run(&p.ws, CAT_PATH, json!({ "p": value }))
            .await
            .expect_err(value)
            .to_string();
        assert!(
            e.contains("inputs.p") && e.contains("symlink"),
            "{value}: {e}"
        );
        assert!(!e.contains("OUTSIDE-SECRET"), "{e}");
    }
    // The default is checked the same way.
    let with_default = CAT_PATH.replace("type: path }", "type: path, default: out.txt }");
    let e = run(&p.ws, &with_default, json!({}))
        .await
        .expect_err("a default through a symlink")
        .to_string();
    assert!(e.contains("inputs.p") && e.contains("its default"), "{e}");
}

#[tokio::test]
async fn a_path_names_a_hidden_component_only_when_the_input_declares_it() {
    let p = places();
    std::fs::create_dir_all(p.ws.join(".git")).unwrap();
    std::fs::write(p.ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(p.ws.join(".envrc"), "export X=1\n").unwrap();
    for value in [
        ".git/config",
        ".envrc",
        "notes/.npmrc",
        ".github/workflows/x.yml",
    ] {
        let e = run(&p.ws, CAT_PATH, json!({ "p": value }))
            .await
            .expect_err(value)
            .to_string();
        assert!(
            e.contains("inputs.p") && e.contains("hidden"),
            "{value}: {e}"
        );
    }
    let declared = CAT_PATH.replace("type: path }", "type: path, hidden: true }");
    let out = run(&p.ws, &declared, json!({ "p": ".git/config" }))
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    // `hidden` belongs to paths only.
    let misplaced = CAT_PATH.replace("type: path }", "type: string, hidden: true }");
    let e = set(&misplaced)
        .validate(&|_| false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'hidden' does not apply"), "{e}");
}

#[tokio::test]
async fn a_path_filter_is_resolved_when_rendered_and_refused_through_a_symlink() {
    let p = places();
    // The step before names the path: data the author does not control.
    let yaml = |file: &str| {
        format!(
            r#"name: w
steps:
  - name: pick
    type: command
    command: ["printf", "%s", "{file}"]
  - name: show
    type: command
    command: ["cat", "{{{{steps.pick.output | path}}}}"]
"#
        )
    };
    let out = run(&p.ws, &yaml("link/secret.txt"), json!({}))
        .await
        .unwrap();
    assert!(!out.succeeded());
    let e = out.error.unwrap_or_default();
    assert!(
        e.contains("steps.pick.output") && e.contains("symlink"),
        "{e}"
    );
    let out = run(&p.ws, &yaml(".envrc"), json!({})).await.unwrap();
    assert!(
        out.error.as_deref().is_some_and(|e| e.contains("hidden")),
        "{:?}",
        out.error
    );
    let out = run(&p.ws, &yaml("notes/a.txt"), json!({})).await.unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
}

#[tokio::test]
async fn cat_of_a_typed_path_and_a_path_to_be_written_keep_working() {
    let p = places();
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(&p.ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let yaml = r#"name: w
inputs:
  - { name: p, type: path }
  - { name: dest, type: path }
steps:
  - name: show
    type: command
    command: ["cat", "{{inputs.p}}"]
  - name: write
    type: command
    command: ["cp", "{{inputs.p}}", "{{inputs.dest}}"]
"#;
    let mut inputs = Map::new();
    inputs.insert("p".into(), json!("notes/a.txt"));
    inputs.insert("dest".into(), json!("notes/copy.txt"));
    let out = svc
        .run(&set(yaml), inputs, CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    let text = factory.text(out.run_id);
    assert!(text.contains(r#""stdout":"inside\n""#), "{text}");
    assert_eq!(
        std::fs::read_to_string(p.ws.join("notes/copy.txt")).unwrap(),
        "inside\n"
    );
}

/// A run_command operation running `command` with `env: { V: value }`.
fn run_command_env(command: &str, value: &str) -> String {
    format!(
        r#"name: w
inputs:
  - {{ name: x }}
  - {{ name: n, type: integer, default: 3 }}
steps:
  - name: op
    type: operation
    tool: run_command
    input: {{ command: {command}, env: {{ V: "{value}" }} }}
"#
    )
}

#[test]
fn run_command_env_takes_the_command_steps_make_rule() {
    for command in [
        r#""make all""#,
        r#""cd sub && make -s""#,
        r#"["make", "all"]"#,
        r#"["gmake"]"#,
        r#"["sh", "-c", "make all"]"#,
        r#"["bash", "-lc", "cd sub && make"]"#,
        r#"["env", "make"]"#,
    ] {
        for value in ["{{inputs.x}}", "pre {{inputs.x}} post"] {
            let e = set(&run_command_env(command, value))
                .validate(&|_| false)
                .expect_err(command)
                .to_string();
            assert!(
                e.contains("runs make") && e.contains("inputs.x"),
                "{command} {value}: {e}"
            );
        }
        // A typed value, a file, a literal: never free text.
        for value in ["{{inputs.n}}", "{{inputs.x | file}}", "-j4"] {
            set(&run_command_env(command, value))
                .validate(&|_| false)
                .unwrap_or_else(|e| panic!("{command} {value}: {e}"));
        }
    }
    // The names a command step refuses a template, run_command refuses too.
    for name in ["MAKEFLAGS", "GNUMAKEFLAGS", "CFLAGS", "CC"] {
        let yaml = run_command_env(r#"["printf", "ok"]"#, "{{inputs.x}}")
            .replace("env: { V:", &format!("env: {{ {name}:"));
        let e = set(&yaml).validate(&|_| false).expect_err(name).to_string();
        assert!(e.contains(name), "{name}: {e}");
    }
}

#[test]
fn a_command_step_giving_free_text_to_sh_c_make_is_refused_too() {
    let yaml = r#"name: w
inputs: [{ name: x }]
steps:
  - name: build
    type: command
    command: ["sh", "-c", "make all"]
    env: { V: "{{inputs.x}}" }
"#;
    let e = set(yaml).validate(&|_| false).unwrap_err().to_string();
    assert!(e.contains("runs make"), "{e}");
}

#[tokio::test]
async fn run_command_env_to_a_program_that_quotes_it_still_runs() {
    let (_d, ws) = workspace();
    let payload = "$(touch PWNED); make -C / evil";
    for command in [
        r#"["sh", "-c", "printf '%s' \"$V\""]"#,
        r#"'printf "%s" "$V"'"#,
    ] {
        let out = run(
            &ws,
            &run_command_env(command, "{{inputs.x}}"),
            json!({ "x": payload }),
        )
        .await
        .unwrap();
        assert!(out.succeeded(), "{command}: {:?}", out.error);
        assert!(!ws.join("PWNED").exists());
    }
}

#[tokio::test]
async fn a_childs_path_input_is_resolved_beneath_the_workspace_too() {
    let p = places();
    let child = Workflow::from_yaml(CAT_PATH, "child.yaml").unwrap();
    let parent = Workflow::from_yaml(
        r#"name: parent
inputs: [{ name: f }]
steps:
  - name: call
    type: call_workflow
    workflow: child.yaml
    inputs: { p: "{{inputs.f}}" }
"#,
        "parent.yaml",
    )
    .unwrap();
    let set = WorkflowSet::new("parent.yaml", parent).with("child.yaml", child);
    let svc = ExecutionService::deterministic_builder(&p.ws, ts0())
        .build()
        .unwrap();
    for (value, ok) in [("link/secret.txt", false), ("notes/a.txt", true)] {
        let mut inputs = Map::new();
        inputs.insert("f".into(), json!(value));
        let out = svc
            .run(&set, inputs, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.succeeded(), ok, "{value}: {:?}", out.error);
        if !ok {
            let e = out.error.unwrap_or_default();
            assert!(e.contains("inputs.p") && e.contains("symlink"), "{e}");
        }
    }
}
