//! A transport for the [rmcp] MCP client, with this adapter owning the
//! server process (feature `rmcp`).
//!
//! [`GuardedProcess`] stands where rmcp's own `TokioChildProcess` would:
//! `().serve(transport)` works as before, but the server runs as a
//! streamed spillguard call. Its stderr is drained, bounded, counted and
//! marked (never an unread pipe that stalls it); closing the client runs
//! the MCP stdio shutdown on the server's whole process group (stdin
//! closed, `stdin_close_grace`, TERM, grace, KILL); and the call record is
//! written to the host's audit sink and handed out at the end.
//!
//! The change from `TokioChildProcess` is two lines:
//!
//! ```no_run
//! use rmcp::ServiceExt;
//! use spillguard_tokio::rmcp::GuardedProcess;
//! use spillguard_tokio::{Host, HostOptions};
//! use spillguard_tokio::proto::Config;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! // let transport = TokioChildProcess::new(Command::new("uvx").arg("mcp-server-time"))?;
//! let host = Host::new(Config::default(), HostOptions::default())?;
//! let mut transport = GuardedProcess::new(host.command("uvx").arg("mcp-server-time")).await?;
//! let outcome = transport.outcome();
//! let client = ().serve(transport).await?;
//! let tools = client.list_tools(Default::default()).await?;
//! client.cancel().await?;
//! let record = outcome.await?.record; // stderr counted, state, exit, signals
//! # let _ = (tools, record);
//! # Ok(())
//! # }
//! ```
//!
//! [rmcp]: https://docs.rs/rmcp

use std::future::Future;
use std::io;

use ::rmcp::RoleClient;
use ::rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use ::rmcp::transport::Transport;
use ::rmcp::transport::async_rw::AsyncRwTransport;
use spillguard_core::Outcome;
use tokio::sync::oneshot;

use crate::{CallBuilder, CallHandle, HelperStdin, HelperStdout};

/// An MCP server run as a streamed spillguard call, as an rmcp client's
/// transport. See the [module docs](self).
pub struct GuardedProcess {
    call_id: String,
    call: Option<CallHandle>,
    transport: AsyncRwTransport<RoleClient, HelperStdout, HelperStdin>,
    outcome: Option<oneshot::Sender<Outcome>>,
    waiting: Option<oneshot::Receiver<Outcome>>,
}

impl std::fmt::Debug for GuardedProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedProcess")
            .field("call_id", &self.call_id)
            .field("call", &self.call)
            .finish_non_exhaustive()
    }
}

impl GuardedProcess {
    /// Starts the call `builder` describes as a streamed call and waits
    /// until its server is spawned (after its approval, if it needs one).
    /// An error if the call ended before its server ran (the program could
    /// not be spawned, the call was denied, …); its record is then in the
    /// host's finished records.
    pub async fn new(builder: CallBuilder<'_>) -> io::Result<Self> {
        let call = builder.streamed().start();
        let (stdin, stdout) = call.streams().await?;
        let (sender, receiver) = oneshot::channel();
        Ok(Self {
            call_id: call.call_id().to_owned(),
            call: Some(call),
            transport: AsyncRwTransport::new_client(stdout, stdin),
            outcome: Some(sender),
            waiting: Some(receiver),
        })
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The call's outcome (its record, the retained stderr), once the
    /// transport is closed (or dropped) and the server's group has ended.
    /// Take it before serving; it resolves to an error only if the call's
    /// owner ended without an outcome.
    ///
    /// # Panics
    ///
    /// If taken twice.
    pub fn outcome(&mut self) -> oneshot::Receiver<Outcome> {
        #[allow(clippy::expect_used)]
        self.waiting.take().expect("the outcome is taken once")
    }
}

impl Transport<RoleClient> for GuardedProcess {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// Closes the server's stdin (the end of the client's input) and waits
    /// for the call to end: the server's own exit within
    /// `stdin_close_grace`, or TERM, grace, KILL to its group.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        if let Some(call) = self.call.take() {
            let outcome = call.wait().await;
            if let Some(sender) = self.outcome.take() {
                let _ = sender.send(outcome);
            }
        }
        Ok(())
    }
}

impl Drop for GuardedProcess {
    /// Dropped without being closed: the client is gone (the host's
    /// disconnect policy applies to the call); its outcome is still
    /// delivered, from a task.
    fn drop(&mut self) {
        if let (Some(call), Some(sender)) = (self.call.take(), self.outcome.take())
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = sender.send(call.wait().await);
            });
        }
    }
}
