//! Workspace tasks, run as `cargo xtask <task>`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("help") | None => {
            println!("usage: cargo xtask <task>\n\ntasks:\n  help    this text");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown task `{other}` (try `cargo xtask help`)");
            ExitCode::from(2)
        }
    }
}
