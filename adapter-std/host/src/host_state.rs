//! What every adapter's host holds, whatever its runtime: the configuration,
//! the options, the retention pool, the registry of live calls, the kept
//! records of finished calls, and the count of failed audit writes.
//!
//! An adapter wraps a [`HostState`] with what depends on its runtime: how
//! it is told that a call ended (a `Condvar`, an event listener, a watch
//! channel), and how an audit write is kept off its executor threads.
//!
//! The host's debug grant is stored and handed to every live call under
//! one lock, so grants and revocations reach each call in the order they
//! were made.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use std::sync::Arc;
use std::time::{Duration, Instant};

use spillguard_core::{
    CallKind, CallRecord, CallSettings, Config, DebugGrant, DebugGrantError, RetentionPool,
};

use crate::audit::AuditSink;
use crate::builder::{CallRequest, Resolved};
use crate::leftover_pipes::{LeftoverDrainer, LeftoverRuntime, LeftoverStats};
use crate::{HostError, HostOptions};

/// The pool every host of this process draws on unless its options ask for
/// one of its own: one pool per budget, made by the first host that names
/// it and kept for the life of the process. Hosts whose configurations
/// name different `stderr_retained_process_bytes` draw on different pools,
/// so each gets the budget its configuration names.
pub fn process_pool(capacity: u64) -> RetentionPool {
    static POOLS: Mutex<Vec<RetentionPool>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pool) = pools.iter().find(|p| p.capacity() == capacity) {
        return pool.clone();
    }
    let pool = RetentionPool::new(capacity);
    pools.push(pool.clone());
    pool
}

/// The process-wide default host kept in `slot` (an adapter's, for its
/// `Command`), made by `make` at the first call that finds the slot empty.
/// One maker runs at a time, so a host is made once; a maker that fails
/// leaves the slot empty for the next call to try again.
pub fn process_default<H: Send + Sync>(
    slot: &'static OnceLock<H>,
    make: impl FnOnce() -> std::io::Result<H>,
) -> std::io::Result<&'static H> {
    static MAKING: Mutex<()> = Mutex::new(());
    if let Some(host) = slot.get() {
        return Ok(host);
    }
    let _making = MAKING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(host) = slot.get() {
        return Ok(host);
    }
    let host = make()?;
    Ok(slot.get_or_init(|| host))
}

/// The runtime-free state of a host; `S` is how the host reaches a live
/// call (typically the sender of the call's owner channel).
pub struct HostState<S> {
    config: Config,
    options: HostOptions,
    pool: RetentionPool,
    session_id: String,
    debug: Mutex<Option<DebugGrant>>,
    live: Mutex<Live<S>>,
    finished: Mutex<VecDeque<CallRecord>>,
    audit_failures: AtomicU64,
    leftovers: LeftoverDrainer,
}

struct Live<S> {
    closing: bool,
    next_id: u64,
    calls: HashMap<u64, S>,
}

impl<S> fmt::Debug for HostState<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host")
            .field("config", &self.config)
            .field("options", &self.options)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl<S: Clone> HostState<S> {
    /// The state of a host for `config` (validated here) run with
    /// `options`, drawing on the process-wide pool of
    /// `stderr_retained_process_bytes` (or a pool of its own when
    /// [`HostOptions::own_retention_pool`] is set); its
    /// drainer of leftover pipes runs where `leftovers` says (a thread of
    /// its own, a task on the runtime).
    pub fn new(
        config: Config,
        options: HostOptions,
        leftovers: impl LeftoverRuntime,
    ) -> Result<Self, HostError> {
        config.validate()?;
        check_redaction_cost(&config.redact_extra_patterns, REDACTION_BUDGET)?;
        let capacity = config.stderr_retained_process_bytes;
        let pool = match options.own_retention_pool {
            true => RetentionPool::new(capacity),
            false => process_pool(capacity),
        };
        let session_id = options
            .session_id
            .clone()
            .unwrap_or_else(|| crate::fresh_id("s"));
        Ok(Self {
            config,
            pool,
            session_id,
            debug: Mutex::new(None),
            live: Mutex::new(Live {
                closing: false,
                next_id: 0,
                calls: HashMap::new(),
            }),
            finished: Mutex::new(VecDeque::new()),
            audit_failures: AtomicU64::new(0),
            leftovers: LeftoverDrainer::new(
                options.leftover_drain_max,
                options.leftover_pipes_max,
                leftovers,
            ),
            options,
        })
    }

    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The options in force.
    pub fn options(&self) -> &HostOptions {
        &self.options
    }

    /// The pool every call's stderr draws from: the process-wide one,
    /// shared with every other host of the same budget, unless the options
    /// gave this host its own.
    pub fn pool(&self) -> &RetentionPool {
        &self.pool
    }

    /// The session calls belong to unless they name their own.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The audit sink, if any.
    pub fn audit_sink(&self) -> Option<Arc<dyn AuditSink>> {
        self.options.audit.clone()
    }

    /// The settings a call of `kind` started at `now` gets under the
    /// config, with the options' overrides ([`HostOptions::call_settings`])
    /// and the debug grant in force at `now`, if any.
    pub fn call_settings(&self, kind: CallKind, now: Instant) -> CallSettings {
        let settings = self.options.call_settings(&self.config, kind);
        let grant = *self.lock_debug();
        settings.with_debug(&self.config, grant.as_ref(), now)
    }

    /// `request` with every default filled in, for a call started at `now`.
    pub fn resolve(&self, request: CallRequest, now: Instant) -> Resolved {
        let request = if self.options().start_traces {
            request.start_trace()
        } else {
            request
        };
        request.resolve(&self.session_id, |kind| self.call_settings(kind, now))
    }

    /// Grants debug from `now` for `duration` (at most
    /// [`DebugGrant::MAX_DURATION`]), up to `per_call_bytes` of stderr per
    /// call (at most the config's `debug_ceiling_bytes`), and hands the
    /// grant to every live call through `deliver` (their owners apply it
    /// with [`Input::DebugGranted`](spillguard_core::Input::DebugGranted)). Calls started under it, and
    /// calls live when it is given, retain up to the raised budget and
    /// record `debug: true`; when the grant ends, what they retain shrinks
    /// back to the normal budget. A new grant replaces the previous one,
    /// for live calls too.
    ///
    /// The grant is stored and delivered under one lock, so grants and
    /// revocations reach every call in the order they were made; a call
    /// registered while this runs gets the grant from
    /// [`Prepared::prepare`](crate::owner::Prepared::prepare), which reads
    /// the grant after registering the call.
    ///
    /// [`Input::DebugGranted`](spillguard_core::Input::DebugGranted): spillguard_core::Input::DebugGranted
    pub fn grant_debug(
        &self,
        now: Instant,
        duration: Duration,
        per_call_bytes: u64,
        deliver: impl Fn(&S, Option<DebugGrant>),
    ) -> Result<DebugGrant, DebugGrantError> {
        let grant = DebugGrant::new(&self.config, now, duration, per_call_bytes)?;
        let mut debug = self.lock_debug();
        *debug = Some(grant);
        for call in self.live_senders() {
            deliver(&call, Some(grant));
        }
        drop(debug);
        Ok(grant)
    }

    /// Ends the debug grant, if any: for calls started from now on, and,
    /// through `deliver`, for every live call (its owner applies
    /// [`Input::DebugRevoked`](spillguard_core::Input::DebugRevoked): a call under the grant shrinks back
    /// to the normal budget at once and still records `debug: true`).
    ///
    /// [`Input::DebugRevoked`](spillguard_core::Input::DebugRevoked): spillguard_core::Input::DebugRevoked
    pub fn revoke_debug(&self, deliver: impl Fn(&S, Option<DebugGrant>)) {
        let mut debug = self.lock_debug();
        if debug.take().is_some() {
            for call in self.live_senders() {
                deliver(&call, None);
            }
        }
        drop(debug);
    }

    /// The debug grant, if one was given (it may have ended).
    pub fn debug_grant(&self) -> Option<DebugGrant> {
        *self.lock_debug()
    }

    fn lock_debug(&self) -> MutexGuard<'_, Option<DebugGrant>> {
        self.debug.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new live call reached through `call`; returns its id and
    /// whether the host is closing (the call is then to be cancelled before
    /// anything).
    pub fn register(&self, call: S) -> (u64, bool) {
        let mut live = self.lock_live();
        live.next_id += 1;
        let id = live.next_id;
        live.calls.insert(id, call);
        (id, live.closing)
    }

    /// The call `id` ended (its owner is gone): it is no longer live.
    pub fn deregister(&self, id: u64) {
        self.lock_live().calls.remove(&id);
    }

    /// Marks the host as closing and returns the calls live at this moment.
    /// Calls registered afterwards are told the host is closing.
    pub fn close(&self) -> Vec<(u64, S)> {
        let mut live = self.lock_live();
        live.closing = true;
        live.calls.iter().map(|(&id, s)| (id, s.clone())).collect()
    }

    /// How every live call is reached, at this moment.
    fn live_senders(&self) -> Vec<S> {
        self.lock_live().calls.values().cloned().collect()
    }

    /// How many calls are live.
    pub fn live_calls(&self) -> usize {
        self.lock_live().calls.len()
    }

    /// How many of `ids` are still live.
    pub fn still_live(&self, ids: &HashSet<u64>) -> usize {
        let live = self.lock_live();
        ids.iter().filter(|id| live.calls.contains_key(id)).count()
    }

    /// Keeps a finished call's record, dropping the oldest beyond
    /// [`HostOptions::finished_records_kept`].
    pub fn record_finished(&self, record: CallRecord) {
        let kept = self.options.finished_records_kept;
        let mut finished = self.lock_finished();
        finished.push_back(record);
        while finished.len() > kept {
            finished.pop_front();
        }
    }

    /// The kept records of finished calls, oldest first.
    pub fn finished_records(&self) -> Vec<CallRecord> {
        self.lock_finished().iter().cloned().collect()
    }

    /// Counts one failed audit write; returns its text, for
    /// [`Input::AuditFailed`](spillguard_core::Input::AuditFailed).
    pub fn audit_failed(&self, error: impl fmt::Display) -> String {
        self.audit_failures.fetch_add(1, Ordering::Relaxed);
        error.to_string()
    }

    /// How many audit events the sink failed to write.
    pub fn audit_failures(&self) -> u64 {
        self.audit_failures.load(Ordering::Relaxed)
    }

    /// The drainer of the pipes escaped descendants still hold after
    /// their calls finished.
    pub fn leftovers(&self) -> &LeftoverDrainer {
        &self.leftovers
    }

    /// How many leftover pipes the host drains now, and how many it closed
    /// at a bound or saw end.
    pub fn leftover_pipes(&self) -> LeftoverStats {
        self.leftovers.stats()
    }

    fn lock_live(&self) -> MutexGuard<'_, Live<S>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_finished(&self) -> MutexGuard<'_, VecDeque<CallRecord>> {
        self.finished.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long a host's redaction rules may take, at most, to redact a
/// 16 KiB window of ordinary log text (after a first run that builds the
/// regex's lazy automaton): 5 ms, a hundred times what the built-in rules
/// take. Extra patterns over it are refused when the host is made
/// (`helper_output.redact_extra_patterns`, `Rule::TooSlow`): every view of
/// every call pays it.
pub const REDACTION_BUDGET: Duration = Duration::from_millis(5);

/// Refuses extra redaction patterns that take longer than `budget` on a
/// 16 KiB test window (the best of three runs after a warm-up).
pub(crate) fn check_redaction_cost(
    redactor: &spillguard_core::Redactor,
    budget: Duration,
) -> Result<(), spillguard_core::ConfigError> {
    if redactor.extra_patterns().is_empty() {
        return Ok(());
    }
    let window = test_window();
    let _ = redactor.redact(&window);
    let took = (0..3)
        .map(|_| {
            let started = std::time::Instant::now();
            let _ = redactor.redact(&window);
            started.elapsed()
        })
        .min()
        .unwrap_or_default();
    if took > budget {
        return Err(spillguard_core::ConfigError {
            field: "redact_extra_patterns".to_owned(),
            rule: spillguard_core::Rule::TooSlow {
                micros: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                budget_micros: u64::try_from(budget.as_micros()).unwrap_or(u64::MAX),
            },
        });
    }
    Ok(())
}

/// 16 KiB of ordinary log lines, the cost check's window.
fn test_window() -> String {
    const LINES: [&str; 4] = [
        "2026-12-01T10:00:00.123Z INFO request id=4f1c2a9e path=/api/v1/items status=200 took=12ms\n",
        "{\"level\":\"warn\",\"msg\":\"retrying\\tattempt 3 of 5\",\"host\":\"web-3\"}\n",
        "error: connection refused by server at 10.0.0.7:5432 (retry in 400 ms)\n",
        "   Compiling serde_json v1.0.145 (registry+https://github.com/rust-lang/crates.io-index)\n",
    ];
    let mut window = String::with_capacity(16 * 1024 + 128);
    for line in LINES.iter().cycle() {
        if window.len() >= 16 * 1024 {
            break;
        }
        window.push_str(line);
    }
    window
}

#[cfg(test)]
mod cost_tests {
    use super::*;

    #[test]
    fn extra_patterns_over_the_budget_are_refused_naming_the_field() {
        let redactor = spillguard_core::Redactor::with_extra_patterns(["ticket-[0-9]{6}"]).unwrap();
        // Any pattern is over a budget of nothing: the refusal names the
        // field and both figures.
        let refused = check_redaction_cost(&redactor, Duration::ZERO).unwrap_err();
        assert_eq!(refused.field, "redact_extra_patterns");
        let text = refused.to_string();
        assert!(
            text.starts_with("helper_output.redact_extra_patterns: the patterns took "),
            "{text}"
        );
        assert!(text.contains(" us to redact a 16 KiB test window, over the budget of 0 us"));
        // An ordinary pattern is far under the real budget; the built-in
        // rules alone are not checked.
        assert_eq!(check_redaction_cost(&redactor, REDACTION_BUDGET), Ok(()));
        assert_eq!(
            check_redaction_cost(&spillguard_core::Redactor::builtin(), Duration::ZERO),
            Ok(())
        );
        assert!(test_window().len() >= 16 * 1024);
    }
}
