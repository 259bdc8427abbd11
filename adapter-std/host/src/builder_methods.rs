//! The builder methods of a call, written once: [`CallBuilder`](crate::CallBuilder)
//! carries them out on its request, and each adapter's own builder types
//! (`CallBuilder<'h>` and `Command`, wrappers of this crate's builder)
//! pass them on, so that an adapter's docs show its own types and every
//! method's text is this one.
//!
//! `call_builder_methods!(real)` expands to the methods with their bodies
//! (inside this crate's `impl CallBuilder`); `call_builder_methods!(forward)`
//! to the same signatures and docs, each passing its arguments to the
//! wrapped builder (`Self(self.0.method(args))`). The signatures name
//! every type by a path that resolves in both places, and the docs link
//! through names every adapter has at its root (`Stdio`, `HelperCommand`,
//! `Approval`, `proto`).

/// Picks a builder method's body: its own (`real`) or the wrapped
/// builder's (`forward`).
#[doc(hidden)]
#[macro_export]
macro_rules! __builder_body {
    (real, $this:ident . $name:ident ( $($arg:expr),* ), $body:block) => {
        $body
    };
    (forward, $this:ident . $name:ident ( $($arg:expr),* ), $body:block) => {
        Self($this.0.$name($($arg),*))
    };
}

/// Every builder method of a call; see the module's docs.
#[doc(hidden)]
#[macro_export]
macro_rules! call_builder_methods {
    ($mode:ident) => {
        /// Adds one argument.
        pub fn arg(self, arg: impl ::std::convert::Into<::std::ffi::OsString>) -> Self {
            $crate::__builder_body!($mode, self.arg(arg), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).arg(arg))
            })
        }

        /// Adds arguments.
        pub fn args<I, S>(self, args: I) -> Self
        where
            I: ::std::iter::IntoIterator<Item = S>,
            S: ::std::convert::Into<::std::ffi::OsString>,
        {
            $crate::__builder_body!($mode, self.args(args), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).args(args))
            })
        }

        /// Adds an environment variable.
        pub fn env(
            self,
            key: impl ::std::convert::Into<::std::ffi::OsString>,
            value: impl ::std::convert::Into<::std::ffi::OsString>,
        ) -> Self {
            $crate::__builder_body!($mode, self.env(key, value), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).env(key, value))
            })
        }

        /// Adds environment variables, each as [`env`](Self::env) does (see
        /// [`HelperCommand::envs`]); the approval card's summary (the
        /// command line) shows them: `env CC=clang CFLAGS=-O2 make`.
        pub fn envs<I, K, V>(self, vars: I) -> Self
        where
            I: ::std::iter::IntoIterator<Item = (K, V)>,
            K: ::std::convert::Into<::std::ffi::OsString>,
            V: ::std::convert::Into<::std::ffi::OsString>,
        {
            $crate::__builder_body!($mode, self.envs(vars), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).envs(vars))
            })
        }

        /// Removes an environment variable: the helper does not inherit it
        /// from the host, and an earlier [`env`](Self::env) of the same name is
        /// dropped. Per name the last call wins, as with
        /// `std::process::Command`: `env_remove` after `env` leaves it unset,
        /// `env` after `env_remove` sets it; after
        /// [`env_clear`](Self::env_clear) it only drops an earlier `env` (see
        /// [`HelperCommand::env_remove`]). The card's summary shows it:
        /// `env -u SSH_AUTH_SOCK ssh web-3`.
        pub fn env_remove(self, key: impl ::std::convert::Into<::std::ffi::OsString>) -> Self {
            $crate::__builder_body!($mode, self.env_remove(key), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).env_remove(key))
            })
        }

        /// Starts the helper from an empty environment.
        pub fn env_clear(self) -> Self {
            $crate::__builder_body!($mode, self.env_clear(), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).env_clear())
            })
        }

        /// Sets the helper's working directory.
        pub fn current_dir(self, dir: impl ::std::convert::Into<::std::path::PathBuf>) -> Self {
            $crate::__builder_body!($mode, self.current_dir(dir), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).current_dir(dir))
            })
        }

        /// Feeds `bytes` to the helper's stdin, then closes it (see
        /// [`HelperCommand::stdin_bytes`]).
        pub fn stdin_bytes(self, bytes: impl ::std::convert::Into<::std::vec::Vec<u8>>) -> Self {
            $crate::__builder_body!($mode, self.stdin_bytes(bytes), {
                self.with(|r| r.command = ::std::mem::take(&mut r.command).stdin_bytes(bytes))
            })
        }

        /// The call's id (default: a fresh `c_…`).
        pub fn call_id(self, id: impl ::std::convert::Into<::std::string::String>) -> Self {
            $crate::__builder_body!($mode, self.call_id(id), {
                self.with(|r| r.call_id = Some(id.into()))
            })
        }

        /// The agent session the call belongs to (default: the host's).
        pub fn session_id(self, id: impl ::std::convert::Into<::std::string::String>) -> Self {
            $crate::__builder_body!($mode, self.session_id(id), {
                self.with(|r| r.session_id = Some(id.into()))
            })
        }

        /// Makes the call a discovery: no action, no approval, its own smaller
        /// stderr budget.
        pub fn discovery(self) -> Self {
            $crate::__builder_body!($mode, self.discovery(), {
                self.with(|r| r.kind = CallKind::Discovery)
            })
        }

        /// The kind of call (default [`CallKind::Action`](crate::proto::CallKind::Action)).
        pub fn kind(self, kind: $crate::proto::CallKind) -> Self {
            $crate::__builder_body!($mode, self.kind(kind), { self.with(|r| r.kind = kind) })
        }

        /// The action's name, e.g. `ssh.exec` (default: the program's file
        /// name).
        pub fn action(self, action: impl ::std::convert::Into<::std::string::String>) -> Self {
            $crate::__builder_body!($mode, self.action(action), {
                self.with(|r| r.action = Some(action.into()))
            })
        }

        /// The target as shown to the user, e.g. `deploy@web-3` (default: the
        /// program as given).
        pub fn target(self, target: impl ::std::convert::Into<::std::string::String>) -> Self {
            $crate::__builder_body!($mode, self.target(target), {
                self.with(|r| r.target = Some(target.into()))
            })
        }

        /// The one-line summary on the approval card (default: the shell-quoted
        /// command line).
        pub fn summary(self, summary: impl ::std::convert::Into<::std::string::String>) -> Self {
            $crate::__builder_body!($mode, self.summary(summary), {
                self.with(|r| r.summary = Some(summary.into()))
            })
        }

        /// Every field of the spec at once, for a host that builds its own.
        pub fn spec(self, spec: $crate::proto::CallSpec) -> Self {
            $crate::__builder_body!($mode, self.spec(spec), { self.with(|r| r.set_spec(spec)) })
        }

        /// A line of the approval card, `label: value` (in the order given;
        /// without any, the card shows `action`, `target` and `summary`). The
        /// value is redacted and made visible like the rest of the card
        /// (`ApprovalCard::text`).
        pub fn card_line(
            self,
            label: impl ::std::convert::Into<::std::string::String>,
            value: impl ::std::convert::Into<::std::string::String>,
        ) -> Self {
            $crate::__builder_body!($mode, self.card_line(label, value), {
                self.with(|r| r.card_lines.push((label.into(), value.into())))
            })
        }

        /// Whether the call waits for approval (default
        /// [`Approval::NotRequired`]).
        pub fn approval(self, approval: $crate::Approval) -> Self {
            $crate::__builder_body!($mode, self.approval(approval), {
                self.with(|r| r.approval = approval)
            })
        }

        /// Longest the helper may run after dispatch (default: the host's).
        pub fn deadline(self, deadline: ::std::time::Duration) -> Self {
            $crate::__builder_body!($mode, self.deadline(deadline), {
                self.with(|r| r.deadline = Some(Some(deadline)))
            })
        }

        /// No deadline for this call, whatever the host's.
        pub fn no_deadline(self) -> Self {
            $crate::__builder_body!($mode, self.no_deadline(), {
                self.with(|r| r.deadline = Some(None))
            })
        }

        /// The helper returns its result as JSON on stdout: the call parses it
        /// at the end (within the stdout budget) and the outcome holds it
        /// (`Outcome::result`). By the one convention of
        /// [`ResultKind::of_json`](crate::proto::ResultKind::of_json), an
        /// object with `"ok": false` or a non-null `"error"` reports a remote
        /// failure, and the call ends `failed_remote` whatever the exit code;
        /// invalid JSON is recorded in `result_error`, never an error.
        pub fn result_json(self) -> Self {
            $crate::__builder_body!($mode, self.result_json(), {
                self.with(|r| r.result = Some(ResultChannel::StdoutJson))
            })
        }

        /// Decides what a JSON result says instead of the convention of
        /// [`result_json`](Self::result_json) (which it implies).
        pub fn classify_result(
            self,
            classify: impl Fn(&$crate::__private::serde_json::Value) -> $crate::proto::ResultKind
            + ::std::marker::Send
            + ::std::marker::Sync
            + 'static,
        ) -> Self {
            $crate::__builder_body!($mode, self.classify_result(classify), {
                self.with(|r| {
                    r.result = Some(ResultChannel::StdoutJson);
                    r.classifier = Some(ResultClassifier::new(classify));
                })
            })
        }

        /// The caller streams the helper's stdin and stdout itself (an MCP
        /// stdio server: requests in, responses out), through the handle's
        /// `streams()`; stderr is still captured, bounded and marked, and the
        /// record says `stdout_mode: streamed` with the bytes forwarded each
        /// way. Closing (or dropping) the stdin writer ends the caller's input:
        /// the helper's stdin is closed and it has `stdin_close_grace` to exit
        /// before TERM, grace, KILL to its group. Dropping the handle and both
        /// streams is a client disconnect. Replaces any
        /// [`stdin_bytes`](Self::stdin_bytes).
        pub fn streamed(self) -> Self {
            $crate::__builder_body!($mode, self.streamed(), { self.with(|r| r.streamed = true) })
        }

        /// Where the helper's stdin comes from: [`Stdio::null()`] (the
        /// default), [`Stdio::bytes`] (then end-of-file), or
        /// [`Stdio::piped()`], written by the caller through the handle's
        /// stream (with a piped stdout: the two come as a pair). Set on its
        /// own, as `std::process::Command::stdin`.
        pub fn stdin(self, stdin: $crate::Stdio) -> Self {
            $crate::__builder_body!($mode, self.stdin(stdin), {
                self.with(|r| r.stdin = Some(stdin))
            })
        }

        /// Where the helper's stdout goes: [`Stdio::captured()`] (the default:
        /// kept within its budget for the outcome) or [`Stdio::piped()`],
        /// read by the caller through the handle's stream while stdin stays
        /// what [`stdin`](Self::stdin) says (`/dev/null` by default). A piped
        /// stdout alone ends as any helper does: when it exits, or at a stop
        /// with SIGTERM at once; the end of the caller's input only closes
        /// stdin, unless [`stdin_close_grace`](Self::stdin_close_grace) asks
        /// for the MCP stdio shutdown.
        pub fn stdout(self, stdout: $crate::Stdio) -> Self {
            $crate::__builder_body!($mode, self.stdout(stdout), {
                self.with(|r| r.stdout = Some(stdout))
            })
        }

        /// Asks for the MCP stdio shutdown on a call whose stdout is piped:
        /// the end of the caller's input, and every stop, close the helper's
        /// stdin and give it `grace` to exit before SIGTERM. `.streamed()`
        /// has it already, with the configuration's
        /// `stdin_close_grace_seconds` (2 s) unless this says otherwise.
        pub fn stdin_close_grace(self, grace: ::std::time::Duration) -> Self {
            $crate::__builder_body!($mode, self.stdin_close_grace(grace), {
                self.with(|r| r.stdin_close_grace = Some(grace))
            })
        }

        /// Hands each chunk of the helper's stderr to `tap` as it is read,
        /// before the capture counts and bounds it (e.g. to copy it where a
        /// person can see it). The tap runs in the call's owner and must never
        /// block: what it cannot pass on at once, it drops.
        pub fn stderr_tap(
            self,
            tap: impl Fn(&[u8]) + ::std::marker::Send + ::std::marker::Sync + 'static,
        ) -> Self {
            $crate::__builder_body!($mode, self.stderr_tap(tap), {
                self.with(|r| r.stderr_tap = Some(StderrTap(Arc::new(tap))))
            })
        }

        /// How long the approval card stays valid once shown (the host's
        /// settings: two minutes by default); once it has passed without an
        /// answer, the call ends `approval_expired`.
        pub fn approval_timeout(self, timeout: ::std::time::Duration) -> Self {
            $crate::__builder_body!($mode, self.approval_timeout(timeout), {
                self.with(|r| r.approval_timeout = Some(timeout))
            })
        }

        /// Refuses the call before anything runs: it ends
        /// `failed_before_dispatch` with `reason` as its `failure`, and is
        /// registered, audited and recorded like every call. For a caller whose
        /// own checks of the call failed (a tool call's arguments that break
        /// the tool's schema), so that the refusal leaves a record too. No
        /// approval is asked and nothing is spawned.
        pub fn refuse(self, reason: impl ::std::convert::Into<::std::string::String>) -> Self {
            $crate::__builder_body!($mode, self.refuse(reason), {
                self.with(|r| r.refused = Some(reason.into()))
            })
        }

        /// Every budget and timing of the call, instead of the host's settings
        /// for its kind ([`deadline`](Self::deadline) and
        /// [`result_json`](Self::result_json) still apply on top). These are
        /// used as given, whatever the kind: for a discovery, start from the
        /// host's discovery settings (`Host::settings_for(CallKind::Discovery)`).
        pub fn settings(self, settings: $crate::proto::CallSettings) -> Self {
            $crate::__builder_body!($mode, self.settings(settings), {
                self.with(|r| r.settings = Some(settings))
            })
        }

        /// Edits the settings the call gets with `edit`, e.g. to lengthen the
        /// approval card's life. The edit is made when the call starts, on the
        /// settings the builder's host gives a call of its kind then (or those
        /// given to [`settings`](Self::settings)), before the builder's own
        /// [`deadline`](Self::deadline), [`approval_timeout`](Self::approval_timeout)
        /// and result channel; several edits apply in the order given. The
        /// settings are then checked
        /// ([`CallSettings::validate`](crate::proto::CallSettings::validate)):
        /// a call whose edited settings break a rule fails to start, with
        /// the rule in its error. A stderr budget below the excerpt's 4096
        /// bytes, for one, needs the excerpt lowered with it:
        /// `.edit_settings(|s| { s.stderr.budget = 1024; s.excerpt_bytes = 512; })`.
        pub fn edit_settings(
            self,
            edit: impl Fn(&mut $crate::proto::CallSettings)
            + ::std::marker::Send
            + ::std::marker::Sync
            + 'static,
        ) -> Self {
            $crate::__builder_body!($mode, self.edit_settings(edit), {
                self.with(|r| r.edits.push(SettingsEdit(Arc::new(edit))))
            })
        }

        /// Makes the call's span a child of `parent` (a request's
        /// `traceparent`, parsed with
        /// [`TraceParent::parse`](crate::proto::trace::TraceParent::parse)), in its trace,
        /// passing `trace_state` (checked with
        /// [`trace_state`](crate::proto::trace::trace_state)) on. The
        /// record says `trace_id`, `span_id` and `parent_span_id`; the helper
        /// gets `TRACEPARENT` (the call's span as its parent) and `TRACESTATE`
        /// in its environment, so its own spans join the trace.
        pub fn trace_parent(
            self,
            parent: $crate::proto::trace::TraceParent,
            trace_state: ::std::option::Option<::std::string::String>,
        ) -> Self {
            $crate::__builder_body!($mode, self.trace_parent(parent, trace_state), {
                self.with(|r| r.trace_parent = Some((parent, trace_state)))
            })
        }

        /// Whether dropping the call's handle (or the `run()` future, which
        /// owns it) before the call finished stops the helper. Default
        /// `false`, as for the `kill_on_drop` of tokio's and async-process's
        /// `Command`.
        ///
        /// With `true`, that drop (the last of the handle and a streamed
        /// call's two streams) stops the call as the
        /// [`Cancel`](crate::proto::DisconnectPolicy::Cancel) disconnect policy does: the
        /// helper's process group gets SIGTERM, then SIGKILL after
        /// `shutdown_grace`, and the owner writes the final record (state
        /// `cancelled_after_dispatch` or `killed`, `cancelled_before_dispatch`
        /// if nothing ran yet; `client_disconnected: true`).
        ///
        /// With `false`, the drop is a client disconnect under the host's
        /// policy (`HostOptions::on_client_disconnect`, default
        /// [`Finish`](crate::proto::DisconnectPolicy::Finish): the helper runs to its end or
        /// its deadline, and the record is written then).
        pub fn kill_on_drop(self, kill_on_drop: bool) -> Self {
            $crate::__builder_body!($mode, self.kill_on_drop(kill_on_drop), {
                self.with(|r| r.kill_on_drop = kill_on_drop)
            })
        }

        /// Most bytes of stdout the call keeps (default 1 MiB): what
        /// `output()` returns whole when the helper prints less, e.g.
        /// `.stdout_budget(8 << 20)` for 8 MiB. Past it the bytes after the
        /// first `bytes` are dropped and counted (`stdout_truncated`), and
        /// `output()` fails unless [`allow_stdout_truncation`](Self::allow_stdout_truncation)
        /// was set. The budget draws on the process-wide retention pool like
        /// every capture.
        pub fn stdout_budget(self, bytes: usize) -> Self {
            $crate::__builder_body!($mode, self.stdout_budget(bytes), {
                self.edit_settings(move |settings| settings.stdout.budget = bytes)
            })
        }

        /// Makes `output()` accept a stdout cut at its budget (the bytes kept,
        /// the record saying `stdout_truncated`) instead of failing. Off by
        /// default: a cut result is an error unless asked for.
        pub fn allow_stdout_truncation(self) -> Self {
            $crate::__builder_body!($mode, self.allow_stdout_truncation(), {
                self.with(|r| r.stdout_truncation_allowed = true)
            })
        }

        /// Resource limits on the helper's whole tree: memory and process
        /// count in a control group of its own, CPU time, open files and file
        /// size per process (see [`Limits`](crate::proto::Limits), and
        /// [`parse_size`](crate::proto::parse_size) for sizes such as `256M`).
        /// A limit this machine cannot enforce refuses the call before
        /// anything runs (`failed_before_dispatch`, with a line naming it),
        /// unless [`allow_degraded`](Self::allow_degraded).
        ///
        /// The record says what was asked (`limits`), by which mechanism it
        /// held (`enforced`), which limit stopped the tree (`limit_hit`:
        /// `memory`, `pids`, `cpu`, `file_size`) and the tree's peaks. Every
        /// process of the tree is killed when the call ends.
        pub fn limits(self, limits: $crate::proto::Limits) -> Self {
            $crate::__builder_body!($mode, self.limits(limits), {
                self.with(|r| r.confinement_mut().limits = limits)
            })
        }

        /// The files and network the helper may reach (Landlock, and a
        /// network namespace for [`Network::None`](crate::proto::Network)).
        /// Fails closed as [`limits`](Self::limits) does.
        pub fn sandbox(self, sandbox: $crate::proto::Sandbox) -> Self {
            $crate::__builder_body!($mode, self.sandbox(sandbox), {
                self.with(|r| r.confinement_mut().sandbox = sandbox)
            })
        }

        /// Runs the call even when a limit or restriction cannot be enforced
        /// on this machine; the record lists each one in `not_enforced`.
        /// Default `false`: such a call is refused before anything runs.
        pub fn allow_degraded(self, allow: bool) -> Self {
            $crate::__builder_body!($mode, self.allow_degraded(allow), {
                self.with(|r| r.confinement_mut().allow_degraded = allow)
            })
        }

        /// Every helper starts in a control group of its own wherever the
        /// host can make one, so that every process of its tree (one that left
        /// its process group with `setsid` included) is killed when the call
        /// ends; where none can be made it runs all the same and its record
        /// says `tree_kill: "process-group"`.
        ///
        /// `contain_tree(true)` makes the group required: a call for which
        /// none can be made is refused before anything runs, with one line
        /// naming why (unless [`allow_degraded`](Self::allow_degraded), which
        /// runs it and lists the line in `not_enforced`).
        /// `contain_tree(false)` opts out: no group, the process group is
        /// what a stop signals (refused with a memory or process limit,
        /// which need the group).
        pub fn contain_tree(self, contain: bool) -> Self {
            $crate::__builder_body!($mode, self.contain_tree(contain), {
                self.with(|r| r.confinement_mut().contain_tree = Some(contain))
            })
        }

        /// The whole [`Confinement`](crate::proto::Confinement) at once.
        pub fn confinement(self, confinement: $crate::proto::Confinement) -> Self {
            $crate::__builder_body!($mode, self.confinement(confinement), {
                self.with(|r| r.confinement = Some(confinement))
            })
        }
    };
}
