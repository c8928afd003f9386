//! # transcript-redact: opt-in masking of secrets in transcripts
//!
//! Transcripts record content verbatim (prompts, tool inputs and outputs,
//! model replies), so they can hold secrets. This crate is the opt-in masking
//! stage: a [`Redactor`] implements the domain's
//! [`EventMask`](transcript_domain::EventMask) port, which the JSONL recorder
//! applies to each draft **before** it is encoded, written or broadcast, so
//! with redaction on nothing unmasked reaches disk or subscribers. The same
//! redactor rewrites already recorded events
//! ([`Redactor::mask_decoded`]) for `export --redact` and `import --redact`.
//! Pure: no I/O, depends on `transcript-domain` and `regex` only.
//!
//! ## What is masked
//!
//! * Built-in rules ([`BUILTIN_RULES`], data: name, pattern, examples;
//!   [`Redactor::builtin`]): provider API keys (OpenAI and Anthropic
//!   `sk-…`, Google `AIza…`, GitHub `ghp_…`/`github_pat_…`, Slack `xox?-…`,
//!   Hugging Face `hf_…`), bearer tokens (up to a blank or quote, `:`
//!   included), the password of `scheme://user:password@host`, AWS access
//!   key ids and secret keys, PEM and PGP private key blocks (to the end of
//!   the text when the END line is missing), JWTs,
//!   and the values of `password=` / `secret:` / `"api_key": "…"`-style
//!   assignments in text (a quoted value whole, blanks included; an
//!   unquoted one up to a blank, quote or `&`; also `DB_PASSWORD=`,
//!   URL-encoded `%3D` and JSON-escaped quotes).
//! * Keys with a distinctive prefix are found glued to a letter or digit
//!   (`api_key%3Dsk-ant-…`, JSON-escaped `\nsk-ant-…`), and a key folded
//!   over several lines (each following line made only of key characters,
//!   indented or not) is masked whole, folds included.
//! * In structured values (tool inputs and outputs, `tool_input`,
//!   `tool_content`, step results), every string under a key named like
//!   `password`, `secret`, `token`, `api_key`, `credential`, `private_key`,
//!   `authorization` is masked whole, whatever it looks like; object keys
//!   are masked like text (a secret used as a key), whole under a
//!   sensitive key; two keys masking alike both stay (` #2` appended).
//! * User patterns ([`Redactor::with_pattern`]): every match is masked.
//!
//! A mask keeps the key's published kind prefix, when the rule knows one
//! (`sk-ant-`, `sk-proj-`, `sk-`, `AIza`, `ghp_`, `github_pat_`, `xoxb-`,
//! `hf_`, `AKIA`, `eyJ`, a PEM `-----BEGIN … PRIVATE KEY-----` line), and
//! the length of the rest: `sk-ant-…(101 chars)`, `password=…(13 chars)`.
//! No character of the secret itself is kept, whatever its length, and no
//! value is skipped because of what it contains (a secret holding `…` is
//! masked like any other). Masks ([`MARKER`]) are never masked again:
//! masking masked text changes nothing.
//!
//! ## Structure-only privacy
//!
//! [`Privacy::StructureOnly`] keeps envelopes, step names and kinds, tool
//! names and call ids, timings, provider, model and usage, and drops all
//! content: text, thinking and command strings become empty, tool inputs,
//! outputs and contents become `null`, step results are removed, and errors
//! become `"[redacted]"` (so failures stay visible).
//!
//! ## What is not masked, and why it is opt-in
//!
//! * Secrets that match no pattern (a password in free prose with no
//!   `password:` marker, a key format we do not know) are not found: pattern
//!   masking reduces exposure, it does not guarantee absence. Use
//!   structure-only mode when content must not be kept at all.
//! * The rules lean towards masking: a line made only of key characters
//!   right after a key that ends its line is masked as the key's fold, an
//!   unquoted assigned value runs to the next blank (`password=abc;TAIL`
//!   masks `abc;TAIL`), and a private key block without an END line masks
//!   the rest of the text.
//! * Envelope fields (paths, step and tool names, run ids) are never masked:
//!   they come from workflow definitions, not from model or tool output.
//! * Masking rewrites what the agent saw and said, which is exactly what an
//!   audit or a replay needs verbatim; false positives (an identifier that
//!   looks like a key) lose information. The default therefore records
//!   verbatim, in `0o600` files, and masking is a deliberate choice.
//!
//! ## Invariants
//!
//! * Every built-in rule compiles and masks its own examples alone
//!   (`tests/rules.rs`); a rule that does not compile fails
//!   [`Redactor::try_builtin`] and the tests, it is never dropped.
//! * Every form of the redaction corpus (`fixtures/redaction/corpus.json`:
//!   secrets as JSON keys, glued, quoted phrases, truncated PEM, PGP,
//!   bearer tokens with `:`, folded keys…) is masked in text and in
//!   structured values (`tests/corpus.rs`), and through the binary in the
//!   transcript, stderr, audit trail and every export
//!   (`transcript-cli/tests/redaction_attack.rs`).
//! * Every planted secret of the corpus, in every field that carries
//!   content, is masked (`tests/redact.rs::planted_secrets_are_masked_in_every_content_field`).
//! * Ordinary text is left alone (`tests/redact.rs::ordinary_text_is_untouched`).
//! * Masking never changes the event type or envelope and never panics
//!   (`tests/redact.rs::masking_never_panics_and_keeps_shape`).
//! * A mask reveals nothing beyond the kind prefix and the length, for every
//!   detector (`tests/redact.rs::masks_reveal_only_the_kind_prefix_and_length`),
//!   and masking is idempotent
//!   (`tests/redact.rs::masking_masked_text_changes_nothing`).
#![forbid(unsafe_code)]

mod mask;
mod redactor;
mod rules;
mod spans;
mod view;
mod walk;

pub use mask::{MARKER, mask_value, mask_with};
pub use redactor::{InvalidPattern, Privacy, Redactor};
pub use rules::{BUILTIN_RULES, BuiltinRule};
