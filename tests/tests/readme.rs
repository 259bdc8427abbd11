//! The repository's `docs/mcp.md` and the CLI package's README (what crates.io and
//! docs.rs show) give the same tools-file example; the CLI's own tests load
//! the package's copy (`the_tools_file_shown_in_the_readme_loads`).
#![allow(clippy::unwrap_used)]

use std::path::Path;

/// The fenced block of `file` that begins with `first_line`, fences
/// included.
fn block(file: &str, first_line: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let opening = format!("```toml\n{first_line}\n");
    let start = text
        .find(&opening)
        .unwrap_or_else(|| panic!("{file} has no block that begins {first_line:?}"));
    let end = start + opening.len() + text[start + opening.len()..].find("```\n").unwrap() + 4;
    text[start..end].to_owned()
}

#[test]
fn both_readmes_show_the_same_tools_file() {
    let first = "[helper_output]                 # the budgets, as everywhere";
    let root = block("docs/mcp.md", first);
    let package = block("adapter-tokio/cli/README.md", first);
    assert_eq!(root, package);
    assert_eq!(root.lines().count(), 14);
}
