//! NATS storage over TLS with a private CA (#44 item 3): a server whose certificate comes from
//! a CA made at test time (rcgen) is refused without `NATS_CA` (exit 4, naming the URL) and
//! records and lists with it.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use common::{DEMO_RUN_ID, bin, demo_command, text};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use transcript_nats::testing;

/// Writes `ca.pem`, `server.pem` and `server.key` (for 127.0.0.1) into `dir`.
fn private_ca(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "fleet test CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    std::fs::write(dir.join("ca.pem"), ca.self_signed(&ca_key).unwrap().pem()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut server = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    server
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let issuer = Issuer::from_params(&ca, &ca_key);
    let cert = server.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
}

#[test]
fn tls_with_a_private_ca_from_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    private_ca(tmp.path());
    let (cert, key) = (tmp.path().join("server.pem"), tmp.path().join("server.key"));
    let Some(server) = testing::single_with(&[
        "--tls",
        "--tlscert",
        cert.to_str().unwrap(),
        "--tlskey",
        key.to_str().unwrap(),
    ])
    .unwrap() else {
        return;
    };
    let url = server.url();
    let o = bin().args(["list", "--storage", &url]).output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains(&url), "{}", text(&o.stderr));

    let ca = tmp.path().join("ca.pem");
    let mut run = demo_command(Path::new(&url), &tmp.path().join("ws"));
    run.env("NATS_CA", &ca);
    let o = run.output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = bin()
        .args(["list", "--storage", &url])
        .env("NATS_CA", &ca)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(DEMO_RUN_ID));
}
