//! `NATS_CREDS` against a real server in operator mode (#44 item 3): an operator, a system
//! account and a fleet account (JetStream enabled) made at test time with `nkeys`, their JWTs
//! signed here and preloaded into the server's memory resolver, and a user's `.creds` file
//! (its JWT and its nkey seed). With it `run`, `list` and `mirror` work; with the creds of a
//! user of an unknown account, with the right JWT and another seed, with a file that is not
//! creds, a missing file, or none, `run` and `list` exit 4 naming the URL and no step runs.
//! The seed is never in argv, output or a file (see `nats_auth_support`).
#![allow(clippy::unwrap_used)]

mod common;
mod nats_auth_support;

use std::path::Path;

use data_encoding::BASE64URL_NOPAD;
use nats_auth_support::{accepted, refused, server_with_config};
use nkeys::KeyPair;
use serde_json::json;

/// A NATS JWT (header `ed25519-nkey`) of `subject`, signed by `issuer`.
fn jwt(issuer: &KeyPair, subject: &str, name: &str, nats: serde_json::Value) -> String {
    let header = BASE64URL_NOPAD.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let claims = json!({
        "jti": format!("{name}-{}", &subject[..12]),
        "iat": 1_764_000_000,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let payload = BASE64URL_NOPAD.encode(claims.to_string().as_bytes());
    let signature = issuer
        .sign(format!("{header}.{payload}").as_bytes())
        .unwrap();
    format!("{header}.{payload}.{}", BASE64URL_NOPAD.encode(&signature))
}

/// An account's JWT; `jetstream` gives it unlimited JetStream storage.
fn account_jwt(operator: &KeyPair, account: &KeyPair, name: &str, jetstream: bool) -> String {
    let mut limits = json!({
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1,
    });
    if jetstream {
        limits["mem_storage"] = json!(-1);
        limits["disk_storage"] = json!(-1);
        limits["streams"] = json!(-1);
        limits["consumer"] = json!(-1);
    }
    let nats = json!({"limits": limits, "type": "account", "version": 2});
    jwt(operator, &account.public_key(), name, nats)
}

/// A user of `account` (signed by it), as a `.creds` file's text with `seed` as its key.
fn creds(account: &KeyPair, user: &KeyPair, seed: &str) -> String {
    let nats = json!({
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
        "type": "user", "version": 2,
    });
    let token = jwt(account, &user.public_key(), "runner", nats);
    format!(
        "-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         -----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n\
         *************************************************************\n"
    )
}

/// The server's configuration: operator mode, a memory resolver preloaded with both accounts.
fn operator_mode(dir: &Path, operator: &KeyPair, system: &KeyPair, fleet: &KeyPair) -> String {
    let nats = json!({"type": "operator", "version": 2, "system_account": system.public_key()});
    let operator_jwt = jwt(operator, &operator.public_key(), "fleet-operator", nats);
    let path = dir.join("operator.jwt");
    std::fs::write(&path, operator_jwt).unwrap();
    format!(
        "operator: \"{}\"\nsystem_account: {sys}\nresolver: MEMORY\nresolver_preload: {{\n  {sys}: \"{}\"\n  {fleet}: \"{}\"\n}}\n",
        path.display(),
        account_jwt(operator, system, "SYS", false),
        account_jwt(operator, fleet, "FLEET", true),
        sys = system.public_key(),
        fleet = fleet.public_key(),
    )
}

#[test]
fn a_creds_file_from_nats_creds_on_a_server_in_operator_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let secrets_dir = tempfile::tempdir().unwrap();
    let dir = secrets_dir.path();
    let (operator, system, fleet) = (
        KeyPair::new_operator(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let conf = operator_mode(dir, &operator, &system, &fleet);
    let Some(server) = server_with_config(tmp.path(), &conf) else {
        return;
    };
    let url = server.url();
    let user = KeyPair::new_user();
    let seed = user.seed().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        vec![("NATS_CREDS", path.display().to_string())]
    };
    let intruder = KeyPair::new_user();
    let intruder_seed = intruder.seed().unwrap();
    let secrets = vec![seed.as_bytes().to_vec(), intruder_seed.as_bytes().to_vec()];

    accepted(
        &url,
        &write("fleet.creds", &creds(&fleet, &user, &seed)),
        &secrets,
    );
    // A user of an account the operator never signed.
    let stranger = KeyPair::new_account();
    refused(
        &url,
        &write(
            "stranger.creds",
            &creds(&stranger, &intruder, &intruder_seed),
        ),
        &secrets,
    );
    // The fleet user's JWT with another key: the server's nonce signature check fails.
    refused(
        &url,
        &write("stolen-jwt.creds", &creds(&fleet, &user, &intruder_seed)),
        &secrets,
    );
    // Not a creds file, a missing file, no credentials at all.
    refused(
        &url,
        &write("garbage.creds", "not a creds file\n"),
        &secrets,
    );
    refused(
        &url,
        &[("NATS_CREDS", dir.join("absent.creds").display().to_string())],
        &secrets,
    );
    refused(&url, &[], &secrets);
}
