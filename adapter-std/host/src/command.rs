//! What to run: a helper's program, arguments, environment and stdin.
//!
//! A [`HelperCommand`] is plain data. [`HelperCommand::validate`] checks it
//! before anything is audited or approved; the owner turns a failed
//! check into a `failed_before_dispatch` record, never a panic.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::confine::ChildSetup;

/// What the helper reads on its standard input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StdinMode {
    /// `/dev/null`: the helper reads end-of-file at once (the default).
    #[default]
    Null,
    /// These bytes, written by a writer thread, then end-of-file. The writer
    /// stops early when the call asks to close stdin (on a stop request).
    Bytes(Vec<u8>),
    /// A pipe the caller writes through the call's stream
    /// (`CallBuilder::streamed`, or `.stdin(Stdio::piped())`); closed when
    /// the caller closes it or when the call asks to close stdin.
    Streamed,
}

/// A description of the helper process to run, like
/// [`std::process::Command`] but plain data that can be checked first.
///
/// No shell is involved unless [`shell`](Self::shell) is set.
///
/// # Examples
///
/// ```
/// # use spillguard_host::HelperCommand;
///
/// let ssh = HelperCommand::new("ssh")
///     .args(["-o", "BatchMode=yes", "deploy@web-3", "systemctl restart web"])
///     .env("LC_ALL", "C")
///     .env_remove("SSH_AUTH_SOCK");
/// assert_eq!(ssh.validate(), Ok(()));
///
/// let script = HelperCommand::shell_script("yes helper-diagnostic 1>&2");
/// assert_eq!(script.program, "yes helper-diagnostic 1>&2");
/// assert!(script.shell);
///
/// assert_eq!(
///     HelperCommand::new("").validate().unwrap_err().to_string(),
///     "the program is empty"
/// );
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HelperCommand {
    /// The program: a path, or a name looked up in `PATH`. With
    /// [`shell`](Self::shell), the script given to `/bin/sh -c`.
    pub program: OsString,
    /// Arguments (with `shell`: the script's `$1`, `$2`, …).
    pub args: Vec<OsString>,
    /// Variables added to (or, with `env_clear`, making up) the environment,
    /// in the order given: of two pairs with one name, the later is set.
    pub env: Vec<(OsString, OsString)>,
    /// Variables the helper does not inherit from the host. The builder
    /// methods keep a name out of `env` while it is here, and out of here
    /// once `env` sets it; should a name be in both, `env` sets it.
    pub env_remove: Vec<OsString>,
    /// Start from an empty environment instead of the host's.
    pub env_clear: bool,
    /// Working directory; the host's when `None`.
    pub cwd: Option<PathBuf>,
    /// Standard input. Null unless the helper needs input.
    pub stdin: StdinMode,
    /// Whether the helper's stdout goes to the caller (a streamed call),
    /// read through the call's stream, instead of being captured.
    pub stdout_streamed: bool,
    /// Run `program` as a script with `/bin/sh -c` (off by default).
    pub shell: bool,
    /// Start the helper in a session of its own (`setsid`): no controlling
    /// terminal, so it cannot open the user's terminal (`/dev/tty`) or
    /// receive its signals. Off by default (the helper's own process group
    /// in the host's session); always on for a helper with a limit or a
    /// sandbox.
    pub new_session: bool,
    /// What the child does to itself before exec (its call's
    /// confinement), set by the owner just before the spawn.
    confine: ChildSlot,
}

/// The child's confinement steps, handed to the command once and taken by
/// [`HelperCommand::spawn_confined`]. Two commands are equal here when they hold
/// the same steps (or none).
#[derive(Clone, Default)]
struct ChildSlot(Option<Arc<Mutex<Option<ChildSetup>>>>);

impl PartialEq for ChildSlot {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for ChildSlot {}

impl fmt::Debug for ChildSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

impl HelperCommand {
    /// A command that runs `program` with no arguments.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// A command that runs `script` with `/bin/sh -c`.
    pub fn shell_script(script: impl Into<OsString>) -> Self {
        Self {
            shell: true,
            ..Self::new(script)
        }
    }

    /// Adds one argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds an environment variable.
    ///
    /// Per name the last of `env` and [`env_remove`](Self::env_remove)
    /// wins: `env` after `env_remove` of the same name sets it.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        let key = key.into();
        self.env_remove.retain(|removed| *removed != key);
        self.env.push((key, value.into()));
        self
    }

    /// Adds environment variables, each as [`env`](Self::env) does.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::HashMap;
    /// # use spillguard_host::{HelperCommand, command_line};
    ///
    /// let build = HelperCommand::new("make").envs([("CC", "clang"), ("CFLAGS", "-O2 -g")]);
    /// assert_eq!(command_line(&build), "env CC=clang 'CFLAGS=-O2 -g' make");
    ///
    /// let locale: HashMap<&str, &str> = HashMap::from([("LC_ALL", "C")]);
    /// assert_eq!(HelperCommand::new("sort").envs(&locale).env.len(), 1);
    /// ```
    pub fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        for (key, value) in vars {
            self = self.env(key, value);
        }
        self
    }

    /// Removes an environment variable: the helper does not inherit it
    /// from the host, and an earlier [`env`](Self::env) of the same name
    /// is dropped.
    ///
    /// As with `std::process::Command` (and the async runtimes' own),
    /// the last call for a name wins: `env_remove` after `env` leaves the
    /// variable unset, `env` after `env_remove` sets it. After
    /// [`env_clear`](Self::env_clear) nothing is inherited, so it only
    /// drops an earlier `env`. The approval card's command line shows each
    /// removal as `env -u NAME` (nothing when the environment starts
    /// empty).
    ///
    /// # Examples
    ///
    /// ```
    /// # use spillguard_host::{HelperCommand, command_line};
    ///
    /// let git = HelperCommand::new("git").arg("fetch").env_remove("GIT_DIR");
    /// assert_eq!(command_line(&git), "env -u GIT_DIR git fetch");
    ///
    /// // The last call for a name wins.
    /// let unset = HelperCommand::new("ls").env("LANG", "C").env_remove("LANG");
    /// assert!(unset.env.is_empty());
    /// assert_eq!(unset.env_remove, ["LANG"]);
    /// let set = HelperCommand::new("ls").env_remove("LANG").env("LANG", "C");
    /// assert_eq!(command_line(&set), "env LANG=C ls");
    /// ```
    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        let key = key.into();
        self.env.retain(|(set, _)| *set != key);
        if !self.env_remove.contains(&key) {
            self.env_remove.push(key);
        }
        self
    }

    /// Starts from an empty environment. The variables of
    /// [`env`](Self::env) are added to it, whether they were given before
    /// or after this call.
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    /// Starts the helper in a session of its own, with no controlling
    /// terminal (see [`new_session`](Self::new_session)): for a helper
    /// that has no business with the user's terminal, as every tool of
    /// `spillguard mcp` is run.
    pub fn new_session(mut self, own: bool) -> Self {
        self.new_session = own;
        self
    }

    /// Sets the working directory.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Feeds `bytes` to the helper's stdin, then closes it.
    ///
    /// A helper that exits without reading them all makes the write fail
    /// with `EPIPE`, which the writer takes as the end. The kernel also
    /// raises `SIGPIPE` on such a write: Rust programs ignore it from the
    /// start, but a host that embeds this library in a program that does
    /// not must ignore `SIGPIPE` itself, or be ended by it.
    pub fn stdin_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = StdinMode::Bytes(bytes.into());
        self
    }

    /// Checks the description without running anything: a non-empty program,
    /// no NUL byte anywhere, environment names (set or removed) non-empty
    /// and without `=`, and a working directory that is a directory.
    pub fn validate(&self) -> Result<(), InvalidCommand> {
        if self.program.is_empty() {
            return Err(InvalidCommand::EmptyProgram);
        }
        if has_nul(&self.program) {
            return Err(InvalidCommand::Nul("the program"));
        }
        if self.args.iter().any(|a| has_nul(a)) {
            return Err(InvalidCommand::Nul("an argument"));
        }
        for (key, value) in &self.env {
            if !valid_env_name(key) {
                return Err(InvalidCommand::EnvName(key.to_string_lossy().into_owned()));
            }
            if has_nul(value) {
                return Err(InvalidCommand::Nul("an environment value"));
            }
        }
        if let Some(key) = self.env_remove.iter().find(|key| !valid_env_name(key)) {
            return Err(InvalidCommand::EnvName(key.to_string_lossy().into_owned()));
        }
        if let Some(cwd) = &self.cwd {
            if has_nul(cwd.as_os_str()) {
                return Err(InvalidCommand::Nul("the working directory"));
            }
            if !cwd.is_dir() {
                return Err(InvalidCommand::NotADirectory(cwd.clone()));
            }
        }
        Ok(())
    }

    /// The confinement steps, once.
    fn take_setup(&self) -> Option<ChildSetup> {
        self.confine.0.as_ref().and_then(|slot| match slot.lock() {
            Ok(mut setup) => setup.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        })
    }

    /// Spawns a confined call's helper, as every runtime does for such a
    /// call: in its own process group, stdout and stderr piped, stdin as
    /// the mode says, its confinement's steps taken before exec; `None`
    /// for a command that is not confined (the runtime spawns it itself),
    /// or whose steps were taken. On error nothing is left running.
    pub fn spawn_confined(&self) -> Option<io::Result<crate::confine::RawChild>> {
        let setup = self.take_setup()?;
        Some(crate::confine::spawn::spawn(self, setup))
    }

    /// Makes the spawned child take `setup`'s steps before exec.
    pub(crate) fn confine(&mut self, setup: ChildSetup) {
        self.confine = ChildSlot(Some(Arc::new(Mutex::new(Some(setup)))));
    }

    /// The target as shown to a user when the caller has nothing better: the
    /// program (or script) followed by the arguments.
    pub fn display_line(&self) -> String {
        let mut line = self.program.to_string_lossy().into_owned();
        for arg in &self.args {
            line.push(' ');
            line.push_str(&arg.to_string_lossy());
        }
        line
    }

    /// The `PATH` the helper's program name is looked up in: the one its
    /// environment sets, else this process's (`None` when the helper's
    /// environment has none).
    pub(crate) fn search_path(&self) -> Option<OsString> {
        let set = self.env.iter().rev().find(|(key, _)| key == "PATH");
        match set {
            Some((_, value)) => Some(value.clone()),
            None if self.env_clear || self.env_remove.iter().any(|key| key == "PATH") => None,
            None => std::env::var_os("PATH"),
        }
    }

    /// The std command: own process group (`process_group(0)`, so the pgid
    /// is the child's pid), stdout and stderr piped, stdin null unless bytes
    /// are to be written or the call is streamed, no shell unless [`shell`](Self::shell). The smol
    /// and tokio adapters convert it into their runtime's command. A
    /// confined call is not spawned from it: see
    /// [`spawn_confined`](Self::spawn_confined).
    pub fn to_std(&self) -> Command {
        let mut command = if self.shell {
            let mut sh = Command::new("/bin/sh");
            sh.arg("-c").arg(&self.program).arg("sh");
            sh
        } else {
            Command::new(&self.program)
        };
        command.args(&self.args);
        if self.env_clear {
            command.env_clear();
        }
        for key in &self.env_remove {
            command.env_remove(key);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        command
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .stdin(match self.stdin {
                StdinMode::Null => std::process::Stdio::null(),
                StdinMode::Bytes(_) | StdinMode::Streamed => std::process::Stdio::piped(),
            });
        command
    }
}

fn has_nul(s: &OsStr) -> bool {
    s.as_bytes().contains(&0)
}

fn valid_env_name(key: &OsStr) -> bool {
    !key.is_empty() && !key.as_bytes().contains(&b'=') && !has_nul(key)
}

/// Why a [`HelperCommand`] was refused before anything ran.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidCommand {
    /// The program is the empty string.
    EmptyProgram,
    /// A NUL byte in the part named.
    Nul(&'static str),
    /// An environment variable name that is empty or contains `=` or NUL.
    EnvName(String),
    /// The working directory does not exist or is not a directory.
    NotADirectory(PathBuf),
}

impl fmt::Display for InvalidCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidCommand::EmptyProgram => write!(f, "the program is empty"),
            InvalidCommand::Nul(part) => write!(f, "{part} contains a NUL byte"),
            InvalidCommand::EnvName(name) => {
                write!(f, "invalid environment variable name {name:?}")
            }
            InvalidCommand::NotADirectory(dir) => {
                write!(
                    f,
                    "the working directory {} is not a directory",
                    dir.display()
                )
            }
        }
    }
}

impl std::error::Error for InvalidCommand {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_checked() {
        assert_eq!(HelperCommand::new("ls").validate(), Ok(()));
        assert_eq!(
            HelperCommand::new("ls").arg("a\0b").validate(),
            Err(InvalidCommand::Nul("an argument"))
        );
        assert_eq!(
            HelperCommand::new("l\0s").validate(),
            Err(InvalidCommand::Nul("the program"))
        );
        assert_eq!(
            HelperCommand::new("ls").env("A=B", "c").validate(),
            Err(InvalidCommand::EnvName("A=B".into()))
        );
        assert_eq!(
            HelperCommand::new("ls").env("A", "c\0").validate(),
            Err(InvalidCommand::Nul("an environment value"))
        );
        assert_eq!(
            HelperCommand::new("ls")
                .current_dir("/nonexistent/dir")
                .validate()
                .map_err(|e| e.to_string()),
            Err("the working directory /nonexistent/dir is not a directory".into())
        );
        assert_eq!(HelperCommand::new("ls").current_dir("/").validate(), Ok(()));
        for removed in ["", "A=B", "A\0"] {
            assert_eq!(
                HelperCommand::new("ls").env_remove(removed).validate(),
                Err(InvalidCommand::EnvName(removed.into())),
                "{removed:?}"
            );
        }
    }

    /// What the std command is told to set (`Some`) and to remove (`None`).
    fn explicit_env(command: &HelperCommand) -> Vec<(String, Option<String>)> {
        command
            .to_std()
            .get_envs()
            .map(|(k, v)| {
                let text = |s: &OsStr| s.to_str().unwrap().to_owned();
                (text(k), v.map(text))
            })
            .collect()
    }

    #[test]
    fn the_last_env_or_env_remove_of_a_name_wins() {
        let set = |k: &str, v: &str| (k.to_owned(), Some(v.to_owned()));
        let unset = |k: &str| (k.to_owned(), None);
        let removed_last = HelperCommand::new("ls")
            .envs([("A", "1"), ("B", "2")])
            .env_remove("A");
        assert_eq!(
            removed_last.env,
            [(OsString::from("B"), OsString::from("2"))]
        );
        assert_eq!(removed_last.env_remove, ["A"]);
        assert_eq!(explicit_env(&removed_last), [unset("A"), set("B", "2")]);

        let set_last = HelperCommand::new("ls")
            .env_remove("A")
            .env_remove("A")
            .env("A", "3");
        assert!(set_last.env_remove.is_empty());
        assert_eq!(explicit_env(&set_last), [set("A", "3")]);

        let after_clear = HelperCommand::new("ls")
            .env_clear()
            .env("A", "1")
            .env_remove("A")
            .env("B", "2");
        assert_eq!(after_clear.env_remove, ["A"]);
        // A removal from an environment that starts empty is nothing to do.
        assert_eq!(explicit_env(&after_clear), [set("B", "2")]);
    }

    #[test]
    fn display_line_joins_program_and_arguments() {
        let c = HelperCommand::new("ssh").args(["-v", "web-3"]);
        assert_eq!(c.display_line(), "ssh -v web-3");
    }
}

/// Where a helper's standard input comes from, or its standard output
/// goes, as `std::process::Stdio` says it: given to the builder's
/// [`stdin`](crate::CallBuilder::stdin) and
/// [`stdout`](crate::CallBuilder::stdout), each set on its own.
///
/// | | `stdin(..)` | `stdout(..)` |
/// | --- | --- | --- |
/// | [`null()`](Self::null) | `/dev/null` (the default) | refused |
/// | [`piped()`](Self::piped) | written by the caller through the handle's stream | read by the caller through the handle's stream |
/// | [`bytes(b)`](Self::bytes) | these bytes, then end-of-file | refused |
/// | [`captured()`](Self::captured) | refused | kept within its budget for the outcome (the default) |
///
/// A call refused for its streams ends `failed_before_dispatch`, the
/// record saying why; nothing runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stdio(StdioKind);

#[derive(Debug, Clone, PartialEq, Eq)]
enum StdioKind {
    Null,
    Piped,
    Bytes(Vec<u8>),
    Captured,
}

impl Stdio {
    /// `/dev/null`.
    pub fn null() -> Self {
        Self(StdioKind::Null)
    }

    /// A pipe the caller holds through the call's handle
    /// (`handle.streams()`).
    pub fn piped() -> Self {
        Self(StdioKind::Piped)
    }

    /// These bytes, written to the helper's stdin, then end-of-file.
    pub fn bytes(bytes: impl Into<Vec<u8>>) -> Self {
        Self(StdioKind::Bytes(bytes.into()))
    }

    /// Captured within the call's budget, for the outcome.
    pub fn captured() -> Self {
        Self(StdioKind::Captured)
    }

    /// What the helper reads, or why this cannot be its stdin.
    pub(crate) fn as_stdin(&self) -> Result<StdinMode, &'static str> {
        match &self.0 {
            StdioKind::Null => Ok(StdinMode::Null),
            StdioKind::Piped => Ok(StdinMode::Streamed),
            StdioKind::Bytes(bytes) => Ok(StdinMode::Bytes(bytes.clone())),
            StdioKind::Captured => {
                Err("stdin cannot be captured: give stdin(Stdio::null()), piped() or bytes(..)")
            }
        }
    }

    /// Whether this stdout goes to the caller, or why it cannot be one.
    pub(crate) fn stdout_streamed(&self) -> Result<bool, &'static str> {
        match &self.0 {
            StdioKind::Piped => Ok(true),
            StdioKind::Captured => Ok(false),
            StdioKind::Null | StdioKind::Bytes(_) => {
                Err("stdout is captured or piped: give stdout(Stdio::captured()) or piped()")
            }
        }
    }
}
