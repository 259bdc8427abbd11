//! The CI-sized soak on every runtime ([`spillguard_tests::soak`]): 200
//! flood-and-cancel cycles, 200 short calls, 20 trees of 13 processes and
//! 256 concurrent calls under a 256 KiB budget; afterwards the process's
//! descriptors, threads and zombies and the host's live calls are back to
//! where they were. The soaks measure the whole process, so they run one
//! at a time, alone in this test binary.

use std::sync::{Mutex, PoisonError};

use spillguard_tests::drivers;
use spillguard_tests::soak::{SoakSize, soak};

static ALONE: Mutex<()> = Mutex::new(());

#[test]
fn a_std_soak_leaves_descriptors_threads_and_zombies_at_baseline() {
    let _alone = ALONE.lock().unwrap_or_else(PoisonError::into_inner);
    let figures = soak(drivers::std::host, SoakSize::CI);
    eprintln!("std:\n{figures}");
    assert_eq!(figures.tree_survivors, 0);
}

#[test]
fn a_smol_soak_leaves_descriptors_threads_and_zombies_at_baseline() {
    let _alone = ALONE.lock().unwrap_or_else(PoisonError::into_inner);
    let figures = soak(drivers::smol::host, SoakSize::CI);
    eprintln!("smol:\n{figures}");
    assert_eq!(figures.tree_survivors, 0);
}

#[test]
fn a_tokio_soak_leaves_descriptors_threads_and_zombies_at_baseline() {
    let _alone = ALONE.lock().unwrap_or_else(PoisonError::into_inner);
    let figures = soak(drivers::tokio::host, SoakSize::CI);
    eprintln!("tokio:\n{figures}");
    assert_eq!(figures.tree_survivors, 0);
}
