//! `CallHandle::stderr_lines` on smol: the helper's stderr as lines, as
//! they come, bounded (the shared check in `tests/support`).
#![allow(clippy::unwrap_used)]

mod support;

use spillguard_smol::proto::Config;
use spillguard_smol::{Host, HostOptions};

#[test]
fn lines_come_whole_then_end_and_a_flood_drops_and_counts() {
    let host = Host::new(Config::default(), HostOptions::default()).unwrap();
    smol::block_on(support::stderr_lines_come_whole_and_a_flood_drops!(host));
}
