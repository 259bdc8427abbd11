//! The `redact` section: what redaction costs a view. The `bench-redact`
//! binary (built with the others, in release) renders a 16 KiB window
//! with 0, 1 and 50 secrets, whole and clamped to the 4 KiB excerpt; goal:
//! at most 100 µs per render. (Its effect on a flood is the flood
//! section's ratio: a flood's bytes are never redacted as they come, only
//! the window once rendered.)

use std::path::Path;
use std::process::Command;

/// Goal: µs per render of a 16 KiB window, at most.
const GOAL_US: f64 = 100.0;

/// (secrets, window µs, excerpt µs, secrets found) per row.
pub type Rows = Vec<(u32, f64, f64, u64)>;

/// Runs the binary and reads its line.
pub fn measure(binary: &Path) -> Result<Rows, String> {
    eprint!("bench: redaction of a 16 KiB window with 0, 1 and 50 secrets ... ");
    let output = Command::new(binary)
        .output()
        .map_err(|error| format!("cannot run {}: {error}", binary.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|error| format!("{}: {error}: {text}", output.status))?;
    let rows = [0, 1, 50]
        .into_iter()
        .map(|n| {
            let get = |key: &str| value[format!("{key}_{n}")].as_f64().unwrap_or(f64::NAN);
            (n, get("window"), get("excerpt"), get("found") as u64)
        })
        .collect();
    eprintln!("done");
    Ok(rows)
}

/// Prints the section.
pub fn print(rows: &Rows) {
    println!("\n== redact: rendering a 16 KiB window (median of 15 x 200 renders)");
    for (secrets, window, excerpt, found) in rows {
        let met = *window <= GOAL_US && *excerpt <= GOAL_US;
        println!(
            "  {secrets:>2} secrets ({found:>2} found)   window {window:7.1} us   excerpt (4 KiB) {excerpt:7.1} us   (goal <= {GOAL_US:.0} us: {})",
            if met { "met" } else { "missed" }
        );
    }
}
