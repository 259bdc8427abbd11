//! The flags the documentation gives each command are the flags the
//! command has: each page's "Flags of `spillguard CMD`" section names
//! every flag `spillguard CMD --help` prints and no other, and every flag
//! written after `spillguard CMD` on a line of README.md or docs/ is one
//! of CMD's. Run in the repository only: an unpacked package has no
//! docs/ around it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The commands, the page that documents each, and how many flags each
/// has (`--help` aside).
const COMMANDS: [(&str, &str, usize); 9] = [
    ("run", "docs/run.md", 31),
    ("stdio", "docs/stdio.md", 43),
    ("mcp", "docs/mcp.md", 12),
    ("audit verify", "docs/audit-log.md", 7),
    ("audit activity", "docs/audit-log.md", 2),
    ("audit sessions", "docs/audit-log.md", 2),
    ("audit keygen", "docs/audit-log.md", 1),
    ("audit checkpoint", "docs/audit-log.md", 2),
    ("audit prove", "docs/audit-log.md", 4),
];

/// The repository's root, or `None` in an unpacked package.
fn repository() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("adapter-std/host/Cargo.toml")
        .exists()
        .then_some(root)
}

/// The flags `spillguard CMD --help` lists: the option lines, each
/// beginning with its flag (an example's continuation line is not one).
fn help_flags(command: &str) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_spillguard"))
        .args(command.split(' '))
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "spillguard {command} --help");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut flags = BTreeSet::new();
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start();
        let rest = rest.strip_prefix("-h, ").unwrap_or(rest);
        if !(2..=6).contains(&indent) || !rest.starts_with("--") {
            continue;
        }
        let name_end = rest[2..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .map_or(rest.len(), |i| i + 2);
        let after = &rest[name_end..];
        // An option line: the flag, then its value's name, two blanks and
        // the help, or nothing.
        let after = if after.starts_with(" <") {
            &after[after.find('>').map_or(after.len(), |i| i + 1)..]
        } else {
            after
        };
        if after.is_empty() || after.starts_with("  ") {
            flags.insert(rest[..name_end].to_owned());
        }
    }
    flags.remove("--help");
    flags
}

/// Every `--flag` in `text`.
fn flags_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("--") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push(format!("--{name}"));
        }
    }
    out
}

/// The section "## Flags of `spillguard CMD`" of `page`, and its first
/// line's number.
fn section<'a>(page: &'a str, file: &str, command: &str) -> (&'a str, usize) {
    let heading = format!("## Flags of `spillguard {command}`\n");
    let start = page
        .find(&heading)
        .unwrap_or_else(|| panic!("{file} has no section {heading:?}"));
    let body = &page[start + heading.len()..];
    let end = body.find("\n#").map_or(body.len(), |i| i + 1);
    (&body[..end], page[..start].lines().count() + 1)
}

#[test]
fn each_commands_page_names_its_flags() {
    let Some(root) = repository() else {
        eprintln!("skipped: no repository around an unpacked package");
        return;
    };
    for (command, file, count) in COMMANDS {
        let flags = help_flags(command);
        assert_eq!(flags.len(), count, "spillguard {command} --help: {flags:?}");
        let page = std::fs::read_to_string(root.join(file)).unwrap();
        let (body, line) = section(&page, file, command);
        let named: BTreeSet<String> = flags_in(body).into_iter().collect();
        let missing: Vec<&String> = flags.difference(&named).collect();
        let unknown: Vec<&String> = named.difference(&flags).collect();
        assert!(
            missing.is_empty(),
            "{file}:{line}: the flags of `spillguard {command}` leave out {missing:?}"
        );
        assert!(
            unknown.is_empty(),
            "{file}:{line}: `spillguard {command}` has no {unknown:?}"
        );
    }
}

#[test]
fn every_flag_written_after_a_command_is_the_commands() {
    let Some(root) = repository() else {
        eprintln!("skipped: no repository around an unpacked package");
        return;
    };
    let mut files = vec![PathBuf::from("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            files.push(Path::new("docs").join(name));
        }
    }
    files.sort();
    let commands: Vec<(&str, BTreeSet<String>)> = COMMANDS
        .iter()
        .map(|(command, _, _)| (*command, help_flags(command)))
        .collect();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        for (i, line) in text.lines().enumerate() {
            for (command, flags) in &commands {
                let written = format!("spillguard {command} ");
                for (at, _) in line.match_indices(&written) {
                    let rest = &line[at + written.len()..];
                    // Up to the program's `--` or the end of the code span.
                    let end = [rest.find(" -- "), rest.find('`')]
                        .into_iter()
                        .flatten()
                        .min()
                        .unwrap_or(rest.len());
                    for flag in flags_in(&rest[..end]) {
                        assert!(
                            flag == "--help" || flags.contains(&flag),
                            "{}:{}: `spillguard {command}` has no {flag}",
                            file.display(),
                            i + 1
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked >= 40, "{checked} flags written after a command");
}
