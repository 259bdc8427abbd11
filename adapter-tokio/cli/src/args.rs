//! The command line, declared with clap's derive: four commands (`run`,
//! `stdio`, `audit verify|sessions|activity`, `mcp`, with `mcp --check`),
//! their flags and their help.
//!
//! Usage errors are one line each (see [`usage_message`]): a caller that
//! scripts `spillguard` reads one sentence naming the problem, not clap's
//! multi-line report.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Args, Parser, Subcommand};
use spillguard_std::proto::{
    Confinement, LIMIT_KINDS, LimitKind, LimitUnit, Limits, Network, RestartMode, RestartSettings,
    RestartTable, Retain, Sandbox,
};

/// The usage lines shown at the top of `spillguard --help`.
const USAGE: &str = "\
spillguard run [OPTIONS] -- PROGRAM [ARGS...]
       spillguard stdio [OPTIONS] -- PROGRAM [ARGS...]
       spillguard audit verify FILE [--anchor ANCHOR | --anchor-file F] [--key-file F]
                                    [--expect FILE] [--checkpoint F --public-key K] [--json]
       spillguard audit sessions FILE [--key-file F] [--json]
       spillguard audit activity FILE [--key-file F] [--json]
       spillguard audit keygen NAME --out PREFIX
       spillguard audit checkpoint FILE --key-file PREFIX.key [--audit-key-file F]
       spillguard audit prove FILE (--index N | --from M) [--audit-key-file F] [--json]
       spillguard mcp --tools FILE [--audit FILE] [--on-disconnect finish|cancel]
       spillguard mcp --tools FILE --check
       spillguard --help | --version";

/// How `run` ends, with examples (a macro, so that `concat!` can join the
/// help texts at compile time).
macro_rules! run_after_help {
    () => {
        "\
Exit status of `run`: 0 when a record was printed, whatever the helper did
(see `state`, `exit_status` and `exit_signal`); 2 on bad input (including an
audit log that cannot be opened, or whose lock another writer held for all
of --audit-wait-ms: then nothing ran); 3 when the record was printed but an
audit event or the anchor could not be written (each error on stderr,
counted in `audit_failures`), or when opening the audit log could not
write it (a full disk: nothing ran, and the log was cut back to its last
whole record, so it verifies as before); 4 when a limit or sandbox rule
cannot be enforced on this machine (nothing ran; one line on stderr says
which and why; --allow-degraded runs it and lists it in `not_enforced`);
1 if the record could not be written.
SIGINT, SIGTERM and SIGHUP cancel the helper (TERM, grace, KILL) and the
record is still printed. The helper's stdin is /dev/null (`spillguard stdio`
streams stdin and stdout).

Examples:
  # A helper that floods stderr, stopped after half a second:
  spillguard run --deadline-ms 500 -- sh -c 'yes helper-diagnostic 1>&2'
  # Keep the first and the last bytes, and append the call to an audit log:
  spillguard run --retain head-and-tail --audit calls.log \\
      --anchor-out calls.anchor -- ./helper --flag
  # Budgets from a file, one of them overridden:
  spillguard run --config spillguard.toml --excerpt-bytes 1024 -- ./helper"
    };
}

/// How `stdio` ends, with examples.
macro_rules! stdio_after_help {
    () => {
        "\
`stdio` stands between an MCP host and a stdio server: this program's stdin
goes to PROGRAM's stdin and PROGRAM's stdout to this program's stdout, byte
for byte, as soon as they arrive, whatever they are (pipes, sockets, files,
terminals, /dev/null). PROGRAM's stderr is captured within the budgets and,
unless --forward-stderr, never written anywhere while it runs. The end of
this program's stdin closes PROGRAM's stdin; it then has
--stdin-close-grace-ms to exit before its group gets TERM, the grace, KILL.
SIGINT, SIGTERM and SIGHUP run the same sequence. A PROGRAM that stops
reading does not hold it up: once it has taken nothing for 1 s with the
queue full (4 MiB), or for 250 ms after the client's end, what it did not
take is dropped and counted (`stdin_bytes_undelivered`; with --mcp whole
messages only, each request answered with an error). With --mcp, only whole JSON-RPC
messages (or batches) reach stdout, and requests still pending when PROGRAM
exits (or cannot start) are answered with a JSON-RPC error (code -32000)
carrying its exit status and stderr excerpt, a batch's requests in one array. At the end the call record and
`stderr_excerpt` are written as one line of JSON to --record FILE
(appended), or else to this program's stderr.

Exit status of `stdio`: PROGRAM's exit code; 128+N if signal N ended it;
127 if it could not be spawned (a record is still written); 2 on bad input;
1 if it ended in any other way without an exit status, or if an audit event
or the anchor could not be written (each error on stderr, counted in
`audit_failures`); 3 when opening the audit log could not write it (a full
disk: nothing ran, and the log verifies as before).

Example, in an MCP host's configuration:
  \"command\": \"spillguard\", \"args\": [\"stdio\", \"--mcp\", \"--\", \"npx\", \"server\"]"
    };
}

/// How `audit` ends, with examples.
macro_rules! audit_after_help {
    () => {
        "\
Exit status of `audit`:
  0  ok: the log verified against the anchor (and matches --expect)
  1  the output could not be written
  2  bad input: usage, or a file, key or anchor that cannot be read (FILE,
     the anchor file and the --expect file must be regular files)
  3  unanchored: every record intact, but no anchor vouches for the end
  4  torn tail: the last record was cut by a crash
  5  tampered: a record was modified, moved, inserted, deleted or cut off
  6  malformed: an intact record that cannot be understood
  7  wrong key: the key given is not the log's
  8  bad anchor: the anchor's MAC does not match it
  9  the log verified, but differs from the lifecycles in --expect
 10  the chain verified, but the log is sealed (or the anchor MACed) and
     no --key-file was given: its seals were not checked
 11  --checkpoint does not open with --public-key (another key signed it,
     or it was changed); a log that does not match it is 5, one it
     vouches for whole is 0, one appended to since is 3
`sessions` and `activity` exit 0 for a log that is ok, unanchored or torn at
the tail, and with the verdict's status otherwise (nothing is shown).
Records of any earlier format version are read; a record written by a newer
release is verified as a link of the chain but not read: `verify` says how
many (still exit 0 when ok), the views leave them out and say so on stderr.
The log is streamed, in memory that does not grow with it; `activity`
reads it twice (it verifies the whole log, then prints its rows).

Examples:
  spillguard audit verify calls.log --anchor-file calls.anchor
  spillguard audit verify calls.log --anchor-file calls.anchor --expect records.jsonl
  spillguard audit activity calls.log --json
  spillguard audit sessions calls.log --key-file calls.key"
    };
}

/// How `mcp` ends.
macro_rules! mcp_after_help {
    () => {
        "\
`mcp` serves the tools of FILE over stdio, as an MCP server: a tools/call
checks its arguments against the tool's parameters, asks for approval
through elicitation/create when the tool requires it (a client without that
capability is refused, never approved silently), runs the tool's command
(no shell) with its stderr bounded, and answers with the result as text
(or one paragraph: state, exit status, stderr excerpt) and the call record
in structuredContent (state, exit_status, result_kind, result,
stderr_excerpt, counters). A value that would make an argument before the
command's `--` begin with `-` is refused unless its parameter says
allow_leading_dash = true. A secret parameter (secret = true, or a string
parameter named as a credential key: password, db_password, api_key, ...)
reaches the command and reads [redacted: secret-parameter] on the card, in
the audit log, the record and the result. Every request is answered
(-32700, -32600, -32602 for what cannot be served).
At most --max-running tool calls run at once; an approved call beyond that
waits in `queued` (first come first served; cards are asked at once) and
ends `queue_expired`, never run, after --queue-timeout-ms.
stdout carries JSON-RPC messages only; diagnostics go to stderr. When stdin
ends, live calls get the --on-disconnect policy, every record is written,
then the server exits 0 (2 on bad input; 1 if the transport fails).

`mcp --check` loads the tools file, checks every rule (every error names
its field, e.g. `tools.remote_uptime.params.host.pattern`) and prints
{\"tools\": [{name, description, inputSchema, outputSchema}, ...],
\"bridge\": {max_running, queue_timeout_ms}} as one line of JSON (a secret
parameter has \"writeOnly\": true), with a warning on stderr for each
program not found.
Exit status: 0 when the file is valid; 2 when it cannot be read or breaks a
rule (one line on stderr); 1 if the output could not be written.

Examples:
  spillguard mcp --tools tools.toml --check
  spillguard mcp --tools tools.toml --audit calls.log
  # in an MCP client's configuration:
  \"mcpServers\": {\"ops\": {\"command\": \"spillguard\",
    \"args\": [\"mcp\", \"--tools\", \"/etc/spillguard/tools.toml\"]}}"
    };
}

/// What the commands do, at the top of the whole help's closing part.
macro_rules! overview {
    () => {
        "\
`run` runs PROGRAM (no shell) in its own process group, drains its stdout
and stderr continuously, and prints the call record as one line of JSON on
stdout, with `stderr_excerpt` (the retained stderr, truncation marker first,
clamped to the excerpt budget) and `stdout` (the helper's stdout, bounded).
The helper's own output never reaches this program's stdout or stderr.

`audit verify` checks a log offline and prints the verdict as one line
(`--json`: one JSON object), then a line per finding of `--expect` and
`--checkpoint`. Only an anchor (as `run --anchor-out` keeps it) or a
signed checkpoint of every record can vouch for the end of the log:
without one the best verdict is `unanchored`. `audit sessions` (one line
per session) and `audit activity` (one line per call) print views
computed from the log alone. `audit keygen`, `audit checkpoint` and
`audit prove` make keys, signed checkpoints and proofs that Go's
sumdb/note and sumdb/tlog check.

`mcp` serves a tools file (each tool a command with typed parameters) as an
MCP stdio server, with approvals through elicitation; `mcp --check` loads
and checks the file and prints its tools.

Usage errors exit with status 2 and one line on stderr."
    };
}

/// `spillguard`: run a helper process with bounded, counted stderr.
#[derive(Debug, Parser)]
#[command(
    name = "spillguard",
    version,
    about = "spillguard - run a helper process with bounded, counted stderr",
    override_usage = USAGE,
    after_help = concat!(
        overview!(),
        "\n\n",
        run_after_help!(),
        "\n\n",
        stdio_after_help!(),
        "\n\n",
        audit_after_help!(),
        "\n\n",
        mcp_after_help!(),
        "\n\n",
        "Install (today from a checkout: cargo install --path adapter-tokio/cli; uvx,\n\
         npx and cargo install spillguard-cli once a release is published) and the\n\
         configuration entry for each MCP host (Claude Code, Claude Desktop, Cursor,\n\
         VS Code, Codex): the package README, adapter-tokio/cli/README.md."
    ),
    flatten_help = true,
    max_term_width = 100,
    arg_required_else_help = false,
    subcommand_required = true,
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run PROGRAM (no shell) in its own process group and print its call
    /// record as one line of JSON
    #[command(
        override_usage = "spillguard run [OPTIONS] -- PROGRAM [ARGS...]",
        after_help = run_after_help!(),
        args_override_self = true,
    )]
    Run(RunArgs),
    /// Guard an MCP stdio server: forward stdin and stdout, bound its
    /// stderr, write its call record at the end
    #[command(
        override_usage = "spillguard stdio [OPTIONS] -- PROGRAM [ARGS...]",
        after_help = stdio_after_help!(),
        args_override_self = true,
    )]
    Stdio(StdioArgs),
    /// Read an audit log offline: its verdict, or a view of its calls
    #[command(
        subcommand,
        after_help = audit_after_help!(),
        flatten_help = true,
        arg_required_else_help = false,
        subcommand_required = true,
    )]
    Audit(AuditCommand),
    /// Serve the tools of a tools file as an MCP stdio server (or, with
    /// --check, check the file and print its tools)
    #[command(
        override_usage = "spillguard mcp --tools FILE [OPTIONS]\n       spillguard mcp --tools FILE --check",
        after_help = mcp_after_help!(),
    )]
    Mcp(McpArgs),
}

/// The flags of `spillguard mcp`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct McpArgs {
    /// The tools file: a TOML file with `[tools.NAME]` tables and an
    /// optional `[helper_output]` table
    #[arg(long, value_name = "FILE", required = true)]
    pub tools: PathBuf,
    /// Load and check the file, print the tools and exit
    #[arg(long)]
    pub check: bool,
    /// What a call still live when the client goes away (stdin ends)
    /// becomes: `finish` lets it run to its end, `cancel` stops it (TERM,
    /// grace, KILL); either way its record is written before the server
    /// exits
    #[arg(long, value_name = "POLICY", value_enum, default_value_t = OnDisconnect::Finish)]
    pub on_disconnect: OnDisconnect,
    /// At most N tool calls run at once; the others wait in `queued`, in
    /// order, after their approval (overrides `[bridge] max_running`)
    /// [default: twice the CPUs]
    #[arg(long, value_name = "N", value_parser = max_running, allow_hyphen_values = true)]
    pub max_running: Option<usize>,
    /// How long an approved call may wait in `queued` before it ends
    /// `queue_expired`, never run (overrides `[bridge] queue_timeout_ms`)
    /// [default: 60000]
    #[arg(long, value_name = "MS", value_parser = queue_timeout_ms, allow_hyphen_values = true)]
    pub queue_timeout_ms: Option<u64>,
    /// The audit log.
    #[command(flatten)]
    pub audit: AuditFlags,
    /// Append OpenTelemetry OTLP JSON to FILE: a span per request (a
    /// child of the traceparent in its params._meta), a tools/call's call
    /// span and approval wait under it, and each call's stderr excerpt as
    /// a log record, one export request per line. FILE is a regular file
    /// or a device such as /dev/null (a FIFO or a socket is refused); a
    /// write that fails is cut back to the last whole line
    #[arg(long, value_name = "FILE")]
    pub otel_file: Option<PathBuf>,
}

/// `--on-disconnect`: what a live call becomes when the client goes away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDisconnect {
    /// Let the call run to its end.
    #[default]
    Finish,
    /// Stop the call.
    Cancel,
}

impl McpArgs {
    /// What clap cannot say on its own: the flags that need `--audit`.
    pub fn check(&self) -> Result<(), UsageError> {
        self.audit.check()
    }
}

/// The flags and the program of `spillguard run`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct RunArgs {
    /// Which stderr bytes to keep once the budget is full: the most recent
    /// (tail), the first (head), or a short prefix and the most recent
    /// (head-and-tail) [default: tail]
    #[arg(long, value_name = "tail|head|head-and-tail", value_parser = retain)]
    pub retain: Option<Retain>,
    /// Stderr bytes retained for the call [default: 16384]
    #[arg(long, value_name = "N", value_parser = number, allow_hyphen_values = true)]
    pub per_call_bytes: Option<u64>,
    /// Cap of the stderr excerpt in the record, marker included
    /// [default: 4096]
    #[arg(long, value_name = "N", value_parser = number, allow_hyphen_values = true)]
    pub excerpt_bytes: Option<u64>,
    /// Stop the helper (TERM, grace, KILL) N ms after it started; N is at
    /// least 1 [default: no deadline]
    #[arg(long, value_name = "N", value_parser = positive, allow_hyphen_values = true)]
    pub deadline_ms: Option<u64>,
    /// Time from TERM to KILL when the helper is stopped, in ms
    /// [default: 5000]
    #[arg(long, value_name = "N", value_parser = number, allow_hyphen_values = true)]
    pub grace_ms: Option<u64>,
    /// How long the streams may stay open after the helper exited (a
    /// descendant holding them), in ms [default: 250]
    #[arg(long, value_name = "N", value_parser = number, allow_hyphen_values = true)]
    pub drain_window_ms: Option<u64>,
    /// How the helper returns its result: `json`, a JSON value on stdout,
    /// parsed within the stdout budget and printed as `result` (what it says of
    /// the call is `result_kind`); an object
    /// with `"ok": false` or a non-null `"error"` makes the call
    /// `failed_remote` whatever the exit code [default: stdout is text]
    #[arg(long, value_name = "json", value_parser = result_mode)]
    pub result: Option<ResultMode>,
    /// Debug for this run: retain up to the configuration's
    /// `debug_ceiling_bytes` of stderr (default 1 MiB) for the next S
    /// seconds (at most 3600); the record says `debug: true`
    #[arg(long, value_name = "S", value_parser = number, allow_hyphen_values = true)]
    pub debug_for: Option<u64>,
    /// Debug on demand while the helper runs: each SIGUSR1 grants debug
    /// for S seconds (at most 3600) from then on, up to the
    /// configuration's `debug_ceiling_bytes` of stderr; the running call
    /// keeps what it retained and grows with the next bytes, and its
    /// record says `debug: true`; SIGUSR2 ends the grant (the retained
    /// stderr shrinks back to the per-call budget)
    #[arg(long, value_name = "S", value_parser = number, allow_hyphen_values = true)]
    pub debug_on_signal: Option<u64>,
    /// The call's session in the record and the audit views, to group
    /// several runs (1 to 64 of A-Z a-z 0-9 _ . : -) [default: a fresh
    /// random id, s_ and 16 hex digits; the call id is always random]
    #[arg(long, value_name = "ID", value_parser = session_id)]
    pub session_id: Option<String>,
    /// The configuration file, a TOML file with a `helper_output` table.
    #[arg(
        long,
        value_name = "FILE",
        help = "TOML file with a [helper_output] table; the flags above override it"
    )]
    pub config: Option<PathBuf>,
    /// The audit log.
    #[command(flatten)]
    pub audit: AuditFlags,
    /// Append the call as OpenTelemetry OTLP JSON to FILE: its span (a
    /// child of the TRACEPARENT this program was given, else the first of
    /// a new trace) and its stderr excerpt as a log record, one export
    /// request per line. The helper gets TRACEPARENT naming the call's
    /// span. FILE is a regular file or a device such as /dev/null (a FIFO
    /// or a socket is refused); a write that fails is cut back to the
    /// last whole line
    #[arg(long, value_name = "FILE")]
    pub otel_file: Option<PathBuf>,
    /// Limits and sandbox.
    #[command(flatten)]
    pub confine: ConfineFlags,
    /// The helper program (run without a shell) and its arguments, given
    /// after `--` or after the last flag
    #[arg(
        value_name = "PROGRAM",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        value_parser = clap::value_parser!(OsString),
    )]
    pub command: Vec<OsString>,
}

impl RunArgs {
    /// What clap cannot say on its own: the flags that need `--audit`, and
    /// an empty program name.
    pub fn check(&self) -> Result<(), UsageError> {
        if self
            .command
            .first()
            .is_none_or(|program| program.is_empty())
        {
            return Err(missing_program());
        }
        self.audit.check()
    }
}

/// Bounds on the helper's whole process tree and what it may reach
/// (`run`, `stdio`). Any of them puts the tree in a control group of its
/// own, killed as one when the call ends. A bound this machine cannot
/// enforce refuses the call before anything runs, unless
/// `--allow-degraded`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
#[command(next_help_heading = "Limits and sandbox")]
pub struct ConfineFlags {
    /// One flag per kind of limit (`--memory-max`, `--pids-max`, …).
    #[command(flatten)]
    pub limits: LimitFlags,
    /// Let the helper read and execute PATH and what is below it
    /// (repeatable); with any path given, files outside these, the
    /// --read-write paths and the system's libraries are refused
    #[arg(long, value_name = "PATH", value_parser = existing_path)]
    pub read_only: Vec<PathBuf>,
    /// Let the helper read and write PATH and what is below it
    /// (repeatable)
    #[arg(long, value_name = "PATH", value_parser = existing_path)]
    pub read_write: Vec<PathBuf>,
    /// `none`: no network at all, only a loopback of its own
    #[arg(long, value_name = "none", value_parser = network)]
    pub network: Option<Network>,
    /// The only TCP port the helper may connect to (repeatable); binding
    /// is then refused except for --bind-port
    #[arg(long, value_name = "N", value_parser = port)]
    pub connect_port: Vec<u16>,
    /// A TCP port the helper may bind (repeatable)
    #[arg(long, value_name = "N", value_parser = port)]
    pub bind_port: Vec<u16>,
    /// Require the control group that holds the whole tree (every helper
    /// gets one wherever it can be made, and the end of the call kills
    /// all of it): refuse to run where none can be made, unless
    /// --allow-degraded
    #[arg(long, conflicts_with = "no_contain_tree")]
    pub contain_tree: bool,
    /// Give the helper no control group: the end of the call signals its
    /// process group only (a descendant that left it with setsid
    /// outlives the call); not with --memory-max or --pids-max
    #[arg(long)]
    pub no_contain_tree: bool,
    /// Run even when a bound cannot be enforced here; the record lists
    /// each one in `not_enforced`
    #[arg(long)]
    pub allow_degraded: bool,
}

impl ConfineFlags {
    /// The confinement these flags ask for.
    pub fn confinement(&self) -> Confinement {
        Confinement {
            limits: self.limits.limits.clone(),
            sandbox: Sandbox {
                read_only: self.read_only.clone(),
                read_write: self.read_write.clone(),
                network: self.network.unwrap_or_default(),
                connect_ports: self.connect_port.clone(),
                bind_ports: self.bind_port.clone(),
            },
            allow_degraded: self.allow_degraded,
            contain_tree: match (self.contain_tree, self.no_contain_tree) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            },
        }
    }
}

/// The limit flags: one per kind of limit, made from the kinds' table
/// (its flag, unit and help), so a new kind is a new flag with nothing
/// written here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitFlags {
    /// The limits given.
    pub limits: Limits,
}

impl clap::FromArgMatches for LimitFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for kind in &LIMIT_KINDS {
            if let Some(&value) = matches.get_one::<u64>(kind.key) {
                kind.set(&mut self.limits, value);
            }
        }
        Ok(())
    }
}

impl clap::Args for LimitFlags {
    fn augment_args(command: clap::Command) -> clap::Command {
        LIMIT_KINDS.iter().fold(command, |command, kind| {
            let bytes = kind.unit == LimitUnit::Bytes;
            command.arg(
                clap::Arg::new(kind.key)
                    .long(kind.flag.trim_start_matches("--"))
                    .value_name(if bytes { "SIZE" } else { "N" })
                    .help(kind.help)
                    .allow_hyphen_values(!bytes)
                    .value_parser(move |value: &str| limit_value(kind, value)),
            )
        })
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

/// A limit flag's value: a size of at least one byte, or a whole number
/// of at least 1, within the kind's bounds.
fn limit_value(kind: &LimitKind, value: &str) -> Result<u64, String> {
    let n = match kind.unit {
        LimitUnit::Bytes => size(value)?,
        _ => positive_limit(value)?,
    };
    kind.check(n).map_err(|error| error.reason)?;
    Ok(n)
}

/// `--memory-max`, `--file-size-max`: a size of at least one byte.
fn size(value: &str) -> Result<u64, String> {
    match spillguard_std::proto::parse_size(value)? {
        0 => Err("0 would leave the helper nothing (leave the option out for no limit)".into()),
        n => Ok(n),
    }
}

/// A count limit of at least 1.
fn positive_limit(value: &str) -> Result<u64, String> {
    match number(value)? {
        0 => Err("0 would leave the helper nothing (leave the option out for no limit)".into()),
        n => Ok(n),
    }
}

/// A TCP port, 1 to 65535.
fn port(value: &str) -> Result<u16, String> {
    match value.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("`{value}` is not a TCP port (1 to 65535)")),
        Ok(n) => Ok(n),
    }
}

/// An absolute path that exists (a relative one is made absolute).
fn existing_path(value: &str) -> Result<PathBuf, String> {
    let path = std::path::absolute(value).map_err(|e| format!("`{value}`: {e}"))?;
    match std::fs::metadata(&path) {
        Ok(_) => Ok(path),
        Err(e) => Err(format!("`{value}`: {e}")),
    }
}

/// `--network`: only `none` (the default is the host's network).
fn network(value: &str) -> Result<Network, String> {
    match value {
        "none" => Ok(Network::None),
        _ => Err(format!("`{value}` is not a network mode (only `none`)")),
    }
}

/// Where the calls' lifecycle events are logged (`run`, `stdio`, `mcp`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct AuditFlags {
    /// Append the lifecycle events to the hash-chained audit log FILE
    /// (created if missing; a final record torn by a crash is recovered; a
    /// log that fails verification is refused). The attempt and the final
    /// record are synced to disk as they are written
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Seal the log's records with the key in F (64 hex digits); needs
    /// --audit
    #[arg(long, value_name = "F")]
    pub audit_key_file: Option<PathBuf>,
    /// Keep the log's anchor (checkpoint) in FILE, rewritten after the final
    /// record; when FILE exists the log is checked against it first; needs
    /// --audit
    #[arg(long, value_name = "FILE")]
    pub anchor_out: Option<PathBuf>,
    /// How long to wait for the audit log's lock while another writer
    /// holds it (writers take turns, each holding it for one append),
    /// when opening the log and for each event, in ms; past it, nothing
    /// runs (the call fails before dispatch) [default: 10000]; needs
    /// --audit
    #[arg(long, value_name = "N", value_parser = number, allow_hyphen_values = true)]
    pub audit_wait_ms: Option<u64>,
    /// Sign the log's checkpoint as it grows with the signer key in F
    /// (`audit keygen`'s PREFIX.key): a C2SP signed note, as `audit
    /// checkpoint` prints, rewritten after each final record,
    /// that `audit verify --checkpoint` checks; needs --audit
    #[arg(long, value_name = "F")]
    pub checkpoint_key_file: Option<PathBuf>,
    /// Keep the signed checkpoint in FILE (and the tree it was computed
    /// from in FILE.tree) [default: the --anchor-out file's path, or else
    /// the log's, with `.checkpoint` added]; needs --checkpoint-key-file
    #[arg(long, value_name = "FILE")]
    pub checkpoint_out: Option<PathBuf>,
}

impl AuditFlags {
    /// The flags that need `--audit` are not given without it.
    pub fn check(&self) -> Result<(), UsageError> {
        if self.audit.is_none() {
            for (given, flag) in [
                (self.audit_key_file.is_some(), "--audit-key-file"),
                (self.anchor_out.is_some(), "--anchor-out"),
                (self.audit_wait_ms.is_some(), "--audit-wait-ms"),
                (self.checkpoint_key_file.is_some(), "--checkpoint-key-file"),
            ] {
                if given {
                    return Err(UsageError(format!("`{flag}` needs `--audit FILE`")));
                }
            }
        }
        if self.checkpoint_out.is_some() && self.checkpoint_key_file.is_none() {
            return Err(UsageError(
                "`--checkpoint-out` needs `--checkpoint-key-file F`".to_owned(),
            ));
        }
        if let Some(out) = self.checkpoint_path() {
            // What the checkpoint writes (the file, its temporary file,
            // its tree file) must not be a file the command reads or
            // keeps: it would be overwritten.
            let mut tree = out.clone().into_os_string();
            tree.push(".tree");
            let mut temp = out.file_name().unwrap_or_default().to_os_string();
            temp.push(".tmp");
            let written = [out.clone(), PathBuf::from(tree), out.with_file_name(temp)];
            let kept = [
                (&self.audit, "the audit log"),
                (&self.anchor_out, "the anchor file"),
                (&self.checkpoint_key_file, "the --checkpoint-key-file"),
                (&self.audit_key_file, "the --audit-key-file"),
            ];
            for path in &written {
                for (other, what) in &kept {
                    if let Some(other) = other
                        && same_path(path, other)
                    {
                        return Err(UsageError(format!(
                            "--checkpoint-out: the checkpoint would write `{}`, which is {what}",
                            path.display()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Where the signed checkpoint is kept, with `--checkpoint-key-file`:
    /// `--checkpoint-out`, else the anchor file's path or the log's with
    /// `.checkpoint` added.
    pub fn checkpoint_path(&self) -> Option<PathBuf> {
        self.checkpoint_key_file.as_ref()?;
        if let Some(out) = &self.checkpoint_out {
            return Some(out.clone());
        }
        let beside = self.anchor_out.as_ref().or(self.audit.as_ref())?;
        let mut path = beside.as_os_str().to_os_string();
        path.push(".checkpoint");
        Some(PathBuf::from(path))
    }
}

/// Whether `a` and `b` name the same file: the same device and inode when
/// both exist, else the same absolute path.
fn same_path(a: &std::path::Path, b: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return a.dev() == b.dev() && a.ino() == b.ino();
    }
    match (std::path::absolute(a), std::path::absolute(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The flags and the program of `spillguard stdio`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct StdioArgs {
    /// Keep stdout protocol-only: a line that is not exactly one JSON-RPC
    /// message or batch is not forwarded but goes to the stderr capture
    /// (counted in the record as `stdout_lines_diverted` and
    /// `stdout_bytes_diverted`); requests left unanswered when PROGRAM ends
    /// get an error with its exit status and stderr excerpt (a batch's in
    /// one array)
    #[arg(long)]
    pub mcp: bool,
    /// Copy PROGRAM's stderr to this program's stderr, redacted as it
    /// streams (`stderr_forward_redactions`; a line is held until it ends,
    /// or 100 ms of quiet), never blocking: bytes that would block are
    /// dropped and counted (`stderr_forward_dropped`)
    #[arg(long)]
    pub forward_stderr: bool,
    /// Append the record line to FILE instead of writing it to stderr
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// With --mcp: the longest line forwarded as a message, newline
    /// included; a longer one goes to the stderr capture [default:
    /// 67108864 (64 MiB)]
    #[arg(long, value_name = "N", value_parser = positive_usize, allow_hyphen_values = true,
          default_value_t = spillguard_std::proto::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES,
          hide_default_value = true)]
    pub max_message_bytes: usize,
    /// How long PROGRAM may take to exit once its stdin is closed, before
    /// TERM, in ms [default: 2000]
    #[arg(long, value_name = "N", value_parser = number, allow_hyphen_values = true)]
    pub stdin_close_grace_ms: Option<u64>,
    /// Start PROGRAM again when it ends while the host is connected:
    /// `on-failure` after an exit that is not 0 or a signal the guard did
    /// not send, `always` after any end, `never`; never once stdin ended
    /// or the guard was asked to stop [default: never, or the --config
    /// file's `helper_restart.mode`]
    #[arg(long, value_name = "WHEN", value_enum)]
    pub restart: Option<Restart>,
    /// With --restart: this many runs in a row that each end within
    /// --restart-window-ms of their start are a crash loop, and end the
    /// restarts [default: 5]
    #[arg(long, value_name = "N", value_parser = restart_max, allow_hyphen_values = true)]
    pub restart_max: Option<u32>,
    /// With --restart: a run shorter than this, in ms, counts toward a
    /// crash loop [default: 10000]
    #[arg(long, value_name = "MS", value_parser = restart_window_ms, allow_hyphen_values = true)]
    pub restart_window_ms: Option<u64>,
    /// With --restart: the wait before the first restart and the longest
    /// wait, in ms; it doubles after each restart, plus up to a quarter of
    /// jitter, and goes back to MIN after a run of 60 s [default:
    /// 100,30000]
    #[arg(long, value_name = "MIN[,MAX]", value_parser = restart_backoff_ms,
          allow_hyphen_values = true)]
    pub restart_backoff_ms: Option<Backoff>,
    /// With --mcp and --restart: `idempotent` sends a `tools/call` in
    /// flight when PROGRAM died once more to the next run, if the last
    /// `tools/list` result marked its tool `idempotentHint` or
    /// `readOnlyHint`, instead of answering it with the crash error
    #[arg(long, value_name = "WHICH", value_enum)]
    pub retry: Option<Retry>,
    /// With --mcp: each request forwarded to PROGRAM carries
    /// `params._meta.traceparent` naming the guard's span for it (a child
    /// of the request's own traceparent, else of the TRACEPARENT this
    /// program was given); only `_meta` is added or its traceparent
    /// replaced, every other byte as the client wrote it. Without
    /// OpenTelemetry export (no span of the guard's), a request without a
    /// traceparent gets the TRACEPARENT this program was given. On by
    /// default with --mcp when OpenTelemetry export is configured
    #[arg(long, conflicts_with = "no_propagate_trace")]
    pub propagate_trace: bool,
    /// Never add or replace a request's `params._meta.traceparent`
    #[arg(long)]
    pub no_propagate_trace: bool,
    /// The flags of `run` and the program.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `--restart`: when a stdio server that ended is started again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Restart {
    /// After an exit that is not 0, or a signal the guard did not send.
    OnFailure,
    /// After any end.
    Always,
    /// Never: the guard ends with its server.
    #[default]
    Never,
}

/// `--retry`: which requests in flight at a crash go to the next run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Retry {
    /// Tool calls the server marked idempotent or read-only.
    Idempotent,
}

/// `--restart-backoff-ms MIN[,MAX]`, in ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait.
    pub min: u64,
    /// The longest wait.
    pub max: u64,
}

impl Default for Backoff {
    /// 100 ms to 30 s.
    fn default() -> Self {
        Self {
            min: 100,
            max: 30_000,
        }
    }
}

impl StdioArgs {
    /// Whether requests carry the guard's span to the server: asked for,
    /// or by default with `--mcp` when `export` (OpenTelemetry export is
    /// configured), unless refused.
    pub fn propagates_trace(&self, export: bool) -> bool {
        self.mcp && !self.no_propagate_trace && (self.propagate_trace || export)
    }

    /// The restart policy: the defaults, then what the configuration
    /// file's `[helper_restart]` table (`file`) sets, then these flags;
    /// and whether calls in flight are retried (`--retry idempotent` or
    /// the file's `retry`).
    ///
    /// # Errors
    ///
    /// A retry without `--mcp` or without restarts.
    pub fn restart_settings(
        &self,
        file: &RestartTable,
    ) -> Result<(RestartSettings, bool), UsageError> {
        let mut settings = RestartSettings::default();
        file.apply(&mut settings);
        if let Some(restart) = self.restart {
            settings.mode = match restart {
                Restart::OnFailure => RestartMode::OnFailure,
                Restart::Always => RestartMode::Always,
                Restart::Never => RestartMode::Never,
            };
        }
        if let Some(max) = self.restart_max {
            settings.max_attempts = max;
        }
        if let Some(window) = self.restart_window_ms {
            settings.window = Duration::from_millis(window);
        }
        if let Some(backoff) = self.restart_backoff_ms {
            settings.backoff_min = Duration::from_millis(backoff.min);
            settings.backoff_max = Duration::from_millis(backoff.max);
        }
        let retry = self.retry.is_some() || file.retry_idempotent;
        if retry && (!self.mcp || settings.mode == RestartMode::Never) {
            return Err(UsageError(
                "`--retry` needs `--mcp` and `--restart on-failure` or `always`".into(),
            ));
        }
        Ok((settings, retry))
    }
}

/// `--restart-max`: at least 1.
fn restart_max(value: &str) -> Result<u32, String> {
    match u32::try_from(number(value)?) {
        Ok(0) => Err("0 would give up before the first start".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{value}` is too large")),
    }
}

/// `--restart-window-ms`: at least 1.
fn restart_window_ms(value: &str) -> Result<u64, String> {
    match number(value)? {
        0 => Err("0 would count no run toward a crash loop".into()),
        n => Ok(n),
    }
}

/// `--restart-backoff-ms`: `MIN` or `MIN,MAX`, MIN at most MAX, MAX at
/// least 1 (MAX is 30000 when left out).
fn restart_backoff_ms(value: &str) -> Result<Backoff, String> {
    let (min, max) = match value.split_once(',') {
        Some((min, max)) => (number(min)?, number(max)?),
        None => (number(value)?, 30_000),
    };
    if max == 0 {
        return Err("a MAX of 0 would restart at once, every time".into());
    }
    if min > max {
        return Err(format!("MIN {min} is more than MAX {max}"));
    }
    Ok(Backoff { min, max })
}

impl StdioArgs {
    /// What clap cannot say on its own: an empty program name, and the
    /// checks of `run`'s flags.
    pub fn check(&self) -> Result<(), UsageError> {
        if self.run.command.first().is_none_or(|p| p.is_empty()) {
            return Err(UsageError(
                "missing program (usage: spillguard stdio [OPTIONS] -- PROGRAM [ARGS...])".into(),
            ));
        }
        if self.propagate_trace && !self.mcp {
            return Err(UsageError("`--propagate-trace` needs `--mcp`".into()));
        }
        if self.retry.is_some() && (!self.mcp || self.restart == Some(Restart::Never)) {
            return Err(UsageError(
                "`--retry` needs `--mcp` and `--restart on-failure` or `always`".into(),
            ));
        }
        self.run.check()
    }
}

/// The audit commands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check a log offline and print the verdict as one line
    #[command(after_help = audit_after_help!())]
    Verify(VerifyArgs),
    /// One line per session (agent run), from the log alone
    #[command(after_help = audit_after_help!())]
    Sessions(ViewArgs),
    /// One line per call, from the log alone
    #[command(after_help = audit_after_help!())]
    Activity(ViewArgs),
    /// Make an Ed25519 key pair for signed checkpoints, in the signed-note
    /// format Go's sumdb/note reads: PREFIX.key (the signer, mode 0600)
    /// and PREFIX.pub (the verifier)
    Keygen(KeygenArgs),
    /// Print the log's checkpoint (its records as an RFC 6962 tree: origin,
    /// size, root hash) signed as a C2SP signed note
    #[command(after_help = audit_after_help!())]
    Checkpoint(CheckpointArgs),
    /// Print an inclusion proof (--index) or a consistency proof (--from)
    /// for the log's current tree, as JSON, hashes in base64
    #[command(after_help = audit_after_help!())]
    Prove(ProveArgs),
}

/// The flags of `spillguard audit checkpoint`.
#[derive(Debug, Clone, Args)]
pub struct CheckpointArgs {
    /// The audit log
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The signer key, as `audit keygen` writes it (PREFIX.key)
    #[arg(long, value_name = "F")]
    pub key_file: PathBuf,
    /// The key of a sealed log (a file of 64 hex digits), to check its
    /// seals too; its records are leaves as stored either way
    #[arg(long, value_name = "F")]
    pub audit_key_file: Option<PathBuf>,
}

/// The flags of `spillguard audit prove`.
#[derive(Debug, Clone, Args)]
pub struct ProveArgs {
    /// The audit log
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The record (from 0) whose inclusion to prove
    #[arg(
        long,
        value_name = "N",
        conflicts_with = "from",
        required_unless_present = "from"
    )]
    pub index: Option<u64>,
    /// The size of the older tree whose consistency to prove
    #[arg(long, value_name = "M")]
    pub from: Option<u64>,
    /// The key of a sealed log (a file of 64 hex digits)
    #[arg(long, value_name = "F")]
    pub audit_key_file: Option<PathBuf>,
    /// Print JSON (the only output)
    #[arg(long)]
    pub json: bool,
}

/// The flags of `spillguard audit keygen`.
#[derive(Debug, Clone, Args)]
pub struct KeygenArgs {
    /// The key's name, and the origin of the checkpoints it signs (no `+`,
    /// spaces or control characters), e.g. `audit.example.com/host-7`
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Where to write: PREFIX.key and PREFIX.pub (neither may exist)
    #[arg(long, value_name = "PREFIX")]
    pub out: PathBuf,
}

/// The flags of `spillguard audit verify`.
#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// The audit log
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The anchor to verify the end of the log against, as text (`sga2.…`)
    #[arg(long, value_name = "ANCHOR", conflicts_with = "anchor_file")]
    pub anchor: Option<String>,
    /// A file holding the anchor, as `run --anchor-out` keeps it
    #[arg(long, value_name = "F")]
    pub anchor_file: Option<PathBuf>,
    /// The key of a sealed log (a file of 64 hex digits)
    #[arg(long, value_name = "F")]
    pub key_file: Option<PathBuf>,
    /// Compare the calls on record with these lifecycles and print every
    /// difference: JSON lines (or one array) of call records as `spillguard
    /// run` prints them, or of expected calls {call_id, attempt,
    /// transitions, final_state}
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
    /// A signed checkpoint (`audit checkpoint`'s output) the log's first
    /// records must match; needs --public-key
    #[arg(long, value_name = "F", requires = "public_key")]
    pub checkpoint: Option<PathBuf>,
    /// The verifier key of --checkpoint (PREFIX.pub)
    #[arg(long, value_name = "F", requires = "checkpoint")]
    pub public_key: Option<PathBuf>,
    /// Print one JSON object instead of the verdict's line
    #[arg(long)]
    pub json: bool,
}

/// The flags of `spillguard audit sessions` and `audit activity`.
#[derive(Debug, Clone, Args)]
pub struct ViewArgs {
    /// The audit log
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The key of a sealed log (a file of 64 hex digits)
    #[arg(long, value_name = "F")]
    pub key_file: Option<PathBuf>,
    /// Print one JSON object per line instead of columns
    #[arg(long)]
    pub json: bool,
}

/// Which view of an audit log to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditView {
    /// The verdict (and the comparison with `--expect`).
    Verify,
    /// One line per session.
    Sessions,
    /// One line per call.
    Activity,
}

/// Where the anchor to verify against comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorArg {
    /// Its text, on the command line.
    Text(String),
    /// A file holding its text.
    File(PathBuf),
}

/// What an `audit` command asks for, whichever it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditArgs {
    pub command: AuditView,
    pub file: PathBuf,
    pub anchor: Option<AnchorArg>,
    pub key_file: Option<PathBuf>,
    pub expect: Option<PathBuf>,
    pub json: bool,
    /// `verify --checkpoint F --public-key K`.
    pub checkpoint: Option<(PathBuf, PathBuf)>,
}

impl AuditCommand {
    /// What the command does: read a log, or make a key pair.
    pub fn into_task(self) -> AuditTask {
        let read = match self {
            AuditCommand::Keygen(keygen) => return AuditTask::Keygen(keygen),
            AuditCommand::Checkpoint(checkpoint) => return AuditTask::Checkpoint(checkpoint),
            AuditCommand::Prove(prove) => return AuditTask::Prove(prove),
            AuditCommand::Verify(verify) => AuditArgs {
                command: AuditView::Verify,
                file: verify.file,
                anchor: match (verify.anchor, verify.anchor_file) {
                    (Some(text), _) => Some(AnchorArg::Text(text)),
                    (None, Some(file)) => Some(AnchorArg::File(file)),
                    (None, None) => None,
                },
                key_file: verify.key_file,
                expect: verify.expect,
                json: verify.json,
                checkpoint: verify.checkpoint.zip(verify.public_key),
            },
            AuditCommand::Sessions(view) => AuditArgs::view(AuditView::Sessions, view),
            AuditCommand::Activity(view) => AuditArgs::view(AuditView::Activity, view),
        };
        AuditTask::Read(read)
    }
}

/// What an `audit` command does: read a log, or make a key pair.
#[derive(Debug, Clone)]
pub enum AuditTask {
    /// Verify a log, or print a view of it.
    Read(AuditArgs),
    /// Make a key pair (`audit keygen`).
    Keygen(KeygenArgs),
    /// Print a signed checkpoint (`audit checkpoint`).
    Checkpoint(CheckpointArgs),
    /// Print a proof (`audit prove`).
    Prove(ProveArgs),
}

impl AuditArgs {
    fn view(command: AuditView, view: ViewArgs) -> Self {
        AuditArgs {
            command,
            file: view.file,
            anchor: None,
            key_file: view.key_file,
            expect: None,
            json: view.json,
            checkpoint: None,
        }
    }
}

/// Bad input on the command line; the message names the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

/// Shown redacted by the built-in rules: a message may quote the input it
/// refuses (a command line, a tools file's entry), secrets and all.
impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            &spillguard_std::proto::Redactor::builtin()
                .redact(&self.0)
                .text,
        )
    }
}

fn missing_program() -> UsageError {
    UsageError("missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])".into())
}

/// A byte count or a number of milliseconds.
fn number(value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("`{value}` is not a non-negative integer"))
}

/// A number of at least 1: a deadline of 0 would stop every helper at
/// once.
fn positive(value: &str) -> Result<u64, String> {
    match number(value)? {
        0 => Err("0 would stop the helper at once (leave the option out for no deadline)".into()),
        n => Ok(n),
    }
}

/// `--max-running`: at least 1.
fn max_running(value: &str) -> Result<usize, String> {
    let n = number(value)?;
    match usize::try_from(n) {
        Ok(0) => Err("0 would run no tool call".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{value}` is too large")),
    }
}

/// `--queue-timeout-ms`: at least 1.
fn queue_timeout_ms(value: &str) -> Result<u64, String> {
    match number(value)? {
        0 => Err("0 would expire every queued call at once".into()),
        n => Ok(n),
    }
}

/// A session id a caller chose: short, and nothing a terminal or a column
/// of the audit views would misread.
fn session_id(value: &str) -> Result<String, String> {
    let valid = (1..=64).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if valid {
        Ok(value.to_owned())
    } else {
        Err("a session id is 1 to 64 of A-Z a-z 0-9 _ . : -".into())
    }
}

/// A byte count of at least 1 that fits in memory.
fn positive_usize(value: &str) -> Result<usize, String> {
    let n = number(value)?;
    match usize::try_from(n) {
        Ok(0) => Err("0 would divert every line".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{value}` is too large")),
    }
}

/// How `run` reads the helper's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultMode {
    /// A JSON value on stdout.
    Json,
}

/// A result mode: only `json`.
fn result_mode(value: &str) -> Result<ResultMode, String> {
    match value {
        "json" => Ok(ResultMode::Json),
        _ => Err(format!("unknown result `{value}` (expected json)")),
    }
}

/// A retention mode; `head_and_tail`, the configuration's spelling, is
/// accepted too.
fn retain(value: &str) -> Result<Retain, String> {
    match value {
        "tail" => Ok(Retain::Tail),
        "head" => Ok(Retain::Head),
        "head-and-tail" | "head_and_tail" => Ok(Retain::HeadAndTail),
        _ => Err(format!(
            "unknown mode `{value}` (expected tail, head or head-and-tail)"
        )),
    }
}

/// The flags that only `audit verify` takes.
const VERIFY_ONLY: [&str; 3] = ["--anchor", "--anchor-file", "--expect"];

/// One line for a usage error found by clap; `args` are the arguments
/// after the program name (they tell `audit`'s errors from `run`'s).
pub fn usage_message(error: &clap::Error, args: &[OsString]) -> String {
    let word = |i: usize| args.get(i).and_then(|a| a.to_str()).unwrap_or_default();
    let in_audit = word(0) == "audit";
    let in_mcp = word(0) == "mcp";
    let text = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => text.clone(),
        Some(ContextValue::Strings(texts)) => texts.join(", "),
        Some(ContextValue::StyledStr(text)) => text.to_string(),
        _ => String::new(),
    };
    // `--per-call-bytes <N>` or `--expect=e`: the flag alone.
    let flag = || {
        let arg = text(ContextKind::InvalidArg);
        let name = arg.split([' ', '=']).next().unwrap_or_default();
        name.to_owned()
    };
    match error.kind() {
        ErrorKind::MissingSubcommand if in_audit => {
            "missing audit command (expected verify, sessions, activity, keygen, checkpoint or prove)".into()
        }
        ErrorKind::MissingSubcommand => {
            "missing command `run`, `stdio`, `audit` or `mcp` (see `spillguard --help`)".into()
        }
        ErrorKind::InvalidSubcommand if in_audit => format!(
            "unknown audit command `{}` (expected verify, sessions, activity, keygen, checkpoint or prove)",
            text(ContextKind::InvalidSubcommand)
        ),
        ErrorKind::InvalidSubcommand => format!(
            "unknown command `{}` (expected `run`, `stdio`, `audit` or `mcp`; see `spillguard --help`)",
            text(ContextKind::InvalidSubcommand)
        ),
        ErrorKind::UnknownArgument => {
            let name = flag();
            if !name.starts_with('-') {
                let place = if in_audit {
                    "one log file only"
                } else {
                    "see `spillguard --help`"
                };
                format!(
                    "unexpected argument `{}` ({place})",
                    text(ContextKind::InvalidArg)
                )
            } else if in_audit && word(1) != "verify" && VERIFY_ONLY.contains(&name.as_str()) {
                format!("`{name}` is a flag of `audit verify` only")
            } else {
                format!("unknown flag `{name}` (see `spillguard --help`)")
            }
        }
        ErrorKind::InvalidValue if text(ContextKind::InvalidValue).is_empty() => {
            format!("`{}` needs a value", flag())
        }
        ErrorKind::InvalidValue if !text(ContextKind::ValidValue).is_empty() => format!(
            "`{}`: unknown value `{}` (expected one of: {})",
            flag(),
            text(ContextKind::InvalidValue),
            text(ContextKind::ValidValue)
        ),
        ErrorKind::ValueValidation => {
            let reason = std::error::Error::source(error)
                .map(ToString::to_string)
                .unwrap_or_else(|| format!("`{}` is not valid", text(ContextKind::InvalidValue)));
            format!("`{}`: {reason}", flag())
        }
        ErrorKind::MissingRequiredArgument if in_audit => {
            // The missing arguments as clap names them: `<FILE>` is the
            // log, a flag is named with its value (`--key-file <F>`).
            let missing = text(ContextKind::InvalidArg);
            let flags: Vec<&str> = (missing.split(", "))
                .filter(|arg| arg.starts_with('-'))
                .map(|arg| arg.split([' ', '=']).next().unwrap_or(arg))
                .collect();
            match flags.as_slice() {
                [] if word(1) == "keygen" => {
                    "`audit keygen` needs the key's NAME (see `spillguard audit --help`)".into()
                }
                [] => "missing the audit log file (see `spillguard --help`)".into(),
                // One of the two, which clap names by the first.
                _ if word(1) == "prove" => {
                    "`audit prove` needs `--index` or `--from` (see `spillguard audit --help`)"
                        .into()
                }
                flags => format!(
                    "`audit {}` needs `{}` (see `spillguard audit --help`)",
                    word(1),
                    flags.join("` and `")
                ),
            }
        }
        ErrorKind::MissingRequiredArgument if in_mcp => "`mcp` needs `--tools FILE`".into(),
        ErrorKind::MissingRequiredArgument if word(0) == "stdio" => {
            "missing program (usage: spillguard stdio [OPTIONS] -- PROGRAM [ARGS...])".into()
        }
        ErrorKind::MissingRequiredArgument => missing_program().0,
        ErrorKind::ArgumentConflict if in_audit => {
            let name = |kind| {
                let arg = text(kind);
                arg.split([' ', '=']).next().unwrap_or_default().to_owned()
            };
            let (this, prior) = (name(ContextKind::InvalidArg), name(ContextKind::PriorArg));
            if this == prior || prior.is_empty() {
                format!("`{this}` is given more than once")
            } else {
                format!("give one of `{this}` and `{prior}`, once")
            }
        }
        _ => {
            // Anything else: clap's own first line, without its prefix.
            let rendered = error.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            format!("{first} (see `spillguard --help`)")
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// What the arguments parse to, or the one-line usage error.
    fn parse(args: &[&str]) -> Result<Command, String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let all = std::iter::once(OsString::from("spillguard")).chain(args.iter().cloned());
        match Cli::try_parse_from(all) {
            Ok(cli) => match cli.command {
                Command::Run(run) => run.check().map(|()| Command::Run(run)).map_err(|e| e.0),
                audit => Ok(audit),
            },
            Err(error) => Err(usage_message(&error, &args)),
        }
    }

    fn run(args: &[&str]) -> RunArgs {
        match parse(args) {
            Ok(Command::Run(run)) => run,
            other => panic!("{other:?}"),
        }
    }

    fn audit(args: &[&str]) -> AuditArgs {
        match parse(args) {
            Ok(Command::Audit(audit)) => match audit.into_task() {
                AuditTask::Read(read) => read,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    fn err(args: &[&str]) -> String {
        parse(args).unwrap_err()
    }

    #[test]
    fn the_declarations_are_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_take_separate_or_inline_values() {
        let parsed = run(&[
            "run",
            "--retain",
            "head-and-tail",
            "--per-call-bytes=8192",
            "--excerpt-bytes",
            "1024",
            "--deadline-ms",
            "500",
            "--grace-ms=100",
            "--drain-window-ms",
            "50",
            "--config",
            "a.toml",
            "--audit=log.jsonl",
            "--result=json",
            "--debug-for",
            "30",
            "--debug-on-signal=600",
            "--",
            "sh",
            "-c",
            "exit 0",
        ]);
        assert_eq!(
            parsed,
            RunArgs {
                retain: Some(Retain::HeadAndTail),
                per_call_bytes: Some(8192),
                excerpt_bytes: Some(1024),
                deadline_ms: Some(500),
                grace_ms: Some(100),
                drain_window_ms: Some(50),
                result: Some(ResultMode::Json),
                debug_for: Some(30),
                debug_on_signal: Some(600),
                config: Some("a.toml".into()),
                audit: AuditFlags {
                    audit: Some("log.jsonl".into()),
                    audit_key_file: None,
                    anchor_out: None,
                    audit_wait_ms: None,
                    ..AuditFlags::default()
                },
                session_id: None,
                otel_file: None,
                confine: ConfineFlags::default(),
                command: vec!["sh".into(), "-c".into(), "exit 0".into()],
            }
        );
    }

    #[test]
    fn the_program_may_follow_the_flags_without_a_separator() {
        let parsed = run(&["run", "--deadline-ms", "5", "ls", "--all", "-h"]);
        assert_eq!(
            parsed.command,
            vec![OsString::from("ls"), "--all".into(), "-h".into()]
        );
    }

    #[test]
    fn a_flag_given_twice_takes_the_last_value() {
        let parsed = run(&["run", "--deadline-ms", "5", "--deadline-ms=7", "--", "ls"]);
        assert_eq!(parsed.deadline_ms, Some(7));
    }

    #[test]
    fn bad_input_names_the_problem() {
        assert_eq!(
            err(&[]),
            "missing command `run`, `stdio`, `audit` or `mcp` (see `spillguard --help`)"
        );
        assert_eq!(
            err(&["go"]),
            "unknown command `go` (expected `run`, `stdio`, `audit` or `mcp`; see `spillguard --help`)"
        );
        assert_eq!(
            err(&["run", "--anchor-out", "a", "--", "ls"]),
            "`--anchor-out` needs `--audit FILE`"
        );
        assert_eq!(
            err(&["run", "--audit-key-file", "k", "--", "ls"]),
            "`--audit-key-file` needs `--audit FILE`"
        );
        assert_eq!(
            err(&["run", "--verbose", "--", "ls"]),
            "unknown flag `--verbose` (see `spillguard --help`)"
        );
        assert_eq!(
            err(&["run", "--deadline-ms", "soon", "--", "ls"]),
            "`--deadline-ms`: `soon` is not a non-negative integer"
        );
        assert_eq!(
            err(&["run", "--deadline-ms", "0", "--", "ls"]),
            "`--deadline-ms`: 0 would stop the helper at once (leave the option out for no deadline)"
        );
        assert_eq!(
            err(&["run", "--grace-ms=-1", "--", "ls"]),
            "`--grace-ms`: `-1` is not a non-negative integer"
        );
        assert_eq!(
            err(&["run", "--grace-ms", "-1", "--", "ls"]),
            "`--grace-ms`: `-1` is not a non-negative integer"
        );
        assert_eq!(err(&["run", "--audit"]), "`--audit` needs a value");
        assert_eq!(
            err(&["run", "--retain", "middle", "--", "ls"]),
            "`--retain`: unknown mode `middle` (expected tail, head or head-and-tail)"
        );
        assert_eq!(
            err(&["run", "--deadline-ms", "5"]),
            "missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])"
        );
        assert_eq!(
            err(&["run", "--"]),
            "missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])"
        );
        assert_eq!(
            err(&["run", "--", ""]),
            "missing program (usage: spillguard run [OPTIONS] -- PROGRAM [ARGS...])"
        );
        assert_eq!(
            err(&["--quiet"]),
            "unknown flag `--quiet` (see `spillguard --help`)"
        );
    }

    #[test]
    fn audit_commands_take_a_file_and_their_flags() {
        assert_eq!(
            audit(&[
                "audit",
                "verify",
                "log",
                "--anchor-file=a",
                "--key-file",
                "k",
                "--expect",
                "e.jsonl",
                "--json",
            ]),
            AuditArgs {
                command: AuditView::Verify,
                file: "log".into(),
                anchor: Some(AnchorArg::File("a".into())),
                key_file: Some("k".into()),
                expect: Some("e.jsonl".into()),
                json: true,
                checkpoint: None,
            }
        );
        let sessions = audit(&["audit", "sessions", "--json", "log"]);
        assert_eq!(
            (sessions.command, sessions.file, sessions.json),
            (AuditView::Sessions, "log".into(), true)
        );
        let verify = audit(&["audit", "verify", "log", "--anchor", "sga1.x"]);
        assert_eq!(verify.anchor, Some(AnchorArg::Text("sga1.x".into())));
    }

    #[test]
    fn bad_audit_input_names_the_problem() {
        assert_eq!(
            err(&["audit"]),
            "missing audit command (expected verify, sessions, activity, keygen, checkpoint or prove)"
        );
        assert_eq!(
            err(&["audit", "check", "log"]),
            "unknown audit command `check` (expected verify, sessions, activity, keygen, checkpoint or prove)"
        );
        assert_eq!(
            err(&["audit", "verify"]),
            "missing the audit log file (see `spillguard --help`)"
        );
        assert_eq!(
            err(&["audit", "verify", "a", "b"]),
            "unexpected argument `b` (one log file only)"
        );
        assert_eq!(
            err(&[
                "audit",
                "verify",
                "a",
                "--anchor",
                "x",
                "--anchor-file",
                "y"
            ]),
            "give one of `--anchor` and `--anchor-file`, once"
        );
        assert_eq!(
            err(&["audit", "verify", "a", "--anchor", "x", "--anchor", "y"]),
            "`--anchor` is given more than once"
        );
        // Each flag of the checkpoint commands is named when it is given
        // twice, or with the one it excludes, or when it is missing.
        for (args, message) in [
            (
                &["audit", "prove", "a", "--index", "1", "--from", "2"][..],
                "give one of `--index` and `--from`, once",
            ),
            (
                &["audit", "prove", "a", "--index", "1", "--index", "2"],
                "`--index` is given more than once",
            ),
            (
                &[
                    "audit",
                    "checkpoint",
                    "a",
                    "--key-file",
                    "k",
                    "--key-file",
                    "k",
                ],
                "`--key-file` is given more than once",
            ),
            (
                &["audit", "keygen", "n", "--out", "a", "--out", "b"],
                "`--out` is given more than once",
            ),
            (
                &["audit", "prove", "a"],
                "`audit prove` needs `--index` or `--from` (see `spillguard audit --help`)",
            ),
            (
                &["audit", "checkpoint", "a"],
                "`audit checkpoint` needs `--key-file` (see `spillguard audit --help`)",
            ),
            (
                &["audit", "verify", "a", "--checkpoint", "c"],
                "`audit verify` needs `--public-key` (see `spillguard audit --help`)",
            ),
            (
                &["audit", "keygen", "n"],
                "`audit keygen` needs `--out` (see `spillguard audit --help`)",
            ),
            (
                &["audit", "keygen", "--out", "p"],
                "`audit keygen` needs the key's NAME (see `spillguard audit --help`)",
            ),
        ] {
            assert_eq!(err(args), message, "{args:?}");
        }
        assert_eq!(
            err(&["audit", "activity", "a", "--expect", "e"]),
            "`--expect` is a flag of `audit verify` only"
        );
        assert_eq!(
            err(&["audit", "sessions", "a", "--anchor=x"]),
            "`--anchor` is a flag of `audit verify` only"
        );
        assert_eq!(
            err(&["audit", "verify", "a", "--key-file"]),
            "`--key-file` needs a value"
        );
        assert_eq!(
            err(&["audit", "sessions", "a", "--jsn"]),
            "unknown flag `--jsn` (see `spillguard --help`)"
        );
    }

    #[test]
    fn mcp_takes_a_tools_file_and_check() {
        match parse(&["mcp", "--tools", "t.toml", "--check"]) {
            Ok(Command::Mcp(mcp)) => assert_eq!(
                mcp,
                McpArgs {
                    tools: "t.toml".into(),
                    check: true,
                    on_disconnect: OnDisconnect::Finish,
                    max_running: None,
                    queue_timeout_ms: None,
                    audit: AuditFlags::default(),
                    otel_file: None,
                }
            ),
            other => panic!("{other:?}"),
        }
        match parse(&[
            "mcp",
            "--tools",
            "t.toml",
            "--on-disconnect",
            "cancel",
            "--audit",
            "calls.log",
            "--anchor-out",
            "calls.anchor",
        ]) {
            Ok(Command::Mcp(mcp)) => assert_eq!(
                mcp,
                McpArgs {
                    tools: "t.toml".into(),
                    check: false,
                    on_disconnect: OnDisconnect::Cancel,
                    max_running: None,
                    queue_timeout_ms: None,
                    audit: AuditFlags {
                        audit: Some("calls.log".into()),
                        audit_key_file: None,
                        anchor_out: Some("calls.anchor".into()),
                        audit_wait_ms: None,
                        ..AuditFlags::default()
                    },
                    otel_file: None,
                }
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(err(&["mcp", "--check"]), "`mcp` needs `--tools FILE`");
        assert_eq!(
            err(&["mcp", "--tools", "t", "--serve"]),
            "unknown flag `--serve` (see `spillguard --help`)"
        );
    }

    #[test]
    fn mcp_takes_the_admission_limits() {
        match parse(&[
            "mcp",
            "--tools",
            "t.toml",
            "--max-running",
            "3",
            "--queue-timeout-ms",
            "2500",
        ]) {
            Ok(Command::Mcp(mcp)) => {
                assert_eq!(
                    (mcp.max_running, mcp.queue_timeout_ms),
                    (Some(3), Some(2500))
                );
            }
            other => panic!("{other:?}"),
        }
        let flag = |name: &str, value: &str| err(&["mcp", "--tools", "t", name, value]);
        assert_eq!(
            flag("--max-running", "0"),
            "`--max-running`: 0 would run no tool call"
        );
        assert_eq!(
            flag("--max-running", "-1"),
            "`--max-running`: `-1` is not a non-negative integer"
        );
        assert_eq!(
            flag("--max-running", "two"),
            "`--max-running`: `two` is not a non-negative integer"
        );
        assert_eq!(
            flag("--queue-timeout-ms", "0"),
            "`--queue-timeout-ms`: 0 would expire every queued call at once"
        );
        assert_eq!(
            flag("--queue-timeout-ms", "1.5"),
            "`--queue-timeout-ms`: `1.5` is not a non-negative integer"
        );
    }

    #[test]
    fn help_and_version_are_asked_for_anywhere_before_the_program() {
        let kind = |args: &[&str]| {
            let all = std::iter::once("spillguard").chain(args.iter().copied());
            Cli::try_parse_from(all).map(|_| ()).unwrap_err().kind()
        };
        for args in [
            &["--help"][..],
            &["-h"],
            &["help"],
            &["help", "run"],
            &["run", "-h"],
            &["run", "--deadline-ms", "5", "--help"],
            &["audit", "--help"],
            &["audit", "help", "verify"],
            &["audit", "verify", "--help"],
        ] {
            assert_eq!(kind(args), ErrorKind::DisplayHelp, "{args:?}");
        }
        assert_eq!(kind(&["--version"]), ErrorKind::DisplayVersion);
        assert_eq!(kind(&["-V"]), ErrorKind::DisplayVersion);
    }

    #[test]
    fn arguments_after_the_program_are_the_programs() {
        assert_eq!(
            run(&["run", "--", "prog", "--help"]).command,
            vec![OsString::from("prog"), "--help".into()]
        );
    }
}
