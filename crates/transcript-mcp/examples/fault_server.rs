//! The testkit's fault-injecting MCP server as a process (`transcript_testkit::mcp_server`):
//! the proxy's tests start it as a real stdio upstream. Built by `cargo test`.

fn main() -> std::io::Result<()> {
    transcript_testkit::mcp_server::serve_stdio()
}
