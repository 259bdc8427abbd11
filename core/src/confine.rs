//! Bounds beyond stderr: what a call asks of its helper's whole process
//! tree ([`Confinement`]: [`Limits`] on memory, processes, CPU time, open
//! files and file size; a [`Sandbox`] of files and network), what the
//! driver reports it enforced ([`Enforcement`]), and what the tree did
//! against them ([`TreeReport`], read into [`LimitHit`]).
//!
//! The core only describes and decides. Creating control groups, setting
//! resource limits and applying Landlock rules is the driver's job (the
//! host layer does it for every runtime); it reports what it enforced with
//! [`Input::Enforcement`](crate::Input::Enforcement) and, once
//! the helper exited, what the tree did with
//! [`Input::TreeReport`](crate::Input::TreeReport). The
//! record then says what was asked (`limits`, `sandbox`), by which
//! mechanism it held (`enforced`), what did not (`not_enforced`, only
//! ever non-empty when the caller allowed degraded mode), and which limit
//! stopped the tree (`limit_hit`).
//!
//! **Fail closed**: a restriction the driver cannot enforce refuses the
//! call before anything runs, unless [`Confinement::allow_degraded`] is
//! set; then the record lists what was not enforced. Never silent.
//!
//! ```
//! use spillguard_core::{Confinement, Limits, Network, Sandbox, parse_size};
//!
//! let confinement = Confinement {
//!     limits: Limits {
//!         memory_max: Some(parse_size("256M")?),
//!         pids_max: Some(64),
//!         cpu_seconds: Some(10),
//!         ..Limits::default()
//!     },
//!     sandbox: Sandbox {
//!         read_only: vec!["/srv/data".into()],
//!         network: Network::None,
//!         ..Sandbox::default()
//!     },
//!     ..Confinement::default()
//! };
//! assert_eq!(confinement.validate(), Ok(()));
//! assert_eq!(
//!     confinement.card_lines(),
//!     [
//!         ("limits".to_owned(), "memory 256 MiB, 64 processes, CPU 10 s".to_owned()),
//!         ("sandbox".to_owned(), "read-only /srv/data; network none".to_owned()),
//!     ]
//! );
//! # Ok::<(), String>(())
//! ```

use std::fmt;
use std::path::PathBuf;

use crate::ExitStatus;
use serde::{Deserialize, Serialize};

/// Resource limits on a helper's whole process tree. `None` is no limit.
///
/// Memory and process count hold for the whole tree (a control group);
/// CPU time, open files and file size are per process (`setrlimit`,
/// inherited by every descendant). Whenever any limit or restriction is
/// set, core dumps are off (`RLIMIT_CORE` 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Most memory the tree may use, in bytes (`memory.max`, or
    /// `memory.limit_in_bytes` on cgroup v1). Past it the kernel's
    /// out-of-memory killer ends a process of the tree.
    pub memory_max: Option<u64>,
    /// Most processes (and threads) the tree may hold at once
    /// (`pids.max`); forks past it fail with `EAGAIN`.
    pub pids_max: Option<u64>,
    /// CPU seconds each process may use (`RLIMIT_CPU`): `SIGXCPU` at the
    /// limit, `SIGKILL` one second later.
    pub cpu_seconds: Option<u64>,
    /// Most open file descriptors per process (`RLIMIT_NOFILE`).
    pub nofile: Option<u64>,
    /// Largest file a process may write, in bytes (`RLIMIT_FSIZE`):
    /// `SIGXFSZ` past it.
    pub file_size_max: Option<u64>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What a limit's value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitUnit {
    /// Bytes, written as a size (`"256M"`) or a number of bytes.
    Bytes,
    /// A count of things (processes, descriptors).
    Count,
    /// Seconds.
    Seconds,
}

/// A per-process resource limit (`setrlimit`), as the driver sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RlimitResource {
    /// `RLIMIT_CPU`.
    Cpu,
    /// `RLIMIT_NOFILE`.
    Nofile,
    /// `RLIMIT_FSIZE`.
    Fsize,
}

/// How the driver enforces a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitMechanism {
    /// A file of the tree's control group (`memory.max`, `pids.max`): the
    /// limit holds for the whole tree, and needs the group.
    Cgroup {
        /// The cgroup v2 file.
        v2: &'static str,
        /// The cgroup v1 controller and file, where there is one.
        v1: Option<&'static str>,
    },
    /// `setrlimit` in the helper, inherited by every descendant: the
    /// soft limit at the value, the hard one `hard_above` more.
    Rlimit {
        /// Which resource.
        resource: RlimitResource,
        /// How far above the value the hard limit is (CPU: 1 s, so that
        /// `SIGXCPU` comes before `SIGKILL`).
        hard_above: u64,
    },
}

impl LimitMechanism {
    /// The control-group controller a [`Cgroup`](Self::Cgroup) limit
    /// needs (`memory` for `memory.max`): the name its v2 file starts
    /// with. `None` for a per-process limit.
    pub fn controller(&self) -> Option<&'static str> {
        match self {
            Self::Cgroup { v2, .. } => v2.split('.').next(),
            Self::Rlimit { .. } => None,
        }
    }
}

/// One kind of limit, the one place that says everything about it: its
/// key in files and records, its command-line flag, its unit and bounds,
/// what the approval card says, how the driver enforces it, and how its
/// hit is read. The core (validation, card, file tables, `limit_hit`),
/// the host layer (control group or `setrlimit`), the CLI (its flags) and the
/// docs read [`LIMIT_KINDS`]; a new kind is one more row (and a field of
/// [`Limits`]).
#[derive(Clone, Copy)]
pub struct LimitKind {
    /// The key in `limits` tables and in `Limits` (`memory_max`).
    pub key: &'static str,
    /// The command-line flag (`--memory-max`).
    pub flag: &'static str,
    /// What the value counts.
    pub unit: LimitUnit,
    /// The flag's help, one sentence.
    pub help: &'static str,
    /// The largest value accepted (the smallest is 1).
    pub max: u64,
    /// How the driver enforces it.
    pub mechanism: LimitMechanism,
    /// The record's `limit_hit` when it stops the tree, if it can be seen.
    pub hit: Option<LimitHit>,
    get: fn(&Limits) -> Option<u64>,
    set: fn(&mut Limits, u64),
    card: fn(u64) -> String,
    /// Whether the tree hit the limit `value`, from what the driver
    /// measured and how the direct child ended.
    hit_by: fn(u64, &TreeReport, Option<ExitStatus>) -> bool,
}

impl fmt::Debug for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LimitKind")
            .field("key", &self.key)
            .field("flag", &self.flag)
            .field("unit", &self.unit)
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

impl LimitKind {
    /// Its value in `limits`.
    pub fn value(&self, limits: &Limits) -> Option<u64> {
        (self.get)(limits)
    }

    /// Sets it to `value` in `limits`.
    pub fn set(&self, limits: &mut Limits, value: u64) {
        (self.set)(limits, value);
    }

    /// What the approval card says of `value` (`memory 256 MiB`).
    pub fn card_text(&self, value: u64) -> String {
        (self.card)(value)
    }

    /// Its flag without the dashes (`memory-max`), as a refusal names it.
    pub fn name(&self) -> &'static str {
        self.flag.trim_start_matches('-')
    }

    /// Whether it holds for the whole tree through its control group.
    pub fn needs_tree(&self) -> bool {
        matches!(self.mechanism, LimitMechanism::Cgroup { .. })
    }

    /// Checks `value`: at least 1, at most [`max`](Self::max).
    pub fn check(&self, value: u64) -> Result<(), ConfineError> {
        if value == 0 {
            return Err(ConfineError::new(self.key, "must be greater than zero"));
        }
        if value > self.max {
            return Err(ConfineError::new(
                self.key,
                format!("is larger than {}", self.max),
            ));
        }
        Ok(())
    }
}

/// Every kind of limit, in the order the card, the flags and `limit_hit`
/// take them; see [`LimitKind`].
pub const LIMIT_KINDS: [LimitKind; 5] = [
    LimitKind {
        key: "memory_max",
        flag: "--memory-max",
        unit: LimitUnit::Bytes,
        help: "Most memory the whole tree may use (256M, 2G; K, M, G, T are powers of 1024); past it the kernel's OOM killer ends a process (`limit_hit: memory`)",
        max: u64::MAX,
        mechanism: LimitMechanism::Cgroup {
            v2: "memory.max",
            v1: Some("memory/memory.limit_in_bytes"),
        },
        hit: Some(LimitHit::Memory),
        get: |l| l.memory_max,
        set: |l, v| l.memory_max = Some(v),
        card: |v| format!("memory {}", size_text(v)),
        hit_by: |_, report, _| report.oom_kills > 0,
    },
    LimitKind {
        key: "pids_max",
        flag: "--pids-max",
        unit: LimitUnit::Count,
        help: "Most processes the whole tree may hold at once; forks past it fail (`limit_hit: pids`)",
        max: u32::MAX as u64,
        mechanism: LimitMechanism::Cgroup {
            v2: "pids.max",
            v1: Some("pids/pids.max"),
        },
        hit: Some(LimitHit::Pids),
        get: |l| l.pids_max,
        set: |l, v| l.pids_max = Some(v),
        card: |v| format!("{v} processes"),
        hit_by: |_, report, _| report.pids_refused > 0,
    },
    LimitKind {
        key: "cpu_seconds",
        flag: "--cpu-seconds",
        unit: LimitUnit::Seconds,
        help: "CPU seconds each process may use: SIGXCPU at N, SIGKILL at N + 1 (`limit_hit: cpu`)",
        max: u64::MAX,
        mechanism: LimitMechanism::Rlimit {
            resource: RlimitResource::Cpu,
            hard_above: 1,
        },
        hit: Some(LimitHit::Cpu),
        get: |l| l.cpu_seconds,
        set: |l, v| l.cpu_seconds = Some(v),
        card: |v| format!("CPU {v} s"),
        hit_by: |seconds, report, exit| {
            // A descendant's SIGXCPU reaches the record through the shell
            // that ran it (status 152); it counts when the tree's
            // accounting shows the CPU time spent.
            let signal = exit.and_then(|e| e.signal);
            let code = exit.and_then(|e| e.code);
            // Within the accounting's granularity (a scheduler tick of up
            // to 10 ms, twice): the tree's total and the kernel's check
            // of the limit are sampled apart.
            let spent = report.cpu_usage_us.is_some_and(|us| {
                us.saturating_add(CPU_ACCOUNTING_SLACK_US) >= seconds.saturating_mul(1_000_000)
            });
            let signalled = signal == Some(SIGXCPU) || report.cpu_signals > 0;
            let reported = code == Some(128 + SIGXCPU) || signal == Some(SIGKILL);
            signalled || (reported && spent)
        },
    },
    LimitKind {
        key: "nofile",
        flag: "--nofile",
        unit: LimitUnit::Count,
        help: "Most open files per process",
        max: u64::MAX,
        mechanism: LimitMechanism::Rlimit {
            resource: RlimitResource::Nofile,
            hard_above: 0,
        },
        hit: None,
        get: |l| l.nofile,
        set: |l, v| l.nofile = Some(v),
        card: |v| format!("{v} open files"),
        hit_by: |_, _, _| false,
    },
    LimitKind {
        key: "file_size_max",
        flag: "--file-size-max",
        unit: LimitUnit::Bytes,
        help: "Largest file a process may write (SIGXFSZ past it)",
        max: u64::MAX,
        mechanism: LimitMechanism::Rlimit {
            resource: RlimitResource::Fsize,
            hard_above: 0,
        },
        hit: Some(LimitHit::FileSize),
        get: |l| l.file_size_max,
        set: |l, v| l.file_size_max = Some(v),
        card: |v| format!("files up to {}", size_text(v)),
        hit_by: |_, _, exit| {
            let signal = exit.and_then(|e| e.signal);
            let code = exit.and_then(|e| e.code);
            signal == Some(SIGXFSZ) || code == Some(128 + SIGXFSZ)
        },
    },
];

/// How far below a CPU limit the tree's accounting may read when a
/// process was stopped at it (two ticks of a 100 Hz scheduler clock).
const CPU_ACCOUNTING_SLACK_US: u64 = 20_000;

const SIGKILL: i32 = 9;
const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;

/// The keys of [`LIMIT_KINDS`], in order.
const fn limit_keys() -> [&'static str; LIMIT_KINDS.len()] {
    let mut keys = [""; LIMIT_KINDS.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = LIMIT_KINDS[i].key;
        i += 1;
    }
    keys
}

/// What network a sandboxed helper may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Network {
    /// Whatever the host may use, within the listed ports if any (the
    /// default).
    #[default]
    Any,
    /// None at all: a network namespace of its own with loopback only.
    None,
}

impl Network {
    /// The name used in configuration and records: `any` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Any => "any",
            Network::None => "none",
        }
    }
}

/// The files and network a helper may reach. Empty lists restrict
/// nothing: files are restricted once a path is listed, TCP once a port
/// is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sandbox {
    /// Paths (and everything below them) the helper may read and execute,
    /// besides the system paths a program needs to start.
    pub read_only: Vec<PathBuf>,
    /// Paths (and everything below them) the helper may read and write.
    pub read_write: Vec<PathBuf>,
    /// Network reach.
    pub network: Network,
    /// The only TCP ports the helper may connect to (Landlock); empty:
    /// any, unless `network` is `none`.
    pub connect_ports: Vec<u16>,
    /// The only TCP ports the helper may bind (Landlock); only checked
    /// when `connect_ports` or `bind_ports` is non-empty: then binding any
    /// other port is refused.
    pub bind_ports: Vec<u16>,
}

impl Sandbox {
    /// Whether nothing is restricted.
    pub fn is_empty(&self) -> bool {
        !self.restricts_files() && !self.restricts_network()
    }

    /// Whether file access is restricted (a path is listed).
    pub fn restricts_files(&self) -> bool {
        !self.read_only.is_empty() || !self.read_write.is_empty()
    }

    /// Whether TCP ports are restricted (a port is listed).
    pub fn restricts_ports(&self) -> bool {
        !self.connect_ports.is_empty() || !self.bind_ports.is_empty()
    }

    /// Whether network access is restricted at all.
    pub fn restricts_network(&self) -> bool {
        self.network == Network::None || self.restricts_ports()
    }
}

/// Everything a call asks of its helper's tree beyond stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Confinement {
    /// Resource limits.
    pub limits: Limits,
    /// Files and network.
    pub sandbox: Sandbox,
    /// Run even when a restriction cannot be enforced on this machine;
    /// the record lists what was not (`not_enforced`). Off by default:
    /// such a call is refused before anything runs.
    pub allow_degraded: bool,
    /// Whether the helper's whole tree gets a control group of its own,
    /// so that the end of the call kills all of it (a descendant that
    /// left the process group with `setsid` included):
    ///
    /// * `None` (the default): wherever the host can make one; where it
    ///   cannot, the helper's process group is what a stop signals, the
    ///   record says `tree_kill: "process-group"`, and nothing is refused.
    /// * `Some(true)`: required. A call for which no group can be made is
    ///   refused with one line, unless [`allow_degraded`](Self::allow_degraded)
    ///   (then it runs, and `not_enforced` lists it).
    /// * `Some(false)`: never; not with `memory_max` or `pids_max`, which
    ///   need the group.
    pub contain_tree: Option<bool>,
}

impl Confinement {
    /// Whether nothing is asked: the helper runs as without confinement
    /// (its process group is what a stop signals).
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.sandbox.is_empty() && self.contain_tree != Some(true)
    }

    /// Whether the helper's tree should get a control group of its own:
    /// unless the call opted out (`contain_tree = Some(false)`).
    pub fn wants_tree(&self) -> bool {
        self.contain_tree != Some(false)
    }

    /// Whether a control group is required: asked for, or needed by a
    /// memory or process limit.
    pub fn requires_tree(&self) -> bool {
        self.contain_tree == Some(true) || self.tree_limit().is_some()
    }

    /// The first limit set that holds for the whole tree (through its
    /// control group), if any.
    fn tree_limit(&self) -> Option<&'static LimitKind> {
        LIMIT_KINDS
            .iter()
            .find(|kind| kind.needs_tree() && kind.value(&self.limits).is_some())
    }

    /// Checks what can be checked without the machine: no zero limit, no
    /// port 0, no relative or empty path.
    ///
    /// ```
    /// use spillguard_core::{Confinement, Limits};
    ///
    /// let zero = Confinement {
    ///     limits: Limits { pids_max: Some(0), ..Limits::default() },
    ///     ..Confinement::default()
    /// };
    /// assert_eq!(zero.validate().unwrap_err().to_string(), "pids_max: must be greater than zero");
    /// ```
    pub fn validate(&self) -> Result<(), ConfineError> {
        for kind in &LIMIT_KINDS {
            if let Some(value) = kind.value(&self.limits) {
                kind.check(value)?;
            }
        }
        if let (Some(false), Some(kind)) = (self.contain_tree, self.tree_limit()) {
            return Err(ConfineError::new(
                kind.key,
                "needs the tree's control group, which contain_tree = false turns off",
            ));
        }
        let ports = [
            ("connect_ports", &self.sandbox.connect_ports),
            ("bind_ports", &self.sandbox.bind_ports),
        ];
        for (field, list) in ports {
            if list.contains(&0) {
                return Err(ConfineError::new(
                    field,
                    "port 0 is not a port (1 to 65535)",
                ));
            }
        }
        let paths = [
            ("read_only", &self.sandbox.read_only),
            ("read_write", &self.sandbox.read_write),
        ];
        for (field, list) in paths {
            for path in list {
                if !path.is_absolute() {
                    return Err(ConfineError::new(
                        field,
                        format!("{} is not an absolute path", path.display()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The approval card's lines that state the helper's bounds:
    /// `limits` and `sandbox`, each present when something is set, so the
    /// user approves an action whose reach is stated.
    pub fn card_lines(&self) -> Vec<(String, String)> {
        let mut lines = Vec::new();
        let parts: Vec<String> = LIMIT_KINDS
            .iter()
            .filter_map(|kind| Some(kind.card_text(kind.value(&self.limits)?)))
            .collect();
        if !parts.is_empty() {
            lines.push(("limits".to_owned(), parts.join(", ")));
        }
        let s = &self.sandbox;
        let mut parts = Vec::new();
        let paths = |list: &[PathBuf]| {
            list.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        if s.restricts_files() {
            if !s.read_only.is_empty() {
                parts.push(format!("read-only {}", paths(&s.read_only)));
            }
            if !s.read_write.is_empty() {
                parts.push(format!("read-write {}", paths(&s.read_write)));
            }
        }
        if s.network == Network::None {
            parts.push("network none".to_owned());
        } else if s.restricts_ports() {
            let ports = |list: &[u16]| {
                if list.is_empty() {
                    "none".to_owned()
                } else {
                    list.iter()
                        .map(u16::to_string)
                        .collect::<Vec<_>>()
                        .join(" ")
                }
            };
            parts.push(format!("TCP connect to {}", ports(&s.connect_ports)));
            parts.push(format!("bind {}", ports(&s.bind_ports)));
        }
        if !parts.is_empty() {
            lines.push(("sandbox".to_owned(), parts.join("; ")));
        }
        lines
    }
}

/// The keys of a `limits` table (`[helper_limits]`,
/// `[tools.NAME.limits]`).
pub const LIMIT_KEYS: &[&str] = &limit_keys();

/// The keys of a `sandbox` table (`[helper_sandbox]`,
/// `[tools.NAME.sandbox]`).
pub const SANDBOX_KEYS: &[&str] = &[
    "read_only",
    "read_write",
    "network",
    "connect_ports",
    "bind_ports",
];

impl Confinement {
    /// Reads a library host's bounds from a TOML document: the optional
    /// tables `[helper_limits]` (the [`LIMIT_KEYS`], sizes as `"256M"` or
    /// a number of bytes, plus `allow_degraded` and `contain_tree`) and
    /// `[helper_sandbox]` (the [`SANDBOX_KEYS`]). Other tables are left
    /// to their readers. Paths must be absolute; whether they exist is
    /// checked when a call is prepared (the core does no IO).
    ///
    /// ```
    /// use spillguard_core::{Confinement, Network};
    ///
    /// let c = Confinement::from_toml_str(
    ///     r#"
    ///     [helper_limits]
    ///     memory_max = "256M"
    ///     pids_max = 64
    ///     allow_degraded = true
    ///
    ///     [helper_sandbox]
    ///     read_only = ["/srv/data"]
    ///     network = "none"
    ///     "#,
    /// )?;
    /// assert_eq!(c.limits.memory_max, Some(256 << 20));
    /// assert_eq!(c.sandbox.network, Network::None);
    /// assert!(c.allow_degraded);
    ///
    /// let bad = Confinement::from_toml_str("[helper_limits]\npids_max = 0\n").unwrap_err();
    /// assert_eq!(bad.to_string(), "helper_limits.pids_max: must be greater than zero");
    /// # Ok::<(), spillguard_core::ConfineError>(())
    /// ```
    #[cfg(feature = "toml")]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfineError> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfineError::new("", format!("not valid TOML: {}", e.message().trim()))
        })?;
        let mut confinement = Self::default();
        if let Some(value) = doc.get("helper_limits") {
            let table = value
                .as_table()
                .ok_or_else(|| ConfineError::new("helper_limits", "must be a table"))?;
            let mut limits = table.clone();
            let flag = |value: toml::Value, key: &str| {
                value.as_bool().ok_or_else(|| {
                    ConfineError::new(format!("helper_limits.{key}"), "must be true or false")
                })
            };
            if let Some(value) = limits.remove("allow_degraded") {
                confinement.allow_degraded = flag(value, "allow_degraded")?;
            }
            if let Some(value) = limits.remove("contain_tree") {
                confinement.contain_tree = Some(flag(value, "contain_tree")?);
            }
            confinement.merge_limits(&limits, "helper_limits")?;
        }
        if let Some(value) = doc.get("helper_sandbox") {
            let table = value
                .as_table()
                .ok_or_else(|| ConfineError::new("helper_sandbox", "must be a table"))?;
            confinement.merge_sandbox(table, "helper_sandbox")?;
        }
        confinement.validate()?;
        Ok(confinement)
    }

    /// Sets the limits a `limits` table names (the [`LIMIT_KEYS`]), key by
    /// key over these; `path` names the table in errors
    /// (`tools.fetch.limits`). Sizes are `"256M"` or a number of bytes;
    /// counts are integers of at least 1.
    #[cfg(feature = "toml")]
    pub fn merge_limits(&mut self, table: &toml::Table, path: &str) -> Result<(), ConfineError> {
        for (key, value) in table {
            let field = format!("{path}.{key}");
            let Some(kind) = LIMIT_KINDS.iter().find(|kind| kind.key == key) else {
                return Err(unknown_key(field, LIMIT_KEYS));
            };
            let bytes = kind.unit == LimitUnit::Bytes;
            let number = match (value, bytes) {
                (toml::Value::String(text), true) => {
                    parse_size(text).map_err(|e| ConfineError::new(field.clone(), e))?
                }
                (toml::Value::Integer(n), _) if *n > 0 => *n as u64,
                (toml::Value::Integer(_), _) => {
                    return Err(ConfineError::new(field, "must be greater than zero"));
                }
                (_, true) => {
                    return Err(ConfineError::new(
                        field,
                        "must be a size (\"256M\", \"2G\") or a number of bytes",
                    ));
                }
                (_, false) => return Err(ConfineError::new(field, "must be an integer")),
            };
            kind.check(number)
                .map_err(|error| ConfineError::new(field, error.reason))?;
            kind.set(&mut self.limits, number);
        }
        Ok(())
    }

    /// Sets what a `sandbox` table names (the [`SANDBOX_KEYS`]), key by
    /// key over these; `path` names the table in errors. Paths must be
    /// absolute, ports 1 to 65535, `network` `"none"` or `"any"`.
    #[cfg(feature = "toml")]
    pub fn merge_sandbox(&mut self, table: &toml::Table, path: &str) -> Result<(), ConfineError> {
        for (key, value) in table {
            let field = format!("{path}.{key}");
            let s = &mut self.sandbox;
            match key.as_str() {
                "read_only" => s.read_only = paths(&field, value)?,
                "read_write" => s.read_write = paths(&field, value)?,
                "network" => {
                    s.network = match value.as_str() {
                        Some("none") => Network::None,
                        Some("any") => Network::Any,
                        _ => return Err(ConfineError::new(field, "must be \"none\" or \"any\"")),
                    }
                }
                "connect_ports" => s.connect_ports = ports(&field, value)?,
                "bind_ports" => s.bind_ports = ports(&field, value)?,
                _ => return Err(unknown_key(field, SANDBOX_KEYS)),
            }
        }
        Ok(())
    }
}

#[cfg(feature = "toml")]
fn unknown_key(field: String, known: &[&str]) -> ConfineError {
    ConfineError::new(
        field,
        format!("unknown key (known keys: {})", known.join(", ")),
    )
}

#[cfg(feature = "toml")]
fn paths(field: &str, value: &toml::Value) -> Result<Vec<PathBuf>, ConfineError> {
    let list = value
        .as_array()
        .ok_or_else(|| ConfineError::new(field, "must be an array of paths"))?;
    list.iter()
        .map(|v| {
            let text = v
                .as_str()
                .ok_or_else(|| ConfineError::new(field, "must be an array of paths"))?;
            let path = PathBuf::from(text);
            if path.is_absolute() {
                Ok(path)
            } else {
                Err(ConfineError::new(
                    field,
                    format!("{text} is not an absolute path"),
                ))
            }
        })
        .collect()
}

#[cfg(feature = "toml")]
fn ports(field: &str, value: &toml::Value) -> Result<Vec<u16>, ConfineError> {
    let list = value
        .as_array()
        .ok_or_else(|| ConfineError::new(field, "must be an array of ports"))?;
    list.iter()
        .map(
            |v| match v.as_integer().and_then(|n| u16::try_from(n).ok()) {
                Some(port) if port > 0 => Ok(port),
                _ => Err(ConfineError::new(
                    field,
                    format!("{v} is not a TCP port (1 to 65535)"),
                )),
            },
        )
        .collect()
}

/// A [`Confinement`] that breaks a rule: the field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfineError {
    /// The field, as the configuration names it (`pids_max`, or with its
    /// table, `helper_limits.pids_max`); empty for a document that is not
    /// TOML.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ConfineError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for ConfineError {}

/// Parses a size: a whole number of bytes with an optional binary suffix,
/// `K`, `M`, `G` or `T` (also written `KiB`, `MB`, …; any case):
/// `"256M"` is 268435456. Zero parses (a limit refuses it later).
///
/// ```
/// use spillguard_core::parse_size;
///
/// assert_eq!(parse_size("256M"), Ok(256 << 20));
/// assert_eq!(parse_size("2G"), Ok(2 << 30));
/// assert_eq!(parse_size("4096"), Ok(4096));
/// assert_eq!(parse_size("1.5G").unwrap_err(), "\"1.5G\" is not a size (a whole number with K, M, G or T: 256M, 2G)");
/// ```
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a size (a whole number with K, M, G or T: 256M, 2G)");
    let trimmed = text.trim();
    let digits = trimmed.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad());
    }
    let (number, suffix) = trimmed.split_at(digits);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// A size as a person reads it: the largest binary unit that divides it
/// (`256 MiB`), else bytes.
fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{} {unit}", bytes >> shift);
        }
    }
    format!("{bytes} bytes")
}

/// Which limit stopped (or held back) the helper's tree: the record's
/// `limit_hit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LimitHit {
    /// The kernel's out-of-memory killer ended a process of the tree.
    Memory,
    /// A fork was refused: the tree was at its process limit.
    Pids,
    /// A process ran out of CPU time (`SIGXCPU`, or `SIGKILL` at the hard
    /// limit).
    Cpu,
    /// A process wrote past the file-size limit (`SIGXFSZ`).
    FileSize,
}

impl LimitHit {
    /// The record's name: `memory`, `pids`, `cpu` or `file_size`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitHit::Memory => "memory",
            LimitHit::Pids => "pids",
            LimitHit::Cpu => "cpu",
            LimitHit::FileSize => "file_size",
        }
    }

    /// Which limit the tree hit, from what the driver measured and how the
    /// direct child ended: an out-of-memory kill anywhere in the tree
    /// first, then a refused fork, then CPU time, then file size; `None`
    /// when no limit set was hit.
    ///
    /// A descendant's signal reaches the record through the shell that
    /// ran it: a shell whose child a signal ended exits with status 128 +
    /// the signal's number (152 for `SIGXCPU`, 153 for `SIGXFSZ`). A 152
    /// counts as the CPU limit only when the tree's accounting shows the
    /// CPU time spent (no process reaches its `SIGXCPU` with less); a 153
    /// counts as the file-size limit (no accounting can confirm it).
    pub fn of(limits: &Limits, report: &TreeReport, exit: Option<ExitStatus>) -> Option<Self> {
        LIMIT_KINDS.iter().find_map(|kind| {
            let value = kind.value(limits)?;
            (kind.hit_by)(value, report, exit).then_some(kind.hit?)
        })
    }
}

/// What the driver measured of the helper's tree, read from its control
/// group once the helper exited. Counts not measured are zero, peaks
/// `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeReport {
    /// Processes of the tree the out-of-memory killer ended.
    pub oom_kills: u64,
    /// Forks refused because the tree was at its process limit.
    pub pids_refused: u64,
    /// Processes of the tree ended by `SIGXCPU`, when the driver saw them
    /// (the direct child's own signal is in the exit).
    pub cpu_signals: u64,
    /// CPU time the tree used, in microseconds.
    pub cpu_usage_us: Option<u64>,
    /// Most memory the tree held at once, in bytes.
    pub peak_memory_bytes: Option<u64>,
    /// Most processes the tree held at once.
    pub peak_pids: Option<u64>,
}

/// What the driver enforced of a call's [`Confinement`], by mechanism,
/// reported at spawn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforcement {
    /// The mechanisms that hold the call's bounds, in a fixed order:
    /// `cgroup-v2`, `cgroup-v1`, `rlimit`, `landlock-abi-N`, `netns`,
    /// `no-new-privs`.
    pub enforced: Vec<String>,
    /// One line per restriction that was asked and is not enforced, with
    /// why (only with degraded mode allowed).
    pub not_enforced: Vec<String>,
    /// What ends the whole tree at the end of the call: `cgroup-v2`
    /// (`cgroup.kill`), `cgroup-v1` (a kill walk of its processes), or
    /// `process-group` (the helper's group only: a descendant that left
    /// it is not reached).
    pub tree_kill: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes_and_refuse_the_rest() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("3MiB"), Ok(3 << 20));
        assert_eq!(parse_size(" 1T "), Ok(1 << 40));
        for bad in ["", "M", "-1", "12Q", "1 G2", "1e9", "0x10"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_size("99999999999999T"),
            Err("\"99999999999999T\" is too large".into())
        );
    }

    #[test]
    fn the_limit_hit_is_read_in_order_and_only_for_limits_set() {
        let all = Limits {
            memory_max: Some(1 << 28),
            pids_max: Some(64),
            cpu_seconds: Some(1),
            file_size_max: Some(1 << 20),
            nofile: None,
        };
        let report = TreeReport {
            oom_kills: 1,
            pids_refused: 3,
            ..TreeReport::default()
        };
        assert_eq!(
            LimitHit::of(&all, &report, Some(ExitStatus::signal(9))),
            Some(LimitHit::Memory)
        );
        let pids_only = Limits {
            pids_max: Some(64),
            ..Limits::default()
        };
        assert_eq!(
            LimitHit::of(&pids_only, &report, None),
            Some(LimitHit::Pids)
        );
        // An OOM kill with no memory limit set is not this call's limit.
        let none = Limits::default();
        assert_eq!(
            LimitHit::of(&none, &report, Some(ExitStatus::signal(9))),
            None
        );
        let quiet = TreeReport::default();
        assert_eq!(
            LimitHit::of(&all, &quiet, Some(ExitStatus::signal(24))),
            Some(LimitHit::Cpu)
        );
        let spent = TreeReport {
            cpu_usage_us: Some(1_000_000),
            ..TreeReport::default()
        };
        assert_eq!(
            LimitHit::of(&all, &spent, Some(ExitStatus::signal(9))),
            Some(LimitHit::Cpu)
        );
        // Within two ticks of the limit, the time counts as spent.
        let nearly = TreeReport {
            cpu_usage_us: Some(980_000),
            ..TreeReport::default()
        };
        assert_eq!(
            LimitHit::of(&all, &nearly, Some(ExitStatus::signal(9))),
            Some(LimitHit::Cpu)
        );
        // SIGKILL without the CPU time spent is someone else's kill.
        let short = TreeReport {
            cpu_usage_us: Some(979_999),
            ..TreeReport::default()
        };
        assert_eq!(
            LimitHit::of(&all, &short, Some(ExitStatus::signal(9))),
            None
        );
        assert_eq!(
            LimitHit::of(&all, &quiet, Some(ExitStatus::signal(25))),
            Some(LimitHit::FileSize)
        );
        assert_eq!(LimitHit::of(&all, &quiet, None), None);
        // A descendant's signal, as the shell that ran it reports it: 152
        // is the CPU limit only with the CPU time spent; 153 the file size.
        let code = |n| Some(ExitStatus::code(n));
        assert_eq!(LimitHit::of(&all, &spent, code(152)), Some(LimitHit::Cpu));
        assert_eq!(LimitHit::of(&all, &short, code(152)), None);
        assert_eq!(
            LimitHit::of(&all, &quiet, code(153)),
            Some(LimitHit::FileSize)
        );
        let no_file_limit = Limits {
            file_size_max: None,
            ..all.clone()
        };
        assert_eq!(LimitHit::of(&no_file_limit, &quiet, code(153)), None);
        assert_eq!(LimitHit::of(&all, &spent, code(1)), None);
    }

    #[test]
    fn validation_names_the_field() {
        let with = |f: fn(&mut Confinement)| {
            let mut c = Confinement::default();
            f(&mut c);
            c.validate().map_err(|e| e.to_string())
        };
        assert_eq!(
            with(|c| c.limits.memory_max = Some(0)),
            Err("memory_max: must be greater than zero".into())
        );
        assert_eq!(
            with(|c| c.sandbox.connect_ports = vec![443, 0]),
            Err("connect_ports: port 0 is not a port (1 to 65535)".into())
        );
        assert_eq!(
            with(|c| c.sandbox.read_write = vec!["tmp/x".into()]),
            Err("read_write: tmp/x is not an absolute path".into())
        );
        assert_eq!(with(|c| c.limits.pids_max = Some(64)), Ok(()));
    }

    #[test]
    fn an_empty_confinement_wants_nothing() {
        let mut c = Confinement::default();
        // By default the tree is contained where it can be, not required.
        assert!(c.is_empty() && c.wants_tree() && !c.requires_tree());
        assert!(c.card_lines().is_empty());
        c.contain_tree = Some(false);
        assert!(c.is_empty() && !c.wants_tree() && !c.requires_tree());
        c.contain_tree = Some(true);
        assert!(!c.is_empty() && c.wants_tree() && c.requires_tree());
        assert!(c.card_lines().is_empty());
        c.sandbox.connect_ports = vec![443];
        assert_eq!(
            c.card_lines(),
            [(
                "sandbox".to_owned(),
                "TCP connect to 443; bind none".to_owned()
            )]
        );
    }
}
