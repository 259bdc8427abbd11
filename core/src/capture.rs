//! Capture of one output stream: count every byte, keep a bounded part.
//! See [`StreamCapture`]; [`Retained`] is what a finished capture hands on,
//! with its pool lease.
//!
//! `tail`, `head` and `head_and_tail` are one mechanism: a prefix of
//! `head_cap` bytes, then a ring of `tail_cap`. **Feeding never fails and,
//! in steady state, allocates nothing; retained ≤ budget; the window is
//! always "the first `h` and the last `t` bytes" of the stream, whatever
//! the chunking.** Once bytes are dropped, the [`CUT_MARGIN`] bytes beyond
//! each cut edge are kept too (reserved from the pool on top of the
//! budget, never shown), so that redaction can read past the edge.
//!
//! A live capture's budget moves with debug grants, and the window stays
//! "the first `h` and the last `t` bytes" through both moves: what was
//! dropped stays dropped and counted.
//! [`raise_budget`](StreamCapture::raise_budget) reserves nothing up front
//! (the buffers grow from the pool as bytes come), and a prefix a byte
//! already went past is final and never grows;
//! [`shrink_budget`](StreamCapture::shrink_budget) drops to the new split
//! and credits the pool at once.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::{Config, DebugGrant, Retain};
use crate::pool::{PoolLease, RetentionPool};
use crate::redact::{CUT_MARGIN, RedactionCounts, Redactor};
use crate::render::{Margins, Window};

/// Which stream of a helper a capture is for. Its name appears in the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamName {
    /// The helper's standard error: diagnostics.
    Stderr,
    /// The helper's standard output: the structured result channel.
    Stdout,
}

impl StreamName {
    /// The name as written in markers and records: `stderr` or `stdout`.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Stderr => "stderr",
            StreamName::Stdout => "stdout",
        }
    }
}

impl fmt::Display for StreamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one capture retains bytes: mode, budget, prefix size, kill ceiling.
///
/// Build it from a validated [`Config`] with [`CaptureSettings::stderr`] or
/// [`CaptureSettings::for_call`]; the fields are public for tools and tests
/// that need a capture outside a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSettings {
    /// The stream captured; named in the marker.
    pub stream: StreamName,
    /// Retention mode.
    pub retain: Retain,
    /// Most bytes retained in total (prefix plus ring). Once bytes are
    /// dropped, a capture also keeps up to [`CUT_MARGIN`] bytes beyond each
    /// cut edge (never shown, never counted as retained; see
    /// [`Margins`]), reserved from the pool on top of the budget.
    pub budget: usize,
    /// Prefix size for [`Retain::HeadAndTail`]; ignored by the other modes.
    /// Clamped to `budget`.
    pub head_bytes: usize,
    /// Opt-in kill-on-overflow: once more than this many bytes were
    /// seen, [`StreamCapture::feed`] reports [`Fed::CeilingCrossed`] once.
    pub kill_after_bytes: Option<u64>,
    /// Whether a debug grant raised this capture's budget.
    pub debug: bool,
    /// The rules that redact every rendering of this stream.
    pub redactor: Redactor,
}

impl CaptureSettings {
    /// Settings for a call's stderr under `config`, without debug grant.
    pub fn stderr(config: &Config) -> Self {
        Self {
            stream: StreamName::Stderr,
            retain: config.retain,
            budget: to_usize(config.stderr_retained_per_call_bytes),
            head_bytes: to_usize(config.head_bytes()),
            kill_after_bytes: config.stderr_kill_after_bytes,
            debug: false,
            redactor: config.redact_extra_patterns.clone(),
        }
    }

    /// Settings for a call's stderr made at `now`: if `grant` is active at
    /// `now`, the budget is raised to the grant's (already capped by the
    /// configured ceiling) and the capture is marked `debug`.
    pub fn for_call(config: &Config, grant: Option<&DebugGrant>, now: std::time::Instant) -> Self {
        let mut settings = Self::stderr(config);
        if let Some(grant) = grant.filter(|g| g.is_active(now)) {
            settings.budget = settings.budget.max(to_usize(
                grant.per_call_bytes().min(config.debug_ceiling_bytes),
            ));
            settings.debug = true;
        }
        settings
    }

    /// Settings that keep the last `budget` bytes of `stream`.
    pub fn tail(stream: StreamName, budget: usize) -> Self {
        Self {
            stream,
            retain: Retain::Tail,
            budget,
            head_bytes: 0,
            kill_after_bytes: None,
            debug: false,
            redactor: Redactor::builtin(),
        }
    }

    fn split(&self) -> (usize, usize) {
        self.split_for(self.budget)
    }

    /// The prefix and ring capacities of the mode for `budget`.
    fn split_for(&self, budget: usize) -> (usize, usize) {
        match self.retain {
            Retain::Tail => (0, budget),
            Retain::Head => (budget, 0),
            Retain::HeadAndTail => {
                let head = self.head_bytes.min(budget);
                (head, budget - head)
            }
        }
    }
}

pub(crate) fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// What one [`StreamCapture::feed`] observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a crossed kill ceiling must reach the lifecycle"]
#[non_exhaustive]
pub enum Fed {
    /// The bytes were counted (and retained as far as the budget allows).
    Accepted,
    /// This chunk took the bytes seen past the opt-in kill ceiling. Reported
    /// once, on the chunk that crossed it.
    CeilingCrossed,
}

/// Counts and retains one stream of one call.
///
/// A [`StreamCapture`] is fed raw chunks as they are read. Feeding never fails
/// and never stops accepting bytes, so the reader can keep draining the pipe
/// whatever the volume. Every byte is counted in a `u64` before any text
/// is made. At most the per-call budget is kept:
///
/// * [`Retain::Tail`] keeps the most recent bytes in a ring;
/// * [`Retain::Head`] keeps the first bytes and drops the rest;
/// * [`Retain::HeadAndTail`] keeps a prefix of `head_bytes` and a ring of the
///   rest of the budget; both parts are reported, never spliced silently.
///
/// All three are one mechanism: a prefix of capacity `head_cap` followed by a
/// ring of capacity `tail_cap` (tail mode is `head_cap == 0`, head mode is
/// `tail_cap == 0`). The retained window is therefore always "the first `h`
/// bytes and the last `t` bytes of the stream", which is what the marker says.
///
/// Beyond each cut edge the capture also keeps a context margin of up to
/// [`CUT_MARGIN`] bytes that the rendering reads but never shows (see
/// [`Margins`]): in `tail` mode the last bytes dropped before the ring's
/// oldest byte, in `head` mode the first bytes dropped after the prefix,
/// in `head_and_tail` both. A margin is reserved from the pool when the
/// capture first drops a byte, on top of the budget, and never grows: a
/// capture holds at most its budget plus 512 bytes (`tail`, `head`) or
/// 1,024 (`head_and_tail`). A margin the pool refuses is kept shorter or
/// not at all; the window and its counts are the same either way.
///
/// Memory comes from the process-wide [`RetentionPool`] as the buffers grow
/// (doubling, never past the budget); when the pool cannot grant more, the
/// capture keeps what it has, goes on counting and reports
/// [`retention_limited`](StreamCapture::retention_limited). In steady state
/// (buffers and margins at their size) feeding allocates nothing and copies
/// at most the budget and the margins per chunk.
///
/// # Examples
///
/// ```
/// use spillguard_core::{CaptureSettings, RetentionPool, StreamCapture, StreamName};
///
/// let pool = RetentionPool::new(1 << 20);
/// let mut capture = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 16), &pool);
/// let _ = capture.feed(b"retry 1 failed\n");
/// let _ = capture.feed(b"retry 2 failed\n");
/// assert_eq!(capture.bytes_seen(), 30);
/// assert_eq!(capture.bytes_retained(), 16);
/// assert_eq!(
///     capture.render(),
///     "[stderr truncated: kept last 16 of 30 bytes]\n\nretry 2 failed\n"
/// );
/// ```
#[derive(Debug)]
pub struct StreamCapture {
    settings: CaptureSettings,
    seen: u64,
    head: Vec<u8>,
    head_cap: usize,
    head_reserved: usize,
    head_closed: bool,
    tail: Ring,
    tail_cap: usize,
    tail_reserved: usize,
    /// The first bytes dropped after the prefix (`head`, `head_and_tail`).
    after_head: Vec<u8>,
    /// The last bytes dropped before the ring's oldest byte (`tail`,
    /// `head_and_tail`).
    before_tail: Ring,
    /// The capacity of each margin, once reserved from the pool.
    after_head_cap: Option<usize>,
    before_tail_cap: Option<usize>,
    lease: PoolLease,
    limited: bool,
    /// The window was narrowed below the budget to give bytes back to a
    /// contended pool; it widens again once the pool is not contended.
    narrowed: bool,
    ceiling_reported: bool,
}

/// Smallest step by which a buffer's reservation grows.
const MIN_RESERVATION_STEP: usize = 256;

impl StreamCapture {
    /// Starts an empty capture that draws its memory from `pool`.
    pub fn new(settings: CaptureSettings, pool: &RetentionPool) -> Self {
        let (head_cap, tail_cap) = settings.split();
        Self {
            settings,
            seen: 0,
            head: Vec::new(),
            head_cap,
            head_reserved: 0,
            head_closed: head_cap == 0,
            tail: Ring::default(),
            tail_cap,
            tail_reserved: 0,
            after_head: Vec::new(),
            before_tail: Ring::default(),
            after_head_cap: None,
            before_tail_cap: None,
            lease: pool.lease(),
            limited: false,
            narrowed: false,
            ceiling_reported: false,
        }
    }

    /// Counts `chunk` and retains what the budget and the pool allow.
    ///
    /// Infallible; copies at most the budget, however large the chunk.
    pub fn feed(&mut self, chunk: &[u8]) -> Fed {
        self.seen += chunk.len() as u64;
        self.share_the_pool();
        let mut rest = chunk;
        if !self.head_closed {
            let room = self.head_cap - self.head.len();
            let take = room.min(rest.len());
            if self.head.len() + take > self.head_reserved {
                let want = grow_target(self.head_reserved, self.head.len() + take, self.head_cap);
                let granted = to_usize(self.lease.grow((want - self.head_reserved) as u64));
                self.head_reserved += granted;
                self.head
                    .reserve_exact(self.head_reserved - self.head.len());
            }
            let kept = take.min(self.head_reserved - self.head.len());
            self.head.extend_from_slice(&rest[..kept]);
            if kept < take {
                self.limited = true;
            }
            rest = &rest[kept..];
            // Once one byte goes past the prefix, the prefix is final: it must
            // stay the stream's first bytes.
            if !rest.is_empty() {
                self.head_closed = true;
            }
        }
        if !rest.is_empty() && self.tail_cap == 0 {
            // No ring: every byte past the prefix is dropped.
            self.keep_dropped(rest.len(), rest);
        }
        if !rest.is_empty() && self.tail_cap > 0 {
            let wanted = self.tail_cap.min(self.tail.len() + rest.len());
            if wanted > self.tail_reserved {
                let want = grow_target(self.tail_reserved, wanted, self.tail_cap);
                let granted = to_usize(self.lease.grow((want - self.tail_reserved) as u64));
                self.tail_reserved += granted;
                if self.tail_reserved < wanted {
                    self.limited = true;
                }
            }
            let dropped = (self.tail.len() + rest.len()).saturating_sub(self.tail_reserved);
            self.keep_dropped(dropped, rest);
            self.tail.push(rest, self.tail_reserved);
        }
        match self.settings.kill_after_bytes {
            Some(ceiling) if !self.ceiling_reported && self.seen > ceiling => {
                self.ceiling_reported = true;
                Fed::CeilingCrossed
            }
            _ => Fed::Accepted,
        }
    }

    /// The capacity of the margin after the prefix, reserved from the pool
    /// on first use.
    fn after_head_cap(&mut self) -> usize {
        if let Some(cap) = self.after_head_cap {
            return cap;
        }
        let cap = to_usize(self.lease.grow(CUT_MARGIN as u64));
        self.after_head.reserve_exact(cap);
        self.after_head_cap = Some(cap);
        cap
    }

    /// The capacity of the margin before the ring, reserved from the pool
    /// on first use.
    fn before_tail_cap(&mut self) -> usize {
        if let Some(cap) = self.before_tail_cap {
            return cap;
        }
        let cap = to_usize(self.lease.grow(CUT_MARGIN as u64));
        self.before_tail_cap = Some(cap);
        cap
    }

    /// Keeps in the margins what is about to be dropped: the `dropped`
    /// first bytes of the ring followed by `rest`, oldest first. The
    /// margin after a prefix takes the first bytes ever dropped, the
    /// margin before the ring the last ones.
    fn keep_dropped(&mut self, dropped: usize, rest: &[u8]) {
        if dropped == 0 {
            return;
        }
        let retain = self.settings.retain;
        let after_cap = match retain != Retain::Tail && !self.head.is_empty() {
            true => self.after_head_cap(),
            false => 0,
        };
        let before_cap = match retain != Retain::Head {
            true => self.before_tail_cap(),
            false => 0,
        };
        let after_room = dropped.min(after_cap.saturating_sub(self.after_head.len()));
        let from = dropped - dropped.min(before_cap);
        let (older, newer) = self.tail.as_slices();
        let mut pos = 0;
        for part in [older, newer, rest] {
            let end = pos + part.len();
            let hi = after_room.min(end);
            if pos < hi {
                self.after_head.extend_from_slice(&part[..hi - pos]);
            }
            let (lo, hi) = (from.max(pos), dropped.min(end));
            if lo < hi {
                self.before_tail.push(&part[lo - pos..hi - pos], before_cap);
            }
            pos = end;
        }
    }

    /// Every byte fed so far.
    pub fn bytes_seen(&self) -> u64 {
        self.seen
    }

    /// Bytes retained right now (prefix plus ring).
    pub fn bytes_retained(&self) -> u64 {
        self.window().retained()
    }

    /// Whether bytes were dropped: `bytes_seen > bytes_retained`.
    pub fn truncated(&self) -> bool {
        self.window().truncated()
    }

    /// Lowers the budget (e.g. when a debug grant ends): keeps the
    /// first and last bytes the new split allows, drops the rest, and gives
    /// the freed reservation back to the pool. The window stays "the first
    /// `h` and the last `t` bytes of the stream". A budget at or above the
    /// current one changes nothing.
    pub fn shrink_budget(&mut self, budget: usize) {
        if budget >= self.settings.budget {
            return;
        }
        self.settings.budget = budget;
        self.narrow(budget);
    }

    /// Gives back to a contended pool what this capture holds above its
    /// fair share (the margins first, then the oldest bytes of the window),
    /// and widens a narrowed window again once the pool is not contended.
    fn share_the_pool(&mut self) {
        let pool = self.lease.pool();
        if pool.is_contended() {
            let share = pool.fair_share();
            let margins = self.after_head_cap.unwrap_or(0) + self.before_tail_cap.unwrap_or(0);
            if self.lease.bytes() > share || margins > 0 {
                self.give_back_to(share);
            }
        } else if self.narrowed {
            self.narrowed = false;
            self.widen();
        }
    }

    /// Brings what the lease holds down to `share` bytes, and to no more
    /// than the window: the margins go first, for good.
    fn give_back_to(&mut self, share: u64) {
        self.after_head = Vec::new();
        self.before_tail = Ring::default();
        self.after_head_cap = Some(0);
        self.before_tail_cap = Some(0);
        let window = self.head_reserved + self.tail_reserved;
        self.lease.shrink_to(window as u64);
        let share = to_usize(share);
        if window > share {
            self.limited = true;
            self.narrowed = true;
            self.narrow(share);
        }
    }

    /// Keeps the first and last bytes a window of `budget` allows, drops
    /// the rest, and gives the freed reservation back to the pool.
    fn narrow(&mut self, budget: usize) {
        let (head_cap, tail_cap) = self.caps_for(budget);
        let (head_cap, tail_cap) = (head_cap.min(self.head_cap), tail_cap.min(self.tail_cap));
        if self.head.len() > head_cap {
            // The bytes cut from the prefix are dropped before all others.
            let cut = self.head.split_off(head_cap);
            self.head_closed = true;
            let cap = self.after_head_cap();
            let mut after = cut.clone();
            after.extend_from_slice(&self.after_head);
            after.truncate(cap);
            self.after_head.clear();
            self.after_head.extend_from_slice(&after);
            if self.settings.retain != Retain::Head {
                let cap = self.before_tail_cap();
                let (older, newer) = self.before_tail.as_slices();
                let kept = [older, newer].concat();
                let mut before = Ring::default();
                before.push(&cut, cap);
                before.push(&kept, cap);
                self.before_tail = before;
            }
        }
        self.head.shrink_to(head_cap);
        self.head_cap = head_cap;
        self.head_reserved = self.head_reserved.min(head_cap);
        let dropped = self.tail.len().saturating_sub(tail_cap);
        self.keep_dropped(dropped, &[]);
        self.tail.shrink(tail_cap);
        self.tail_cap = tail_cap;
        self.tail_reserved = self.tail_reserved.min(tail_cap);
        let margins = self.after_head_cap.unwrap_or(0) + self.before_tail_cap.unwrap_or(0);
        self.lease
            .shrink_to((self.head_reserved + self.tail_reserved + margins) as u64);
    }

    /// Raises the budget while the stream runs (a debug grant given to a
    /// live call). Nothing is reserved here: the buffers grow from the
    /// pool as bytes come, as ever, so the pool never goes over its
    /// capacity. What was already dropped stays dropped and counted, and
    /// the window stays "the first `h` and the last `t` bytes of the
    /// stream", so the marker stays exact:
    ///
    /// * `tail`: the ring keeps its bytes and grows with the next ones, up
    ///   to the new budget (it holds the last `t` bytes, `t` growing);
    /// * `head`: while nothing was dropped, the prefix takes more of the
    ///   next bytes; once a byte went past it, the prefix is final and
    ///   nothing more is kept;
    /// * `head_and_tail`: a prefix nothing went past grows up to
    ///   `head_bytes`; a final one stays as it is, and the ring gets the
    ///   rest of the new budget.
    ///
    /// A budget at or below the current one changes nothing.
    ///
    /// ```
    /// use spillguard_core::{CaptureSettings, RetentionPool, StreamCapture, StreamName};
    ///
    /// let pool = RetentionPool::new(1 << 20);
    /// let mut capture = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 6), &pool);
    /// let _ = capture.feed(b"noise noise\n");
    /// capture.raise_budget(32);
    /// let _ = capture.feed(b"more\n");
    /// // The 6 bytes dropped before stay dropped; the ring grew with the next 5.
    /// assert_eq!((capture.bytes_seen(), capture.bytes_retained()), (17, 11));
    /// // The margin holds the dropped "noise ": the cut word is shown.
    /// assert_eq!(
    ///     capture.render(),
    ///     "[stderr truncated: kept last 11 of 17 bytes]\nnoise\nmore\n"
    /// );
    /// ```
    pub fn raise_budget(&mut self, budget: usize) {
        if budget <= self.settings.budget {
            return;
        }
        self.settings.budget = budget;
        // A narrowed window widens once the pool is no longer contended.
        if !self.narrowed {
            self.widen();
        }
    }

    /// Lets the window grow to the budget again, as bytes come.
    fn widen(&mut self) {
        let (head_cap, tail_cap) = self.caps_for(self.settings.budget);
        self.head_cap = head_cap;
        self.tail_cap = tail_cap;
    }

    /// Marks the capture as touched by a debug grant: its [`Retained`]
    /// (and the call record) says `debug: true` from now on.
    pub fn mark_debug(&mut self) {
        self.settings.debug = true;
    }

    /// The prefix and ring capacities for a new `budget`: the mode's split,
    /// except that a prefix already final (a byte went past it, so it must
    /// stay the stream's first bytes) never grows, and in `head` mode no
    /// ring is added.
    fn caps_for(&self, budget: usize) -> (usize, usize) {
        let (head, tail) = self.settings.split_for(budget);
        if !self.head_closed {
            return (head, tail);
        }
        let head = head.min(self.head_cap);
        match self.settings.retain {
            Retain::Head => (head, 0),
            Retain::Tail | Retain::HeadAndTail => (head, budget - head),
        }
    }

    /// Whether the process-wide pool made this capture keep less than its
    /// own budget allowed.
    pub fn retention_limited(&self) -> bool {
        self.limited
    }

    /// Whether the window holds less than the budget allows because the
    /// pool is shared: bytes were dropped that the budget alone would have
    /// kept. The marker says so.
    fn held_back(&self) -> bool {
        let window = self.head.len() + self.tail.len();
        self.limited && window < self.settings.budget && self.seen > window as u64
    }

    /// Whether the opt-in kill ceiling was crossed.
    pub fn ceiling_crossed(&self) -> bool {
        self.ceiling_reported
    }

    /// Bytes this capture holds from the process-wide pool (at least
    /// [`bytes_retained`](Self::bytes_retained); the margins beyond the cut
    /// edges included, once bytes were dropped).
    pub fn bytes_reserved(&self) -> u64 {
        self.lease.bytes()
    }

    /// The settings this capture was made with.
    pub fn settings(&self) -> &CaptureSettings {
        &self.settings
    }

    /// A borrowed view of what is retained, for rendering without finishing.
    pub fn window(&self) -> Window<'_> {
        let (older, newer) = self.tail.as_slices();
        Window {
            stream: self.settings.stream,
            retain: self.settings.retain,
            seen: self.seen,
            head: &self.head,
            tail: [older, newer],
            redactor: &self.settings.redactor,
            held_back: self.held_back(),
            margins: Margins {
                after_head: &self.after_head,
                before_tail: {
                    let (older, newer) = self.before_tail.as_slices();
                    [older, newer]
                },
            },
        }
    }

    /// Renders the marker (if bytes were dropped) and the retained text,
    /// redacted. See [`Window::render`].
    pub fn render(&self) -> String {
        self.window().render()
    }

    /// Ends the capture, handing its bytes and its pool lease to a
    /// [`Retained`]; the pool is credited when that is dropped.
    ///
    /// A finished window keeps at most its fair share of the pool
    /// ([`RetentionPool::fair_share`]) whether or not the pool is
    /// contended: it never gives bytes back while it is held, and the
    /// calls still running must be able to reach their share.
    pub fn finish(mut self) -> Retained {
        let share = self.lease.pool().fair_share();
        if self.lease.bytes() > share {
            self.give_back_to(share);
        }
        self.lease.settle();
        let held_back = self.held_back();
        Retained {
            held_back,
            stream: self.settings.stream,
            retain: self.settings.retain,
            debug: self.settings.debug,
            seen: self.seen,
            limited: self.limited,
            head: self.head,
            tail: self.tail.into_vec(),
            after_head: self.after_head,
            before_tail: self.before_tail.into_vec(),
            redactor: self.settings.redactor,
            lease: self.lease,
        }
    }
}

/// The next reservation for a buffer that holds `reserved` and needs `need`:
/// at least double, at least [`MIN_RESERVATION_STEP`], never past `cap`.
fn grow_target(reserved: usize, need: usize, cap: usize) -> usize {
    need.max(reserved.saturating_mul(2))
        .max(MIN_RESERVATION_STEP)
        .min(cap)
}

/// The retained bytes of a finished capture, holding their share of the
/// process-wide pool until dropped.
#[derive(Debug)]
pub struct Retained {
    stream: StreamName,
    retain: Retain,
    debug: bool,
    seen: u64,
    limited: bool,
    held_back: bool,
    head: Vec<u8>,
    tail: Vec<u8>,
    after_head: Vec<u8>,
    before_tail: Vec<u8>,
    redactor: Redactor,
    lease: PoolLease,
}

impl Retained {
    /// A borrowed view for rendering and clamping.
    pub fn window(&self) -> Window<'_> {
        Window {
            stream: self.stream,
            retain: self.retain,
            seen: self.seen,
            head: &self.head,
            tail: [&self.tail, &[]],
            redactor: &self.redactor,
            held_back: self.held_back,
            margins: Margins {
                after_head: &self.after_head,
                before_tail: [&self.before_tail, &[]],
            },
        }
    }

    /// Every byte the stream carried.
    pub fn bytes_seen(&self) -> u64 {
        self.seen
    }

    /// Bytes kept.
    pub fn bytes_retained(&self) -> u64 {
        self.window().retained()
    }

    /// Whether bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.window().truncated()
    }

    /// Whether the pool made the capture keep less than its budget allowed.
    pub fn retention_limited(&self) -> bool {
        self.limited
    }

    /// Bytes this window holds from the pool (the window and any margins
    /// beyond its cut edges).
    pub fn bytes_reserved(&self) -> u64 {
        self.lease.bytes()
    }

    /// Whether a debug grant raised this capture's budget.
    pub fn debug(&self) -> bool {
        self.debug
    }

    /// The retention mode used.
    pub fn retain(&self) -> Retain {
        self.retain
    }

    /// The stream this was captured from.
    pub fn stream(&self) -> StreamName {
        self.stream
    }

    /// The rules every rendering of this stream is redacted with.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Renders marker and text, redacted. See [`Window::render`].
    pub fn render(&self) -> String {
        self.window().render()
    }

    /// [`render`](Self::render) with the count of secrets per rule.
    pub fn render_with_redactions(&self) -> (String, RedactionCounts) {
        self.window().render_with_redactions()
    }

    /// How many secrets each rule replaces in [`render`](Self::render).
    pub fn redactions(&self) -> RedactionCounts {
        self.window().redactions()
    }

    /// Marker and text **without redaction**. See
    /// [`Window::render_unredacted`]; no record, excerpt, log or command
    /// line of this library uses it.
    pub fn render_unredacted(&self) -> String {
        self.window().render_unredacted()
    }

    /// The retained bytes, raw: the prefix followed by the tail. When
    /// [`truncated`](Self::truncated), bytes are missing around or between
    /// them; use [`render`](Self::render) to see where.
    pub fn to_vec(&self) -> Vec<u8> {
        [&self.head[..], &self.tail[..]].concat()
    }

    /// Renders, redacted, and clamps to `cap` bytes, marker included. See
    /// [`Window::render_clamped`].
    pub fn render_clamped(&self, cap: usize) -> String {
        self.window().render_clamped(cap)
    }

    /// The fingerprint of the retained bytes, `None` if nothing was retained.
    pub fn fingerprint(&self) -> Option<crate::Fingerprint> {
        self.window().fingerprint()
    }
}

/// A ring of bytes whose capacity can grow (never shrink).
///
/// Invariant: either `start == 0` and the bytes are `buf` in order, or the
/// ring is full (`buf.len()` equals the limit it was last pushed with) and the
/// oldest byte is at `start`.
#[derive(Debug, Default)]
struct Ring {
    buf: Vec<u8>,
    start: usize,
}

impl Ring {
    fn len(&self) -> usize {
        self.buf.len()
    }

    /// Appends `bytes`, keeping only the last `limit` bytes of the whole.
    fn push(&mut self, mut bytes: &[u8], limit: usize) {
        if bytes.len() >= limit {
            // The chunk alone fills the window: copy only its last bytes.
            if self.buf.capacity() < limit {
                self.buf.reserve_exact(limit - self.buf.len());
            }
            self.buf.clear();
            self.buf.extend_from_slice(&bytes[bytes.len() - limit..]);
            self.start = 0;
            return;
        }
        if self.buf.len() < limit {
            if self.start != 0 {
                // The limit grew after the ring had wrapped: straighten it.
                self.buf.rotate_left(self.start);
                self.start = 0;
            }
            if self.buf.capacity() < limit {
                self.buf.reserve_exact(limit - self.buf.len());
            }
            let take = (limit - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        // Full: overwrite the oldest bytes (at most two copies, as
        // `bytes.len() < limit`).
        while !bytes.is_empty() {
            let run = (self.buf.len() - self.start).min(bytes.len());
            self.buf[self.start..self.start + run].copy_from_slice(&bytes[..run]);
            self.start = (self.start + run) % self.buf.len();
            bytes = &bytes[run..];
        }
    }

    /// Keeps only the last `limit` bytes and frees the rest of the buffer.
    fn shrink(&mut self, limit: usize) {
        if self.buf.len() > limit {
            self.buf.rotate_left(self.start);
            self.start = 0;
            self.buf.drain(..self.buf.len() - limit);
        } else if self.start != 0 {
            self.buf.rotate_left(self.start);
            self.start = 0;
        }
        self.buf.shrink_to(limit);
    }

    /// The bytes in order: older part, newer part.
    fn as_slices(&self) -> (&[u8], &[u8]) {
        let (newer, older) = self.buf.split_at(self.start);
        (older, newer)
    }

    fn into_vec(mut self) -> Vec<u8> {
        self.buf.rotate_left(self.start);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(budget: usize) -> StreamCapture {
        StreamCapture::new(
            CaptureSettings::tail(StreamName::Stderr, budget),
            &RetentionPool::unlimited(),
        )
    }

    fn contents(c: &StreamCapture) -> Vec<u8> {
        let w = c.window();
        [w.head, w.tail[0], w.tail[1]].concat()
    }

    #[test]
    fn ring_keeps_last_bytes_across_wraps() {
        let mut c = tail(5);
        for chunk in [&b"ab"[..], b"cd", b"ef", b"g", b"hij"] {
            let _ = c.feed(chunk);
        }
        assert_eq!(contents(&c), b"fghij");
        assert_eq!((c.bytes_seen(), c.bytes_retained()), (10, 5));
    }

    #[test]
    fn a_chunk_larger_than_the_budget_keeps_its_last_bytes() {
        let mut c = tail(4);
        let _ = c.feed(b"xy");
        let _ = c.feed(b"0123456789");
        assert_eq!(contents(&c), b"6789");
    }

    #[test]
    fn head_and_tail_never_splice() {
        let pool = RetentionPool::unlimited();
        let settings = CaptureSettings {
            retain: Retain::HeadAndTail,
            head_bytes: 3,
            ..CaptureSettings::tail(StreamName::Stderr, 7)
        };
        let mut c = StreamCapture::new(settings, &pool);
        let _ = c.feed(b"abcdefghijklmnop");
        let w = c.window();
        assert_eq!(w.head, b"abc");
        assert_eq!([w.tail[0], w.tail[1]].concat(), b"mnop");
        assert_eq!(c.bytes_retained(), 7);
    }

    #[test]
    fn shrinking_the_budget_keeps_the_newest_bytes_and_frees_the_pool() {
        let pool = RetentionPool::new(10_000);
        let mut c = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 1000), &pool);
        for chunk in [&[b'a'; 700][..], &[b'b'; 700][..]] {
            let _ = c.feed(chunk);
        }
        // The pool holds the window and the margin before it.
        let margin = CUT_MARGIN as u64;
        assert_eq!((c.bytes_retained(), pool.in_use()), (1000, 1000 + margin));
        c.shrink_budget(100);
        assert_eq!(
            (c.bytes_seen(), c.bytes_retained(), pool.in_use()),
            (1400, 100, 100 + margin)
        );
        // The margin holds the last 512 bytes dropped, right before the
        // window.
        let w = c.window();
        let before = [w.margins.before_tail[0], w.margins.before_tail[1]].concat();
        assert_eq!(before, [b'b'; 512]);
        assert_eq!(contents(&c), [b'b'; 100]);
        let _ = c.feed(b"xyz");
        assert_eq!(&contents(&c)[97..], b"xyz");
        assert_eq!(pool.in_use(), 100 + margin);
    }

    #[test]
    fn shrinking_head_and_tail_keeps_the_first_and_last_bytes() {
        let pool = RetentionPool::unlimited();
        let settings = CaptureSettings {
            retain: Retain::HeadAndTail,
            head_bytes: 4,
            ..CaptureSettings::tail(StreamName::Stderr, 12)
        };
        let mut c = StreamCapture::new(settings, &pool);
        let _ = c.feed(b"0 23456789abcdef\nhij");
        c.settings.head_bytes = 2;
        c.shrink_budget(6);
        let w = c.window();
        assert_eq!(w.head, b"0 ");
        assert_eq!([w.tail[0], w.tail[1]].concat(), b"\nhij");
        assert_eq!(
            c.render(),
            "0 \n[stderr truncated: kept first 2 and last 4 of 20 bytes, 14 omitted between them]\n\nhij"
        );
    }

    #[test]
    fn kill_ceiling_is_reported_once_on_the_crossing_chunk() {
        let settings = CaptureSettings {
            kill_after_bytes: Some(10),
            ..CaptureSettings::tail(StreamName::Stderr, 4)
        };
        let mut c = StreamCapture::new(settings, &RetentionPool::unlimited());
        assert_eq!(c.feed(b"0123456789"), Fed::Accepted);
        assert_eq!(c.feed(b"a"), Fed::CeilingCrossed);
        assert_eq!(c.feed(b"b"), Fed::Accepted);
        assert!(c.ceiling_crossed());
    }

    #[test]
    fn an_exhausted_pool_limits_retention_but_not_counting() {
        let pool = RetentionPool::new(2000);
        let mut hog = pool.lease();
        assert_eq!(hog.grow(1990), 1990);
        let mut c = StreamCapture::new(CaptureSettings::tail(StreamName::Stderr, 1000), &pool);
        let _ = c.feed(&[b'x'; 500]);
        assert_eq!((c.bytes_seen(), c.bytes_retained()), (500, 10));
        assert!(c.retention_limited());
        assert_eq!(pool.in_use(), 2000);
        drop(hog);
        let _ = c.feed(&[b'y'; 500]);
        assert_eq!(c.bytes_retained(), 510);
        let _ = c.feed(&[b'z'; 600]);
        assert_eq!((c.bytes_seen(), c.bytes_retained()), (1600, 1000));
        let all = contents(&c);
        assert_eq!(&all[..400], &[b'y'; 400][..]);
        assert_eq!(&all[400..], &[b'z'; 600][..]);
        let retained = c.finish();
        assert_eq!(pool.in_use(), 1000);
        drop(retained);
        assert_eq!(pool.in_use(), 0);
    }
}
