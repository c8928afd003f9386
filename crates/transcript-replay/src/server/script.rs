//! What the scripted "model" answers: a [`Script`] of [`Turn`]s, each with its content
//! [`Block`]s, the [`Usage`] to bill and optionally a [`Fault`].

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One piece of an answer, in the order the model emits it.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Visible text.
    Text(String),
    /// Reasoning. The signature is the provider's opaque proof: Anthropic's `signature`,
    /// OpenAI's reasoning `encrypted_content`, Gemini's `thoughtSignature`.
    Thinking {
        /// The reasoning text (Anthropic `thinking`, OpenAI summary text, Gemini thought part).
        text: String,
        /// The opaque signature sent back with it.
        signature: String,
    },
    /// A tool call the agent is expected to run.
    ToolCall {
        /// The call id; `None` lets the server allocate a unique one (`toolu_…`, `call_…`).
        id: Option<String>,
        /// The tool's name as the agent offered it (e.g. `Read`, `exec_command`, `read_file`).
        name: String,
        /// The JSON arguments.
        arguments: Value,
    },
}

/// Tokens billed for one turn, provider-neutral.
///
/// Per provider the server reports them as:
/// - Anthropic: `input_tokens` = [`Usage::input_tokens`] (uncached input),
///   `cache_read_input_tokens`, `cache_creation_input_tokens`, `output_tokens`.
/// - OpenAI Responses / Chat Completions: input = uncached + cache read + cache creation
///   (OpenAI counts cached input inside the input total), `cached_tokens` = cache read,
///   output = [`Usage::output_tokens`], `reasoning_tokens` = [`Usage::reasoning_tokens`].
/// - Gemini: `promptTokenCount` = uncached + cache read + cache creation,
///   `cachedContentTokenCount` = cache read, `candidatesTokenCount` = output − reasoning,
///   `thoughtsTokenCount` = reasoning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not served from a cache.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
    /// The part of [`Usage::output_tokens`] spent on reasoning (OpenAI and Gemini report it).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Uncached input and output tokens, no cache, no reasoning.
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        }
    }

    /// Sets the cache read and cache creation input tokens.
    pub fn with_cache(mut self, read: u64, creation: u64) -> Self {
        self.cache_read_input_tokens = read;
        self.cache_creation_input_tokens = creation;
        self
    }

    /// Sets the reasoning share of the output tokens.
    pub fn with_reasoning(mut self, reasoning: u64) -> Self {
        self.reasoning_tokens = reasoning;
        self
    }

    /// All input tokens: uncached, cache read and cache creation.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(mut self, rhs: Usage) -> Usage {
        self += rhs;
        self
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Usage) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.cache_read_input_tokens += rhs.cache_read_input_tokens;
        self.cache_creation_input_tokens += rhs.cache_creation_input_tokens;
        self.reasoning_tokens += rhs.reasoning_tokens;
    }
}

/// A failure the server produces instead of (or in the middle of) an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 429 with the provider's rate-limit error body.
    RateLimited,
    /// HTTP 500 with the provider's internal-error body.
    ServerError,
    /// The provider's "overloaded": 529 `overloaded_error` for Anthropic, 503 for OpenAI and
    /// Gemini (`UNAVAILABLE`).
    Overloaded,
    /// Any other status, with a generic provider error body.
    Status(u16),
    /// A 200 streaming answer whose connection is cut after this many SSE events (the turn's
    /// usage is not billed). A non-streaming request gets a body cut after its headers.
    CutAfterEvents(usize),
}

impl Fault {
    /// The HTTP status this fault answers with for `provider`, `None` for a stream cut.
    pub fn status(&self, provider: super::Provider) -> Option<u16> {
        match self {
            Fault::RateLimited => Some(429),
            Fault::ServerError => Some(500),
            Fault::Overloaded if provider == super::Provider::Anthropic => Some(529),
            Fault::Overloaded => Some(503),
            Fault::Status(code) => Some(*code),
            Fault::CutAfterEvents(_) => None,
        }
    }
}

/// One model answer: what a single generation request gets.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Turn {
    /// The content, in order.
    pub blocks: Vec<Block>,
    /// The tokens billed when the answer is served in full.
    pub usage: Usage,
    /// A failure instead of the answer (or cutting it).
    pub fault: Option<Fault>,
    /// The model the answer names; `None` echoes the model the request named.
    pub model: Option<String>,
    /// What the request for this turn must carry (a replay's recorded tool results); `None`
    /// checks nothing. See [`Script::matching`].
    pub expect: Option<Expect>,
    /// The model version the answer names (Gemini's `modelVersion`), when it is not the
    /// model the request named (an alias answered by a dated version); `None`: the request's.
    pub answered_by: Option<String>,
}

/// The tool results a request must send back before it gets its turn: the recorded results
/// of the previous turn, matched with the request's as a set: by call id, else (an API
/// without ids, such as Gemini's) by tool name and arguments, else by order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expect {
    /// The recorded results, in the recorded order.
    pub results: Vec<ExpectedResult>,
}

/// One recorded tool result a request must send back.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ExpectedResult {
    /// The call id it answers, as served to the agent.
    pub id: String,
    /// The tool called (`""` when unknown).
    pub tool: String,
    /// The call's arguments (`null` when unknown).
    pub arguments: Value,
    /// The recorded result text.
    pub text: String,
}

impl ExpectedResult {
    /// The result `text` of the call `id` (tool and arguments unknown).
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        ExpectedResult {
            id: id.into(),
            text: text.into(),
            ..ExpectedResult::default()
        }
    }

    /// Names the call's tool and arguments.
    pub fn for_call(mut self, tool: impl Into<String>, arguments: Value) -> Self {
        self.tool = tool.into();
        self.arguments = arguments;
        self
    }
}

/// What the server does when a request does not carry what its turn expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Matching {
    /// The first mismatch is answered with HTTP 400 naming it, and so is every later
    /// generation request: the agent stops, and the mismatch fails its step.
    #[default]
    Strict,
    /// Turns are served in order whatever the requests carry; mismatches are kept as
    /// warnings.
    Fifo,
}

impl Turn {
    /// A turn answering `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Turn::default().then_text(text)
    }

    /// A turn calling one tool; the call id is allocated by the server.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Turn::default().then_tool_call(name, arguments)
    }

    /// A turn that only fails.
    pub fn fault(fault: Fault) -> Self {
        Turn {
            fault: Some(fault),
            ..Turn::default()
        }
    }

    /// Appends a text block.
    pub fn then_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Text(text.into()));
        self
    }

    /// Appends a thinking block with its signature.
    pub fn then_thinking(mut self, text: impl Into<String>, signature: impl Into<String>) -> Self {
        self.blocks.push(Block::Thinking {
            text: text.into(),
            signature: signature.into(),
        });
        self
    }

    /// Appends a tool call whose id the server allocates.
    pub fn then_tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.blocks.push(Block::ToolCall {
            id: None,
            name: name.into(),
            arguments,
        });
        self
    }

    /// Names `model` as the version that answered (Gemini's `modelVersion`) instead of the
    /// model the request named.
    pub fn answered_by(mut self, model: impl Into<String>) -> Self {
        self.answered_by = Some(model.into());
        self
    }

    /// Sets the usage billed for this turn.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets the model the answer names instead of the request's.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Sets what the request for this turn must carry.
    pub fn with_expect(mut self, expect: Expect) -> Self {
        self.expect = Some(expect);
        self
    }

    /// Sets a fault (e.g. [`Fault::CutAfterEvents`] to cut this very answer).
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Whether the answer asks for a tool (decides the stop reason).
    pub fn calls_tools(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, Block::ToolCall { .. }))
    }
}

/// The turns a server plays, one per generation request, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script {
    /// The turns, consumed in order by generation requests of any provider.
    pub turns: Vec<Turn>,
    /// What generation requests beyond the turns get: `None` answers a readable HTTP 400
    /// ("beyond the script"), `Some(fault)` repeats that fault forever (a provider that is down).
    pub after_end: Option<Fault>,
    /// What a request that does not carry its turn's [`Turn::expect`] gets.
    pub matching: Matching,
    /// When set, every generation request is refused (HTTP 400) with this message: a replay
    /// whose step failed before its first request (a changed prompt, a step never recorded).
    pub refusal: Option<String>,
    /// When set (a replay sets the step's prompt), generation requests beside the
    /// conversation that carries this prompt (a title, a classifier, a quota probe on the same
    /// endpoint) get a minimal answer and consume no turn: see the `conversation` module.
    /// `None`: every generation request consumes the next turn.
    pub conversation: Option<String>,
    /// A replay in another workspace: served turns name the replay's root, what the agent
    /// sends is mapped back to the recorded root before it is matched.
    pub roots: Option<crate::WorkspaceRoots>,
    /// The model the recording's turns name, when a CLI asks beside the conversation which
    /// model to use (Gemini CLI's router): the answer picks the choice this name contains.
    pub recorded_model: Option<String>,
}

impl Script {
    /// A script of these turns; requests beyond them get a readable error.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Script {
            turns: turns.into_iter().collect(),
            ..Script::default()
        }
    }

    /// A provider that answers every generation request with `fault`.
    pub fn always(fault: Fault) -> Self {
        Script {
            after_end: Some(fault),
            ..Script::default()
        }
    }

    /// The total usage the script bills when every turn is served (faulted turns bill nothing).
    pub fn total_usage(&self) -> Usage {
        self.turns
            .iter()
            .filter(|t| t.fault.is_none())
            .fold(Usage::default(), |acc, t| acc + t.usage)
    }
}
