//! A request edited to carry a span in `params._meta.traceparent` is the
//! same JSON value as before apart from that member (and a `params` or
//! `_meta` made to hold it), for messages of any shape, spacing and
//! escapes, with decoys of the same names elsewhere.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use spillguard_core::jsonrpc::trace_edit;
use spillguard_core::trace::CallTrace;

/// Any JSON value a few levels deep, with keys that are the names the
/// edit looks for.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[ -~é日\"\\\\\\n]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("params".to_owned()),
                        Just("_meta".to_owned()),
                        Just("traceparent".to_owned()),
                        Just("tracestate".to_owned()),
                        "[a-z\"\\\\]{1,6}",
                    ],
                    inner
                ),
                0..4
            )
            .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A request: `params` absent, an object (with or without `_meta`, a
/// `_meta` with or without a `traceparent`), or something else.
fn request() -> impl Strategy<Value = Value> {
    let meta = prop::option::of((
        prop::option::of(value()),
        prop::option::of("[a-z=,]{0,10}"),
        value(),
    ));
    let params = prop::option::of((value(), meta));
    (params, any::<u32>()).prop_map(|(params, id)| {
        let mut message = Map::new();
        message.insert("jsonrpc".into(), json!("2.0"));
        message.insert("id".into(), json!(id));
        message.insert("method".into(), json!("tools/call"));
        if let Some((base, meta)) = params {
            let params = match (base, meta) {
                (Value::Object(mut members), Some((traceparent, state, other))) => {
                    let mut meta = Map::new();
                    meta.insert("other".into(), other);
                    if let Some(traceparent) = traceparent {
                        meta.insert("traceparent".into(), traceparent);
                    }
                    if let Some(state) = state {
                        meta.insert("tracestate".into(), json!(state));
                    }
                    members.insert("_meta".into(), Value::Object(meta));
                    Value::Object(members)
                }
                (base, _) => base,
            };
            message.insert("params".into(), params);
        }
        Value::Object(message)
    })
}

/// The line as a client may write it: compact, or spaced out.
fn spelt(value: &Value, spaced: bool) -> String {
    if spaced {
        serde_json::to_string_pretty(value)
            .expect("JSON")
            .replace('\n', " ")
    } else {
        serde_json::to_string(value).expect("JSON")
    }
}

/// `value` without what the edit may add: `params._meta.traceparent` and
/// `tracestate`, an empty `_meta` or `params` left after that.
fn without_trace(mut value: Value, had_params: bool, had_meta: bool) -> Value {
    if let Some(params) = value.get_mut("params").and_then(Value::as_object_mut) {
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("traceparent");
            meta.remove("tracestate");
        }
        if !had_meta {
            params.remove("_meta");
        }
    }
    if !had_params {
        value.as_object_mut().map(|o| o.remove("params"));
    }
    value
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn only_the_trace_changes(request in request(), spaced in any::<bool>(), with_state in any::<bool>()) {
        let mut trace = CallTrace::root([0x5a; 16], [0xa5; 8]);
        if with_state {
            trace.trace_state = Some("vendor=a\"b\\c".into());
        }
        let line = spelt(&request, spaced);
        let params = request.get("params");
        let params_object = params.is_none_or(Value::is_object)
            && params.and_then(|p| p.get("_meta")).is_none_or(Value::is_object);
        let Some((range, with)) = trace_edit(line.as_bytes(), &trace) else {
            prop_assert!(!params_object, "no edit for {line}");
            return Ok(());
        };
        prop_assert!(params_object, "an edit for {line}");
        let mut edited = line.as_bytes().to_vec();
        edited.splice(range.clone(), with);
        let after: Value = serde_json::from_slice(&edited).expect("the edit keeps JSON");
        let meta = &after["params"]["_meta"];
        prop_assert_eq!(&meta["traceparent"], &json!(trace.traceparent()));
        let had_state = request["params"]["_meta"].get("tracestate").is_some();
        if had_state {
            prop_assert_eq!(&meta["tracestate"], &request["params"]["_meta"]["tracestate"]);
        } else if with_state {
            prop_assert_eq!(&meta["tracestate"], &json!("vendor=a\"b\\c"));
        }
        let had_meta = request["params"].get("_meta").is_some_and(Value::is_object);
        let mut before = request.clone();
        if let Some(m) = before.get_mut("params").and_then(|p| p.get_mut("_meta")).and_then(Value::as_object_mut) {
            m.remove("traceparent");
            m.remove("tracestate");
            if had_state {
                m.insert("tracestate".into(), request["params"]["_meta"]["tracestate"].clone());
            }
        }
        let mut after_cmp = without_trace(after.clone(), params.is_some(), had_meta);
        if let (true, Some(m)) = (
            had_state,
            after_cmp.get_mut("params").and_then(|p| p.get_mut("_meta")).and_then(Value::as_object_mut),
        ) {
            m.insert("tracestate".into(), request["params"]["_meta"]["tracestate"].clone());
        }
        prop_assert_eq!(after_cmp, before);
        // Only bytes at the edit changed.
        prop_assert_eq!(&edited[..range.start], &line.as_bytes()[..range.start]);
        prop_assert_eq!(&edited[edited.len() - (line.len() - range.end)..], &line.as_bytes()[range.end..]);
    }
}
