//! One call's lifecycle as a sans-IO state machine: [`Call`].
//!
//! A call takes one helper run from `received` to exactly one terminal
//! state. Its driver reports what happened (`handle`), carries out what
//! it is asked ([`Call::poll_action`], drained until `None`) and wakes at
//! [`Call::poll_timeout`]. The files, one concern each:
//!
//! * `settings.rs` — what a call is given before it starts: [`CallSpec`],
//!   [`CallSettings`] (budgets and timings, with their defaults and
//!   [`CallSettings::validate`]) and the choices it names ([`StdoutMode`],
//!   [`ResultChannel`], [`Admission`]).
//! * `driver.rs` — [`Call`] itself: its fields, its lifecycle inputs
//!   (`handle`) and its outputs (`poll_action`, `poll_timeout`).
//! * `bytes.rs` — the inputs that are never transitions: stderr and stdout
//!   bytes, forwarded and diverted counts, the pipe capacity.
//! * `input.rs` — the inputs of the transition table and [`CallError`],
//!   the refusal of an input that does not fit the state.
//! * `transitions.rs` — **every transition, in one `match (state, input)`**;
//!   [`TRANSITIONS`] lists its edges.
//! * `action.rs` — what a call asks of its driver ([`Action`]) and what it
//!   hands over at its end ([`Outcome`]).
//! * `spawn.rs` — a helper that was never spawned: the record's name for
//!   the OS error's kind ([`spawn_error_kind`]) and [`SpawnError`], the
//!   `Err` of [`Outcome::into_result`].
//! * `card.rs` — the approval card's text, built once from the redacted
//!   spec ([`card_text`], [`visible`]).
//! * `record.rs`, `exit.rs`, `timer.rs` — the call record, the observed
//!   exit, the timer table.
//!
//! **Invariants:** a call ends in exactly one terminal state and emits
//! exactly one [`Action::Finished`], its last action; an input that does
//! not fit the state is a [`CallError`] and changes nothing; a terminal
//! state absorbs every later input with `Ok`; bytes never cause a
//! transition (only the opt-in kill ceiling, once crossed, becomes a
//! cancel); every string the call keeps passes through its redactor.

mod action;
mod bytes;
mod card;
mod driver;
mod exit;
mod input;
mod record;
mod settings;
mod spawn;
mod timer;
mod transitions;

pub use action::{Action, ApprovalCard, AuditEvent, AuditKind, Outcome, SpawnOrder};
pub use card::{card_text, visible};
pub use driver::Call;
pub use exit::Exit;
pub use input::{CallError, Input};
use record::unix_us;
pub use record::{
    ApprovalDecision, CallKind, CallRecord, CancelReason, DisconnectPolicy, ExitStatus, ResultKind,
    Signal, SignalMark, State, StateMark, StreamEnd, rfc3339,
};
pub use settings::{
    Admission, CallSettings, CallSpec, DebugWindow, ResultChannel, ResultClassifier, SettingsError,
    StdoutMode,
};
pub use spawn::{OutcomeError, SpawnError, StdoutTruncated, spawn_error_kind};
pub use timer::Timer;
pub use transitions::TRANSITIONS;
