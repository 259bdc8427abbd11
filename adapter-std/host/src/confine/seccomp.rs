//! The seccomp filter a confined helper installs before exec: the system
//! calls that would let it reach past its bounds through a door Landlock
//! does not guard on this kernel.
//!
//! * `ioctl(fd, TIOCSTI)` and `ioctl(fd, TIOCLINUX)` fail with `EPERM`
//!   for every confined helper: they push bytes into a terminal's input,
//!   which the user's shell would run after the host exits, outside any
//!   sandbox (whatever descriptor reaches the terminal).
//! * With a file sandbox or `network none`, `socket(AF_UNIX, …)` fails
//!   with `EACCES`: connecting to a unix socket (a container engine's, an
//!   agent's, a local proxy's) needs no file right the Landlock of these
//!   kernels can refuse, so no unix socket is made at all (abstract ones
//!   are scoped by Landlock too, from ABI 6). `socketpair` (two
//!   connected ends, no address) and the descriptors the call hands over
//!   still work. `io_uring_setup` fails too (`EPERM`), as a ring can make
//!   a socket without the `socket` call.
//! * A system call of another ABI than the helper's (the x32 numbers on
//!   x86_64, a 32-bit `int 0x80`) kills the process: the filter's checks
//!   are written for the native numbers only.
//!
//! The program is built by the host (no allocation in the child) and
//! needs `no_new_privs` or `CAP_SYS_ADMIN`; a kernel without seccomp
//! refuses the call, unless degraded mode is allowed (then the record
//! lists it).

use std::sync::{Arc, OnceLock};

/// Which checks the filter makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Rules {
    /// `socket(AF_UNIX, …)` and `io_uring_setup` are refused.
    pub no_unix_sockets: bool,
}

/// A built filter, shared by the calls whose rules are the same.
#[derive(Debug)]
pub(crate) struct Filter {
    program: Vec<libc::sock_filter>,
}

impl Filter {
    /// The filter for `rules` (built once per distinct rules).
    pub(crate) fn get(rules: Rules) -> Arc<Filter> {
        static PLAIN: OnceLock<Arc<Filter>> = OnceLock::new();
        static NO_UNIX: OnceLock<Arc<Filter>> = OnceLock::new();
        let slot = if rules.no_unix_sockets {
            &NO_UNIX
        } else {
            &PLAIN
        };
        Arc::clone(slot.get_or_init(|| Arc::new(Filter::build(rules))))
    }

    fn build(rules: Rules) -> Filter {
        let mut p = Vec::with_capacity(24);
        // The architecture: another ABI's numbers mean other calls.
        p.push(load(OFFSET_ARCH));
        p.push(jump_if(AUDIT_ARCH, 1, 0));
        p.push(ret(libc::SECCOMP_RET_KILL_PROCESS));
        p.push(load(OFFSET_NR));
        #[cfg(target_arch = "x86_64")]
        {
            // x32 system calls: their numbers have bit 30 set.
            const X32_SYSCALL_BIT: u32 = 0x4000_0000;
            p.push(jump_ge(X32_SYSCALL_BIT, 0, 1));
            p.push(ret(libc::SECCOMP_RET_KILL_PROCESS));
        }
        // ioctl: the terminal-input requests.
        let ioctl_at = p.len();
        p.push(jump_if(libc::SYS_ioctl as u32, 0, 0));
        let mut socket_at = None;
        let mut uring_at = None;
        if rules.no_unix_sockets {
            socket_at = Some(p.len());
            p.push(jump_if(libc::SYS_socket as u32, 0, 0));
            uring_at = Some(p.len());
            p.push(jump_if(libc::SYS_io_uring_setup as u32, 0, 0));
        }
        p.push(ret(libc::SECCOMP_RET_ALLOW));

        let ioctl = p.len();
        p.push(load(OFFSET_ARG1_LOW));
        p.push(jump_if(libc::TIOCSTI as u32, 2, 0));
        p.push(jump_if(libc::TIOCLINUX as u32, 1, 0));
        p.push(ret(libc::SECCOMP_RET_ALLOW));
        p.push(ret(errno(libc::EPERM)));
        patch(&mut p, ioctl_at, ioctl);

        if let (Some(socket_at), Some(uring_at)) = (socket_at, uring_at) {
            let socket = p.len();
            p.push(load(OFFSET_ARG0_LOW));
            p.push(jump_if(libc::AF_UNIX as u32, 1, 0));
            p.push(ret(libc::SECCOMP_RET_ALLOW));
            p.push(ret(errno(libc::EACCES)));
            patch(&mut p, socket_at, socket);
            let uring = p.len();
            p.push(ret(errno(libc::EPERM)));
            patch(&mut p, uring_at, uring);
        }
        Filter { program: p }
    }

    /// The `sock_fprog` the child hands to `prctl(PR_SET_SECCOMP, …)`:
    /// valid while `self` lives.
    pub(crate) fn fprog(&self) -> libc::sock_fprog {
        libc::sock_fprog {
            len: u16::try_from(self.program.len()).unwrap_or(u16::MAX),
            filter: self.program.as_ptr().cast_mut(),
        }
    }

    /// The program's instructions, for tests.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.program.len()
    }
}

/// Whether this kernel filters system calls with seccomp (asked once):
/// `prctl(PR_GET_SECCOMP)` answers 0 (no filter yet) or 2 (filtered
/// already, as in a container) where it does, and fails with `EINVAL`
/// where it was built without.
pub(crate) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(crate::sys::calls::seccomp_available)
}

/// `seccomp_data`'s fields, as the filter reads them.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// `args[0]` and `args[1]`, their low 32 bits (little-endian).
const OFFSET_ARG0_LOW: u32 = 16;
const OFFSET_ARG1_LOW: u32 = 24;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xC000_00F3;
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
compile_error!(
    "the seccomp filter names the audit architecture of x86_64, aarch64 and riscv64 only"
);

fn errno(code: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (code as u32 & libc::SECCOMP_RET_DATA)
}

fn load(offset: u32) -> libc::sock_filter {
    stmt((libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16, offset)
}

fn ret(value: u32) -> libc::sock_filter {
    stmt((libc::BPF_RET | libc::BPF_K) as u16, value)
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump_if(value: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k: value,
    }
}

#[cfg(target_arch = "x86_64")]
fn jump_ge(value: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16,
        jt,
        jf,
        k: value,
    }
}

/// Points the "equal" branch of the jump at `at` to `target`.
fn patch(program: &mut [libc::sock_filter], at: usize, target: usize) {
    let offset = target - at - 1;
    program[at].jt = u8::try_from(offset).unwrap_or(u8::MAX);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the classic BPF program on one `seccomp_data`, as the kernel
    /// would: its verdict.
    fn run(filter: &Filter, nr: u32, arch: u32, args: [u64; 2]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        data[16..24].copy_from_slice(&args[0].to_le_bytes());
        data[24..32].copy_from_slice(&args[1].to_le_bytes());
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let insn = filter.program[pc];
            let code = u32::from(insn.code);
            if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                let at = insn.k as usize;
                acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                pc += 1;
            } else if code == libc::BPF_RET | libc::BPF_K {
                return insn.k;
            } else if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K {
                pc += 1 + usize::from(if acc == insn.k { insn.jt } else { insn.jf });
            } else if code == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K {
                pc += 1 + usize::from(if acc >= insn.k { insn.jt } else { insn.jf });
            } else {
                panic!("unexpected instruction {code:#x}");
            }
        }
    }

    #[test]
    fn the_filter_refuses_exactly_the_terminal_requests_and_unix_sockets() {
        let plain = Filter::build(Rules {
            no_unix_sockets: false,
        });
        let strict = Filter::build(Rules {
            no_unix_sockets: true,
        });
        let ioctl = libc::SYS_ioctl as u32;
        let socket = libc::SYS_socket as u32;
        for filter in [&plain, &strict] {
            for request in [libc::TIOCSTI, libc::TIOCLINUX] {
                assert_eq!(
                    run(filter, ioctl, AUDIT_ARCH, [0, request]),
                    errno(libc::EPERM)
                );
                // The high half of the request is not the kernel's.
                assert_eq!(
                    run(filter, ioctl, AUDIT_ARCH, [5, (1 << 32) | request]),
                    errno(libc::EPERM)
                );
            }
            for request in [libc::TIOCGWINSZ, libc::FIONREAD, libc::TCGETS] {
                assert_eq!(
                    run(filter, ioctl, AUDIT_ARCH, [0, request]),
                    libc::SECCOMP_RET_ALLOW
                );
            }
            assert_eq!(
                run(filter, ioctl, 0x4000_0003, [0, 0]),
                libc::SECCOMP_RET_KILL_PROCESS,
                "another architecture"
            );
            assert_eq!(
                run(filter, libc::SYS_read as u32, AUDIT_ARCH, [0, 0]),
                libc::SECCOMP_RET_ALLOW
            );
            #[cfg(target_arch = "x86_64")]
            assert_eq!(
                run(filter, 0x4000_0000 | ioctl, AUDIT_ARCH, [0, 0]),
                libc::SECCOMP_RET_KILL_PROCESS,
                "an x32 call"
            );
        }
        let unix = [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64];
        let inet = [libc::AF_INET as u64, libc::SOCK_STREAM as u64];
        assert_eq!(
            run(&plain, socket, AUDIT_ARCH, unix),
            libc::SECCOMP_RET_ALLOW
        );
        assert_eq!(run(&strict, socket, AUDIT_ARCH, unix), errno(libc::EACCES));
        assert_eq!(
            run(&strict, socket, AUDIT_ARCH, inet),
            libc::SECCOMP_RET_ALLOW
        );
        let uring = libc::SYS_io_uring_setup as u32;
        assert_eq!(run(&strict, uring, AUDIT_ARCH, [8, 0]), errno(libc::EPERM));
        assert_eq!(
            run(&plain, uring, AUDIT_ARCH, [8, 0]),
            libc::SECCOMP_RET_ALLOW
        );
        let pair = libc::SYS_socketpair as u32;
        assert_eq!(
            run(&strict, pair, AUDIT_ARCH, unix),
            libc::SECCOMP_RET_ALLOW
        );
        assert!(strict.len() > plain.len());
    }
}
