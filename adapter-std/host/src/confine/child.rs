//! What the helper does to itself between its spawn and exec (the
//! `spawn` module runs it): join its control groups, take its resource
//! limits, leave the host's network, restrict itself with Landlock, drop
//! the capabilities that undo a sandbox, and install its seccomp filter,
//! in that order (each step needs what the later ones take away).
//!
//! Everything is prepared in the host before the spawn (files opened, the
//! Landlock ruleset built, numbers computed), so the child makes system
//! calls only: no allocation, no lock, nothing a child sharing a
//! multi-threaded host's memory may not do. Any step that fails makes the
//! spawn fail with that step's OS error: the helper never runs less
//! confined than the host decided.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// The steps the child takes, prepared by the host.
#[derive(Debug, Default)]
pub(crate) struct ChildSetup {
    /// The call's cgroup v2 group, a directory descriptor: the child is
    /// cloned into it (`CLONE_INTO_CGROUP`), which takes the kernel's
    /// cgroup lock for reading only, where a write to `cgroup.procs`
    /// takes it for writing and so waits for an RCU grace period (10-20
    /// ms once no other group change happened lately).
    pub cgroup: Option<OwnedFd>,
    /// That group's `cgroup.procs`: the child writes `0` to it only when
    /// it could not be cloned into the group (a kernel before Linux 5.7,
    /// an architecture without the clone the host layer makes).
    pub cgroup_procs: Option<OwnedFd>,
    /// Each cgroup v1 group's `tasks`, to write `0` to: that moves the
    /// calling thread, which is the whole child (it has one), without
    /// the lock a write to `cgroup.procs` takes (Linux 6.0 and later).
    pub tasks: Vec<OwnedFd>,
    /// `(resource, soft, hard)` for `setrlimit`.
    pub rlimits: Vec<(Resource, u64, u64)>,
    /// Leave the host's network for a namespace with loopback only.
    pub new_netns: bool,
    /// The Landlock ruleset to restrict itself with: its descriptor,
    /// created with every right it handles supported (so a restriction
    /// that succeeds is the whole ruleset), shared by the calls whose
    /// rules are the same.
    pub landlock: Option<Arc<OwnedFd>>,
    /// `PR_SET_NO_NEW_PRIVS` (required before Landlock and seccomp).
    pub no_new_privs: bool,
    /// Start a session of its own (`setsid`): no controlling terminal, so
    /// `/dev/tty` opens nothing and the terminal's signals do not reach
    /// it. Else only a process group of its own.
    pub new_session: bool,
    /// Drop the capabilities that undo a sandbox ([`DROPPED_CAPS`]) from
    /// the bounding set and from the effective, permitted and inheritable
    /// sets, and clear the ambient set (a root helper: exec would give
    /// them back otherwise).
    pub drop_caps: bool,
    /// The seccomp filter to install last.
    pub seccomp: Option<Arc<super::seccomp::Filter>>,
}

/// The resource limits the child may set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resource {
    Cpu,
    Nofile,
    Fsize,
    Core,
}

impl ChildSetup {
    /// The child's steps, in order; `in_group`: the clone put the child
    /// in [`cgroup`](Self::cgroup) already. System calls only (the child
    /// shares the host's memory: no allocation, no lock).
    pub(crate) fn run(&self, in_group: bool) -> io::Result<()> {
        let procs = self.cgroup_procs.as_ref().filter(|_| !in_group);
        for file in procs.into_iter().chain(&self.tasks) {
            rustix::io::write(file, b"0\n")?;
        }
        for &(resource, soft, hard) in &self.rlimits {
            let limit = |n: u64| (n != u64::MAX).then_some(n);
            let limit = rustix::process::Rlimit {
                current: limit(soft),
                maximum: limit(hard),
            };
            rustix::process::setrlimit(resource.raw(), limit)?;
        }
        if self.new_netns {
            crate::sys::calls::unshare_network()?;
            crate::sys::calls::loopback_up()?;
        }
        if self.no_new_privs {
            rustix::thread::set_no_new_privs(true)?;
        }
        if let Some(ruleset) = &self.landlock {
            crate::sys::calls::landlock_restrict_self(ruleset.as_fd())?;
        }
        if self.drop_caps {
            crate::sys::calls::drop_capabilities(DROPPED_CAPS)?;
        }
        if let Some(filter) = &self.seccomp {
            crate::sys::calls::set_seccomp_filter(&filter.fprog())?;
        }
        Ok(())
    }
}

/// The capabilities a root helper with a sandbox or `network none` loses:
/// each undoes or steps around a bound. `CAP_SYS_ADMIN` (mount, `setns`,
/// `unshare`, namespaces, most of the rest), `CAP_SYS_PTRACE` (read or
/// steer another process), `CAP_MKNOD` (device files), `CAP_NET_ADMIN`
/// (interfaces, routes, firewall), `CAP_SYS_MODULE` (kernel modules),
/// `CAP_DAC_READ_SEARCH` (`open_by_handle_at`, which opens a file without
/// its path), `CAP_SYS_RAWIO` (`/dev/mem`, I/O ports), `CAP_SYS_BOOT`,
/// `CAP_SYS_CHROOT`, `CAP_BPF`, `CAP_PERFMON`, `CAP_SYSLOG`,
/// `CAP_MAC_ADMIN`, `CAP_MAC_OVERRIDE`, `CAP_SYS_TIME`, `CAP_NET_RAW`,
/// `CAP_LINUX_IMMUTABLE`, `CAP_SETPCAP` (last: the drops need it).
pub(crate) const DROPPED_CAPS: &[u32] = &[
    21, // CAP_SYS_ADMIN
    19, // CAP_SYS_PTRACE
    27, // CAP_MKNOD
    12, // CAP_NET_ADMIN
    16, // CAP_SYS_MODULE
    2,  // CAP_DAC_READ_SEARCH
    17, // CAP_SYS_RAWIO
    22, // CAP_SYS_BOOT
    18, // CAP_SYS_CHROOT
    39, // CAP_BPF
    38, // CAP_PERFMON
    34, // CAP_SYSLOG
    33, // CAP_MAC_ADMIN
    32, // CAP_MAC_OVERRIDE
    25, // CAP_SYS_TIME
    13, // CAP_NET_RAW
    9,  // CAP_LINUX_IMMUTABLE
    8,  // CAP_SETPCAP
];

impl Resource {
    /// The resource a per-process limit kind sets, if the host layer knows it.
    pub(crate) fn of(resource: spillguard_core::RlimitResource) -> Option<Self> {
        use spillguard_core::RlimitResource;
        match resource {
            RlimitResource::Cpu => Some(Resource::Cpu),
            RlimitResource::Nofile => Some(Resource::Nofile),
            RlimitResource::Fsize => Some(Resource::Fsize),
            _ => None,
        }
    }

    fn raw(self) -> rustix::process::Resource {
        match self {
            Resource::Cpu => rustix::process::Resource::Cpu,
            Resource::Nofile => rustix::process::Resource::Nofile,
            Resource::Fsize => rustix::process::Resource::Fsize,
            Resource::Core => rustix::process::Resource::Core,
        }
    }
}

/// This process's hard limit of `resource` (`u64::MAX` for none).
pub(crate) fn current_hard_limit(resource: Resource) -> u64 {
    rustix::process::getrlimit(resource.raw())
        .maximum
        .unwrap_or(u64::MAX)
}

/// The kernel's Landlock ABI version (0 when it has none), asked once.
pub(crate) fn landlock_abi() -> i32 {
    crate::sys::calls::landlock_abi()
}
