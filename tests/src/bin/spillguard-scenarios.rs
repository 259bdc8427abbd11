//! `spillguard-scenarios`: runs the scenario catalogue on the chosen
//! runtimes, prints a table of the measured facts, the failed expectations
//! and the differences between the runtimes' records, and exits non-zero on
//! any of them. Run it with `--help`.

use std::io::Write as _;
use std::process::ExitCode;

use spillguard_tests::report::run_all;
use spillguard_tests::{Environment, Runtime, catalog};

const USAGE: &str = "\
usage: spillguard-scenarios [--runtime NAME]... [--scenario NAME]... [--json] [--list]

Runs the scenario suite (S1-S9) on real processes through each runtime's
adapter, checks every expectation, and compares the call records across
runtimes after normalising pids, wall-clock times, timings and the byte
counts a scenario declares timing-dependent. Every run writes a
hash-chained audit log, verified offline against its anchor and compared
with each record's lifecycle (S10, the `audit` column).

  --runtime NAME   a runtime to run (repeatable, or comma-separated);
                   default: every runtime with a driver
  --scenario NAME  a scenario to run, by name or id such as S7 (repeatable);
                   default: all
  --json           print the report as one JSON document instead of a table
  --list           list the runtimes and scenarios, and exit
  --help           this text

Exit status: 0 when every expectation held and the records agree, 1 when
not, 2 for a bad command line. The test helper is looked up next to this
binary (spillguard-test-helper).
";

#[derive(Debug, Default)]
struct Args {
    runtimes: Vec<Runtime>,
    scenarios: Vec<String>,
    json: bool,
    list: bool,
    help: bool,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--runtime" => {
                for name in value()?.split(',').filter(|n| !n.is_empty()) {
                    let runtime = Runtime::from_name(name).ok_or_else(|| {
                        format!(
                            "unknown runtime {name:?} (runtimes with a driver: {})",
                            names(Runtime::ALL)
                        )
                    })?;
                    if !parsed.runtimes.contains(&runtime) {
                        parsed.runtimes.push(runtime);
                    }
                }
            }
            "--scenario" => parsed.scenarios.push(value()?),
            "--json" => parsed.json = true,
            "--list" => parsed.list = true,
            "--help" | "-h" => parsed.help = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if parsed.runtimes.is_empty() {
        parsed.runtimes = Runtime::ALL.to_vec();
    }
    Ok(parsed)
}

fn names(runtimes: &[Runtime]) -> String {
    runtimes
        .iter()
        .map(|r| r.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(problem) => {
            eprintln!("spillguard-scenarios: {problem} (try --help)");
            return ExitCode::from(2);
        }
    };
    if args.help {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let all = catalog::all();
    if args.list {
        println!("runtimes: {}", names(Runtime::ALL));
        for s in &all {
            println!("{:<4} {}  ({})", s.id, s.name, s.summary);
        }
        return ExitCode::SUCCESS;
    }
    let mut scenarios = Vec::new();
    for wanted in &args.scenarios {
        match all
            .iter()
            .find(|s| s.name == wanted || s.id.eq_ignore_ascii_case(wanted))
        {
            Some(s) => scenarios.push(s.clone()),
            None => {
                eprintln!("spillguard-scenarios: unknown scenario {wanted:?} (try --list)");
                return ExitCode::from(2);
            }
        }
    }
    if scenarios.is_empty() {
        scenarios = all;
    }
    let env = match Environment::beside_current_exe() {
        Ok(env) if env.test_helper.is_file() => env,
        Ok(env) => {
            eprintln!(
                "spillguard-scenarios: the test helper {} is missing; build it with \
                 `cargo build -p spillguard-tests --bins`",
                env.test_helper.display()
            );
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("spillguard-scenarios: cannot locate this executable: {error}");
            return ExitCode::from(2);
        }
    };

    let report = run_all(&scenarios, &args.runtimes, &env, |scenario, runtime| {
        eprintln!("running {} {} on {runtime}", scenario.id, scenario.name);
    });
    let text = if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(error) => {
                eprintln!("spillguard-scenarios: cannot write the report: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        report.to_text()
    };
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
