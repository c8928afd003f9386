//! Tool spans (`execute_tool`): a `tool.call` opens one, its `tool.result` (same call id)
//! closes it; tools still open when their step ends close with it.

use super::*;

impl SpanMapper {
    pub(super) fn tool_call(&mut self, state: &mut RunState, event: &DecodedEvent) {
        let Some(tool) = event.tool() else { return };
        let parent_span = Self::owner(state, &event.path, event.iteration)
            .map_or(state.span_id, |i| state.steps[i].span_id);
        state.tools.push(OpenTool {
            call_id: tool.call_id.clone(),
            provider_call_id: provider_id(&tool.call_id, event),
            fidelity: tool.fidelity,
            name: tool.name.clone(),
            span_id: ids::tool_span_id(state.run_id, &tool.call_id, event.seq),
            parent_span,
            start: event.timestamp,
            start_seq: event.seq,
            arguments: self.capture_content.then(|| raw_value(&tool.input)),
        });
    }

    pub(super) fn tool_result(&mut self, state: &mut RunState, event: &DecodedEvent) {
        let Some(tool) = event.tool() else { return };
        let index = state
            .tools
            .iter()
            .rposition(|t| t.call_id == tool.call_id && t.fidelity == tool.fidelity)
            .or_else(|| state.tools.iter().rposition(|t| t.call_id == tool.call_id));
        let open = match index {
            Some(i) => state.tools.remove(i),
            None => {
                self.problems.push(MapProblem::ResultWithoutCall {
                    run_id: state.run_id,
                    seq: event.seq,
                    call_id: tool.call_id.clone(),
                });
                OpenTool {
                    call_id: tool.call_id.clone(),
                    provider_call_id: provider_id(&tool.call_id, event),
                    fidelity: tool.fidelity,
                    name: tool.name.clone(),
                    span_id: ids::tool_span_id(state.run_id, &tool.call_id, event.seq),
                    parent_span: Self::owner(state, &event.path, event.iteration)
                        .map_or(state.span_id, |i| state.steps[i].span_id),
                    start: event.timestamp,
                    start_seq: event.seq,
                    arguments: None,
                }
            }
        };
        let status = match &tool.error {
            Some(error) => Status::error(error.clone()),
            None => Status::Unset,
        };
        let result = self.capture_content.then(|| raw_value(&tool.output));
        self.emit_tool(state, open, event.timestamp, status, result);
    }

    pub(super) fn close_tools_of(
        &mut self,
        state: &mut RunState,
        step_span: SpanId,
        end: Timestamp,
    ) {
        let mut i = 0;
        while i < state.tools.len() {
            if state.tools[i].parent_span == step_span {
                let tool = state.tools.remove(i);
                self.emit_tool(state, tool, end, Status::error(INCOMPLETE), None);
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn emit_tool(
        &mut self,
        state: &RunState,
        tool: OpenTool,
        end: Timestamp,
        status: Status,
        result: Option<serde_json::Value>,
    ) {
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_EXECUTE_TOOL),
            KeyValue::new(OPENINFERENCE_SPAN_KIND, OI_TOOL),
            KeyValue::new(GEN_AI_TOOL_NAME, tool.name.clone()),
            KeyValue::new(TRANSCRIPT_FIDELITY, tool.fidelity.as_str()),
            KeyValue::new(TRANSCRIPT_SEQ, to_i64(tool.start_seq)),
        ];
        match tool.provider_call_id {
            Some(id) => {
                attributes.push(KeyValue::new(GEN_AI_TOOL_CALL_ID, id));
                attributes.push(KeyValue::new(TRANSCRIPT_CALL_ID, tool.call_id));
            }
            None => attributes.push(KeyValue::new(GEN_AI_TOOL_CALL_ID, tool.call_id)),
        }
        if let Some(arguments) = tool.arguments {
            attributes.push(KeyValue::new(
                GEN_AI_TOOL_CALL_ARGUMENTS,
                arguments.to_string(),
            ));
        }
        if let Some(result) = result {
            attributes.push(KeyValue::new(GEN_AI_TOOL_CALL_RESULT, result.to_string()));
        }
        self.push_span(NewSpan {
            trace_id: state.link.trace_id,
            span_id: tool.span_id,
            parent_span_id: tool.parent_span,
            name: format!("{OP_EXECUTE_TOOL} {}", tool.name),
            start: tool.start,
            end,
            attributes,
            status,
        });
    }
}

/// The provider's id when the recorded call id carries the executor's prefix.
fn provider_id(call_id: &str, event: &DecodedEvent) -> Option<String> {
    let id = provider_call_id(call_id, &event.path, event.iteration);
    (id.len() != call_id.len()).then(|| id.to_owned())
}
