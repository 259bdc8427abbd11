//! Redaction holds on output as real tools print it: every built-in shape,
//! right after a JSON or C escape, an ANSI colour or OSC sequence or a
//! carriage return, and inside a `serde_json`-encoded string, is redacted
//! (its secret gone, its rule counted), with invalid UTF-8 around it too;
//! the rendering is the same for every chunking.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use spillguard_core::{
    CaptureSettings, Redactor, RetentionPool, StreamCapture, StreamName, provider_samples,
};

/// One example of each built-in rule: (rule, text, the secret in it).
fn shapes() -> Vec<(&'static str, String, String)> {
    let alnum = |n: usize| -> String { "Q7x9K2m4P8z3W6v1a5B0".chars().cycle().take(n).collect() };
    let hex = |n: usize| -> String { "9f86d081884c7d65".chars().cycle().take(n).collect() };
    let body = format!("MIIE{}\n{}", alnum(60), alnum(64));
    vec![
        (
            "private-key",
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"),
            alnum(40),
        ),
        (
            "bearer-token",
            format!("Authorization: Bearer {}", alnum(24)),
            alnum(24),
        ),
        (
            "authorization-header",
            "Authorization: Basic dXNlcjpRN3g5aHVudGVyMg==".into(),
            "dXNlcjpRN3g5aHVudGVyMg".into(),
        ),
        (
            "api-key-header",
            format!("X-Api-Key: {}", alnum(20)),
            alnum(20),
        ),
        (
            "aws-access-key-id",
            "AKIAIOSFODNN7EXAMPLE".into(),
            "IOSFODNN7EXAMPLE".into(),
        ),
        (
            "aws-secret-access-key",
            format!("aws_secret_access_key={}", alnum(40)),
            alnum(40),
        ),
        ("github-token", format!("ghp_{}", alnum(36)), alnum(36)),
        ("gitlab-token", format!("glpat-{}", alnum(20)), alnum(20)),
        (
            "slack-webhook",
            format!(
                "https://hooks.slack.com/services/T0{}/B0{}",
                alnum(8),
                alnum(24)
            ),
            alnum(24),
        ),
        ("slack-token", format!("xoxb-{}", alnum(24)), alnum(24)),
        ("stripe-key", format!("sk_live_{}", alnum(24)), alnum(24)),
        ("google-api-key", format!("AIza{}", alnum(35)), alnum(35)),
        (
            "anthropic-key",
            format!("sk-ant-api03-{}", alnum(30)),
            alnum(30),
        ),
        ("openai-key", format!("sk-proj-{}", alnum(48)), alnum(48)),
        ("npm-token", format!("npm_{}", alnum(36)), alnum(36)),
        ("pypi-token", format!("pypi-{}", alnum(60)), alnum(60)),
        (
            "jwt",
            format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", alnum(20), alnum(30)),
            alnum(30),
        ),
        (
            "sendgrid-key",
            format!("SG.{}.{}", alnum(22), alnum(43)),
            alnum(43),
        ),
        ("digitalocean-token", format!("dop_v1_{}", hex(64)), hex(64)),
        ("vault-token", format!("hvs.{}", alnum(30)), alnum(30)),
        ("shopify-token", format!("shpat_{}", hex(32)), hex(32)),
        ("huggingface-token", format!("hf_{}", alnum(34)), alnum(34)),
        ("twilio-key", format!("AC{}", hex(32)), hex(32)),
        (
            "telegram-bot-token",
            format!("123456789:AA{}", alnum(33)),
            alnum(33),
        ),
        (
            "azure-storage-key",
            format!("AccountKey={}==", alnum(42)),
            alnum(42),
        ),
        (
            "url-userinfo",
            "https://deploy:Q7x9pass99@example.com/x".into(),
            "Q7x9pass99".into(),
        ),
        (
            "flag-argument",
            "--password Q7x9hunter2".into(),
            "Q7x9hunter2".into(),
        ),
        (
            "mysql-password",
            "mysql -u root -pQ7x9hunter2".into(),
            "Q7x9hunter2".into(),
        ),
        (
            "user-password-flag",
            "curl -u admin:Q7x9hunter2".into(),
            "Q7x9hunter2".into(),
        ),
        (
            "password-assignment",
            "password=Q7x9hunter2".into(),
            "Q7x9hunter2".into(),
        ),
        (
            "api-key-assignment",
            "api_key=Q7x9K2m4P8".into(),
            "Q7x9K2m4P8".into(),
        ),
        (
            "secret-assignment",
            "client_secret=Q7x9K2m4P8".into(),
            "Q7x9K2m4P8".into(),
        ),
        (
            "token-assignment",
            "access_token=Q7x9K2m4P8".into(),
            "Q7x9K2m4P8".into(),
        ),
        (
            "signed-url-parameter",
            format!(
                "https://acct.blob.core.windows.net/c?sp=r&sig={}",
                alnum(32)
            ),
            alnum(32),
        ),
        (
            "xml-credential",
            format!("<SecretAccessKey>{}$&amp;</SecretAccessKey>", alnum(30)),
            alnum(30),
        ),
        (
            "password-argument",
            format!("sshpass -p {} ssh web-3", alnum(16)),
            alnum(16),
        ),
        (
            "credential-assignment",
            format!("private_key='{}$k'", alnum(24)),
            alnum(24),
        ),
        (
            "encoded-private-key",
            "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSVE3eDlLMm00UDh6M1c2djFhNUIwUTd4OUsybTRQOHozVzZ2MWE1QjAKLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=".into(),
            "LS0tLS1CRUdJTiBFQyBQUklW".into(),
        ),
        (
            "encoded-user-password",
            "ZGVwbG95OlE3eDlodW50ZXIy".into(),
            "ZGVwbG95OlE3eDlodW50ZXIy".into(),
        ),
        (
            "encoded-credentials-json",
            "eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoiWkdWd2JHOTVPbEUzZURsb2RXNTBaWEl5In19fQ==".into(),
            "eyJhdXRocyI6eyJyZWdpc3Ry".into(),
        ),
        (
            "cookie-value",
            format!("Cookie: lang=en; sid={}; theme=dark", alnum(20)),
            alnum(20),
        ),
        (
            "sql-password",
            format!("ALTER ROLE app WITH PASSWORD '{}'", alnum(16)),
            alnum(16),
        ),
        (
            "dsn-userinfo",
            format!("app:{}@tcp(db:3306)/prod", alnum(16)),
            alnum(16),
        ),
        (
            "config-set-credential",
            format!("aws configure set aws_secret_access_key {}", alnum(40)),
            alnum(40),
        ),
        (
            "xml-key-value",
            format!("<add key=\"DbPassword\" value=\"{}\"/>", alnum(16)),
            alnum(16),
        ),
        (
            "protocol-auth",
            format!("\"AUTH\" \"app\" \"{}\"", alnum(16)),
            alnum(16),
        ),
        (
            "yaml-block-secret",
            format!("password: |\n  {}\nnext: 1", alnum(16)),
            alnum(16),
        ),
        (
            "toml-multiline-secret",
            format!("password = '''{}'''", alnum(16)),
            alnum(16),
        ),
        (
            "pgpass-line",
            format!("db.example.com:5432:app:appuser:{}", alnum(16)),
            alnum(16),
        ),
    ]
}

/// What real output puts right before a word.
const CONTEXTS: &[&str] = &[
    " ",
    "\\n",
    "\\t",
    "\\r",
    "\\\"",
    "\\\\",
    "\\/",
    "\\u001b",
    "\\u00e9",
    "\u{1b}[1;33m",
    "\u{1b}[0m",
    "\u{1b}[38;5;208m",
    "\u{1b}]0;build\u{7}",
    "\u{1b}]8;;https://example.com\u{1b}\\",
    "\r",
    "\r\n",
];

/// The rendering of `bytes` fed in `chunks`-sized pieces to an untruncated
/// capture, and the number of secrets redacted.
fn render(bytes: &[u8], chunk: usize) -> (String, u64) {
    let settings = CaptureSettings::tail(StreamName::Stderr, bytes.len().max(1));
    let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
    for piece in bytes.chunks(chunk.max(1)) {
        let _ = capture.feed(piece);
    }
    let (text, counts) = capture.window().render_with_redactions();
    (text, counts.total())
}

#[test]
fn the_shapes_cover_every_builtin_rule() {
    // The regex rules' shapes here, the provider formats' from their table.
    let mut ours: Vec<&str> = shapes().iter().map(|(rule, _, _)| *rule).collect();
    ours.extend(provider_samples(0).iter().map(|(rule, _)| *rule));
    let mut all: Vec<&str> = Redactor::builtin_rule_names().collect();
    ours.sort_unstable();
    ours.dedup();
    all.sort_unstable();
    assert_eq!(ours, all);
}

#[test]
fn every_provider_token_is_redacted_after_every_context() {
    for (rule, token) in provider_samples(7) {
        for context in CONTEXTS {
            let text = format!("ERROR request failed{context}{token} retrying\n");
            let out = Redactor::builtin().redact(&text);
            let expected = format!("ERROR request failed{context}[redacted: {rule}] retrying\n");
            assert_eq!(out.text, expected, "{rule} after {context:?}");
            assert_eq!(out.counts.total(), 1, "{rule} after {context:?}");
            assert_eq!(out.counts.rule(rule), 1, "{rule} after {context:?}");
        }
    }
}

#[test]
fn every_shape_is_redacted_after_every_context() {
    for (rule, shape, secret) in shapes() {
        for context in CONTEXTS {
            let text = format!("ERROR request failed{context}{shape} retrying\n");
            let out = Redactor::builtin().redact(&text);
            assert!(
                !out.text.contains(&secret),
                "{rule} after {context:?}: {:?}",
                out.text
            );
            assert_eq!(
                out.counts.rule(rule),
                1,
                "{rule} after {context:?}: {:?}",
                out.text
            );
            // What came before the secret is kept.
            assert!(out.text.starts_with("ERROR request failed"), "{rule}");
        }
    }
}

#[test]
fn every_shape_is_redacted_inside_a_json_encoded_string() {
    for (rule, shape, secret) in shapes() {
        for lead in [
            "",
            "upload failed\n",
            "upload failed\t",
            "\u{1b}[31m",
            "say \"",
            "C:\\",
        ] {
            let message = format!("{lead}{shape}\nretrying");
            let line = serde_json::json!({ "level": "error", "msg": message }).to_string();
            let out = Redactor::builtin().redact(&line);
            let encoded = serde_json::to_string(&secret).unwrap();
            let encoded = encoded.trim_matches('"');
            assert!(
                !out.text.contains(encoded),
                "{rule} in {line}: {:?}",
                out.text
            );
            assert!(
                out.counts.rule(rule) >= 1,
                "{rule} in {line}: {:?}",
                out.text
            );
        }
    }
}

#[test]
fn invalid_utf8_around_a_secret_never_stops_its_redaction() {
    for (rule, shape, secret) in shapes() {
        let mut bytes = b"\xff\xfe garbage \xc3".to_vec();
        bytes.extend_from_slice(b" ");
        bytes.extend_from_slice(shape.as_bytes());
        bytes.extend_from_slice(b" \x80\xbf tail\n");
        let (text, found) = render(&bytes, 7);
        assert!(!text.contains(&secret), "{rule}: {text:?}");
        assert!(found >= 1, "{rule}: {text:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A random shape in a random context, with random text around it:
    /// redacted, and the same rendering for every chunking.
    #[test]
    fn a_shape_in_any_context_is_redacted_the_same_for_every_chunking(
        which in 0..41_usize,
        context in 0..CONTEXTS.len(),
        before in "[a-z :=,.{}\\[\\]\"]{0,24}",
        after in "[a-z :,.}\\]\"]{0,24}",
        chunk in 1..64_usize,
    ) {
        let shapes = shapes();
        let (rule, shape, secret) = &shapes[which % shapes.len()];
        let text = format!("{before} {}{shape} {after}\n", CONTEXTS[context]);
        let (whole, found) = render(text.as_bytes(), text.len());
        let (chunked, found_chunked) = render(text.as_bytes(), chunk);
        prop_assert_eq!(&whole, &chunked);
        prop_assert_eq!(found, found_chunked);
        prop_assert!(!whole.contains(secret.as_str()), "{} in {:?}: {:?}", rule, text, whole);
        prop_assert!(found >= 1, "{} in {:?}", rule, text);
    }
}

/// A capture of `bytes` with `retain` and a 16 KiB budget: its window's
/// rendering and its 4 KiB excerpt.
fn views(bytes: &[u8], retain: spillguard_core::Retain) -> (String, String) {
    let settings = CaptureSettings {
        retain,
        head_bytes: 16_384,
        ..CaptureSettings::tail(StreamName::Stderr, 16_384)
    };
    let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
    for piece in bytes.chunks(65_536) {
        let _ = capture.feed(piece);
    }
    let window = capture.window();
    (window.render(), window.render_clamped(4_096))
}

/// A cut edge hides only what could be the rest of a secret: at most
/// `MAX_CUT_HIDDEN` bytes, never bytes no secret has (not ASCII, or a run
/// of one byte); the far part of a long word shows.
#[test]
fn cut_edges_hide_only_what_could_be_a_secret() {
    use spillguard_core::{CUT_MARGIN, MAX_CUT_HIDDEN, Retain};

    // One 10 MiB line that ends with its error: the tail shows the end.
    let mut line = vec![b'a'; 10 << 20];
    line.extend_from_slice(b"END\n");
    let (window, excerpt) = views(&line, Retain::Tail);
    assert!(
        window.ends_with("aaaaEND\n"),
        "{}",
        &window[window.len() - 20..]
    );
    assert!(!window.contains("[cut]"));
    assert!(excerpt.ends_with("aaaaEND\n"));
    assert_eq!(
        window.len(),
        "[stderr truncated: kept last 16384 of 10485764 bytes]\n".len() + 16_384
    );

    // 20,000 é in a row show as é (the window's cut character trimmed).
    let accents = "é".repeat(20_000);
    let (window, excerpt) = views(accents.as_bytes(), Retain::Tail);
    let body = window.split_once('\n').unwrap().1;
    assert_eq!(body, "é".repeat(8_192));
    assert!(
        excerpt
            .split_once('\n')
            .unwrap()
            .1
            .chars()
            .all(|c| c == 'é')
    );

    // A head window over digits shows every digit: a run of digits holds
    // no secret.
    let digits: Vec<u8> = (0..100_000).map(|i| b'0' + (i % 10) as u8).collect();
    let (window, _) = views(&digits, Retain::Head);
    let body = window.split_once('\n').unwrap().1;
    assert_eq!(body.as_bytes(), &digits[..16_384]);
    // Letters and digits mixed may be a secret's end: a word longer than
    // the margin hides at most the bound, counted from the margin's outer
    // edge.
    let mixed: Vec<u8> = (0..100_000).map(|i| b"0a1b2c3d4e"[i % 10]).collect();
    let (window, _) = views(&mixed, Retain::Head);
    let body = window.split_once('\n').unwrap().1;
    let shown = body.strip_suffix("[cut]").unwrap();
    assert_eq!(shown.len(), 16_384 + CUT_MARGIN - MAX_CUT_HIDDEN);
    assert_eq!(shown.as_bytes(), &mixed[..shown.len()]);

    // A token cut by the window still shows none of its far part.
    let mut text = b"x".repeat(20_000);
    text.extend_from_slice(b" ghp_Q7x9K2m4P8z3W6v1Q7x9K2m4P8z3W6v1Q7x9 tail\n");
    let keep = 16_384;
    let cut_at = text.len() - keep;
    let (window, _) = views(&text[..cut_at + 30], Retain::Tail);
    assert!(!window.contains("Q7x9K2m4"), "{window}");
}
