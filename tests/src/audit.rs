//! S10: every scenario run writes a hash-chained audit log, which is then
//! verified offline against the sink's anchor and compared with the
//! lifecycle each call's record describes.
//!
//! A driver makes a [`ScenarioLog`] before its host, gives the host its
//! [`sink`](ScenarioLog::sink), runs the scenario, and hands the
//! measurement to [`finish`](ScenarioLog::finish), which fills in
//! [`Measured::audit_chain`].

use std::path::PathBuf;
use std::sync::Arc;

use spillguard_core::audit::{ExpectedCall, Verdict, VerifyOptions, compare, verify_and_read};
use spillguard_std::{AuditSink, ChainedFileAudit, ChainedFileOptions};

use crate::measure::{AuditChain, Measured};
use crate::scenario::Scenario;

/// The audit log of one scenario run: a fresh file in the temp directory,
/// named for the process, the runtime and the scenario.
#[derive(Debug)]
pub struct ScenarioLog {
    path: PathBuf,
    sink: Result<Arc<ChainedFileAudit>, String>,
}

impl ScenarioLog {
    /// Creates the log of `scenario` on `runtime` (with the default fsync
    /// policy: attempts and final records are synced). A log that cannot
    /// be created is reported by [`finish`](Self::finish).
    pub fn create(runtime: &str, scenario: &Scenario) -> ScenarioLog {
        let path = std::env::temp_dir().join(format!(
            "spillguard-s10-{}-{runtime}-{}.log",
            std::process::id(),
            scenario.id
        ));
        let _ = std::fs::remove_file(&path);
        let sink = ChainedFileAudit::open(&path, ChainedFileOptions::default())
            .map(Arc::new)
            .map_err(|error| error.to_string());
        ScenarioLog { path, sink }
    }

    /// The sink for the host's options (`None` if the log could not be
    /// created: the run then fails S10).
    pub fn sink(&self) -> Option<Arc<dyn AuditSink>> {
        match &self.sink {
            Ok(sink) => Some(sink.clone() as Arc<dyn AuditSink>),
            Err(_) => None,
        }
    }

    /// Once every call of the run has ended: verifies the file against the
    /// sink's anchor and compares it with the record of every call. The
    /// file is removed when both hold, and kept (its path in the result)
    /// otherwise.
    pub fn finish(self, mut measured: Measured) -> Measured {
        let sink = match self.sink {
            Ok(sink) => sink,
            Err(problem) => {
                measured.audit_chain = Some(AuditChain {
                    verified: false,
                    matches_expected_lifecycle: false,
                    verdict: format!("not written: {problem}"),
                    records: 0,
                    differences: Vec::new(),
                    kept_log: None,
                });
                return measured;
            }
        };
        let anchor = sink.anchor();
        let bytes = std::fs::read(&self.path).unwrap_or_default();
        let (verdict, records) = verify_and_read(
            &bytes,
            VerifyOptions {
                anchor: Some(&anchor),
                key: None,
            },
        );
        let expected: Vec<ExpectedCall> = measured
            .calls
            .iter()
            .filter_map(|call| call.record.as_ref())
            .map(ExpectedCall::from_record)
            .collect();
        let differences = compare(&records, &expected);
        let verified = matches!(verdict, Verdict::Ok { .. });
        let matches = differences.is_empty();
        drop(sink);
        let kept_log = if verified && matches {
            let _ = std::fs::remove_file(&self.path);
            None
        } else {
            Some(self.path)
        };
        measured.audit_chain = Some(AuditChain {
            verified,
            matches_expected_lifecycle: matches,
            verdict: verdict.to_string(),
            records: records.len() as u64,
            differences,
            kept_log,
        });
        measured
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{MeasuredCall, PoolUse};
    use spillguard_core::{Config, State};
    use spillguard_std::{Host, HostOptions};

    /// A run of one `true` call written to `log`, measured as a driver
    /// would.
    fn one_call(log: &ScenarioLog) -> Measured {
        let host = Host::new(
            Config::default(),
            HostOptions {
                audit: log.sink(),
                ..HostOptions::default()
            },
        )
        .unwrap();
        let outcome = host
            .command("true")
            .call_id("c_s10")
            .session_id("s_scenarios")
            .action("local.helper")
            .target("localhost")
            .summary("true")
            .run();
        let mut call = MeasuredCall::new("c_s10".into());
        call.record = Some(outcome.record.clone());
        Measured {
            runtime: "std".into(),
            scenario: "s10".into(),
            calls: vec![call],
            pool: PoolUse::default(),
            wall_ms: 0.0,
            audit_chain: None,
        }
    }

    fn scenario(id: &'static str) -> Scenario {
        Scenario {
            id,
            ..crate::catalog::all().remove(0)
        }
    }

    #[test]
    fn a_faithful_log_passes_and_one_missing_the_call_does_not() {
        let log = ScenarioLog::create("unit", &scenario("T1"));
        let path = log.path.clone();
        let other = ScenarioLog::create("unit", &scenario("T0"));
        let measured = log.finish(one_call(&other));
        let _ = std::fs::remove_file(&other.path);
        // Another log was given to the host: this one has only its
        // `opened` entry, and the call is missing from it.
        let chain = measured.audit_chain.unwrap();
        assert!(chain.verified);
        assert_eq!(chain.records, 1);
        assert!(!chain.matches_expected_lifecycle);
        assert_eq!(chain.differences.len(), 1);
        assert_eq!(chain.kept_log.as_ref(), Some(&path));
        let _ = std::fs::remove_file(&path);

        let log = ScenarioLog::create("unit", &scenario("T2"));
        let path = log.path.clone();
        let measured = one_call(&log);
        let measured = log.finish(measured);
        let chain = measured.audit_chain.clone().unwrap();
        assert_eq!(
            (
                chain.verified,
                chain.matches_expected_lifecycle,
                chain.records
            ),
            (true, true, 7)
        );
        assert!(chain.verdict.starts_with("ok: 7 records, as anchored"));
        assert_eq!(chain.kept_log, None);
        assert!(!path.exists());
        let failures = crate::check(&scenario("T2"), &measured);
        assert!(
            failures.iter().all(|f| !f.what.contains("S10")),
            "{failures:?}"
        );
    }

    #[test]
    fn a_changed_log_or_record_fails_s10_and_keeps_the_log() {
        let log = ScenarioLog::create("unit", &scenario("T3"));
        let path = log.path.clone();
        let mut measured = one_call(&log);
        let record = measured.calls[0].record.as_mut().unwrap();
        record.state = State::FailedLocal;
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let measured = log.finish(measured);
        let chain = measured.audit_chain.clone().unwrap();
        assert!(!chain.verified);
        assert!(
            chain.verdict.starts_with("tampered: record 6 (byte "),
            "{}",
            chain.verdict
        );
        // The records before the fault still show the changed final state
        // is not on record.
        assert!(!chain.matches_expected_lifecycle);
        assert_eq!(chain.kept_log.as_ref(), Some(&path));
        let failures = crate::check(&scenario("T3"), &measured);
        let s10: Vec<&str> = failures
            .iter()
            .filter(|f| f.what.contains("S10"))
            .map(|f| f.what.as_str())
            .collect();
        assert_eq!(
            s10,
            [
                "audit log (S10)",
                "audit log vs the records' lifecycles (S10)"
            ]
        );
        let _ = std::fs::remove_file(&path);
    }
}
