//! Whether a stdio server that ended is started again, after how long,
//! and when it is crash-looping: see [`Restarts`].
//!
//! **Every decision is here, fed instants; the driver only starts the
//! server, sleeps and reports.** The rules, with [`RestartSettings`]'
//! defaults:
//!
//! * [`RestartMode::OnFailure`] starts the server again after an exit that
//!   is not status 0, after a signal the guard did not send, and when it
//!   could not be started; [`RestartMode::Always`] after any end;
//!   [`RestartMode::Never`] never. Once the host has left or the guard was
//!   asked to stop, nothing is started again.
//! * The wait before a start is the backoff (100 ms at first, doubled after
//!   each start, up to 30 s) plus a jitter of up to a quarter of it, never
//!   more than the maximum. A run that stayed up 60 s sets the backoff back
//!   to its minimum.
//! * A run that ends within the window (10 s) of its start is quick; when
//!   `max_attempts` (5) runs in a row were quick, the server is
//!   **crash-looping** and the machine ends in [`RestartState::CrashLoop`].
//!
//! The driver calls, in this order: [`handle_ended`](Restarts::handle_ended)
//! when the server's run is over (or [`handle_stop`](Restarts::handle_stop)
//! when the host leaves or a stop is asked), then drains
//! [`poll_action`](Restarts::poll_action); while it waits, it sleeps until
//! [`poll_timeout`](Restarts::poll_timeout) and calls
//! [`handle_timeout`](Restarts::handle_timeout) (a no-op when early),
//! draining `poll_action` again: a [`RestartAction::Start`] is carried out
//! and followed by [`handle_started`](Restarts::handle_started).

use std::fmt;
use std::time::{Duration, Instant};

use crate::jsonrpc::RestartNote;

/// When a server that ended is started again (`--restart`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestartMode {
    /// Never: the guard ends with its server.
    #[default]
    Never,
    /// After an exit that is not status 0, a signal the guard did not
    /// send, or a start that failed.
    OnFailure,
    /// After any end while the host is connected.
    Always,
}

/// The restart policy's numbers; see the module docs for the defaults and
/// what each one does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartSettings {
    /// When to start again.
    pub mode: RestartMode,
    /// Quick runs in a row that make a crash loop (at least 1).
    pub max_attempts: u32,
    /// A run shorter than this is quick.
    pub window: Duration,
    /// The first wait before a start.
    pub backoff_min: Duration,
    /// The longest wait before a start, jitter included.
    pub backoff_max: Duration,
    /// A run at least this long sets the backoff back to its minimum.
    pub stable_after: Duration,
}

impl Default for RestartSettings {
    /// `Never`, 5 quick runs within 10 s each, a backoff from 100 ms to
    /// 30 s (long enough to stop hammering a broken server, short enough
    /// that a host does not give up), reset after 60 s up.
    fn default() -> Self {
        Self {
            mode: RestartMode::Never,
            max_attempts: 5,
            window: Duration::from_secs(10),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(30),
            stable_after: Duration::from_secs(60),
        }
    }
}

/// How one run of the server ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerEnd {
    /// It exited with this status.
    Exited(i32),
    /// A signal ended it.
    Signalled {
        /// The signal's number.
        signal: i32,
        /// Whether the guard sent it (a deadline, a kill ceiling).
        by_guard: bool,
    },
    /// It could not be started, or ended without an exit status.
    NoStatus,
}

impl ServerEnd {
    /// Whether `on-failure` counts this end as a failure.
    fn is_failure(self) -> bool {
        match self {
            Self::Exited(code) => code != 0,
            Self::Signalled { by_guard, .. } => !by_guard,
            Self::NoStatus => true,
        }
    }
}

impl fmt::Display for ServerEnd {
    /// `exit status 3`, `signal 9`, `no exit status`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(code) => write!(f, "exit status {code}"),
            Self::Signalled { signal, .. } => write!(f, "signal {signal}"),
            Self::NoStatus => f.write_str("no exit status"),
        }
    }
}

/// Why no more restarts happen, in [`RestartState::Stopped`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The mode does not restart after this end.
    Policy,
    /// The host closed its end.
    HostLeft,
    /// The guard was asked to stop (a signal).
    StopAsked,
    /// The new server could not take the host's session (another
    /// protocol version); the driver says why.
    Refused,
}

/// The verdict on a crash-looping server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashLoop {
    /// Quick runs in a row (the `max_attempts` setting).
    pub attempts: u32,
    /// From the start of the first of them to the end of the last.
    pub elapsed: Duration,
    /// How the last one ended.
    pub last_end: ServerEnd,
}

impl fmt::Display for CrashLoop {
    /// `crash loop: gave up after 5 attempts in 9.8 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "crash loop: gave up after {} attempts in {:.1} s",
            self.attempts,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Where the restart machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestartState {
    /// A run is on: attempt `attempt` of the current streak.
    Running {
        /// When it started.
        started: Instant,
        /// Quick runs in a row before it, plus one.
        attempt: u32,
    },
    /// Waiting to start attempt `attempt` at `until`.
    Waiting {
        /// When to start.
        until: Instant,
        /// The attempt to start.
        attempt: u32,
    },
    /// Terminal: no more restarts.
    Stopped(StopReason),
    /// Terminal: the server is crash-looping.
    CrashLoop(CrashLoop),
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestartAction {
    /// Start the server now; this is attempt `attempt` of `max_attempts`.
    Start {
        /// Quick runs in a row before it, plus one.
        attempt: u32,
    },
    /// The server is crash-looping: answer every request with the verdict.
    GiveUp(CrashLoop),
}

/// A call the machine's state does not allow (caller misuse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestartError {
    /// `handle_started` while no start was asked.
    NotWaiting,
    /// `handle_ended` while no run is on.
    NotRunning,
}

impl fmt::Display for RestartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotWaiting => "a server was started while no restart was due",
            Self::NotRunning => "a server ended while none was running",
        })
    }
}

impl std::error::Error for RestartError {}

/// The inputs, for the one transition table.
enum Input {
    Started,
    Ended(ServerEnd, u16),
    Stop(StopReason),
    Timeout,
}

/// The restart policy of one guarded server; see the module docs.
#[derive(Debug, Clone)]
pub struct Restarts {
    settings: RestartSettings,
    state: RestartState,
    /// The next backoff, before jitter.
    backoff: Duration,
    /// Quick runs in a row.
    quick: u32,
    /// When the first of them started.
    streak_start: Instant,
    /// Starts after the first.
    restarts: u32,
    /// How the last run ended.
    last_end: Option<ServerEnd>,
    action: Option<RestartAction>,
}

impl Restarts {
    /// The machine for a server whose first run started at `now`.
    /// `max_attempts` below 1 counts as 1.
    pub fn new(settings: RestartSettings, now: Instant) -> Self {
        Self {
            settings: RestartSettings {
                max_attempts: settings.max_attempts.max(1),
                ..settings
            },
            state: RestartState::Running {
                started: now,
                attempt: 1,
            },
            backoff: settings.backoff_min,
            quick: 0,
            streak_start: now,
            restarts: 0,
            last_end: None,
            action: None,
        }
    }

    /// Where the machine is.
    pub fn state(&self) -> RestartState {
        self.state
    }

    /// The settings in force.
    pub fn settings(&self) -> &RestartSettings {
        &self.settings
    }

    /// How many times the server was started again.
    pub fn restarts(&self) -> u32 {
        self.restarts
    }

    /// How the last run ended, once one has.
    pub fn last_end(&self) -> Option<ServerEnd> {
        self.last_end
    }

    /// Where the restarts stand, for the answers of the requests the run
    /// that ended left: while waiting, `restarting (attempt 2 of 5)`;
    /// crash-looping, the verdict; otherwise nothing.
    pub fn note(&self) -> Option<RestartNote> {
        match self.state {
            RestartState::Waiting { attempt, .. } => Some(RestartNote {
                restart: format!(
                    "restarting (attempt {attempt} of {})",
                    self.settings.max_attempts
                ),
                attempts: self.quick,
                crash_loop: false,
            }),
            RestartState::CrashLoop(verdict) => Some(RestartNote {
                restart: verdict.to_string(),
                attempts: verdict.attempts,
                crash_loop: true,
            }),
            RestartState::Running { .. } | RestartState::Stopped(_) => None,
        }
    }

    /// The note for the answers when the new server could not take the
    /// host's session, for `reason` (`restart refused: …`).
    pub fn refused_note(&self, reason: &str) -> RestartNote {
        RestartNote {
            restart: format!("restart refused: {reason}"),
            attempts: self.quick,
            crash_loop: false,
        }
    }

    /// The server's run started at `now` (after a `Start`).
    ///
    /// # Errors
    ///
    /// [`RestartError::NotWaiting`] when no start was due; nothing changes.
    pub fn handle_started(&mut self, now: Instant) -> Result<(), RestartError> {
        self.handle(now, Input::Started)
    }

    /// The server's run ended at `now`, as `end`; `jitter` is a uniformly
    /// drawn number (the core draws no randomness) that sets the jitter of
    /// the wait.
    ///
    /// # Errors
    ///
    /// [`RestartError::NotRunning`] when no run is on; nothing changes.
    pub fn handle_ended(
        &mut self,
        now: Instant,
        end: ServerEnd,
        jitter: u16,
    ) -> Result<(), RestartError> {
        self.handle(now, Input::Ended(end, jitter))
    }

    /// No more restarts, for `reason` (the host left, a stop was asked,
    /// the new server was refused). Terminal states keep theirs.
    pub fn handle_stop(&mut self, reason: StopReason) {
        let _ = self.handle(self.streak_start, Input::Stop(reason));
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            RestartState::Waiting { until, .. } => Some(until),
            _ => None,
        }
    }

    /// The wait may be over at `now`: a no-op before it is.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = self.handle(now, Input::Timeout);
    }

    /// The next thing to do; drain until `None` after every `handle_*`.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<RestartAction> {
        self.action.take()
    }

    /// Every transition: one match of (state, input).
    fn handle(&mut self, now: Instant, input: Input) -> Result<(), RestartError> {
        use RestartState as S;
        match (self.state, input) {
            // Terminal states absorb everything.
            (S::Stopped(_) | S::CrashLoop(_), _) => Ok(()),
            (S::Running { .. } | S::Waiting { .. }, Input::Stop(reason)) => {
                self.state = S::Stopped(reason);
                Ok(())
            }
            (S::Running { started, .. }, Input::Ended(end, jitter)) => {
                self.ended(now, started, end, jitter);
                Ok(())
            }
            (S::Running { .. }, Input::Started) => Err(RestartError::NotWaiting),
            (S::Running { .. }, Input::Timeout) => Ok(()),
            (S::Waiting { until, attempt }, Input::Timeout) => {
                if now >= until && self.action.is_none() {
                    self.action = Some(RestartAction::Start { attempt });
                }
                Ok(())
            }
            (S::Waiting { attempt, .. }, Input::Started) => {
                self.restarts = self.restarts.saturating_add(1);
                self.action = None;
                self.state = S::Running {
                    started: now,
                    attempt,
                };
                Ok(())
            }
            (S::Waiting { .. }, Input::Ended(..)) => Err(RestartError::NotRunning),
        }
    }

    fn ended(&mut self, now: Instant, started: Instant, end: ServerEnd, jitter: u16) {
        let settings = self.settings;
        self.last_end = Some(end);
        let lasted = now.saturating_duration_since(started);
        if lasted >= settings.stable_after {
            self.backoff = settings.backoff_min;
        }
        if lasted < settings.window {
            if self.quick == 0 {
                self.streak_start = started;
            }
            self.quick = self.quick.saturating_add(1);
        } else {
            self.quick = 0;
        }
        let again = match settings.mode {
            RestartMode::Never => false,
            RestartMode::OnFailure => end.is_failure(),
            RestartMode::Always => true,
        };
        if !again {
            self.state = RestartState::Stopped(StopReason::Policy);
        } else if self.quick >= settings.max_attempts {
            let verdict = CrashLoop {
                attempts: self.quick,
                elapsed: now.saturating_duration_since(self.streak_start),
                last_end: end,
            };
            self.state = RestartState::CrashLoop(verdict);
            self.action = Some(RestartAction::GiveUp(verdict));
        } else {
            let wait = self.wait(jitter);
            self.backoff = self.backoff.saturating_mul(2).min(settings.backoff_max);
            self.state = RestartState::Waiting {
                until: now + wait,
                attempt: self.quick + 1,
            };
        }
    }

    /// The backoff plus up to a quarter of it by `jitter`, at most the
    /// maximum.
    fn wait(&self, jitter: u16) -> Duration {
        let base = self.backoff;
        let extra = base.as_nanos() / 4 * u128::from(jitter) / (u128::from(u16::MAX) + 1);
        let extra = Duration::from_nanos(u64::try_from(extra).unwrap_or(u64::MAX));
        base.saturating_add(extra).min(self.settings.backoff_max)
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn settings(mode: RestartMode) -> RestartSettings {
        RestartSettings {
            mode,
            ..RestartSettings::default()
        }
    }

    /// A machine for `on-failure` with `max_attempts`, its first run
    /// started at the epoch.
    fn on_failure_with_max(max_attempts: u32) -> (Instant, Restarts) {
        let t0 = Instant::now();
        let settings = RestartSettings {
            max_attempts,
            ..settings(RestartMode::OnFailure)
        };
        (t0, Restarts::new(settings, t0))
    }

    /// Ends the run at `at` and returns the wait chosen (from the end).
    fn end_at(r: &mut Restarts, at: Instant, end: ServerEnd, jitter: u16) -> Option<Duration> {
        r.handle_ended(at, end, jitter).unwrap();
        r.poll_timeout().map(|until| until - at)
    }

    /// Sleeps to the deadline, takes the start, starts.
    fn restart(r: &mut Restarts) -> (Instant, u32) {
        let until = r.poll_timeout().unwrap();
        r.handle_timeout(until - MS);
        assert_eq!(r.poll_action(), None, "early timeout is a no-op");
        r.handle_timeout(until);
        let Some(RestartAction::Start { attempt }) = r.poll_action() else {
            panic!("no start at the deadline");
        };
        assert_eq!(r.poll_action(), None);
        r.handle_started(until).unwrap();
        (until, attempt)
    }

    #[test]
    fn never_stops_after_any_end() {
        let t0 = Instant::now();
        let mut r = Restarts::new(settings(RestartMode::Never), t0);
        assert_eq!(end_at(&mut r, t0 + MS, ServerEnd::Exited(3), 0), None);
        assert_eq!(r.state(), RestartState::Stopped(StopReason::Policy));
        assert_eq!(r.poll_action(), None);
    }

    #[test]
    fn on_failure_restarts_after_a_failure_only() {
        let t0 = Instant::now();
        for (end, again) in [
            (ServerEnd::Exited(0), false),
            (ServerEnd::Exited(3), true),
            (
                ServerEnd::Signalled {
                    signal: 9,
                    by_guard: false,
                },
                true,
            ),
            (
                ServerEnd::Signalled {
                    signal: 15,
                    by_guard: true,
                },
                false,
            ),
            (ServerEnd::NoStatus, true),
        ] {
            let mut r = Restarts::new(settings(RestartMode::OnFailure), t0);
            let wait = end_at(&mut r, t0 + MS, end, 0);
            assert_eq!(wait, again.then_some(100 * MS), "{end}");
        }
    }

    #[test]
    fn always_restarts_after_a_clean_exit_and_never_once_the_host_left() {
        let t0 = Instant::now();
        let mut r = Restarts::new(settings(RestartMode::Always), t0);
        assert_eq!(end_at(&mut r, t0, ServerEnd::Exited(0), 0), Some(100 * MS));
        let (at, attempt) = restart(&mut r);
        assert_eq!((at - t0, attempt, r.restarts()), (100 * MS, 2, 1));
        r.handle_stop(StopReason::HostLeft);
        assert_eq!(r.state(), RestartState::Stopped(StopReason::HostLeft));
        // Terminal: the end that follows changes nothing.
        r.handle_ended(at + MS, ServerEnd::Exited(1), 0).unwrap();
        assert_eq!(r.state(), RestartState::Stopped(StopReason::HostLeft));
        assert_eq!(r.poll_action(), None);
    }

    #[test]
    fn a_stop_while_waiting_cancels_the_start() {
        let t0 = Instant::now();
        let mut r = Restarts::new(settings(RestartMode::Always), t0);
        end_at(&mut r, t0, ServerEnd::Exited(1), 0);
        r.handle_stop(StopReason::StopAsked);
        r.handle_timeout(t0 + Duration::from_secs(1));
        assert_eq!(r.poll_action(), None);
        assert_eq!(r.state(), RestartState::Stopped(StopReason::StopAsked));
    }

    #[test]
    fn the_backoff_doubles_to_its_cap_with_jitter_of_at_most_a_quarter() {
        let (t0, mut r) = on_failure_with_max(100);
        // Each run lasts 20 s (not quick), so no crash loop; the backoff
        // is never reset (below 60 s).
        let mut start = t0;
        let mut waits = Vec::new();
        for _ in 0..11 {
            let end = start + Duration::from_secs(20);
            waits.push(end_at(&mut r, end, ServerEnd::Exited(1), 0).unwrap());
            start = restart(&mut r).0;
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(
            ms,
            [
                100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000
            ]
        );
        // The largest jitter: a quarter more, but never past the cap.
        let widest = |backoff_min: Duration| {
            let settings = RestartSettings {
                backoff_min,
                ..settings(RestartMode::OnFailure)
            };
            let mut r = Restarts::new(settings, t0);
            end_at(&mut r, t0 + 20_000 * MS, ServerEnd::Exited(1), u16::MAX)
        };
        assert_eq!(widest(100 * MS), Some(Duration::from_nanos(124_999_618)));
        assert_eq!(widest(28_000 * MS), Some(30_000 * MS));
    }

    #[test]
    fn a_run_of_a_minute_resets_the_backoff() {
        let t0 = Instant::now();
        let mut r = Restarts::new(settings(RestartMode::OnFailure), t0);
        assert_eq!(end_at(&mut r, t0, ServerEnd::Exited(1), 0), Some(100 * MS));
        assert_eq!(
            r.note(),
            Some(RestartNote {
                restart: "restarting (attempt 2 of 5)".into(),
                attempts: 1,
                crash_loop: false,
            })
        );
        let (start, _) = restart(&mut r);
        assert_eq!(
            end_at(&mut r, start, ServerEnd::Exited(1), 0),
            Some(200 * MS)
        );
        let (start, _) = restart(&mut r);
        let end = start + Duration::from_secs(60);
        assert_eq!(end_at(&mut r, end, ServerEnd::Exited(1), 0), Some(100 * MS));
        // A run past the window ends the streak: the next is attempt 1.
        assert_eq!(
            r.state(),
            RestartState::Waiting {
                until: end + 100 * MS,
                attempt: 1
            }
        );
    }

    #[test]
    fn five_quick_ends_in_a_row_are_a_crash_loop() {
        let t0 = Instant::now();
        let mut r = Restarts::new(settings(RestartMode::OnFailure), t0);
        let mut start = t0;
        let mut attempts = Vec::new();
        for _ in 0..4 {
            end_at(&mut r, start + 50 * MS, ServerEnd::Exited(3), 0);
            let (at, attempt) = restart(&mut r);
            attempts.push(attempt);
            start = at;
        }
        assert_eq!(attempts, [2, 3, 4, 5]);
        assert_eq!(r.note(), None, "running");
        // Waits 100 + 200 + 400 + 800 and five runs of 50 ms.
        let last = start + 50 * MS;
        r.handle_ended(last, ServerEnd::Exited(3), 0).unwrap();
        let verdict = CrashLoop {
            attempts: 5,
            elapsed: 1750 * MS,
            last_end: ServerEnd::Exited(3),
        };
        assert_eq!(last - t0, 1750 * MS);
        assert_eq!(r.poll_action(), Some(RestartAction::GiveUp(verdict)));
        assert_eq!(
            r.note(),
            Some(RestartNote {
                restart: "crash loop: gave up after 5 attempts in 1.8 s".into(),
                attempts: 5,
                crash_loop: true,
            })
        );
        assert_eq!(r.poll_action(), None);
        assert_eq!(r.state(), RestartState::CrashLoop(verdict));
        assert_eq!(r.restarts(), 4);
        assert_eq!(
            verdict.to_string(),
            "crash loop: gave up after 5 attempts in 1.8 s"
        );
        // Terminal: a stop changes nothing.
        r.handle_stop(StopReason::HostLeft);
        assert_eq!(r.state(), RestartState::CrashLoop(verdict));
    }

    #[test]
    fn a_run_past_the_window_breaks_the_streak() {
        let (t0, mut r) = on_failure_with_max(2);
        end_at(&mut r, t0 + MS, ServerEnd::Exited(1), 0);
        let (start, attempt) = restart(&mut r);
        assert_eq!(attempt, 2);
        // This run lasts the whole window: not quick.
        end_at(&mut r, start + 10_000 * MS, ServerEnd::Exited(1), 0);
        let (start, attempt) = restart(&mut r);
        assert_eq!(attempt, 1);
        end_at(&mut r, start + MS, ServerEnd::Exited(1), 0);
        let (start, attempt) = restart(&mut r);
        assert_eq!(attempt, 2);
        // Two quick runs in a row now (this one and the one before).
        r.handle_ended(start + MS, ServerEnd::Exited(1), 0).unwrap();
        assert!(matches!(
            r.poll_action(),
            Some(RestartAction::GiveUp(CrashLoop { attempts: 2, .. }))
        ));
    }

    #[test]
    fn misuse_is_an_error_and_changes_nothing() {
        let t0 = Instant::now();
        let mut r = Restarts::new(settings(RestartMode::Always), t0);
        assert_eq!(r.handle_started(t0), Err(RestartError::NotWaiting));
        end_at(&mut r, t0, ServerEnd::Exited(0), 0);
        let before = r.state();
        assert_eq!(
            r.handle_ended(t0, ServerEnd::Exited(0), 0),
            Err(RestartError::NotRunning)
        );
        assert_eq!(r.state(), before);
    }
}
