//! A glob import of the crate leaves the language's `core` alone: the
//! protocol core is re-exported as `proto`.
use spillguard_tokio::*;

#[test]
fn a_glob_import_does_not_shadow_core() {
    assert_eq!(core::mem::size_of::<u32>(), 4);
    assert_eq!(proto::Config::default().shutdown_grace_seconds.as_secs(), 5);
    assert_ne!(Stdio::piped(), Stdio::null());
}
