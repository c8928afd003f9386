//! Credentials the NATS way against real servers configured for them (#44 item 3): a token
//! (`NATS_TOKEN`, server `authorization { token }`), a user and password
//! (`NATS_USER`/`NATS_PASSWORD`) and a client certificate of a private CA (`NATS_CERT`/
//! `NATS_KEY`, server `tls { verify: true }`). For each, with the right credential `run`,
//! `list` and `mirror` work; with a wrong, missing or half-set one `run` and `list` exit 4
//! naming the URL and no step runs; the secret is never in argv, output or a file (see
//! `nats_auth_support`). The `NATS_CREDS` (operator mode) cases are in `nats_auth_creds.rs`.
#![allow(clippy::unwrap_used)]

mod common;
mod nats_auth_support;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use nats_auth_support::{accepted, refused, server_with_config};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

const TOKEN: &str = "tok-7c1e9a4b2f-never-in-argv";
const PASSWORD: &str = "pw-3d8b61f0e2-never-in-argv";

fn env(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

#[test]
fn a_token_from_nats_token() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = format!("authorization {{ token: \"{TOKEN}\" }}\n");
    let Some(server) = server_with_config(tmp.path(), &conf) else {
        return;
    };
    let url = server.url();
    let secrets = vec![TOKEN.as_bytes().to_vec()];
    accepted(&url, &env(&[("NATS_TOKEN", TOKEN)]), &secrets);
    let wrong = "tok-wrong-5e0a77c3";
    let both = vec![TOKEN.as_bytes().to_vec(), wrong.as_bytes().to_vec()];
    refused(&url, &env(&[("NATS_TOKEN", wrong)]), &both);
    refused(&url, &env(&[]), &secrets);
    // The right token presented as a password is not a token.
    refused(
        &url,
        &env(&[("NATS_USER", "x"), ("NATS_PASSWORD", TOKEN)]),
        &secrets,
    );
}

#[test]
fn a_user_and_password_from_nats_user_and_nats_password() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = format!("authorization {{ user: fleet, password: \"{PASSWORD}\" }}\n");
    let Some(server) = server_with_config(tmp.path(), &conf) else {
        return;
    };
    let url = server.url();
    let secrets = vec![PASSWORD.as_bytes().to_vec()];
    accepted(
        &url,
        &env(&[("NATS_USER", "fleet"), ("NATS_PASSWORD", PASSWORD)]),
        &secrets,
    );
    let wrong = "pw-wrong-19f4c2";
    let both = vec![PASSWORD.as_bytes().to_vec(), wrong.as_bytes().to_vec()];
    refused(
        &url,
        &env(&[("NATS_USER", "fleet"), ("NATS_PASSWORD", wrong)]),
        &both,
    );
    refused(
        &url,
        &env(&[("NATS_USER", "intruder"), ("NATS_PASSWORD", PASSWORD)]),
        &secrets,
    );
    refused(&url, &env(&[]), &secrets);
    // Half of a pair is a usage mistake caught before connecting: still exit 4 naming the URL.
    refused(&url, &env(&[("NATS_PASSWORD", PASSWORD)]), &secrets);
    refused(&url, &env(&[("NATS_USER", "fleet")]), &secrets);
}

/// A CA: its parameters and key (to sign with) and its PEM.
fn ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let pem = params.self_signed(&key).unwrap().pem();
    (params, key, pem)
}

/// Writes `<stem>.pem` and `<stem>.key`, a leaf certificate signed by the CA, for 127.0.0.1
/// (the server) or for a client; returns the key's PEM (the secret).
fn leaf(dir: &Path, stem: &str, ca: &(CertificateParams, KeyPair, String), client: bool) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    params.distinguished_name.push(DnType::CommonName, stem);
    params.extended_key_usages = vec![if client {
        ExtendedKeyUsagePurpose::ClientAuth
    } else {
        ExtendedKeyUsagePurpose::ServerAuth
    }];
    let cert = params
        .signed_by(&key, &Issuer::from_params(&ca.0, &ca.1))
        .unwrap();
    std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
    key.serialize_pem()
}

/// The key's base64 body lines: any of them in a file or an output is the key leaking.
fn key_secrets(pem: &str) -> Vec<Vec<u8>> {
    pem.lines()
        .filter(|l| !l.starts_with("-----") && l.len() >= 16)
        .map(|l| l.as_bytes().to_vec())
        .collect()
}

#[test]
fn a_client_certificate_of_a_private_ca_from_nats_cert_and_nats_key() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    let dir = secrets_dir.path();
    let fleet_ca = ca("fleet CA");
    let other_ca = ca("another CA");
    std::fs::write(dir.join("ca.pem"), &fleet_ca.2).unwrap();
    leaf(dir, "server", &fleet_ca, false);
    let client_key = leaf(dir, "client", &fleet_ca, true);
    let stranger_key = leaf(dir, "stranger", &other_ca, true);
    let path = |name: &str| dir.join(name).display().to_string();
    let conf = format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  verify: true\n}}\n",
        path("server.pem"),
        path("server.key"),
        path("ca.pem")
    );
    let Some(server) = server_with_config(tmp.path(), &conf) else {
        return;
    };
    let url = server.url();
    let mut secrets = key_secrets(&client_key);
    secrets.extend(key_secrets(&stranger_key));
    let ca_env = ("NATS_CA", path("ca.pem"));
    accepted(
        &url,
        &[
            ca_env.clone(),
            ("NATS_CERT", path("client.pem")),
            ("NATS_KEY", path("client.key")),
        ],
        &secrets,
    );
    // No client certificate: the server's verify refuses the handshake.
    refused(&url, std::slice::from_ref(&ca_env), &secrets);
    // A certificate of another CA.
    refused(
        &url,
        &[
            ca_env.clone(),
            ("NATS_CERT", path("stranger.pem")),
            ("NATS_KEY", path("stranger.key")),
        ],
        &secrets,
    );
    // The right certificate with another key.
    refused(
        &url,
        &[
            ca_env.clone(),
            ("NATS_CERT", path("client.pem")),
            ("NATS_KEY", path("stranger.key")),
        ],
        &secrets,
    );
    // Half of the pair.
    refused(&url, &[ca_env, ("NATS_CERT", path("client.pem"))], &secrets);
}
