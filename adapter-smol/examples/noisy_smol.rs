//! Runs a noisy helper that needs approval: prints the approval card,
//! approves, then prints the call record as JSON and the agent excerpt.
//!
//! ```text
//! cargo run -p spillguard-smol --example noisy_smol
//! ```
//!
//! The helper writes 20,000 retry lines to stderr (about 400 KB) and then
//! its structured result to stdout. The record counts every stderr byte,
//! keeps the last 16 KiB, and the excerpt handed to a model is clamped to
//! 4 KiB, truncation marker first.

use spillguard_smol::Approval;
use std::process::ExitCode;
use std::time::Duration;

use spillguard_smol::proto::Config;
use spillguard_smol::{Host, HostOptions};

const SCRIPT: &str =
    r#"for i in $(seq 1 20000); do echo "retry $i failed" 1>&2; done; echo '{"ok":true}'"#;

fn main() -> ExitCode {
    smol::block_on(run())
}

async fn run() -> ExitCode {
    let host = match Host::new(Config::default(), HostOptions::default()) {
        Ok(host) => host,
        Err(error) => {
            eprintln!("invalid configuration: {error}");
            return ExitCode::FAILURE;
        }
    };
    let call = host
        .shell(SCRIPT)
        .call_id("c_noisy")
        .session_id("s_example")
        .action("local.retry")
        .target("localhost")
        .summary("20,000 retries on stderr, then a result")
        .approval(Approval::Required)
        .start();

    let Some(card) = call.wait_card(Duration::from_secs(10)).await else {
        eprintln!("no approval card (state {})", call.state());
        return ExitCode::FAILURE;
    };
    println!("== approval card");
    println!(
        "{} on {}: {} (expires in {:?})",
        card.action, card.target, card.summary, card.expires_in
    );
    if let Err(error) = call.approve().await {
        eprintln!("approval refused: {error}");
        return ExitCode::FAILURE;
    }
    println!("approved");

    let outcome = call.wait().await;
    println!("== record");
    match serde_json::to_string_pretty(&outcome.record) {
        Ok(json) => println!("{json}"),
        Err(error) => eprintln!("cannot render the record: {error}"),
    }
    println!("== result (stdout)");
    print!("{}", String::from_utf8_lossy(&outcome.stdout.to_vec()));
    println!("== agent excerpt ({} bytes at most)", outcome.excerpt_bytes);
    let excerpt = outcome.agent_excerpt();
    let lines: Vec<&str> = excerpt.lines().collect();
    for line in lines.iter().take(3) {
        println!("{line}");
    }
    println!("… {} more lines", lines.len().saturating_sub(3));
    let report = host.shutdown_and_wait(Duration::from_secs(5)).await;
    if report.unfinished == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
