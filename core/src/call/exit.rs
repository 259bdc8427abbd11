//! How the helper ended, as observed: [`Exit`]; and what it returned on
//! stdout, when its result is JSON.

use std::fmt;

use super::{Call, CallRecord, Outcome, ResultKind};

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

/// Parses the retained stdout as the call's JSON result (see
/// [`ResultChannel::StdoutJson`](super::ResultChannel::StdoutJson)): a value and its classification, or why
/// there is none. Never fails.
pub(super) fn parse_result(call: &mut Call) {
    let Some(capture) = call.stdout.as_ref() else {
        return;
    };
    let window = capture.window();
    let joined;
    let bytes: &[u8] = if window.tail.iter().all(|t| t.is_empty()) {
        window.head
    } else {
        joined = [window.head, window.tail[0], window.tail[1]].concat();
        &joined
    };
    let parsed = if window.truncated() {
        Err(format!(
            "stdout exceeded its {}-byte budget",
            capture.settings().budget
        ))
    } else if bytes.iter().all(u8::is_ascii_whitespace) {
        Err("stdout was empty".to_owned())
    } else {
        serde_json::from_slice::<serde_json::Value>(bytes).map_err(|e| {
            let at = format!(" at line {} column {}", e.line(), e.column());
            let text = e.to_string();
            let what = text.strip_suffix(&at).unwrap_or(&text);
            format!("invalid JSON{at}: {what}")
        })
    };
    match parsed {
        Ok(value) => {
            let kind = match &call.settings.result_classifier {
                Some(classifier) => classifier.classify(&value),
                None => ResultKind::of_json(&value),
            };
            call.result = Some(kind);
            call.result_value = Some(value);
        }
        Err(error) => call.result_error = Some(error),
    }
}
