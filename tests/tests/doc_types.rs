//! The rendered docs of each adapter's `CallBuilder` show what `run()` and
//! `start()` return as types a reader can click, not as a projection
//! through a trait (`<H as Launch>::Run`).
//!
//! Reads the HTML `cargo doc --workspace --no-deps` wrote (CI runs it
//! before the tests); outside CI, missing docs skip with the command that
//! makes them.

use std::path::PathBuf;

/// The text of the rendered page, tags dropped and entities decoded.
fn rendered(crate_dir: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/doc")
        .join(crate_dir)
        .join("struct.CallBuilder.html");
    let html = std::fs::read_to_string(&path).ok()?;
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    Some(
        text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("&amp;", "&"),
    )
}

/// The signature `pub fn NAME(self) -> ...` as rendered, up to the start
/// of its description.
fn signatures<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    let needle = format!("pub fn {name}(self) -> ");
    text.match_indices(&needle)
        .map(|(at, _)| {
            let rest = &text[at + needle.len()..];
            let end = rest.find("Starts the call").unwrap_or(rest.len().min(80));
            &rest[..end]
        })
        .collect()
}

#[test]
fn run_and_start_show_each_front_s_own_types() {
    for crate_dir in ["spillguard_std", "spillguard_smol", "spillguard_tokio"] {
        let Some(text) = rendered(crate_dir) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs `cargo doc --workspace --no-deps` before the tests"
            );
            eprintln!("skipped: no rendered docs; run `cargo doc --workspace --no-deps` first");
            return;
        };
        assert!(
            !text.contains("as Launch>::"),
            "{crate_dir}: a signature is still a projection through Launch"
        );
        let mut run = signatures(&text, "run");
        let mut start = signatures(&text, "start");
        run.sort_unstable();
        start.sort_unstable();
        assert_eq!(
            run,
            ["Outcome", "Pin<Box<dyn Future<Output = Outcome> + Send>>"],
            "{crate_dir}: run() on the blocking and the async front"
        );
        assert_eq!(
            start,
            ["AsyncCallHandle<R>", "BlockingCallHandle"],
            "{crate_dir}: start() on the async and the blocking front"
        );
    }
}
