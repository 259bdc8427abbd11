//! The seed corpus of the fuzz targets (`cargo xtask fuzz --write-seeds`):
//! a few small inputs made from real output of the library, so that the
//! fuzzer starts from well-formed frames, anchors, configurations and
//! records rather than from nothing.
//!
//! The input layouts are the targets' own (see `core/fuzz/fuzz_targets`):
//! `audit_verifier` takes a flags byte and a chunking plan before the
//! log, `capture_render` four settings bytes and a plan before the stream.

use std::path::Path;
use std::sync::Arc;

use spillguard_std::proto::audit::{Anchor, ExpectedCall, Key};
use spillguard_std::proto::{CallRecord, Config};
use spillguard_std::{ChainedFileAudit, ChainedFileOptions, Host, HostOptions};

/// The key of the sealed seed log; the `audit_verifier` target verifies
/// with it when its flags byte says so (`common::SEED_KEY`).
const SEED_KEY: [u8; 32] = [0x5a; 32];

/// Writes every seed file; returns how many.
pub fn write_all(corpus: &Path) -> Result<usize, String> {
    let scratch =
        std::env::temp_dir().join(format!("spillguard-fuzz-seeds-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let (plain, plain_anchor, record) = audited_run(&scratch, "plain", None)?;
    let (sealed, sealed_anchor, _) =
        audited_run(&scratch, "sealed", Some(Key::from_bytes(SEED_KEY)))?;
    let _ = std::fs::remove_dir_all(&scratch);

    let mut seeds: Vec<(&str, &str, Vec<u8>)> = Vec::new();
    // flags: bit 0 the seed key, bit 1 the anchor check. Plan: length, bytes.
    let verifier = |flags: u8, plan: &[u8], log: &[u8]| {
        let mut input = vec![flags, plan.len() as u8];
        input.extend_from_slice(plan);
        input.extend_from_slice(log);
        input
    };
    seeds.push(("audit_verifier", "plain", verifier(0b10, &[], &plain)));
    seeds.push((
        "audit_verifier",
        "plain-chunked",
        verifier(0b10, &[4, 200, 17], &plain),
    ));
    seeds.push(("audit_verifier", "sealed", verifier(0b11, &[], &sealed)));
    // Bit 2: the data describes a log of well-formed frames, rearranged:
    // a record count, then (edit, argument) pairs.
    seeds.push((
        "audit_verifier",
        "rearranged",
        verifier(0b110, &[], &[7, 1, 0x23, 2, 0x51, 0, 9]),
    ));
    seeds.push((
        "audit_verifier",
        "rearranged-sealed",
        verifier(0b111, &[3], &[5, 3, 40]),
    ));
    let torn = &plain[..plain.len() - 40];
    seeds.push(("audit_verifier", "torn", verifier(0, &[9], torn)));

    // The format-1 text form (no offset) that earlier versions wrote.
    let parsed: Anchor = plain_anchor.parse().map_err(|e| format!("{e}"))?;
    let format1 = Anchor::new(parsed.log_id, parsed.records, parsed.head);
    seeds.push(("audit_anchor", "format-1", format1.to_string().into_bytes()));
    seeds.push(("audit_anchor", "plain", plain_anchor.into_bytes()));
    seeds.push(("audit_anchor", "maced", sealed_anchor.into_bytes()));

    let configs = [
        (
            "default",
            "[helper_output]\nstderr_retained_per_call_bytes = 16384\nstderr_retained_process_bytes = 262144\nstderr_agent_excerpt_bytes = 4096\nshutdown_grace_seconds = 5\nretain = \"tail\"\n",
        ),
        (
            "head-and-tail",
            "[host]\nname = \"bridge\"\n\n[helper_output]\nretain = \"head_and_tail\"\nstderr_head_bytes = 2048\nstderr_kill_after_bytes = 10485760\nshutdown_grace_seconds = 0.25\ndebug_ceiling_bytes = 1048576\n",
        ),
        (
            "invalid",
            "[helper_output]\nstderr_agent_excerpt_bytes = 20000\n",
        ),
    ];
    for (name, text) in configs {
        seeds.push(("config", name, text.as_bytes().to_vec()));
    }

    let record_line = serde_json::to_string(&record).map_err(|e| e.to_string())?;
    let expected_line =
        serde_json::to_string(&ExpectedCall::from_record(&record)).map_err(|e| e.to_string())?;
    seeds.push((
        "expected_lifecycle",
        "record",
        format!("{record_line}\n").into_bytes(),
    ));
    seeds.push((
        "expected_lifecycle",
        "expected",
        format!("{expected_line}\n").into_bytes(),
    ));
    seeds.push((
        "expected_lifecycle",
        "array",
        format!("[{record_line},\n{expected_line}]\n").into_bytes(),
    ));

    // Settings bytes: mode (0 tail, 1 head, 2 head+tail), budget / 3,
    // head bytes, ceiling / 5 (0: none). Then a plan and the stream.
    let stream =
        "progress 1/3\nprogress 2/3 — façade naïve ☃\nerror: connection reset (errno 104)\n";
    let capture = |settings: [u8; 4], plan: &[u8]| {
        let mut input = settings.to_vec();
        input.push(plan.len() as u8);
        input.extend_from_slice(plan);
        input.extend_from_slice(stream.as_bytes());
        input
    };
    seeds.push(("capture_render", "tail", capture([0, 10, 0, 0], &[3, 1, 1])));
    seeds.push(("capture_render", "head", capture([1, 8, 0, 0], &[31])));
    seeds.push((
        "capture_render",
        "head-and-tail",
        capture([2, 12, 9, 4], &[2, 5]),
    ));
    seeds.push(("capture_render", "whole", capture([0, 200, 0, 0], &[])));

    for (target, name, bytes) in &seeds {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(format!("seed-{name}"));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(seeds.len())
}

/// One call through a host that writes a chained audit log: the log's
/// bytes, its anchor's text, and the call's record.
fn audited_run(
    dir: &Path,
    name: &str,
    key: Option<Key>,
) -> Result<(Vec<u8>, String, CallRecord), String> {
    let path = dir.join(format!("{name}.log"));
    let options = ChainedFileOptions {
        key,
        ..ChainedFileOptions::default()
    };
    let log = Arc::new(ChainedFileAudit::open(&path, options).map_err(|e| e.to_string())?);
    let host = Host::new(
        Config::default(),
        HostOptions {
            audit: Some(log.clone()),
            ..HostOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let outcome = host
        .shell("echo 'warning: disk 91% full' >&2; echo '{\"ok\":false}'; exit 3")
        .call_id(format!("c_seed_{name}"))
        .session_id("s_seed")
        .action("local.sh")
        .target("localhost")
        .summary("a failing script")
        .run();
    let anchor = log.anchor().to_string();
    drop(host);
    drop(log);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((bytes, anchor, outcome.record))
}
