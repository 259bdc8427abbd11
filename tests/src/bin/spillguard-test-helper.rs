//! `spillguard-test-helper`: a stand-in for a chatty helper process.
//!
//! Scenario tests and benchmarks run it to get an exact, chosen amount of
//! stderr (floods, one giant line, invalid UTF-8, a character split across
//! two writes), a structured result on stdout, a chosen exit status, a
//! helper that ignores SIGTERM, and a grandchild that keeps stderr open after
//! the direct child has exited. It does no external work: no network, no
//! files. Run it with `--help` for the flags.
//!
//! Actions happen in this order: giant line, invalid UTF-8, split character,
//! flood, stdout outputs, grandchild spawn, sleep (with its stderr ticker),
//! stdin approval wait, exit.
//!
//! A write error on stderr or stdout (`EPIPE` once the reader is gone) is not
//! fatal: further writes to that stream are skipped and the helper still
//! exits with the chosen code.

use std::ffi::OsString;
use std::io::{self, BufRead, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

const PROGRAM: &str = "spillguard-test-helper";

const USAGE: &str = "\
usage: spillguard-test-helper [FLAGS]

Simulates a chatty helper process. SIZE is an integer with an optional
K, M or G suffix (KiB, MiB, GiB), e.g. 64K or 1G. MS is milliseconds.

  --stderr-bytes SIZE         write exactly SIZE bytes of stderr: repeated
                              lines of --line text, the last one possibly cut
                              (default 0)
  --line TEXT                 text of each flood line (default
                              helper-diagnostic); a newline follows each line
  --chunk SIZE                bytes per write call (default 64K)
  --giant-line SIZE           before the flood, write one line of SIZE bytes
                              of `x` followed by a newline
  --invalid-utf8              before the flood, write
                              b\"bad:\\xff\\xfe\\xc3(\\xe2\\x82 end\\n\"
  --split-char                before the flood, write b\"split:\\xe2\\x82\", wait
                              20 ms, then write b\"\\xac done\\n\" (a euro sign
                              split across two writes)
  --forever                   flood stderr until the reader goes away
                              (ignores --stderr-bytes)
  --stdout-bytes SIZE         write exactly SIZE bytes to stdout: `o` bytes,
                              the last byte a newline
  --stdout-json TEXT          write TEXT and a newline to stdout
  --sleep-ms MS               sleep MS before the stdin wait and exit
  --stderr-during-sleep-ms MS while sleeping (and while waiting on stdin),
                              write one --line line every MS, the first at the
                              start of the sleep
  --wait-stdin-line           read one line from stdin: `approved` exits at
                              once with the --exit code, anything else or EOF
                              exits with 3
  --grandchild-hold-ms MS     spawn a grandchild in the same process group
                              that inherits stderr and holds it open for MS,
                              writing `grandchild-diagnostic` every 50 ms; the
                              helper does not wait for it
  --ignore-sigterm            SIGTERM does not end the helper
  --write-after-sigterm SIZE  on each SIGTERM, write SIZE bytes of
                              `after-sigterm` lines, then exit with 143 unless
                              --ignore-sigterm is also given
  --exit CODE                 exit code, 0 to 255 (default 0)
  --help                      print this help and exit

Order: giant line, invalid UTF-8, split character, flood, stdout outputs,
grandchild, sleep, stdin wait, exit. Exit codes: the --exit code; 2 for a bad
command line; 3 when stdin did not say `approved`; 143 after SIGTERM with
--write-after-sigterm; 1 when SIGTERM handling or the grandchild could not
be set up.
";

const INVALID_UTF8: &[u8] = b"bad:\xff\xfe\xc3(\xe2\x82 end\n";
const SPLIT_CHAR_FIRST: &[u8] = b"split:\xe2\x82";
const SPLIT_CHAR_SECOND: &[u8] = b"\xac done\n";
const SPLIT_CHAR_PAUSE: Duration = Duration::from_millis(20);
const GRANDCHILD_LINE: &[u8] = b"grandchild-diagnostic\n";
const GRANDCHILD_PERIOD: Duration = Duration::from_millis(50);
const AFTER_SIGTERM_LINE: &[u8] = b"after-sigterm\n";
/// How often a pending SIGTERM is looked at while the helper is idle.
const SIGNAL_POLL: Duration = Duration::from_millis(5);

const EXIT_USAGE: i32 = 2;
const EXIT_NOT_APPROVED: i32 = 3;
const EXIT_AFTER_SIGTERM: i32 = 143;
const EXIT_SETUP_FAILED: i32 = 1;

/// Everything the command line asks for.
#[derive(Debug)]
struct Options {
    stderr_bytes: u64,
    line: Vec<u8>,
    chunk: usize,
    giant_line: Option<u64>,
    invalid_utf8: bool,
    split_char: bool,
    forever: bool,
    stdout_bytes: u64,
    stdout_json: Option<Vec<u8>>,
    sleep: Duration,
    stderr_during_sleep: Option<Duration>,
    wait_stdin_line: bool,
    grandchild_hold: Option<Duration>,
    ignore_sigterm: bool,
    write_after_sigterm: Option<u64>,
    exit_code: i32,
    help: bool,
    as_grandchild: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            stderr_bytes: 0,
            line: b"helper-diagnostic".to_vec(),
            chunk: 64 * 1024,
            giant_line: None,
            invalid_utf8: false,
            split_char: false,
            forever: false,
            stdout_bytes: 0,
            stdout_json: None,
            sleep: Duration::ZERO,
            stderr_during_sleep: None,
            wait_stdin_line: false,
            grandchild_hold: None,
            ignore_sigterm: false,
            write_after_sigterm: None,
            exit_code: 0,
            help: false,
            as_grandchild: None,
        }
    }
}

/// A command line that cannot be run; the message names the flag.
#[derive(Debug)]
struct UsageError(String);

fn parse_args(args: impl IntoIterator<Item = OsString>) -> Result<Options, UsageError> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let Some(arg) = arg.to_str() else {
            return Err(UsageError(format!(
                "unknown flag {:?}",
                arg.to_string_lossy()
            )));
        };
        let (flag, inline_value) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(OsString::from(value))),
            _ => (arg, None),
        };
        let flag = flag.to_owned();
        if inline_value.is_some() && !takes_value(&flag) {
            return Err(UsageError(format!("{flag} takes no value")));
        }
        let mut value = || -> Result<OsString, UsageError> {
            match inline_value.clone().or_else(|| args.next()) {
                Some(value) => Ok(value),
                None => Err(UsageError(format!("{flag} needs a value"))),
            }
        };
        match flag.as_str() {
            "--stderr-bytes" => options.stderr_bytes = parse_size(&flag, &value()?)?,
            "--line" => options.line = value()?.as_bytes().to_vec(),
            "--chunk" => {
                let chunk = parse_size(&flag, &value()?)?;
                options.chunk = usize::try_from(chunk)
                    .ok()
                    .filter(|&chunk| chunk > 0)
                    .ok_or_else(|| {
                        UsageError(format!("{flag}: chunk must be between 1 and usize::MAX"))
                    })?;
            }
            "--giant-line" => options.giant_line = Some(parse_size(&flag, &value()?)?),
            "--invalid-utf8" => options.invalid_utf8 = true,
            "--split-char" => options.split_char = true,
            "--forever" => options.forever = true,
            "--stdout-bytes" => options.stdout_bytes = parse_size(&flag, &value()?)?,
            "--stdout-json" => options.stdout_json = Some(value()?.as_bytes().to_vec()),
            "--sleep-ms" => options.sleep = parse_millis(&flag, &value()?)?,
            "--stderr-during-sleep-ms" => {
                let period = parse_millis(&flag, &value()?)?;
                if period.is_zero() {
                    return Err(UsageError(format!("{flag}: the period must be at least 1")));
                }
                options.stderr_during_sleep = Some(period);
            }
            "--wait-stdin-line" => options.wait_stdin_line = true,
            "--grandchild-hold-ms" => {
                options.grandchild_hold = Some(parse_millis(&flag, &value()?)?);
            }
            "--ignore-sigterm" => options.ignore_sigterm = true,
            "--write-after-sigterm" => {
                options.write_after_sigterm = Some(parse_size(&flag, &value()?)?);
            }
            "--exit" => options.exit_code = parse_exit_code(&flag, &value()?)?,
            "--help" => options.help = true,
            "--as-grandchild" => options.as_grandchild = Some(parse_millis(&flag, &value()?)?),
            _ => return Err(UsageError(format!("unknown flag {flag}"))),
        }
    }
    Ok(options)
}

fn takes_value(flag: &str) -> bool {
    !matches!(
        flag,
        "--invalid-utf8"
            | "--split-char"
            | "--forever"
            | "--wait-stdin-line"
            | "--ignore-sigterm"
            | "--help"
    )
}

/// Parses `123`, `64K`, `16M` or `1G` (binary multiples) into a byte count.
fn parse_size(flag: &str, value: &OsString) -> Result<u64, UsageError> {
    let bad = || {
        UsageError(format!(
            "{flag}: invalid size {:?} (expected an integer with an optional K, M or G suffix)",
            value.to_string_lossy()
        ))
    };
    let text = value.to_str().ok_or_else(bad)?;
    let (digits, multiplier) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 1u64 << 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 1u64 << 30),
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(bad)
}

fn parse_millis(flag: &str, value: &OsString) -> Result<Duration, UsageError> {
    value
        .to_str()
        .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|text| text.parse::<u64>().ok())
        .map(Duration::from_millis)
        .ok_or_else(|| {
            UsageError(format!(
                "{flag}: invalid number of milliseconds {:?}",
                value.to_string_lossy()
            ))
        })
}

fn parse_exit_code(flag: &str, value: &OsString) -> Result<i32, UsageError> {
    value
        .to_str()
        .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|text| text.parse::<u8>().ok())
        .map(i32::from)
        .ok_or_else(|| {
            UsageError(format!(
                "{flag}: invalid exit code {:?} (expected 0 to 255)",
                value.to_string_lossy()
            ))
        })
}

/// One output stream that stops being written to once its reader is gone.
#[derive(Debug)]
struct Sink<W: Write> {
    writer: W,
    gone: bool,
}

impl<W: Write> Sink<W> {
    fn new(writer: W) -> Self {
        Sink {
            writer,
            gone: false,
        }
    }

    /// One write call; returns how many bytes were taken (0 once gone).
    fn write_once(&mut self, bytes: &[u8]) -> usize {
        while !self.gone && !bytes.is_empty() {
            match self.writer.write(bytes) {
                Ok(0) => self.gone = true,
                Ok(n) => return n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.gone = true,
            }
        }
        0
    }

    fn write_all(&mut self, mut bytes: &[u8]) {
        while !self.gone && !bytes.is_empty() {
            let n = self.write_once(bytes);
            bytes = &bytes[n..];
        }
    }

    fn flush(&mut self) {
        if !self.gone && self.writer.flush().is_err() {
            self.gone = true;
        }
    }
}

/// A repeated byte pattern, cut at any byte count, written in large calls.
///
/// The buffer is built once and holds one write's worth of bytes plus one
/// extra repetition, so a write can start at any offset within the
/// repetition and the text stays continuous from one write to the next.
#[derive(Debug)]
struct Pattern {
    buffer: Vec<u8>,
    unit_len: u64,
    /// Bytes per write call; never more than the total to write.
    chunk: usize,
    /// Bytes to write in all, or `None` for forever.
    total: Option<u64>,
}

impl Pattern {
    /// `unit` must not be empty.
    fn new(unit: &[u8], chunk: usize, total: Option<u64>) -> Self {
        let chunk = match total {
            Some(total) => usize::try_from(total).map_or(chunk, |total| total.min(chunk)),
            None => chunk,
        };
        let buffer = unit
            .iter()
            .copied()
            .cycle()
            .take(chunk.saturating_add(unit.len()))
            .collect();
        Pattern {
            buffer,
            unit_len: unit.len() as u64,
            chunk,
            total,
        }
    }

    /// `text` followed by a newline, repeated.
    fn lines(text: &[u8], chunk: usize, total: Option<u64>) -> Self {
        let mut line = text.to_vec();
        line.push(b'\n');
        Pattern::new(&line, chunk, total)
    }

    /// Writes the pattern, calling `between` with the sink after each write.
    fn write<W: Write>(&self, out: &mut Sink<W>, mut between: impl FnMut(&mut Sink<W>)) {
        let mut written: u64 = 0;
        while !out.gone {
            let remaining = match self.total {
                Some(total) if written >= total => break,
                Some(total) => total - written,
                None => u64::MAX,
            };
            let len = usize::try_from(remaining).map_or(self.chunk, |r| r.min(self.chunk));
            // Below `unit_len`, which came from a usize.
            let offset = usize::try_from(written % self.unit_len).unwrap_or(0);
            written += out.write_once(&self.buffer[offset..offset + len]) as u64;
            between(out);
        }
    }
}

/// What SIGTERM does when the helper handles it.
#[derive(Debug)]
struct Signals {
    sigterm: Option<Arc<AtomicBool>>,
    ignore: bool,
    after_sigterm: Option<Pattern>,
}

impl Signals {
    fn install(options: &Options) -> io::Result<Self> {
        let handled = options.ignore_sigterm || options.write_after_sigterm.is_some();
        let sigterm = if handled {
            let flag = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&flag))?;
            Some(flag)
        } else {
            None
        };
        let after_sigterm = options
            .write_after_sigterm
            .map(|bytes| Pattern::new(AFTER_SIGTERM_LINE, options.chunk, Some(bytes)));
        Ok(Signals {
            sigterm,
            ignore: options.ignore_sigterm,
            after_sigterm,
        })
    }

    fn installed(&self) -> bool {
        self.sigterm.is_some()
    }

    /// Acts on a SIGTERM received since the last check.
    fn check(&mut self, stderr: &mut Sink<impl Write>) {
        let received = self
            .sigterm
            .as_ref()
            .is_some_and(|flag| flag.swap(false, Ordering::SeqCst));
        if !received {
            return;
        }
        if let Some(pattern) = &self.after_sigterm {
            pattern.write(stderr, |_| {});
        }
        if !self.ignore {
            stderr.flush();
            std::process::exit(EXIT_AFTER_SIGTERM);
        }
    }
}

/// Writes one line every `period`, on a schedule fixed at the start.
#[derive(Debug)]
struct Ticker<'a> {
    line: &'a [u8],
    period: Duration,
    next: Instant,
}

impl Ticker<'_> {
    /// Writes the lines scheduled up to `now`, and before `deadline` if any.
    fn due(&mut self, now: Instant, deadline: Option<Instant>, stderr: &mut Sink<impl Write>) {
        while self.next <= now && deadline.is_none_or(|deadline| self.next < deadline) {
            stderr.write_all(self.line);
            self.next += self.period;
        }
    }
}

/// Waits until `deadline` (or for the stdin line), ticking and watching
/// for SIGTERM meanwhile. Returns the stdin line when one was awaited.
fn idle(
    deadline: Option<Instant>,
    stdin: Option<&Receiver<Option<Vec<u8>>>>,
    ticker: &mut Option<Ticker<'_>>,
    signals: &mut Signals,
    stderr: &mut Sink<impl Write>,
) -> Option<Option<Vec<u8>>> {
    loop {
        signals.check(stderr);
        let now = Instant::now();
        if let Some(ticker) = ticker.as_mut() {
            ticker.due(now, deadline, stderr);
        }
        if deadline.is_some_and(|deadline| now >= deadline) {
            return None;
        }
        let mut wake = deadline;
        if let Some(ticker) = ticker.as_ref() {
            wake = Some(wake.map_or(ticker.next, |w| w.min(ticker.next)));
        }
        if signals.installed() {
            let poll = now + SIGNAL_POLL;
            wake = Some(wake.map_or(poll, |w| w.min(poll)));
        }
        let pause = wake.map(|w| w.saturating_duration_since(now));
        match (stdin, pause) {
            (Some(stdin), Some(pause)) => match stdin.recv_timeout(pause) {
                Ok(line) => return Some(line),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Some(None),
            },
            (Some(stdin), None) => return Some(stdin.recv().unwrap_or(None)),
            (None, Some(pause)) => thread::sleep(pause),
            (None, None) => return None,
        }
    }
}

/// Reads one line from stdin on its own thread, so SIGTERM and the ticker
/// are still served while the helper waits.
fn read_stdin_line() -> Receiver<Option<Vec<u8>>> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut line = Vec::new();
        let line = match io::stdin().lock().read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        };
        let _ = sender.send(line);
    });
    receiver
}

fn is_approved(line: &[u8]) -> bool {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line == b"approved"
}

fn run_grandchild(hold: Duration) -> i32 {
    let mut stderr = Sink::new(io::stderr().lock());
    let start = Instant::now();
    let mut ticker = Some(Ticker {
        line: GRANDCHILD_LINE,
        period: GRANDCHILD_PERIOD,
        next: start,
    });
    let mut signals = Signals {
        sigterm: None,
        ignore: false,
        after_sigterm: None,
    };
    idle(
        Some(start + hold),
        None,
        &mut ticker,
        &mut signals,
        &mut stderr,
    );
    0
}

fn spawn_grandchild(hold: Duration) -> io::Result<()> {
    let exe = std::env::current_exe()?;
    let _grandchild = Command::new(exe)
        .arg("--as-grandchild")
        .arg(hold.as_millis().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()?;
    Ok(())
}

fn run(options: &Options) -> i32 {
    let mut stderr = Sink::new(io::stderr().lock());
    let mut signals = match Signals::install(options) {
        Ok(signals) => signals,
        Err(error) => {
            stderr.write_all(format!("{PROGRAM}: cannot handle SIGTERM: {error}\n").as_bytes());
            return EXIT_SETUP_FAILED;
        }
    };

    if let Some(bytes) = options.giant_line {
        let giant = Pattern::new(b"x", options.chunk, Some(bytes));
        giant.write(&mut stderr, |stderr| signals.check(stderr));
        stderr.write_all(b"\n");
    }
    if options.invalid_utf8 {
        stderr.write_all(INVALID_UTF8);
    }
    if options.split_char {
        stderr.write_all(SPLIT_CHAR_FIRST);
        stderr.flush();
        thread::sleep(SPLIT_CHAR_PAUSE);
        stderr.write_all(SPLIT_CHAR_SECOND);
    }
    let total = (!options.forever).then_some(options.stderr_bytes);
    let flood = Pattern::lines(&options.line, options.chunk, total);
    flood.write(&mut stderr, |stderr| signals.check(stderr));
    drop(flood);
    stderr.flush();

    {
        let mut stdout = Sink::new(io::stdout().lock());
        if options.stdout_bytes > 0 {
            let body = Pattern::new(b"o", options.chunk, Some(options.stdout_bytes - 1));
            body.write(&mut stdout, |_| {});
            stdout.write_all(b"\n");
        }
        if let Some(json) = &options.stdout_json {
            stdout.write_all(json);
            stdout.write_all(b"\n");
        }
        stdout.flush();
    }

    if let Some(hold) = options.grandchild_hold
        && let Err(error) = spawn_grandchild(hold)
    {
        let message = format!("{PROGRAM}: cannot spawn the grandchild: {error}\n");
        stderr.write_all(message.as_bytes());
        return EXIT_SETUP_FAILED;
    }

    let mut line = options.line.clone();
    line.push(b'\n');
    let start = Instant::now();
    let mut ticker = options.stderr_during_sleep.map(|period| Ticker {
        line: &line,
        period,
        next: start,
    });
    if !options.sleep.is_zero() {
        idle(
            Some(start + options.sleep),
            None,
            &mut ticker,
            &mut signals,
            &mut stderr,
        );
    }

    if options.wait_stdin_line {
        let receiver = read_stdin_line();
        let answer = idle(
            None,
            Some(&receiver),
            &mut ticker,
            &mut signals,
            &mut stderr,
        );
        if !answer.flatten().is_some_and(|line| is_approved(&line)) {
            return EXIT_NOT_APPROVED;
        }
    }
    signals.check(&mut stderr);
    options.exit_code
}

fn main() {
    let code = match parse_args(std::env::args_os().skip(1)) {
        Ok(options) if options.help => {
            let mut stdout = Sink::new(io::stdout().lock());
            stdout.write_all(USAGE.as_bytes());
            stdout.flush();
            0
        }
        Ok(options) => match options.as_grandchild {
            Some(hold) => run_grandchild(hold),
            None => run(&options),
        },
        Err(UsageError(message)) => {
            let mut stderr = Sink::new(io::stderr().lock());
            stderr.write_all(format!("{PROGRAM}: {message}\n").as_bytes());
            EXIT_USAGE
        }
    };
    std::process::exit(code);
}
