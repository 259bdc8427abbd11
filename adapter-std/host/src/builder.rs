//! The front door of every host: [`CallBuilder`], in the manner of
//! `std::process::Command`, with a default for every field of the call.
//!
//! An adapter's `Host::command("prog")` returns a builder; `.arg(..)`,
//! `.env(..)` and the call's own fields (`.target(..)`,
//! `.approval(Approval::Required)`, `.deadline(..)`) refine it, and
//! `.run()` (blocking on std, a future on smol and tokio) or `.start()` (a
//! handle to approve, cancel or wait on) end it. What the adapter does with
//! a finished request is its `start` (see [`Launch`]).
//!
//! [`Resolved`] is a request with every default filled in: a fresh
//! `call_id`, the host's session, the program's file name as `action`,
//! the program as `target`, the shell-quoted command line as `summary`
//! (so the card shows exactly what runs), and the host's settings for the
//! call's kind with the request's own deadline, approval timeout and
//! result channel.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use spillguard_core::{
    CallKind, CallSettings, CallSpec, Confinement, DisconnectPolicy, ResultChannel,
    ResultClassifier, StdoutMode,
};

use crate::command::{HelperCommand, StdinMode, Stdio};
use crate::ids::{fresh_span_id, fresh_trace_id};
use spillguard_core::trace::{CallTrace, TraceParent};

/// Whether a call waits for a person's approval before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Approval {
    /// The helper runs as soon as the call is validated (the default).
    #[default]
    NotRequired,
    /// The approval card is shown once, and nothing runs until the handle's
    /// `approve()`; `deny()` or the card's deadline end the call first.
    /// A discovery call never needs approval: asking for it is refused
    /// (`failed_before_dispatch`).
    Required,
}

impl Approval {
    /// Whether approval is required.
    pub fn is_required(self) -> bool {
        self == Approval::Required
    }
}

/// What a host does with a finished [`CallBuilder`]: start the call
/// and return its handle at once. Each host implements it, and test doubles
/// can too (a `launch` that returns the request itself). A caller does not
/// need it: the builder's `start()` and `run()` are inherent on each kind
/// of host, with their concrete types:
///
/// | host | `start()` | `run()` |
/// | --- | --- | --- |
/// | `spillguard_std::Host` | `spillguard_std::CallHandle` | the `Outcome` (blocking) |
/// | `spillguard_smol::Host` | `spillguard_smol::CallHandle` | [`Run`](crate::asynchronous::Run), a future of the `Outcome` |
/// | `spillguard_tokio::Host` | `spillguard_tokio::CallHandle` | [`Run`](crate::asynchronous::Run), a future of the `Outcome` |
pub trait Launch {
    /// The handle a started call returns: each adapter's `CallHandle`.
    type Handle;
    /// Starts the call; returns at once.
    fn launch(&self, request: CallRequest) -> Self::Handle;
}

/// A call as the caller described it; what it left out takes its default
/// when the host resolves it ([`resolve`](Self::resolve)).
#[derive(Debug, Clone)]
pub struct CallRequest {
    command: HelperCommand,
    call_id: Option<String>,
    session_id: Option<String>,
    kind: CallKind,
    action: Option<String>,
    target: Option<String>,
    summary: Option<String>,
    card_lines: Vec<(String, String)>,
    approval: Approval,
    deadline: Option<Option<Duration>>,
    approval_timeout: Option<Duration>,
    settings: Option<CallSettings>,
    edits: Vec<SettingsEdit>,
    result: Option<ResultChannel>,
    classifier: Option<ResultClassifier>,
    streamed: bool,
    kill_on_drop: bool,
    confinement: Option<Confinement>,
    stderr_tap: Option<StderrTap>,
    refused: Option<String>,
    trace_parent: Option<(TraceParent, Option<String>)>,
    new_trace: bool,
    stdout_truncation_allowed: bool,
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stdin_close_grace: Option<Duration>,
}

/// Sees each chunk of a helper's stderr as the owner reads it, before the
/// capture (`CallBuilder::stderr_tap`). It runs in the owner's loop: it must
/// never block (drop what it cannot pass on at once).
#[derive(Clone)]
pub struct StderrTap(pub Arc<TapFn>);

/// The function of a [`StderrTap`].
pub type TapFn = dyn Fn(&[u8]) + Send + Sync;

impl std::fmt::Debug for StderrTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StderrTap")
    }
}

/// An edit of a call's settings (`CallBuilder::edit_settings`), made when
/// the host resolves the request.
#[derive(Clone)]
struct SettingsEdit(Arc<dyn Fn(&mut CallSettings) + Send + Sync>);

impl std::fmt::Debug for SettingsEdit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SettingsEdit")
    }
}

/// A request with every default filled in: what a host starts.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// Who, what, where.
    pub spec: CallSpec,
    /// What runs.
    pub command: HelperCommand,
    /// Whether it waits for approval.
    pub approval: Approval,
    /// Its budgets and timings.
    pub settings: CallSettings,
    /// What sees each stderr chunk, if anything.
    pub stderr_tap: Option<StderrTap>,
    /// Why the caller's own checks refused the call, if they did: it ends
    /// `failed_before_dispatch` with this as its failure.
    pub refused: Option<String>,
}

impl CallRequest {
    /// A request to run `command`, every other field at its default.
    pub fn new(command: HelperCommand) -> Self {
        Self {
            command,
            call_id: None,
            session_id: None,
            kind: CallKind::Action,
            action: None,
            target: None,
            summary: None,
            card_lines: Vec::new(),
            approval: Approval::NotRequired,
            deadline: None,
            approval_timeout: None,
            settings: None,
            edits: Vec::new(),
            result: None,
            classifier: None,
            streamed: false,
            kill_on_drop: false,
            confinement: None,
            stderr_tap: None,
            refused: None,
            trace_parent: None,
            new_trace: false,
            stdout_truncation_allowed: false,
            stdin: None,
            stdout: None,
            stdin_close_grace: None,
        }
    }

    /// Whether `output()` accepts a stdout cut at its budget
    /// ([`CallBuilder::allow_stdout_truncation`]).
    pub fn stdout_truncation_allowed(&self) -> bool {
        self.stdout_truncation_allowed
    }

    /// The command it runs.
    pub fn command(&self) -> &HelperCommand {
        &self.command
    }

    /// Every field of `spec` at once (`CallBuilder::spec`).
    fn set_spec(&mut self, spec: CallSpec) {
        let CallSpec {
            call_id,
            session_id,
            kind,
            action,
            target,
            summary,
            card_lines,
        } = spec;
        self.call_id = Some(call_id);
        self.session_id = Some(session_id);
        self.kind = kind;
        self.action = Some(action);
        self.target = Some(target);
        self.summary = Some(summary);
        self.card_lines = card_lines;
    }

    fn confinement_mut(&mut self) -> &mut Confinement {
        self.confinement.get_or_insert_with(Confinement::default)
    }

    /// A request that starts a trace of its own when it names no parent
    /// span (what [`HostOptions::start_traces`](crate::HostOptions::start_traces)
    /// asks of every call).
    pub fn start_trace(mut self) -> Self {
        self.new_trace = true;
        self
    }

    /// Fills in the defaults: a fresh `call_id`, the host's `session_id`,
    /// `action` and `target` from the program, the shell-quoted command line
    /// as `summary`, and the settings the host gives a call of this kind
    /// (`settings_for`), with this request's deadline and approval timeout.
    pub fn resolve(
        self,
        session_id: &str,
        settings_for: impl FnOnce(CallKind) -> CallSettings,
    ) -> Resolved {
        let program = program_name(&self.command);
        let spec = CallSpec {
            call_id: self.call_id.unwrap_or_else(|| crate::fresh_id("c")),
            session_id: self.session_id.unwrap_or_else(|| session_id.to_owned()),
            kind: self.kind,
            action: self.action.unwrap_or_else(|| program.clone()),
            target: self
                .target
                .unwrap_or_else(|| self.command.program.to_string_lossy().into_owned()),
            summary: self.summary.unwrap_or_else(|| command_line(&self.command)),
            card_lines: self.card_lines,
        };
        let mut settings = self.settings.unwrap_or_else(|| settings_for(self.kind));
        for edit in &self.edits {
            (edit.0)(&mut settings);
        }
        if let Some(deadline) = self.deadline {
            settings.deadline = deadline;
        }
        if let Some(timeout) = self.approval_timeout {
            settings.approval_timeout = timeout;
        }
        if let Some(result) = self.result {
            settings.result = result;
        }
        if let Some(classifier) = self.classifier {
            settings.result_classifier = Some(classifier);
        }
        // The streams: `.streamed()` is both piped under the MCP stdio
        // shutdown; `.stdin(..)` and `.stdout(..)` each set their own, and a
        // piped stdout alone ends as any helper does.
        let mut refused = self.refused;
        let mut command = self.command;
        let stdout_streamed = match &self.stdout {
            Some(stdout) => stdout.stdout_streamed(),
            None => Ok(false),
        };
        match stdout_streamed {
            Ok(_) if self.streamed => settings.stdout_mode = StdoutMode::Streamed,
            Ok(true) => {
                settings.stdout_mode = StdoutMode::Streamed;
                settings.mcp_shutdown = self.stdin_close_grace.is_some();
            }
            Ok(false) => {}
            Err(why) => refused = refused.or(Some(why.to_owned())),
        }
        if let Some(grace) = self.stdin_close_grace {
            settings.stdin_close_grace = grace;
        }
        settings.stdout_truncation_allowed = self.stdout_truncation_allowed;
        if self.kill_on_drop {
            settings.on_client_disconnect = DisconnectPolicy::Cancel;
        }
        if let Some(confinement) = self.confinement {
            settings.confinement = confinement;
        }
        command.stdout_streamed = settings.stdout_mode == StdoutMode::Streamed;
        if self.streamed {
            command.stdin = StdinMode::Streamed;
        } else if let Some(stdin) = &self.stdin {
            match stdin.as_stdin() {
                Ok(mode) => command.stdin = mode,
                Err(why) => refused = refused.or(Some(why.to_owned())),
            }
        }
        if command.stdin == StdinMode::Streamed && !command.stdout_streamed {
            refused = refused.or(Some(
                "stdin(Stdio::piped()) needs stdout(Stdio::piped()): the caller's streams come as a pair"
                    .to_owned(),
            ));
        }
        let trace = match self.trace_parent {
            Some((parent, state)) => Some(CallTrace::child_of(parent, fresh_span_id(), state)),
            None if self.new_trace => Some(CallTrace::root(fresh_trace_id(), fresh_span_id())),
            None => None,
        };
        if let Some(trace) = trace {
            // After the summary was made: the card shows the command as
            // the caller wrote it.
            command = command.env("TRACEPARENT", trace.traceparent());
            command = match &trace.trace_state {
                Some(state) => command.env("TRACESTATE", state),
                None => command.env_remove("TRACESTATE"),
            };
            settings.trace = Some(trace);
        }
        Resolved {
            spec,
            command,
            approval: self.approval,
            settings,
            stderr_tap: self.stderr_tap,
            refused,
        }
    }
}

/// A call being described, from an adapter's `Host::command`,
/// `Host::shell` or `Host::call`; ends with [`run`](Self::run) or
/// [`start`](Self::start).
///
/// Every field of the call has a default: a fresh `call_id` (`c_` and 16
/// hex digits), the host's session, kind `action`, the program's file name
/// as `action`, the program as `target`, the shell-quoted command line as
/// `summary` (so an approval card shows exactly what runs), no approval,
/// and the host's settings.
#[derive(Debug)]
#[must_use = "a call runs only once `run()` or `start()` is called"]
pub struct CallBuilder<'h, H> {
    host: &'h H,
    request: CallRequest,
}

impl<'h, H> CallBuilder<'h, H> {
    /// A builder on `host` for `command`.
    pub fn on(host: &'h H, command: HelperCommand) -> Self {
        Self {
            host,
            request: CallRequest::new(command),
        }
    }

    /// The request as described so far.
    pub fn request(&self) -> &CallRequest {
        &self.request
    }

    /// The host and the request as described, without starting anything
    /// (for a host of one's own: [`Launch::launch`] starts it).
    pub fn into_parts(self) -> (&'h H, CallRequest) {
        (self.host, self.request)
    }

    /// The request as described, without starting anything.
    pub fn into_request(self) -> CallRequest {
        self.request
    }

    /// The request of a call run to its end (`run`, `output`, `status`),
    /// whose handle no caller holds: a piped stream is made as
    /// `std::process::Command::output` makes it, stdout captured within
    /// its budget and stdin at end-of-file (`.streamed()` included), so
    /// that no helper blocks on a pipe nobody can reach.
    pub(crate) fn run_to_end(mut self) -> Self {
        let request = &mut self.request;
        if request.streamed || request.stdout == Some(Stdio::piped()) {
            request.stdout = Some(Stdio::captured());
        }
        if request.streamed || request.stdin == Some(Stdio::piped()) {
            request.stdin = Some(Stdio::null());
        }
        request.streamed = false;
        self
    }

    /// Edits the request in place: what each builder method does.
    fn with(mut self, edit: impl FnOnce(&mut CallRequest)) -> Self {
        edit(&mut self.request);
        self
    }

    crate::call_builder_methods!(real);
}

impl<'h, H: Launch> CallBuilder<'h, H> {
    /// Starts the call on its host, whatever kind of host it is, and
    /// returns the host's handle (for code written over [`Launch`]; the
    /// adapters' builders have `start()` with their own types).
    pub fn launch(self) -> H::Handle {
        self.host.launch(self.request)
    }
}

/// The program's file name, as the default action.
pub(crate) fn program_name(command: &HelperCommand) -> String {
    if command.shell {
        return "sh".to_owned();
    }
    Path::new(&command.program)
        .file_name()
        .unwrap_or(command.program.as_os_str())
        .to_string_lossy()
        .into_owned()
}

/// The command line as a POSIX shell would read it back: every word that
/// is not made only of safe characters is quoted (`'…'`, or `$'…'` with
/// escapes when it holds control characters or bytes that are not UTF-8),
/// so an approval card shows where each argument starts and ends and
/// cannot be redrawn by the text it shows. What else changes what runs is
/// shown too: the working directory (`cd DIR &&`) and the environment
/// (`env -i` when it starts empty, else `-u NAME` for each variable
/// removed, then `K=V`).
///
/// ```
/// use spillguard_host::{HelperCommand, command_line};
///
/// let ssh = HelperCommand::new("ssh").args(["-o", "BatchMode=yes", "web-3", "systemctl restart web"]);
/// assert_eq!(command_line(&ssh), "ssh -o BatchMode=yes web-3 'systemctl restart web'");
/// let tricky = HelperCommand::new("echo").args(["it's", "", "a\nb"]);
/// assert_eq!(command_line(&tricky), r"echo 'it'\''s' '' $'a\nb'");
/// let script = HelperCommand::shell_script(r#"rm -r "$1""#).arg("/tmp/x");
/// assert_eq!(command_line(&script), r#"sh -c 'rm -r "$1"' sh /tmp/x"#);
/// let placed = HelperCommand::new("make").current_dir("/src").env_clear().env("CC", "clang");
/// assert_eq!(command_line(&placed), "cd /src && env -i CC=clang make");
/// let kept_out = HelperCommand::new("make").env_remove("MAKEFLAGS").env("CC", "clang");
/// assert_eq!(command_line(&kept_out), "env -u MAKEFLAGS CC=clang make");
/// ```
pub fn command_line(command: &HelperCommand) -> String {
    let mut words: Vec<String> = Vec::with_capacity(command.args.len() + 4);
    if let Some(dir) = &command.cwd {
        words.push("cd".into());
        words.push(quote(dir.as_os_str()));
        words.push("&&".into());
    }
    // A removal from an environment that starts empty changes nothing.
    let removed: &[OsString] = if command.env_clear {
        &[]
    } else {
        &command.env_remove
    };
    if command.env_clear || !command.env.is_empty() || !removed.is_empty() {
        words.push("env".into());
        if command.env_clear {
            words.push("-i".into());
        }
        for key in removed {
            words.push("-u".into());
            words.push(quote(key));
        }
        for (key, value) in &command.env {
            let mut pair = key.clone();
            pair.push("=");
            pair.push(value);
            words.push(quote(&pair));
        }
    }
    if command.shell {
        words.push("sh".into());
        words.push("-c".into());
    }
    words.push(quote(&command.program));
    if command.shell && !command.args.is_empty() {
        // `/bin/sh -c SCRIPT sh ARGS…`: the first word after the script is
        // the script's `$0`.
        words.push("sh".into());
    }
    words.extend(command.args.iter().map(|arg| quote(arg)));
    words.join(" ")
}

fn quote(word: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = word.as_bytes();
    let safe = |b: u8| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b);
    if !bytes.is_empty() && bytes.iter().all(|&b| safe(b)) {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let plain = std::str::from_utf8(bytes)
        .ok()
        .filter(|text| !text.chars().any(char::is_control));
    match plain {
        Some(text) => format!("'{}'", text.replace('\'', r"'\''")),
        None => {
            let mut out = String::from("$'");
            for chunk in bytes.utf8_chunks() {
                for c in chunk.valid().chars() {
                    match c {
                        '\n' => out.push_str("\\n"),
                        '\t' => out.push_str("\\t"),
                        '\r' => out.push_str("\\r"),
                        '\'' => out.push_str("\\'"),
                        '\\' => out.push_str("\\\\"),
                        c if c.is_control() => {
                            let mut buf = [0; 4];
                            for b in c.encode_utf8(&mut buf).bytes() {
                                out.push_str(&format!("\\x{b:02x}"));
                            }
                        }
                        c => out.push(c),
                    }
                }
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            out.push('\'');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use spillguard_core::Config;

    fn settings(kind: CallKind) -> CallSettings {
        match kind {
            CallKind::Discovery => CallSettings::discovery(&Config::default()),
            _ => CallSettings::action(&Config::default()),
        }
    }

    #[test]
    fn every_field_has_a_default() {
        let command = HelperCommand::new("/usr/bin/ssh").args(["web-3", "uptime -p"]);
        let resolved = CallRequest::new(command).resolve("s_host", settings);
        let spec = &resolved.spec;
        assert!(spec.call_id.starts_with("c_") && spec.call_id.len() == 18);
        assert_eq!(spec.session_id, "s_host");
        assert_eq!(spec.kind, CallKind::Action);
        assert_eq!(spec.action, "ssh");
        assert_eq!(spec.target, "/usr/bin/ssh");
        assert_eq!(spec.summary, "/usr/bin/ssh web-3 'uptime -p'");
        assert_eq!(resolved.approval, Approval::NotRequired);
        assert_eq!(resolved.settings, settings(CallKind::Action));
    }

    /// A host whose `launch` is the request itself.
    struct Requests;

    impl Launch for Requests {
        type Handle = CallRequest;

        fn launch(&self, request: CallRequest) -> CallRequest {
            request
        }
    }

    fn env_of(resolved: &Resolved, name: &str) -> Option<String> {
        let command = &resolved.command;
        let set = command
            .env
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.to_string_lossy().into_owned());
        assert!(set.is_none() || !command.env_remove.iter().any(|key| key == name));
        set
    }

    /// About trace context: a named parent makes the call's span its
    /// child, the helper is told the call's span, and the card's summary
    /// is the command as written.
    #[test]
    fn a_trace_parent_makes_the_call_a_child_span_and_tells_the_helper() {
        use spillguard_core::trace::{TraceParent, hex};
        let parent =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let resolved = CallBuilder::on(&Requests, HelperCommand::new("echo").arg("hi"))
            .trace_parent(parent, Some("congo=t61rcWkgMzE".into()))
            .into_request()
            .resolve("s_host", settings);
        let trace = resolved.settings.trace.clone().expect("a trace");
        assert_eq!(trace.trace_id, parent.trace_id);
        assert_eq!(trace.parent_span_id, Some(parent.parent_id));
        assert_ne!(trace.span_id, [0; 8]);
        assert_ne!(trace.span_id, parent.parent_id);
        assert_eq!(
            env_of(&resolved, "TRACEPARENT").as_deref(),
            Some(
                format!(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
                    hex(&trace.span_id)
                )
                .as_str()
            )
        );
        assert_eq!(
            env_of(&resolved, "TRACESTATE").as_deref(),
            Some("congo=t61rcWkgMzE")
        );
        assert_eq!(resolved.spec.summary, "echo hi");
    }

    #[test]
    fn a_started_trace_is_a_root_and_no_trace_leaves_the_environment_alone() {
        let root = CallBuilder::on(&Requests, HelperCommand::new("true"))
            .into_request()
            .start_trace()
            .resolve("s_host", settings);
        let trace = root.settings.trace.clone().expect("a trace");
        assert_eq!(trace.parent_span_id, None);
        assert_ne!(trace.trace_id, [0; 16]);
        assert_eq!(env_of(&root, "TRACEPARENT"), Some(trace.traceparent()));
        assert_eq!(env_of(&root, "TRACESTATE"), None);
        assert!(
            root.command
                .env_remove
                .iter()
                .any(|key| key == "TRACESTATE")
        );
        let other = CallBuilder::on(&Requests, HelperCommand::new("true"))
            .into_request()
            .start_trace()
            .resolve("s_host", settings);
        assert_ne!(
            other.settings.trace.map(|t| t.trace_id),
            Some(trace.trace_id)
        );

        let plain = CallBuilder::on(&Requests, HelperCommand::new("true"))
            .into_request()
            .resolve("s_host", settings);
        assert_eq!(plain.settings.trace, None);
        assert!(plain.command.env.is_empty() && plain.command.env_remove.is_empty());
    }

    /// About the spec's fields: `Host::start(spec, ..)` and `.spec(..)`
    /// keep every one as given, whatever the builder said before.
    #[test]
    fn a_spec_given_whole_keeps_every_field() {
        let spec = CallSpec {
            call_id: "c_given".into(),
            session_id: "s_given".into(),
            kind: CallKind::Discovery,
            action: "dns.lookup".into(),
            target: "web-3".into(),
            summary: "resolve web-3".into(),
            card_lines: Vec::new(),
        };
        let resolved = CallBuilder::on(&Requests, HelperCommand::new("/usr/bin/host"))
            .call_id("c_replaced")
            .target("replaced")
            .spec(spec.clone())
            .into_request()
            .resolve("s_host", settings);
        assert_eq!(resolved.spec, spec);
        assert_eq!(resolved.settings, settings(CallKind::Discovery));
    }

    #[test]
    fn two_calls_never_share_an_id() {
        let ids: std::collections::HashSet<String> = (0..1000)
            .map(|_| {
                CallRequest::new(HelperCommand::new("true"))
                    .resolve("s", settings)
                    .spec
                    .call_id
            })
            .collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn settings_edits_apply_to_the_host_s_settings_for_the_final_kind() {
        let resolved = CallBuilder::on(&Requests, HelperCommand::new("ls"))
            .edit_settings(|settings| settings.approval_timeout = Duration::from_secs(7))
            .discovery()
            .kill_on_drop(true)
            .into_request()
            .resolve("s", settings);
        let mut expected = settings(CallKind::Discovery);
        expected.approval_timeout = Duration::from_secs(7);
        expected.on_client_disconnect = DisconnectPolicy::Cancel;
        assert_eq!(resolved.settings, expected);
    }

    #[test]
    fn a_discovery_gets_the_discovery_settings() {
        let mut request = CallRequest::new(HelperCommand::new("ls"));
        request.kind = CallKind::Discovery;
        request.deadline = Some(Some(Duration::from_millis(300)));
        let resolved = request.resolve("s", settings);
        let mut expected = settings(CallKind::Discovery);
        expected.deadline = Some(Duration::from_millis(300));
        assert_eq!(resolved.settings, expected);
        assert_eq!(resolved.settings.stderr.budget, 4096);
    }
}
