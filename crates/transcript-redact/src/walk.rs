//! The walk over a record: every string of every payload, block and decoded
//! envelope, reached by destructuring each type whole (no `..`), so a field
//! added to a domain type does not compile here until it is walked. Strings
//! of a closed vocabulary (roles, fidelities, block and event types of the
//! writer side) are enums, not strings: they carry no text.

use transcript_domain::{
    BlockBody, ContentBlock, DecodedBlock, DecodedEvent, DecodedMessage, DecodedPayload, EventKind,
    EventMask, MessagePayload, Payload, RawJson, StepPayload, ToolPayload, UnknownBlock, Usage,
    WorkflowSource,
};

use crate::redactor::{Privacy, Redactor};

impl Redactor {
    fn structure(&self) -> bool {
        self.privacy() == Privacy::StructureOnly
    }

    fn mask_raw_in_place(&self, raw: &mut RawJson) {
        *raw = self.mask_raw(raw);
    }

    fn mask_opt(&self, text: &mut Option<String>) {
        if let Some(t) = text {
            self.mask_string(t);
        }
    }

    fn mask_error(&self, error: &mut Option<String>) {
        if let Some(e) = error {
            if self.structure() {
                *e = "[redacted]".to_owned();
            } else {
                self.mask_string(e);
            }
        }
    }

    fn mask_step(&self, step: &mut StepPayload) {
        let StepPayload {
            name,
            kind,
            error,
            result,
            workflow,
            inputs,
            replay_of,
            forked_at,
            workspace,
            sandbox: _,
            network: _,
            network_refused,
        } = step;
        // A refused host name is data's choice: it may carry a secret (`SECRET.evil.test`).
        if let Some(refused) = network_refused {
            for dest in &mut refused.first {
                self.mask_string(dest);
            }
        }
        self.mask_string(name);
        self.mask_string(kind);
        self.mask_error(error);
        if self.structure() {
            *result = None;
            *inputs = None;
        } else {
            if let Some(r) = result {
                self.mask_raw_in_place(r);
            }
            if let Some(i) = inputs {
                self.mask_raw_in_place(i);
            }
        }
        if let Some(WorkflowSource {
            path,
            sha256,
            text,
            text_omitted_bytes: _,
        }) = workflow
        {
            self.mask_string(path);
            self.mask_string(sha256);
            // The workflow's text can hold what a rule masks (a literal token in an `env:`);
            // structure-only keeps no content.
            if self.structure() {
                *text = None;
            } else {
                self.mask_opt(text);
            }
        }
        self.mask_opt(replay_of);
        // A step path, as `path` is: structure, masked like any text.
        self.mask_opt(forked_at);
        if self.structure() {
            *workspace = None;
        } else {
            self.mask_opt(workspace);
        }
    }

    fn mask_tool(&self, tool: &mut ToolPayload) {
        let ToolPayload {
            name,
            call_id,
            input,
            output,
            error,
            fidelity: _,
        } = tool;
        self.mask_string(name);
        self.mask_string(call_id);
        self.mask_raw_in_place(input);
        self.mask_raw_in_place(output);
        self.mask_error(error);
    }

    /// The text of a block whose body is one content string (text,
    /// thinking, stream, command); the other blocks are masked here and
    /// give `None`.
    fn block_text<'b>(&self, block: &'b mut ContentBlock) -> Option<&'b mut String> {
        let ContentBlock { fidelity: _, body } = block;
        match body {
            BlockBody::Text { text } | BlockBody::Stream { text } => Some(text),
            BlockBody::Thinking { thinking } => Some(thinking),
            BlockBody::Command { command } => Some(command),
            BlockBody::ToolUse {
                tool_name,
                tool_id,
                tool_input,
            } => {
                self.mask_string(tool_name);
                self.mask_string(tool_id);
                self.mask_raw_in_place(tool_input);
                None
            }
            BlockBody::ToolResult {
                tool_id,
                tool_content,
            } => {
                self.mask_string(tool_id);
                self.mask_raw_in_place(tool_content);
                None
            }
        }
    }

    /// Masks a run of adjacent content strings of one message as one text
    /// (a secret split between two blocks), or drops them.
    fn mask_run(&self, run: &mut Vec<&mut String>) {
        if self.structure() {
            run.iter_mut().for_each(|t| t.clear());
        } else {
            self.mask_parts(run);
        }
        run.clear();
    }

    fn mask_blocks<'b>(&self, blocks: impl Iterator<Item = Option<&'b mut ContentBlock>>) {
        let mut run = Vec::new();
        for block in blocks {
            match block.and_then(|b| self.block_text(b)) {
                Some(text) => run.push(text),
                None => self.mask_run(&mut run),
            }
        }
        self.mask_run(&mut run);
    }

    fn mask_message(&self, message: &mut MessagePayload) {
        let MessagePayload {
            role: _,
            blocks,
            provider,
            model,
            usage,
            request_id,
        } = message;
        self.mask_blocks(blocks.iter_mut().map(Some));
        self.mask_opt(provider);
        self.mask_opt(model);
        self.mask_opt(request_id);
        numbers_only(usage.as_ref());
    }

    fn mask_decoded_message(&self, message: &mut DecodedMessage) {
        let DecodedMessage {
            role,
            blocks,
            provider,
            model,
            usage,
            request_id,
        } = message;
        self.mask_string(role);
        self.mask_decoded_blocks(blocks);
        self.mask_opt(provider);
        self.mask_opt(model);
        self.mask_opt(request_id);
        numbers_only(usage.as_ref());
    }

    fn mask_decoded_blocks(&self, blocks: &mut [DecodedBlock]) {
        self.mask_blocks(blocks.iter_mut().map(|block| match block {
            DecodedBlock::Known(b) => Some(b),
            DecodedBlock::Unknown(UnknownBlock { block_type, raw }) => {
                self.mask_string(block_type);
                self.mask_raw_in_place(raw);
                None
            }
        }));
    }

    /// Masks a recorded (decoded) event in place: every string of its
    /// payload as for drafts, and of its envelope (the step path, an unknown
    /// event type), unknown blocks and raw payloads included.
    pub fn mask_decoded(&self, event: &mut DecodedEvent) {
        let DecodedEvent {
            seq: _,
            run_id: _,
            parent_run_id: _,
            child_run_id: _,
            kind,
            path,
            iteration: _,
            timestamp: _,
            payload,
        } = event;
        if let EventKind::Unknown(kind) = kind {
            self.mask_string(kind);
        }
        self.mask_string(path);
        match payload {
            DecodedPayload::Null => {}
            DecodedPayload::Step(s) => self.mask_step(s),
            DecodedPayload::Tool(t) => self.mask_tool(t),
            DecodedPayload::Message(m) => self.mask_decoded_message(m),
            DecodedPayload::Blocks(b) => self.mask_decoded_blocks(b),
            DecodedPayload::Raw(r) => self.mask_raw_in_place(r),
        }
    }
}

/// Usage holds counts and a cost, no text: destructured whole so that a
/// text field added to it fails to compile here until it is masked.
fn numbers_only(usage: Option<&Usage>) {
    if let Some(Usage {
        input_tokens: _,
        output_tokens: _,
        cache_read_tokens: _,
        cache_write_tokens: _,
        cache_write_5m_tokens: _,
        cache_write_1h_tokens: _,
        reasoning_tokens: _,
        cost_usd: _,
    }) = usage
    {}
}

impl EventMask for Redactor {
    /// Masks every string of the draft's payload (the envelope's path is
    /// the workflow's, outside this port).
    fn mask(&self, payload: &mut Payload) {
        match payload {
            Payload::RunStarted(p)
            | Payload::RunCompleted(p)
            | Payload::StepStarted(p)
            | Payload::StepCompleted(p)
            | Payload::CallWorkflowStarted(p)
            | Payload::CallWorkflowCompleted(p) => self.mask_step(p),
            Payload::MessageUser(m) | Payload::MessageAssistant(m) => self.mask_message(m),
            Payload::ToolCall(t) | Payload::ToolResult(t) => self.mask_tool(t),
            Payload::RunNull(_) => {}
        }
    }
}
