//! What a call's owner publishes for its handle (state, approval card,
//! outcome), behind one mutex, with a runtime's way of waking the waiters.
//!
//! The owner writes through [`Published`]'s setters, each of which wakes
//! the waiters ([`Wake::wake_all`]) after a change they may wait for; a
//! handle reads with [`Published::lock`] and waits in its runtime's way
//! (a `Condvar` on that lock, an event listener, …), checking the
//! [`Snapshot`] again after it is woken.

use std::any::Any;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use crate::lines::LineQueue;

use spillguard_core::{ApprovalCard, Outcome, State};

/// Wakes every waiter of a [`Published`].
pub trait Wake {
    /// Wakes every waiter.
    fn wake_all(&self);
}

impl Wake for Condvar {
    fn wake_all(&self) {
        self.notify_all();
    }
}

/// What the owner has published so far.
#[derive(Debug)]
pub struct Snapshot {
    /// The call's state when last published.
    pub state: State,
    /// The approval card, once shown.
    pub card: Option<ApprovalCard>,
    /// The outcome, until a handle takes it.
    pub outcome: Option<Outcome>,
    /// The helper's pid while it runs: from its spawn until its exit was
    /// observed or the call finished.
    pub pid: Option<u32>,
    /// The call finished (its outcome was published).
    pub finished: bool,
    /// The owner is gone (finished, or panicked).
    pub owner_ended: bool,
    /// A streamed call's stdin and stdout, for the caller.
    pub streams: Streams,
}

/// Where a call's streams stand, for a handle that asks for them.
pub enum Streams {
    /// A streamed call whose helper has not been spawned yet.
    Pending,
    /// The runtime's streams of the spawned helper, for the handle to take.
    Ready(Box<dyn Any + Send>),
    /// Taken by the handle.
    Taken,
    /// The call is not streamed: its output is captured.
    NotStreamed,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Streams::Pending => "Pending",
            Streams::Ready(_) => "Ready",
            Streams::Taken => "Taken",
            Streams::NotStreamed => "NotStreamed",
        })
    }
}

impl Snapshot {
    /// Whether waiting for the approval card is over: it is shown, or the
    /// call ended without one.
    pub fn card_settled(&self) -> bool {
        self.card.is_some() || self.finished
    }

    /// Whether the outcome is there to take.
    pub fn outcome_ready(&self) -> bool {
        self.outcome.is_some()
    }

    /// Whether asking for the streams has an answer now: they are there,
    /// taken, never coming (not streamed), or the call ended.
    pub fn streams_settled(&self) -> bool {
        !matches!(self.streams, Streams::Pending) || self.finished
    }

    /// The streams, if they are there (the slot is then `Taken`), else why
    /// not, as an error for the caller.
    pub fn take_streams(&mut self) -> std::io::Result<Box<dyn Any + Send>> {
        use std::io::{Error, ErrorKind};
        match std::mem::replace(&mut self.streams, Streams::Taken) {
            Streams::Ready(streams) => Ok(streams),
            Streams::Taken => Err(Error::new(
                ErrorKind::AlreadyExists,
                "the call's streams were already taken",
            )),
            Streams::NotStreamed => {
                self.streams = Streams::NotStreamed;
                Err(Error::new(
                    ErrorKind::Unsupported,
                    "the call captures its helper's output: start it with .streamed()",
                ))
            }
            Streams::Pending => {
                self.streams = Streams::Pending;
                Err(Error::new(
                    ErrorKind::NotConnected,
                    format!("the call ended {} before its helper ran", self.state),
                ))
            }
        }
    }
}

/// What a handle finds when it looks for the outcome, decided under one
/// lock (an owner may publish the outcome and end between two looks).
#[derive(Debug)]
pub enum Taken {
    /// The outcome, now the handle's.
    Outcome(Box<Outcome>),
    /// The owner ended without an outcome (it panicked), or the outcome was
    /// already taken.
    OwnerGone,
    /// The call has not finished yet.
    NotYet,
}

impl Taken {
    /// What a handle's `wait_timeout` or `try_outcome` gives: the outcome,
    /// or `handle` back if the call has not finished yet; `gone` decides
    /// for an owner that ended without an outcome (it panics).
    pub fn or_handle<H>(self, handle: H, gone: impl FnOnce(H) -> Outcome) -> Result<Outcome, H> {
        match self {
            Taken::Outcome(outcome) => Ok(*outcome),
            Taken::OwnerGone => Ok(gone(handle)),
            Taken::NotYet => Err(handle),
        }
    }
}

impl Snapshot {
    /// Takes the outcome if it is there; otherwise says whether one can
    /// still come.
    pub fn take_outcome(&mut self) -> Taken {
        match self.outcome.take() {
            Some(outcome) => Taken::Outcome(Box::new(outcome)),
            None if self.owner_ended => Taken::OwnerGone,
            None => Taken::NotYet,
        }
    }
}

/// The published state of one call, shared by its owner and its handle;
/// `W` wakes the handle's waiters.
#[derive(Debug)]
pub struct Published<W> {
    snapshot: Mutex<Snapshot>,
    changed: W,
    /// The stderr lines a caller asked for, fed by the owner.
    lines: OnceLock<Arc<LineQueue>>,
}

impl<W: Wake> Published<W> {
    /// Nothing published yet (`received`), waking waiters with `changed`.
    pub fn new(changed: W) -> Self {
        Self {
            snapshot: Mutex::new(Snapshot {
                state: State::Received,
                card: None,
                outcome: None,
                pid: None,
                finished: false,
                owner_ended: false,
                streams: Streams::Pending,
            }),
            changed,
            lines: OnceLock::new(),
        }
    }

    /// A queue of stderr lines (at most `capacity`) for the caller, from
    /// now on; `None` if one was already asked for. A call already over
    /// gives a queue that has ended.
    pub fn ask_lines(&self, capacity: usize) -> Option<Arc<LineQueue>> {
        let queue = LineQueue::new(capacity);
        self.lines.set(queue.clone()).ok()?;
        // Read after the queue is there: an owner that finished before
        // the set did not see it, and this sees its end.
        let over = {
            let snapshot = self.lock();
            snapshot.finished || snapshot.owner_ended
        };
        if over {
            queue.end();
        }
        Some(queue)
    }

    /// The queue of stderr lines, if a caller asked for one.
    pub fn lines(&self) -> Option<&Arc<LineQueue>> {
        self.lines.get()
    }

    /// The snapshot, locked.
    pub fn lock(&self) -> MutexGuard<'_, Snapshot> {
        self.snapshot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How waiters are woken.
    pub fn changed(&self) -> &W {
        &self.changed
    }

    /// The call's current state (nobody waits for a state alone). A
    /// terminal state also takes the pid back, as the outcome does: the
    /// helper is not the caller's to signal any more while the call ends
    /// its tree.
    pub fn set_state(&self, state: State) {
        let mut snapshot = self.lock();
        snapshot.state = state;
        if state.is_terminal() {
            snapshot.pid = None;
        }
    }

    /// The helper's pid while it runs (`None` once its exit was observed).
    pub fn set_pid(&self, pid: Option<u32>) {
        self.lock().pid = pid;
    }

    /// The approval card was shown.
    pub fn show_card(&self, card: ApprovalCard) {
        self.update(|snapshot| snapshot.card = Some(card));
    }

    /// The call finished with `outcome`.
    pub fn finish(&self, outcome: Outcome) {
        self.finish_then(outcome, || {});
    }

    /// [`finish`](Self::finish), running `then` while the outcome is being
    /// published: before any waiter of this call wakes, and while whoever
    /// `then` wakes cannot read this call's state until it is published.
    pub fn finish_then(&self, outcome: Outcome, then: impl FnOnce()) {
        self.update(|snapshot| {
            snapshot.state = outcome.record.state;
            snapshot.pid = None;
            snapshot.finished = true;
            snapshot.outcome = Some(outcome);
            then();
        });
    }

    /// Drops the outcome if no handle took it (nobody will): its retained
    /// text and pool share go with it.
    pub fn discard_outcome(&self) {
        drop(self.lock().outcome.take());
    }

    /// The call will not hand out streams (its output is captured).
    pub fn no_streams(&self) {
        self.lock().streams = Streams::NotStreamed;
    }

    /// The spawned helper's streams, for the handle.
    pub fn hand_out_streams(&self, streams: Box<dyn Any + Send>) {
        self.update(|snapshot| snapshot.streams = Streams::Ready(streams));
    }

    /// The owner is gone; no more changes will come.
    pub fn owner_ended(&self) {
        self.update(|snapshot| snapshot.owner_ended = true);
    }

    /// Whether the call finished.
    pub fn is_finished(&self) -> bool {
        self.lock().finished
    }

    fn update(&self, change: impl FnOnce(&mut Snapshot)) {
        change(&mut self.lock());
        self.changed.wake_all();
    }
}

impl Published<Condvar> {
    /// For a waiter on a thread: waits until `ready` holds or the owner
    /// ended, at most until `deadline` (`None`: no limit).
    pub fn wait_until(
        &self,
        deadline: Option<Instant>,
        ready: impl Fn(&Snapshot) -> bool,
    ) -> MutexGuard<'_, Snapshot> {
        let mut inner = self.lock();
        while !ready(&inner) && !inner.owner_ended {
            inner = match deadline {
                None => self
                    .changed()
                    .wait(inner)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    self.changed()
                        .wait_timeout(inner, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::time::{Instant, SystemTime};

    use spillguard_core::{Action, Call, CallSettings, Config, ExitStatus, Input, RetentionPool};

    use crate::{CallRequest, HelperCommand};

    /// The outcome of a call of a helper that exited 0 at once.
    fn outcome() -> Outcome {
        let config = Config::default();
        let pool = RetentionPool::new(config.stderr_retained_process_bytes);
        let resolved = CallRequest::new(HelperCommand::new("true"))
            .resolve("s", |_| CallSettings::action(&config));
        let (spec, settings) = (resolved.spec, resolved.settings);
        let now = Instant::now();
        let mut call = Call::new(spec, settings, &pool, now, SystemTime::UNIX_EPOCH);
        call.handle(
            now,
            Input::Validated {
                needs_approval: false,
            },
        )
        .unwrap();
        while call.poll_action().is_some() {}
        call.handle(now, Input::Spawned { pid: 1 }).unwrap();
        call.handle(now, Input::Exited(ExitStatus::code(0)))
            .unwrap();
        call.handle(now, Input::StdoutEof).unwrap();
        call.handle(now, Input::StderrEof).unwrap();
        std::iter::from_fn(|| call.poll_action())
            .find_map(|action| match action {
                Action::Finished(outcome) => Some(*outcome),
                _ => None,
            })
            .unwrap()
    }

    #[test]
    fn an_outcome_published_before_the_owner_ended_is_always_taken() {
        let published = Published::new(Condvar::new());
        assert!(matches!(published.lock().take_outcome(), Taken::NotYet));
        // The owner publishes, then ends, before the handle looks: the
        // handle still gets the outcome, once.
        published.finish(outcome());
        published.owner_ended();
        let Taken::Outcome(taken) = published.lock().take_outcome() else {
            panic!("the outcome was published");
        };
        assert_eq!(taken.record.state, State::Completed);
        assert!(matches!(published.lock().take_outcome(), Taken::OwnerGone));
    }

    #[test]
    fn an_owner_that_ended_without_an_outcome_is_gone() {
        let published = Published::new(Condvar::new());
        published.owner_ended();
        assert!(matches!(published.lock().take_outcome(), Taken::OwnerGone));
    }
}
