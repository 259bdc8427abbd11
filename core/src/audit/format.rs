//! Record format versions: which layouts of [`LogEntry`] a frame may hold,
//! and how each is read.
//!
//! Every frame names the format version of its entry (the body's first
//! byte). The frame around the entry (header, sequence number, log id,
//! previous hash, payload, hash) is the same in every version, so the
//! chain of any log verifies whatever versions its records were written
//! in, and one log may hold records of several versions (a log appended
//! to across an upgrade).
//!
//! A reader decodes every version from 1 to [`FORMAT_VERSION`]. A record
//! of a later version (written by a newer release) is still checked as a
//! link of the chain (hash, sequence number, log id, seal), so the rest of
//! the log verifies; only its entry is not read: the verifier hands it on
//! with no entry and [`Record::is_newer_format`](super::Record::is_newer_format)
//! true. That is never tampering. Version 0 was never written: a record
//! that names it is malformed.
//!
//! How a field is added: see the [module docs](super#adding-a-field-to-a-record).

use super::LogEntry;

/// The format version this release writes: the newest it reads.
///
/// * 1: the first.
/// * 2: [`AuditKind::Restart`](crate::AuditKind::Restart), a variant added
///   at the end of its enum; every entry of version 1 reads the same in
///   version 2's types.
pub const FORMAT_VERSION: u8 = 2;

/// The oldest format version ever written.
pub const OLDEST_FORMAT_VERSION: u8 = 1;

/// What a record's entry bytes are, read by its format version.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// A version this reader knows, decoded (and turned into today's
    /// types).
    Entry(LogEntry),
    /// A version newer than [`FORMAT_VERSION`]: not read.
    Newer,
}

/// Why an entry could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// No release ever wrote this version (0).
    UnknownVersion,
    /// The bytes are not an entry of the version the frame names.
    Undecodable,
}

/// Whether a frame's version byte is one a writer may have written: any
/// version from the oldest on, including those newer than this reader's.
pub(crate) fn is_written_version(version: u8) -> bool {
    version >= OLDEST_FORMAT_VERSION
}

/// Decodes the entry of a record of format `version`; it must fill
/// `bytes` exactly.
pub(crate) fn decode_entry(version: u8, bytes: &[u8]) -> Result<Decoded, DecodeError> {
    match version {
        // Version 2 only added a variant at the end of an enum: a
        // version 1 entry's bytes decode the same into today's types, and
        // one holding the new variant is none a version 1 writer wrote.
        1 => match exact::<LogEntry>(bytes)? {
            entry if since_version_2(&entry) => Err(DecodeError::Undecodable),
            entry => Ok(Decoded::Entry(entry)),
        },
        FORMAT_VERSION => exact::<LogEntry>(bytes).map(Decoded::Entry),
        v if v > FORMAT_VERSION => Ok(Decoded::Newer),
        _ => Err(DecodeError::UnknownVersion),
    }
}

/// Whether `entry` holds what only version 2 on can hold.
fn since_version_2(entry: &LogEntry) -> bool {
    matches!(
        entry,
        LogEntry::Call(crate::AuditEvent {
            kind: crate::AuditKind::Restart { .. },
            ..
        })
    )
}

/// A postcard value that fills `bytes` exactly.
fn exact<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    match postcard::take_from_bytes::<T>(bytes) {
        Ok((value, [])) => Ok(value),
        _ => Err(DecodeError::Undecodable),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_is_read_its_own_way() {
        let entry = LogEntry::Opened {
            writer: "w 1".into(),
        };
        let bytes = postcard::to_allocvec(&entry).unwrap();
        match decode_entry(FORMAT_VERSION, &bytes) {
            Ok(Decoded::Entry(read)) => assert_eq!(read, entry),
            other => panic!("{other:?}"),
        }
        // A version 1 entry reads in version 1, a restart only from 2 on.
        assert!(matches!(decode_entry(1, &bytes), Ok(Decoded::Entry(_))));
        let restart = LogEntry::Call(crate::AuditEvent {
            call_id: "c_2".into(),
            session_id: "s".into(),
            offset_us: 0,
            kind: crate::AuditKind::Restart {
                attempt: 1,
                reason: "exit status 1".into(),
                previous_call_id: "c_1".into(),
            },
        });
        let restart_bytes = postcard::to_allocvec(&restart).unwrap();
        assert_eq!(
            decode_entry(1, &restart_bytes).unwrap_err(),
            DecodeError::Undecodable
        );
        match decode_entry(2, &restart_bytes) {
            Ok(Decoded::Entry(read)) => assert_eq!(read, restart),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode_entry(FORMAT_VERSION + 1, b"anything"),
            Ok(Decoded::Newer)
        ));
        assert!(matches!(decode_entry(u8::MAX, &[]), Ok(Decoded::Newer)));
        assert_eq!(
            decode_entry(0, &bytes).unwrap_err(),
            DecodeError::UnknownVersion
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_entry(FORMAT_VERSION, &longer).unwrap_err(),
            DecodeError::Undecodable
        );
        assert!(!is_written_version(0));
        assert!(is_written_version(1) && is_written_version(200));
    }
}
