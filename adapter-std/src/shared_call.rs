//! The call as a std owner, its readers and its waiter share it.
//!
//! A std reader feeds each chunk it reads to the core itself, and reports
//! its end-of-file itself; the waiter reports the exit itself. Each does so
//! under a lock nobody holds for long, instead of sending the fact to the
//! owner's thread: a flood then costs one uncontended lock per 64 KiB read
//! rather than a hop between threads (a wake-up and a context switch or
//! more per chunk), and a short call wakes its owner once instead of three
//! times. The owner is woken ([`Event::CallChanged`]) only when a report
//! left the core with new actions (the kill ceiling crossed, a timer that
//! was due, the call's end) or with an earlier timeout (the post-exit drain
//! window armed by the exit). Commands and timers still reach the owner
//! directly, and every decision is still the core's.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use spillguard_core::{Call, CallError};

use crate::owner::Event;
use crate::run_loop::Pipe;

/// The [`Call`] behind a lock, and whether its readers still feed it.
#[derive(Debug)]
pub(crate) struct SharedCall {
    inner: Mutex<Inner>,
}

/// What the lock guards.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) call: Call,
    /// `false` once the call stopped listening to its helper (its streams
    /// were abandoned, or the call finished): readers then drain unheard.
    listening: bool,
}

/// What became of a fact a reader or the waiter reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reported {
    /// The core has it and asks for nothing new.
    Taken,
    /// The core has it and now has actions, or a timer due earlier than
    /// the owner waits for: wake the owner.
    WakeOwner,
    /// Nobody listens any more: a reader reads the rest and drops it.
    NotListening,
}

impl Reported {
    /// Wakes the owner through `events` if asked to; `false` when the call
    /// no longer listens (or its owner is gone).
    pub(crate) fn wake(self, events: &std::sync::mpsc::SyncSender<Event>) -> bool {
        match self {
            Reported::Taken => true,
            Reported::WakeOwner => events.send(Event::CallChanged).is_ok(),
            Reported::NotListening => false,
        }
    }
}

impl SharedCall {
    pub(crate) fn new(call: Call) -> Self {
        Self {
            inner: Mutex::new(Inner {
                call,
                listening: true,
            }),
        }
    }

    /// The call, for the owner. A thread that panicked while reporting left
    /// the call as the core left it, so a poisoned lock is still used.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Readers and the waiter stop reporting: what they read from now on
    /// is dropped.
    pub(crate) fn stop_listening(&self) {
        self.lock().listening = false;
    }

    /// Feeds `bytes` read from `pipe` to the core.
    pub(crate) fn feed(&self, pipe: Pipe, bytes: &[u8]) -> Reported {
        self.report(|call, now| {
            match pipe {
                Pipe::Stderr => call.handle_stderr(now, bytes),
                Pipe::Stdout => call.handle_stdout(now, bytes),
            }
            Ok(())
        })
    }

    /// Makes `input`, one `handle_*` call, on the call at the time of the
    /// report.
    ///
    /// A timer already due is fired first, as the owner would have done
    /// before taking the fact: a flood never overtakes a deadline.
    pub(crate) fn report(
        &self,
        input: impl FnOnce(&mut Call, Instant) -> Result<(), CallError>,
    ) -> Reported {
        let mut inner = self.lock();
        if !inner.listening {
            return Reported::NotListening;
        }
        let call = &mut inner.call;
        // Actions already waiting are the owner's to see (whoever queued
        // them woke it), and it waits until the current timeout: only new
        // actions or an earlier timeout need a wake-up.
        let waiting = call.has_pending_actions();
        let timeout = call.poll_timeout();
        let now = Instant::now();
        if call.poll_timeout().is_some_and(|at| at <= now) {
            call.handle_timeout(now);
        }
        let accepted = input(call, now);
        // The helper's threads report each fact once, after the spawn was
        // reported: the core accepts every one of them.
        debug_assert!(accepted.is_ok(), "{accepted:?}");
        let earlier = match (timeout, call.poll_timeout()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(before), Some(after)) => after < before,
        };
        if (!waiting && call.has_pending_actions()) || earlier {
            Reported::WakeOwner
        } else {
            Reported::Taken
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use std::time::{Duration, SystemTime};

    use spillguard_core::{
        Action, CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config, ExitStatus,
        Outcome, RetentionPool, Signal, State, StreamEnd,
    };

    /// A dispatched call (pid and pgid 1), its actions so far carried out.
    pub(crate) fn dispatched(kill_after: Option<u64>, deadline: Option<Duration>) -> SharedCall {
        let config = Config {
            stderr_kill_after_bytes: kill_after,
            ..Config::default()
        };
        let pool = RetentionPool::new(config.stderr_retained_process_bytes);
        let spec = CallSpec {
            call_id: "c".into(),
            session_id: "s".into(),
            kind: CallKind::Action,
            action: "a".into(),
            target: "t".into(),
            summary: String::new(),
        };
        let mut settings = CallSettings::action(&config);
        settings.deadline = deadline;
        let now = Instant::now();
        let mut call = Call::new(spec, settings, &pool, now, SystemTime::UNIX_EPOCH);
        call.handle_validated(now, false).unwrap();
        while call.poll_action().is_some() {}
        call.handle_spawned(now, 1, 1).unwrap();
        while call.poll_action().is_some() {}
        SharedCall::new(call)
    }

    fn seen(shared: &SharedCall) -> u64 {
        shared.lock().call.stderr().unwrap().bytes_seen()
    }

    /// Carries out the call's pending actions: the signals it asked for,
    /// and its outcome if it finished.
    pub(crate) fn carry_out(shared: &SharedCall) -> (Vec<Signal>, Option<Outcome>) {
        let mut inner = shared.lock();
        let (mut signals, mut outcome) = (Vec::new(), None);
        while let Some(action) = inner.call.poll_action() {
            match action {
                Action::SignalGroup { pgid: 1, signal } => signals.push(signal),
                Action::Finished(finished) => outcome = Some(*finished),
                _ => {}
            }
        }
        (signals, outcome)
    }

    /// Ends the call (the helper died of the TERM, both streams closed)
    /// and returns its record, with the signals the core asked for.
    fn end(shared: &SharedCall) -> (CallRecord, Vec<Signal>) {
        let (mut signals, _) = carry_out(shared);
        {
            let call = &mut shared.lock().call;
            let now = Instant::now();
            call.handle_exit(now, ExitStatus::signal(15)).unwrap();
            call.handle_stdout_eof(now).unwrap();
            call.handle_stderr_eof(now).unwrap();
        }
        let (more, outcome) = carry_out(shared);
        signals.extend(more);
        (outcome.unwrap().record, signals)
    }

    #[test]
    fn a_short_call_wakes_its_owner_once_at_its_end() {
        let shared = dispatched(None, None);
        let eof = |pipe| {
            shared.report(|call, now| match pipe {
                Pipe::Stdout => call.handle_stdout_eof(now),
                Pipe::Stderr => call.handle_stderr_eof(now),
            })
        };
        assert_eq!(shared.feed(Pipe::Stdout, b"{}"), Reported::Taken);
        assert_eq!(eof(Pipe::Stdout), Reported::Taken);
        assert_eq!(eof(Pipe::Stderr), Reported::Taken);
        let exited = shared.report(|call, now| call.handle_exit(now, ExitStatus::code(0)));
        assert_eq!(exited, Reported::WakeOwner);
        let (signals, outcome) = carry_out(&shared);
        let record = outcome.unwrap().record;
        assert_eq!(record.state, State::Completed);
        assert_eq!(record.exit_status, Some(0));
        assert_eq!(record.stream_end, StreamEnd::Eof);
        assert_eq!(record.stdout_bytes_seen, 2);
        assert_eq!(signals, []);
    }

    #[test]
    fn an_exit_with_streams_open_wakes_the_owner_for_the_drain_window() {
        let shared = dispatched(None, None);
        assert_eq!(shared.lock().call.poll_timeout(), None);
        let exited = shared.report(|call, now| call.handle_exit(now, ExitStatus::code(0)));
        // No action, but a timer the owner does not know of yet.
        assert_eq!(exited, Reported::WakeOwner);
        let inner = shared.lock();
        assert!(!inner.call.has_pending_actions());
        let drain = inner.call.settings().post_exit_drain;
        assert_eq!(drain, Duration::from_millis(250));
        assert!(inner.call.poll_timeout().is_some());
    }

    #[test]
    fn chunks_are_counted_without_waking_the_owner() {
        let shared = dispatched(None, None);
        for _ in 0..10 {
            assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Reported::Taken);
        }
        assert_eq!(shared.feed(Pipe::Stdout, b"{}"), Reported::Taken);
        assert_eq!(seen(&shared), 10_000);
        let (record, signals) = end(&shared);
        assert_eq!(record.state, State::FailedLocal);
        assert_eq!(record.stderr_bytes_seen, 10_000);
        assert_eq!(record.stdout_bytes_seen, 2);
        assert_eq!(signals, []);
    }

    #[test]
    fn crossing_the_kill_ceiling_wakes_the_owner_once() {
        let shared = dispatched(Some(1500), None);
        assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Reported::Taken);
        assert_eq!(
            shared.feed(Pipe::Stderr, &[b'x'; 1000]),
            Reported::WakeOwner
        );
        // The owner has not carried out the actions yet: no second wake-up.
        assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Reported::Taken);
        let (record, signals) = end(&shared);
        assert_eq!(record.state, State::CancelledAfterDispatch);
        assert_eq!(record.cancel_reason, Some(CancelReason::StderrCeiling));
        assert_eq!(record.stderr_bytes_seen, 3000);
        assert_eq!(signals, [Signal::Term]);
    }

    #[test]
    fn a_due_deadline_is_fired_before_the_chunk() {
        let shared = dispatched(Some(1), Some(Duration::ZERO));
        // The deadline (zero) is due and the chunk crosses the ceiling: the
        // deadline comes first, so the cancel is the deadline's.
        assert_eq!(shared.feed(Pipe::Stderr, b"xx"), Reported::WakeOwner);
        let (record, signals) = end(&shared);
        assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
        assert_eq!(record.stderr_bytes_seen, 2);
        assert_eq!(signals, [Signal::Term]);
    }

    #[test]
    fn nothing_is_fed_once_the_call_stops_listening() {
        let shared = dispatched(None, None);
        assert_eq!(shared.feed(Pipe::Stderr, b"abc"), Reported::Taken);
        shared.stop_listening();
        assert_eq!(shared.feed(Pipe::Stderr, b"def"), Reported::NotListening);
        assert_eq!(seen(&shared), 3);
    }
}
