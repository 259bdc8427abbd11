//! The `stdio` section's message-memory rows: what `spillguard stdio --mcp`
//! holds for one large message. A message is held whole until its newline
//! (to be checked as one JSON-RPC message and written in one piece), so the
//! guard costs the message once; the goal is a peak of at most 1.1× the
//! message held plus 8 MiB above the guard's idle peak, at the maximum
//! (16 and 64 MiB) and just over it (the line is then diverted as it
//! comes, and at most the maximum is held). Each row runs `bench-case
//! mcp-message`; the idle peak is the same guard passing a 1 KiB message.

use std::time::Duration;

use super::{Binaries, median, run_case};

/// (maximum, message length) of each row; the first is the idle baseline.
const ROWS: [(u64, u64); 5] = [
    (16 << 20, 1 << 10),
    (16 << 20, 16 << 20),
    (16 << 20, (16 << 20) + 1024),
    (64 << 20, 64 << 20),
    (64 << 20, (64 << 20) + 1024),
];

/// Goal: the peak above idle is at most this share of the message held...
const GOAL_SHARE: f64 = 1.1;
/// ... plus this many bytes.
const GOAL_SLACK: u64 = 8 << 20;

/// What the rows measured: per row, the guard's peak RSS in KiB of each
/// round; and what failed.
#[derive(Debug, Default)]
pub struct Measured {
    peaks: Vec<Vec<u64>>,
    /// What failed, one line each.
    pub failures: Vec<String>,
}

/// Runs every row `rounds` times.
pub fn measure(binaries: &Binaries, rounds: u32) -> Measured {
    let mut measured = Measured {
        peaks: vec![Vec::new(); ROWS.len()],
        failures: Vec::new(),
    };
    let spillguard = binaries.spillguard.display().to_string();
    for round in 1..=rounds {
        for (row, &(max, len)) in ROWS.iter().enumerate() {
            eprint!(
                "bench round {round}/{rounds}: one message of {len} bytes through stdio --mcp, maximum {} MiB ... ",
                max >> 20
            );
            let extra = [
                "--spillguard".to_owned(),
                spillguard.clone(),
                "--bytes".into(),
                len.to_string(),
                "--max-message".into(),
                max.to_string(),
            ];
            match run_case(binaries, "mcp-message", &extra, Duration::from_secs(120)) {
                Ok(fields) => match (fields.boolean("ok"), fields.number("child_maxrss_kib")) {
                    (Some(true), Some(kib)) => {
                        eprintln!("{} MiB peak", kib >> 10);
                        measured.peaks[row].push(kib);
                    }
                    _ => {
                        eprintln!("FAILED");
                        measured.failures.push(format!(
                            "message of {len} bytes: {}",
                            fields.text("error").unwrap_or("no peak reported")
                        ));
                    }
                },
                Err(error) => {
                    eprintln!("FAILED");
                    measured
                        .failures
                        .push(format!("message of {len} bytes: {error}"));
                }
            }
        }
    }
    measured
}

/// Prints the rows.
pub fn print(measured: &Measured) {
    let Some(idle) = median(measured.peaks[0].clone()) else {
        return;
    };
    println!("\n== stdio --mcp: one large message (peak RSS above the guard passing 1 KiB)");
    println!(
        "  idle peak {:.1} MiB; goal: at most {GOAL_SHARE}x the message held + {} MiB",
        idle as f64 / 1024.0,
        GOAL_SLACK >> 20
    );
    println!(
        "  maximum   message          held    peak above idle   goal      ratio to held   verdict"
    );
    for (row, &(max, len)) in ROWS.iter().enumerate().skip(1) {
        let Some(peak) = median(measured.peaks[row].clone()) else {
            continue;
        };
        let held = len.min(max);
        let above = peak.saturating_sub(idle) << 10;
        let goal = (held as f64 * GOAL_SHARE) as u64 + GOAL_SLACK;
        println!(
            "  {:>3} MiB   {:>12} B   {:>3} MiB   {:>8.1} MiB      {:>5.1} MiB   {:>5.3}x          {}",
            max >> 20,
            len,
            held >> 20,
            above as f64 / (1 << 20) as f64,
            goal as f64 / (1 << 20) as f64,
            above as f64 / held as f64,
            if above <= goal { "met" } else { "missed" }
        );
    }
}
