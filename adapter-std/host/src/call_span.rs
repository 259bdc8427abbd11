//! The `tracing` span of a call (feature `tracing`): made by the adapter
//! the call runs on, so that its target is the adapter's crate
//! (`spillguard_tokio`, ...) and a filter such as
//! `RUST_LOG=spillguard_tokio=info` selects it; its fields are the same on
//! every runtime ([`call_span!`](crate::call_span)).

/// What a call's span says of it.
#[derive(Debug, Clone, Copy)]
pub struct SpanFields<'a> {
    /// The call's id.
    pub call_id: &'a str,
    /// Its session.
    pub session_id: &'a str,
    /// Its action.
    pub action: &'a str,
    /// The program's file name.
    pub program: &'a str,
    /// The call's trace id (hex), when it has a trace.
    pub trace_id: Option<&'a str>,
    /// The call's span id (hex), when it has a trace.
    pub span_id: Option<&'a str>,
}

/// Makes a call's span: how an adapter names its own target.
pub type SpanMaker = fn(&SpanFields<'_>) -> tracing::Span;

/// The span of the call `spec` describes, made by `maker` as a child of
/// the caller's current span. With the `opentelemetry` feature and an
/// OpenTelemetry layer in the subscriber, the span is an OpenTelemetry
/// span too, and the call's trace becomes that span's: the record's
/// `trace_id` and `span_id` name it and the helper's `TRACEPARENT` names
/// it as the helper's parent (see [`join_opentelemetry`]).
pub(crate) fn make(
    maker: SpanMaker,
    spec: &spillguard_core::CallSpec,
    settings: spillguard_core::CallSettings,
    command: crate::HelperCommand,
) -> (
    tracing::Span,
    spillguard_core::CallSettings,
    crate::HelperCommand,
) {
    let hex = spillguard_core::trace::hex;
    let trace = settings.trace.as_ref();
    let (trace_id, span_id) = (
        trace.map(|t| hex(&t.trace_id)),
        trace.map(|t| hex(&t.span_id)),
    );
    let span = maker(&SpanFields {
        call_id: &spec.call_id,
        session_id: &spec.session_id,
        action: &spec.action,
        program: &crate::builder::program_name(&command),
        trace_id: trace_id.as_deref(),
        span_id: span_id.as_deref(),
    });
    #[cfg(feature = "opentelemetry")]
    let (settings, command) = {
        let mut settings = settings;
        let mut command = command;
        let before = settings.trace.clone();
        settings.trace = join_opentelemetry(&span, settings.trace.take());
        if let Some(trace) = settings
            .trace
            .as_ref()
            .filter(|t| Some(*t) != before.as_ref())
        {
            span.record("trace_id", hex(&trace.trace_id));
            span.record("span_id", hex(&trace.span_id));
            command = command.env("TRACEPARENT", trace.traceparent());
            command = match &trace.trace_state {
                Some(state) => command.env("TRACESTATE", state),
                None => command.env_remove("TRACESTATE"),
            };
        }
        (settings, command)
    };
    (span, settings, command)
}

/// The call's trace as the OpenTelemetry span `span` is (feature
/// `opentelemetry`): its trace id, its span id, its parent (the trace
/// parent the request gave, else the caller's current span) and its
/// flags. A trace parent the request gave (`trace_parent`) becomes the
/// OpenTelemetry span's parent first. Without an OpenTelemetry layer in
/// the subscriber the span has no valid context and `given` is kept.
#[cfg(feature = "opentelemetry")]
pub fn join_opentelemetry(
    span: &tracing::Span,
    given: Option<spillguard_core::trace::CallTrace>,
) -> Option<spillguard_core::trace::CallTrace> {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    let given_parent = given.as_ref().and_then(|t| t.parent_span_id);
    if let (Some(given), Some(parent)) = (&given, given_parent) {
        let state = given
            .trace_state
            .as_deref()
            .and_then(|text| text.parse::<TraceState>().ok())
            .unwrap_or_default();
        let remote = SpanContext::new(
            TraceId::from_bytes(given.trace_id),
            SpanId::from_bytes(parent),
            TraceFlags::new(given.flags),
            true,
            state,
        );
        // Refused only once the span was started, which it is not yet.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    let context = span.context();
    let own = context.span().span_context().clone();
    if !own.is_valid() {
        return given;
    }
    let parent = given_parent.or_else(|| {
        let current = tracing::Span::current().context();
        let caller = current.span().span_context().clone();
        caller.is_valid().then(|| caller.span_id().to_bytes())
    });
    let state = own.trace_state().header();
    Some(spillguard_core::trace::CallTrace {
        trace_id: own.trace_id().to_bytes(),
        span_id: own.span_id().to_bytes(),
        parent_span_id: parent,
        flags: own.trace_flags().to_u8() & 0x01,
        trace_state: given
            .and_then(|t| t.trace_state)
            .or_else(|| (!state.is_empty()).then_some(state)),
    })
}

/// The span `spillguard.call` of a call, with target `$target` (a string
/// literal: the adapter's crate) and [`SpanFields`] `$fields`; the
/// OpenTelemetry conventions' names, so that a tracing-to-OpenTelemetry
/// layer exports them as they are. `process.pid` and `process.exit.code`
/// are recorded on it as the call learns them.
#[macro_export]
#[doc(hidden)]
macro_rules! call_span {
    ($target:literal, $fields:expr) => {{
        let fields: &$crate::call_span::SpanFields<'_> = $fields;
        $crate::call_span::__tracing::info_span!(
            target: $target,
            "spillguard.call",
            spillguard.call.id = %fields.call_id,
            spillguard.session.id = %fields.session_id,
            spillguard.action = %fields.action,
            process.executable.name = %fields.program,
            trace_id = fields.trace_id,
            span_id = fields.span_id,
            process.pid = $crate::call_span::__tracing::field::Empty,
            process.exit.code = $crate::call_span::__tracing::field::Empty,
        )
    }};
}

/// The span with this crate as its target: for a runtime that names none.
pub fn host_span(fields: &SpanFields<'_>) -> tracing::Span {
    crate::call_span!("spillguard_host", fields)
}

#[doc(hidden)]
pub use tracing as __tracing;
