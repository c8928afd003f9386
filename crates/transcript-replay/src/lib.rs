//! A recorded run is a test: replay a workflow with its transcript as the model.
//!
//! # Model
//!
//! A transcript holds every turn of every agent step: text, thinking, tool calls with their
//! ids and arguments, the tool results the agent sent back, usage. [`Tape::build`] reads a
//! run (child runs through a lookup) into [`Execution`]s keyed by [`StepKey`] (the
//! `call_workflow` steps leading to the run, then path and iteration). During a replay each
//! agent execution asks [`Replayer::open`] for its own [`server::ModelServer`] on 127.0.0.1,
//! which answers request N with recorded turn N in the API the agent speaks (Anthropic
//! Messages, OpenAI Responses, Gemini, Chat Completions; streaming or not), and gets the
//! [`Wiring`] that points the agent at it with its telemetry off. Side requests (token counts,
//! model listings) get a minimal answer and are not matched. [`StepReplay::finish`] gives the
//! execution's [`Verdict`]. [`engine::ReplayEndpoints`] adapts a [`Replayer`] to the engine's
//! ports (`transcript-exec`'s `ModelEndpoints` and `RecordedCommands`).
//!
//! The same server plays a test's hand-written [`server::Script`]: the workspace's tests of
//! the real agent CLIs use it (through `transcript-testkit`).
//!
//! # Invariants
//!
//! - Strict matching ([`server::Matching::Strict`], the default): the prompt must equal the
//!   recorded one, and the request for turn N ≥ 2 must send back the recorded results of turn
//!   N − 1, matched as a set (by call id; for calls without ids by tool name and arguments,
//!   numbers as numbers; then by order), each side without its CLI's envelope
//!   (`transcript_providers::envelope`: Claude Code's `<system-reminder>` blocks, Codex's
//!   shell header) and trailing whitespace; the first mismatch is answered with HTTP 400
//!   naming the call (`Read(notes.txt)`), every later request too, and the verdict fails the
//!   step with the turn and the first difference (expected, got, unified diff). Fifo matching
//!   serves every turn in order and reports mismatches as warnings.
//! - Answers name the model the request asks for (not the recorded one), so a workflow that
//!   now asks for another model shows it in the replay's transcript. Claude Code's
//!   `<synthetic>` turns (no API request) are not served.
//! - Requests beside the conversation (a title, a quota probe, Gemini CLI's model router: a
//!   request asking for a JSON schema with no tools) get a minimal answer (the router a valid
//!   choice following the recorded model) and consume no turn.
//! - [`Replayer::with_workspace_roots`]: a recording made in another workspace replays with
//!   its root mapped (served turns recorded → now, prompts and results now → recorded), on
//!   path-prefix boundaries only.
//! - A request beyond the recording is refused and fails the step under either matching.
//! - The server binds 127.0.0.1 only; the wiring points each agent there and nowhere else.
//!
//! # Threat model
//!
//! A transcript is untrusted data: its text, arguments and ids are served back as JSON values
//! (serde_json encodes them), never spliced into code or shell; a tape never recurses once per
//! nesting level of child runs beyond [`tape::StepKey`]'s callers (a cycle or a depth past 64
//! is an error). The server answers whoever connects to its loopback port; it holds no secret
//! (the agents' keys are dummies).
//!
//! # Versioning
//!
//! The replay API is 0.x: it may change with the workspace. Wire formats follow the agents'
//! pinned versions (Claude Code, Codex CLI, Gemini CLI in `.ci/install-agent-clis`).
//!
//! ```
//! use transcript_replay::{Matching, Replayer, StepKey, StepStart, Tape};
//!
//! let replayer = Replayer::new(Tape::default(), Matching::Strict);
//! let dir = std::env::temp_dir();
//! let key = StepKey::new("ask", 0);
//! let step = replayer.open(StepStart {
//!     key: &key, provider: "claude", prompt: "hi", system_prompt: "", dir: &dir,
//! })?;
//! assert!(step.wiring().env["ANTHROPIC_BASE_URL"].starts_with("http://127.0.0.1:"));
//! // No recorded execution of `ask`: every request is refused, and the step fails.
//! let verdict = step.finish();
//! assert!(verdict.failure().unwrap().contains("no recorded execution"));
//! # Ok::<(), transcript_replay::ReplayError>(())
//! ```

#![forbid(unsafe_code)]

pub mod engine;
pub mod fork;
mod recording;
mod replayer;
mod roots;
pub mod server;
pub mod tape;
mod wiring;
mod workflow_choice;

pub use recording::{MASKED, Recording, RecordingError};
pub use replayer::{ReplayError, Replayer, StepReplay, StepStart, Verdict};
pub use roots::WorkspaceRoots;
pub use server::{Matching, Mismatch};
pub use tape::{CommandOutcome, Execution, RecordedTurn, StepKey, Tape, TapeError};
pub use wiring::{CODEX_KEY_ENV, REPLAY_API_KEY, Wiring, wiring};
pub use workflow_choice::{ChosenWorkflow, WorkflowChoiceError, choose_workflow};
