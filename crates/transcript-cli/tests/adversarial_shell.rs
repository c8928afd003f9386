//! The attacker's suite of issue #28 item 1, through the `transcript` binary: untrusted values
//! (an `--input`, a step's output, a `for_each` item taken from a step's JSON output, and the
//! answer of an OpenAI-compatible model served by the testkit's scripted server) never become
//! shell source.
//!
//! Each [`SHAPES`] entry is a command written the way the old design invited (the value spliced
//! into the `command:` string, quoted by a shell lexer), with a payload that escapes that
//! lexer's quoting in one of the five families the issue lists: arithmetic `$(( ))`,
//! here-documents, `${…}` parameter expansion, comments the lexer read differently from the
//! shell, and bash-only syntax (`$'…'`, `[[ ]]`, `(( ))`, `declare -i`). Every shape runs
//! once with `sh` on `PATH` being the system's (dash here) and once with a `PATH` whose `sh`
//! is bash, the way Fedora, Arch and macOS have it. On the code before #28 the shapes created
//! the marker file (`a_value_spliced_into_shell_source_is_refused_at_load_and_runs_nothing`
//! lists which, so running it against that code shows them); now each is refused when the
//! workflow loads, naming the step and the fix, and nothing runs.
//!
//! [`MIGRATED`] are the same scripts written the new way (the value in the step's `env:`, the
//! script quoting `"$V"`, or an argv list, bash itself run as `[bash, -c, …]`): they run, the
//! value arrives byte for byte as data, and no marker appears.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, text};
use serde_json::{Value, json};
use transcript_testkit::model_server::{ModelServer, Script, Turn};

/// What a payload creates in the workspace when it runs as shell code.
const MARKER: &str = "PWNED";

/// A shell command in the old style: `{{V}}` is where the value was spliced.
struct Shape {
    family: &'static str,
    name: &'static str,
    /// The step(s), YAML at an indentation of 2; `{{V}}` marks the value.
    steps: &'static str,
    /// A payload that escaped the old quoting in this shape.
    payload: &'static str,
    /// Whether the shape needs the step inside a `while` body (no `loop.item` there).
    in_while: bool,
}

const SHAPES: &[Shape] = &[
    Shape {
        family: "arithmetic",
        name: "arith_echo",
        steps: "  - name: arith_echo\n    type: command\n    command: \"echo $(( {{V}} + 1 ))\"\n",
        payload: "$(touch PWNED)",
        in_while: false,
    },
    Shape {
        family: "arithmetic",
        name: "arith_assign",
        steps: "  - name: arith_assign\n    type: command\n    command: \"x=$(( 1 + {{V}} )); echo $x\"\n",
        payload: "$(touch PWNED)",
        in_while: false,
    },
    Shape {
        family: "arithmetic",
        name: "arith_while_tool",
        steps: "  - name: poll\n    type: while\n    condition: go\n    max_iterations: 1\n    steps:\n      - name: arith_while_tool\n        type: operation\n        tool: run_command\n        input: { command: \"echo $(( {{V}} ))\" }\n",
        payload: "$(touch PWNED)",
        in_while: true,
    },
    Shape {
        family: "heredoc",
        name: "heredoc_sql",
        steps: "  - name: heredoc_sql\n    type: command\n    command: |\n      cat <<EOF\n      SELECT * FROM users WHERE name = '{{V}}';\n      EOF\n",
        payload: "$(touch PWNED)",
        in_while: false,
    },
    Shape {
        family: "heredoc",
        name: "heredoc_apostrophe",
        steps: "  - name: heredoc_apostrophe\n    type: command\n    command: |\n      cat <<'EOF'\n      Don't panic\n      EOF\n      echo {{V}}\n",
        payload: "$(touch PWNED)",
        in_while: false,
    },
    Shape {
        family: "parameter expansion",
        name: "param_default",
        steps: "  - name: param_default\n    type: command\n    command: 'echo ${GREETING:-\"}\"} {{V}}'\n",
        payload: "x; touch PWNED",
        in_while: false,
    },
    Shape {
        family: "parameter expansion",
        name: "param_branch",
        steps: "  - name: par\n    type: parallel\n    branches:\n      - name: param_branch\n        type: command\n        command: 'echo ${GREETING:-\"}\"} {{V}}'\n",
        payload: "x; touch PWNED",
        in_while: false,
    },
    Shape {
        family: "comment",
        name: "comment_after_subst",
        steps: "  - name: comment_after_subst\n    type: command\n    command: |\n      echo $(# it's here\n      echo {{V}})\n",
        payload: "$(touch PWNED)",
        in_while: false,
    },
    Shape {
        family: "comment",
        name: "comment_continuation",
        steps: "  - name: comment_continuation\n    type: command\n    command: |\n      echo a \\\n      # it's here\n      echo {{V}}\n",
        payload: "$(touch PWNED)",
        in_while: false,
    },
    Shape {
        family: "comment",
        name: "comment_nbsp",
        steps: "  - name: comment_nbsp\n    type: command\n    command: |\n      echo x\u{a0}# it's here\n      echo {{V}}\n",
        payload: "; touch PWNED; #",
        in_while: false,
    },
    Shape {
        family: "bash-only",
        name: "bash_ansi_c",
        steps: "  - name: bash_ansi_c\n    type: command\n    command: \"echo $'{{V}}'\"\n",
        payload: "\\'; touch PWNED; #",
        in_while: false,
    },
    Shape {
        family: "bash-only",
        name: "bash_double_bracket",
        steps: "  - name: bash_double_bracket\n    type: command\n    command: \"if [[ '{{V}}' -eq 1 ]]; then echo one; fi\"\n",
        payload: "a[$(touch PWNED)]",
        in_while: false,
    },
    Shape {
        family: "bash-only",
        name: "bash_declare_i",
        steps: "  - name: bash_declare_i\n    type: command\n    command: \"declare -i n='{{V}}'; echo $n\"\n",
        payload: "a[$(touch PWNED)]",
        in_while: false,
    },
    Shape {
        family: "bash-only",
        name: "bash_arith_command",
        steps: "  - name: bash_arith_command\n    type: command\n    command: \"n={{V}}; (( n + 1 )); echo done\"\n",
        payload: "a[$(touch PWNED)]",
        in_while: false,
    },
];

/// Where the untrusted value comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Source {
    /// `--input v=PAYLOAD`.
    Input,
    /// The output of an earlier step (`cat` of a file holding the payload).
    StepOutput,
    /// `loop.item.v` of a `for_each` over a step's JSON output.
    ForEachItem,
    /// The answer of an OpenAI-compatible model (the testkit's scripted server).
    AgentAnswer,
}

const SOURCES: [Source; 4] = [
    Source::Input,
    Source::StepOutput,
    Source::ForEachItem,
    Source::AgentAnswer,
];

/// `sh` on `PATH`: the system's (dash on Debian) or bash.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sh {
    System,
    Bash,
}

struct Case {
    workspace: tempfile::TempDir,
    storage: tempfile::TempDir,
    workflow: PathBuf,
    inputs: Vec<String>,
    _server: Option<ModelServer>,
}

fn indent(steps: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    steps
        .lines()
        .map(|l| format!("{pad}{l}\n"))
        .collect::<String>()
}

/// The workflow running `steps` (with `{{V}}` replaced by the source's reference) and the
/// files and server the source needs.
fn build_case(steps: &str, source: Source, payload: &str) -> Case {
    let workspace = tempfile::tempdir().unwrap();
    let storage = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    let mut server = None;
    let mut yaml = String::from("name: attack\n");
    let body = match source {
        Source::Input => {
            yaml.push_str("inputs: [{ name: v }]\nsteps:\n");
            inputs.push(format!("v={payload}"));
            steps
                .replace("{{V}}", "{{inputs.v}}")
                .replace("{{ V |", "{{ inputs.v |")
        }
        Source::StepOutput => {
            std::fs::write(workspace.path().join("payload.txt"), payload).unwrap();
            yaml.push_str(
                "steps:\n  - name: src\n    type: command\n    command: [cat, payload.txt]\n",
            );
            steps
                .replace("{{V}}", "{{steps.src.output}}")
                .replace("{{ V |", "{{ steps.src.output |")
        }
        Source::ForEachItem => {
            std::fs::write(
                workspace.path().join("items.json"),
                json!([{ "v": payload }]).to_string(),
            )
            .unwrap();
            yaml.push_str(
                "steps:\n  - name: src\n    type: command\n    command: [cat, items.json]\n  - name: each\n    type: for_each\n    items: \"{{steps.src.output}}\"\n    steps:\n",
            );
            indent(
                &steps
                    .replace("{{V}}", "{{loop.item.v}}")
                    .replace("{{ V |", "{{ loop.item.v |"),
                4,
            )
        }
        Source::AgentAnswer => {
            let s = ModelServer::start(Script::new([Turn::text(payload)])).unwrap();
            yaml.push_str(&format!(
                "steps:\n  - name: ask\n    type: agent\n    provider: openai\n    prompt: Say something.\n    env: {{ OPENAI_BASE_URL: \"{}\", OPENAI_API_KEY: k }}\n",
                s.openai_base_url()
            ));
            server = Some(s);
            steps
                .replace("{{V}}", "{{steps.ask.output}}")
                .replace("{{ V |", "{{ steps.ask.output |")
        }
    };
    yaml.push_str(&body);
    let workflow = storage.path().join("attack.yaml");
    std::fs::write(&workflow, yaml).unwrap();
    Case {
        workspace,
        storage,
        workflow,
        inputs,
        _server: server,
    }
}

/// A directory whose `sh` is bash, for a `PATH` that puts it first.
fn bash_first_path(dir: &Path) -> Option<String> {
    let bash = ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let bin = dir.join("bash-as-sh");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("sh");
    if !link.exists() {
        std::os::unix::fs::symlink(bash, &link).unwrap();
    }
    Some(format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    ))
}

fn run(case: &Case, path: Option<&str>) -> Output {
    let mut cmd = bin();
    cmd.current_dir(case.storage.path())
        .arg("run")
        .arg(&case.workflow)
        .arg("--storage")
        .arg(case.storage.path().join("store"))
        .arg("--workspace")
        .arg(case.workspace.path());
    for i in &case.inputs {
        cmd.arg("--input").arg(i);
    }
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    cmd.output().unwrap()
}

fn shells(tmp: &Path) -> Vec<(Sh, Option<String>)> {
    let mut v = vec![(Sh::System, None)];
    match bash_first_path(tmp) {
        Some(p) => v.push((Sh::Bash, Some(p))),
        None => eprintln!("bash is not installed: the sh = bash runs are skipped"),
    }
    v
}

#[test]
fn a_value_spliced_into_shell_source_is_refused_at_load_and_runs_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut ran_as_code = Vec::new();
    let mut not_refused = Vec::new();
    let mut cases = 0;
    for shape in SHAPES {
        for source in SOURCES {
            if shape.in_while && source == Source::ForEachItem {
                continue; // `loop.item` is the while's there, not the for_each's.
            }
            for (sh, path) in shells(tmp.path()) {
                cases += 1;
                let case = build_case(shape.steps, source, shape.payload);
                let out = run(&case, path.as_deref());
                let label = format!("{} / {} / {source:?} / sh={sh:?}", shape.family, shape.name);
                if case.workspace.path().join(MARKER).exists() {
                    ran_as_code.push(label.clone());
                }
                let stderr = text(&out.stderr);
                let refused = out.status.code() == Some(3)
                    && stderr.contains("would be spliced into shell source")
                    && stderr.contains(&format!("{}'", shape.name))
                    && stderr.contains("env: { ");
                if !refused {
                    not_refused.push(format!("{label}: {:?} {stderr}", out.status.code()));
                }
                // Nothing was recorded either: the refusal comes before the run.
                if !run_files(&case.storage.path().join("store")).is_empty() {
                    not_refused.push(format!("{label}: a transcript was started"));
                }
            }
        }
    }
    assert!(cases >= 100, "{cases} cases");
    assert!(
        ran_as_code.is_empty(),
        "{} of {cases} cases ran the payload as shell code:\n{}",
        ran_as_code.len(),
        ran_as_code.join("\n")
    );
    assert!(
        not_refused.is_empty(),
        "{} of {cases} cases were not refused at load:\n{}",
        not_refused.len(),
        not_refused.join("\n")
    );
}

/// A shape written the new way: the value in `env: { V: … }` (or an argv element).
struct Migrated {
    name: &'static str,
    steps: &'static str,
    /// The step prints the value back unchanged.
    echoes: bool,
}

const MIGRATED: &[Migrated] = &[
    // dash refuses a non-number in arithmetic: the step fails, nothing runs.
    Migrated {
        name: "arith_echo",
        steps: "  - name: arith_echo\n    type: command\n    command: 'echo $(( V + 1 ))'\n    env: { V: \"{{V}}\" }\n    continue_on_error: true\n",
        echoes: false,
    },
    Migrated {
        name: "arith_tool",
        steps: "  - name: arith_tool\n    type: operation\n    tool: run_command\n    input: { command: 'echo $(( $V ))', env: { V: \"{{V}}\" } }\n    continue_on_error: true\n",
        echoes: false,
    },
    Migrated {
        name: "heredoc_sql",
        steps: "  - name: heredoc_sql\n    type: command\n    command: |\n      cat <<EOF\n      SELECT * FROM users WHERE name = '$V';\n      EOF\n    env: { V: \"{{V}}\" }\n",
        echoes: true,
    },
    Migrated {
        name: "heredoc_apostrophe",
        steps: "  - name: heredoc_apostrophe\n    type: command\n    command: |\n      cat <<'EOF'\n      Don't panic\n      EOF\n      printf '%s\\n' \"$V\"\n    env: { V: \"{{V}}\" }\n",
        echoes: true,
    },
    Migrated {
        name: "param_default",
        steps: "  - name: param_default\n    type: command\n    command: 'echo ${GREETING:-\"}\"} \"$V\"'\n    env: { V: \"{{V}}\" }\n",
        echoes: true,
    },
    Migrated {
        name: "comment_after_subst",
        steps: "  - name: comment_after_subst\n    type: command\n    command: |\n      printf '%s\\n' \"$(# it's here\n      printf '%s' \"$V\")\"\n    env: { V: \"{{V}}\" }\n",
        echoes: true,
    },
    Migrated {
        name: "comment_nbsp",
        steps: "  - name: comment_nbsp\n    type: command\n    command: |\n      echo x\u{a0}# it's here\n      printf '%s\\n' \"$V\"\n    env: { V: \"{{V}}\" }\n    continue_on_error: true\n",
        echoes: false,
    },
    // Free text is never an argv element (#48): it reaches a list-form command through
    // its standard input or a private file.
    Migrated {
        name: "argv",
        steps: "  - name: argv\n    type: command\n    command: [sed, -e, '$a\\']\n    stdin: \"{{V}}\"\n",
        echoes: true,
    },
    Migrated {
        name: "argv_file",
        steps: "  - name: argv_file\n    type: command\n    command: [sed, -e, '$a\\', \"{{ V | file }}\"]\n",
        echoes: true,
    },
    // bash itself, explicitly: the value is a variable, never source.
    Migrated {
        name: "bash_string_test",
        steps: "  - name: bash_string_test\n    type: command\n    command: [bash, -c, 'if [[ \"$V\" == x ]]; then echo x; fi; printf \"%s\\n\" \"$V\"']\n    env: { V: \"{{V}}\" }\n",
        echoes: true,
    },
    Migrated {
        name: "bash_ansi_c",
        steps: "  - name: bash_ansi_c\n    type: command\n    command: [bash, -c, 'printf \"%s\\n\" \"$V\"$''\\n''']\n    env: { V: \"{{V}}\" }\n",
        echoes: true,
    },
    // Bash arithmetic evaluates a variable's text; the documented guard checks it first.
    Migrated {
        name: "bash_declare_i_guarded",
        steps: "  - name: bash_declare_i_guarded\n    type: command\n    command: [bash, -c, 'case $V in \"\"|*[!0-9]*) echo \"not a number\" >&2; exit 1;; esac; declare -i n=\"$V\"; (( n + 1 )); echo $n']\n    env: { V: \"{{V}}\" }\n    continue_on_error: true\n",
        echoes: false,
    },
];

/// Payloads of every family (each created the marker in some old shape).
const PAYLOADS: &[&str] = &[
    "$(touch PWNED)",
    "x; touch PWNED",
    "; touch PWNED; #",
    "\\'; touch PWNED; #",
    "a[$(touch PWNED)]",
    "`touch PWNED`",
    "'\"; touch PWNED; echo \"'",
];

/// The run transcripts (`<run-id>.jsonl`) in a storage directory.
fn run_files(store: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(store) else {
        return Vec::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && p.file_name().is_some_and(|n| n != "audit.jsonl")
        })
        .collect()
}

fn transcript_events(store: &Path) -> Vec<Value> {
    let mut events = Vec::new();
    for file in run_files(store) {
        let text = std::fs::read_to_string(file).unwrap();
        events.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    events
}

fn stdout_of(events: &[Value], name: &str) -> Option<String> {
    events
        .iter()
        .filter(|e| e["type"] == "step.completed" && e["payload"]["name"] == name)
        .find_map(|e| e["payload"]["result"]["stdout"].as_str().map(str::to_owned))
}

#[test]
fn values_handed_over_through_env_or_argv_stay_data_for_dash_and_bash() {
    let tmp = tempfile::tempdir().unwrap();
    let has_bash = bash_first_path(tmp.path()).is_some();
    let mut failures = Vec::new();
    let mut cases = 0;
    for m in MIGRATED {
        if m.steps.contains("[bash,") && !has_bash {
            eprintln!("bash is not installed: {} skipped", m.name);
            continue;
        }
        for payload in PAYLOADS {
            for source in SOURCES {
                for (sh, path) in shells(tmp.path()) {
                    cases += 1;
                    let case = build_case(m.steps, source, payload);
                    let out = run(&case, path.as_deref());
                    let label = format!("{} / {payload:?} / {source:?} / sh={sh:?}", m.name);
                    if case.workspace.path().join(MARKER).exists() {
                        failures.push(format!("{label}: the payload ran"));
                        continue;
                    }
                    if out.status.code() != Some(0) {
                        failures.push(format!(
                            "{label}: exit {:?}: {}",
                            out.status.code(),
                            text(&out.stderr)
                        ));
                        continue;
                    }
                    if m.echoes {
                        let events = transcript_events(&case.storage.path().join("store"));
                        let printed = stdout_of(&events, m.name).unwrap_or_default();
                        if !printed.contains(payload) {
                            failures.push(format!("{label}: printed {printed:?}"));
                        }
                    }
                }
            }
        }
    }
    assert!(cases >= 300, "{cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
