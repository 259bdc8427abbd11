//! `Outcome::into_result` and `Outcome::stdout_bytes` through a real
//! spawn: a program that does not exist is an `io::Error` of kind
//! `NotFound` with `?`; a helper that exits non-zero is `Ok`, its stdout
//! byte for byte.
#![allow(clippy::unwrap_used)]

use std::io;

use spillguard_std::proto::{Exit, State};
use spillguard_std::{Host, HostOptions};

fn host() -> Host {
    Host::new(
        spillguard_std::proto::Config::default(),
        HostOptions::default(),
    )
    .unwrap()
}

#[test]
fn a_program_that_does_not_exist_is_a_not_found_io_error() {
    fn run(host: &Host) -> io::Result<Vec<u8>> {
        Ok(host
            .command("/nonexistent/prog")
            .run()
            .into_result()?
            .stdout_bytes())
    }
    let error = run(&host()).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
    assert_eq!(
        error.to_string(),
        "the helper was not spawned: spawn failed: /nonexistent/prog: NotFound: \
         No such file or directory (os error 2)"
    );
}

#[test]
fn a_non_zero_exit_is_ok_with_its_stdout() {
    let outcome = host()
        .shell("printf 'partial\\n\\377'; exit 3")
        .run()
        .into_result()
        .unwrap();
    assert_eq!(outcome.record.state, State::FailedLocal);
    assert_eq!(outcome.exit(), Exit::Code(3));
    assert_eq!(outcome.stdout_bytes(), b"partial\n\xff");
}
