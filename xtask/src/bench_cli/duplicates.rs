//! The duplicates part of `cargo xtask bench-cli` (#51 item 6): one bill per request across a
//! store, side by side with ccusage and with jq's truth, on one Claude Code store holding
//!
//! - a real streamed session log (`spotter-session-log-v2.1.38-subagent.jsonl`: its requests
//!   are recorded several times with rising `output_tokens`),
//! - its resumed copy, as Claude Code writes one (a new session id, the first half of the
//!   records again with the same `message.id` and `requestId`),
//! - a copy taken while it streamed (every `output_tokens` still 1) under a third session.
//!
//! The truth is jq's over the distinct requests (`message.id` + `requestId`, each request's
//! last streamed copy, the largest output). Ours (`import claude --store` then `receipts --by
//! day --json`) must equal it on every count; ccusage is printed beside both: it counts each
//! request once too, and keeps the first record of a request, whose output count is a
//! streaming placeholder, so its output column is lower.

use std::path::Path;
use std::process::Command;

use super::{Error, Totals, ccusage_totals, our_totals};

const LOG: &str = "claude-code/spotter-session-log-v2.1.38-subagent.jsonl";

/// jq's totals of the distinct requests of the files it is given, and how many there are.
const TRUTH: &str = r#"
[inputs | select(.type == "assistant" and .message.usage != null)
 | {k: (.message.id + "/" + (.requestId // "")), u: .message.usage}]
| group_by(.k) | map(max_by(.u.output_tokens) | .u)
| [length, (map(.input_tokens // 0) | add), (map(.output_tokens // 0) | add),
   (map(.cache_read_input_tokens // 0) | add), (map(.cache_creation_input_tokens // 0) | add)]
"#;

/// What the three accountants said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// jq: distinct requests and their totals.
    pub truth: (u64, Totals),
    /// Ours: the requests billed (turns) and totals.
    pub ours: (u64, Totals),
    /// ccusage's totals (`None`: not installed).
    pub ccusage: Option<Totals>,
}

impl Outcome {
    /// Ours equals the truth on every count.
    pub fn pass(&self) -> bool {
        self.ours == self.truth
    }

    /// The side-by-side table.
    pub fn render(&self) -> String {
        let row = |name: &str, requests: Option<u64>, t: &Totals| {
            let requests = requests.map_or("—".to_owned(), |r| r.to_string());
            format!(
                "| {name} | {requests} | {} | {} | {} | {} |\n",
                t[0], t[1], t[2], t[3]
            )
        };
        let mut out = String::from(
            "bench-cli duplicates: a streamed log + its resumed copy + a copy taken mid-stream\n\
             | accountant | requests | input | output | cache read | cache write |\n\
             |---|---|---|---|---|---|\n",
        );
        out += &row("jq (truth)", Some(self.truth.0), &self.truth.1);
        out += &row("transcript", Some(self.ours.0), &self.ours.1);
        if let Some(c) = &self.ccusage {
            out += &row("ccusage", None, c);
        }
        out += &format!(
            "bench-cli duplicates: transcript {} jq's truth{}\n",
            if self.pass() {
                "equals"
            } else {
                "DIFFERS FROM"
            },
            match &self.ccusage {
                Some(c) if c[0] == self.truth.1[0] && c[2..] == self.truth.1[2..] => {
                    "; ccusage agrees on input and cache tokens".to_owned()
                }
                Some(_) => "; ccusage differs on input or cache tokens".to_owned(),
                None => "; ccusage not installed".to_owned(),
            }
        );
        out
    }
}

/// The log's lines, `sessionId` set to `session`, the first `lines` of them; when `streaming`
/// each assistant record's `output_tokens` is 1.
fn copy_of(text: &str, session: &str, lines: usize, streaming: bool) -> Result<String, Error> {
    let mut out = String::new();
    for line in text.lines().take(lines) {
        let mut v: serde_json::Value = serde_json::from_str(line)?;
        if v.get("sessionId").is_some() {
            v["sessionId"] = session.into();
        }
        if streaming && v["type"] == "assistant" && v["message"]["usage"].is_object() {
            v["message"]["usage"]["output_tokens"] = 1.into();
        }
        out += &serde_json::to_string(&v)?;
        out.push('\n');
    }
    Ok(out)
}

fn ok(cmd: &mut Command, what: &str) -> Result<Vec<u8>, Error> {
    let out = cmd
        .output()
        .map_err(|e| format!("bench-cli duplicates: {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "bench-cli duplicates: {what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(out.stdout)
}

/// Builds the store under `dir` and asks jq, us and ccusage.
pub fn run(
    dir: &Path,
    fixtures: &Path,
    transcript: &Path,
    ccusage: Option<&Path>,
) -> Result<Outcome, Error> {
    let log = fixtures.join(LOG);
    let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let lines = text.lines().count();
    let config = dir.join("claude");
    let project = config.join("projects").join("-bench-duplicates");
    std::fs::create_dir_all(&project)?;
    let sessions = [
        ("0f6e1c52-0000-4000-8000-00000000b001", lines, false),
        ("0f6e1c52-0000-4000-8000-00000000b002", lines / 2, false),
        ("0f6e1c52-0000-4000-8000-00000000b003", lines, true),
    ];
    let mut files = Vec::new();
    for (session, n, streaming) in sessions {
        let path = project.join(format!("{session}.jsonl"));
        std::fs::write(&path, copy_of(&text, session, n, streaming)?)?;
        files.push(path);
    }
    let jq = ok(
        Command::new("jq").args(["-n", "-c", TRUTH]).args(&files),
        "jq",
    )?;
    let t: Vec<u64> = serde_json::from_slice(&jq)?;
    let truth = (t[0], [t[1], t[2], t[3], t[4]]);

    let storage = dir.join("storage");
    let ours = |args: &[&str]| {
        let mut c = Command::new(transcript);
        c.arg("--storage")
            .arg(&storage)
            .args(args)
            .env("CLAUDE_CONFIG_DIR", &config)
            .env("NO_COLOR", "1");
        c
    };
    ok(
        &mut ours(&["import", "claude", "--store"]),
        "transcript import",
    )?;
    let json = ok(
        &mut ours(&["receipts", "--by", "day", "--json"]),
        "transcript receipts",
    )?;
    let json = String::from_utf8(json)?;
    let report: serde_json::Value = serde_json::from_str(&json)?;
    let requests = report["groups"]
        .as_array()
        .map_or(0, |g| g.iter().filter_map(|g| g["turns"].as_u64()).sum());
    let ours = (requests, our_totals(&json)?);

    let ccusage = match ccusage {
        Some(bin) => {
            let out = ok(
                Command::new(bin)
                    .args(["daily", "--json", "--offline", "--timezone", "UTC"])
                    .env("CLAUDE_CONFIG_DIR", &config)
                    .env("TZ", "UTC")
                    .env("NO_COLOR", "1"),
                "ccusage daily",
            )?;
            Some(ccusage_totals(&String::from_utf8(out)?)?)
        }
        None => None,
    };
    Ok(Outcome {
        truth,
        ours,
        ccusage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_who_agrees() {
        let o = Outcome {
            truth: (12, [10, 900, 30, 40]),
            ours: (12, [10, 900, 30, 40]),
            ccusage: Some([10, 12, 30, 40]),
        };
        assert!(o.pass());
        let text = o.render();
        assert!(
            text.contains("| ccusage | — | 10 | 12 | 30 | 40 |"),
            "{text}"
        );
        assert!(
            text.contains("transcript equals jq's truth; ccusage agrees"),
            "{text}"
        );
        let off = Outcome {
            ours: (13, [10, 900, 30, 40]),
            ccusage: None,
            ..o
        };
        assert!(!off.pass());
        assert!(off.render().contains("DIFFERS FROM"));
    }

    #[test]
    fn a_streaming_copy_keeps_one_output_token_per_record() {
        let log = "{\"type\":\"assistant\",\"sessionId\":\"a\",\"message\":{\"usage\":{\"output_tokens\":9}}}\n\
                   {\"type\":\"user\",\"sessionId\":\"a\"}\n";
        let copy = copy_of(log, "b", 1, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(copy.lines().count(), 1);
        let v: serde_json::Value =
            serde_json::from_str(copy.trim_end()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v["sessionId"], "b");
        assert_eq!(v["message"]["usage"]["output_tokens"], 1);
    }
}
