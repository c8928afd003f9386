//! Turn assembly shared by every provider (decision 11).
//!
//! A turn collects the model's thinking / text / tool_use blocks in order,
//! then the tool_result blocks answering them. It is emitted when the next
//! turn starts (a different provider message id, or model output arriving
//! after results) or when the stream ends. `tool.call` is emitted as soon as
//! a tool_use is seen, `tool.result` as soon as its result is seen.
//!
//! One API request, one bill: a provider that names its requests (Claude
//! Code: `message.id` + `requestId`) sets usage with
//! [`Turns::set_request_usage`]. A ledger remembers what each request has
//! already been billed on emitted turns, so a request whose records come
//! back after another turn was emitted (a sidechain interleaved with the
//! main chain, a log read again) adds only what grew (its final
//! `output_tokens`), never its input and cache counts a second time. And a
//! message whose blocks are interleaved with the `tool_result` records of
//! its own parallel calls stays one turn: its later blocks go before the
//! results, as if the records had not been split.

use std::collections::HashMap;

use transcript_domain::{
    ContentBlock, Fidelity, MessagePayload, RawJson, Role, ToolPayload, Usage,
};

use crate::facts::Fact;
use crate::output::{Diagnostic, DiagnosticKind, Output, Position};

const FIDELITY: Fidelity = Fidelity::AgentEmitted;

#[derive(Debug, Default)]
struct Turn {
    message_id: Option<String>,
    blocks: Vec<ContentBlock>,
    has_results: bool,
    /// The provider message id was seen again after this turn's results:
    /// model output continues this turn (inserted before the results).
    continuing: bool,
    model: Option<String>,
    usage: Option<Usage>,
    /// The request identity the usage belongs to (see [`Turns::set_request_usage`]).
    request: Option<String>,
    /// The request identity written on the wire (`request_id`, decision 17).
    request_id: Option<String>,
}

impl Turn {
    /// Where the next model block goes: before the first tool_result when
    /// the message continues after its results, else at the end.
    fn model_slot(&self) -> usize {
        if self.continuing {
            self.blocks
                .iter()
                .position(|b| matches!(b.body, transcript_domain::BlockBody::ToolResult { .. }))
                .unwrap_or(self.blocks.len())
        } else {
            self.blocks.len()
        }
    }

    fn push_model(&mut self, block: ContentBlock) {
        let at = self.model_slot();
        self.blocks.insert(at, block);
    }
}

/// Assembles turns and tool events for one provider stream.
#[derive(Debug)]
pub(crate) struct Turns {
    provider: &'static str,
    current: Option<Turn>,
    /// Calls not yet answered: id → tool name.
    pending: HashMap<String, String>,
    /// Model announced by the session (init lines), used when a turn has none.
    pub(crate) default_model: Option<String>,
    /// Usage summed over the turns already emitted.
    emitted: Usage,
    /// Usage already billed per request identity on emitted turns.
    billed: HashMap<String, Usage>,
    /// Facts for [`crate::Normalizer::feed_items`], each with the index in
    /// the output vector it precedes; `None` unless items are wanted, so
    /// nothing accumulates on the plain output path.
    facts: Option<Vec<(usize, Fact)>>,
    /// The terminal record this capture's format ends with, once a record
    /// of such a format was seen.
    expect: Option<&'static str>,
    /// Whether the terminal record was seen (after the last content record).
    terminal: bool,
}

impl Turns {
    pub(crate) fn new(provider: &'static str) -> Self {
        Self {
            provider,
            current: None,
            pending: HashMap::new(),
            default_model: None,
            emitted: Usage::default(),
            billed: HashMap::new(),
            facts: None,
            expect: None,
            terminal: false,
        }
    }

    /// Starts collecting facts (items mode).
    pub(crate) fn collect_facts(&mut self) {
        self.facts.get_or_insert_with(Vec::new);
    }

    /// Whether facts are collected (items mode).
    pub(crate) fn collecting(&self) -> bool {
        self.facts.is_some()
    }

    /// Records a fact placed before the next output (items mode only).
    pub(crate) fn fact(&mut self, fact: Fact, out: &[Output]) {
        if let Some(f) = &mut self.facts {
            f.push((out.len(), fact));
        }
    }

    /// The facts recorded since the last call.
    pub(crate) fn take_facts(&mut self) -> Vec<(usize, Fact)> {
        self.facts.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// A user prompt: a [`Fact::Prompt`] in items mode, else an
    /// [`DiagnosticKind::Extra`] diagnostic (a live run's seam writes
    /// `message.user` itself).
    pub(crate) fn prompt(
        &mut self,
        text: String,
        system: Option<String>,
        pos: Position,
        record: &str,
        out: &mut Vec<Output>,
    ) {
        if self.facts.is_some() {
            self.fact(Fact::Prompt { text, system }, out);
        } else {
            out.push(Output::Diagnostic(Diagnostic {
                kind: DiagnosticKind::Extra,
                position: pos,
                record: record.to_owned(),
                detail: "user prompt (message.user)".to_owned(),
            }));
        }
    }

    /// A content record of a format that ends with `terminal` was seen:
    /// the capture is complete only if that record follows.
    pub(crate) fn expect(&mut self, terminal: &'static str) {
        self.expect = Some(terminal);
        self.terminal = false;
    }

    /// The format's terminal record was seen.
    pub(crate) fn terminal(&mut self) {
        self.terminal = true;
    }

    /// The terminal record the capture lacks, if it lacks one.
    pub(crate) fn unfinished(&self) -> Option<&'static str> {
        self.expect.filter(|_| !self.terminal)
    }

    fn turn(&mut self) -> &mut Turn {
        self.current.get_or_insert_with(Turn::default)
    }

    /// A provider message begins (or continues, when `id` equals the open
    /// turn's id: one API message split over several records).
    pub(crate) fn message(&mut self, id: Option<&str>, model: Option<&str>, out: &mut Vec<Output>) {
        if let Some(t) = &mut self.current {
            let same = match (id, &t.message_id) {
                (Some(a), Some(b)) => a == b,
                (Some(_), None) => !t.has_results,
                (None, _) => !t.has_results,
            };
            if !same {
                self.end_turn(out);
            } else if t.has_results && id.is_some() {
                // The same message after the results of its own calls.
                t.continuing = true;
            }
        }
        let t = self.turn();
        if let Some(id) = id {
            t.message_id = Some(id.to_owned());
        }
        if let Some(m) = model {
            t.model = Some(m.to_owned());
        }
    }

    fn model_output(&mut self, out: &mut Vec<Output>) -> &mut Turn {
        if self
            .current
            .as_ref()
            .is_some_and(|t| t.has_results && !t.continuing)
        {
            self.end_turn(out);
        }
        self.turn()
    }

    /// Appends a text block.
    pub(crate) fn text(&mut self, text: impl Into<String>, out: &mut Vec<Output>) {
        let t = self.model_output(out);
        t.push_model(ContentBlock::text(FIDELITY, text));
    }

    /// Appends text to the last block when it is a text block (streamed
    /// deltas), otherwise starts a text block.
    pub(crate) fn append_text(&mut self, delta: &str, out: &mut Vec<Output>) {
        let t = self.model_output(out);
        let at = t.model_slot();
        if let Some(ContentBlock {
            body: transcript_domain::BlockBody::Text { text },
            ..
        }) = at.checked_sub(1).and_then(|i| t.blocks.get_mut(i))
        {
            text.push_str(delta);
            return;
        }
        t.blocks.insert(at, ContentBlock::text(FIDELITY, delta));
    }

    /// Appends a thinking block.
    pub(crate) fn thinking(&mut self, thinking: impl Into<String>, out: &mut Vec<Output>) {
        let t = self.model_output(out);
        t.push_model(ContentBlock::thinking(FIDELITY, thinking));
    }

    /// Appends a tool_use block and emits `tool.call`.
    pub(crate) fn tool_use(&mut self, name: &str, id: &str, input: RawJson, out: &mut Vec<Output>) {
        let t = self.model_output(out);
        t.push_model(ContentBlock::tool_use(FIDELITY, name, id, input.clone()));
        self.pending.insert(id.to_owned(), name.to_owned());
        out.push(Output::ToolCall(ToolPayload::call(
            name, id, input, FIDELITY,
        )));
    }

    /// Whether a call with this id is waiting for its result.
    pub(crate) fn is_pending(&self, id: &str) -> bool {
        self.pending.contains_key(id)
    }

    /// Appends a tool_result block answering `id` and emits `tool.result`.
    /// A result without a known call is kept and flagged [`DiagnosticKind::Orphan`].
    pub(crate) fn tool_result(
        &mut self,
        id: &str,
        content: RawJson,
        error: Option<String>,
        pos: Position,
        record: &str,
        out: &mut Vec<Output>,
    ) {
        let name = self.call_name(id, pos, record, out);
        self.push_result(name, id, content, error, false, out);
    }

    /// A server-side tool's result reported inside the model's own message
    /// (Anthropic `*_tool_result` blocks, OpenAI `web_search_call`, …): same
    /// as [`Turns::tool_result`], but model output may follow it in the same
    /// turn, so it does not close the turn.
    pub(crate) fn server_tool_result(
        &mut self,
        id: &str,
        content: RawJson,
        error: Option<String>,
        pos: Position,
        record: &str,
        out: &mut Vec<Output>,
    ) {
        let name = self.call_name(id, pos, record, out);
        self.push_result(name, id, content, error, true, out);
    }

    /// The tool name of the pending call `id` answers; `unknown`, flagged
    /// [`DiagnosticKind::Orphan`], when no call is pending under it.
    fn call_name(
        &mut self,
        id: &str,
        pos: Position,
        record: &str,
        out: &mut Vec<Output>,
    ) -> String {
        match self.pending.remove(id) {
            Some(name) => name,
            None => {
                out.push(Output::Diagnostic(Diagnostic {
                    kind: DiagnosticKind::Orphan,
                    position: pos,
                    record: record.to_owned(),
                    detail: format!("tool result for unknown call id {id:?}"),
                }));
                "unknown".to_owned()
            }
        }
    }

    /// Adds the result block to the open turn and emits its payload; an `inline` (server-side)
    /// result does not close the turn.
    fn push_result(
        &mut self,
        name: String,
        id: &str,
        content: RawJson,
        error: Option<String>,
        inline: bool,
        out: &mut Vec<Output>,
    ) {
        let t = self.turn();
        t.blocks
            .push(ContentBlock::tool_result(FIDELITY, id, content.clone()));
        t.has_results |= !inline;
        out.push(Output::ToolResult(ToolPayload::result(
            name, id, content, error, FIDELITY,
        )));
    }

    /// Replaces the open turn's usage (usage is reported per provider
    /// message; a later report for the same message supersedes the earlier
    /// one, which is how duplicates are removed).
    pub(crate) fn set_usage(&mut self, usage: Usage) {
        if !usage.is_empty() {
            self.turn().usage = Some(usage);
        }
    }

    /// Usage reported per model for the whole run (Gemini `stats.models`):
    /// one model names the open turn's model and is its usage; several
    /// end the open turn and each get a usage-only turn with its name, so
    /// a receipt per model never merges two prices.
    pub(crate) fn usage_per_model(&mut self, models: Vec<(String, Usage)>, out: &mut Vec<Output>) {
        if models.len() == 1 {
            for (model, usage) in models {
                let t = self.turn();
                t.model = Some(model);
                t.usage = Some(usage);
            }
            return;
        }
        self.usage_only_turns(models, out);
    }

    /// Ends the open turn, then bills each `(model, usage)` on a usage-only turn of its own
    /// (usage no message carried: Copilot's `session.shutdown` per-model remainder).
    pub(crate) fn usage_only_turns(&mut self, models: Vec<(String, Usage)>, out: &mut Vec<Output>) {
        self.end_turn(out);
        for (model, usage) in models {
            let t = self.turn();
            t.model = Some(model);
            t.usage = Some(usage);
            self.end_turn(out);
        }
    }

    /// Adds `usage` to the open turn's usage (one more response billed on
    /// the turn).
    pub(crate) fn add_usage(&mut self, usage: &Usage) {
        self.turn()
            .usage
            .get_or_insert_with(Usage::default)
            .accumulate(usage);
    }

    /// Sets the open turn's usage as the usage of the API request
    /// `request` (its latest report: it supersedes earlier ones). When the
    /// turn is emitted it carries only what this request was not already
    /// billed on earlier turns, so a request counts once however its
    /// records are split.
    pub(crate) fn set_request_usage(&mut self, request: String, usage: Usage) {
        if !usage.is_empty() {
            let t = self.turn();
            t.usage = Some(usage);
            if t.request_id.as_deref() != Some(request.as_str()) {
                t.request_id = Some(request.clone());
            }
            t.request = Some(request);
        }
    }

    /// Names the API request the open turn belongs to (`request_id` on the wire, decision
    /// 17: an OpenAI response id, a Gemini session message id), opening a turn if none is.
    pub(crate) fn request_id(&mut self, id: &str) {
        let t = self.turn();
        if t.request_id.as_deref() != Some(id) {
            t.request_id = Some(id.to_owned());
        }
    }

    /// [`Turns::set_request_usage`] for a request named by two parts (`a` NUL `b`),
    /// allocating the name only when it is not the open turn's already (Claude Code repeats
    /// the same request on every record of a message).
    pub(crate) fn set_request_usage_parts(&mut self, a: &str, b: &str, usage: Usage) {
        if usage.is_empty() {
            return;
        }
        let t = self.turn();
        let same = t.request.as_deref().is_some_and(|r| {
            r.len() == a.len() + 1 + b.len()
                && r.starts_with(a)
                && r.ends_with(b)
                && r.as_bytes().get(a.len()) == Some(&0)
        });
        if !same {
            t.request = Some(format!("{a}\u{0}{b}"));
            // On the wire (decision 17): `<message.id>/<requestId>`, the message id alone
            // when the record has no request id.
            t.request_id = Some(if b.is_empty() {
                a.to_owned()
            } else {
                format!("{a}/{b}")
            });
        }
        t.usage = Some(usage);
    }

    /// Adds a cost to the open turn's usage; `false` when no turn is open.
    pub(crate) fn add_cost(&mut self, cost: f64) -> bool {
        match &mut self.current {
            Some(t) => {
                t.usage.get_or_insert_with(Usage::default).cost_usd = Some(cost);
                true
            }
            None => false,
        }
    }

    /// Makes the usage summed over all turns equal `total` (a run total
    /// reported at the end, e.g. Claude Code's `result.usage`): the open
    /// turn (opened if none is) gets, for each count `total` has, that count
    /// minus what the emitted turns already carry. Returns the counts for
    /// which the emitted turns already exceed `total` (they are kept; the
    /// open turn gets 0).
    pub(crate) fn settle_usage(&mut self, total: &Usage) -> Vec<&'static str> {
        let done = self.emitted.clone();
        let t = self.turn();
        // The settled usage is the run's remainder, no longer one request's
        // report: the emitted sum already holds what the ledger would take off.
        t.request = None;
        let mut usage = t.usage.take().unwrap_or_default();
        let mut over = Vec::new();
        for (name, dst, total, done) in [
            (
                "input_tokens",
                &mut usage.input_tokens,
                total.input_tokens,
                done.input_tokens,
            ),
            (
                "output_tokens",
                &mut usage.output_tokens,
                total.output_tokens,
                done.output_tokens,
            ),
            (
                "cache_read_tokens",
                &mut usage.cache_read_tokens,
                total.cache_read_tokens,
                done.cache_read_tokens,
            ),
            (
                "cache_write_tokens",
                &mut usage.cache_write_tokens,
                total.cache_write_tokens,
                done.cache_write_tokens,
            ),
            (
                "reasoning_tokens",
                &mut usage.reasoning_tokens,
                total.reasoning_tokens,
                done.reasoning_tokens,
            ),
        ] {
            if let Some(total) = total {
                let done = done.unwrap_or(0);
                if done > total {
                    over.push(name);
                }
                *dst = Some(total.saturating_sub(done));
            }
        }
        t.usage = (!usage.is_empty()).then_some(usage);
        over
    }

    /// Ends a run whose usage was settled: emits the open turn and starts
    /// the next run's usage sum from zero.
    pub(crate) fn end_run(&mut self, out: &mut Vec<Output>) {
        self.end_turn(out);
        self.emitted = Usage::default();
    }

    /// Records `usage` as billed for `request` and leaves in it only what
    /// the request had not been billed yet: per count, the part above the
    /// largest value already billed.
    fn bill(&mut self, request: String, usage: &mut Usage) {
        let Some(prev) = self.billed.get_mut(&request) else {
            self.billed.insert(request, usage.clone());
            return;
        };
        for (now, before) in [
            (&mut usage.input_tokens, &mut prev.input_tokens),
            (&mut usage.output_tokens, &mut prev.output_tokens),
            (&mut usage.cache_read_tokens, &mut prev.cache_read_tokens),
            (&mut usage.cache_write_tokens, &mut prev.cache_write_tokens),
            (&mut usage.reasoning_tokens, &mut prev.reasoning_tokens),
        ] {
            if let Some(n) = *now {
                let b = before.unwrap_or(0);
                *now = Some(n.saturating_sub(b));
                *before = Some(n.max(b));
            }
        }
    }

    /// Emits the open turn, if it has blocks or usage.
    pub(crate) fn end_turn(&mut self, out: &mut Vec<Output>) {
        if let Some(mut t) = self.current.take()
            && (!t.blocks.is_empty() || t.usage.is_some())
        {
            if let (Some(request), Some(u)) = (t.request.take(), t.usage.as_mut()) {
                self.bill(request, u);
            }
            if let Some(u) = &t.usage {
                self.emitted.accumulate(u);
            }
            out.push(Output::Turn(MessagePayload {
                role: Role::Assistant,
                blocks: t.blocks,
                provider: Some(self.provider.to_owned()),
                model: t.model.or_else(|| self.default_model.clone()),
                usage: t.usage,
                request_id: t.request_id,
            }));
        }
    }
}
