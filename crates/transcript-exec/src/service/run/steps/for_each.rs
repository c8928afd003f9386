//! The `for_each` step: its steps once per item (a list, or a template
//! rendering to an array, a JSON array or lines), in order, each iteration
//! with its own copy of the scope and `loop.item` / `loop.index`.

use serde_json::{Value, json};

use crate::service::context::{Flow, KindOut, StepCtx};
use crate::service::run::run_seq;
use crate::template::{LoopFrame, render_json};
use crate::workflow::{Items, Step};

/// Runs `sc`'s step, a `for_each` over `items`.
pub(in crate::service) async fn run(sc: &StepCtx<'_>, items: &Items, steps: &[Step]) -> KindOut {
    let (ctx, path, scope, cancel) = (sc.run, sc.path, sc.scope, sc.cancel);
    let items: Vec<Value> = match items {
        Items::List(list) => list.iter().map(|v| render_json(v, scope)).collect(),
        Items::Template(t) => {
            match crate::template::Template::parse(t).map(|t| t.render_value(scope)) {
                Ok(Value::Array(a)) => a,
                Ok(Value::String(s)) => match serde_json::from_str::<Value>(&s) {
                    Ok(Value::Array(a)) => a,
                    _ => s
                        .lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| Value::String(l.to_owned()))
                        .collect(),
                },
                Ok(Value::Null) => Vec::new(),
                Ok(other) => vec![other],
                Err(e) => return KindOut::flow(Flow::Failed(e.to_string())),
            }
        }
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
