//! Tests of the workflow model: the YAML format, declared plugins, typed YAML errors.

#![allow(clippy::unwrap_used)]

mod yaml {
    use super::super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn yaml_err(text: &str) -> String {
        match Workflow::from_yaml(text, "t.yaml") {
            Err(e) => e.to_string(),
            Ok(wf) => WorkflowSet::new("t.yaml", wf)
                .validate(&|k| k == "known")
                .unwrap_err()
                .to_string(),
        }
    }

    #[test]
    fn parses_every_kind() {
        let text = r#"
name: all
inputs:
  - name: who
    default: world
outputs:
  greeting: "{{steps.hello.output}}"
steps:
  - name: hello
    type: command
    command: 'echo hi "$WHO"'
    env: { WHO: "{{inputs.who}}" }
    timeout_ms: 500
  - name: op
    type: operation
    tool: read_file
    input: { path: "{{steps.hello.output}}" }
    continue_on_error: true
  - name: par
    type: parallel
    mode: first_success
    branches:
      - name: a
        type: known
        with: { x: 1 }
      - name: b
        type: for_each
        items: [1, 2]
        steps:
          - name: inner
            type: command
            command: ["echo", "{{loop.item}}", "{{loop.index}}"]
  - name: w
    type: while
    condition: "{{steps.c.output}} != 3"
    max_iterations: 5
    steps:
      - name: c
        type: command
        command: 'echo "$N"'
        env: { N: "{{loop.index}}" }
  - name: ag
    type: agent
    provider: claude
    command: ["cat", "x.jsonl"]
    prompt: "do {{steps.par.output}}"
    system_prompt: "be brief"
  - name: end
    type: terminal
    status: success
    message: done
"#;
        let wf = Workflow::from_yaml(text, "t.yaml").unwrap();
        assert_eq!(wf.steps.len(), 6);
        assert_eq!(wf.steps[0].timeout, Some(Duration::from_millis(500)));
        assert!(wf.steps[1].continue_on_error);
        assert_eq!(wf.steps[2].kind.children()[0].kind.kind_name(), "known");
        let set = WorkflowSet::new("t.yaml", wf);
        set.validate(&|k| k == "known").unwrap();
        assert_eq!(set.root().unwrap().name, "all");
    }

    #[test]
    fn rejects_with_file_step_and_reason() {
        let e = yaml_err("name: x\nsteps:\n  - name: a\n    type: bogus\n");
        assert_eq!(
            e,
            "t.yaml: step 'a': unknown step kind 'bogus' (not built in and not registered)"
        );
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{steps.b.output}}\"\n  - name: b\n    type: command\n    command: x\n",
        );
        assert!(e.starts_with("t.yaml: step 'a': command:"), "{e}");
        assert!(e.contains("names no step"), "{e}");
        let e = yaml_err("name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{\"\n");
        assert!(e.contains("unclosed"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{loop.item}}\"\n",
        );
        assert!(e.contains("outside a for_each body"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: \"{{inputs.q}}\"\n",
        );
        assert!(e.contains("undeclared input"), "{e}");
        let e = yaml_err("name: x\nsteps:\n  - name: a\n    type: command\n");
        assert!(e.contains("missing field `command`"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: x\n    tool: y\n",
        );
        assert!(e.contains("unknown field `tool`"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: x\n  - name: a\n    type: command\n    command: z\n",
        );
        assert!(e.contains("duplicate step name"), "{e}");
        let e = yaml_err("name: x\nsteps: [\n");
        assert!(e.starts_with("t.yaml: invalid YAML"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: p\n    type: parallel\n    branches:\n      - name: a\n        type: command\n        command: x\n      - name: b\n        type: command\n        command: \"{{steps.a.output}}\"\n",
        );
        assert!(e.contains("step 'p.b'"), "{e}");
    }

    #[test]
    fn shell_source_takes_values_only_through_env() {
        // A value spliced into shell source is refused at load, naming the
        // step and showing the fix, in every place a shell string appears.
        for (yaml, step) in [
            (
                "name: x\ninputs: [{name: n}]\nsteps:\n  - name: calc\n    type: command\n    command: \"echo $(( {{inputs.n}} + 1 ))\"\n",
                "calc",
            ),
            (
                "name: x\ninputs: [{name: n}]\nsteps:\n  - name: p\n    type: parallel\n    branches:\n      - name: b\n        type: command\n        command: \"echo '{{inputs.n}}'\"\n",
                "p.b",
            ),
            (
                "name: x\ninputs: [{name: n}]\nsteps:\n  - name: w\n    type: while\n    condition: 'a == b'\n    max_iterations: 1\n    steps:\n      - name: op\n        type: operation\n        tool: run_command\n        input: { command: \"echo {{inputs.n}}\" }\n",
                "w.op",
            ),
        ] {
            let e = yaml_err(yaml);
            assert!(e.starts_with(&format!("t.yaml: step '{step}': ")), "{e}");
            assert!(e.contains("would be spliced into shell source"), "{e}");
            assert!(e.contains("env: { N: \"{{inputs.n}}\" }"), "{e}");
            assert!(e.contains("\"$N\""), "{e}");
        }
        // The fix loads: env values and `| raw`.
        let ok = "name: x\ninputs: [{name: n}]\nsteps:\n  - name: calc\n    type: command\n    command: 'echo \"$N\"'\n    env: { N: \"{{inputs.n}}\" }\n  - name: op\n    type: operation\n    tool: run_command\n    input: { command: 'echo \"$N\"', env: { N: \"{{inputs.n}}\" } }\n  - name: trusted\n    type: command\n    command: \"{{inputs.n | raw}}\"\n";
        let wf = Workflow::from_yaml(ok, "t.yaml").unwrap();
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
        let literal = "name: x\nsteps:\n  - name: op\n    type: operation\n    tool: run_command\n    input: { command: 'echo \"$N\"', env: { N: 5, B: true } }\n";
        let wf = Workflow::from_yaml(literal, "t.yaml").unwrap();
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
        let e = yaml_err(
            "name: x\nsteps:\n  - name: op\n    type: operation\n    tool: run_command\n    input: { command: env, env: { N: [1] } }\n",
        );
        assert!(e.contains("must be a string, a number or a boolean"), "{e}");
        // Env names are portable and a value never lands where the shell
        // or the loader reads code.
        for (name, why) in [
            ("1X", "not a variable name"),
            ("A-B", "not a variable name"),
            ("BASH_ENV", "takes no templated value"),
            ("LD_PRELOAD", "takes no templated value"),
            ("PATH", "takes no templated value"),
        ] {
            let e = yaml_err(&format!(
                "name: x\ninputs: [{{name: n}}]\nsteps:\n  - name: a\n    type: command\n    command: env\n    env: {{ {name}: \"{{{{inputs.n}}}}\" }}\n"
            ));
            assert!(e.contains(why), "{name}: {e}");
        }
        // An agent's env gets the same treatment.
        let e = yaml_err(
            "name: x\ninputs: [{name: n}]\nsteps:\n  - name: a\n    type: agent\n    provider: openai\n    prompt: hi\n    env: { LD_PRELOAD: \"{{inputs.n}}\" }\n",
        );
        assert!(e.contains("takes no templated value"), "{e}");
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: env\n    env: { X: \"{{inputs.q}}\" }\n",
        );
        assert!(
            e.contains("env X: ") && e.contains("undeclared input"),
            "{e}"
        );
    }

    #[test]
    fn command_lists_are_argv() {
        let e = yaml_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: [printf, '%s', '{{inputs.q}}']\n",
        );
        assert!(e.contains("undeclared input"), "{e}");
        let wf = Workflow::from_yaml(
            "name: x\ninputs: [{name: q}]\nsteps:\n  - name: a\n    type: command\n    command: [printf, '%s', '{{inputs.q}}']\n",
            "t.yaml",
        )
        .unwrap();
        assert_eq!(
            wf.steps[0].kind,
            StepKind::Command {
                command: CommandLine::Argv(vec![
                    "printf".into(),
                    "%s".into(),
                    "{{inputs.q}}".into()
                ]),
                env: BTreeMap::new(),
                stdin: None,
            }
        );
        for bad in ["[]", "[1]", "{a: b}"] {
            let e = yaml_err(&format!(
                "name: x\nsteps:\n  - name: a\n    type: command\n    command: {bad}\n"
            ));
            assert!(e.contains("'command'"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_documented_yaml_example_parses() {
        let src = include_str!("mod.rs");
        let start = src.find("//! ```yaml\n").unwrap() + "//! ```yaml\n".len();
        let end = start + src[start..].find("//! ```\n").unwrap();
        let yaml: String = src[start..end]
            .lines()
            .map(|l| l.strip_prefix("//! ").unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let wf = Workflow::from_yaml(&yaml, "doc.yaml").unwrap();
        let kinds: Vec<&str> = wf.steps.iter().map(|s| s.kind.kind_name()).collect();
        assert_eq!(
            kinds,
            [
                "command",
                "command",
                "operation",
                "parallel",
                "for_each",
                "while",
                "call_workflow",
                "agent",
                "my_custom_type",
                "terminal"
            ]
        );
        let set = WorkflowSet::new("doc.yaml", wf)
            .with("child.yaml", Workflow::new("child").input("text", None));
        set.validate(&|k| k == "my_custom_type").unwrap();
    }

    #[test]
    fn detects_call_cycles_and_missing_targets() {
        let a = Workflow::new("a").step(Step::call_workflow("c", "b", BTreeMap::new()));
        let b = Workflow::new("b").step(Step::call_workflow("c", "a", BTreeMap::new()));
        let e = WorkflowSet::new("a", a.clone())
            .with("b", b)
            .validate(&|_| false)
            .unwrap_err();
        assert!(e.reason.contains("cycle: a -> b -> a"), "{e}");
        let e = WorkflowSet::new("a", a).validate(&|_| false).unwrap_err();
        assert!(e.reason.contains("not in the workflow set"), "{e}");
        let child = Workflow::new("child").input("need", None);
        let p = Workflow::new("p").step(Step::call_workflow("c", "child", BTreeMap::new()));
        let e = WorkflowSet::new("p", p)
            .with("child", child)
            .validate(&|_| false)
            .unwrap_err();
        assert!(e.reason.contains("required input 'need'"), "{e}");
    }
    #[test]
    fn agent_env_is_parsed_templated_and_checked_and_presets_refuse_what_their_cli_lacks() {
        let text = r#"
name: p
inputs: [ { name: key, secret: true } ]
steps:
  - name: ask
    type: agent
    provider: claude
    prompt: hi
    max_turns: 2
    tools: [read_file, Grep]
    env: { ANTHROPIC_API_KEY: "{{inputs.key}}", ANTHROPIC_BASE_URL: "http://127.0.0.1:9" }
"#;
        let wf = Workflow::from_yaml(text, "t.yaml").unwrap();
        let StepKind::Agent(a) = &wf.steps[0].kind else {
            panic!("an agent step")
        };
        assert_eq!(a.env["ANTHROPIC_API_KEY"].source(), "{{inputs.key}}");
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
        // An agent's endpoint and credentials are the author's (#48): data never sets them.
        let data_endpoint = text.replace("\"http://127.0.0.1:9\"", "\"{{inputs.key}}\"");
        assert!(
            yaml_err(&data_endpoint).contains("ANTHROPIC_BASE_URL"),
            "{}",
            yaml_err(&data_endpoint)
        );
        let not_secret = text.replace("secret: true", "type: string");
        let e = yaml_err(&not_secret);
        assert!(
            e.contains("ANTHROPIC_API_KEY") && e.contains("prompt"),
            "{e}"
        );
        let bad_ref = text.replace("inputs.key", "inputs.nope");
        assert!(yaml_err(&bad_ref).contains("env"), "{}", yaml_err(&bad_ref));
        let codex = text.replace("provider: claude", "provider: codex");
        let e = yaml_err(&codex);
        assert!(
            e.contains("the codex preset has no max_turns option"),
            "{e}"
        );
        // A command of one's own: the preset's limits do not apply.
        let own = codex.replace("prompt: hi", "prompt: hi\n    command: [codex]");
        let wf = Workflow::from_yaml(&own, "t.yaml").unwrap();
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
        // A command step takes `env:` too (how values reach a shell).
        let on_command =
            "name: p\nsteps:\n  - name: c\n    type: command\n    command: ls\n    env: { A: b }\n";
        let wf = Workflow::from_yaml(on_command, "t.yaml").unwrap();
        WorkflowSet::new("t.yaml", wf).validate(&|_| false).unwrap();
    }
}

mod declared_plugins_tests {
    use super::super::*;
    use std::path::Path;

    #[test]
    fn plugins_and_workflow_dir_come_from_the_file() {
        let dir = std::env::temp_dir().join(format!("wf-plugins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("p.yaml");
        std::fs::write(
            &file,
            "name: p\nplugins:\n  - [\"python3\", \"tool.py\"]\n  - [\"python3\", \"tool.py\"]\nsteps:\n  - name: s\n    type: command\n    command: [cat, \"{{workflow.dir}}/data.txt\"]\n",
        )
        .unwrap();
        let set = WorkflowSet::load(&file).unwrap();
        let specs = set.plugins();
        assert_eq!(specs.len(), 1, "declared twice, started once");
        assert_eq!(specs[0].argv, ["python3", "tool.py"]);
        assert_eq!(
            specs[0].cwd.as_deref(),
            Some(dir.canonicalize().unwrap().as_path())
        );
        assert_eq!(set.root().unwrap().dir, specs[0].cwd);
        let empty =
            Workflow::from_yaml("name: e\nplugins: [[]]\nsteps: []\n", "e.yaml").unwrap_err();
        assert!(
            empty.reason.contains("plugins[0]: empty command"),
            "{empty}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn workflow_dir_template_reads_the_scope() {
        let t = crate::template::Template::parse("{{workflow.dir}}/agents").unwrap();
        let scope = crate::template::Scope::new(serde_json::Map::new())
            .with_workflow_dir(Some(Path::new("/srv/flows")));
        assert_eq!(t.render(&scope).unwrap(), "/srv/flows/agents");
        let rust_built = crate::template::Scope::new(serde_json::Map::new());
        assert_eq!(t.render(&rust_built).unwrap(), "/agents");
    }
}

mod typed_yaml_tests {
    use super::super::*;
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn parse_err(text: &str) -> String {
        Workflow::from_yaml(text, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn a_command_step_with_steps_is_rejected_naming_the_field_and_its_line() {
        let e = parse_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: x\n    steps: []\n",
        );
        assert!(e.contains("unknown field `steps`"), "{e}");
        assert!(e.contains("line 6 column 5"), "{e}");
        // Written before `type`, the stray field is reported at `type`.
        let e = parse_err(
            "name: x\nsteps:\n  - name: a\n    steps: []\n    command: x\n    type: command\n",
        );
        assert!(e.contains("unknown field `steps`"), "{e}");
        assert!(e.contains("line 6 column 5"), "{e}");
        // Loop bodies and branches are not fields of every kind any more.
        let e = parse_err(
            "name: x\nsteps:\n  - name: a\n    type: terminal\n    status: success\n    branches: []\n",
        );
        assert!(e.contains("unknown field `branches`"), "{e}");
        let e = parse_err("name: x\nsteps:\n  - name: a\n    type: stamp\n    steps: []\n");
        assert!(e.contains("unknown field `steps`"), "{e}");
    }

    #[test]
    fn a_parallel_branch_of_a_bogus_kind_is_rejected() {
        // With fields of a real kind: rejected while parsing, at the field.
        let e = parse_err(
            "name: x\nsteps:\n  - name: p\n    type: parallel\n    branches:\n      - name: b\n        type: comand\n        command: x\n",
        );
        assert!(e.contains("unknown field `command`"), "{e}");
        assert!(e.contains("line 8 column 9"), "{e}");
        // A bare unknown kind parses as a custom step; validation rejects it
        // unless registered.
        let wf = Workflow::from_yaml(
            "name: x\nsteps:\n  - name: p\n    type: parallel\n    branches:\n      - name: b\n        type: bogus\n",
            "t.yaml",
        )
        .unwrap();
        let e = WorkflowSet::new("t.yaml", wf)
            .validate(&|k| k == "known")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.yaml: step 'p.b': unknown step kind 'bogus' (not built in and not registered)"
        );
    }

    #[test]
    fn an_agent_step_with_a_typo_is_rejected_with_line_and_column() {
        let e = parse_err(
            "name: x\nsteps:\n  - name: ag\n    type: agent\n    provider: claude\n    prompt: hi\n    command_line: [x]\n",
        );
        assert!(e.contains("unknown field `command_line`"), "{e}");
        assert!(e.contains("line 7 column 5"), "{e}");
    }

    #[test]
    fn wrong_or_missing_values_are_located() {
        let e = parse_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    command: x\n    timeout_ms: abc\n",
        );
        assert!(e.contains("line 6 column 17: invalid u64"), "{e}");
        let e = parse_err("name: x\nsteps:\n  - name: a\n    command: x\n");
        assert!(e.contains("missing field `type`"), "{e}");
        let e = parse_err(
            "name: x\nsteps:\n  - name: a\n    type: command\n    type: command\n    command: x\n",
        );
        assert!(e.contains("type"), "{e}");
    }

    #[test]
    fn fields_may_come_before_type_and_keep_their_rust_type() {
        let wf = Workflow::from_yaml(
            "name: x\nsteps:\n  - name: y\n    command: [echo, '1']\n    timeout_ms: 5\n    type: command\n  - {name: 1, continue_on_error: yes, type: stamp, with: {a: 1}}\n",
            "t.yaml",
        )
        .unwrap();
        assert_eq!(
            wf.steps[0].name, "y",
            "a YAML 1.1 boolean spelling stays a name"
        );
        assert_eq!(wf.steps[0].timeout, Some(Duration::from_millis(5)));
        assert_eq!(
            wf.steps[0].kind,
            StepKind::Command {
                command: CommandLine::Argv(vec!["echo".into(), "1".into()]),
                env: BTreeMap::new(),
                stdin: None,
            }
        );
        assert_eq!(wf.steps[1].name, "1");
        assert!(wf.steps[1].continue_on_error);
        assert_eq!(wf.steps[1].kind.kind_name(), "stamp");
    }

    #[test]
    fn every_fixture_workflow_parses() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/workflows");
        let mut parsed = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                Workflow::from_yaml(&text, &path.display().to_string())
                    .unwrap_or_else(|e| panic!("{e}"));
                parsed += 1;
            }
        }
        assert!(parsed >= 7, "only {parsed} fixture workflows found");
    }
}
