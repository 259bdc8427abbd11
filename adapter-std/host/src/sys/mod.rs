//! Every `unsafe` of the host layer, in one room: the system calls the host layer makes
//! that neither the standard library nor rustix wraps safely, each behind
//! a safe function whose contract holds for every caller.
//!
//! * [`spawn`]: the clone of a helper that shares the host's memory until
//!   it execs (`clone3` with `CLONE_VM | CLONE_VFORK | CLONE_PIDFD`, into
//!   its control group where it has one), on a stack of its own with a
//!   guard page, and what the child does there before `execve`. Why it is
//!   unsafe: the child runs in the host's memory with the host's thread
//!   suspended, so it may only make system calls on values made before
//!   the clone (no allocation, no lock, no unwinding), with every signal
//!   blocked until the host's handlers are reset.
//! * [`calls`]: the helper's own confinement calls that have no safe
//!   wrapper (Landlock, seccomp, capabilities, the loopback interface of
//!   a new network namespace) and `atexit`. Why unsafe: raw `prctl`,
//!   `syscall` and `ioctl` with pointers to this stack.
//!
//! The rest of the host layer is free of `unsafe` (the crate denies it, this
//! module alone allows it), and every block here says why it is sound.
//! Builds on Linux only; tested on x86_64 glibc (aarch64 glibc builds
//! with the usual `clone`, as the host layer's `clone3` is x86_64's; musl is
//! untested).

pub(crate) mod calls;
pub(crate) mod spawn;
