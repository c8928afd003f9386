//! `transcript import --store` (issue #29 item 3): the agent CLIs' own session stores, read
//! incrementally. A real Claude Code session log grows between two imports (cut inside a
//! message split by its own tool result): the second import appends to the same run, the
//! first import's bytes stay as they were (stable seqs and ids), and the receipts equal the
//! jq truth over the complete log. An unchanged file is not read again.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{bin, text};
use serde_json::Value;

fn real(folder: &str, name: &str) -> Option<PathBuf> {
    common::real_fixture(folder, name)
}

/// `transcript import <provider> --store` with only `env` pointing at the store.
fn import_store(provider: &str, storage: &Path, env: &[(&str, &Path)], extra: &[&str]) -> Output {
    let mut cmd = bin();
    cmd.args(["import", provider, "--store"])
        .args(extra)
        .arg("--storage")
        .arg(storage)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// The `run<TAB>provider<TAB>path<TAB>what` lines.
fn lines(out: &Output) -> Vec<Vec<String>> {
    text(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

fn receipts_total(storage: &Path, run: &str) -> Value {
    let out = bin()
        .args(["receipts", run, "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let r: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    r["total"].clone()
}

#[test]
fn a_session_that_grows_between_two_imports_appends_only_what_is_new() {
    let Some(log) = real(
        "claude-code",
        "spotter-session-log-v2.1.38-tool_heavy.jsonl",
    ) else {
        return;
    };
    let full = std::fs::read_to_string(&log).unwrap();
    let all: Vec<&str> = full.lines().collect();
    // Cut before the last record of msg_019BN3…: the first import ends after the
    // tool_result that splits that message.
    let cut = all
        .iter()
        .rposition(|l| l.contains("msg_019BN3FRqb7NU4DgBN5jdsym"))
        .unwrap();
    assert!(
        cut > 0 && all[cut - 1].contains("tool_result"),
        "{}",
        all[cut - 1]
    );
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("claude-config");
    let project = config.join("projects/-work-demo");
    std::fs::create_dir_all(&project).unwrap();
    let session = project.join("5c1e0a8e-session.jsonl");
    std::fs::write(&session, all[..cut].join("\n") + "\n").unwrap();
    let storage = home.path().join("storage");
    let env = [("CLAUDE_CONFIG_DIR", config.as_path())];

    let first = import_store("claude", &storage, &env, &[]);
    let l = lines(&first);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0][3], "new");
    let run = l[0][0].clone();
    let transcript = PathBuf::from(&l[0][2]);
    let before = std::fs::read(&transcript).unwrap();

    // The session grows: the rest of the log is appended.
    let mut grown = std::fs::OpenOptions::new()
        .append(true)
        .open(&session)
        .unwrap();
    std::io::Write::write_all(&mut grown, (all[cut..].join("\n") + "\n").as_bytes()).unwrap();
    drop(grown);
    let second = import_store("claude", &storage, &env, &[]);
    let l = lines(&second);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(
        (l[0][0].as_str(), l[0][3].as_str()),
        (run.as_str(), "appended")
    );
    let after = std::fs::read(&transcript).unwrap();
    assert!(after.len() > before.len());
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the first import's lines are kept"
    );
    // One run file, seqs 1..n without a gap.
    let seqs: Vec<u64> = String::from_utf8(after.clone())
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let validate = bin()
        .args(["validate", &run, "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(validate.status.success(), "{}", text(&validate.stdout));

    // jq -s '[.[] | select(.type=="assistant" and .message.usage != null)
    //   | {k: [.message.id, .requestId], u: .message.usage}] | group_by(.k) | map(last.u)
    //   | {input: map(.input_tokens) | add, output: map(.output_tokens) | add,
    //      read: map(.cache_read_input_tokens) | add,
    //      write: map(.cache_creation_input_tokens) | add}' <log>
    //   → {"input":54,"output":212,"read":88231,"write":17696}
    let t = receipts_total(&storage, &run);
    assert_eq!(
        [
            &t["input_tokens"],
            &t["output_tokens"],
            &t["cache_read_tokens"],
            &t["cache_write_tokens"]
        ],
        [54, 212, 88231, 17696],
        "{t}"
    );

    // Unchanged: not read again. Same size and time, other bytes: a read would notice.
    let third = import_store("claude", &storage, &env, &[]);
    assert_eq!(lines(&third)[0][3], "unchanged");
    let stamp = std::fs::metadata(&session).unwrap().modified().unwrap();
    let size = std::fs::metadata(&session).unwrap().len() as usize;
    std::fs::write(&session, "x".repeat(size)).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&session)
        .unwrap()
        .set_modified(stamp)
        .unwrap();
    let fourth = import_store("claude", &storage, &env, &[]);
    assert_eq!(lines(&fourth)[0][3], "unchanged");
    assert_eq!(std::fs::read(&transcript).unwrap(), after);
}

#[test]
fn since_skips_older_session_files_and_codex_home_is_honoured() {
    let Some(rollout) = real(
        "codex",
        "agent-sessions-codex-rollout-session-schema-fixture.jsonl",
    ) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join("codex-home");
    let day = codex_home.join("sessions/2025/01/02");
    std::fs::create_dir_all(&day).unwrap();
    let file = day.join("rollout-2025-01-02T10-00-00-abc.jsonl");
    std::fs::copy(&rollout, &file).unwrap();
    // Last modified 2025-01-02.
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_735_812_000);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(t)
        .unwrap();
    let storage = home.path().join("storage");
    let env = [("CODEX_HOME", codex_home.as_path())];
    let none = import_store("codex", &storage, &env, &["--since", "2025-01-03"]);
    assert!(lines(&none).is_empty(), "{}", text(&none.stdout));
    let some = import_store("codex", &storage, &env, &["--since", "2025-01-02"]);
    let l = lines(&some);
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!((l[0][1].as_str(), l[0][3].as_str()), ("codex", "new"));
    // codex.json (jq): input_tokens 12757, output_tokens 81.
    let t = receipts_total(&storage, &l[0][0]);
    assert_eq!(
        (&t["input_tokens"], &t["output_tokens"]),
        (&12757.into(), &81.into())
    );
    // The run mirrors a live session: `list` says open, not incomplete (no run.completed
    // will ever come; the next import appends).
    let list = bin()
        .args(["list", "--json", "--storage"])
        .arg(&storage)
        .output()
        .unwrap();
    assert!(list.status.success(), "{}", text(&list.stderr));
    let runs: Value = serde_json::from_str(&text(&list.stdout)).unwrap();
    let statuses: Vec<&Value> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert_eq!(statuses, [&Value::from("open")], "{runs}");
    // `tree` and `show` say the same of it as `list`.
    let id = runs[0]["run_id"].as_str().unwrap();
    let view = |args: &[&str]| {
        let out = bin()
            .args(args)
            .arg(id)
            .arg("--storage")
            .arg(&storage)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let tree = view(&["tree"]);
    assert!(tree.lines().next().unwrap().contains(" open "), "{tree}");
    assert!(!tree.contains("incomplete"), "{tree}");
    let json: Value = serde_json::from_str(&view(&["tree", "--json"])).unwrap();
    assert_eq!(json["open_session"], Value::Bool(true), "{json}");
    assert!(view(&["show"]).contains("━━ open: this run mirrors an imported agent CLI session"));
}

fn grouped(storage: &Path, by: &str) -> Value {
    let out = bin()
        .args(["receipts", "--by", by, "--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_str(&text(&out.stdout)).unwrap()
}

/// `receipts --by` over an imported store: three real session logs, one of them placed as a
/// sub-agent log of another session (`<session>/subagents/agent-*.jsonl`). Expected values:
/// claude.json (jq): short 3/13/11,515/13,835, subagent 1,576/1,586/427,286/25,842,
/// tool_heavy 54/212/88,231/17,696.
#[test]
fn receipts_group_an_imported_store_by_session_project_model_and_day() {
    let (Some(short), Some(sub), Some(heavy)) = (
        real("claude-code", "spotter-session-log-v2.1.38-short.jsonl"),
        real("claude-code", "spotter-session-log-v2.1.38-subagent.jsonl"),
        real(
            "claude-code",
            "spotter-session-log-v2.1.38-tool_heavy.jsonl",
        ),
    ) else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("cfg");
    let alpha = config.join("projects/-work-alpha");
    let beta = config.join("projects/-work-beta");
    std::fs::create_dir_all(alpha.join("s-short/subagents")).unwrap();
    std::fs::create_dir_all(&beta).unwrap();
    std::fs::copy(&short, alpha.join("s-short.jsonl")).unwrap();
    std::fs::copy(&sub, alpha.join("s-short/subagents/agent-a1.jsonl")).unwrap();
    std::fs::copy(&heavy, beta.join("s-heavy.jsonl")).unwrap();
    let storage = home.path().join("storage");
    import_store(
        "claude",
        &storage,
        &[("CLAUDE_CONFIG_DIR", config.as_path())],
        &[],
    );

    let tokens = |g: &Value| {
        let u = &g["usage"];
        [
            u["input_tokens"].as_u64().unwrap(),
            u["output_tokens"].as_u64().unwrap(),
            u["cache_read_tokens"].as_u64().unwrap(),
            u["cache_write_tokens"].as_u64().unwrap(),
        ]
    };
    let by_session = grouped(&storage, "session");
    let groups = by_session["groups"].as_array().unwrap();
    let keys: Vec<&str> = groups.iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["s-heavy", "s-short"], "{by_session:#}");
    assert_eq!(tokens(&groups[0]), [54, 212, 88_231, 17_696]);
    // The sub-agent's log counts for its parent session: 3 + 1,576, 13 + 1,586, …
    assert_eq!(tokens(&groups[1]), [1_579, 1_599, 438_801, 39_677]);
    assert_eq!(groups[1]["runs"], 2);

    let by_project = grouped(&storage, "project");
    let keys: Vec<&str> = by_project["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["-work-alpha", "-work-beta"]);

    let by_model = grouped(&storage, "model");
    let g = &by_model["groups"][0];
    assert_eq!(g["key"], "claude-opus-4-6");
    assert_eq!(tokens(g), [1_633, 1_811, 527_032, 57_373]);
    // claude-opus-4-6 (LiteLLM 1.110.2): 1633×5e-06 + 1811×2.5e-05 + 527032×5e-07
    // + 57373×1e-05 (every cache write of these logs is `ephemeral_1h`, priced at
    // cache_creation_input_token_cost_above_1hr, #41) = 0.008165 + 0.045275 + 0.263516
    // + 0.57373 = 0.890686
    let cost = g["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.890686).abs() < 1e-9, "{cost}");

    // jq -r 'select(.type=="assistant") | .timestamp[:10]' <each log> | sort -u → 2026-02-10
    let by_day = grouped(&storage, "day");
    assert_eq!(by_day["groups"].as_array().unwrap().len(), 1);
    assert_eq!(by_day["groups"][0]["key"], "2026-02-10");
    assert_eq!(
        tokens(&by_day["groups"][0]),
        [1_633, 1_811, 527_032, 57_373]
    );
    let by_month = grouped(&storage, "month");
    assert_eq!(by_month["groups"][0]["key"], "2026-02");
}

/// A session file without agent output (Claude Code keeps logs of summaries only) makes no
/// run, and is remembered: it is read again only once it changes.
#[test]
fn a_session_file_without_agent_output_makes_no_run_and_is_not_read_again() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("cfg");
    let project = config.join("projects/-work-gamma");
    std::fs::create_dir_all(&project).unwrap();
    let file = project.join("summaries.jsonl");
    std::fs::write(
        &file,
        "{\"type\":\"summary\",\"summary\":\"Earlier work\",\"leafUuid\":\"u1\"}\n",
    )
    .unwrap();
    let storage = home.path().join("storage");
    let env = [("CLAUDE_CONFIG_DIR", config.as_path())];
    for _ in 0..2 {
        let out = import_store("claude", &storage, &env, &[]);
        assert!(lines(&out).is_empty(), "{}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(stderr.contains("0 new"), "{stderr}");
    }
    let runs = std::fs::read_dir(&storage)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .count();
    assert_eq!(runs, 0);
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(storage.join("import-index.json")).unwrap())
            .unwrap();
    let entry = index["files"].as_object().unwrap().values().next().unwrap();
    assert_eq!(entry["run_id"], "");
}
