//! Throughput of the MCP stdout line guard and the client-side scanner
//! (speed goals live here and in `cargo xtask bench`, not in timed
//! tests). The guard holds each line whole and checks it as one
//! JSON-RPC message, so its cost per byte is what `spillguard stdio --mcp`
//! adds to a copy; the goal is that it stays well above a pipe's speed
//! (a few GB/s).
//!
//! Each iteration feeds 16 MiB: 1 MiB messages whose result is one long
//! string (the bulk row of `cargo xtask bench`), or small messages with
//! nested objects, read into the guard's own buffer 64 KiB at a time.
//!
//! Run: `cargo bench -p spillguard-core --bench line_guard`.

use divan::counter::BytesCount;
use divan::{Bencher, black_box};
use spillguard_core::{ClientLines, Segment, StdoutLineGuard};

fn main() {
    divan::main();
}

const TOTAL: usize = 16 << 20;

fn long_messages() -> Vec<u8> {
    let mut out = Vec::with_capacity(TOTAL);
    for id in 0..TOTAL >> 20 {
        let mut line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"").into_bytes();
        line.resize((1 << 20) - 3, b'x');
        line.extend_from_slice(b"\"}\n");
        out.extend_from_slice(&line);
    }
    out
}

fn small_messages() -> Vec<u8> {
    let line = br#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"2026-12-01T21:00:00+00:00 \u00e9"}],"isError":false,"meta":{"n":-1.5e3,"ok":true,"none":null}}}"#;
    let mut out = Vec::with_capacity(TOTAL + line.len());
    while out.len() < TOTAL {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

fn guard(bencher: Bencher<'_, '_>, input: &[u8]) {
    let mut guard = StdoutLineGuard::new();
    bencher
        .counter(BytesCount::new(input.len()))
        .bench_local(|| {
            let mut forwarded = 0_usize;
            for chunk in input.chunks(64 << 10) {
                let room = guard.spare();
                room[..chunk.len()].copy_from_slice(chunk);
                let _ = guard.filled(chunk.len(), |segment| {
                    if let Segment::Forward(line) = segment {
                        forwarded += line.bytes.len();
                    }
                    Ok::<(), ()>(())
                });
            }
            black_box(forwarded)
        });
}

#[divan::bench]
fn stdout_guard_1_mib_messages(bencher: Bencher<'_, '_>) {
    guard(bencher, &long_messages());
}

#[divan::bench]
fn stdout_guard_small_nested_messages(bencher: Bencher<'_, '_>) {
    guard(bencher, &small_messages());
}

#[divan::bench]
fn client_lines_1_mib_messages(bencher: Bencher<'_, '_>) {
    let input = long_messages();
    let mut client = ClientLines::new();
    bencher
        .counter(BytesCount::new(input.len()))
        .bench_local(|| {
            let mut seen = 0_usize;
            for chunk in input.chunks(64 << 10) {
                client.feed(chunk, |_| seen += 1);
            }
            black_box(seen)
        });
}
