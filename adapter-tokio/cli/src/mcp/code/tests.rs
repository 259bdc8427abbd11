//! No placeholder inside code: one refusal per interpreter and form, the
//! exact messages and safe forms, the commands that must still load, and
//! `ssh`'s quoted remote words.

use serde_json::{Map, Value, json};

use super::{program_name, sh_quote};
use crate::mcp::{PreparedCall, Tool, ToolsFile};

/// A tools file with one tool `t` running `command` (TOML array text),
/// every placeholder a string parameter declared by `params`.
fn file(command: &str, params: &[&str]) -> String {
    let mut text = format!("[tools.t]\ndescription = \"d\"\ncommand = {command}\n");
    for param in params {
        text.push_str(&format!("params.{param} = {{ type = \"string\" }}\n"));
    }
    text
}

/// The refused words' paths, in order.
fn refused_words(command: &str, params: &[&str]) -> Vec<String> {
    refused_paths(&file(command, params))
}

/// The paths a tools file's text is refused at, in order.
fn refused_paths(text: &str) -> Vec<String> {
    match ToolsFile::from_toml_str(text) {
        Ok(_) => Vec::new(),
        Err(e) => e.all().map(|e| e.path.clone()).collect(),
    }
}

/// The whole error, one line per refused word.
fn refusal(command: &str, params: &[&str]) -> String {
    let error = ToolsFile::from_toml_str(&file(command, params)).unwrap_err();
    error
        .all()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn loads(command: &str, params: &[&str]) -> Tool {
    let text = file(command, params);
    match ToolsFile::from_toml_str(&text) {
        Ok(mut file) => file.tools.remove(0),
        Err(e) => panic!("{command}: {e}"),
    }
}

/// The safe form a message shows, as TOML array text.
fn safe_form(message: &str) -> &str {
    let start = message.rfind(": [").unwrap() + 2;
    &message[start..]
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("{other}"),
    }
}

fn argv(call: &PreparedCall) -> Vec<String> {
    call.command
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

const PWN: &str = "x; echo pwn";

#[test]
fn the_shell_template_of_the_report_is_refused_with_its_safe_form() {
    let command = r#"["sh", "-c", "echo hello {name}"]"#;
    let message = refusal(command, &["name"]);
    assert_eq!(
        message,
        r#"tools.t.command[2]: "echo hello {name}" is code that sh runs (-c): a value placed there can run commands; pass it as a positional parameter: ["sh", "-c", "echo hello \"$1\"", "_", "{name}"]"#
    );
    // The safe form loads, and the value arrives as one literal argument.
    let tool = loads(safe_form(&message), &["name"]);
    let call = tool.prepare(&args(json!({ "name": PWN }))).unwrap();
    assert_eq!(argv(&call), ["-c", "echo hello \"$1\"", "_", PWN]);
    let output = std::process::Command::new("sh")
        .args(argv(&call))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!("hello {PWN}\n")
    );
}

#[test]
fn every_shell_and_form_is_refused() {
    let cases: &[(&str, &[&str])] = &[
        (r#"["sh", "-c", "echo {x}"]"#, &["tools.t.command[2]"]),
        (r#"["/bin/sh", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["/usr/bin/bash", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["./sh", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["SH", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["bash5", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["ksh93", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["dash", "-ec", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["zsh", "-xc", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["bash", "-lc", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["ksh", "-euc", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["mksh", "-c", "-e", "{x}"]"#, &["tools.t.command[3]"]),
        (
            r#"["bash", "-o", "pipefail", "-c", "{x}"]"#,
            &["tools.t.command[4]"],
        ),
        (
            r#"["bash", "-eo", "pipefail", "-c", "{x}"]"#,
            &["tools.t.command[4]"],
        ),
        (r#"["ash", "-c", "--", "{x}"]"#, &["tools.t.command[3]"]),
        (r#"["busybox", "sh", "-c", "{x}"]"#, &["tools.t.command[3]"]),
        (r#"["tcsh", "-c", "{x}"]"#, &["tools.t.command[2]"]),
        (r#"["sh", "-c", "{x}{y}"]"#, &["tools.t.command[2]"]),
        (r#"["sh", "-c", "echo '{x}'"]"#, &["tools.t.command[2]"]),
        (r#"["fish", "-c", "echo {x}"]"#, &["tools.t.command[2]"]),
        (r#"["fish", "--command={x}"]"#, &["tools.t.command[1]"]),
        (
            r#"["fish", "-C", "{x}", "-c", "true"]"#,
            &["tools.t.command[2]"],
        ),
        // The script a shell runs, an init file, and a value among its
        // options.
        (r#"["sh", "{x}"]"#, &["tools.t.command[1]"]),
        (
            r#"["bash", "--rcfile", "{x}", "-i"]"#,
            &["tools.t.command[2]"],
        ),
        (r#"["sh", "-e{x}", "true"]"#, &["tools.t.command[1]"]),
    ];
    for (command, expected) in cases {
        let params: Vec<&str> = ["x", "y"]
            .into_iter()
            .filter(|p| command.contains(&format!("{{{p}}}")))
            .collect();
        assert_eq!(&refused_words(command, &params), expected, "{command}");
    }
}

#[test]
fn every_interpreter_and_form_is_refused() {
    let cases: &[(&str, usize)] = &[
        (r#"["python", "-c", "print({x})"]"#, 2),
        (r#"["python3.11", "-c", "{x}"]"#, 2),
        (r#"["python3", "-Bc", "{x}"]"#, 2),
        (r#"["python3", "-Ic", "{x}"]"#, 2),
        (r#"["python3", "-c{x}"]"#, 1),
        (r#"["python3", "-W", "ignore", "-c", "{x}"]"#, 4),
        (r#"["pypy3", "-c", "{x}"]"#, 2),
        (r#"["python3", "-m", "{x}"]"#, 2),
        (r#"["python3", "{x}"]"#, 1),
        (r#"["node", "-e", "{x}"]"#, 2),
        (r#"["node", "--eval", "{x}"]"#, 2),
        (r#"["node", "--eval={x}"]"#, 1),
        (r#"["node", "-p", "{x}"]"#, 2),
        (r#"["node", "--print", "{x}"]"#, 2),
        (r#"["nodejs", "-e", "{x}"]"#, 2),
        (r#"["node", "-r", "{x}", "app.js"]"#, 2),
        (r#"["node", "{x}"]"#, 1),
        (r#"["bun", "-e", "{x}"]"#, 2),
        (r#"["bun", "run", "{x}"]"#, 2),
        (r#"["deno", "eval", "{x}"]"#, 2),
        (r#"["perl", "-e", "{x}"]"#, 2),
        (r#"["perl", "-E", "{x}"]"#, 2),
        (r#"["perl", "-ne", "{x}"]"#, 2),
        (r#"["perl", "-pe", "{x}"]"#, 2),
        (r#"["perl", "-lne", "{x}"]"#, 2),
        (r#"["perl", "-l0ne", "{x}"]"#, 2),
        (r#"["perl", "-M{x}", "-e", "1"]"#, 1),
        (r#"["ruby", "-e", "{x}"]"#, 2),
        (r#"["ruby", "-ne", "{x}"]"#, 2),
        (r#"["php", "-r", "{x}"]"#, 2),
        (r#"["php8.2", "-d", "auto_prepend_file={x}", "a.php"]"#, 2),
        (r#"["lua5.4", "-e", "{x}"]"#, 2),
        (r#"["Rscript", "-e", "{x}"]"#, 2),
        (r#"["osascript", "-e", "{x}"]"#, 2),
        (r#"["julia", "-e", "{x}"]"#, 2),
        (r#"["expect", "-c", "{x}"]"#, 2),
        (r#"["pwsh", "-Command", "{x}"]"#, 2),
        (r#"["pwsh", "-c", "{x}"]"#, 2),
        (
            r#"["pwsh", "-NoProfile", "-command", "Write-Output", "{x}"]"#,
            4,
        ),
        (r#"["pwsh", "-EncodedCommand", "{x}"]"#, 2),
        (r#"["pwsh", "{x}"]"#, 1),
        (r#"["powershell.exe", "Write-Output", "{x}"]"#, 2),
        (r#"["powershell", "-Command", "{x}"]"#, 2),
        (
            r#"["powershell", "-NoProfile", "-Command", "Get-Item {x}"]"#,
            3,
        ),
        (r#"["powershell.exe", "-c", "{x}"]"#, 2),
        (r#"["cmd", "/c", "echo", "{x}"]"#, 3),
        (r#"["CMD.EXE", "/C", "echo {x}"]"#, 2),
        (r#"["awk", "{x}"]"#, 1),
        (r#"["gawk", "-F", ":", "{{print ${x}}}"]"#, 3),
        (r#"["mawk", "-f", "{x}", "log"]"#, 2),
        (r#"["gawk", "--source={x}"]"#, 1),
        (r#"["sed", "{x}", "file"]"#, 1),
        (r#"["sed", "-e", "{x}"]"#, 2),
        (r#"["sed", "--expression={x}"]"#, 1),
        (r#"["sed", "-n", "file", "-e", "{x}"]"#, 4),
    ];
    for (command, word) in cases {
        assert_eq!(
            refused_words(command, &["x"]),
            [format!("tools.t.command[{word}]")],
            "{command}"
        );
    }
}

/// What a parameter declares about its values (a `pattern`, an `enum`, a
/// `max_length`, a number's bounds) does not make a placeholder inside code safe: the rule
/// looks at where the value goes, and nothing switches it off.
#[test]
fn no_parameter_schema_switches_the_rule_off() {
    for schema in [
        r#"{ type = "string", pattern = "^[a-z]+$" }"#,
        r#"{ type = "string", enum = ["alpha", "beta"] }"#,
        r#"{ type = "string", max_length = 3 }"#,
        r#"{ type = "integer", minimum = 0, maximum = 9 }"#,
        r#"{ type = "integer" }"#,
        r#"{ type = "string", secret = true }"#,
    ] {
        let text =
            file(r#"["sh", "-c", "echo hello {x}"]"#, &[]) + &format!("params.x = {schema}\n");
        assert_eq!(refused_paths(&text), ["tools.t.command[2]"], "{schema}");
    }
}

#[test]
fn what_wrappers_run_is_checked_as_a_command() {
    let cases: &[(&str, usize)] = &[
        (r#"["/usr/bin/env", "bash", "-c", "{x}"]"#, 3),
        (r#"["env", "-i", "FOO=1", "python3", "-c", "{x}"]"#, 5),
        (r#"["env", "-u", "HOME", "bash", "-c", "{x}"]"#, 5),
        (r#"["env", "-S", "bash -c", "{x}"]"#, 3),
        (r#"["/usr/bin/env", "-S", "bash -c", "echo {x}"]"#, 3),
        (r#"["env", "-S{x}"]"#, 1),
        (r#"["env", "{x}"]"#, 1),
        (r#"["env", "A=1", "{x}", "-c", "true"]"#, 2),
        (r#"["env", "LD_PRELOAD={x}", "ls"]"#, 1),
        (r#"["env", "BASH_ENV={x}", "bash", "s.sh"]"#, 1),
        (r#"["xargs", "-0", "-n", "1", "sh", "-c", "{x}"]"#, 6),
        (r#"["find", ".", "-exec", "sh", "-c", "echo {x}", ";"]"#, 5),
        (r#"["find", ".", "-execdir", "bash", "-c", "{x}", "+"]"#, 5),
        (r#"["find", ".", "-ok", "{x}", ";"]"#, 3),
        (r#"["timeout", "5", "sh", "-c", "{x}"]"#, 4),
        (r#"["timeout", "-s", "KILL", "5", "sh", "-c", "{x}"]"#, 6),
        (r#"["nice", "-n", "5", "bash", "-c", "{x}"]"#, 5),
        (r#"["nohup", "sh", "-c", "{x}"]"#, 3),
        (r#"["setsid", "sh", "-c", "{x}"]"#, 3),
        (r#"["stdbuf", "-oL", "sh", "-c", "{x}"]"#, 4),
        (r#"["ionice", "-c", "3", "sh", "-c", "{x}"]"#, 5),
        (r#"["taskset", "0x1", "sh", "-c", "{x}"]"#, 4),
        (r#"["chroot", "/srv", "sh", "-c", "{x}"]"#, 4),
        (r#"["sudo", "-u", "root", "sh", "-c", "{x}"]"#, 5),
        (r#"["sudo", "{x}"]"#, 1),
        (r#"["sudo", "-s", "echo", "{x}"]"#, 3),
        (r#"["doas", "-u", "root", "python3", "-c", "{x}"]"#, 5),
        (r#"["flock", "/tmp/l", "sh", "-c", "{x}"]"#, 4),
        (r#"["flock", "/tmp/l", "-c", "{x}"]"#, 3),
        (r#"["watch", "-n", "1", "echo", "{x}"]"#, 4),
        (r#"["su", "-c", "{x}"]"#, 2),
        (r#"["su", "root", "-c", "{x}"]"#, 3),
        (r#"["su", "-", "root", "{x}"]"#, 3),
        (r#"["runuser", "-u", "app", "-c", "{x}"]"#, 4),
        (r#"["script", "-q", "-c", "{x}", "/dev/null"]"#, 3),
        (r#"["sg", "wheel", "echo {x}"]"#, 2),
        (r#"["tmux", "new-session", "-d", "{x}"]"#, 3),
        (r#"["screen", "-S", "s", "-X", "stuff", "{x}"]"#, 5),
        (r#"["parallel", "echo", "{x}", ":::", "a"]"#, 2),
        (r#"["git", "-c", "core.sshCommand={x}", "fetch"]"#, 2),
        (r#"["git", "-c", "alias.x=!{x}", "x"]"#, 2),
        (r#"["git", "{x}"]"#, 1),
        (r#"["git", "ls-remote", "--upload-pack={x}", "origin"]"#, 2),
        (r#"["docker", "exec", "box", "sh", "-c", "{x}"]"#, 5),
        (
            r#"["docker", "run", "--rm", "alpine", "sh", "-c", "{x}"]"#,
            6,
        ),
        (r#"["kubectl", "exec", "pod", "--", "sh", "-c", "{x}"]"#, 6),
        (r#"["kubectl", "exec", "-n", "web", "pod", "--", "{x}"]"#, 6),
        (r#"["docker", "run", "--entrypoint", "{x}", "alpine"]"#, 3),
        (r#"["podman", "run", "--entrypoint={x}", "alpine"]"#, 2),
    ];
    for (command, word) in cases {
        assert_eq!(
            refused_words(command, &["x"]),
            [format!("tools.t.command[{word}]")],
            "{command}"
        );
    }
}

#[test]
fn ssh_options_and_remote_code_are_refused() {
    let cases: &[(&str, usize)] = &[
        (r#"["ssh", "-o", "ProxyCommand={x}", "host", "uptime"]"#, 2),
        (r#"["ssh", "-oProxyCommand={x}", "host", "uptime"]"#, 1),
        (r#"["ssh", "-o", "LocalCommand {x}", "host"]"#, 2),
        (r#"["ssh", "-o", "RemoteCommand={x}", "host"]"#, 2),
        (r#"["ssh", "-o", "KnownHostsCommand={x}", "host"]"#, 2),
        (r#"["ssh", "-o", "{x}", "host"]"#, 2),
        (r#"["ssh", "-F", "{x}", "host"]"#, 2),
        (r#"["ssh", "host", "-o", "ProxyCommand={x}", "uptime"]"#, 3),
        (r#"["ssh", "host", "sh", "-c", "{x}"]"#, 4),
        (r#"["ssh", "host", "sh -c", "{x}"]"#, 3),
        (r#"["ssh", "host", "python3", "-c", "{x}"]"#, 4),
        (r#"["ssh", "host", "{x}"]"#, 2),
        (r#"["ssh", "host", "eval", "{x}"]"#, 3),
        (r#"["ssh", "host", "echo", "'{x}'"]"#, 3),
        (r#"["ssh", "host", "echo", "a b{x}"]"#, 3),
        (r#"["ssh", "host", "echo", "$({x})"]"#, 3),
        (r#"["ssh", "host", "echo '", "{x}", "'"]"#, 3),
        (r##"["ssh", "host", "echo", "#", "{x}"]"##, 4),
        (r#"["ssh", "host", "true;", "cat", "{x}"]"#, 4),
        (r#"["ssh", "host", "LD_PRELOAD={x}", "ls"]"#, 2),
    ];
    for (command, word) in cases {
        assert_eq!(
            refused_words(command, &["x"]),
            [format!("tools.t.command[{word}]")],
            "{command}"
        );
    }
    assert_eq!(
        refusal(r#"["ssh", "-o", "ProxyCommand=nc {x} 22", "host"]"#, &["x"]),
        r#"tools.t.command[2]: "ProxyCommand=nc {x} 22" is code that ssh runs (-o ProxyCommand): a value placed there can run commands; a value is not allowed there"#
    );
    assert_eq!(
        refusal(r#"["ssh", "host", "echo", "'{x}'"]"#, &["x"]),
        r#"tools.t.command[3]: "'{x}'" joins a value to '\'', which ssh's remote shell reads as syntax: a value there could run commands; put the placeholder in a word of its own (joined only to letters, digits and _ @ % + = : , . / -)"#
    );
    assert_eq!(
        refusal(r#"["ssh", "host", "echo '", "{x}", "'"]"#, &["x"]),
        r#"tools.t.command[3]: "{x}" follows "echo '" in ssh's remote command, and '\'' is shell syntax that could put the value inside quotes, a comment or another command: put words holding shell syntax after the last placeholder"#
    );
    assert_eq!(
        refusal(r#"["ssh", "host", "sh", "-c", "{x}"]"#, &["x"]),
        r#"tools.t.command[4]: "{x}" is code that sh runs (-c): a value placed there can run commands; a value is not allowed there"#
    );
    assert_eq!(
        refusal(r#"["ssh", "host", "{x}"]"#, &["x"]),
        r#"tools.t.command[2]: "{x}" chooses the program that ssh's remote shell runs: it must be literal"#
    );
}

#[test]
fn the_messages_name_the_word_and_the_safe_form_loads() {
    let cases: &[(&str, &str)] = &[
        (
            r#"["python3", "-c", "print('{x}')"]"#,
            r#"tools.t.command[2]: "print('{x}')" is code that python runs (-c): a value placed there can run commands; pass it as an argument: ["python3", "-c", "import sys; print(sys.argv[1])", "{x}"]"#,
        ),
        (
            r#"["node", "-e", "console.log({x})"]"#,
            r#"tools.t.command[2]: "console.log({x})" is code that node runs (-e): a value placed there can run commands; pass it as an argument: ["node", "-e", "console.log(process.argv[1])", "{x}"]"#,
        ),
        (
            r#"["perl", "-e", "print \"{x}\""]"#,
            r#"tools.t.command[2]: "print \"{x}\"" is code that perl runs (-e): a value placed there can run commands; pass it as an argument: ["perl", "-e", "print $ARGV[0]", "{x}"]"#,
        ),
        (
            r#"["ruby", "-e", "puts {x}"]"#,
            r#"tools.t.command[2]: "puts {x}" is code that ruby runs (-e): a value placed there can run commands; pass it as an argument: ["ruby", "-e", "puts ARGV[0]", "{x}"]"#,
        ),
        (
            r#"["php", "-r", "echo '{x}';"]"#,
            r#"tools.t.command[2]: "echo '{x}';" is code that php runs (-r): a value placed there can run commands; pass it as an argument: ["php", "-r", "echo $argv[1];", "{x}"]"#,
        ),
        (
            r#"["fish", "-c", "echo {x}"]"#,
            r#"tools.t.command[2]: "echo {x}" is code that fish runs (-c): a value placed there can run commands; pass it as a positional parameter: ["fish", "-c", "echo $argv[1]", "{x}"]"#,
        ),
        (
            r#"["awk", "-F", ":", "$1 == \"{x}\" {{ print $2 }}", "/etc/passwd"]"#,
            r#"tools.t.command[3]: "$1 == \"{x}\" {{ print $2 }}" is code that awk runs (its program): a value placed there can run commands; pass it as a variable: ["awk", "-v", "x={x}", "-F", ":", "$1 == x {{ print $2 }}", "/etc/passwd"]"#,
        ),
        (
            r#"["bash", "-c", "grep -- {x} \"$1\"", "_", "/var/log/syslog"]"#,
            r#"tools.t.command[2]: "grep -- {x} \"$1\"" is code that bash runs (-c): a value placed there can run commands; pass it as a positional parameter: ["bash", "-c", "grep -- \"$2\" \"$1\"", "_", "/var/log/syslog", "{x}"]"#,
        ),
        (
            r#"["find", "/srv", "-exec", "sh", "-c", "cp \"$1\" {x}", "_", "{{}}", ";"]"#,
            r#"tools.t.command[5]: "cp \"$1\" {x}" is code that sh runs (-c): a value placed there can run commands; pass it as a positional parameter: ["find", "/srv", "-exec", "sh", "-c", "cp \"$1\" \"$2\"", "_", "{{}}", "{x}", ";"]"#,
        ),
        (
            r#"["/usr/bin/env", "python3", "-c", "open({x})"]"#,
            r#"tools.t.command[3]: "open({x})" is code that python runs (-c): a value placed there can run commands; pass it as an argument: ["/usr/bin/env", "python3", "-c", "import sys; open(sys.argv[1])", "{x}"]"#,
        ),
        (
            r#"["pwsh", "-Command", "Get-Item {x}"]"#,
            r#"tools.t.command[2]: "Get-Item {x}" is code that pwsh runs (-Command: every word after it is joined into the command): a value placed there can run commands; put the code in a script that reads $args[0], and pass the value after it: ["pwsh", "-File", "SCRIPT.ps1", "{x}"]"#,
        ),
    ];
    for (command, expected) in cases {
        let message = refusal(command, &["x"]);
        assert_eq!(&message, expected, "{command}");
        loads(safe_form(&message), &["x"]);
    }
    assert_eq!(
        refusal(r#"["sed", "s/{x}/y/", "file"]"#, &["x"]),
        r#"tools.t.command[1]: "s/{x}/y/" is code that sed runs (its script): a value placed there can run commands; a value is not allowed there"#
    );
    assert_eq!(
        refusal(r#"["python3", "{x}"]"#, &["x"]),
        r#"tools.t.command[1]: "{x}" chooses what python runs (its script): it must be literal"#
    );
    assert_eq!(
        refusal(r#"["env", "{x}"]"#, &["x"]),
        r#"tools.t.command[1]: "{x}" chooses the program that env runs: it must be literal"#
    );
    assert_eq!(
        refusal(r#"["env", "LD_PRELOAD={x}", "ls"]"#, &["x"]),
        r#"tools.t.command[1]: "LD_PRELOAD={x}" sets LD_PRELOAD, which names code that a program loads or runs: it must be literal"#
    );
    assert_eq!(
        refusal(r#"["sh", "-e{x}", "true"]"#, &["x"]),
        r#"tools.t.command[1]: "-e{x}" puts a value among sh's options, where it can add an option that runs code: pass it as its own word"#
    );
}

#[test]
fn the_safe_forms_pass_the_value_as_one_literal_argument() {
    // Each interpreter present here runs its safe form with a value that
    // would have run a command; `sh` is always present.
    let value = "x'; echo pwn; \"$(id)\" `id` #";
    let cases: &[(&str, &str)] = &[
        ("sh", r#"["sh", "-c", "printf %s {x}"]"#),
        ("python3", r#"["python3", "-c", "print({x}, end='')"]"#),
        ("node", r#"["node", "-e", "process.stdout.write({x})"]"#),
        ("perl", r#"["perl", "-e", "print {x}"]"#),
    ];
    let mut ran = 0;
    for (program, command) in cases {
        let message = refusal(command, &["x"]);
        let tool = loads(safe_form(&message), &["x"]);
        let call = tool.prepare(&args(json!({ "x": value }))).unwrap();
        let Ok(output) = std::process::Command::new(program)
            .args(argv(&call))
            .output()
        else {
            assert_ne!(*program, "sh");
            continue;
        };
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            value,
            "{command}"
        );
        ran += 1;
    }
    assert!(ran >= 1);
}

#[test]
fn a_value_that_could_be_an_interpreters_option_is_refused() {
    let text = "[tools.t]\ndescription = \"d\"\ncommand = [\"sh\", \"{a}\", \"{b}\"]\n\
                params.a = { type = \"string\", allow_leading_dash = true }\n\
                params.b = { type = \"string\" }\n";
    assert_eq!(
        ToolsFile::from_toml_str(text).unwrap_err().to_string(),
        "tools.t.command[1]: \"{a}\" is where sh reads its options, and a value there may begin with \"-\" \
         (allow_leading_dash, or a word after the command's \"--\"): an option can make sh run code; \
         set no allow_leading_dash there"
    );
    // After a `--` of the wrapper's, a value may begin with "-" too.
    assert_eq!(
        refused_words(r#"["nice", "--", "ssh", "{x}", "uptime"]"#, &["x"]),
        ["tools.t.command[3]"]
    );
    assert!(refused_words(r#"["nice", "ssh", "{x}", "uptime"]"#, &["x"]).is_empty());
    let ssh = "[tools.t]\ndescription = \"d\"\ncommand = [\"ssh\", \"{host}\", \"uptime\"]\n\
               params.host = { type = \"string\", allow_leading_dash = true }\n";
    assert_eq!(
        ToolsFile::from_toml_str(ssh).unwrap_err().path,
        "tools.t.command[1]"
    );
}

#[test]
fn ordinary_commands_still_load() {
    let commands: &[&str] = &[
        r#"["ssh", "-o", "BatchMode=yes", "{x}", "uptime"]"#,
        r#"["ssh", "-p", "22", "-l", "deploy", "{x}", "systemctl", "status", "--", "{y}"]"#,
        r#"["sh", "-c", "echo \"$1\"", "_", "{x}"]"#,
        r#"["bash", "-o", "pipefail", "-c", "grep -- \"$1\" \"$2\" | head", "grep", "{x}", "{y}"]"#,
        r#"["sh", "script.sh", "{x}"]"#,
        r#"["python3", "manage.py", "check", "{x}"]"#,
        r#"["python3", "-m", "http.server", "{x}"]"#,
        r#"["python3", "-c", "import sys; print(sys.argv[1])", "{x}"]"#,
        r#"["node", "app.js", "{x}"]"#,
        r#"["perl", "-ne", "print if /x/", "{x}"]"#,
        r#"["awk", "-v", "x={x}", "$1 == x", "{y}"]"#,
        r#"["sed", "-e", "s/a/b/", "{x}"]"#,
        r#"["sed", "s/a/b/", "--", "{x}"]"#,
        r#"["find", "{x}", "-name", "*.log", "-exec", "gzip", "--", "{{}}", ";"]"#,
        r#"["env", "FOO={x}", "prog", "{y}"]"#,
        r#"["timeout", "5", "curl", "--", "{x}"]"#,
        r#"["sudo", "-u", "{x}", "ls", "{y}"]"#,
        r#"["git", "log", "--author={x}"]"#,
        r#"["git", "-C", "{x}", "status"]"#,
        r#"["docker", "logs", "{x}"]"#,
        r#"["tail", "-n", "{x}", "--", "/var/log/{y}"]"#,
        r#"["grep", "sh", "{x}"]"#,
        r#"["kubectl", "get", "pods", "-n", "{x}"]"#,
        r#"["xargs", "-0", "rm", "--", "{x}"]"#,
    ];
    for command in commands {
        let params: Vec<&str> = ["x", "y"]
            .into_iter()
            .filter(|p| command.contains(&format!("{{{p}}}")))
            .collect();
        loads(command, &params);
    }
}

#[test]
fn every_bad_tool_of_a_file_is_named() {
    let text = "[tools.a]\ndescription = \"d\"\ncommand = [\"sh\", \"-c\", \"echo {x}\", \"{y}\"]\n\
                params.x = { type = \"string\" }\nparams.y = { type = \"string\" }\n\
                [tools.b]\ndescription = \"d\"\ncommand = [\"uptime\"]\n\
                [tools.c]\ndescription = \"d\"\ncommand = [\"node\", \"-e\", \"{x}\", \"--\", \"{x}\"]\n\
                params.x = { type = \"string\" }\n";
    let error = ToolsFile::from_toml_str(text).unwrap_err();
    let paths: Vec<&str> = error.all().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["tools.a.command[2]", "tools.c.command[2]"]);
}

#[test]
fn program_names_are_compared_by_base_name_without_version() {
    for (text, name) in [
        ("/usr/bin/python3.11", "python"),
        ("bash5", "bash"),
        ("./sh", "sh"),
        ("SH", "sh"),
        ("powershell.exe", "powershell"),
        ("ksh93", "ksh"),
        ("lua5.4", "lua"),
        ("x2", "x"),
        ("7z", "7z"),
        ("2", "2"),
    ] {
        assert_eq!(program_name(text), name, "{text}");
    }
}

/// The values `ssh` must carry as one word each.
const HOSTILE: &[&str] = &[
    "it's",
    "a; touch /tmp/pwned",
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "line one\nline two; id",
    "'",
    "''",
    "\\'; id; echo '",
    "",
    "-rf",
    "a b\tc",
];

#[test]
fn ssh_passes_each_remote_value_quoted_for_the_remote_shell() {
    let tool = loads(
        r#"["ssh", "-o", "BatchMode=yes", "{x}", "printf", "%s", "{y}", "--tag={x}"]"#,
        &["x", "y"],
    );
    let call = tool
        .prepare(&args(
            json!({ "x": "web-3", "y": "it's; $(id) `id`\nnext" }),
        ))
        .unwrap();
    assert_eq!(
        argv(&call),
        [
            "-o",
            "BatchMode=yes",
            "web-3",
            "printf",
            "%s",
            "'it'\\''s; $(id) `id`\nnext'",
            "--tag='web-3'",
        ]
    );
    // A NUL byte cannot be passed: refused like any argument's.
    assert_eq!(
        tool.prepare(&args(json!({ "x": "web-3", "y": "a\u{0}b" })))
            .unwrap_err()
            .to_string(),
        "invalid arguments for tool t: y: contains a NUL byte, which no argument can carry"
    );
    // `sh -c` stands in for the remote shell: ssh joins the remote words
    // with spaces, and each value arrives as one literal argument.
    let remote = loads(r#"["ssh", "host", "printf", "%s", "{y}"]"#, &["y"]);
    for value in HOSTILE {
        let call = remote.prepare(&args(json!({ "y": value })));
        let call = match call {
            Ok(call) => call,
            Err(e) => {
                // Only a value the leading-dash rule refuses.
                assert_eq!(*value, "-rf", "{e}");
                continue;
            }
        };
        let words = argv(&call);
        assert_eq!(words[..3], ["host", "printf", "%s"]);
        assert_eq!(words[3], sh_quote(value));
        let line = words[1..].join(" ");
        let output = std::process::Command::new("sh")
            .args(["-c", &line])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            *value,
            "{line:?}"
        );
    }
    assert_eq!(sh_quote("it's"), "'it'\\''s'");
}

/// The repository's `docs/mcp.md` shows the rule as a table of refused
/// commands and their safe forms: each row is what the loader says.
#[test]
fn the_docs_table_of_safe_forms_is_what_the_loader_says() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/mcp.md");
    let Ok(readme) = std::fs::read_to_string(path) else {
        // An unpacked package has no repository around it (no
        // `adapter-std/host` at `../..`); the workspace's run checks the
        // table. In the repository a missing page is a failure.
        let repository = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../adapter-std/host/Cargo.toml"
        );
        assert!(
            !std::path::Path::new(repository).exists(),
            "no docs/mcp.md at {path}"
        );
        eprintln!("skipped: the repository's docs/mcp.md is not around an unpacked package");
        return;
    };
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `[")).collect();
    assert_eq!(rows.len(), 8);
    for row in rows {
        let (refused, safe) = row[2..].split_once(" | ").unwrap();
        let commands: Vec<&str> = refused.split("`, `").map(|c| c.trim_matches('`')).collect();
        for command in commands {
            let params: Vec<&str> = ["x", "name"]
                .into_iter()
                .filter(|p| command.contains(&format!("{{{p}}}")))
                .collect();
            let message = refusal(command, &params);
            if safe.starts_with("none") {
                assert!(
                    message.ends_with("; a value is not allowed there"),
                    "{message}"
                );
                continue;
            }
            let shown = safe.trim_start_matches('`');
            let shown = &shown[..shown.find('`').unwrap()];
            assert_eq!(safe_form(&message), shown, "{row}");
            loads(shown, &params);
        }
    }
}

#[test]
fn the_example_files_ssh_discovery_quotes_its_remote_value() {
    let file = ToolsFile::from_toml_str(include_str!("../../../examples/tools.toml")).unwrap();
    let units = file.tool("list_units").unwrap();
    let call = units
        .prepare(&args(json!({ "host": "web-3", "state": "failed" })))
        .unwrap();
    assert_eq!(
        argv(&call),
        [
            "-o",
            "BatchMode=yes",
            "web-3",
            "systemctl",
            "list-units",
            "--output=json",
            "--state='failed'"
        ]
    );
    assert_eq!(units.remote_quoted, [6]);
}
