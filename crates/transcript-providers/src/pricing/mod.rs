//! Prices: what a turn's [`Usage`] costs, from LiteLLM's published model
//! price table (pinned and embedded: see `src/pricing/README.md`; version in
//! [`LITELLM_VERSION`]), or from a replacement table in the same format
//! (`--pricing FILE`). Pure: the caller reads the file and hands the text to
//! [`Pricing::from_json`]; nothing here does I/O.
//!
//! # How a cost is computed
//!
//! For one turn of model `m` with usage `u` ([`Pricing::cost`]):
//!
//! - the price entry is `m` itself, else `gemini/m`, `anthropic/m`,
//!   `openai/m`, else (for `vendor/m` names) `m` without its prefix
//!   ([`Pricing::lookup`]); else the same names with each dot between two digits made a
//!   hyphen (Copilot's `claude-opus-4.6` is the table's `claude-opus-4-6`,
//!   [`hyphenate_versions`]: a rule, not a list). No entry: `None` (shown as `—`, never $0).
//! - the tier: a request whose prompt (`input + cache read + cache write`
//!   tokens) is above a threshold the entry prices
//!   (`*_above_200k_tokens`, `*_above_272k_tokens`, …) is priced at the
//!   highest such tier for every count the tier prices (the providers bill
//!   the whole request at the long-context rate); other counts keep the base
//!   price.
//! - cost is the sum of input × `input_cost_per_token`, output ×
//!   `output_cost_per_token`, cache read × `cache_read_input_token_cost` and
//!   cache write × `cache_creation_input_token_cost`, except the 1-hour cache writes
//!   (`usage.cache_write_1h_tokens`, from Anthropic's `cache_creation.ephemeral_1h_input_tokens`)
//!   × `cache_creation_input_token_cost_above_1hr` (the 5-minute rate when the entry has
//!   none; all writes at the 5-minute rate when the usage has no split). A cache count whose price the entry
//!   lacks is priced as input. Reasoning tokens are part of `output_tokens`
//!   for Anthropic, OpenAI and Codex (not billed again); Gemini counts them
//!   apart (see the gemini rows of the crate docs), so for entries whose
//!   `litellm_provider` is `gemini` or `vertex_ai-language-models` they are
//!   added at `output_cost_per_reasoning_token`, else the output price.
//!
//! The tier is decided on each turn's usage: exact for turns that are one
//! request (Claude session logs and stream-json assistant messages, Codex
//! rollouts' `token_count`, API responses), an approximation for runs a CLI
//! reports only as a total (Gemini CLI `stats`, Codex `exec --json`
//! `turn.completed`), where the sum of several requests may cross a
//! threshold none of them crossed.
//!
//! Claude Code's `<synthetic>` turns ([`SYNTHETIC_MODEL`]: messages it writes itself, no
//! API request) cost $0 and are never an unknown price.
//!
//! # Why it may differ from the CLI's own `total_cost_usd`
//!
//! Claude Code prices with its own built-in table: it counts requests of helper models (e.g. a Haiku
//! title call) that never appear as messages, and its table may be older or
//! newer than the pinned one. Receipts show both.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;
use transcript_domain::Usage;

/// The LiteLLM release the embedded table comes from.
pub const LITELLM_VERSION: &str = "1.110.2";

/// The model Claude Code names on the turns it writes itself, without an API request (its own
/// error messages, e.g. "API Error: …" or "Prompt is too long"): never billed, so never a
/// price the table lacks.
pub const SYNTHETIC_MODEL: &str = "<synthetic>";

/// The embedded table (trimmed by `src/pricing/trim.jq`).
const EMBEDDED: &str = include_str!("litellm-prices.json");

/// A price table that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PricingError {
    /// Not JSON.
    #[error("not JSON at line {line}, column {column}: {cause}")]
    Json {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the JSON parser said.
        cause: String,
    },
    /// The document is not an object of model entries.
    #[error("expected an object of model entries (LiteLLM's format), found {found}")]
    NotATable {
        /// The JSON type found.
        found: &'static str,
    },
    /// A price that is not a finite number ≥ 0.
    #[error("model {model:?}: {field} is {value}, not a price (a number >= 0)")]
    BadPrice {
        /// The entry.
        model: String,
        /// The field.
        field: String,
        /// The value as JSON text.
        value: String,
    },
    /// No model carries a price.
    #[error("no model entry carries input_cost_per_token or output_cost_per_token")]
    Empty,
}

/// Per-token prices (US dollars) of one count set.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// `input_cost_per_token`.
    pub input: Option<f64>,
    /// `output_cost_per_token`.
    pub output: Option<f64>,
    /// `cache_read_input_token_cost`.
    pub cache_read: Option<f64>,
    /// `cache_creation_input_token_cost` (5-minute cache writes).
    pub cache_write: Option<f64>,
    /// `cache_creation_input_token_cost_above_1hr` (1-hour cache writes).
    pub cache_write_1h: Option<f64>,
    /// `output_cost_per_reasoning_token`.
    pub reasoning: Option<f64>,
}

/// One model's prices.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelPrice {
    /// `litellm_provider`.
    pub provider: Option<String>,
    /// Base prices.
    pub base: Rates,
    /// Long-context tiers: (threshold in prompt tokens, prices), ascending.
    pub tiers: Vec<(u64, Rates)>,
}

/// What a turn cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    /// US dollars.
    pub usd: f64,
    /// The table entry used.
    pub priced_as: String,
    /// The tier's threshold, when a long-context tier applied.
    pub tier_above: Option<u64>,
}

/// A model price table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Pricing {
    models: HashMap<String, ModelPrice>,
}

/// Field names without their tier suffix; a longer name before any name it starts with.
const BASES: [&str; 6] = [
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
    "cache_creation_input_token_cost_above_1hr",
    "cache_creation_input_token_cost",
    "output_cost_per_reasoning_token",
];

fn slot<'a>(r: &'a mut Rates, base: &str) -> Option<&'a mut Option<f64>> {
    Some(match base {
        "input_cost_per_token" => &mut r.input,
        "output_cost_per_token" => &mut r.output,
        "cache_read_input_token_cost" => &mut r.cache_read,
        "cache_creation_input_token_cost" => &mut r.cache_write,
        "cache_creation_input_token_cost_above_1hr" => &mut r.cache_write_1h,
        "output_cost_per_reasoning_token" => &mut r.reasoning,
        _ => return None,
    })
}

/// `<base>` → (base, None); `<base>_above_<N>k_tokens` → (base, Some(N×1000)).
fn parse_field(key: &str) -> Option<(&'static str, Option<u64>)> {
    for base in BASES {
        let Some(rest) = key.strip_prefix(base) else {
            continue;
        };
        if rest.is_empty() {
            return Some((base, None));
        }
        let n = rest.strip_prefix("_above_")?.strip_suffix("k_tokens")?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return n
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1000))
            .map(|t| (base, Some(t)));
    }
    None
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Pricing {
    /// The embedded table (LiteLLM [`LITELLM_VERSION`], trimmed), parsed
    /// once.
    pub fn embedded() -> &'static Self {
        static TABLE: OnceLock<Pricing> = OnceLock::new();
        // The embedded table is checked by a unit test; a broken build
        // yields an empty table (every cost unknown), never a panic.
        TABLE.get_or_init(|| Self::from_json(EMBEDDED).unwrap_or_default())
    }

    /// Parses a table in LiteLLM's format: an object of model name → entry,
    /// each entry's `input_cost_per_token`, `output_cost_per_token`,
    /// `cache_read_input_token_cost`, `cache_creation_input_token_cost`,
    /// `output_cost_per_reasoning_token`, their `*_above_<N>k_tokens` tiers
    /// and `litellm_provider` read; other fields and entries that are not
    /// objects (LiteLLM's `sample_spec` documents the format) are ignored.
    pub fn from_json(text: &str) -> Result<Self, PricingError> {
        let doc: Value = serde_json::from_str(text).map_err(|e| PricingError::Json {
            line: e.line(),
            column: e.column(),
            cause: e.to_string(),
        })?;
        let Value::Object(entries) = doc else {
            return Err(PricingError::NotATable {
                found: type_name(&doc),
            });
        };
        let mut models = HashMap::new();
        for (name, entry) in entries {
            let Value::Object(fields) = entry else {
                continue;
            };
            let mut price = ModelPrice {
                provider: fields
                    .get("litellm_provider")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                ..ModelPrice::default()
            };
            let mut tiers: Vec<(u64, Rates)> = Vec::new();
            for (key, value) in &fields {
                let Some((base, tier)) = parse_field(key) else {
                    continue;
                };
                let p = value
                    .as_f64()
                    .filter(|p| p.is_finite() && *p >= 0.0)
                    .ok_or_else(|| PricingError::BadPrice {
                        model: name.clone(),
                        field: key.clone(),
                        value: value.to_string(),
                    })?;
                let rates = match tier {
                    None => &mut price.base,
                    Some(t) => match tiers.iter().position(|(at, _)| *at == t) {
                        Some(i) => &mut tiers[i].1,
                        None => {
                            tiers.push((t, Rates::default()));
                            let last = tiers.len() - 1;
                            &mut tiers[last].1
                        }
                    },
                };
                if let Some(s) = slot(rates, base) {
                    *s = Some(p);
                }
            }
            tiers.sort_by_key(|(t, _)| *t);
            price.tiers = tiers;
            if price.base.input.is_some() || price.base.output.is_some() {
                models.insert(name, price);
            }
        }
        if models.is_empty() {
            return Err(PricingError::Empty);
        }
        Ok(Self { models })
    }

    /// Number of priced models.
    pub fn len(&self) -> usize {
        self.models.len()
    }

    /// Whether no model is priced.
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The entry pricing `model` and its name in the table (see the module
    /// docs for the names tried).
    pub fn lookup(&self, model: &str) -> Option<(&str, &ModelPrice)> {
        self.lookup_exact(model).or_else(|| {
            // A version spelled with a dot (Copilot's `claude-opus-4.6`) is the table's
            // hyphenated name (`claude-opus-4-6`); tried only after the name as given, so a
            // name the table spells with a dot (`gpt-4.1`) keeps its own entry.
            let hyphenated = hyphenate_versions(model)?;
            self.lookup_exact(&hyphenated)
        })
    }

    /// [`Pricing::lookup`] of the name as given, with the provider prefixes.
    fn lookup_exact(&self, model: &str) -> Option<(&str, &ModelPrice)> {
        let mut names = vec![model.to_owned()];
        for prefix in ["gemini/", "anthropic/", "openai/"] {
            names.push(format!("{prefix}{model}"));
        }
        if let Some((_, bare)) = model.rsplit_once('/') {
            names.push(bare.to_owned());
        }
        names
            .into_iter()
            .find_map(|n| self.models.get_key_value(n.as_str()))
            .map(|(k, v)| (k.as_str(), v))
    }

    /// What `usage` of `model` costs; `None` when the table has no price for
    /// the model (never a guessed $0). Claude Code's [`SYNTHETIC_MODEL`] turns (its own
    /// messages, no API request) cost $0 whatever their usage.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<Cost> {
        if model == SYNTHETIC_MODEL {
            return Some(Cost {
                usd: 0.0,
                priced_as: SYNTHETIC_MODEL.to_owned(),
                tier_above: None,
            });
        }
        let (name, price) = self.lookup(model)?;
        let count = |c: Option<u64>| c.unwrap_or(0) as f64;
        let prompt = usage
            .input_tokens
            .unwrap_or(0)
            .saturating_add(usage.cache_read_tokens.unwrap_or(0))
            .saturating_add(usage.cache_write_tokens.unwrap_or(0));
        let tier = price.tiers.iter().rev().find(|(t, _)| prompt > *t);
        let pick =
            |f: fn(&Rates) -> Option<f64>| tier.and_then(|(_, r)| f(r)).or_else(|| f(&price.base));
        let input = pick(|r| r.input);
        let output = pick(|r| r.output);
        let cache_read = pick(|r| r.cache_read).or(input);
        let cache_write = pick(|r| r.cache_write).or(input);
        // 1-hour cache writes at their own rate (the 5-minute one when the entry has none);
        // the rest of the writes (all of them when the split is unknown) at the 5-minute rate.
        let cache_write_1h = pick(|r| r.cache_write_1h).or(cache_write);
        let writes = usage.cache_write_tokens.unwrap_or(0);
        let hour = usage.cache_write_1h_tokens.unwrap_or(0).min(writes);
        let (writes_5m, writes_1h) = (Some(writes - hour), Some(hour));
        let reasoning_apart = matches!(
            price.provider.as_deref(),
            Some("gemini" | "vertex_ai-language-models")
        );
        let reasoning = if reasoning_apart {
            pick(|r| r.reasoning).or(output)
        } else {
            Some(0.0)
        };
        let mut usd = 0.0;
        for (n, p) in [
            (usage.input_tokens, input),
            (usage.output_tokens, output),
            (usage.cache_read_tokens, cache_read),
            (writes_5m, cache_write),
            (writes_1h, cache_write_1h),
            (usage.reasoning_tokens, reasoning),
        ] {
            if count(n) > 0.0 {
                // A count the entry cannot price makes the cost unknown.
                usd += count(n) * p?;
            }
        }
        Some(Cost {
            usd,
            priced_as: name.to_owned(),
            tier_above: tier.map(|(t, _)| *t),
        })
    }
}

/// `model` with every dot between two digits made a hyphen (`claude-opus-4.6` →
/// `claude-opus-4-6`, the rule by which Anthropic's model names are spelled in the table);
/// `None` when it has no such dot.
pub fn hyphenate_versions(model: &str) -> Option<String> {
    let bytes = model.as_bytes();
    let mut changed = false;
    let out: String = model
        .char_indices()
        .map(|(i, c)| {
            let between_digits = c == '.'
                && i > 0
                && bytes.get(i - 1).is_some_and(u8::is_ascii_digit)
                && bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
            if between_digits {
                changed = true;
                '-'
            } else {
                c
            }
        })
        .collect();
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_prices_each_provider() {
        let p = Pricing::from_json(EMBEDDED).unwrap();
        assert!(p.len() > 100, "{}", p.len());
        for m in ["claude-opus-4-6", "gpt-5-codex", "gemini-2.5-pro", "gpt-5"] {
            assert!(p.lookup(m).is_some(), "{m}");
        }
    }

    #[test]
    fn tier_fields_are_read_with_their_threshold() {
        assert_eq!(
            parse_field("input_cost_per_token_above_200k_tokens"),
            Some(("input_cost_per_token", Some(200_000)))
        );
        assert_eq!(parse_field("input_cost_per_token_batches"), None);
        assert_eq!(
            parse_field("input_cost_per_token_above_200k_tokens_priority"),
            None
        );
        assert_eq!(parse_field("input_cost_per_token_above_k_tokens"), None);
    }
}
