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
