//! The `operation` step: one call of a router tool with a rendered
//! input, recorded as a `tool.call` / `tool.result` pair like an agent's.

use serde_json::Value;

use crate::compiled::TemplateJson;
use crate::service::context::{Flow, KindOut, StepCtx};
use crate::template::{Scope, StepValue, TemplateError};
use crate::tools::{SHELL_TOOL, ToolError};

/// Runs an `operation` step: `tool` with `input` rendered in `scope`.
pub(in crate::service) async fn run(sc: &StepCtx<'_>, tool: &str, input: &TemplateJson) -> KindOut {
    let input = match render_operation_input(tool, input, sc.scope) {
        Ok(i) => i,
        Err(e) => return KindOut::flow(Flow::Failed(e)),
    };
    let cs = sc.call_scope();
    match sc.run.inner.router.call_tool(&cs, tool, input, None).await {
        Ok(v) => KindOut::done(v.clone(), Some(v)),
        Err(ToolError::Cancelled) => KindOut::flow(Flow::Cancelled),
        Err(e) => {
            let out = e.output();
            KindOut {
                result: (!out.is_null()).then(|| out.clone()),
                value: StepValue {
                    output: out,
                    ..StepValue::default()
                },
                ..KindOut::flow(Flow::Failed(e.to_string()))
            }
        }
    }
}

/// Renders an operation's input; the string `command` of `run_command` is
/// shell source, which takes no value but `| raw` ones (values go through
/// its `env` input, rendered like any other string leaf).
fn render_operation_input(
    tool: &str,
    input: &TemplateJson,
    scope: &Scope,
) -> Result<Value, String> {
    let text = |e: TemplateError| e.to_string();
    let mut rendered = input.render(scope).map_err(text)?;
    if tool != SHELL_TOOL {
        return Ok(rendered);
    }
    if let Some(command) = input.field("command") {
        rendered["command"] = Value::String(command.render_shell_source(scope).map_err(text)?);
    }
    // Option injection (#39): a value read as an option fails the step before the
    // program starts, as in a command step.
    if let Some(Value::Array(items)) = rendered.get("command") {
        let argv: Vec<String> = items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect();
        crate::workflow::argv_rule::check_options(&argv, |i| input.element("command", i))
            .map_err(|e| format!("input: command: {e}"))?;
    }
    Ok(rendered)
}
