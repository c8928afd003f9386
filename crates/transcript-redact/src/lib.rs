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
//! Pure: no I/O; depends on `transcript-domain`, `regex`, `anstyle-parse`
//! (terminal escape sequences) and `percent-encoding` (`%XX` escapes).
//!
//! ## Every string, by structure
//!
//! Masking walks every string of every record, not a list of fields: each
//! payload, block and decoded envelope is destructured whole (`src/walk.rs`,
//! no `..`), so a field added to a domain type does not compile until it is
//! walked. Content (text, thinking, commands, tool inputs and outputs, step
//! results, errors) and the strings a model or a foreign log controls (the
//! message's `model` and `provider`, a tool's `name` and `call_id`, block
//! `tool_name` / `tool_id`, an unknown block's or event's type, a decoded
//! role) and the step names, kinds and paths are all masked by the same
//! rules. Only closed vocabularies (the writer's roles, fidelities, block
//! and event types), numbers, ids we generate (run ids) and timestamps are
//! not strings of the record's text.
//!
//! ## Matching on what a reader sees
//!
//! Every rule matches the text as stored and its decoded views
//! (`src/view.rs`): the text a terminal shows (escape sequences such as
//! colour codes and OSC hyperlinks, and other control characters, removed,
//! as recognised by `anstyle-parse`'s VT500 state machine) and the text with
//! `%XX` escapes decoded (up to three nested levels). A match in a view is
//! masked over the source bytes it covers, escapes inside it included: a key
//! split by colour codes as `grep --color` prints it
//! (`sk-ant-\e[01;31m\e[Kapi03…\e[m…`) is masked whole, a fully URL-encoded
//! key (`%73%6B%2D…`) in its encoded form, its kind prefix kept in the form
//! it was written in.
//!
//! Adjacent content blocks of one message (text, thinking, stream and
//! command blocks with no other block between them) are also matched as one
//! text, so a key split between two blocks is found; each block is masked
//! where the match covers it (two masks, one per block).
//!
//! ## Bounded work
//!
//! Masking is linear in the text, whatever it holds: overlapping matches
//! are searched for only near the start of each outermost match and near
//! the end of what is matched so far (64 bytes each), spans, kind prefixes
//! and earlier masks are merged in one walk, and each view is built in one
//! pass. `benches/linear.rs` masks every rule's worst shape at
//! [`transcript_domain::MAX_LINE_BYTES`] against a quarter of it (ratio ≈ 4,
//! a miss above 8).
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
//! become `"[redacted]"` (so failures stay visible). The strings it keeps
//! are masked by the built-in rules (a key used as a model name or call id).
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
//! * Views are decoded one way each: escape sequences are removed, then
//!   `%XX` decoded. Other encodings (base64, HTML entities, JSON escapes
//!   inside a string beyond the `\n`-glued forms, `%1B[` colour codes, `+`
//!   for a blank) are not decoded, and a secret split between two
//!   *records* (two streamed events, two tool results), or between two
//!   strings of one structured value, is not joined: each record is masked
//!   before it is written, with no look back.
//! * A match whose context (`password` … `=`, `Bearer`, `scheme://user:`)
//!   starts inside another match of the same rule, more than 64 bytes after
//!   its start and more than 64 bytes before the end of what is matched, is
//!   not looked for (the price of bounded work); the region is inside a mask
//!   already unless that context itself is longer than 64 bytes.
//! * The draft's envelope path (built from the workflow's step names) is
//!   outside the [`EventMask`](transcript_domain::EventMask) port and
//!   written as the workflow names it; `export --redact` masks it like any
//!   string. A tool call id masked in a `tool_use` block and in its result
//!   masks alike (same text, same mask), so pairs stay paired unless two
//!   different ids mask to the same length.
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
//! * Masking never changes the event type and never panics
//!   (`tests/redact.rs::masking_never_panics_and_keeps_shape`).
//! * Every string of every record is walked, and keys split by colour
//!   codes, URL-encoded or split across two blocks are masked whole: unit
//!   tests in `src/view.rs`, `tests/walk.rs`, and through the binary
//!   (`run`, `export`, `import` with `--redact`: transcript bytes on disk,
//!   live stderr, the "no price for model" warning, the masks count) in
//!   `transcript-cli/tests/redaction_walk.rs`.
//! * Work is linear in the text (`benches/linear.rs`).
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
