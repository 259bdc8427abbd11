//! A control group per call: found, made, filled with limits, read for
//! events and peaks, killed as one and removed.
//!
//! **Where a call's group is made.** The machine's hierarchies are read
//! once from `/proc/self/mountinfo` and `/proc/self/cgroup`. A call's
//! group goes under the host's own group in each hierarchy used (or
//! under `SPILLGUARD_CGROUP_PARENT`, a cgroup v2 directory delegated to
//! the host, when set): `spillguard.<host pid>.<n>`.
//!
//! * **cgroup v2** holds the tree whenever a group can be made there:
//!   `cgroup.kill` ends every process in it at once, a descendant that
//!   left the process group with `setsid` included. Memory and process
//!   limits use it when its parent delegates the `memory` and `pids`
//!   controllers (`cgroup.subtree_control`).
//! * **cgroup v1** gives each controller v2 does not have (`memory`,
//!   `pids`) a group in its own hierarchy; with no v2 group, the tree is
//!   ended by walking the v1 group's processes with `SIGKILL` until none
//!   is left.
//!
//! The helper joins every group before it runs, so nothing it starts is
//! ever outside them: it is cloned into the v2 group (`CLONE_INTO_CGROUP`)
//! and writes `0` to each v1 group's `tasks` (which moves its one thread)
//! between clone and exec. Neither waits for an RCU grace period, as a
//! write to `cgroup.procs` does once no group changed for a while (10-20
//! ms a call here); the write to the v2 group's `cgroup.procs` is the
//! fallback where the clone cannot name a group.

use std::fs;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use spillguard_core::{LimitKind, LimitMechanism, Limits, Signal, TreeReport};

use super::pool;

/// The machine's cgroup hierarchies, as this process sees them.
#[derive(Debug, Default)]
pub(crate) struct Hierarchies {
    /// The cgroup v2 directory new groups go under (the host's own, or
    /// `SPILLGUARD_CGROUP_PARENT`), if v2 is mounted.
    pub v2: Option<PathBuf>,
    /// The controllers a group made under `v2` gets.
    pub v2_controllers: Vec<String>,
    /// For each v1 controller mounted: the host's group in it.
    pub v1: Vec<(String, PathBuf)>,
}

impl Hierarchies {
    /// Read once per process.
    pub(crate) fn get() -> &'static Hierarchies {
        static HIERARCHIES: OnceLock<Hierarchies> = OnceLock::new();
        HIERARCHIES.get_or_init(Self::read)
    }

    fn read() -> Self {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut found = Self::default();
        for line in mountinfo.lines() {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS] - FSTYPE SOURCE SUPEROPTS
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let fields: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            let (Some(root), Some(mount), Some(fstype)) =
                (fields.get(3), fields.get(4), right.first())
            else {
                continue;
            };
            match *fstype {
                "cgroup2" if found.v2.is_none() => {
                    let path = own
                        .lines()
                        .find_map(|l| l.strip_prefix("0::"))
                        .map(|p| under_mount(mount, root, p));
                    found.v2 = path;
                }
                "cgroup" => {
                    let options = right.get(2).copied().unwrap_or_default();
                    for controller in ["memory", "pids"] {
                        if options.split(',').any(|o| o == controller) {
                            let path = own.lines().find_map(|l| {
                                let mut parts = l.splitn(3, ':');
                                let (_, names, path) =
                                    (parts.next()?, parts.next()?, parts.next()?);
                                names
                                    .split(',')
                                    .any(|n| n == controller)
                                    .then(|| under_mount(mount, root, path))
                            });
                            if let Some(path) = path {
                                found.v1.push((controller.to_owned(), path));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let Some(parent) = std::env::var_os("SPILLGUARD_CGROUP_PARENT") {
            found.v2 = Some(PathBuf::from(parent));
        }
        if let Some(v2) = &found.v2 {
            found.v2_controllers = fs::read_to_string(v2.join("cgroup.subtree_control"))
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
        }
        found
    }

    /// The v1 group of `controller`, if that hierarchy is mounted.
    fn v1(&self, controller: &str) -> Option<&Path> {
        self.v1
            .iter()
            .find(|(name, _)| name == controller)
            .map(|(_, path)| path.as_path())
    }
}

/// `path` (a group as `/proc/self/cgroup` names it) inside the hierarchy
/// mounted at `mount`, whose root is the group `root`.
fn under_mount(mount: &str, root: &str, path: &str) -> PathBuf {
    let relative = path
        .strip_prefix(root)
        .unwrap_or(path)
        .trim_start_matches('/');
    Path::new(mount).join(relative)
}

/// The control files a tree's report reads, each opened once when the
/// groups are made: the OOM kills and peak of its memory, the forks
/// refused and peak of its processes, its CPU time.
#[derive(Debug, Default)]
struct Counters {
    oom_kills: Option<fs::File>,
    peak_memory: Option<fs::File>,
    pids_refused: Option<fs::File>,
    peak_pids: Option<fs::File>,
    cpu: Option<fs::File>,
}

impl Counters {
    fn open(group: &TreeGroup) -> Self {
        let open = |dir: &Path, name: &str| fs::File::open(dir.join(name)).ok();
        let mut counters = Counters::default();
        if let Some((dir, version)) = group.limited("memory") {
            let (events, peak) = match version {
                Version::V2 => ("memory.events", "memory.peak"),
                Version::V1 => ("memory.oom_control", "memory.max_usage_in_bytes"),
            };
            counters.oom_kills = open(dir, events);
            counters.peak_memory = open(dir, peak);
        }
        if let Some((dir, _)) = group.limited("pids") {
            counters.pids_refused = open(dir, "pids.events");
            counters.peak_pids = open(dir, "pids.peak");
        }
        if let Some(v2) = &group.v2 {
            counters.cpu = open(v2, "cpu.stat");
        }
        counters
    }
}

/// What the child needs to join a call's groups ([`TreeGroup::joins`]).
#[derive(Debug, Default)]
pub(crate) struct Joins {
    pub cgroup: Option<OwnedFd>,
    pub cgroup_procs: Option<OwnedFd>,
    pub tasks: Vec<OwnedFd>,
}

/// What a call's groups must hold.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wanted {
    /// Each control-group limit asked for, as its row of `LIMIT_KINDS`
    /// says to write it.
    pub limits: Vec<GroupLimit>,
    /// The tree's group is required: where none can be made, that is
    /// returned as unavailable (`contain-tree`).
    pub required: bool,
}

/// One limit a control group holds: its kind's name, controller and
/// files (from its row of `LIMIT_KINDS`), and the value asked for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupLimit {
    /// The limit, as the command line names it (`memory-max`).
    name: &'static str,
    /// Its controller (`memory`).
    controller: &'static str,
    /// The cgroup v2 file (`memory.max`).
    v2: &'static str,
    /// The cgroup v1 file (`memory.limit_in_bytes`), where v1 has one.
    v1: Option<&'static str>,
    value: u64,
}

impl GroupLimit {
    /// The control-group limit `kind` asks for in `limits`, if it is one
    /// and is set.
    pub(crate) fn of(kind: &LimitKind, limits: &Limits) -> Option<Self> {
        let LimitMechanism::Cgroup { v2, v1 } = kind.mechanism else {
            return None;
        };
        Some(Self {
            name: kind.name(),
            controller: kind.mechanism.controller()?,
            v2,
            // The table names v1's file under its controller's folder.
            v1: v1.map(|path| path.rsplit('/').next().unwrap_or(path)),
            value: kind.value(limits)?,
        })
    }
}

/// Why a limit could not be placed in a control group.
#[derive(Debug)]
pub(crate) struct Unavailable {
    /// The limit, as the command line names it (`memory-max`).
    pub limit: &'static str,
    /// Why, in a few words with the path and the OS error.
    pub why: String,
}

/// A call's control groups: the v2 group that holds the tree (if one
/// could be made) and a v1 group per controller v2 lacks.
#[derive(Debug)]
pub(crate) struct TreeGroup {
    v2: Option<PathBuf>,
    v1: Vec<(String, PathBuf)>,
    /// Each controller a limit was written for, and the group (v2 or
    /// v1) whose files hold it.
    limited: Vec<(&'static str, PathBuf, Version)>,
    /// The files a report reads, opened once (a report reads them again
    /// from their start).
    counters: Counters,
    removed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    V2,
    V1,
}

impl TreeGroup {
    /// Makes the call's groups and writes its limits. A limit no
    /// hierarchy can hold is returned in `unavailable` (the caller refuses
    /// the call or records it); a group that cannot be made at all is not
    /// an error when no limit needs it (`tree_kill` is then `None`).
    pub(crate) fn create(wanted: Wanted) -> (Option<TreeGroup>, Vec<Unavailable>) {
        let found = Hierarchies::get();
        let mut group = TreeGroup {
            v2: None,
            v1: Vec::new(),
            limited: Vec::new(),
            counters: Counters::default(),
            removed: false,
        };
        let mut v2_error = String::from("no cgroup v2 hierarchy is mounted");
        if let Some(parent) = &found.v2 {
            match take_empty(parent) {
                Ok(dir) if has_kill(&dir) => group.v2 = Some(dir),
                Ok(dir) => {
                    pool::retire([dir]);
                    v2_error = "cgroup v2 has no cgroup.kill (Linux 5.14 or later)".into();
                }
                Err(e) => v2_error = format!("{}: {e}", parent.display()),
            }
        }
        let mut unavailable = Vec::new();
        let place = |controller: &str, limit: &'static str, group: &mut TreeGroup| {
            let v2_has = found.v2_controllers.iter().any(|c| c == controller);
            if let (Some(dir), true) = (&group.v2, v2_has) {
                return Ok((dir.clone(), Version::V2));
            }
            let Some(parent) = found.v1(controller) else {
                let why = if group.v2.is_some() {
                    format!(
                        "the cgroup v2 parent {} does not delegate the {controller} controller, and no cgroup v1 {controller} hierarchy is mounted",
                        found.v2.as_deref().unwrap_or(Path::new("?")).display()
                    )
                } else {
                    format!("{v2_error}, and no cgroup v1 {controller} hierarchy is mounted")
                };
                return Err(Unavailable { limit, why });
            };
            // Controllers mounted together (`memory,pids`) share a group:
            // a second group there would move the helper out of the first.
            if let Some((_, dir)) = group.v1.iter().find(|(_, d)| d.parent() == Some(parent)) {
                return Ok((dir.clone(), Version::V1));
            }
            match take_empty(parent) {
                Ok(dir) => {
                    group.v1.push((controller.to_owned(), dir.clone()));
                    Ok((dir, Version::V1))
                }
                Err(e) => Err(Unavailable {
                    limit,
                    why: format!(
                        "cannot make a cgroup v1 {controller} group under {}: {e}",
                        parent.display()
                    ),
                }),
            }
        };
        for limit in &wanted.limits {
            match place(limit.controller, limit.name, &mut group) {
                Ok((dir, version)) => match write_limit(&dir, version, limit) {
                    Ok(()) => group.limited.push((limit.controller, dir, version)),
                    Err(e) => unavailable.push(Unavailable {
                        limit: limit.name,
                        why: format!("cannot set the limit in {}: {e}", dir.display()),
                    }),
                },
                Err(u) => unavailable.push(u),
            }
        }
        if group.v2.is_none() && group.v1.is_empty() {
            if wanted.required && unavailable.is_empty() {
                unavailable.push(Unavailable {
                    limit: "contain-tree",
                    why: format!("no control group can be made: {v2_error}"),
                });
            }
            return (None, unavailable);
        }
        group.counters = Counters::open(&group);
        (Some(group), unavailable)
    }

    /// The group holding the limit of `controller`, and its version, if
    /// one was written.
    fn limited(&self, controller: &str) -> Option<(&Path, Version)> {
        self.limited
            .iter()
            .find(|(c, _, _)| *c == controller)
            .map(|(_, dir, version)| (dir.as_path(), *version))
    }

    /// Its v2 group, if it has one.
    pub(crate) fn v2(&self) -> Option<&Path> {
        self.v2.as_deref()
    }

    /// The directories its groups were made under.
    pub(crate) fn parents(&self) -> Vec<&Path> {
        self.v2
            .iter()
            .chain(self.v1.iter().map(|(_, dir)| dir))
            .filter_map(|dir| dir.parent())
            .collect()
    }

    /// The mechanisms that hold the tree, in the record's names.
    pub(crate) fn mechanisms(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.v2.is_some() {
            names.push("cgroup-v2");
        }
        if !self.v1.is_empty() {
            names.push("cgroup-v1");
        }
        names
    }

    /// What ends the whole tree: `cgroup-v2` or `cgroup-v1`.
    pub(crate) fn tree_kill(&self) -> &'static str {
        if self.v2.is_some() {
            "cgroup-v2"
        } else {
            "cgroup-v1"
        }
    }

    /// What the child needs to join the groups, opened by the host: the
    /// v2 group's directory (to be cloned into) and `cgroup.procs` (the
    /// fallback), and each v1 group's `tasks`.
    pub(crate) fn joins(&self) -> io::Result<Joins> {
        let open = |path: PathBuf| -> io::Result<OwnedFd> {
            Ok(OwnedFd::from(
                fs::OpenOptions::new().write(true).open(path)?,
            ))
        };
        let mut joins = Joins::default();
        if let Some(v2) = &self.v2 {
            let dir = rustix::fs::open(
                v2,
                rustix::fs::OFlags::PATH
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?;
            joins.cgroup = Some(dir);
            joins.cgroup_procs = Some(open(v2.join("cgroup.procs"))?);
        }
        for (_, dir) in &self.v1 {
            joins.tasks.push(open(dir.join("tasks"))?);
        }
        Ok(joins)
    }

    pub(crate) fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.v2
            .iter()
            .map(PathBuf::as_path)
            .chain(self.v1.iter().map(|(_, dir)| dir.as_path()))
    }

    /// The group whose process list is the whole tree.
    fn procs_dir(&self) -> Option<&Path> {
        self.dirs().next()
    }

    /// The pids of the processes in the tree now (none if they cannot be
    /// read).
    pub(crate) fn pids(&self) -> Vec<i32> {
        self.procs_dir()
            .map(|dir| procs(dir).unwrap_or_default())
            .unwrap_or_default()
    }

    /// Whether a process of the tree is left, in the call's group or in
    /// one a helper made below it; an error when that cannot be read.
    fn populated(&self) -> io::Result<bool> {
        match self.procs_dir() {
            Some(dir) => holds_processes(dir),
            None => Ok(false),
        }
    }

    /// Sends `signal` to every process of the tree: `cgroup.kill` for
    /// `SIGKILL` on v2, else each process listed. A signal a process can
    /// catch skips those of process group `signalled`, which a signal to
    /// that group reached already (see [`outside_group`]); `SIGKILL` skips
    /// none, so a process that joined the group after the group's signal
    /// is not missed by it.
    pub(crate) fn signal(&self, signal: Signal, signalled: Option<u32>) {
        if signal == Signal::Kill
            && let Some(v2) = &self.v2
            && write(&v2.join("cgroup.kill"), "1").is_ok()
        {
            return;
        }
        let mut pids = self.pids();
        if let Some(pgid) = signalled.filter(|_| signal != Signal::Kill) {
            pids = outside_group(pids, pgid);
        }
        for pid in pids {
            crate::os::signal_pid(pid, signal);
        }
    }

    /// What the tree did against its limits, and its peaks.
    pub(crate) fn report(&self) -> TreeReport {
        let counters = &self.counters;
        let mut report = TreeReport {
            oom_kills: key_value(counters.oom_kills.as_ref(), "oom_kill"),
            peak_memory_bytes: number(counters.peak_memory.as_ref()),
            pids_refused: key_value(counters.pids_refused.as_ref(), "max"),
            peak_pids: number(counters.peak_pids.as_ref()),
            ..TreeReport::default()
        };
        let usage = key_value(counters.cpu.as_ref(), "usage_usec");
        report.cpu_usage_us = (usage > 0).then_some(usage);
        // v2's `memory.events` counts the groups below too; a v1 group's
        // `oom_kill` only its own: those a helper made below its group
        // are read one by one (an OOM kill in any of them is the tree's).
        if let Some((dir, Version::V1)) = self.limited("memory") {
            report.oom_kills += nested_oom_kills(dir);
        }
        report
    }

    /// Kills whatever is left of the tree, waits at most `wait` for its
    /// last process to be gone, and hands the groups over for removal
    /// (see the `pool` module). Returns whether the tree was gone. Done
    /// once; later calls do nothing.
    pub(crate) fn end(&mut self, wait: Duration) -> bool {
        if self.removed {
            return true;
        }
        self.removed = true;
        let start = Instant::now();
        let gone = loop {
            // A tree seen empty is gone: its processes all started in
            // the group. One that cannot be seen (no descriptor left) is
            // killed all the same, as one still there is.
            if let Ok(false) = self.populated() {
                break true;
            }
            self.signal(Signal::Kill, None);
            if let Ok(false) = self.populated() {
                break true;
            }
            if start.elapsed() >= wait {
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        pool::retire(self.dirs().map(Path::to_path_buf).collect::<Vec<_>>());
        gone
    }
}

impl Drop for TreeGroup {
    fn drop(&mut self) {
        self.end(Duration::from_millis(500));
    }
}

/// The processes of `pids` that are not in process group `pgid`: a stop
/// signals the helper's group and then the rest of its tree, and a
/// process reached twice would see a second SIGTERM, which many programs
/// take as "quit now, skip the cleanup".
fn outside_group(mut pids: Vec<i32>, pgid: u32) -> Vec<i32> {
    pids.retain(|&pid| !crate::os::in_group(pid, pgid));
    pids
}

/// An empty group under `parent` from the pool. A spare group a process
/// has moved into since it was made (a helper running as root, without
/// the file sandbox, can write itself anywhere) is not handed to a call,
/// whose tree and record it would join: it goes back to be killed and
/// removed, and the next is taken (a new one once the spares are gone).
fn take_empty(parent: &Path) -> io::Result<PathBuf> {
    for _ in 0..pool::SPARE {
        let dir = pool::take(parent)?;
        match holds_processes(&dir) {
            Ok(false) => return Ok(dir),
            _ => pool::retire([dir]),
        }
    }
    pool::take(parent)
}

/// Whether a process is in the group at `dir` or in a group below it: a
/// v2 group says so in one file (`populated` in `cgroup.events`), a v1
/// group's processes are listed group by group.
fn holds_processes(dir: &Path) -> io::Result<bool> {
    match read_text(&dir.join("cgroup.events")) {
        Ok(events) => Ok(!events.lines().any(|l| l.trim() == "populated 0")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(!procs(dir)?.is_empty()),
        Err(e) => Err(e),
    }
}

/// Whether a v2 group has `cgroup.kill` (Linux 5.14): looked at once.
fn has_kill(dir: &Path) -> bool {
    static HAS_KILL: OnceLock<bool> = OnceLock::new();
    *HAS_KILL.get_or_init(|| dir.join("cgroup.kill").exists())
}

/// Kills every process in the group at `dir` and below it: at once
/// through `cgroup.kill` on v2, else each one a `cgroup.procs` lists.
pub(super) fn kill_all(dir: &Path) {
    if write(&dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in procs(dir).unwrap_or_default() {
        crate::os::signal_pid(pid, Signal::Kill);
    }
}

/// The processes the group at `dir` holds now, with those of any group
/// below it (a helper running as root may make one and move there).
fn procs(dir: &Path) -> io::Result<Vec<i32>> {
    let mut pids = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let listed = read_text(&dir.join("cgroup.procs"))?;
        pids.extend(listed.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        dirs.extend(subgroups(&dir)?);
    }
    Ok(pids)
}

/// The groups right below the group at `dir`.
/// The OOM kills counted in the v1 memory groups below `dir` (at any
/// depth, at most 8 levels), not in `dir` itself.
fn nested_oom_kills(dir: &Path) -> u64 {
    let mut kills = 0;
    let mut level = subgroups(dir).unwrap_or_default();
    for _ in 0..8 {
        if level.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for group in level {
            let file = fs::File::open(group.join("memory.oom_control")).ok();
            kills += key_value(file.as_ref(), "oom_kill");
            next.extend(subgroups(&group).unwrap_or_default());
        }
        level = next;
    }
    kills
}

pub(super) fn subgroups(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(fs::read_dir(dir)?
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.path())
        .collect())
}

/// Writes `limit` to its file in `dir`, a group of `version`. Memory
/// pushed to swap is memory all the same: where the group has a swap
/// limit, it gets none (v2) or the same bound for memory and swap
/// together (v1).
fn write_limit(dir: &Path, version: Version, limit: &GroupLimit) -> io::Result<()> {
    let file = match version {
        Version::V2 => limit.v2,
        Version::V1 => limit.v1.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                format!("cgroup v1 has no file for {}", limit.name),
            )
        })?,
    };
    let value = limit.value.to_string();
    write(&dir.join(file), &value)?;
    if limit.controller != "memory" {
        return Ok(());
    }
    static HAS_SWAP: OnceLock<bool> = OnceLock::new();
    static HAS_MEMSW: OnceLock<bool> = OnceLock::new();
    let (swap, has, bound) = match version {
        Version::V2 => (dir.join("memory.swap.max"), &HAS_SWAP, "0"),
        Version::V1 => (
            dir.join("memory.memsw.limit_in_bytes"),
            &HAS_MEMSW,
            value.as_str(),
        ),
    };
    if *has.get_or_init(|| swap.exists()) {
        write(&swap, bound)?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The value of `key` in a `key value` file (`memory.events`), 0 if absent.
fn key_value(file: Option<&fs::File>, key: &str) -> u64 {
    file.and_then(|f| read_from_start(f).ok())
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0)
}

/// A file holding one number.
fn number(file: Option<&fs::File>) -> Option<u64> {
    read_from_start(file?).ok()?.trim().parse().ok()
}

/// The text of an open control file, read again from its start.
fn read_from_start(file: &fs::File) -> io::Result<String> {
    use std::os::unix::fs::FileExt as _;
    let mut text = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        match file.read_at(&mut chunk, text.len() as u64) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A control file's text. Read in plain reads: the size a control file
/// reports is 0, so asking for it first (as `fs::read_to_string` does)
/// is a system call for nothing, on each of the files a call reads.
fn read_text(path: &Path) -> io::Result<String> {
    let mut file = fs::File::open(path)?;
    let mut text = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    String::from_utf8(text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Of two processes, one leading a group of its own and one in this
    /// test's group, a signal after the first's group goes to the second
    /// only; a pid that is gone is kept (signalling it does nothing).
    #[test]
    fn a_signal_after_the_group_s_skips_the_group() {
        use std::os::unix::process::CommandExt as _;
        let mut leader = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep starts");
        let mut member = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let (leader_pid, member_pid) = (leader.id() as i32, member.id() as i32);
        let gone = i32::MAX;
        let left = outside_group(vec![leader_pid, member_pid, gone], leader.id());
        let _ = (leader.kill(), member.kill(), leader.wait(), member.wait());
        assert_eq!(left, vec![member_pid, gone]);
    }

    #[test]
    fn a_group_path_is_read_inside_its_mount() {
        assert_eq!(
            under_mount("/sys/fs/cgroup/memory", "/", "/process_api/x"),
            PathBuf::from("/sys/fs/cgroup/memory/process_api/x")
        );
        // A container's mount whose root is a group of the host's.
        assert_eq!(
            under_mount("/sys/fs/cgroup", "/docker/abc", "/docker/abc/sub"),
            PathBuf::from("/sys/fs/cgroup/sub")
        );
        assert_eq!(
            under_mount("/sys/fs/cgroup/unified", "/", "/"),
            PathBuf::from("/sys/fs/cgroup/unified")
        );
    }
}
