//! The attacker's harness of the `typed_values*` tests (issue #48): a [`Case`] is one kind
//! of attack (a command whose element, or an environment variable, holds the reference), run
//! from every [`Source`] of the value, free and typed, through the binary; [`attack`] returns
//! every run that created the marker outside the workspace or ended with another exit code
//! than [`Source::ends`] allows.
#![allow(clippy::unwrap_used)]

use super::{Sandbox, indent, last_line};

/// A type a payload fits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ty {
    /// `type: path` / `| path`.
    Path,
    /// `type: url` / `| url`.
    Url,
    /// `type: string` with `pattern: '[a-z0-9]+'` / `| match('[a-z0-9]+')`.
    Word,
}

impl Ty {
    /// The input declaration's fields (YAML at an indentation of 4).
    pub fn declaration(self) -> &'static str {
        match self {
            Ty::Path => "    type: path\n",
            Ty::Url => "    type: url\n",
            Ty::Word => "    type: string\n    pattern: '[a-z0-9]+'\n",
        }
    }

    /// The reference filter giving the shape.
    pub fn filter(self) -> &'static str {
        match self {
            Ty::Path => "path",
            Ty::Url => "url",
            Ty::Word => "match('[a-z0-9]+')",
        }
    }
}

/// Where the value stands, which decides how the case must end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pos {
    /// The program reads it as code (a shell command, a script, an option that runs one):
    /// refused at load whatever the value's shape.
    Code,
    /// The program position behind a wrapper: refused at load whatever the shape.
    Program,
    /// An environment name make, a compiler or an editor reads as code, or an endpoint:
    /// templated values are refused at load whatever the shape.
    EnvName,
    /// A data position (a make goal, a file operand, make's environment): free text is
    /// refused at load; a typed value that breaks its type is refused by its check.
    Data,
}

/// One kind of attack.
pub struct Case {
    pub name: &'static str,
    /// The command, a YAML flow list; `{{V}}` is the reference, `@M@` the marker.
    pub argv: &'static str,
    /// The environment variable holding the reference (the argv then holds none).
    pub env: Option<&'static str>,
    /// The payload as free text.
    pub free: &'static str,
    /// Payloads fitting a type; none: the free payload declared as a `path`.
    pub typed: &'static [(Ty, &'static str)],
    pub pos: Pos,
}

/// Shell code that is an http URL the WHATWG parser leaves as it is.
pub const URL_SH: &str = "http://h/?;touch${IFS}@M@";

pub const fn code(
    name: &'static str,
    argv: &'static str,
    free: &'static str,
    typed: &'static [(Ty, &'static str)],
) -> Case {
    Case {
        name,
        argv,
        env: None,
        free,
        typed,
        pos: Pos::Code,
    }
}

pub const fn program(name: &'static str, argv: &'static str) -> Case {
    Case {
        name,
        argv,
        env: None,
        free: "touch",
        typed: &[(Ty::Word, "touch"), (Ty::Path, "touch")],
        pos: Pos::Program,
    }
}

pub const fn env_name(
    name: &'static str,
    argv: &'static str,
    var: &'static str,
    free: &'static str,
    typed: &'static [(Ty, &'static str)],
) -> Case {
    Case {
        name,
        argv,
        env: Some(var),
        free,
        typed,
        pos: Pos::EnvName,
    }
}

/// `touch @M@` (a `path` only when inner spaces are allowed) and [`URL_SH`].
pub const SH_TYPED: &[(Ty, &str)] = &[(Ty::Path, "touch @M@"), (Ty::Url, URL_SH)];

/// A data position whose free payload is make code.
pub const fn data(name: &'static str, argv: &'static str, env: Option<&'static str>) -> Case {
    Case {
        name,
        argv,
        env,
        free: "X:=$(shell touch @M@)",
        typed: &[],
        pos: Pos::Data,
    }
}

/// Where the value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source {
    /// `--input v=…`, `v` declared without a type.
    InputFree,
    /// `--input v=…`, `v` declared with the payload's type.
    InputTyped,
    /// A step's output, referenced as it is.
    OutputFree,
    /// A step's output, shaped at the reference (`| path`…).
    OutputShaped,
    /// A `for_each` item from a step's JSON output, shaped at the reference.
    LoopShaped,
    /// A child workflow's typed input, passed the parent's free `--input`.
    ChildTyped,
    /// A typed input, the step in a `while` body.
    WhileTyped,
    /// A typed input, the command an agent step's `command:`.
    AgentTyped,
    /// A typed input, the command a `run_command` list.
    RunCommandTyped,
}

pub const SOURCES: [Source; 9] = [
    Source::InputFree,
    Source::InputTyped,
    Source::OutputFree,
    Source::OutputShaped,
    Source::LoopShaped,
    Source::ChildTyped,
    Source::WhileTyped,
    Source::AgentTyped,
    Source::RunCommandTyped,
];

impl Source {
    pub fn is_free(self) -> bool {
        matches!(self, Source::InputFree | Source::OutputFree)
    }

    /// The exit codes this source may end with for a case at `pos`.
    pub fn ends(self, pos: Pos) -> &'static [i32] {
        match (pos, self) {
            (Pos::Code | Pos::Program | Pos::EnvName, _) => &[3],
            (Pos::Data, s) if s.is_free() => &[3],
            (Pos::Data, Source::InputTyped | Source::WhileTyped)
            | (Pos::Data, Source::AgentTyped | Source::RunCommandTyped) => &[3, 2],
            (Pos::Data, _) => &[3, 1],
        }
    }
}

/// The workflow (and child) running `case` with its value from `source`, typed `ty`.
pub fn workflow(case: &Case, source: Source, ty: Ty) -> (String, Option<String>) {
    let reference = match source {
        Source::InputFree
        | Source::InputTyped
        | Source::WhileTyped
        | Source::AgentTyped
        | Source::RunCommandTyped => "inputs.v".to_owned(),
        Source::OutputFree => "steps.src.output".to_owned(),
        Source::OutputShaped => format!("steps.src.output | {}", ty.filter()),
        Source::LoopShaped => format!("loop.item | {}", ty.filter()),
        Source::ChildTyped => "inputs.x".to_owned(),
    };
    let template = format!("{{{{ {reference} }}}}");
    let argv = case.argv.replace("{{V}}", &template);
    let env = case.env.map(|name| format!("{{ {name}: \"{template}\" }}"));
    let step = match source {
        Source::AgentTyped => {
            format!(
                "- name: s\n  type: agent\n  provider: claude\n  prompt: hi\n  command: {argv}\n"
            )
        }
        Source::RunCommandTyped => {
            let mut s = format!(
                "- name: s\n  type: operation\n  tool: run_command\n  input:\n    command: {argv}\n"
            );
            if let Some(env) = &env {
                s.push_str(&format!("    env: {env}\n"));
            }
            s
        }
        _ => {
            let mut s = format!("- name: s\n  type: command\n  command: {argv}\n");
            if let Some(env) = &env {
                s.push_str(&format!("  env: {env}\n"));
            }
            s
        }
    };
    let mut inputs = String::from("inputs:\n  - name: v\n");
    if matches!(
        source,
        Source::InputTyped | Source::WhileTyped | Source::AgentTyped | Source::RunCommandTyped
    ) {
        inputs.push_str(ty.declaration());
    }
    let (steps, child) = match source {
        Source::OutputFree | Source::OutputShaped => (
            format!(
                "  - name: src\n    type: command\n    command: [cat, payload.txt]\n{}",
                indent(&step, 2)
            ),
            None,
        ),
        Source::LoopShaped => (
            format!(
                "  - name: items\n    type: command\n    command: [cat, items.json]\n  - name: each\n    type: for_each\n    items: \"{{{{steps.items.output}}}}\"\n    steps:\n{}",
                indent(&step, 6)
            ),
            None,
        ),
        Source::WhileTyped => (
            format!(
                "  - name: w\n    type: while\n    condition: go\n    max_iterations: 1\n    steps:\n{}",
                indent(&step, 6)
            ),
            None,
        ),
        Source::ChildTyped => (
            "  - name: call\n    type: call_workflow\n    workflow: child.yaml\n    inputs: { x: \"{{inputs.v}}\" }\n".to_owned(),
            Some(format!(
                "name: child\ninputs:\n  - name: x\n{}steps:\n{}",
                ty.declaration(),
                indent(&step, 2)
            )),
        ),
        _ => (indent(&step, 2), None),
    };
    (format!("name: attack\n{inputs}steps:\n{steps}"), child)
}

/// The workspace a case runs in: the files its programs read.
pub fn prepare(sb: &Sandbox, case: &Case, payload: &str) {
    sb.ws_file("data.txt", "a\nb\n");
    sb.ws_file("LOCK", "");
    sb.ws_file("Makefile", "all:\n\t@echo $(X)\n");
    sb.ws_file("x.c", "int main(void) { return 0; }\n");
    sb.ws_file("y.cc", "int main() { return 0; }\n");
    sb.ws_file("main.go", "package main\nfunc main() {}\n");
    sb.ws_file("payload.txt", &sb.fill(payload));
    sb.ws_file(
        "items.json",
        &serde_json::json!([sb.fill(payload)]).to_string(),
    );
    if case.argv.contains("\"git\"") {
        sb.git_repo();
    }
    if case.argv.contains("a.tar") {
        let ok = std::process::Command::new("tar")
            .current_dir(sb.ws())
            .args(["-cf", "a.tar", "data.txt"])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

/// Runs every case matching `pick` from every source; returns the count and the failures.
pub fn attack(cases: &[Case], pick: impl Fn(&Case) -> bool) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut runs = 0;
    for case in cases.iter().filter(|c| pick(c)) {
        for source in SOURCES {
            if source == Source::AgentTyped && case.env.is_some() {
                continue; // an agent step's env: has its own rule (typed_values_agent_env)
            }
            let variants: Vec<(Ty, &str)> = if source.is_free() || case.typed.is_empty() {
                vec![(Ty::Path, case.free)]
            } else {
                case.typed.to_vec()
            };
            for (ty, payload) in variants {
                runs += 1;
                let sb = Sandbox::new();
                prepare(&sb, case, payload);
                let (wf, child) = workflow(case, source, ty);
                sb.write_workflow(&wf, child.as_deref());
                let label = format!("{} [{source:?}, {ty:?} {payload:?}]", case.name);
                let Some(out) = sb.run(&[("v", payload)], &[]) else {
                    failures.push(format!("{label}: HUNG"));
                    continue;
                };
                let code = out.status.code().unwrap_or(-1);
                let want = source.ends(case.pos);
                if sb.marker().exists() {
                    failures.push(format!(
                        "{label}: RAN THE PAYLOAD (exit {code}): {}",
                        last_line(&out)
                    ));
                } else if !want.contains(&code) {
                    failures.push(format!(
                        "{label}: exit {code}, want {want:?}: {}",
                        last_line(&out)
                    ));
                }
            }
        }
    }
    (runs, failures)
}

pub fn report(what: &str, (runs, failures): (usize, Vec<String>)) {
    eprintln!("{what}: {runs} runs, {} failures", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
