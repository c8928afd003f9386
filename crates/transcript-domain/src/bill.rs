//! Usage and cost totals: the one-request-one-bill rule, in one place.
//!
//! The normalizers already deduplicate usage per API request: each `message.assistant` event
//! carries the usage of its own request only (one request, one bill). Totals are therefore the
//! field-by-field sum of the turns' usage ([`Usage::accumulate`]), never of anything else
//! (a step's `result`, a CLI's cumulative report). A turn is priced under its own model, or,
//! when it names none, under the step's model if the step's turns name exactly one
//! ([`step_model`]), else under `(none)`. A sum of costs is unknown as soon as one priced turn
//! is ([`CostSum`]): never $0 for a model without a price.
//!
//! Used by the step tree ([`crate::tree::StepNode::bill`]) and by transcript-export's receipts
//! (which the OTLP and CLI views read).

use serde::Serialize;

use crate::payload::Usage;

/// Prices one turn: model and usage to US dollars, `None` when unknown (the providers crate's
/// `Pricing::cost` is one).
pub type PriceFn<'a> = dyn Fn(&str, &Usage) -> Option<f64> + 'a;

/// The model name of a turn that names none and whose step has no single model.
pub const NO_MODEL: &str = "(none)";

/// The step's model: the one model its assistant turns name, when they name exactly one
/// (turns naming none are ignored); `None` when they name none or several.
pub fn step_model<'a>(models: impl IntoIterator<Item = Option<&'a str>>) -> Option<&'a str> {
    let mut named = models.into_iter().flatten();
    match named.next() {
        Some(first) if named.all(|m| m == first) => Some(first),
        _ => None,
    }
}

/// The model a turn is billed under: its own, else its step's ([`step_model`]), else
/// [`NO_MODEL`].
pub fn billed_model<'a>(turn: Option<&'a str>, step: Option<&'a str>) -> &'a str {
    turn.or(step).unwrap_or(NO_MODEL)
}

pub use crate::money::add_usd;

/// A sum of costs that becomes unknown as soon as one part is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CostSum {
    usd: f64,
    any: bool,
    unknown: bool,
}

impl CostSum {
    /// Adds one part (`None`: unknown).
    pub fn add(&mut self, cost: Option<f64>) {
        match cost {
            Some(c) => {
                self.usd = add_usd(self.usd, c);
                self.any = true;
            }
            None => self.unknown = true,
        }
    }

    /// Adds another sum.
    pub fn merge(&mut self, other: CostSum) {
        self.usd = add_usd(self.usd, other.usd);
        self.any |= other.any;
        self.unknown |= other.unknown;
    }

    /// The total: `None` when nothing was added or any part was unknown.
    pub fn get(self) -> Option<f64> {
        (self.any && !self.unknown).then_some(self.usd)
    }

    /// Whether some part was unknown.
    pub fn has_unknown(self) -> bool {
        self.unknown
    }
}

/// One assistant turn as billed: what a `message.assistant` event says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// Seq of its `message.assistant` event.
    pub seq: u64,
    /// Its model, as reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Its usage (of this request only), as reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Usage and cost of a set of turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bill {
    /// Assistant turns.
    pub turns: u64,
    /// Turns that reported usage.
    pub billed_turns: u64,
    /// Their summed usage (`cost_usd`: what the CLIs reported themselves).
    pub usage: Usage,
    /// Their cost from the price function (unknown without one).
    pub cost: CostSum,
}

impl Bill {
    /// The bill of one step's turns: usage summed, each billed turn priced under
    /// [`billed_model`] with `price` (without a price function the cost stays unknown).
    pub fn of_step(turns: &[Turn], price: Option<&PriceFn<'_>>) -> Bill {
        let step = step_model(turns.iter().map(|t| t.model.as_deref()));
        let mut bill = Bill::default();
        for turn in turns {
            bill.turns += 1;
            if let Some(usage) = &turn.usage {
                let model = billed_model(turn.model.as_deref(), step);
                bill.add_billed(usage, price.and_then(|p| p(model, usage)));
            }
        }
        bill
    }

    /// Adds one turn that reported `usage`, priced at `cost`.
    pub fn add_billed(&mut self, usage: &Usage, cost: Option<f64>) {
        self.billed_turns += 1;
        self.usage.accumulate(usage);
        self.cost.add(cost);
    }

    /// Adds another bill.
    pub fn merge(&mut self, other: &Bill) {
        self.turns += other.turns;
        self.billed_turns += other.billed_turns;
        self.usage.accumulate(&other.usage);
        self.cost.merge(other.cost);
    }

    /// The cost in US dollars, `None` when unknown.
    pub fn cost_usd(&self) -> Option<f64> {
        self.cost.get()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..Usage::default()
        }
    }

    fn turn(seq: u64, model: Option<&str>, u: Option<Usage>) -> Turn {
        Turn {
            seq,
            model: model.map(str::to_owned),
            usage: u,
        }
    }

    /// A usage-only turn is billed under the step's single model; a turn without usage counts
    /// as a turn but is not billed; a model without a price makes the cost unknown, not $0.
    #[test]
    fn one_request_one_bill() {
        let price = |model: &str, u: &Usage| {
            (model == "m").then(|| u.input_tokens.unwrap_or(0) as f64 * 0.5)
        };
        let turns = [
            turn(1, Some("m"), None),
            turn(2, None, Some(usage(10, 1))),
            turn(3, Some("m"), Some(usage(4, 2))),
        ];
        let bill = Bill::of_step(&turns, Some(&price));
        assert_eq!((bill.turns, bill.billed_turns), (3, 2));
        assert_eq!(bill.usage, usage(14, 3));
        assert_eq!(bill.cost_usd(), Some(7.0));
        let mixed = [
            turn(1, Some("m"), Some(usage(2, 0))),
            turn(2, Some("x"), Some(usage(2, 0))),
        ];
        let bill = Bill::of_step(&mixed, Some(&price));
        assert_eq!(bill.cost_usd(), None);
        assert!(bill.cost.has_unknown());
        assert_eq!(Bill::of_step(&turns, None).cost_usd(), None);
        assert_eq!(step_model([Some("a"), None, Some("b")]), None);
        assert_eq!(billed_model(None, None), NO_MODEL);
    }
}
