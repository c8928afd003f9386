//! Issue #48, the attacker against the types themselves: values that break their declared
//! shape are refused where they enter (exit 2 for an input, naming `inputs.v`, where the value
//! came from and the rule, before any step runs; exit 1 for a shaped reference or a child's
//! input, naming it, with nothing spawned); a typed value starting with `-` or `+` fails its
//! step (exit 1, "starts with") unless the reference says `| option`; an agent step's `env:`
//! takes no data but a secret input, and never for an endpoint. Where a value could run,
//! the command would create the marker outside the workspace (`touch ../MARK`, `git ls-remote
//! ext::…`, `git log --output=…`).
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use common::text;
use typed_support::{Sandbox, last_line};

/// One value that breaks its type: the declaration (YAML at an indentation of 4), the value,
/// the step's command using `{{inputs.v}}`.
struct Bad {
    decl: &'static str,
    value: &'static str,
    argv: &'static str,
}

const PATH: &str = "    type: path\n";
const URL: &str = "    type: url\n";
const TOUCH: &str = r#"["touch", "{{inputs.v}}"]"#;
const GIT_EXT: &str = r#"["git", "-c", "protocol.ext.allow=always", "ls-remote", "{{inputs.v}}"]"#;
const CURL: &str = r#"["curl", "-fsS", "-o", "@D@/MARK", "{{inputs.v}}"]"#;

const BAD: &[Bad] = &[
    Bad {
        decl: PATH,
        value: "../MARK",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a/../../MARK",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "@M@",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "/etc/passwd",
        argv: r#"["cat", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: PATH,
        value: "-rf",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "+w@M@",
        argv: r#"["vim", "-es", "{{inputs.v}}", "-c", "qa!"]"#,
    },
    Bad {
        decl: PATH,
        value: "x|",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "touch @M@|",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a:b",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "ext::sh -c touch% @M@",
        argv: GIT_EXT,
    },
    Bad {
        decl: PATH,
        value: "X=$(id)",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a\nb",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a b",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "touch @M@",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "./x",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a/",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a//b",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "a\tb",
        argv: TOUCH,
    },
    Bad {
        decl: PATH,
        value: "$HOME",
        argv: TOUCH,
    },
    Bad {
        decl: URL,
        value: "file://@M@",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "file:///etc/passwd",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "https://u:p@127.0.0.1:9/",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "http://u@127.0.0.1:9/",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "-K/etc/passwd",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "https://h.invalid/ x",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "http://h.invalid/\n-o@M@",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "ext::sh -c touch% @M@",
        argv: GIT_EXT,
    },
    Bad {
        decl: URL,
        value: "gopher://h.invalid/",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "javascript:alert(1)",
        argv: CURL,
    },
    Bad {
        decl: URL,
        value: "h.invalid/x",
        argv: CURL,
    },
    Bad {
        decl: "    type: string\n    pattern: '[a-z0-9._/-]+'\n",
        value: "main\n",
        argv: r#"["git", "log", "-1", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: string\n    pattern: '[a-z0-9._/-]+'\n",
        value: "main\n--output=@M@",
        argv: r#"["git", "log", "-1", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: string\n    pattern: '[a-z]+'\n",
        value: "main; touch @M@",
        argv: TOUCH,
    },
    Bad {
        decl: "    type: string\n    pattern: 'a|b'\n",
        value: "a-and-more",
        argv: TOUCH,
    },
    Bad {
        decl: "    type: integer\n",
        value: "1;id",
        argv: r#"["head", "-n", "{{inputs.v}}", "data.txt"]"#,
    },
    Bad {
        decl: "    type: integer\n",
        value: "1e3",
        argv: r#"["head", "-n", "{{inputs.v}}", "data.txt"]"#,
    },
    Bad {
        decl: "    type: integer\n",
        value: " 1",
        argv: r#"["head", "-n", "{{inputs.v}}", "data.txt"]"#,
    },
    Bad {
        decl: "    type: integer\n",
        value: "0x10",
        argv: r#"["head", "-n", "{{inputs.v}}", "data.txt"]"#,
    },
    Bad {
        decl: "    type: integer\n",
        value: "1\n",
        argv: r#"["head", "-n", "{{inputs.v}}", "data.txt"]"#,
    },
    Bad {
        decl: "    type: integer\n",
        value: "99999999999999999999",
        argv: r#"["head", "-n", "{{inputs.v}}", "data.txt"]"#,
    },
    Bad {
        decl: "    type: number\n",
        value: "inf",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: number\n",
        value: "NaN",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: number\n",
        value: "1e999",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: number\n",
        value: "0x1",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: boolean\n",
        value: "yes",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: boolean\n",
        value: "TRUE",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: enum\n    values: [a, b]\n",
        value: "c",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
    Bad {
        decl: "    type: enum\n    values: [a, b]\n",
        value: "a\n",
        argv: r#"["echo", "{{inputs.v}}"]"#,
    },
];

/// The workflow: a first step leaving `ws/first` (so "no step ran" is visible), then `argv`.
fn workflow(decl: &str, default: Option<&str>, argv: &str) -> String {
    let default = default.map_or(String::new(), |d| {
        format!("    default: {}\n", serde_json::to_string(d).unwrap())
    });
    format!(
        "name: types\ninputs:\n  - name: v\n{decl}{default}steps:\n  - name: first\n    type: command\n    command: [mkdir, first]\n  - name: s\n    type: command\n    command: {argv}\n"
    )
}

fn prepare(sb: &Sandbox) {
    sb.ws_file("data.txt", "a\nb\n");
    sb.git_repo();
}

#[test]
fn an_input_breaking_its_type_is_refused_before_any_step_naming_input_source_and_rule() {
    refused_inputs(false);
}

/// The design: a default is checked when the run starts, as an `--input` is (exit 2 naming
/// `default`).
#[test]
fn a_default_breaking_its_type_is_refused_before_any_step_naming_input_source_and_rule() {
    refused_inputs(true);
}

fn refused_inputs(from_default: bool) {
    let mut failures = Vec::new();
    let mut runs = 0;
    for bad in BAD {
        {
            runs += 1;
            let sb = Sandbox::new();
            prepare(&sb);
            let value = sb.fill(bad.value);
            let wf = if from_default {
                workflow(bad.decl, Some(&value), bad.argv)
            } else {
                workflow(bad.decl, None, bad.argv)
            };
            sb.write_workflow(&wf, None);
            let inputs: &[(&str, &str)] = if from_default { &[] } else { &[("v", &value)] };
            let label = format!(
                "{:?} as {} ({})",
                bad.value,
                bad.decl.trim().replace('\n', ","),
                if from_default { "default" } else { "--input" }
            );
            let Some(out) = sb.run(inputs, &[]) else {
                failures.push(format!("{label}: HUNG"));
                continue;
            };
            let stderr = text(&out.stderr);
            let code = out.status.code().unwrap_or(-1);
            let source = if from_default { "default" } else { "--input" };
            if sb.marker().exists() {
                failures.push(format!(
                    "{label}: RAN THE PAYLOAD (exit {code}): {}",
                    last_line(&out)
                ));
            } else if code != 2 {
                failures.push(format!("{label}: exit {code}, want 2: {}", last_line(&out)));
            } else if sb.ws().join("first").exists() {
                failures.push(format!("{label}: a step ran before the input was refused"));
            } else if !(stderr.contains("inputs.v") && stderr.contains(source)) {
                failures.push(format!(
                    "{label}: the error names neither inputs.v nor {source}: {stderr}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs `wf` (and `child`) with `v` (none when "unused") and returns (exit code, stderr);
/// panics when it hangs.
fn run(sb: &Sandbox, wf: &str, child: Option<&str>, v: &str) -> (i32, String) {
    sb.write_workflow(wf, child);
    let inputs: &[(&str, &str)] = if v == "unused" { &[] } else { &[("v", v)] };
    let out = sb.run(inputs, &[]).expect("the run hung");
    (out.status.code().unwrap_or(-1), text(&out.stderr))
}

#[test]
fn a_childs_input_breaking_its_type_fails_the_calling_step() {
    for (value, decl) in [("../MARK", "path"), ("@M@", "path"), ("file://@M@", "url")] {
        let sb = Sandbox::new();
        let parent = "name: parent\ninputs:\n  - name: v\nsteps:\n  - name: call\n    type: call_workflow\n    workflow: child.yaml\n    inputs: { x: \"{{inputs.v}}\" }\n";
        let child = format!(
            "name: child\ninputs:\n  - name: x\n    type: {decl}\nsteps:\n  - name: s\n    type: command\n    command: [\"touch\", \"{{{{inputs.x}}}}\"]\n"
        );
        let (code, stderr) = run(&sb, parent, Some(&child), value);
        assert!(!sb.marker().exists(), "{value}: the child's step ran");
        assert_eq!(code, 1, "{value}: {stderr}");
        assert!(
            stderr.contains("call") && stderr.contains("inputs.x"),
            "{value}: {stderr}"
        );
    }
}

#[test]
fn a_shaped_reference_breaking_its_shape_fails_its_step_and_spawns_nothing() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "../MARK",
            "path",
            r#"["touch", "{{ steps.src.output | path }}"]"#,
        ),
        (
            "@M@",
            "path",
            r#"["touch", "{{ steps.src.output | path }}"]"#,
        ),
        (
            "1;touch @M@",
            "int",
            r#"["head", "-n", "{{ steps.src.output | int }}", "data.txt"]"#,
        ),
        ("1.5", "int", r#"["touch", "{{ steps.src.output | int }}"]"#),
        (
            "maybe",
            "bool",
            r#"["touch", "{{ steps.src.output | bool }}"]"#,
        ),
        (
            "inf",
            "number",
            r#"["touch", "{{ steps.src.output | number }}"]"#,
        ),
        (
            "c",
            "enum",
            r#"["touch", "{{ steps.src.output | enum(a, b) }}"]"#,
        ),
        (
            "main;x",
            "match",
            r#"["touch", "{{ steps.src.output | match('[a-z]+') }}"]"#,
        ),
        (
            "file://@M@",
            "url",
            r#"["curl", "-fsS", "-o", "@M@", "{{ steps.src.output | url }}"]"#,
        ),
        ("../MARK", "path (loop item)", "LOOP"),
    ];
    for (value, what, argv) in cases {
        let sb = Sandbox::new();
        prepare(&sb);
        sb.ws_file("payload.txt", &sb.fill(value));
        sb.ws_file(
            "items.json",
            &serde_json::json!([sb.fill(value)]).to_string(),
        );
        let wf = if *argv == "LOOP" {
            "name: shaped\nsteps:\n  - name: items\n    type: command\n    command: [cat, items.json]\n  - name: each\n    type: for_each\n    items: \"{{steps.items.output}}\"\n    steps:\n      - name: s\n        type: command\n        command: [\"touch\", \"{{ loop.item | path }}\"]\n".to_owned()
        } else {
            format!(
                "name: shaped\nsteps:\n  - name: src\n    type: command\n    command: [cat, payload.txt]\n  - name: s\n    type: command\n    command: {argv}\n"
            )
        };
        let (code, stderr) = run(&sb, &wf, None, "unused");
        assert!(!sb.marker().exists(), "{what} {value}: the step ran");
        assert_eq!(code, 1, "{what} {value}: {stderr}");
        let named = if *argv == "LOOP" {
            "loop.item"
        } else {
            "steps.src.output"
        };
        assert!(
            stderr.contains(named),
            "{what} {value}: the error does not name {named}: {stderr}"
        );
    }
}

#[test]
fn a_typed_value_starting_with_a_dash_or_plus_fails_its_step_unless_option() {
    let log = r#"["git", "log", "-1", "{{inputs.v}}"]"#;
    let cases: &[(&str, &str, &str)] = &[
        (
            "    type: string\n    pattern: '[-a-zA-Z0-9=/._@]+'\n",
            "--output=@M@",
            log,
        ),
        (
            "    type: string\n    pattern: '[-a-zA-Z0-9=/._@]+'\n",
            "-o@M@",
            r#"["sort", "{{inputs.v}}", "data.txt"]"#,
        ),
        (
            "    type: string\n    pattern: '[+a-zA-Z0-9/._@]+'\n",
            "+w@M@",
            r#"["vim", "-es", "{{inputs.v}}", "-c", "qa!"]"#,
        ),
        (
            "    type: integer\n",
            "-1",
            r#"["head", "-n", "1", "{{inputs.v}}"]"#,
        ),
        ("    type: number\n", "-1.5", r#"["touch", "{{inputs.v}}"]"#),
        (
            "    type: enum\n    values: [-rf, ok]\n",
            "-rf",
            r#"["touch", "{{inputs.v}}"]"#,
        ),
    ];
    for (decl, value, argv) in cases {
        let sb = Sandbox::new();
        prepare(&sb);
        let (code, stderr) = run(&sb, &workflow(decl, None, argv), None, &sb.fill(value));
        assert!(!sb.marker().exists(), "{value}: RAN THE PAYLOAD");
        assert_eq!(code, 1, "{value}: {stderr}");
        assert!(stderr.contains("starts with"), "{value}: {stderr}");
    }
    // `| option` is the author saying an option is meant: head -n -1 prints all but the last line.
    let sb = Sandbox::new();
    prepare(&sb);
    let wf = workflow(
        "    type: integer\n",
        None,
        r#"["head", "-n", "{{ inputs.v | option }}", "data.txt"]"#,
    );
    let (code, stderr) = run(&sb, &wf, None, "-1");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(sb.stdout_of("s").as_deref().map(str::trim), Some("a"));
    // A step output shaped `| int | option` too.
    let sb = Sandbox::new();
    prepare(&sb);
    let wf = "name: opt\nsteps:\n  - name: src\n    type: command\n    command: [printf, '-1']\n  - name: s\n    type: command\n    command: [\"head\", \"-n\", \"{{ steps.src.output | int | option }}\", \"data.txt\"]\n";
    let (code, stderr) = run(&sb, wf, None, "unused");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(sb.stdout_of("s").as_deref().map(str::trim), Some("a"));
    let wf = wf.replace(" | option", "");
    let sb = Sandbox::new();
    prepare(&sb);
    let (code, stderr) = run(&sb, &wf, None, "unused");
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("starts with"), "{stderr}");
}

#[test]
fn an_agent_steps_env_takes_no_data_but_a_secret_and_never_an_endpoint() {
    let kinds: &[(&str, &str, &str)] = &[
        ("free", "", "http://127.0.0.1:9/v1"),
        ("url", "    type: url\n", "http://127.0.0.1:9/v1"),
        (
            "pattern",
            "    type: string\n    pattern: '[a-z0-9:/.]+'\n",
            "http://127.0.0.1:9/v1",
        ),
        ("secret", "    secret: true\n", "http://127.0.0.1:9/v1"),
    ];
    let names = [
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "GOOGLE_GEMINI_BASE_URL",
        "AZURE_OPENAI_ENDPOINT",
        "OPENAI_API_BASE",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "NO_PROXY",
        "MY_TOOL_SETTING",
    ];
    let mut failures = Vec::new();
    for name in names {
        for (kind, decl, value) in kinds {
            let sb = Sandbox::new();
            let wf = format!(
                "name: agent_env\ninputs:\n  - name: v\n{decl}steps:\n  - name: s\n    type: agent\n    provider: openai\n    prompt: hi\n    env: {{ {name}: \"{{{{inputs.v}}}}\" }}\n"
            );
            let (code, stderr) = run(&sb, &wf, None, value);
            // Only a secret (a credential) under a name that is no endpoint may load.
            let endpoint = name != "MY_TOOL_SETTING";
            let refused = code == 3;
            if (*kind != "secret" || endpoint) != refused {
                failures.push(format!(
                    "{name} from a {kind} input: exit {code}: {}",
                    stderr.trim().lines().last().unwrap_or("")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
