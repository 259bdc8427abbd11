//! The members the JSON-RPC scanner reads (`params.name`,
//! `params._meta.traceparent`, `result.isError`, `error.code`) agree with
//! serde_json's reading of the same line, for members in any order, with
//! decoys of the same names elsewhere, in any chunking.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use spillguard_core::{MessageInfo, MessageScanner, RawValue};

/// A short string value, or something else of the same key.
fn scalar() -> BoxedStrategy<Value> {
    prop_oneof![
        "[a-z0-9/_-]{0,140}".prop_map(Value::String),
        any::<i32>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        Just(json!({"traceparent": "decoy", "name": "decoy", "isError": true, "code": 1})),
    ]
    .boxed()
}

/// An object with each of `keys` present or not (a value from `values`),
/// in a shuffled order.
fn object(
    keys: &'static [&'static str],
    values: BoxedStrategy<Value>,
) -> BoxedStrategy<Vec<(String, Value)>> {
    let members: Vec<_> = keys
        .iter()
        .map(|&key| proptest::option::of(values.clone()).prop_map(move |v| (key.to_owned(), v)))
        .collect();
    members
        .prop_map(|members| {
            members
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
        .boxed()
}

fn to_map(members: Vec<(String, Value)>) -> Value {
    Value::Object(members.into_iter().collect::<Map<_, _>>())
}

/// A message: `params` with `name`, `_meta` (with `traceparent`) and
/// decoys; `result` with `isError`; `error` with `code`.
fn message() -> impl Strategy<Value = String> {
    let meta = object(&["traceparent", "tracestate", "progressToken"], scalar())
        .prop_map(to_map)
        .boxed();
    let params = (
        object(&["name", "requestId", "arguments"], scalar()),
        proptest::option::of(prop_oneof![meta, scalar()]),
    )
        .prop_map(|(mut members, meta)| {
            if let Some(meta) = meta {
                members.push(("_meta".to_owned(), meta));
            }
            to_map(members)
        })
        .boxed();
    let result = object(&["isError", "content", "traceparent"], scalar())
        .prop_map(to_map)
        .boxed();
    let error = object(&["code", "message", "data"], scalar())
        .prop_map(to_map)
        .boxed();
    (
        object(&["id", "method", "name", "code"], scalar()),
        proptest::option::of(params),
        proptest::option::of(prop_oneof![result.clone(), scalar()]),
        proptest::option::of(prop_oneof![error, scalar()]),
    )
        .prop_map(|(mut top, params, result, error)| {
            top.push(("jsonrpc".into(), json!("2.0")));
            for (key, value) in [("params", params), ("result", result), ("error", error)] {
                if let Some(value) = value {
                    top.push((key.into(), value));
                }
            }
            // Written in the members' order, as a peer would.
            let body: Vec<String> = top
                .iter()
                .map(|(k, v)| format!("{} : {}", json!(k), v))
                .collect();
            format!("{{ {} }}", body.join(" ,"))
        })
}

/// What serde_json reads at `path`: a scalar (string, number, literal), as
/// written, when it fits a kept value (its reader checks the type).
fn kept(line: &Value, path: &[&str]) -> Option<Vec<u8>> {
    let mut at = line;
    for key in path {
        at = at.as_object()?.get(*key)?;
    }
    let text = match at {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => at.to_string(),
        _ => return None,
    };
    (text.len() <= RawValue::CAPACITY).then(|| text.into_bytes())
}

fn scan(line: &[u8], cuts: &[usize]) -> MessageInfo {
    let mut scanner = MessageScanner::new();
    let mut at = 0;
    for &cut in cuts {
        let cut = cut % (line.len() + 1);
        if cut > at {
            scanner.feed(&line[at..cut]);
            at = cut;
        }
    }
    scanner.feed(&line[at..]);
    scanner.finish().expect("a JSON-RPC message")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3_000))]

    #[test]
    fn the_members_read_are_serde_json_s(
        line in message(),
        mut cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        cuts.sort_unstable();
        let parsed: Value = serde_json::from_str(&line).unwrap();
        let info = scan(line.as_bytes(), &cuts);
        let raw = |value: Option<RawValue>| value.map(|v| v.as_bytes().to_vec());
        prop_assert_eq!(raw(info.name), kept(&parsed, &["params", "name"]));
        prop_assert_eq!(
            raw(info.trace_parent),
            kept(&parsed, &["params", "_meta", "traceparent"])
        );
        prop_assert_eq!(
            raw(info.error_code),
            kept(&parsed, &["error", "code"])
        );
        prop_assert_eq!(
            info.is_error,
            parsed.pointer("/result/isError") == Some(&Value::Bool(true))
        );
    }
}
