//! A request's `params._meta.traceparent` set to a given span, the rest of
//! its bytes left as the client wrote them: see [`trace_edit`].

use std::ops::Range;

use crate::trace::CallTrace;

/// The one edit that makes the request `line` carry `trace` in
/// `params._meta`: the byte range to replace and what goes there. Every
/// other byte (key order, whitespace, escapes) stays as it is:
///
/// * a `traceparent` already in `params._meta` has its value replaced
///   (its `tracestate`, if any, stays: it belongs to the parent);
/// * else `"traceparent"` (and `"tracestate"`, when `trace` passes one on
///   and `_meta` has none) is added as the first member of `_meta`;
/// * else `"_meta"` is added as the first member of `params`;
/// * else (no `params`) `"params":{"_meta":…}` as the first member of the
///   message.
///
/// `None` for what cannot carry it: a `params` or a `params._meta` that
/// is not an object, a line that is not one JSON object (a batch is left as it is). `line` is
/// one message as the scanner accepted it (valid JSON, no newline); on
/// anything else the answer is `None` or an edit that leaves it as
/// invalid as it was. Where a member is repeated, the last one counts, as
/// in the usual parsers.
///
/// ```
/// use spillguard_core::jsonrpc::trace_edit;
/// use spillguard_core::trace::CallTrace;
///
/// let trace = CallTrace::root([0xab; 16], [0xcd; 8]);
/// let line = br#"{"jsonrpc":"2.0", "id":1,"method":"tools/call","params":{"name":"x"}}"#;
/// let (range, with) = trace_edit(line, &trace).expect("params is an object");
/// let mut edited = line.to_vec();
/// edited.splice(range, with);
/// assert_eq!(
///     String::from_utf8(edited).unwrap(),
///     format!(r#"{{"jsonrpc":"2.0", "id":1,"method":"tools/call","params":{{"_meta":{{"traceparent":"{}"}},"name":"x"}}}}"#,
///             trace.traceparent()),
/// );
/// ```
pub fn trace_edit(line: &[u8], trace: &CallTrace) -> Option<(Range<usize>, Vec<u8>)> {
    let found = Places::of(line)?;
    let traceparent = format!("\"{}\"", trace.traceparent());
    let state = trace
        .trace_state
        .as_deref()
        .and_then(|state| serde_json::to_string(state).ok());
    let members = |meta_has_state: bool| {
        let mut text = format!("\"traceparent\":{traceparent}");
        if let (Some(state), false) = (&state, meta_has_state) {
            text.push_str(",\"tracestate\":");
            text.push_str(state);
        }
        text
    };
    if found.params_not_object || found.meta_not_object {
        return None;
    }
    if let Some(value) = found.traceparent {
        let mut with = traceparent.clone();
        if let (Some(state), false) = (&state, found.meta_has_state) {
            with.push_str(",\"tracestate\":");
            with.push_str(state);
        }
        return Some((value, with.into_bytes()));
    }
    let (at, text) = match (found.meta, found.params, found.object) {
        (Some(meta), _, _) => (
            meta.inside,
            comma(members(found.meta_has_state), meta.empty),
        ),
        (None, Some(params), _) => (
            params.inside,
            comma(format!("\"_meta\":{{{}}}", members(false)), params.empty),
        ),
        (None, None, object) => (
            object.inside,
            comma(
                format!("\"params\":{{\"_meta\":{{{}}}}}", members(false)),
                object.empty,
            ),
        ),
    };
    Some((at..at, text.into_bytes()))
}

/// `text`, followed by a comma unless it goes into an empty object.
fn comma(mut text: String, empty: bool) -> String {
    if !empty {
        text.push(',');
    }
    text
}

/// An object's place in the line: just after its `{`, and whether it has
/// no member.
#[derive(Debug, Clone, Copy)]
struct Object {
    inside: usize,
    empty: bool,
}

/// Where the members the edit looks at are.
#[derive(Debug)]
struct Places {
    /// The message object.
    object: Object,
    /// `params`, when it is an object.
    params: Option<Object>,
    params_not_object: bool,
    /// `params._meta`, when it is an object.
    meta: Option<Object>,
    meta_not_object: bool,
    /// `params._meta.traceparent`'s value (any JSON value).
    traceparent: Option<Range<usize>>,
    /// Whether `params._meta` has a `tracestate`.
    meta_has_state: bool,
}

/// What an open container is, for the members watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Message,
    Params,
    Meta,
    /// A `traceparent` that is an object or an array.
    TraceValue,
    Other,
}

impl Places {
    /// Walks `line` (one JSON value): `None` unless it is an object.
    fn of(line: &[u8]) -> Option<Self> {
        let start = line
            .iter()
            .position(|b| !b" \t\r\n\xef\xbb\xbf".contains(b))?;
        if line.get(start) != Some(&b'{') {
            return None;
        }
        let mut places = Places {
            object: Object {
                inside: start + 1,
                empty: true,
            },
            params: None,
            params_not_object: false,
            meta: None,
            meta_not_object: false,
            traceparent: None,
            meta_has_state: false,
        };
        // The open containers: each one's role, and whether it is an
        // object.
        let mut stack: Vec<(Role, bool)> = Vec::new();
        let mut expect_key = false;
        // The key whose value comes next, in the container on top.
        let mut key: &[u8] = b"";
        let mut at = start;
        while let Some(&byte) = line.get(at) {
            match byte {
                b'{' | b'[' => {
                    let object = byte == b'{';
                    let parent = stack.last().map(|&(role, _)| role);
                    let role = places.open(parent, key, object, at, stack.is_empty());
                    stack.push((role, object));
                    expect_key = object;
                    at += 1;
                }
                b'}' | b']' => {
                    if let Some((Role::TraceValue, _)) = stack.pop() {
                        places.traceparent = places.traceparent.clone().map(|v| v.start..at + 1);
                    }
                    expect_key = false;
                    at += 1;
                    if stack.is_empty() {
                        break;
                    }
                }
                b',' => {
                    expect_key = stack.last().is_some_and(|&(_, object)| object);
                    at += 1;
                }
                b'"' => {
                    let end = string_end(line, at)?;
                    let text = line.get(at + 1..end - 1).unwrap_or_default();
                    let role = stack.last().map_or(Role::Other, |&(role, _)| role);
                    if expect_key {
                        key = text;
                        places.member(role, text);
                        expect_key = false;
                    } else {
                        places.value(role, key, at..end);
                    }
                    at = end;
                }
                b':' | b' ' | b'\t' | b'\r' | b'\n' => at += 1,
                _ => {
                    // A number or a literal: up to the next delimiter.
                    let end = line
                        .get(at..)
                        .and_then(|rest| {
                            rest.iter()
                                .position(|b| b",]} \t\r\n".contains(b))
                                .map(|n| at + n)
                        })
                        .unwrap_or(line.len());
                    let role = stack.last().map_or(Role::Other, |&(role, _)| role);
                    places.value(role, key, at..end);
                    at = end;
                }
            }
        }
        Some(places)
    }

    /// A container opens at `at`, the value of `key` in a container of
    /// role `parent`: its own role.
    fn open(
        &mut self,
        parent: Option<Role>,
        key: &[u8],
        object: bool,
        at: usize,
        top: bool,
    ) -> Role {
        let here = Object {
            inside: at + 1,
            empty: true,
        };
        match (parent, key) {
            _ if top => Role::Message,
            (Some(Role::Message), b"params") => {
                // A later `params` counts, from scratch.
                self.meta = None;
                self.meta_not_object = false;
                self.traceparent = None;
                self.meta_has_state = false;
                self.params_not_object = !object;
                self.params = object.then_some(here);
                if object { Role::Params } else { Role::Other }
            }
            (Some(Role::Params), b"_meta") => {
                self.traceparent = None;
                self.meta_has_state = false;
                self.meta_not_object = !object;
                self.meta = object.then_some(here);
                if object { Role::Meta } else { Role::Other }
            }
            (Some(Role::Meta), b"traceparent") => {
                self.traceparent = Some(at..at);
                Role::TraceValue
            }
            _ => Role::Other,
        }
    }

    /// A key is read in a container of `role`.
    fn member(&mut self, role: Role, key: &[u8]) {
        match role {
            Role::Message => self.object.empty = false,
            Role::Params => {
                if let Some(params) = &mut self.params {
                    params.empty = false;
                }
            }
            Role::Meta => {
                if let Some(meta) = &mut self.meta {
                    meta.empty = false;
                }
                if key == b"tracestate" {
                    self.meta_has_state = true;
                }
            }
            Role::TraceValue | Role::Other => {}
        }
    }

    /// A string, number or literal at `range` is the value of `key` in a
    /// container of `role`.
    fn value(&mut self, role: Role, key: &[u8], range: Range<usize>) {
        match (role, key) {
            (Role::Message, b"params") => {
                self.params = None;
                self.meta = None;
                self.meta_not_object = false;
                self.traceparent = None;
                self.meta_has_state = false;
                self.params_not_object = true;
            }
            (Role::Params, b"_meta") => {
                self.meta = None;
                self.meta_not_object = true;
                self.traceparent = None;
                self.meta_has_state = false;
            }
            (Role::Meta, b"traceparent") => self.traceparent = Some(range),
            _ => {}
        }
    }
}

/// The end (one past the closing quote) of the string that opens at
/// `at`.
fn string_end(line: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        let rest = line.get(i..)?;
        let n = memchr::memchr2(b'"', b'\\', rest)?;
        i += n;
        if line.get(i) == Some(&b'\\') {
            i += 2;
        } else {
            return Some(i + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> CallTrace {
        CallTrace::root([0x11; 16], [0x22; 8])
    }

    const TP: &str = "00-11111111111111111111111111111111-2222222222222222-01";

    fn edited(line: &str, trace: &CallTrace) -> Option<String> {
        let (range, with) = trace_edit(line.as_bytes(), trace)?;
        let mut bytes = line.as_bytes().to_vec();
        bytes.splice(range, with);
        Some(String::from_utf8(bytes).expect("UTF-8 stays UTF-8"))
    }

    #[test]
    fn each_place_the_trace_can_go() {
        let cases = [
            // No params: added first.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                format!(
                    r#"{{"params":{{"_meta":{{"traceparent":"{TP}"}}}},"jsonrpc":"2.0","id":1,"method":"ping"}}"#
                ),
            ),
            // Params empty, with spaces.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{ }}"#,
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"traceparent":"{TP}"}} }}}}"#
                ),
            ),
            // _meta there, without a traceparent.
            (
                r#"{"method":"m","params":{"a":[1,{"_meta":2}],"_meta":{"progressToken":7}},"jsonrpc":"2.0","id":"x"}"#,
                format!(
                    r#"{{"method":"m","params":{{"a":[1,{{"_meta":2}}],"_meta":{{"traceparent":"{TP}","progressToken":7}}}},"jsonrpc":"2.0","id":"x"}}"#
                ),
            ),
            // _meta empty.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{}}}"#,
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"traceparent":"{TP}"}}}}}}"#
                ),
            ),
            // A traceparent: its value replaced, the tracestate kept.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate":"k=v","traceparent" : "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }}}"#,
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"tracestate":"k=v","traceparent" : "{TP}" }}}}}}"#
                ),
            ),
            // A traceparent that is not a string is replaced too.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":{"x":[1]},"b":null}}}"#,
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{{"_meta":{{"traceparent":"{TP}","b":null}}}}}}"#
                ),
            ),
        ];
        for (line, want) in cases {
            assert_eq!(
                edited(line, &trace()).as_deref(),
                Some(want.as_str()),
                "{line}"
            );
            let value: serde_json::Value = serde_json::from_str(&want).expect("still JSON");
            assert_eq!(value["params"]["_meta"]["traceparent"], TP);
        }
    }

    #[test]
    fn strings_that_look_like_members_are_not_members() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"\"_meta\":{\"traceparent\":1}","arguments":{"params":{"_meta":{"traceparent":"no"}},"x":"\\"}}}"#;
        let out = edited(line, &trace()).expect("an edit");
        let value: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(value["params"]["_meta"]["traceparent"], TP);
        assert_eq!(
            value["params"]["arguments"]["params"]["_meta"]["traceparent"],
            "no"
        );
        assert_eq!(
            value["params"]["name"], r#""_meta":{"traceparent":1}"#,
            "the string is left as it was"
        );
        assert_eq!(
            out.len(),
            line.len() + format!(r#""_meta":{{"traceparent":"{TP}"}},"#).len()
        );
    }

    #[test]
    fn a_tracestate_passed_on_is_added_once_and_escaped() {
        let mut trace = trace();
        trace.trace_state = Some("a=\"q\\".into());
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"p":1}}}"#;
        let out = edited(line, &trace).expect("an edit");
        let value: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(value["params"]["_meta"]["tracestate"], "a=\"q\\");
        assert_eq!(value["params"]["_meta"]["p"], 1);
        // _meta already has one: not a second.
        let line =
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"tracestate":"x=1"}}}"#;
        let out = edited(line, &trace).expect("an edit");
        assert_eq!(out.matches("tracestate").count(), 1);
        let line =
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"bad"}}}"#;
        let out = edited(line, &trace).expect("an edit");
        let value: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(value["params"]["_meta"]["tracestate"], "a=\"q\\");
        assert_eq!(value["params"]["_meta"]["traceparent"], TP);
    }

    #[test]
    fn what_cannot_carry_it_is_left_alone() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,2]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":[{}]}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            r#"  "#,
        ] {
            assert_eq!(trace_edit(line.as_bytes(), &trace()), None, "{line}");
        }
    }

    #[test]
    fn the_last_of_repeated_members_counts() {
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"traceparent":"a"}},"params":{"x":1}}"#;
        let out = edited(line, &trace()).expect("an edit");
        assert!(out.ends_with(&format!(
            r#""params":{{"_meta":{{"traceparent":"{TP}"}},"x":1}}}}"#
        )));
        assert!(out.contains(r#""traceparent":"a""#));
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"x":1},"params":[]}"#;
        assert_eq!(trace_edit(line.as_bytes(), &trace()), None);
    }

    #[test]
    fn any_request_the_scanner_accepts_stays_json_with_the_trace() {
        // Every prefix cut and every byte order mark: an edited message
        // parses and names the trace; nothing else moved.
        let lines = [
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}",
            "{ \"jsonrpc\" : \"2.0\" , \"id\" : -1.5e3 , \"method\" : \"m\" , \"params\" : { \"_meta\" : { } } }",
            r#"{"jsonrpc":"2.0","id":"é\u00e9","method":"tools/call","params":{"name":"日本","arguments":{"k":[true,false,null,{}]}}}"#,
        ];
        for line in lines {
            let out = edited(line, &trace()).expect("an edit");
            let body = out.trim_start_matches('\u{feff}');
            let value: serde_json::Value = serde_json::from_str(body).expect("still JSON");
            assert_eq!(value["params"]["_meta"]["traceparent"], TP, "{line}");
            let before: serde_json::Value =
                serde_json::from_str(line.trim_start_matches('\u{feff}')).expect("JSON");
            let mut after = value.clone();
            if let Some(params) = after.get_mut("params").and_then(|p| p.as_object_mut()) {
                params.remove("_meta");
                if params.is_empty() && before.get("params").is_none() {
                    after.as_object_mut().map(|o| o.remove("params"));
                }
            }
            let mut before_no_meta = before.clone();
            if let Some(params) = before_no_meta
                .get_mut("params")
                .and_then(|p| p.as_object_mut())
            {
                params.remove("_meta");
            }
            assert_eq!(after, before_no_meta, "{line}");
        }
    }
}
