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

/// The `[helper_restart]` table of a configuration file: what it sets,
/// each key over [`RestartSettings`]' defaults (a command line's flags go
/// over it). Keys: `mode` (`"on-failure"`, `"always"`, `"never"`),
/// `max_attempts` (at least 1), `window_ms` (at least 1), `backoff_ms`
/// (`MIN` or `[MIN, MAX]`, MIN at most MAX, MAX at least 1 and 30000 when
/// left out) and `retry`
/// (`"idempotent"`).
///
/// ```
/// use std::time::Duration;
/// use spillguard_core::restart::{RestartMode, RestartSettings, RestartTable};
///
/// let table = RestartTable::from_toml_str(
///     "[helper_restart]\nmode = \"on-failure\"\nbackoff_ms = [50, 2000]\n",
/// )?;
/// let mut settings = RestartSettings::default();
/// table.apply(&mut settings);
/// assert_eq!(settings.mode, RestartMode::OnFailure);
/// assert_eq!((settings.backoff_min, settings.backoff_max),
///            (Duration::from_millis(50), Duration::from_secs(2)));
/// assert_eq!(settings.max_attempts, 5);
///
/// let bad = RestartTable::from_toml_str("[helper_restart]\nbackoff_ms = [500, 100]\n").unwrap_err();
/// assert_eq!(bad.to_string(), "helper_restart.backoff_ms: MIN 500 is more than MAX 100");
/// # Ok::<(), spillguard_core::restart::RestartTableError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestartTable {
    /// `mode`.
    pub mode: Option<RestartMode>,
    /// `max_attempts`.
    pub max_attempts: Option<u32>,
    /// `window_ms`.
    pub window: Option<Duration>,
    /// `backoff_ms`: the first and the longest wait.
    pub backoff: Option<(Duration, Duration)>,
    /// `retry = "idempotent"`.
    pub retry_idempotent: bool,
}

/// Why a `[helper_restart]` table was refused: the key and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartTableError {
    key: String,
    rule: String,
}

impl fmt::Display for RestartTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "helper_restart.{}: {}", self.key, self.rule)
    }
}

impl std::error::Error for RestartTableError {}

impl RestartTable {
    /// The keys a `[helper_restart]` table may hold.
    pub const KEYS: [&'static str; 5] =
        ["mode", "max_attempts", "window_ms", "backoff_ms", "retry"];

    /// Reads the `[helper_restart]` table of a configuration file (none:
    /// nothing set; the file's other tables are left to their readers).
    ///
    /// # Errors
    ///
    /// The first key that is unknown or breaks its rule, or a file that
    /// is not TOML.
    #[cfg(feature = "toml")]
    pub fn from_toml_str(text: &str) -> Result<Self, RestartTableError> {
        let error = |key: &str, rule: String| RestartTableError {
            key: key.to_owned(),
            rule,
        };
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| RestartTableError {
                key: String::new(),
                rule: format!("not valid TOML: {}", e.message().trim()),
            })?;
        let Some(value) = doc.get("helper_restart") else {
            return Ok(Self::default());
        };
        let table = value.as_table().ok_or_else(|| RestartTableError {
            key: String::new(),
            rule: "must be a table".into(),
        })?;
        let positive = |key: &str, value: &toml::Value| match value.as_integer() {
            Some(n) if n >= 1 => Ok(n as u64),
            Some(n) => Err(error(key, format!("{n} is not at least 1"))),
            None => Err(error(key, "must be an integer".into())),
        };
        let mut out = Self::default();
        for (key, value) in table {
            match key.as_str() {
                "mode" => {
                    out.mode = Some(match value.as_str() {
                        Some("on-failure") => RestartMode::OnFailure,
                        Some("always") => RestartMode::Always,
                        Some("never") => RestartMode::Never,
                        _ => {
                            return Err(error(
                                key,
                                format!("{value} is not \"on-failure\", \"always\" or \"never\""),
                            ));
                        }
                    });
                }
                "max_attempts" => {
                    let n = positive(key, value)?;
                    out.max_attempts = Some(
                        u32::try_from(n).map_err(|_| error(key, format!("{n} is too large")))?,
                    );
                }
                "window_ms" => out.window = Some(Duration::from_millis(positive(key, value)?)),
                "backoff_ms" => {
                    let (min, max) = match value {
                        toml::Value::Array(pair) if pair.len() == 2 => {
                            let min = match pair[0].as_integer() {
                                Some(n) if n >= 0 => n as u64,
                                _ => {
                                    return Err(error(
                                        key,
                                        "MIN must be an integer of at least 0".into(),
                                    ));
                                }
                            };
                            (min, positive(key, &pair[1])?)
                        }
                        // MAX left out: the default's.
                        toml::Value::Integer(n) if *n >= 0 => (*n as u64, 30_000),
                        _ => return Err(error(key, "must be MIN or [MIN, MAX], in ms".into())),
                    };
                    if min > max {
                        return Err(error(key, format!("MIN {min} is more than MAX {max}")));
                    }
                    out.backoff = Some((Duration::from_millis(min), Duration::from_millis(max)));
                }
                "retry" => match value.as_str() {
                    Some("idempotent") => out.retry_idempotent = true,
                    _ => return Err(error(key, format!("{value} is not \"idempotent\""))),
                },
                _ => {
                    return Err(error(
                        key,
                        format!("unknown key (known: {})", Self::KEYS.join(", ")),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Sets what the table names on `settings`.
    pub fn apply(&self, settings: &mut RestartSettings) {
        if let Some(mode) = self.mode {
            settings.mode = mode;
        }
        if let Some(max) = self.max_attempts {
            settings.max_attempts = max;
        }
        if let Some(window) = self.window {
            settings.window = window;
        }
        if let Some((min, max)) = self.backoff {
            (settings.backoff_min, settings.backoff_max) = (min, max);
        }
    }
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
    /// It closed its stdout and went on running, so the guard ended it:
    /// it could answer nothing more (a failure, whoever's signal ended
    /// it).
    StdoutClosed,
}

impl ServerEnd {
    /// Whether `on-failure` counts this end as a failure.
    fn is_failure(self) -> bool {
        match self {
            Self::Exited(code) => code != 0,
            Self::Signalled { by_guard, .. } => !by_guard,
            Self::NoStatus | Self::StdoutClosed => true,
        }
    }
}

impl fmt::Display for ServerEnd {
    /// `exit status 3`, `signal 9`, `no exit status`, `stdout closed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(code) => write!(f, "exit status {code}"),
            Self::Signalled { signal, .. } => write!(f, "signal {signal}"),
            Self::NoStatus => f.write_str("no exit status"),
            Self::StdoutClosed => f.write_str("stdout closed"),
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
                // A start asked for and not yet polled is taken back.
                if matches!(self.action, Some(RestartAction::Start { .. })) {
                    self.action = None;
                }
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
