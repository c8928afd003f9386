//! Test support for the `transcript` workspace. Never a normal dependency of a library crate
//! (only `[dev-dependencies]`); `cargo xtask arch-check` enforces that.
//!
//! [`model_server`] is the scripted local model server (production code in
//! `transcript-replay`, re-exported here under its old name): tests point the real agent CLIs (Claude
//! Code, Codex, Gemini CLI) or our own HTTP agent at it, script what the "model" answers turn by
//! turn, and then assert what the agent sent and what the server billed. [`agent_cli`] finds
//! the real CLIs and prepares the configuration, environment and arguments that point each one
//! at the server. [`mcp_server`] is a tiny scripted MCP server whose tools are faults (crash,
//! hang, malformed and oversized results), for the MCP proxy's tests.

#![forbid(unsafe_code)]

pub mod agent_cli;
pub mod mcp_server;
pub use transcript_replay::server as model_server;
