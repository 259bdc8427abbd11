//! One driver per adapter, behind [`Runtime`].
//!
//! A driver builds its adapter's host from the scenario's
//! [`HostSettings`](crate::HostSettings), wraps host and handle in the
//! [`HostUnderTest`](crate::engine::HostUnderTest) and
//! [`CallUnderTest`](crate::engine::CallUnderTest) traits, and hands them to
//! [`engine::run`](crate::engine::run). Adding a runtime is one file here,
//! one variant of [`Runtime`], and one line in each of its methods.

pub mod smol;
pub mod std;
pub mod tokio;

use ::std::fmt;

use spillguard_host::Approval;

use crate::measure::Measured;
use crate::scenario::{Environment, Scenario};

/// A runtime with a scenario driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Runtime {
    /// `spillguard-std`: an owner thread per call.
    Std,
    /// `spillguard-smol`: an owner task per call on smol's global executor.
    Smol,
    /// `spillguard-tokio`: an owner task per call on a multi-threaded
    /// runtime.
    Tokio,
}

impl Runtime {
    /// Every runtime with a driver, in report order.
    pub const ALL: &'static [Runtime] = &[Runtime::Std, Runtime::Smol, Runtime::Tokio];

    /// Its name on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Std => self::std::NAME,
            Runtime::Smol => self::smol::NAME,
            Runtime::Tokio => self::tokio::NAME,
        }
    }

    /// The runtime called `name`, if it has a driver.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.name() == name)
    }

    /// Runs `scenario` on this runtime's adapter and measures it.
    pub fn run(self, scenario: &Scenario, env: &Environment) -> Measured {
        match self {
            Runtime::Std => self::std::run(scenario, env),
            Runtime::Smol => self::smol::run(scenario, env),
            Runtime::Tokio => self::tokio::run(scenario, env),
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The adapters' [`Approval`] for the harness's `needs_approval`.
pub(crate) fn approval(needs_approval: bool) -> Approval {
    if needs_approval {
        Approval::Required
    } else {
        Approval::NotRequired
    }
}
