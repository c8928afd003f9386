//! The testkit's fault-injecting MCP server as a process (`transcript_testkit::mcp_server`), for
//! `tests/mcp_real_agents.rs`: an `mcp_servers:` stdio server of a real run. Built by `cargo test`.

fn main() -> std::io::Result<()> {
    transcript_testkit::mcp_server::serve_stdio()
}
