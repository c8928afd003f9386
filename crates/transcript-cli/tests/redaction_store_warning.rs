//! `import claude --store --redact` (#39 item 8): the summary's "no price for model …"
//! warning names the model the session log reports, which the agent controls. Under
//! `--redact` it is masked as the transcript is, in a store import as in a file import (the
//! store path printed it unmasked before).
#![allow(clippy::unwrap_used)]

mod common;

use common::{bin, text};

/// An Anthropic-style key: the built-in rules mask it wherever it appears.
const SECRET: &str = "sk-ant-api03-Zq8vXr2LmN5pT7wYb4Kc9HdJf3GsA6eQ1uVoRiBxCzDyEtFgHhIjKkLl";

#[test]
fn a_store_imports_no_price_warning_is_masked_under_redact() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("cfg");
    let project = config.join("projects/-work-delta");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("ses-1.jsonl"),
        format!(
            "{{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":\"hi\"}},\"uuid\":\"p-1\",\"sessionId\":\"ses-1\",\"parentUuid\":null,\"timestamp\":\"2026-11-01T10:00:00.000Z\"}}\n\
             {{\"type\":\"assistant\",\"message\":{{\"id\":\"msg_1\",\"model\":\"{SECRET}\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"hello\"}}],\"usage\":{{\"input_tokens\":7,\"output_tokens\":9}}}},\"uuid\":\"a-1\",\"sessionId\":\"ses-1\",\"parentUuid\":\"p-1\",\"timestamp\":\"2026-11-01T10:00:01.000Z\"}}\n"
        ),
    )
    .unwrap();
    let storage = home.path().join("storage");
    let out = bin()
        .args(["import", "claude", "--store", "--redact", "--storage"])
        .arg(&storage)
        .env("CLAUDE_CONFIG_DIR", &config)
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The warning is still given, for the masked model.
    assert!(stderr.contains("no price for model"), "{stderr}");
    // The key's distinctive middle is nowhere: not on stderr, stdout or in the storage.
    let middle = &SECRET[20..40];
    assert!(!stderr.contains(middle), "{stderr}");
    assert!(!text(&out.stdout).contains(middle));
    for entry in std::fs::read_dir(&storage).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains(middle));
    }
}
