//! The MCP server of `spillguard mcp`: each `tools/call` is one call of the
//! host, from the arguments' check to its record.
//!
//! A tool call goes through the call lifecycle in this order:
//!
//! 1. **The arguments are checked** against the tool's parameters
//!    ([`Tool::prepare`]). Invalid ones are refused
//!    ([`CallBuilder::refuse`](spillguard_kit::CallBuilder::refuse)): the
//!    call ends `failed_before_dispatch` with the problems as its
//!    `failure`, is recorded, and the client gets a tool result with
//!    `isError: true`, not a JSON-RPC error. An unknown tool name is a
//!    JSON-RPC error (`-32602`): there is no tool to record a call of.
//! 2. **The call starts** on the host: its attempt is in the audit log.
//! 3. **The approval card**, for a tool that requires approval, is sent as
//!    an `elicitation/create` request whose message is the card's text,
//!    built once by [`Tool::prepare`] and never changed. Its deadline is
//!    fixed by the core when the card is shown. The client's answer
//!    maps: `accept` → approved, `decline` → `denied`, `cancel` →
//!    `cancelled_before_dispatch`. Once the deadline has passed the call
//!    ends `approval_expired` and the elicitation request is cancelled
//!    (`notifications/cancelled`); a late answer changes nothing. A client
//!    that did not declare the elicitation capability cannot be asked:
//!    such a call is refused (`failed_before_dispatch`, fail closed),
//!    never approved silently. An elicitation the client answers with an
//!    error also ends the call before dispatch.
//! 4. **The helper runs**. A `notifications/cancelled` for the tool call
//!    cancels it (`cancelled_before_dispatch` while the card is shown,
//!    `cancelled_after_dispatch` once running: TERM to its group, grace,
//!    KILL), and the record is still written.
//! 5. **The result** ([`answer`](super::answer)) carries the record's
//!    fields, the helper's result and the stderr excerpt.
//!
//! When the client goes away (stdin reaches its end) every live call is
//! let go of: the host applies the disconnect policy
//! (`--on-disconnect`) and writes every record; the server exits once no
//! call is live.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientResult, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, ServerRequest,
};
use rmcp::service::{ElicitationMode, PeerRequestOptions, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use spillguard_kit::{CallBuilder, HelperCommand};
use spillguard_std::core::{DisconnectPolicy, Outcome};
use spillguard_tokio::{CallHandle, Host};
use tokio_util::sync::CancellationToken;

use super::answer;
use super::prepare::PreparedCall;
use super::tools::{Tool, ToolsFile};

/// The server: the tools, the host their calls run on, and the token
/// cancelled when the client goes away.
#[derive(Debug, Clone)]
pub struct Bridge {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tools: ToolsFile,
    list: ListToolsResult,
    host: Host,
    on_disconnect: DisconnectPolicy,
    gone: CancellationToken,
}

/// How a call waiting for its card's answer or its helper ended early.
enum Interrupted {
    /// The client went away: the handle is let go of, the host applies the
    /// disconnect policy.
    ClientGone,
}

impl Bridge {
    /// A server for `tools`, running their calls on `host`; `gone` is
    /// cancelled when the client goes away.
    pub fn new(
        tools: ToolsFile,
        host: Host,
        on_disconnect: DisconnectPolicy,
        gone: CancellationToken,
    ) -> Result<Self, String> {
        let list = serde_json::from_value(tools.list_json())
            .map_err(|e| format!("cannot list the tools: {e}"))?;
        Ok(Self {
            inner: Arc::new(Inner {
                tools,
                list,
                host,
                on_disconnect,
                gone,
            }),
        })
    }

    /// The host the calls run on.
    pub fn host(&self) -> &Host {
        &self.inner.host
    }

    /// Runs one `tools/call` of `tool` to its result.
    async fn call(
        &self,
        tool: &Tool,
        arguments: &serde_json::Map<String, serde_json::Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResult, McpError> {
        let inner = &self.inner;
        let prepared = match tool.prepare(arguments) {
            Ok(prepared) => prepared,
            Err(invalid) => {
                let refused = self.builder_for(tool).refuse(invalid.to_string()).start();
                return self.finish(refused, tool, context).await;
            }
        };
        let asks = prepared.approval.is_required();
        let can_ask = context
            .peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form);
        let builder = self.settings(prepared.builder(&inner.host));
        if asks && !can_ask {
            let refused = builder
                .refuse(
                    "approval required, but the client did not declare the elicitation \
                     capability: no approval card can be shown, so the call is refused",
                )
                .start();
            return self.finish(refused, tool, context).await;
        }
        let handle = builder.start();
        if asks && let Err(Interrupted::ClientGone) = self.ask(&handle, &prepared, context).await {
            return Err(gone_error());
        }
        self.finish(handle, tool, context).await
    }

    /// The call of `tool` with arguments that could not be used: its
    /// program, action, kind and target, for the record of its refusal.
    fn builder_for(&self, tool: &Tool) -> CallBuilder<'_, Host> {
        let command = HelperCommand::new(&tool.program);
        self.settings(
            CallBuilder::new(&self.inner.host, command)
                .kind(tool.kind)
                .action(tool.name.clone())
                .target(tool.name.clone()),
        )
    }

    /// The settings every call of this server gets on top of the host's:
    /// the disconnect policy.
    fn settings<'h>(&'h self, builder: CallBuilder<'h, Host>) -> CallBuilder<'h, Host> {
        let host = &self.inner.host;
        let policy = self.inner.on_disconnect;
        builder.edit_settings(
            |kind| host.settings_for(kind),
            |settings| settings.on_client_disconnect = policy,
        )
    }

    /// Shows the card through `elicitation/create` and hands the answer to
    /// the call; returns once the call is no longer awaiting approval.
    async fn ask(
        &self,
        handle: &CallHandle,
        prepared: &PreparedCall,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), Interrupted> {
        let gone = &self.inner.gone;
        // The card is shown once the attempt is audited; a call that ends
        // before (an audit failure, a host shutting down) has none.
        let card = tokio::select! {
            card = handle.wait_card(Duration::MAX) => card,
            () = gone.cancelled() => return Err(Interrupted::ClientGone),
        };
        let Some(card) = card else { return Ok(()) };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: prepared.card.clone(),
            requested_schema: ElicitationSchema::new(BTreeMap::new()),
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
        let sent = context
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await;
        let mut pending = match sent {
            Ok(pending) => pending,
            Err(_) => {
                // The client cannot be asked (its transport closed).
                handle.cancel();
                return Ok(());
            }
        };
        let expired = async {
            // The core ends the call `approval_expired` when the card's
            // deadline passes; the owner publishes it just after.
            tokio::time::sleep(card.expires_in).await;
            while !handle.is_finished() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        tokio::select! {
            answer = &mut pending.rx => {
                match answer {
                    Ok(Ok(ClientResult::ElicitResult(result))) => {
                        // A refused answer (the card expired or the call
                        // was cancelled meanwhile) changes nothing: the
                        // record says what happened.
                        let _ = match result.action {
                            ElicitationAction::Accept => handle.approve().await,
                            ElicitationAction::Decline => handle.deny().await,
                            // `cancel`, or an action this version does not
                            // know: nobody approved.
                            _ => {
                                handle.cancel();
                                Ok(())
                            }
                        };
                    }
                    // An error, an answer of another kind, or no answer
                    // (the transport closed): nobody approved.
                    _ => handle.cancel(),
                }
                Ok(())
            }
            () = expired => {
                let _ = pending.cancel(Some("the approval card expired".into())).await;
                Ok(())
            }
            () = context.ct.cancelled() => {
                handle.cancel();
                let _ = pending.cancel(Some("the tool call was cancelled".into())).await;
                Ok(())
            }
            () = gone.cancelled() => Err(Interrupted::ClientGone),
        }
    }

    /// Waits for the call to end (cancelling it if the client cancels the
    /// tool call) and answers with its result.
    async fn finish(
        &self,
        handle: CallHandle,
        tool: &Tool,
        context: &RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResult, McpError> {
        let canceller = handle.canceller();
        let gone = &self.inner.gone;
        let wait = handle.wait();
        tokio::pin!(wait);
        let mut cancelled = false;
        let outcome: Outcome = loop {
            tokio::select! {
                outcome = &mut wait => break outcome,
                () = context.ct.cancelled(), if !cancelled => {
                    canceller.cancel();
                    cancelled = true;
                }
                // Dropping the wait drops the handle: a client disconnect,
                // under the policy the call was started with.
                () = gone.cancelled() => return Err(gone_error()),
            }
        };
        Ok(answer::tool_result(&outcome, tool.result))
    }
}

fn gone_error() -> McpError {
    McpError::internal_error("the client went away", None)
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("spillguard", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(
            "Each tool runs a configured helper program. Results carry the call record: \
             state, exit_status, result (the helper's result), stderr_excerpt (bounded) \
             and the stderr counters."
                .into(),
        );
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(self.inner.list.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = self.inner.tools.tool(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool {:?}", request.name),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let result = self.call(tool, &arguments, &context).await?;
        Ok(result.into())
    }
}
