//! How the helper ended, as observed: [`Exit`].

use std::fmt;

use super::{CallRecord, Outcome};

/// How the helper ended, as observed: a code, a signal, or not observed at
/// all (never reaped, or never spawned). Never inferred from a response.
///
/// ```
/// use spillguard_core::Exit;
///
/// assert!(Exit::Code(0).success());
/// assert_eq!(Exit::Code(3).code(), Some(3));
/// assert_eq!(Exit::Signal(15).signal(), Some(15));
/// assert!(!Exit::Unobserved.success());
/// assert_eq!(Exit::Signal(9).to_string(), "killed by signal 9");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// Its end was not observed: it was never spawned, or never reaped.
    Unobserved,
}

impl Exit {
    /// Whether it exited with code 0.
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }

    /// The exit code, if it exited.
    pub fn code(self) -> Option<i32> {
        match self {
            Exit::Code(code) => Some(code),
            _ => None,
        }
    }

    /// The signal that ended it, if one did.
    pub fn signal(self) -> Option<i32> {
        match self {
            Exit::Signal(signal) => Some(signal),
            _ => None,
        }
    }

    /// The exit a record observed (`exit_status`, `exit_signal`).
    pub fn of(record: &CallRecord) -> Self {
        match (record.exit_status, record.exit_signal) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Unobserved,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit code {code}"),
            Exit::Signal(signal) => write!(f, "killed by signal {signal}"),
            Exit::Unobserved => f.write_str("exit not observed"),
        }
    }
}

impl Outcome {
    /// How the helper ended, as observed.
    pub fn exit(&self) -> Exit {
        Exit::of(&self.record)
    }
}
