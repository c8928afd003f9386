//! Step spans: a start opens a step under the closest open parent path, a completion closes
//! the step of the same path and iteration with its unfinished descendants only.

use super::*;

impl SpanMapper {
    pub(super) fn start_step(
        &mut self,
        state: &mut RunState,
        event: &DecodedEvent,
        kind: EventType,
    ) {
        let payload = event.step();
        let parent_span =
            parent_of(&state.steps, &event.path).map_or(state.span_id, |i| state.steps[i].span_id);
        let span_id = ids::step_span_id(state.run_id, &event.path, event.iteration, event.seq);
        let step_kind = match payload {
            Some(p) => p.kind.clone(),
            None if kind == EventType::CallWorkflowStarted => "call_workflow".to_owned(),
            None => String::new(),
        };
        if let Some(child) = event.child_run_id {
            self.link_child(child, state, span_id);
        }
        state.steps.push(OpenStep {
            path: event.path.clone(),
            iteration: event.iteration,
            span_id,
            parent_span,
            start: event.timestamp,
            start_seq: event.seq,
            name: payload.map(|p| p.name.clone()).unwrap_or_default(),
            kind: step_kind,
            child_run_id: event.child_run_id,
            agent: None,
        });
    }

    pub(super) fn link_child(&mut self, child: RunId, state: &mut RunState, step_span: SpanId) {
        if self.links.contains_key(&child) || self.runs.contains_key(&child) {
            self.problems.push(MapProblem::Cycle {
                child_run_id: child,
            });
            return;
        }
        let depth = state.link.depth + 1;
        self.children.push((child, depth));
        if depth > MAX_DEPTH {
            // map_run reports it; live mode drops the link (the child, if it
            // arrives, becomes its own root at finish).
            return;
        }
        self.links.insert(
            child,
            Link {
                trace_id: state.link.trace_id,
                parent_span: step_span,
                parent_run: Some(state.run_id),
                depth,
            },
        );
        // Live mode: the child's events may have arrived first.
        if let Some(held) = self.pending.remove(&child) {
            self.pending_order.retain(|r| *r != child);
            let link = self.links[&child];
            if let Some(first) = held.first() {
                self.open_run(first, link);
            }
            for e in &held {
                self.apply(e);
            }
            // The parent's state is checked out by `apply`, so `touch` could
            // not reach it (nor, through it, its ancestors): catch up here.
            if let Some(latest) = held.iter().map(|e| e.timestamp).max() {
                state.last = state.last.max(latest);
                if let Some(grandparent) = state.link.parent_run {
                    self.touch(grandparent, latest);
                }
            }
        }
    }

    pub(super) fn complete_step(&mut self, state: &mut RunState, event: &DecodedEvent) {
        let Some(index) = state
            .steps
            .iter()
            .rposition(|s| s.path == event.path && s.iteration == event.iteration)
        else {
            self.problems.push(MapProblem::CompletedWithoutStart {
                run_id: state.run_id,
                seq: event.seq,
                path: event.path.clone(),
                iteration: event.iteration,
            });
            return;
        };
        let mut step = state.steps.remove(index);
        // An agent step whose replies named no provider (it failed first): the one its
        // result names (an import's), so its span and its turns' spans still carry it.
        if step.kind == "agent"
            && let Some(provider) = event.step().and_then(StepPayload::result_provider)
        {
            let agent = step.agent.get_or_insert_with(Box::default);
            if agent.provider.is_none() {
                agent.provider = Some(provider);
            }
        }
        // Steps nested under it (by span parentage) that never completed end
        // with it. Steps opened after it that are not its descendants, such as
        // a sibling branch of the same parallel block still running, stay
        // open: they complete on their own later.
        let mut enclosing = vec![step.span_id];
        let mut nested = Vec::new();
        let mut j = index;
        while j < state.steps.len() {
            if enclosing.contains(&state.steps[j].parent_span) {
                let inner = state.steps.remove(j);
                enclosing.push(inner.span_id);
                nested.push(inner);
            } else {
                j += 1;
            }
        }
        for inner in nested.into_iter().rev() {
            self.close_tools_of(state, inner.span_id, event.timestamp);
            self.emit_step(state, inner, event.timestamp, Status::error(INCOMPLETE));
        }
        self.close_tools_of(state, step.span_id, event.timestamp);
        let status = match event.step().and_then(|p| p.error.as_deref()) {
            Some(error) => Status::error(error.to_owned()),
            None => Status::Unset,
        };
        self.emit_step(state, step, event.timestamp, status);
    }

    /// Closes open tools and steps (innermost first) as incomplete.
    pub(super) fn close_open(&mut self, state: &mut RunState, end: Timestamp) {
        while let Some(tool) = state.tools.pop() {
            self.emit_tool(state, tool, end, Status::error(INCOMPLETE), None);
        }
        while let Some(step) = state.steps.pop() {
            self.emit_step(state, step, end, Status::error(INCOMPLETE));
        }
    }

    pub(super) fn emit_step(
        &mut self,
        state: &RunState,
        step: OpenStep,
        end: Timestamp,
        status: Status,
    ) {
        let mut attributes = Vec::with_capacity(8);
        let is_agent = step.kind == "agent";
        if is_agent {
            attributes.push(KeyValue::new(GEN_AI_OPERATION_NAME, OP_INVOKE_AGENT));
            attributes.push(KeyValue::new(GEN_AI_AGENT_NAME, step.name.clone()));
            attributes.push(KeyValue::new(
                GEN_AI_CONVERSATION_ID,
                state.run_id.to_string(),
            ));
        }
        attributes.push(KeyValue::new(
            OPENINFERENCE_SPAN_KIND,
            if is_agent { OI_AGENT } else { OI_CHAIN },
        ));
        let name = if is_agent {
            format!("{OP_INVOKE_AGENT} {}", step.name)
        } else if step.name.is_empty() {
            step.kind.clone()
        } else {
            format!("{} {}", step.kind, step.name)
        };
        attributes.push(KeyValue::new(TRANSCRIPT_KIND, step.kind));
        attributes.push(KeyValue::new(TRANSCRIPT_NAME, step.name));
        attributes.push(KeyValue::new(TRANSCRIPT_PATH, step.path));
        attributes.push(KeyValue::new(TRANSCRIPT_ITERATION, to_i64(step.iteration)));
        attributes.push(KeyValue::new(TRANSCRIPT_SEQ, to_i64(step.start_seq)));
        if let Some(child) = step.child_run_id {
            attributes.push(KeyValue::new(TRANSCRIPT_CHILD_RUN_ID, child.to_string()));
        }
        if let Some(mut agent) = step.agent {
            self.flush_agent(state, step.span_id, &mut agent, status.clone());
            agent_attributes(*agent, &mut attributes);
        }
        self.push_span(NewSpan {
            trace_id: state.link.trace_id,
            span_id: step.span_id,
            parent_span_id: step.parent_span,
            name,
            start: step.start,
            end,
            attributes,
            status,
        });
    }
}
