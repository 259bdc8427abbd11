//! The call's timers: one fixed table of optional deadlines, one per
//! [`Timer`]. **A delay too long for the clock to express arms nothing**
//! (it never comes); timers due at the same instant fire in [`Timer::ALL`]
//! order.

use std::time::{Duration, Instant};

/// Every timer a call can arm. A timer is a deadline in the caller's
/// monotonic time; it fires through [`Input::Timeout`](crate::Input::Timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// The approval card expires (fixed when the card is shown).
    ApprovalDeadline,
    /// A queued call was not admitted in time
    /// ([`Admission::Queued`](crate::Admission::Queued)): it ends
    /// `queue_expired`. Armed when the call enters `queued`.
    QueueDeadline,
    /// The call's maximum duration after dispatch.
    CallDeadline,
    /// A streamed helper's stdin was closed (its input ended, or a stop
    /// began); SIGTERM to the group follows when this fires.
    StdinCloseGrace,
    /// SIGTERM was sent; SIGKILL follows when this fires. It runs
    /// the shutdown grace while the direct child lives, and at most the
    /// escapee wait once its exit was observed.
    ShutdownGrace,
    /// The direct child exited; its streams get this long to close.
    PostExitDrain,
    /// SIGKILL was sent; exit and streams get this long (the kill wait, or
    /// at most the escapee wait once the direct child exited) before the
    /// call stops waiting for them.
    KillWait,
    /// The debug grant the call is under ends (the one it started under,
    /// or one given while it ran): its raised stderr budget falls back to
    /// the normal one.
    DebugGrantEnd,
}

impl Timer {
    /// All timers, in the order they are checked when several are due.
    pub const ALL: [Timer; COUNT] = [
        Timer::ApprovalDeadline,
        Timer::QueueDeadline,
        Timer::CallDeadline,
        Timer::StdinCloseGrace,
        Timer::ShutdownGrace,
        Timer::PostExitDrain,
        Timer::KillWait,
        Timer::DebugGrantEnd,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// How many timers there are.
const COUNT: usize = 8;

/// A fixed array of optional deadlines, one per [`Timer`].
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; COUNT],
}

impl TimerTable {
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer.index()] = Some(at);
    }

    /// Arms `timer` for `after` past `now`; a delay too long for the clock
    /// to express never comes, so the timer stays disarmed.
    pub(crate) fn set_after(&mut self, timer: Timer, now: Instant, after: Duration) {
        match now.checked_add(after) {
            Some(at) => self.set(timer, at),
            None => self.stop(timer),
        }
    }

    pub(crate) fn stop(&mut self, timer: Timer) {
        self.deadlines[timer.index()] = None;
    }

    pub(crate) fn get(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer.index()]
    }

    pub(crate) fn stop_all(&mut self) {
        self.deadlines = [None; COUNT];
    }

    /// The earliest armed deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// Disarms and returns the first timer due at `now`, in [`Timer::ALL`]
    /// order among those with the earliest deadline.
    pub(crate) fn take_due(&mut self, now: Instant) -> Option<Timer> {
        let earliest = self.next().filter(|&at| at <= now)?;
        let timer = Timer::ALL
            .into_iter()
            .find(|&t| self.get(t) == Some(earliest))?;
        self.stop(timer);
        Some(timer)
    }
}
