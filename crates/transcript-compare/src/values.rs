//! How recorded values compare and how money is shown: numbers as numbers (`1.0` equals `1`;
//! other floats by their exact value after parsing), and costs to the fraction of a cent that
//! `transcript receipts` prints (four decimals of a dollar, transcript-export's receipts), so
//! a sum that came out as `0.0008759999999999999` instead of `0.000876` is no difference.

use serde_json::{Map, Number, Value};

/// Decimals of a US dollar that costs are printed with and compared at: `transcript receipts`
/// prints `$0.0123` (transcript-export's receipts; `tests/money.rs` holds the two together).
pub const MONEY_DECIMALS: usize = 4;

/// A cost as receipts print it: `$0.0123`, or `—` when unknown (never $0 for a missing price).
pub fn usd(cost: Option<f64>) -> String {
    cost.map_or_else(|| "—".to_owned(), |c| format!("${c:.MONEY_DECIMALS$}"))
}

/// Whether two costs are the same to the printed fraction of a cent (unknown equals unknown
/// only).
pub fn same_cost(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => usd(Some(x)) == usd(Some(y)),
        (None, None) => true,
        _ => false,
    }
}

/// Whether a [`crate::Change`]'s field holds a cost in US dollars (`cost_usd`,
/// `usage.reported_cost_usd`, …): its values are shown as money.
fn is_money_field(field: &str) -> bool {
    field.ends_with("cost_usd")
}

/// A value of a cost field ([`is_money_field`]) as receipts print it (`$0.0009`); `None`
/// for any other field or value.
pub fn as_money(field: &str, v: &Value) -> Option<String> {
    is_money_field(field)
        .then(|| v.as_f64())
        .flatten()
        .map(|c| usd(Some(c)))
}

/// `v` with every number in one form: an integral float within ±2^53 becomes the integer
/// (so `1.0` and `1` are one value); any other number is kept. Values from serde_json are at
/// most 128 levels deep, so the recursion is bounded.
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Number(n) => Value::Number(canonical_number(n)),
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), canonical(v)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

/// The largest integer every f64 below it represents exactly.
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

fn canonical_number(n: &Number) -> Number {
    match n.as_f64() {
        // In range and integral: the cast is exact.
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() <= EXACT_INTEGERS => {
            Number::from(f as i64)
        }
        _ => n.clone(),
    }
}

/// Whether two JSON values are equal with numbers compared as numbers ([`canonical`]).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    a == b || canonical(a) == canonical(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_as_numbers() {
        assert!(json_eq(&json!(1.0), &json!(1)));
        assert!(json_eq(&json!({"a": [1.0, -2.0]}), &json!({"a": [1, -2]})));
        assert!(!json_eq(&json!(1.5), &json!(1)));
        assert!(!json_eq(&json!(0.1 + 0.2), &json!(0.3)));
        assert!(json_eq(&json!(u64::MAX), &json!(u64::MAX)));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }

    #[test]
    fn costs_compare_to_the_printed_fraction_of_a_cent() {
        assert!(same_cost(Some(0.000876), Some(0.0008759999999999999)));
        assert!(!same_cost(Some(0.0123), Some(0.0124)));
        assert!(!same_cost(Some(0.0), None));
        assert!(same_cost(None, None));
        assert_eq!(usd(Some(0.000876)), "$0.0009");
        assert_eq!(usd(None), "—");
    }
}
