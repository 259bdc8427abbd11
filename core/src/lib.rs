//! Sans-IO core of spillguard.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
