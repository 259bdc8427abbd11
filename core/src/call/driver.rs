//! [`Call`]: the state a call keeps, and the methods its driver calls —
//! `handle` to report what happened, `poll_action` and `poll_timeout`
//! to learn what to do and when to wake.
//!
//! The methods here check nothing about the lifecycle themselves: each
//! input goes to the one transition table (`transitions.rs`), or, for
//! bytes and counters, to the captures and counters directly (never a
//! transition). **The driver's clock never runs backwards inside a call**:
//! an instant earlier than the last one seen counts as the last one.
//!
//! [`Call::live_group`] is the group a dying owner must kill: the leader
//! not known to be reaped, or, after its exit, a stream still held by a
//! descendant.
//!
//! A debug grant reaching a running call raises its stderr budget from
//! then on: a `tail` ring keeps its bytes and grows, a `head` prefix grows
//! only if nothing went past it, a final `head_and_tail` prefix stays. A
//! new grant replaces the previous one (a smaller one shrinks the window).
//! On the grant's end or revocation the retained stderr shrinks to the
//! normal budget at once (the newest bytes for `tail`) and the difference
//! goes back to the pool; the record still says `debug: true`. A call that
//! ended before the grant is untouched.

use std::collections::VecDeque;
use std::io;
use std::time::{Instant, SystemTime};

use super::card::redacted_spec;
use super::input::{Event, Input, Stop};
use super::timer::TimerTable;
use super::{
    Action, ApprovalDecision, CallError, CallSettings, CallSpec, CancelReason, ExitStatus,
    ResultKind, SignalMark, SpawnOrder, State, StateMark, StreamEnd, Timer, transitions,
};
#[cfg(doc)]
use super::{Admission, DisconnectPolicy, ResultChannel, spawn_error_kind};
use crate::capture::StreamCapture;
use crate::config::DebugGrant;
use crate::confine::{Enforcement, TreeReport};
use crate::pool::RetentionPool;

/// One call of one helper: its lifecycle as a sans-IO state machine, from
/// `received` to exactly one terminal [`State`], and its record.
///
/// A call owns every decision about a helper run: when to show the
/// approval card, when to spawn, when to signal the process group, when to
/// stop waiting, and which terminal state the call ends in. The adapter that
/// drives it only reports what happened (`handle`) and carries out what it
/// is asked (`poll_action`). All transitions live in one table
/// (`transitions.rs`; [`TRANSITIONS`](crate::TRANSITIONS) lists its edges).
/// When events race after dispatch, the terminal state is decided by
/// precedence: a stop requested before the exit was observed wins
/// (`killed` if SIGKILL was needed, else `cancelled_after_dispatch`); then
/// a lost process (`unknown`); then a structured result that says the
/// remote side failed (`failed_remote`); then the exit status
/// (`completed` for 0, else `failed_local`).
///
/// # Driving a call
///
/// The driver contract is one enum each way, as in str0m: the driver
/// hands every event to [`Call::handle`] as an [`Input`] with the instant
/// it observed, then drains [`Call::poll_action`] until it returns `None`,
/// carrying out each [`Action`] in order, and re-arms its timer from
/// [`Call::poll_timeout`]; when the timer fires it hands in
/// [`Input::Timeout`] (early is harmless). The loop ends at
/// [`Action::Finished`], emitted exactly once and last. The other methods
/// only read: the state, the record so far, the settings.
///
/// # Errors and terminal states
///
/// An input that does not fit the call's live state is caller misuse:
/// [`Call::handle`] returns a [`CallError`] (which says exactly when) and
/// the call is unchanged. Some inputs are valid in every state (cancel,
/// disconnect, timeout, a failed audit write, the end of the caller's
/// input, card delivery, debug grants, bytes and counters) and always
/// return `Ok(())`.
///
/// **A terminal state absorbs every later input with `Ok`**: once
/// [`is_finished`](Self::is_finished), every input returns `Ok(())` and
/// changes nothing, so a driver may report what it
/// observes after the end (a late exit, an end-of-file, bytes) without
/// checking first. The one trace a late input leaves is a failed audit
/// write, which is still counted in the record's `audit_failures` while
/// the [`Action::Finished`] holding it is not yet polled.
///
/// # Examples
///
/// The whole life of a call that needs approval, driven by hand in
/// simulated time:
///
/// ```
/// use std::time::{Duration, Instant, SystemTime};
/// use spillguard_core::{Input,
///     Action, Call, CallKind, CallSettings, CallSpec, Config, ExitStatus, RetentionPool, State,
/// };
///
/// let config = Config::default();
/// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
/// let spec = CallSpec {
///     call_id: "c_1".into(),
///     session_id: "s_1".into(),
///     kind: CallKind::Action,
///     action: "ssh.exec".into(),
///     target: "deploy@web-3".into(),
///     summary: "systemctl restart web".into(),
///     card_lines: Vec::new(),
/// };
/// let t0 = Instant::now();
/// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
///
/// call.handle(t0, Input::Validated { needs_approval: true })?;
/// let mut shown = Vec::new();
/// while let Some(action) = call.poll_action() {
///     shown.push(format!("{action:?}").split([' ', '(']).next().unwrap_or("").to_owned());
/// }
/// assert_eq!(shown, ["Audit", "Audit", "Audit", "Audit", "ShowApprovalCard"]);
/// assert_eq!(call.poll_timeout(), Some(t0 + Duration::from_secs(120)));
///
/// let t1 = t0 + Duration::from_secs(3);
/// call.handle(t1, Input::ApprovalGranted)?;
/// while let Some(action) = call.poll_action() {
///     if let Action::Spawn(_) = action {
///         // The driver spawns the helper here.
///     }
/// }
/// call.handle(t1, Input::Spawned { pid: 4242 })?;
/// call.handle(t1, Input::Stderr(b"warning: slow link\n"));
/// call.handle(t1 + Duration::from_millis(40), Input::Exited(ExitStatus::code(0)))?;
/// call.handle(t1 + Duration::from_millis(41), Input::StdoutEof)?;
/// call.handle(t1 + Duration::from_millis(41), Input::StderrEof)?;
///
/// let mut outcome = None;
/// while let Some(action) = call.poll_action() {
///     if let Action::Finished(o) = action {
///         outcome = Some(o);
///     }
/// }
/// let outcome = outcome.expect("finished");
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.exit_status, Some(0));
/// assert_eq!(outcome.record.stderr_bytes_seen, 19);
/// assert_eq!(outcome.agent_excerpt(), "warning: slow link\n");
/// # Ok::<(), spillguard_core::CallError>(())
/// ```
#[derive(Debug)]
pub struct Call {
    pub(crate) spec: CallSpec,
    pub(crate) settings: CallSettings,
    pub(crate) state: State,
    pub(crate) received: Instant,
    pub(crate) received_at: SystemTime,
    pub(crate) last_now: Instant,
    pub(crate) timers: TimerTable,
    pub(crate) actions: VecDeque<Action>,
    pub(crate) stderr: Option<StreamCapture>,
    pub(crate) stdout: Option<StreamCapture>,
    pub(crate) approval: ApprovalDecision,
    pub(crate) spawn_in_flight: bool,
    pub(crate) pending_cancel: Option<CancelReason>,
    pub(crate) pid: Option<u32>,
    pub(crate) pgid: Option<u32>,
    pub(crate) pipe_capacity: Option<u64>,
    pub(crate) enforcement: Option<Enforcement>,
    pub(crate) tree: Option<TreeReport>,
    pub(crate) exit: Option<ExitStatus>,
    pub(crate) process_lost: bool,
    pub(crate) stdout_open: bool,
    pub(crate) stderr_open: bool,
    pub(crate) input_ended: bool,
    pub(crate) stdin_closed: bool,
    pub(crate) stdout_bytes_forwarded: u64,
    pub(crate) stdin_bytes_forwarded: u64,
    pub(crate) stdin_bytes_undelivered: u64,
    pub(crate) stdout_lines_diverted: u64,
    pub(crate) stdout_bytes_diverted: u64,
    pub(crate) stop: Stop,
    pub(crate) cancel_reason: Option<CancelReason>,
    pub(crate) cancel_offset_us: Option<u64>,
    pub(crate) card_delivered_offset_us: Option<u64>,
    pub(crate) exited_offset_us: Option<u64>,
    pub(crate) queued_offset_us: Option<u64>,
    pub(crate) admitted_offset_us: Option<u64>,
    pub(crate) stop_before_exit: bool,
    pub(crate) kill_needed: bool,
    pub(crate) descendants_signalled: bool,
    pub(crate) streams_closed_as: Option<StreamEnd>,
    pub(crate) abandoned: bool,
    pub(crate) client_disconnected: bool,
    pub(crate) result: Option<ResultKind>,
    pub(crate) result_value: Option<serde_json::Value>,
    pub(crate) result_error: Option<String>,
    pub(crate) audit_failures: u64,
    pub(crate) failure: Option<String>,
    pub(crate) spawn_error_kind: Option<&'static str>,
    pub(crate) timeline: Vec<StateMark>,
    pub(crate) signals: Vec<SignalMark>,
}

impl Call {
    /// A call received at `now` (monotonic) and `received_at` (wall clock,
    /// for the record). Its stderr draws from `pool`; stdout has its own
    /// budget outside the pool. The spec's action, target and summary are
    /// redacted here, by the stderr settings' redactor: the card, the record
    /// and the audit events never hold a secret given as an argument.
    pub fn new(
        spec: CallSpec,
        settings: CallSettings,
        pool: &RetentionPool,
        now: Instant,
        received_at: SystemTime,
    ) -> Self {
        let spec = redacted_spec(spec, &settings.stderr.redactor);
        let stderr = StreamCapture::new(settings.stderr.clone(), pool);
        let stdout = StreamCapture::new(settings.stdout.clone(), &RetentionPool::unlimited());
        let mut timers = TimerTable::default();
        if let Some(window) = settings.debug_until {
            timers.set(Timer::DebugGrantEnd, window.until);
        }
        Self {
            spec,
            settings,
            state: State::Received,
            received: now,
            received_at,
            last_now: now,
            timers,
            actions: VecDeque::new(),
            stderr: Some(stderr),
            stdout: Some(stdout),
            approval: ApprovalDecision::Undecided,
            spawn_in_flight: false,
            pending_cancel: None,
            pid: None,
            pgid: None,
            pipe_capacity: None,
            enforcement: None,
            tree: None,
            exit: None,
            process_lost: false,
            stdout_open: false,
            stderr_open: false,
            input_ended: false,
            stdin_closed: false,
            stdout_bytes_forwarded: 0,
            stdin_bytes_forwarded: 0,
            stdin_bytes_undelivered: 0,
            stdout_lines_diverted: 0,
            stdout_bytes_diverted: 0,
            stop: Stop::Running,
            cancel_reason: None,
            cancel_offset_us: None,
            card_delivered_offset_us: None,
            exited_offset_us: None,
            queued_offset_us: None,
            admitted_offset_us: None,
            stop_before_exit: false,
            kill_needed: false,
            descendants_signalled: false,
            streams_closed_as: None,
            abandoned: false,
            client_disconnected: false,
            result: None,
            result_value: None,
            result_error: None,
            audit_failures: 0,
            failure: None,
            spawn_error_kind: None,
            timeline: vec![StateMark {
                state: State::Received,
                offset_us: 0,
            }],
            signals: Vec::new(),
        }
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// What the call was created with, redacted.
    pub fn spec(&self) -> &CallSpec {
        &self.spec
    }

    /// The settings in force.
    pub fn settings(&self) -> &CallSettings {
        &self.settings
    }

    /// The live stderr capture, until the call finishes.
    pub fn stderr(&self) -> Option<&StreamCapture> {
        self.stderr.as_ref()
    }

    /// Whether [`Action::Finished`] has been queued.
    pub fn is_finished(&self) -> bool {
        self.state.is_terminal()
    }

    /// The helper's process group while the call still answers for it:
    /// spawned, and either its leader not known to be reaped (neither its
    /// exit nor its loss reported, so the pgid is still its own) or, after
    /// the leader's exit, a stream still open with descendants to be
    /// signalled (the same rule as the stop sequence after an exit). `None`
    /// otherwise.
    ///
    /// A driver that ends before the call finished (a panic, its runtime
    /// shutting down) kills this group, so that no helper runs unsupervised.
    pub fn live_group(&self) -> Option<u32> {
        let pgid = self.pgid?;
        let leader_alive = self.exit.is_none() && !self.process_lost;
        let holders = self.settings.signal_descendants && (self.stdout_open || self.stderr_open);
        (leader_alive || holders).then_some(pgid)
    }

    /// Tells the call what happened at `now`: the one way a driver feeds
    /// it (see [`Input`] for each input and when it is refused). Then
    /// the driver drains [`poll_action`](Self::poll_action) and sleeps
    /// until [`poll_timeout`](Self::poll_timeout), where it hands in
    /// [`Input::Timeout`](crate::Input::Timeout).
    ///
    /// # Errors
    ///
    /// [`CallError`] for an input that does not fit the call's live state
    /// (the call is unchanged).
    pub fn handle(&mut self, now: Instant, input: Input<'_>) -> Result<(), CallError> {
        match input {
            Input::Validated { needs_approval } => self.on_validated(now, needs_approval),
            Input::ValidationFailed(reason) => self.on_validation_failed(now, reason),
            Input::Admitted => self.on_admitted(now),
            Input::ApprovalGranted => self.on_approval_granted(now),
            Input::ApprovalDenied => self.on_approval_denied(now),
            Input::ApprovalDeclined(reason) => self.on_approval_declined(now, reason),
            Input::Spawned { pid } => self.on_spawned(now, pid),
            Input::SpawnFailed { kind, message } => self.on_spawn_failed(now, kind, message),
            Input::StdoutEof => self.on_stdout_eof(now),
            Input::StderrEof => self.on_stderr_eof(now),
            Input::Exited(status) => self.on_exit(now, status),
            Input::ProcessLost => self.on_process_lost(now),
            Input::Result(result) => self.on_result(now, result),
            Input::CardDelivered => {
                self.on_card_delivered(now);
                Ok(())
            }
            Input::InputEnded => {
                self.on_input_ended(now);
                Ok(())
            }
            Input::AuditFailed(error) => {
                self.on_audit_failed(now, error);
                Ok(())
            }
            Input::Cancel(reason) => {
                self.on_cancel(now, reason);
                Ok(())
            }
            Input::ClientDisconnected => {
                self.on_client_disconnected(now);
                Ok(())
            }
            Input::DebugGranted(grant) => {
                self.on_debug_grant(now, &grant);
                Ok(())
            }
            Input::DebugRevoked => {
                self.on_debug_revoked(now);
                Ok(())
            }
            Input::Timeout => {
                self.on_timeout(now);
                Ok(())
            }
            Input::PipeCapacity(capacity) => {
                self.on_pipe_capacity(capacity);
                Ok(())
            }
            Input::Enforcement(enforcement) => {
                self.on_enforcement(enforcement);
                Ok(())
            }
            Input::TreeReport(report) => {
                self.on_tree_report(report);
                Ok(())
            }
            Input::Stderr(bytes) => {
                self.on_stderr(now, bytes);
                Ok(())
            }
            Input::Stdout(bytes) => {
                self.on_stdout(now, bytes);
                Ok(())
            }
            Input::StdoutForwarded(n) => {
                self.on_stdout_forwarded(n);
                Ok(())
            }
            Input::StdinForwarded(n) => {
                self.on_stdin_forwarded(n);
                Ok(())
            }
            Input::StdinUndelivered(n) => {
                self.on_stdin_undelivered(n);
                Ok(())
            }
            Input::StdoutDiverted(diverted) => {
                self.on_stdout_diverted(now, diverted);
                Ok(())
            }
        }
    }

    /// Validation passed. `needs_approval` comes from the host's policy;
    /// a discovery call may not need it.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is in `received`;
    /// [`CallError::DiscoveryNeedsApproval`] for a discovery call with
    /// `needs_approval`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_validated(
        &mut self,
        now: Instant,
        needs_approval: bool,
    ) -> Result<(), CallError> {
        self.transition(now, Event::Validated { needs_approval })
    }

    /// Validation failed: the call ends `failed_before_dispatch`.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is in `received`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_validation_failed(
        &mut self,
        now: Instant,
        reason: impl Into<String>,
    ) -> Result<(), CallError> {
        let reason = self.redacted(reason.into());
        self.transition(now, Event::ValidationFailed(reason))
    }

    /// The approval card is on its way to the approver: the driver wrote
    /// it where the approver reads it (for an MCP server, the
    /// `elicitation/create` request or the `input_required` result written
    /// and flushed). With [`CallSettings::deadline_from_delivery`], the
    /// approval deadline is fixed from here, once: the card expires
    /// `approval_timeout` after its delivery, so that a busy driver (many
    /// calls, a slow audit log, a client slow to read) does not eat the
    /// approver's time; until then it has none. Without it, the deadline
    /// ran from the show and is not moved. Valid in every state; ignored
    /// unless the call awaits approval and no delivery was reported yet.
    /// The record says when (`card_delivered_offset_us`).
    pub(super) fn on_card_delivered(&mut self, now: Instant) {
        self.transition_infallible(now, Event::CardDelivered);
    }

    /// The driver admits the queued call (a running slot is free): it
    /// leaves `queued` for `authorized` and asks to spawn
    /// ([`Action::Spawn`]). Only for a call whose settings ask for
    /// [`Admission::Queued`], once it is in `queued`; in any other live
    /// state this is a caller error that changes nothing. Ignored once the
    /// call has ended (its queue timeout or a cancel may come first). The
    /// record says when (`admitted_offset_us`).
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] in a live state other than
    /// `queued`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_admitted(&mut self, now: Instant) -> Result<(), CallError> {
        self.transition(now, Event::Admitted)
    }

    /// The approver said yes.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is in
    /// `awaiting_approval`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_approval_granted(&mut self, now: Instant) -> Result<(), CallError> {
        self.transition(now, Event::ApprovalGranted)
    }

    /// The approver said no.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is in
    /// `awaiting_approval`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_approval_denied(&mut self, now: Instant) -> Result<(), CallError> {
        self.transition(now, Event::ApprovalDenied)
    }

    /// The approver's answer was no approval, for `reason` (an answer
    /// that was not a valid yes: `accept without the requested content`):
    /// the call ends `denied` as for
    /// [`Input::ApprovalDenied`](crate::Input::ApprovalDenied), and the
    /// record's `failure` says why. Refused, and nothing recorded, unless
    /// the call awaits approval.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is in
    /// `awaiting_approval`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_approval_declined(
        &mut self,
        now: Instant,
        reason: impl Into<String>,
    ) -> Result<(), CallError> {
        let before = self.failure.replace(reason.into());
        let handled = self.transition(now, Event::ApprovalDenied);
        if handled.is_err() {
            self.failure = before;
        }
        handled
    }

    /// The helper was spawned with this pid. Adapters spawn every helper as
    /// the leader of its own process group, so its process group id is
    /// `pid` too: that is the group every [`Action::SignalGroup`] names.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is `authorized`
    /// and its [`Action::Spawn`] was polled and not yet reported.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_spawned(&mut self, now: Instant, pid: u32) -> Result<(), CallError> {
        self.transition(now, Event::Spawned { pid })
    }

    /// The helper could not be spawned: `kind` is the OS error's kind,
    /// recorded as `spawn_error_kind` (see [`spawn_error_kind`] for the
    /// fixed names), and `message` its text, recorded as `failure`.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] unless the call is `authorized`
    /// and its [`Action::Spawn`] was polled and not yet reported.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_spawn_failed(
        &mut self,
        now: Instant,
        kind: io::ErrorKind,
        message: impl Into<String>,
    ) -> Result<(), CallError> {
        let message = self.redacted(message.into());
        self.transition(now, Event::SpawnFailed(kind, message))
    }

    /// The caller has finished sending: the guard's own stdin reached
    /// end-of-file, or the transport was closed. Valid in every state;
    /// remembered until dispatch; ignored once terminal.
    ///
    /// The call asks for [`Action::CloseStdin`]. A streamed helper that is
    /// still running then has `stdin_close_grace` to exit on its own (its
    /// exit decides the state, exit 0 is `completed`); after that its
    /// group gets SIGTERM, the grace, SIGKILL, and the call ends
    /// `cancelled_after_dispatch` (reason `stdin_close_grace`) or `killed`.
    /// A captured helper only has its stdin closed.
    ///
    /// ```
    /// use std::time::{Duration, Instant, SystemTime};
    /// use spillguard_core::{Input,
    ///     Action, Call, CallKind, CallSettings, CallSpec, Config, RetentionPool, Signal, StdoutMode,
    /// };
    ///
    /// let config = Config::default();
    /// let settings = CallSettings {
    ///     stdout_mode: StdoutMode::Streamed,
    ///     ..CallSettings::action(&config)
    /// };
    /// let spec = CallSpec {
    ///     call_id: "c_mcp".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "mcp.server".into(),
    ///     target: "files".into(),
    ///     summary: "serve the files tools".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, settings, &pool, t0, SystemTime::UNIX_EPOCH);
    /// call.handle(t0, Input::Validated { needs_approval: false })?;
    /// while call.poll_action().is_some() {}
    /// call.handle(t0, Input::Spawned { pid: 4242 })?;
    /// while call.poll_action().is_some() {}
    ///
    /// // The client closed its end at 10 s: stdin is closed, 2 s to exit.
    /// let t1 = t0 + Duration::from_secs(10);
    /// call.handle(t1, Input::InputEnded);
    /// assert!(matches!(call.poll_action(), Some(Action::CloseStdin)));
    /// assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(2)));
    ///
    /// // It did not exit: TERM to its group, then 5 s of grace before KILL.
    /// call.handle(t1 + Duration::from_secs(2), Input::Timeout);
    /// assert!(matches!(
    ///     call.poll_action(),
    ///     Some(Action::SignalGroup { pgid: 4242, signal: Signal::Term })
    /// ));
    /// assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(7)));
    /// # Ok::<(), spillguard_core::CallError>(())
    /// ```
    pub(super) fn on_input_ended(&mut self, now: Instant) {
        self.transition_infallible(now, Event::CallerDone);
    }

    /// The stdout reader reached end-of-file. For a streamed call, the
    /// caller's reader reached it or was dropped; a second report is
    /// accepted and changes nothing.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] before `dispatched`, and for a
    /// captured stdout whose end was already reported.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_stdout_eof(&mut self, now: Instant) -> Result<(), CallError> {
        self.transition(now, Event::StdoutEof)
    }

    /// The stderr reader reached end-of-file.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] before `dispatched`, and when
    /// stderr's end was already reported.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_stderr_eof(&mut self, now: Instant) -> Result<(), CallError> {
        self.transition(now, Event::StderrEof)
    }

    /// The helper was reaped with this status.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] before `dispatched`, and when an
    /// exit was already reported.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_exit(&mut self, now: Instant, status: ExitStatus) -> Result<(), CallError> {
        self.transition(now, Event::Exited(status))
    }

    /// The helper can no longer be waited for (the process boundary was
    /// lost, e.g. waiting failed).
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] before `dispatched`, and when an
    /// exit was already reported.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_process_lost(&mut self, now: Instant) -> Result<(), CallError> {
        self.transition(now, Event::ProcessLost)
    }

    /// Writing an [`Action::Audit`] event failed (`error` says why). Before
    /// dispatch, with [`CallSettings::audit_fail_closed`] (the default), the
    /// call ends `failed_before_dispatch` and nothing is spawned: an action
    /// whose attempt is not on record does not run. Otherwise the
    /// failure is counted in the record's `audit_failures`. Valid in every
    /// state; once terminal, it is still counted in the outcome of an
    /// [`Action::Finished`] not yet polled, and changes nothing else.
    pub(super) fn on_audit_failed(&mut self, now: Instant, error: impl Into<String>) {
        let error = self.redacted(error.into());
        self.transition_infallible(now, Event::AuditFailed(error));
    }

    /// The helper's structured result arrived (parsed by the host from its
    /// intended channel, never from stderr). With
    /// [`ResultChannel::StdoutJson`] the call parses stdout itself; a result
    /// reported here too replaces the classification.
    ///
    /// # Errors
    ///
    /// [`CallError::InvalidTransition`] before `dispatched`.
    /// Once the call is terminal: `Ok(())`, and nothing changes.
    pub(super) fn on_result(&mut self, now: Instant, result: ResultKind) -> Result<(), CallError> {
        self.transition(now, Event::Result(result))
    }

    /// A stop is requested. Valid in every state; ignored once terminal.
    pub(super) fn on_cancel(&mut self, now: Instant, reason: CancelReason) {
        self.transition_infallible(now, Event::Cancel(reason));
    }

    /// The client went away; the configured [`DisconnectPolicy`] applies.
    /// Valid in every state; ignored once terminal.
    pub(super) fn on_client_disconnected(&mut self, now: Instant) {
        self.transition_infallible(now, Event::ClientDisconnected);
    }

    /// The host's debug grant, given (or replacing another) while the call
    /// is live. Valid in every state; ignored once terminal. Never a
    /// transition.
    ///
    /// If `grant` is active at `now`, the stderr budget becomes the larger
    /// of the call's normal budget and the grant's
    /// [`per_call_bytes`](DebugGrant::per_call_bytes) (a grant is never
    /// above the configured `debug_ceiling_bytes`: [`DebugGrant::new`]
    /// refuses it), until [`DebugGrant::until`]; the record says
    /// `debug: true` from now on, whatever happens next. What the raised
    /// budget keeps is exact (see [`StreamCapture::raise_budget`]): bytes
    /// already dropped stay dropped and counted, the retained window grows
    /// with the next bytes, the marker counts what was kept. The buffers
    /// grow from the process-wide pool as bytes come, so the pool never
    /// goes over its capacity (a full pool limits retention, as ever). The
    /// agent excerpt keeps its own cap (`excerpt_bytes`): it is clamped
    /// from the larger window, marker included.
    ///
    /// A grant that replaces the one the call is under sets the budget and
    /// the end anew (a smaller budget shrinks the window as the end of a
    /// grant does). A grant that has already ended at `now` is the end of
    /// the call's grant, if it is under one
    /// ([`Input::DebugRevoked`](crate::Input::DebugRevoked)), and
    /// otherwise changes nothing (the call was not touched).
    ///
    /// When the grant ends ([`Timer::DebugGrantEnd`]) or is revoked while
    /// the call runs, the retained stderr shrinks back to the normal budget
    /// at once, keeping the bytes the mode keeps (the newest for `tail`),
    /// and the difference goes back to the pool; new bytes are retained
    /// under the normal budget; the record still says `debug: true`.
    ///
    /// ```
    /// use std::time::{Duration, Instant, SystemTime};
    /// use spillguard_core::{Input,
    ///     Call, CallKind, CallSettings, CallSpec, Config, DebugGrant, RetentionPool,
    /// };
    ///
    /// let config = Config::default();
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let spec = CallSpec {
    ///     call_id: "c_long".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "build".into(),
    ///     target: "ci".into(),
    ///     summary: "make".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
    /// call.handle(t0, Input::Validated { needs_approval: false })?;
    /// while call.poll_action().is_some() {}
    /// call.handle(t0, Input::Spawned { pid: 4242 })?;
    /// call.handle(t0, Input::Stderr(&[b'x'; 20_000]));
    /// assert_eq!(call.stderr().map(|c| c.bytes_retained()), Some(16_384));
    ///
    /// // Debug is granted at 1 s for 60 s, 65536 bytes per call.
    /// let t1 = t0 + Duration::from_secs(1);
    /// let grant = DebugGrant::new(&config, t1, Duration::from_secs(60), 65_536)?;
    /// call.handle(t1, Input::DebugGranted(grant));
    /// call.handle(t1, Input::Stderr(&[b'y'; 30_000]));
    /// assert_eq!(call.stderr().map(|c| c.bytes_retained()), Some(46_384));
    /// assert_eq!(call.poll_timeout(), Some(t1 + Duration::from_secs(60)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`StreamCapture::raise_budget`]: crate::StreamCapture::raise_budget
    pub(super) fn on_debug_grant(&mut self, now: Instant, grant: &DebugGrant) {
        self.transition_infallible(now, Event::DebugGranted(*grant));
    }

    /// The host revoked its debug grant while the call is live: if the
    /// call is under a grant, it ends now, exactly as at its end (the
    /// retained stderr shrinks back to the normal budget, the difference
    /// goes back to the pool, the record still says `debug: true`).
    /// Otherwise nothing changes. Valid in every state; ignored once
    /// terminal. Never a transition.
    pub(super) fn on_debug_revoked(&mut self, now: Instant) {
        self.transition_infallible(now, Event::DebugRevoked);
    }

    /// The next action to carry out, until `None`.
    #[must_use = "every action must be carried out"]
    pub fn poll_action(&mut self) -> Option<Action> {
        let action = self.actions.pop_front()?;
        if let Action::Spawn(_) = action {
            self.spawn_in_flight = true;
        }
        Some(action)
    }

    /// Whether [`poll_action`](Self::poll_action) has something to give.
    ///
    /// For a driver that feeds chunks from another thread than the one
    /// carrying out actions: after a `Call::handle` call, `true` where it was
    /// `false` before means the actor must be woken.
    ///
    /// ```
    /// # use std::time::{Instant, SystemTime};
    /// # use spillguard_core::{Input, Call, CallKind, CallSettings, CallSpec, Config, RetentionPool};
    /// let config = Config::default();
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let spec = CallSpec {
    ///     call_id: "c_1".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "lint".into(),
    ///     target: "src/".into(),
    ///     summary: "cargo clippy".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
    /// assert!(!call.has_pending_actions());
    /// call.handle(t0, Input::Validated { needs_approval: false })?;
    /// assert!(call.has_pending_actions());
    /// while call.poll_action().is_some() {}
    /// call.handle(t0, Input::Spawned { pid: 4242 })?;
    /// while call.poll_action().is_some() {}
    /// // Bytes below the kill ceiling ask for nothing: no need to wake anyone.
    /// call.handle(t0, Input::Stderr(b"warning: slow link\n"));
    /// assert!(!call.has_pending_actions());
    /// # Ok::<(), spillguard_core::CallError>(())
    /// ```
    pub fn has_pending_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// When [`Input::Timeout`](crate::Input::Timeout) should next be called.
    #[must_use = "the driver must wake up at this instant"]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Fires every timer due at `now`. A no-op when called early, and once
    /// the call is terminal (no timer is armed then).
    pub(super) fn on_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        while let Some(timer) = self.timers.take_due(now) {
            self.transition_infallible(now, Event::Timeout(timer));
        }
    }

    fn advance(&mut self, now: Instant) -> Instant {
        // A driver's clock never runs backwards here.
        self.last_now = self.last_now.max(now);
        self.last_now
    }

    fn transition(&mut self, now: Instant, input: Event) -> Result<(), CallError> {
        let now = self.advance(now);
        transitions::apply(self, now, input)
    }

    pub(super) fn transition_infallible(&mut self, now: Instant, input: Event) {
        let now = self.advance(now);
        // Cancels, disconnects and timeouts are valid in every state.
        let outcome = transitions::apply(self, now, input);
        debug_assert!(outcome.is_ok(), "{outcome:?}");
    }

    /// What the spawn needs: the confinement, and the call's longest
    /// life (its deadline, the shutdown grace, one second more).
    pub(super) fn spawn_order(&self) -> SpawnOrder {
        SpawnOrder {
            confinement: self.settings.confinement.clone(),
            // A deadline too long for the clock: no end to watch for.
            ends_within: self.settings.deadline.and_then(|deadline| {
                deadline
                    .checked_add(self.settings.shutdown_grace)?
                    .checked_add(std::time::Duration::from_secs(1))
            }),
        }
    }

    /// `text` redacted by this call's rules: every string the call keeps
    /// for its record and audit events passes through here.
    fn redacted(&self, text: String) -> String {
        self.settings.stderr.redactor.redact_text(&text)
    }

    pub(crate) fn offset_us(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.received).as_micros()).unwrap_or(u64::MAX)
    }
}
