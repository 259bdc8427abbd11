//! A call's place in a distributed trace, as W3C Trace Context states it.
//!
//! A request may carry a `traceparent` (and a `tracestate`): the call's
//! span is then a child of that parent, in the same trace. The helper is
//! told its own parent, the call's span, through `TRACEPARENT` and
//! `TRACESTATE` in its environment, so its spans join the same trace.
//! [`TraceParent::parse`] and [`trace_state`] are strict: a value a
//! request's author controls ends up in a helper's environment, so
//! anything outside the specification's grammar (upper-case hex, an
//! all-zero id, a control character, more than 32 members or 512 bytes)
//! is refused whole, and the call starts a trace of its own instead.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The longest `tracestate` kept, in bytes (the specification asks that
/// at least this much be passed on).
pub const TRACE_STATE_MAX_BYTES: usize = 512;

/// The most list members a `tracestate` may hold.
pub const TRACE_STATE_MAX_MEMBERS: usize = 32;

/// Why a `traceparent` or a `tracestate` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidTraceContext(&'static str);

impl fmt::Display for InvalidTraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for InvalidTraceContext {}

/// A parsed `traceparent`: the trace, the parent span, the trace flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace's id; never all zero.
    pub trace_id: [u8; 16],
    /// The parent span's id; never all zero.
    pub parent_id: [u8; 8],
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses `00-<32 hex>-<16 hex>-<2 hex>` (lower-case hex, surrounding
    /// spaces and tabs ignored). A later version is read by its first four
    /// fields, as the specification asks, if what follows them starts
    /// with `-`; version `ff` is refused.
    ///
    /// ```
    /// use spillguard_core::trace::TraceParent;
    ///
    /// let parent = TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")?;
    /// assert_eq!(parent.flags, 1);
    /// assert!(TraceParent::parse("00-00000000000000000000000000000000-00f067aa0ba902b7-01").is_err());
    /// assert!(TraceParent::parse("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01").is_err());
    /// # Ok::<(), spillguard_core::trace::InvalidTraceContext>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, InvalidTraceContext> {
        let text = text.trim_matches([' ', '\t']).as_bytes();
        if text.len() < 55 {
            return Err(InvalidTraceContext(
                "traceparent is shorter than 55 characters",
            ));
        }
        let version = hex_byte(&text[0..2]).ok_or(InvalidTraceContext(
            "traceparent version is not two lower-case hex digits",
        ))?;
        if version == 0xff {
            return Err(InvalidTraceContext("traceparent version ff is invalid"));
        }
        if version == 0 && text.len() != 55 {
            return Err(InvalidTraceContext(
                "traceparent version 00 is 55 characters long",
            ));
        }
        if text.len() > 55 && text[55] != b'-' {
            return Err(InvalidTraceContext("traceparent has more after its flags"));
        }
        if text[2] != b'-' || text[35] != b'-' || text[52] != b'-' {
            return Err(InvalidTraceContext(
                "traceparent fields are not separated by -",
            ));
        }
        let mut trace_id = [0; 16];
        fill(&mut trace_id, &text[3..35]).ok_or(InvalidTraceContext(
            "trace-id is not 32 lower-case hex digits",
        ))?;
        let mut parent_id = [0; 8];
        fill(&mut parent_id, &text[36..52]).ok_or(InvalidTraceContext(
            "parent-id is not 16 lower-case hex digits",
        ))?;
        let flags = hex_byte(&text[53..55]).ok_or(InvalidTraceContext(
            "trace-flags is not two lower-case hex digits",
        ))?;
        if trace_id == [0; 16] {
            return Err(InvalidTraceContext("trace-id is all zero"));
        }
        if parent_id == [0; 8] {
            return Err(InvalidTraceContext("parent-id is all zero"));
        }
        Ok(Self {
            trace_id,
            parent_id,
            flags,
        })
    }
}

/// A `tracestate` checked against the specification's grammar and put in
/// its plain form (members joined by `,`, no spaces, empty members
/// dropped); `Ok(None)` for one with no member.
///
/// ```
/// use spillguard_core::trace::trace_state;
///
/// assert_eq!(trace_state(" congo=t61rcWkgMzE , rojo=00f067aa0ba902b7")?.as_deref(),
///            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"));
/// assert!(trace_state("a=1\nInjected: yes").is_err());
/// assert!(trace_state("a=1,a=2").is_err());
/// # Ok::<(), spillguard_core::trace::InvalidTraceContext>(())
/// ```
pub fn trace_state(text: &str) -> Result<Option<String>, InvalidTraceContext> {
    let mut out = String::new();
    let mut keys: Vec<&str> = Vec::new();
    for member in text.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let (key, value) = member
            .split_once('=')
            .ok_or(InvalidTraceContext("a tracestate member has no ="))?;
        if !valid_key(key) {
            return Err(InvalidTraceContext(
                "a tracestate key is outside the grammar",
            ));
        }
        if !valid_value(value) {
            return Err(InvalidTraceContext(
                "a tracestate value is outside the grammar",
            ));
        }
        if keys.contains(&key) {
            return Err(InvalidTraceContext("a tracestate key appears twice"));
        }
        keys.push(key);
        if keys.len() > TRACE_STATE_MAX_MEMBERS {
            return Err(InvalidTraceContext("tracestate has more than 32 members"));
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(member);
    }
    if out.len() > TRACE_STATE_MAX_BYTES {
        return Err(InvalidTraceContext("tracestate is longer than 512 bytes"));
    }
    Ok((!out.is_empty()).then_some(out))
}

/// `simple-key` or `tenant-id@system-id`.
fn valid_key(key: &str) -> bool {
    let tail_ok = |c: u8| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/');
    match key.split_once('@') {
        None => {
            let bytes = key.as_bytes();
            matches!(bytes.first(), Some(b'a'..=b'z'))
                && bytes.len() <= 256
                && bytes[1..].iter().all(|&c| tail_ok(c))
        }
        Some((tenant, system)) => {
            let (t, s) = (tenant.as_bytes(), system.as_bytes());
            matches!(t.first(), Some(b'a'..=b'z' | b'0'..=b'9'))
                && t.len() <= 241
                && t[1..].iter().all(|&c| tail_ok(c))
                && matches!(s.first(), Some(b'a'..=b'z'))
                && s.len() <= 14
                && s[1..].iter().all(|&c| tail_ok(c))
        }
    }
}

/// 1 to 256 printable ASCII characters but `,` and `=`, not ending in a
/// space.
fn valid_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    let chr = |c: u8| c == b' ' || (0x21..=0x7e).contains(&c) && c != b',' && c != b'=';
    !bytes.is_empty()
        && bytes.len() <= 256
        && bytes.iter().all(|&c| chr(c))
        && bytes.last() != Some(&b' ')
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

fn hex_byte(pair: &[u8]) -> Option<u8> {
    Some(hex_digit(pair[0])? << 4 | hex_digit(pair[1])?)
}

fn fill(out: &mut [u8], text: &[u8]) -> Option<()> {
    for (byte, pair) in out.iter_mut().zip(text.chunks_exact(2)) {
        *byte = hex_byte(pair)?;
    }
    Some(())
}

/// `bytes` as lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// A call's span: its trace, its own id, its parent (none for a trace the
/// call started), the trace flags and the `tracestate` passed on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallTrace {
    /// The trace's id.
    pub trace_id: [u8; 16],
    /// The call's span id.
    pub span_id: [u8; 8],
    /// The span the call's is a child of, if a request named one.
    pub parent_span_id: Option<[u8; 8]>,
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
    /// The `tracestate` passed on to the helper, in plain form.
    pub trace_state: Option<String>,
}

impl CallTrace {
    /// The span `span_id` as a child of `parent`, passing `trace_state` on
    /// (dropped unless it is well formed, see [`trace_state`]). Of the
    /// parent's flags only `sampled` is kept: the others are not known
    /// here, and version 00 asks that unknown flags be passed as zero.
    pub fn child_of(parent: TraceParent, span_id: [u8; 8], trace_state: Option<String>) -> Self {
        Self {
            trace_id: parent.trace_id,
            span_id,
            parent_span_id: Some(parent.parent_id),
            flags: parent.flags & 0x01,
            trace_state: trace_state.and_then(|state| self::trace_state(&state).ok().flatten()),
        }
    }

    /// The first span of a new trace, sampled.
    pub fn root(trace_id: [u8; 16], span_id: [u8; 8]) -> Self {
        Self {
            trace_id,
            span_id,
            parent_span_id: None,
            flags: 1,
            trace_state: None,
        }
    }

    /// The `traceparent` a helper is given: its parent is the call's span.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.span_id),
            self.flags
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_good_traceparent_gives_its_three_fields() {
        let parent = TraceParent::parse(GOOD).unwrap();
        assert_eq!(hex(&parent.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&parent.parent_id), "00f067aa0ba902b7");
        assert_eq!(parent.flags, 0x01);
        assert_eq!(TraceParent::parse(&format!(" \t{GOOD} ")), Ok(parent));
    }

    #[test]
    fn every_malformed_traceparent_is_refused() {
        let mut cases = vec![
            String::new(),
            GOOD[..54].to_owned(),
            format!("{GOOD}-"),
            format!("{GOOD}0"),
            GOOD.to_uppercase(),
            GOOD.replacen("00-", "ff-", 1),
            GOOD.replacen("00-", "0g-", 1),
            GOOD.replace("4bf92f3577b34da6a3ce929d0e0e4736", &"0".repeat(32)),
            GOOD.replace("00f067aa0ba902b7", &"0".repeat(16)),
            GOOD.replacen('-', "_", 1),
            GOOD.replace("-01", "-1 "),
            GOOD.replace("4bf9", "4bf\n"),
            GOOD.replace("4bf9", "4bf\u{e9}"),
        ];
        // Every single-character change to a hex digit outside the alphabet.
        for at in [3, 20, 34, 36, 51, 53, 54] {
            let mut bytes = GOOD.as_bytes().to_vec();
            bytes[at] = b'x';
            cases.push(String::from_utf8(bytes).unwrap());
        }
        for case in &cases {
            assert!(TraceParent::parse(case).is_err(), "accepted {case:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        let later = GOOD.replacen("00-", "01-", 1);
        assert!(TraceParent::parse(&later).is_ok());
        assert!(TraceParent::parse(&format!("{later}-what-comes-next")).is_ok());
        assert!(TraceParent::parse(&format!("{later}x")).is_err());
    }

    #[test]
    fn trace_state_keeps_the_grammar_and_refuses_the_rest() {
        assert_eq!(trace_state(""), Ok(None));
        assert_eq!(trace_state(" , ,"), Ok(None));
        assert_eq!(
            trace_state("vendor@tenant-1=v,a*b/c_d-e=x y")
                .unwrap()
                .as_deref(),
            Some("vendor@tenant-1=v,a*b/c_d-e=x y")
        );
        assert_eq!(
            trace_state("1tenant@vendor=v,a*b/c_d-e=x y")
                .unwrap()
                .as_deref(),
            Some("1tenant@vendor=v,a*b/c_d-e=x y")
        );
        for bad in [
            "a",
            "A=1",
            "a=",
            "a=1=2",
            "a=\u{e9}",
            "a=1\r\nb=2",
            "a=1\u{0}",
            "a=x ,b",
            "a=1,a=1",
            "@v=1",
            "t@=1",
            "t@verylongsystemid=1",
        ] {
            assert!(trace_state(bad).is_err(), "accepted {bad:?}");
        }
        let members: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
        assert!(trace_state(&members.join(",")).is_err());
        assert_eq!(
            trace_state(&members[..32].join(","))
                .unwrap()
                .map(|s| s.len()),
            Some(members[..32].join(",").len())
        );
        let long = format!("a={},b={}", "x".repeat(256), "y".repeat(256));
        assert_eq!(
            trace_state(&long).unwrap_err(),
            InvalidTraceContext("tracestate is longer than 512 bytes")
        );
    }

    #[test]
    fn the_helper_s_traceparent_names_the_call_s_span() {
        let parent = TraceParent::parse(GOOD).unwrap();
        let call = CallTrace::child_of(parent, [0xab; 8], Some("a=1".into()));
        assert_eq!(
            call.traceparent(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-abababababababab-01"
        );
        assert_eq!(call.parent_span_id, Some(parent.parent_id));
        assert_eq!(
            TraceParent::parse(&call.traceparent()).unwrap().parent_id,
            [0xab; 8]
        );
        let flagged = TraceParent {
            flags: 0xff,
            ..parent
        };
        let call = CallTrace::child_of(flagged, [0xab; 8], Some("a=1\r\nX: y".into()));
        assert_eq!(call.flags, 0x01, "only the sampled flag is passed on");
        assert_eq!(call.trace_state, None, "a malformed tracestate is dropped");
        let root = CallTrace::root([7; 16], [9; 8]);
        assert_eq!(root.parent_span_id, None);
        assert!(root.traceparent().ends_with("-0909090909090909-01"));
    }
}
