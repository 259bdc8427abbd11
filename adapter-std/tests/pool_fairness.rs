//! Every host of a process draws on one retention pool by default, and the
//! pool is shared fairly: fifty calls flooding at once through two hosts
//! hold at most the process budget between them, and each keeps at least
//! its fair share of it, whoever reached the pool first.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use spillguard_std::proto::{Config, State};
use spillguard_std::{Host, HostOptions};

const FLOOD: u64 = 4 << 20;
const PROCESS_BUDGET: u64 = 262_144;
const PER_CALL: u64 = 16_384;

/// A helper that waits for `go` to exist, then writes `FLOOD` bytes to
/// stderr: every call is live before any of them floods.
fn flood_after(go: &Path) -> String {
    format!(
        "while [ ! -e '{}' ]; do sleep 0.01; done; head -c {FLOOD} /dev/zero | tr '\\0' x 1>&2",
        go.display()
    )
}

#[test]
fn two_hosts_share_one_pool_and_every_call_keeps_its_fair_share() {
    let dir = std::env::temp_dir().join(format!("spillguard-fair-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let go = dir.join("go");
    let script = flood_after(&go);

    let first = Host::new(Config::default(), HostOptions::default()).unwrap();
    let second = Host::new(Config::default(), HostOptions::default()).unwrap();
    let handles: Vec<_> = (0..25)
        .flat_map(|_| [first.shell(&script).start(), second.shell(&script).start()])
        .collect();
    // One pool: each host opened 25 leases, and both see all 50.
    assert_eq!((first.pool().leases(), second.pool().leases()), (50, 50));
    std::fs::write(&go, b"").unwrap();

    let outcomes: Vec<_> = handles.into_iter().map(|h| h.wait()).collect();
    let share = PROCESS_BUDGET / 50;
    let mut sum = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        let r = &outcome.record;
        assert_eq!(r.state, State::Completed, "call {i}");
        assert_eq!(r.stderr_bytes_seen, FLOOD, "call {i}");
        assert!(
            r.stderr_bytes_retained >= share.min(PER_CALL),
            "call {i} kept {} bytes, under its fair share of {share}",
            r.stderr_bytes_retained
        );
        // A call held under its budget says why in its marker.
        let marker = outcome.stderr.window().marker().unwrap();
        let expected = match r.stderr_bytes_retained < PER_CALL {
            true => format!(
                "[stderr truncated: kept last {} of {FLOOD} bytes; the pool shared by all calls held it back]",
                r.stderr_bytes_retained
            ),
            false => format!("[stderr truncated: kept last {PER_CALL} of {FLOOD} bytes]"),
        };
        assert_eq!(marker, expected, "call {i}");
        sum += r.stderr_bytes_retained;
    }
    assert!(sum <= PROCESS_BUDGET, "{sum} bytes retained in all");
    assert!(first.pool().peak() <= PROCESS_BUDGET);
    assert_eq!(first.pool().in_use(), second.pool().in_use());

    // A host may keep a pool of its own.
    let own = Host::new(
        Config::default(),
        HostOptions {
            own_retention_pool: true,
            ..HostOptions::default()
        },
    )
    .unwrap();
    assert_eq!((own.pool().leases(), own.pool().in_use()), (0, 0));
    let alone = own.shell("head -c 65536 /dev/zero | tr '\\0' y 1>&2").run();
    assert_eq!(alone.record.stderr_bytes_retained, PER_CALL);
    assert!(!alone.record.stderr_retention_limited);

    drop(outcomes);
    assert_eq!((first.pool().leases(), first.pool().in_use()), (0, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}
