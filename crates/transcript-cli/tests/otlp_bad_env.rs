//! Bad `OTEL_*` values never stop `transcript run` (#41 item 1): the SDK specification's rule
//! (an invalid value is reported and ignored). Each case runs the demo with live export to an
//! OTLP/HTTP receiver on 127.0.0.1 and checks, from outside the binary: the exit status, that
//! the receiver got the spans that could be exported, one warning naming the variable, and
//! the reason in the export's summary line at the end of the run. An unreadable certificate
//! named by a flag is exit 3 (README: "unreadable file"), not 2, and starts no run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::demo_command;

use common::otlp_receiver::Receiver;

/// Runs the demo with live export to `receiver` (through `OTEL_EXPORTER_OTLP_ENDPOINT`) and
/// the environment `env`; returns (exit code, stderr).
fn run_demo(receiver: &Receiver, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = demo_command(&dir.path().join("s"), &dir.path().join("ws"));
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The lines of `stderr` that mention `needle`.
fn lines_with<'a>(stderr: &'a str, needle: &str) -> Vec<&'a str> {
    stderr.lines().filter(|l| l.contains(needle)).collect()
}

/// The export's summary line (the last line naming the export).
fn summary(stderr: &str) -> &str {
    stderr
        .lines()
        .rev()
        .find(|l| l.contains("exported") || l.contains("OTLP export"))
        .unwrap_or_else(|| panic!("no export summary line in:\n{stderr}"))
}

#[test]
fn an_unknown_protocol_is_reported_once_and_the_default_is_used() {
    let receiver = Receiver::start();
    let (code, stderr) = run_demo(
        &receiver,
        &[("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(receiver.span_count() > 20, "{stderr}");
    let warnings = lines_with(&stderr, "warning: OTEL_EXPORTER_OTLP_PROTOCOL");
    assert_eq!(warnings.len(), 1, "warned once:\n{stderr}");
    assert!(
        summary(&stderr).contains("OTEL_EXPORTER_OTLP_PROTOCOL"),
        "the reason is in the summary line:\n{stderr}"
    );
}

#[test]
fn resource_attributes_without_a_value_are_ignored_whole_and_the_spans_still_go() {
    let receiver = Receiver::start();
    let (code, stderr) = run_demo(&receiver, &[("OTEL_RESOURCE_ATTRIBUTES", "team=a,novalue")]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(receiver.span_count() > 20, "{stderr}");
    // The specification: on a decoding error the whole value is discarded.
    for request in receiver.requests() {
        for rs in &request.resource_spans {
            let keys: Vec<&str> = rs
                .resource
                .as_ref()
                .unwrap()
                .attributes
                .iter()
                .map(|a| a.key.as_str())
                .collect();
            assert_eq!(keys, ["service.name"], "{stderr}");
        }
    }
    assert_eq!(
        lines_with(&stderr, "warning: OTEL_RESOURCE_ATTRIBUTES").len(),
        1,
        "{stderr}"
    );
    assert!(
        summary(&stderr).contains("OTEL_RESOURCE_ATTRIBUTES"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("novalue"),
        "entries are not quoted (they may be secrets)"
    );
}

#[test]
fn a_missing_certificate_in_the_environment_is_ignored_with_a_warning() {
    let receiver = Receiver::start();
    let (code, stderr) = run_demo(
        &receiver,
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", "/missing.pem")],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        receiver.span_count() > 20,
        "plain http needs no CA:\n{stderr}"
    );
    assert_eq!(
        lines_with(&stderr, "warning: OTEL_EXPORTER_OTLP_CERTIFICATE").len(),
        1,
        "{stderr}"
    );
    assert!(summary(&stderr).contains("/missing.pem"), "{stderr}");
}

#[test]
fn an_endpoint_that_is_not_a_url_runs_without_export_and_says_why_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        lines_with(&stderr, "warning: OTEL_EXPORTER_OTLP_ENDPOINT").len(),
        1,
        "{stderr}"
    );
    let last = summary(&stderr);
    assert!(
        last.contains("OTLP export off") && last.contains("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{stderr}"
    );
    // The run itself was recorded.
    assert!(std::fs::read_dir(&storage).unwrap().count() >= 1);
}

#[test]
fn an_unreadable_certificate_named_by_a_flag_is_exit_3_and_starts_no_run() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = demo_command(&storage, &dir.path().join("ws"))
        .args([
            "--otlp-endpoint",
            "https://127.0.0.1:1",
            "--otlp-certificate",
            "/missing.pem",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("/missing.pem"), "{stderr}");
    assert!(
        !storage.exists() || std::fs::read_dir(&storage).unwrap().count() == 0,
        "no run was started"
    );
}
