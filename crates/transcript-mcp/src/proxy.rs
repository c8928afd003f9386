//! The MCP server the agent CLI talks to, one per upstream server: `tools/list` filtered by
//! the allowlist, `tools/call` recorded, refused, bounded and forwarded.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use transcript_domain::RawJson;

use crate::config::{Allowlist, ProxyLimits, qualified_name};
use crate::record::Recording;
use crate::upstream::Upstream;

/// The name of the recorded diagnostic of a `tools/list` that failed or hit a bound.
pub const LIST_DIAGNOSTIC: &str = "tools/list";

/// Everything one server's handler shares with the others of the proxy.
pub(crate) struct Shared {
    pub(crate) allowlist: Allowlist,
    pub(crate) limits: ProxyLimits,
    pub(crate) recording: Recording,
    pub(crate) cancel: CancellationToken,
}

/// The handler of one upstream server's endpoint (cloned per MCP session).
#[derive(Clone)]
pub(crate) struct ServerProxy {
    pub(crate) upstream: Arc<Upstream>,
    pub(crate) shared: Arc<Shared>,
}

/// How a forwarded call ended, before it is recorded and answered.
enum Outcome {
    /// The server answered within the bounds.
    Answered {
        result: CallToolResult,
        json: RawJson,
    },
    /// The proxy answers with an error result instead.
    Failed(String),
}

impl ServerProxy {
    /// The transcript's diagnostic of a failed listing: a `router` pair named
    /// [`LIST_DIAGNOSTIC`], input `{"server": <name>}`, the reason as its error (not an
    /// `mcp__` name: no CLI reports a listing, so it pairs with nothing).
    async fn record_list_failure(&self, message: &str) {
        let recording = &self.shared.recording;
        let call_id = recording.next_call_id();
        let input = RawJson::from_value(&serde_json::json!({"server": self.upstream.name}))
            .unwrap_or_default();
        recording.call(LIST_DIAGNOSTIC, &call_id, input).await;
        recording
            .result(
                LIST_DIAGNOSTIC,
                &call_id,
                RawJson::null(),
                Some(message.to_owned()),
            )
            .await;
    }

    fn allows(&self, tool: &str) -> bool {
        self.shared.allowlist.allows(&self.upstream.name, tool)
    }

    /// Forwards an allowed call within the deadline, the run's cancellation and the size cap.
    async fn forward(&self, params: CallToolRequestParams, ct: &CancellationToken) -> Outcome {
        let limits = self.shared.limits;
        let server = &self.upstream.name;
        if self.shared.cancel.is_cancelled() {
            return Outcome::Failed("cancelled: the run stopped".into());
        }
        let answer = tokio::select! {
            answer = tokio::time::timeout(limits.call_deadline, self.upstream.call_tool(params)) => answer,
            () = self.shared.cancel.cancelled() => return Outcome::Failed("cancelled: the run stopped".into()),
            () = ct.cancelled() => return Outcome::Failed("cancelled by the agent".into()),
        };
        let result = match answer {
            Err(_) => {
                return Outcome::Failed(format!(
                    "MCP server {server:?} gave no answer within {:?}",
                    limits.call_deadline
                ));
            }
            Ok(Err(e)) => return Outcome::Failed(format!("MCP server {server:?}: {e}")),
            Ok(Ok(result)) => result,
        };
        let json = match RawJson::from_value(&result) {
            Ok(json) => json,
            Err(e) => {
                return Outcome::Failed(format!(
                    "MCP server {server:?}: result not encodable: {e}"
                ));
            }
        };
        if json.len() > limits.max_result_bytes {
            return Outcome::Failed(format!(
                "MCP server {server:?}: result of {} bytes exceeds the proxy's {}-byte cap",
                json.len(),
                limits.max_result_bytes
            ));
        }
        Outcome::Answered { result, json }
    }
}

/// The text of a result's first text block, for the record's `error` of an `isError` result.
fn first_text(result: &CallToolResult) -> Option<String> {
    result.content.iter().find_map(|c| {
        serde_json::to_value(c)
            .ok()
            .and_then(|v| v.get("text").and_then(Value::as_str).map(str::to_owned))
    })
}

impl ServerHandler for ServerProxy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listed = tokio::select! {
            listed = self.upstream.list_tools(&self.shared.limits) => listed,
            () = self.shared.cancel.cancelled() => Err("cancelled: the run stopped".to_owned()),
        };
        let tools = match listed {
            Ok(tools) => tools,
            Err(e) => {
                let message = format!("MCP server {:?}: {e}", self.upstream.name);
                self.record_list_failure(&message).await;
                return Err(ErrorData::internal_error(message, None));
            }
        };
        let allowed = tools.into_iter().filter(|t| self.allows(&t.name)).collect();
        Ok(ListToolsResult::with_all_items(allowed))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let recording = &self.shared.recording;
        let name = qualified_name(&self.upstream.name, &request.name);
        let call_id = recording.next_call_id();
        let input = match &request.arguments {
            Some(args) => RawJson::from_value(args).unwrap_or_default(),
            None => RawJson::null(),
        };
        recording.call(&name, &call_id, input).await;
        if !self.allows(&request.name) {
            let entries = self.shared.allowlist.entries();
            let message = format!(
                "tool {name} is not on the step's tools: list (allowed MCP tools: {})",
                if entries.is_empty() {
                    "none".to_owned()
                } else {
                    entries.join(", ")
                }
            );
            recording
                .result(&name, &call_id, RawJson::null(), Some(message.clone()))
                .await;
            return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
        }
        match self.forward(request, &context.ct).await {
            Outcome::Answered { result, json } => {
                let error = (result.is_error == Some(true)).then(|| {
                    first_text(&result).unwrap_or_else(|| "the tool reported an error".into())
                });
                recording.result(&name, &call_id, json, error).await;
                Ok(result.into())
            }
            Outcome::Failed(message) => {
                recording
                    .result(&name, &call_id, RawJson::null(), Some(message.clone()))
                    .await;
                Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
            }
        }
    }
}
