//! The process-wide retention pool: captures and the retained bytes
//! they hand on never hold more than the pool's capacity together, every
//! byte held is accounted to a live capture or a live `Retained`, and a
//! capture the pool starves says so while still keeping "first h / last t".
#![allow(clippy::unwrap_used)]

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use spillguard_core::{
    CUT_MARGIN, CaptureSettings, Config, Redactor, Retain, Retained, RetentionPool, StreamCapture,
    StreamName,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Tail,
    Head,
    HeadAndTail,
}

#[derive(Debug, Clone, Copy)]
struct Spec {
    mode: Mode,
    budget: usize,
    head_bytes: usize,
}

impl Spec {
    fn settings(self) -> CaptureSettings {
        CaptureSettings {
            stream: StreamName::Stderr,
            retain: match self.mode {
                Mode::Tail => Retain::Tail,
                Mode::Head => Retain::Head,
                Mode::HeadAndTail => Retain::HeadAndTail,
            },
            budget: self.budget,
            head_bytes: self.head_bytes,
            kill_after_bytes: None,
            debug: false,
            redactor: Redactor::builtin(),
        }
    }

    /// Prefix and ring capacities.
    fn split(self) -> (usize, usize) {
        match self.mode {
            Mode::Tail => (0, self.budget),
            Mode::Head => (self.budget, 0),
            Mode::HeadAndTail => {
                let h = self.head_bytes.min(self.budget);
                (h, self.budget - h)
            }
        }
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just(Mode::Tail), Just(Mode::Head), Just(Mode::HeadAndTail)],
        1usize..=600,
        0usize..=300,
    )
        .prop_map(|(mode, budget, head_bytes)| Spec {
            mode,
            budget,
            head_bytes,
        })
}

#[derive(Debug, Clone)]
enum Op {
    Feed { slot: Index, bytes: Vec<u8> },
    Finish { slot: Index },
    DropRetained { slot: Index },
    Start(Spec),
}

/// `len` pseudo-random bytes from `seed` (cheaper to generate than a
/// strategy per byte; the position of each byte is what the model checks).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            // xorshift64
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<Index>(), 0usize..700, any::<u64>())
            .prop_map(|(slot, len, seed)| Op::Feed { slot, bytes: noise(len, seed) }),
        2 => any::<Index>().prop_map(|slot| Op::Finish { slot }),
        2 => any::<Index>().prop_map(|slot| Op::DropRetained { slot }),
        1 => spec().prop_map(Op::Start),
    ]
}

/// A capture being fed, with every byte fed to it.
struct Live {
    capture: StreamCapture,
    spec: Spec,
    fed: Vec<u8>,
    was_limited: bool,
}

/// A finished capture's bytes, with what the test knew when it finished.
struct Held {
    retained: Retained,
    seen: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
    limited: bool,
}

struct World {
    pool: RetentionPool,
    live: Vec<Live>,
    held: Vec<Held>,
}

impl World {
    fn start(&mut self, spec: Spec) {
        self.live.push(Live {
            capture: StreamCapture::new(spec.settings(), &self.pool),
            spec,
            fed: Vec::new(),
            was_limited: false,
        });
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Feed { slot, bytes } if !self.live.is_empty() => {
                let i = slot.index(self.live.len());
                let live = &mut self.live[i];
                let _ = live.capture.feed(&bytes);
                live.fed.extend_from_slice(&bytes);
            }
            Op::Finish { slot } if !self.live.is_empty() => {
                let live = self.live.remove(slot.index(self.live.len()));
                let capture = live.capture;
                let (seen, was_limited) = (capture.bytes_seen(), capture.retention_limited());
                let share = self.pool.fair_share();
                let retained = capture.finish();
                // A finished window keeps at most its fair share; what it
                // keeps is still the first `h` and the last `t` bytes fed.
                let w = retained.window();
                let (head, tail) = (w.head.to_vec(), [w.tail[0], w.tail[1]].concat());
                let (h, t) = (head.len(), tail.len());
                assert!(retained.bytes_reserved() <= share);
                assert_eq!(&head[..], &live.fed[..h]);
                assert_eq!(&tail[..], &live.fed[live.fed.len() - t..]);
                assert!(!was_limited || retained.retention_limited());
                self.held.push(Held {
                    limited: retained.retention_limited(),
                    retained,
                    seen,
                    head,
                    tail,
                });
            }
            Op::DropRetained { slot } if !self.held.is_empty() => {
                drop(self.held.remove(slot.index(self.held.len())));
            }
            Op::Start(spec) => self.start(spec),
            _ => {}
        }
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        let pool = &self.pool;
        prop_assert!(pool.in_use() <= pool.capacity());
        let accounted: u64 = self
            .live
            .iter()
            .map(|l| l.capture.bytes_reserved())
            .chain(self.held.iter().map(|h| h.retained.bytes_reserved()))
            .sum();
        prop_assert_eq!(pool.in_use(), accounted);

        for live in &mut self.live {
            let c = &live.capture;
            let budget = live.spec.budget as u64;
            let seen = live.fed.len();
            prop_assert_eq!(c.bytes_seen(), seen as u64);
            prop_assert!(c.bytes_retained() <= c.bytes_reserved());
            prop_assert!(c.bytes_retained() <= budget);
            // The margins beyond the cut edges come on top of the budget.
            let margins = match live.spec.mode {
                Mode::HeadAndTail => 2 * CUT_MARGIN as u64,
                _ => CUT_MARGIN as u64,
            };
            prop_assert!(c.bytes_reserved() <= budget + margins);
            if c.bytes_retained() < (seen as u64).min(budget) {
                prop_assert!(c.retention_limited());
            }
            // Once limited, always limited: the flag reports the past.
            prop_assert!(!live.was_limited || c.retention_limited());
            live.was_limited = c.retention_limited();

            // Whatever the pool allowed, the window is the first `h` and the
            // last `t` bytes fed, within the mode's capacities.
            let w = c.window();
            let (h, t) = (w.head.len(), w.tail[0].len() + w.tail[1].len());
            let (head_cap, tail_cap) = live.spec.split();
            // A prefix narrowed for a contended pool is final; when the
            // window widens again the ring takes the rest of the budget.
            prop_assert!(h <= head_cap && h + t <= head_cap + tail_cap);
            prop_assert!(h + t <= seen);
            prop_assert_eq!(w.head, &live.fed[..h]);
            let tail = [w.tail[0], w.tail[1]].concat();
            prop_assert_eq!(tail.as_slice(), &live.fed[seen - t..]);
            if !c.retention_limited() {
                // Not limited: exactly what an unlimited pool would keep.
                let want_h = seen.min(head_cap);
                prop_assert_eq!((h, t), (want_h, (seen - want_h).min(tail_cap)));
            }
        }

        for held in &self.held {
            let r = &held.retained;
            prop_assert_eq!(r.bytes_seen(), held.seen);
            prop_assert_eq!(
                r.bytes_retained(),
                (held.head.len() + held.tail.len()) as u64
            );
            prop_assert_eq!(r.retention_limited(), held.limited);
            let w = r.window();
            prop_assert_eq!(w.head, held.head.as_slice());
            let tail = [w.tail[0], w.tail[1]].concat();
            prop_assert_eq!(tail.as_slice(), held.tail.as_slice());
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn pool_accounts_every_reserved_byte_and_never_exceeds_capacity(
        capacity in 0u64..2000,
        initial in vec(spec(), 1..8),
        ops in vec(op(), 0..60),
    ) {
        let pool = RetentionPool::new(capacity);
        let mut world = World { pool: pool.clone(), live: Vec::new(), held: Vec::new() };
        for spec in initial {
            world.start(spec);
        }
        world.check()?;
        for op in ops {
            world.apply(op);
            world.check()?;
        }
        prop_assert!(pool.peak() <= capacity);
        drop(world);
        prop_assert_eq!(pool.in_use(), 0);
    }
}

fn diagnostics(len: usize) -> Vec<u8> {
    b"helper-diagnostic\n"
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect()
}

#[test]
fn fifty_calls_at_their_limit_share_the_process_budget() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let flood = diagnostics(20_480);
    let mut calls: Vec<StreamCapture> = Vec::new();
    // Calls start one after another and each floods past its own limit;
    // all of them are still alive when the next one starts.
    for _ in 0..50 {
        let mut call = StreamCapture::new(CaptureSettings::stderr(&config), &pool);
        for chunk in flood.chunks(1024) {
            let _ = call.feed(chunk);
            let retained: u64 = calls
                .iter()
                .chain([&call])
                .map(StreamCapture::bytes_retained)
                .sum();
            assert!(retained <= 262_144);
            assert!(pool.in_use() <= 262_144);
        }
        calls.push(call);
    }
    // Each call is fed once, then stays quiet: 262144 / (16384 + 512), the
    // first fifteen keep their full budget and the margin before it, the
    // sixteenth what is left (8,704 bytes, no margin). From then on the
    // pool is contended, but the calls above their share write nothing
    // more and give nothing back: the other thirty-four keep nothing and
    // their marker says why.
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(call.bytes_seen(), 20_480, "call {i}");
        if i < 15 {
            assert_eq!(call.bytes_retained(), 16_384, "call {i}");
            assert_eq!(
                call.bytes_reserved(),
                16_384 + CUT_MARGIN as u64,
                "call {i}"
            );
            assert!(!call.retention_limited(), "call {i}");
        } else if i == 15 {
            assert_eq!(call.bytes_retained(), 8_704, "call {i}");
            assert_eq!(call.bytes_reserved(), 8_704, "call {i}");
            assert!(call.retention_limited(), "call {i}");
        } else {
            assert_eq!(call.bytes_retained(), 0, "call {i}");
            assert!(call.retention_limited(), "call {i}");
            assert_eq!(
                call.render(),
                "[stderr truncated: kept last 0 of 20480 bytes; the pool shared by all calls held it back]\n"
            );
        }
    }
    assert_eq!(pool.in_use(), 262_144);
    assert_eq!(pool.peak(), 262_144);

    // A finished window keeps at most its fair share (262144 / 50 = 5242
    // bytes): the sixteen that held more give the rest back, and the
    // retained text keeps its share until the caller drops it.
    let retained: Vec<Retained> = calls.into_iter().map(StreamCapture::finish).collect();
    for (i, r) in retained.iter().enumerate() {
        let kept = if i < 16 { 5_242 } else { 0 };
        assert_eq!(
            (r.bytes_retained(), r.bytes_reserved()),
            (kept, kept),
            "call {i}"
        );
        assert!(r.retention_limited(), "call {i}");
    }
    assert_eq!(pool.in_use(), 16 * 5_242);
    drop(retained);
    assert_eq!(pool.in_use(), 0);

    // With the leases back, a new call keeps its full budget again.
    let mut call = StreamCapture::new(CaptureSettings::stderr(&config), &pool);
    let _ = call.feed(&flood);
    assert_eq!(call.bytes_retained(), 16_384);
    assert!(!call.retention_limited());
}

#[test]
fn fifty_interleaved_calls_never_hold_more_than_the_process_budget() {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let flood = diagnostics(20_480);
    let mut calls: Vec<StreamCapture> = (0..50)
        .map(|_| StreamCapture::new(CaptureSettings::stderr(&config), &pool))
        .collect();
    for chunk in flood.chunks(1024) {
        for call in &mut calls {
            let _ = call.feed(chunk);
            assert!(pool.in_use() <= 262_144);
        }
        let retained: u64 = calls.iter().map(StreamCapture::bytes_retained).sum();
        assert!(retained <= 262_144);
    }
    // Fifty calls want 819200 bytes: the pool is used to the last byte, every
    // reserved byte holds text, and at most sixteen calls can be whole.
    let reserved: u64 = calls.iter().map(StreamCapture::bytes_reserved).sum();
    let retained: u64 = calls.iter().map(StreamCapture::bytes_retained).sum();
    assert_eq!(
        (pool.in_use(), reserved, retained),
        (262_144, 262_144, 262_144)
    );
    let whole = calls.iter().filter(|c| !c.retention_limited()).count();
    assert!(whole <= 16);
    // Every call writes: each keeps at least its fair share (262144 / 50),
    // whoever reached the pool first.
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(call.bytes_seen(), 20_480);
        assert!(
            call.bytes_retained() >= 5_242,
            "call {i}: {}",
            call.bytes_retained()
        );
        if call.retention_limited() {
            assert!(call.bytes_retained() < 16_384);
        } else {
            assert_eq!(call.bytes_retained(), 16_384);
        }
    }
    drop(calls);
    assert_eq!(pool.in_use(), 0);
}
