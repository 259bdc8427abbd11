//! [`MessageScanner`]: an incremental JSON validator for one line, which
//! also reads the few members of a JSON-RPC message that the guard needs.
//!
//! The scanner is fed the bytes of one line in any number of pieces (never
//! the `\n` that ends it) and asked at the end whether they were exactly
//! one JSON object with `"jsonrpc": "2.0"`, or a batch: an array of one to
//! [`MAX_BATCH`] such objects. It keeps no copy of the line: its state is
//! the grammar's position, one bit per open container, and the raw text
//! of a few members (`id`, `method`, and in `params` a cancellation's
//! `requestId`, a call's `name` and the trace context's
//! `_meta.traceparent`; in a response, `result.isError` and
//! `error.code`), an `id` of at most [`RawValue::MAX_ID`] bytes (the
//! message limit), the others of at most [`RawValue::CAPACITY`]. Feeding
//! allocates nothing once the container stack and the capture buffer have
//! grown to the line's; a member kept is copied inline when a message
//! ends, so only an `id` longer than [`RawValue::INLINE`] bytes allocates.
//!
//! What it checks is RFC 8259's grammar, byte for byte: strings (escapes,
//! no raw control characters), numbers, `true`/`false`/`null`, nesting up
//! to [`MAX_DEPTH`] containers, nothing but whitespace after the object.
//! Where parsers differ it takes the grammar's side: a `\uD800` escape
//! alone (which JavaScript's `JSON.parse` accepts and serde_json refuses)
//! passes, and so does nesting deeper than serde_json's default limit of
//! 128 (up to 1024). A UTF-8 byte order mark as the line's first three
//! bytes is skipped, as RFC 8259 lets a parser do (a writer that puts one
//! before each line, as some Windows tools do, still sends messages); one
//! anywhere else, even after leading whitespace, fails the line.
//! UTF-8 is left to the caller, which holds the line (see
//! [`MessageScanner::saw_non_ascii`]); member names are compared as
//! written, so a name spelt with escapes (`"json\u0072pc"`) is not the
//! member.

/// The UTF-8 byte order mark. RFC 8259 lets a parser ignore one at the
/// start of a text: a line that begins with it is read as the rest.
pub(crate) const UTF8_BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Containers deeper than this make a line not a message (a client's
/// parser may refuse it, and the guard's stack stays small).
pub const MAX_DEPTH: usize = 1024;

/// The raw JSON text of a scalar member (`"abc"` with its quotes, `42`),
/// as the message spelt it. A value of up to [`RawValue::INLINE`] bytes
/// is held inline (cloning it allocates nothing, so the guards read
/// messages without allocating); a longer `id` on the heap.
pub struct RawValue {
    inline: [u8; RawValue::INLINE],
    len: usize,
    /// The bytes of a value longer than `INLINE` (its memory kept when
    /// cleared, for the next long value).
    heap: Vec<u8>,
}

impl RawValue {
    /// The longest value kept of a member other than `id` (`method`,
    /// `params.name`, …): a longer one is not read (the message is still
    /// forwarded).
    pub const CAPACITY: usize = 128;

    /// The longest value held inline.
    pub const INLINE: usize = 128;

    /// The longest `id` kept: the default message limit
    /// ([`DEFAULT_MAX_MESSAGE_BYTES`](crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES)),
    /// so that every request a peer can send is tracked.
    pub const MAX_ID: usize = super::line_guard::DEFAULT_MAX_MESSAGE_BYTES;

    const EMPTY: Self = Self {
        inline: [0; Self::INLINE],
        len: 0,
        heap: Vec::new(),
    };

    /// The value's bytes, as written in the message.
    pub fn as_bytes(&self) -> &[u8] {
        match self.len <= Self::INLINE {
            true => self.inline.get(..self.len).unwrap_or_default(),
            false => self.heap.get(..self.len).unwrap_or_default(),
        }
    }

    /// `bytes` as a raw value, if it is at most [`MAX_ID`](Self::MAX_ID)
    /// bytes.
    pub fn new(bytes: &[u8]) -> Option<Self> {
        let mut value = Self::EMPTY;
        value.push(bytes, Self::MAX_ID).then_some(value)
    }

    /// Appends `more`; `false` (and nothing appended) if the value would
    /// be longer than `limit`.
    fn push(&mut self, more: &[u8], limit: usize) -> bool {
        let Some(end) = self.len.checked_add(more.len()).filter(|&e| e <= limit) else {
            return false;
        };
        if end <= Self::INLINE {
            if let Some(slot) = self.inline.get_mut(self.len..end) {
                slot.copy_from_slice(more);
            }
        } else {
            if self.len <= Self::INLINE {
                // Moving to the heap: what was inline first.
                self.heap.clear();
                self.heap
                    .extend_from_slice(self.inline.get(..self.len).unwrap_or_default());
            }
            self.heap.extend_from_slice(more);
        }
        self.len = end;
        true
    }

    /// Empty again, its memory kept.
    fn clear(&mut self) {
        self.len = 0;
        self.heap.clear();
    }
}

impl Default for RawValue {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Clone for RawValue {
    /// A short value is copied inline (no allocation), whatever memory the
    /// original keeps.
    fn clone(&self) -> Self {
        match self.len <= Self::INLINE {
            true => Self {
                inline: self.inline,
                len: self.len,
                heap: Vec::new(),
            },
            false => Self {
                inline: [0; Self::INLINE],
                len: self.len,
                heap: self.as_bytes().to_vec(),
            },
        }
    }
}

impl PartialEq for RawValue {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for RawValue {}

impl std::hash::Hash for RawValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl std::fmt::Debug for RawValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// What a line that is one JSON-RPC message is, by its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MessageKind {
    /// It has a `method` and an `id` (of any value, `null` included): the
    /// peer waits for an answer.
    Request,
    /// It has a `method` and no `id`.
    Notification,
    /// It has no `method`, and a `result` or an `error`.
    Response,
    /// A JSON-RPC batch: an array of one or more `"jsonrpc": "2.0"`
    /// objects, each in [`MessageInfo::batch`].
    Batch,
    /// A `"jsonrpc": "2.0"` object that is none of these (forwarded as it
    /// is: the protocol's peers judge it).
    Other,
}

/// The members of one JSON-RPC message that the guard reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    /// What the message is.
    pub kind: MessageKind,
    /// Its `id`, when it is a string or a number of at most
    /// [`RawValue::MAX_ID`] bytes (`null`, an object, an array or a longer
    /// one: `None`, the request is not tracked). Compared as the message
    /// spells it: a peer that writes `1.0` back for `1` answers another id.
    pub id: Option<RawValue>,
    /// Its `method`, with the quotes, when short enough.
    pub method: Option<RawValue>,
    /// `params.requestId`, when `params` is an object holding a short one
    /// (what `notifications/cancelled` names).
    pub request_id: Option<RawValue>,
    /// `params.name`, when short enough (the tool of a `tools/call`, the
    /// prompt of a `prompts/get`).
    pub name: Option<RawValue>,
    /// `params._meta.traceparent`, when short enough: the W3C trace
    /// context a client passes with a request.
    pub trace_parent: Option<RawValue>,
    /// Whether `result.isError` is `true` (a tool's call that failed).
    pub is_error: bool,
    /// `error.code`, when the message is an error answer.
    pub error_code: Option<RawValue>,
    /// A [`MessageKind::Batch`]'s messages, in order (none of them a
    /// batch); empty for any other kind.
    pub batch: Vec<MessageInfo>,
}

impl MessageInfo {
    /// Nothing known yet (the value a guard starts with).
    pub(crate) const NONE: Self = Self {
        kind: MessageKind::Other,
        id: None,
        method: None,
        request_id: None,
        name: None,
        trace_parent: None,
        is_error: false,
        error_code: None,
        batch: Vec::new(),
    };

    /// The messages it carries: a batch's, in order, or itself.
    pub fn messages(&self) -> impl Iterator<Item = &MessageInfo> {
        let single = (self.kind != MessageKind::Batch).then_some(self);
        single.into_iter().chain(self.batch.iter())
    }

    /// Whether its method is `name` (compared with the quotes stripped).
    pub fn is_method(&self, name: &str) -> bool {
        self.method.as_ref().is_some_and(|m| {
            m.as_bytes()
                .strip_prefix(b"\"")
                .and_then(|m| m.strip_suffix(b"\""))
                == Some(name.as_bytes())
        })
    }
}

/// Where the grammar stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The line's first byte: a UTF-8 byte order mark may come first.
    Start,
    /// In a leading byte order mark (`EF BB BF`), `at` bytes matched.
    Bom { at: u8 },
    /// Leading whitespace, then the `{` of the message.
    Top,
    /// After `{`: a key or `}`.
    FirstKey,
    /// After a `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:` or a `,` in an array: a value.
    Value,
    /// After `[`: a value or `]`.
    FirstValue,
    /// After a value: `,` or the container's closing bracket.
    AfterValue,
    /// Inside a string (a key if `key`).
    Str { key: bool },
    /// After a backslash in a string.
    Escape { key: bool },
    /// In the hex digits of a `\u` escape, `left` to go.
    Unicode { key: bool, left: u8 },
    /// Inside a number.
    Number(Num),
    /// Inside `true`, `false` or `null`: `at` bytes of `word` matched.
    Literal { word: &'static [u8], at: u8 },
    /// The message's object is closed: only whitespace may follow.
    Done,
    /// Not one JSON object.
    Failed,
}

/// Where a number stands (RFC 8259's `number`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    /// After `-`.
    Minus,
    /// After a leading `0`.
    Zero,
    /// In the integer digits.
    Int,
    /// After `.`.
    Dot,
    /// In the fraction's digits.
    Frac,
    /// After `e` or `E`.
    Exp,
    /// After the exponent's sign.
    ExpSign,
    /// In the exponent's digits.
    ExpDigits,
}

impl Num {
    /// Whether a number may end here.
    fn complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }

    /// The state after `byte`, or `None` if `byte` is not part of the
    /// number (it ends it, or breaks it).
    fn next(self, byte: u8) -> Option<Num> {
        use Num::*;
        Some(match (self, byte) {
            (Minus, b'0') => Zero,
            (Minus, b'1'..=b'9') => Int,
            (Int, b'0'..=b'9') => Int,
            (Zero | Int, b'.') => Dot,
            (Dot | Frac, b'0'..=b'9') => Frac,
            (Zero | Int | Frac, b'e' | b'E') => Exp,
            (Exp, b'+' | b'-') => ExpSign,
            (Exp | ExpSign | ExpDigits, b'0'..=b'9') => ExpDigits,
            _ => return None,
        })
    }
}

/// Which member the value being read belongs to, if one the scanner keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// None of them.
    None,
    /// The top-level `jsonrpc`.
    Jsonrpc,
    /// The top-level `id`.
    Id,
    /// The top-level `method`.
    Method,
    /// The top-level `result`.
    Result,
    /// The top-level `error`.
    Error,
    /// The top-level `params`.
    Params,
    /// `params.requestId`.
    RequestId,
    /// `params.name`.
    Name,
    /// `params._meta`.
    Meta,
    /// `params._meta.traceparent`.
    TraceParent,
    /// `result.isError`.
    IsError,
    /// `error.code`.
    ErrorCode,
}

/// The top-level object member whose own members are being read (at
/// depth 2), if one whose members the scanner looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inner {
    /// None of them.
    None,
    /// `params`.
    Params,
    /// `result`.
    Result,
    /// `error`.
    Error,
}

/// The members found so far.
#[derive(Debug, Clone)]
struct Members {
    jsonrpc: Option<RawValue>,
    id: Option<RawValue>,
    method: Option<RawValue>,
    request_id: Option<RawValue>,
    name: Option<RawValue>,
    trace_parent: Option<RawValue>,
    is_error: bool,
    error_code: Option<RawValue>,
    /// An `id` member was there, whatever its value (kept or not).
    has_id: bool,
    has_result: bool,
    has_error: bool,
}

impl Members {
    const NONE: Self = Self {
        jsonrpc: None,
        id: None,
        method: None,
        request_id: None,
        name: None,
        trace_parent: None,
        is_error: false,
        error_code: None,
        has_id: false,
        has_result: false,
        has_error: false,
    };
}

/// An incremental validator of one line as one JSON-RPC message.
///
/// Fed the bytes of one line in any number of pieces (never the `\n` that
/// ends it), it says at the end whether they were exactly one JSON object
/// with `"jsonrpc": "2.0"` (RFC 8259's grammar byte by byte: strings with
/// their escapes and no raw control characters, numbers, literals, at most
/// [`MAX_DEPTH`] nested containers, only whitespace after the object), and
/// what the message is ([`MessageInfo`]). It keeps no copy of the line:
/// its state is the grammar's position, one bit per open container and a
/// few short [`RawValue`]s; feeding allocates nothing once the container
/// stack has grown to the line's depth. UTF-8 is left to the caller, which
/// holds the line ([`saw_non_ascii`](Self::saw_non_ascii)); member names
/// are compared as written, so a name spelt with escapes is not the member.
///
/// ```
/// use spillguard_core::{MessageKind, MessageScanner};
///
/// let mut scanner = MessageScanner::new();
/// scanner.feed(br#"{"jsonrpc":"2.0","id":7,"met"#);
/// scanner.feed(br#"hod":"tools/call","params":{"name":"x"}}"#);
/// let info = scanner.finish().expect("one JSON-RPC message");
/// assert_eq!(info.kind, MessageKind::Request);
/// assert_eq!(info.id.as_ref().unwrap().as_bytes(), b"7");
/// assert!(info.is_method("tools/call"));
///
/// // A JSON object without `"jsonrpc": "2.0"` is not a message; nor are
/// // two objects on one line.
/// scanner.reset();
/// scanner.feed(br#"{"level":30,"msg":"listening"}"#);
/// assert_eq!(scanner.finish(), None);
/// scanner.reset();
/// scanner.feed(br#"{"jsonrpc":"2.0","id":1,"result":{}}{"jsonrpc":"2.0"}"#);
/// assert_eq!(scanner.finish(), None);
/// ```
#[derive(Debug, Clone)]
pub struct MessageScanner {
    expect: Expect,
    /// Open containers, one bit each (set: an object), `depth` of them.
    containers: Vec<u64>,
    depth: usize,
    /// The key being read, if it is one the scanner may keep (at depth 1,
    /// at depth 2 inside `params`, `result` or `error`, at depth 3 inside
    /// `params._meta`), and whether it still fits.
    key: RawValue,
    key_fits: bool,
    /// The member whose value comes next (set by a key at a kept depth).
    slot: Slot,
    /// The raw text of the value being captured for `slot`.
    value: RawValue,
    value_fits: bool,
    /// The top-level object whose keys (at depth 2) are looked at.
    inner: Inner,
    /// Whether `params._meta` is being read (its keys at depth 3 are
    /// looked at).
    in_meta: bool,
    members: Members,
    non_ascii: bool,
    /// The longest the value being captured may grow.
    value_limit: usize,
    /// 1 when the line is a batch (an array of messages): every depth
    /// above is one deeper.
    base: usize,
    /// The batch's messages so far.
    batch: Vec<MessageInfo>,
    /// Every element of the batch so far is a JSON-RPC message, and there
    /// are at most [`MAX_BATCH`] of them.
    batch_ok: bool,
}

/// The most messages a batch is read for: a longer batch is not a
/// message (the client's is still forwarded, untracked; the server's is
/// diverted). As many as the requests a guard tracks.
pub const MAX_BATCH: usize = super::pending::MAX_PENDING;

impl Default for MessageScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageScanner {
    /// A scanner at the start of a line.
    pub fn new() -> Self {
        Self {
            expect: Expect::Start,
            // 64 levels before the stack grows.
            containers: vec![0],
            depth: 0,
            key: RawValue::EMPTY,
            key_fits: false,
            slot: Slot::None,
            value: RawValue::EMPTY,
            value_fits: false,
            inner: Inner::None,
            in_meta: false,
            members: Members::NONE,
            non_ascii: false,
            value_limit: 0,
            base: 0,
            batch: Vec::new(),
            batch_ok: false,
        }
    }

    /// Back to the start of a line (keeping the container stack's memory).
    pub fn reset(&mut self) {
        self.expect = Expect::Start;
        self.depth = 0;
        self.slot = Slot::None;
        self.inner = Inner::None;
        self.in_meta = false;
        self.members = Members::NONE;
        self.non_ascii = false;
        self.base = 0;
        self.batch.clear();
        self.batch_ok = false;
    }

    /// Whether the line so far is still possibly one JSON object.
    pub fn is_failed(&self) -> bool {
        self.expect == Expect::Failed
    }

    /// Whether a byte of 0x80 or more was fed since the start of the line
    /// (inside a string; anywhere else it fails the line): the caller
    /// checks such a line's UTF-8.
    pub fn saw_non_ascii(&self) -> bool {
        self.non_ascii
    }

    /// The end of the line: what it was, if it was exactly one JSON object
    /// with `"jsonrpc": "2.0"`. The scanner is left as it is; call
    /// [`reset`](Self::reset) before the next line.
    pub fn finish(&mut self) -> Option<MessageInfo> {
        if self.expect != Expect::Done {
            return None;
        }
        if self.base == 1 {
            if !self.batch_ok || self.batch.is_empty() {
                return None;
            }
            return Some(MessageInfo {
                kind: MessageKind::Batch,
                batch: std::mem::take(&mut self.batch),
                ..MessageInfo::NONE
            });
        }
        self.message()
    }

    /// The object just read, if it is a JSON-RPC message.
    fn message(&self) -> Option<MessageInfo> {
        let members = self.members.clone();
        if members.jsonrpc.as_ref().map(RawValue::as_bytes) != Some(b"\"2.0\"") {
            return None;
        }
        let id = members.id.filter(|id| id.as_bytes() != b"null");
        // A request has an `id`; one too long to keep (or `null`, or not a
        // scalar) is still a request, only not tracked.
        let kind = match (members.method.is_some(), members.has_id) {
            (true, true) => MessageKind::Request,
            (true, false) => MessageKind::Notification,
            (false, _) if members.has_result || members.has_error => MessageKind::Response,
            (false, _) => MessageKind::Other,
        };
        Some(MessageInfo {
            kind,
            id,
            method: members.method,
            request_id: members.request_id,
            name: members.name,
            trace_parent: members.trace_parent,
            is_error: members.is_error,
            error_code: members.error_code,
            batch: Vec::new(),
        })
    }

    /// Scans `bytes`, the next piece of the line (no `\n`).
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            at = match self.expect {
                Expect::Failed => return,
                Expect::Str { key } => self.string(bytes, at, key),
                _ => self.step(bytes, at),
            };
        }
    }

    /// A run of string content from `at`, up to and including the byte
    /// that ends the run (a quote, a backslash, or a control byte that
    /// fails the line). Returns where to go on.
    fn string(&mut self, bytes: &[u8], at: usize, key: bool) -> usize {
        let rest = bytes.get(at..).unwrap_or_default();
        let (plain, high) = plain_run(rest);
        self.non_ascii |= high;
        let run = rest.get(..plain).unwrap_or_default();
        self.capture(run, key);
        let end = at + plain;
        let Some(&byte) = bytes.get(end) else {
            return end;
        };
        match byte {
            b'"' => {
                self.capture(b"\"", key);
                if key {
                    self.key_done();
                } else {
                    self.value_done();
                }
            }
            b'\\' => {
                self.capture(b"\\", key);
                self.expect = Expect::Escape { key };
            }
            // A raw control byte inside a string.
            _ => self.expect = Expect::Failed,
        }
        end + 1
    }

    /// One byte of anything but string content.
    fn step(&mut self, bytes: &[u8], at: usize) -> usize {
        let Some(&byte) = bytes.get(at) else {
            return at + 1;
        };
        match self.expect {
            Expect::Start if byte == UTF8_BOM[0] => {
                self.expect = Expect::Bom { at: 1 };
                return at + 1;
            }
            // Anything else is read as the line's first byte.
            Expect::Start => {
                self.expect = Expect::Top;
                return at;
            }
            Expect::Bom { at: matched } => {
                let matched = usize::from(matched);
                self.expect = match UTF8_BOM.get(matched) {
                    Some(&want) if want == byte && matched + 1 == UTF8_BOM.len() => Expect::Top,
                    Some(&want) if want == byte => Expect::Bom {
                        at: u8::try_from(matched + 1).unwrap_or(u8::MAX),
                    },
                    _ => Expect::Failed,
                };
                return at + 1;
            }
            _ => {}
        }
        let ws = matches!(byte, b' ' | b'\t' | b'\r' | b'\n');
        match self.expect {
            Expect::Top | Expect::Done if ws => {}
            Expect::Top if byte == b'{' => self.open(true),
            Expect::Top if byte == b'[' => {
                self.base = 1;
                self.batch_ok = true;
                self.open(false);
            }
            Expect::FirstKey
            | Expect::Key
            | Expect::Colon
            | Expect::Value
            | Expect::FirstValue
            | Expect::AfterValue
                if ws => {}
            Expect::FirstKey if byte == b'}' => self.close(),
            Expect::FirstKey | Expect::Key if byte == b'"' => {
                self.key_fits = self.keeps_keys();
                self.key.clear();
                self.capture(b"\"", true);
                self.expect = Expect::Str { key: true };
            }
            Expect::Colon if byte == b':' => self.expect = Expect::Value,
            Expect::FirstValue if byte == b']' => self.close(),
            Expect::Value | Expect::FirstValue => self.value_start(byte),
            Expect::AfterValue => match byte {
                b',' if self.in_object() => self.expect = Expect::Key,
                b',' => self.expect = Expect::Value,
                b'}' if self.in_object() => self.close(),
                b']' if self.depth > 0 && !self.in_object() => self.close(),
                _ => self.expect = Expect::Failed,
            },
            Expect::Escape { key } => {
                self.capture(&[byte], key);
                self.expect = match byte {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Expect::Str { key },
                    b'u' => Expect::Unicode { key, left: 4 },
                    _ => Expect::Failed,
                };
            }
            Expect::Unicode { key, left } => {
                self.capture(&[byte], key);
                self.expect = if !byte.is_ascii_hexdigit() {
                    Expect::Failed
                } else if left > 1 {
                    Expect::Unicode {
                        key,
                        left: left - 1,
                    }
                } else {
                    Expect::Str { key }
                };
            }
            Expect::Number(num) => match num.next(byte) {
                Some(next) => {
                    self.capture(&[byte], false);
                    self.expect = Expect::Number(next);
                }
                None if num.complete() => {
                    // The byte ends the number: look at it again after it.
                    self.value_done();
                    return at;
                }
                None => self.expect = Expect::Failed,
            },
            Expect::Literal { word, at: matched } => {
                let matched = usize::from(matched);
                if word.get(matched) == Some(&byte) {
                    self.capture(&[byte], false);
                    if matched + 1 == word.len() {
                        self.value_done();
                    } else {
                        self.expect = Expect::Literal {
                            word,
                            at: u8::try_from(matched + 1).unwrap_or(u8::MAX),
                        };
                    }
                } else {
                    self.expect = Expect::Failed;
                }
            }
            Expect::Start
            | Expect::Bom { .. }
            | Expect::Top
            | Expect::Done
            | Expect::FirstKey
            | Expect::Key
            | Expect::Colon
            | Expect::Str { .. }
            | Expect::Failed => self.expect = Expect::Failed,
        }
        if byte >= 0x80 {
            self.expect = Expect::Failed;
        }
        at + 1
    }

    /// The first byte of a value.
    fn value_start(&mut self, byte: u8) {
        if self.base == 1 && self.depth == 1 && byte != b'{' {
            // A batch's element that is not an object.
            self.batch_ok = false;
        }
        self.value.clear();
        self.value_limit = match self.slot {
            Slot::Id => RawValue::MAX_ID,
            _ => RawValue::CAPACITY,
        };
        self.value_fits = matches!(
            self.slot,
            Slot::Jsonrpc
                | Slot::Id
                | Slot::Method
                | Slot::RequestId
                | Slot::Name
                | Slot::TraceParent
                | Slot::IsError
                | Slot::ErrorCode
        );
        match byte {
            b'"' => {
                self.capture(b"\"", false);
                self.expect = Expect::Str { key: false };
            }
            b'{' | b'[' => {
                // Not a scalar: kept members are strings and numbers only.
                self.value_fits = false;
                if self.depth == self.base + 1 {
                    match self.slot {
                        Slot::Id => {
                            self.members.id = None;
                            self.members.has_id = true;
                        }
                        Slot::Result => {
                            self.members.has_result = true;
                            self.inner = inner_if(byte, Inner::Result);
                        }
                        Slot::Error => {
                            self.members.has_error = true;
                            self.inner = inner_if(byte, Inner::Error);
                        }
                        Slot::Params => self.inner = inner_if(byte, Inner::Params),
                        _ => {}
                    }
                } else if self.slot == Slot::Meta {
                    self.in_meta = byte == b'{';
                }
                self.slot = Slot::None;
                self.open(byte == b'{');
            }
            b'-' | b'0'..=b'9' => {
                self.capture(&[byte], false);
                self.expect = Expect::Number(if byte == b'-' {
                    Num::Minus
                } else if byte == b'0' {
                    Num::Zero
                } else {
                    Num::Int
                });
            }
            b't' | b'f' | b'n' => {
                self.capture(&[byte], false);
                let word: &'static [u8] = match byte {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.expect = Expect::Literal { word, at: 1 };
            }
            _ => self.expect = Expect::Failed,
        }
    }

    /// A scalar value ended: keep it if its member is kept.
    fn value_done(&mut self) {
        let value = self.value_fits.then(|| self.value.clone());
        let members = &mut self.members;
        match self.slot {
            Slot::Jsonrpc => members.jsonrpc = value,
            Slot::Id => {
                members.id = value;
                members.has_id = true;
            }
            Slot::Method => members.method = value,
            Slot::RequestId => members.request_id = value,
            Slot::Name => members.name = value,
            Slot::TraceParent => members.trace_parent = value,
            Slot::IsError => {
                members.is_error = value.is_some_and(|v| v.as_bytes() == b"true");
            }
            Slot::ErrorCode => members.error_code = value,
            Slot::Result => members.has_result = true,
            Slot::Error => members.has_error = true,
            Slot::Params | Slot::Meta | Slot::None => {}
        }
        self.slot = Slot::None;
        self.value_fits = false;
        self.expect = Expect::AfterValue;
    }

    /// A key ended: which member its value is.
    fn key_done(&mut self) {
        self.slot = if !self.key_fits {
            Slot::None
        } else if self.depth == self.base + 1 {
            match self.key.as_bytes() {
                b"\"jsonrpc\"" => Slot::Jsonrpc,
                b"\"id\"" => Slot::Id,
                b"\"method\"" => Slot::Method,
                b"\"result\"" => Slot::Result,
                b"\"error\"" => Slot::Error,
                b"\"params\"" => Slot::Params,
                _ => Slot::None,
            }
        } else if self.depth == self.base + 2 {
            match (self.inner, self.key.as_bytes()) {
                (Inner::Params, b"\"requestId\"") => Slot::RequestId,
                (Inner::Params, b"\"name\"") => Slot::Name,
                (Inner::Params, b"\"_meta\"") => Slot::Meta,
                (Inner::Result, b"\"isError\"") => Slot::IsError,
                (Inner::Error, b"\"code\"") => Slot::ErrorCode,
                _ => Slot::None,
            }
        } else if self.in_meta && self.key.as_bytes() == b"\"traceparent\"" {
            Slot::TraceParent
        } else {
            Slot::None
        };
        self.key_fits = false;
        self.expect = Expect::Colon;
    }

    /// Whether keys at the current depth are looked at.
    fn keeps_keys(&self) -> bool {
        let depth = self.depth.saturating_sub(self.base);
        depth == 1 || (depth == 2 && self.inner != Inner::None) || (depth == 3 && self.in_meta)
    }

    /// Appends `bytes` to the key or value being kept, if any.
    fn capture(&mut self, bytes: &[u8], key: bool) {
        if key {
            if self.key_fits {
                self.key_fits = self.key.push(bytes, RawValue::CAPACITY);
            }
        } else if self.value_fits {
            self.value_fits = self.value.push(bytes, self.value_limit);
        }
    }

    fn in_object(&self) -> bool {
        self.depth > 0 && self.bit(self.depth - 1)
    }

    fn bit(&self, index: usize) -> bool {
        self.containers
            .get(index / 64)
            .is_some_and(|word| word & (1 << (index % 64)) != 0)
    }

    /// A container opens (an object if `object`).
    fn open(&mut self, object: bool) {
        if self.depth >= MAX_DEPTH {
            self.expect = Expect::Failed;
            return;
        }
        let (word, bit) = (self.depth / 64, 1_u64 << (self.depth % 64));
        if self.containers.len() <= word {
            self.containers.resize(word + 1, 0);
        }
        if let Some(slot) = self.containers.get_mut(word) {
            if object {
                *slot |= bit;
            } else {
                *slot &= !bit;
            }
        }
        self.depth += 1;
        self.expect = if object {
            Expect::FirstKey
        } else {
            Expect::FirstValue
        };
    }

    /// The innermost container closes.
    fn close(&mut self) {
        let object = self.in_object();
        self.depth -= 1;
        if self.depth == self.base + 1 {
            // A container that was the value of a message's member ended.
            self.inner = Inner::None;
        }
        if self.depth <= self.base + 2 {
            // `params._meta` (or a sibling container) ended.
            self.in_meta = false;
        }
        if self.base == 1 && self.depth == 1 && object {
            // A batch's element ended: the next one starts afresh.
            match self.message() {
                Some(message) if self.batch.len() < MAX_BATCH => self.batch.push(message),
                _ => self.batch_ok = false,
            }
            self.members = Members::NONE;
        }
        self.expect = if self.depth == 0 {
            Expect::Done
        } else {
            Expect::AfterValue
        };
    }
}

/// `inner` if the value opening with `byte` is an object.
fn inner_if(byte: u8, inner: Inner) -> Inner {
    if byte == b'{' { inner } else { Inner::None }
}

/// Bytes from the start of `bytes` that a string holds as they are (no
/// quote, backslash or control byte), and whether any was 0x80 or more.
/// Thirty-two bytes at a time while none stops the run, then eight: a
/// string's long runs are most of a big message.
fn plain_run(bytes: &[u8]) -> (usize, bool) {
    let mut high = 0_u64;
    let mut at = 0;
    for block in bytes.chunks_exact(32) {
        let mut words = block.chunks_exact(8).map(word);
        let (Some(a), Some(b), Some(c), Some(d)) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            break;
        };
        if stops(a) | stops(b) | stops(c) | stops(d) != 0 {
            break;
        }
        high |= a | b | c | d;
        at += 32;
    }
    let rest = bytes.get(at..).unwrap_or_default();
    let mut words = rest.chunks_exact(8);
    for eight in words.by_ref() {
        let w = word(eight);
        let found = stops(w);
        if found != 0 {
            let stop = at + (found.trailing_zeros() / 8) as usize;
            let last = bytes.get(at..stop).unwrap_or_default();
            return (stop, high & HIGH != 0 || last.iter().any(|&b| b >= 0x80));
        }
        high |= w;
        at += 8;
    }
    let mut any_high = high & HIGH != 0;
    for &byte in words.remainder() {
        if byte == b'"' || byte == b'\\' || byte < 0x20 {
            return (at, any_high);
        }
        any_high |= byte >= 0x80;
        at += 1;
    }
    (at, any_high)
}

/// Each byte's high bit.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Eight bytes as one word, the first lowest.
fn word(eight: &[u8]) -> u64 {
    let mut bytes = [0_u8; 8];
    if let Some(from) = eight.get(..8) {
        bytes.copy_from_slice(from);
    }
    u64::from_le_bytes(bytes)
}

/// The high bit of each byte of `w` that ends a plain run (a quote, a
/// backslash or a control byte), exact up to the lowest one: a false
/// positive only shows above a true match in the same word.
fn stops(w: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let quote = w ^ (ONES * u64::from(b'"'));
    let backslash = w ^ (ONES * u64::from(b'\\'));
    ((quote.wrapping_sub(ONES) & !quote)
        | (backslash.wrapping_sub(ONES) & !backslash)
        | (w.wrapping_sub(ONES * 0x20) & !w))
        & HIGH
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(line: &[u8]) -> Option<MessageInfo> {
        let mut scanner = MessageScanner::new();
        scanner.feed(line);
        scanner.finish()
    }

    /// Fed one byte at a time, the verdict is the same.
    fn scan_bytewise(line: &[u8]) -> Option<MessageInfo> {
        let mut scanner = MessageScanner::new();
        for byte in line {
            scanner.feed(std::slice::from_ref(byte));
        }
        scanner.finish()
    }

    #[test]
    fn the_grammar_is_json_and_agrees_with_serde_json() {
        let lines: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            br#"  {"jsonrpc" : "2.0" , "method":"ping"}  "#,
            br#"{"jsonrpc":"2.0","id":"a\"b\\c\u00e9\n","result":[1,-2.5e+3,0.0,true,false,null,{"x":[]}]}"#,
            br#"{"jsonrpc":"2.0","result":"caf\u00e9 \ud83d\ude00"}"#,
            "{\"jsonrpc\":\"2.0\",\"result\":\"é中\"}".as_bytes(),
            br#"{"jsonrpc":"2.0","id":1,"result":01}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":1.}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":-}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":.5}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":1e}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":tru}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"\x"}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":"\u12g4"}"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"tab\there\"}",
            br#"{"jsonrpc":"2.0","id":1,"result":[1,]}"#,
            br#"{"jsonrpc":"2.0","id":1,}"#,
            br#"{"jsonrpc":"2.0","id":1"#,
            br#"{"jsonrpc":"2.0","id":1,"result":[1}]}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{"a" 1}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{1:2}}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}} x"#,
            br#"[{"jsonrpc":"2.0"}]"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]"#,
            br#"[]"#,
            br#"[{"jsonrpc":"2.0"},1]"#,
            br#"[{"jsonrpc":"2.0"},{"jsonrpc":"1.0"}]"#,
            br#"[{"jsonrpc":"2.0"}"#,
            br#"[{"jsonrpc":"2.0"}] {}"#,
            br#"[[{"jsonrpc":"2.0"}]]"#,
            br#""text""#,
            b"",
            b"   ",
            b"{}",
        ];
        for line in lines {
            let ours = scan(line).is_some();
            let value: Option<serde_json::Value> = serde_json::from_slice(line).ok();
            let message = |v: &serde_json::Value| {
                v.as_object()
                    .is_some_and(|o| o.get("jsonrpc") == Some(&serde_json::json!("2.0")))
            };
            // One message, or a batch: an array of one or more.
            let theirs = value.is_some_and(|v| match v.as_array() {
                Some(batch) => !batch.is_empty() && batch.iter().all(message),
                None => message(&v),
            });
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(line));
            assert_eq!(scan_bytewise(line), scan(line));
        }
    }

    #[test]
    fn members_are_read_at_the_top_level_only() {
        let info = scan(br#"{"params":{"id":9,"requestId":"r1"},"id":"x","jsonrpc":"2.0","method":"notifications/cancelled"}"#)
            .unwrap();
        assert_eq!(info.kind, MessageKind::Request);
        assert_eq!(info.id.as_ref().unwrap().as_bytes(), b"\"x\"");
        assert_eq!(info.request_id.as_ref().unwrap().as_bytes(), b"\"r1\"");
        assert!(info.is_method("notifications/cancelled"));

        let nested =
            scan(br#"{"jsonrpc":"2.0","result":{"jsonrpc":"1.0","id":3,"method":"m"}}"#).unwrap();
        assert_eq!(nested.kind, MessageKind::Response);
        assert_eq!(nested.id, None);
        assert_eq!(nested.method, None);

        // `requestId` counts only inside `params`.
        let elsewhere =
            scan(br#"{"jsonrpc":"2.0","method":"m","result":{"requestId":1}}"#).unwrap();
        assert_eq!(elsewhere.request_id, None);
        assert_eq!(elsewhere.kind, MessageKind::Notification);
    }

    /// The members an MCP span names: the tool, the trace context, how a
    /// call's answer failed; each only where the protocol puts it.
    #[test]
    fn a_call_s_name_trace_context_and_failure_are_read_where_they_belong() {
        const PARENT: &[u8] = b"\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"";
        let line = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{"progressToken":{"traceparent":"x"},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=1"},"arguments":{"name":"not this","_meta":{"traceparent":"nor this"}},"name":"search"}}"#;
        for info in [scan(line).unwrap(), scan_bytewise(line).unwrap()] {
            assert_eq!(info.kind, MessageKind::Request);
            assert_eq!(info.name.as_ref().unwrap().as_bytes(), b"\"search\"");
            assert_eq!(info.trace_parent.as_ref().unwrap().as_bytes(), PARENT);
            assert!(!info.is_error);
            assert_eq!(info.error_code, None);
        }
        // A `traceparent` beside `_meta`, in a `_meta` elsewhere, or under
        // a name spelt with escapes is not the request's context.
        for line in [
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"traceparent":"00-a-b-01"}}"#.as_slice(),
            br#"{"jsonrpc":"2.0","id":1,"method":"m","_meta":{"traceparent":"00-a-b-01"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","result":{"_meta":{"traceparent":"t"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"trace\u0070arent":"t"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":["traceparent","t"]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{},"x":{"traceparent":"t"}}}"#,
        ] {
            let info = scan(line).unwrap();
            assert_eq!(info.trace_parent, None, "{}", String::from_utf8_lossy(line));
            assert_eq!(info.name, None);
        }
        // A result that failed, and one whose `isError` is not `true`.
        let failed = scan(
            br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"isError":false}],"isError":true}}"#,
        )
        .unwrap();
        assert_eq!(failed.kind, MessageKind::Response);
        assert!(failed.is_error);
        for line in [
            br#"{"jsonrpc":"2.0","id":4,"result":{"isError":"true"}}"#.as_slice(),
            br#"{"jsonrpc":"2.0","id":4,"result":{"isError":false}}"#,
            br#"{"jsonrpc":"2.0","id":4,"result":{"content":{"isError":true}}}"#,
            br#"{"jsonrpc":"2.0","id":4,"error":{"isError":true,"code":1}}"#,
        ] {
            assert!(
                !scan(line).unwrap().is_error,
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // An error answer's code; a `code` anywhere else is not read.
        let error = br#"{"jsonrpc":"2.0","id":4,"error":{"data":{"code":7},"code":-32602,"message":"bad"}}"#;
        assert_eq!(
            scan_bytewise(error).unwrap().error_code.unwrap().as_bytes(),
            b"-32602"
        );
        let other = scan(br#"{"jsonrpc":"2.0","id":4,"result":{"code":1}}"#).unwrap();
        assert_eq!(other.error_code, None);
        // A `name` longer than a kept value is not read; the message is.
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{}"}}}}"#,
            "n".repeat(RawValue::CAPACITY)
        );
        let info = scan(long.as_bytes()).unwrap();
        assert_eq!((info.kind, info.name), (MessageKind::Request, None));
    }

    #[test]
    fn kinds_follow_the_members() {
        let kind = |line: &[u8]| scan(line).map(|i| i.kind);
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","id":1,"method":"a"}"#),
            Some(MessageKind::Request)
        );
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","method":"a"}"#),
            Some(MessageKind::Notification)
        );
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","id":null,"method":"a"}"#),
            Some(MessageKind::Request)
        );
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#),
            Some(MessageKind::Response)
        );
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","id":1}"#),
            Some(MessageKind::Other)
        );
        assert_eq!(kind(br#"{"jsonrpc":2.0,"id":1,"result":1}"#), None);
        assert_eq!(kind(br#"{"jsonrpc":"2.0 ","id":1,"result":1}"#), None);
        assert_eq!(kind(br#"{"id":1,"result":1}"#), None);
    }

    #[test]
    fn an_id_of_any_length_is_kept_and_an_object_id_is_none() {
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"m"}}"#,
            "x".repeat(4000)
        );
        let info = scan_bytewise(long.as_bytes()).unwrap();
        assert_eq!(info.id.as_ref().unwrap().as_bytes().len(), 4002);
        assert_eq!(info.kind, MessageKind::Request);
        // Other members stay short: a long method is not kept.
        let method = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"{}"}}"#,
            "m".repeat(200)
        );
        assert_eq!(scan(method.as_bytes()).unwrap().method, None);
        let object = scan(br#"{"jsonrpc":"2.0","id":{"a":1},"method":"m"}"#).unwrap();
        assert_eq!(object.id, None);
        let fits = format!(
            r#"{{"jsonrpc":"2.0","id":"{}","method":"m"}}"#,
            "y".repeat(126)
        );
        assert_eq!(
            scan(fits.as_bytes()).unwrap().id.unwrap().as_bytes().len(),
            128
        );
    }

    #[test]
    fn a_batch_is_its_messages_in_order_each_read_as_alone() {
        let line = br#" [{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"traceparent":"p"}}}, {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r"}},{"jsonrpc":"2.0","id":"b","result":{"isError":true}},{"jsonrpc":"2.0","id":"c","error":{"code":-1,"message":"x"}}] "#;
        let batch = scan(line).unwrap();
        assert_eq!(scan_bytewise(line), Some(batch.clone()));
        assert_eq!(batch.kind, MessageKind::Batch);
        assert_eq!(batch.id, None);
        let kinds: Vec<MessageKind> = batch.messages().map(|m| m.kind).collect();
        assert_eq!(
            kinds,
            [
                MessageKind::Request,
                MessageKind::Notification,
                MessageKind::Response,
                MessageKind::Response
            ]
        );
        let first = &batch.batch[0];
        assert_eq!(first.id.as_ref().unwrap().as_bytes(), b"1");
        assert_eq!(first.name.as_ref().unwrap().as_bytes(), b"\"t\"");
        assert_eq!(first.trace_parent.as_ref().unwrap().as_bytes(), b"\"p\"");
        let cancel = &batch.batch[1];
        assert_eq!(cancel.id, None);
        assert_eq!(cancel.request_id.as_ref().unwrap().as_bytes(), b"\"r\"");
        assert!(batch.batch[2].is_error);
        assert_eq!(
            batch.batch[3].error_code.as_ref().unwrap().as_bytes(),
            b"-1"
        );
        assert!(batch.batch.iter().all(|m| m.batch.is_empty()));
        // A message alone is its own one message.
        let alone = scan(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert_eq!(alone.messages().count(), 1);
        // At most MAX_BATCH messages.
        let element = r#"{"jsonrpc":"2.0","method":"n"}"#;
        let full = format!("[{}]", vec![element; MAX_BATCH].join(","));
        assert_eq!(scan(full.as_bytes()).unwrap().batch.len(), MAX_BATCH);
        let over = format!("[{}]", vec![element; MAX_BATCH + 1].join(","));
        assert_eq!(scan(over.as_bytes()), None);
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped_and_only_there() {
        let message = br#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let with = |prefix: &[u8], suffix: &[u8]| [prefix, &message[..], suffix].concat();
        let first = scan(&with(b"\xEF\xBB\xBF", b"")).unwrap();
        assert_eq!(first.kind, MessageKind::Response);
        assert_eq!(first.id.as_ref().unwrap().as_bytes(), b"7");
        assert_eq!(
            scan_bytewise(&with(b"\xEF\xBB\xBF", b"")),
            Some(first.clone())
        );
        // Then whitespace, as in any line.
        assert_eq!(scan(&with(b"\xEF\xBB\xBF \t", b" ")), Some(first.clone()));
        // Not twice, not after whitespace, not cut short, not at the end.
        for line in [
            with(b"\xEF\xBB\xBF\xEF\xBB\xBF", b""),
            with(b" \xEF\xBB\xBF", b""),
            with(b"\xEF\xBB", b""),
            with(b"\xEF", b""),
            with(b"\xBB\xBF", b""),
            with(b"", b"\xEF\xBB\xBF"),
            b"\xEF\xBB\xBF".to_vec(),
        ] {
            assert_eq!(scan(&line), None, "{line:?}");
            assert_eq!(scan_bytewise(&line), None, "{line:?}");
        }
        // After a reset, the next line may begin with one again.
        let mut scanner = MessageScanner::new();
        scanner.feed(&with(b"\xEF\xBB\xBF", b""));
        assert_eq!(scanner.finish(), Some(first.clone()));
        scanner.reset();
        scanner.feed(b"\xEF\xBB\xBF");
        scanner.feed(message);
        assert_eq!(scanner.finish(), Some(first.clone()));
    }

    #[test]
    fn depth_is_bounded() {
        let deep = |n: usize| {
            let mut line = br#"{"jsonrpc":"2.0","result":"#.to_vec();
            line.extend(std::iter::repeat_n(b'[', n));
            line.extend(std::iter::repeat_n(b']', n));
            line.push(b'}');
            line
        };
        assert!(scan(&deep(MAX_DEPTH - 1)).is_some());
        assert!(scan(&deep(MAX_DEPTH)).is_none());
    }

    #[test]
    fn plain_runs_stop_at_the_first_special_byte() {
        for len in 0..100 {
            for special in [b'"', b'\\', 0x00, 0x1f] {
                let mut bytes = vec![b'a'; len];
                bytes.push(special);
                bytes.extend_from_slice(b"\"\\");
                assert_eq!(plain_run(&bytes), (len, false), "{len} {special}");
            }
            let mut high = vec![b'a'; len];
            high.push(0xc3);
            high.push(0xa9);
            high.push(b'"');
            assert_eq!(plain_run(&high), (len + 2, true));
            // A high byte in a block the run passes whole, then the end.
            let mut early = vec![b'a'; len + 40];
            early[len % 32] = 0xff;
            assert_eq!(plain_run(&early), (len + 40, true), "{len}");
        }
        // 0x7f and 0x20 are plain.
        assert_eq!(plain_run(b" \x7f \x7f \x7f \x7f\""), (8, false));
    }
}
