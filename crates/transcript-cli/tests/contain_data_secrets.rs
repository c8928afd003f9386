//! Issue #56 item 3, secrets never leak, through the release path of the binary: with a
//! 76-character secret and a 6-digit one, every byte a run wrote (its stdout and stderr,
//! every file under the storage: the transcript, the child transcripts, the audit file; the
//! `show` and `tail` views; every `export` format, the OTLP/JSON body included) is searched
//! for the whole secret, any 8 consecutive characters of it, and its sha256 in hex.
//!
//! The runs give the secret to every place that once showed it: a `| match('…')` filter it
//! fails, a `| int` filter failing on a step output holding the secret past the 40th
//! character (a 60-character cut made before the mask leaked its first 19), a failing
//! command's error message, `| file` (a file once named after the content's sha256), a
//! `call_workflow` child that prints it, fails on it, and one whose typed input it fails;
//! and, apart, a `secret: true` input failing its own shape check.
#![allow(clippy::unwrap_used)]

mod common;
mod typed_support;

use common::sandbox::walk as files;
use common::text;
use transcript_exec::bounded::sha256_hex;
use typed_support::{Sandbox, bounded};

/// 76 characters no redaction rule recognises: only `secret: true` can mask it.
const LONG: &str = "tq8Vw2-Quokka-Ferns-41x9-Mango-Pebble-77zk-Harbor-Quill-3090-Saffron-Ndl5Yr4";
/// A 6-digit PIN.
const PIN: &str = "907315";

const WORKFLOW: &str = r#"name: leaks
inputs:
  - name: token
    secret: true
steps:
  - name: filter
    type: command
    continue_on_error: true
    command: ["printf", "%s", "{{ inputs.token | match('[a-z]+') }}"]
  - name: padded
    type: command
    command: 'printf "%s" "0123456789012345678901234567890123456789-$TOKEN-tail"'
    env: { TOKEN: "{{inputs.token}}" }
  - name: cut
    type: command
    continue_on_error: true
    command: ["printf", "%s", "{{ steps.padded.output | int }}"]
  - name: fails
    type: command
    continue_on_error: true
    command: 'echo "login with $TOKEN was refused by the server" >&2; exit 3'
    env: { TOKEN: "{{inputs.token}}" }
  - name: file
    type: command
    command: ["cat", "{{ inputs.token | file }}"]
  - name: child
    type: call_workflow
    continue_on_error: true
    workflow: child.yaml
    inputs: { x: "{{inputs.token}}" }
  - name: typed_child
    type: call_workflow
    continue_on_error: true
    workflow: typed.yaml
    inputs: { n: "{{inputs.token}}" }
"#;

const CHILD: &str = r#"name: child
inputs:
  - name: x
steps:
  - name: file
    type: command
    command: ["cat", "{{ inputs.x | file }}"]
  - name: child_filter
    type: command
    continue_on_error: true
    command: ["printf", "%s", "{{ inputs.x | url }}"]
  - name: leak
    type: command
    command: 'printf "%s\n" "$X"; printf "bad %s\n" "$X" >&2; exit 5'
    env: { X: "{{inputs.x}}" }
"#;

const TYPED_CHILD: &str = r#"name: typed
inputs:
  - name: n
    type: string
    pattern: '[a-z]+'
steps:
  - name: never
    type: command
    command: ["true"]
"#;

/// What `secret` must never appear as: whole, any 8 consecutive characters, its sha256.
fn needles(secret: &str) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    let mut all = vec![secret.to_owned(), sha256_hex(secret.as_bytes())];
    all.extend(chars.windows(8).map(|w| w.iter().collect::<String>()));
    all
}

/// The places where `needles` are found, as "place holds needle" lines.
fn leaks(places: &[(String, Vec<u8>)], needles: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    for (place, bytes) in places {
        let body = String::from_utf8_lossy(bytes);
        for needle in needles {
            if body.contains(needle.as_str()) {
                found.push(format!("{place} holds {needle:?}"));
                break;
            }
        }
    }
    found
}

/// `transcript ARGS --storage ST`, bounded; its stdout and stderr as two places.
fn command_output(sb: &Sandbox, label: &str, args: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut cmd = common::bin();
    cmd.args(args).arg("--storage").arg(sb.st());
    let out = bounded(&mut cmd).unwrap_or_else(|| panic!("{label} hung"));
    assert!(out.status.success(), "{label}: {}", common::describe(&out));
    vec![
        (format!("{label} stdout"), out.stdout),
        (format!("{label} stderr"), out.stderr),
    ]
}

/// Every byte the run (and the commands reading it back) wrote.
fn everything(sb: &Sandbox, out: &std::process::Output) -> Vec<(String, Vec<u8>)> {
    let mut places = vec![
        ("run stdout".to_owned(), out.stdout.clone()),
        ("run stderr".to_owned(), out.stderr.clone()),
    ];
    for file in files(&sb.st()) {
        places.push((file.display().to_string(), std::fs::read(&file).unwrap()));
    }
    let run_id = Sandbox::run_id(out);
    for format in ["markdown", "json", "html", "otlp-json"] {
        places.extend(command_output(
            sb,
            &format!("export {format}"),
            &["export", &run_id, "--format", format],
        ));
    }
    places.extend(command_output(sb, "show", &["show", &run_id]));
    places.extend(command_output(sb, "tail", &["tail", &run_id]));
    places
}

#[test]
fn no_byte_a_run_writes_holds_a_secret_its_eight_characters_or_its_sha256() {
    assert_eq!(LONG.chars().count(), 76);
    let mut failures = Vec::new();
    for secret in [LONG, PIN] {
        let sb = Sandbox::new();
        std::fs::write(sb.dir().join("typed.yaml"), TYPED_CHILD).unwrap();
        sb.write_workflow(WORKFLOW, Some(CHILD));
        let out = sb
            .run(&[("token", secret)], &["--deterministic"])
            .expect("the run hung");
        let stderr = text(&out.stderr);
        let label = format!("{}-character secret", secret.len());
        // Every failing step continues: the run succeeds.
        assert_eq!(
            out.status.code(),
            Some(0),
            "{label}: {}",
            common::describe(&out)
        );
        // What the mask writes instead of the secret.
        let mask = format!("…({} chars)", secret.chars().count());
        let events = sb.events();
        let error_of = |name: &str| {
            events
                .iter()
                .filter(|e| e["payload"]["name"] == name)
                .find_map(|e| e["payload"]["error"].as_str().map(str::to_owned))
                .unwrap_or_default()
        };
        // Each place failed, and said why, with the secret masked.
        for (step, says) in [
            ("filter", "is not a match"),
            ("cut", "is not an integer"),
            ("fails", "refused by the server"),
            ("leak", &format!("bad {mask}")),
            ("typed_child", "not a match"),
            ("child_filter", "is not a url"),
        ] {
            let error = error_of(step);
            if !error.contains(says) {
                failures.push(format!("{label}: step {step} failed with {error:?}"));
            }
        }
        if !error_of("cut").contains(&format!("-{mask}-tail")) {
            failures.push(format!(
                "{label}: the cut error masks the secret whole: {:?}",
                error_of("cut")
            ));
        }
        // `| file` handed the secret over: `cat` printed it (recorded masked).
        let cat = sb.stdout_of("file").unwrap_or_default();
        if cat != mask {
            failures.push(format!("{label}: cat of the | file printed {cat:?}"));
        }
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "run.started" && e["parent_run_id"].is_string()),
            "{label}: the child ran: {stderr}"
        );
        let places = everything(&sb, &out);
        assert!(places.len() > 12, "{label}: {} places", places.len());
        for leak in leaks(&places, &needles(secret)) {
            failures.push(format!("{label}: {leak}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_secret_input_failing_its_own_shape_is_named_with_its_rule_never_shown() {
    let typed = r#"name: typed
inputs:
  - name: count
    type: integer
    default: 1
  - name: token
    secret: true
    type: string
    pattern: '[a-z]+'
  - name: pin
    secret: true
    type: integer
    default: 1234
steps:
  - name: never
    type: command
    command: ["true"]
"#;
    let mut failures = Vec::new();
    for secret in [LONG, PIN] {
        let sb = Sandbox::new();
        sb.write_workflow(typed, None);
        let out = sb.run(&[("token", secret)], &[]).expect("the run hung");
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", common::describe(&out));
        assert!(
            stderr.contains("inputs.token") && stderr.contains("whole match of the pattern"),
            "the input and its rule are named: {stderr}"
        );
        let mut places = vec![
            ("run stdout".to_owned(), out.stdout.clone()),
            ("run stderr".to_owned(), out.stderr.clone()),
        ];
        for file in files(&sb.st()) {
            places.push((file.display().to_string(), std::fs::read(&file).unwrap()));
        }
        for leak in leaks(&places, &needles(secret)) {
            failures.push(format!("{}-character secret: {leak}", secret.len()));
        }
    }
    // A secret given again as another input's value, which fails its shape: masked there too.
    let sb = Sandbox::new();
    sb.write_workflow(typed, None);
    let out = sb
        .run(&[("token", LONG), ("count", LONG)], &[])
        .expect("the run hung");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", common::describe(&out));
    assert!(
        stderr.contains("inputs.count") && stderr.contains("an integer"),
        "{stderr}"
    );
    for leak in leaks(
        &[("run stderr".to_owned(), out.stderr.clone())],
        &needles(LONG),
    ) {
        failures.push(format!("a secret given twice: {leak}"));
    }
    // An integer secret that is not one.
    let sb = Sandbox::new();
    sb.write_workflow(typed, None);
    let out = sb
        .run(&[("token", "abcd"), ("pin", "12a4-Zebra-991")], &[])
        .expect("the run hung");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", common::describe(&out));
    assert!(
        stderr.contains("inputs.pin") && stderr.contains("an integer"),
        "{stderr}"
    );
    if stderr.contains("12a4") || stderr.contains("Zebra") {
        failures.push(format!("the integer secret is shown: {stderr}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
