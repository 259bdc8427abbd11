//! The host's drainer of leftover pipes is one per host: a thread of its
//! own on std, a task on smol's executor and on the host's tokio runtime
//! (the process gains no thread), and it never blocks the runtime it runs
//! on (smol's executor has one thread unless `SMOL_THREADS` says more; the
//! tokio hosts run on a current-thread runtime and on a multi-threaded
//! one). The check counts the process's threads, so it runs alone in this
//! test binary, one runtime after the other, std last (its idle pooled
//! workers end after 10 s and would lower a later baseline).

use spillguard_tests::behaviour::{
    Drainer, the_drainer_is_one_per_host_and_never_blocks_the_runtime as check,
};
use spillguard_tests::drivers;

#[test]
fn the_drainer_is_a_task_on_smol_and_tokio_and_a_thread_on_std() {
    let smol = check(drivers::smol::host, Drainer::Task);
    eprintln!("smol: {smol}");
    let tokio_one = check(drivers::tokio::current_thread_host, Drainer::Task);
    eprintln!("tokio (current thread): {tokio_one}");
    let tokio = check(drivers::tokio::host, Drainer::Task);
    eprintln!("tokio (2 workers): {tokio}");
    let std = check(drivers::std::host, Drainer::Thread);
    eprintln!("std: {std}");
}
