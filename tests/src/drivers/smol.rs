//! The smol driver: scenarios on [`spillguard_smol::Host`], an owner task
//! per call on smol's global executor.
//!
//! The clients are plain threads, as for every runtime; each async method
//! of the handle is driven with `smol::block_on`.

use std::time::Duration;

use spillguard_core::{CallError, CallRecord, CallSpec, Outcome, RetentionPool, State};
use spillguard_smol::{CallHandle, HelperCommand, Host, HostOptions};

use crate::audit::ScenarioLog;
use crate::engine::{self, CallUnderTest, HostUnderTest};
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

/// A smol [`Host`] under test.
#[derive(Debug)]
pub struct SmolHost(pub Host);

impl HostUnderTest for SmolHost {
    type Call = SmolCall;

    fn start(&self, spec: CallSpec, command: HelperCommand, needs_approval: bool) -> SmolCall {
        SmolCall(self.0.start(spec, command, needs_approval))
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
}

/// A smol [`CallHandle`] under test.
#[derive(Debug)]
pub struct SmolCall(pub CallHandle);

impl CallUnderTest for SmolCall {
    fn state(&self) -> State {
        self.0.state()
    }

    fn wait_card(&self, timeout: Duration) -> bool {
        smol::block_on(self.0.wait_card(timeout)).is_some()
    }

    fn approve(&self) -> Result<(), CallError> {
        smol::block_on(self.0.approve())
    }

    fn deny(&self) -> Result<(), CallError> {
        smol::block_on(self.0.deny())
    }

    fn cancel(&self) {
        self.0.cancel();
    }

    fn wait_timeout(self, timeout: Duration) -> Result<Outcome, Self> {
        smol::block_on(self.0.wait_timeout(timeout)).map_err(SmolCall)
    }
}
