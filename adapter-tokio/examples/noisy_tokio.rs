//! Runs a noisy helper that needs approval: shows its card, approves it,
//! then prints the call record (JSON) and the excerpt an agent would get.
//!
//! The helper writes 20,000 lines of retries to stderr, then its result on
//! stdout. Its stderr is drained as it comes, only the last 16 KiB are
//! kept, and the result is untouched by the noise.
//!
//! ```text
//! cargo run -p spillguard-tokio --example noisy_tokio
//! ```

use spillguard_tokio::Approval;
use std::time::Duration;

use spillguard_tokio::proto::Config;
use spillguard_tokio::{Host, HostOptions};

const SCRIPT: &str =
    r#"for i in $(seq 1 20000); do echo "retry $i failed" 1>&2; done; echo '{"ok":true}'"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = Host::new(Config::default(), HostOptions::default())?;
    let call = host
        .shell(SCRIPT)
        .call_id("c_noisy")
        .session_id("s_example")
        .action("local.retry")
        .target("localhost")
        .summary("retry 20000 times, then report")
        .approval(Approval::Required)
        .start();

    let card = call
        .wait_card(Duration::from_secs(10))
        .await
        .ok_or("no approval card")?;
    println!(
        "approval card: {} on {} ({}), expires in {:?}",
        card.action, card.target, card.summary, card.expires_in
    );
    call.approve().await?;

    let outcome = call.wait().await;
    println!("record: {}", outcome.record.to_json());
    println!(
        "result (stdout): {}",
        String::from_utf8_lossy(&outcome.stdout.to_vec()).trim_end()
    );
    println!("agent excerpt:\n{}", outcome.agent_excerpt());
    host.shutdown_and_wait(Duration::from_secs(5)).await;
    Ok(())
}
