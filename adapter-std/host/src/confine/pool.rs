//! Control groups made before the calls that need them and removed after
//! them, on a thread of their own: neither the `mkdir` nor the `rmdir` of
//! a group is on a call's path.
//!
//! * **Taking.** A call takes a spare group under the parent it needs
//!   ([`take`]), or makes one at once when none is spare (the first call,
//!   a burst). Once a second call has taken a group under a parent,
//!   [`SPARE`] empty groups are kept ready there until no call has taken
//!   one for [`KEEP`]; then they are removed. (A process that runs one
//!   bounded call, as `spillguard run` does, makes no spare.)
//! * **Removing.** A call's tree is killed and gone before its call ends;
//!   its empty groups are then handed here ([`retire`]) and removed within
//!   moments, groups a helper made below them first. A group that still
//!   holds a process is killed again and retried for [`RETRY`]; one that
//!   still cannot be removed is kept for [`settle`] to try again and
//!   report.
//! * **Settling.** [`settle`] removes the spare groups and waits for the
//!   retired ones to be gone. It runs at the process's exit (a return from
//!   `main` or `std::process::exit`); a host that is killed leaves its
//!   spare groups, which are empty (a later process whose pid is the same
//!   makes its groups under the next free name).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, Once, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Empty groups kept ready under each parent calls used lately.
pub const SPARE: usize = 2;

/// How long spare groups are kept after a call last took one.
pub const KEEP: Duration = Duration::from_secs(60);

/// How long a retired group that cannot be removed is killed and retried
/// by the thread before it is left to [`settle`].
pub const RETRY: Duration = Duration::from_secs(5);

/// The pause between two tries of a retired group that is still busy.
const RETRY_PAUSE: Duration = Duration::from_millis(5);

#[derive(Default)]
struct Pool {
    state: Mutex<State>,
    /// Work was added, or done.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// The process these groups belong to: a child forked from the host
    /// (a daemon's second half) starts a pool of its own.
    pid: u32,
    parents: Vec<Parent>,
    retired: Vec<Retired>,
    /// Retired groups the thread gave up on: [`settle`] tries them again.
    stuck: Vec<PathBuf>,
    /// The thread is running.
    started: bool,
    /// Groups the thread is making or removing outside the lock.
    working: usize,
}

struct Parent {
    dir: PathBuf,
    spare: Vec<PathBuf>,
    /// When a call last took a group here; `None`: keep no spare.
    last_take: Option<Instant>,
    /// Groups taken here since `last_take` was last `None`.
    takes: u32,
}

struct Retired {
    dir: PathBuf,
    next_try: Instant,
    give_up: Instant,
}

/// The one pool of the process.
fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(Pool::default)
}

/// The process that registered the exit handler: a forked child inherits
/// the handler, and must not touch a lock its parent's threads may have
/// held at the fork.
static OWNER: AtomicU32 = AtomicU32::new(0);

fn lock() -> MutexGuard<'static, State> {
    let mut state = pool().state.lock().unwrap_or_else(PoisonError::into_inner);
    let pid = std::process::id();
    if state.pid != pid {
        // A fork without exec: the groups listed are the parent's, and
        // its thread did not come along.
        *state = State {
            pid,
            ..State::default()
        };
    }
    state
}

/// The `n` of the next group name.
static SEQ: AtomicU64 = AtomicU64::new(0);

/// Makes a group under `parent` with a fresh name: `spillguard.<host
/// pid>.<n>`, the next `n` while a name is taken (by a process that had
/// this pid before and was killed).
fn make(parent: &Path) -> io::Result<PathBuf> {
    let mut tries = 0;
    loop {
        let name = format!(
            "spillguard.{}.{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 64 => tries += 1,
            made => return made.map(|()| dir),
        }
    }
}

/// An empty group under `parent` for one call: a spare one, or one made
/// now. The caller owns it until it [`retire`]s it.
pub fn take(parent: &Path) -> io::Result<PathBuf> {
    let spare = {
        let mut state = lock();
        let now = Instant::now();
        let index = match state.parents.iter().position(|p| p.dir == parent) {
            Some(index) => index,
            None => {
                state.parents.push(Parent {
                    dir: parent.to_path_buf(),
                    spare: Vec::new(),
                    last_take: None,
                    takes: 0,
                });
                state.parents.len() - 1
            }
        };
        let entry = &mut state.parents[index];
        if entry.last_take.is_none() {
            entry.takes = 0;
        }
        entry.last_take = Some(now);
        entry.takes = entry.takes.saturating_add(1);
        let spare = entry.spare.pop();
        wake(&mut state);
        spare
    };
    match spare {
        // Removed from outside since it was made: make one now.
        Some(dir) if dir.is_dir() => Ok(dir),
        _ => make(parent),
    }
}

/// Hands a call's groups over for removal; their processes are gone (or
/// are killed again before each try). Without the thread (it could not
/// be started), they are removed here.
pub fn retire(dirs: impl IntoIterator<Item = PathBuf>) {
    let mut state = lock();
    let now = Instant::now();
    wake(&mut state);
    if state.started {
        state_retire(&mut state.retired, dirs, now);
    } else {
        drop(state);
        let left: Vec<PathBuf> = dirs.into_iter().filter(|dir| !remove(dir)).collect();
        lock().stuck.extend(left);
    }
}

/// Removes every spare group and waits, at most `wait`, until every
/// retired group is removed too. Returns whether none is left. Calls
/// that come after take (and make) groups again.
pub fn settle(wait: Duration) -> bool {
    let start = Instant::now();
    let mut state = lock();
    loop {
        let now = Instant::now();
        let state_now = &mut *state;
        for parent in &mut state_now.parents {
            parent.last_take = None;
            let spare = std::mem::take(&mut parent.spare);
            state_retire(&mut state_now.retired, spare, now);
        }
        let mut due: Vec<PathBuf> = std::mem::take(&mut state_now.retired)
            .into_iter()
            .map(|group| group.dir)
            .collect();
        due.append(&mut state_now.stuck);
        drop(state);
        due.retain(|dir| !remove(dir));
        state = lock();
        state.stuck.append(&mut due);
        pool().changed.notify_all();
        if state.retired.is_empty() && state.stuck.is_empty() && state.working == 0 {
            return true;
        }
        let left = wait.saturating_sub(start.elapsed());
        if left.is_zero() {
            return false;
        }
        state = pool()
            .changed
            .wait_timeout(state, left.min(RETRY_PAUSE))
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

fn state_retire(retired: &mut Vec<Retired>, dirs: impl IntoIterator<Item = PathBuf>, now: Instant) {
    retired.extend(dirs.into_iter().map(|dir| Retired {
        dir,
        next_try: now,
        give_up: now + RETRY,
    }));
}

/// Registers the exit handler once, starts the thread if it is not
/// running, and tells it there is work.
fn wake(state: &mut State) {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        OWNER.store(std::process::id(), Ordering::Relaxed);
        // `at_exit` never unwinds: nothing in `settle` panics (every lock
        // ignores poisoning, every duration is saturating).
        crate::sys::calls::at_exit(at_exit);
    });
    if !state.started {
        // Without the thread, spare groups are not made and retired
        // groups are removed by `retire` itself.
        state.started = std::thread::Builder::new()
            .name("spillguard-cgroups".into())
            .spawn(run)
            .is_ok();
    }
    pool().changed.notify_all();
}

extern "C" fn at_exit() {
    // In a child forked without exec, the groups are its parent's, and
    // the lock may be held by a thread that did not come along.
    if OWNER.load(Ordering::Relaxed) == std::process::id() {
        let _ = settle(Duration::from_secs(1));
    }
}

/// What the thread does next.
enum Work {
    Remove(Retired),
    Make(PathBuf),
    Wait(Duration),
}

/// The thread: removes retired groups, keeps spare groups where calls
/// take them, and removes spare groups no call took for [`KEEP`].
fn run() {
    let mut state = lock();
    loop {
        let work = next_work(&mut state, Instant::now());
        match work {
            Work::Remove(group) => {
                state.working += 1;
                drop(state);
                let removed = remove(&group.dir);
                state = lock();
                state.working -= 1;
                let now = Instant::now();
                if !removed {
                    if now < group.give_up {
                        state.retired.push(Retired {
                            next_try: now + RETRY_PAUSE,
                            ..group
                        });
                    } else {
                        state.stuck.push(group.dir);
                    }
                }
            }
            Work::Make(parent) => {
                state.working += 1;
                drop(state);
                let made = make(&parent);
                state = lock();
                state.working -= 1;
                let now = Instant::now();
                let entry = state.parents.iter_mut().find(|p| p.dir == parent);
                match (made, entry) {
                    (Ok(dir), Some(entry)) if entry.last_take.is_some() => entry.spare.push(dir),
                    (Ok(dir), _) => state_retire(&mut state.retired, [dir], now),
                    // A parent where groups cannot be made keeps no spare;
                    // its calls make their own (and say why they cannot).
                    (Err(_), Some(entry)) => entry.last_take = None,
                    (Err(_), None) => {}
                }
            }
            Work::Wait(pause) => {
                state = pool()
                    .changed
                    .wait_timeout(state, pause)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
        }
        pool().changed.notify_all();
    }
}

fn next_work(state: &mut State, now: Instant) -> Work {
    if let Some(index) = state.retired.iter().position(|g| g.next_try <= now) {
        return Work::Remove(state.retired.swap_remove(index));
    }
    let mut pause = KEEP;
    let mut expired = Vec::new();
    for parent in &mut state.parents {
        match parent.last_take {
            Some(taken) if now.saturating_duration_since(taken) >= KEEP => {
                parent.last_take = None;
                expired.append(&mut parent.spare);
            }
            Some(taken) => {
                if parent.takes >= 2 && parent.spare.len() < SPARE {
                    return Work::Make(parent.dir.clone());
                }
                pause = pause.min(KEEP.saturating_sub(now.saturating_duration_since(taken)));
            }
            None => {}
        }
    }
    if !expired.is_empty() {
        state_retire(&mut state.retired, expired, now);
        return next_work(state, now);
    }
    if let Some(next) = state.retired.iter().map(|g| g.next_try).min() {
        pause = pause.min(next.saturating_duration_since(now));
    }
    Work::Wait(pause.max(Duration::from_millis(1)))
}

/// Removes `dir` and any group a helper made below it; `true` once it is
/// gone. A group still holding processes has them killed (all at once on
/// v2, one by one on v1) and is tried again later.
fn remove(dir: &Path) -> bool {
    if let Ok(below) = super::cgroup::subgroups(dir) {
        for sub in below {
            remove(&sub);
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(_) => {
            super::cgroup::kill_all(dir);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test at a time: `settle` is the whole process's.
    static TURN: Mutex<()> = Mutex::new(());

    /// A parent of its own for a test: any directory serves, groups are
    /// only made, listed and removed.
    fn parent(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("spillguard-pool-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> usize {
        fs::read_dir(dir).unwrap().count()
    }

    fn wait_for(what: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while !what() {
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    #[test]
    fn a_taken_group_is_followed_by_spares_and_removed_once_retired() {
        let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = parent("taken");
        let first = take(&parent).unwrap();
        assert!(first.is_dir());
        assert!(first.starts_with(&parent));
        // One call alone keeps no spare.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(entries(&parent), 1);
        // From the second on, the spares come, off the caller's path.
        let second = take(&parent).unwrap();
        assert!(wait_for(|| entries(&parent) == 2 + SPARE));
        // The next call takes a spare: nothing is made on its path.
        let third = take(&parent).unwrap();
        assert!(wait_for(|| entries(&parent) == 3 + SPARE));
        retire([first.clone(), second.clone(), third.clone()]);
        assert!(wait_for(|| !first.exists()
            && !second.exists()
            && !third.exists()));
        assert_eq!(entries(&parent), SPARE);
        assert!(settle(Duration::from_secs(5)));
        assert_eq!(entries(&parent), 0);
        fs::remove_dir(&parent).unwrap();
    }

    #[test]
    fn a_spare_removed_from_outside_is_not_handed_out() {
        let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = parent("outside");
        let first = take(&parent).unwrap();
        let second = take(&parent).unwrap();
        assert!(wait_for(|| entries(&parent) == 2 + SPARE));
        for entry in fs::read_dir(&parent).unwrap().flatten() {
            if entry.path() != first && entry.path() != second {
                fs::remove_dir(entry.path()).unwrap();
            }
        }
        let third = take(&parent).unwrap();
        assert!(third.is_dir());
        retire([first, second, third]);
        assert!(settle(Duration::from_secs(5)));
        assert!(wait_for(|| entries(&parent) == 0));
        fs::remove_dir(&parent).unwrap();
    }

    #[test]
    fn a_name_left_by_a_killed_process_with_the_same_pid_is_passed_over() {
        let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = parent("taken-names");
        let next = SEQ.load(Ordering::Relaxed);
        let left: Vec<PathBuf> = (next..next + 8)
            .map(|n| parent.join(format!("spillguard.{}.{n}", std::process::id())))
            .collect();
        for dir in &left {
            fs::create_dir(dir).unwrap();
        }
        let made = take(&parent).unwrap();
        assert!(made.is_dir());
        assert!(!left.contains(&made), "{made:?}");
        for dir in &left {
            fs::remove_dir(dir).unwrap();
        }
        retire([made]);
        assert!(settle(Duration::from_secs(5)));
        assert_eq!(entries(&parent), 0);
        fs::remove_dir(&parent).unwrap();
    }

    #[test]
    fn groups_made_below_a_retired_group_are_removed_with_it() {
        let _turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
        let parent = parent("nested");
        let group = take(&parent).unwrap();
        fs::create_dir_all(group.join("a").join("b")).unwrap();
        fs::create_dir(group.join("c")).unwrap();
        retire([group.clone()]);
        assert!(settle(Duration::from_secs(5)));
        assert!(!group.exists());
        fs::remove_dir(&parent).unwrap();
    }
}
