//! A confined call in virtual time: what the driver reports it enforced
//! and what the tree did end up in the record, the limit hit is audited
//! just before the final record, and the card states the bounds.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::{
    Action, AuditKind, Call, CallKind, CallSettings, CallSpec, Config, Confinement, Enforcement,
    ExitStatus, LimitHit, Limits, Network, RetentionPool, Sandbox, State, TreeReport,
};

/// The tests' time origin; every later instant is an offset from it.
#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

fn spec() -> CallSpec {
    CallSpec {
        call_id: "c_1".into(),
        session_id: "s_1".into(),
        kind: CallKind::Action,
        action: "build".into(),
        target: "ci".into(),
        summary: "make".into(),
        card_lines: Vec::new(),
    }
}

fn confined(limits: Limits) -> CallSettings {
    CallSettings {
        confinement: Confinement {
            limits,
            sandbox: Sandbox {
                read_only: vec!["/srv/in".into()],
                network: Network::None,
                ..Sandbox::default()
            },
            ..Confinement::default()
        },
        ..CallSettings::action(&Config::default())
    }
}

/// Runs a call that the kernel ended with `exit` after `report`; returns
/// every audit kind and the final record.
fn run(settings: CallSettings, report: TreeReport, exit: ExitStatus) -> (Vec<AuditKind>, Call) {
    let pool = RetentionPool::new(1 << 20);
    let t0 = epoch();
    let mut call = Call::new(spec(), settings, &pool, t0, SystemTime::UNIX_EPOCH);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: false,
        },
    )
    .unwrap();
    let mut audits = Vec::new();
    let drain = |call: &mut Call, audits: &mut Vec<AuditKind>| {
        while let Some(action) = call.poll_action() {
            if let Action::Audit(event) = action {
                audits.push(event.kind);
            }
        }
    };
    drain(&mut call, &mut audits);
    call.handle(t0, Input::Spawned { pid: 42 }).unwrap();
    let _ = call.handle(
        t0,
        Input::Enforcement(Enforcement {
            enforced: vec!["cgroup-v2".into(), "rlimit".into(), "netns".into()],
            not_enforced: Vec::new(),
            tree_kill: "cgroup-v2".into(),
        }),
    );
    let t1 = t0 + Duration::from_millis(30);
    let _ = call.handle(t1, Input::TreeReport(report));
    call.handle(t1, Input::Exited(exit)).unwrap();
    call.handle(t1, Input::StdoutEof).unwrap();
    call.handle(t1, Input::StderrEof).unwrap();
    drain(&mut call, &mut audits);
    assert!(call.state().is_terminal());
    (audits, call)
}

fn final_record(audits: &[AuditKind]) -> &spillguard_core::CallRecord {
    match audits.last() {
        Some(AuditKind::Final(record)) => record,
        other => panic!("the last audit is not the final record: {other:?}"),
    }
}

#[test]
fn an_oom_kill_is_limit_hit_memory_audited_before_the_final_record() {
    let limits = Limits {
        memory_max: Some(256 << 20),
        pids_max: Some(64),
        ..Limits::default()
    };
    let report = TreeReport {
        oom_kills: 1,
        peak_memory_bytes: Some(268_435_456),
        peak_pids: Some(3),
        ..TreeReport::default()
    };
    let (audits, _) = run(confined(limits.clone()), report, ExitStatus::signal(9));
    let n = audits.len();
    assert!(matches!(
        audits[n - 2],
        AuditKind::LimitHit {
            limit: LimitHit::Memory
        }
    ));
    let record = final_record(&audits);
    assert_eq!(record.state, State::FailedLocal);
    assert_eq!(record.limit_hit, Some(LimitHit::Memory));
    assert_eq!(record.limits, Some(limits));
    assert_eq!(record.sandbox.as_ref().unwrap().network, Network::None);
    assert_eq!(record.enforced, ["cgroup-v2", "rlimit", "netns"]);
    assert!(record.not_enforced.is_empty());
    assert_eq!(record.tree_kill.as_deref(), Some("cgroup-v2"));
    assert_eq!(record.tree_peak_memory_bytes, Some(268_435_456));
    assert_eq!(record.tree_peak_pids, Some(3));
    let json = record.to_json();
    assert!(json.contains(r#""limit_hit":"memory""#), "{json}");
}

#[test]
fn a_clean_exit_has_no_limit_hit_and_no_such_audit() {
    let limits = Limits {
        pids_max: Some(64),
        ..Limits::default()
    };
    let (audits, _) = run(confined(limits), TreeReport::default(), ExitStatus::code(0));
    assert!(
        !audits
            .iter()
            .any(|a| matches!(a, AuditKind::LimitHit { .. }))
    );
    let record = final_record(&audits);
    assert_eq!(record.state, State::Completed);
    assert_eq!(record.limit_hit, None);
}

#[test]
fn an_unconfined_call_records_no_limits_and_no_sandbox() {
    let settings = CallSettings::action(&Config::default());
    let (audits, _) = run(settings, TreeReport::default(), ExitStatus::code(0));
    let record = final_record(&audits);
    assert_eq!(record.limits, None);
    assert_eq!(record.sandbox, None);
    assert_eq!(record.limit_hit, None);
}

#[test]
fn the_card_states_the_bounds_after_the_callers_lines() {
    let pool = RetentionPool::new(1 << 20);
    let t0 = epoch();
    let limits = Limits {
        memory_max: Some(512 << 20),
        cpu_seconds: Some(60),
        ..Limits::default()
    };
    let mut call = Call::new(spec(), confined(limits), &pool, t0, SystemTime::UNIX_EPOCH);
    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    let card = std::iter::from_fn(|| call.poll_action())
        .find_map(|a| match a {
            Action::ShowApprovalCard(card) => Some(card),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        card.text,
        "action: build\ntarget: ci\nsummary: make\n\
         limits: memory 512 MiB, CPU 60 s\n\
         sandbox: read-only /srv/in; network none\n\
         approval expires: 120000 ms after it is shown"
    );
}

/// Each kind of limit is one row that every reader follows: its key in a
/// `limits` table sets exactly its field, its card text is what the card
/// shows, zero is refused by its key, and `LIMIT_KEYS` lists the rows.
#[test]
fn every_limit_kind_is_one_row_that_the_readers_follow() {
    use spillguard_core::{LIMIT_KEYS, LIMIT_KINDS, Limits};
    let keys: Vec<&str> = LIMIT_KINDS.iter().map(|kind| kind.key).collect();
    assert_eq!(LIMIT_KEYS, keys.as_slice());
    assert_eq!(
        keys,
        [
            "memory_max",
            "pids_max",
            "cpu_seconds",
            "nofile",
            "file_size_max"
        ]
    );
    for kind in &LIMIT_KINDS {
        assert_eq!(kind.flag, format!("--{}", kind.key.replace('_', "-")));
        let mut confinement = Confinement::default();
        let table: toml::Table = format!("{} = 2048", kind.key).parse().unwrap();
        confinement.merge_limits(&table, "t").unwrap();
        let mut only = Limits::default();
        kind.set(&mut only, 2048);
        assert_eq!(confinement.limits, only, "{}", kind.key);
        assert_eq!(kind.value(&confinement.limits), Some(2048));
        assert_eq!(
            confinement.card_lines(),
            [("limits".to_owned(), kind.card_text(2048))],
            "{}",
            kind.key
        );
        assert_eq!(
            kind.check(0).unwrap_err().to_string(),
            format!("{}: must be greater than zero", kind.key)
        );
        assert_eq!(
            confinement.requires_tree(),
            kind.needs_tree(),
            "{}",
            kind.key
        );
    }
    assert_eq!(
        LIMIT_KINDS[1]
            .check(u64::from(u32::MAX) + 1)
            .unwrap_err()
            .to_string(),
        "pids_max: is larger than 4294967295"
    );
}
