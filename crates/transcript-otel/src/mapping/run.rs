//! Workflow run spans (`invoke_workflow`): a run opens when its first event arrives, child
//! runs link to their `call_workflow` step, and a run span is emitted when the run ends.

use super::*;

impl SpanMapper {
    /// The next child run discovered through `step.call_workflow.started`
    /// and its depth below the root (offline traversal).
    pub(super) fn next_child(&mut self) -> Option<(RunId, usize)> {
        let next = self.children.get(self.next_child).copied();
        if next.is_some() {
            self.next_child += 1;
        }
        next
    }

    pub(super) fn root_link(&mut self, run: RunId) -> Link {
        let trace_id = ids::trace_id(run);
        self.first_trace.get_or_insert(trace_id);
        Link {
            trace_id,
            parent_span: SpanId::INVALID,
            parent_run: None,
            depth: 0,
        }
    }

    pub(super) fn open_run(&mut self, event: &DecodedEvent, link: Link) {
        self.order.push(event.run_id);
        self.runs.insert(
            event.run_id,
            RunState {
                run_id: event.run_id,
                parent_run_id: event.parent_run_id,
                link,
                span_id: ids::run_span_id(event.run_id),
                workflow: None,
                start: event.timestamp,
                start_seq: event.seq,
                last: event.timestamp,
                done: false,
                steps: Vec::new(),
                tools: Vec::new(),
            },
        );
    }

    pub(super) fn emit_run(&mut self, state: &RunState, end: Timestamp, status: Status) {
        let recorded = state.workflow.clone().unwrap_or_default();
        let workflow = workflow_name(&recorded).to_owned();
        let run_id = state.run_id.to_string();
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_INVOKE_WORKFLOW),
            KeyValue::new(GEN_AI_WORKFLOW_NAME, workflow.clone()),
            KeyValue::new(GEN_AI_CONVERSATION_ID, run_id.clone()),
            KeyValue::new(OPENINFERENCE_SPAN_KIND, OI_CHAIN),
            KeyValue::new(TRANSCRIPT_KIND, "workflow"),
            KeyValue::new(TRANSCRIPT_NAME, recorded),
            KeyValue::new(TRANSCRIPT_RUN_ID, run_id),
            KeyValue::new(TRANSCRIPT_SEQ, to_i64(state.start_seq)),
        ];
        if let Some(parent) = state.parent_run_id {
            attributes.push(KeyValue::new(TRANSCRIPT_PARENT_RUN_ID, parent.to_string()));
        }
        let name = if workflow.is_empty() {
            OP_INVOKE_WORKFLOW.to_owned()
        } else {
            format!("{OP_INVOKE_WORKFLOW} {workflow}")
        };
        self.push_span(NewSpan {
            trace_id: state.link.trace_id,
            span_id: state.span_id,
            parent_span_id: state.link.parent_span,
            name,
            start: state.start,
            end,
            attributes,
            status,
        });
    }
}
