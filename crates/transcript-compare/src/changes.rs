//! The changes of one step or run as they are found: each comparison adds a [`Change`] when
//! A's and B's values differ, with numbers compared as numbers and costs to the printed
//! fraction of a cent ([`crate::values`]).

use serde::Serialize;
use serde_json::{Value, json};
use transcript_domain::Usage;

use crate::model::Change;
use crate::record::{Spend, ToolCallRecord};
use crate::text::hunks;
use crate::values::{json_eq, same_cost};

/// Reads one token count of a usage.
type TokenField = fn(&Usage) -> Option<u64>;

/// The changes of one step or run, in the order they are found.
#[derive(Default)]
pub struct Changes(pub Vec<Change>);

/// `v` as JSON (`null` if it cannot be).
pub fn to_value<T: Serialize + ?Sized>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A change of `field` from `a` to `b`, without hunks or a note.
pub fn change(field: &str, a: Value, b: Value) -> Change {
    Change {
        field: field.to_owned(),
        a,
        b,
        hunks: Vec::new(),
        note: None,
    }
}

impl Changes {
    /// `field` when `a != b`.
    pub fn value<T: Serialize + PartialEq + ?Sized>(&mut self, field: &str, a: &T, b: &T) {
        if a != b {
            self.0.push(change(field, to_value(a), to_value(b)));
        }
    }

    /// `field` when the JSON values differ (numbers as numbers).
    pub fn json(&mut self, field: &str, a: &Value, b: &Value) {
        if !json_eq(a, b) {
            self.0.push(change(field, a.clone(), b.clone()));
        }
    }

    /// `field` when the texts differ, with a line diff when they span lines.
    pub fn text(&mut self, field: &str, a: Option<&str>, b: Option<&str>) {
        if a != b {
            self.0.push(Change {
                hunks: hunks(a.unwrap_or(""), b.unwrap_or("")),
                ..change(field, to_value(&a), to_value(&b))
            });
        }
    }

    /// A tool value: strings get a line diff, other values are shown whole.
    pub fn content(&mut self, field: &str, a: &Value, b: &Value) {
        match (a, b) {
            (Value::String(x), Value::String(y)) => self.text(field, Some(x), Some(y)),
            _ => self.json(field, a, b),
        }
    }

    /// A cost in US dollars, equal to the fraction of a cent receipts print.
    pub fn cost(&mut self, field: &str, a: Option<f64>, b: Option<f64>) {
        if !same_cost(a, b) {
            self.0.push(change(field, to_value(&a), to_value(&b)));
        }
    }

    /// Tokens and cost.
    pub fn spend(&mut self, a: &Spend, b: &Spend) {
        let (ua, ub) = (&a.usage, &b.usage);
        let fields: [(&str, TokenField); 5] = [
            ("input_tokens", |u| u.input_tokens),
            ("output_tokens", |u| u.output_tokens),
            ("cache_read_tokens", |u| u.cache_read_tokens),
            ("cache_write_tokens", |u| u.cache_write_tokens),
            ("reasoning_tokens", |u| u.reasoning_tokens),
        ];
        for (name, get) in fields {
            self.value(&format!("usage.{name}"), &get(ua), &get(ub));
        }
        self.cost("usage.reported_cost_usd", ua.cost_usd, ub.cost_usd);
        self.cost("cost_usd", a.cost_usd, b.cost_usd);
    }

    /// The router's calls, paired as [`crate::pairing::pair_calls`] does.
    pub fn tool_calls(&mut self, a: &[&ToolCallRecord], b: &[&ToolCallRecord], strict_ids: bool) {
        self.value("tool_calls", &a.len(), &b.len());
        let b = crate::pairing::pair_calls(a, b);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let at = format!("tool_calls[{i}]");
            self.value(&format!("{at}.name"), &x.name, &y.name);
            self.json(&format!("{at}.input"), &x.input, &y.input);
            let null = Value::Null;
            self.content(
                &format!("{at}.output"),
                x.output.as_ref().unwrap_or(&null),
                y.output.as_ref().unwrap_or(&null),
            );
            self.text(
                &format!("{at}.error"),
                x.error.as_deref(),
                y.error.as_deref(),
            );
            if strict_ids {
                self.value(&format!("{at}.call_id"), &x.call_id, &y.call_id);
            }
        }
        for (i, extra) in a.iter().enumerate().skip(b.len()) {
            let at = format!("tool_calls[{i}]");
            self.json(&at, &call_value(extra), &Value::Null);
        }
        for (i, extra) in b.iter().enumerate().skip(a.len()) {
            let at = format!("tool_calls[{i}]");
            self.json(&at, &Value::Null, &call_value(extra));
        }
    }
}

/// A call on one side only, without its id.
fn call_value(c: &ToolCallRecord) -> Value {
    json!({"name": c.name, "input": c.input, "output": c.output, "error": c.error})
}
