//! How a call's handle and its host reach the owner, which waits in
//! `poll(2)` on the helper's pipes: a channel for the events, and a
//! doorbell the owner polls with the pipes: an `eventfd` where the system
//! has one (one descriptor, made in one system call), else a non-blocking
//! pipe.
//!
//! A sender queues the event, then rings: adds one to the doorbell. The
//! owner, woken by the doorbell, empties it first and then takes every
//! queued event, so an event sent at any moment is either taken now or
//! rings again: no wake-up is lost. A full doorbell already rings. The
//! doorbell's two ends belong to the inbox: senders reach it weakly, so a
//! handle kept after its call holds no file descriptor, and a ring, made
//! while the inbox is alive, never meets a closed pipe (no `SIGPIPE`).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, SendError, Sender};
use std::sync::{Arc, Weak};

use super::Event;

/// The sending side, cheap to clone: for handles, cancellers and the host.
#[derive(Debug, Clone)]
pub struct Mailbox {
    events: Sender<Event>,
    /// Dead once the inbox is gone (or for a mailbox nobody reads).
    bell: Weak<Bell>,
}

/// The owner's side.
#[derive(Debug)]
pub struct Inbox {
    events: Receiver<Event>,
    bell: Arc<Bell>,
}

/// The doorbell, non-blocking: an `eventfd` (`read` and `write` are the
/// same descriptor), or both ends of a pipe.
#[derive(Debug)]
struct Bell {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl Bell {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn new() -> io::Result<Self> {
        use rustix::event::{EventfdFlags, eventfd};
        let read = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self { read, write: None })
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn new() -> io::Result<Self> {
        let (read, write) = std::io::pipe()?;
        let (read, write) = (OwnedFd::from(read), OwnedFd::from(write));
        rustix::io::ioctl_fionbio(&read, true)?;
        rustix::io::ioctl_fionbio(&write, true)?;
        Ok(Self {
            read,
            write: Some(write),
        })
    }

    /// Rings: a full doorbell (`EAGAIN`) is already ringing.
    fn ring(&self) {
        let write = self.write.as_ref().unwrap_or(&self.read);
        // An eventfd takes an 8-byte count; a pipe any byte.
        let _ = rustix::io::write(write, &1u64.to_ne_bytes());
    }
}

impl Mailbox {
    /// A new mailbox and its inbox. Fails only if no doorbell can be made
    /// (the process is out of file descriptors).
    pub fn open() -> io::Result<(Mailbox, Inbox)> {
        let bell = Arc::new(Bell::new()?);
        let (events, received) = mpsc::channel();
        let mailbox = Mailbox {
            events,
            bell: Arc::downgrade(&bell),
        };
        let inbox = Inbox {
            events: received,
            bell,
        };
        Ok((mailbox, inbox))
    }

    /// A mailbox whose owner never started: every send fails.
    pub fn closed() -> Self {
        let (events, _) = mpsc::channel();
        Self {
            events,
            bell: Weak::new(),
        }
    }

    /// Queues `event` for the owner and wakes it. Fails once the owner no
    /// longer takes events (the call finished).
    pub fn send(&self, event: Event) -> Result<(), SendError<Event>> {
        self.events.send(event)?;
        if let Some(bell) = self.bell.upgrade() {
            bell.ring();
        }
        Ok(())
    }
}

impl Inbox {
    /// The doorbell, for the owner's `poll`.
    pub fn bell(&self) -> BorrowedFd<'_> {
        self.bell.read.as_fd()
    }

    /// Empties the doorbell. Done before taking the queued events: an
    /// event queued after this rings again.
    pub fn silence(&self) {
        let mut bytes = [0; 64];
        while matches!(rustix::io::read(&self.bell.read, &mut bytes), Ok(n) if n > 0) {}
    }

    /// The next queued event, if any.
    pub fn try_next(&self) -> Option<Event> {
        self.events.try_recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::fd::AsRawFd;

    use rustix::event::{PollFd, PollFlags, poll};
    use spillguard_core::{CancelReason, Input};

    use crate::blocking::Command;

    fn rings(inbox: &Inbox) -> bool {
        let mut fds = [PollFd::from_borrowed_fd(inbox.bell(), PollFlags::IN)];
        let zero = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&zero)).unwrap() == 1
    }

    fn cancel() -> Event {
        Event::Command(Command::Input(Input::Cancel(CancelReason::Requested)))
    }

    #[test]
    fn a_sent_event_rings_until_the_owner_silences_it() {
        let (mailbox, inbox) = Mailbox::open().unwrap();
        assert!(!rings(&inbox));
        mailbox.send(cancel()).unwrap();
        mailbox.clone().send(Event::ProcessLost).unwrap();
        assert!(rings(&inbox));
        inbox.silence();
        assert!(!rings(&inbox));
        let taken: Vec<String> = std::iter::from_fn(|| inbox.try_next())
            .map(|event| format!("{event:?}"))
            .collect();
        assert_eq!(taken, ["Command(Input(Cancel(Requested)))", "ProcessLost"]);
    }

    #[test]
    fn a_full_doorbell_still_rings_and_loses_no_event() {
        let (mailbox, inbox) = Mailbox::open().unwrap();
        // Far more rings than a pipe holds bytes.
        for _ in 0..200_000 {
            mailbox.send(Event::ProcessLost).unwrap();
        }
        assert!(rings(&inbox));
        inbox.silence();
        assert_eq!(std::iter::from_fn(|| inbox.try_next()).count(), 200_000);
    }

    #[test]
    fn sends_fail_once_the_inbox_is_gone_or_never_was() {
        let (mailbox, inbox) = Mailbox::open().unwrap();
        drop(inbox);
        assert!(mailbox.send(cancel()).is_err());
        assert!(Mailbox::closed().send(cancel()).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn senders_kept_after_the_inbox_hold_no_file_descriptor() {
        let (mailbox, inbox) = Mailbox::open().unwrap();
        let bell = inbox.bell.read.as_raw_fd();
        let open_fd = |fd: i32| std::path::Path::new(&format!("/proc/self/fd/{fd}")).exists();
        assert!(open_fd(bell));
        let kept: Vec<Mailbox> = (0..10).map(|_| mailbox.clone()).collect();
        drop(inbox);
        // The fd number may be reused by another test's file: only check
        // that no sender can still ring it.
        assert!(kept.iter().all(|mailbox| mailbox.bell.upgrade().is_none()));
    }
}
