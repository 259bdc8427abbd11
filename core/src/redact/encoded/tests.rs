//! The decoder and each test a decoding must pass, on the edge cases.

use super::*;

#[test]
fn decodes_both_alphabets_with_or_without_padding() {
    assert_eq!(decode(b"aGk/Pz8+").as_deref(), Some(&b"hi???>"[..]));
    assert_eq!(decode(b"aGk_Pz8-").as_deref(), Some(&b"hi???>"[..]));
    assert_eq!(decode(b"aGk=").as_deref(), Some(&b"hi"[..]));
    assert_eq!(decode(b"aGk").as_deref(), Some(&b"hi"[..]));
    // One character over a multiple of four, or padding inside: not base64.
    assert_eq!(decode(b"aGkaa"), None);
    assert_eq!(decode(b"aG=k"), None);
}

#[test]
fn user_password_needs_a_user_and_a_password_that_is_no_plain_value() {
    for yes in [
        &b"deploy:Q7x9hunter2"[..],
        b"robot$ci:0123456789ABCDEFabcdef",
        b"ci@example.com:Pa55-word",
        b"_json_key:s3cr3t",
        b"admin:PassWord",
    ] {
        assert!(is_user_password(yes), "{}", String::from_utf8_lossy(yes));
    }
    for no in [
        &b"note: see file"[..],
        b"deploy:",
        b":Q7x9hunter2",
        b"04:User583231",
        b"arrayconnection:10",
        b"nginx:latest",
        b"nginx:1.25.3",
        b"Content-Type:application/json",
        b"https://example.com",
        b"a:b:c",
        b"deploy:hunter2\x00",
        b"user/name:Q7x9hunter2",
    ] {
        assert!(!is_user_password(no), "{}", String::from_utf8_lossy(no));
    }
    let long = [&b"deploy:"[..], &[b'Q'; 505], b"7"].concat();
    assert_eq!(long.len(), MAX_USER_PASSWORD + 1);
    assert!(!is_user_password(&long));
    assert!(is_user_password(&long[1..]));
}

#[test]
fn credential_keys_and_values() {
    for key in [
        "auth",
        "password",
        "client_secret",
        "private_key",
        "SecretAccessKey",
        "x-auth-token",
        "identitytoken",
        "api_key",
    ] {
        assert!(is_credential_key(key.as_bytes()), "{key}");
    }
    for key in [
        "auths",
        "next_token",
        "pageToken",
        "private_key_id",
        "token_uri",
        "auth_uri",
        "password_policy",
        "sort_key",
    ] {
        assert!(!is_credential_key(key.as_bytes()), "{key}");
    }
    assert!(is_credentials_json(br#" {"user":"a","password":"Q7x9"}"#));
    assert!(!is_credentials_json(br#"{"password":"abc"}"#));
    assert!(!is_credentials_json(br#"{"password":null}"#));
    assert!(!is_credentials_json(br#"{"token":"<token>"}"#));
    assert!(!is_credentials_json(br#"["password","Q7x9hunter2"]"#));
    assert!(!is_credentials_json(br#"{"password" "Q7x9hunter2"}"#));
}

#[test]
fn private_key_labels_and_der() {
    assert!(holds_private_key(
        b"x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl"
    ));
    assert!(holds_private_key(b"-----BEGIN PGP PRIVATE KEY BLOCK-----"));
    assert!(holds_private_key(
        b"-----BEGIN CERTIFICATE-----\n-----BEGIN ENCRYPTED PRIVATE KEY-----"
    ));
    assert!(!holds_private_key(b"-----BEGIN PUBLIC KEY-----\nMIIB"));
    assert!(!holds_private_key(b"-----BEGIN private key-----"));
    assert!(is_private_key_der(b"openssh-key-v1\0none"));
    assert!(is_private_key_der(&[
        0x30, 0x05, 0x02, 0x01, 0x00, 0x30, 0x00
    ]));
    // The length must be the rest of the bytes.
    assert!(!is_private_key_der(&[
        0x30, 0x06, 0x02, 0x01, 0x00, 0x30, 0x00
    ]));
    assert!(!is_private_key_der(&[
        0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x00
    ]));
}

#[test]
fn a_run_starts_after_an_escape_or_a_colour_and_joins_wrapped_lines() {
    let spans = |hay: &[u8]| {
        let mut spans = Vec::new();
        scan(hay, &mut spans);
        spans
            .iter()
            .map(|s| (s.start, s.end, s.label))
            .collect::<Vec<_>>()
    };
    let run = "ZGVwbG95OlE3eDlodW50ZXIy";
    let named = Label::Named(ENCODED_USER_PASSWORD);
    for before in [
        "\\n",
        "\\u00e9",
        "\\\\",
        "\u{1b}[1;33m",
        "\\u001b[31m",
        "\u{1b}\\",
    ] {
        let hay = format!("{before}{run}");
        assert_eq!(
            spans(hay.as_bytes()),
            [(before.len(), hay.len(), named)],
            "{before:?}"
        );
    }
    // A line of a width other than 64 or 76 is never joined.
    let hay = format!("{}\n{run}", "A".repeat(60));
    assert_eq!(spans(hay.as_bytes()), [(61, hay.len(), named)]);
    // A longer next line, or one that goes on with other text, is not
    // part of a wrapped run.
    let mut lines = Vec::new();
    let mut extent_of = |hay: &str| {
        lines.clear();
        let (end, total) = extent(hay.as_bytes(), 0, &mut lines);
        (end, total, lines.len())
    };
    let full = "Q".repeat(64);
    assert_eq!(extent_of(&format!("{full}\n{full}\nQQ==\n")), (134, 132, 3));
    assert_eq!(extent_of(&format!("{full}\n{full}Q\n")), (64, 64, 1));
    assert_eq!(extent_of(&format!("{full}\n  password: x")), (64, 64, 1));
    assert_eq!(extent_of(&format!("{full}==\nQQQQ")), (66, 66, 1));
}

/// The byte walk `find` skips ahead over text with no escape finds exactly
/// what a walk of every byte finds, on text built from encoded
/// credentials, wrapped lines, escapes, colours and words of every length
/// around the shortest run.
#[test]
fn skipping_ahead_finds_what_a_walk_of_every_byte_finds() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    // `find` as a walk of every byte, with no skipping.
    fn walk(hay: &[u8], out: &mut Vec<Span>) {
        let mut lines: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < hay.len() {
            let b = hay[i];
            if b == b'\\' || b == 0x1b {
                i += boundary_len(&hay[i..]).max(1);
                continue;
            }
            if !is_base64(b) {
                i += 1;
                continue;
            }
            let word = hay[i..].iter().take_while(|&&b| is_base64(b)).count();
            if word < MIN_RUN.min(WRAP_WIDTHS[0]) {
                i += word;
                continue;
            }
            lines.clear();
            let (end, total) = extent(hay, i, &mut lines);
            if total > MAX_ENCODED_LEN {
                i = end;
                continue;
            }
            let found = match judge(hay, &lines, 0) {
                Some(rule) => Some((rule, end)),
                None if lines.len() > 1 => judge(hay, &lines[..1], 0).map(|r| (r, lines[0].1)),
                None => None,
            };
            if let Some((rule, end)) = found {
                out.push(Span {
                    start: i,
                    end,
                    label: Label::Named(rule),
                });
            }
            i = end;
        }
    }
    let pieces: Vec<&[u8]> = vec![
        b"ZGVwbG95OlE3eDlodW50ZXIy",
        b"eyJ1c2VybmFtZSI6ImRlcGxveSIsInBhc3N3b3JkIjoiUTd4OWh1bnRlcjIifQ==",
        b"QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB\n",
        b"\\n",
        b"\\u001b[31m",
        b"\x1b[1;33m",
        b"\x1b\\",
        b"\\\\",
        b"\\\"",
        b" ",
        b"\n",
        b"=",
        b"abcdefghijklmno",
        b"abcdefghijklmnop",
        b"a",
        b"docker",
        b"auth\":\"",
    ];
    let count = pieces.len();
    let mut runner = TestRunner::new(Config::with_cases(3_000));
    runner
        .run(&proptest::collection::vec(0..count, 0..48), |picks| {
            let hay: Vec<u8> = picks.iter().flat_map(|&i| pieces[i].to_vec()).collect();
            let (mut skipped, mut walked) = (Vec::new(), Vec::new());
            scan(&hay, &mut skipped);
            walk(&hay, &mut walked);
            prop_assert_eq!(skipped, walked);
            Ok(())
        })
        .unwrap();
}
