//! Issue #48, the attacker against the free-text channels themselves. `stdin:` and
//! `{{ x | file }}` hand free text to a program as data, but some programs read their standard
//! input or a file operand as code or configuration: `sh` and `python3 -` run stdin, `sed -f`,
//! `awk -f`, `make -f`, `gdb -x`, `vim -S` run a file, `curl -K` and `ssh -F` take options
//! (an output file, a proxy command) from one, `xargs` turns stdin into argv. The value is a
//! step's output (an agent's answer, as `cat payload.txt` here); the proof is the marker
//! outside the workspace. The expected end is refusal at load (exit 3): the channel exists so
//! free text stays data, which it is not in these positions.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use typed_support::{Sandbox, last_line};

/// One case: the step (YAML at an indentation of 2, `@F@` the `| file` reference) and the
/// payload the earlier step outputs.
struct Case {
    name: &'static str,
    step: &'static str,
    payload: &'static str,
}

const FILE: &str = "{{ steps.src.output | file }}";

const CASES: &[Case] = &[
    // stdin read as code.
    Case {
        name: "stdin to sh",
        step: "command: [\"sh\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "touch @M@\n",
    },
    Case {
        name: "stdin to bash -s",
        step: "command: [\"bash\", \"-s\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "touch @M@\n",
    },
    Case {
        name: "stdin to python3 -",
        step: "command: [\"python3\", \"-\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "open('@M@', 'w')\n",
    },
    Case {
        name: "stdin to perl",
        step: "command: [\"perl\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "open(F, '>@M@');\n",
    },
    Case {
        name: "stdin to node",
        step: "command: [\"node\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "require('fs').writeFileSync('@M@', '')\n",
    },
    Case {
        name: "stdin to sqlite3",
        step: "command: [\"sqlite3\", \":memory:\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: ".system touch @M@\n",
    },
    Case {
        name: "stdin to vim -es",
        step: "command: [\"vim\", \"-es\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "w @M@\nqa!\n",
    },
    Case {
        name: "stdin to make -f -",
        step: "command: [\"make\", \"-f\", \"-\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "all:\n\ttouch @M@\n",
    },
    Case {
        name: "stdin to xargs touch (argv from stdin)",
        step: "command: [\"xargs\", \"touch\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "@M@\n",
    },
    Case {
        name: "stdin to env sh (behind a wrapper)",
        step: "command: [\"env\", \"sh\"]\n    stdin: \"{{steps.src.output}}\"",
        payload: "touch @M@\n",
    },
    Case {
        name: "run_command stdin to sh",
        step: "type: operation\n    tool: run_command\n    input:\n      command: [\"sh\"]\n      stdin: \"{{steps.src.output}}\"",
        payload: "touch @M@\n",
    },
    // A private file read as code or configuration.
    Case {
        name: "| file as sh's script",
        step: "command: [\"sh\", \"@F@\"]",
        payload: "touch @M@\n",
    },
    Case {
        name: "| file as python3's script",
        step: "command: [\"python3\", \"@F@\"]",
        payload: "open('@M@', 'w')\n",
    },
    Case {
        name: "| file to sed -f",
        step: "command: [\"sed\", \"-n\", \"-f\", \"@F@\", \"data.txt\"]",
        payload: "w @M@\n",
    },
    Case {
        name: "| file to awk -f",
        step: "command: [\"awk\", \"-f\", \"@F@\", \"data.txt\"]",
        payload: "BEGIN { system(\"touch @M@\") }\n",
    },
    Case {
        name: "| file to make -f",
        step: "command: [\"make\", \"-f\", \"@F@\"]",
        payload: "all:\n\ttouch @M@\n",
    },
    Case {
        name: "| file to gdb -x",
        step: "command: [\"gdb\", \"-batch\", \"-x\", \"@F@\"]",
        payload: "shell touch @M@\n",
    },
    Case {
        name: "| file to vim -S",
        step: "command: [\"vim\", \"-es\", \"-S\", \"@F@\", \"-c\", \"qa!\"]",
        payload: "w @M@\n",
    },
    Case {
        name: "| file to curl -K (output = …)",
        step: "command: [\"curl\", \"-sS\", \"-K\", \"@F@\"]",
        payload: "url = \"file:///etc/hostname\"\noutput = \"@M@\"\n",
    },
    Case {
        name: "| file to ssh -F (ProxyCommand)",
        step: "command: [\"ssh\", \"-F\", \"@F@\", \"-o\", \"BatchMode=yes\", \"target\", \"true\"]",
        payload: "Host target\n  ProxyCommand touch @M@\n",
    },
    Case {
        name: "| file to git -c include.path (spliced after --name=)",
        step: "command: [\"git\", \"--config-env=include.path=@F@\", \"status\"]",
        payload: "[core]\n  fsmonitor = touch @M@\n",
    },
    Case {
        name: "| file to bash --rcfile -i",
        step: "command: [\"bash\", \"--rcfile\", \"@F@\", \"-i\"]\n    stdin: \"exit\"",
        payload: "touch @M@\n",
    },
    Case {
        name: "| file to tar -T (a list that holds options)",
        step: "command: [\"tar\", \"-cf\", \"out.tar\", \"-T\", \"@F@\"]",
        payload: "--checkpoint=1\n--checkpoint-action=exec=touch @M@\ndata.txt\n",
    },
    Case {
        name: "| file to xargs -a (argv from a file)",
        step: "command: [\"xargs\", \"-a\", \"@F@\", \"touch\"]",
        payload: "@M@\n",
    },
];

#[test]
fn a_channel_into_a_program_that_reads_it_as_code_is_refused_at_load() {
    let mut failures = Vec::new();
    for case in CASES {
        let sb = Sandbox::new();
        sb.ws_file("data.txt", "a\nb\n");
        sb.ws_file("payload.txt", &sb.fill(case.payload));
        let body = case.step.replace("@F@", FILE);
        let step = if body.starts_with("type:") {
            format!("  - name: s\n    {body}\n")
        } else {
            format!("  - name: s\n    type: command\n    {body}\n")
        };
        let wf = format!(
            "name: channels\nsteps:\n  - name: src\n    type: command\n    command: [cat, payload.txt]\n{step}"
        );
        sb.write_workflow(&wf, None);
        let Some(out) = sb.run(&[], &[]) else {
            failures.push(format!("{}: HUNG", case.name));
            continue;
        };
        let code = out.status.code().unwrap_or(-1);
        if sb.marker().exists() {
            failures.push(format!(
                "{}: RAN THE PAYLOAD (exit {code}): {}",
                case.name,
                last_line(&out)
            ));
        } else if code != 3 {
            failures.push(format!(
                "{}: exit {code}, want 3: {}",
                case.name,
                last_line(&out)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}
