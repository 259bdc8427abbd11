//! The adapters' `tracing` feature: a span per call with its `call_id` and
//! `session_id`, an event per transition and per signal sent, on every
//! runtime, and nothing of what the helper wrote.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use spillguard_host::{HelperCommand, HostOptions};
use spillguard_tests::drivers;
use spillguard_tests::engine::{CallUnderTest, HostUnderTest, request};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// What the subscriber saw: each span's fields, and each event's fields
/// with the fields of its parent span.
#[derive(Default)]
struct Seen {
    spans: HashMap<u64, HashMap<String, String>>,
    events: Vec<HashMap<String, String>>,
}

#[derive(Clone, Default)]
struct Collector {
    next: Arc<AtomicU64>,
    seen: Arc<Mutex<Seen>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().into(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
}

impl Subscriber for Collector {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = HashMap::new();
        fields.insert("span".into(), span.metadata().name().into());
        fields.insert("target".into(), span.metadata().target().into());
        span.record(&mut Fields(&mut fields));
        self.seen.lock().unwrap().spans.insert(id, fields);
        Id::from_u64(id)
    }

    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut seen = self.seen.lock().unwrap();
        if let Some(fields) = seen.spans.get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut seen = self.seen.lock().unwrap();
        let mut fields = event
            .parent()
            .and_then(|id| seen.spans.get(&id.into_u64()).cloned())
            .unwrap_or_default();
        event.record(&mut Fields(&mut fields));
        seen.events.push(fields);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// A flood stopped at its deadline: its events, in order, as
/// `message[:from->to | :signal]`, each in the call's span.
fn events_of<H: HostUnderTest>(
    host: H,
    collector: &Collector,
    call_id: &str,
    target: &str,
) -> Vec<String> {
    let flood = HelperCommand::shell_script("echo secret-token-in-stderr 1>&2; exec sleep 30");
    let call = host.launch(
        request(flood)
            .call_id(call_id)
            .session_id("s_traced")
            .deadline(Duration::from_millis(300))
            .into_request(),
    );
    let outcome = call.wait_timeout(Duration::from_secs(30)).ok().unwrap();
    assert_eq!(outcome.record.stderr_bytes_seen, 23);
    let finished = {
        let seen = collector.seen.lock().unwrap();
        seen.events
            .iter()
            .find(|e| {
                e.get("spillguard.call.id").map(String::as_str) == Some(call_id)
                    && e["message"] == "call finished"
            })
            .cloned()
            .unwrap()
    };
    assert_eq!(finished["spillguard.state"], "cancelled_after_dispatch");
    assert_eq!(finished["spillguard.stderr.bytes_seen"], "23");
    assert_eq!(finished["process.exit.signal"], "15");
    // The span itself holds the helper's pid once it is spawned; a helper
    // ended by a signal has no exit code.
    assert_eq!(
        finished.get("process.pid"),
        outcome.record.pid.map(|pid| pid.to_string()).as_ref()
    );
    assert_eq!(finished.get("process.exit.code"), None);
    let seen = collector.seen.lock().unwrap();
    let mine: Vec<&HashMap<String, String>> = seen
        .events
        .iter()
        .filter(|e| e.get("spillguard.call.id").map(String::as_str) == Some(call_id))
        .collect();
    for event in &mine {
        assert_eq!(event["span"], "spillguard.call");
        // The span's target is the crate of the adapter the call ran on.
        assert_eq!(event["target"], target);
        assert_eq!(event["spillguard.session.id"], "s_traced");
        assert_eq!(event["process.executable.name"], "sh");
        assert!(
            event.values().all(|v| !v.contains("secret-token")),
            "{event:?}"
        );
    }
    mine.iter()
        .map(|e| match (e.get("from"), e.get("to"), e.get("signal")) {
            (Some(from), Some(to), _) => format!("{}:{from}->{to}", e["message"]),
            (_, _, Some(signal)) => format!("{}:{signal}", e["message"]),
            _ => e["message"].clone(),
        })
        .collect()
}

#[test]
fn every_runtime_traces_each_call_in_its_own_span() {
    let collector = Collector::default();
    tracing::subscriber::set_global_default(collector.clone()).unwrap();
    let expected = [
        "transition:received->validated",
        "transition:validated->authorized",
        "helper spawned in its own group",
        "transition:authorized->dispatched",
        "signal sent to the group:15",
        "transition:dispatched->cancelled_after_dispatch",
        "call finished",
    ];
    let std = events_of(
        drivers::std::host(HostOptions::default()),
        &collector,
        "c_std",
        "spillguard_std",
    );
    assert_eq!(std, expected);
    let smol = events_of(
        drivers::smol::host(HostOptions::default()),
        &collector,
        "c_smol",
        "spillguard_smol",
    );
    assert_eq!(smol, expected);
    let tokio = events_of(
        drivers::tokio::host(HostOptions::default()),
        &collector,
        "c_tokio",
        "spillguard_tokio",
    );
    assert_eq!(tokio, expected);
}
