//! The list form of `command:` keeps values out of *our* shell, but some programs read one of
//! their arguments as code: `[sh, -c, "echo {{inputs.x}}"]` splices the value into shell source
//! again. On the code before this check every shape below created the marker file; now each is
//! refused when the workflow loads (exit 3, no transcript, nothing runs), and the same script
//! written with the value as a positional argument after the code runs and prints the payload
//! byte for byte as data.
#![allow(clippy::unwrap_used)]

mod common;

use common::{bin, text};

const PAYLOAD: &str = "$(touch PWNED)";

/// Commands (YAML flow lists) whose code argument holds the value.
const SHAPES: &[&str] = &[
    r#"["sh", "-c", "echo {{inputs.x}}"]"#,
    r#"["/bin/bash", "-lc", "echo {{inputs.x}}"]"#,
    r#"["env", "A=1", "bash", "-e", "-c", "echo {{inputs.x}}"]"#,
    r#"["timeout", "5", "sh", "-c", "echo {{inputs.x}}"]"#,
    r#"["bash", "-c", "-e", "echo {{inputs.x}}"]"#,
    r#"["python3", "-c", "import os; os.system('echo {{inputs.x}}')"]"#,
    r#"["perl", "-e", "system('echo {{inputs.x}}')"]"#,
];

fn run(dir: &std::path::Path, command: &str, operation: bool) -> std::process::Output {
    let step = if operation {
        format!(
            "    type: operation\n    tool: run_command\n    input:\n      command: {command}\n"
        )
    } else {
        format!("    type: command\n    command: {command}\n")
    };
    let yaml = format!("name: inline\ninputs:\n  - name: x\nsteps:\n  - name: s\n{step}");
    let wf = dir.join("wf.yaml");
    std::fs::write(&wf, yaml).unwrap();
    bin()
        .arg("run")
        .arg(&wf)
        .args(["--input", &format!("x={PAYLOAD}")])
        .arg("--workspace")
        .arg(dir.join("ws"))
        .arg("--storage")
        .arg(dir.join("st"))
        .output()
        .unwrap()
}

#[test]
fn a_value_in_the_code_argument_of_an_interpreter_is_refused_at_load() {
    for shape in SHAPES {
        for operation in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let out = run(dir.path(), shape, operation);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{shape}: {stderr}");
            assert!(stderr.contains("is code that"), "{shape}: {stderr}");
            assert!(!dir.path().join("ws").join("PWNED").exists(), "{shape}");
            let transcripts = std::fs::read_dir(dir.path().join("st"))
                .map(|d| d.count())
                .unwrap_or(0);
            assert_eq!(
                transcripts, 0,
                "{shape}: nothing is recorded for a refused workflow"
            );
        }
    }
}

#[test]
fn the_value_as_a_positional_argument_after_the_code_is_data() {
    // Free text is never an argument (#48): the code's positional argument is the path of a
    // private file holding it.
    let shapes = [
        r#"["sh", "-c", "cat \"$1\"", "sh", "{{ inputs.x | file }}"]"#,
        r#"["bash", "-c", "cat \"$1\"", "bash", "{{ inputs.x | file }}"]"#,
        r#"["python3", "-c", "import sys; print(open(sys.argv[1]).read(), end='')", "{{ inputs.x | file }}"]"#,
    ];
    for shape in shapes {
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), shape, false);
        assert!(out.status.success(), "{shape}: {}", text(&out.stderr));
        assert!(!dir.path().join("ws").join("PWNED").exists(), "{shape}");
        // The step's stdout (recorded in the transcript) is the payload, unchanged.
        let st = dir.path().join("st");
        let file = std::fs::read_dir(&st)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "jsonl") && !p.ends_with("audit.jsonl"))
            .unwrap();
        let transcript = std::fs::read_to_string(file).unwrap();
        assert!(
            transcript.contains(r#""stdout":"$(touch PWNED)""#),
            "{shape}: {transcript}"
        );
    }
}
