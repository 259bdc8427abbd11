//! A build without the `landlock` feature: no ruleset can be made. The
//! sandbox sees no Landlock ABI (`abi` is 0), so it never asks for one and
//! every rule that needs Landlock fails closed; should it ask anyway, it
//! is told why.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

use spillguard_core::Confinement;

/// Why no ruleset is made.
const WHY: &str = "this build has no Landlock (spillguard-host without its `landlock` feature)";

/// What a ruleset would be made of: nothing, here.
#[derive(Debug)]
pub(super) struct NoRuleset;

/// Fails: there is no Landlock in this build.
pub(super) fn cached_ruleset(
    _key: String,
    _make: impl FnOnce() -> Result<NoRuleset, &'static str>,
) -> Result<Arc<OwnedFd>, String> {
    Err(WHY.to_owned())
}

/// Fails: there is no Landlock in this build.
pub(super) fn ruleset(
    _kernel_abi: i32,
    _files: Option<&Confinement>,
    _tcp: Option<(&[u16], &[u16])>,
    _scoped: bool,
    _program: Option<&Path>,
) -> Result<NoRuleset, &'static str> {
    Err(WHY)
}
