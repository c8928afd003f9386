//! OTLP settings: flags over `OTEL_EXPORTER_OTLP_TRACES_*` over `OTEL_EXPORTER_OTLP_*` (the
//! specification's precedence and endpoint path rules), header and resource parsing, and the
//! rule that no header value ever shows in an error or a `Debug` output.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use std::collections::HashMap;
use transcript_otel::config::*;
use transcript_otel::{ExportError, OtlpFlags, OtlpHttpConfig};

fn resolve(flags: &OtlpFlags, env: &[(&str, &str)]) -> Result<Option<OtlpHttpConfig>, ExportError> {
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    OtlpHttpConfig::resolve(flags, &|k| env.get(k).cloned())
}

fn url(config: &OtlpHttpConfig) -> String {
    config.traces_url().unwrap()
}

#[test]
fn endpoints_follow_the_spec_path_rules_and_precedence() {
    let none = OtlpFlags::default();
    assert!(resolve(&none, &[]).unwrap().is_none());
    // General: /v1/traces appended to the path, whatever it is.
    for (base, expected) in [
        ("http://c:4318", "http://c:4318/v1/traces"),
        ("http://c:4318/", "http://c:4318/v1/traces"),
        ("https://c/otlp", "https://c/otlp/v1/traces"),
        ("https://c/otlp/", "https://c/otlp/v1/traces"),
    ] {
        let c = resolve(&none, &[(ENV_ENDPOINT, base)]).unwrap().unwrap();
        assert_eq!(url(&c), expected, "{base}");
    }
    // Signal-specific: as is (even without a path), and over the general one.
    let c = resolve(
        &none,
        &[
            (ENV_ENDPOINT, "http://general:4318"),
            (ENV_TRACES_ENDPOINT, "http://t:4318"),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(url(&c), "http://t:4318");
    // A flag over both, with the flag rule (base gets /v1/traces, a path is kept).
    let flag = OtlpFlags {
        endpoint: Some("https://flag:6006".into()),
        ..OtlpFlags::default()
    };
    let c = resolve(&flag, &[(ENV_TRACES_ENDPOINT, "http://t:4318")])
        .unwrap()
        .unwrap();
    assert_eq!(url(&c), "https://flag:6006/v1/traces");
    let mut c = OtlpHttpConfig::new("http://localhost:6006/v1/traces");
    assert_eq!(url(&c), "http://localhost:6006/v1/traces");
    c.endpoint = "ftp://x".into();
    assert!(c.traces_url().is_err());
    c.endpoint = "http://".into();
    assert!(c.traces_url().is_err());
}

#[test]
fn export_can_be_disabled_from_the_environment_unless_a_flag_asks() {
    for disable in [(ENV_SDK_DISABLED, "true"), (ENV_TRACES_EXPORTER, "none")] {
        assert!(
            resolve(
                &OtlpFlags::default(),
                &[(ENV_ENDPOINT, "http://c:4318"), disable]
            )
            .unwrap()
            .is_none()
        );
        let flag = OtlpFlags {
            endpoint: Some("http://c:4318".into()),
            ..OtlpFlags::default()
        };
        assert!(resolve(&flag, &[disable]).unwrap().is_some());
    }
}

#[test]
fn headers_are_decoded_merged_and_flags_win() {
    let env = [
        (ENV_ENDPOINT, "http://c:4318"),
        (ENV_HEADERS, "general=1"),
        (
            ENV_TRACES_HEADERS,
            " Authorization = Basic%20cGs6c2s= , x-team=a%2Cb,,",
        ),
    ];
    let c = resolve(&OtlpFlags::default(), &env).unwrap().unwrap();
    // The signal-specific variable replaces the general one; values percent-decoded.
    assert_eq!(
        c.headers,
        vec![
            ("Authorization".into(), "Basic cGs6c2s=".into()),
            ("x-team".into(), "a,b".into())
        ]
    );
    let flags = OtlpFlags {
        headers: vec!["authorization=Bearer flag".into(), "x-new=2".into()],
        ..OtlpFlags::default()
    };
    let c = resolve(&flags, &env).unwrap().unwrap();
    assert_eq!(
        c.headers,
        vec![
            ("x-team".into(), "a,b".into()),
            ("authorization".into(), "Bearer flag".into()),
            ("x-new".into(), "2".into())
        ]
    );
}

#[test]
fn timeout_certificate_service_name_and_resource_attributes() {
    let env = [
        (ENV_ENDPOINT, "http://c:4318"),
        (ENV_TIMEOUT, "2500"),
        (ENV_TRACES_TIMEOUT, "1500"),
        (
            ENV_RESOURCE_ATTRIBUTES,
            "service.name=from-resource,openinference.project.name=my%20project,deployment.environment=ci",
        ),
    ];
    let c = resolve(&OtlpFlags::default(), &env).unwrap().unwrap();
    assert_eq!(c.timeout, Duration::from_millis(1500));
    assert_eq!(c.service_name, "from-resource");
    assert_eq!(
        c.resource_attributes,
        vec![
            ("openinference.project.name".into(), "my project".into()),
            ("deployment.environment".into(), "ci".into())
        ]
    );
    let mut with_name = env.to_vec();
    with_name.push((ENV_SERVICE_NAME, "svc"));
    let c = resolve(&OtlpFlags::default(), &with_name).unwrap().unwrap();
    assert_eq!(c.service_name, "svc");
    let flags = OtlpFlags {
        timeout: Some(Duration::from_secs(1)),
        ..OtlpFlags::default()
    };
    assert_eq!(
        resolve(&flags, &env).unwrap().unwrap().timeout,
        Duration::from_secs(1)
    );
    // A bad value of the environment is noted and ignored (the SDK specification's rule):
    // the general variable or the default applies.
    let c = resolve(
        &OtlpFlags::default(),
        &[
            (ENV_ENDPOINT, "http://c"),
            (ENV_TRACES_TIMEOUT, "soon"),
            (ENV_TIMEOUT, "700"),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(c.timeout, Duration::from_millis(700));
    assert_eq!(c.ignored.len(), 1);
    assert!(
        c.ignored[0].starts_with(ENV_TRACES_TIMEOUT),
        "{:?}",
        c.ignored
    );
    // A certificate of the environment that cannot be read is noted, naming the file, and
    // ignored; one named by a flag is an error naming the file.
    let c = resolve(
        &OtlpFlags::default(),
        &[
            (ENV_ENDPOINT, "https://c"),
            (ENV_CERTIFICATE, "/nonexistent/ca.pem"),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(c.certificate, None);
    assert!(
        c.ignored[0].contains("/nonexistent/ca.pem"),
        "{:?}",
        c.ignored
    );
    let flags = OtlpFlags {
        endpoint: Some("https://c".into()),
        certificate: Some("/nonexistent/ca.pem".into()),
        ..OtlpFlags::default()
    };
    match resolve(&flags, &[]).unwrap_err() {
        ExportError::Unreadable { path, .. } => {
            assert_eq!(path, std::path::Path::new("/nonexistent/ca.pem"))
        }
        other => panic!("{other:?}"),
    }
    // Resource attributes that do not decode are discarded whole.
    let c = resolve(
        &OtlpFlags::default(),
        &[
            (ENV_ENDPOINT, "http://c"),
            (ENV_RESOURCE_ATTRIBUTES, "a=1,novalue"),
        ],
    )
    .unwrap()
    .unwrap();
    assert!(c.resource_attributes.is_empty());
    assert!(
        c.ignored[0].starts_with(ENV_RESOURCE_ATTRIBUTES),
        "{:?}",
        c.ignored
    );
}

#[test]
fn header_values_never_appear_in_errors_or_debug() {
    let secret = "sk-lf-0123456789abcdef";
    // Malformed entries in many shapes: the error names the position, not the text.
    for bad in [
        secret.to_owned(),
        format!("=={secret}"),
        format!("ok=1,{secret}"),
        format!("=x{secret}"),
    ] {
        // From the environment: noted (naming the variable, never the text) and ignored.
        let c = resolve(
            &OtlpFlags::default(),
            &[(ENV_ENDPOINT, "http://c"), (ENV_HEADERS, &bad)],
        )
        .unwrap()
        .unwrap();
        let err = c.ignored.join("; ");
        assert!(c.headers.is_empty());
        assert!(!err.contains(secret), "{err}");
        assert!(err.contains(ENV_HEADERS), "{err}");
        assert!(!format!("{c:?}").contains(secret));
    }
    for bad in [secret.to_owned(), format!("={secret}")] {
        let flags = OtlpFlags {
            endpoint: Some("http://c".into()),
            headers: vec![bad],
            ..OtlpFlags::default()
        };
        let err = resolve(&flags, &[]).unwrap_err().to_string();
        assert!(!err.contains(secret), "{err}");
    }
    // A value that cannot be sent (a newline) is refused without quoting it.
    let flags = OtlpFlags {
        endpoint: Some("http://c".into()),
        headers: vec![format!("x-key={secret}\nInjected: 1")],
        ..OtlpFlags::default()
    };
    let err = resolve(&flags, &[]).unwrap_err().to_string();
    assert!(!err.contains(secret) && err.contains("x-key"), "{err}");
    // Debug output of flags and config.
    let flags = OtlpFlags {
        endpoint: Some("https://user:pa55word@c".into()),
        headers: vec![format!("Authorization=Basic {secret}")],
        ..OtlpFlags::default()
    };
    let config = resolve(&flags, &[]).unwrap().unwrap();
    for text in [format!("{flags:?}"), format!("{config:?}")] {
        assert!(
            !text.contains(secret) && !text.contains("pa55word"),
            "{text}"
        );
    }
    // Masking of arbitrary messages: the whole value, the token alone, the password.
    let msg = format!(
        "401 from https://user:pa55word@c: bad credentials Basic {secret} (token {secret})"
    );
    let masked = config.mask(&msg);
    assert!(
        !masked.contains(secret) && !masked.contains("pa55word"),
        "{masked}"
    );
    assert_eq!(config.display_endpoint(), "https://user:***@c/");
    // A short, non-secret header value does not garble messages.
    let flags = OtlpFlags {
        endpoint: Some("https://c".into()),
        headers: vec![
            "x-langfuse-ingestion-version=4".into(),
            format!("x-key={secret}"),
        ],
        ..OtlpFlags::default()
    };
    let config = resolve(&flags, &[]).unwrap().unwrap();
    assert_eq!(
        config.mask(&format!("HTTP 401 Unauthorized: bad key {secret}")),
        "HTTP 401 Unauthorized: bad key ***"
    );
}

#[test]
fn the_protocol_variables_and_flag_are_honoured_and_an_unknown_value_is_noted_and_ignored() {
    let base = (ENV_ENDPOINT, "http://h:4318");
    let resolved = |env: &[(&str, &str)]| resolve(&OtlpFlags::default(), env).unwrap().unwrap();
    let protocol = |env: &[(&str, &str)]| resolved(env).protocol;
    assert_eq!(protocol(&[base]), Protocol::HttpProtobuf, "the default");
    assert_eq!(
        protocol(&[base, (ENV_PROTOCOL, "http/json")]),
        Protocol::HttpJson
    );
    assert_eq!(
        protocol(&[base, (ENV_PROTOCOL, " HTTP/Protobuf ")]),
        Protocol::HttpProtobuf
    );
    assert_eq!(protocol(&[base, (ENV_PROTOCOL, "grpc")]), Protocol::Grpc);
    // The signal-specific variable wins over the general one, either way.
    assert_eq!(
        protocol(&[
            base,
            (ENV_PROTOCOL, "grpc"),
            (ENV_TRACES_PROTOCOL, "http/json")
        ]),
        Protocol::HttpJson
    );
    // A value outside the specification's: noted (variable and value) and the next
    // variable, else the default, applies.
    for (env, expected) in [
        (
            vec![
                base,
                (ENV_PROTOCOL, "http/json"),
                (ENV_TRACES_PROTOCOL, "http/xml"),
            ],
            Protocol::HttpJson,
        ),
        (
            vec![base, (ENV_PROTOCOL, "carrier-pigeon")],
            Protocol::HttpProtobuf,
        ),
    ] {
        let c = resolved(&env);
        assert_eq!(c.protocol, expected);
        assert_eq!(c.ignored.len(), 1, "{:?}", c.ignored);
        let (variable, value) = env[env.len() - 1];
        assert!(
            c.ignored[0].contains(variable) && c.ignored[0].contains(value),
            "{:?}",
            c.ignored
        );
    }
    // gRPC: the general endpoint is used as given (no /v1/traces), requests go to the
    // trace service's method.
    let c = resolved(&[(ENV_ENDPOINT, "http://h:4317"), (ENV_PROTOCOL, "grpc")]);
    assert_eq!(
        c.traces_url().unwrap(),
        "http://h:4317/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    );
    // The flag wins over the environment.
    let flags = OtlpFlags {
        endpoint: Some("http://f:4317".into()),
        protocol: Some(Protocol::Grpc),
        ..OtlpFlags::default()
    };
    let c = resolve(&flags, &[(ENV_TRACES_PROTOCOL, "http/json")])
        .unwrap()
        .unwrap();
    assert_eq!(c.protocol, Protocol::Grpc);
    // A flag endpoint takes the protocol from the environment when no flag names one.
    let flags = OtlpFlags {
        endpoint: Some("http://f:4318".into()),
        ..OtlpFlags::default()
    };
    let c = resolve(&flags, &[(ENV_TRACES_PROTOCOL, "http/json")])
        .unwrap()
        .unwrap();
    assert_eq!(c.protocol, Protocol::HttpJson);
    let err = Protocol::parse("http/xml", "--otlp-protocol")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--otlp-protocol") && err.contains("grpc, http/protobuf or http/json"),
        "{err}"
    );
}
