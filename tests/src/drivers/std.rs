//! The std driver: scenarios on [`spillguard_std::Host`], an owner thread
//! per call.

use std::time::Duration;

use spillguard_core::{
    ApprovalCard, CallError, CallRecord, Config, DebugGrant, DebugGrantError, Outcome,
    RetentionPool, State,
};
use spillguard_host::{CallRequest, Launch};
use spillguard_std::{CallHandle, Host, HostOptions, ShutdownReport};

use crate::audit::ScenarioLog;
use crate::engine::{self, CallUnderTest, DefaultCall, HostUnderTest, Streams};
use crate::measure::Measured;
use crate::scenario::{Environment, HostSettings, Scenario};

/// The name of this runtime in reports.
pub const NAME: &str = "std";

/// Runs `scenario` on a fresh std [`Host`], with its audit log (S10).
pub fn run(scenario: &Scenario, env: &Environment) -> Measured {
    let log = ScenarioLog::create(NAME, scenario);
    let options = HostOptions {
        audit: log.sink(),
        ..options(&scenario.host)
    };
    let measured = match Host::new(scenario.host.config.clone(), options) {
        Ok(host) => engine::run(NAME, StdHost(host), scenario, env),
        Err(error) => engine::refused(NAME, scenario, &error.to_string()),
    };
    log.finish(measured)
}

/// A std host with the default config and `options`, for the behaviour
/// checks ([`crate::behaviour`]).
///
/// # Panics
///
/// If the default config is refused.
pub fn host(options: HostOptions) -> StdHost {
    // Each check measures its own host's pool, while others run beside it.
    let options = HostOptions {
        own_retention_pool: true,
        ..options
    };
    StdHost(Host::new(Config::default(), options).expect("the default config is valid"))
}

/// The std host's options for `settings`; the rest keep their defaults
/// (no audit sink: the drivers add the run's [`ScenarioLog`]). A scenario's
/// host keeps a retention pool of its own: the scenario measures that pool
/// as if its host were alone in the process, while other scenarios run
/// beside it in the same test binary.
pub fn options(settings: &HostSettings) -> HostOptions {
    HostOptions {
        own_retention_pool: true,
        deadline: settings.deadline,
        shutdown_grace: settings.shutdown_grace,
        post_exit_drain: settings.post_exit_drain,
        kill_wait: settings.kill_wait,
        approval_timeout: settings.approval_timeout,
        on_client_disconnect: settings.on_client_disconnect,
        ..HostOptions::default()
    }
}

/// A std [`Host`] under test.
#[derive(Debug)]
pub struct StdHost(pub Host);

impl HostUnderTest for StdHost {
    type Call = CallHandle;

    fn launch(&self, request: CallRequest) -> CallHandle {
        Launch::launch(&self.0, request)
    }

    fn grant_debug(
        &self,
        duration: Duration,
        per_call_bytes: u64,
    ) -> Result<DebugGrant, DebugGrantError> {
        self.0.grant_debug(duration, per_call_bytes)
    }

    fn revoke_debug(&self) {
        self.0.revoke_debug();
    }

    fn default_output(&self, call: &DefaultCall) -> std::io::Result<spillguard_host::Output> {
        call.describe(spillguard_std::Command::on_default).output()
    }

    fn drop_host(self) -> Box<dyn Send> {
        Box::new(())
    }

    fn pool(&self) -> RetentionPool {
        self.0.pool().clone()
    }

    fn finished_records(&self) -> Vec<CallRecord> {
        self.0.finished_records()
    }

    fn live_calls(&self) -> usize {
        self.0.live_calls()
    }

    fn shutdown_now(&self) -> usize {
        self.0.shutdown()
    }

    fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        self.0.shutdown_and_wait(timeout)
    }

    fn audit_failures(&self) -> u64 {
        self.0.audit_failures()
    }

    fn leftover_pipes(&self) -> spillguard_host::LeftoverStats {
        self.0.leftover_pipes()
    }
}

impl CallUnderTest for CallHandle {
    fn state(&self) -> State {
        CallHandle::state(self)
    }

    fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        CallHandle::wait_card(self, timeout)
    }

    fn card(&self) -> Option<ApprovalCard> {
        CallHandle::card(self)
    }

    fn approve(&self) -> Result<(), CallError> {
        CallHandle::approve(self)
    }

    fn deny(&self) -> Result<(), CallError> {
        CallHandle::deny(self)
    }

    fn id(&self) -> Option<u32> {
        CallHandle::id(self)
    }

    fn cancel(&self) {
        CallHandle::cancel(self);
    }

    fn wait_timeout(self, timeout: Duration) -> Result<Outcome, Self> {
        CallHandle::wait_timeout(self, timeout)
    }

    fn try_outcome(self) -> Result<Outcome, Self> {
        CallHandle::try_outcome(self)
    }

    fn streams(&self) -> std::io::Result<Streams> {
        let (stdin, stdout) = CallHandle::streams(self)?;
        Ok((Box::new(stdin), Box::new(stdout)))
    }
}
