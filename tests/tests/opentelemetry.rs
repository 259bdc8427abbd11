//! The adapters' `opentelemetry` feature, with a tracing-opentelemetry
//! layer in the caller's subscriber: the call's span is exported as an
//! OpenTelemetry span, a child of the caller's span in the caller's
//! trace; the helper's `TRACEPARENT` names that exported span as its
//! parent, and the call's record gives the same ids. On every runtime.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use spillguard_host::{HelperCommand, Output};
use tracing_subscriber::layer::SubscriberExt;

/// The helper: prints the `TRACEPARENT` it was given.
fn helper() -> HelperCommand {
    HelperCommand::new("sh")
        .arg("-c")
        .arg("printf %s \"$TRACEPARENT\"")
}

/// Runs `call` under a caller's span `caller` in a subscriber that
/// exports to memory, and returns the output and every span exported
/// once the call's has been (its owner closes it at the call's end).
fn traced(call: impl FnOnce() -> Output) -> (Output, Vec<SpanData>) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let output = tracing::subscriber::with_default(subscriber, || {
        let caller = tracing::info_span!("caller");
        caller.in_scope(call)
    });
    let start = Instant::now();
    loop {
        let spans = exporter.get_finished_spans().unwrap();
        let both = ["caller", "spillguard.call"]
            .iter()
            .all(|name| spans.iter().any(|s| s.name == *name));
        if both {
            return (output, spans);
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "exported: {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The call's span is the caller's child, the helper was told it as its
/// parent, and the record names it.
fn check(runtime: &str, output: &Output, spans: &[SpanData]) {
    let find = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let (caller, call) = (find("caller"), find("spillguard.call"));
    let trace = call.span_context.trace_id();
    let id = call.span_context.span_id();
    assert_ne!(trace, TraceId::INVALID, "{runtime}");
    assert_ne!(id, SpanId::INVALID, "{runtime}");
    assert_eq!(
        trace,
        caller.span_context.trace_id(),
        "{runtime}: one trace"
    );
    assert_eq!(
        call.parent_span_id,
        caller.span_context.span_id(),
        "{runtime}: the caller's child"
    );
    let traceparent = String::from_utf8(output.stdout.clone()).unwrap();
    assert_eq!(
        traceparent,
        format!("00-{trace}-{id}-01"),
        "{runtime}: the helper's parent is the exported span"
    );
    let record = output.record();
    assert_eq!(record.trace_id.as_deref(), Some(trace.to_string().as_str()));
    assert_eq!(record.span_id.as_deref(), Some(id.to_string().as_str()));
    assert_eq!(
        record.parent_span_id.as_deref(),
        Some(caller.span_context.span_id().to_string().as_str())
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn the_call_span_joins_the_callers_trace_on_std() {
    let (output, spans) = traced(|| {
        spillguard_std::Command::on_default(helper())
            .output()
            .unwrap()
    });
    check("std", &output, &spans);
}

#[test]
fn the_call_span_joins_the_callers_trace_on_smol() {
    let (output, spans) =
        traced(|| smol::block_on(spillguard_smol::Command::on_default(helper()).output()).unwrap());
    check("smol", &output, &spans);
}

#[test]
fn the_call_span_joins_the_callers_trace_on_tokio() {
    let (output, spans) = traced(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(spillguard_tokio::Command::on_default(helper()).output())
            .unwrap()
    });
    check("tokio", &output, &spans);
}

/// Without an OpenTelemetry layer the feature changes nothing: a call
/// with no trace gives its helper no `TRACEPARENT`.
#[test]
fn without_a_layer_a_call_has_no_trace() {
    let output = spillguard_std::Command::on_default(helper())
        .output()
        .unwrap();
    assert_eq!(output.stdout, b"");
    assert_eq!(output.record().trace_id, None);
}

/// A trace parent the request gave (an incoming `traceparent`) is the
/// exported span's parent, in its trace, not the caller's span.
#[test]
fn a_given_trace_parent_is_the_exported_spans_parent() {
    use spillguard_core::trace::TraceParent;
    let given = TraceParent {
        trace_id: [0x4b; 16],
        parent_id: [0x7a; 8],
        flags: 1,
    };
    let (output, spans) = traced(|| {
        spillguard_std::Command::on_default(helper())
            .trace_parent(given, Some("vendor=1".to_owned()))
            .output()
            .unwrap()
    });
    let call = spans.iter().find(|s| s.name == "spillguard.call").unwrap();
    assert_eq!(
        call.span_context.trace_id(),
        TraceId::from_bytes(given.trace_id)
    );
    assert_eq!(call.parent_span_id, SpanId::from_bytes(given.parent_id));
    let id = call.span_context.span_id();
    assert_eq!(
        String::from_utf8(output.stdout.clone()).unwrap(),
        format!("00-{}-{id}-01", "4b".repeat(16))
    );
    let record = output.record();
    assert_eq!(
        record.parent_span_id.as_deref(),
        Some("7a".repeat(8).as_str())
    );
    assert_eq!(record.span_id.as_deref(), Some(id.to_string().as_str()));
}
