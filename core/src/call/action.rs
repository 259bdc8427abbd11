//! What a call asks of its driver ([`Action`], with the [`AuditEvent`]s
//! and the [`ApprovalCard`] it hands out) and what it hands over at its
//! end ([`Outcome`]).
//!
//! **Actions are carried out in the order they are polled; [`Action::Finished`]
//! is emitted exactly once and is the last.** An [`Outcome`] holds the
//! retained output with its share of the process-wide pool until dropped.

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::{Call, CallSettings, CallSpec, ResultChannel, StdoutMode, visible};
use super::{CallKind, CallRecord, OutcomeError, Signal, State};
use crate::capture::Retained;
use crate::redact::StreamRedactions;

/// What the spawn needs from the call (the driver holds the command): the
/// bounds the helper runs under, and how long the call may last at most,
/// so that nothing is read back out of the call's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpawnOrder {
    /// The helper's limits and sandbox.
    pub confinement: crate::Confinement,
    /// How long after the spawn the call has ended at the latest, unless
    /// its driver is stopped or wedged: its deadline, then its shutdown
    /// grace and one second more. Past it, a process-wide supervisor may
    /// end the helper's tree. `None` without a deadline (or one too long
    /// for the clock).
    pub ends_within: Option<std::time::Duration>,
}

/// The approval card: built once when approval is asked, never redrawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalCard {
    /// The call asking.
    pub call_id: String,
    /// The action's name.
    pub action: String,
    /// The target as shown to the user.
    pub target: String,
    /// One-line parameter summary.
    pub summary: String,
    /// How long the card stays valid from when it is shown.
    pub expires_in: Duration,
    /// The card as it is shown, built once when it is shown and never
    /// changed: one `label: value` line per
    /// [`CallSpec::card_lines`] (by default `action`, `target`,
    /// `summary`), then `approval expires: N ms after it is shown`. Every
    /// value is redacted by the call's rules, as the record is, and made
    /// [`visible`], so no value can add, hide or reorder a line. The audit
    /// log keeps exactly this text ([`AuditKind::CardShown`]).
    pub text: String,
}

/// A lifecycle event for the audit log, written as it happens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEvent {
    /// The call.
    pub call_id: String,
    /// Its session.
    pub session_id: String,
    /// Microseconds since the call was received.
    pub offset_us: u64,
    /// What happened.
    pub kind: AuditKind,
}

/// The kinds of audit events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditKind {
    /// The attempt, written before anything is approved or spawned.
    Attempt {
        /// Action or discovery.
        kind: CallKind,
        /// The action's name.
        action: String,
        /// The target as shown.
        target: String,
    },
    /// A state transition.
    Transition {
        /// State left.
        from: State,
        /// State entered.
        to: State,
    },
    /// The final record, after the terminal transition.
    Final(Box<CallRecord>),
    /// The approval card, as shown, before it is shown: byte for byte
    /// the [`ApprovalCard::text`] the approver sees.
    CardShown {
        /// The card's text.
        text: String,
    },
    /// A limit of the call's [`Confinement`](crate::Confinement) stopped
    /// or held back the helper's tree.
    LimitHit {
        /// Which one.
        limit: crate::LimitHit,
    },
    /// A supervised server was started again after its run ended
    /// (`spillguard stdio --restart`): written under the new run's call,
    /// before its attempt. Since format version 2.
    Restart {
        /// The new run's attempt, counting the first run as 1 (so 2 for
        /// the first restart), as its span's `restart` event says.
        attempt: u32,
        /// How the run before it ended (`exit status 1`, `signal 9`,
        /// `stdout closed`).
        reason: String,
        /// The call of the run before it.
        previous_call_id: String,
    },
}

/// What the call asks its driver to do. Carry them out in order.
#[derive(Debug)]
#[non_exhaustive]
pub enum Action {
    /// Append this event to the audit log.
    Audit(AuditEvent),
    /// Show this card to the user (once per call).
    ShowApprovalCard(ApprovalCard),
    /// Spawn the helper in its own process group under the order's
    /// bounds, then report [`Input::Spawned`](crate::Input::Spawned) or
    /// [`Input::SpawnFailed`](crate::Input::SpawnFailed).
    Spawn(SpawnOrder),
    /// Close the helper's stdin, if it has one.
    CloseStdin,
    /// Send `signal` to the process group `pgid` (remembered at spawn). A
    /// group that no longer exists is not an error.
    SignalGroup {
        /// The process group id.
        pgid: u32,
        /// The signal.
        signal: Signal,
    },
    /// Stop waiting for the output streams; bytes already fed are kept.
    AbandonStreams,
    /// The call ended; this is the last action. If the helper's exit was
    /// never observed, the driver still reaps it in the background.
    Finished(Box<Outcome>),
}

impl Action {
    /// Every action's [`name`](Self::name), in declaration order. The enum
    /// is `#[non_exhaustive]`, so a driver's `match` outside this crate
    /// ends in a wildcard arm; a driver that must carry out every action
    /// checks this list's length against its arms at compile time
    /// (`const _: () = assert!(Action::NAMES.len() == 7);`), which fails
    /// when the core adds an action.
    pub const NAMES: [&'static str; 7] = [
        "audit",
        "show_approval_card",
        "spawn",
        "close_stdin",
        "signal_group",
        "abandon_streams",
        "finished",
    ];

    /// The action's name, e.g. `signal_group`: its entry in
    /// [`NAMES`](Self::NAMES).
    pub fn name(&self) -> &'static str {
        // The variant's position in `NAMES`: an action added to the enum
        // needs an arm here and its name there.
        let position = match self {
            Action::Audit(_) => 0,
            Action::ShowApprovalCard(_) => 1,
            Action::Spawn(_) => 2,
            Action::CloseStdin => 3,
            Action::SignalGroup { .. } => 4,
            Action::AbandonStreams => 5,
            Action::Finished(_) => 6,
        };
        Self::NAMES[position]
    }
}

/// A finished call: its record, and its retained output with the pool lease.
#[derive(Debug)]
pub struct Outcome {
    /// The call record (plain data).
    pub record: CallRecord,
    /// Retained stderr; holds its share of the process pool until dropped.
    pub stderr: Retained,
    /// Retained stdout (the structured result channel).
    pub stdout: Retained,
    /// The agent excerpt cap the call was configured with.
    pub excerpt_bytes: usize,
    /// The JSON value parsed from stdout when the call's result channel is
    /// [`ResultChannel::StdoutJson`]; see [`Outcome::result`].
    pub result_value: Option<serde_json::Value>,
    /// The secrets replaced in the rendered stderr and stdout, per rule.
    pub redactions: StreamRedactions,
    /// Whether the call allowed its stdout to be cut at its budget
    /// ([`CallSettings::stdout_truncation_allowed`]); if not, a cut stdout
    /// makes [`into_result`](Self::into_result) an error.
    pub stdout_truncation_allowed: bool,
}

impl Outcome {
    /// The stderr excerpt for a model: marker included, redacted, clamped
    /// to `stderr_agent_excerpt_bytes`.
    pub fn agent_excerpt(&self) -> String {
        self.stderr.render_clamped(self.excerpt_bytes)
    }

    /// The helper's stdout as captured, raw: the bytes
    /// `tokio::process::Output::stdout` would hold, within the call's
    /// stdout budget ([`CallSettings::stdout`]: by default 1 MiB, `head`
    /// retention). When the record says `stdout_truncated`, the bytes the
    /// budget dropped are missing (by default, all after the first
    /// 1 MiB); a streamed call
    /// ([`StdoutMode::Streamed`]) captures nothing here, its stdout went
    /// to the caller. **Not redacted**: these are the helper's bytes for
    /// the caller's own use; what may be shown elsewhere is
    /// [`stdout.render()`](Retained::render) or
    /// [`redacted_result`](Self::redacted_result).
    ///
    /// ```
    /// use std::time::{Instant, SystemTime};
    /// use spillguard_core::{Input,
    ///     Action, Call, CallKind, CallSettings, CallSpec, Config, ExitStatus, RetentionPool,
    /// };
    ///
    /// let config = Config::default();
    /// let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    /// let spec = CallSpec {
    ///     call_id: "c_1".into(),
    ///     session_id: "s_1".into(),
    ///     kind: CallKind::Action,
    ///     action: "git.head".into(),
    ///     target: "repo".into(),
    ///     summary: "git rev-parse HEAD".into(),
    ///     card_lines: Vec::new(),
    /// };
    /// let t0 = Instant::now();
    /// let mut call = Call::new(spec, CallSettings::action(&config), &pool, t0, SystemTime::UNIX_EPOCH);
    /// call.handle(t0, Input::Validated { needs_approval: false })?;
    /// while call.poll_action().is_some() {}
    /// call.handle(t0, Input::Spawned { pid: 4242 })?;
    /// call.handle(t0, Input::Stdout(b"c4f76c6\n"));
    /// call.handle(t0, Input::Stdout(b"\xff"));
    /// call.handle(t0, Input::Exited(ExitStatus::code(0)))?;
    /// call.handle(t0, Input::StdoutEof)?;
    /// call.handle(t0, Input::StderrEof)?;
    /// let outcome = std::iter::from_fn(|| call.poll_action())
    ///     .find_map(|a| match a { Action::Finished(o) => Some(o), _ => None })
    ///     .expect("finished");
    /// assert_eq!(outcome.stdout_bytes(), b"c4f76c6\n\xff");
    /// # Ok::<(), spillguard_core::CallError>(())
    /// ```
    pub fn stdout_bytes(&self) -> Vec<u8> {
        self.stdout.to_vec()
    }

    /// `Ok(self)`, unless the helper was never spawned because the call
    /// ended `failed_before_dispatch` (the OS refused the spawn, the
    /// command or settings were refused, or the audit log could not
    /// record the attempt), or its stdout was cut at its budget
    /// (`stdout_truncated`) and the call did not allow that
    /// ([`stdout_truncation_allowed`](Self::stdout_truncation_allowed)):
    /// then an [`OutcomeError`] that says why (a
    /// [`SpawnError`](crate::SpawnError), or the bytes written and kept)
    /// and keeps this outcome.
    ///
    /// Every other end is `Ok`, as with `tokio::process::Command::output`,
    /// where how the child exited is never an error: a non-zero exit or a
    /// signal (`failed_local`), a remote failure, a stop after dispatch
    /// (`cancelled_after_dispatch`, `killed`), a lost process (`unknown`),
    /// and the decisions taken before dispatch (`denied`,
    /// `approval_expired`, `queue_expired`, `cancelled_before_dispatch`,
    /// even if a spawn under way failed as the cancel came). Read
    /// [`CallRecord::state`] or [`exit`](Self::exit) for those.
    ///
    /// ```no_run
    /// # async fn run(outcome: impl std::future::Future<Output = spillguard_core::Outcome>)
    /// # -> Result<(), Box<dyn std::error::Error>> {
    /// // With an adapter: `host.command("git").arg("status").run().await`.
    /// let outcome = outcome.await.into_result()?;
    /// println!("{}", outcome.exit());
    /// # Ok(())
    /// # }
    /// ```
    #[doc(alias = "spawn")]
    pub fn into_result(self) -> Result<Outcome, OutcomeError> {
        OutcomeError::of(self)
    }

    /// The structured result parsed from stdout, if the call's result
    /// channel is [`ResultChannel::StdoutJson`] and stdout held one valid
    /// JSON value within its budget; the record's `result_error` says why
    /// not otherwise.
    pub fn result(&self) -> Option<&serde_json::Value> {
        self.result_value.as_ref()
    }

    /// [`result`](Self::result) as it may be shown outside the process:
    /// the value parsed again from the redacted stdout, so a secret the
    /// helper printed in its result reads `[redacted: RULE]` there, as in
    /// every other view (it is counted in `stdout_redactions`). Should a
    /// replacement leave the text no longer JSON (a number after a
    /// credential key, an extra pattern that spans a quote), the value is
    /// redacted member by member instead and keeps its shape: each string
    /// on its own, and a member whose `"key": value` pair a rule matches
    /// beyond its key and value alone becomes the string
    /// `"[redacted: RULE]"`. Should that find fewer secrets than the text
    /// did, the value is the redacted text as one JSON string. What a
    /// client is shown is never unredacted.
    ///
    /// ```
    /// # use spillguard_core::Outcome;
    /// fn shown(outcome: &Outcome) -> String {
    ///     match outcome.redacted_result() {
    ///         Some(value) => value.to_string(),
    ///         None => outcome.record.result_error.clone().unwrap_or_default(),
    ///     }
    /// }
    /// ```
    pub fn redacted_result(&self) -> Option<serde_json::Value> {
        let raw = self.result_value.as_ref()?;
        if self.redactions.stdout.total() == 0 {
            return Some(raw.clone());
        }
        let text = self.stdout.render();
        if let Ok(value) = serde_json::from_str(&text) {
            return Some(value);
        }
        // Member by member, unless that finds fewer secrets than the text
        // did (an extra pattern that reads the text's own spacing): then
        // the redacted text itself, as one string.
        let (value, found) = crate::redact::redact_json(self.stdout.redactor(), raw);
        Some(if found >= self.redactions.stdout.total() {
            value
        } else {
            serde_json::Value::String(text)
        })
    }
}
