//! `transcript run` and `transcript export` to an OTLP/HTTPS receiver behind a private CA
//! that requires an auth header (#31): configured by flags or by the standard OTEL_*
//! environment, the header arrives, a wrong header or certificate is reported and never
//! fails the run, and no header value is ever printed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../transcript-otel/tests/common/tls.rs"]
mod tls_receiver;

use std::process::{Command, Output};

use common::{DEMO_RUN_ID, demo_command};
use tls_receiver::{TestCa, TlsReceiver};
use transcript_otel::otlp_proto::common::v1::any_value;

const SECRET: &str = "sk-lf-5e3c2b1a09f8e7d6c5b4";

fn token() -> String {
    format!("Basic {SECRET}")
}

/// `OTEL_*` variables of the test process must not leak into the commands.
fn clean(mut c: Command) -> Command {
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            c.env_remove(k);
        }
    }
    c
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn span_count(receiver: &TlsReceiver) -> usize {
    receiver
        .accepted()
        .iter()
        .flat_map(|r| &r.body.resource_spans)
        .flat_map(|rs| &rs.scope_spans)
        .map(|ss| ss.spans.len())
        .sum()
}

fn resource(receiver: &TlsReceiver, key: &str) -> Option<String> {
    let accepted = receiver.accepted();
    accepted[0].body.resource_spans[0]
        .resource
        .as_ref()?
        .attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            _ => None,
        })
}

#[test]
fn a_run_exports_over_https_with_flags() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("cli test CA");
    let receiver = TlsReceiver::start(&ca, "authorization", &token());
    let ca_file = ca.write(dir.path(), "ca.pem");
    let out = clean(demo_command(&dir.path().join("s"), &dir.path().join("ws")))
        .args(["--otlp-endpoint", &receiver.endpoint])
        .arg("--otlp-certificate")
        .arg(&ca_file)
        .args(["--otlp-header", &format!("authorization={}", token())])
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("exported"), "{all}");
    assert!(!all.contains(SECRET), "{all}");
    assert!(span_count(&receiver) > 20, "{all}");
    assert_eq!(receiver.rejected(), 0);
}

#[test]
fn the_environment_configures_endpoint_headers_ca_and_resource() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("cli test CA");
    let receiver = TlsReceiver::start(&ca, "authorization", &token());
    let ca_file = ca.write(dir.path(), "ca.pem");
    let storage = dir.path().join("s");
    let env = |c: Command| {
        let mut c = clean(c);
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
            // Percent-encoded, as the specification writes headers.
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("authorization=Basic%20{SECRET}"),
            )
            .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca_file)
            .env(
                "OTEL_RESOURCE_ATTRIBUTES",
                "openinference.project.name=transcript-ci,deployment.environment=test",
            )
            .env("OTEL_SERVICE_NAME", "review-bot");
        c
    };
    // Live, with no OTLP flag at all.
    let out = env(demo_command(&storage, &dir.path().join("ws")))
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("exported"), "{all}");
    assert!(!all.contains(SECRET), "{all}");
    let live = span_count(&receiver);
    assert!(live > 20, "{all}");
    assert_eq!(
        resource(&receiver, "openinference.project.name").as_deref(),
        Some("transcript-ci")
    );
    assert_eq!(
        resource(&receiver, "service.name").as_deref(),
        Some("review-bot")
    );

    // Stored, the same way.
    let mut export = env(Command::new(env!("CARGO_BIN_EXE_transcript")));
    let out = export
        .args(["export", DEMO_RUN_ID, "--format", "otlp", "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert_eq!(span_count(&receiver), 2 * live, "{all}");

    // A flag replaces the environment's header of the same name: a wrong one is refused.
    let out = env(Command::new(env!("CARGO_BIN_EXE_transcript")))
        .args(["export", DEMO_RUN_ID, "--format", "otlp", "--storage"])
        .arg(&storage)
        .args(["--otlp-header", "Authorization=Basic sk-other-1234567890"])
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("401"), "{all}");
    assert!(
        !all.contains("sk-other-1234567890") && !all.contains(SECRET),
        "{all}"
    );
    assert!(receiver.rejected() > 0);
}

#[test]
fn a_wrong_certificate_or_header_never_fails_the_run_and_never_shows_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("server CA");
    let other = TestCa::new("another CA").write(dir.path(), "other.pem");
    let receiver = TlsReceiver::start(&ca, "authorization", &token());
    let ca_file = ca.write(dir.path(), "ca.pem");

    let out = clean(demo_command(
        &dir.path().join("s1"),
        &dir.path().join("ws1"),
    ))
    .args(["--otlp-endpoint", &receiver.endpoint])
    .arg("--otlp-certificate")
    .arg(&other)
    .args(["--otlp-header", &format!("authorization={}", token())])
    .output()
    .unwrap();
    let all = text(&out);
    assert!(
        out.status.success(),
        "export failures never fail the run: {all}"
    );
    assert!(all.contains("TLS handshake failed"), "{all}");
    assert!(all.contains("--otlp-certificate"), "{all}");
    assert!(!all.contains(SECRET), "{all}");

    // The right CA, a wrong header (which the receiver quotes back in its 401).
    let wrong = "Bearer sk-wrong-0011223344556677";
    let out = clean(demo_command(
        &dir.path().join("s2"),
        &dir.path().join("ws2"),
    ))
    .args(["--otlp-endpoint", &receiver.endpoint])
    .arg("--otlp-certificate")
    .arg(&ca_file)
    .args(["--otlp-header", &format!("authorization={wrong}")])
    .output()
    .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("401"), "{all}");
    assert!(!all.contains("sk-wrong-0011223344556677"), "{all}");
    assert!(receiver.accepted().is_empty());
    assert!(receiver.rejected() > 0);

    // A malformed header flag is a usage error that does not echo it.
    let out = clean(demo_command(
        &dir.path().join("s3"),
        &dir.path().join("ws3"),
    ))
    .args(["--otlp-endpoint", &receiver.endpoint])
    .args(["--otlp-header", SECRET])
    .output()
    .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(all.contains("--otlp-header"), "{all}");
    assert!(!all.contains(SECRET), "{all}");
}

#[test]
fn otlp_json_files_carry_the_environments_resource() {
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("s");
    let out = clean(demo_command(&storage, &dir.path().join("ws")))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = clean(Command::new(env!("CARGO_BIN_EXE_transcript")))
        .args(["export", DEMO_RUN_ID, "--format", "otlp-json", "--storage"])
        .arg(&storage)
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=from-attrs,openinference.project.name=files%20too",
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let attrs = &doc["resourceSpans"][0]["resource"]["attributes"];
    let value = |key: &str| {
        attrs
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    assert_eq!(value("service.name"), Some("from-attrs".into()), "{attrs}");
    assert_eq!(
        value("openinference.project.name"),
        Some("files too".into()),
        "{attrs}"
    );
}
