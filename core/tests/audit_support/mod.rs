//! Shared by the audit tests: realistic lifecycle events from real `Call`s
//! driven by hand in virtual time, a seeded generator, and log builders.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::audit::{Anchor, Key, LogEntry, LogId, LogWriter, Nonce};
use spillguard_core::{
    Action, AuditEvent, AuditKind, Call, CallKind, CallSettings, CallSpec, CancelReason, Config,
    ExitStatus, RetentionPool,
};

/// The virtual clock's origin, read once per call.
#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

/// SplitMix64: a small seeded generator, so every run sees the same cases.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for chunk in out.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        out
    }
}

/// The ways a generated call can go.
pub const PATHS: u64 = 8;

/// The audit events of one call, driven through `path` (0..PATHS):
/// completed, denied, cancelled after dispatch, failed locally, discovery,
/// validation failed, approval expired, spawn failed. The lifecycle's
/// events only: the card's text (`AuditKind::CardShown`) is left out, so
/// that the logs these tests build keep their sizes and counts (the card
/// event has tests of its own: `audit_roundtrip.rs`, `audit_views.rs`).
pub fn call_events(call: u64, session: u64, path: u64) -> Vec<AuditEvent> {
    let mut events = call_events_with_card(call, session, path);
    events.retain(|e| !matches!(e.kind, AuditKind::CardShown { .. }));
    events
}

/// [`call_events`] with the card's event where the call shows a card.
pub fn call_events_with_card(call: u64, session: u64, path: u64) -> Vec<AuditEvent> {
    let config = Config::default();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let kind = if path == 4 {
        CallKind::Discovery
    } else {
        CallKind::Action
    };
    let spec = CallSpec {
        call_id: format!("c_{call:05}"),
        session_id: format!("s_{session:03}"),
        kind,
        action: if path == 4 { "dns.lookup" } else { "ssh.exec" }.into(),
        target: format!("deploy@web-{}", call % 7),
        summary: "systemctl restart web".into(),
        card_lines: Vec::new(),
    };
    let settings = if path == 4 {
        CallSettings::discovery(&config)
    } else {
        CallSettings::action(&config)
    };
    let t0 = epoch();
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000 + call * 3);
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut c = Call::new(spec, settings, &pool, t0, wall);
    let mut events = Vec::new();
    let mut drain = |c: &mut Call| {
        while let Some(action) = c.poll_action() {
            if let Action::Audit(event) = action {
                events.push(event);
            }
        }
    };
    match path {
        5 => {
            c.handle(
                ms(1),
                Input::ValidationFailed("target not in inventory".into()),
            )
            .unwrap();
            drain(&mut c);
            return events;
        }
        4 => c
            .handle(
                ms(1),
                Input::Validated {
                    needs_approval: false,
                },
            )
            .unwrap(),
        _ => c
            .handle(
                ms(1),
                Input::Validated {
                    needs_approval: true,
                },
            )
            .unwrap(),
    }
    drain(&mut c);
    match path {
        1 => {
            c.handle(ms(900), Input::ApprovalDenied).unwrap();
            drain(&mut c);
            return events;
        }
        6 => {
            let _ = c.handle(ms(200_000), Input::Timeout);
            drain(&mut c);
            return events;
        }
        4 => {}
        _ => c.handle(ms(1_500), Input::ApprovalGranted).unwrap(),
    }
    drain(&mut c);
    if path == 7 {
        c.handle(
            ms(1_501),
            Input::SpawnFailed {
                kind: std::io::ErrorKind::NotFound,
                message: "No such file or directory (os error 2)".into(),
            },
        )
        .unwrap();
        drain(&mut c);
        return events;
    }
    c.handle(
        ms(1_502),
        Input::Spawned {
            pid: 40_000 + call as u32,
        },
    )
    .unwrap();
    for n in 0..(call % 5) {
        let _ = c.handle(ms(1_510 + n), Input::Stderr(&vec![b'x'; 10_000]));
    }
    match path {
        2 => {
            let _ = c.handle(ms(2_000), Input::Cancel(CancelReason::Requested));
            drain(&mut c);
            c.handle(ms(2_010), Input::Exited(ExitStatus::signal(15)))
                .unwrap();
        }
        3 => c
            .handle(ms(1_800), Input::Exited(ExitStatus::code(2)))
            .unwrap(),
        _ => c
            .handle(ms(1_800), Input::Exited(ExitStatus::code(0)))
            .unwrap(),
    }
    c.handle(ms(2_020), Input::StdoutEof).unwrap();
    c.handle(ms(2_020), Input::StderrEof).unwrap();
    drain(&mut c);
    events
}

/// At least `min_events` events from calls cycling through every path,
/// a new session every 10 calls.
pub fn events(min_events: usize) -> Vec<AuditEvent> {
    let mut all = Vec::new();
    let mut call = 0;
    while all.len() < min_events {
        all.extend(call_events(call, call / 10, (call * 5 + call / 8) % PATHS));
        call += 1;
    }
    all
}

/// A log: its bytes, the offset where each frame starts (plus the end),
/// and the anchor taken after the last append.
#[derive(Debug, Clone)]
pub struct Log {
    pub bytes: Vec<u8>,
    pub bounds: Vec<usize>,
    pub anchor: Anchor,
    pub log_id: LogId,
}

impl Log {
    pub fn records(&self) -> usize {
        self.bounds.len() - 1
    }

    pub fn frame(&self, index: usize) -> &[u8] {
        &self.bytes[self.bounds[index]..self.bounds[index + 1]]
    }

    /// The frames, one `Vec` each.
    pub fn frames(&self) -> Vec<Vec<u8>> {
        (0..self.records())
            .map(|i| self.frame(i).to_vec())
            .collect()
    }
}

/// Writes `entries` to a new log (sealed if `key`), nonces from `rng`.
pub fn write_log(entries: &[LogEntry], key: Option<&Key>, rng: &mut Rng) -> Log {
    let log_id = LogId(rng.bytes());
    let mut writer = LogWriter::create(log_id, key);
    let mut bytes = Vec::new();
    let mut bounds = vec![0];
    for entry in entries {
        let nonce: Option<Nonce> = key.map(|_| rng.bytes());
        writer.append_to(entry, nonce, &mut bytes).unwrap();
        bounds.push(bytes.len());
    }
    Log {
        bytes,
        bounds,
        anchor: writer.anchor(),
        log_id,
    }
}

pub fn call_entries(events: &[AuditEvent]) -> Vec<LogEntry> {
    events.iter().cloned().map(LogEntry::Call).collect()
}

pub fn concat(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.concat()
}

pub fn test_key() -> Key {
    Key::from_bytes(*b"spillguard test key, 32 bytes ok")
}

/// What an attacker without the key can do to frames: an independent
/// implementation of the documented layout (header, postcard body, BLAKE3
/// chain hash), used to rewrite header fields and re-hash.
pub mod forge {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct Body {
        pub version: u8,
        pub seq: u64,
        pub log_id: [u8; 16],
        pub prev: [u8; 32],
        pub payload: Payload,
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub enum Payload {
        Plain(Vec<u8>),
        Sealed {
            key_id: [u8; 8],
            nonce: [u8; 24],
            ciphertext: Vec<u8>,
        },
    }

    pub fn decode(frame: &[u8]) -> Body {
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(frame.len(), 8 + len);
        let (body, rest) = postcard::take_from_bytes::<Body>(&frame[8..frame.len() - 32]).unwrap();
        assert!(rest.is_empty());
        body
    }

    pub fn hash_of(frame: &[u8]) -> [u8; 32] {
        frame[frame.len() - 32..].try_into().unwrap()
    }

    /// Encodes `body` as a frame with a correct header and chain hash.
    pub fn encode(body: &Body) -> Vec<u8> {
        let encoded = postcard::to_allocvec(body).unwrap();
        let len = (encoded.len() + 32) as u32;
        let mut frame = Vec::with_capacity(8 + len as usize);
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&(!len).to_le_bytes());
        frame.extend_from_slice(&encoded);
        let mut hasher = blake3::Hasher::new_derive_key("spillguard audit chain v1");
        hasher.update(&frame);
        frame.extend_from_slice(hasher.finalize().as_bytes());
        frame
    }

    /// `frame` with its log id, sequence number and previous hash
    /// rewritten, re-hashed. Works on the bytes: the body opens with the
    /// version, the sequence number as a varint, the log id and the
    /// previous hash; the payload after them is kept as it is.
    pub fn relink(frame: &[u8], log_id: [u8; 16], seq: u64, prev: [u8; 32]) -> Vec<u8> {
        let body = &frame[8..frame.len() - 32];
        let varint = body[1..].iter().position(|b| b & 0x80 == 0).unwrap() + 1;
        let payload = &body[1 + varint + 48..];
        let mut new_body = vec![body[0]];
        new_body.extend(postcard::to_allocvec(&seq).unwrap());
        new_body.extend_from_slice(&log_id);
        new_body.extend_from_slice(&prev);
        new_body.extend_from_slice(payload);
        let len = (new_body.len() + 32) as u32;
        let mut forged = Vec::with_capacity(8 + len as usize);
        forged.extend_from_slice(&len.to_le_bytes());
        forged.extend_from_slice(&(!len).to_le_bytes());
        forged.extend_from_slice(&new_body);
        let mut hasher = blake3::Hasher::new_derive_key("spillguard audit chain v1");
        hasher.update(&forged);
        forged.extend_from_slice(hasher.finalize().as_bytes());
        forged
    }

    /// `frames` rewritten into one valid chain of `log_id`, the first with
    /// sequence number `seq` after the hash `prev`.
    pub fn rechain(frames: &[Vec<u8>], log_id: [u8; 16], seq: u64, prev: [u8; 32]) -> Vec<Vec<u8>> {
        let mut prev = prev;
        frames
            .iter()
            .enumerate()
            .map(|(i, frame)| {
                let forged = relink(frame, log_id, seq + i as u64, prev);
                prev = hash_of(&forged);
                forged
            })
            .collect()
    }

    /// The genesis value of `log_id` (the previous hash of frame 0).
    pub fn genesis(log_id: [u8; 16]) -> [u8; 32] {
        let mut hasher = blake3::Hasher::new_derive_key("spillguard audit genesis v1");
        hasher.update(&log_id);
        *hasher.finalize().as_bytes()
    }
}
