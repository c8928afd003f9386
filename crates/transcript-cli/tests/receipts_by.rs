//! One billing rule for every report (issue #29): a request is priced under the model that
//! served it (the turn's `model`, else its step's one model, else `(none)`), by one function
//! (`transcript_export::billed_turns`), so `receipts`, every `receipts --by` grouping, their
//! `--json`, the priced JSON export and the OTLP spans total the same. Before, `receipts`
//! billed a turn naming no model under its step's model while `receipts --by` billed it
//! under `(none)` (unpriced: cost `—` and a warning).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use common::{bin, text};
use serde_json::{Value, json};

const GROUPINGS: [&str; 5] = ["day", "month", "session", "project", "model"];
const COUNTS: [&str; 5] = [
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
];

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&text(&out.stdout)).unwrap()
}

fn receipts(storage: &Path, args: &[&str]) -> (Value, String) {
    let out = ok(bin()
        .arg("receipts")
        .args(args)
        .args(["--json", "--storage"])
        .arg(storage)
        .output()
        .unwrap());
    (json_of(&out), text(&out.stderr))
}

/// Totals: billed turns, each token count, the reported cost and the priced cost (`None`
/// once a part is unknown), per key.
#[derive(Debug, Default, Clone, PartialEq)]
struct Totals {
    turns: u64,
    counts: BTreeMap<&'static str, u64>,
    reported: f64,
    cost: Option<f64>,
    unknown: bool,
}

impl Totals {
    fn add(&mut self, turns: u64, usage: &Value, cost: &Value) {
        self.turns += turns;
        for c in COUNTS {
            *self.counts.entry(c).or_default() += usage[c].as_u64().unwrap_or(0);
        }
        self.reported += usage["cost_usd"].as_f64().unwrap_or(0.0);
        match cost.as_f64() {
            Some(c) => *self.cost.get_or_insert(0.0) += c,
            None => self.unknown = true,
        }
    }

    /// Equal up to float summation order.
    fn assert_eq(&self, other: &Totals, what: &str) {
        assert_eq!(
            (self.turns, &self.counts, self.unknown),
            (other.turns, &other.counts, other.unknown),
            "{what}: {self:?} vs {other:?}"
        );
        assert!((self.reported - other.reported).abs() < 1e-9, "{what}");
        if !self.unknown {
            let (a, b) = (self.cost.unwrap_or(0.0), other.cost.unwrap_or(0.0));
            assert!((a - b).abs() < 1e-9, "{what}: cost {a} vs {b}");
        }
    }
}

/// What plain `receipts` says of every run in `storage`: the total, and per model. Each run
/// is counted on its own (`per_run[0]`, the run itself), so a child run is never counted
/// twice.
fn receipts_totals(storage: &Path) -> (Totals, BTreeMap<String, Totals>) {
    let mut total = Totals::default();
    let mut by_model: BTreeMap<String, Totals> = BTreeMap::new();
    for entry in std::fs::read_dir(storage).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let run = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (r, _) = receipts(storage, &[&run]);
        assert_eq!(r["per_run"].as_array().unwrap().len(), 1, "no child runs");
        let own = &r["per_run"][0];
        // Requests, not records (#51): a request split over two turns counts once.
        let turns: u64 = r["by_model"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["turns"].as_u64().unwrap())
            .sum();
        let records: usize = r["receipts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["turn_costs"].as_array().unwrap().len())
            .sum();
        assert!(turns <= records as u64, "{r}");
        total.add(turns, &own["usage"], &own["cost_usd"]);
        for m in r["by_model"].as_array().unwrap() {
            let model = m["model"].as_str().unwrap().to_owned();
            by_model.entry(model).or_default().add(
                m["turns"].as_u64().unwrap(),
                &m["usage"],
                &m["cost_usd"],
            );
        }
        // The priced JSON export bills by the same rule.
        let out = ok(bin()
            .args(["export", &run, "--format", "json", "--storage"])
            .arg(storage)
            .output()
            .unwrap());
        let cost = &json_of(&out)["cost"];
        assert_eq!(cost["by_model"], r["by_model"], "export of {run}");
        assert_eq!(cost["total_usd"], r["cost_usd"], "export of {run}");
    }
    (total, by_model)
}

/// `receipts --by <grouping>` over `storage`: the groups' totals, and the groups by key. The
/// turns it set aside as copies of a request another run bills (#51) are counted in the
/// total's turns, as `receipts` of each run alone counts them (the real captures share only
/// placeholder ids without usage: the tokens agree as they are).
fn grouped_totals(storage: &Path, by: &str) -> (Totals, BTreeMap<String, Totals>) {
    let (g, _) = receipts(storage, &["--by", by]);
    assert_eq!(g["by"], by);
    let mut total = Totals {
        turns: g["duplicates"].as_u64().unwrap(),
        ..Totals::default()
    };
    let mut groups = BTreeMap::new();
    for group in g["groups"].as_array().unwrap() {
        let turns = group["turns"].as_u64().unwrap();
        total.add(turns, &group["usage"], &group["cost_usd"]);
        let mut one = Totals::default();
        one.add(turns, &group["usage"], &group["cost_usd"]);
        groups.insert(group["key"].as_str().unwrap().to_owned(), one);
    }
    (total, groups)
}

/// `receipts` and every `--by` grouping total the same over `storage`; `--by model` equals
/// `receipts`' per-model sums model by model.
fn assert_reports_agree(storage: &Path) -> BTreeMap<String, Totals> {
    let (total, by_model) = receipts_totals(storage);
    assert!(total.turns > 0, "something was billed");
    for by in GROUPINGS {
        let (grouped, groups) = grouped_totals(storage, by);
        grouped.assert_eq(&total, &format!("--by {by}"));
        if by == "model" {
            assert_eq!(
                groups.keys().collect::<Vec<_>>(),
                by_model.keys().collect::<Vec<_>>()
            );
            for (model, t) in &groups {
                t.assert_eq(&by_model[model], &format!("--by model {model}"));
            }
        }
    }
    by_model
}

/// Every real capture of every provider imported into one storage: each report totals the
/// same; the Gemini capture whose `stats.models` names a pro and a flash model is billed per
/// model at the pinned prices.
#[test]
fn every_report_totals_the_same_on_the_real_captures() {
    let Some(root) = common::real_fixtures() else {
        return;
    };
    let storage = tempfile::tempdir().unwrap();
    for (folder, provider) in [
        ("claude-code", "claude"),
        ("codex", "codex"),
        ("gemini", "gemini"),
        ("copilot", "copilot"),
        ("openai", "openai"),
        ("anthropic", "anthropic"),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{folder}");
        ok(bin()
            .args(["import", provider])
            .args(&files)
            .arg("--storage")
            .arg(storage.path())
            .output()
            .unwrap());
    }
    assert_reports_agree(storage.path());
    // The mixed-model run alone.
    let alone = tempfile::tempdir().unwrap();
    ok(bin()
        .args(["import", "gemini"])
        .arg(root.join("gemini/gemini-cli-docs-headless-json-output-france.json"))
        .arg("--storage")
        .arg(alone.path())
        .output()
        .unwrap());
    let by_model = assert_reports_agree(alone.path());
    assert_eq!(
        by_model.keys().collect::<Vec<_>>(),
        ["gemini-2.5-flash", "gemini-2.5-pro"]
    );
    // jq -c '.stats.models | map_values(.tokens)'
    //   gemini/gemini-cli-docs-headless-json-output-france.json
    //   → pro: prompt 24939, cached 21263, candidates 20, thoughts 154;
    //     flash: prompt 8965, cached 0, candidates 10, thoughts 30, tool 28 (tool-use prompt
    //     tokens: input, outside `prompt`).
    // LiteLLM 1.110.2, gemini-2.5-pro: 1.25e-06 in, 1.25e-07 cache read, 1e-05 out (no
    // reasoning price: thoughts at the output price): (24939 − 21263)×1.25e-06
    //   + 21263×1.25e-07 + (20 + 154)×1e-05 = 0.004595 + 0.002657875 + 0.00174 = 0.008992875.
    // gemini-2.5-flash: 3e-07 in, 2.5e-06 out and reasoning: (8965 + 28)×3e-07 + 10×2.5e-06
    //   + 30×2.5e-06 = 0.0026979 + 0.000025 + 0.000075 = 0.0027979.
    for (model, want) in [
        ("gemini-2.5-pro", 0.008_992_875),
        ("gemini-2.5-flash", 0.002_797_9),
    ] {
        let cost = by_model[model].cost.unwrap();
        assert!((cost - want).abs() < 1e-12, "{model}: {cost}");
    }
}

/// One canonical transcript line.
fn line(seq: u64, run: &str, kind: &str, path: &str, payload: Value) -> String {
    json!({"seq": seq, "run_id": run, "type": kind, "path": path, "iteration": 0,
        "timestamp": format!("2026-06-08T08:00:00.{seq:03}Z"), "payload": payload})
    .to_string()
}

/// A run of one agent step whose assistant turns name `models` (`None`: no model), each
/// with `usage`.
fn agent_run(storage: &Path, run: &str, turns: &[(Option<&str>, Value)]) {
    let step = json!({"name": "ask", "kind": "agent"});
    let mut lines = vec![
        line(
            1,
            run,
            "run.started",
            "",
            json!({"name": "wf", "kind": "workflow"}),
        ),
        line(2, run, "step.started", "ask", step.clone()),
    ];
    for (model, usage) in turns {
        let mut payload = json!({"role": "assistant", "blocks": [], "provider": "claude",
            "usage": usage});
        if let Some(m) = model {
            payload["model"] = json!(m);
        }
        let seq = lines.len() as u64 + 1;
        lines.push(line(seq, run, "message.assistant", "ask", payload));
    }
    let seq = lines.len() as u64 + 1;
    lines.push(line(seq, run, "step.completed", "ask", step));
    let seq = lines.len() as u64 + 1;
    lines.push(line(
        seq,
        run,
        "run.completed",
        "",
        json!({"name": "wf", "kind": "workflow"}),
    ));
    std::fs::write(
        storage.join(format!("{run}.jsonl")),
        lines.join("\n") + "\n",
    )
    .unwrap();
}

/// A usage-only turn naming no model is billed under its step's model by every report (it
/// was `(none)`, unpriced, in `receipts --by`); in a step naming two models it has no model to
/// be billed under, in every report alike.
#[test]
fn a_turn_naming_no_model_is_billed_under_its_steps_model_by_every_report() {
    let storage = tempfile::tempdir().unwrap();
    let s = storage.path();
    let run = "00000000-0000-4000-8000-00000000000a";
    agent_run(
        s,
        run,
        &[
            (
                Some("claude-sonnet-4-5-20250929"),
                json!({"input_tokens": 1000, "output_tokens": 100}),
            ),
            (None, json!({"input_tokens": 2000, "output_tokens": 200})),
        ],
    );
    // claude-sonnet-4-5-20250929 in LiteLLM 1.110.2: 3e-06 in, 1.5e-05 out:
    // (1000 + 2000)×3e-06 + (100 + 200)×1.5e-05 = 0.009 + 0.0045 = 0.0135
    let want = 0.0135;
    let (r, err) = receipts(s, &[run]);
    assert!(
        (r["cost_usd"].as_f64().unwrap() - want).abs() < 1e-12,
        "{r:#}"
    );
    assert!(!err.contains("warning"), "{err}");
    for by in GROUPINGS {
        let (g, err) = receipts(s, &["--by", by]);
        let groups = g["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 1, "--by {by}: {g:#}");
        assert_eq!(groups[0]["turns"], 2, "--by {by}");
        let cost = groups[0]["cost_usd"].as_f64();
        assert!(
            cost.is_some_and(|c| (c - want).abs() < 1e-12),
            "--by {by}: {cost:?}"
        );
        assert_eq!(groups[0]["models"], json!(["claude-sonnet-4-5-20250929"]));
        assert!(!err.contains("warning"), "--by {by}: {err}");
    }
    // The OTLP spans: the chat spans' prices sum to the same figure.
    let out = ok(bin()
        .args(["export", run, "--format", "otlp-json", "--storage"])
        .arg(s)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .output()
        .unwrap());
    let doc = json_of(&out);
    let chat_cost: f64 = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["attributes"].as_array().unwrap())
        .filter(|a| a["key"] == "llm.cost.total")
        .map(|a| a["value"]["doubleValue"].as_f64().unwrap())
        .sum();
    assert!((chat_cost - want).abs() < 1e-12, "{chat_cost}");
    // `stats --json`: its cost per step and per provider says the same.
    let out = ok(bin()
        .args(["stats", run, "--json", "--storage"])
        .arg(s)
        .output()
        .unwrap());
    let stats = json_of(&out);
    for table in ["cost_by_step", "cost_by_provider"] {
        let sum: f64 = stats[table]
            .as_object()
            .unwrap_or_else(|| panic!("{table}: {stats:#}"))
            .values()
            .map(|v| {
                v.as_f64()
                    .unwrap_or_else(|| panic!("{table} unpriced: {stats:#}"))
            })
            .sum();
        assert!((sum - want).abs() < 1e-12, "{table}: {sum}");
    }
    assert_eq!(stats["unpriced_models"], json!([]), "{stats:#}");

    // A step naming two models: its unnamed turn is `(none)` everywhere, and warned once.
    let mixed = "00000000-0000-4000-8000-00000000000b";
    agent_run(
        s,
        mixed,
        &[
            (
                Some("gemini-2.5-pro"),
                json!({"input_tokens": 10, "output_tokens": 1}),
            ),
            (
                Some("gemini-2.5-flash"),
                json!({"input_tokens": 10, "output_tokens": 1}),
            ),
            (None, json!({"input_tokens": 5, "output_tokens": 5})),
        ],
    );
    let by_model = assert_reports_agree(s);
    assert_eq!(
        by_model.keys().collect::<Vec<_>>(),
        [
            "(none)",
            "claude-sonnet-4-5-20250929",
            "gemini-2.5-flash",
            "gemini-2.5-pro"
        ]
    );
    assert_eq!(by_model["(none)"].turns, 1);
    assert!(by_model["(none)"].unknown);
    let (_, err) = receipts(s, &["--by", "model"]);
    assert_eq!(err.matches("some turns name no model").count(), 1, "{err}");
}
