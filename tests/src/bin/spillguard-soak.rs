//! The long soak (`cargo xtask soak`): [`spillguard_tests::soak`] on each
//! runtime with as many cycles as asked, one runtime after another in this
//! process, printing what each measured.
//!
//! `spillguard-soak [--cycles N] [--trees N] [--concurrent N]
//! [--runtime std|smol|tokio]...`; defaults: 1000 cycles (and as many
//! short calls), 100 trees, 256 concurrent calls, every runtime. Exit
//! status 0 when every check held; a failed check panics (status 101).

use std::process::ExitCode;
use std::time::Instant;

use spillguard_tests::drivers;
use spillguard_tests::soak::{SoakSize, soak};

const USAGE: &str = "usage: spillguard-soak [--cycles N] [--trees N] [--concurrent N] \
                     [--runtime std|smol|tokio]...";

fn main() -> ExitCode {
    let mut size = SoakSize {
        cycles: 1000,
        trees: 100,
        concurrent: 256,
    };
    let mut runtimes = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            "--cycles" | "--trees" | "--concurrent" | "--runtime" => args.next(),
            _ => None,
        };
        let Some(value) = value else {
            eprintln!("spillguard-soak: unexpected `{arg}`\n{USAGE}");
            return ExitCode::from(2);
        };
        if arg == "--runtime" {
            runtimes.push(value);
            continue;
        }
        let Ok(number) = value.parse::<usize>() else {
            eprintln!("spillguard-soak: {arg} takes a number, not `{value}`");
            return ExitCode::from(2);
        };
        match arg.as_str() {
            "--cycles" => size.cycles = number,
            "--trees" => size.trees = number,
            _ => size.concurrent = number,
        }
    }
    if runtimes.is_empty() {
        runtimes = ["std", "smol", "tokio"].map(String::from).to_vec();
    }
    for runtime in &runtimes {
        let started = Instant::now();
        let figures = match runtime.as_str() {
            "std" => soak(drivers::std::host, size),
            "smol" => soak(drivers::smol::host, size),
            "tokio" => soak(drivers::tokio::host, size),
            other => {
                eprintln!("spillguard-soak: no runtime `{other}` (std, smol, tokio)");
                return ExitCode::from(2);
            }
        };
        println!(
            "{runtime}: ok in {:.1} s\n{figures}",
            started.elapsed().as_secs_f64()
        );
    }
    ExitCode::SUCCESS
}
