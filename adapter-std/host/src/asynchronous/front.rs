//! The types a user of an async adapter names, written once for smol and
//! tokio: `async_front!` makes, in the adapter's crate, `Host`,
//! `CallBuilder<'h>`, `Command`, `CallHandle`, `Canceller` and `Run`,
//! each a wrapper of this module's generic type for the adapter's runtime.
//!
//! They exist for their signatures: a user's docs show
//! `fn start(self) -> CallHandle` and `fn streams(&self) -> (HelperStdin,
//! HelperStdout)`, not `AsyncCallHandle<R>` or `<R as AsyncRuntime>::Stdin`,
//! and `run()` is a named future. Every method passes its arguments on;
//! the behaviour is the generic type's, and each method's text is here
//! (the builder's in [`call_builder_methods!`](crate::call_builder_methods)).
//! The adapter gives the docs of the types whose text is its own (`Host`,
//! `Command`, `CallHandle`, `Canceller`: what its runtime does, examples
//! in its own crate's paths).

/// Makes an async adapter's front types; see the module's docs.
#[doc(hidden)]
#[macro_export]
macro_rules! async_front {
    (
        runtime: $rt:ty,
        process: $process:literal,
        stdin: $stdin:ty,
        stdout: $stdout:ty,
        $(#[$host_meta:meta])* Host;
        $(#[$command_meta:meta])* Command;
        $(#[$handle_meta:meta])* CallHandle;
        $(#[$canceller_meta:meta])* Canceller;
    ) => {
        $(#[$host_meta])*
        ///
        /// Cheap to clone: clones share everything. Each call keeps what it
        /// needs of the host, so dropping the last clone ends no call; every
        /// live call runs to its end and writes its record.
        /// [`shutdown`](Host::shutdown) cancels the live calls,
        /// [`shutdown_and_wait`](Host::shutdown_and_wait) also waits for their
        /// records.
        #[derive(Debug, Clone)]
        pub struct Host($crate::asynchronous::AsyncHost<$rt>);

        impl Host {
            /// A host for `config` (validated here) run with `options`, whose
            /// calls run on the current runtime
            /// ([`HostError::NoRuntime`](crate::HostError::NoRuntime) where
            /// there is none: then use [`with_runtime`](Self::with_runtime)).
            pub fn new(
                config: $crate::proto::Config,
                options: $crate::HostOptions,
            ) -> ::std::result::Result<Self, $crate::HostError> {
                $crate::asynchronous::AsyncHost::new(config, options).map(Self)
            }

            /// A host whose calls run on `runtime`; it may be made, and calls
            /// started, from outside any runtime.
            pub fn with_runtime(
                config: $crate::proto::Config,
                options: $crate::HostOptions,
                runtime: impl ::std::convert::Into<$rt>,
            ) -> ::std::result::Result<Self, $crate::HostError> {
                $crate::asynchronous::AsyncHost::with_runtime(config, options, runtime).map(Self)
            }

            /// The configuration in force.
            pub fn config(&self) -> &$crate::proto::Config {
                self.0.config()
            }

            /// The options in force.
            pub fn options(&self) -> &$crate::HostOptions {
                self.0.options()
            }

            /// The runtime the calls run on.
            pub fn runtime(&self) -> &$rt {
                self.0.runtime()
            }

            /// The process-wide pool every call's stderr draws from.
            pub fn pool(&self) -> &$crate::proto::RetentionPool {
                self.0.pool()
            }

            /// The session calls belong to unless they name their own.
            pub fn session_id(&self) -> &str {
                self.0.session_id()
            }

            /// The settings a call of `kind` started now gets (the config, the
            /// host's options, its debug grant if one is in force), on the
            /// owners' clock.
            pub fn settings_for(&self, kind: $crate::proto::CallKind) -> $crate::proto::CallSettings {
                self.0.settings_for(kind)
            }

            /// A call of `program`, to describe further and then
            /// [`run`](CallBuilder::run) (a future of its outcome) or
            /// [`start`](CallBuilder::start) (its handle). No shell is involved.
            pub fn command(&self, program: impl ::std::convert::Into<::std::ffi::OsString>) -> CallBuilder<'_> {
                CallBuilder(self.0.command(program))
            }

            /// A call of `script` run by `/bin/sh -c`.
            pub fn shell(&self, script: impl ::std::convert::Into<::std::ffi::OsString>) -> CallBuilder<'_> {
                CallBuilder(self.0.shell(script))
            }

            /// A call of `command`, a description made beforehand.
            pub fn call(&self, command: $crate::HelperCommand) -> CallBuilder<'_> {
                CallBuilder(self.0.call(command))
            }

            /// Starts a call of `command` described by `spec`; the builder
            /// ([`command`](Self::command)) fills `spec` in for you.
            ///
            /// Returns at once; the call runs on its own owner task. An invalid
            /// command ends `failed_before_dispatch`, as does a program that
            /// cannot be spawned. With [`Approval::Required`](crate::Approval::Required),
            /// the card is shown and nothing runs until [`CallHandle::approve`].
            pub fn start(
                &self,
                spec: $crate::proto::CallSpec,
                command: $crate::HelperCommand,
                approval: $crate::Approval,
            ) -> CallHandle {
                CallHandle(self.0.start(spec, command, approval))
            }

            /// Grants debug for `duration` from now (on the owners' clock), up
            /// to `per_call_bytes` of stderr per call, to calls started under it
            /// and to every live call: their stderr budget grows to that, and
            /// each record says the grant it ran under.
            pub fn grant_debug(
                &self,
                duration: ::std::time::Duration,
                per_call_bytes: u64,
            ) -> ::std::result::Result<$crate::proto::DebugGrant, $crate::proto::DebugGrantError> {
                self.0.grant_debug(duration, per_call_bytes)
            }

            /// Ends the debug grant now, for calls started from now on and for
            /// running calls.
            pub fn revoke_debug(&self) {
                self.0.revoke_debug()
            }

            /// Cancels every live call and returns how many were asked to stop,
            /// without waiting: each owner carries on with the stop (SIGTERM to
            /// its group, the grace, SIGKILL) and writes its record. Calls
            /// started afterwards are cancelled before dispatch.
            /// [`shutdown_and_wait`](Self::shutdown_and_wait) also waits for them.
            ///
            /// Dropping the host does none of this: each call keeps what it
            /// needs of the host and runs to its end.
            pub fn shutdown(&self) -> usize {
                self.0.shutdown()
            }

            /// Cancels every live call and waits at most `timeout` until each
            /// has finished and its record is written. Calls started afterwards
            /// are cancelled before dispatch.
            ///
            /// # Cancel safety
            ///
            /// Every live call is cancelled on the first poll. Dropping the
            /// future after that only stops the waiting: each owner is a
            /// detached task and carries on with the stop (SIGTERM, then
            /// SIGKILL after the grace) and the record. A future never polled
            /// cancels nothing.
            pub async fn shutdown_and_wait(&self, timeout: ::std::time::Duration) -> $crate::ShutdownReport {
                self.0.shutdown_and_wait(timeout).await
            }

            /// Waits until no call is live: every call started has finished
            /// and its record is written. Calls started while it waits are
            /// waited for too.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: it only watches.
            pub async fn wait_idle(&self) {
                self.0.wait_idle().await
            }

            /// How many calls are running (their record not yet written).
            pub fn live_calls(&self) -> usize {
                self.0.live_calls()
            }

            /// The records of finished calls, oldest first (at most
            /// [`HostOptions::finished_records_kept`](crate::HostOptions::finished_records_kept)).
            /// A call whose handle was dropped early is here too.
            pub fn finished_records(&self) -> ::std::vec::Vec<$crate::proto::CallRecord> {
                self.0.finished_records()
            }

            /// How many audit events the sink failed to write.
            pub fn audit_failures(&self) -> u64 {
                self.0.audit_failures()
            }

            /// The after-life of finished calls: how many pipes escaped
            /// descendants still hold that the host reads and drops now, and
            /// how many it closed at its bounds or saw end (see
            /// [`LeftoverStats`](crate::LeftoverStats)).
            pub fn leftover_pipes(&self) -> $crate::LeftoverStats {
                self.0.leftover_pipes()
            }
        }

        /// Starts a described call (for code written over any host, such
        /// as a test double); a caller uses the builder's `start()`.
        impl $crate::Launch for Host {
            type Handle = CallHandle;

            fn launch(&self, request: $crate::CallRequest) -> CallHandle {
                CallHandle($crate::Launch::launch(&self.0, request))
            }
        }

        /// A call being described, from [`Host::command`], [`Host::shell`] or
        /// [`Host::call`]; ends with [`run`](Self::run), [`output`](Self::output),
        /// [`status`](Self::status) or [`start`](Self::start).
        ///
        /// Every field of the call has a default: a fresh `call_id` (`c_` and
        /// 16 hex digits), the host's session, kind `action`, the program's
        /// file name as `action`, the program as `target`, the shell-quoted
        /// command line as `summary` (so an approval card shows exactly what
        /// runs), no approval, and the host's settings.
        #[derive(Debug)]
        #[must_use = "a call runs only once `run()`, `output()` or `start()` is called"]
        pub struct CallBuilder<'h>($crate::CallBuilder<'h, $crate::asynchronous::AsyncHost<$rt>>);

        impl<'h> CallBuilder<'h> {
            $crate::call_builder_methods!(forward);

            /// The request as described so far.
            pub fn request(&self) -> &$crate::CallRequest {
                self.0.request()
            }

            /// Starts the call and returns a future of its
            /// [`Outcome`](crate::proto::Outcome): the exit status, the record
            /// and the bounded stderr.
            ///
            /// The call starts now, not at the first poll; the future owns its
            /// handle, so dropping it before it is ready is dropping the handle
            /// (see [`CallHandle`] and [`kill_on_drop`](Self::kill_on_drop)).
            ///
            /// No handle reaches this call's streams: a piped stdout is
            /// captured within its budget and a piped stdin is at end-of-file,
            /// as `std::process::Command::output` makes them.
            pub fn run(self) -> Run {
                Run(self.0.run())
            }

            /// Runs the call to its end and returns its [`Output`](crate::Output):
            /// the exit status, stdout whole, the bounded stderr and the
            #[doc = concat!("record; the `", $process, "::Command::output` of spillguard. A")]
            /// helper that could not be spawned, a call that ended before its
            /// helper exited, and a stdout cut at its budget (unless
            /// [`allow_stdout_truncation`](Self::allow_stdout_truncation)) are
            /// errors. The call starts at the first poll.
            pub async fn output(self) -> ::std::io::Result<$crate::Output> {
                self.0.output().await
            }

            /// Runs the call to its end and returns how its helper ended; the
            #[doc = concat!("`", $process, "::Command::status` of spillguard. Errors as")]
            /// [`output`](Self::output), but a cut stdout is none.
            pub async fn status(self) -> ::std::io::Result<::std::process::ExitStatus> {
                self.0.status().await
            }

            /// Starts the call and returns its handle at once, to approve,
            #[doc = concat!("deny, cancel or wait on: the `", $process, "::Command::spawn` of")]
            /// spillguard.
            #[doc(alias = "spawn")]
            pub fn start(self) -> CallHandle {
                CallHandle(self.0.start())
            }
        }

        /// A call that needs no [`Host`] of its own: it runs on a process-wide
        /// host, made at the first such call with the default configuration
        /// and kept. Every builder method of `host.command(..)` works on it;
        /// it ends with [`output`](Self::output), [`status`](Self::status) or
        #[doc = concat!("[`spawn`](Self::spawn), as `", $process, "::Command` does.")]
        /// `output()` fails on a stdout cut at its budget unless asked not to
        /// ([`stdout_budget`](Self::stdout_budget) raises the budget,
        /// [`allow_stdout_truncation`](Self::allow_stdout_truncation) accepts
        /// a cut).
        ///
        $(#[$command_meta])*
        #[derive(Debug)]
        #[must_use = "a call runs only once `output()`, `status()` or `spawn()` is called"]
        pub struct Command(
            $crate::CallBuilder<'static, $crate::asynchronous::DefaultHost<$rt>>,
        );

        impl Command {
            /// A call of `program` on the process-wide host, to describe
            /// further with every builder method (`.arg`, `.env`, `.deadline`,
            /// ...) and run with [`output`](Self::output),
            /// [`status`](Self::status) or [`spawn`](Self::spawn). No shell is
            /// involved.
            pub fn new(program: impl ::std::convert::Into<::std::ffi::OsString>) -> Self {
                Self($crate::CallBuilder::<'static, $crate::asynchronous::DefaultHost<$rt>>::new(program))
            }

            /// A call of `command`, a description made beforehand, on the
            /// process-wide host.
            pub fn on_default(command: $crate::HelperCommand) -> Self {
                Self($crate::CallBuilder::<'static, $crate::asynchronous::DefaultHost<$rt>>::on_default(command))
            }

            $crate::call_builder_methods!(forward);

            /// The request as described so far.
            pub fn request(&self) -> &$crate::CallRequest {
                self.0.request()
            }

            /// Starts the call on the process-wide host and returns its handle;
            #[doc = concat!("the `", $process, "::Command::spawn` of spillguard. An error")]
            /// only when that host cannot be made (its runtime could not
            /// start).
            pub fn spawn(self) -> ::std::io::Result<CallHandle> {
                self.0.spawn().map(CallHandle)
            }

            /// Runs the call on the process-wide host to its end and returns
            /// its [`Output`](crate::Output): the exit status, stdout whole,
            /// the bounded stderr and the record. A helper that could not be
            /// spawned, a call that ended before its helper exited, and a
            /// stdout cut at its budget (unless
            /// [`allow_stdout_truncation`](Self::allow_stdout_truncation)) are
            /// errors.
            pub async fn output(self) -> ::std::io::Result<$crate::Output> {
                self.0.output().await
            }

            /// Runs the call on the process-wide host and returns how its
            /// helper ended. Errors as [`output`](Self::output), but a cut
            /// stdout is none.
            pub async fn status(self) -> ::std::io::Result<::std::process::ExitStatus> {
                self.0.status().await
            }
        }

        /// The future of a call run to its end, from [`CallBuilder::run`]:
        /// its [`Outcome`](crate::proto::Outcome).
        ///
        /// The call started when the future was made. The future owns the
        /// call's handle: dropping it before it is ready is dropping the
        /// handle (a client disconnect; with
        /// [`kill_on_drop(true)`](CallBuilder::kill_on_drop) the helper's
        /// group is stopped). The owner still writes the record.
        #[must_use = "the outcome is only seen by awaiting the future"]
        pub struct Run($crate::asynchronous::Run);

        impl ::std::fmt::Debug for Run {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str("Run")
            }
        }

        impl ::std::future::Future for Run {
            type Output = $crate::proto::Outcome;

            fn poll(
                mut self: ::std::pin::Pin<&mut Self>,
                cx: &mut ::std::task::Context<'_>,
            ) -> ::std::task::Poll<$crate::proto::Outcome> {
                self.0.as_mut().poll(cx)
            }
        }

        /// The caller's handle on a running call, from the builder's
        /// [`start`](CallBuilder::start) or [`Command::spawn`]. The call runs
        /// on its own owner task whatever the handle does: approve or deny it
        /// once its card is shown, cancel it at any time, and collect its
        /// outcome with [`wait`](Self::wait), [`wait_timeout`](Self::wait_timeout)
        /// or [`try_outcome`](Self::try_outcome).
        ///
        $(#[$handle_meta])*
        ///
        /// # Dropping the handle
        ///
        /// Dropping the handle before its outcome was taken (and, for a
        /// streamed call, both its streams), including dropping a `run()` or
        /// `wait()` future that owns it, is a client disconnect; the record
        /// says `client_disconnected: true`.
        ///
        /// * With the builder's [`kill_on_drop(true)`](CallBuilder::kill_on_drop),
        ///   the call stops as for the
        ///   [`Cancel`](crate::proto::DisconnectPolicy::Cancel) policy: the
        ///   helper's process group gets SIGTERM, then SIGKILL after
        ///   `shutdown_grace` (before dispatch the call ends
        ///   `cancelled_before_dispatch`).
        /// * Without it (the default), the host's
        ///   [`DisconnectPolicy`](crate::proto::DisconnectPolicy) decides:
        ///   `Finish` (the default) lets the helper run to its end or its
        ///   deadline; `Cancel` stops it as above.
        ///
        /// Either way the owner writes the final record: it reaches the audit
        /// sink and the host's `finished_records`. Dropping the [`Host`] is
        /// none of this: the call keeps what it needs of the host.
        #[derive(Debug)]
        pub struct CallHandle($crate::asynchronous::AsyncCallHandle<$rt>);

        impl CallHandle {
            /// The helper's stderr as lines, from now on, at most `capacity`
            /// of them waiting to be read: the owner queues each whole line as
            /// it drains stderr and never waits on this reader; a line that
            /// finds the queue full is dropped and counted
            /// ([`StderrLines::dropped`](crate::StderrLines::dropped)). The
            /// capture, the excerpt and the record are the same with or
            /// without it. The lines are the helper's bytes, not redacted. An
            /// error if the lines were already asked for.
            pub fn stderr_lines(&self, capacity: usize) -> ::std::io::Result<$crate::StderrLines> {
                self.0.stderr_lines(capacity)
            }

            /// A streamed call's ([`CallBuilder::streamed`], or a piped
            /// [`CallBuilder::stdout`]) stdin and stdout: waits until the
            /// helper is spawned (after its approval, if it needs one), then
            /// hands out both, once. An error if the call ended before its
            /// helper ran, is not streamed, or its streams were taken.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: the streams are taken only when it completes.
            pub async fn streams(&self) -> ::std::io::Result<($stdin, $stdout)> {
                self.0.streams().await
            }

            /// The call's id.
            pub fn call_id(&self) -> &str {
                self.0.call_id()
            }

            /// The helper's pid (its process group id too) while it runs:
            /// `None` before it is spawned, once its exit was observed, and for
            /// a call that never spawned one.
            pub fn id(&self) -> ::std::option::Option<u32> {
                self.0.id()
            }

            /// The call's state as last published by its owner.
            pub fn state(&self) -> $crate::proto::State {
                self.0.state()
            }

            /// Whether the call has ended (its outcome is ready or was taken).
            pub fn is_finished(&self) -> bool {
                self.0.is_finished()
            }

            /// The approval card, once shown. It is built once and never
            /// changes.
            pub fn card(&self) -> ::std::option::Option<$crate::proto::ApprovalCard> {
                self.0.card()
            }

            /// Waits until the call has ended, leaving its outcome in the
            /// handle for [`wait`](Self::wait) or
            /// [`try_outcome`](Self::try_outcome).
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: it only watches.
            pub async fn wait_finished(&self) {
                self.0.wait_finished().await
            }

            /// Waits at most `timeout` for the approval card. `None` if the
            /// call ended without asking for approval, or the time ran out.
            ///
            /// # Cancel safety
            ///
            /// Cancel safe: it only watches. Dropping it changes nothing; the
            /// card, once shown, stays in [`card`](Self::card).
            pub async fn wait_card(
                &self,
                timeout: ::std::time::Duration,
            ) -> ::std::option::Option<$crate::proto::ApprovalCard> {
                self.0.wait_card(timeout).await
            }

            /// Grants approval. An error if the call is not awaiting approval
            /// (for instance it already expired or was cancelled).
            ///
            /// # Cancel safety
            ///
            /// The approval is sent when the future is first polled and is
            /// then carried out whatever happens to the future; dropping it
            /// afterwards loses only the answer. Dropped before its first
            /// poll, it sends nothing.
            pub async fn approve(&self) -> ::std::result::Result<(), $crate::proto::CallError> {
                self.0.approve().await
            }

            /// Denies approval: the call ends `denied` and nothing is spawned.
            /// An error if the call is not awaiting approval.
            ///
            /// # Cancel safety
            ///
            /// As for [`approve`](Self::approve): once first polled, the
            /// denial is carried out even if the future is dropped.
            pub async fn deny(&self) -> ::std::result::Result<(), $crate::proto::CallError> {
                self.0.deny().await
            }

            /// Denies approval for `reason`, an answer that was no approval (an
            /// MCP elicitation accepted without the content its card asked
            /// for): the call ends `denied` and its record's `failure` says
            /// why. An error if the call is not awaiting approval.
            ///
            /// # Cancel safety
            ///
            /// As for [`deny`](Self::deny).
            pub async fn decline(
                &self,
                reason: impl ::std::convert::Into<::std::string::String>,
            ) -> ::std::result::Result<(), $crate::proto::CallError> {
                self.0.decline(reason).await
            }

            /// Tells the call that its approval card reached the approver (the
            /// caller wrote it where the approver reads it: an MCP server, once
            /// the `elicitation/create` request was flushed): the approval
            /// deadline then runs from now, once, so that time spent before
            /// delivery (many calls at once, a slow audit log) is not taken
            /// from the approver. A card never reported delivered expires
            /// `approval_timeout` after it was shown. Returns at once; ignored
            /// unless the call awaits approval and no delivery was reported
            /// yet.
            pub fn card_delivered(&self) {
                self.0.card_delivered()
            }

            /// Admits the call, queued since it was authorized because its
            /// settings ask for
            /// [`Admission::Queued`](crate::proto::Admission::Queued) (a driver
            /// that runs at most so many calls at once): it spawns its helper
            /// now. Returns at once. Ignored if the call has ended (its queue
            /// timeout or a cancel came first) or is not queued.
            pub fn admit(&self) {
                self.0.admit()
            }

            /// Asks the call to stop. Before dispatch it ends
            /// `cancelled_before_dispatch`; after, the helper's group gets
            /// SIGTERM, then SIGKILL after the grace. Returns at once; ignored
            /// once finished.
            pub fn cancel(&self) {
                self.0.cancel()
            }

            /// A cancel-only handle that can be moved to another task or thread
            /// (a signal handler, a UI) while this one waits.
            pub fn canceller(&self) -> Canceller {
                Canceller(self.0.canceller())
            }

            /// Waits for the call to finish and returns its outcome.
            ///
            /// A caller that cannot wait forever uses
            /// [`wait_timeout`](Self::wait_timeout), which gives the handle
            /// back.
            ///
            /// # Cancel safety
            ///
            /// The future owns the handle: dropping it before it completes
            /// drops the handle, which is a client disconnect (with
            /// [`kill_on_drop(true)`](CallBuilder::kill_on_drop) the helper's
            /// group is stopped, otherwise the host's disconnect policy
            /// applies). The owner still writes the record.
            ///
            /// # Panics
            ///
            /// Only if the call's owner task panicked (a bug; its panic is
            /// resumed here where the runtime gives it back), or its runtime
            /// was shut down before the call finished.
            pub async fn wait(self) -> $crate::proto::Outcome {
                self.0.wait().await
            }

            /// Waits at most `timeout`. Gives the handle back if the call has
            /// not finished by then: drop it to give up (a client disconnect),
            /// or wait again.
            ///
            /// # Cancel safety
            ///
            /// As for [`wait`](Self::wait): dropping the future drops the
            /// handle (a client disconnect). Let it time out to get the handle
            /// back.
            ///
            /// # Panics
            ///
            /// As for [`wait`](Self::wait).
            pub async fn wait_timeout(
                self,
                timeout: ::std::time::Duration,
            ) -> ::std::result::Result<$crate::proto::Outcome, CallHandle> {
                self.0.wait_timeout(timeout).await.map_err(Self)
            }

            /// The outcome if the call has finished, else the handle back.
            ///
            /// # Panics
            ///
            /// If the call's owner ended without an outcome (it panicked or its
            /// runtime shut down).
            pub fn try_outcome(self) -> ::std::result::Result<$crate::proto::Outcome, CallHandle> {
                self.0.try_outcome().map_err(Self)
            }
        }

        $(#[$canceller_meta])*
        #[derive(Debug, Clone)]
        pub struct Canceller($crate::asynchronous::AsyncCanceller<$rt>);

        impl Canceller {
            /// Asks the call to stop; see [`CallHandle::cancel`].
            pub fn cancel(&self) {
                self.0.cancel()
            }
        }
    };
}
