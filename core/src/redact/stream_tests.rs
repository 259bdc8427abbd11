//! The stream redactor: any chunking gives the one-shot output, bytes
//! pass through, the hold stays bounded.

use proptest::prelude::*;

use super::*;

const TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
const BEARER: &str = "abc.def-1234567890";
const SLACK: &str = "xoxb-123456789012-1234567890123-abcdefghijABCDEFGHIJ1234";

/// `n` letters and digits that look random (a fixed sequence).
fn mixed(n: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut state: u32 = 12345;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ALPHABET[(state >> 16) as usize % ALPHABET.len()] as char
        })
        .collect()
}

fn r(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

/// `input` fed in pieces cut at `cuts`, then finished.
fn streamed(input: &[u8], cuts: &[usize]) -> (Vec<u8>, RedactionCounts) {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    let mut from = 0;
    for &cut in cuts {
        let cut = cut.clamp(from, input.len());
        stream.feed(&input[from..cut], &mut out);
        from = cut;
    }
    stream.feed(&input[from..], &mut out);
    stream.finish(&mut out);
    assert_eq!(stream.held(), 0);
    (out, stream.counts().clone())
}

/// The one-shot redaction of `input` as bytes (each span replaced, the
/// rest as it is).
fn one_shot(input: &[u8]) -> Vec<u8> {
    let redactor = Redactor::builtin();
    let spans = redactor.spans(input, Edges::NONE);
    let mut out = Vec::new();
    let mut pos = 0;
    for span in &spans {
        out.extend_from_slice(&input[pos..span.start]);
        let mut text = String::new();
        redactor.write_placeholder(span.label, &mut text);
        out.extend_from_slice(text.as_bytes());
        pos = span.end;
    }
    out.extend_from_slice(&input[pos..]);
    out
}

#[test]
fn a_token_split_across_chunks_is_redacted_whole() {
    let input = format!("login ok\ntoken {TOKEN} used\n");
    let (out, counts) = streamed(input.as_bytes(), &[15, 24, 30]);
    let expected = format!("login ok\ntoken {} used\n", r("github-token"));
    assert_eq!(String::from_utf8(out).unwrap(), expected);
    assert_eq!(counts.iter().collect::<Vec<_>>(), [("github-token", 1)]);
}

#[test]
fn a_line_is_released_at_its_end_and_not_before() {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    stream.feed(b"step 1 done\nAuthorization: Bearer abc.def", &mut out);
    assert_eq!(out, b"step 1 done\n");
    assert_eq!(stream.held(), "Authorization: Bearer abc.def".len());
    stream.feed(b"-1234567890\nstep 2", &mut out);
    let expected = format!("step 1 done\nAuthorization: Bearer {}\n", r("bearer-token"));
    assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
    stream.finish(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), expected + "step 2");
}

#[test]
fn bytes_that_are_not_utf8_colours_and_carriage_returns_pass_through() {
    let mut input = b"\x1b[32mok\x1b[0m \r 10%\r 55%\r100%\n\xff\xfe raw ".to_vec();
    input.extend_from_slice(TOKEN.as_bytes());
    input.extend_from_slice(b"\xff\n");
    let (out, counts) = streamed(&input, &[3, 9, 20, 33, 40]);
    let mut expected = b"\x1b[32mok\x1b[0m \r 10%\r 55%\r100%\n\xff\xfe raw ".to_vec();
    expected.extend_from_slice(r("github-token").as_bytes());
    expected.extend_from_slice(b"\xff\n");
    assert_eq!(out, expected);
    assert_eq!(counts.total(), 1);
}

#[test]
fn a_private_key_block_is_held_until_its_end_line() {
    let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n".repeat(20);
    let input =
        format!("key:\n-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----\ndone\n");
    let cuts: Vec<usize> = (1..input.len()).step_by(37).collect();
    let (out, counts) = streamed(input.as_bytes(), &cuts);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "key:\n-----BEGIN PRIVATE KEY-----{}-----END PRIVATE KEY-----\ndone\n",
            r("private-key")
        )
    );
    assert_eq!(counts.rule("private-key"), 1);
}

#[test]
fn a_private_key_longer_than_the_hold_is_hidden_and_its_body_dropped() {
    let line = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n";
    let body = line.repeat(STREAM_HOLD / line.len() + 10);
    let input = format!("-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----\nok\n");
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    let mut most_held = 0;
    for piece in input.as_bytes().chunks(100) {
        stream.feed(piece, &mut out);
        most_held = most_held.max(stream.held());
    }
    stream.finish(&mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "-----BEGIN PRIVATE KEY-----{}-----END PRIVATE KEY-----\nok\n",
            r("private-key")
        )
    );
    assert_eq!(stream.counts().rule("private-key"), 1);
    assert!(most_held <= STREAM_HOLD + 100, "held {most_held}");
}

#[test]
fn a_long_line_without_newline_is_released_past_the_hold_but_not_its_last_word() {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    let words = "progress ".repeat(STREAM_HOLD / 9 + 1);
    stream.feed(words.as_bytes(), &mut out);
    stream.feed(b"ghp_0123456789", &mut out);
    // All up to the last word: the token's start is held.
    assert_eq!(out, words.as_bytes());
    assert_eq!(stream.held(), "ghp_0123456789".len());
    stream.feed(b"abcdefghijABCDEFGHIJ012345 end", &mut out);
    stream.finish(&mut out);
    let expected = format!("{words}{} end", r("github-token"));
    assert_eq!(String::from_utf8(out).unwrap(), expected);
}

#[test]
fn a_word_longer_than_a_cut_is_released_past_the_hold() {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    let digits = "0123456789".repeat(STREAM_HOLD / 10 + 1);
    stream.feed(digits.as_bytes(), &mut out);
    assert_eq!(out.len(), digits.len() - MAX_CUT_HIDDEN);
    assert_eq!(stream.held(), MAX_CUT_HIDDEN);
    stream.finish(&mut out);
    assert_eq!(out, digits.as_bytes());
}

#[test]
fn a_quiet_flush_releases_all_but_the_last_word_then_the_word() {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    stream.feed(b"Downloading 45% token 0123abc", &mut out);
    assert_eq!(out, b"");
    stream.flush(&mut out);
    assert_eq!(out, b"Downloading 45% token ");
    stream.flush(&mut out);
    assert_eq!(out, b"Downloading 45% token 0123abc");
    assert_eq!(stream.held(), 0);
    // A flush releases through the rules: a whole secret held is hidden.
    stream.feed(format!(" key {TOKEN} done").as_bytes(), &mut out);
    stream.flush(&mut out);
    let expected = format!("Downloading 45% token 0123abc key {} ", r("github-token"));
    assert_eq!(String::from_utf8(out.clone()).unwrap(), expected);
    stream.finish(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), expected + "done");
}

#[test]
fn a_match_that_began_on_a_released_line_hides_the_new_part() {
    // `mysql` on one line, its `-p` password on the next: the look-behind
    // keeps the first line for the rule.
    let input = b"mysql -u root\n-pS3cr3tPw9 db\n";
    let (out, _) = streamed(input, &[14]);
    assert_eq!(out, one_shot(input));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("mysql -u root\n-p{} db\n", r("mysql-password"))
    );
}

/// Lines with and without secrets, colours, progress and raw bytes.
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"plain progress line with words".to_vec()),
        Just(format!("export GITHUB_TOKEN={TOKEN}").into_bytes()),
        Just(format!("curl -H 'Authorization: Bearer {BEARER}' https://x").into_bytes()),
        Just(format!("\x1b[31merror\x1b[0m slack {SLACK}").into_bytes()),
        Just(b"password=hunter2isnotgood9 user=admin".to_vec()),
        Just(b"\r 10%\r 55%\r100%".to_vec()),
        Just(b"raw \xff\xfe\x80 bytes".to_vec()),
        Just(b"https://admin:S3cretPass9@db.example.com/x".to_vec()),
        Just(
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oxjGkaXOtGgXoAoGCCqGSM49\n-----END EC PRIVATE KEY-----"
                .as_bytes()
                .to_vec()
        ),
        "[ -~]{0,40}".prop_map(String::into_bytes),
    ]
}

const SECRETS: &[&str] = &[
    TOKEN,
    BEARER,
    SLACK,
    "hunter2isnotgood9",
    "S3cretPass9",
    "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oxjGkaXOtGgXoAoGCCqGSM49",
];

proptest! {
    #[test]
    fn any_chunking_gives_the_one_shot_output(
        lines in prop::collection::vec((line(), prop::bool::ANY), 1..12),
        cuts in prop::collection::vec(0usize..2000, 0..20),
    ) {
        let mut input = Vec::new();
        for (line, newline) in &lines {
            input.extend_from_slice(line);
            input.extend_from_slice(if *newline { b"\n" } else { b" " });
        }
        let mut cuts = cuts;
        cuts.sort_unstable();
        let (out, _) = streamed(&input, &cuts);
        prop_assert_eq!(&out, &one_shot(&input));
        if let Ok(text) = std::str::from_utf8(&input) {
            let whole = Redactor::builtin().redact(text).text;
            prop_assert_eq!(out.as_slice(), whole.as_bytes());
        }
        for secret in SECRETS {
            prop_assert!(
                memmem::find(&out, secret.as_bytes()).is_none(),
                "{} in {:?}", secret, String::from_utf8_lossy(&out)
            );
        }
    }
}

#[test]
fn a_value_longer_than_the_hold_is_released_hidden() {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    let value = mixed(STREAM_HOLD + 30);
    assert_eq!(
        Redactor::builtin()
            .redact(&format!("x password={value}"))
            .text,
        format!("x password={}", r("password-assignment"))
    );
    stream.feed(format!("x password={value}").as_bytes(), &mut out);
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        format!("x password={}", r("password-assignment"))
    );
    assert_eq!(stream.held(), 0);
    // The rest of the same value is dropped.
    stream.feed(b"Q7xZ9k next\n", &mut out);
    stream.finish(&mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("x password={} next\n", r("password-assignment"))
    );
}

#[test]
fn a_quoted_password_split_across_writes_is_redacted_as_one_shot() {
    let input = "db password=\"p$ss w&rd\" ok\n";
    let whole = Redactor::builtin().redact(input).text;
    for cut in 1..input.len() {
        let (out, _) = streamed(input.as_bytes(), &[cut]);
        assert_eq!(String::from_utf8(out).unwrap(), whole, "cut at {cut}");
    }
}

#[test]
fn a_last_word_with_a_token_prefix_is_held_across_quiet_flushes_until_its_line_ends() {
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    let (head, tail) = TOKEN.split_at(20);
    stream.feed(format!("login with {head}").as_bytes(), &mut out);
    for _ in 0..5 {
        stream.flush(&mut out);
    }
    assert_eq!(out, b"login with ");
    assert_eq!(stream.held(), head.len());
    stream.feed(format!("{tail}\n").as_bytes(), &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("login with {}\n", r("github-token"))
    );
    // At the stream's end a held head is released (nothing more comes).
    let mut stream = StreamRedactor::new(Redactor::builtin());
    let mut out = Vec::new();
    stream.feed(b"key sk_live_abc", &mut out);
    stream.flush(&mut out);
    stream.flush(&mut out);
    assert_eq!(out, b"key ");
    stream.finish(&mut out);
    assert_eq!(out, b"key sk_live_abc");
}
