//! One test per rule: exact output, exact count, context kept.

use super::*;

/// `n` characters cycling through `alphabet`.
fn fill(alphabet: &str, n: usize) -> String {
    alphabet.chars().cycle().take(n).collect()
}

const ALNUM: &str = "a1B2c3D4e5F6g7H8i9J0";

/// Redacts `input` with the built-in rules and checks the text and that
/// exactly one secret was replaced, by `rule`.
pub(super) fn check(rule: &str, input: &str, expected: &str) {
    let out = Redactor::builtin().redact(input);
    // The rule's scan finds the same secret as the pattern's first group.
    let by_groups = Redactor::compile_with(Vec::new(), true).unwrap();
    assert_eq!(by_groups.redact(input), out, "rule {rule}, input {input:?}");
    assert_eq!(out.text, expected, "rule {rule}, input {input:?}");
    // Redacting the output again finds nothing more: the placeholder is
    // left as it is.
    let again = Redactor::builtin().redact(&out.text);
    assert_eq!(again.text, out.text, "rule {rule}, redacted twice");
    assert_eq!(again.counts.total(), 0, "rule {rule}, redacted twice");
    let counts: Vec<(&str, u64)> = out.counts.iter().collect();
    assert_eq!(counts, [(rule, 1)], "rule {rule}, input {input:?}");
    assert_eq!(out.counts.cut_words(), 0);
}

fn r(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

#[test]
fn every_builtin_rule_is_tested_here() {
    // The regex rules and the cookie and encoded scanners' (the provider
    // formats are tested in `providers`).
    let names: Vec<&str> = BUILTIN_RULES
        .iter()
        .map(|r| r.name)
        .chain([cookies::RULE])
        .chain(encoded::RULE_NAMES)
        .chain(layouts::RULE_NAMES)
        .collect();
    assert_eq!(names.len(), 49);
    let source = [
        include_str!("tests.rs"),
        include_str!("tests_syntax.rs"),
        include_str!("tests_ops.rs"),
    ]
    .concat();
    for name in names {
        assert!(
            source.contains(&format!("fn rule_{}(", name.replace('-', "_"))),
            "no test for {name}"
        );
    }
}

#[test]
fn rule_private_key() {
    let body = format!(
        "{}\n{}\n{}==",
        fill(ALNUM, 64),
        fill(ALNUM, 64),
        fill(ALNUM, 10)
    );
    for label in [
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ] {
        let block = format!("-----BEGIN {label}-----\n{body}\n-----END {label}-----");
        check(
            "private-key",
            &format!("key:\n{block}\ndone\n"),
            &format!(
                "key:\n-----BEGIN {label}-----{}-----END {label}-----\ndone\n",
                r("private-key")
            ),
        );
        // JSON-escaped, as a tool that prints its config writes it.
        let escaped = block.replace('\n', "\\n");
        check(
            "private-key",
            &format!("{{\"key\": \"{escaped}\\n\"}}"),
            &format!(
                "{{\"key\": \"-----BEGIN {label}-----{}-----END {label}-----\\n\"}}",
                r("private-key")
            ),
        );
    }
    // No END line: redacted to the end of the text.
    check(
        "private-key",
        &format!("-----BEGIN RSA PRIVATE KEY-----\n{body}"),
        &format!("-----BEGIN RSA PRIVATE KEY-----{}", r("private-key")),
    );
    // A public key is not a secret.
    let public = format!("-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n");
    assert_eq!(Redactor::builtin().redact(&public).text, public);
}

#[test]
fn rule_bearer_token() {
    for scheme in ["Bearer", "bearer", "BEARER"] {
        check(
            "bearer-token",
            &format!("> Authorization: {scheme} abc.DEF-123_x~+/==\n< 401\n"),
            &format!("> Authorization: {scheme} {}\n< 401\n", r("bearer-token")),
        );
    }
    check(
        "bearer-token",
        "{\"Authorization\": \"Bearer tok\"}",
        &format!("{{\"Authorization\": \"Bearer {}\"}}", r("bearer-token")),
    );
    check(
        "bearer-token",
        "retrying with Bearer 9f8e7d6c5b4a3210 now",
        &format!("retrying with Bearer {} now", r("bearer-token")),
    );
    // Bare and short: a word, not a token.
    let prose = "a Bearer token is required\n";
    assert_eq!(Redactor::builtin().redact(prose).text, prose);
}

#[test]
fn rule_authorization_header() {
    check(
        "authorization-header",
        "Authorization: Basic dXNlcjpodW50ZXIy\n",
        &format!("Authorization: Basic {}\n", r("authorization-header")),
    );
    check(
        "authorization-header",
        "authorization: token 0123456789abcdef\n",
        &format!("authorization: token {}\n", r("authorization-header")),
    );
    check(
        "authorization-header",
        "Proxy-Authorization: Basic Zm9vOmJhcg==",
        &format!("Proxy-Authorization: Basic {}", r("authorization-header")),
    );
    check(
        "authorization-header",
        "Authorization: s3cr3t-value",
        &format!("Authorization: {}", r("authorization-header")),
    );
}

/// Base64 of an EC private key's PEM block, of `deploy:Q7x9hunter2` and
/// of a docker config holding it.
const ENCODED_KEY: &str = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSVE3eDlLMm00UDh6M1c2djFhNUIwUTd4OUsybTRQOHozVzZ2MWE1QjAKLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=";
const ENCODED_USER_PASSWORD: &str = "ZGVwbG95OlE3eDlodW50ZXIy";
const ENCODED_DOCKER_CONFIG: &str = "eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoiWkdWd2JHOTVPbEUzZURsb2RXNTBaWEl5In19fQ==";

#[test]
fn rule_encoded_private_key() {
    check(
        "encoded-private-key",
        &format!("  tls.key: {ENCODED_KEY}\n"),
        &format!("  tls.key: {}\n", r("encoded-private-key")),
    );
}

#[test]
fn rule_encoded_user_password() {
    check(
        "encoded-user-password",
        &format!("login ok ({ENCODED_USER_PASSWORD})"),
        &format!("login ok ({})", r("encoded-user-password")),
    );
}

#[test]
fn rule_encoded_credentials_json() {
    check(
        "encoded-credentials-json",
        &format!("  .dockerconfigjson: {ENCODED_DOCKER_CONFIG}\n"),
        &format!("  .dockerconfigjson: {}\n", r("encoded-credentials-json")),
    );
}

#[test]
fn rule_api_key_header() {
    for header in [
        "X-Api-Key",
        "x-api-key",
        "X-Auth-Token",
        "Api-Key",
        "PRIVATE-TOKEN",
    ] {
        check(
            "api-key-header",
            &format!("{header}: 1234abcd5678\n"),
            &format!("{header}: {}\n", r("api-key-header")),
        );
    }
}

#[test]
fn rule_aws_access_key_id() {
    let id = format!("AKIA{}", fill("ABCDEFGHIJ234567", 16));
    check(
        "aws-access-key-id",
        &format!("id={id} region=eu-west-1"),
        &format!("id={} region=eu-west-1", r("aws-access-key-id")),
    );
    let sts = format!("ASIA{}", fill("QRSTUVWXYZ234567", 16));
    check(
        "aws-access-key-id",
        &format!("\"{sts}\""),
        &format!("\"{}\"", r("aws-access-key-id")),
    );
}

#[test]
fn rule_aws_secret_access_key() {
    let secret = fill("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", 40);
    check(
        "aws-secret-access-key",
        &format!("AWS_SECRET_ACCESS_KEY={secret}\n"),
        &format!("AWS_SECRET_ACCESS_KEY={}\n", r("aws-secret-access-key")),
    );
    check(
        "aws-secret-access-key",
        &format!("  \"SecretAccessKey\": \"{secret}\","),
        &format!("  \"SecretAccessKey\": \"{}\",", r("aws-secret-access-key")),
    );
    check(
        "aws-secret-access-key",
        "aws_session_token = FwoGZXIvYXdzEBYaDH",
        &format!("aws_session_token = {}", r("aws-secret-access-key")),
    );
}

#[test]
fn rule_github_token() {
    for prefix in ["ghp_", "gho_", "ghs_", "ghu_", "ghr_"] {
        let token = format!("{prefix}{}", fill(ALNUM, 36));
        check(
            "github-token",
            &format!("push failed for {token}."),
            &format!("push failed for {}.", r("github-token")),
        );
    }
    let pat = format!("github_pat_{}_{}", fill(ALNUM, 22), fill(ALNUM, 59));
    check(
        "github-token",
        &format!("GH={pat}\n"),
        &format!("GH={}\n", r("github-token")),
    );
}

#[test]
fn rule_gitlab_token() {
    check(
        "gitlab-token",
        &format!("glpat-{} rejected", fill(ALNUM, 20)),
        &format!("{} rejected", r("gitlab-token")),
    );
}

#[test]
fn rule_slack_webhook() {
    check(
        "slack-webhook",
        "POST https://hooks.slack.com/services/T0000AAAA/B0000BBBB/XXXXXXXXXXXXXXXXXXXXXXXX 404",
        &format!(
            "POST https://hooks.slack.com/services/{} 404",
            r("slack-webhook")
        ),
    );
}

#[test]
fn rule_slack_token() {
    for prefix in ["xoxb-", "xoxp-", "xoxa-", "xoxs-"] {
        let token = format!("{prefix}1234567890-1234567890123-{}", fill(ALNUM, 24));
        check(
            "slack-token",
            &format!("token {token} invalid"),
            &format!("token {} invalid", r("slack-token")),
        );
    }
}

#[test]
fn rule_stripe_key() {
    for prefix in ["sk_live_", "rk_live_", "sk_test_"] {
        check(
            "stripe-key",
            &format!("key {prefix}{} bad", fill(ALNUM, 24)),
            &format!("key {} bad", r("stripe-key")),
        );
    }
}

#[test]
fn rule_google_api_key() {
    check(
        "google-api-key",
        &format!("?key=AIza{}-&q=1", fill(ALNUM, 34)),
        &format!("?key={}&q=1", r("google-api-key")),
    );
}

#[test]
fn rule_anthropic_key() {
    check(
        "anthropic-key",
        &format!(
            "ANTHROPIC={}",
            format_args!("sk-ant-api03-{}", fill(ALNUM, 40))
        ),
        &format!("ANTHROPIC={}", r("anthropic-key")),
    );
}

#[test]
fn rule_openai_key() {
    check(
        "openai-key",
        &format!("using sk-{}\n", fill(ALNUM, 48)),
        &format!("using {}\n", r("openai-key")),
    );
    check(
        "openai-key",
        &format!("using sk-proj-{}\n", fill(ALNUM, 80)),
        &format!("using {}\n", r("openai-key")),
    );
}

#[test]
fn rule_npm_token() {
    check(
        "npm-token",
        &format!("//registry.npmjs.org/:_authToken npm_{}", fill(ALNUM, 36)),
        &format!("//registry.npmjs.org/:_authToken {}", r("npm-token")),
    );
}

#[test]
fn rule_pypi_token() {
    check(
        "pypi-token",
        &format!("upload with pypi-AgEIcHlwaS5vcmc{}", fill(ALNUM, 60)),
        &format!("upload with {}", r("pypi-token")),
    );
}

#[test]
fn rule_jwt() {
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dGhpc2lzYXNpZ25hdHVyZQ";
    check(
        "jwt",
        &format!("value={{{jwt}}}"),
        &format!("value={{{}}}", r("jwt")),
    );
}

#[test]
fn rule_sendgrid_key() {
    check(
        "sendgrid-key",
        &format!("SG.{}.{} sent", fill(ALNUM, 22), fill(ALNUM, 43)),
        &format!("{} sent", r("sendgrid-key")),
    );
}

#[test]
fn rule_digitalocean_token() {
    check(
        "digitalocean-token",
        &format!("doctl: dop_v1_{}", fill("0123456789abcdef", 64)),
        &format!("doctl: {}", r("digitalocean-token")),
    );
}

#[test]
fn rule_vault_token() {
    check(
        "vault-token",
        &format!("vault token hvs.{}", fill(ALNUM, 24)),
        &format!("vault token {}", r("vault-token")),
    );
}

#[test]
fn rule_shopify_token() {
    check(
        "shopify-token",
        &format!("shpat_{} ok", fill("0123456789abcdef", 32)),
        &format!("{} ok", r("shopify-token")),
    );
}

#[test]
fn rule_huggingface_token() {
    check(
        "huggingface-token",
        &format!("hf_{}\n", fill(ALNUM, 34)),
        &format!("{}\n", r("huggingface-token")),
    );
}

#[test]
fn rule_twilio_key() {
    check(
        "twilio-key",
        &format!("key SK{} used", fill("0123456789abcdef", 32)),
        &format!("key {} used", r("twilio-key")),
    );
}

#[test]
fn rule_telegram_bot_token() {
    check(
        "telegram-bot-token",
        &format!(
            "https://api.telegram.org/bot123456789:AA{}/getMe",
            fill(ALNUM, 33)
        ),
        &format!(
            "https://api.telegram.org/bot{}/getMe",
            r("telegram-bot-token")
        ),
    );
}

#[test]
fn rule_azure_storage_key() {
    let key = format!("{}==", fill(ALNUM, 86));
    check(
        "azure-storage-key",
        &format!(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key};EndpointSuffix=core.windows.net"
        ),
        &format!(
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
            r("azure-storage-key")
        ),
    );
}

#[test]
fn rule_url_userinfo() {
    check(
        "url-userinfo",
        "fatal: unable to access 'https://deploy:hunter2@git.example.com/repo.git/'",
        &format!(
            "fatal: unable to access 'https://deploy:{}@git.example.com/repo.git/'",
            r("url-userinfo")
        ),
    );
    check(
        "url-userinfo",
        "postgres://app:p@ss:w0rd@db:5432/main",
        &format!("postgres://app:{}@db:5432/main", r("url-userinfo")),
    );
    check(
        "url-userinfo",
        "redis://:s3cret@cache:6379",
        &format!("redis://:{}@cache:6379", r("url-userinfo")),
    );
    for plain in [
        "https://example.com:8443/path?q=1",
        "ssh://git@github.com/org/repo.git",
        "http://[::1]:8080/health",
    ] {
        assert_eq!(Redactor::builtin().redact(plain).text, plain);
    }
}

#[test]
fn rule_password_assignment() {
    check(
        "password-assignment",
        "connecting with password=hunter2 to db\n",
        &format!(
            "connecting with password={} to db\n",
            r("password-assignment")
        ),
    );
    check(
        "password-assignment",
        "{\"user\": \"bob\", \"password\": \"c0rrect-H0rse\"}",
        &format!(
            "{{\"user\": \"bob\", \"password\": \"{}\"}}",
            r("password-assignment")
        ),
    );
    check(
        "password-assignment",
        "DB_PASSWORD='x7#y2Q'",
        &format!("DB_PASSWORD='{}'", r("password-assignment")),
    );
    check(
        "password-assignment",
        "passwd: abc123",
        &format!("passwd: {}", r("password-assignment")),
    );
    // Inside a JSON string, with its escaped quotes.
    check(
        "password-assignment",
        r#"{"msg":"login {\"password\":\"Q7x9hunter2\"} failed"}"#,
        &format!(
            r#"{{"msg":"login {{\"password\":\"{}\"}} failed"}}"#,
            r("password-assignment")
        ),
    );
    // An empty value hides nothing and counts nothing.
    let empty = "{\"password\": \"\"}";
    assert_eq!(Redactor::builtin().redact(empty).counts.total(), 0);
}

/// What follows a credential key is taken only if it looks like a secret:
/// ordinary words, placeholders, blanks and shell syntax stay as they are.
#[test]
fn assignment_values_that_do_not_look_like_secrets_stay() {
    for text in [
        "error: invalid token: expired",
        "open /etc/passwd: Permission denied",
        "password: (none)",
        "password: <your password here>",
        "password=${DB_PASSWORD}",
        "password=****",
        "password: null",
        "token: none",
        "token=true",
        "password: missing",
        "token: INVALID",
        "\"password\": \"correct horse battery\"",
        "export API_TOKEN=$(touch${IFS}pwned;echo${IFS}x)",
        "api_key=`cat key.txt`",
        "secret=a|b",
        "max_tokens: 4096",
        "token: 12345",
        "password=aaaa1111",
        "password=%s",
        "token: [hidden]",
        "password='{{ vault_password }}'",
    ] {
        let out = Redactor::builtin().redact(text);
        assert_eq!(out.text, text, "{text}");
        assert_eq!(out.counts.total(), 0, "{text}");
    }
    // These do look like secrets.
    for (text, shown) in [
        ("token: hUnTeR", "token: [redacted: token-assignment]"),
        (
            "password=123456",
            "password=[redacted: password-assignment]",
        ),
        (
            "secret: 9f86d081884c",
            "secret: [redacted: secret-assignment]",
        ),
    ] {
        assert_eq!(Redactor::builtin().redact(text).text, shown, "{text}");
    }
}

#[test]
fn rule_flag_argument() {
    for (flag, value) in [
        ("--password", "hunter2"),
        ("--token", "ab3"),
        ("--api-key", "k1"),
        ("--secret", "s3"),
        ("--client-secret", "xYz"),
    ] {
        check(
            "flag-argument",
            &format!("tool {flag} {value} --verbose"),
            &format!("tool {flag} {} --verbose", r("flag-argument")),
        );
        check(
            "flag-argument",
            &format!("tool {flag}={value} --verbose"),
            &format!("tool {flag}={} --verbose", r("flag-argument")),
        );
    }
    check(
        "flag-argument",
        "deploy --token=dG9rZW4x== now",
        &format!("deploy --token={} now", r("flag-argument")),
    );
    check(
        "flag-argument",
        "deploy --token 'a b c' now",
        &format!("deploy --token '{}' now", r("flag-argument")),
    );
    // Shell syntax and placeholders are shown, as everywhere.
    for text in [
        "deploy --token $(cat t) now",
        "deploy --password '****'",
        "x --token-file /t",
        // What help texts and examples put there: a type, a name, a spec.
        "  -p, --password string   Password or Personal Access Token (PAT)",
        "      --secret map        Cluster Volume secrets (default map[])",
        "gcloud secrets versions access 123 --secret=my-secret",
        "kubectl config set-credentials NAME [--token=bearer_token] [--password=basic_password]",
        "docker build --secret id=npmrc,src=.npmrc .",
    ] {
        assert_eq!(Redactor::builtin().redact(text).text, text);
    }
}

#[test]
fn rule_mysql_password() {
    check(
        "mysql-password",
        "mysql -u root -phunter2 -h db app",
        &format!("mysql -u root -p{} -h db app", r("mysql-password")),
    );
    check(
        "mysql-password",
        "mariadb-dump --single-transaction '-px y' app",
        &format!(
            "mariadb-dump --single-transaction '-p{}' app",
            r("mysql-password")
        ),
    );
    // `-p` alone prompts; `-P` is the port; other programs are left alone.
    for text in [
        "mysql -u root -p app",
        "mysql -P3306 app",
        "grep -pattern file",
    ] {
        assert_eq!(Redactor::builtin().redact(text).counts.total(), 0, "{text}");
    }
}

#[test]
fn rule_user_password_flag() {
    check(
        "user-password-flag",
        "curl -sS -u admin:s3cr3t https://api.example/v1",
        &format!(
            "curl -sS -u admin:{} https://api.example/v1",
            r("user-password-flag")
        ),
    );
    check(
        "user-password-flag",
        "wget --user=admin:s3cr3t https://x",
        &format!("wget --user=admin:{} https://x", r("user-password-flag")),
    );
    check(
        "user-password-flag",
        "http --user 'admin:p w' https://x",
        &format!("http --user 'admin:{}' https://x", r("user-password-flag")),
    );
    // No password given: nothing to hide.
    assert_eq!(
        Redactor::builtin()
            .redact("curl -u admin https://x")
            .counts
            .total(),
        0
    );
}

#[test]
fn rule_api_key_assignment() {
    for key in [
        "api_key",
        "apikey",
        "API-KEY",
        "access_key",
        "stripe_api_key",
    ] {
        check(
            "api-key-assignment",
            &format!("{key}=abc123&next=1"),
            &format!("{key}={}&next=1", r("api-key-assignment")),
        );
    }
    check(
        "api-key-assignment",
        "\"api_key\": \"k-12345\"",
        &format!("\"api_key\": \"{}\"", r("api-key-assignment")),
    );
}

#[test]
fn rule_secret_assignment() {
    check(
        "secret-assignment",
        "client_secret=abc123 scope=read",
        &format!("client_secret={} scope=read", r("secret-assignment")),
    );
    check(
        "secret-assignment",
        "\"secret\": \"shh-42x\"",
        &format!("\"secret\": \"{}\"", r("secret-assignment")),
    );
}

#[test]
fn rule_token_assignment() {
    check(
        "token-assignment",
        "GET /cb?access_token=abc123&state=x",
        &format!("GET /cb?access_token={}&state=x", r("token-assignment")),
    );
    check(
        "token-assignment",
        "{\"refresh_token\": \"r-1x2y3z\"}",
        &format!("{{\"refresh_token\": \"{}\"}}", r("token-assignment")),
    );
}

#[test]
fn several_secrets_are_counted_per_rule() {
    let input = format!(
        "password=a1b2c3 password=b2c3d4\nAuthorization: Bearer t0k3n\nghp_{}\n",
        fill(ALNUM, 36)
    );
    let out = Redactor::builtin().redact(&input);
    let counts: Vec<(&str, u64)> = out.counts.iter().collect();
    assert_eq!(
        counts,
        [
            ("bearer-token", 1),
            ("github-token", 1),
            ("password-assignment", 2)
        ]
    );
    assert_eq!(out.counts.total(), 4);
}

#[test]
fn extra_patterns_add_rules_after_the_builtin_ones() {
    let redactor = Redactor::with_extra_patterns(["corp-[0-9]{4}", "pin: ([0-9]+)"]).unwrap();
    let out = redactor.redact("id corp-1234, pin: 9876, password=x7Kp2q\n");
    assert_eq!(
        out.text,
        format!(
            "id {}, pin: {}, password={}\n",
            r("extra-0"),
            r("extra-1"),
            r("password-assignment")
        )
    );
    assert_eq!(out.counts.total(), 3);
    assert_eq!(
        redactor.extra_patterns(),
        ["corp-[0-9]{4}", "pin: ([0-9]+)"]
    );
    assert_eq!(
        redactor.rule_names().count(),
        Redactor::builtin_rule_names().count() + 2
    );
    assert_ne!(redactor, Redactor::builtin());
}

#[test]
fn bad_extra_patterns_are_refused_with_their_index() {
    let err = Redactor::with_extra_patterns(["ok", "(unclosed"]).unwrap_err();
    assert_eq!((err.index, err.pattern.as_str()), (1, "(unclosed"));
    assert_eq!(
        err.to_string(),
        "pattern 1 \"(unclosed\" is not valid: unclosed group"
    );
    let err = Redactor::with_extra_patterns(["[z-a]"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pattern 0 \"[z-a]\" is not valid: invalid character class range, the start must be <= the end"
    );
    let err = Redactor::with_extra_patterns(["x*"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pattern 0 \"x*\" is not valid: it matches the empty string"
    );
}

#[test]
fn cut_edges_hide_the_cut_word_and_cut_key_bodies() {
    let redactor = Redactor::builtin();
    let render = |hay: &[u8], edges: Edges| {
        let spans = redactor.spans(hay, edges);
        let mut out = String::new();
        redactor.write(hay, &spans, &mut out);
        (out, redactor.count(&spans))
    };
    let start = Edges {
        start: true,
        start_trimmed: false,
        end: false,
    };
    let end = Edges {
        start: false,
        start_trimmed: false,
        end: true,
    };
    let (out, counts) = render(b"123abc more words\nend", start);
    assert_eq!(out, "[cut] more words\nend");
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));
    let (out, counts) = render(b"start of it ghp_0123", end);
    assert_eq!(out, "start of it [cut]");
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));
    // A cut keyword takes the credential after it along.
    let (out, _) = render(b"arer abc123 rest", start);
    assert_eq!(out, "[cut] rest");
    let (out, _) = render(b"zation: Bearer abc123 rest", start);
    assert_eq!(out, "[cut] rest");
    let (out, _) = render(b"rd: hunter2 rest", start);
    assert_eq!(out, "[cut] rest");
    let (out, _) = render(b"_key\": \"k-1\" rest", start);
    assert_eq!(out, "[cut]\" rest");
    let (out, _) = render(b"d\": \"hunter2\" rest", start);
    assert_eq!(out, "[cut]\" rest");
    let (out, _) = render(b"word\":\"hunter2\",\"n\":1}", start);
    assert_eq!(out, "[cut]\",\"n\":1}");
    let (out, _) = render(b"\"hunter2\",\"n\":1}", start);
    assert_eq!(out, "[cut]\",\"n\":1}");
    // A cut in one value of a long line without blanks (minified JSON)
    // hides that value, not the line.
    let (out, counts) = render(b"ror 42\",\"trace\":[\"a.py:1\"]}\n", start);
    assert_eq!(out, "[cut] 42\",\"trace\":[\"a.py:1\"]}\n");
    assert_eq!(counts.cut_words(), 1);
    // A cut run of digits holds no secret: it is shown.
    let (out, counts) = render(b"42\",\"trace\":[\"a.py:1\"]}\n", start);
    assert_eq!(out, "42\",\"trace\":[\"a.py:1\"]}\n");
    assert_eq!(counts.cut_words(), 0);
    let (out, _) = render(b"{\"level\":\"error\",\"token\":\"ghp_01", end);
    assert_eq!(out, "{\"level\":\"error\",\"token\":\"[cut]");
    // A quote inside a secret ends nothing: only a quote that closes a
    // value (unescaped, then a blank, `,`, `}`, `]`, `)`, `:`, `;` or the
    // end) ends the cut word; at an end edge, only one that opens a value.
    for (cut, shown) in [
        (&b"7'k9#mQw2\"}\n"[..], "[cut]\"}\n"),
        (b"n\\\"ter2x\"}", "[cut]\"}"),
        (b"7\"k9#mQ' psql", "[cut]' psql"),
        (b"ter''2secret'", "[cut]'"),
        (b"rd\\\":\\\"hunter2\\\"}\"}", "[cut]\"}"),
        (b"\"x\", next", "[cut]\", next"),
    ] {
        assert_eq!(
            render(cut, start).0,
            shown,
            "{}",
            String::from_utf8_lossy(cut)
        );
    }
    for (cut, shown) in [
        (&b"{\"password\":\"Xy7'k9"[..], "{\"password\":\"[cut]"),
        (b"PGPASSWORD='Xy7\"k9", "PGPASSWORD='[cut]"),
        (b"{\"msg\":\"{\\\"password\\\":\\\"hunt", "{\"msg\":\"[cut]"),
        (b"say \"it's", "say \"[cut]"),
    ] {
        assert_eq!(
            render(cut, end).0,
            shown,
            "{}",
            String::from_utf8_lossy(cut)
        );
    }
    // A cut on the blank before a word: the word may be a value.
    let (out, _) = render(b" hunter2 rest", start);
    assert_eq!(out, "[cut] rest");
    // A text that starts with a new line has no cut word.
    let (out, counts) = render(b"\nwhole line", start);
    assert_eq!((out.as_str(), counts.cut_words()), ("\nwhole line", 0));

    // A body whose BEGIN was cut away: redacted up to its END line.
    let body = format!("{}\n{}\n", fill(ALNUM, 30), fill(ALNUM, 64));
    let text = format!("{body}-----END RSA PRIVATE KEY-----\nnext\n");
    let (out, counts) = render(text.as_bytes(), start);
    assert_eq!(
        out,
        format!("{}-----END RSA PRIVATE KEY-----\nnext\n", r("private-key"))
    );
    assert_eq!((counts.rule("private-key"), counts.cut_words()), (1, 0));
    // ... or over its base64 lines when the END line is not there either.
    let text = format!("{body}{}\n", fill(ALNUM, 12));
    let (out, _) = render(text.as_bytes(), start);
    assert_eq!(out, format!("{}\n", r("private-key")));
    // Ordinary lines after a cut are not a key body.
    let (out, counts) = render(b"gnostic\nhelper-diagnostic\n", start);
    assert_eq!(out, "[cut]\nhelper-diagnostic\n");
    assert_eq!(counts.total(), 0);
}

/// A window that cut a program's name still takes `-pX` and `-u user:X`
/// where the cut may have been the blank before them; not after the
/// trimmed rest of a character the cut split, which stands before them as
/// it would before `-p` in the whole line (`mysql é-pX` is no password).
#[test]
fn a_cut_program_name_takes_flags_only_where_an_argument_may_start() {
    let redactor = Redactor::builtin();
    let render = |hay: &[u8], start_trimmed: bool| {
        let edges = Edges {
            start: true,
            start_trimmed,
            end: false,
        };
        let spans = redactor.spans(hay, edges);
        let mut out = String::new();
        redactor.write(hay, &spans, &mut out);
        (out, redactor.count(&spans))
    };
    // At the cut: the byte before `-p` was dropped, maybe a blank.
    let (out, counts) = render(b"-phunter2 -h db app\n", false);
    assert_eq!(out, format!("{} -h db app\n", r("mysql-password")));
    assert_eq!((counts.rule("mysql-password"), counts.cut_words()), (1, 0));
    let (out, counts) = render(b"-u admin:s3cr3t https://x\n", false);
    assert_eq!(out, format!("{} https://x\n", r("user-password-flag")));
    assert_eq!(counts.rule("user-password-flag"), 1);
    // After trimmed continuation bytes: no argument starts there, so only
    // the cut word is hidden, as a cut word.
    let (out, counts) = render(b"-phunter2 -h db app\n", true);
    assert_eq!(out, "[cut] -h db app\n");
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));
    let (out, counts) = render(b"-u admin:s3cr3t https://x\n", true);
    assert_eq!(out, "[cut] https://x\n");
    assert_eq!((counts.total(), counts.cut_words()), (0, 1));
    // Later arguments of the first line are taken either way.
    let (out, counts) = render(b"-x -phunter2 app\n", true);
    assert_eq!(out, format!("[cut] -p{} app\n", r("mysql-password")));
    assert_eq!((counts.rule("mysql-password"), counts.cut_words()), (1, 1));
    // The whole line agrees: a character glued before `-p` makes no flag.
    for text in [
        "mysql -u root \u{e9}-phunter2 app",
        "curl \u{e9}-u admin:s3cr3t https://x",
    ] {
        assert_eq!(redactor.redact(text).counts.total(), 0, "{text}");
    }
}

/// A JSON literal or structure after a credential key is no secret; a
/// number may be (a PIN, a one-time code).
#[test]
fn json_literals_after_a_credential_key_are_left_alone() {
    let text = r#"{"next_token":null,"has_password":false,"Token": TRUE,"token":{"a":1},"api_key":[1],"password":"hunter2","refresh_token":123456,"x":{"token":null}}"#;
    let out = Redactor::builtin().redact(text);
    assert_eq!(
        out.text,
        r#"{"next_token":null,"has_password":false,"Token": TRUE,"token":{"a":1},"api_key":[1],"password":"[redacted: password-assignment]","refresh_token":[redacted: token-assignment],"x":{"token":null}}"#
    );
    assert_eq!(out.counts.total(), 2);
}

#[test]
fn a_secret_right_after_an_osc_sequence_of_any_length_is_redacted() {
    // A terminal title or hyperlink, however long, then the secret with no
    // blank: its end (BEL or ESC \) is the boundary, and it is kept.
    let token = format!("ghp_{}", fill(ALNUM, 36));
    for body in [fill("title ", 6), fill("title ", 2_000)] {
        for end in ["\u{7}", "\u{1b}\\"] {
            let osc = format!("\u{1b}]0;{body}{end}");
            check(
                "github-token",
                &format!("{osc}{token} done"),
                &format!("{osc}{} done", r("github-token")),
            );
            check(
                "flag-argument",
                &format!("{osc}--token=S3cr3tPw9 db"),
                &format!("{osc}--token={} db", r("flag-argument")),
            );
        }
    }
}

#[test]
fn a_value_ends_at_a_colour_or_a_title_end() {
    // A bare value stops at BEL or ESC: an assignment inside a title does
    // not swallow the title's end and the flag after it, and a colour
    // reset after a value is kept.
    for end in ["\u{7}", "\u{1b}\\"] {
        let title = format!("\u{1b}]0;token=abc{end}");
        let out = Redactor::builtin().redact(&format!("{title}--token S3cr3tPw9 db"));
        assert_eq!(
            out.text,
            format!("{title}--token {} db", r("flag-argument")),
            "{end:?}"
        );
        assert_eq!(out.counts.total(), 1);
    }
    check(
        "password-assignment",
        "\u{1b}[31mpassword=hunter2x\u{1b}[0m retry",
        &format!(
            "\u{1b}[31mpassword={}\u{1b}[0m retry",
            r("password-assignment")
        ),
    );
}

#[test]
fn the_compiled_builtin_set_stays_small() {
    // The built-in rules compiled into one automaton (forward and
    // reverse). A rule that repeats a counted class ({0,512}) in every
    // prefix multiplies this about tenfold, and the process's peak memory
    // with it.
    let bytes = Redactor::builtin().inner.regex().memory_usage();
    println!("the built-in set holds {bytes} bytes");
    assert!(bytes < 512 * 1024, "the built-in set holds {bytes} bytes");
}

#[test]
fn a_placeholder_is_left_as_it_is_but_only_one_of_the_redactors_rules() {
    let redactor = Redactor::builtin();
    let once = redactor
        .redact("target: password=hunter2 and token=ghp_0123456789abcdefABCDEF0123456789abcd");
    let twice = redactor.redact(&once.text);
    assert_eq!(twice.text, once.text);
    assert_eq!(twice.counts.total(), 0);
    // Written by the helper to look redacted: a name that is no rule of
    // the redactor is a value like any other.
    for made_up in [
        "password=[redacted: hunter2]",
        "password=[redacted: c0rrect-H0rse]",
        "password=[redacted: password-assignment-x]",
    ] {
        let out = redactor.redact(made_up);
        assert_eq!(out.counts.total(), 1, "{made_up}: {out:?}");
        assert!(
            !out.text.contains("hunter2") && !out.text.contains("H0rse"),
            "{out:?}"
        );
    }
    // A header's scheme before a placeholder is passed over, and only a
    // header's scheme: a value of another rule that ends in a scheme word
    // is redacted.
    for text in [
        "{\"Authorization\": \"Basic [redacted: authorization-header]\"}",
        "{\"Authorization\": \"Bearer [redacted: bearer-token]\"}",
        "GET /x?authorization=Bearer%20[redacted: bearer-token] HTTP/1.1",
    ] {
        let out = redactor.redact(text);
        assert_eq!(out.text, text, "{out:?}");
    }
    for text in [
        "password=Xk9vQ2mLp7:Bearer [redacted: jwt]",
        "token=Xk9vQ2mLp7=Key [redacted: jwt]",
        "curl -u admin:Xk9vQ2mLp7Basic [redacted: jwt]",
    ] {
        let out = redactor.redact(text);
        assert!(!out.text.contains("Xk9vQ2mLp7"), "{text}: {out:?}");
    }
    // Linear: many placeholders, or openings without a name's end.
    let many = format!("password=Xk9vQ2mLp7 {}", "[redacted: jwt] ".repeat(10_000));
    let out = redactor.redact(&many);
    assert_eq!(out.counts.total(), 1);
    let open = format!("password=Xk9vQ2mLp7 {}]", "[redacted: ".repeat(10_000));
    assert_eq!(redactor.redact(&open).counts.total(), 1);
    // A custom rule's placeholder is one of its redactor's.
    let custom = Redactor::compile(vec!["secret-[0-9]+".into()]).unwrap();
    let once = custom.redact("id secret-42 end");
    assert_eq!(once.text, "id [redacted: extra-0] end");
    assert_eq!(custom.redact(&once.text).text, once.text);
}
