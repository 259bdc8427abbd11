//! `spillguard mcp --tools FILE`: the process around the server.
//!
//! * **stdout is protocol only.** Before anything else, the process keeps
//!   a duplicate of its stdout for the transport and points descriptor 1
//!   at stderr: whatever else might write to stdout (a panic message, a
//!   stray print of a library) lands on stderr, and only the transport's
//!   JSON-RPC messages reach the client. Helpers never share it either:
//!   each has its own pipes, drained by the host.
//! * **The end of stdin is the client going away.** The reader notices it
//!   before the server does and cancels the token every live tool call
//!   watches: each lets go of its call, the host applies the disconnect
//!   policy and writes the record, and the process exits once no call is
//!   live.
//! * **SIGINT, SIGTERM and SIGHUP** shut the host down (every live call
//!   cancelled, TERM, grace, KILL, its record written), every request in
//!   flight is answered (a tool call with its record), and the process
//!   exits with 128 + the signal's number, whether or not the client
//!   still holds stdin open.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use spillguard_host::HostOptions;
use spillguard_std::proto::DisconnectPolicy;
use spillguard_tokio::Host;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use super::admission::Limits;
use super::bridge::Bridge;
use super::tools::ToolsFile;
use super::wire::{Outbox, Wire};
use crate::args::{McpArgs, OnDisconnect, UsageError};
use crate::call::{Telemetry, open_audit};

/// How long a host shutting down on a signal waits for its calls' records.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// How long, after a signal stopped every call, the session may take to
/// write the answers still on their way.
const ANSWERS_WAIT: Duration = Duration::from_secs(1);

/// How long the runtime's threads get to end once the server is done: the
/// thread reading stdin may be blocked in a read that only the client's
/// end would finish, and is not waited for.
const RUNTIME_END: Duration = Duration::from_millis(100);

/// Runs the server until the client goes away (exit 0) or a signal stops
/// it; bad input is a usage error (exit 2), an audit log that opening
/// could not write exit 3 (nothing was served), a transport that fails
/// exit 1.
pub fn main(args: &McpArgs) -> ExitCode {
    match start(args) {
        Ok(ready) => ready.run(),
        Err(error) => {
            eprintln!("spillguard: {error}");
            match crate::call::audit_errors().is_empty() {
                true => ExitCode::from(2),
                false => ExitCode::from(3),
            }
        }
    }
}

/// Everything checked and opened, before the first byte is served.
struct Ready {
    tools: ToolsFile,
    limits: Limits,
    options: HostOptions,
    on_disconnect: DisconnectPolicy,
    protocol: File,
    telemetry: Telemetry,
}

fn start(args: &McpArgs) -> Result<Ready, UsageError> {
    args.check()?;
    let tools = load(&args.tools)?;
    let limits = tools.bridge.limits(args.max_running, args.queue_timeout_ms);
    let telemetry = Telemetry::open(
        args.otel_file.as_deref(),
        tools.config.redact_extra_patterns.clone(),
    )?;
    let audit = open_audit(&args.audit, telemetry.audit_export())?;
    let options = HostOptions {
        audit,
        session_id: Some(spillguard_host::fresh_id("mcp")),
        ..HostOptions::default()
    };
    let protocol = protocol_only_stdout()
        .map_err(|e| UsageError(format!("cannot set up stdout for the protocol: {e}")))?;
    let on_disconnect = match args.on_disconnect {
        OnDisconnect::Finish => DisconnectPolicy::Finish,
        OnDisconnect::Cancel => DisconnectPolicy::Cancel,
    };
    Ok(Ready {
        tools,
        limits,
        options,
        on_disconnect,
        protocol,
        telemetry,
    })
}

/// The tools file at `path`, loaded and checked.
pub fn load(path: &Path) -> Result<ToolsFile, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read tools file {}: {e}", path.display())))?;
    ToolsFile::from_toml_str(&text).map_err(|e| {
        // One line per error; `spillguard: ` begins each, as it begins the
        // first.
        let lines: Vec<String> = e
            .all()
            .map(|e| format!("invalid tools file {}: {e}", path.display()))
            .collect();
        UsageError(lines.join("\nspillguard: "))
    })
}

/// A duplicate of stdout for the transport; descriptor 1 then points at
/// stderr, so that nothing else reaches the client.
pub(super) fn protocol_only_stdout() -> io::Result<File> {
    io::stdout().lock().flush()?;
    let protocol: OwnedFd = rustix::io::fcntl_dupfd_cloexec(io::stdout().as_fd(), 3)?;
    rustix::stdio::dup2_stdout(io::stderr().as_fd())?;
    Ok(File::from(protocol))
}

impl Ready {
    fn run(self) -> ExitCode {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("spillguard-mcp")
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("spillguard: cannot start the runtime: {error}");
                return ExitCode::from(1);
            }
        };
        let status = runtime.block_on(self.serve());
        runtime.shutdown_timeout(RUNTIME_END);
        status
    }

    async fn serve(self) -> ExitCode {
        let Ready {
            tools,
            limits,
            options,
            on_disconnect,
            protocol,
            telemetry,
        } = self;
        let host = match Host::new(tools.config.clone(), options) {
            Ok(host) => host,
            Err(error) => {
                eprintln!("spillguard: invalid configuration: {error}");
                return ExitCode::from(2);
            }
        };
        let gone = CancellationToken::new();
        let outbox = Outbox::new(tokio::fs::File::from_std(protocol));
        let bridge = match Bridge::new(
            tools,
            host,
            on_disconnect,
            limits,
            gone.clone(),
            outbox.clone(),
            telemetry,
        ) {
            Ok(bridge) => bridge,
            Err(error) => {
                eprintln!("spillguard: {error}");
                return ExitCode::from(2);
            }
        };
        let mut signals = match Signals::new() {
            Ok(signals) => signals,
            Err(error) => {
                eprintln!("spillguard: cannot watch signals: {error}");
                return ExitCode::from(1);
            }
        };
        let stdin = WatchedStdin {
            inner: tokio::io::stdin(),
            gone: gone.clone(),
        };
        let host = bridge.host().clone();
        let waiting = bridge.clone();
        let counts = outbox.clone();
        let running = tokio::select! {
            running = bridge.serve(Wire::new(stdin, outbox)) => running,
            number = signals.next() => {
                // The client has not initialized a session yet: there is
                // no request to answer.
                host.shutdown_and_wait(SHUTDOWN_WAIT).await;
                return ExitCode::from(128 + number);
            }
        };
        let running = match running {
            Ok(running) => running,
            // The client went away before it initialized the session: there
            // is nothing to serve and nothing went wrong here.
            Err(ServerInitializeError::ConnectionClosed(_)) => return ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("spillguard: the MCP session did not start: {error}");
                return ExitCode::from(1);
            }
        };
        let service = running.cancellation_token();
        let mut session = Box::pin(running.waiting());
        let served = tokio::select! {
            served = &mut session => served,
            number = signals.next() => {
                // Every live call is stopped (TERM, grace, KILL) and
                // recorded; each tool call then answers with its record.
                // The session is cancelled after that: rmcp writes the
                // answers still on their way, then closes stdout.
                host.shutdown_and_wait(SHUTDOWN_WAIT).await;
                waiting.forget_waiting();
                service.cancel();
                let _ = tokio::time::timeout(ANSWERS_WAIT, session).await;
                return ExitCode::from(128 + number);
            }
        };
        // Every tool call let go of its call when stdin ended; wait until
        // the host has finished them (under the disconnect policy) and
        // written their records.
        gone.cancel();
        // Calls whose card went back as `input_required` wait for a retry
        // that cannot come any more.
        waiting.forget_waiting();
        tokio::select! {
            () = host.wait_idle() => {}
            number = signals.next() => {
                host.shutdown_and_wait(SHUTDOWN_WAIT).await;
                return ExitCode::from(128 + number);
            }
        }
        // What is still queued for the collector, waited for at most its
        // timeout.
        waiting.finish_telemetry().await;
        let unmatched = counts.unmatched_responses();
        if unmatched > 0 {
            eprintln!(
                "spillguard: {unmatched} response(s) of the client answered no request in flight \
                 and were ignored"
            );
        }
        match served {
            Ok(_) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("spillguard: the MCP session failed: {error}");
                ExitCode::from(1)
            }
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP.
struct Signals {
    streams: [(u8, tokio::signal::unix::Signal); 3],
}

impl Signals {
    fn new() -> io::Result<Self> {
        Ok(Self {
            streams: [
                (2, signal(SignalKind::interrupt())?),
                (15, signal(SignalKind::terminate())?),
                (1, signal(SignalKind::hangup())?),
            ],
        })
    }

    /// The number of the next signal received.
    async fn next(&mut self) -> u8 {
        let [(int, sigint), (term, sigterm), (hup, sighup)] = &mut self.streams;
        tokio::select! {
            _ = sigint.recv() => *int,
            _ = sigterm.recv() => *term,
            _ = sighup.recv() => *hup,
        }
    }
}

/// stdin, which cancels `gone` when it ends or fails: the client went
/// away.
struct WatchedStdin {
    inner: tokio::io::Stdin,
    gone: CancellationToken,
}

impl AsyncRead for WatchedStdin {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &polled {
            Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            Poll::Ready(Err(_)) => true,
            Poll::Pending => false,
        };
        if ended {
            self.gone.cancel();
        }
        polled
    }
}
