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
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
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
    /// an architecture without the clone the kit makes).
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
    /// The file the program name resolves to in `PATH`, found by the host:
    /// the child execs it at once instead of trying each `PATH` entry.
    pub program: Option<PathBuf>,
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
    /// in [`cgroup`](Self::cgroup) already.
    #[allow(unsafe_code)]
    pub(crate) fn run(&self, in_group: bool) -> io::Result<()> {
        let procs = self.cgroup_procs.as_ref().filter(|_| !in_group);
        for file in procs.into_iter().chain(&self.tasks) {
            // SAFETY: writing two bytes from a static buffer to an open fd.
            let n = unsafe { libc::write(file.as_raw_fd(), b"0\n".as_ptr().cast(), 2) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        for &(resource, soft, hard) in &self.rlimits {
            let resource = resource.raw();
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            // SAFETY: a plain system call with a valid pointer.
            if unsafe { libc::setrlimit(resource, &limit) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if self.new_netns {
            // SAFETY: a plain system call.
            if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
            loopback_up()?;
        }
        if self.no_new_privs {
            // SAFETY: a plain system call.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(ruleset) = &self.landlock {
            // SAFETY: a plain system call on an open descriptor.
            let restricted =
                unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) };
            if restricted != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if self.drop_caps {
            drop_capabilities()?;
        }
        if let Some(filter) = &self.seccomp {
            let program = filter.fprog();
            // SAFETY: `program` points into the filter, alive for the call;
            // the kernel copies it.
            let set = unsafe {
                libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    std::ptr::from_ref(&program),
                    0,
                    0,
                )
            };
            if set != 0 {
                return Err(io::Error::last_os_error());
            }
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

/// Drops [`DROPPED_CAPS`]: from the bounding set (so exec cannot give
/// them back), then from the effective, permitted and inheritable sets;
/// clears the ambient set. A capability the kernel does not know is
/// passed over in the bounding set (`EINVAL`).
#[allow(unsafe_code)]
fn drop_capabilities() -> io::Result<()> {
    const VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // SAFETY: plain system calls; `header` and `data` live on this stack
    // for the calls that read and write them (two `Data` for version 3).
    unsafe {
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            let error = io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINVAL) {
                return Err(error);
            }
        }
        for &cap in DROPPED_CAPS {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0 {
                let error = io::Error::last_os_error();
                if error.raw_os_error() != Some(libc::EINVAL) {
                    return Err(error);
                }
            }
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for &cap in DROPPED_CAPS {
            let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
            data[word].effective &= !bit;
            data[word].permitted &= !bit;
            data[word].inheritable &= !bit;
        }
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

impl Resource {
    fn raw(self) -> libc::__rlimit_resource_t {
        match self {
            Resource::Cpu => libc::RLIMIT_CPU,
            Resource::Nofile => libc::RLIMIT_NOFILE,
            Resource::Fsize => libc::RLIMIT_FSIZE,
            Resource::Core => libc::RLIMIT_CORE,
        }
    }
}

/// This process's hard limit of `resource` (`u64::MAX` for none).
#[allow(unsafe_code)]
pub(crate) fn current_hard_limit(resource: Resource) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a plain system call with a valid pointer.
    if unsafe { libc::getrlimit(resource.raw(), &mut limit) } != 0 {
        return u64::MAX;
    }
    limit.rlim_max
}

/// The kernel's Landlock ABI version (0 when it has none), asked once.
#[allow(unsafe_code)]
pub(crate) fn landlock_abi() -> i32 {
    static ABI: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *ABI.get_or_init(|| {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) reads no memory
        // and returns the ABI version or -1.
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        i32::try_from(version).unwrap_or(0).max(0)
    })
}

/// Brings `lo` up in a new network namespace (it starts down).
#[allow(unsafe_code)]
fn loopback_up() -> io::Result<()> {
    // SAFETY: plain system calls on a socket this function owns, with an
    // `ifreq` on the stack.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &request);
        }
        let error = (result != 0).then(io::Error::last_os_error);
        libc::close(fd);
        error.map_or(Ok(()), Err)
    }
}
