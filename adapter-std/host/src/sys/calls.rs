//! The helper's confinement calls that have no safe wrapper, and
//! `atexit`: each a plain system call, safe to make from the child
//! between clone and exec (no allocation, no lock).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `unshare(CLONE_NEWNET)`: the calling process leaves for a network
/// namespace of its own (with a loopback interface, down).
pub(crate) fn unshare_network() -> io::Result<()> {
    // SAFETY: the unsafety of `unshare` is in the flags that split what
    // threads share (files, the filesystem context) under code that
    // assumes they are shared; a new network namespace changes no memory
    // and no descriptor this process holds.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }?;
    Ok(())
}

/// `landlock_restrict_self(ruleset, 0)`: the calling thread (the whole
/// child) is restricted by the ruleset, for good.
pub(crate) fn landlock_restrict_self(ruleset: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a system call on a descriptor the caller keeps open; no
    // memory is read or written.
    let restricted =
        unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0) };
    if restricted != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel's Landlock ABI version (0 when it has none), asked once.
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

/// `prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program)`: the filter
/// applies to the calling thread from now on (the kernel copies it).
pub(crate) fn set_seccomp_filter(program: &libc::sock_fprog) -> io::Result<()> {
    // SAFETY: `program` and the instructions it points at are alive for
    // the call (the caller's borrow); the kernel copies them.
    let set = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            std::ptr::from_ref(program),
            0,
            0,
        )
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this kernel filters system calls with seccomp:
/// `prctl(PR_GET_SECCOMP)` answers 0 or 2 where it does, and fails with
/// `EINVAL` where it was built without.
pub(crate) fn seccomp_available() -> bool {
    // SAFETY: a plain system call with no pointer.
    let mode = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) };
    mode >= 0
}

/// Drops `caps`: from the bounding set (so exec cannot give them back),
/// then from the effective, permitted and inheritable sets; clears the
/// ambient set. A capability the kernel does not know is passed over in
/// the bounding set (`EINVAL`).
pub(crate) fn drop_capabilities(caps: &[u32]) -> io::Result<()> {
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
        for &cap in caps {
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
        for &cap in caps {
            let (word, bit) = ((cap / 32) as usize, 1u32 << (cap % 32));
            if let Some(data) = data.get_mut(word) {
                data.effective &= !bit;
                data.permitted &= !bit;
                data.inheritable &= !bit;
            }
        }
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Brings `lo` up in a new network namespace (it starts down).
pub(crate) fn loopback_up() -> io::Result<()> {
    // SAFETY: plain system calls on a socket this function owns (closed
    // before it returns), with an `ifreq` on this stack.
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

/// Runs `handler` when the process exits normally (`atexit`). `handler`
/// must not unwind.
pub(crate) fn at_exit(handler: extern "C" fn()) {
    // SAFETY: `handler` is an `extern "C" fn()`, which aborts rather than
    // unwinds across the C frame; registering it has no other condition.
    unsafe {
        libc::atexit(handler);
    }
}
