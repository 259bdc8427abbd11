//! The Landlock ruleset of a call's sandbox: file rules, TCP port rules
//! and scopes, made once per distinct set of rules and shared.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};
use spillguard_core::Confinement;

use super::{LANDLOCK_ABI_USED, SYSTEM_READ, SYSTEM_WRITE};

/// Rulesets made so far, by what they were made from (at most
/// [`RULESETS_KEPT`]): a ruleset is only read when a child restricts
/// itself, so the calls whose rules are the same share one, made once.
static RULESETS: Mutex<Option<HashMap<String, Arc<OwnedFd>>>> = Mutex::new(None);

/// Rulesets kept; when full, the cache starts over.
const RULESETS_KEPT: usize = 64;

/// The ruleset `key` names, made by `make` the first time.
pub(super) fn cached_ruleset(
    key: String,
    make: impl FnOnce() -> Result<landlock::RulesetCreated, landlock::RulesetError>,
) -> Result<Arc<OwnedFd>, String> {
    let mut cache = RULESETS.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(fd) = cache.get(&key) {
        return Ok(Arc::clone(fd));
    }
    let created = make().map_err(|e| e.to_string())?;
    let fd: Option<OwnedFd> = created.into();
    // A ruleset made as a hard requirement has a descriptor, or failed.
    let fd = Arc::new(fd.ok_or("the kernel made no ruleset")?);
    if cache.len() >= RULESETS_KEPT {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&fd));
    Ok(fd)
}

/// The Landlock ruleset: file rules (system paths, the program, the
/// confinement's paths) when `files` is given, TCP rules (the ports
/// allowed to connect and bind) when `tcp` is.
pub(super) fn ruleset(
    kernel_abi: i32,
    files: Option<&Confinement>,
    tcp: Option<(&[u16], &[u16])>,
    scoped: bool,
    program: Option<&Path>,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    // The newest rights this kernel has, up to the ones this code asks
    // for (ABI 5: device ioctls; 6: scopes).
    let abi = ABI::from(kernel_abi.min(LANDLOCK_ABI_USED));
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if files.is_some() {
        ruleset = ruleset.handle_access(AccessFs::from_all(abi))?;
    }
    if tcp.is_some() {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    if scoped {
        // No signal to a process outside the helper's own domain (the
        // host, the user's other processes), no connection to an
        // abstract unix socket made outside it.
        ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    }
    let mut created = ruleset.create()?;
    if let Some(confinement) = files {
        let existing = |list: &[&str]| -> Vec<PathBuf> {
            list.iter()
                .map(PathBuf::from)
                .filter(|p| p.exists())
                .collect()
        };
        let mut read = existing(SYSTEM_READ);
        read.extend(confinement.sandbox.read_only.iter().cloned());
        if let Some(program) = program {
            read.push(program.to_path_buf());
        }
        created = created.add_rules(path_beneath_rules(read, AccessFs::from_read(abi)))?;
        let mut write = existing(SYSTEM_WRITE);
        write.extend(confinement.sandbox.read_write.iter().cloned());
        // Every right but making device files: a device node made in a
        // writable directory would open what its numbers name.
        let writable = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
        created = created.add_rules(path_beneath_rules(write, writable))?;
    }
    if let Some((connect, bind)) = tcp {
        for &port in connect {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
        }
        for &port in bind {
            created = created.add_rule(NetPort::new(port, AccessNet::BindTcp))?;
        }
    }
    Ok(created)
}
