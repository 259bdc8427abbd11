//! The owner skeleton every runtime shares: [`OwnerCore`] holds the call and
//! carries out the core's actions; the runtime's owner keeps only its wait.
//!
//! An adapter's owner is a loop: carry out every action
//! ([`OwnerCore::carry_out_actions`]), wait in the runtime's way for the
//! first of (timer, event, read), make exactly one `Call::handle` call, and go
//! again. Everything but the wait is here, written once:
//!
//! * the action dispatch, one `match` with an arm per action (the core's
//!   `Action` is `#[non_exhaustive]`; a compile-time check of
//!   `Action::NAMES` fails when the core adds an action, so none is
//!   silently ignored);
//! * the spawn and its report, through the runtime's [`Effects`];
//! * publishing state, card and outcome for the handle, keeping the record,
//!   and letting go of the call (once);
//! * **the one policy for an owner that ends before its call finished** (a
//!   panic, a runtime shutting down and dropping its tasks): the helper's
//!   group is killed while the call still answers for it
//!   ([`Call::live_group`]), and the call is let go of, so its waiters
//!   wake up and the host stops counting it. The handle then reports the
//!   owner's end (std resumes its panic). A panic in an audit sink ends
//!   the owner the same way on every runtime (tokio resumes it from
//!   `spawn_blocking`).
//!
//! [`Prepared::prepare`] applies the host's debug grant read after it
//! registers the call, so a grant or revocation made between the call's
//! settings and its registration is not missed.
//!
//! A known limit of the dying-owner policy: on smol and tokio a waiter
//! task reaps the child on its own, so between that reap and the owner
//! handling the exit, a dying owner could signal a pgid the kernel already
//! freed (reused only once the pid space wraps). A std owner with a pidfd
//! reaps the child itself and has no such window.
//!
//! With the `tracing` feature each [`OwnerCore`] has a span
//! `spillguard.call` (`call_id`, `session_id`, `action`) and emits an
//! event per transition, spawn, signal sent and end; never the helper's
//! text.

use std::any::Any;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use spillguard_core::{
    Action, AuditEvent, Call, CallError, CancelReason, DebugGrant, DebugGrantError, Outcome,
    Signal, SpawnOrder, StdoutMode,
};

use crate::builder::{Resolved, StderrTap};
use crate::command::HelperCommand;
use crate::host_state::HostState;
use crate::published::{Published, Wake};
use crate::run_loop::{self, Event, Leftover, Pipe, Read, Start};
use crate::stream::Forwarded;
use spillguard_core::Input;

/// What an owner needs of its host: the shared state, how to say that a
/// call ended, and how to reach a live call.
pub trait HostLink: Send + Sync + 'static {
    /// How the host reaches a live call (its owner's channel).
    type Live: Clone;

    /// The runtime-free state.
    fn state(&self) -> &HostState<Self::Live>;

    /// The call `id` is no longer live: deregister it and wake whoever
    /// waits for calls to end (a host's shutdown).
    fn call_ended(&self, id: u64);

    /// Asks the live call `live` to stop, for `reason`.
    fn cancel(live: &Self::Live, reason: CancelReason);

    /// Tells the live call `live` that the host's debug grant changed
    /// ([`Input::DebugGranted`]): the grant now
    /// in force, or `None` when it was revoked. Sent on the same channel as
    /// [`cancel`](Self::cancel); it must not block.
    fn debug(live: &Self::Live, grant: Option<DebugGrant>);

    /// How the calls' spans are made: by the runtime's adapter, with its
    /// crate as their target.
    #[cfg(feature = "tracing")]
    fn call_span(&self) -> crate::call_span::SpanMaker {
        crate::call_span::host_span
    }

    /// Grants debug from `now` (on the owners' clock) for `duration`, up to
    /// `per_call_bytes` of stderr per call, to calls started under it and
    /// to every live call ([`HostState::grant_debug`]).
    fn grant_debug(
        &self,
        now: Instant,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.state()
            .grant_debug(now, duration, per_call_bytes, Self::debug)
    }

    /// Ends the debug grant, for calls started from now on and for every
    /// live call ([`HostState::revoke_debug`]).
    fn revoke_debug(&self) {
        self.state().revoke_debug(Self::debug);
    }

    /// Marks the host as closing (calls started from now on are cancelled
    /// before dispatch) and cancels every live call; returns their ids
    /// and how to reach them. Only an explicit shutdown does this: the
    /// host's state lives as long as its last call, so dropping a host
    /// value never ends the calls it started.
    fn cancel_all(&self) -> Vec<(u64, Self::Live)> {
        let live = self.state().close();
        for (_, call) in &live {
            Self::cancel(call, CancelReason::HostShutdown);
        }
        live
    }
}

/// The result of [`Effects::unblock`], once the job ran.
pub type Unblocked<T> = Pin<Box<dyn Future<Output = Option<T>> + Send>>;

/// What a runtime provides to carry out the core's actions.
pub trait Effects {
    /// Spawns `command` in its own process group with piped output
    /// (`pipe_size` asked for each pipe) and keeps the process; returns
    /// its pid (also its group id) and the stderr pipe's capacity.
    fn spawn(
        &mut self,
        command: HelperCommand,
        pipe_size: Option<usize>,
    ) -> io::Result<(u32, Option<u64>)>;

    /// Closes the helper's stdin, if it has one.
    fn close_stdin(&mut self);

    /// For a streamed call, just after the spawn: the helper's stdin and
    /// stdout for the caller (the runtime's own type, taken by its handle),
    /// counting into `forwarded`. `None` for a captured call.
    fn take_streams(&mut self, forwarded: &Arc<Forwarded>) -> Option<Box<dyn Any + Send>> {
        let _ = forwarded;
        None
    }

    /// Runs `job` (a blocking write: an audit append, perhaps an fsync)
    /// where this runtime runs blocking work, and gives its result. A job
    /// that panics panics the owner (on every runtime, so an owner's end
    /// mid-call is always [`OwnerCore`]'s one policy); `None` if the job
    /// could not run (its runtime is shutting down).
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(
        &mut self,
        job: F,
    ) -> Unblocked<T>;
}

/// A spawned helper as a runtime holds it (its pipes, its stdin writer,
/// the task or job that waits for its exit).
pub trait Helper: Sized {
    /// What the helper's waiter reports the exit through (the owner's
    /// channel).
    type Events;

    /// Spawns `command` in its own process group with piped output
    /// (`pipe_size` asked for each pipe); its exit goes to `events`. On
    /// error nothing is left running.
    fn spawn(
        command: HelperCommand,
        pipe_size: Option<usize>,
        events: &Self::Events,
    ) -> io::Result<Self>;

    /// Its pid, which is also its process group id.
    fn pid(&self) -> u32;

    /// The stderr pipe's capacity after asking to enlarge it.
    fn pipe_capacity(&self) -> Option<u64>;

    /// Stops feeding its stdin and closes it (for a streamed call, even
    /// while the caller holds the writer).
    fn close_stdin(&mut self);

    /// For a streamed call (stdin [`StdinMode::Streamed`]): the helper's
    /// stdin and stdout, once, for the caller, counting into `forwarded`;
    /// the caller's end of input and diverted bytes go to `events`. The
    /// helper keeps what it needs to close stdin.
    ///
    /// [`StdinMode::Streamed`]: crate::StdinMode::Streamed
    fn take_streams(
        &mut self,
        events: &Self::Events,
        forwarded: Arc<Forwarded>,
    ) -> Option<Box<dyn Any + Send>> {
        let _ = (events, forwarded);
        None
    }
}

/// Where a runtime runs blocking work.
pub trait Blocking {
    /// Runs `job` there; see [`Effects::unblock`].
    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(job: F) -> Unblocked<T>;
}

/// The helper of one call as its owner holds it: the channel its tasks
/// report through and, once spawned, the process; the [`Effects`] of every
/// runtime, given its [`Helper`] and its [`Blocking`].
pub struct HelperSlot<P: Helper, B> {
    events: P::Events,
    process: Option<P>,
    blocking: std::marker::PhantomData<fn() -> B>,
}

impl<P: Helper + std::fmt::Debug, B> std::fmt::Debug for HelperSlot<P, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HelperSlot")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl<P: Helper, B> HelperSlot<P, B> {
    /// Nothing spawned yet; the helper's tasks will report through `events`.
    pub fn new(events: P::Events) -> Self {
        Self {
            events,
            process: None,
            blocking: std::marker::PhantomData,
        }
    }

    /// The helper, once spawned.
    pub fn process(&self) -> Option<&P> {
        self.process.as_ref()
    }

    /// The helper, once spawned, to read its pipes or reap it.
    pub fn process_mut(&mut self) -> Option<&mut P> {
        self.process.as_mut()
    }
}

impl<P: Helper, B: Blocking> Effects for HelperSlot<P, B> {
    fn spawn(
        &mut self,
        command: HelperCommand,
        pipe_size: Option<usize>,
    ) -> io::Result<(u32, Option<u64>)> {
        let spawned = P::spawn(command, pipe_size, &self.events)?;
        let reported = (spawned.pid(), spawned.pipe_capacity());
        self.process = Some(spawned);
        Ok(reported)
    }

    fn close_stdin(&mut self) {
        if let Some(process) = &mut self.process {
            process.close_stdin();
        }
    }

    fn take_streams(&mut self, forwarded: &Arc<Forwarded>) -> Option<Box<dyn Any + Send>> {
        let process = self.process.as_mut()?;
        process.take_streams(&self.events, forwarded.clone())
    }

    fn unblock<T: Send + 'static, F: FnOnce() -> T + Send + 'static>(
        &mut self,
        job: F,
    ) -> Unblocked<T> {
        B::unblock(job)
    }
}

/// A call about to start: its id (for the handle), how its owner begins,
/// and the owner's runtime-free part.
pub struct Prepared<H: HostLink, W: Wake> {
    /// The call's id.
    pub call_id: String,
    /// How the owner begins ([`OwnerCore::begin`]).
    pub start: Start,
    /// The owner's runtime-free part.
    pub core: OwnerCore<H, W>,
}

impl<H: HostLink, W: Wake> Prepared<H, W> {
    /// Registers the call `resolved` describes with `host`, reached
    /// through `live` and publishing to `published`, and makes its owner's
    /// runtime-free part
    /// on `clock` (received now, on that clock and the wall clock).
    ///
    /// On a host, a call's debug grant is the host's: the one in force once
    /// the call is registered (whatever its settings said), then every
    /// grant and revocation delivered while it is live.
    pub fn prepare(
        host: &Arc<H>,
        resolved: Resolved,
        live: H::Live,
        published: Arc<Published<W>>,
        clock: fn() -> Instant,
    ) -> Self {
        let Resolved {
            spec,
            command,
            approval,
            settings,
            stderr_tap,
            refused,
        } = resolved;
        let call_id = spec.call_id.clone();
        let state = host.state();
        let (id, host_closing) = state.register(live);
        let start = Start {
            needs_approval: approval.is_required(),
            host_closing,
        };
        // Made here, on the caller's thread: the caller's current span is
        // its parent.
        #[cfg(feature = "tracing")]
        let (span, settings, command) =
            crate::call_span::make(host.call_span(), &spec, settings, command);
        let now = clock();
        let mut call = Call::new(spec, settings, state.pool(), now, SystemTime::now());
        // Read after registering: a grant (or revocation) made since the
        // settings were, which the delivery to live calls may have missed,
        // reaches this call here. Applying the same grant twice changes
        // nothing; a change delivered after this read is queued for the
        // owner, so the call ends up under the host's latest grant.
        let _ = match state.debug_grant() {
            Some(grant) => call.handle(now, Input::DebugGranted(grant)),
            None => call.handle(now, Input::DebugRevoked),
        };
        let mut core = OwnerCore::new(
            id,
            call,
            command,
            published,
            host.clone(),
            clock,
            #[cfg(feature = "tracing")]
            span,
        );
        core.stderr_tap = stderr_tap;
        core.refused = refused;
        Self {
            call_id,
            start,
            core,
        }
    }
}

impl<H: HostLink, W: Wake> std::fmt::Debug for Prepared<H, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("call_id", &self.call_id)
            .field("start", &self.start)
            .field("core", &self.core)
            .finish()
    }
}

/// The runtime-free part of one call's owner. See the [module docs](self).
pub struct OwnerCore<H: HostLink, W: Wake> {
    id: u64,
    call: Call,
    command: Option<HelperCommand>,
    listening: bool,
    published: Arc<Published<W>>,
    host: Arc<H>,
    clock: fn() -> Instant,
    /// For a streamed call: the bytes its caller forwarded, reported to the
    /// core before each `Call::handle` call.
    forwarded: Option<Arc<Forwarded>>,
    stderr_tap: Option<StderrTap>,
    /// The caller's own refusal of the call, taken by [`begin`](Self::begin).
    refused: Option<String>,
    finished: bool,
    released: bool,
    /// The host no longer counts the call as live.
    uncounted: bool,
    #[cfg(feature = "tracing")]
    span: tracing::Span,
    /// The helper's group, while the process's supervisor lists it.
    watched: Option<u32>,
    /// The call's control groups, listed with its last moment with the
    /// supervisor until the call ends.
    watched_tree: Vec<std::path::PathBuf>,
    /// The call's control groups, from its spawn to its end.
    tree: Option<crate::confine::Tree>,
}

impl<H: HostLink, W: Wake> std::fmt::Debug for OwnerCore<H, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerCore")
            .field("id", &self.id)
            .field("state", &self.call.state())
            .field("listening", &self.listening)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

// `OwnerCore::carry_out_actions` has one arm per action, seven: an action
// the core adds (`Action::NAMES` grows) stops the build here until it has
// an arm there and this count is raised.
const _: () = assert!(Action::NAMES.len() == 7, "an action without an arm");

impl<H: HostLink, W: Wake> OwnerCore<H, W> {
    /// The owner of call `id` (as registered with the host) that runs
    /// `command`, publishing to `published` and reading `clock` (the
    /// runtime's monotonic clock: tokio's, so that paused time drives it).
    pub fn new(
        id: u64,
        call: Call,
        command: HelperCommand,
        published: Arc<Published<W>>,
        host: Arc<H>,
        clock: fn() -> Instant,
        #[cfg(feature = "tracing")] span: tracing::Span,
    ) -> Self {
        let streamed = call.settings().stdout_mode == StdoutMode::Streamed;
        if !streamed {
            published.no_streams();
        }
        Self {
            id,
            call,
            command: Some(command),
            listening: true,
            published,
            host,
            clock,
            forwarded: streamed.then(Arc::default),
            stderr_tap: None,
            refused: None,
            finished: false,
            released: false,
            uncounted: false,
            #[cfg(feature = "tracing")]
            span,
            watched: None,
            watched_tree: Vec::new(),
            tree: None,
        }
    }

    /// The call's first inputs ([`run_loop::begin`]).
    pub fn begin(&mut self, start: Start) {
        let now = (self.clock)();
        let refused = self.refused.take();
        run_loop::begin(&mut self.call, now, start, refused, self.command.as_ref());
    }

    /// The call.
    pub fn call(&self) -> &Call {
        &self.call
    }

    /// Tells the core what the helper's tree did against its limits (its
    /// control groups' events and peaks), when the call has a tree: just
    /// before the helper's exit (or loss) is handled, and at each
    /// stream's end (a descendant may still be running after the exit; a
    /// call whose helper cannot be reaped ends on its kill timer with the
    /// report of its last stream's end). A report replaces the one before.
    pub fn report_tree(&mut self) {
        if let Some(tree) = &self.tree {
            let now = (self.clock)();
            let _ = self.call.handle(now, Input::TreeReport(tree.report()));
        }
    }

    /// The call, for the one `Call::handle` call of an input. For a streamed
    /// call, the bytes forwarded since the last look are reported first, so
    /// the record counts every byte forwarded before the input that ends
    /// the call.
    pub fn call_mut(&mut self) -> &mut Call {
        if let Some(forwarded) = &self.forwarded {
            forwarded.report(&mut self.call, (self.clock)());
        }
        &mut self.call
    }

    /// The host.
    pub fn host(&self) -> &Arc<H> {
        &self.host
    }

    /// The instant now, on the owner's clock.
    pub fn now(&self) -> Instant {
        (self.clock)()
    }

    /// Whether the loop reached `Finished`.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether the streams are still listened to (not abandoned, call not
    /// finished): what is read otherwise is dropped.
    pub fn listening(&self) -> bool {
        self.listening && !self.finished
    }

    /// Exactly one `Call::handle` call for `event`; an answer to an approval or
    /// a denial goes back through `answer`.
    pub fn handle_event<R>(
        &mut self,
        now: Instant,
        event: Event<R>,
        answer: impl FnOnce(R, Result<(), CallError>),
    ) {
        if matches!(event, Event::Exited(_) | Event::ProcessLost) {
            self.published.set_pid(None);
            self.report_tree();
        }
        match run_loop::handle_event(self.call_mut(), now, event) {
            Leftover::Nothing => {}
            Leftover::Answer(reply, result) => answer(reply, result),
        }
    }

    /// Exactly one `Call::handle` call for a read of `pipe`, unless the
    /// streams are no longer listened to.
    pub fn handle_read(&mut self, now: Instant, pipe: Pipe, read: Read<'_>) {
        if self.listening() {
            if let (Some(tap), Pipe::Stderr, Read::Bytes(bytes)) = (&self.stderr_tap, pipe, read) {
                (tap.0)(bytes);
            }
            if let (Some(lines), Pipe::Stderr) = (self.published.lines(), pipe) {
                match read {
                    Read::Bytes(bytes) => lines.feed(bytes),
                    Read::End => lines.end(),
                }
            }
            if matches!(read, Read::End) {
                self.report_tree();
            }
            run_loop::handle_read(self.call_mut(), now, pipe, read);
        }
    }

    /// For an owner that reads each stream into a buffer of its own
    /// (`bufs`: stdout's, stderr's): a read of `len` bytes of `pipe`, 0 at
    /// its end, which also closes `pipes[pipe]`. Makes the one
    /// [`handle_read`](Self::handle_read) call.
    pub fn take_read<S>(
        &mut self,
        now: Instant,
        pipes: Option<&mut [Option<S>; 2]>,
        bufs: &[Vec<u8>; 2],
        (pipe, len): (Pipe, usize),
    ) {
        let read = if len == 0 {
            if let Some(pipes) = pipes {
                pipes[pipe as usize] = None;
            }
            Read::End
        } else {
            // `len` came from a read into this very buffer.
            Read::Bytes(bufs[pipe as usize].get(..len).unwrap_or_default())
        };
        self.handle_read(now, pipe, read);
    }

    /// Carries out every queued action, in order; `true` once the call
    /// finished (the outcome is published, the record kept, the call let
    /// go of). Only an audit write awaits: it runs through
    /// [`Effects::unblock`] and is done before the next action, so events
    /// stay in order. The state is published before each action (a caller
    /// who sees the card also sees `awaiting_approval`) and after the last.
    pub async fn carry_out_actions(&mut self, effects: &mut impl Effects) -> bool {
        while let Some(action) = self.call.poll_action() {
            self.published.set_state(self.call.state());
            #[cfg(feature = "tracing")]
            self.trace(&action);
            match action {
                Action::Audit(event) => self.audit(effects, event).await,
                Action::ShowApprovalCard(card) => self.published.show_card(card),
                Action::Spawn(order) => self.spawn(effects, order),
                Action::CloseStdin => effects.close_stdin(),
                Action::SignalGroup { pgid, signal } => {
                    crate::os::signal_group(pgid, signal);
                    // The rest of the tree: the group has had it, and a
                    // second SIGTERM is "quit now" to many programs.
                    if let Some(tree) = &self.tree {
                        tree.signal(signal, Some(pgid));
                    }
                }
                Action::AbandonStreams => self.listening = false,
                Action::Finished(outcome) => {
                    // Nothing of the tree outlives the call: whatever is
                    // left is killed and gone before the outcome is
                    // published (its empty groups are removed after).
                    if let Some(tree) = self.tree.take() {
                        tree.end();
                    }
                    self.finish(*outcome);
                    return true;
                }
                // Not reached: the check of `Action::NAMES` above this
                // `impl` stops the build of this host layer against any core with
                // more actions than the arms above.
                other => debug_assert!(false, "action `{}` is not carried out", other.name()),
            }
        }
        self.published.set_state(self.call.state());
        false
    }

    /// The `tracing` event for `action`, in the call's span: one per
    /// transition, per signal sent, per spawn and at the end; nothing the
    /// helper wrote.
    #[cfg(feature = "tracing")]
    fn trace(&self, action: &Action) {
        use spillguard_core::AuditKind;
        let span = &self.span;
        match action {
            Action::Audit(event) => {
                if let AuditKind::Transition { from, to } = &event.kind {
                    tracing::debug!(parent: span, from = from.as_str(), to = to.as_str(), "transition");
                }
            }
            Action::SignalGroup { pgid, signal } => {
                tracing::info!(parent: span, pgid, signal = signal.number(), "signal sent to the group");
            }
            Action::Finished(outcome) => {
                let record = &outcome.record;
                if let Some(code) = record.exit_status {
                    span.record("process.exit.code", code);
                }
                tracing::info!(
                    parent: span,
                    spillguard.state = record.state.as_str(),
                    spillguard.stderr.bytes_seen = record.stderr_bytes_seen,
                    spillguard.stderr.bytes_retained = record.stderr_bytes_retained,
                    spillguard.stderr.truncated = record.stderr_truncated,
                    process.exit.code = record.exit_status,
                    process.exit.signal = record.exit_signal,
                    "call finished"
                );
            }
            // Card, spawn, stdin and abandoned streams: no event of their own.
            _ => {}
        }
    }

    /// Writes `event` to the host's sink, if any, where the runtime runs
    /// blocking work; a failure is counted and told to the core (which
    /// fails the call closed before dispatch).
    async fn audit(&mut self, effects: &mut impl Effects, event: AuditEvent) {
        let state = self.host.state();
        let Some(sink) = state.audit_sink() else {
            return;
        };
        let span = self.call.settings().trace.clone();
        let written = effects
            .unblock(move || sink.write_in_span(&event, span.as_ref()))
            .await;
        let failure = match written {
            Some(Ok(())) => return,
            Some(Err(error)) => state.audit_failed(error),
            None => {
                state.audit_failed("the audit write could not run: the runtime is shutting down")
            }
        };
        let now = (self.clock)();
        let _ = self.call.handle(now, Input::AuditFailed(failure));
    }

    /// Spawns the helper; its group is listed with the process's
    /// supervisor ([`crate::host_death`]) unless the host opted out.
    fn spawn(&mut self, effects: &mut impl Effects, order: SpawnOrder) {
        let mut confined = None;
        if let Some(command) = self.command.as_mut() {
            let program = if command.shell {
                std::path::PathBuf::from("/bin/sh")
            } else {
                std::path::PathBuf::from(&command.program)
            };
            let search = command.search_path();
            let confinement = &order.confinement;
            // Every helper is spawned by the host layer, so that it gets the
            // descriptors the call gives it and no other, whatever the
            // host left open; one with nothing to confine takes no other
            // step.
            let prepared = if confinement.is_empty() {
                Ok(crate::confine::unbounded(confinement.wants_tree()))
            } else {
                crate::confine::prepare(
                    confinement,
                    &program,
                    search.as_deref(),
                    command.cwd.as_deref(),
                )
            };
            match prepared {
                Ok(mut prepared) => {
                    prepared.child.new_session |= command.new_session;
                    command.confine(prepared.child);
                    confined = Some((prepared.tree, prepared.enforcement));
                }
                Err(refusal) => {
                    // Fail closed: nothing runs.
                    let now = (self.clock)();
                    let _ = self.call.handle(
                        now,
                        Input::SpawnFailed {
                            kind: io::ErrorKind::Unsupported,
                            message: refusal,
                        },
                    );
                    return;
                }
            }
        }
        let options = self.host.state().options();
        let (pipe_size, watch) = (options.pipe_size, options.kill_helpers_on_host_death);
        // Past its deadline, its grace and a second more, the call has
        // ended, unless the host is stopped or wedged: the supervisor ends
        // it then.
        let last = order.ends_within;
        if watch && let Some((Some(tree), _)) = &confined {
            // Before the helper runs: its groups are known to the
            // supervisor however soon the host dies or is stopped.
            for parent in tree.parents() {
                crate::host_death::watch_parent(parent);
            }
            self.watched_tree = tree.dirs().map(std::path::Path::to_path_buf).collect();
            if let Some(last) = last {
                crate::host_death::watch_tree(&self.watched_tree, last);
            }
            // The CPU time of the whole tree, not of each process only
            // (each process still has its `RLIMIT_CPU`).
            if let (Some(seconds), Some(v2)) = (order.confinement.limits.cpu_seconds, tree.v2()) {
                crate::host_death::watch_cpu(v2, seconds);
            }
        }
        let watched = &mut self.watched;
        run_loop::spawn(&mut self.call, self.command.take(), self.clock, |command| {
            let spawned = effects.spawn(command, pipe_size);
            if watch && let Ok((pgid, _)) = &spawned {
                crate::host_death::watch(*pgid, last);
                *watched = Some(*pgid);
            }
            spawned
        });
        if let Some(pid) = self.call.live_group() {
            self.published.set_pid(Some(pid));
            if let Some((tree, enforcement)) = confined {
                self.tree = tree.map(crate::confine::Tree::new);
                let now = (self.clock)();
                let _ = self.call.handle(now, Input::Enforcement(enforcement));
            }
        }
        if let Some(forwarded) = &self.forwarded
            && let Some(streams) = effects.take_streams(forwarded)
        {
            self.published.hand_out_streams(streams);
        }
        #[cfg(feature = "tracing")]
        if let Some(pgid) = self.call.live_group() {
            self.span.record("process.pid", pgid);
            tracing::debug!(parent: &self.span, process.pid = pgid, "helper spawned in its own group");
        }
    }

    /// After `Finished`: hands the read ends the call stopped listening to
    /// (an escaped descendant still holds their write ends) to the host's
    /// drainer ([`crate::leftover_pipes`]), which reads and drops them for a
    /// bounded time.
    pub fn hand_over_leftovers(&self, pipes: impl IntoIterator<Item = std::os::fd::OwnedFd>) {
        for pipe in pipes {
            self.host.state().leftovers().adopt(pipe);
        }
    }

    fn finish(&mut self, outcome: Outcome) {
        self.finished = true;
        if let Some(lines) = self.published.lines() {
            lines.end();
        }
        self.host.state().record_finished(outcome.record.clone());
        // The host stops counting the call while the outcome is published,
        // under the lock of what is published: a caller that saw the end
        // sees `live_calls` without the call, and one that saw the host
        // idle finds the outcome there.
        let (host, id) = (&self.host, self.id);
        self.published.finish_then(outcome, || host.call_ended(id));
        self.uncounted = true;
        if Arc::strong_count(&self.published) == 1 {
            // No handle is left to take the outcome: its retained text goes
            // now, and its share of the pool with it, not when a drain of
            // what an escaped descendant still writes ends.
            self.published.discard_outcome();
        }
        self.release();
    }

    /// Lets go of the call (once): waiters see that nothing changes any
    /// more, and the host stops counting it as live.
    fn release(&mut self) {
        if let Some(pgid) = self.watched.take() {
            crate::host_death::release(pgid);
        }
        if !self.watched_tree.is_empty() {
            crate::host_death::release_tree(&std::mem::take(&mut self.watched_tree));
        }
        if !self.released {
            self.released = true;
            // The host stops counting the call before its waiters wake, so
            // a caller that saw the end also sees `live_calls` without it.
            self.stop_counting();
            self.published.owner_ended();
            if let Some(lines) = self.published.lines() {
                lines.end();
            }
        }
    }

    /// The host stops counting the call as live (once).
    fn stop_counting(&mut self) {
        if !self.uncounted {
            self.uncounted = true;
            self.host.call_ended(self.id);
        }
    }
}

impl<H: HostLink, W: Wake> Drop for OwnerCore<H, W> {
    /// The one policy for an owner that ends before its call finished: kill
    /// the helper's group while the call answers for it (its leader not
    /// known to be reaped, or a stream still open), then let go of the
    /// call.
    fn drop(&mut self) {
        if !self.finished
            && let Some(pgid) = self.call.live_group()
        {
            crate::os::signal_group(pgid, Signal::Kill);
        }
        self.release();
    }
}
