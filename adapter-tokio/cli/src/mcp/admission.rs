//! How many tool calls of the server run at once, and how long an approved
//! call may wait for its turn: the `[bridge]` table of the tools file and
//! the flags `--max-running` and `--queue-timeout-ms` (a flag wins over
//! the file, the file over the default).
//!
//! * `max_running`: at most this many tool calls have their helper
//!   running at once; default twice the CPUs the process may use
//!   ([`std::thread::available_parallelism`]), so that a burst of approved
//!   calls cannot starve the server (and the client reading its next
//!   approval cards) of the processor. Every other authorized call waits
//!   in `queued`, first come first served. Approvals are never behind the
//!   queue: a card is asked as soon as its call arrives.
//! * `queue_timeout_ms`: how long a call may wait in `queued`; once it has
//!   passed the call ends `queue_expired` and its helper never ran.
//!   Default [`DEFAULT_QUEUE_TIMEOUT`] (60 s): long enough for a queue of
//!   ordinary tool calls (seconds each) to drain on a loaded host, short
//!   enough that a model waiting on a call hears back within a minute
//!   that it never ran, rather than waiting for a slot that is not coming.
//!
//! A value that is not a positive integer is an error that names the key
//! (`bridge.max_running`) or the flag.

use std::time::Duration;

use super::tools::{ToolsError, as_table, check_keys};

/// How long an approved call may wait for a running slot, unless the tools
/// file or the flag says otherwise.
pub const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(60);

const BRIDGE_KEYS: &[&str] = &["max_running", "queue_timeout_ms"];

/// The server's admission limits, as the tools file sets them (`None`:
/// left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeTable {
    /// `bridge.max_running`.
    pub max_running: Option<usize>,
    /// `bridge.queue_timeout_ms`.
    pub queue_timeout: Option<Duration>,
}

/// The limits in force: flags, then the file, then the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// At most this many tool calls run at once.
    pub max_running: usize,
    /// Longest an authorized call waits in `queued`.
    pub queue_timeout: Duration,
}

impl BridgeTable {
    /// The `[bridge]` table (`value`), checked: only its known keys, each a
    /// positive integer.
    pub fn load(value: &toml::Value) -> Result<Self, ToolsError> {
        let table = as_table("bridge", value)?;
        check_keys("bridge", table, BRIDGE_KEYS)?;
        let max_running = match table.get("max_running") {
            Some(value) => {
                let n = positive("bridge.max_running", value, "would run no tool call")?;
                Some(usize::try_from(n).map_err(|_| {
                    ToolsError::new("bridge.max_running", format!("{n} is too large"))
                })?)
            }
            None => None,
        };
        let queue_timeout = match table.get("queue_timeout_ms") {
            Some(value) => Some(Duration::from_millis(positive(
                "bridge.queue_timeout_ms",
                value,
                "would expire every queued call at once",
            )?)),
            None => None,
        };
        Ok(Self {
            max_running,
            queue_timeout,
        })
    }

    /// The limits in force with these flags (`None`: not given).
    pub fn limits(&self, max_running: Option<usize>, queue_timeout_ms: Option<u64>) -> Limits {
        Limits {
            max_running: max_running
                .or(self.max_running)
                .unwrap_or_else(default_max_running),
            queue_timeout: queue_timeout_ms
                .map(Duration::from_millis)
                .or(self.queue_timeout)
                .unwrap_or(DEFAULT_QUEUE_TIMEOUT),
        }
    }
}

/// Twice the CPUs this process may use (2 when that cannot be known).
pub fn default_max_running() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .saturating_mul(2)
}

/// `value` as an integer of at least 1; `zero` says what 0 would do.
fn positive(path: &str, value: &toml::Value, zero: &str) -> Result<u64, ToolsError> {
    match value {
        toml::Value::Integer(n) if *n > 0 => Ok(n.unsigned_abs()),
        toml::Value::Integer(0) => Err(ToolsError::new(path, format!("0 {zero}"))),
        toml::Value::Integer(n) => Err(ToolsError::new(
            path,
            format!("{n} is negative (a positive integer is expected)"),
        )),
        _ => Err(ToolsError::new(path, "must be a positive integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<BridgeTable, String> {
        let doc: toml::Table = text.parse().map_err(|e| format!("{e}"))?;
        BridgeTable::load(&doc["bridge"]).map_err(|e| e.to_string())
    }

    #[test]
    fn the_bridge_table_takes_positive_integers() {
        assert_eq!(
            load("[bridge]\nmax_running = 3\nqueue_timeout_ms = 2500\n"),
            Ok(BridgeTable {
                max_running: Some(3),
                queue_timeout: Some(Duration::from_millis(2500)),
            })
        );
        assert_eq!(load("[bridge]\n"), Ok(BridgeTable::default()));
    }

    #[test]
    fn bad_values_name_their_key() {
        assert_eq!(
            load("[bridge]\nmax_running = 0\n"),
            Err("bridge.max_running: 0 would run no tool call".into())
        );
        assert_eq!(
            load("[bridge]\nmax_running = -2\n"),
            Err("bridge.max_running: -2 is negative (a positive integer is expected)".into())
        );
        assert_eq!(
            load("[bridge]\nmax_running = \"4\"\n"),
            Err("bridge.max_running: must be a positive integer".into())
        );
        assert_eq!(
            load("[bridge]\nmax_running = 2.5\n"),
            Err("bridge.max_running: must be a positive integer".into())
        );
        assert_eq!(
            load("[bridge]\nqueue_timeout_ms = 0\n"),
            Err("bridge.queue_timeout_ms: 0 would expire every queued call at once".into())
        );
        assert_eq!(
            load("[bridge]\nqueue_timeout = 5\n"),
            Err(
                "bridge.queue_timeout: unknown key (known keys: max_running, queue_timeout_ms)"
                    .into()
            )
        );
        assert_eq!(load("bridge = 4\n"), Err("bridge: must be a table".into()));
    }

    #[test]
    fn a_flag_wins_over_the_file_and_the_file_over_the_default() {
        let file = BridgeTable {
            max_running: Some(3),
            queue_timeout: Some(Duration::from_millis(2500)),
        };
        assert_eq!(
            file.limits(Some(7), Some(10)),
            Limits {
                max_running: 7,
                queue_timeout: Duration::from_millis(10)
            }
        );
        assert_eq!(
            file.limits(None, None),
            Limits {
                max_running: 3,
                queue_timeout: Duration::from_millis(2500)
            }
        );
        let cpus = std::thread::available_parallelism().unwrap().get();
        assert_eq!(
            BridgeTable::default().limits(None, None),
            Limits {
                max_running: 2 * cpus,
                queue_timeout: Duration::from_secs(60)
            }
        );
    }
}
