//! Comparison of the records of one scenario across runtimes: the same
//! scenario must give the same record on every runtime.
//!
//! Two correct runs of the same scenario on two runtimes produce the same
//! record, except for fields that the operating system or the clock decide.
//! [`normalise`] replaces exactly those with placeholders, and nothing else:
//!
//! | field | normalised to | why |
//! |---|---|---|
//! | `pid`, `pgid` | `"<os>"` when set | assigned by the kernel |
//! | `received_at`, `received_at_unix_us` | `"<wall clock>"` | the wall-clock time of the run |
//! | `trace_id`, `span_id`, `parent_span_id` | `"<random>"` when set | drawn at random for each call |
//! | `timeline[].offset_us`, `signals[].offset_us` | removed; the states and signals stay, in order | microsecond timings; their bounds are checked per runtime by [`check`](crate::check) |
//! | `cancel_offset_us`, `exited_offset_us` | `"<set>"` when set | same; whether they are set is compared |
//! | `stderr_bytes_seen` | `"<timing>"` when the scenario expects a range ([`Bytes::Between`]) | how much a flood wrote before a deadline, a TERM or a drain window cut it |
//! | `stderr_bytes_retained` | `"<timing>"` when the retained count depends on timing (a range, or "all seen" of a timed stream) | which of many concurrent calls the pool served first (S7), or a timed stream kept whole (S5) |
//! | `stderr_fingerprint` | `"<timing>"` under the same condition as `stderr_bytes_retained` | a hash of retained bytes whose length varies; it is compared whenever the retained bytes are deterministic, even if the bytes seen are not (a tail of whole repeated lines) |
//! | `stderr_retention_limited` | `"<timing>"` when the scenario expects it to follow the retained count | decided by the same race as the retained count |
//!
//! Everything else — state, approval, cancel reason, exit code and signal,
//! stream end, signal kinds, truncation, stdout counts, pipe capacity,
//! flags, failure text — must be equal.
//!
//! [`Bytes::Between`]: crate::expect::Bytes::Between

use serde::Serialize;
use serde_json::{Map, Value};
use spillguard_core::CallRecord;

use crate::expect::{Bytes, CallExpect, RetentionLimited};
use crate::measure::Measured;
use crate::scenario::Scenario;

/// One field that differs between two runtimes after normalisation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The scenario.
    pub scenario: String,
    /// The call.
    pub call_id: String,
    /// The record field (`record` when one runtime has no record).
    pub field: String,
    /// The reference runtime and its value.
    pub reference: (String, Value),
    /// The other runtime and its value.
    pub other: (String, Value),
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {}: {} {} vs {} {}",
            self.scenario,
            self.call_id,
            self.field,
            self.reference.0,
            self.reference.1,
            self.other.0,
            self.other.1
        )
    }
}

const OS: &str = "<os>";
const WALL_CLOCK: &str = "<wall clock>";
const SET: &str = "<set>";
const TIMING: &str = "<timing>";
const RANDOM: &str = "<random>";

/// The record as JSON with the fields that legitimately differ between
/// runs replaced, as the [module docs](self) list them. `expect` is the
/// call's expectation, which says which byte counts depend on timing.
pub fn normalise(record: &CallRecord, expect: &CallExpect) -> Value {
    let Ok(Value::Object(mut fields)) = serde_json::to_value(record) else {
        return Value::Null;
    };
    for key in ["pid", "pgid"] {
        placeholder_if_set(&mut fields, key, OS);
    }
    fields.insert("received_at".into(), WALL_CLOCK.into());
    fields.insert("received_at_unix_us".into(), WALL_CLOCK.into());
    for key in ["trace_id", "span_id", "parent_span_id"] {
        placeholder_if_set(&mut fields, key, RANDOM);
    }
    for key in ["cancel_offset_us", "exited_offset_us"] {
        placeholder_if_set(&mut fields, key, SET);
    }
    for key in ["timeline", "signals"] {
        if let Some(Value::Array(marks)) = fields.get_mut(key) {
            for mark in marks.iter_mut() {
                if let Value::Object(mark) = mark {
                    mark.remove("offset_us");
                }
            }
        }
    }
    if expect.stderr_seen.depends_on_timing() {
        fields.insert("stderr_bytes_seen".into(), TIMING.into());
    }
    if expect.retained_bytes_depend_on_timing() {
        fields.insert("stderr_bytes_retained".into(), TIMING.into());
        fields.insert("stderr_fingerprint".into(), TIMING.into());
    }
    if matches!(
        expect.retention_limited,
        RetentionLimited::WhenRetainedBelow(_)
    ) && matches!(expect.stderr_retained, Bytes::Between(..))
    {
        fields.insert("stderr_retention_limited".into(), TIMING.into());
    }
    Value::Object(fields)
}

fn placeholder_if_set(fields: &mut Map<String, Value>, key: &str, placeholder: &str) {
    if fields.get(key).is_some_and(|v| !v.is_null()) {
        fields.insert(key.into(), placeholder.into());
    }
}

/// Compares every call's normalised record on each run with the first run
/// (the reference). Runs of one runtime only compare nothing.
pub fn compare(scenario: &Scenario, runs: &[Measured]) -> Vec<Difference> {
    let Some((reference, others)) = runs.split_first() else {
        return Vec::new();
    };
    let mut differences = Vec::new();
    for call_id in scenario.call_ids() {
        let Some(plan) = scenario.plan_of(&call_id) else {
            continue;
        };
        let normalised = |run: &Measured| {
            run.call(&call_id)
                .and_then(|c| c.record.as_ref())
                .map(|r| normalise(r, &plan.expect))
        };
        let base = normalised(reference);
        for other in others {
            let theirs = normalised(other);
            let mut differ = |field: &str, a: Value, b: Value| {
                differences.push(Difference {
                    scenario: scenario.name.to_owned(),
                    call_id: call_id.clone(),
                    field: field.to_owned(),
                    reference: (reference.runtime.clone(), a),
                    other: (other.runtime.clone(), b),
                });
            };
            match (&base, &theirs) {
                (Some(Value::Object(a)), Some(Value::Object(b))) => {
                    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
                    keys.sort_unstable();
                    keys.dedup();
                    for key in keys {
                        let (va, vb) = (a.get(key), b.get(key));
                        if va != vb {
                            differ(
                                key,
                                va.cloned().unwrap_or(Value::Null),
                                vb.cloned().unwrap_or(Value::Null),
                            );
                        }
                    }
                }
                (a, b) if a.is_some() != b.is_some() => {
                    differ("record", Value::Bool(a.is_some()), Value::Bool(b.is_some()))
                }
                _ => {}
            }
        }
    }
    differences
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expect::CallExpect;
    use spillguard_core::{
        Action, Call, CallSettings, CancelReason, Config, ExitStatus, Input, RetentionPool,
    };
    use spillguard_std::HelperCommand;
    use std::time::{Duration, Instant, SystemTime};

    /// A record made by the core itself: a helper with pid `pid` writes
    /// `seen` stderr bytes of `x`, is cancelled `offset` ms in and dies of
    /// SIGTERM 1 ms later; its pipes got `pipe` bytes of capacity.
    fn record(pid: u32, seen: u64, offset: u64, pipe: Option<u64>) -> CallRecord {
        let config = Config::default();
        let pool = RetentionPool::new(config.stderr_retained_process_bytes);
        let resolved = crate::engine::request(HelperCommand::new("true"))
            .call_id("c_s9")
            .action("a")
            .target("t")
            .summary("s")
            .into_request()
            .resolve("s", |_| CallSettings::action(&config));
        let start = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(offset);
        let mut call = Call::new(resolved.spec, resolved.settings, &pool, start, wall);
        call.handle(
            start,
            Input::Validated {
                needs_approval: false,
            },
        )
        .unwrap();
        let mut finished = None;
        let mut step = |call: &mut Call| {
            while let Some(action) = call.poll_action() {
                match action {
                    Action::Spawn(_) => {
                        let _ = call.handle(start, Input::PipeCapacity(pipe));
                        call.handle(start, Input::Spawned { pid }).unwrap();
                    }
                    Action::Finished(outcome) => finished = Some(outcome.record),
                    _ => {}
                }
            }
        };
        step(&mut call);
        let _ = call.handle(
            start,
            Input::Stderr(&vec![b'x'; usize::try_from(seen).unwrap()]),
        );
        let cancel = start + Duration::from_millis(offset);
        let _ = call.handle(cancel, Input::Cancel(CancelReason::Requested));
        step(&mut call);
        let end = cancel + Duration::from_millis(1);
        call.handle(end, Input::StdoutEof).unwrap();
        call.handle(end, Input::StderrEof).unwrap();
        call.handle(end, Input::Exited(ExitStatus::signal(15)))
            .unwrap();
        step(&mut call);
        finished.expect("the call finished")
    }

    const PIPE: Option<u64> = Some(1 << 20);

    #[test]
    fn os_and_clock_fields_are_normalised_and_nothing_else() {
        let exact = CallExpect {
            stderr_seen: Bytes::Exact(100),
            ..CallExpect::default()
        };
        let a = normalise(&record(10, 100, 5, PIPE), &exact);
        let b = normalise(&record(20, 100, 7, PIPE), &exact);
        assert_eq!(a, b);
        assert_eq!(a["pid"], OS);
        assert_eq!(a["received_at"], WALL_CLOCK);
        assert_eq!(a["exited_offset_us"], SET);
        assert_eq!(
            a["timeline"],
            serde_json::json!([
                {"state": "received"},
                {"state": "validated"},
                {"state": "authorized"},
                {"state": "dispatched"},
                {"state": "cancelled_after_dispatch"}
            ])
        );
        assert_eq!(a["signals"], serde_json::json!([{"signal": "TERM"}]));
        assert_eq!(a["stderr_bytes_seen"], 100);
        let c = normalise(&record(10, 101, 5, PIPE), &exact);
        assert_ne!(a, c, "an exact byte count is compared");
    }

    fn run(runtime: &str, record: CallRecord) -> Measured {
        let mut call = crate::measure::MeasuredCall::new("c_s9".into());
        call.record = Some(record);
        Measured {
            runtime: runtime.into(),
            scenario: "s".into(),
            calls: vec![call],
            pool: crate::measure::PoolUse::default(),
            wall_ms: 0.0,
            audit_chain: None,
        }
    }

    #[test]
    fn a_field_that_differs_between_runtimes_is_reported_once() {
        let scenario =
            crate::catalog::by_name("a_helper_that_ignores_sigterm_is_killed_after_the_grace")
                .unwrap();
        let runs = [
            run("std", record(1, 100, 5, PIPE)),
            run("tokio", record(2, 100, 9, None)),
        ];
        assert_eq!(
            compare(&scenario, &runs),
            [Difference {
                scenario: scenario.name.into(),
                call_id: "c_s9".into(),
                field: "pipe_capacity_bytes".into(),
                reference: ("std".into(), Value::from(1 << 20)),
                other: ("tokio".into(), Value::Null),
            }]
        );
        let missing = [
            run("std", record(1, 100, 5, PIPE)),
            Measured {
                calls: Vec::new(),
                ..run("tokio", record(1, 100, 5, PIPE))
            },
        ];
        assert_eq!(compare(&scenario, &missing)[0].field, "record");
    }

    #[test]
    fn timed_byte_counts_are_normalised_only_when_expected_to_vary() {
        let timed = CallExpect {
            stderr_seen: Bytes::Between(0, 100_000),
            stderr_retained: Bytes::Exact(16_384),
            ..CallExpect::default()
        };
        let a = normalise(&record(1, 20_000, 5, PIPE), &timed);
        let b = normalise(&record(1, 30_000, 5, PIPE), &timed);
        assert_eq!(a, b);
        assert_eq!(a["stderr_bytes_seen"], TIMING);
        assert_eq!(a["stderr_bytes_retained"], 16_384);
        // The same 16 KiB of `x`: the fingerprint is compared, and equal.
        assert!(a["stderr_fingerprint"].is_string());
        assert_ne!(a["stderr_fingerprint"], TIMING);
    }
}
