//! The inputs of a [`Call`] that are never transitions: the bytes a
//! helper writes, and the counters and figures its driver reports.
//!
//! **Feeding bytes never fails and never causes a transition by itself**:
//! the captures count and drop within their budgets; only the opt-in kill
//! ceiling, once crossed by stderr, becomes an explicit cancel
//! ([`CancelReason::StderrCeiling`]). Counters saturate. Once the call is
//! terminal, every method here returns at once and changes nothing.

use std::time::Instant;

#[cfg(doc)]
use super::AuditKind;
use super::input::Event;
use super::{Call, CancelReason, State};
use crate::capture::Fed;
#[cfg(doc)]
use crate::confine::LimitHit;
use crate::confine::{Enforcement, TreeReport};
use crate::jsonrpc::Diverted;

impl Call {
    /// The capacity the helper's output pipes got after the adapter asked
    /// to enlarge them (`None`: the request failed). Recorded as
    /// `pipe_capacity_bytes`; never a transition, never an error; ignored
    /// once terminal.
    pub(super) fn on_pipe_capacity(&mut self, capacity: Option<u64>) {
        if !self.state.is_terminal() {
            self.pipe_capacity = capacity;
        }
    }

    /// What the driver enforced of the call's
    /// [`Confinement`](crate::Confinement), by mechanism, reported once the
    /// helper is spawned (or when the spawn was refused because a
    /// restriction could not be enforced). Recorded as `enforced`,
    /// `not_enforced` and `tree_kill`; never a transition; ignored once
    /// terminal.
    pub(super) fn on_enforcement(&mut self, enforcement: Enforcement) {
        if !self.state.is_terminal() {
            self.enforcement = Some(enforcement);
        }
    }

    /// What the driver measured of the helper's tree (its control
    /// groups' events and peaks): before its exit is handled, and at each
    /// stream's end. Recorded as `limit_hit` (read with the exit, see
    /// [`LimitHit::of`]) and the tree's peaks; when a limit of the call's
    /// was hit, an [`AuditKind::LimitHit`] event is written just before
    /// the final record. A later report replaces an earlier one. Never a
    /// transition; ignored once terminal.
    pub(super) fn on_tree_report(&mut self, report: TreeReport) {
        if !self.state.is_terminal() {
            self.tree = Some(report);
        }
    }

    /// Bytes read from the helper's stderr. Never fails, never causes a
    /// transition by itself; only the opt-in kill ceiling, once crossed,
    /// becomes a cancel with reason [`CancelReason::StderrCeiling`].
    /// Ignored once terminal.
    pub(super) fn on_stderr(&mut self, now: Instant, bytes: &[u8]) {
        if self.state.is_terminal() {
            return;
        }
        let fed = match self.stderr.as_mut() {
            Some(capture) => capture.feed(bytes),
            None => return,
        };
        if fed == Fed::CeilingCrossed && self.state == State::Dispatched {
            self.transition_infallible(now, Event::Cancel(CancelReason::StderrCeiling));
        }
    }

    /// Bytes read from the helper's stdout. Never fails, never a
    /// transition; ignored once terminal.
    pub(super) fn on_stdout(&mut self, _now: Instant, bytes: &[u8]) {
        if self.state.is_terminal() {
            return;
        }
        if let Some(capture) = self.stdout.as_mut() {
            let _ = capture.feed(bytes);
        }
    }

    /// A streamed call's adapter sent `n` more bytes of the helper's stdout
    /// to the caller. A counter (`stdout_bytes_forwarded`): never fails,
    /// never a transition; ignored once the call has ended.
    pub(super) fn on_stdout_forwarded(&mut self, n: u64) {
        if !self.state.is_terminal() {
            self.stdout_bytes_forwarded = self.stdout_bytes_forwarded.saturating_add(n);
        }
    }

    /// A streamed call's adapter wrote `n` more bytes from the caller to the
    /// helper's stdin. A counter (`stdin_bytes_forwarded`): never fails,
    /// never a transition; ignored once the call has ended.
    pub(super) fn on_stdin_forwarded(&mut self, n: u64) {
        if !self.state.is_terminal() {
            self.stdin_bytes_forwarded = self.stdin_bytes_forwarded.saturating_add(n);
        }
    }

    /// A streamed call's adapter dropped `n` bytes the caller sent, which
    /// the helper never took (it stopped reading its stdin). A counter
    /// (`stdin_bytes_undelivered`): never fails, never a transition;
    /// ignored once the call has ended.
    pub(super) fn on_stdin_undelivered(&mut self, n: u64) {
        if !self.state.is_terminal() {
            self.stdin_bytes_undelivered = self.stdin_bytes_undelivered.saturating_add(n);
        }
    }

    /// Bytes of a streamed MCP server's stdout that are not protocol (see
    /// [`StdoutLineGuard`](crate::StdoutLineGuard)): fed to the stderr
    /// capture, exactly like [`Input::Stderr`](crate::Input::Stderr) (the
    /// kill ceiling included), and counted as `stdout_bytes_diverted` and
    /// `stdout_lines_diverted`. Ignored once terminal.
    pub(super) fn on_stdout_diverted(&mut self, now: Instant, diverted: Diverted<'_>) {
        if self.state.is_terminal() {
            return;
        }
        self.stdout_bytes_diverted = self
            .stdout_bytes_diverted
            .saturating_add(diverted.bytes.len() as u64);
        self.stdout_lines_diverted = self.stdout_lines_diverted.saturating_add(diverted.lines);
        self.on_stderr(now, diverted.bytes);
    }
}
