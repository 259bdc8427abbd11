//! The forms of each class: the syntax a tool prints the secret in, with
//! secrets drawn from the corpus's generator.

use super::{ALNUM, B64, HEX, Rng, base64, percent_escape};

/// A form before its carriers: (form, syntax, text, secret).
pub(super) type Base = (&'static str, &'static str, String, String);

/// A form's text around its secret.
type Make = fn(&str) -> String;

/// A PEM block of `label` whose body is `lines` lines of base64 (64 per
/// line, the last shorter), body joined with `newline`: (block, body).
fn pem(rng: &mut Rng, label: &str, lines: usize, newline: &str) -> (String, String) {
    let mut body: Vec<String> = (0..lines).map(|_| rng.draw(B64, 64)).collect();
    let last = rng.range(8, 60);
    body.push(format!("{}==", rng.draw(B64, last)));
    let body = body.join(newline);
    (
        format!("-----BEGIN {label}-----{newline}{body}{newline}-----END {label}-----"),
        body,
    )
}

pub(super) fn provider_forms(seed: u64) -> Vec<Base> {
    let mut out = Vec::new();
    for round in 0..2 {
        for (provider, token) in spillguard_core::provider_samples(seed ^ (round * 0x5151)) {
            let t = &token;
            let forms: [(&'static str, String); 11] = [
                ("alone", format!("{t}\n")),
                ("json", format!("{{\"id\":\"req-7\",\"value\":\"{t}\"}}\n")),
                ("yaml", format!("item:\n  value: {t}\n")),
                ("ini", format!("[upload]\nvalue = {t}\n")),
                ("env", format!("VALUE={t}\n")),
                ("xml", format!("<Item><Value>{t}</Value></Item>\n")),
                ("header", format!("X-Debug-Value: {t}\n")),
                ("flag", format!("deploy --value {t} --region eu-west-1\n")),
                ("next-word", format!("uploading with {t} now\n")),
                (
                    "url",
                    format!("GET https://api.example.com/v1/items?v={t}&page=2\n"),
                ),
                (
                    "go-map",
                    format!("fields=map[Accept:[*/*] Value:[{t}] Retry:[3]]\n"),
                ),
            ];
            for (syntax, text) in forms {
                out.push((provider, syntax, text, token.clone()));
            }
        }
    }
    out
}

pub(super) fn quoted_symbol_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = Vec::new();
    for _ in 0..3 {
        let forms: [(&'static str, Make); 8] = [
            ("json", |p| {
                format!("{{\"user\":\"deploy\",\"password\":\"{p}\",\"port\":5432}}\n")
            }),
            ("yaml-double", |p| {
                format!("database:\n  password: \"{p}\"\n")
            }),
            ("yaml-single", |p| format!("db:\n  db_password: '{p}'\n")),
            ("ini", |p| format!("[client]\npassword = \"{p}\"\n")),
            ("env", |p| format!("X_PASSWORD=\"{p}\"\n")),
            ("export", |p| format!("+ export API_TOKEN='{p}'\n")),
            ("flag", |p| {
                format!("+ pg_dump --username app --password '{p}' app\n")
            }),
            ("flag-secret", |p| {
                format!("+ oauth-cli login --client-secret \"{p}\"\n")
            }),
        ];
        for (syntax, make) in forms {
            let secret = rng.symbol_password();
            out.push((syntax, syntax, make(&secret), secret));
        }
    }
    out
}

pub(super) fn key_syntax_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = Vec::new();
    for _ in 0..2 {
        let aws_secret = rng.draw(B64, 40);
        let session_len = rng.range(300, 420);
        let session = rng.draw(B64, session_len);
        let forms: [(&'static str, String, Make); 19] = [
            ("xml-secret-access-key", aws_secret, |s| {
                format!("      <SecretAccessKey>{s}</SecretAccessKey>\n")
            }),
            ("xml-session-token", session, |s| {
                format!("      <SessionToken>{s}</SessionToken>\n")
            }),
            ("xml-password", rng.password(), |s| {
                format!("  <password>{s}</password>\n")
            }),
            ("xml-attribute", rng.password(), |s| {
                format!("<user name=\"deploy\" password=\"{s}\" roles=\"admin\"/>\n")
            }),
            ("go-map", rng.draw(ALNUM, 40), |s| {
                format!(
                    "req.Header=map[Accept:[*/*] Authorization:[Bearer {s}] User-Agent:[Go-http-client/1.1]]\n"
                )
            }),
            ("cookie", rng.draw(ALNUM, 32), |s| {
                format!("> Cookie: session={s}; theme=dark; lang=en\n")
            }),
            ("set-cookie", rng.draw(ALNUM, 32), |s| {
                format!("< Set-Cookie: sid={s}; Path=/; HttpOnly; Secure\n")
            }),
            ("netrc", rng.password(), |s| {
                format!("machine api.example.com login deploy password {s}\n")
            }),
            ("docker-login", rng.password(), |s| {
                format!("+ docker login -u deploy -p {s} registry.example.com\n")
            }),
            ("sshpass", rng.password(), |s| {
                format!("+ sshpass -p {s} ssh deploy@10.0.0.7 uptime\n")
            }),
            ("odbc-pwd", rng.password(), |s| {
                format!(
                    "Driver={{ODBC Driver 18}};Server=db.example.com;Database=app;Uid=app;Pwd={s};\n"
                )
            }),
            ("connection-password", rng.password(), |s| {
                format!("Host=db.example.com;Username=app;Password={s};Database=app\n")
            }),
            ("mysql-pwd", rng.password(), |s| format!("MYSQL_PWD={s}\n")),
            ("redis-pass", rng.password(), |s| {
                format!("REDIS_PASS={s}\n")
            }),
            ("ansible-become-pass", rng.password(), |s| {
                format!("ansible_become_pass: {s}\n")
            }),
            ("db-passwd", rng.password(), |s| format!("DB_PASSWD={s}\n")),
            ("x-auth-token", rng.draw(ALNUM, 32), |s| {
                format!("x-auth-token: {s}\n")
            }),
            ("client-secret", rng.draw(ALNUM, 40), |s| {
                format!("client_secret={s}\n")
            }),
            ("private-key-name", rng.draw(HEX, 64), |s| {
                format!("private_key: {s}\n")
            }),
        ];
        for (form, secret, make) in forms {
            out.push((form, form, make(&secret), secret));
        }
    }
    out
}

pub(super) fn url_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = Vec::new();
    for _ in 0..3 {
        let symbols = format!(
            "{}/{}#{}",
            rng.draw(ALNUM, 6),
            rng.draw(ALNUM, 5),
            rng.draw(ALNUM, 6)
        );
        let escaped = percent_escape(&format!(
            "{}/{}#{}@{}",
            rng.draw(ALNUM, 5),
            rng.draw(ALNUM, 4),
            rng.draw(ALNUM, 4),
            rng.draw(ALNUM, 3)
        ));
        let sig = percent_escape(&base64(&rng.bytes(32)));
        let security_len = rng.range(200, 300);
        let security = percent_escape(&base64(&rng.bytes(security_len)));
        let forms: [(&'static str, String, Make); 9] = [
            ("token-user", rng.draw(ALNUM, 40), |s| {
                format!("Cloning into 'repo'... https://{s}@github.com/org/repo.git\n")
            }),
            ("userinfo-symbols", symbols, |s| {
                format!("fatal: unable to access 'https://deploy:{s}@git.example.com/r.git/'\n")
            }),
            ("userinfo-escaped", escaped, |s| {
                format!("fetching https://deploy:{s}@pkgs.example.com/simple/\n")
            }),
            ("azure-sas", sig, |s| {
                format!(
                    "GET https://acct.blob.core.windows.net/c/file.bin?sv=2022-11-02&ss=b&srt=co&sp=rl&se=2026-12-31T00:00:00Z&spr=https&sig={s}\n"
                )
            }),
            ("x-amz-signature", rng.draw(HEX, 64), |s| {
                format!(
                    "https://bucket.s3.amazonaws.com/k.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={s}\n"
                )
            }),
            ("x-amz-security-token", security, |s| {
                format!(
                    "https://bucket.s3.amazonaws.com/k.tar?X-Amz-Security-Token={s}&X-Amz-Expires=3600\n"
                )
            }),
            ("access-token", rng.draw(ALNUM, 48), |s| {
                format!("GET https://graph.example.com/me?fields=id&access_token={s}\n")
            }),
            ("token", rng.draw(ALNUM, 32), |s| {
                format!("connecting to wss://stream.example.com/v2?token={s}&v=3\n")
            }),
            ("oauth-code", rng.draw(ALNUM, 40), |s| {
                format!(
                    "redirect: https://app.example.com/oauth/callback?code={s}&state=af0ifjsldkj\n"
                )
            }),
        ];
        for (form, secret, make) in forms {
            out.push((form, form, make(&secret), secret));
        }
    }
    out
}

pub(super) fn encoded_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = Vec::new();
    for _ in 0..3 {
        let docker_auth = base64(format!("deploy:{}", rng.password()).as_bytes());
        let (key, _) = pem(rng, "RSA PRIVATE KEY", 4, "\n");
        let pem_b64 = base64(format!("{key}\n").as_bytes());
        let password_b64 = base64(rng.password().as_bytes());
        let dockerconfig = base64(
            format!(
                "{{\"auths\":{{\"registry.example.com\":{{\"username\":\"deploy\",\"password\":\"{}\",\"auth\":\"{}\"}}}}}}",
                rng.password(),
                base64(b"deploy:x")
            )
            .as_bytes(),
        );
        let basic = base64(format!("admin:{}", rng.password()).as_bytes());
        let json_password = base64(rng.password().as_bytes());
        let forms: [(&'static str, String, Make); 6] = [
            ("docker-config-auth", docker_auth, |s| {
                format!(
                    "{{\n  \"auths\": {{\n    \"registry.example.com\": {{\n      \"auth\": \"{s}\"\n    }}\n  }}\n}}\n"
                )
            }),
            ("kubernetes-pem", pem_b64, |s| {
                format!(
                    "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n  tls.key: {s}\n"
                )
            }),
            ("kubernetes-password", password_b64, |s| {
                format!("apiVersion: v1\nkind: Secret\ndata:\n  password: {s}\n")
            }),
            ("kubernetes-dockerconfigjson", dockerconfig, |s| {
                format!(
                    "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {s}\n"
                )
            }),
            ("basic-auth", basic, |s| {
                format!("> Authorization: Basic {s}\n")
            }),
            ("kubernetes-json", json_password, |s| {
                format!("{{\"kind\":\"Secret\",\"data\":{{\"db-pass\":\"{s}\"}}}}\n")
            }),
        ];
        for (form, secret, make) in forms {
            out.push((form, form, make(&secret), secret));
        }
    }
    out
}

pub(super) fn private_key_forms(rng: &mut Rng) -> Vec<Base> {
    let labels = [
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ];
    let mut out = Vec::new();
    for _ in 0..2 {
        for label in labels {
            let lines = rng.range(3, 8);
            let (block, body) = pem(rng, label, lines, "\n");
            out.push(("pem", "alone", format!("{block}\n"), body));
            let (block, body) = pem(rng, label, lines, "\\n");
            out.push((
                "pem",
                "json",
                format!(
                    "{{\"type\":\"service_account\",\"private_key_id\":\"k1\",\"private_key\":\"{block}\\n\"}}\n"
                ),
                body,
            ));
            let (block, body) = pem(rng, label, lines, "\n    ");
            out.push((
                "pem",
                "yaml",
                format!("tls:\n  key: |\n    {block}\n"),
                body,
            ));
        }
    }
    out
}

/// A password for a form that carries it bare: alphanumeric, or with the
/// symbols an INI value may hold (`;`, `#`, `%`, `!`) when `ini`.
fn bare_password(rng: &mut Rng, ini: bool) -> String {
    let p = rng.password();
    match ini {
        true => {
            let at = rng.range(3, p.len() - 3);
            let symbol = [";", "#", "%", "!", "@"][rng.range(0, 4)];
            format!("{}{symbol}{}#{}", &p[..at], &p[at..], rng.draw(ALNUM, 3))
        }
        false => p,
    }
}

/// Each form of a family as `(form, quoted, make)`: the secret drawn with
/// shell symbols when `quoted` (the syntax quotes it), alphanumeric if not.
type Family = &'static [(&'static str, bool, Make)];

fn family_forms(rng: &mut Rng, rounds: usize, forms: Family) -> Vec<Base> {
    let mut out = Vec::new();
    for _ in 0..rounds {
        for &(form, quoted, make) in forms {
            let secret = match quoted {
                true => rng.symbol_password(),
                false => bare_password(rng, false),
            };
            out.push((form, form, make(&secret), secret));
        }
    }
    out
}

pub(super) fn sql_password_forms(rng: &mut Rng) -> Vec<Base> {
    family_forms(
        rng,
        3,
        &[
            ("create-user-with-password", true, |p| {
                format!("CREATE USER app WITH PASSWORD '{p}';\n")
            }),
            ("alter-role-encrypted", true, |p| {
                format!("ALTER ROLE app ENCRYPTED PASSWORD '{p}';\n")
            }),
            ("create-role-login", true, |p| {
                format!("CREATE ROLE app LOGIN PASSWORD '{p}' VALID UNTIL 'infinity';\n")
            }),
            ("postgres-log", true, |p| {
                format!(
                    "2026-12-04 10:00:01 UTC [812] LOG:  statement: ALTER USER app PASSWORD '{p}'\n"
                )
            }),
            ("identified-by", true, |p| {
                format!("CREATE USER 'app'@'%' IDENTIFIED BY '{p}';\n")
            }),
            ("identified-with-plugin", true, |p| {
                format!(
                    "ALTER USER 'app'@'localhost' IDENTIFIED WITH caching_sha2_password BY '{p}';\n"
                )
            }),
            ("set-password-for", true, |p| {
                format!("SET PASSWORD FOR 'app'@'%' = '{p}';\n")
            }),
            ("mssql-login", true, |p| {
                format!("CREATE LOGIN app WITH PASSWORD = '{p}', CHECK_POLICY = OFF;\n")
            }),
            ("oracle-bare", false, |p| {
                format!("SQL> CREATE USER app IDENTIFIED BY {p};\n")
            }),
        ],
    )
}

pub(super) fn dsn_forms(rng: &mut Rng) -> Vec<Base> {
    family_forms(
        rng,
        2,
        &[
            ("go-mysql-tcp", false, |p| {
                format!("dsn: app:{p}@tcp(db:3306)/prod?parseTime=true\n")
            }),
            ("go-mysql-unix", false, |p| {
                format!("DATABASE_DSN=root:{p}@unix(/var/run/mysqld/mysqld.sock)/app\n")
            }),
            ("go-mysql-error", false, |p| {
                format!("open app:{p}@tcp(10.0.0.5:3306)/orders: connection refused\n")
            }),
            ("scheme-tcp", false, |p| {
                format!("connecting to mysql://app:{p}@tcp(db.internal:3306)/orders\n")
            }),
            ("sqlplus", false, |p| {
                format!("+ sqlplus -s scott/{p}@//db:1521/ORCLPDB1 @report.sql\n")
            }),
            ("jdbc-oracle", false, |p| {
                format!("url=jdbc:oracle:thin:app/{p}@db:1521/svc\n")
            }),
            ("postgres-url", false, |p| {
                format!("DATABASE_URL=postgres://app:{p}@db:5432/prod?sslmode=disable\n")
            }),
            ("ipv6-host", false, |p| {
                format!("amqp://guest:{p}@[::1]:5672/vhost\n")
            }),
            ("multi-host", false, |p| {
                format!("mongodb://app:{p}@db1:27017,db2:27017/app?replicaSet=rs0\n")
            }),
            ("empty-user", false, |p| {
                format!("REDIS_URL=redis://:{p}@cache:6379/0\n")
            }),
        ],
    )
}

pub(super) fn cli_option_forms(rng: &mut Rng) -> Vec<Base> {
    family_forms(
        rng,
        2,
        &[
            ("ldapsearch-w", false, |p| {
                format!(
                    "+ ldapsearch -x -H ldap://dc -D cn=admin,dc=ex,dc=com -w {p} -b dc=ex,dc=com\n"
                )
            }),
            ("ldapmodify-quoted", true, |p| {
                format!("+ ldapmodify -D \"cn=admin\" -w '{p}' -f people.ldif\n")
            }),
            ("az-login", false, |p| {
                format!("+ az login --service-principal -u http://app -p {p} --tenant t1\n")
            }),
            ("keytool-storepass", false, |p| {
                format!(
                    "+ keytool -importkeystore -srckeystore a.p12 -srcstorepass {p} -destkeystore b.jks\n"
                )
            }),
            ("keytool-keypass", false, |p| {
                format!("+ keytool -genkeypair -alias web -keypass {p} -keystore ks.jks\n")
            }),
            ("smbclient-user-percent", false, |p| {
                format!("+ smbclient //fs/share -U backup%{p} -c 'ls'\n")
            }),
            ("sqlcmd-P", false, |p| {
                format!("+ sqlcmd -S db -U sa -P {p} -Q \"SELECT 1\"\n")
            }),
            ("ipmitool-P", false, |p| {
                format!("+ ipmitool -I lanplus -H 10.0.0.9 -U admin -P {p} power status\n")
            }),
            ("openssl-pass", false, |p| {
                format!(
                    "+ openssl pkcs12 -export -in c.pem -inkey k.pem -passout pass:{p} -out c.p12\n"
                )
            }),
            ("zip-P", false, |p| {
                format!("+ zip -P {p} backup.zip db.sql\n")
            }),
            ("mosquitto-P", false, |p| {
                format!("+ mosquitto_pub -h broker -u dev -P {p} -t t -m hi\n")
            }),
        ],
    )
}

pub(super) fn config_set_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = family_forms(
        rng,
        3,
        &[
            ("aws-session-token", false, |p| {
                format!("+ aws configure set aws_session_token {p} --profile dev\n")
            }),
            ("git-config", false, |p| {
                format!("+ git config --global user.password {p}\n")
            }),
            ("yarn-config", false, |p| {
                format!("+ yarn config set npmAuthToken {p}\n")
            }),
            ("npm-config", false, |p| {
                format!("+ npm config set //registry.npmjs.org/:_authToken {p}\n")
            }),
            ("dotnet-user-secrets", true, |p| {
                format!("+ dotnet user-secrets set \"Db:Password\" \"{p}\"\n")
            }),
            ("pip-config", false, |p| {
                format!("+ pip config set global.password {p}\n")
            }),
        ],
    );
    for _ in 0..3 {
        let secret = rng.draw(B64, 40);
        out.push((
            "aws-secret-access-key",
            "aws-secret-access-key",
            format!("+ aws configure set aws_secret_access_key {secret}\n"),
            secret,
        ));
    }
    out
}

pub(super) fn config_layout_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = family_forms(
        rng,
        3,
        &[
            ("yaml-block", true, |p| {
                format!("db:\n  password: |\n    {p}\n  port: 5432\n")
            }),
            ("yaml-folded", true, |p| {
                format!("  db_password: >-\n    {p}\n  user: app\n")
            }),
            ("dotnet-add-key", true, |p| {
                format!("    <add key=\"DbPassword\" value=\"{p}\" />\n")
            }),
            ("entry-key-value", true, |p| {
                format!("<entry key=\"api.secret\" value=\"{p}\"/>\n")
            }),
            ("toml-basic-multiline", true, |p| {
                format!("password = \"\"\"{p}\"\"\"\n")
            }),
            ("toml-literal-multiline", true, |p| {
                format!("token = '''\n{p}\n'''\n")
            }),
            ("pgpass", false, |p| {
                format!("db.example.com:5432:app:app:{p}\n")
            }),
        ],
    );
    for _ in 0..3 {
        let secret = bare_password(rng, true);
        out.push((
            "ini-symbols",
            "ini",
            format!("[db]\npassword = {secret}\n"),
            secret,
        ));
    }
    out
}

pub(super) fn protocol_trace_forms(rng: &mut Rng) -> Vec<Base> {
    let mut out = family_forms(
        rng,
        3,
        &[
            ("curl-ftp-pass", false, |p| format!("> PASS {p}\n")),
            ("ftplib-cmd", false, |p| format!("*cmd* 'PASS {p}'\n")),
            ("pop3-pass", false, |p| format!("C: PASS {p}\n")),
            ("redis-monitor", true, |p| {
                format!("1700000000.123456 [0 127.0.0.1:52144] \"AUTH\" \"{p}\"\n")
            }),
            ("redis-monitor-user", true, |p| {
                format!("1700000000.123456 [0 127.0.0.1:52144] \"AUTH\" \"app\" \"{p}\"\n")
            }),
        ],
    );
    for _ in 0..3 {
        let plain = base64(format!("\0app\0{}", rng.password()).as_bytes());
        out.push((
            "smtp-auth-plain",
            "smtplib",
            format!("send: 'AUTH PLAIN {plain}\\r\\n'\n"),
            plain,
        ));
        let oauth =
            base64(format!("user=app\x01auth=Bearer {}\x01\x01", rng.draw(ALNUM, 32)).as_bytes());
        out.push((
            "smtp-auth-xoauth2",
            "smtplib",
            format!("send: 'AUTH XOAUTH2 {oauth}\\r\\n'\n"),
            oauth,
        ));
        let token = rng.draw(ALNUM, 40);
        out.push((
            "percent-bearer",
            "url",
            format!("GET /stream?authorization=Bearer%20{token} HTTP/1.1\n"),
            token,
        ));
    }
    out
}
