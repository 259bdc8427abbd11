//! The MCP server of `spillguard mcp`: each `tools/call` is one call of the
//! host, from the arguments' check to its record.
//!
//! A tool call goes through the call lifecycle in this order:
//!
//! 1. **The arguments are checked** against the tool's parameters
//!    ([`Tool::prepare`]). Invalid ones are refused
//!    ([`CallBuilder::refuse`](spillguard_host::CallBuilder::refuse)): the
//!    call ends `failed_before_dispatch` with the problems as its
//!    `failure`, is recorded, and the client gets a tool result with
//!    `isError: true`, not a JSON-RPC error. An unknown tool name is a
//!    JSON-RPC error (`-32602`): there is no tool to record a call of.
//! 2. **The call starts** on the host: its attempt is in the audit log.
//! 3. **The approval card**, for a tool that requires approval, is sent as
//!    an `elicitation/create` request whose message is the card's text,
//!    built once by [`Tool::prepare`] and never changed. Its deadline runs
//!    from the moment the request has been written and flushed to the
//!    client (`deadline_from_delivery`), not from when the call began to
//!    wait: a card behind many others, or a client slow to read, loses
//!    none of the approver's time. The client's answer
//!    maps: `accept` with the content the card asked for (an object of its
//!    `requestedSchema`, which declares no field: `{}`) → approved;
//!    `decline` → `denied`; `cancel` → `cancelled_before_dispatch`.
//!    Anything else is no approval: an `accept` without that content
//!    (none, a number, an object with fields the card did not ask for), an
//!    answer that is no elicitation result, an error answer → `denied`,
//!    the reason in the record's `failure` (`accept without the
//!    requested content`; a plain decline says `the approver declined`).
//!    Only a response whose id is the card request's, in type and value,
//!    is an answer at all (`wire.rs`). Once the deadline has passed the call
//!    ends `approval_expired` and the elicitation request is cancelled
//!    (`notifications/cancelled`); a late answer changes nothing. A client
//!    that did not declare the elicitation capability cannot be asked:
//!    such a call is refused (`failed_before_dispatch`, fail closed),
//!    never approved silently.
//!
//!    On protocol `2026-07-28` and later a server may not send requests of
//!    its own: the same card goes back as the `tools/call` result
//!    `input_required`, with the elicitation under `inputRequests.approval`
//!    and an unguessable `requestState` naming the waiting call. The
//!    client's retry (same tool, same arguments, the answer under
//!    `inputResponses.approval`) resumes that call; the card's deadline
//!    runs meanwhile, and a retry after it has passed gets the
//!    `approval_expired` result. A retry whose tool or arguments differ is
//!    a JSON-RPC error and cancels the waiting call; a `requestState` this
//!    server did not issue (or already resumed) is a JSON-RPC error.
//! 4. **The call waits for a running slot** (`queued`). At most
//!    `max_running` tool calls run at once (`[bridge] max_running`,
//!    `--max-running`, default twice the CPUs); an authorized call (approved,
//!    or needing no approval) beyond that waits, first come first served,
//!    and is admitted when a running call ends. Cards are never behind the
//!    queue: they are asked as calls arrive, so a burst of approved helpers
//!    cannot starve the client that must read the next cards. A call that
//!    waits longer than `queue_timeout_ms` ends `queue_expired`: it never
//!    ran. The record says when it was queued and admitted
//!    (`queued_offset_us`, `admitted_offset_us`).
//! 5. **The helper runs**. A `notifications/cancelled` for the tool call
//!    cancels it (`cancelled_before_dispatch` while the card is shown or
//!    the call is queued, `cancelled_after_dispatch` once running: TERM to
//!    its group, grace, KILL), and the record is still written.
//! 6. **The result** (`answer.rs`) carries the record's
//!    fields, the helper's result and the stderr excerpt.
//!
//! When the client goes away (stdin reaches its end) every live call is
//! let go of: the host applies the disconnect policy
//! (`--on-disconnect`) and writes every record; the server exits once no
//! call is live.
//!
//! Each `tools/call` runs on a task of its own: a panic there answers that
//! request with an internal error instead of leaving it open.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    Implementation, InputRequest, InputRequiredResult, InputResponses, ListToolsResult,
    PaginatedRequestParams, PrimitiveSchemaDefinition, ProtocolVersion, ResultType,
    ServerCapabilities, ServerConfig, ServerRequest,
};
use rmcp::service::{ElicitationMode, PeerRequestOptions, RequestContext, ServiceError};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use spillguard_host::{CallBuilder, HelperCommand};
use spillguard_std::proto::trace::{TraceParent, trace_state};

use crate::call::{Telemetry, TelemetryWorker};
use crate::mcp_spans::McpSpans;
use spillguard_std::proto::{Admission, ApprovalCard, DisconnectPolicy, Outcome, State};
use spillguard_tokio::{CallHandle, Host};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::admission::Limits;
use super::answer;
use super::tools::{Tool, ToolsFile};
use super::wire::Outbox;

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
    /// The running slots (`max_running` permits, handed out first come
    /// first served): a call holds one from its admission to its outcome.
    running: Arc<Semaphore>,
    /// How long an authorized call may wait for a slot.
    queue_timeout: Duration,
    gone: CancellationToken,
    /// The writer of the protocol, which says when a card is written.
    outbox: Arc<Outbox>,
    /// The calls whose card went back as `input_required`, by the
    /// `requestState` that names them.
    waiting: Mutex<HashMap<String, Waiting>>,
    /// Where spans go, when export is on (`--otel-file`, OTLP/HTTP).
    telemetry: Option<Arc<TelemetryWorker>>,
}

/// A call waiting for the retry that carries its card's answer.
#[derive(Debug)]
struct Waiting {
    tool: String,
    arguments: Map<String, Value>,
    handle: CallHandle,
}

/// The key of the approval answer in `inputRequests` and `inputResponses`.
const APPROVAL_KEY: &str = "approval";

/// How long a waiting call stays resumable after its card expired, for a
/// retry that comes late to still get the `approval_expired` result.
const KEEP_EXPIRED: Duration = Duration::from_secs(60);

/// How a call waiting for its card's answer or its helper ended early.
enum Interrupted {
    /// The client went away: the handle is let go of, the host applies the
    /// disconnect policy.
    ClientGone,
}

impl Bridge {
    /// A server for `tools`, running their calls on `host`, at most
    /// `limits.max_running` at once, and writing through `outbox`; `gone`
    /// is cancelled when the client goes away.
    pub fn new(
        tools: ToolsFile,
        host: Host,
        on_disconnect: DisconnectPolicy,
        limits: Limits,
        gone: CancellationToken,
        outbox: Arc<Outbox>,
        telemetry: Telemetry,
    ) -> Result<Self, String> {
        let mut list: ListToolsResult = serde_json::from_value(tools.list_json())
            .map_err(|e| format!("cannot list the tools: {e}"))?;
        // Required from 2026-07-28 on; rmcp clears it for older peers.
        list.result_type = Some(ResultType::COMPLETE);
        let telemetry = telemetry
            .is_on()
            .then(|| TelemetryWorker::start(telemetry))
            .flatten()
            .map(Arc::new);
        // Every request of the client is a span, as under `stdio --mcp`.
        if let Some(worker) = &telemetry {
            outbox.trace_requests(McpSpans::new(None, host.session_id()), worker.clone());
        }
        Ok(Self {
            inner: Arc::new(Inner {
                tools,
                list,
                host,
                on_disconnect,
                running: Arc::new(Semaphore::new(limits.max_running)),
                queue_timeout: limits.queue_timeout,
                gone,
                outbox,
                waiting: Mutex::new(HashMap::new()),
                telemetry,
            }),
        })
    }

    /// Sends what is still queued for the collector (waiting at most its
    /// timeout) and says what was not sent; export ends here.
    pub async fn finish_telemetry(&self) {
        let Some(worker) = &self.inner.telemetry else {
            return;
        };
        self.inner.outbox.close_open_spans();
        let thread = worker.close();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Exports a finished call (its span, its approval wait, its excerpt),
    /// when export is on.
    fn export_call(&self, outcome: &Outcome) {
        if self.inner.telemetry.is_none() {
            return;
        }
        let (record, excerpt) = (outcome.record.clone(), outcome.agent_excerpt());
        self.with_telemetry(move |telemetry| telemetry.export(&record, &excerpt));
    }

    /// Hands `f` to the telemetry's own thread, when export is on: a file
    /// write that blocks (a slow disk, a FIFO) is never in a call's way or
    /// an answer's, and exports keep their order.
    fn with_telemetry(&self, f: impl FnOnce(&mut Telemetry) + Send + 'static) {
        if let Some(worker) = &self.inner.telemetry {
            worker.send(Box::new(f));
        }
    }

    /// Lets go of every call waiting for a retry (the client went away):
    /// each is a client disconnect, cancelled before dispatch.
    pub fn forget_waiting(&self) {
        self.lock_waiting().clear();
    }

    fn lock_waiting(&self) -> MutexGuard<'_, HashMap<String, Waiting>> {
        self.inner
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The host the calls run on.
    pub fn host(&self) -> &Host {
        &self.inner.host
    }

    /// Runs one `tools/call` of `tool` to its result; its span is a child
    /// of `parent`, if given.
    async fn call(
        &self,
        tool: &Tool,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
        parent: Option<(TraceParent, Option<String>)>,
    ) -> Result<CallToolResponse, McpError> {
        let inner = &self.inner;
        let prepared = match tool.prepare(arguments) {
            Ok(prepared) => prepared,
            Err(invalid) => {
                let refused = joined(self.builder_for(tool), parent.as_ref())
                    .refuse(invalid.to_string())
                    .launch();
                return self
                    .finish(refused, tool, arguments, context)
                    .await
                    .map(Into::into);
            }
        };
        let asks = prepared.approval.is_required();
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        let can_ask = if modern {
            context
                .client_capabilities()
                .is_some_and(|capabilities| asks_forms(&capabilities))
        } else {
            context
                .peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        };
        let builder = joined(
            self.settings(prepared.builder(&inner.host)),
            parent.as_ref(),
        );
        if asks && !can_ask {
            let refused = builder
                .refuse(
                    "approval required, but the client did not declare the elicitation \
                     capability: no approval card can be shown, so the call is refused",
                )
                .launch();
            return self
                .finish(refused, tool, arguments, context)
                .await
                .map(Into::into);
        }
        let handle = builder.launch();
        if asks && modern {
            return self.input_required(handle, tool, arguments, context).await;
        }
        if asks && let Err(Interrupted::ClientGone) = self.ask(&handle, context).await {
            return Err(gone_error());
        }
        self.finish(handle, tool, arguments, context)
            .await
            .map(Into::into)
    }

    /// The card as the result `input_required` (protocol 2026-07-28 and
    /// later); the call waits for the retry under a fresh `requestState`.
    async fn input_required(
        &self,
        handle: CallHandle,
        tool: &Tool,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(card) = self.shown(&handle).await? else {
            return self
                .finish(handle, tool, arguments, context)
                .await
                .map(Into::into);
        };
        let state = format!(
            "{}{}",
            spillguard_host::fresh_id("rs"),
            spillguard_host::fresh_id("")
        );
        self.lock_waiting().insert(
            state.clone(),
            Waiting {
                tool: tool.name.clone(),
                arguments: arguments.clone(),
                handle,
            },
        );
        // A retry that never comes: once the card has expired (its record
        // is written) and a late retry had time to read it, let go.
        let (bridge, key) = (self.clone(), state.clone());
        tokio::spawn(async move {
            tokio::time::sleep(card.expires_in.saturating_add(KEEP_EXPIRED)).await;
            bridge.lock_waiting().remove(&key);
        });
        // The card is delivered once this result is written and flushed:
        // its deadline runs from then.
        let written = self.inner.outbox.response_written(&context.id);
        let (bridge, key) = (self.clone(), state.clone());
        tokio::spawn(async move {
            if written.await.is_ok()
                && let Some(waiting) = bridge.lock_waiting().get(&key)
            {
                waiting.handle.card_delivered();
            }
        });
        let mut requests = BTreeMap::new();
        requests.insert(
            APPROVAL_KEY.to_owned(),
            InputRequest::Elicitation(ElicitRequest::new(elicitation(&card))),
        );
        Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
    }

    /// The retry of a call whose card went back as `input_required`.
    async fn resume(
        &self,
        tool: &Tool,
        arguments: &Map<String, Value>,
        state: &str,
        responses: Option<&InputResponses>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(waiting) = self.lock_waiting().remove(state) else {
            return Err(McpError::invalid_params(
                "requestState names no call waiting for its approval here \
                 (never issued, already resumed, or let go long after its card expired)",
                None,
            ));
        };
        if waiting.tool != tool.name || &waiting.arguments != arguments {
            // The answer was given for another call: the waiting one is
            // not approved by it.
            waiting.handle.cancel();
            return Err(McpError::invalid_params(
                "the retry's tool or arguments differ from the call its requestState names; \
                 that call is cancelled",
                None,
            ));
        }
        let verdict = match responses.and_then(|responses| responses.get(APPROVAL_KEY)) {
            None => Verdict::Decline("the retry carries no answer to the card".into()),
            Some(value) => match serde_json::from_value::<ElicitResult>(value.clone()) {
                Ok(answer) => judge(&answer, &elicitation_schema()),
                Err(_) => Verdict::Decline(NOT_AN_ELICIT_RESULT.into()),
            },
        };
        answer_card(&waiting.handle, verdict).await;
        self.finish(waiting.handle, tool, arguments, context)
            .await
            .map(Into::into)
    }

    /// The card, once shown; `None` if the call ended without one.
    async fn shown(&self, handle: &CallHandle) -> Result<Option<ApprovalCard>, McpError> {
        // The card is shown once the attempt is audited; a call that ends
        // before (an audit failure, a host shutting down) has none.
        tokio::select! {
            card = handle.wait_card(Duration::MAX) => Ok(card),
            () = self.inner.gone.cancelled() => Err(gone_error()),
        }
    }

    /// The call of `tool` with arguments that could not be used: its
    /// program, action, kind and target, for the record of its refusal.
    fn builder_for(&self, tool: &Tool) -> CallBuilder<'_, Host> {
        let command = HelperCommand::new(&tool.program);
        self.settings(
            CallBuilder::on(&self.inner.host, command)
                .kind(tool.kind)
                .action(tool.name.clone())
                .target(tool.name.clone()),
        )
    }

    /// The settings every call of this server gets on top of the host's:
    /// the disconnect policy, an approval deadline that runs from the
    /// card's delivery (the bridge reports each card written and flushed),
    /// and admission: once authorized, a call waits in `queued` until the
    /// bridge admits it ([`Bridge::admit`]).
    fn settings<'h>(&'h self, builder: CallBuilder<'h, Host>) -> CallBuilder<'h, Host> {
        let policy = self.inner.on_disconnect;
        let timeout = self.inner.queue_timeout;
        builder.edit_settings(move |settings| {
            settings.on_client_disconnect = policy;
            settings.deadline_from_delivery = true;
            settings.admission = Admission::Queued { timeout };
        })
    }

    /// Waits for a running slot, first come first served, and admits the
    /// call with it; the slot is held until the permit is dropped (once the
    /// call's outcome is in). `None` when the call ended first (refused,
    /// denied, expired in the queue, cancelled): an ended call needs no
    /// slot. A cancel of the tool call meanwhile cancels the call.
    async fn admit(
        &self,
        handle: &CallHandle,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<OwnedSemaphorePermit>, Interrupted> {
        let slot = self.inner.running.clone().acquire_owned();
        let ended = handle.wait_finished();
        tokio::pin!(slot, ended);
        tokio::select! {
            biased;
            () = &mut ended => Ok(None),
            () = self.inner.gone.cancelled() => Err(Interrupted::ClientGone),
            () = context.ct.cancelled() => {
                handle.cancel();
                Ok(None)
            }
            permit = &mut slot => {
                // The semaphore is never closed.
                let Ok(permit) = permit else { return Ok(None) };
                handle.admit();
                Ok(Some(permit))
            }
        }
    }

    /// Shows the card through `elicitation/create` and hands the answer to
    /// the call; returns once the call is no longer awaiting approval.
    async fn ask(
        &self,
        handle: &CallHandle,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), Interrupted> {
        let gone = &self.inner.gone;
        let Some(card) = self
            .shown(handle)
            .await
            .map_err(|_| Interrupted::ClientGone)?
        else {
            return Ok(());
        };
        let request = ServerRequest::ElicitRequest(ElicitRequest::new(elicitation(&card)));
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
        // The call ends while its card is out when the core's deadline
        // passes (`approval_expired`) or the host shuts down: the
        // elicitation is then withdrawn. The deadline runs from the
        // request's write.
        let ended = handle.wait_finished();
        tokio::pin!(ended);
        let outbox = self.inner.outbox.clone();
        let id = pending.id.clone();
        let written = outbox.request_written(&id);
        tokio::pin!(written);
        let mut delivered = false;
        loop {
            tokio::select! {
                // The write is seen before the answer it made possible.
                biased;
                was_written = &mut written, if !delivered => {
                    delivered = true;
                    if was_written {
                        handle.card_delivered();
                    }
                    continue;
                }
                answer = &mut pending.rx => {
                    if !delivered {
                        // Answered before its write was seen: it was delivered.
                        handle.card_delivered();
                    }
                    let verdict = match answer {
                        Ok(Ok(ClientResult::ElicitResult(result))) => {
                            judge(&result, &elicitation_schema())
                        }
                        Ok(Ok(_)) => Verdict::Decline(NOT_AN_ELICIT_RESULT.into()),
                        Ok(Err(ServiceError::McpError(error))) => Verdict::Decline(format!(
                            "the client answered the card with error {}",
                            error.code.0
                        )),
                        // No answer (the transport closed, or the request
                        // was withdrawn).
                        _ if gone.is_cancelled() => {
                            // The client went away: a disconnect, not a cancel.
                            return Err(Interrupted::ClientGone);
                        }
                        _ => Verdict::Cancel,
                    };
                    answer_card(handle, verdict).await;
                    return Ok(());
                }
                // Before the request's own token: the end of the session
                // cancels that too, and it is a disconnect, not a cancel.
                () = gone.cancelled() => return Err(Interrupted::ClientGone),
                () = &mut ended => {
                    let reason = if handle.state() == State::ApprovalExpired {
                        "the approval card expired"
                    } else {
                        "the call ended before its card was answered"
                    };
                    let _ = pending.cancel(Some(reason.into())).await;
                    return Ok(());
                }
                () = context.ct.cancelled() => {
                    handle.cancel();
                    let _ = pending.cancel(Some("the tool call was cancelled".into())).await;
                    return Ok(());
                }
            }
        }
    }

    /// Waits for the call to end (cancelling it if the client cancels the
    /// tool call) and answers with its result, the values of the tool's
    /// secret parameters in `arguments` replaced.
    async fn finish(
        &self,
        handle: CallHandle,
        tool: &Tool,
        arguments: &Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        // Held until the outcome is in: the helper has ended.
        let _slot = match self.admit(&handle, context).await {
            Ok(slot) => slot,
            // Dropping the handle: a client disconnect, which cancels a
            // queued call (nothing ran, nobody is left to read it).
            Err(Interrupted::ClientGone) => return Err(gone_error()),
        };
        let canceller = handle.canceller();
        let gone = &self.inner.gone;
        let wait = handle.wait();
        tokio::pin!(wait);
        let mut cancelled = false;
        let outcome: Outcome = loop {
            tokio::select! {
                // The client's end cancels the request's token too, just
                // after `gone`: seen first, it is a disconnect under the
                // call's policy (`finish` lets it run), not a cancel.
                biased;
                outcome = &mut wait => break outcome,
                // Dropping the wait drops the handle: a client disconnect,
                // under the policy the call was started with.
                () = gone.cancelled() => return Err(gone_error()),
                () = context.ct.cancelled(), if !cancelled => {
                    canceller.cancel();
                    cancelled = true;
                }
            }
        };
        self.export_call(&outcome);
        let secrets = tool.secret_values(arguments);
        Ok(answer::tool_result(
            &outcome,
            &tool.name,
            tool.result,
            &secrets,
        ))
    }
}

/// The trace context a request names in `params._meta` (`traceparent`,
/// `tracestate`: the MCP convention); a malformed one is ignored, as W3C
/// Trace Context asks.
fn trace_parent(meta: &Map<String, Value>) -> Option<(TraceParent, Option<String>)> {
    let parent = meta
        .get("traceparent")
        .and_then(Value::as_str)
        .and_then(|text| TraceParent::parse(text).ok())?;
    let state = meta
        .get("tracestate")
        .and_then(Value::as_str)
        .and_then(|text| trace_state(text).ok().flatten());
    Some((parent, state))
}

/// `builder` with its span a child of `parent`, if there is one.
fn joined<'h>(
    builder: CallBuilder<'h, Host>,
    parent: Option<&(TraceParent, Option<String>)>,
) -> CallBuilder<'h, Host> {
    match parent {
        Some((parent, state)) => builder.trace_parent(*parent, state.clone()),
        None => builder,
    }
}

/// The elicitation that shows the card: its text as the core built it
/// (redacted, the audit log's own), and no field to fill (the answer is
/// the action: accept, decline or cancel).
fn elicitation(card: &ApprovalCard) -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: card.text.clone(),
        requested_schema: elicitation_schema(),
    }
}

/// The card's `requestedSchema`: an object with no field.
fn elicitation_schema() -> ElicitationSchema {
    ElicitationSchema::new(BTreeMap::new())
}

/// The reason recorded for an answer to a card that is no elicitation
/// result (an action other than accept, decline or cancel, or no action).
const NOT_AN_ELICIT_RESULT: &str =
    "the answer is not an elicitation result (action accept, decline or cancel)";

/// What an answer to a card does to its call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// `accept` with the content the card asked for: approved.
    Grant,
    /// Anything but a valid yes or a `cancel`: denied, for this reason
    /// (the record's `failure`).
    Decline(String),
    /// `cancel`, or no answer: nobody chose; cancelled before dispatch.
    Cancel,
}

/// The verdict on `answer`, an elicitation result for a card that asked
/// for `schema`. Only `accept` grants, and only with the content the
/// schema asks for: an object with every required field, each field one
/// the schema declares, of its declared type. A schema with no field asks
/// for nothing, so there `content` absent, `null` (read as absent) and
/// `{}` all grant: clients send any of them for a form with nothing to
/// fill (the MCP Python SDK's `ElicitResult(action="accept")` leaves it
/// out). `decline` is denied ("the approver declined"), `cancel`
/// cancels, and an accept without the content asked for is denied with
/// the reason.
fn judge(answer: &ElicitResult, schema: &ElicitationSchema) -> Verdict {
    match answer.action {
        ElicitationAction::Accept => match &answer.content {
            None if schema.properties.is_empty() => Verdict::Grant,
            None => Verdict::Decline("accept without the requested content".into()),
            Some(Value::Object(content)) if fits(content, schema) => Verdict::Grant,
            Some(Value::Object(_)) => Verdict::Decline(
                "accept with content that does not match the requested schema".into(),
            ),
            Some(_) => Verdict::Decline("accept with content that is not an object".into()),
        },
        ElicitationAction::Decline => Verdict::Decline("the approver declined".into()),
        ElicitationAction::Cancel => Verdict::Cancel,
        // An action this version does not know: nobody said yes.
        _ => Verdict::Decline(NOT_AN_ELICIT_RESULT.into()),
    }
}

/// Whether `content` is an object of `schema`: every required property
/// present, no property the schema does not declare, each of its type.
fn fits(content: &Map<String, Value>, schema: &ElicitationSchema) -> bool {
    let required = schema.required.iter().flatten();
    required.into_iter().all(|name| content.contains_key(name))
        && content.iter().all(|(name, value)| {
            schema
                .properties
                .get(name)
                .is_some_and(|property| of_type(value, property))
        })
}

/// Whether `value` has the JSON type `property` declares (enums and
/// formats are not needed by the card, which declares no property: a
/// string property takes any string).
fn of_type(value: &Value, property: &PrimitiveSchemaDefinition) -> bool {
    let declared = serde_json::to_value(property).ok().and_then(|schema| {
        schema
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match declared.as_deref() {
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("array") => value.is_array(),
        _ => false,
    }
}

/// Hands the verdict on the client's answer to the call (see [`judge`]).
/// A refused answer (the card expired or the call was cancelled
/// meanwhile) changes nothing: the record says what happened.
async fn answer_card(handle: &CallHandle, verdict: Verdict) {
    let _ = match verdict {
        Verdict::Grant => handle.approve().await,
        Verdict::Decline(reason) => handle.decline(reason).await,
        Verdict::Cancel => {
            handle.cancel();
            Ok(())
        }
    };
}

/// Whether a client with `capabilities` takes form elicitations (a bare
/// `elicitation: {}` means forms).
fn asks_forms(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
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
        // On a task of its own, so that a panic while handling one call is
        // that call's error answer, never a request left unanswered (the
        // panic's message goes to stderr, like every diagnostic).
        let bridge = self.clone();
        let handled = tokio::spawn(async move { bridge.handle_call(request, context).await });
        handled.await.unwrap_or_else(|_| {
            Err(McpError::internal_error(
                "the server failed while handling this tool call (see its stderr)",
                None,
            ))
        })
    }
}

impl Bridge {
    /// `tools/call`: a new call, or the retry of one whose card went back
    /// as `input_required`.
    async fn handle_call(
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
        let incoming = trace_parent(&context.meta);
        // With export on, the request is a span of its own (a child of the
        // client's, made by the wire) and the call's span is its child;
        // without, the call's span is the client's child.
        let parent = match self.inner.outbox.span_of(&context.id) {
            Some((trace_id, span_id)) => Some((
                TraceParent {
                    trace_id,
                    parent_id: span_id,
                    flags: incoming.as_ref().map_or(1, |(parent, _)| parent.flags),
                },
                incoming.as_ref().and_then(|(_, state)| state.clone()),
            )),
            None => incoming,
        };
        match &request.request_state {
            Some(state) => {
                self.resume(
                    tool,
                    &arguments,
                    state,
                    request.input_responses.as_ref(),
                    &context,
                )
                .await
            }
            None => self.call(tool, &arguments, &context, parent).await,
        }
    }
}
