//! Issue #39, the attacker's side: a value (from `--input`, a step's output or a `for_each`
//! item) must never become code, whatever program reads it and wherever the command is
//! written. Each case below is a workflow whose value, on the code before #39, ran as code:
//! a marker file appeared *outside* the workspace. Now each is refused when the workflow
//! loads (exit 3, nothing runs) or, for option injection, fails its step at run time
//! (exit 1, the program never starts); in every case the marker never appears.
//!
//! `@M@` in a case stands for the marker's absolute path, `V` for the reference to the value
//! (`inputs.v`, `steps.src.output` or `loop.item`), `@D@` for the test's directory.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{bin, text};

/// How the case is expected to end.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ends {
    /// Refused when the workflow loads (exit 3).
    Refused,
    /// The step fails at run time, before the program starts (exit 1).
    Fails,
}

/// One attack: a name, the value, the steps (YAML, indented as a list item of `steps:`)
/// with `V`, `M` and `D` to substitute, and how it ends.
struct Case {
    name: &'static str,
    value: &'static str,
    steps: &'static str,
    ends: Ends,
}

/// A git repository with one commit in the workspace, for the git cases.
const GIT_REPO: &str = r#"  - name: repo
    type: command
    command: "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m m"
"#;

const CASES: &[Case] = &[
    Case {
        name: "agent step command: sh -c with the value spliced in",
        value: "$(touch @M@)",
        steps: r#"  - name: s
    type: agent
    provider: claude
    prompt: hi
    command: ["sh", "-c", "echo {{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "agent step command: python3 -c with the whole value",
        value: "open('@M@','w')",
        steps: r#"  - name: s
    type: agent
    provider: claude
    prompt: hi
    command: ["python3", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "python3.11 -c (a versioned interpreter)",
        value: "open('@M@','w')",
        steps: r#"  - name: s
    type: command
    command: ["python3.11", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "python3 -Ic (a clustered flag)",
        value: "open('@M@','w')",
        steps: r#"  - name: s
    type: command
    command: ["python3", "-Ic", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "python3 -W ignore -c (an option with an argument before -c)",
        value: "open('@M@','w')",
        steps: r#"  - name: s
    type: command
    command: ["python3", "-W", "ignore", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "python3 -m timeit -s with the value spliced in",
        value: "';open('@M@','w');'",
        steps: r#"  - name: s
    type: command
    command: ["python3", "-m", "timeit", "-n", "1", "-s", "x='{{V}}'", "pass"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "python3 -m timeit -s with the whole value",
        value: "open('@M@','w')",
        steps: r#"  - name: s
    type: command
    command: ["python3", "-m", "timeit", "-n", "1", "-s", "{{V}}", "pass"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "perl -le",
        value: "open(F,'>@M@')",
        steps: r#"  - name: s
    type: command
    command: ["perl", "-le", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "node -r fs -e",
        value: "require('fs').writeFileSync('@M@','')",
        steps: r#"  - name: s
    type: command
    command: ["node", "-r", "fs", "-e", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "env -S with the value spliced in",
        value: "$(touch @M@)",
        steps: r#"  - name: s
    type: command
    command: ["env", "-S", "sh -c 'echo {{V}}'"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "env -S with the whole value",
        value: "touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["env", "-S", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "rbash -c (a restricted shell)",
        value: "touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["rbash", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "script -qc",
        value: "touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["script", "-qc", "{{V}}", "/dev/null"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "flock LOCK -c",
        value: "touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["flock", "LOCK", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "bash --rcfile /dev/null -c",
        value: "touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["bash", "--rcfile", "/dev/null", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "awk -W interactive PROGRAM",
        value: "BEGIN{system(\"touch @M@\")}",
        steps: r#"  - name: s
    type: command
    command: ["awk", "-W", "interactive", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "sed -n SCRIPT (GNU sed's e command)",
        value: "1e touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["sed", "-n", "{{V}}", "/etc/hostname"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "sqlite3 :memory: SQL (.system)",
        value: ".system touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["sqlite3", ":memory:", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "ssh HOST uptime (-oProxyCommand)",
        value: "-oProxyCommand=touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["ssh", "{{V}}", "uptime"]
"#,
        ends: Ends::Fails,
    },
    Case {
        name: "ssh -o OPTION HOST (the value of -o)",
        value: "ProxyCommand=touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["ssh", "-o", "{{V}}", "localhost", "true"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "a templated program",
        value: "sh",
        steps: r#"  - name: s
    type: command
    command: ["{{V}}", "-c", "touch @M@"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "a templated program behind a wrapper (timeout 5 PROG)",
        value: "sh",
        steps: r#"  - name: s
    type: command
    command: ["timeout", "5", "{{V}}", "-c", "touch @M@"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "run_command list: python3.11 -c",
        value: "open('@M@','w')",
        steps: r#"  - name: s
    type: operation
    tool: run_command
    input:
      command: ["python3.11", "-c", "{{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "run_command list: a value spliced into sh -c",
        value: "$(touch @M@)",
        steps: r#"  - name: s
    type: operation
    tool: run_command
    input:
      command: ["sh", "-c", "echo {{V}}"]
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "run_command whose whole input is the value",
        value: r#"{"command": ["sh", "-c", "touch @M@"]}"#,
        steps: r#"  - name: s
    type: operation
    tool: run_command
    input: "{{V}}"
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "run_command whose command is the value",
        value: r#"["sh", "-c", "touch @M@"]"#,
        steps: r#"  - name: s
    type: operation
    tool: run_command
    input:
      command: "{{V}}"
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "env PERL5OPT",
        value: "-Mstrict;system(q(touch),q(@M@))",
        steps: r#"  - name: s
    type: command
    command: ["perl", "-e", "1"]
    env:
      PERL5OPT: "{{V}}"
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "env GIT_CONFIG_PARAMETERS (core.fsmonitor)",
        value: "'core.fsmonitor'='touch @M@'",
        steps: r#"  - name: s
    type: command
    command: ["git", "status"]
    env:
      GIT_CONFIG_PARAMETERS: "{{V}}"
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "env NODE_OPTIONS",
        value: "--require @D@/evil.js",
        steps: r#"  - name: s
    type: command
    command: ["node", "-e", "1"]
    env:
      NODE_OPTIONS: "{{V}}"
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "env TRANSCRIPT_CLAUDE_BIN (a preset's program)",
        value: "@D@/evil.sh",
        steps: r#"  - name: s
    type: agent
    provider: claude
    prompt: hi
    env:
      TRANSCRIPT_CLAUDE_BIN: "{{V}}"
"#,
        ends: Ends::Refused,
    },
    Case {
        name: "git log -1 REF (--output=PATH)",
        value: "--output=@M@",
        steps: r#"  - name: s
    type: command
    command: ["git", "log", "-1", "{{V}}"]
"#,
        ends: Ends::Fails,
    },
    Case {
        name: "git log in an agent step's command: (--output=PATH)",
        value: "--output=@M@",
        steps: r#"  - name: s
    type: agent
    provider: claude
    prompt: hi
    command: ["git", "log", "-1", "{{V}}"]
"#,
        ends: Ends::Fails,
    },
    Case {
        name: "git log in a run_command list (--output=PATH)",
        value: "--output=@M@",
        steps: r#"  - name: s
    type: operation
    tool: run_command
    input:
      command: ["git", "log", "-1", "{{V}}"]
"#,
        ends: Ends::Fails,
    },
    Case {
        name: "tar ... FILE (--use-compress-program)",
        value: "--use-compress-program=touch @M@",
        steps: r#"  - name: s
    type: command
    command: ["tar", "-cf", "out.tar", "{{V}}", "LOCK"]
"#,
        ends: Ends::Fails,
    },
];

/// Where the value comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    Input,
    StepOutput,
    LoopItem,
}

/// The workflow of `case` with its value from `source`.
fn workflow(case: &Case, source: Source, dir: &Path) -> String {
    let marker = dir.join("MARK");
    let fill = |s: &str, v: &str| {
        s.replace("{{V}}", &format!("{{{{{v}}}}}"))
            .replace("@M@", &marker.display().to_string())
            .replace("@D@", &dir.display().to_string())
    };
    let mut steps = String::new();
    if case.name.starts_with("git") || case.name.contains("GIT_") {
        steps.push_str(GIT_REPO);
    }
    steps.push_str("  - name: lock\n    type: command\n    command: [touch, LOCK]\n");
    match source {
        Source::Input => steps.push_str(&fill(case.steps, "inputs.v")),
        Source::StepOutput => {
            steps.push_str(
                "  - name: src\n    type: command\n    command: [printf, \"%s\", \"{{ inputs.v | option }}\"]\n",
            );
            steps.push_str(&fill(case.steps, "steps.src.output"));
        }
        Source::LoopItem => {
            steps.push_str(
                "  - name: each\n    type: for_each\n    items: [\"{{inputs.v}}\"]\n    steps:\n",
            );
            for line in fill(case.steps, "loop.item").lines() {
                steps.push_str("    ");
                steps.push_str(line);
                steps.push('\n');
            }
        }
    }
    format!("name: attack\ninputs:\n  - name: v\nsteps:\n{steps}")
}

/// Runs every case from every source; returns the failures (each a line).
fn attack(cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        for source in [Source::Input, Source::StepOutput, Source::LoopItem] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let marker = d.join("MARK");
            std::fs::write(
                d.join("evil.js"),
                format!("require('fs').writeFileSync({:?}, '')", marker.display()),
            )
            .unwrap();
            let evil = d.join("evil.sh");
            std::fs::write(&evil, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
            std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            let value = case
                .value
                .replace("@M@", &marker.display().to_string())
                .replace("@D@", &d.display().to_string());
            let wf = d.join("wf.yaml");
            std::fs::write(&wf, workflow(case, source, d)).unwrap();
            std::fs::create_dir_all(d.join("ws")).unwrap();
            let out = bin()
                .arg("run")
                .arg(&wf)
                .args(["--input", &format!("v={value}")])
                .arg("--workspace")
                .arg(d.join("ws"))
                .arg("--storage")
                .arg(d.join("st"))
                .env("TRANSCRIPT_CLAUDE_BIN", "/bin/false")
                .output()
                .unwrap();
            let stderr = text(&out.stderr);
            let code = out.status.code();
            // Since #48 every source here is free text (an untyped input, a step's output, an
            // item of a templated list), and free text never stands in argv: the cases that
            // failed at run time (option injection) are refused at load now too. Typed values
            // meeting the run-time rule are attacked in typed_values*.rs.
            let want = match case.ends {
                Ends::Refused | Ends::Fails => 3,
            };
            if marker.exists() {
                failures.push(format!("{} [{source:?}]: RAN THE PAYLOAD", case.name));
            } else if code != Some(want) {
                failures.push(format!(
                    "{} [{source:?}]: exit {code:?}, want {want}: {}",
                    case.name,
                    stderr.trim().lines().last().unwrap_or("")
                ));
            }
        }
    }
    failures
}

#[test]
fn no_value_becomes_code_in_any_shape_from_any_source() {
    let failures = attack(CASES);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs the workflow `wf.yaml` (with `child.yaml` beside it when given) on `value`.
fn run_files(
    root: &str,
    child: Option<&str>,
    value: &str,
) -> (tempfile::TempDir, std::process::Output) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fill = |s: &str| s.replace("@M@", &d.join("MARK").display().to_string());
    std::fs::write(d.join("wf.yaml"), fill(root)).unwrap();
    if let Some(child) = child {
        std::fs::write(d.join("child.yaml"), fill(child)).unwrap();
    }
    std::fs::create_dir_all(d.join("ws")).unwrap();
    let out = bin()
        .arg("run")
        .arg(d.join("wf.yaml"))
        .args(["--input", &format!("v={}", fill(value))])
        .arg("--workspace")
        .arg(d.join("ws"))
        .arg("--storage")
        .arg(d.join("st"))
        .output()
        .unwrap();
    (dir, out)
}

#[test]
fn a_value_passed_through_call_workflow_meets_the_same_rule_in_the_child() {
    let parent = "name: parent\ninputs:\n  - name: v\nsteps:\n  - name: call\n    type: call_workflow\n    workflow: child.yaml\n    inputs: { x: \"{{inputs.v}}\" }\n";
    // Spliced into the child's sh -c: refused when the set loads, naming the child's file.
    let child = "name: child\ninputs:\n  - name: x\nsteps:\n  - name: s\n    type: command\n    command: [\"sh\", \"-c\", \"echo {{inputs.x}}\"]\n";
    let (dir, out) = run_files(parent, Some(child), "$(touch @M@)");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("child.yaml") && stderr.contains("step 's'"),
        "{stderr}"
    );
    assert!(!dir.path().join("MARK").exists());
    // A whole value read as an option by the child's git: the child's step fails.
    // The child vouches for any text with a pattern that admits it (#48): the run-time rule
    // still refuses a value starting with '-'.
    let child = "name: child\ninputs:\n  - name: x\n    type: string\n    pattern: '.+'\nsteps:\n  - name: repo\n    type: command\n    command: \"git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m m\"\n  - name: s\n    type: command\n    command: [\"git\", \"log\", \"-1\", \"{{inputs.x}}\"]\n";
    let (dir, out) = run_files(parent, Some(child), "--output=@M@");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("inputs.x") && stderr.contains("starts with '-'"),
        "{stderr}"
    );
    assert!(!dir.path().join("MARK").exists());
}

#[test]
fn plugin_declarations_and_mcp_servers_are_literal_lists() {
    let plugin = "name: p\ninputs:\n  - name: v\nplugins:\n  - [\"python3\", \"-c\", \"{{inputs.v}}\"]\nsteps:\n  - name: s\n    type: command\n    command: [\"true\"]\n";
    let (dir, out) = run_files(plugin, None, "open('@M@','w')");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("plugins: element 2"), "{stderr}");
    assert!(!dir.path().join("MARK").exists());
    let mcp = "name: m\ninputs:\n  - name: v\nsteps:\n  - name: s\n    type: agent\n    provider: claude\n    prompt: hi\n    mcp_servers:\n      - { name: evil, command: sh, args: [\"-c\", \"{{inputs.v}}\"] }\n";
    let (dir, out) = run_files(mcp, None, "touch @M@");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("mcp_servers 'evil': element 2"), "{stderr}");
    assert!(!dir.path().join("MARK").exists());
}
