//! #40 item 3: exec refuses at load every MCP server name the proxy (transcript-mcp) would
//! refuse, with the same reason. exec does not depend on transcript-mcp, so the rule is written
//! twice; this test holds the two to each other over every name of up to four characters of an
//! alphabet holding each class the rule tells apart (letters, a digit, `_`, `-`, a character
//! outside the set, a non-ASCII one), plus the length bounds.
#![allow(clippy::unwrap_used)]

/// Every string of `len` characters of `alphabet`.
fn names(alphabet: &[char], len: usize) -> Vec<String> {
    let mut out = vec![String::new()];
    for _ in 0..len {
        out = out
            .iter()
            .flat_map(|prefix| {
                alphabet.iter().map(move |c| {
                    let mut s = prefix.clone();
                    s.push(*c);
                    s
                })
            })
            .collect();
    }
    out
}

#[test]
fn exec_and_the_proxy_refuse_the_same_server_names_for_the_same_reasons() {
    let alphabet = ['a', 'Z', '7', '_', '-', '/', '.', 'é'];
    let mut all: Vec<String> = (0..=4).flat_map(|len| names(&alphabet, len)).collect();
    for len in [63, 64, 65] {
        all.push("a".repeat(len));
        all.push(format!("{}_", "a".repeat(len - 1)));
    }
    let mut refused = 0;
    let mut disagree = Vec::new();
    for name in &all {
        let exec = transcript_exec::mcp::server_name_problem(name);
        let proxy = transcript_mcp::config::server_name_problem(name);
        if exec != proxy {
            disagree.push(format!("{name:?}: exec {exec:?}, proxy {proxy:?}"));
        }
        refused += usize::from(proxy.is_some());
    }
    assert!(disagree.is_empty(), "{disagree:#?}");
    // The alphabet reaches every reason and both verdicts.
    assert!(refused > 0 && refused < all.len());
    for (name, reason) in [
        ("", "is not 1 to 64"),
        ("a/", "outside"),
        ("-a", "starts with"),
        ("a__b", "contains \"__\""),
        ("a_", "ends with \"_\""),
    ] {
        let got = transcript_exec::mcp::server_name_problem(name).unwrap();
        assert!(got.contains(reason), "{name:?}: {got}");
    }
    assert_eq!(transcript_exec::mcp::server_name_problem("a_b-7"), None);
}
