//! `CallHandle::stderr_lines` on tokio: the helper's stderr as lines, as
//! they come, bounded (the shared check in `tests/support`).
#![allow(clippy::unwrap_used)]

mod support;

use spillguard_tokio::proto::Config;
use spillguard_tokio::{Host, HostOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_come_whole_then_end_and_a_flood_drops_and_counts() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    support::stderr_lines_come_whole_and_a_flood_drops!(host).await;
}
