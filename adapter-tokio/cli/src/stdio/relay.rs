//! With `--restart`: what the stdin pump, the signal thread and the
//! guard's loop share across the server's runs. The core's [`Restarts`]
//! decides; the loop (`supervise.rs`) tells the pump here that a run is
//! over ([`Relay::server_gone`]), hands it the next run's stdin
//! ([`Relay::attach`]), or says that no run follows ([`Relay::over`]).
//! The pump tells the loop that the client ended, the signal thread that
//! a stop was asked, and the stdout pump that the host went away.
//!
//! [`Restarts`]: spillguard_std::proto::Restarts

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use spillguard_std::Canceller;
use spillguard_std::proto::{ServerGone, StopReason};

use crate::call::HelperStdin;

/// The shared state; see the module docs.
#[derive(Debug)]
pub struct Relay {
    state: Mutex<Shared>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Shared {
    /// Runs that ended with another to follow.
    generation: u64,
    /// The answer for the requests the last run left, until the pump
    /// takes it.
    gone: Option<ServerGone>,
    /// The next run's stdin, until the pump takes it.
    next: Option<HelperStdin>,
    /// No run follows: with the answer for every request from now on
    /// (crash loop), or without (the guard ends).
    over: Option<Option<ServerGone>>,
    /// Why no run follows, as soon as that is known.
    stop: Option<StopReason>,
    /// Why the new server could not take the host's session.
    refused: Option<String>,
    /// What the new server gets once it took the session, until the pump
    /// takes it.
    replayed: Option<Vec<u8>>,
    /// The client's input has ended.
    client_ended: bool,
    /// Stops the current run.
    canceller: Option<Canceller>,
    /// The current run closed its stdout and lived on, and was stopped.
    stdout_closed: bool,
}

/// What the pump is told between two runs.
#[derive(Debug)]
pub enum Next {
    /// Answer the requests left with this, and drop what is queued.
    Gone(u64, ServerGone),
    /// The next run's stdin.
    Attach(HelperStdin),
    /// The new server took the host's session: write this to it, then
    /// what is queued.
    Replayed(Vec<u8>),
    /// No run follows; with an answer, every request from now on gets it.
    Over(Option<ServerGone>),
    /// Nothing yet.
    Wait,
}

impl Relay {
    /// Nothing run yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Shared::default()),
            changed: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A run started: `canceller` stops it (at once, if a stop was asked).
    pub fn running(&self, canceller: Canceller) {
        let mut state = self.lock();
        if state.stop.is_some() {
            canceller.cancel();
        }
        state.canceller = Some(canceller);
    }

    /// No restart after this, and the current run is stopped. The first
    /// reason stays, except that a refused session still ends at a stop
    /// asked of the guard.
    pub fn stop(&self, reason: StopReason) {
        let mut state = self.lock();
        match state.stop {
            None | Some(StopReason::Refused) => state.stop = Some(reason),
            Some(_) => {}
        }
        if let Some(canceller) = &state.canceller {
            canceller.cancel();
        }
        self.changed.notify_all();
    }

    /// The client's input ended: no restart after this. The current run
    /// is left to the stdio shutdown its closed stdin starts.
    pub fn client_ended(&self) {
        let mut state = self.lock();
        state.client_ended = true;
        state.stop.get_or_insert(StopReason::HostLeft);
        self.changed.notify_all();
    }

    /// The new server took the host's session (the stdout pump saw its
    /// `initialize` answer): `to_server` goes to it before the queue.
    pub fn replayed(&self, to_server: Vec<u8>) {
        self.lock().replayed = Some(to_server);
    }

    /// The new server cannot take the host's session, for `reason`: it is
    /// stopped, and no run follows.
    pub fn refuse(&self, reason: String) {
        self.lock().refused.get_or_insert(reason);
        self.stop(StopReason::Refused);
    }

    /// Why the new server could not take the session, if it could not.
    pub fn refused(&self) -> Option<String> {
        self.lock().refused.clone()
    }

    /// Why no restart may follow, if one may not.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.lock().stop
    }

    /// The run of `generation` closed its stdout and lived on: it is
    /// being stopped, and its end is read as that (if it is still the
    /// current run).
    pub fn stdout_closed(&self, generation: u64) {
        let mut state = self.lock();
        if state.generation == generation {
            state.stdout_closed = true;
        }
    }

    /// Whether the run that ended had closed its stdout and lived on
    /// (asked once per run).
    pub fn take_stdout_closed(&self) -> bool {
        std::mem::take(&mut self.lock().stdout_closed)
    }

    /// The run ended and another follows: the pump answers what it left
    /// with `gone`.
    pub fn server_gone(&self, gone: ServerGone) {
        let mut state = self.lock();
        state.generation += 1;
        state.gone = Some(gone);
        state.canceller = None;
    }

    /// The next run's stdin, for the pump.
    pub fn attach(&self, stdin: HelperStdin) {
        self.lock().next = Some(stdin);
    }

    /// No run follows; `last` answers every request from now on (a crash
    /// loop), or nothing does (the guard ends as without restarts).
    pub fn over(&self, last: Option<ServerGone>) {
        let mut state = self.lock();
        state.over = Some(last);
        state.canceller = None;
        self.changed.notify_all();
    }

    /// Runs that ended with another to follow.
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// For the pump: the next thing to do after run `seen` ended.
    pub fn next(&self, seen: u64) -> Next {
        let mut state = self.lock();
        if state.generation != seen
            && let Some(gone) = state.gone.take()
        {
            return Next::Gone(state.generation, gone);
        }
        if let Some(stdin) = state.next.take() {
            return Next::Attach(stdin);
        }
        if let Some(bytes) = state.replayed.take() {
            return Next::Replayed(bytes);
        }
        match &state.over {
            Some(last) => Next::Over(last.clone()),
            None => Next::Wait,
        }
    }

    /// Waits until `deadline` or until a stop is asked; whether one was.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        let state = self.lock();
        let left = deadline.saturating_duration_since(Instant::now());
        let (state, _) = self
            .changed
            .wait_timeout_while(state, left, |state| state.stop.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        state.stop.is_some()
    }

    /// Waits until the client's input has ended (or the host left, or a
    /// stop is asked).
    pub fn await_client_end(&self) {
        let mut state = self.lock();
        while !state.client_ended
            && !matches!(
                state.stop,
                Some(StopReason::HostLeft | StopReason::StopAsked)
            )
        {
            state = self
                .changed
                .wait_timeout(state, Duration::from_secs(1))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
