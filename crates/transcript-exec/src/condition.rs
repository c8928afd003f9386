//! `while` conditions: `A == B`, `A != B` or a truth value, with the
//! operator read from the condition's own text and every value compared as
//! data.

use crate::template::{Reference, Scope, Segment, Template, TemplateError};

/// A comparison operator of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Ne,
}

/// A `while` condition: `A == B`, `A != B` (sides rendered separately and
/// trimmed) or a truth value (false for "", "false", "0", "no", "null",
/// case-insensitive). The operator is found in the condition's own literal
/// text, never in rendered values: data containing `==` or `!=` is only
/// ever compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    left: Template,
    compare: Option<(CmpOp, Template)>,
}

impl Condition {
    /// Parses a condition (a template with at most one operator outside
    /// its `{{…}}`; later operators are literal text of the right side).
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let t = Template::parse(text)?;
        for (i, seg) in t.segments.iter().enumerate() {
            let Segment::Lit {
                text: lit,
                escaped: false,
            } = seg
            else {
                continue;
            };
            let found = [("==", CmpOp::Eq), ("!=", CmpOp::Ne)]
                .into_iter()
                .filter_map(|(sym, op)| lit.find(sym).map(|p| (p, op)))
                .min_by_key(|(p, _)| *p);
            if let Some((p, op)) = found {
                let lit_seg = |text: &str| Segment::Lit {
                    text: text.to_owned(),
                    escaped: false,
                };
                let mut left = t.segments[..i].to_vec();
                left.push(lit_seg(&lit[..p]));
                let mut right = vec![lit_seg(&lit[p + 2..])];
                right.extend_from_slice(&t.segments[i + 1..]);
                return Ok(Self {
                    left: Template { segments: left },
                    compare: Some((op, Template { segments: right })),
                });
            }
        }
        Ok(Self {
            left: t,
            compare: None,
        })
    }

    /// The references of both sides.
    pub fn references(&self) -> impl Iterator<Item = &Reference> {
        self.left
            .references()
            .chain(self.compare.iter().flat_map(|(_, r)| r.references()))
    }

    /// Evaluates the condition against `scope`; a shaped reference whose value does not
    /// have its shape is an error.
    pub fn eval(&self, scope: &Scope) -> Result<bool, crate::template::TemplateError> {
        let left = self.left.render(scope)?;
        Ok(match &self.compare {
            Some((op, right)) => {
                let same = left.trim() == right.render(scope)?.trim();
                (*op == CmpOp::Eq) == same
            }
            None => {
                let t = left.trim().to_ascii_lowercase();
                !matches!(t.as_str(), "" | "false" | "0" | "no" | "null")
            }
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::template::Reference;
    use serde_json::{Map, Value, json};

    fn eval_condition(text: &str, scope: &Scope) -> bool {
        Condition::parse(text).unwrap().eval(scope).unwrap()
    }

    fn scope_with(name: &str, value: Value) -> Scope {
        let mut inputs = Map::new();
        inputs.insert(name.into(), value);
        Scope::new(inputs)
    }

    #[test]
    fn conditions_compare_values_as_data() {
        let s = scope_with("x", json!("a != b"));
        assert!(eval_condition("{{inputs.x}} == a != b", &s));
        assert!(!eval_condition("{{inputs.x}} != a != b", &s));
        assert!(!eval_condition("{{inputs.x}} == a", &s));
        let eq = scope_with("x", json!("ready == ready"));
        assert!(eval_condition("{{inputs.x}} != ready", &eq));
        // Truthiness of a value that contains an operator is its text.
        assert!(eval_condition("{{inputs.x}}", &eq));
        // An escaped operator is text, not a comparison.
        assert!(eval_condition(r#"{{ "==" }}"#, &s));
        let c = Condition::parse("{{inputs.x}} == {{loop.index}}").unwrap();
        assert_eq!(c.references().count(), 2);
    }

    #[test]
    fn conditions() {
        let s = Scope::default();
        assert!(eval_condition("a == a", &s));
        assert!(!eval_condition("a != a", &s));
        assert!(eval_condition("yes", &s));
        for f in ["", "false", "0", "NO", "null"] {
            assert!(!eval_condition(f, &s));
        }
        assert_eq!(
            Reference::LoopItem(vec!["a".into()]).to_string(),
            "loop.item.a"
        );
    }
}
