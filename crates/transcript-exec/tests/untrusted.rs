//! Data the workflow author does not control (inputs, an agent's answer, a
//! tool's or step's output) stays data: it reaches commands as environment
//! variables or argv elements, never as shell source (#28); conditions
//! compare it, literal braces pass through (issue #21).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use transcript_domain::{DecodedEvent, EventType};
use transcript_exec::{ExecutionService, RunOutcome, ToolError, Workflow, WorkflowSet};

use support::*;

/// Shell payloads that each create `PWNED` if they reach the shell as code.
const PAYLOADS: &[&str] = &[
    "x'; touch PWNED; echo '",
    "$(touch PWNED)",
    "`touch PWNED`",
    "\"; touch PWNED; echo \"",
    "a b; touch PWNED #",
    "PWNED=1 touch PWNED",
];

/// Every way a command can use a value: an env variable quoted in the
/// script, inside a here-document, inside "…", inside $(…), standard input and a private
/// file of a list-form command (free text is never an argument, #48), and run_command's
/// string input with its env.
fn sinks(value: &str) -> String {
    let file = value.replace("}}", " | file }}");
    format!(
        r#"
  - name: bare
    type: command
    command: "printf '%s\n' \"$V\""
    env: {{ V: "{value}" }}
  - name: single
    type: command
    command: "cat <<EOF\ngot $V\nEOF"
    env: {{ V: "{value}" }}
  - name: double
    type: command
    command: "echo \"got $V\""
    env: {{ V: "{value}" }}
  - name: subst
    type: command
    command: "echo \"$(printf '%s' \"$V\")\""
    env: {{ V: "{value}" }}
  - name: argv
    type: command
    command: ["cat"]
    stdin: "{value}"
  - name: file
    type: command
    command: ["cat", "{file}"]
  - name: tool
    type: operation
    tool: run_command
    input: {{ command: "printf '%s' \"$V\"", env: {{ V: "{value}" }} }}
  - name: chained
    type: command
    command: "printf '%s' \"$V\""
    env: {{ V: "{{{{steps.bare.output}}}}" }}
"#
    )
}

async fn run_yaml(
    ws: &Path,
    yaml: &str,
    inputs: Map<String, Value>,
) -> (Arc<MemoryFactory>, RunOutcome) {
    let factory = MemoryFactory::new();
    let svc = ExecutionService::deterministic_builder(ws, ts0())
        .recorder_factory(factory.clone())
        .build()
        .unwrap();
    let wf = Workflow::from_yaml(yaml, "untrusted.yaml").unwrap();
    let out = svc
        .run(&WorkflowSet::new("u", wf), inputs, CancellationToken::new())
        .await
        .unwrap();
    (factory, out)
}

fn completed(events: &[DecodedEvent], path: &str) -> Value {
    events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::StepCompleted) && e.path == path)
        .and_then(|e| e.step())
        .and_then(|s| s.result.as_ref())
        .map(|r| r.to_value())
        .unwrap_or_else(|| panic!("no result for {path}"))
}

/// The literal payload arrived at every sink as data and nothing ran.
fn assert_literal(ws: &Path, events: &[DecodedEvent], payload: &str) {
    assert!(
        !ws.join("PWNED").exists(),
        "payload {payload:?} ran as shell code"
    );
    let stdout = |p: &str| completed(events, p)["stdout"].as_str().unwrap().to_owned();
    assert_eq!(stdout("bare"), format!("{payload}\n"), "{payload:?}");
    assert_eq!(stdout("single"), format!("got {payload}\n"), "{payload:?}");
    assert_eq!(stdout("double"), format!("got {payload}\n"), "{payload:?}");
    assert_eq!(stdout("subst"), format!("{payload}\n"), "{payload:?}");
    assert_eq!(stdout("argv"), payload, "{payload:?}");
    assert_eq!(stdout("file"), payload, "{payload:?}");
    assert_eq!(
        completed(events, "tool")["stdout"].as_str().unwrap(),
        payload
    );
    assert_eq!(stdout("chained"), payload, "{payload:?}");
}

#[tokio::test]
async fn payload_through_an_input_stays_data() {
    for payload in PAYLOADS {
        let (_d, ws) = workspace();
        let yaml = format!(
            "name: via_input\ninputs: [{{ name: who }}]\nsteps:{}",
            sinks("{{inputs.who}}")
        );
        let mut inputs = Map::new();
        inputs.insert("who".into(), json!(payload));
        let (factory, out) = run_yaml(&ws, &yaml, inputs).await;
        assert!(out.succeeded(), "{payload:?}: {:?}", out.error);
        assert_literal(&ws, &factory.events(out.run_id), payload);
    }
}

/// A replay agent (`cat` of a recorded Claude stream) whose answer is `answer`.
fn replay_agent_answering(dir: &Path, answer: &str) -> String {
    let lines = [
        json!({"type": "system", "subtype": "init", "session_id": "s", "model": "m", "tools": [], "uuid": "u0"}),
        json!({"type": "assistant", "message": {"id": "msg_1", "model": "m", "role": "assistant",
            "content": [{"type": "text", "text": answer}],
            "usage": {"input_tokens": 1, "output_tokens": 1}}, "session_id": "s", "uuid": "u1"}),
        json!({"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
            "result": answer, "session_id": "s", "uuid": "u2"}),
    ];
    let file = dir.join("answer.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

#[tokio::test]
async fn payload_through_an_agents_answer_stays_data() {
    for payload in PAYLOADS {
        let (_d, ws) = workspace();
        let stream = tempfile::tempdir().unwrap();
        let file = replay_agent_answering(stream.path(), payload);
        let dir = stream.path().display().to_string();
        let yaml = format!(
            r#"name: via_agent
steps:
  - name: ask
    type: agent
    provider: claude
    command: ["cat", {file:?}]
    sandbox: {{ read: [{dir:?}] }}
    prompt: "Say something."{}"#,
            sinks("{{steps.ask.output}}")
        );
        let (factory, out) = run_yaml(&ws, &yaml, Map::new()).await;
        assert!(out.succeeded(), "{payload:?}: {:?}", out.error);
        let events = factory.events(out.run_id);
        assert_eq!(completed(&events, "ask"), json!(payload));
        assert_literal(&ws, &events, payload);
    }
}

#[tokio::test]
async fn payload_through_a_tools_output_stays_data() {
    for payload in PAYLOADS {
        let (_d, ws) = workspace();
        std::fs::write(ws.join("page.txt"), payload).unwrap();
        let yaml = format!(
            r#"name: via_tool
steps:
  - name: read
    type: operation
    tool: read_file
    input: {{ path: page.txt }}{}"#,
            sinks("{{steps.read.output}}")
        );
        let (factory, out) = run_yaml(&ws, &yaml, Map::new()).await;
        assert!(out.succeeded(), "{payload:?}: {:?}", out.error);
        assert_literal(&ws, &factory.events(out.run_id), payload);
    }
}

#[tokio::test]
async fn the_demo_with_a_hostile_input_creates_nothing() {
    // The issue's reproduction: demo.yaml --input "who=x'; touch PWNED; echo '".
    let (_d, ws) = workspace();
    let payload = PAYLOADS[0];
    let set = WorkflowSet::load(fixtures().join("workflows/demo.yaml")).unwrap();
    let mut router = transcript_exec::ToolRouter::with_builtins();
    transcript_exec::start_declared_plugins(&set, &mut router)
        .await
        .unwrap();
    let factory = MemoryFactory::new();
    let builder = ExecutionService::deterministic_builder(&ws, ts0())
        .recorder_factory(factory.clone())
        .router(router);
    let svc = with_stamp_step(builder).build().unwrap();
    let mut inputs = Map::new();
    inputs.insert("who".into(), json!(payload));
    let out = svc
        .run(&set, inputs, CancellationToken::new())
        .await
        .unwrap();
    assert!(out.succeeded(), "{:?}", out.error);
    assert!(!ws.join("PWNED").exists());
    let events = factory.events(out.run_id);
    assert_eq!(
        completed(&events, "greet")["stdout"],
        json!(format!("hello {payload}\n"))
    );
}

#[tokio::test]
async fn raw_is_the_authors_explicit_opt_out() {
    let (_d, ws) = workspace();
    let yaml = r#"name: raw
inputs: [{ name: script }]
steps:
  - name: run
    type: command
    command: "{{ inputs.script | raw }}"
"#;
    let mut inputs = Map::new();
    inputs.insert("script".into(), json!("touch MADE && echo made"));
    let (factory, out) = run_yaml(&ws, yaml, inputs).await;
    assert!(out.succeeded(), "{:?}", out.error);
    assert!(ws.join("MADE").exists());
    assert_eq!(
        completed(&factory.events(out.run_id), "run")["stdout"],
        json!("made\n")
    );
}

#[test]
fn every_value_in_shell_source_is_rejected_before_the_run() {
    for command in [
        "echo {{inputs.x}}",
        "echo '{{inputs.x}}'",
        "echo \"{{inputs.x}}\"",
        "echo $(( {{inputs.x}} + 1 ))",
        "echo `cat {{inputs.x}}`",
        "echo ${HOME:-{{inputs.x}}}",
        "cat <<EOF\n{{inputs.x}}\nEOF",
        "echo hi # {{inputs.x}}",
        "echo \\{{inputs.x}}",
        "echo $'{{inputs.x}}'",
    ] {
        let wf = Workflow::new("w")
            .input("x", None)
            .step(transcript_exec::Step::command("c", command));
        let err = WorkflowSet::new("w", wf)
            .validate(&|_| false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spliced into shell source"),
            "{command:?}: {err}"
        );
        assert!(err.contains("env: { X: "), "{command:?}: {err}");
    }
}

#[tokio::test]
async fn literal_braces_in_prompts_and_nested_json_in_commands() {
    let (_d, ws) = workspace();
    let stream = tempfile::tempdir().unwrap();
    let file = replay_agent_answering(stream.path(), "ok");
    let dir = stream.path().display().to_string();
    let yaml = format!(
        r#"name: braces
inputs: [{{ name: n, default: 7 }}]
steps:
  - name: ask
    type: agent
    provider: claude
    command: ["cat", {file:?}]
    sandbox: {{ read: [{dir:?}] }}
    prompt: "Explain {{% raw %}}{{{{ .Values.image.tag }}}}{{% endraw %}} and {{{{ '{{{{' }}}} end }}}} for {{{{inputs.n}}}}."
  - name: json
    type: command
    command: 'printf "%s" "{{\"a\":{{\"b\":$N}}}}"'
    env: {{ N: "{{{{inputs.n}}}}" }}
  - name: plain_json
    type: command
    command: "printf '%s' '{{\"a\":{{\"b\":[{{}}]}}}}'"
"#
    );
    let (factory, out) = run_yaml(&ws, &yaml, Map::new()).await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    let user = events
        .iter()
        .find(|e| e.kind.known() == Some(EventType::MessageUser))
        .unwrap()
        .message()
        .unwrap()
        .to_message()
        .unwrap();
    assert_eq!(
        user.blocks[0].as_text(),
        Some("Explain {{ .Values.image.tag }} and {{ end }} for 7.")
    );
    assert_eq!(
        completed(&events, "json")["stdout"],
        json!(r#"{"a":{"b":7}}"#)
    );
    assert_eq!(
        completed(&events, "plain_json")["stdout"],
        json!(r#"{"a":{"b":[{}]}}"#)
    );
}

#[tokio::test]
async fn while_conditions_compare_data_containing_operators() {
    // Loop until the probe echoes the input back. Rendering first and
    // parsing after would split at the data's own `!=` and never stop.
    for data in ["a != b == c", "x == y", "left != right"] {
        let (_d, ws) = workspace();
        let yaml = r#"name: cond
inputs: [{ name: data }]
steps:
  - name: poll
    type: while
    condition: "{{steps.probe.output}} != {{inputs.data}}"
    max_iterations: 3
    steps:
      - name: probe
        type: command
        command: ["cat"]
        stdin: "{{inputs.data}}"
"#;
        let mut inputs = Map::new();
        inputs.insert("data".into(), json!(data));
        let (factory, out) = run_yaml(&ws, yaml, inputs).await;
        assert!(out.succeeded(), "{data:?}: {:?}", out.error);
        assert_eq!(
            completed(&factory.events(out.run_id), "poll"),
            json!({"iterations": 1}),
            "{data:?}"
        );
    }
}

#[tokio::test]
async fn file_tools_answer_the_same_for_missing_and_outside_paths() {
    let outer = tempfile::tempdir().unwrap();
    let ws = outer.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    std::fs::write(outer.path().join("secret.txt"), "s").unwrap();
    std::fs::create_dir(outer.path().join("secret_dir")).unwrap();
    let router = transcript_exec::ToolRouter::with_builtins();
    let scope = transcript_exec::CallScope::new(
        transcript_exec::Emitter::new(None),
        "s",
        0,
        ws.clone(),
        CancellationToken::new(),
    );
    let answer = |e: ToolError, path: &str| e.to_string().replace(path, "<path>");
    for (tool, existing, missing, field) in [
        ("read_file", "../secret.txt", "../absent.txt", None),
        ("list_dir", "../secret_dir", "../absent_dir", None),
        (
            "write_file",
            "../secret_dir/new.txt",
            "../absent_dir/new.txt",
            Some("content"),
        ),
    ] {
        let input = |p: &str| {
            let mut v = json!({ "path": p });
            if let Some(f) = field {
                v[f] = json!("x");
            }
            v
        };
        let outside = router
            .call_tool(&scope, tool, input(existing), None)
            .await
            .unwrap_err();
        let absent = router
            .call_tool(&scope, tool, input(missing), None)
            .await
            .unwrap_err();
        assert_eq!(
            answer(outside.clone(), existing),
            answer(absent, missing),
            "{tool}"
        );
        assert!(matches!(outside, ToolError::PathEscapes(_)), "{tool}");
    }
    // A missing file inside the workspace gets the same answer too.
    let inside = router
        .call_tool(&scope, "read_file", json!({"path": "nope.txt"}), None)
        .await
        .unwrap_err();
    assert_eq!(
        answer(inside, "nope.txt"),
        "path '<path>' is outside the workspace or does not exist"
    );
    assert!(!outer.path().join("secret_dir/new.txt").exists());
}

#[tokio::test]
async fn run_command_env_takes_numbers_and_strings_as_text() {
    // `{{loop.index}}` alone renders a number; the variable gets its text.
    let (_d, ws) = workspace();
    let yaml = r#"name: env_tool
inputs: [{ name: who }]
steps:
  - name: poll
    type: while
    condition: "{{loop.index}} != 2"
    max_iterations: 5
    steps:
      - name: count
        type: operation
        tool: run_command
        input: { command: 'printf "%s" "$((N + 1))"', env: { N: "{{loop.index}}" } }
  - name: greet
    type: operation
    tool: run_command
    input: { command: 'printf "%s" "$WHO"', env: { WHO: "{{inputs.who}}" } }
"#;
    let mut inputs = Map::new();
    inputs.insert("who".into(), json!("$(touch PWNED)"));
    let (factory, out) = run_yaml(&ws, yaml, inputs).await;
    assert!(out.succeeded(), "{:?}", out.error);
    let events = factory.events(out.run_id);
    assert_eq!(completed(&events, "poll"), json!({"iterations": 2}));
    assert_eq!(completed(&events, "poll.count")["stdout"], json!("1"));
    assert_eq!(
        completed(&events, "greet")["stdout"],
        json!("$(touch PWNED)")
    );
    assert!(!ws.join("PWNED").exists());
}
