//! The counts and lists the documentation states about the code, checked
//! against the code: the redaction rules (how many, how many are named
//! for providers, the provider formats and providers), the rule names the
//! redaction page's table and the `Redactor` docs give, and the record's
//! fields. Each count is written in one phrasing everywhere:
//! "N rules in all", "N provider rules", "N provider formats of M
//! providers", "The record has N fields". A failure names the file and
//! the line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use spillguard_core::{Config, Redactor, provider_samples};
use spillguard_std::{Host, HostOptions};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// README.md, every page of docs/, and the `Redactor` docs.
fn documents() -> Vec<(String, String)> {
    let mut files = vec!["README.md".to_owned(), "core/src/redact/mod.rs".to_owned()];
    let mut pages: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    pages.sort();
    assert!(pages.len() >= 8, "docs/ holds {} pages", pages.len());
    files.extend(pages);
    files
        .into_iter()
        .map(|f| {
            let text = read(&f);
            (f, text)
        })
        .collect()
}

/// Each line of the documents, the `///` or `//!` of a Rust file taken
/// off, with the next line joined to it so that a phrase broken across
/// two lines is found: (file, line number, the two lines, the length of
/// the first). A phrase counts at the line it starts on.
fn lines(docs: &[(String, String)]) -> Vec<(String, usize, String, usize)> {
    let mut out = Vec::new();
    for (file, text) in docs {
        let plain: Vec<&str> = text
            .lines()
            .map(|l| {
                let t = l.trim_start();
                t.strip_prefix("///")
                    .or_else(|| t.strip_prefix("//!"))
                    .unwrap_or(l)
                    .trim()
            })
            .collect();
        for (i, line) in plain.iter().enumerate() {
            let next = plain.get(i + 1).copied().unwrap_or("");
            out.push((file.clone(), i + 1, format!("{line} {next}"), line.len()));
        }
    }
    out
}

/// The number written just before `at` in `text` (`1,024` reads 1024).
fn number_before(text: &str, at: usize) -> Option<u64> {
    let head = text[..at].trim_end();
    let start = head
        .rfind(|c: char| !(c.is_ascii_digit() || c == ','))
        .map_or(0, |i| i + 1);
    head[start..].replace(',', "").parse().ok()
}

/// The number written just after `at` in `text`.
fn number_after(text: &str, at: usize) -> Option<u64> {
    let tail = text[at..].trim_start();
    let end = tail
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(tail.len());
    tail[..end].replace(',', "").parse().ok()
}

/// Every place `phrase` follows a number, as (file, line, number).
fn stated(lines: &[(String, usize, String, usize)], phrase: &str) -> Vec<(String, usize, u64)> {
    let mut out = Vec::new();
    for (file, line, text, first) in lines {
        for (at, _) in text.match_indices(phrase) {
            if at > *first {
                continue;
            }
            if let Some(n) = number_before(text, at) {
                out.push((file.clone(), *line, n));
            }
        }
    }
    out
}

fn provider_names() -> BTreeSet<&'static str> {
    provider_samples(7)
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// The providers of the format table, read from its rows
/// (`f("PROVIDER", "rule-name", …)`).
fn table_providers() -> (usize, BTreeSet<String>) {
    let table = read("core/src/redact/providers/table.rs");
    let mut rows = 0;
    let mut providers = BTreeSet::new();
    for (at, _) in table.match_indices("f(") {
        if at > 0 && !table[..at].ends_with(|c: char| c.is_whitespace()) {
            continue;
        }
        let rest = table[at + 2..].trim_start();
        if let Some(rest) = rest.strip_prefix('"') {
            rows += 1;
            providers.insert(rest[..rest.find('"').unwrap()].to_owned());
        }
    }
    (rows, providers)
}

#[test]
fn the_rule_counts_are_the_redactors() {
    let all: Vec<&str> = Redactor::builtin_rule_names().collect();
    let providers = provider_names();
    let formats = provider_samples(7).len();
    let (rows, provider_set) = table_providers();
    assert_eq!(all.len(), 172);
    assert_eq!(providers.len(), 140);
    assert_eq!(formats, 226);
    assert_eq!(rows, formats, "rows read from the format table");
    assert_eq!(provider_set.len(), 120);
    assert!(providers.iter().all(|p| all.contains(p)));

    let docs = documents();
    let lines = lines(&docs);
    let mut checked = 0;
    for (phrase, want) in [
        (" rules in all", all.len() as u64),
        (" provider rules", providers.len() as u64),
        (" provider formats of ", formats as u64),
    ] {
        let places = stated(&lines, phrase);
        assert!(!places.is_empty(), "no document says \"N{phrase}\"");
        for (file, line, n) in places {
            assert_eq!(
                n, want,
                "{file}:{line} says \"{n}{phrase}\"; the code has {want}"
            );
            checked += 1;
        }
    }
    for (file, line, text, first) in &lines {
        for (at, _) in text.match_indices(" provider formats of ") {
            if at > *first || number_before(text, at).is_none() {
                continue;
            }
            let n = number_after(text, at + " provider formats of ".len())
                .unwrap_or_else(|| panic!("{file}:{line}: no number of providers"));
            assert_eq!(
                n,
                provider_set.len() as u64,
                "{file}:{line} says \"of {n} providers\"; the table has {}",
                provider_set.len()
            );
        }
        // One phrasing per count: a count said otherwise is one nobody
        // checks.
        for (at, _) in text.match_indices(" formats of ") {
            assert!(
                at > *first || text[..at].ends_with("provider"),
                "{file}:{line} says \"N formats of\"; write \"N provider formats of M providers\""
            );
        }
        for other in [" rules, plus ", " of them, plus "] {
            assert!(
                !text[..*first].contains(other),
                "{file}:{line} states a count as \"N{other}…\"; write \"N rules in all\" and \"N provider rules\""
            );
        }
    }
    // README, the redaction page and the `Redactor` docs say them.
    assert!(checked >= 4, "{checked} counts found");
}

/// The redaction page's table names every rule that is not a provider's,
/// and only rules.
#[test]
fn the_redaction_table_names_every_rule() {
    let all: BTreeSet<&str> = Redactor::builtin_rule_names().collect();
    let providers = provider_names();
    let others: BTreeSet<&str> = all.difference(&providers).copied().collect();
    assert_eq!(others.len(), 32);

    let page = read("docs/redaction.md");
    let mut named = BTreeSet::new();
    for (i, line) in page.lines().enumerate() {
        if !line.starts_with("| ") || line.starts_with("| class") || line.starts_with("|---") {
            continue;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        if cells.len() != 3 {
            continue;
        }
        for name in names_in(cells[2]) {
            assert!(
                all.contains(name.as_str()),
                "docs/redaction.md:{}: `{name}` is no rule of the redactor",
                i + 1
            );
            named.insert(name);
        }
    }
    let missing: Vec<&&str> = others.iter().filter(|r| !named.contains(**r)).collect();
    assert!(
        missing.is_empty(),
        "docs/redaction.md: the table of rules leaves out {missing:?}"
    );
}

/// The `Redactor` docs list every rule that is not a provider's.
#[test]
fn the_redactor_docs_name_every_rule() {
    let all: BTreeSet<&str> = Redactor::builtin_rule_names().collect();
    let providers = provider_names();
    let source = read("core/src/redact/mod.rs");
    let start = source.find("/// # Rules").expect("the Redactor's # Rules");
    let end = start + source[start..].find("/// # Examples").unwrap();
    let docs = &source[start..end];
    let named: BTreeSet<String> = names_in(docs).collect();
    for name in &named {
        if name.starts_with("extra-") || !name.contains('-') && name != "jwt" {
            continue;
        }
        assert!(
            all.contains(name.as_str()),
            "core/src/redact/mod.rs: the Redactor's docs name `{name}`, which is no rule"
        );
    }
    let missing: Vec<&&str> = all
        .iter()
        .filter(|r| !providers.contains(**r) && !named.contains(**r))
        .collect();
    assert!(
        missing.is_empty(),
        "core/src/redact/mod.rs: the Redactor's # Rules leaves out {missing:?}"
    );
}

/// The words in backticks that are lowercase kebab-case names.
fn names_in(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && w.starts_with(|c: char| c.is_ascii_lowercase())
        })
        .map(str::to_owned)
}

/// The keys of a JSON object's text, in the order written.
fn top_level_keys(json: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut depth = 0;
    let mut chars = json.chars();
    let mut expect_key = false;
    while let Some(c) = chars.next() {
        match c {
            '{' | '[' => {
                depth += 1;
                expect_key = depth == 1;
            }
            '}' | ']' => depth -= 1,
            ',' => expect_key = depth == 1,
            '"' => {
                let mut text = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => text.push(chars.next().unwrap()),
                        '"' => break,
                        c => text.push(c),
                    }
                }
                if expect_key {
                    keys.push(text);
                    expect_key = false;
                }
            }
            _ => {}
        }
    }
    keys
}

/// docs/run.md lists the record's fields, in the order they are written.
#[test]
fn the_record_fields_are_the_records() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    let outcome = host.command("true").run();
    let fields = top_level_keys(&serde_json::to_string(&outcome.record).unwrap());
    assert_eq!(fields.len(), 60);
    assert_eq!(fields[0], "call_id");
    assert_eq!(fields[59], "parent_span_id");

    let page = read("docs/run.md");
    let phrase = "The record has ";
    let at = page
        .find(phrase)
        .expect("docs/run.md: \"The record has N fields\"");
    let line = page[..at].lines().count() + 1;
    let n = number_after(&page, at + phrase.len()).unwrap();
    assert_eq!(
        n,
        fields.len() as u64,
        "docs/run.md:{line} says {n} fields; the record has {}",
        fields.len()
    );
    let list = &page[at..];
    let list = &list[..list.find("`.\n").unwrap() + 1];
    let listed: Vec<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert_eq!(
        listed, fields,
        "docs/run.md:{line}: the fields listed are not the record's, in its order"
    );
}

/// The package name of the manifest in `folder` (its `[package]` table's
/// `name`).
fn package_name(folder: &str) -> String {
    let manifest = read(&format!("{folder}/Cargo.toml"));
    let package = manifest
        .split("[package]")
        .nth(1)
        .unwrap_or_else(|| panic!("{folder}/Cargo.toml has no [package]"));
    package
        .lines()
        .find_map(|line| line.trim().strip_prefix("name = "))
        .map(|name| name.trim_matches('"').to_owned())
        .unwrap_or_else(|| panic!("{folder}/Cargo.toml names no package"))
}

#[test]
fn the_readme_layout_table_lists_every_crate_of_the_workspace() {
    let workspace = read("Cargo.toml");
    let members = workspace
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("the workspace lists its members");
    let folders: Vec<&str> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .collect();
    assert!(folders.len() >= 8, "{folders:?}");
    let readme = read("README.md");
    let rows: Vec<&str> = readme
        .lines()
        .skip_while(|line| *line != "## Layout")
        .filter(|line| line.starts_with("| `"))
        .collect();
    assert_eq!(rows.len(), folders.len(), "one row per crate: {rows:?}");
    for folder in folders {
        let name = package_name(folder);
        let row = format!("| `{name}` | `{folder}/` |");
        assert!(
            rows.iter().any(|r| r.starts_with(&row)),
            "README.md's layout table has no row `{row}`"
        );
    }
}
