//! The audit record's layout is its format version's: the serde layout of
//! [`LogEntry`] and every type it holds (fields and variants, in order, as
//! postcard writes them) is traced and compared with the one recorded for
//! [`FORMAT_VERSION`] in `tests/audit_formats/v{N}.json`. A record type
//! that changes without a new format version fails here; the message says
//! how a field is added (the rule in the `audit` module's docs).
//!
//! `SPILLGUARD_BLESS=1` writes the file of a version that has none yet
//! (`cargo xtask audit-fixtures` does, with the version's fixtures); it
//! never overwrites one: a version's layout is fixed once released.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_reflection::{Registry, Samples, Tracer, TracerConfig};
use spillguard_core::audit::{FORMAT_VERSION, LogEntry, OLDEST_FORMAT_VERSION};
use spillguard_core::{
    ApprovalDecision, AuditKind, CallKind, CancelReason, DisconnectPolicy, LimitHit, Network,
    ResultKind, Retain, Signal, State, StdoutMode, StreamEnd,
};

/// The layout of today's [`LogEntry`], with every enum it holds traced
/// through all of its variants.
fn layout() -> Registry {
    // A text every string-typed field accepts: the fingerprint, which
    // checks its own, reads 32 hex digits.
    const TEXT: &str = "0123456789abcdef0123456789abcdef";
    let config = TracerConfig::default()
        .default_borrowed_str_value(TEXT)
        .default_string_value(TEXT.to_owned());
    let mut tracer = Tracer::new(config);
    let samples = Samples::new();
    // Each enum the entry holds, traced through all of its variants (an
    // enum added to a record and left out here fails `registry`, naming it).
    tracer.trace_type::<AuditKind>(&samples).unwrap();
    tracer.trace_type::<CallKind>(&samples).unwrap();
    tracer.trace_type::<State>(&samples).unwrap();
    tracer.trace_type::<ApprovalDecision>(&samples).unwrap();
    tracer.trace_type::<CancelReason>(&samples).unwrap();
    tracer.trace_type::<DisconnectPolicy>(&samples).unwrap();
    tracer.trace_type::<StreamEnd>(&samples).unwrap();
    tracer.trace_type::<ResultKind>(&samples).unwrap();
    tracer.trace_type::<Signal>(&samples).unwrap();
    tracer.trace_type::<StdoutMode>(&samples).unwrap();
    tracer.trace_type::<Retain>(&samples).unwrap();
    tracer.trace_type::<Network>(&samples).unwrap();
    tracer.trace_type::<LimitHit>(&samples).unwrap();
    tracer.trace_type::<LogEntry>(&samples).unwrap();
    tracer.registry().unwrap()
}

fn layout_file(version: u8) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/audit_formats")
        .join(format!("v{version}.json"))
}

#[test]
fn the_record_layout_is_the_one_recorded_for_its_format_version() {
    let traced = serde_json::to_string_pretty(&layout()).unwrap() + "\n";
    let path = layout_file(FORMAT_VERSION);
    let recorded = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(_) if std::env::var_os("SPILLGUARD_BLESS").is_some() => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).unwrap();
            }
            std::fs::write(&path, &traced).unwrap();
            return;
        }
        Err(error) => panic!(
            "{}: {error}: format version {FORMAT_VERSION} has no recorded layout; \
             `cargo xtask audit-fixtures` writes it with the version's fixtures",
            path.display()
        ),
    };
    assert!(
        traced == recorded,
        "the audit record's layout differs from format version {FORMAT_VERSION}'s \
         ({}): a log written by an earlier release would no longer decode. Add a \
         field at the end, behind a new format version: freeze version \
         {FORMAT_VERSION}'s types, raise FORMAT_VERSION, and write the new version's \
         fixtures with `cargo xtask audit-fixtures` (see the `audit` module's docs, \
         \"Adding a field to a record\").\n--- traced now:\n{traced}",
        path.display()
    );
}

#[test]
fn every_version_ever_written_has_its_layout_recorded() {
    for version in OLDEST_FORMAT_VERSION..=FORMAT_VERSION {
        let path = layout_file(version);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let registry: Registry = serde_json::from_str(&text).unwrap();
        assert!(registry.contains_key("LogEntry"), "{}", path.display());
    }
    assert!(
        !layout_file(FORMAT_VERSION + 1).exists(),
        "a layout is recorded for a version this release does not write yet"
    );
}
