//! The process-wide retention budget shared by every concurrent call.
//!
//! A [`RetentionPool`] is a counter of bytes held, with a fixed capacity
//! (`stderr_retained_process_bytes`). Captures reserve from it as their
//! retained bytes grow, through a [`PoolLease`]; the lease travels with the
//! retained bytes to whoever ends up holding them and gives its bytes back when
//! it is dropped. The pool never hands out more than its capacity, not even
//! for a moment: reservation is one compare-and-swap on the in-use counter.
//!
//! The pool is shared fairly. With `n` leases open, each lease's fair share
//! is `capacity / n`. A lease may grow past its share while nobody is short,
//! but once a lease below its share is refused bytes (it is *starving*), no
//! lease grows past its share, and a capture above its share gives the
//! excess back the next time it is fed or when it finishes
//! (see [`StreamCapture`](crate::StreamCapture)). So no call is held under
//! `min(its budget, capacity / n)` because others took the pool first,
//! except for as long as a call above its share writes nothing.
//!
//! The pool is plain shared memory (an `Arc` of atomics), not IO, so it lives
//! in the core and can be shared between threads or tasks of any runtime.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A shared budget of retained bytes.
///
/// Cloning a pool gives another handle to the same budget.
///
/// # Examples
///
/// ```
/// use spillguard_core::RetentionPool;
///
/// let pool = RetentionPool::new(100);
/// let mut a = pool.lease();
/// let mut b = pool.lease();
/// assert_eq!(a.grow(70), 70);
/// assert_eq!(b.grow(70), 30); // only 30 left: a partial grant, never an error
/// assert_eq!(pool.in_use(), 100);
/// drop(a);
/// assert_eq!(pool.in_use(), 30);
/// assert_eq!(pool.peak(), 100);
/// ```
#[derive(Clone)]
pub struct RetentionPool {
    shared: Arc<Shared>,
}

struct Shared {
    capacity: u64,
    in_use: AtomicU64,
    peak: AtomicU64,
    /// Leases open now.
    leases: AtomicU64,
    /// Leases below their share that were refused bytes and have not had
    /// their share since.
    starving: AtomicU64,
}

impl RetentionPool {
    /// Creates a pool that lets at most `capacity` bytes be held at once.
    pub fn new(capacity: u64) -> Self {
        Self {
            shared: Arc::new(Shared {
                capacity,
                in_use: AtomicU64::new(0),
                peak: AtomicU64::new(0),
                leases: AtomicU64::new(0),
                starving: AtomicU64::new(0),
            }),
        }
    }

    /// Creates a pool that never limits anything (capacity `u64::MAX`).
    ///
    /// Useful for a capture that has no process-wide budget, such as a unit
    /// test or a single-call tool.
    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    /// The most bytes this pool lets be held at once.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }

    /// Bytes held right now by all leases together.
    pub fn in_use(&self) -> u64 {
        self.shared.in_use.load(Ordering::Acquire)
    }

    /// The highest [`in_use`](Self::in_use) figure ever reached.
    pub fn peak(&self) -> u64 {
        self.shared.peak.load(Ordering::Acquire)
    }

    /// Bytes that could still be reserved right now.
    pub fn available(&self) -> u64 {
        self.capacity().saturating_sub(self.in_use())
    }

    /// Leases open on this pool right now (live captures and the finished
    /// windows still held).
    pub fn leases(&self) -> u64 {
        self.shared.leases.load(Ordering::Acquire)
    }

    /// Each open lease's fair share: `capacity / leases` (the whole
    /// capacity while no lease is open).
    pub fn fair_share(&self) -> u64 {
        self.capacity() / self.leases().max(1)
    }

    /// Whether a lease below its fair share is waiting for bytes: while it
    /// is, no lease grows past its share and leases above it give back.
    pub fn is_contended(&self) -> bool {
        self.shared.starving.load(Ordering::Acquire) > 0
    }

    /// Opens an empty lease on this pool.
    pub fn lease(&self) -> PoolLease {
        self.shared.leases.fetch_add(1, Ordering::AcqRel);
        PoolLease {
            pool: self.clone(),
            bytes: 0,
            starving: false,
        }
    }

    /// Reserves up to `want` bytes and returns how many were granted.
    fn reserve(&self, want: u64) -> u64 {
        let shared = &*self.shared;
        let mut current = shared.in_use.load(Ordering::Acquire);
        loop {
            let grant = want.min(shared.capacity.saturating_sub(current));
            if grant == 0 {
                return 0;
            }
            let next = current + grant;
            match shared.in_use.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    shared.peak.fetch_max(next, Ordering::AcqRel);
                    return grant;
                }
                Err(actual) => current = actual,
            }
        }
    }

    fn release(&self, bytes: u64) {
        if bytes > 0 {
            self.shared.in_use.fetch_sub(bytes, Ordering::AcqRel);
        }
    }
}

impl fmt::Debug for RetentionPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetentionPool")
            .field("capacity", &self.capacity())
            .field("in_use", &self.in_use())
            .field("peak", &self.peak())
            .field("leases", &self.leases())
            .field("contended", &self.is_contended())
            .finish()
    }
}

/// Bytes reserved from a [`RetentionPool`], given back when dropped.
///
/// A lease only grows while a capture is fed; it is released as a whole when
/// the retained bytes it accounts for are dropped.
#[derive(Debug)]
pub struct PoolLease {
    pool: RetentionPool,
    bytes: u64,
    starving: bool,
}

impl PoolLease {
    /// Asks for `more` bytes; returns how many were granted (possibly fewer,
    /// possibly zero). Never fails and never allocates.
    ///
    /// While the pool [is contended](RetentionPool::is_contended), a grant
    /// never takes the lease past its [fair share](RetentionPool::fair_share).
    /// A lease refused bytes while below its share is starving until a
    /// later grant takes it to its share or the whole request, or until it
    /// [settles](Self::settle).
    pub fn grow(&mut self, more: u64) -> u64 {
        let share = self.pool.fair_share();
        let allowed = match self.pool.is_contended() {
            true => more.min(share.saturating_sub(self.bytes)),
            false => more,
        };
        let granted = self.pool.reserve(allowed);
        self.bytes += granted;
        self.set_starving(granted < more && self.bytes < share);
        granted
    }

    /// Stops waiting for bytes: a lease that will not grow again (its
    /// capture finished) must not keep the pool contended.
    pub fn settle(&mut self) {
        self.set_starving(false);
    }

    fn set_starving(&mut self, starving: bool) {
        if starving != self.starving {
            self.starving = starving;
            let count = &self.pool.shared.starving;
            match starving {
                true => count.fetch_add(1, Ordering::AcqRel),
                false => count.fetch_sub(1, Ordering::AcqRel),
            };
        }
    }

    /// Gives back every byte above `bytes` to the pool (no-op if the lease
    /// holds no more than that).
    pub fn shrink_to(&mut self, bytes: u64) {
        if self.bytes > bytes {
            self.pool.release(self.bytes - bytes);
            self.bytes = bytes;
        }
    }

    /// Bytes this lease holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The pool this lease draws from.
    pub fn pool(&self) -> &RetentionPool {
        &self.pool
    }
}

impl Drop for PoolLease {
    fn drop(&mut self) {
        self.settle();
        self.pool.release(self.bytes);
        self.pool.shared.leases.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_partial_at_the_edge_and_released_on_drop() {
        let pool = RetentionPool::new(10);
        let mut a = pool.lease();
        assert_eq!(a.grow(4), 4);
        assert_eq!(a.grow(4), 4);
        let mut b = pool.lease();
        assert_eq!(b.grow(4), 2);
        assert_eq!(b.grow(1), 0);
        assert_eq!((pool.in_use(), pool.available(), pool.peak()), (10, 0, 10));
        drop(a);
        assert_eq!((pool.in_use(), pool.available()), (2, 8));
        drop(b);
        assert_eq!((pool.in_use(), pool.peak()), (0, 10));
    }

    #[test]
    fn concurrent_leases_never_exceed_capacity() {
        let pool = RetentionPool::new(1000);
        let leases: Vec<(u64, PoolLease)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..8)
                .map(|_| {
                    scope.spawn(|| {
                        let mut lease = pool.lease();
                        let mut got = 0;
                        for _ in 0..1000 {
                            got += lease.grow(1);
                            assert!(pool.in_use() <= 1000);
                        }
                        (got, lease)
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let total: u64 = leases.iter().map(|(got, _)| got).sum();
        assert_eq!(total, 1000);
        assert_eq!(pool.in_use(), 1000);
        assert_eq!(pool.peak(), 1000);
        drop(leases);
        assert_eq!(pool.in_use(), 0);
    }
}
