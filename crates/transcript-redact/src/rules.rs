//! The built-in rules, as data: a name, a pattern, whether a match may
//! continue over folded lines, and the examples each rule must mask on its
//! own (`tests/rules.rs` checks every rule against its examples, and that
//! every pattern compiles: a rule that does not compile fails the tests and
//! [`crate::Redactor::try_builtin`], it is never dropped).
//!
//! Conventions of the patterns: a named group `secret` marks the part to
//! mask (otherwise the whole match is masked); a group `kind` at the start
//! of it is the key's published prefix (`sk-ant-`, `ghp_`, `AKIA`), which
//! names the kind of key, holds no secret material and stays visible.
//!
//! Keys with a distinctive prefix (`sk-ant-`, `ghp_`, `AIza`…) match
//! wherever they start, also glued to a letter or digit: text around them
//! is often encoded (`api_key%3Dsk-ant-…` in a URL, `\nsk-ant-…` in
//! JSON-escaped output), so a word boundary would miss them. Only the plain
//! `sk-` form, too short a prefix for that (`task-…`, `disk-…`), needs one:
//! the start of the text, a character that is not a letter or digit, or an
//! escape (`\n`, `\t`, `\r`, `\uXXXX`, `\xXX`, `%XX`).

/// One built-in rule.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinRule {
    /// Name, as listed by [`crate::Redactor::rule_names`].
    pub name: &'static str,
    /// The regular expression (`regex` crate syntax).
    pub pattern: &'static str,
    /// Whether a match that ends a line continues over the following lines
    /// made only of key characters (a key folded at a fixed width).
    pub folds: bool,
    /// Texts this rule alone must mask, each with the fragments that must
    /// not survive it.
    pub examples: &'static [(&'static str, &'static [&'static str])],
}

/// Where a plain `sk-` key may start (see the module docs).
macro_rules! key_start {
    () => {
        r"(?:^|[^A-Za-z0-9]|\\[ntr]|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|%[0-9A-Fa-f]{2})"
    };
}

/// The key names whose assigned value is masked (`password=…`,
/// `"api_key": "…"`, `DB_PASSWORD=…`), and the assignment after them:
/// `=` or `:` (also URL-encoded), quotes and JSON-escaped quotes around the
/// name allowed.
macro_rules! assignment {
    () => {
        r#"(?i)(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|auth[_-]?key)(?:\\?["'])?\s*(?:[:=]|%3[ADad])\s*"#
    };
}

/// Every built-in rule, in application order.
pub const BUILTIN_RULES: &[BuiltinRule] = &[
    BuiltinRule {
        name: "private_key_block",
        // PEM (`RSA`, `EC`, `OPENSSH`, `ENCRYPTED`, none) and PGP
        // (`PGP PRIVATE KEY BLOCK`) private keys. Without an END line (a
        // truncated output) everything after BEGIN is the key, up to an
        // earlier mask (`…`, which no key holds: masking stays idempotent).
        pattern: r"(?P<secret>(?P<kind>-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[^…]*))",
        folds: false,
        examples: &[
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----\nafter",
                &["MIIEpAIBAAKCAQEA", "END RSA"],
            ),
            (
                "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANtruncated",
                &["MIIEvQIBADANtruncated"],
            ),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGPGPbody\n=Zx9Q\n-----END PGP PRIVATE KEY BLOCK-----",
                &["lQOYBGPGPbody", "=Zx9Q"],
            ),
        ],
    },
    BuiltinRule {
        name: "jwt",
        pattern: r"(?P<secret>(?P<kind>eyJ)[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,})",
        folds: true,
        examples: &[(
            "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            &["dozjgNryP4J3jVmNHl0w5N", "eyJzdWIiOiIxMjM0NTY3ODkwIn0"],
        )],
    },
    BuiltinRule {
        name: "anthropic_openai_key",
        // Prefixed keys: distinctive, matched wherever they start.
        pattern: r"(?P<secret>(?P<kind>sk-(?:ant-|proj-|svcacct-|admin-))[A-Za-z0-9_-]{20,})",
        folds: true,
        examples: &[
            (
                "k sk-ant-api03-Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp",
                &["Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp"],
            ),
            (
                "api_key%3Dsk-ant-api03-GLUEDurlAAAABBBBCCCC&x=1",
                &["GLUEDurlAAAABBBBCCCC"],
            ),
            (
                r#"{"m":"done\nsk-proj-GLUEDescAAAABBBBCCCCDDDD"}"#,
                &["GLUEDescAAAABBBBCCCCDDDD"],
            ),
            (
                "sk-ant-api03-FOLDEDoneAAAABBBB\nFOLDEDtwoCCCCDDDD\nFOLDEDend\n",
                &["FOLDEDoneAAAABBBB", "FOLDEDtwoCCCCDDDD", "FOLDEDend"],
            ),
        ],
    },
    BuiltinRule {
        name: "openai_key",
        // The plain `sk-` form needs a start (see the module docs).
        pattern: concat!(key_start!(), r"(?P<secret>(?P<kind>sk-)[A-Za-z0-9_-]{20,})"),
        folds: true,
        examples: &[
            (
                "key sk-A1b2C3d4E5f6G7h8I9j0K1l2 end",
                &["A1b2C3d4E5f6G7h8I9j0K1l2"],
            ),
            (
                r"out:\nsk-A1b2C3d4E5f6G7h8I9j0K1l2",
                &["A1b2C3d4E5f6G7h8I9j0K1l2"],
            ),
            (
                "key%3Dsk-A1b2C3d4E5f6G7h8I9j0K1l2",
                &["A1b2C3d4E5f6G7h8I9j0K1l2"],
            ),
        ],
    },
    BuiltinRule {
        name: "google_api_key",
        pattern: r"(?P<secret>(?P<kind>AIza)[0-9A-Za-z_-]{35})",
        folds: false,
        examples: &[(
            "keyAIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6q",
            &["SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6q"],
        )],
    },
    BuiltinRule {
        name: "github_token",
        pattern: r"(?P<secret>(?P<kind>gh[pousr]_)[A-Za-z0-9]{36,})",
        folds: true,
        examples: &[(
            "xghp_0123456789abcdefghijABCDEFGHIJ012345",
            &["0123456789abcdefghijABCDEFGHIJ012345"],
        )],
    },
    BuiltinRule {
        name: "github_fine_grained_token",
        pattern: r"(?P<secret>(?P<kind>github_pat_)[A-Za-z0-9_]{22,})",
        folds: true,
        examples: &[(
            "pat github_pat_11ABCDEFG0123456789_abcdefXYZ ok",
            &["11ABCDEFG0123456789_abcdefXYZ"],
        )],
    },
    BuiltinRule {
        name: "slack_token",
        pattern: r"(?P<secret>(?P<kind>xox[abposr]-)[A-Za-z0-9-]{10,})",
        folds: true,
        examples: &[(
            "SLACK=xoxb-123456789012-abcdefghijkl",
            &["123456789012-abcdefghijkl"],
        )],
    },
    BuiltinRule {
        name: "huggingface_token",
        pattern: r"(?P<secret>(?P<kind>hf_)[A-Za-z0-9]{30,})",
        folds: true,
        examples: &[(
            "HF=hf_abcdefghijklmnopqrstuvwxyz012345",
            &["abcdefghijklmnopqrstuvwxyz012345"],
        )],
    },
    BuiltinRule {
        name: "aws_access_key_id",
        pattern: concat!(
            key_start!(),
            r"(?P<secret>(?P<kind>AKIA|ASIA)[0-9A-Z]{16})\b"
        ),
        folds: false,
        examples: &[
            ("id AKIAIOSFODNN7EXAMPLE", &["IOSFODNN7EXAMPLE"]),
            (r"x\nASIAIOSFODNN7EXAMPLE", &["IOSFODNN7EXAMPLE"]),
        ],
    },
    BuiltinRule {
        name: "aws_secret_access_key",
        pattern: r#"(?i)aws_?secret_?access_?key(?:\\?["'])?\s*(?:[:=]|%3[ADad])\s*(?:\\?["'])?(?P<secret>[A-Za-z0-9/+=]{40})"#,
        folds: false,
        examples: &[(
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            &["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"],
        )],
    },
    BuiltinRule {
        name: "url_credentials",
        // The password of `scheme://user:password@host`.
        pattern: r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<secret>[^\s/@]+)@",
        folds: false,
        examples: &[
            (
                "git clone https://ann:s3cr3tPass99@git.example/repo.git",
                &["s3cr3tPass99"],
            ),
            (
                "DATABASE_URL=postgres://app:pg-Secret-42@db:5432/app",
                &["pg-Secret-42"],
            ),
        ],
    },
    BuiltinRule {
        name: "bearer_token",
        // Everything up to a blank, a quote or an escape: tokens may hold
        // `:` and other punctuation.
        pattern: r#"(?i)\bbearer\s+(?P<secret>[^\s"'\\<>]{8,})"#,
        folds: true,
        examples: &[
            (
                "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.0123",
                &["abcdefghijklmnopqrstuvwxyz.0123"],
            ),
            (
                r#"{"Authorization":"Bearer tokpartA1:tokpartB2"}"#,
                &["tokpartA1", "tokpartB2"],
            ),
        ],
    },
    BuiltinRule {
        name: "secret_assignment_double_quoted",
        // The whole quoted value, blanks included, up to the closing quote
        // (also JSON-escaped: `\"client_secret\": \"a b\"`).
        pattern: concat!(assignment!(), r#"\\?"(?P<secret>(?:[^"\\\n]|\\[^"\n])+)"#),
        folds: false,
        examples: &[
            (
                r#"password="correct horse battery staple" user=ann"#,
                &["correct", "horse", "battery", "staple"],
            ),
            (
                r#"{"password": "mauve otter quilt", "user": "ann"}"#,
                &["mauve", "otter", "quilt"],
            ),
            (
                r#"{\"client_secret\": \"violet heron sail\"}"#,
                &["violet", "heron", "sail"],
            ),
        ],
    },
    BuiltinRule {
        name: "secret_assignment_single_quoted",
        pattern: concat!(assignment!(), r#"\\?'(?P<secret>[^'\\\n]+)"#),
        folds: false,
        examples: &[(
            "passwd: 'purple monkey dishwasher'; next",
            &["purple", "monkey", "dishwasher"],
        )],
    },
    BuiltinRule {
        name: "secret_assignment",
        // An unquoted value: everything up to a blank, a quote, an escape or
        // the next URL parameter (`;` and `,` are part of it).
        pattern: concat!(assignment!(), r#"(?P<secret>[^\s"'&\\]+)"#),
        folds: false,
        examples: &[
            (
                "db password: correct-horse-battery",
                &["correct-horse-battery"],
            ),
            ("TOKEN=abc123def456", &["abc123def456"]),
            ("password=zq7;TAILXY end", &["zq7", "TAILXY"]),
            (
                "DB_PASSWORD=Hq2wPrefixed MY_API_KEY=kv8Prefixed",
                &["Hq2wPrefixed", "kv8Prefixed"],
            ),
            (
                "user=ann&password%3Dq9UrlEncodedPw&next=1",
                &["q9UrlEncodedPw"],
            ),
        ],
    },
];
