//! The messages of two step executions, aligned by content: a longest common subsequence over
//! the turns (`similar`'s Myers diff over one key per turn), so one inserted turn is one
//! added turn and not every later turn changed. Turns between two common ones meet by
//! position (a changed turn is its changes); the rest are on one side.
//!
//! A turn's key is what it says and does, not how it was recorded: its role and blocks, its
//! tool calls as a set by name and arguments (numbers as numbers), its tool results as a set
//! with the CLI's envelope taken off ([`crate::envelope`]); never ids, model, provider or
//! usage (those are compared on the turns that meet).
//!
//! Two sessions with little in common are summarized, not listed: when the longer side has
//! at least [`UNRELATED_MIN_TURNS`] turns and fewer than one in [`UNRELATED_SHARE`] of them is
//! common, the step gets one `turns` change whose note says how many turns they share
//! ("sessions share 0 of 40 turns: 40 only in A, 35 only in B"). Above
//! [`MAX_ALIGNED_TURNS`] turns on either side the turns meet by position (the alignment's
//! work grows with the product of the lengths).

use serde_json::{Value, json};
use similar::{Algorithm, DiffOp, capture_diff_slices};

use crate::changes::{Changes, change, to_value};
use crate::envelope::strip;
use crate::pairing::{call_key, pair_blocks};
use crate::record::{BlockRecord, TurnRecord};
use crate::values::canonical;

/// Below this many turns on the longer side, turns are always compared one by one.
pub const UNRELATED_MIN_TURNS: usize = 10;

/// Sessions sharing fewer than one in this many turns (of the longer side) are unrelated.
pub const UNRELATED_SHARE: usize = 4;

/// Above this many turns on either side, turns meet by position.
pub const MAX_ALIGNED_TURNS: usize = 10_000;

/// One side's turns and the CLI its tool results came through.
pub struct Side<'a> {
    /// The turns.
    pub turns: &'a [TurnRecord],
    /// The provider of the step's turns, for turns that name none.
    pub cli: Option<&'a str>,
}

impl<'a> Side<'a> {
    /// The turns of a step, with the first provider its turns name.
    pub fn of(turns: &'a [TurnRecord]) -> Self {
        Side {
            turns,
            cli: turns.iter().find_map(|t| t.provider.as_deref()),
        }
    }

    fn cli_of(&self, turn: &'a TurnRecord) -> Option<&'a str> {
        turn.provider.as_deref().or(self.cli)
    }

    fn keys(&self) -> Vec<String> {
        self.turns.iter().map(|t| key(t, self.cli_of(t))).collect()
    }
}

/// What a turn says and does, as one comparable string (see the module docs).
fn key(turn: &TurnRecord, cli: Option<&str>) -> String {
    let mut blocks = Vec::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for b in &turn.blocks {
        match b {
            BlockRecord::ToolUse { name, input, .. } => calls.push(call_key(name, input)),
            BlockRecord::ToolResult { content, .. } => {
                results.push(canonical(&strip(cli, content)).to_string());
            }
            BlockRecord::Unknown { block_type, raw } => {
                blocks.push(json!([block_type, canonical(raw)]));
            }
            other => blocks.push(to_value(other)),
        }
    }
    calls.sort();
    results.sort();
    json!([turn.role, blocks, calls, results]).to_string()
}

/// How the turns of A and B line up.
fn ops(a: &[String], b: &[String]) -> Vec<DiffOp> {
    if a.len() > MAX_ALIGNED_TURNS || b.len() > MAX_ALIGNED_TURNS {
        let common = a.len().min(b.len());
        let mut out = vec![DiffOp::Replace {
            old_index: 0,
            old_len: common,
            new_index: 0,
            new_len: common,
        }];
        if a.len() > common {
            out.push(DiffOp::Delete {
                old_index: common,
                old_len: a.len() - common,
                new_index: common,
            });
        } else if b.len() > common {
            out.push(DiffOp::Insert {
                old_index: common,
                new_index: common,
                new_len: b.len() - common,
            });
        }
        return out;
    }
    capture_diff_slices(Algorithm::Myers, a, b)
}

/// The summary of two unrelated sessions, when they are (see the module docs).
fn unrelated(a: usize, b: usize, shared: usize) -> Option<String> {
    let longer = a.max(b);
    (longer >= UNRELATED_MIN_TURNS && shared * UNRELATED_SHARE < longer).then(|| {
        format!(
            "sessions share {shared} of {longer} turns: {} only in A, {} only in B (not compared turn by turn)",
            a - shared,
            b - shared
        )
    })
}

impl Changes {
    /// The turns of A and B, aligned (see the module docs).
    pub fn turns(&mut self, a: &Side<'_>, b: &Side<'_>, strict_ids: bool) {
        let (ta, tb) = (a.turns, b.turns);
        let ops = ops(&a.keys(), &b.keys());
        let shared: usize = ops
            .iter()
            .map(|op| match op {
                DiffOp::Equal { len, .. } => *len,
                _ => 0,
            })
            .sum();
        if let Some(note) = unrelated(ta.len(), tb.len(), shared) {
            self.0.push(crate::model::Change {
                note: Some(note),
                ..change("turns", json!(ta.len()), json!(tb.len()))
            });
            return;
        }
        self.value("turns", &ta.len(), &tb.len());
        for op in ops {
            let (ra, rb) = (op.old_range(), op.new_range());
            for (i, j) in ra.clone().zip(rb.clone()) {
                self.turn(i, j, (a, b), strict_ids);
            }
            let common = ra.len().min(rb.len());
            for i in ra.skip(common) {
                self.json(&format!("turns[{i}]"), &turn_value(&ta[i]), &Value::Null);
            }
            for j in rb.skip(common) {
                self.json(&format!("turns[{j}]"), &Value::Null, &turn_value(&tb[j]));
            }
        }
    }

    /// A's turn `i` and B's turn `j`, named `turns[i]` (`turns[i→j]` when the indices differ).
    fn turn(&mut self, i: usize, j: usize, (a, b): (&Side<'_>, &Side<'_>), strict_ids: bool) {
        let (x, y) = (&a.turns[i], &b.turns[j]);
        let at = if i == j {
            format!("turns[{i}]")
        } else {
            format!("turns[{i}→{j}]")
        };
        self.value(&format!("{at}.role"), &x.role, &y.role);
        self.value(&format!("{at}.provider"), &x.provider, &y.provider);
        self.value(&format!("{at}.model"), &x.model, &y.model);
        self.value(&format!("{at}.blocks"), &x.blocks.len(), &y.blocks.len());
        let y_blocks = pair_blocks(&x.blocks, &y.blocks);
        let clis = (a.cli_of(x), b.cli_of(y));
        for (k, (p, q)) in x.blocks.iter().zip(&y_blocks).enumerate() {
            self.block(&format!("{at}.blocks[{k}]"), p, q, clis, strict_ids);
        }
        for (k, extra) in x.blocks.iter().enumerate().skip(y_blocks.len()) {
            self.json(&format!("{at}.blocks[{k}]"), &to_value(extra), &Value::Null);
        }
        for (k, extra) in y_blocks.iter().enumerate().skip(x.blocks.len()) {
            self.json(&format!("{at}.blocks[{k}]"), &Value::Null, &to_value(extra));
        }
    }

    fn block(
        &mut self,
        at: &str,
        a: &BlockRecord,
        b: &BlockRecord,
        (cli_a, cli_b): (Option<&str>, Option<&str>),
        strict_ids: bool,
    ) {
        use BlockRecord as B;
        match (a, b) {
            (B::Text { text: x }, B::Text { text: y })
            | (B::Stream { text: x }, B::Stream { text: y }) => {
                self.text(&format!("{at}.text"), Some(x), Some(y));
            }
            (B::Thinking { thinking: x }, B::Thinking { thinking: y }) => {
                self.text(&format!("{at}.thinking"), Some(x), Some(y));
            }
            (B::Command { command: x }, B::Command { command: y }) => {
                self.text(&format!("{at}.command"), Some(x), Some(y));
            }
            (
                B::ToolUse {
                    name: n1,
                    id: i1,
                    input: v1,
                },
                B::ToolUse {
                    name: n2,
                    id: i2,
                    input: v2,
                },
            ) => {
                self.value(&format!("{at}.tool_use.name"), n1, n2);
                self.json(&format!("{at}.tool_use.input"), v1, v2);
                if strict_ids {
                    self.value(&format!("{at}.tool_use.id"), i1, i2);
                }
            }
            (
                B::ToolResult {
                    id: i1,
                    content: v1,
                },
                B::ToolResult {
                    id: i2,
                    content: v2,
                },
            ) => {
                let (v1, v2) = (strip(cli_a, v1), strip(cli_b, v2));
                self.content(&format!("{at}.tool_result.content"), &v1, &v2);
                if strict_ids {
                    self.value(&format!("{at}.tool_result.id"), i1, i2);
                }
            }
            (
                B::Unknown {
                    block_type: t1,
                    raw: r1,
                },
                B::Unknown {
                    block_type: t2,
                    raw: r2,
                },
            ) if t1 == t2 => self.json(&format!("{at}.raw"), r1, r2),
            _ => self.json(at, &to_value(a), &to_value(b)),
        }
    }
}

/// A turn on one side only, without its usage (the step's tokens say it).
fn turn_value(t: &TurnRecord) -> Value {
    json!({"role": t.role, "model": t.model, "blocks": t.blocks})
}
