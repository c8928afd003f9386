//! The `terminal` step: ends its run, from wherever it is in it (inside a
//! loop or a `parallel` branch too), with a success or failure and a
//! rendered message. In a called workflow it ends that child run, whose
//! status the `call_workflow` step then takes.

use serde_json::{Value, json};

use crate::compiled::TemplateText;
use crate::service::context::{Flow, KindOut, StepCtx};
use crate::status::Status;
use crate::template::StepValue;

/// Runs a `terminal` step.
pub(in crate::service) fn run(sc: &StepCtx<'_>, success: bool, message: &TemplateText) -> KindOut {
    let message = match message.render(sc.scope) {
        Ok(m) => m,
        Err(e) => return KindOut::flow(Flow::Failed(format!("message: {e}"))),
    };
    let result = json!({
        "status": if success { Status::Succeeded } else { Status::Failed }.as_str(),
        "message": message,
    });
    KindOut {
        value: StepValue {
            output: Value::String(message.clone()),
            ..StepValue::default()
        },
        result: Some(result),
        ..KindOut::flow(Flow::Terminate { success, message })
    }
}
