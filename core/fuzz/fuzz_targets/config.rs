//! Configuration: `Config::from_toml_str` on any text, and
//! `Config::validate` on any values. What loads is valid, and a valid
//! configuration gives capture settings within its budgets.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use spillguard_core::{CaptureSettings, Config, Retain};

fuzz_target!(|data: &[u8]| {
    // The text as a file would hold it.
    if let Ok(text) = std::str::from_utf8(data) {
        match Config::from_toml_str(text) {
            Ok(config) => {
                assert_eq!(config.validate(), Ok(()));
                check_valid(&config);
            }
            Err(error) => {
                assert!(!error.field.is_empty());
                let _ = error.to_string();
            }
        }
    }
    // The same bytes as field values, as code would build them.
    if let Ok(config) = config_from(&mut Unstructured::new(data)) {
        match config.validate() {
            Ok(()) => check_valid(&config),
            Err(error) => assert!(!error.to_string().is_empty()),
        }
    }
});

/// A configuration `validate` accepted keeps its own rules.
fn check_valid(config: &Config) {
    let per_call = config.stderr_retained_per_call_bytes;
    assert!(per_call > 0 && per_call <= config.stderr_retained_process_bytes);
    assert!(config.stderr_agent_excerpt_bytes >= Config::MIN_EXCERPT_BYTES);
    assert!(config.stderr_agent_excerpt_bytes <= per_call);
    assert!(config.head_bytes() <= per_call);
    assert!(config.shutdown_grace_seconds <= Config::MAX_SHUTDOWN_GRACE);
    let settings = CaptureSettings::stderr(config);
    assert!(settings.head_bytes <= settings.budget);
}

fn config_from(u: &mut Unstructured<'_>) -> Result<Config> {
    let retain = match u.int_in_range(0..=2u8)? {
        0 => Retain::Tail,
        1 => Retain::Head,
        _ => Retain::HeadAndTail,
    };
    Ok(Config {
        stderr_retained_per_call_bytes: u.arbitrary()?,
        stderr_retained_process_bytes: u.arbitrary()?,
        stderr_agent_excerpt_bytes: u.arbitrary()?,
        shutdown_grace_seconds: Duration::from_nanos(u.arbitrary()?),
        retain,
        stderr_head_bytes: u.arbitrary()?,
        stderr_kill_after_bytes: u.arbitrary()?,
        debug_ceiling_bytes: u.arbitrary()?,
        stdin_close_grace_seconds: Duration::from_nanos(u.arbitrary()?),
        redact_extra_patterns: spillguard_core::Redactor::builtin(),
    })
}
