//! #56 item 3: a secret that a command prints right where its output is cut (the 1 MiB cap)
//! leaves none of its characters in anything the run wrote: the kept start of the secret is
//! masked like the whole one.
#![allow(clippy::unwrap_used)]

mod common;

use common::{bin, describe};

const SECRET: &str = "Zq7-secret-value-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGHIJKLMNOPQRSTU";

#[test]
fn a_secret_cut_by_the_output_cap_leaves_no_eight_characters() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, storage) = (dir.path().join("ws"), dir.path().join("storage"));
    std::fs::create_dir_all(&ws).unwrap();
    let cap: usize = 1 << 20;
    // More output follows the secret, so the whole is past the cap.
    let total = |n: usize| n + SECRET.len() + 1000;
    // The capture keeps `cap - marker` bytes: 30 of the secret's 76 stay before the cut.
    let marker = |t: usize| format!("…[truncated: {t} bytes, sha256 {}]", "0".repeat(64)).len();
    let mut n = cap - 30;
    n -= marker(total(n));
    let wf = dir.path().join("wf.yaml");
    std::fs::write(
        &wf,
        format!(
            "name: cut\ninputs:\n  - {{name: s, secret: true}}\nsteps:\n  - name: print\n    type: command\n    command: 'head -c {n} /dev/zero | tr \"\\\\000\" x; printf %s \"$S\"; head -c 1000 /dev/zero | tr \"\\\\000\" y'\n    env: {{ S: \"{{{{ inputs.s }}}}\" }}\n"
        ),
    )
    .unwrap();
    let out = bin()
        .arg("run")
        .arg(&wf)
        .arg("--storage")
        .arg(&storage)
        .arg("--workspace")
        .arg(&ws)
        .arg("--input")
        .arg(format!("s={SECRET}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let mut all = String::from_utf8_lossy(&out.stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(&out.stderr));
    for entry in std::fs::read_dir(&storage).unwrap().flatten() {
        all.push_str(&String::from_utf8_lossy(
            &std::fs::read(entry.path()).unwrap(),
        ));
    }
    assert!(all.contains("…[truncated: "), "the output was cut");
    for w in 0..=SECRET.len() - 8 {
        assert!(
            !all.contains(&SECRET[w..w + 8]),
            "{:?} of the secret is in what the run wrote",
            &SECRET[w..w + 8]
        );
    }
}
