//! The `for_each` step: its steps once per item (a list, or a template
//! rendering to an array, a JSON array or lines), in order, each iteration
//! with its own copy of the scope and `loop.item` / `loop.index`.

use serde_json::{Value, json};

use crate::service::context::{Flow, KindOut, StepCtx};
use crate::service::run::run_seq;
use crate::template::{LoopFrame, Scope, TemplateError};
use crate::workflow::{Items, Step};

/// The items in `scope`: a list's (string leaves rendered), or what the
/// template renders to: an array, a string holding a JSON array or else
/// lines (blank ones skipped), nothing for null, one item otherwise.
fn render_items(items: &Items, scope: &Scope) -> Result<Vec<Value>, TemplateError> {
    let rendered = match items {
        Items::List(list) => return list.iter().map(|v| v.render(scope)).collect(),
        Items::Template(t) => t.render_value(scope)?,
    };
    Ok(match rendered {
        Value::Array(a) => a,
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Array(a)) => a,
            _ => s
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| Value::String(l.to_owned()))
                .collect(),
        },
        Value::Null => Vec::new(),
        other => vec![other],
    })
}

/// Runs `sc`'s step, a `for_each` over `items`.
pub(in crate::service) async fn run(sc: &StepCtx<'_>, items: &Items, steps: &[Step]) -> KindOut {
    let (ctx, path, scope, cancel) = (sc.run, sc.path, sc.scope, sc.cancel);
    let items = match render_items(items, scope) {
        Ok(items) => items,
        Err(e) => return KindOut::flow(Flow::Failed(format!("items: {e}"))),
    };
    let mut children = Vec::new();
    let mut outputs = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        if cancel.is_cancelled() {
            return KindOut::with_children(Flow::Cancelled, children);
        }
        let mut s = scope.clone();
        s.set_loop(LoopFrame {
            item,
            index: i as u64,
        });
        let out = run_seq(ctx, steps, path, i as u64, &mut s, cancel).await;
        children.extend(out.nodes);
        match out.flow {
            Flow::Done => outputs.push(out.last),
            Flow::Failed(e) => {
                return KindOut::with_children(
                    Flow::Failed(format!("iteration {i}: {e}")),
                    children,
                );
            }
            flow => {
                return KindOut::with_children(flow, children);
            }
        }
    }
    // The result refers to the iterations (recorded as children)
    // instead of repeating their outputs.
    let n = outputs.len();
    KindOut {
        children,
        ..KindOut::done(Value::Array(outputs), Some(json!({ "iterations": n })))
    }
}
