//! The call as a std owner and its readers share it.
//!
//! A std reader feeds each chunk it reads to the core itself, under a lock
//! that nobody holds for long, instead of sending the chunk to the owner's
//! thread: a flood then costs one uncontended lock per 64 KiB read rather
//! than a hop between threads (a wake-up and a context switch or more per
//! chunk). The owner is woken only when a chunk left the core with
//! something to do (the kill ceiling was crossed, or a timer was due).
//! End-of-file, the exit, commands and timers still reach the owner as
//! events, and every decision is still the core's.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use spillguard_core::Call;

use crate::run_loop::Pipe;

/// The [`Call`] behind a lock, and whether its readers still feed it.
#[derive(Debug)]
pub(crate) struct SharedCall {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) call: Call,
    /// `false` once the call stopped listening to its streams (they were
    /// abandoned, or the call finished): readers then drain unheard.
    listening: bool,
}

/// What became of a chunk a reader fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fed {
    /// The core has it and asks for nothing new.
    Kept,
    /// The core has it and now has actions: wake the owner.
    WakeOwner,
    /// Nobody listens any more: read the rest and drop it.
    NotListening,
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

    /// The call, for the owner. A reader that panicked while feeding left
    /// the call as the core left it, so a poisoned lock is still used.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Readers stop feeding: what they read from now on is dropped.
    pub(crate) fn stop_listening(&self) {
        self.lock().listening = false;
    }

    /// Feeds `bytes` read from `pipe` to the core, at the time of feeding.
    ///
    /// A timer already due is fired first, as the owner would have done
    /// before taking the chunk: a flood never overtakes a deadline.
    pub(crate) fn feed(&self, pipe: Pipe, bytes: &[u8]) -> Fed {
        let mut inner = self.lock();
        if !inner.listening {
            return Fed::NotListening;
        }
        let call = &mut inner.call;
        // Actions already waiting are the owner's to see; only new ones
        // need a wake-up.
        let waiting = call.has_pending_actions();
        let now = Instant::now();
        if call.poll_timeout().is_some_and(|at| at <= now) {
            call.handle_timeout(now);
        }
        match pipe {
            Pipe::Stderr => call.handle_stderr(now, bytes),
            Pipe::Stdout => call.handle_stdout(now, bytes),
        }
        if !waiting && call.has_pending_actions() {
            Fed::WakeOwner
        } else {
            Fed::Kept
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    use std::time::{Duration, SystemTime};

    use spillguard_core::{
        Action, CallKind, CallRecord, CallSettings, CallSpec, CancelReason, Config, ExitStatus,
        RetentionPool, Signal, State,
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

    /// Ends the call (the helper died of the TERM, both streams closed)
    /// and returns its record, with the signals the core asked for.
    fn end(shared: &SharedCall) -> (CallRecord, Vec<Signal>) {
        let mut inner = shared.lock();
        let call = &mut inner.call;
        let mut signals = Vec::new();
        let mut outcome = None;
        let mut take = |call: &mut Call| {
            while let Some(action) = call.poll_action() {
                match action {
                    Action::SignalGroup { pgid: 1, signal } => signals.push(signal),
                    Action::Finished(finished) => outcome = Some(finished),
                    _ => {}
                }
            }
        };
        take(call);
        let now = Instant::now();
        call.handle_exit(now, ExitStatus::signal(15)).unwrap();
        call.handle_stdout_eof(now).unwrap();
        call.handle_stderr_eof(now).unwrap();
        take(call);
        (outcome.unwrap().record, signals)
    }

    #[test]
    fn chunks_are_counted_without_waking_the_owner() {
        let shared = dispatched(None, None);
        for _ in 0..10 {
            assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Fed::Kept);
        }
        assert_eq!(shared.feed(Pipe::Stdout, b"{}"), Fed::Kept);
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
        assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Fed::Kept);
        assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Fed::WakeOwner);
        // The owner has not carried out the actions yet: no second wake-up.
        assert_eq!(shared.feed(Pipe::Stderr, &[b'x'; 1000]), Fed::Kept);
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
        assert_eq!(shared.feed(Pipe::Stderr, b"xx"), Fed::WakeOwner);
        let (record, signals) = end(&shared);
        assert_eq!(record.cancel_reason, Some(CancelReason::Deadline));
        assert_eq!(record.stderr_bytes_seen, 2);
        assert_eq!(signals, [Signal::Term]);
    }

    #[test]
    fn nothing_is_fed_once_the_call_stops_listening() {
        let shared = dispatched(None, None);
        assert_eq!(shared.feed(Pipe::Stderr, b"abc"), Fed::Kept);
        shared.stop_listening();
        assert_eq!(shared.feed(Pipe::Stderr, b"def"), Fed::NotListening);
        assert_eq!(seen(&shared), 3);
    }
}
