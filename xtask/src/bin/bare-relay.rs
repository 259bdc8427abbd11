//! `bare-relay PROGRAM [ARGS...]`: the floor any relay process pays, for
//! `cargo xtask bench`'s socketpair round trips: PROGRAM's stdin and stdout
//! are pipes, and two threads copy this program's stdin to the one and the
//! other to this program's stdout, a blocking read and a write per chunk.
//! No budgets, no capture, no record: what is left of a relay is its two
//! hops (a thread woken in each direction).

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let Some(bytes) = buf.get(..n) else { return };
                if to.write_all(bytes).and_then(|()| to.flush()).is_err() {
                    return;
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next() else {
        eprintln!("usage: bare-relay PROGRAM [ARGS...]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(&program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            eprintln!(
                "bare-relay: cannot run {}: {error}",
                program.to_string_lossy()
            );
            return ExitCode::from(127);
        }
    };
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::FAILURE;
    };
    std::thread::spawn(move || copy(std::io::stdin().lock(), stdin));
    copy(stdout, std::io::stdout().lock());
    match child.wait() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}
