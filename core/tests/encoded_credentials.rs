//! Base64 runs that decode to credentials are redacted whole, as docker,
//! kubectl and cloud tools print them, whatever the chunking and the
//! invalid UTF-8 around them; base64 of anything else stays as it is; a run
//! too long to decode is left to the other rules.
#![allow(clippy::unwrap_used)]

use spillguard_core::{CaptureSettings, Redactor, RetentionPool, StreamCapture, StreamName};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in standard base64 with padding.
fn b64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.len();
        let word = chunk
            .iter()
            .enumerate()
            .fold(0_u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= n {
                out.push(char::from(ALPHABET[(word >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `bytes` in URL-safe base64 without padding.
fn b64_url(bytes: &[u8]) -> String {
    b64(bytes)
        .trim_end_matches('=')
        .replace('+', "-")
        .replace('/', "_")
}

/// `n` pseudo-random bytes (xorshift, from `seed`).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A PEM block labelled `label` with a body of `bytes` random bytes,
/// wrapped at 64 characters.
fn pem(label: &str, bytes: usize) -> String {
    let body = b64(&noise(7, bytes));
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn redacted(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

/// The redaction of `text` and its counts per rule.
fn redact(text: &str) -> (String, Vec<(String, u64)>) {
    let out = Redactor::builtin().redact(text);
    let counts = out.counts.iter().map(|(r, n)| (r.to_owned(), n)).collect();
    (out.text, counts)
}

fn counts(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect()
}

/// The rendering of `bytes` fed in `chunk`-sized pieces to an untruncated
/// capture, with its counts per rule.
fn render(bytes: &[u8], chunk: usize) -> (String, Vec<(String, u64)>) {
    let settings = CaptureSettings::tail(StreamName::Stderr, bytes.len().max(1));
    let mut capture = StreamCapture::new(settings, &RetentionPool::unlimited());
    for piece in bytes.chunks(chunk.max(1)) {
        let _ = capture.feed(piece);
    }
    let (text, counts) = capture.window().render_with_redactions();
    let counts = counts.iter().map(|(r, n)| (r.to_owned(), n)).collect();
    (text, counts)
}

/// A docker `config.json` with one registry's `auth`.
fn docker_config(user_password: &str) -> String {
    let auth = b64(user_password.as_bytes());
    format!("{{\"auths\":{{\"https://index.docker.io/v1/\":{{\"auth\":\"{auth}\"}}}}}}")
}

#[test]
fn a_docker_config_json_auth_is_redacted() {
    let config = docker_config("deploy:Q7x9hunter2");
    assert_eq!(
        redact(&config),
        (
            format!(
                "{{\"auths\":{{\"https://index.docker.io/v1/\":{{\"auth\":\"{}\"}}}}}}",
                redacted("credential-assignment")
            ),
            // The key rule finds it first; the same bytes either way.
            counts(&[("credential-assignment", 1)])
        )
    );
    // A password with symbols, a token as the password, an email as the
    // user, `DOMAIN\user`, the `_json_key` user and AWS's.
    for user_password in [
        "deploy:Q7x9$hun(ter)2;&|<>",
        "robot$ci+builder:0123456789ABCDEFGHIJKLMNOPQRSTUV",
        "ci@example.com:hunter22",
        "CORP\\builder:s3cr3t-Pass",
        "AWS:eyJwYXlsb2FkIjoiUTd4OWh1bnRlcjIifQ",
    ] {
        let auth = b64(user_password.as_bytes());
        let (text, found) = redact(&format!("auth {auth} ok"));
        assert_eq!(
            (text.as_str(), found),
            (
                format!("auth {} ok", redacted("encoded-user-password")).as_str(),
                counts(&[("encoded-user-password", 1)])
            ),
            "{user_password}"
        );
    }
}

/// A Kubernetes Secret as `kubectl get secret -o yaml` prints it: each
/// value on one line.
fn kubernetes_secret() -> String {
    let key = b64(pem("RSA PRIVATE KEY", 1190).as_bytes());
    let docker = b64(docker_config("deploy:Q7x9hunter2").as_bytes());
    format!(
        "apiVersion: v1\ndata:\n  .dockerconfigjson: {docker}\n  password: {}\n  tls.key: {key}\n  \
         username: {}\nkind: Secret\nmetadata:\n  name: registry\ntype: Opaque\n",
        b64(b"Q7x9hunter2!"),
        b64(b"deploy-robot"),
    )
}

#[test]
fn a_kubernetes_secret_is_redacted_value_by_value() {
    let yaml = kubernetes_secret();
    assert!(yaml.len() > 2_000, "{}", yaml.len());
    assert_eq!(
        redact(&yaml),
        (
            format!(
                "apiVersion: v1\ndata:\n  .dockerconfigjson: {}\n  password: {}\n  tls.key: {}\n  \
                 username: {}\nkind: Secret\nmetadata:\n  name: registry\ntype: Opaque\n",
                redacted("encoded-credentials-json"),
                // A password alone has no shape: its key says what it is.
                redacted("password-assignment"),
                redacted("encoded-private-key"),
                b64(b"deploy-robot"),
            ),
            counts(&[
                ("encoded-credentials-json", 1),
                ("encoded-private-key", 1),
                ("password-assignment", 1)
            ])
        )
    );
}

#[test]
fn a_gcp_service_account_key_in_base64_is_redacted() {
    let key = serde_json::json!({
        "type": "service_account",
        "project_id": "demo-project",
        "private_key_id": "0123456789abcdef0123456789abcdef01234567",
        "private_key": pem("PRIVATE KEY", 1216),
        "client_email": "ci@demo-project.iam.gserviceaccount.com",
        "client_id": "123456789012345678901",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": "https://oauth2.googleapis.com/token",
    })
    .to_string();
    let line = format!("GOOGLE_CREDENTIALS_B64={}\n", b64(key.as_bytes()));
    let (text, found) = redact(&line);
    assert_eq!(
        (text.as_str(), found),
        (
            format!(
                "GOOGLE_CREDENTIALS_B64={}\n",
                redacted("encoded-credentials-json")
            )
            .as_str(),
            counts(&[("encoded-credentials-json", 1)])
        )
    );
}

#[test]
fn url_safe_alphabet_and_missing_padding_are_decoded() {
    // `~~~` and `?>?` encode to `+` and `/`: `-` and `_` in URL-safe base64.
    let secret = b"svc-robot:Q7x9~~~?>?hunter2x";
    let url_safe = b64_url(secret);
    assert!(
        url_safe.contains('-') && url_safe.contains('_'),
        "{url_safe}"
    );
    assert_eq!(
        b64(secret).len() - url_safe.len(),
        2,
        "two padding bytes gone"
    );
    for run in [url_safe, b64(secret).trim_end_matches('=').to_owned()] {
        let (text, found) = redact(&format!("ref={run}&next=1\n"));
        assert_eq!(
            (text.as_str(), found),
            (
                format!("ref={}&next=1\n", redacted("encoded-user-password")).as_str(),
                counts(&[("encoded-user-password", 1)])
            ),
            "{run}"
        );
    }
}

#[test]
fn wrapped_base64_of_a_key_file_is_one_run() {
    let encoded = b64(pem("OPENSSH PRIVATE KEY", 400).as_bytes());
    // `base64` wraps at 76, `openssl base64` at 64; in a JSON log the
    // line breaks are `\n` escapes; in a YAML block scalar, indented.
    for (width, line_break, indent) in [
        (76, "\n", ""),
        (64, "\n", ""),
        (64, "\r\n", ""),
        (76, "\\n", ""),
        (76, "\n", "    "),
    ] {
        let lines: Vec<&str> = encoded
            .as_bytes()
            .chunks(width)
            .map(|l| std::str::from_utf8(l).unwrap())
            .collect();
        assert!(lines.len() > 5);
        let body = lines.join(&format!("{line_break}{indent}"));
        let text = format!("$ base64 id_ed25519\n{indent}{body}{line_break}$ echo done\n");
        let (shown, found) = redact(&text);
        assert_eq!(
            (shown.as_str(), found),
            (
                format!(
                    "$ base64 id_ed25519\n{indent}{}{line_break}$ echo done\n",
                    redacted("encoded-private-key")
                )
                .as_str(),
                counts(&[("encoded-private-key", 1)])
            ),
            "width {width}, break {line_break:?}, indent {indent:?}"
        );
    }
}

#[test]
fn a_line_after_a_credential_is_not_taken_into_its_run() {
    // 57 bytes encode to 76 characters, a full line of `base64`: the word
    // on the next line could be the body's last line, but with it the run
    // decodes to nothing, and the line alone is the credential.
    let secret = b"deploy-robot:Q7x9hunter2Q7x9hunter2Q7x9hunter2Q7x9hunter2Q7x9";
    let secret = &secret[..57];
    let run = b64(secret);
    assert_eq!(run.len(), 76);
    let text = format!("auth {run}\nretrying\n");
    assert_eq!(
        redact(&text),
        (
            format!("auth {}\nretrying\n", redacted("encoded-user-password")),
            counts(&[("encoded-user-password", 1)])
        )
    );
}

#[test]
fn a_run_split_across_chunks_renders_the_same_for_every_chunking() {
    let docker = b64(docker_config("deploy:Q7x9hunter2").as_bytes());
    let mut text = "x".repeat(4_096 - 40);
    text.push_str(" .dockerconfigjson: ");
    let run_start = text.len();
    text.push_str(&docker);
    text.push_str("\nnext line\n");
    assert!(run_start < 4_096 && run_start + docker.len() > 4_096);
    let expected = (
        format!(
            "{} .dockerconfigjson: {}\nnext line\n",
            "x".repeat(4_096 - 40),
            redacted("encoded-credentials-json")
        ),
        counts(&[("encoded-credentials-json", 1)]),
    );
    for chunk in [4_096, 1, 3, 7, 64, 4_097, text.len()] {
        assert_eq!(render(text.as_bytes(), chunk), expected, "chunk {chunk}");
    }
}

#[test]
fn invalid_utf8_next_to_a_run_never_stops_its_redaction() {
    let run = b64(b"deploy:Q7x9hunter2");
    for (before, after) in [
        (&b"\xff"[..], &b"\xc3"[..]),
        (b"\xe2\x82", b"\x80\xbf"),
        (b"ok \xf0\x9f", b"\xff tail"),
    ] {
        let bytes = [before, run.as_bytes(), after, b"\n"].concat();
        let expected = format!(
            "{}{}{}\n",
            String::from_utf8_lossy(before),
            redacted("encoded-user-password"),
            String::from_utf8_lossy(after)
        );
        for chunk in [1, 5, bytes.len()] {
            assert_eq!(
                render(&bytes, chunk),
                (expected.clone(), counts(&[("encoded-user-password", 1)])),
                "{before:?} {after:?} chunk {chunk}"
            );
        }
    }
}

#[test]
fn authorization_basic_is_redacted_by_the_header_rule() {
    let run = b64(b"deploy:Q7x9hunter2");
    for header in ["Authorization", "Proxy-Authorization", "authorization"] {
        let text = format!("> {header}: Basic {run}\r\n");
        assert_eq!(
            redact(&text),
            (
                format!("> {header}: Basic {}\r\n", redacted("authorization-header")),
                counts(&[("authorization-header", 1)])
            ),
            "{header}"
        );
    }
}

#[test]
fn base64_of_base64_is_decoded_two_levels_down_at_most() {
    let mut run = b64(b"deploy:Q7x9hunter2");
    // Encoded twice and three times: found one and two levels down.
    for _ in 0..2 {
        run = b64(run.as_bytes());
        assert_eq!(
            redact(&format!("v={run}")),
            (
                format!("v={}", redacted("encoded-user-password")),
                counts(&[("encoded-user-password", 1)])
            )
        );
    }
    // Four times: three levels down is not searched.
    run = b64(run.as_bytes());
    assert_eq!(
        redact(&format!("v={run}")),
        (format!("v={run}"), counts(&[]))
    );
}

/// A DER SEQUENCE of `body` (with the long length form for 256 bytes or
/// more).
fn der_sequence(body: &[u8]) -> Vec<u8> {
    let len = body.len();
    let mut out = match len {
        0..0x80 => vec![0x30, len as u8],
        0x80..0x100 => vec![0x30, 0x81, len as u8],
        _ => vec![0x30, 0x82, (len >> 8) as u8, len as u8],
    };
    out.extend_from_slice(body);
    out
}

#[test]
fn a_bare_der_private_key_is_redacted_a_certificate_is_not() {
    // PKCS#8: version 0, then the algorithm's SEQUENCE.
    let pkcs8 = der_sequence(&[&[0x02, 0x01, 0x00, 0x30, 0x0d][..], &noise(3, 1200)].concat());
    // PKCS#1 RSA: version 0, then the modulus.
    let pkcs1 = der_sequence(
        &[
            &[0x02, 0x01, 0x00, 0x02, 0x82, 0x01, 0x01][..],
            &noise(4, 1180),
        ]
        .concat(),
    );
    // SEC1 EC: version 1, then the key's OCTET STRING.
    let sec1 = der_sequence(&[&[0x02, 0x01, 0x01, 0x04, 0x20][..], &noise(5, 100)].concat());
    for der in [pkcs8, pkcs1, sec1] {
        let run = b64(&der);
        assert_eq!(
            redact(&format!("key: {run}\n")),
            (
                format!("key: {}\n", redacted("encoded-private-key")),
                counts(&[("encoded-private-key", 1)])
            )
        );
    }
    // A certificate (a SEQUENCE holding the signed SEQUENCE) and a public
    // key (the algorithm's SEQUENCE first) stay.
    let certificate = der_sequence(&[&[0x30, 0x82, 0x03, 0x00][..], &noise(6, 900)].concat());
    let public_key = der_sequence(&[&[0x30, 0x0d, 0x06, 0x09][..], &noise(7, 280)].concat());
    for der in [certificate, public_key] {
        let text = format!("cert: {}\n", b64(&der));
        assert_eq!(redact(&text), (text.clone(), counts(&[])));
    }
}

/// Base64 of a PEM private-key file padded with a comment to `bytes`
/// bytes.
fn key_file_of(bytes: usize) -> Vec<u8> {
    let mut file = pem("PRIVATE KEY", 1216).into_bytes();
    file.extend(std::iter::repeat_n(b'#', bytes - file.len() - 1));
    file.push(b'\n');
    file
}

#[test]
fn a_run_longer_than_64_kib_is_not_decoded() {
    // 49,152 bytes encode to 65,536 characters: decoded, a key.
    let at_bound = b64(&key_file_of(49_152));
    assert_eq!(at_bound.len(), 65_536);
    assert_eq!(
        redact(&format!("tls.key: {at_bound}\n")),
        (
            format!("tls.key: {}\n", redacted("encoded-private-key")),
            counts(&[("encoded-private-key", 1)])
        )
    );
    // Three bytes more, four characters more: not decoded, so not
    // redacted; and a 100 KiB run neither.
    for bytes in [49_155, 76_800] {
        let run = b64(&key_file_of(bytes));
        assert!(run.len() > 65_536, "{}", run.len());
        let text = format!("tls.key: {run}\n");
        let (shown, found) = redact(&text);
        assert!(shown == text, "a run of {} was redacted", run.len());
        assert_eq!(found, counts(&[]));
    }
    // Wrapped in lines, the bound counts the characters of all the lines.
    let long = b64(&key_file_of(49_155));
    let wrapped: Vec<&str> = long
        .as_bytes()
        .chunks(76)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    let text = format!("{}\n", wrapped.join("\n"));
    let (shown, found) = redact(&text);
    assert!(shown == text, "a wrapped run was redacted");
    assert_eq!(found, counts(&[]));
}

#[test]
fn base64_of_anything_but_a_credential_stays() {
    let mut texts: Vec<String> = Vec::new();
    // Ordinary text, with and without blanks.
    for plain in [
        &b"note: see file /etc/hosts for details"[..],
        b"The quick brown fox jumps over the lazy dog.",
        b"nginx:latest",
        b"docker.io/library/nginx:1.25.3",
        b"arrayconnection:10",
        b"04:User583231",
        b"Content-Type:application/json",
        b"https://example.com/path?q=1",
        b"2024-01-01T12:30",
        b"localhost:5432",
        b"user:",
        b":Q7x9hunter2secret",
        b"a:b:c:Q7x9hunter2",
        b"name\tuser:Q7x9hunter2",
    ] {
        texts.push(format!("value {} end", b64(plain)));
        texts.push(format!("value {} end", b64_url(plain)));
    }
    // A paragraph, wrapped by `base64` at 76.
    let paragraph = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ".repeat(12);
    let encoded = b64(paragraph.as_bytes());
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    texts.push(format!("{}\n", lines.join("\n")));
    // Random bytes, digests, integrity hashes.
    for seed in 1..200_u64 {
        let n = 12 + (seed as usize * 7) % 300;
        texts.push(format!("blob {}\n", b64(&noise(seed, n))));
        texts.push(format!("blob {}\n", b64_url(&noise(seed + 1_000, n))));
    }
    texts.push(format!("integrity: sha512-{}\n", b64(&noise(11, 64))));
    texts.push(format!(
        "\"integrity\": \"sha256-{}\"\n",
        b64(&noise(12, 32))
    ));
    texts.push(
        "digest: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n".into(),
    );
    texts.push(
        "id 123e4567-e89b-12d3-a456-426614174000 commit 3f2a9c1b7d4e8f6a0b5c2d1e9f8a7b6c5d4e3f2a\n"
            .into(),
    );
    texts.push(format!("hex {}\n", "0123456789abcdef".repeat(8)));
    // JSON without credential keys, or with a placeholder or a paging
    // token.
    for json in [
        r#"{"alg":"RS256","typ":"JWT","kid":"key-2024-01"}"#,
        r#"{"offset":100,"limit":50,"order":"desc"}"#,
        r#"{"auths":{"ghcr.io":{}},"credsStore":"desktop"}"#,
        r#"{"auths":{"ghcr.io":{"auth":""}}}"#,
        r#"{"password":"********","user":"deploy"}"#,
        r#"{"token":"${CI_TOKEN}","url":"https://ci.example.com"}"#,
        r#"{"next_token":"Q7x9K2m4P8z3W6v1","count":20}"#,
        r#"{"private_key_id":"0123456789abcdef","token_uri":"https://oauth2.googleapis.com/token"}"#,
        r#"{"password_policy":"at least 12 characters","auth_uri":"https://example.com"}"#,
    ] {
        texts.push(format!("cursor={}\n", b64(json.as_bytes())));
    }
    // A certificate and a public key, in base64 as a Secret's `tls.crt`.
    for label in [
        "CERTIFICATE",
        "PUBLIC KEY",
        "RSA PUBLIC KEY",
        "CERTIFICATE REQUEST",
    ] {
        texts.push(format!("  tls.crt: {}\n", b64(pem(label, 900).as_bytes())));
    }
    for text in &texts {
        assert_eq!(redact(text), (text.clone(), counts(&[])), "{text}");
    }
}
