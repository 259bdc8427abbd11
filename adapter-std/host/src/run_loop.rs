//! The runtime-free steps of an owner's run loop, for adapter authors: the
//! events an owner receives, and how a call begins, how each event and each
//! read of a stream becomes exactly one `Call::handle` call, and how a spawn is
//! reported.
//!
//! An adapter keeps the loop itself (waiting, the timer, carrying out each
//! [`Action`](spillguard_core::Action)); these functions are what every
//! runtime does the same way between two waits.
//!
//! [`begin`] is where every call starts: a closing host cancels it; the
//! caller's own refusal ends it; otherwise its settings (built by hand,
//! perhaps) are validated as a config is, then its command, all before
//! the attempt is audited.

use std::io;
use std::time::Instant;

use spillguard_core::{Call, CallError, CancelReason, Diverted, ExitStatus};

use crate::HelperCommand;
use spillguard_core::Input;

/// One of the helper's output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipe {
    /// The helper's stdout.
    Stdout = 0,
    /// The helper's stderr.
    Stderr = 1,
}

impl Pipe {
    /// `"stdout"` or `"stderr"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Pipe::Stdout => "stdout",
            Pipe::Stderr => "stderr",
        }
    }
}

/// What an owner receives on its channel, besides what it reads from the
/// helper's streams itself; `R` carries the core's answer to an approval
/// or a denial back to the caller.
#[derive(Debug)]
pub enum Event<R> {
    /// The helper was reaped.
    Exited(ExitStatus),
    /// Waiting for the helper failed.
    ProcessLost,
    /// From the caller or the host.
    Command(Command<R>),
}

/// What one read of a helper's stream gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read<'a> {
    /// These bytes.
    Bytes(&'a [u8]),
    /// The end of the stream (end-of-file, or a read error other than
    /// `EINTR`).
    End,
}

/// What a call's handle or its host asks; `R` carries the core's answer
/// back.
#[derive(Debug)]
pub enum Command<R> {
    /// The approver said yes; the core's answer goes back through `R`.
    Approve(R),
    /// The approver said no; the core's answer goes back through `R`.
    Deny(R),
    /// The approver's answer was no approval, for the reason given
    /// ([`Input::ApprovalDeclined`]); the core's answer goes back
    /// through `R`.
    Decline(R, String),
    /// An input for the call, as the core names it: a cancel
    /// ([`Input::Cancel`]), the card delivered, an admission, the
    /// handle dropped without its outcome ([`Input::ClientDisconnected`]),
    /// the end of a streamed call's input or of its reading of stdout
    /// ([`Input::InputEnded`], [`Input::StdoutEof`]), a debug grant that
    /// changed ([`Input::DebugGranted`], [`Input::DebugRevoked`]).
    Input(Input<'static>),
    /// Bytes of a streamed MCP server's stdout that are not protocol, with
    /// the lines decided in them, for the stderr capture.
    StdoutDiverted {
        /// The bytes.
        bytes: Vec<u8>,
        /// Lines decided as not protocol in them.
        lines: u64,
    },
}

/// What an event leaves to the adapter once the core has it.
#[derive(Debug)]
#[must_use]
pub enum Leftover<R> {
    /// Nothing.
    Nothing,
    /// The core's answer to an approval or a denial, to send through `R`.
    Answer(R, Result<(), CallError>),
}

/// How an owner starts: the checks made before the first input.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// From the host's policy.
    pub needs_approval: bool,
    /// The host is shutting down: the call is cancelled before anything.
    pub host_closing: bool,
}

/// The call's first inputs, at `now`: a cancel if the host is closing, the
/// caller's own refusal if it made one (`refused`, from
/// `CallBuilder::refuse`), then the validation of the call's
/// settings ([`CallSettings::validate`]: settings
/// built by hand are checked as a config is) and of `command` (`None`: there
/// is nothing to run). Any refusal ends the call `failed_before_dispatch`
/// with the reason in `failure`, before its attempt is audited.
///
/// [`CallSettings::validate`]: spillguard_core::CallSettings::validate
pub fn begin(
    call: &mut Call,
    now: Instant,
    start: Start,
    refused: Option<String>,
    command: Option<&HelperCommand>,
) {
    if start.host_closing {
        let _ = call.handle(now, Input::Cancel(CancelReason::HostShutdown));
    }
    if let Some(reason) = refused {
        let _ = call.handle(now, Input::ValidationFailed(reason));
        return;
    }
    let settings = call.settings().validate();
    let accepted = match (settings, command.map(HelperCommand::validate)) {
        (Err(invalid), _) => call.handle(now, Input::ValidationFailed(invalid.to_string())),
        (Ok(()), Some(Ok(()))) => call.handle(
            now,
            Input::Validated {
                needs_approval: start.needs_approval,
            },
        ),
        (Ok(()), Some(Err(invalid))) => {
            call.handle(now, Input::ValidationFailed(invalid.to_string()))
        }
        (Ok(()), None) => call.handle(now, Input::ValidationFailed("no command to run".into())),
    };
    if let Err(misuse) = accepted {
        // Only a discovery call said to need approval gets here.
        let _ = call.handle(now, Input::ValidationFailed(misuse.to_string()));
    }
}

/// Exactly one `Call::handle` call for `event`, observed at `now`.
pub fn handle_event<R>(call: &mut Call, now: Instant, event: Event<R>) -> Leftover<R> {
    let reported = match event {
        Event::Exited(status) => call.handle(now, Input::Exited(status)),
        Event::ProcessLost => call.handle(now, Input::ProcessLost),
        Event::Command(Command::Approve(reply)) => {
            return Leftover::Answer(reply, call.handle(now, Input::ApprovalGranted));
        }
        Event::Command(Command::Deny(reply)) => {
            return Leftover::Answer(reply, call.handle(now, Input::ApprovalDenied));
        }
        Event::Command(Command::Decline(reply, reason)) => {
            return Leftover::Answer(reply, call.handle(now, Input::ApprovalDeclined(reason)));
        }
        Event::Command(Command::Input(input @ (Input::Admitted | Input::StdoutEof))) => {
            // An admission that finds the call no longer queued (it ended:
            // its queue timeout or a cancel came first) or never queued
            // (its settings admit it at once) changes nothing; so does the
            // caller's end of reading after the helper's stdout ended.
            let _ = call.handle(now, input);
            Ok(())
        }
        Event::Command(Command::Input(input)) => call.handle(now, input),
        Event::Command(Command::StdoutDiverted { bytes, lines }) => {
            let _ = call.handle(
                now,
                Input::StdoutDiverted(Diverted {
                    bytes: &bytes,
                    lines,
                }),
            );
            Ok(())
        }
    };
    // The helper's waiter reports its exit once, after the spawn was
    // reported; commands are valid in every state or answered with an
    // error through `R`.
    debug_assert!(reported.is_ok(), "{reported:?}");
    Leftover::Nothing
}

/// Exactly one `Call::handle` call for a read of `pipe`, observed at `now`:
/// its bytes, or its end.
pub fn handle_read(call: &mut Call, now: Instant, pipe: Pipe, read: Read<'_>) {
    let reported = match (pipe, read) {
        (Pipe::Stdout, Read::Bytes(bytes)) => {
            let _ = call.handle(now, Input::Stdout(bytes));
            Ok(())
        }
        (Pipe::Stderr, Read::Bytes(bytes)) => {
            let _ = call.handle(now, Input::Stderr(bytes));
            Ok(())
        }
        (Pipe::Stdout, Read::End) => call.handle(now, Input::StdoutEof),
        (Pipe::Stderr, Read::End) => call.handle(now, Input::StderrEof),
    };
    // Each stream ends once, after the spawn was reported.
    debug_assert!(reported.is_ok(), "{reported:?}");
}

/// Carries out [`Action::Spawn`](spillguard_core::Action::Spawn): runs
/// `spawn` on the command (taken from the owner; `None` once spawned) and
/// reports to the core, at `clock()` after the spawn, the helper's pid
/// (also its group id) and pipe capacity, or why it failed.
pub fn spawn(
    call: &mut Call,
    command: Option<HelperCommand>,
    clock: impl Fn() -> Instant,
    spawn: impl FnOnce(HelperCommand) -> io::Result<(u32, Option<u64>)>,
) {
    let Some(command) = command else {
        let _ = call.handle(
            clock(),
            Input::SpawnFailed {
                kind: io::ErrorKind::Other,
                message: "the helper was already spawned".into(),
            },
        );
        return;
    };
    let program = command.program.to_string_lossy().into_owned();
    let spawned = spawn(command);
    let now = clock();
    let reported = match spawned {
        Ok((pid, capacity)) => {
            let _ = call.handle(now, Input::PipeCapacity(capacity));
            call.handle(now, Input::Spawned { pid })
        }
        Err(error) => call.handle(
            now,
            Input::SpawnFailed {
                kind: error.kind(),
                message: format!("spawn failed: {program}: {:?}: {error}", error.kind()),
            },
        ),
    };
    debug_assert!(reported.is_ok(), "{reported:?}");
}
