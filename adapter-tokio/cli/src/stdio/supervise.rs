//! `--restart`: the loop that runs the server again. It is the core's
//! [`Restarts`] run loop and nothing else: each run's end is handed to it,
//! then its actions are carried out (start the server, give up) and its
//! timer slept on. The pumps go on from one run to the next through the
//! [`Relay`].

use std::fs::File;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Instant;

use spillguard_host::fresh_id;
use spillguard_std::proto::{
    AuditEvent, AuditKind, CallRecord, Outcome, RestartAction, RestartNote, RestartSettings,
    RestartState, Restarts, ServerEnd, ServerGone,
};

use super::fds::Kind;
use super::forward::Forward;
use super::output::{Mcp, Output};
use super::relay::Relay;
use super::{Requests, STDOUT_END_WAIT, input, output};
use crate::args::StdioArgs;
use crate::call::{self, Host, RestartSummary};

/// What every run shares.
pub struct Runs<'a> {
    /// The host the runs are calls of.
    pub host: &'a Host,
    /// The command line.
    pub args: &'a StdioArgs,
    /// `--forward-stderr`'s copy.
    pub forward: Option<&'a Arc<Forward>>,
    /// This program's stdout.
    pub output: &'a Arc<Output>,
    /// The client's requests, with `--mcp`.
    pub requests: Option<&'a Arc<Requests>>,
    /// What the pumps share with this loop.
    pub relay: &'a Arc<Relay>,
    /// The restart policy (flags over the configuration file).
    pub settings: RestartSettings,
}

/// The client's input while no pump reads it (the first run never
/// started), and the stdout pump of the run on.
pub struct Ends {
    /// The client's input, until a pump takes it.
    pub unused_input: Option<File>,
    /// Its kind.
    pub input_kind: Kind,
    /// Hears when the current run's stdout has ended.
    pub stdout_done: Option<Receiver<()>>,
}

/// Runs the server again as the restart policy says, from the first
/// run's `outcome` (started at `started`); each run that another follows
/// goes to `run_ended` with the account of the restarts before it.
/// Returns the last run's outcome, the account of the restarts, and the
/// note for the answers still to give (after a crash loop or a refusal).
pub fn run(
    runs: &Runs<'_>,
    mut outcome: Outcome,
    started: Instant,
    ends: &mut Ends,
    run_ended: &mut dyn FnMut(&Outcome, RestartSummary),
) -> (Outcome, RestartSummary, Option<RestartNote>) {
    let mut restarts = Restarts::new(runs.settings, started);
    let mut restart_reason = None;
    let mut last_note = None;
    loop {
        if let Some(reason) = runs.relay.stop_reason() {
            restarts.handle_stop(reason);
        }
        let end = match runs.relay.take_stdout_closed() {
            // Stopped by the guard for closing its stdout (not a natural
            // end that came first).
            true if !outcome.record.signals.is_empty() => ServerEnd::StdoutClosed,
            _ => server_end(&outcome.record),
        };
        // The machine is running here: the only possible error is none.
        let _ = restarts.handle_ended(Instant::now(), end, jitter());
        let gone = ServerGone {
            restart: restarts.note(),
            ..ServerGone::from_record(&outcome.record, outcome.agent_excerpt())
        };
        if let Some(RestartAction::GiveUp(_)) = restarts.poll_action() {
            restart_reason = Some(end.to_string());
            last_note.clone_from(&gone.restart);
            // The requests the last run left are answered at once, as at
            // any run's end (the pump is woken by the run's end), then
            // every later one.
            runs.relay.server_gone(gone.clone());
            runs.relay.over(Some(gone));
            if ends.unused_input.is_none() {
                // Every request is answered at once until the host leaves.
                runs.relay.await_client_end();
            }
            break;
        }
        if let Some(reason) = runs.relay.refused() {
            // The new server could not take the host's session: every
            // request is answered with why, until the host leaves.
            let gone = ServerGone {
                restart: Some(restarts.refused_note(&reason)),
                ..gone
            };
            last_note.clone_from(&gone.restart);
            runs.relay.over(Some(gone));
            runs.relay.await_client_end();
            break;
        }
        let Some(until) = restarts.poll_timeout() else {
            runs.relay.over(None);
            break;
        };
        // This run is over and another follows: its own record.
        run_ended(
            &outcome,
            RestartSummary {
                restarts: restarts.restarts(),
                restart_reason: restart_reason.clone(),
                crash_loop: false,
            },
        );
        restart_reason = Some(end.to_string());
        runs.relay.server_gone(gone);
        if runs.relay.sleep_until(until) {
            runs.relay.over(None);
            break;
        }
        restarts.handle_timeout(until.max(Instant::now()));
        let Some(RestartAction::Start { attempt }) = restarts.poll_action() else {
            runs.relay.over(None);
            break;
        };
        if let Some(done) = ends.stdout_done.take() {
            // The last run's stdout is over, or held by a descendant.
            let _ = done.recv_timeout(STDOUT_END_WAIT);
        }
        if runs.relay.stop_reason().is_some() {
            // The host left (or a stop was asked) during the wait.
            runs.relay.over(None);
            break;
        }
        if let Some(forward) = runs.forward {
            forward.mark(&format!(
                "spillguard: server restarted (attempt {attempt})\n"
            ));
        }
        // The audit log says why this run exists before its attempt.
        let call_id = fresh_id("c");
        audit_restart(runs, &call_id, attempt, &end, &outcome.record);
        let call = call::start_stdio(
            runs.host,
            runs.args,
            runs.forward.map(Forward::tap),
            Some(call_id),
        );
        // A start follows the action that asked for it: no error.
        let _ = restarts.handle_started(Instant::now());
        runs.relay.running(call.canceller());
        if let Ok((stdin, stdout)) = call.streams() {
            match ends.unused_input.take() {
                Some(input) => input::start(
                    input,
                    ends.input_kind,
                    stdin,
                    runs.requests.cloned(),
                    Some(runs.relay.clone()),
                ),
                None => runs.relay.attach(stdin),
            }
            let mcp = runs.requests.map(|requests| Mcp {
                max_message: runs.args.max_message_bytes,
                requests: requests.clone(),
            });
            let relay = Some(runs.relay.clone());
            ends.stdout_done = Some(output::start(
                stdout,
                runs.output.clone(),
                mcp,
                &call,
                relay,
            ));
        }
        outcome = call.wait();
    }
    let summary = RestartSummary {
        restarts: restarts.restarts(),
        restart_reason,
        crash_loop: matches!(restarts.state(), RestartState::CrashLoop(_)),
    };
    (outcome, summary, last_note)
}

/// Writes the restart event of the run `call_id` (the `attempt`-th
/// restart, after `previous` ended as `end`) to the audit log, if there is
/// one; a failed write is counted and said as every audit failure is.
fn audit_restart(
    runs: &Runs<'_>,
    call_id: &str,
    attempt: u32,
    end: &ServerEnd,
    previous: &CallRecord,
) {
    let Some(sink) = runs.host.options().audit.as_ref() else {
        return;
    };
    let session_id = runs
        .args
        .run
        .session_id
        .clone()
        .unwrap_or_else(|| runs.host.session_id().to_owned());
    let event = AuditEvent {
        call_id: call_id.to_owned(),
        session_id,
        offset_us: 0,
        kind: AuditKind::Restart {
            attempt,
            reason: end.to_string(),
            previous_call_id: previous.call_id.clone(),
        },
    };
    let _ = sink.write(&event);
}

/// How a run ended, as the restart policy reads it: a signal counts as
/// the guard's when the record lists a signal it sent.
fn server_end(record: &CallRecord) -> ServerEnd {
    match (record.exit_status, record.exit_signal) {
        (Some(code), _) => ServerEnd::Exited(code),
        (None, Some(signal)) => ServerEnd::Signalled {
            signal,
            by_guard: !record.signals.is_empty(),
        },
        (None, None) => ServerEnd::NoStatus,
    }
}

/// A number for the backoff's jitter: the clock's nanoseconds, which a
/// crash-looping server's exits do not line up with.
fn jitter() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    (nanos % (u32::from(u16::MAX) + 1)) as u16
}
