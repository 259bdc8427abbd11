//! The rendered docs of each adapter show its own types: every method a
//! user calls on `Host`, `CallBuilder`, `Command`, `CallHandle`,
//! `Canceller` (and `Run` on smol and tokio) names that adapter's types,
//! with no projection through a trait (`<R as AsyncRuntime>::Stdin`), no
//! generic type of the host layer (`AsyncCallHandle<R>`), no other
//! runtime's impls and no boxed future; each is a page of its own, not a
//! type alias whose methods only show with JavaScript.
//!
//! Reads the HTML `cargo doc --workspace --no-deps` wrote (CI runs it
//! before the tests); outside CI, missing docs skip with the command that
//! makes them.

use std::path::{Path, PathBuf};

/// What no inherent signature of an adapter's page may show.
const FOREIGN: [&str; 10] = [
    " as AsyncRuntime>",
    " as Launch>",
    "Pin<Box<dyn",
    "AsyncHost<",
    "AsyncCallHandle<",
    "AsyncCanceller<",
    "BlockingHost<",
    "BlockingCallHandle",
    "BlockingCanceller",
    "DefaultHost<",
];

/// Where `cargo doc` wrote the workspace's docs, or `None` (outside CI
/// only: the test then skips) when they were not rendered.
fn rendered_docs() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/doc");
    if root.join("spillguard_tokio/index.html").exists() {
        return Some(root);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI runs `cargo doc --workspace --no-deps` before the tests"
    );
    eprintln!("skipped: no rendered docs; run `cargo doc --workspace --no-deps` first");
    None
}

/// Every HTML page under `dir`, but those in a folder named `leave_out`.
fn html_pages(dir: &Path, leave_out: Option<&str>) -> Vec<PathBuf> {
    let (mut pages, mut folders) = (Vec::new(), vec![dir.to_path_buf()]);
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("a rendered docs folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                if leave_out.is_none_or(|name| !path.ends_with(name)) {
                    folders.push(path);
                }
            } else if path.extension().is_some_and(|ext| ext == "html") {
                pages.push(path);
            }
        }
    }
    pages
}

/// The signatures of a page's inherent methods (before its trait
/// implementations), each as rendered: tags dropped, entities decoded,
/// whitespace made single spaces.
fn inherent(path: &Path) -> Vec<String> {
    let html =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let start = html.find("id=\"implementations\"").unwrap_or(0);
    let end = html[start..]
        .find("id=\"trait-implementations\"")
        .map_or(html.len(), |at| start + at);
    let open = "<h4 class=\"code-header\">";
    html[start..end]
        .split(open)
        .skip(1)
        .filter_map(|header| header.split_once("</h4>").map(|(code, _)| code))
        .map(|code| {
            let mut text = String::with_capacity(code.len());
            let mut in_tag = false;
            for c in code.chars() {
                match c {
                    '<' => in_tag = true,
                    '>' if in_tag => in_tag = false,
                    _ if !in_tag => text.push(c),
                    _ => {}
                }
            }
            let text = text
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&#39;", "'")
                .replace("&amp;", "&");
            // `ⓘ` marks a type with a notable trait (`Run` is a future).
            text.split_whitespace()
                .filter(|word| *word != "ⓘ")
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// What method `name` returns, for each signature of that name.
fn returns<'t>(signatures: &'t [String], name: &str) -> Vec<&'t str> {
    signatures
        .iter()
        .filter(|signature| {
            ["pub fn ", "pub async fn "]
                .iter()
                .any(|prefix| signature.starts_with(&format!("{prefix}{name}(")))
        })
        .map(|signature| signature.rsplit_once(" -> ").map_or("()", |(_, ret)| ret))
        .map(|ret| ret.split(" where ").next().unwrap_or(ret))
        .collect()
}

#[test]
fn each_adapter_s_pages_show_its_own_types() {
    let Some(root) = rendered_docs() else {
        return;
    };
    for (krate, is_async) in [
        ("spillguard_tokio", true),
        ("spillguard_smol", true),
        ("spillguard_std", false),
    ] {
        let mut pages = vec!["Host", "CallBuilder", "Command", "CallHandle", "Canceller"];
        if is_async {
            pages.push("Run");
        }
        for page in &pages {
            let dir = root.join(krate);
            assert!(
                !dir.join(format!("type.{page}.html")).exists(),
                "{krate}::{page} is a type alias"
            );
            let signatures = inherent(&dir.join(format!("struct.{page}.html")));
            // `Run` is a future: its methods are the trait's.
            assert!(
                *page == "Run" || !signatures.is_empty(),
                "{krate}::{page}: no methods rendered"
            );
        }
        // No page's methods (these, the streams', the records') show a
        // type of the host layer; the `adapter` module, for code that
        // builds on the adapter, names them by design.
        for path in html_pages(&root.join(krate), Some("adapter")) {
            for signature in inherent(&path) {
                for foreign in FOREIGN {
                    assert!(
                        !signature.contains(foreign),
                        "{}: `{signature}` shows `{foreign}`",
                        path.display()
                    );
                }
            }
        }
        let page = |name: &str| inherent(&root.join(krate).join(format!("struct.{name}.html")));
        let (builder, command, handle, host) = (
            page("CallBuilder"),
            page("Command"),
            page("CallHandle"),
            page("Host"),
        );
        assert_eq!(returns(&builder, "start"), ["CallHandle"], "{krate}");
        let run = if is_async { "Run" } else { "Outcome" };
        assert_eq!(returns(&builder, "run"), [run], "{krate}");
        assert_eq!(returns(&builder, "output"), ["Result<Output>"], "{krate}");
        assert_eq!(
            returns(&command, "spawn"),
            ["Result<CallHandle>"],
            "{krate}"
        );
        assert_eq!(returns(&command, "output"), ["Result<Output>"], "{krate}");
        assert_eq!(returns(&command, "deadline"), ["Self"], "{krate}");
        assert_eq!(
            returns(&handle, "streams"),
            ["Result<(HelperStdin, HelperStdout)>"],
            "{krate}"
        );
        assert_eq!(returns(&handle, "canceller"), ["Canceller"], "{krate}");
        assert_eq!(returns(&handle, "wait"), ["Outcome"], "{krate}");
        assert_eq!(
            returns(&handle, "wait_timeout"),
            ["Result<Outcome, CallHandle>"],
            "{krate}"
        );
        assert_eq!(returns(&host, "command"), ["CallBuilder<'_>"], "{krate}");
        assert_eq!(returns(&host, "shell"), ["CallBuilder<'_>"], "{krate}");
    }
}

/// Every example rendered in an adapter's docs imports from that adapter
/// only: none names the host layer or the core, which its user does not
/// depend on (their own pages, not inlined, keep their own examples).
#[test]
fn each_adapter_s_examples_name_only_its_own_crate() {
    let Some(root) = rendered_docs() else {
        return;
    };
    for krate in ["spillguard_tokio", "spillguard_smol", "spillguard_std"] {
        let (mut examples, mut foreign) = (0, Vec::new());
        for path in html_pages(&root.join(krate), None) {
            let html = std::fs::read_to_string(&path).expect("a rendered page");
            let open = "<pre class=\"rust rust-example-rendered\">";
            for block in html.split(open).skip(1) {
                let code = block.split("</pre>").next().unwrap_or(block);
                examples += 1;
                for other in ["spillguard_host", "spillguard_core"] {
                    if code.contains(other) {
                        foreign.push(format!("{}: {other}", path.display()));
                    }
                }
            }
        }
        assert!(examples >= 5, "{krate}: only {examples} examples rendered");
        assert_eq!(foreign, Vec::<String>::new(), "{krate}");
    }
}

/// Each async adapter likens its calls to its own runtime's process
/// crate: smol's builder says `async_process::Command::spawn` (and
/// `output`, `status`), tokio's `tokio::process::Command::spawn`, and no
/// page names the other's but the crate's front (its "coming from" table)
/// and the generic pages of its `adapter` module.
#[test]
fn each_async_adapter_likens_its_calls_to_its_own_process_crate() {
    let Some(root) = rendered_docs() else {
        return;
    };
    for (krate, own, other) in [
        (
            "spillguard_smol",
            "async_process::Command",
            "tokio::process::Command",
        ),
        (
            "spillguard_tokio",
            "tokio::process::Command",
            "async_process::Command",
        ),
    ] {
        let likened = [
            (
                "struct.CallBuilder.html",
                &["output", "status", "spawn"][..],
            ),
            ("struct.Command.html", &["spawn"][..]),
        ];
        for (page, methods) in likened {
            let html = std::fs::read_to_string(root.join(krate).join(page)).expect("a page");
            for method in methods {
                let likeness = format!("{own}::{method}");
                assert!(html.contains(&likeness), "{krate}/{page}: no {likeness}");
            }
        }
        let front = root.join(krate).join("index.html");
        for path in html_pages(&root.join(krate), Some("adapter")) {
            let html = std::fs::read_to_string(&path).expect("a rendered page");
            if path != front {
                assert!(!html.contains(other), "{}: names {other}", path.display());
            }
        }
    }
}
