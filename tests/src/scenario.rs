//! Scenarios as plain data: the host's settings, the helpers to run, what
//! the client does and when, and what must come out.
//!
//! Nothing here knows a runtime. A driver (see [`crate::drivers`]) turns a
//! [`Scenario`] into calls on its adapter's host and reports [`Measured`]
//! facts; [`check`] compares them with the scenario's expectations.
//!
//! Every delay is anchored on something the client observes (its call
//! reaching `dispatched`, the approval card being shown), never on absolute
//! wall-clock instants, so that a loaded machine shifts a scenario without
//! changing what it shows.
//!
//! [`Measured`]: crate::Measured
//! [`check`]: crate::check

use std::path::{Path, PathBuf};
use std::time::Duration;

use spillguard_core::{CallKind, Config, DisconnectPolicy};
use spillguard_host::CallRequest;
use spillguard_std::HelperCommand;

use crate::expect::{CallExpect, ScenarioExpect};

/// One behaviour to prove on every runtime.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// What it shows, as a test name: `a_helper_that_ignores_sigterm_is_killed_after_the_grace`.
    pub name: &'static str,
    /// The mission's scenario number, e.g. `S9` (`S8a`/`S8b` for the two
    /// disconnect policies).
    pub id: &'static str,
    /// One sentence for reports.
    pub summary: &'static str,
    /// How the host is configured.
    pub host: HostSettings,
    /// The calls, started as their [`StartAt`] says.
    pub calls: Vec<CallPlan>,
    /// Expectations about the scenario as a whole (the pool).
    pub expect: ScenarioExpect,
}

impl Scenario {
    /// Every call id the scenario starts, in plan order.
    pub fn call_ids(&self) -> Vec<String> {
        self.calls
            .iter()
            .flat_map(|plan| (0..plan.copies).map(|copy| plan.call_id(copy)))
            .collect()
    }

    /// The plan that starts `call_id`, if any.
    pub fn plan_of(&self, call_id: &str) -> Option<&CallPlan> {
        self.calls
            .iter()
            .find(|plan| (0..plan.copies).any(|copy| plan.call_id(copy) == call_id))
    }
}

/// The host's configuration: a [`Config`] and the overrides a host's options
/// offer. `None` keeps the config's value or the core's default.
#[derive(Debug, Clone, Default)]
pub struct HostSettings {
    /// Budgets (`stderr_retained_per_call_bytes`, …) and the default grace.
    pub config: Config,
    /// Longest a helper may run after dispatch.
    pub deadline: Option<Duration>,
    /// SIGTERM to SIGKILL.
    pub shutdown_grace: Option<Duration>,
    /// How long streams may stay open after the direct child exited.
    pub post_exit_drain: Option<Duration>,
    /// How long to wait for exit and streams after SIGKILL.
    pub kill_wait: Option<Duration>,
    /// How long an approval card stays valid.
    pub approval_timeout: Option<Duration>,
    /// What dropping a call's handle does.
    pub on_client_disconnect: Option<DisconnectPolicy>,
}

/// The program a call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Program {
    /// `spillguard-test-helper`, found through the [`Environment`].
    TestHelper,
    /// A program looked up in `PATH`, e.g. `yes`.
    Named(&'static str),
}

/// A helper invocation: program, arguments and stdin. Never a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// What to run.
    pub program: Program,
    /// Its arguments.
    pub args: Vec<String>,
    /// Bytes for its stdin, which is null otherwise.
    pub stdin: Option<Vec<u8>>,
}

impl Invocation {
    /// `spillguard-test-helper` with these flags (see its `--help`).
    pub fn test_helper(args: &[&str]) -> Self {
        Self {
            program: Program::TestHelper,
            args: args.iter().map(|&a| a.to_owned()).collect(),
            stdin: None,
        }
    }

    /// A program from `PATH` with these arguments.
    pub fn named(program: &'static str, args: &[&str]) -> Self {
        Self {
            program: Program::Named(program),
            args: args.iter().map(|&a| a.to_owned()).collect(),
            stdin: None,
        }
    }

    /// The same invocation, fed `bytes` on stdin.
    pub fn with_stdin(mut self, bytes: &[u8]) -> Self {
        self.stdin = Some(bytes.to_vec());
        self
    }

    /// The command every adapter takes.
    pub fn command(&self, env: &Environment) -> HelperCommand {
        let program = match &self.program {
            Program::TestHelper => env.test_helper.clone().into_os_string(),
            Program::Named(name) => (*name).into(),
        };
        let command = HelperCommand::new(program).args(&self.args);
        match &self.stdin {
            Some(bytes) => command.stdin_bytes(bytes.clone()),
            None => command,
        }
    }

    /// The invocation as a shell-like line, for reports.
    pub fn display_line(&self) -> String {
        let program = match &self.program {
            Program::TestHelper => "spillguard-test-helper",
            Program::Named(name) => name,
        };
        std::iter::once(program.to_owned())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Where the programs the scenarios run are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// Path of the `spillguard-test-helper` binary.
    pub test_helper: PathBuf,
}

impl Environment {
    /// The test helper at `path` (in integration tests:
    /// `env!("CARGO_BIN_EXE_spillguard-test-helper")`).
    pub fn with_test_helper(path: impl AsRef<Path>) -> Self {
        Self {
            test_helper: path.as_ref().to_path_buf(),
        }
    }

    /// The test helper next to the running executable, as cargo builds the
    /// package's binaries into one directory.
    pub fn beside_current_exe() -> std::io::Result<Self> {
        let exe = std::env::current_exe()?;
        Ok(Self::with_test_helper(
            exe.with_file_name("spillguard-test-helper"),
        ))
    }
}

/// What the approver does with a call's card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approver {
    /// The call needs no approval.
    NotAsked,
    /// Approves this long after the card was shown.
    Approve {
        /// Delay after the card was observed.
        after: Duration,
    },
    /// Denies this long after the card was shown.
    Deny {
        /// Delay after the card was observed.
        after: Duration,
    },
    /// Never answers: the card expires.
    Never,
}

impl Approver {
    /// Whether the call is started with `needs_approval`.
    pub fn needs_approval(self) -> bool {
        !matches!(self, Approver::NotAsked)
    }
}

/// Something a client observes about its call, which other calls' starts
/// may wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Milestone {
    /// The approval card was shown.
    CardShown,
    /// The call reached `dispatched` (or ended without it).
    Dispatched,
}

/// When a call is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartAt {
    /// As the scenario begins.
    Immediately,
    /// `delay` after the first copy of plan `call` passed `milestone`.
    After {
        /// Index of the other plan in [`Scenario::calls`].
        call: usize,
        /// What to wait for.
        milestone: Milestone,
        /// Then wait this long.
        delay: Duration,
    },
}

/// A call the scenario makes (or `copies` identical ones, concurrently).
#[derive(Debug, Clone)]
pub struct CallPlan {
    /// The call id, or its prefix when there are several copies
    /// (`{label}_{copy:02}`).
    pub label: &'static str,
    /// Action or discovery.
    pub kind: CallKind,
    /// The helper to run.
    pub invocation: Invocation,
    /// How many identical calls run at once.
    pub copies: usize,
    /// When it starts.
    pub start: StartAt,
    /// Whether it needs approval, and the answer.
    pub approver: Approver,
    /// Cancel this long after the call was seen `dispatched`.
    pub cancel_after_dispatch: Option<Duration>,
    /// Drop the handle (a client disconnect) this long after the call was
    /// seen `dispatched`. The record is then read from the host.
    pub drop_after_dispatch: Option<Duration>,
    /// What each copy's record and outputs must be.
    pub expect: CallExpect,
}

impl CallPlan {
    /// A single action call running `invocation` at once, with no approval.
    pub fn action(label: &'static str, invocation: Invocation, expect: CallExpect) -> Self {
        Self {
            label,
            kind: CallKind::Action,
            invocation,
            copies: 1,
            start: StartAt::Immediately,
            approver: Approver::NotAsked,
            cancel_after_dispatch: None,
            drop_after_dispatch: None,
            expect,
        }
    }

    /// The id of copy `copy`.
    pub fn call_id(&self, copy: usize) -> String {
        if self.copies == 1 {
            self.label.to_owned()
        } else {
            format!("{}_{copy:02}", self.label)
        }
    }

    /// The request of copy `copy`, running `command`, made with the
    /// builder: its id, the session, kind, action, target and summary the
    /// scenarios report, and approval if its approver is asked.
    pub fn request(&self, copy: usize, command: HelperCommand) -> CallRequest {
        let action = match self.kind {
            CallKind::Discovery => "local.discover",
            _ => "local.helper",
        };
        crate::engine::request(command)
            .call_id(self.call_id(copy))
            .session_id("s_scenarios")
            .kind(self.kind)
            .action(action)
            .target("localhost")
            .summary(self.invocation.display_line())
            .approval(crate::drivers::approval(self.approver.needs_approval()))
            .into_request()
    }
}
