//! [`BlockingHost`]: configuration, the retention pool, the audit sink,
//! and the registry of live calls, for owners that are threads.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitStatus;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::Mailbox;
use super::handle::{OwnerPanic, Published};
use super::{BlockingCallHandle, Command, Event, ThreadDriver};
use crate::host_state::HostState;
use crate::leftover_pipes::ThreadLeftovers;
use crate::output::{Output, status_of};
use crate::owner::{HostLink, Prepared};
use crate::{
    Approval, CallBuilder, CallRequest, HelperCommand, HostError, HostOptions, Launch,
    LeftoverStats, Resolved, ShutdownReport,
};
use spillguard_core::{
    CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config, DebugGrant,
    DebugGrantError, Input, Outcome, RetentionPool,
};

/// Runs helper calls for one process: holds the validated [`Config`], the
/// process-wide [`RetentionPool`], the audit sink and the live calls.
///
/// Cheap to clone: clones share everything. Each call keeps what it needs
/// of the host, so dropping the last clone ends no call: every live call
/// runs to its end and writes its record. [`shutdown`](Self::shutdown)
/// cancels the live calls (TERM to each group, the grace, KILL);
/// [`shutdown_and_wait`](Self::shutdown_and_wait) also waits for their
/// records.
pub struct BlockingHost<D: ThreadDriver> {
    shared: Arc<BlockingShared>,
    driver: PhantomData<fn() -> D>,
}

impl<D: ThreadDriver> Clone for BlockingHost<D> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            driver: PhantomData,
        }
    }
}

impl<D: ThreadDriver> fmt::Debug for BlockingHost<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingHost")
            .field("shared", &self.shared)
            .finish()
    }
}

/// What the clones of a [`BlockingHost`] and the owners of its calls
/// share: the runtime-free state and the wake-up of a call's end.
pub struct BlockingShared {
    state: HostState<Mailbox>,
    /// Taken between a call leaving the registry and `call_ended`, so that
    /// [`BlockingHost::shutdown`] cannot miss the notification.
    ended: Mutex<()>,
    call_ended: Condvar,
    /// How the calls' spans are made (the driver's adapter's).
    #[cfg(feature = "tracing")]
    call_span: crate::call_span::SpanMaker,
}

impl fmt::Debug for BlockingShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.state.fmt(f)
    }
}

impl HostLink for BlockingShared {
    type Live = Mailbox;

    fn state(&self) -> &HostState<Mailbox> {
        &self.state
    }

    fn call_ended(&self, id: u64) {
        self.state.deregister(id);
        drop(self.lock_ended());
        self.call_ended.notify_all();
    }

    fn cancel(live: &Mailbox, reason: CancelReason) {
        let _ = live.send(Event::Command(Command::Input(Input::Cancel(reason))));
    }

    #[cfg(feature = "tracing")]
    fn call_span(&self) -> crate::call_span::SpanMaker {
        self.call_span
    }

    fn debug(live: &Mailbox, grant: Option<DebugGrant>) {
        let _ = live.send(Event::Command(Command::Input(
            grant.map_or(Input::DebugRevoked, Input::DebugGranted),
        )));
    }
}

impl<D: ThreadDriver> BlockingHost<D> {
    /// A host for `config` (validated here) run with `options`.
    pub fn new(config: Config, options: HostOptions) -> Result<Self, HostError> {
        Ok(Self {
            shared: Arc::new(BlockingShared {
                state: HostState::new(config, options, ThreadLeftovers)?,
                ended: Mutex::new(()),
                call_ended: Condvar::new(),
                #[cfg(feature = "tracing")]
                call_span: D::call_span,
            }),
            driver: PhantomData,
        })
    }

    fn state(&self) -> &HostState<Mailbox> {
        self.shared.state()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.state().config()
    }

    /// The options in force.
    pub fn options(&self) -> &HostOptions {
        self.state().options()
    }

    /// The process-wide pool every call's stderr draws from.
    pub fn pool(&self) -> &RetentionPool {
        self.state().pool()
    }

    /// The session calls belong to unless they name their own
    /// ([`HostOptions::session_id`], or one drawn when the host was made).
    pub fn session_id(&self) -> &str {
        self.state().session_id()
    }

    /// The settings a call of `kind` started now gets: [`CallSettings::action`]
    /// or [`CallSettings::discovery`] under the config, with the host's
    /// options and its debug grant, if one is in force.
    pub fn settings_for(&self, kind: CallKind) -> CallSettings {
        self.state().call_settings(kind, Instant::now())
    }

    /// A call of `program`, to describe further and then
    /// [`run`](CallBuilder::run) (blocking until its outcome) or
    /// [`start`](CallBuilder::start). No shell is involved.
    pub fn command(&self, program: impl Into<OsString>) -> CallBuilder<'_, Self> {
        CallBuilder::on(self, HelperCommand::new(program))
    }

    /// A call of `script` run by `/bin/sh -c`.
    pub fn shell(&self, script: impl Into<OsString>) -> CallBuilder<'_, Self> {
        CallBuilder::on(self, HelperCommand::shell_script(script))
    }

    /// A call of `command`, a description made beforehand.
    pub fn call(&self, command: HelperCommand) -> CallBuilder<'_, Self> {
        CallBuilder::on(self, command)
    }

    /// Starts a call of `command` described by `spec`, with the settings of
    /// [`settings_for`](Self::settings_for)`(spec.kind)`; the builder
    /// ([`command`](Self::command)) fills `spec` in for you.
    ///
    /// Returns at once; the call runs on its own owner thread. The command
    /// is checked first: an invalid one ends `failed_before_dispatch`, as
    /// does a program that cannot be spawned. With [`Approval::Required`],
    /// the card is shown and nothing runs until [`BlockingCallHandle::approve`].
    pub fn start(
        &self,
        spec: CallSpec,
        command: HelperCommand,
        approval: Approval,
    ) -> BlockingCallHandle {
        self.call(command).spec(spec).approval(approval).start()
    }

    /// Grants debug for `duration` (at most an hour): calls started under
    /// it, and calls running when it is given, retain up to
    /// `per_call_bytes` of stderr (at most the config's
    /// `debug_ceiling_bytes`) and their records say `debug: true`. A
    /// running call keeps what it retained and grows with the next bytes
    /// (what it dropped before stays dropped and counted); when the grant
    /// ends, what every call under it retains shrinks back to the normal
    /// budget. A new grant replaces the previous one, for running calls
    /// too. There is no switch that turns capture off.
    pub fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.shared
            .grant_debug(Instant::now(), duration, per_call_bytes)
    }

    /// Ends the debug grant now: for calls started from now on, and for
    /// running calls under it, whose retained stderr shrinks back to the
    /// normal budget at once (their records still say `debug: true`).
    pub fn revoke_debug(&self) {
        self.shared.revoke_debug();
    }

    fn launch_resolved(&self, resolved: Resolved, owner_runs: OwnerRuns) -> BlockingCallHandle {
        let published = Arc::new(Published::new(Condvar::new()));
        let (mailbox, inbox) = match Mailbox::open() {
            Ok((mailbox, inbox)) => (mailbox, Ok(inbox)),
            Err(error) => (Mailbox::closed(), Err(error)),
        };
        let Prepared {
            call_id,
            start,
            core,
        } = Prepared::prepare(
            &self.shared,
            resolved,
            mailbox.clone(),
            published.clone(),
            Instant::now,
        );
        let inbox = match inbox {
            Ok(inbox) => inbox,
            Err(error) => {
                let owner = D::owner(core, None, mailbox.clone());
                D::fail(
                    owner,
                    start,
                    format!("cannot make the call's mailbox: {error}"),
                );
                return BlockingCallHandle::new(call_id, mailbox, published, OwnerPanic::default());
            }
        };
        let owner = D::owner(core, Some(inbox), mailbox.clone());
        // The job takes the owner from here; if no thread can run the job,
        // the owner is still here to end the call.
        let slot = Arc::new(Mutex::new(Some(owner)));
        let owner_panic = OwnerPanic::default();
        let (job_slot, panic_slot) = (slot.clone(), owner_panic.clone());
        let job = move || {
            let Some(mut owner) = take(&job_slot) else {
                return;
            };
            // The panic is kept before the owner is dropped: a handle woken
            // by the owner's end finds it.
            let ran = panic::catch_unwind(AssertUnwindSafe(|| D::run(&mut owner, start)));
            if let Err(panic) = ran {
                *panic_slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(panic);
            }
        };
        let started = match owner_runs {
            OwnerRuns::OnWorker => D::spawn(Box::new(job)),
            OwnerRuns::Here => {
                job();
                Ok(())
            }
        };
        if let Err(error) = started
            && let Some(owner) = take(&slot)
        {
            D::fail(
                owner,
                start,
                format!("cannot start the call's owner thread: {error}"),
            );
        }
        BlockingCallHandle::new(call_id, mailbox, published, owner_panic)
    }

    /// Cancels every live call and returns how many were asked to stop,
    /// without waiting: each owner carries on with the stop (SIGTERM to
    /// its group, the grace, SIGKILL) and writes its record. Calls started
    /// afterwards are cancelled before dispatch.
    /// [`shutdown_and_wait`](Self::shutdown_and_wait) also waits for them.
    pub fn shutdown(&self) -> usize {
        self.shared.cancel_all().len()
    }

    /// Cancels every live call and waits at most `timeout` until each has
    /// finished and its record is written. Calls started afterwards are
    /// cancelled before dispatch.
    pub fn shutdown_and_wait(&self, timeout: Duration) -> ShutdownReport {
        let deadline = Instant::now().checked_add(timeout);
        let targets = self.shared.cancel_all();
        let ids: HashSet<u64> = targets.iter().map(|&(id, _)| id).collect();
        let shared = &self.shared;
        let mut ended = shared.lock_ended();
        while self.state().still_live(&ids) > 0 {
            let left = deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                break;
            }
            ended = shared
                .call_ended
                .wait_timeout(ended, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let unfinished = self.state().still_live(&ids);
        ShutdownReport {
            finished: ids.len() - unfinished,
            unfinished,
        }
    }

    /// How many calls are running (their record not yet written).
    pub fn live_calls(&self) -> usize {
        self.state().live_calls()
    }

    /// The records of finished calls, oldest first (at most
    /// [`HostOptions::finished_records_kept`]). A call whose handle was
    /// dropped early is here too.
    pub fn finished_records(&self) -> Vec<CallRecord> {
        self.state().finished_records()
    }

    /// How many audit events the sink failed to write.
    pub fn audit_failures(&self) -> u64 {
        self.state().audit_failures()
    }

    /// The after-life of finished calls: how many pipes escaped
    /// descendants still hold that the host reads and drops now, and how
    /// many it closed at [`HostOptions::leftover_drain_max`] or
    /// [`HostOptions::leftover_pipes_max`] (the escapee's next write to a
    /// closed pipe gets SIGPIPE or EPIPE) or saw end.
    pub fn leftover_pipes(&self) -> LeftoverStats {
        self.state().leftover_pipes()
    }
}

/// Starts the call; `start()` and `run()` are the builder's own.
impl<D: ThreadDriver> Launch for BlockingHost<D> {
    type Handle = BlockingCallHandle;

    fn launch(&self, request: CallRequest) -> BlockingCallHandle {
        self.launch_resolved(
            self.state().resolve(request, Instant::now()),
            OwnerRuns::OnWorker,
        )
    }
}

impl<D: ThreadDriver> BlockingHost<D> {
    /// Runs the call to its end on this thread and returns its handle,
    /// finished: what `run`, `output` and `status` wait for anyway, without
    /// handing the call to a worker and back (two thread wake-ups, a
    /// noticeable part of a short helper's spawn). Cancellation, the
    /// host's shutdown and its drop reach the call as they would on a
    /// worker: through its mailbox.
    fn launch_here(&self, request: CallRequest) -> BlockingCallHandle {
        self.launch_resolved(
            self.state().resolve(request, Instant::now()),
            OwnerRuns::Here,
        )
    }
}

/// Where a call's owner runs.
#[derive(Debug, Clone, Copy)]
enum OwnerRuns {
    /// On a worker of the driver's: the caller gets the handle at once.
    OnWorker,
    /// On the caller's thread, to the call's end.
    Here,
}

impl<'h, D: ThreadDriver> CallBuilder<'h, BlockingHost<D>> {
    /// Starts the call and blocks until its [`Outcome`]: the exit status,
    /// the record and the bounded stderr.
    ///
    /// No handle reaches this call's streams: a piped stdout is
    /// captured within its budget and a piped stdin is at end-of-file, as
    /// `std::process::Command::output` makes them.
    pub fn run(self) -> Outcome {
        self.run_here().wait()
    }

    /// Runs the call to its end and returns its [`Output`]: the exit
    /// status, stdout whole, the bounded stderr and the record; the
    /// `std::process::Command::output` of spillguard. A helper that could
    /// not be spawned, a call that ended before its helper exited, and a
    /// stdout cut at its budget (unless
    /// [`allow_stdout_truncation`](CallBuilder::allow_stdout_truncation))
    /// are errors.
    pub fn output(self) -> io::Result<Output> {
        Output::of(self.run_here().wait())
    }

    /// Runs the call to its end and returns how its helper ended; the
    /// `std::process::Command::status` of spillguard. Errors as
    /// [`output`](Self::output), but a cut stdout is none.
    pub fn status(self) -> io::Result<ExitStatus> {
        status_of(self.run_here().wait())
    }

    /// The call run to its end on this thread (see
    /// [`BlockingHost::launch_here`]).
    fn run_here(self) -> BlockingCallHandle {
        let (host, request) = self.run_to_end().into_parts();
        host.launch_here(request)
    }

    /// Starts the call and returns its handle at once, to approve, deny,
    /// cancel or wait on: the `std::process::Command::spawn` of
    /// spillguard.
    #[doc(alias = "spawn")]
    pub fn start(self) -> BlockingCallHandle {
        let (host, request) = self.into_parts();
        host.launch(request)
    }
}

/// The process-wide host of `D`, as the host of a [`CallBuilder`]: an
/// adapter's `Command` is `CallBuilder<'static, DefaultHost<D>>`, a call
/// that needs no `Host` of its own.
pub struct DefaultHost<D>(PhantomData<fn() -> D>);

impl<D> fmt::Debug for DefaultHost<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DefaultHost")
    }
}

impl<D: ThreadDriver> CallBuilder<'static, DefaultHost<D>> {
    /// A call of `program` on the process-wide host, to describe further
    /// with every builder method (`.arg`, `.env`, `.deadline`, ...) and
    /// run with [`output`](Self::output), [`status`](Self::status) or
    /// [`spawn`](Self::spawn). No shell is involved.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self::on_default(HelperCommand::new(program))
    }

    /// A call of `command` on the process-wide host.
    pub fn on_default(command: HelperCommand) -> Self {
        // A value of no size: leaking it allocates nothing.
        CallBuilder::on(Box::leak(Box::new(DefaultHost(PhantomData))), command)
    }

    /// Starts the call on the process-wide host and returns its handle;
    /// the `std::process::Command::spawn` of spillguard. An error only
    /// when that host cannot be made.
    pub fn spawn(self) -> io::Result<BlockingCallHandle> {
        Ok(D::default_host()?.launch(self.into_request()))
    }

    /// Runs the call on the process-wide host to its end and returns its
    /// [`Output`]: the exit status, stdout whole, the bounded stderr and
    /// the record. A helper that could not be spawned, a call that ended
    /// before its helper exited, and a stdout cut at its budget (unless
    /// [`allow_stdout_truncation`](CallBuilder::allow_stdout_truncation))
    /// are errors.
    pub fn output(self) -> io::Result<Output> {
        Output::of(self.run_here()?.wait())
    }

    /// Runs the call on the process-wide host and returns how its helper
    /// ended.
    pub fn status(self) -> io::Result<ExitStatus> {
        status_of(self.run_here()?.wait())
    }

    /// The call run to its end on this thread, on the process-wide host.
    fn run_here(self) -> io::Result<BlockingCallHandle> {
        Ok(D::default_host()?.launch_here(self.run_to_end().into_request()))
    }
}

/// What a shared slot holds, taken out of it.
fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

impl BlockingShared {
    fn lock_ended(&self) -> MutexGuard<'_, ()> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
