//! The shapes operations tools print credentials in: SQL password
//! clauses, data source names, CLI password options, `config set KEY
//! VALUE`, config layouts (YAML blocks, XML attribute pairs, TOML
//! multi-line strings, `.pgpass`), protocol traces; and the code paths,
//! test names and panics beside them that must stay (exact outputs and
//! counts).

use super::tests::check;
use super::*;

fn r(rule: &str) -> String {
    format!("[redacted: {rule}]")
}

/// `input` left as it is, with no redaction.
fn stays(input: &str) {
    let out = Redactor::builtin().redact(input);
    let counts: Vec<(&str, u64)> = out.counts.iter().collect();
    assert_eq!(
        (out.text.as_str(), counts),
        (input, vec![]),
        "input {input:?}"
    );
}

/// `input` redacted by a scanner to `expected`, one secret, by `rule`.
fn scanned(rule: &str, input: &str, expected: &str) {
    let out = Redactor::builtin().redact(input);
    let counts: Vec<(&str, u64)> = out.counts.iter().collect();
    assert_eq!(out.text, expected, "input {input:?}");
    assert_eq!(counts, [(rule, 1)], "input {input:?}");
}

const PW: &str = "Xk9mP2vLq8zT";

#[test]
fn rule_sql_password() {
    let x = r("sql-password");
    for (input, expected) in [
        (
            format!("CREATE USER app WITH PASSWORD '{PW}';"),
            format!("CREATE USER app WITH PASSWORD '{x}';"),
        ),
        (
            "ALTER ROLE app ENCRYPTED PASSWORD 'Xk9#mP2v''Lq';".to_owned(),
            format!("ALTER ROLE app ENCRYPTED PASSWORD '{x}';"),
        ),
        (
            format!("CREATE USER 'app'@'%' IDENTIFIED BY '{PW}';"),
            format!("CREATE USER 'app'@'%' IDENTIFIED BY '{x}';"),
        ),
        (
            format!("ALTER USER 'a'@'h' IDENTIFIED WITH mysql_native_password BY '{PW}'"),
            format!("ALTER USER 'a'@'h' IDENTIFIED WITH mysql_native_password BY '{x}'"),
        ),
        (
            format!("CREATE USER scott IDENTIFIED BY {PW};"),
            format!("CREATE USER scott IDENTIFIED BY {x};"),
        ),
        (
            format!(r#"{{"stmt":"ALTER ROLE x PASSWORD \"{PW}\""}}"#),
            format!(r#"{{"stmt":"ALTER ROLE x PASSWORD \"{x}\""}}"#),
        ),
    ] {
        check("sql-password", &input, &expected);
    }
    stays("ALTER ROLE app PASSWORD NULL;");
    stays("ALTER ROLE app PASSWORD 'md5';");
    stays("Enter the password 'twice' to confirm");
    stays("ALTER ROLE app PASSWORD %s;");
}

#[test]
fn rule_dsn_userinfo() {
    let x = r("dsn-userinfo");
    for (input, expected) in [
        (
            format!("dsn: app:{PW}@tcp(db:3306)/prod?parseTime=true"),
            format!("dsn: app:{x}@tcp(db:3306)/prod?parseTime=true"),
        ),
        (
            format!("DSN=root:p@ss:{PW}@unix(/run/mysqld/mysqld.sock)/app"),
            format!("DSN=root:{x}@unix(/run/mysqld/mysqld.sock)/app"),
        ),
        (
            format!("mysql://app:{PW}@tcp(db:3306)/prod"),
            format!("mysql://app:{x}@tcp(db:3306)/prod"),
        ),
        (
            format!("+ sqlplus -s scott/{PW}@orcl @report.sql"),
            format!("+ sqlplus -s scott/{x}@orcl @report.sql"),
        ),
        (
            format!("url=jdbc:oracle:thin:scott/{PW}@db:1521/svc"),
            format!("url=jdbc:oracle:thin:scott/{x}@db:1521/svc"),
        ),
    ] {
        check("dsn-userinfo", &input, &expected);
    }
    stays("dsn: app:${DB_PASSWORD}@tcp(db:3306)/prod");
    stays("listening on tcp(127.0.0.1:8080)");
}

#[test]
fn cli_password_options_of_common_programs() {
    let x = r("password-argument");
    for (input, expected) in [
        (
            format!("ldapsearch -x -D cn=admin,dc=ex -w {PW} -b dc=ex"),
            format!("ldapsearch -x -D cn=admin,dc=ex -w {x} -b dc=ex"),
        ),
        (
            format!("az login -u me@example.com -p '{PW}'"),
            format!("az login -u me@example.com -p '{x}'"),
        ),
        (
            format!("sqlcmd -S db -U sa -P {PW} -Q 'select 1'"),
            format!("sqlcmd -S db -U sa -P {x} -Q 'select 1'"),
        ),
        (
            format!("smbclient //srv/share -U admin%{PW} -c ls"),
            format!("smbclient //srv/share -U admin%{x} -c ls"),
        ),
        (
            format!("openssl pkcs12 -export -in c.pem -passout pass:{PW} -out x.p12"),
            format!("openssl pkcs12 -export -in c.pem -passout pass:{x} -out x.p12"),
        ),
        (
            format!("keytool -list -keystore ks.jks -storepass {PW}"),
            format!("keytool -list -keystore ks.jks -storepass {x}"),
        ),
    ] {
        check("password-argument", &input, &expected);
    }
    // Both passwords of one command line.
    let out = Redactor::builtin().redact(&format!(
        "keytool -importkeystore -srcstorepass {PW} -destkeypass Ab7mQ2vLq8zT"
    ));
    assert_eq!(
        out.text,
        format!("keytool -importkeystore -srcstorepass {x} -destkeypass {x}")
    );
    assert_eq!(out.counts.rule("password-argument"), 2);
    stays("ldapsearch -x -W -b dc=example,dc=com");
    stays("az login -u me@example.com -p $AZ_PASSWORD");
    stays("smbclient -L //srv -U guest");
    stays("openssl pkcs12 -in x.p12 -passin env:P12_PASS");
}

#[test]
fn rule_config_set_credential() {
    let x = r("config-set-credential");
    for (input, expected) in [
        (
            "aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
                .to_owned(),
            format!("aws configure set aws_secret_access_key {x}"),
        ),
        (
            format!("aws configure set aws_session_token {PW} --profile dev"),
            format!("aws configure set aws_session_token {x} --profile dev"),
        ),
        (
            format!("git config --global user.password {PW}"),
            format!("git config --global user.password {x}"),
        ),
        (
            format!("yarn config set npmAuthToken \"{PW}\""),
            format!("yarn config set npmAuthToken \"{x}\""),
        ),
        (
            format!("dotnet user-secrets set \"Db:Password\" '{PW}'"),
            format!("dotnet user-secrets set \"Db:Password\" '{x}'"),
        ),
    ] {
        check("config-set-credential", &input, &expected);
    }
    stays("git config --global credential.helper store");
    stays("git config --global credential.helper 'cache --timeout=3600'");
    stays("aws configure set region eu-west-1");
    stays("npm config set token-file ~/.config/npm/token");
}

#[test]
fn rule_xml_key_value() {
    let x = r("xml-key-value");
    check(
        "xml-key-value",
        &format!(r#"<add key="DbPassword" value="{PW}"/>"#),
        &format!(r#"<add key="DbPassword" value="{x}"/>"#),
    );
    check(
        "xml-key-value",
        &format!("<entry name='api.token' value='{PW}' />"),
        &format!("<entry name='api.token' value='{x}' />"),
    );
    stays(r#"<add key="PasswordPolicy" value="strict"/>"#);
    stays(r#"<add key="LogLevel" value="Xk9mP2vLq8zT"/>"#);
}

#[test]
fn rule_protocol_auth() {
    let x = r("protocol-auth");
    for (input, expected) in [
        (
            "send: 'AUTH PLAIN AHVzZXIAWGs5bVAydkxxOHpU\\r\\n'".to_owned(),
            format!("send: 'AUTH PLAIN {x}\\r\\n'"),
        ),
        (format!("> PASS {PW}\r\n"), format!("> PASS {x}\r\n")),
        (format!("PASS {PW}\n"), format!("PASS {x}\n")),
        (format!("*cmd* 'PASS {PW}'"), format!("*cmd* 'PASS {x}'")),
        (
            format!(r#"1700000000.1 [0 127.0.0.1:6379] "AUTH" "app" "{PW}""#),
            format!(r#"1700000000.1 [0 127.0.0.1:6379] "AUTH" "app" "{x}""#),
        ),
        (
            format!(r#"[0 127.0.0.1:6379] "auth" "{PW}""#),
            format!(r#"[0 127.0.0.1:6379] "auth" "{x}""#),
        ),
    ] {
        check("protocol-auth", &input, &expected);
    }
    stays("*cmd* 'PASS **********'");
    stays("PASS src/components/Button.test.tsx");
    stays("--- PASS: TestLogin (0.00s)");
    stays("PASS: tests/unit");
    stays("smtp: AUTH LOGIN failed");
}

#[test]
fn a_percent_encoded_bearer_token_is_a_token() {
    check(
        "bearer-token",
        "GET /x?authorization=Bearer%20abcDEF123456ghiJKL HTTP/1.1",
        &format!(
            "GET /x?authorization=Bearer%20{} HTTP/1.1",
            r("bearer-token")
        ),
    );
}

#[test]
fn rule_yaml_block_secret() {
    let x = r("yaml-block-secret");
    scanned(
        "yaml-block-secret",
        &format!("password: |\n  {PW}\nnext: 1\n"),
        &format!("password: |\n  {x}\nnext: 1\n"),
    );
    // A folded value over two lines, under an indented key.
    scanned(
        "yaml-block-secret",
        &format!("db:\n  db_password: >-\n    {PW}\n    second-{PW}\n  user: app\n"),
        &format!("db:\n  db_password: >-\n    {x}\n  user: app\n"),
    );
    // In a JSON log line.
    scanned(
        "yaml-block-secret",
        &format!(r#"{{"msg":"token: |-\n  {PW}\nnext: 1"}}"#),
        &format!(r#"{{"msg":"token: |-\n  {x}\nnext: 1"}}"#),
    );
    stays("description: |\n  some text here\n");
    stays("password: |\n  ${DB_PASSWORD}\n");
}

#[test]
fn rule_toml_multiline_secret() {
    let x = r("toml-multiline-secret");
    scanned(
        "toml-multiline-secret",
        &format!("password = \"\"\"{PW}\"\"\"\n"),
        &format!("password = \"\"\"{x}\"\"\"\n"),
    );
    scanned(
        "toml-multiline-secret",
        &format!("token = '''\n{PW}\n'''\n"),
        &format!("token = '''\n{x}\n'''\n"),
    );
    scanned(
        "toml-multiline-secret",
        &format!(r#"{{"m":"password = \"\"\"{PW}\"\"\""}}"#),
        &format!(r#"{{"m":"password = \"\"\"{x}\"\"\""}}"#),
    );
    stays("description = \"\"\"\nA long text.\n\"\"\"\n");
}

#[test]
fn rule_pgpass_line() {
    let x = r("pgpass-line");
    scanned(
        "pgpass-line",
        &format!("db.example.com:5432:app:appuser:{PW}\n"),
        &format!("db.example.com:5432:app:appuser:{x}\n"),
    );
    scanned(
        "pgpass-line",
        &format!("*:*:*:postgres:{PW}\n"),
        &format!("*:*:*:postgres:{x}\n"),
    );
    stays("00:11:22:33:44:55\n");
    stays("12:30:45:123:abcdef\n");
    stays("src/main.rs:10:5:note:value\n");
}

#[test]
fn ini_and_yaml_values_keep_their_semicolons_and_hashes() {
    let x = r("password-assignment");
    check(
        "password-assignment",
        "password = nXP;yV3l#OnHb",
        &format!("password = {x}"),
    );
    check(
        "password-assignment",
        "password: nXP;yV3l#OnHb",
        &format!("password: {x}"),
    );
    // A shell's `KEY=value;cmd`: the value ends at the `;` (where the
    // pattern's group runs on, so this is checked without it).
    let out = Redactor::builtin().redact(&format!("PASSWORD={PW};echo done"));
    assert_eq!(out.text, format!("PASSWORD={x};echo done"));
    assert_eq!(out.counts.rule("password-assignment"), 1);
}

#[test]
fn code_paths_test_names_panics_and_frames_stay() {
    for line in [
        "test auth::tests::x ... ok",
        "test auth::tests::login_fails ... FAILED",
        "thread 'auth::tests::login_fails' panicked at src/auth.rs:10:5:",
        "   3: token::Lexer::next_token",
        "             at token::Lexer::next_token (src/lexer.rs:40)",
        "credentials::provider::chain: loading profile",
        "password::policy::MIN_LEN = 12",
        "self.password.validate(&input)",
        "secret.expose_secret()",
        "let secret: SecretString = load()?;",
        "    password: Option<String>,",
        "error[E0308]: mismatched types: expected `PasswordHash`, found `String`",
        "/etc/passwd:root:x:0:0:root:/root:/bin/bash",
        "/etc/passwd:daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin",
    ] {
        stays(line);
    }
}
