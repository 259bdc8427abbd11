//! The smol driver: scenarios on [`spillguard_smol::Host`], an owner task
//! per call on smol's global executor.
//!
//! The clients are plain threads, as for every runtime; each async method
//! of the handle is driven with `smol::block_on`.

use std::time::Duration;

use spillguard_core::{
    ApprovalCard, CallError, CallRecord, Config, DebugGrant, DebugGrantError, Outcome,
    RetentionPool, State,
};
use spillguard_host::{CallRequest, Launch};
use spillguard_smol::{CallHandle, Host, HostOptions, ShutdownReport};

use crate::audit::ScenarioLog;
use crate::engine::{self, CallUnderTest, DefaultCall, HostUnderTest, Streams};
use crate::measure::Measured;
use crate::scenario::{Environment, Scenario};

/// The name of this runtime in reports.
pub const NAME: &str = "smol";

/// Runs `scenario` on a fresh smol [`Host`], with its audit log (S10).
pub fn run(scenario: &Scenario, env: &Environment) -> Measured {
    let log = ScenarioLog::create(NAME, scenario);
    let options = HostOptions {
        audit: log.sink(),
        ..super::std::options(&scenario.host)
    };
    let measured = match Host::new(scenario.host.config.clone(), options) {
        Ok(host) => engine::run(NAME, SmolHost(host), scenario, env),
        Err(error) => engine::refused(NAME, scenario, &error.to_string()),
    };
    log.finish(measured)
}

/// A smol host with the default config and `options`, for the behaviour
/// checks ([`crate::behaviour`]).
///
/// # Panics
///
/// If the default config is refused.
pub fn host(options: HostOptions) -> SmolHost {
    // Each check measures its own host's pool, while others run beside it.
    let options = HostOptions {
        own_retention_pool: true,
        ..options
    };
    SmolHost(Host::new(Config::default(), options).expect("the default config is valid"))
}

/// A smol [`Host`] under test.
#[derive(Debug)]
pub struct SmolHost(pub Host);

impl HostUnderTest for SmolHost {
    type Call = SmolCall;

    fn launch(&self, request: CallRequest) -> SmolCall {
        SmolCall(Launch::launch(&self.0, request))
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
        smol::block_on(call.describe(spillguard_smol::Command::on_default).output())
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
        smol::block_on(self.0.shutdown_and_wait(timeout))
    }

    fn audit_failures(&self) -> u64 {
        self.0.audit_failures()
    }

    fn leftover_pipes(&self) -> spillguard_host::LeftoverStats {
        self.0.leftover_pipes()
    }
}

/// A smol [`CallHandle`] under test.
#[derive(Debug)]
pub struct SmolCall(pub CallHandle);

impl CallUnderTest for SmolCall {
    fn state(&self) -> State {
        self.0.state()
    }

    fn wait_card(&self, timeout: Duration) -> Option<ApprovalCard> {
        smol::block_on(self.0.wait_card(timeout))
    }

    fn card(&self) -> Option<ApprovalCard> {
        self.0.card()
    }

    fn approve(&self) -> Result<(), CallError> {
        smol::block_on(self.0.approve())
    }

    fn deny(&self) -> Result<(), CallError> {
        smol::block_on(self.0.deny())
    }

    fn id(&self) -> Option<u32> {
        self.0.id()
    }

    fn cancel(&self) {
        self.0.cancel();
    }

    fn wait_timeout(self, timeout: Duration) -> Result<Outcome, Self> {
        smol::block_on(self.0.wait_timeout(timeout)).map_err(SmolCall)
    }

    fn try_outcome(self) -> Result<Outcome, Self> {
        self.0.try_outcome().map_err(SmolCall)
    }

    fn streams(&self) -> std::io::Result<Streams> {
        let (stdin, stdout) = smol::block_on(self.0.streams())?;
        Ok((
            Box::new(smol::io::BlockOn::new(stdin)),
            Box::new(smol::io::BlockOn::new(stdout)),
        ))
    }
}
