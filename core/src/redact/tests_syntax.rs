//! Credentials in the syntaxes real tools print them in: quoted values of
//! any character, XML, Go maps, cookies, next-word arguments, connection
//! strings, URLs, signed URLs; and the ordinary text beside them that
//! must stay (exact outputs and counts).

use super::*;

/// The redaction of `input` and its count per rule.
fn redact(input: &str) -> (String, Vec<(String, u64)>) {
    let out = Redactor::builtin().redact(input);
    let counts = out.counts.iter().map(|(r, n)| (r.to_owned(), n)).collect();
    (out.text, counts)
}

/// `input` redacted to `expected`, with one secret replaced by `rule`.
fn one(rule: &str, input: &str, expected: &str) {
    let (text, counts) = redact(input);
    assert_eq!(text, expected, "input {input:?}");
    assert_eq!(counts, [(rule.to_owned(), 1)], "input {input:?}");
}

/// `input` left as it is, with no redaction.
fn stays(input: &str) {
    let (text, counts) = redact(input);
    assert_eq!(
        (text.as_str(), counts),
        (input, Vec::new()),
        "input {input:?}"
    );
}

fn r(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

/// A password with every symbol a shell would read as syntax.
const SYMBOLS: &str = "Xy$7&k(9)|<z>;{w}`q";

#[test]
fn a_quoted_value_after_a_credential_key_is_a_secret_whatever_it_holds() {
    let pa = r("password-assignment");
    one(
        "password-assignment",
        &format!(r#"{{"user":"ana","password":"{SYMBOLS}"}}"#),
        &format!(r#"{{"user":"ana","password":"{pa}"}}"#),
    );
    one(
        "password-assignment",
        &format!("db:\n  password: '{SYMBOLS}'\n"),
        &format!("db:\n  password: '{pa}'\n"),
    );
    one(
        "password-assignment",
        &format!("DB_PASSWORD=\"{SYMBOLS}\"\n"),
        &format!("DB_PASSWORD=\"{pa}\"\n"),
    );
    one(
        "password-assignment",
        &format!("export PGPASSWORD='{SYMBOLS}'"),
        &format!("export PGPASSWORD='{pa}'"),
    );
    one(
        "password-assignment",
        "[client]\npassword = \"hun ter$2\"\n",
        &format!("[client]\npassword = \"{pa}\"\n"),
    );
    one(
        "flag-argument",
        &format!("+ mysqladmin --password '{SYMBOLS}' status"),
        &format!("+ mysqladmin --password '{}' status", r("flag-argument")),
    );
    // A `$` inside a bare value is a character of it.
    one(
        "password-assignment",
        "X_PASSWORD=ab$cd9Zq\n",
        &format!("X_PASSWORD={pa}\n"),
    );
}

#[test]
fn references_placeholders_words_and_prose_after_a_key_stay() {
    for plain in [
        r#"password="$DB_PASSWORD""#,
        r#"password: "${DB_PASSWORD:-}""#,
        r#"PASSWORD="$(cat /run/secrets/db)""#,
        "password: '{{ .Values.db.password }}'",
        "token: '${{ secrets.NPM_TOKEN }}'",
        r#"{"password": "required"}"#,
        r#"{"password": "must not be empty"}"#,
        r#"{"password": "********"}"#,
        r#"{"password": "<password>"}"#,
        r#"{"password": null, "token": ""}"#,
        "--password \"$PASS\"",
        "PWD=/home/ana/src",
        "OLDPWD=/tmp",
        "secret_file=/run/secrets/db_password",
        "password=$DB_PASSWORD",
        "--no-password --verbose",
    ] {
        stays(plain);
    }
}

#[test]
fn rule_credential_assignment() {
    let c = r("credential-assignment");
    one(
        "credential-assignment",
        r#"{"private_key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"}"#,
        &format!(r#"{{"private_key": "{c}"}}"#),
    );
    one(
        "credential-assignment",
        "SESSION_KEY=Zq9Wm2Kx7Lp4Rt8V",
        &format!("SESSION_KEY={c}"),
    );
    one(
        "credential-assignment",
        "credentials: 'u$er:p4ss!'",
        &format!("credentials: '{c}'"),
    );
    stays(r#"{"credentials": "include", "mode": "cors"}"#);
}

#[test]
fn key_names_with_prefixes_and_key_names_with_prefixes_and_suffixes() {
    let pa = r("password-assignment");
    for (key, sep) in [
        ("MYSQL_PWD", "="),
        ("REDIS_PASS", "="),
        ("ansible_become_pass", ": "),
        ("Pwd", "="),
        ("DB_PASSWD", "="),
    ] {
        one(
            "password-assignment",
            &format!("{key}{sep}Tr0ub4dor3x"),
            &format!("{key}{sep}{pa}"),
        );
    }
    one(
        "password-assignment",
        "Server=db.local;Database=app;Uid=sa;Pwd=Tr0ub4d&r3;",
        &format!("Server=db.local;Database=app;Uid=sa;Pwd={pa}&r3;"),
    );
    one(
        "password-assignment",
        "Data Source=db;User ID=app;Password=Tr0ub4dor3x;Encrypt=true",
        &format!("Data Source=db;User ID=app;Password={pa};Encrypt=true"),
    );
    one(
        "credential-assignment",
        r#"{"auths":{"ghcr.io":{"auth":"YW5hOlRyMHViNGRvcjN4"}}}"#,
        &format!(
            r#"{{"auths":{{"ghcr.io":{{"auth":"{}"}}}}}}"#,
            r("credential-assignment")
        ),
    );
    one(
        "credential-assignment",
        "//registry.npmjs.org/:_auth=YW5hOlRyMHViNGRvcjN4",
        &format!("//registry.npmjs.org/:_auth={}", r("credential-assignment")),
    );
    one(
        "token-assignment",
        "x-auth-token=9f8e7d6c5b4a32",
        &format!("x-auth-token={}", r("token-assignment")),
    );
    for plain in [
        "author=Ana Lima",
        "bypass=1",
        "compass=north",
        "session_id=42",
    ] {
        stays(plain);
    }
}

#[test]
fn rule_xml_credential() {
    let x = r("xml-credential");
    let sts = "<Credentials>\n  <AccessKeyId>ASIAQWERTYUIOPASDFGH</AccessKeyId>\n  \
               <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY</SecretAccessKey>\n  \
               <SessionToken>FwoGZXIvYXdzE+Hk/sJ8a9&amp;x==</SessionToken>\n</Credentials>";
    let (text, counts) = redact(sts);
    assert_eq!(
        text,
        format!(
            "<Credentials>\n  <AccessKeyId>{}</AccessKeyId>\n  <SecretAccessKey>{x}</SecretAccessKey>\n  \
             <SessionToken>{x}</SessionToken>\n</Credentials>",
            r("aws-access-key-id")
        )
    );
    assert_eq!(
        counts,
        [
            ("aws-access-key-id".to_owned(), 1),
            ("xml-credential".to_owned(), 2)
        ]
    );
    one(
        "xml-credential",
        &format!("<ns:Password>{}</ns:Password>", "p&lt;4$x!"),
        &format!("<ns:Password>{x}</ns:Password>"),
    );
    stays("<password>required</password>");
    stays("<TokenType>Bearer</TokenType><PasswordPolicy>strict</PasswordPolicy>");
}

#[test]
fn go_map_dumps_hold_credentials() {
    one(
        "bearer-token",
        "headers: map[Accept:[*/*] Authorization:[Bearer 9f8e7d6c5b4a3210]]",
        &format!(
            "headers: map[Accept:[*/*] Authorization:[Bearer {}]]",
            r("bearer-token")
        ),
    );
    one(
        "api-key-header",
        "map[X-Api-Key:[k3Y9zQ2mWx7P] Content-Type:[application/json]]",
        &format!(
            "map[X-Api-Key:[{}] Content-Type:[application/json]]",
            r("api-key-header")
        ),
    );
    one(
        "password-assignment",
        "cfg=map[Password:[p$ss w0rd] User:[ana]]",
        &format!(
            "cfg=map[Password:[{}] User:[ana]]",
            r("password-assignment")
        ),
    );
}

#[test]
fn rule_password_argument() {
    let pw = r("password-argument");
    one(
        "password-argument",
        "machine api.example.com login ana password Tr0ub4dor3x\n",
        &format!("machine api.example.com login ana password {pw}\n"),
    );
    one(
        "password-argument",
        "machine api.example.com\n  login ana\n  password Tr0ub4dor3x\n",
        &format!("machine api.example.com\n  login ana\n  password {pw}\n"),
    );
    one(
        "password-argument",
        "+ docker login -u ana -p 'Xy$7&k9' registry.example.com",
        &format!("+ docker login -u ana -p '{pw}' registry.example.com"),
    );
    one(
        "password-argument",
        "sshpass -p Tr0ub4dor3x ssh ana@web-3 uptime",
        &format!("sshpass -p {pw} ssh ana@web-3 uptime"),
    );
    one(
        "password-argument",
        "redis-cli -h cache -a Tr0ub4dor3x ping",
        &format!("redis-cli -h cache -a {pw} ping"),
    );
    // After a colour, and a flag's value in JSON-escaped quotes.
    one(
        "password-argument",
        "\x1b[32mmachine h login ana password Tr0ub4dor3x\x1b[0m\n",
        &format!("\x1b[32mmachine h login ana password {pw}\x1b[0m\n"),
    );
    one(
        "flag-argument",
        r#"{"msg":"+ cli login --client-secret \"jI;{.Ip$W6\" ok"}"#,
        &format!(
            r#"{{"msg":"+ cli login --client-secret \"{}\" ok"}}"#,
            r("flag-argument")
        ),
    );
    stays("Your password expired. Use the password reset link.");
    stays("docker login -u ana --password-stdin registry.example.com");
}

#[test]
fn urls_userinfo_runs_to_the_last_at_before_the_host() {
    let u = r("url-userinfo");
    one(
        "url-userinfo",
        "remote: https://ana:p/a#b@c%40d@git.example.com/repo.git",
        &format!("remote: https://ana:{u}@git.example.com/repo.git"),
    );
    one(
        "url-userinfo",
        "clone https://x-access-token:Zq9Wm2Kx7Lp4Rt8V@github.com/org/repo",
        &format!("clone https://x-access-token:{u}@github.com/org/repo"),
    );
    one(
        "url-userinfo",
        "fetch https://a8F3kL0pQ2wE9xZr7T@git.example.com/org/repo",
        &format!("fetch https://{u}@git.example.com/org/repo"),
    );
    for plain in [
        "https://registry.npmjs.org/@types/node",
        "https://unpkg.com/react@18.2.0/umd/react.production.min.js",
        "http://localhost:3000/users/@me",
        "git@github.com:org/repo.git",
        "ssh://git@github.com/org/repo.git",
        "https://example.com:8443/path?q=1",
    ] {
        stays(plain);
    }
}

#[test]
fn rule_signed_url_parameter() {
    let s = r("signed-url-parameter");
    one(
        "signed-url-parameter",
        "GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-31&sp=r&sig=Zk3%2Bq9WmX7Lp4Rt8VbN2%3D HTTP/1.1",
        &format!(
            "GET https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-31&sp=r&sig={s} HTTP/1.1"
        ),
    );
    one(
        "signed-url-parameter",
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=4f0c9e8d7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e",
        &format!(
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={s}"
        ),
    );
    one(
        "signed-url-parameter",
        "redirect: https://app.example.com/cb?code=4/0AfJohXk9Zq2&state=xyz",
        &format!("redirect: https://app.example.com/cb?code={s}&state=xyz"),
    );
    one(
        "token-assignment",
        "&X-Amz-Security-Token=IQoJb3JpZ2luX2VjEJr%2F%2F",
        &format!("&X-Amz-Security-Token={}", r("token-assignment")),
    );
    stays("exit code=1 after 3 retries");
    stays("https://example.com/search?q=rust&page=2");
}

#[test]
fn rule_cookie_value() {
    one(
        "cookie-value",
        "> Cookie: lang=en; sid=9f8e7d6c5b4a3210aa; theme=dark\r\n",
        &format!(
            "> Cookie: lang=en; sid={}; theme=dark\r\n",
            r("cookie-value")
        ),
    );
}

#[test]
fn header_and_bearer_values_must_look_like_secrets() {
    for plain in [
        "Authorization: required",
        "authorization=pending approval",
        "Bearer authentication required",
        "X-Auth-Method: password",
        "X-Token-Expires: 2026-12-03T15:31:12Z",
        "see `Authorization: Bearer)` in the docs",
        "Authorization: Bearer",
        "sk-proxy-7d9f8b6c5-x2k4l 1/1 Running 0 3d",
        "root:x:0:0:root:/root:/bin/bash",
        "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin",
    ] {
        stays(plain);
    }
    one(
        "authorization-header",
        "Authorization: 9f8e7d6c5b4a3210aa",
        &format!("Authorization: {}", r("authorization-header")),
    );
    one(
        "bearer-token",
        "Authorization: Bearer tok",
        &format!("Authorization: Bearer {}", r("bearer-token")),
    );
}
