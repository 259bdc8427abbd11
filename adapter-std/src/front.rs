//! The types a user names: [`Host`], [`CallBuilder`], [`Command`],
//! [`CallHandle`] and [`Canceller`], each a wrapper of the host layer's
//! blocking type for this crate's threads, so that every signature in the
//! docs names them (`fn start(self) -> CallHandle`). Every method passes
//! its arguments on; the behaviour is the host layer's.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use spillguard_core::{
    ApprovalCard, CallError, CallKind, CallRecord, CallSettings, CallSpec, Config, DebugGrant,
    DebugGrantError, Outcome, RetentionPool, State,
};
use spillguard_host::blocking::{BlockingCallHandle, BlockingCanceller, BlockingHost, DefaultHost};
use spillguard_host::{
    Approval, CallRequest, HelperCommand, HostError, HostOptions, Launch, LeftoverStats, Output,
    ShutdownReport,
};

use crate::owner::StdThreads;
use crate::{HelperStdin, HelperStdout};

/// Runs helper calls for one process: holds the validated
/// [`Config`](crate::proto::Config), the process-wide
/// [`RetentionPool`](crate::proto::RetentionPool), the audit sink and the live
/// calls. Each call's owner is a thread of its own, taken from a pool of
/// kept threads.
///
/// Cheap to clone: clones share everything. Each call keeps what it needs
/// of the host, so dropping the last clone ends no call: every live call
/// runs to its end and writes its record. [`shutdown`](Host::shutdown)
/// cancels the live calls (TERM to each group, the grace, KILL),
/// [`shutdown_and_wait`](Host::shutdown_and_wait) waits for their records
/// too.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_std::{Host, HostOptions};
/// use spillguard_std::proto::{Config, State};
///
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let outcome = host.shell("echo result; echo warning 1>&2").run();
/// assert_eq!(outcome.record.state, State::Completed);
/// assert_eq!(outcome.record.stdout_bytes_seen, 7);
/// assert_eq!(outcome.agent_excerpt(), "warning\n");
/// assert_eq!(host.shutdown_and_wait(Duration::from_secs(1)).unfinished, 0);
/// # Ok::<(), spillguard_std::HostError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Host(BlockingHost<StdThreads>);

impl Host {
    /// A host for `config` (validated here) run with `options`.
    pub fn new(config: Config, options: HostOptions) -> Result<Self, HostError> {
        BlockingHost::new(config, options).map(Self)
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.0.config()
    }

    /// The options in force.
    pub fn options(&self) -> &HostOptions {
        self.0.options()
    }

    /// The process-wide pool every call's stderr draws from.
    pub fn pool(&self) -> &RetentionPool {
        self.0.pool()
    }

    /// The session calls belong to unless they name their own
    /// ([`HostOptions::session_id`], or one drawn when the host was made).
    pub fn session_id(&self) -> &str {
        self.0.session_id()
    }

    /// The settings a call of `kind` started now gets:
    /// [`CallSettings::action`] or [`CallSettings::discovery`] under the
    /// config, with the host's options and its debug grant, if one is in
    /// force.
    pub fn settings_for(&self, kind: CallKind) -> CallSettings {
        self.0.settings_for(kind)
    }

    /// A call of `program`, to describe further and then
    /// [`run`](CallBuilder::run) (blocking until its outcome) or
    /// [`start`](CallBuilder::start). No shell is involved.
    pub fn command(&self, program: impl Into<OsString>) -> CallBuilder<'_> {
        CallBuilder(self.0.command(program))
    }

    /// A call of `script` run by `/bin/sh -c`.
    pub fn shell(&self, script: impl Into<OsString>) -> CallBuilder<'_> {
        CallBuilder(self.0.shell(script))
    }

    /// A call of `command`, a description made beforehand.
    pub fn call(&self, command: HelperCommand) -> CallBuilder<'_> {
        CallBuilder(self.0.call(command))
    }

    /// Starts a call of `command` described by `spec`, with the settings of
    /// [`settings_for`](Self::settings_for)`(spec.kind)`; the builder
    /// ([`command`](Self::command)) fills `spec` in for you.
    ///
    /// Returns at once; the call runs on its own owner thread. The command
    /// is checked first: an invalid one ends `failed_before_dispatch`, as
    /// does a program that cannot be spawned. With [`Approval::Required`],
    /// the card is shown and nothing runs until [`CallHandle::approve`].
    pub fn start(&self, spec: CallSpec, command: HelperCommand, approval: Approval) -> CallHandle {
        CallHandle(self.0.start(spec, command, approval))
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
        self.0.grant_debug(duration, per_call_bytes)
    }

    /// Ends the debug grant now: for calls started from now on, and for
    /// running calls under it, whose retained stderr shrinks back to the
    /// normal budget at once (their records still say `debug: true`).
    pub fn revoke_debug(&self) {
        self.0.revoke_debug();
    }

    /// Cancels every live call and returns how many were asked to stop,
    /// without waiting: each owner carries on with the stop (SIGTERM to
    /// its group, the grace, SIGKILL) and writes its record. Calls started
    /// afterwards are cancelled before dispatch.
    /// [`shutdown_and_wait`](Self::shutdown_and_wait) also waits for them.
    ///
    /// Dropping the host does none of this: each call keeps what it needs
    /// of the host and runs to its end.
    pub fn shutdown(&self) -> usize {
        self.0.shutdown()
    }

    /// Cancels every live call and waits at most `timeout` until each has
    /// finished and its record is written. Calls started afterwards are
    /// cancelled before dispatch.
    pub fn shutdown_and_wait(&self, timeout: Duration) -> ShutdownReport {
        self.0.shutdown_and_wait(timeout)
    }

    /// How many calls are running (their record not yet written).
    pub fn live_calls(&self) -> usize {
        self.0.live_calls()
    }

    /// The records of finished calls, oldest first (at most
    /// [`HostOptions::finished_records_kept`]). A call whose handle was
    /// dropped early is here too.
    pub fn finished_records(&self) -> Vec<CallRecord> {
        self.0.finished_records()
    }

    /// How many audit events the sink failed to write.
    pub fn audit_failures(&self) -> u64 {
        self.0.audit_failures()
    }

    /// The after-life of finished calls: how many pipes escaped
    /// descendants still hold that the host reads and drops now, and how
    /// many it closed at [`HostOptions::leftover_drain_max`] or
    /// [`HostOptions::leftover_pipes_max`] (the escapee's next write to a
    /// closed pipe gets SIGPIPE or EPIPE) or saw end.
    pub fn leftover_pipes(&self) -> LeftoverStats {
        self.0.leftover_pipes()
    }
}

/// Starts a described call (for code written over any host, such as a
/// test double); a caller uses the builder's `start()`.
impl Launch for Host {
    type Handle = CallHandle;

    fn launch(&self, request: CallRequest) -> CallHandle {
        CallHandle(self.0.launch(request))
    }
}

/// A call being described, from [`Host::command`], [`Host::shell`] or
/// [`Host::call`]; ends with [`run`](Self::run), [`output`](Self::output),
/// [`status`](Self::status) or [`start`](Self::start).
///
/// Every field of the call has a default: a fresh `call_id` (`c_` and 16
/// hex digits), the host's session, kind `action`, the program's file name
/// as `action`, the program as `target`, the shell-quoted command line as
/// `summary` (so an approval card shows exactly what runs), no approval,
/// and the host's settings.
#[derive(Debug)]
#[must_use = "a call runs only once `run()`, `output()` or `start()` is called"]
pub struct CallBuilder<'h>(spillguard_host::CallBuilder<'h, BlockingHost<StdThreads>>);

impl CallBuilder<'_> {
    spillguard_host::call_builder_methods!(forward);

    /// The request as described so far.
    pub fn request(&self) -> &CallRequest {
        self.0.request()
    }

    /// Starts the call and blocks until its [`Outcome`]: the exit status,
    /// the record and the bounded stderr.
    ///
    /// No handle reaches this call's streams: a piped stdout is
    /// captured within its budget and a piped stdin is at end-of-file, as
    /// `std::process::Command::output` makes them.
    pub fn run(self) -> Outcome {
        self.0.run()
    }

    /// Runs the call to its end and returns its [`Output`]: the exit
    /// status, stdout whole, the bounded stderr and the record; the
    /// `std::process::Command::output` of spillguard. A helper that could
    /// not be spawned, a call that ended before its helper exited, and a
    /// stdout cut at its budget (unless
    /// [`allow_stdout_truncation`](Self::allow_stdout_truncation)) are
    /// errors.
    pub fn output(self) -> io::Result<Output> {
        self.0.output()
    }

    /// Runs the call to its end and returns how its helper ended; the
    /// `std::process::Command::status` of spillguard. Errors as
    /// [`output`](Self::output), but a cut stdout is none.
    pub fn status(self) -> io::Result<ExitStatus> {
        self.0.status()
    }

    /// Starts the call and returns its handle at once, to approve, deny,
    /// cancel or wait on: the `std::process::Command::spawn` of
    /// spillguard.
    #[doc(alias = "spawn")]
    pub fn start(self) -> CallHandle {
        CallHandle(self.0.start())
    }
}

/// A call that needs no [`Host`] of its own: it runs on a process-wide
/// host, made at the first such call with the default configuration and
/// kept. Every builder method of `host.command(..)` works on it; it ends
/// with `output()`, `status()` or `spawn()`, as `std::process::Command`
/// does. `output()` fails on a stdout cut at its budget unless asked not
/// to ([`stdout_budget`](Self::stdout_budget) raises the budget,
/// [`allow_stdout_truncation`](Self::allow_stdout_truncation) accepts a
/// cut).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use spillguard_std::Command;
///
/// # fn main() -> std::io::Result<()> {
/// let output = Command::new("sh")
///     .args(["-c", "echo out; echo err 1>&2; exit 3"])
///     .deadline(Duration::from_secs(5))
///     .output()?;
/// assert_eq!(output.status.code(), Some(3));
/// assert_eq!(output.stdout, b"out\n");
/// assert_eq!(output.stderr, b"err\n");
/// assert_eq!(output.record().stdout_bytes_seen, 4);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a call runs only once `output()`, `status()` or `spawn()` is called"]
pub struct Command(spillguard_host::CallBuilder<'static, DefaultHost<StdThreads>>);

impl Command {
    /// A call of `program` on the process-wide host, to describe further
    /// with every builder method (`.arg`, `.env`, `.deadline`, ...) and
    /// run with [`output`](Self::output), [`status`](Self::status) or
    /// [`spawn`](Self::spawn). No shell is involved.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self(spillguard_host::CallBuilder::<
            'static,
            DefaultHost<StdThreads>,
        >::new(program))
    }

    /// A call of `command`, a description made beforehand, on the
    /// process-wide host.
    pub fn on_default(command: HelperCommand) -> Self {
        Self(spillguard_host::CallBuilder::<
            'static,
            DefaultHost<StdThreads>,
        >::on_default(command))
    }

    spillguard_host::call_builder_methods!(forward);

    /// The request as described so far.
    pub fn request(&self) -> &CallRequest {
        self.0.request()
    }

    /// Starts the call on the process-wide host and returns its handle;
    /// the `std::process::Command::spawn` of spillguard. An error only
    /// when that host cannot be made.
    pub fn spawn(self) -> io::Result<CallHandle> {
        self.0.spawn().map(CallHandle)
    }

    /// Runs the call on the process-wide host to its end and returns its
    /// [`Output`]: the exit status, stdout whole, the bounded stderr and
    /// the record. A helper that could not be spawned, a call that ended
    /// before its helper exited, and a stdout cut at its budget (unless
    /// [`allow_stdout_truncation`](Self::allow_stdout_truncation)) are
    /// errors.
    pub fn output(self) -> io::Result<Output> {
        self.0.output()
    }

    /// Runs the call on the process-wide host and returns how its helper
    /// ended. Errors as [`output`](Self::output), but a cut stdout is
    /// none.
    pub fn status(self) -> io::Result<ExitStatus> {
        self.0.status()
    }
}

/// The caller's handle on a running call, from the builder's
/// [`start`](CallBuilder::start): approve or deny it once its card is
/// shown, cancel it, take a streamed call's streams, wait for its outcome.
/// The call runs on its own owner thread whatever the handle does.
///
/// # Dropping the handle
///
/// Dropping the handle before the call finished (and, for a streamed call,
/// both its streams) is a client disconnect; the record says
/// `client_disconnected: true`. `run()` blocks until the outcome, so on
/// std it is the handle from `start()` that a caller drops.
///
/// * With the builder's [`kill_on_drop(true)`](CallBuilder::kill_on_drop),
///   the call stops as for the
///   [`Cancel`](crate::proto::DisconnectPolicy::Cancel) policy: the
///   helper's process group gets SIGTERM, then SIGKILL after
///   `shutdown_grace` (before dispatch it ends `cancelled_before_dispatch`).
/// * Without it (the default), the host's
///   [`DisconnectPolicy`](crate::proto::DisconnectPolicy) decides: `Finish`
///   (the default) lets the helper run to its end or its deadline; `Cancel`
///   stops it as above.
///
/// Either way the owner writes the final record: it reaches the audit sink
/// and [`Host::finished_records`]. Dropping the [`Host`] is none of this:
/// the call keeps what it needs of the host.
///
/// # Examples
///
/// A streamed call ([`CallBuilder::streamed`]): its stdin and stdout are
/// the caller's.
///
/// ```
/// use std::io::{Read, Write};
/// use spillguard_std::{Host, HostOptions};
/// use spillguard_std::proto::{Config, State, StdoutMode};
///
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let call = host.command("cat").streamed().start();
/// let (mut stdin, mut stdout) = call.streams()?;
/// stdin.write_all(b"ping\n")?;
/// let mut reply = [0; 5];
/// stdout.read_exact(&mut reply)?;
/// assert_eq!(&reply, b"ping\n");
/// stdin.close(); // cat reads end-of-file and exits
/// let record = call.wait().record;
/// assert_eq!(record.state, State::Completed);
/// assert_eq!(record.stdout_mode, StdoutMode::Streamed);
/// assert_eq!((record.stdin_bytes_forwarded, record.stdout_bytes_forwarded), (5, 5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct CallHandle(BlockingCallHandle);

impl CallHandle {
    /// A streamed call's ([`CallBuilder::streamed`], or a piped
    /// [`CallBuilder::stdout`]) stdin and stdout: waits until the helper is
    /// spawned (after its approval, if it needs one), then hands out both,
    /// once. An error if the call ended before its helper ran, is not
    /// streamed, or its streams were taken.
    pub fn streams(&self) -> io::Result<(HelperStdin, HelperStdout)> {
        self.0.streams()
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        self.0.call_id()
    }

    /// The helper's pid (its process group id too) while it runs: `None`
    /// before it is spawned, once the call finished, and for a call that
    /// never spawned one.
    pub fn id(&self) -> Option<u32> {
        self.0.id()
    }

    /// The call's state as last published by its owner.
    pub fn state(&self) -> State {
        self.0.state()
    }

    /// Whether the call has ended (its outcome is ready or was taken).
    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }

    /// The approval card, once shown. It is built once and never changes.
    pub fn card(&self) -> Option<ApprovalCard> {
        self.0.card()
    }

    /// Waits at most `timeout` for the approval card. `None` if the call
    /// ended without asking for approval, or the time ran out.
    pub fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        self.0.wait_card(timeout)
    }

    /// Grants approval. An error if the call is not awaiting approval
    /// (for instance it already expired or was cancelled).
    pub fn approve(&self) -> Result<(), CallError> {
        self.0.approve()
    }

    /// Denies approval: the call ends `denied` and nothing is spawned. An
    /// error if the call is not awaiting approval.
    pub fn deny(&self) -> Result<(), CallError> {
        self.0.deny()
    }

    /// Tells the call that its approval card reached the approver (the
    /// caller wrote it where the approver reads it: an MCP server, once the
    /// `elicitation/create` request was flushed): the approval deadline
    /// then runs from now, once, so that time spent before delivery (many
    /// calls at once, a slow audit log) is not taken from the approver. A
    /// card never reported delivered expires `approval_timeout` after it
    /// was shown. Returns at once; ignored unless the call awaits approval
    /// and no delivery was reported yet.
    pub fn card_delivered(&self) {
        self.0.card_delivered();
    }

    /// Asks the call to stop. Before dispatch it ends
    /// `cancelled_before_dispatch`; after, the helper's group gets SIGTERM,
    /// then SIGKILL after the grace. Returns at once; ignored once finished.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// A cancel-only handle that can be sent to another thread (a signal
    /// handler, a UI) while this one waits.
    pub fn canceller(&self) -> Canceller {
        Canceller(self.0.canceller())
    }

    /// Waits for the call to finish and returns its outcome.
    ///
    /// A caller that cannot wait forever uses [`wait_timeout`](Self::wait_timeout);
    /// giving up (dropping the handle it returns) does not stop the owner,
    /// which finishes the call under the disconnect policy.
    ///
    /// # Panics
    ///
    /// Only if the call's owner thread panicked (a bug): its panic is
    /// resumed here.
    pub fn wait(self) -> Outcome {
        self.0.wait()
    }

    /// Waits at most `timeout`. Gives the handle back if the call has not
    /// finished by then: drop it to give up (a client disconnect; the owner
    /// carries on), or wait again.
    ///
    /// # Panics
    ///
    /// Only if the call's owner thread panicked (a bug).
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome, CallHandle> {
        self.0.wait_timeout(timeout).map_err(Self)
    }

    /// The outcome if the call has finished, else the handle back.
    ///
    /// # Panics
    ///
    /// Only if the call's owner thread panicked (a bug).
    pub fn try_outcome(self) -> Result<Outcome, CallHandle> {
        self.0.try_outcome().map_err(Self)
    }
}

/// Cancels one call from anywhere; cheap to clone.
///
/// # Examples
///
/// ```
/// use spillguard_std::{Host, HostOptions};
/// use spillguard_std::proto::{CancelReason, Config, State};
///
/// let host = Host::new(Config::default(), HostOptions::default())?;
/// let call = host.command("sleep").arg("30").start();
/// let canceller = call.canceller();
/// std::thread::spawn(move || canceller.cancel());
/// let outcome = call.wait();
/// assert_eq!(outcome.record.cancel_reason, Some(CancelReason::Requested));
/// assert!(matches!(
///     outcome.record.state,
///     State::CancelledAfterDispatch | State::CancelledBeforeDispatch
/// ));
/// # Ok::<(), spillguard_std::HostError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Canceller(BlockingCanceller);

impl Canceller {
    /// Asks the call to stop; see [`CallHandle::cancel`].
    pub fn cancel(&self) {
        self.0.cancel();
    }
}
