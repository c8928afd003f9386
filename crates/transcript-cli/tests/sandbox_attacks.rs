//! The attacker's suite of issue #56 item 1, through the `transcript` binary: data that a
//! step's program executes (free text on `stdin:` or in a `| file` to an interpreter, in
//! forms no load-time list knows; `env:` reaching `make`; a configuration directory named by
//! a typed `path`; a symlink already in the workspace; a `call_workflow` child; a
//! `run_command` operation) runs, but inside the kernel's bounds: a secret file outside the
//! workspace is never read (0 bytes of it anywhere the run wrote) and no marker appears
//! outside it. The legitimate uses keep working, and `sandbox: off` / `--sandbox off` are
//! written in `step.started` and warned about.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::sandbox::{Layout, sh_payload, step_completed, step_started, walk, yq};
use common::{bin, describe, text};

/// One attack: the workflow's steps (after `name:`) and its `--input`s, for a layout.
type Case = Box<dyn Fn(&Layout) -> (String, Vec<String>)>;

#[test]
fn data_that_a_program_executes_stays_inside_the_kernels_bounds() {
    let cases: Vec<(&str, Case)> = vec![
        (
            "stdin to sh -s -- x",
            Box::new(|l| {
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [sh, -s, --, x]\n    stdin: \"{{ inputs.v }}\"\n".into(),
                    vec![format!("v={}", sh_payload(l))],
                )
            }),
        ),
        (
            "stdin to bash -euo pipefail",
            Box::new(|l| {
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [bash, -euo, pipefail]\n    stdin: \"{{ inputs.v }}\"\n".into(),
                    vec![format!("v={}", sh_payload(l))],
                )
            }),
        ),
        (
            "| file to bash -eo pipefail FILE",
            Box::new(|l| {
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [bash, -eo, pipefail, \"{{ inputs.v | file }}\"]\n".into(),
                    vec![format!("v={}", sh_payload(l))],
                )
            }),
        ),
        (
            "stdin to python3 -X dev /dev/fd/0",
            Box::new(|l| {
                let py = format!(
                    "import shutil\ntry:\n  print(open('{s}').read()); shutil.copy('{s}', 'leak.txt')\nexcept Exception as e: print(type(e).__name__)\ntry:\n  open('{m}','w').write('x')\nexcept Exception as e: print(type(e).__name__)\n",
                    s = l.secret(),
                    m = l.marker()
                );
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [python3, -X, dev, /dev/fd/0]\n    stdin: \"{{ inputs.v }}\"\n".into(),
                    vec![format!("v={py}")],
                )
            }),
        ),
        (
            "| file to node -C dev FILE",
            Box::new(|l| {
                let js = format!(
                    "const fs=require('fs');try{{console.log(fs.readFileSync('{s}','utf8'));fs.copyFileSync('{s}','leak.txt')}}catch(e){{console.log(e.code)}}try{{fs.writeFileSync('{m}','x')}}catch(e){{console.log(e.code)}}",
                    s = l.secret(),
                    m = l.marker()
                );
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [node, -C, dev, \"{{ inputs.v | file }}\"]\n".into(),
                    vec![format!("v={js}")],
                )
            }),
        ),
        (
            "| file to gdb -batch -init-command FILE",
            Box::new(|l| {
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [gdb, -batch, -init-command, \"{{ inputs.v | file }}\"]\n    continue_on_error: true\n".into(),
                    vec![format!("v=shell {}", sh_payload(l))],
                )
            }),
        ),
        (
            "| file to vim -es -u FILE",
            Box::new(|l| {
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [vim, -es, -u, \"{{ inputs.v | file }}\", -c, qa]\n    continue_on_error: true\n".into(),
                    vec![format!("v=silent !{}", sh_payload(l))],
                )
            }),
        ),
        (
            "| file to wget --config=FILE (post the secret, write outside)",
            Box::new(|l| {
                let config = format!(
                    "post_file = {}\noutput_document = {}\ntries = 1\ntimeout = 2\n",
                    l.secret(),
                    l.marker()
                );
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [wget, \"--config={{ inputs.v | file }}\", \"http://127.0.0.1:9/\"]\n    continue_on_error: true\n".into(),
                    vec![format!("v={config}")],
                )
            }),
        ),
        (
            "env: free text reaching make through a script",
            Box::new(|l| {
                std::fs::write(l.ws.join("Makefile"), "all:\n\t@echo $(V)\n").unwrap();
                std::fs::write(l.ws.join("build.sh"), "make -s\n").unwrap();
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: mk\n    type: command\n    command: [sh, build.sh]\n    env: { V: \"{{ inputs.v }}\" }\n".into(),
                    vec![format!("v=$(shell {})", sh_payload(l).replace(';', " &&"))],
                )
            }),
        ),
        (
            "a configuration file in the workspace named by a typed path (CURL_HOME-like)",
            Box::new(|l| {
                // The data chose the configuration directory; git's alias there runs code.
                std::fs::create_dir_all(l.ws.join("cfg/git")).unwrap();
                let alias = sh_payload(l).replace('"', "'");
                std::fs::write(
                    l.ws.join("cfg/git/config"),
                    format!("[alias]\n\tx = \"!{alias}\"\n"),
                )
                .unwrap();
                (
                    "inputs: [{name: d, type: path}]\nsteps:\n  - name: s\n    type: command\n    command: [git, x]\n    env: { XDG_CONFIG_HOME: \"{{ inputs.d }}\" }\n".into(),
                    vec!["d=cfg".into()],
                )
            }),
        ),
        (
            "a symlink in the workspace leading outside",
            Box::new(|l| {
                std::os::unix::fs::symlink(&l.outside, l.ws.join("out")).unwrap();
                (
                    "inputs: [{name: p, type: path}]\nsteps:\n  - name: read\n    type: command\n    command: [cat, \"{{ inputs.p }}\"]\n    continue_on_error: true\n  - name: write\n    type: command\n    command: \"cp out/secret.txt leak.txt; echo x > out/MARKER\"\n".into(),
                    vec!["p=out/secret.txt".into()],
                )
            }),
        ),
        (
            "a call_workflow child",
            Box::new(|l| {
                let child = "name: child\ninputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [sh, -s, --, x]\n    stdin: \"{{ inputs.v }}\"\n";
                std::fs::write(l.ws.parent().unwrap().join("child.yaml"), child).unwrap();
                (
                    "inputs: [{name: v}]\nsteps:\n  - name: c\n    type: call_workflow\n    workflow: child.yaml\n    inputs: { v: \"{{ inputs.v }}\" }\n".into(),
                    vec![format!("v={}", sh_payload(l))],
                )
            }),
        ),
        (
            "a run_command operation",
            Box::new(|l| {
                (
                    format!(
                        "steps:\n  - name: op\n    type: operation\n    tool: run_command\n    input: {{ command: {} }}\n",
                        yq(&sh_payload(l))
                    ),
                    vec![],
                )
            }),
        ),
    ];
    let mut failures = Vec::new();
    for (name, case) in &cases {
        let l = Layout::new();
        let (workflow, inputs) = case(&l);
        let workflow = format!("name: attack\n{workflow}");
        let mut args: Vec<String> = Vec::new();
        for i in &inputs {
            args.push("--input".into());
            args.push(i.clone());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = l.run(&workflow, &args);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            l.assert_contained(name, &out)
        }));
        if result.is_err() {
            failures.push(name.to_string());
        }
        // The payload did run (the test proves the bounds, not a refusal at load): each
        // attack's run got past validation.
        assert!(
            !text(&out.stderr).contains("invalid workflow"),
            "{name}: refused at load, so the attack proves nothing\n{}",
            describe(&out)
        );
    }
    assert!(failures.is_empty(), "escaped: {failures:?}");
}

/// The same attack with `--sandbox off` does reach the secret: the suite above can fail.
#[test]
fn unconfined_the_same_payload_reads_the_secret_and_step_started_says_off() {
    let l = Layout::new();
    let workflow = "name: off\ninputs: [{name: v}]\nsteps:\n  - name: s\n    type: command\n    command: [sh, -s, --, x]\n    stdin: \"{{ inputs.v }}\"\n";
    let input = format!("v={}", sh_payload(&l));
    let out = l.run(workflow, &["--input", &input, "--sandbox", "off"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(Path::new(&l.marker()).exists(), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("--sandbox off"),
        "warned once: {}",
        describe(&out)
    );
    let started = step_started(&l.storage, "s");
    assert_eq!(started["payload"]["sandbox"], "off", "{started}");
}

/// `sandbox: off` on one step: that step is unconfined and says so; the other is not.
#[test]
fn sandbox_off_on_a_step_is_that_steps_only() {
    let l = Layout::new();
    let workflow = format!(
        "name: mixed\nsteps:\n  - name: free\n    type: command\n    sandbox: off\n    command: \"touch {m}\"\n  - name: bound\n    type: command\n    command: \"cat {s}\"\n    continue_on_error: true\n",
        m = l.marker(),
        s = l.secret()
    );
    let out = l.run(&workflow, &[]);
    assert!(Path::new(&l.marker()).exists(), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("sandbox: off: step(s) free"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        step_started(&l.storage, "free")["payload"]["sandbox"],
        "off"
    );
    assert!(
        step_started(&l.storage, "bound")["payload"]
            .get("sandbox")
            .is_none()
    );
    let done = step_completed(&l.storage, "bound");
    assert_eq!(done["payload"]["result"]["confined"], true, "{done}");
    assert!(
        done["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "the program's own EACCES: {done}"
    );
}

/// What a workflow legitimately does keeps working confined.
#[test]
fn legitimate_uses_keep_working_confined() {
    let l = Layout::new();
    std::fs::write(l.ws.join("notes.txt"), "three words here\n").unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(&l.ws)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.email=a@b",
        "-c",
        "user.name=a",
        "add",
        "notes.txt",
    ]);
    git(&[
        "-c",
        "user.email=a@b",
        "-c",
        "user.name=a",
        "commit",
        "-qm",
        "first",
    ]);
    let workflow = "name: legit\ninputs:\n  - {name: ref, type: string, pattern: '[A-Za-z0-9._/-]+'}\n  - {name: p, type: path}\n  - {name: who}\nsteps:\n  - name: log\n    type: command\n    command: [git, log, --oneline, \"-1\", \"{{ inputs.ref }}\"]\n  - name: cat\n    type: command\n    command: [cat, \"{{ inputs.p }}\"]\n  - name: wc\n    type: command\n    command: [wc, -w]\n    stdin: \"{{ inputs.who }}\"\n  - name: file\n    type: command\n    command: [cat, \"{{ inputs.who | file }}\"]\n  - name: env\n    type: command\n    command: 'printf \"%s\\n\" \"$WHO\" > greeting.txt && cat greeting.txt && echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"'\n    env: { WHO: \"{{ inputs.who }}\" }\n  - name: build\n    type: command\n    sandbox: { write: [build/cache] }\n    command: 'mkdir -p build/cache && echo cached > build/cache/x && python3 -c \"print(open(\\\"build/cache/x\\\").read().strip())\"'\n";
    let out = l.run(
        workflow,
        &[
            "--input",
            "ref=HEAD",
            "--input",
            "p=notes.txt",
            "--input",
            "who=a b c d",
        ],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let stdout = |step: &str| {
        step_completed(&l.storage, step)["payload"]["result"]["stdout"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(stdout("log").contains("first"));
    assert_eq!(stdout("cat"), "three words here\n");
    assert_eq!(stdout("wc").trim(), "4");
    assert_eq!(stdout("file"), "a b c d");
    assert_eq!(stdout("env"), "a b c d\ntmp\n");
    assert_eq!(stdout("build"), "cached\n");
}

/// A declared write outside the workspace is writable; an undeclared sibling is not; a
/// template in `sandbox:` is refused at load.
#[test]
fn declared_paths_are_literal_and_exactly_what_is_granted() {
    let l = Layout::new();
    let cache = l.outside.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let workflow = format!(
        "name: decl\nsteps:\n  - name: s\n    type: command\n    sandbox: {{ write: [{c}] }}\n    command: \"echo ok > {c}/x && cat {c}/x && (echo no > {m} || echo refused)\"\n",
        c = cache.display(),
        m = l.marker()
    );
    let out = l.run(&workflow, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        step_completed(&l.storage, "s")["payload"]["result"]["stdout"],
        "ok\nrefused\n"
    );
    assert!(!Path::new(&l.marker()).exists());
    let templated = "name: t\ninputs: [{name: d}]\nsteps:\n  - name: s\n    type: command\n    sandbox: { write: [\"{{ inputs.d }}\"] }\n    command: \"true\"\n";
    let out = l.run(templated, &["--input", "d=/"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("literal"), "{}", describe(&out));
}

/// A kernel without Landlock refuses the run before any step starts (exit 2, naming the
/// kernel and the opt-out); `--sandbox off` runs it.
#[test]
fn a_kernel_without_landlock_refuses_the_run() {
    let l = Layout::new();
    let workflow = format!(
        "name: k\nsteps:\n  - name: s\n    type: command\n    command: \"touch {m}\"\n",
        m = l.marker()
    );
    let file = l.ws.parent().unwrap().join("wf.yaml");
    std::fs::write(&file, &workflow).unwrap();
    let out = bin()
        .env("TRANSCRIPT_SANDBOX_PRETEND_NO_LANDLOCK", "1")
        .arg("run")
        .arg(&file)
        .arg("--storage")
        .arg(&l.storage)
        .arg("--workspace")
        .arg(&l.ws)
        .args(["--sandbox", "on"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = text(&out.stderr);
    assert!(err.contains("Landlock") && err.contains("--sandbox off") && err.contains("Linux"));
    assert!(!Path::new(&l.marker()).exists(), "nothing ran");
    assert!(
        walk(&l.storage)
            .iter()
            .all(|p| p.extension().is_none_or(|e| e != "jsonl"))
    );
}

/// The storage inside the workspace stays hidden from the steps: they cannot read another
/// run's transcript.
#[test]
fn the_storage_inside_the_workspace_is_hidden_from_steps() {
    let l = Layout::new();
    let storage = l.ws.join("storage");
    let first = "name: one\nsteps:\n  - name: s\n    type: command\n    command: \"echo first-run-content\"\n";
    let file = l.ws.parent().unwrap().join("wf.yaml");
    let run = |wf: &str| l.run_at(&file, wf, &storage, &["--sandbox", "on"]);
    let out = run(first);
    assert!(out.status.success(), "{}", describe(&out));
    let spy = "name: two\nsteps:\n  - name: s\n    type: command\n    command: \"cat storage/transcripts/*.jsonl storage/audit.jsonl > sub/copy.txt 2>&1; echo done > sub/ok\"\n";
    std::fs::create_dir_all(l.ws.join("sub")).unwrap();
    let out = run(spy);
    let copy = std::fs::read_to_string(l.ws.join("sub/copy.txt")).unwrap_or_default();
    assert!(!copy.contains("first-run-content"), "{copy}");
    assert!(
        text(&out.stderr).contains("storage lies inside the workspace"),
        "{}",
        describe(&out)
    );
    assert!(l.ws.join("sub/ok").exists(), "subdirectories stay writable");
}

/// A typed `path` input through a symlink that leads out is refused when the run starts (the
/// kernel resolves it beneath the workspace, #56 item 2): exit 2 naming the input, nothing
/// recorded, nothing run.
#[test]
fn a_typed_path_through_a_symlink_is_refused_before_anything_runs() {
    let l = Layout::new();
    std::os::unix::fs::symlink(&l.outside, l.ws.join("out")).unwrap();
    let workflow = format!(
        "name: link\ninputs: [{{name: p, type: path}}]\nsteps:\n  - name: s\n    type: command\n    command: [cp, \"{{{{ inputs.p }}}}\", {}]\n",
        yq(&l.marker())
    );
    let out = l.run(&workflow, &["--input", "p=out/secret.txt"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(text(&out.stderr).contains("inputs.p"), "{}", describe(&out));
    assert!(walk(&l.storage).is_empty(), "nothing recorded");
    assert!(!Path::new(&l.marker()).exists());
}
