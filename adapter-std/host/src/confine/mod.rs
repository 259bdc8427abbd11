//! A call's [`Confinement`] carried out before exec, the same for every
//! runtime: a control group per call for the whole tree and its memory
//! and process limits (the `cgroup` module), resource limits, a network namespace
//! with loopback only, Landlock rules for files and TCP ports, and
//! `no_new_privs`; then, after the helper's exit, what the tree did, and
//! at the end of the call its kill and the removal of its groups.
//!
//! **No way out through the host.** A helper with a limit or a sandbox
//! also starts a session of its own (no controlling terminal), runs in a
//! Landlock domain that scopes signals and abstract unix sockets (ABI 6),
//! and installs a seccomp filter (the `seccomp` module: no terminal-input
//! ioctl; with a file sandbox or no network, no unix socket); a root one
//! with a sandbox drops the capabilities that undo it
//! (`child::DROPPED_CAPS`). Every helper, bounded or not, is spawned
//! here and gets its standard streams only: every other descriptor is
//! closed at exec.
//!
//! **Fail closed.** `prepare` decides, before anything runs, what this
//! machine and the host's permissions can enforce. A restriction it
//! cannot enforce refuses the call with one line naming it and why
//! (`memory-max: cannot be enforced: …`), unless the confinement allows
//! degraded mode; then the record lists it in `not_enforced`. A step that
//! fails in the child (a write to a group's `tasks`, `setrlimit`,
//! `unshare`, `landlock_restrict_self`) fails the spawn: the helper never
//! runs less confined than decided.
//!
//! **The system paths a program needs to start**, granted read and
//! execute whenever files are restricted (each only if it exists):
//! [`SYSTEM_READ`]; read and write: [`SYSTEM_WRITE`] (`/dev/null` and
//! the like); and the program itself (the file `PATH` resolves it to).

mod cgroup;
mod child;
#[cfg_attr(not(feature = "landlock"), path = "no_landlock.rs")]
mod landlock_rules;
mod pool;
mod seccomp;
pub(crate) mod spawn;

use std::ffi::OsStr;
use std::io;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use spillguard_core::{
    Confinement, Enforcement, LIMIT_KINDS, LimitMechanism, Network, Signal, TreeReport,
};

pub(crate) use cgroup::TreeGroup;
pub(crate) use child::ChildSetup;
use child::Resource;
pub use spawn::{RawChild, reap, try_reap};

/// Read and execute, whenever files are restricted: what the dynamic
/// loader, the C library and common programs read to start (libraries,
/// the loader's cache, name-service and time-zone files, certificates).
pub const SYSTEM_READ: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/dev/urandom",
    "/dev/random",
];

/// Read and write, whenever files are restricted. Not `/dev/tty`: a
/// sandboxed helper has no controlling terminal, and the user's terminal
/// is no file of its.
pub const SYSTEM_WRITE: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// How many empty control groups are kept ready under each parent group
/// bounded calls used in the last minute (from the process's second such
/// call on), so that the next calls join a group made ahead instead of
/// making one on their path.
pub const SPARE_GROUPS: usize = pool::SPARE;

/// Removes the empty control groups kept ready for the next bounded
/// calls, and waits at most `wait` until the groups of every call that
/// ended are removed too. Returns whether none is left.
///
/// A call's tree is killed and gone before its outcome is published;
/// its groups are removed moments later, off the call's path, and
/// [`SPARE_GROUPS`] empty groups are kept ready while calls keep coming
/// (for a minute after the last). The process's exit (a return from `main`, or
/// `std::process::exit`) settles them, so a host calls this only to see
/// no group left while it goes on running.
///
/// ```no_run
/// use std::time::Duration;
///
/// assert!(spillguard_host::confine::settle_groups(Duration::from_secs(5)));
/// ```
pub fn settle_groups(wait: Duration) -> bool {
    pool::settle(wait)
}

/// A call's confinement, ready for its spawn.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// What the child does before exec.
    pub child: ChildSetup,
    /// The call's control groups, if any.
    pub tree: Option<TreeGroup>,
    /// What is enforced, by mechanism, for the record.
    pub enforcement: Enforcement,
}

/// A helper with no bound asked: the host layer spawns it all the same, in a
/// process group of its own with only its standard streams, and, unless
/// `contained` is false (the call opted out), in a control group of its
/// own wherever one can be made (else its process group is what a stop
/// signals, and nothing is refused). See [`prepare`] for one with bounds.
pub(crate) fn unbounded(contained: bool) -> Prepared {
    let mut child = ChildSetup::default();
    let mut enforced = Vec::new();
    let mut tree_kill = "process-group";
    let tree = if contained {
        TreeGroup::create(cgroup::Wanted::default()).0
    } else {
        None
    };
    let tree = tree.and_then(|tree| match tree.joins() {
        Ok(joins) => {
            child.cgroup = joins.cgroup;
            child.cgroup_procs = joins.cgroup_procs;
            child.tasks = joins.tasks;
            enforced.extend(tree.mechanisms().into_iter().map(str::to_owned));
            tree_kill = tree.tree_kill();
            Some(tree)
        }
        // A group it cannot join: the call runs as without one.
        Err(_) => None,
    });
    Prepared {
        child,
        tree,
        enforcement: Enforcement {
            enforced,
            not_enforced: Vec::new(),
            tree_kill: tree_kill.to_owned(),
        },
    }
}

/// Prepares `confinement` for a helper that runs `program` (a path, or a
/// name looked up in `search`, the helper's `PATH`). `Err` is the
/// refusal's line: the call fails before dispatch and nothing runs.
pub(crate) fn prepare(
    confinement: &Confinement,
    program: &Path,
    search: Option<&OsStr>,
    cwd: Option<&Path>,
) -> Result<Prepared, String> {
    let limits = &confinement.limits;
    let sandbox = &confinement.sandbox;
    let mut failures: Vec<String> = Vec::new();
    let mut enforced: Vec<String> = Vec::new();

    // Each path's file, as the ruleset will name it: a path replaced since
    // a ruleset was made for it gets a ruleset of its own.
    let mut files_named = Vec::new();
    for (flag, paths) in [
        ("read-only", &sandbox.read_only),
        ("read-write", &sandbox.read_write),
    ] {
        for path in paths {
            match std::fs::metadata(path) {
                Ok(meta) => files_named.push((meta.dev(), meta.ino())),
                Err(e) => return Err(format!("{flag} {}: {e}", path.display())),
            }
        }
    }
    let resolved = program_file(program, search, cwd);

    let (tree, unavailable) = if confinement.wants_tree() {
        TreeGroup::create(cgroup::Wanted {
            limits: LIMIT_KINDS
                .iter()
                .filter_map(|kind| cgroup::GroupLimit::of(kind, limits))
                .collect(),
            required: confinement.requires_tree(),
        })
    } else {
        (None, Vec::new())
    };
    for u in unavailable {
        failures.push(format!("{}: cannot be enforced: {}", u.limit, u.why));
    }
    if let Some(tree) = &tree {
        enforced.extend(tree.mechanisms().into_iter().map(str::to_owned));
    }
    let mut child = ChildSetup::default();
    if let Some(tree) = &tree {
        match tree.joins() {
            Ok(joins) => {
                child.cgroup = joins.cgroup;
                child.cgroup_procs = joins.cgroup_procs;
                child.tasks = joins.tasks;
            }
            Err(e) => return Err(format!("cannot join the call's control group: {e}")),
        }
    }

    // No core dumps, then each per-process limit as its kind says.
    let mut rlimits = vec![(Resource::Core, 0, 0)];
    for kind in &LIMIT_KINDS {
        if let (
            LimitMechanism::Rlimit {
                resource,
                hard_above,
            },
            Some(value),
        ) = (kind.mechanism, kind.value(limits))
        {
            match Resource::of(resource) {
                Some(resource) => {
                    rlimits.push((resource, value, value.saturating_add(hard_above)));
                }
                // A kind this host layer cannot set: refused, never ignored.
                None => failures.push(format!(
                    "{}: cannot be enforced: unknown resource",
                    kind.flag
                )),
            }
        }
    }
    if !confinement.is_empty() {
        child.rlimits = within_current(rlimits);
        enforced.push("rlimit".to_owned());
    }

    // Without the `landlock` feature this build has no Landlock: every
    // rule that needs it fails closed, as on a kernel without it.
    let abi = if cfg!(feature = "landlock") {
        child::landlock_abi()
    } else {
        0
    };
    let mut tcp_landlock = false;
    if sandbox.network == Network::None {
        if may_create_netns() {
            child.new_netns = true;
            enforced.push("netns".to_owned());
        } else {
            failures.push(
                "network none: cannot be enforced: a network namespace needs CAP_SYS_ADMIN, \
                 which this host does not have (with degraded mode, Landlock refuses TCP \
                 only, where the kernel has it)"
                    .to_owned(),
            );
            tcp_landlock = abi >= 4;
        }
    }
    if sandbox.restricts_ports() {
        if abi >= 4 {
            tcp_landlock = true;
        } else {
            failures.push(format!(
                "connect-port: cannot be enforced: TCP port rules need Landlock ABI 4 \
                 (Linux 6.7); {}",
                landlock_here(abi)
            ));
        }
    }
    // A helper with a sandbox or a limit: its own session (no terminal),
    // no terminal-input ioctl, scoped signals and abstract sockets, and
    // for a sandbox no unix socket and no capability that undoes it.
    let bounded = !limits.is_empty() || !sandbox.is_empty();
    let files = sandbox.restricts_files();
    let scoped = bounded && abi >= 6;
    if bounded {
        child.new_session = true;
        let rules = seccomp::Rules {
            no_unix_sockets: files || sandbox.network == Network::None,
        };
        if seccomp::available() {
            child.seccomp = Some(seccomp::Filter::get(rules));
            enforced.push("seccomp".to_owned());
        } else {
            failures.push(
                "terminal input and unix sockets: cannot be enforced: this kernel has no \
                 seccomp filter"
                    .to_owned(),
            );
        }
        if !sandbox.is_empty() && holds_capabilities() {
            child.drop_caps = true;
            enforced.push("capabilities-dropped".to_owned());
        }
    }
    if files && abi < 1 {
        failures.push(format!(
            "read-only/read-write: cannot be enforced: file rules need Landlock; {}",
            landlock_here(abi)
        ));
    }
    if (files && abi >= 1) || tcp_landlock || scoped {
        let allowed_tcp = if sandbox.network == Network::None {
            (&[][..], &[][..])
        } else {
            (&sandbox.connect_ports[..], &sandbox.bind_ports[..])
        };
        let key = format!(
            "{abi} {:?} {files_named:?} {:?} {resolved:?} {scoped}",
            files.then_some(sandbox),
            tcp_landlock.then_some(allowed_tcp),
        );
        let made = landlock_rules::cached_ruleset(key, || {
            landlock_rules::ruleset(
                abi,
                files.then_some(confinement),
                tcp_landlock.then_some(allowed_tcp),
                scoped,
                resolved.as_deref(),
            )
        });
        match made {
            Ok(ruleset) => {
                child.landlock = Some(ruleset);
                // The ABI whose rights the ruleset asks for: the kernel's,
                // up to the newest this code uses.
                enforced.push(format!("landlock-abi-{}", abi.min(LANDLOCK_ABI_USED)));
            }
            Err(e) => failures.push(format!("sandbox: cannot be enforced: Landlock: {e}")),
        }
    }
    if !confinement.is_empty() {
        child.no_new_privs = true;
        enforced.push("no-new-privs".to_owned());
    }

    if !failures.is_empty() && !confinement.allow_degraded {
        return Err(failures.join("; "));
    }
    let tree_kill = tree
        .as_ref()
        .map_or("process-group", TreeGroup::tree_kill)
        .to_owned();
    Ok(Prepared {
        child,
        tree,
        enforcement: Enforcement {
            enforced,
            not_enforced: failures,
            tree_kill,
        },
    })
}

/// Each limit no higher than the host's own hard limit: a limit is a
/// ceiling, and a lower ceiling already in force meets it (raising a hard
/// limit would need a privilege the host may not have).
fn within_current(rlimits: Vec<(Resource, u64, u64)>) -> Vec<(Resource, u64, u64)> {
    rlimits
        .into_iter()
        .map(|(resource, soft, hard)| {
            let current = child::current_hard_limit(resource);
            let hard = hard.min(current);
            (resource, soft.min(hard), hard)
        })
        .collect()
}

/// The newest Landlock ABI whose rights this code asks for: 6 (scoped
/// signals and abstract unix sockets). The record's `landlock-abi-N`
/// names the lesser of it and the kernel's.
const LANDLOCK_ABI_USED: i32 = 6;

/// Whether this process holds any capability (root, usually): a helper it
/// spawns would too, so a sandboxed one has its dangerous ones dropped.
fn holds_capabilities() -> bool {
    static HOLDS: OnceLock<bool> = OnceLock::new();
    *HOLDS.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
                u64::from_str_radix(hex.trim(), 16).ok()
            })
            .is_none_or(|caps| caps != 0)
    })
}

/// Whether this process may make a network namespace: it holds
/// `CAP_SYS_ADMIN` (read once from `/proc/self/status`).
fn may_create_netns() -> bool {
    static MAY: OnceLock<bool> = OnceLock::new();
    *MAY.get_or_init(|| {
        const CAP_SYS_ADMIN: u32 = 21;
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
                u64::from_str_radix(hex.trim(), 16).ok()
            })
            .is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) != 0)
    })
}

/// What Landlock there is here, for a refusal's line.
fn landlock_here(abi: i32) -> String {
    if !cfg!(feature = "landlock") {
        "this build has none (spillguard-host without its `landlock` feature)".to_owned()
    } else if abi < 1 {
        "this kernel has no Landlock".to_owned()
    } else {
        format!("this kernel has ABI {abi}")
    }
}

/// The file `program` runs as `execvp` in the helper would find it, made
/// in the host against the helper's own `PATH` (`search`; without one,
/// the C library's default, `/bin:/usr/bin`) and directory (`cwd`): a
/// path (with a `/`) is its own file; a bare name is the first entry's
/// executable regular file of that name, an empty entry standing for the
/// helper's directory and a relative one read from there. The child then
/// only calls `execve` with it, so the host's own `PATH` never decides.
///
/// # Errors
///
/// `NotFound` for an empty name or no file of that name, and
/// `PermissionDenied` when only files that cannot be executed matched:
/// what `std::process::Command` reports for the same helper.
pub(crate) fn resolve_program(
    program: &OsStr,
    search: Option<&OsStr>,
    cwd: Option<&Path>,
) -> io::Result<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if program.is_empty() {
        return Err(io::ErrorKind::NotFound.into());
    }
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let search = search.unwrap_or(OsStr::new("/bin:/usr/bin"));
    let mut denied = false;
    for dir in std::env::split_paths(search) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        // As the helper sees it: a relative entry from its directory.
        let seen = match cwd {
            Some(cwd) if candidate.is_relative() => cwd.join(&candidate),
            _ => candidate.clone(),
        };
        let Ok(meta) = seen.metadata() else {
            continue;
        };
        let executable =
            meta.is_file() && rustix::fs::access(&seen, rustix::fs::Access::EXEC_OK).is_ok();
        if executable {
            return Ok(candidate);
        }
        denied = true;
    }
    Err(if denied {
        io::Error::from_raw_os_error(libc::EACCES)
    } else {
        io::Error::from_raw_os_error(libc::ENOENT)
    })
}

/// The file `program` resolves to, as an absolute path the host can name
/// in a Landlock rule, if it resolves.
fn program_file(program: &Path, search: Option<&OsStr>, cwd: Option<&Path>) -> Option<PathBuf> {
    let file = resolve_program(program.as_os_str(), search, cwd).ok()?;
    if file.is_absolute() {
        return Some(file);
    }
    let here = std::env::current_dir().ok()?;
    Some(match cwd {
        Some(cwd) => here.join(cwd).join(file),
        None => here.join(file),
    })
}

/// How long the end of a call waits for its killed tree to be gone.
const TREE_END_WAIT: Duration = Duration::from_secs(5);

/// A call's groups once spawned: signalled with the group, read at the
/// helper's exit, removed at the end of the call.
#[derive(Debug)]
pub(crate) struct Tree {
    group: TreeGroup,
}

impl Tree {
    pub(crate) fn new(group: TreeGroup) -> Self {
        Self { group }
    }

    /// `signal` to every process of the tree (a descendant that left the
    /// helper's process group included) but those of process group
    /// `signalled`, which a signal to the group reached already: each
    /// process gets a stop's signal once.
    pub(crate) fn signal(&self, signal: Signal, signalled: Option<u32>) {
        self.group.signal(signal, signalled);
    }

    /// What the tree did against its limits.
    pub(crate) fn report(&self) -> TreeReport {
        self.group.report()
    }

    /// The end of the call: whatever is left of the tree is killed, and
    /// the call waits at most [`TREE_END_WAIT`] for the last process to go
    /// (a killed process exits at once, unless the machine is loaded: a
    /// thousand ending together on two cores take longer than half a
    /// second); its empty groups are then removed off the call's path.
    pub(crate) fn end(mut self) {
        self.group.end(TREE_END_WAIT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use spillguard_core::Sandbox;

    fn read_only_tmp(allow_degraded: bool) -> Confinement {
        Confinement {
            sandbox: Sandbox {
                read_only: vec![std::env::temp_dir()],
                ..Sandbox::default()
            },
            allow_degraded,
            ..Confinement::default()
        }
    }

    /// Without the `landlock` feature a file sandbox cannot be enforced:
    /// it is refused with a line that names the build, and with degraded
    /// mode it runs with the rule listed as not enforced.
    #[cfg(not(feature = "landlock"))]
    #[test]
    fn without_landlock_a_file_sandbox_fails_closed_naming_the_build() {
        let refused = prepare(&read_only_tmp(false), Path::new("/bin/true"), None, None)
            .err()
            .unwrap_or_default();
        assert!(
            refused.starts_with("read-only/read-write: cannot be enforced: file rules need Landlock; this build has none (spillguard-host without its `landlock` feature)"),
            "{refused}"
        );
        let degraded = prepare(&read_only_tmp(true), Path::new("/bin/true"), None, None)
            .unwrap_or_else(|e| panic!("refused in degraded mode: {e}"));
        assert!(degraded.child.landlock.is_none());
        assert!(
            degraded
                .enforcement
                .not_enforced
                .iter()
                .any(|line| line.contains("without its `landlock` feature")),
            "{:?}",
            degraded.enforcement.not_enforced
        );
        assert!(
            !degraded
                .enforcement
                .enforced
                .iter()
                .any(|m| m.starts_with("landlock"))
        );
    }

    /// With the feature, on a kernel with Landlock, the same sandbox is
    /// enforced by a ruleset the record names.
    #[cfg(feature = "landlock")]
    #[test]
    fn with_landlock_a_file_sandbox_is_a_ruleset_where_the_kernel_has_one() {
        if child::landlock_abi() < 1 {
            return;
        }
        let prepared = prepare(&read_only_tmp(false), Path::new("/bin/true"), None, None)
            .unwrap_or_else(|e| panic!("refused: {e}"));
        assert!(prepared.child.landlock.is_some());
        assert!(
            prepared
                .enforcement
                .enforced
                .iter()
                .any(|m| m.starts_with("landlock-abi-")),
            "{:?}",
            prepared.enforcement.enforced
        );
    }
}
