//! Every view a call produces is redacted: the approval card, the record and
//! its JSON, the audit events and the log's bytes, the excerpt and the
//! rendered streams. The raw bytes stay raw.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime};

use spillguard_core::Input;
use spillguard_core::audit::{LogEntry, LogId, LogWriter};
use spillguard_core::{
    Action, ApprovalCard, AuditEvent, AuditKind, Call, CallKind, CallSettings, CallSpec,
    CaptureSettings, Config, DebugGrant, ExitStatus, Outcome, RetentionPool, State, StreamCapture,
    StreamName,
};

const TOKEN: &str = "ghp_Q7x9K2m4P8z3W6v1Q7x9K2m4P8z3W6v1Q7x9";
const BEARER: &str = "Q7x9K2m4-bearer-P8z3W6v1";
const PASSWORD: &str = "Q7x9hunter2P8z3";
const URL_PASSWORD: &str = "Q7x9urlpassP8z3";

/// Every sensitive string of these tests.
const SECRETS: [&str; 5] = [TOKEN, BEARER, PASSWORD, URL_PASSWORD, "corp-4242"];

/// The tests' time origin; every later instant is an offset from it.
#[allow(clippy::disallowed_methods)]
fn epoch() -> Instant {
    Instant::now()
}

fn assert_no_secret(what: &str, bytes: &[u8]) {
    for secret in SECRETS {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{secret} in {what}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
}

fn config() -> Config {
    Config::from_toml_str("[helper_output]\nredact_extra_patterns = [\"corp-[0-9]{4}\"]\n").unwrap()
}

fn spec() -> CallSpec {
    CallSpec {
        call_id: "c_1".into(),
        session_id: "s_1".into(),
        kind: CallKind::Action,
        action: "git.push".into(),
        target: format!("https://deploy:{URL_PASSWORD}@git.example.com/repo.git"),
        summary: format!("push as GITHUB_TOKEN={TOKEN} for ticket corp-4242"),
        card_lines: Vec::new(),
    }
}

#[derive(Default)]
struct Seen {
    audit: Vec<AuditEvent>,
    cards: Vec<ApprovalCard>,
    outcome: Option<Box<Outcome>>,
}

fn drain(call: &mut Call, seen: &mut Seen) {
    while let Some(action) = call.poll_action() {
        match action {
            Action::Audit(event) => seen.audit.push(event),
            Action::ShowApprovalCard(card) => seen.cards.push(card),
            Action::Finished(outcome) => seen.outcome = Some(outcome),
            _ => {}
        }
    }
}

fn log_bytes(events: &[AuditEvent]) -> Vec<u8> {
    let mut writer = LogWriter::create(LogId([7; 16]), None);
    let mut bytes = Vec::new();
    for event in events {
        writer
            .append_to(&LogEntry::Call(event.clone()), None, &mut bytes)
            .unwrap();
    }
    bytes
}

#[test]
fn a_call_redacts_its_card_record_audit_log_excerpt_and_streams() {
    let config = config();
    let pool = RetentionPool::new(config.stderr_retained_process_bytes);
    let t0 = epoch();
    let settings = CallSettings::action(&config);
    let mut call = Call::new(spec(), settings, &pool, t0, SystemTime::UNIX_EPOCH);
    let mut seen = Seen::default();
    call.handle(
        t0,
        Input::Validated {
            needs_approval: true,
        },
    )
    .unwrap();
    drain(&mut call, &mut seen);

    let target = "https://deploy:[redacted: url-userinfo]@git.example.com/repo.git";
    assert_eq!(seen.cards.len(), 1);
    assert_eq!(seen.cards[0].target, target);
    assert_eq!(
        seen.cards[0].summary,
        "push as GITHUB_TOKEN=[redacted: token-assignment] for ticket [redacted: extra-0]"
    );
    assert_eq!(call.spec().target, target);

    call.handle(t0, Input::ApprovalGranted).unwrap();
    drain(&mut call, &mut seen);
    call.handle(t0, Input::Spawned { pid: 10 }).unwrap();
    // The header arrives in three writes, split inside the scheme and the token.
    let line = format!("curl: > Authorization: Bearer {BEARER}\ncurl: < 401 for corp-4242\n");
    let (a, b) = line.split_at(27);
    let (b, c) = b.split_at(12);
    for part in [a, b, c] {
        let _ = call.handle(t0, Input::Stderr(part.as_bytes()));
    }
    let _ = call.handle(
        t0,
        Input::Stdout(
            format!("{{\"user\": \"deploy\", \"password\": \"{PASSWORD}\"}}\n").as_bytes(),
        ),
    );
    call.handle(
        t0 + Duration::from_millis(5),
        Input::Exited(ExitStatus::code(1)),
    )
    .unwrap();
    call.handle(t0 + Duration::from_millis(5), Input::StdoutEof)
        .unwrap();
    call.handle(t0 + Duration::from_millis(5), Input::StderrEof)
        .unwrap();
    drain(&mut call, &mut seen);
    let outcome = seen.outcome.take().unwrap();
    let record = &outcome.record;

    assert_eq!(record.state, State::FailedLocal);
    assert_eq!(record.target, target);
    assert_eq!((record.stderr_redactions, record.stdout_redactions), (2, 1));
    assert_eq!(record.stderr_bytes_seen, line.len() as u64);
    let stderr_text = "curl: > Authorization: Bearer [redacted: bearer-token]\n\
                       curl: < 401 for [redacted: extra-0]\n";
    assert_eq!(outcome.agent_excerpt(), stderr_text);
    assert_eq!(outcome.stderr.render(), stderr_text);
    assert_eq!(
        outcome.stdout.render(),
        "{\"user\": \"deploy\", \"password\": \"[redacted: password-assignment]\"}\n"
    );
    let per_rule: Vec<(&str, u64)> = outcome.redactions.stderr.iter().collect();
    assert_eq!(per_rule, [("bearer-token", 1), ("extra-0", 1)]);
    let per_rule: Vec<(&str, u64)> = outcome.redactions.stdout.iter().collect();
    assert_eq!(per_rule, [("password-assignment", 1)]);
    // The raw bytes stay raw: the explicit accessors show them.
    assert_eq!(outcome.stderr.to_vec(), line.as_bytes());
    assert_eq!(outcome.stderr.render_unredacted(), line);

    let json = record.to_json();
    assert!(json.contains("\"stderr_redactions\":2,\"stdout_redactions\":1"));
    assert_no_secret("the record's JSON", json.as_bytes());
    assert_no_secret("the excerpt", outcome.agent_excerpt().as_bytes());
    assert_no_secret("the stdout", outcome.stdout.render().as_bytes());

    // Audit: attempt, transitions, the card, final record; the log holds
    // no secret, and its card is the card shown, byte for byte.
    assert_eq!(seen.audit.len(), 8);
    let logged_card: Vec<&str> = seen
        .audit
        .iter()
        .filter_map(|e| match &e.kind {
            AuditKind::CardShown { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(logged_card, [seen.cards[0].text.as_str()]);
    assert_no_secret("the card", seen.cards[0].text.as_bytes());
    let attempts: Vec<&str> = seen
        .audit
        .iter()
        .filter_map(|e| match &e.kind {
            AuditKind::Attempt { target, .. } => Some(target.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [target]);
    let at = seen
        .audit
        .iter()
        .position(|e| matches!(e.kind, AuditKind::Attempt { .. }))
        .unwrap();
    let AuditKind::Final(last) = &seen.audit[7].kind else {
        panic!("{:?}", seen.audit[7]);
    };
    assert_eq!(**last, *record);
    let log = log_bytes(&seen.audit);
    assert_no_secret("the audit log", &log);
    // The same events with the raw spec would have leaked: the check bites.
    let mut raw = seen.audit.clone();
    raw[at].kind = AuditKind::Attempt {
        kind: CallKind::Action,
        action: "git.push".into(),
        target: spec().target,
    };
    let leaked = log_bytes(&raw);
    assert!(
        leaked
            .windows(URL_PASSWORD.len())
            .any(|w| w == URL_PASSWORD.as_bytes())
    );
}

#[test]
fn failure_strings_are_redacted_before_the_record_keeps_them() {
    let config = config();
    let pool = RetentionPool::unlimited();
    let t0 = epoch();
    for (case, expected) in [
        (0, "bad target: password=[redacted: password-assignment]"),
        (1, "exec failed: [redacted: github-token] not found"),
        (2, "audit log: disk full at [redacted: extra-0]"),
    ] {
        let mut call = Call::new(
            spec(),
            CallSettings::action(&config),
            &pool,
            t0,
            SystemTime::UNIX_EPOCH,
        );
        let mut seen = Seen::default();
        match case {
            0 => call
                .handle(
                    t0,
                    Input::ValidationFailed(format!("bad target: password={PASSWORD}")),
                )
                .unwrap(),
            1 => {
                call.handle(
                    t0,
                    Input::Validated {
                        needs_approval: false,
                    },
                )
                .unwrap();
                drain(&mut call, &mut seen);
                call.handle(
                    t0,
                    Input::SpawnFailed {
                        kind: std::io::ErrorKind::NotFound,
                        message: format!("exec failed: {TOKEN} not found"),
                    },
                )
                .unwrap();
            }
            _ => {
                call.handle(
                    t0,
                    Input::Validated {
                        needs_approval: true,
                    },
                )
                .unwrap();
                drain(&mut call, &mut seen);
                let _ = call.handle(t0, Input::AuditFailed("disk full at corp-4242".into()));
            }
        }
        drain(&mut call, &mut seen);
        let record = &seen.outcome.as_ref().unwrap().record;
        assert_eq!(record.state, State::FailedBeforeDispatch, "case {case}");
        assert_eq!(record.failure.as_deref(), Some(expected));
        assert_no_secret("the audit log", &log_bytes(&seen.audit));
    }
}

#[test]
fn a_debug_grant_does_not_switch_redaction_off() {
    let config = config();
    let t0 = epoch();
    let grant = DebugGrant::new(&config, t0, Duration::from_secs(60), 262_144).unwrap();
    let settings = CallSettings::action(&config).with_debug(&config, Some(&grant), t0);
    assert!(settings.stderr.debug);
    let mut capture = StreamCapture::new(settings.stderr, &RetentionPool::unlimited());
    let _ = capture.feed(format!("token={TOKEN}\n").as_bytes());
    assert_eq!(capture.render(), "token=[redacted: token-assignment]\n");
}

#[test]
fn the_fingerprint_covers_the_bytes_not_the_text() {
    let bytes = format!("password={PASSWORD}\nok\n");
    let plain = CaptureSettings::tail(StreamName::Stderr, 1024);
    let extra = CaptureSettings::stderr(&config());
    let fingerprint = |settings: CaptureSettings| {
        let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
        let _ = capture.feed(bytes.as_bytes());
        (capture.render(), capture.finish().fingerprint())
    };
    let (text, a) = fingerprint(plain.clone());
    assert_eq!(text, "password=[redacted: password-assignment]\nok\n");
    let (_, b) = fingerprint(extra);
    assert_eq!(a, b);
    // The redacted text as bytes has another fingerprint: it is not hashed.
    let mut other = StreamCapture::new(plain, &RetentionPool::unlimited());
    let _ = other.feed(text.as_bytes());
    assert_ne!(other.finish().fingerprint(), a);
}
