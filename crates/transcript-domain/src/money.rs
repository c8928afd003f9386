//! Money summed exactly (#59 item 5): the one rule every cost sum of the workspace uses.

/// Money summed exactly (#59 item 5): each part and the sum in whole pico-dollars (1e-12 $,
/// finer than any per-token price: every price times a token count is a whole number of
/// them), so a sum is the same whatever order its parts are added in (`23.8900939`, never
/// `23.890093900000004` on one storage and not the other). Exact up to about $9,000 a sum.
pub fn add_usd(a: f64, b: f64) -> f64 {
    fn pico(x: f64) -> i128 {
        (x * 1e12).round() as i128
    }
    (pico(a) + pico(b)) as f64 / 1e12
}

#[cfg(test)]
mod money_tests {
    use super::add_usd;

    #[test]
    fn a_sum_of_money_is_the_same_in_any_order() {
        let parts = [0.000876, 23.0, 0.8900939, 1e-7, 0.1, 0.2, 0.3, 0.000876];
        let forward = parts.iter().fold(0.0, |s, p| add_usd(s, *p));
        let backward = parts.iter().rev().fold(0.0, |s, p| add_usd(s, *p));
        assert_eq!(forward.to_bits(), backward.to_bits());
        assert_eq!(add_usd(0.1, 0.2), 0.3);
        assert_eq!(add_usd(23.0, 0.8900939), 23.8900939);
        assert_eq!(add_usd(0.0004, 0.000476), 0.000876);
    }
}
