//! Why a host could not be made: [`HostError`], the same type on every
//! runtime.

use std::fmt;

use spillguard_core::ConfigError;

/// Why a host could not be made. Every adapter's `Host::new` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HostError {
    /// The configuration is invalid; the error names the field.
    InvalidConfig(ConfigError),
    /// A runtime adapter was asked for a host outside its runtime (tokio's
    /// `Host::new` outside a tokio runtime), so there is nothing to run the
    /// calls on.
    NoRuntime {
        /// What to do instead.
        hint: &'static str,
    },
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::InvalidConfig(error) => write!(f, "invalid configuration: {error}"),
            HostError::NoRuntime { hint } => write!(f, "no runtime to run the calls on: {hint}"),
        }
    }
}

impl std::error::Error for HostError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HostError::InvalidConfig(error) => Some(error),
            HostError::NoRuntime { .. } => None,
        }
    }
}

impl From<ConfigError> for HostError {
    fn from(error: ConfigError) -> Self {
        HostError::InvalidConfig(error)
    }
}
