//! `cargo xtask release X.Y.Z`: the version in every manifest, bumped by
//! one command, and a changelog entry; `cargo xtask release --check`:
//! every manifest agrees (CI runs it; the release workflow runs it
//! against the tag).
//!
//! The manifests: the workspace's `Cargo.toml` (`[workspace.package]`
//! `version`, and the `version` of each `spillguard-*` entry of
//! `[workspace.dependencies]`, which the published crates depend on), the
//! npm launcher's and platform package's `package.json` (their `version`,
//! and the launcher's dependency on the platform package), and the
//! package README's lines that name the npm tarballs. The wheel takes its
//! version from `Cargo.toml` (maturin), so it has none of its own.
//!
//! Every edit is a replacement of an exact text that must be found the
//! expected number of times: a manifest that changed shape stops the
//! release with the file and the text, rather than leaving one behind.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The files with a version, relative to the workspace root.
const CARGO: &str = "Cargo.toml";
const NPM_LAUNCHER: &str = "adapter-tokio/cli/npm/spillguard/package.json";
const NPM_PLATFORM: &str = "adapter-tokio/cli/npm/linux-x64/package.json";
const PACKAGE_README: &str = "adapter-tokio/cli/README.md";
const CHANGELOG: &str = "CHANGELOG.md";

/// The crates whose `[workspace.dependencies]` entry carries the version.
const CRATES: [&str; 5] = [
    "spillguard-core",
    "spillguard-std",
    "spillguard-host",
    "spillguard-smol",
    "spillguard-tokio",
];

pub fn run(args: Vec<std::ffi::OsString>) -> ExitCode {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match args.as_slice() {
        [flag] if flag == "--check" => match check(&root, None) {
            Ok(version) => {
                println!("release: every manifest says {version}");
                ExitCode::SUCCESS
            }
            Err(problem) => {
                eprintln!("release: {problem}");
                ExitCode::FAILURE
            }
        },
        [flag, tag] if flag == "--check-tag" => {
            let want = tag.strip_prefix('v').unwrap_or(tag);
            match check(&root, Some(want)) {
                Ok(version) => {
                    println!("release: the tag and every manifest say {version}");
                    ExitCode::SUCCESS
                }
                Err(problem) => {
                    eprintln!("release: {problem}");
                    ExitCode::FAILURE
                }
            }
        }
        [version] if !version.starts_with('-') => {
            let today = today();
            match bump(&root, version, &today) {
                Ok(from) => {
                    println!(
                        "release: {from} -> {version} in {CARGO}, {NPM_LAUNCHER}, {NPM_PLATFORM}, \
                         {PACKAGE_README}; {CHANGELOG} has its [{version}] - {today} entry.\n\
                         Next: cargo update --workspace (Cargo.lock), commit, tag v{version}, push the tag."
                    );
                    ExitCode::SUCCESS
                }
                Err(problem) => {
                    eprintln!("release: {problem}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!(
                "usage: cargo xtask release X.Y.Z | --check | --check-tag vX.Y.Z\n  \
                 X.Y.Z: bump every manifest and date the changelog's Unreleased entry\n  \
                 --check: every manifest agrees\n  \
                 --check-tag vX.Y.Z: and says the tag's version"
            );
            ExitCode::from(2)
        }
    }
}

/// Whether `version` is a version crates.io, PyPI and npm all take:
/// `X.Y.Z` of decimal numbers without leading zeros.
pub fn valid_version(version: &str) -> bool {
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
}

/// The workspace's version (`[workspace.package]`).
fn workspace_version(cargo: &str) -> Result<String, String> {
    let doc: toml::Table = cargo
        .parse()
        .map_err(|e| format!("{CARGO}: not valid TOML: {e}"))?;
    doc.get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("version"))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{CARGO}: no [workspace.package] version"))
}

/// Every version a manifest states, with where: (file, what, version).
fn stated(root: &Path) -> Result<Vec<(String, String, String)>, String> {
    let read =
        |file: &str| std::fs::read_to_string(root.join(file)).map_err(|e| format!("{file}: {e}"));
    let mut found = Vec::new();
    let cargo = read(CARGO)?;
    found.push((
        CARGO.to_owned(),
        "[workspace.package] version".to_owned(),
        workspace_version(&cargo)?,
    ));
    let doc: toml::Table = cargo.parse().map_err(|e| format!("{CARGO}: {e}"))?;
    for krate in CRATES {
        let version = doc
            .get("workspace")
            .and_then(|w| w.get("dependencies"))
            .and_then(|d| d.get(krate))
            .and_then(|d| d.get("version"))
            .and_then(|v| v.as_str())
            .ok_or_else(|| format!("{CARGO}: [workspace.dependencies] {krate} has no version"))?;
        found.push((
            CARGO.to_owned(),
            format!("{krate} dependency"),
            version.to_owned(),
        ));
    }
    for file in [NPM_LAUNCHER, NPM_PLATFORM] {
        let json: serde_json::Value =
            serde_json::from_str(&read(file)?).map_err(|e| format!("{file}: {e}"))?;
        let version = json["version"]
            .as_str()
            .ok_or_else(|| format!("{file}: no version"))?;
        found.push((file.to_owned(), "version".to_owned(), version.to_owned()));
        if file == NPM_LAUNCHER {
            let dep = json["optionalDependencies"]["@spillguard/linux-x64"]
                .as_str()
                .ok_or_else(|| format!("{file}: no optionalDependencies @spillguard/linux-x64"))?;
            found.push((
                file.to_owned(),
                "@spillguard/linux-x64 dependency".to_owned(),
                dep.to_owned(),
            ));
        }
    }
    let readme = read(PACKAGE_README)?;
    for name in ["spillguard-linux-x64-", "spillguard-"] {
        let marker = format!("target/dist/{name}");
        for (at, _) in readme.match_indices(&marker) {
            let rest = &readme[at + marker.len()..];
            if let Some(end) = rest.find(".tgz") {
                let version = &rest[..end];
                if valid_version(version) {
                    found.push((
                        PACKAGE_README.to_owned(),
                        format!("{name}VERSION.tgz"),
                        version.to_owned(),
                    ));
                }
            }
        }
    }
    Ok(found)
}

/// Every manifest states one version (the tag's, when given): that
/// version, or every disagreement.
pub fn check(root: &Path, tag: Option<&str>) -> Result<String, String> {
    let found = stated(root)?;
    let want = match tag {
        Some(tag) => tag.to_owned(),
        None => found[0].2.clone(),
    };
    let wrong: Vec<String> = found
        .iter()
        .filter(|(_, _, version)| *version != want)
        .map(|(file, what, version)| format!("{file}: {what} is {version}, not {want}"))
        .collect();
    if wrong.is_empty() {
        Ok(want)
    } else {
        Err(format!("the manifests disagree:\n  {}", wrong.join("\n  ")))
    }
}

/// Replaces `from` by `to` in `text`, which must hold it exactly `times`
/// times.
fn replace(text: &str, from: &str, to: &str, times: usize, file: &str) -> Result<String, String> {
    let count = text.matches(from).count();
    if count != times {
        return Err(format!(
            "{file}: expected {times} of {from:?}, found {count}: the manifest changed shape"
        ));
    }
    Ok(text.replace(from, to))
}

/// Bumps every manifest from the version they agree on to `to`, and dates
/// the changelog's Unreleased entry `today`; returns the old version.
pub fn bump(root: &Path, to: &str, today: &str) -> Result<String, String> {
    if !valid_version(to) {
        return Err(format!("{to:?} is not a version (X.Y.Z)"));
    }
    let from = check(root, None)?;
    if from == to {
        return Err(format!("every manifest already says {to}"));
    }
    let path = |file: &str| root.join(file);
    let read = |file: &str| std::fs::read_to_string(path(file)).map_err(|e| format!("{file}: {e}"));
    let mut edits: Vec<(&str, String)> = Vec::new();

    let cargo = read(CARGO)?;
    let cargo = replace(
        &cargo,
        &format!("[workspace.package]\nversion = \"{from}\""),
        &format!("[workspace.package]\nversion = \"{to}\""),
        1,
        CARGO,
    )?;
    let cargo = replace(
        &cargo,
        &format!("version = \"{from}\" }}"),
        &format!("version = \"{to}\" }}"),
        CRATES.len(),
        CARGO,
    )?;
    edits.push((CARGO, cargo));

    let launcher = read(NPM_LAUNCHER)?;
    let launcher = replace(
        &launcher,
        &format!("\"version\": \"{from}\""),
        &format!("\"version\": \"{to}\""),
        1,
        NPM_LAUNCHER,
    )?;
    let launcher = replace(
        &launcher,
        &format!("\"@spillguard/linux-x64\": \"{from}\""),
        &format!("\"@spillguard/linux-x64\": \"{to}\""),
        1,
        NPM_LAUNCHER,
    )?;
    edits.push((NPM_LAUNCHER, launcher));
    let platform = read(NPM_PLATFORM)?;
    let platform = replace(
        &platform,
        &format!("\"version\": \"{from}\""),
        &format!("\"version\": \"{to}\""),
        1,
        NPM_PLATFORM,
    )?;
    edits.push((NPM_PLATFORM, platform));

    let readme = read(PACKAGE_README)?;
    let readme = readme.replace(&format!("-{from}.tgz"), &format!("-{to}.tgz"));
    edits.push((PACKAGE_README, readme));

    let changelog = read(CHANGELOG)?;
    let changelog = replace(
        &changelog,
        "## [Unreleased]\n",
        &format!("## [Unreleased]\n\n## [{to}] - {today}\n"),
        1,
        CHANGELOG,
    )?;
    edits.push((CHANGELOG, changelog));

    for (file, text) in edits {
        std::fs::write(path(file), text).map_err(|e| format!("{file}: {e}"))?;
    }
    check(root, Some(to))?;
    Ok(from)
}

/// Today's date, UTC, as the changelog writes it (`2026-12-03`): the
/// date part of the record's RFC 3339 stamp.
fn today() -> String {
    let stamp = spillguard_std::proto::rfc3339(std::time::SystemTime::now());
    stamp.get(..10).unwrap_or(&stamp).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of the manifests in a temporary folder.
    fn copy_of_the_manifests() -> PathBuf {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = std::env::temp_dir().join(format!(
            "spillguard-release-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        for file in [CARGO, NPM_LAUNCHER, NPM_PLATFORM, PACKAGE_README, CHANGELOG] {
            let to = dir.join(file);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(root.join(file), to).unwrap();
        }
        dir
    }

    #[test]
    fn the_repository_s_manifests_agree() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let version = check(&root, None).unwrap();
        assert!(valid_version(&version), "{version}");
        // Every place is read: the workspace, 5 crates, 3 npm fields, and
        // the 2 tarball names of the package README.
        assert_eq!(stated(&root).unwrap().len(), 11);
    }

    #[test]
    fn a_bump_changes_every_manifest_and_dates_the_changelog() {
        let dir = copy_of_the_manifests();
        let from = check(&dir, None).unwrap();
        assert_eq!(bump(&dir, "7.8.9", "2026-12-03"), Ok(from.clone()));
        assert_eq!(check(&dir, None), Ok("7.8.9".to_owned()));
        assert_eq!(check(&dir, Some("7.8.9")), Ok("7.8.9".to_owned()));
        let changelog = std::fs::read_to_string(dir.join(CHANGELOG)).unwrap();
        assert!(changelog.contains("## [Unreleased]\n\n## [7.8.9] - 2026-12-03\n"));
        let cargo = std::fs::read_to_string(dir.join(CARGO)).unwrap();
        assert_eq!(cargo.matches("version = \"7.8.9\"").count(), 6);
        assert!(!cargo.contains(&format!("\"{from}\"")));
        // The same version again, or not a version: refused, nothing
        // written.
        assert!(bump(&dir, "7.8.9", "2026-12-03").is_err());
        assert!(bump(&dir, "1.2", "2026-12-03").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_disagreement_is_named_with_its_file() {
        let dir = copy_of_the_manifests();
        let from = check(&dir, None).unwrap();
        let file = dir.join(NPM_PLATFORM);
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, text.replace(&from, "9.9.9")).unwrap();
        let error = check(&dir, None).unwrap_err();
        assert_eq!(
            error,
            format!("the manifests disagree:\n  {NPM_PLATFORM}: version is 9.9.9, not {from}")
        );
        assert!(check(&dir, Some("1.0.0")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn versions_are_three_plain_numbers() {
        for good in ["0.1.0", "1.20.3", "10.0.0"] {
            assert!(valid_version(good), "{good}");
        }
        for bad in [
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.2.x",
            "v1.2.3",
            "1.2.3-rc1",
            "",
        ] {
            assert!(!valid_version(bad), "{bad}");
        }
    }
}
