//! A tool's bounds: `[tools.NAME.limits]`, `[tools.NAME.sandbox]` and
//! `allow_degraded`, over the `[defaults]` table that holds the same keys
//! for every tool (a tool's key wins over the default's, key by key).
//!
//! ```toml
//! [defaults.limits]
//! memory_max = "512M"
//! pids_max = 128
//!
//! [tools.fetch.limits]
//! cpu_seconds = 30
//!
//! [tools.fetch.sandbox]
//! read_only = ["/srv/data"]
//! read_write = ["/tmp/fetch"]
//! connect_ports = [443]
//! env_allow = ["HTTPS_PROXY"]
//! ```
//!
//! **The environment of a sandboxed tool** (one whose `sandbox` table
//! sets anything) starts empty but for [`BASE_ENV`] and the names its
//! `env_allow` lists, each with the host's value; a tool without a
//! sandbox inherits the host's environment.

use spillguard_std::core::{Confinement, Network, parse_size};

use super::tools::{ToolsError, as_table, check_keys};

/// What a sandboxed tool's helper inherits of the host's environment
/// besides its `env_allow`: the variables a program needs to find
/// programs, a home, a locale, a terminal type and a time zone.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR",
];

const LIMIT_KEYS: &[&str] = &[
    "memory_max",
    "pids_max",
    "cpu_seconds",
    "nofile",
    "file_size_max",
];
const SANDBOX_KEYS: &[&str] = &[
    "read_only",
    "read_write",
    "network",
    "connect_ports",
    "bind_ports",
    "env_allow",
];
/// The keys of `[defaults]`.
pub const DEFAULT_KEYS: &[&str] = &["limits", "sandbox", "allow_degraded"];

/// A tool's bounds, as loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bounds {
    /// Limits, sandbox and degraded mode.
    pub confinement: Confinement,
    /// The variables a sandboxed helper inherits beyond [`BASE_ENV`];
    /// `None` when the tool has no sandbox (it inherits everything).
    pub env_allow: Option<Vec<String>>,
}

impl Bounds {
    /// Reads `[defaults]` (`path` is `defaults`).
    pub fn load_defaults(value: &toml::Value) -> Result<Self, ToolsError> {
        let table = as_table("defaults", value)?;
        check_keys("defaults", table, DEFAULT_KEYS)?;
        Self::default().over(table, "defaults")
    }

    /// These bounds with the keys of `table` (a tool's table, or
    /// `[defaults]`) on top.
    pub fn over(&self, table: &toml::Table, path: &str) -> Result<Self, ToolsError> {
        let mut bounds = self.clone();
        if let Some(value) = table.get("limits") {
            let at = format!("{path}.limits");
            let limits = as_table(&at, value)?;
            check_keys(&at, limits, LIMIT_KEYS)?;
            let l = &mut bounds.confinement.limits;
            for (key, value) in limits {
                let field = format!("{at}.{key}");
                let slot = match key.as_str() {
                    "memory_max" => &mut l.memory_max,
                    "file_size_max" => &mut l.file_size_max,
                    "pids_max" => &mut l.pids_max,
                    "cpu_seconds" => &mut l.cpu_seconds,
                    _ => &mut l.nofile,
                };
                let size = matches!(key.as_str(), "memory_max" | "file_size_max");
                *slot = Some(if size {
                    size_value(&field, value)?
                } else {
                    count(&field, value)?
                });
            }
        }
        if let Some(value) = table.get("sandbox") {
            let at = format!("{path}.sandbox");
            let sandbox = as_table(&at, value)?;
            check_keys(&at, sandbox, SANDBOX_KEYS)?;
            let s = &mut bounds.confinement.sandbox;
            for (key, value) in sandbox {
                let field = format!("{at}.{key}");
                match key.as_str() {
                    "read_only" => s.read_only = paths(&field, value)?,
                    "read_write" => s.read_write = paths(&field, value)?,
                    "network" => {
                        s.network = match value.as_str() {
                            Some("none") => Network::None,
                            Some("any") => Network::Any,
                            _ => {
                                return Err(ToolsError::new(field, "must be \"none\" or \"any\""));
                            }
                        }
                    }
                    "connect_ports" => s.connect_ports = ports(&field, value)?,
                    "bind_ports" => s.bind_ports = ports(&field, value)?,
                    _ => bounds.env_allow = Some(strings(&field, value)?),
                }
            }
            bounds.env_allow.get_or_insert_with(Vec::new);
        }
        if let Some(value) = table.get("allow_degraded") {
            bounds.confinement.allow_degraded = value.as_bool().ok_or_else(|| {
                ToolsError::new(format!("{path}.allow_degraded"), "must be true or false")
            })?;
        }
        Ok(bounds)
    }
}

fn size_value(field: &str, value: &toml::Value) -> Result<u64, ToolsError> {
    let bytes = match value {
        toml::Value::String(text) => parse_size(text).map_err(|e| ToolsError::new(field, e))?,
        toml::Value::Integer(n) => {
            u64::try_from(*n).map_err(|_| ToolsError::new(field, "must not be negative"))?
        }
        _ => {
            return Err(ToolsError::new(
                field,
                "must be a size (\"256M\", \"2G\") or a number of bytes",
            ));
        }
    };
    if bytes == 0 {
        return Err(ToolsError::new(field, "must be greater than zero"));
    }
    Ok(bytes)
}

fn count(field: &str, value: &toml::Value) -> Result<u64, ToolsError> {
    match value.as_integer() {
        Some(n) if n > 0 => Ok(n as u64),
        Some(_) => Err(ToolsError::new(field, "must be greater than zero")),
        None => Err(ToolsError::new(field, "must be an integer")),
    }
}

fn strings(field: &str, value: &toml::Value) -> Result<Vec<String>, ToolsError> {
    let list = value
        .as_array()
        .ok_or_else(|| ToolsError::new(field, "must be an array of strings"))?;
    list.iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| ToolsError::new(field, "must be an array of strings"))
        })
        .collect()
}

fn paths(field: &str, value: &toml::Value) -> Result<Vec<std::path::PathBuf>, ToolsError> {
    strings(field, value)?
        .into_iter()
        .map(|text| {
            let path = std::path::PathBuf::from(&text);
            if !path.is_absolute() {
                return Err(ToolsError::new(
                    field,
                    format!("{text} is not an absolute path"),
                ));
            }
            std::fs::metadata(&path)
                .map(|_| path)
                .map_err(|e| ToolsError::new(field, format!("{text}: {e}")))
        })
        .collect()
}

fn ports(field: &str, value: &toml::Value) -> Result<Vec<u16>, ToolsError> {
    let list = value
        .as_array()
        .ok_or_else(|| ToolsError::new(field, "must be an array of ports"))?;
    list.iter()
        .map(
            |v| match v.as_integer().and_then(|n| u16::try_from(n).ok()) {
                Some(port) if port > 0 => Ok(port),
                _ => Err(ToolsError::new(
                    field,
                    format!("{v} is not a TCP port (1 to 65535)"),
                )),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Bounds, String> {
        let table: toml::Table = text.parse().unwrap();
        Bounds::default()
            .over(&table, "tools.t")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn limits_and_sandbox_load_with_sizes_ports_and_paths() {
        let bounds = load(
            "allow_degraded = true\n[limits]\nmemory_max = \"256M\"\npids_max = 64\n\
             [sandbox]\nread_only = [\"/\"]\nnetwork = \"none\"\nconnect_ports = [443]\nenv_allow = [\"AWS_PROFILE\"]\n",
        )
        .unwrap();
        let c = &bounds.confinement;
        assert_eq!(c.limits.memory_max, Some(256 << 20));
        assert_eq!(c.limits.pids_max, Some(64));
        assert_eq!(c.sandbox.read_only, [std::path::PathBuf::from("/")]);
        assert_eq!(c.sandbox.network, Network::None);
        assert_eq!(c.sandbox.connect_ports, [443]);
        assert!(c.allow_degraded);
        assert_eq!(bounds.env_allow, Some(vec!["AWS_PROFILE".to_owned()]));
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (
                "[limits]\nmemory_max = \"1.5G\"",
                "tools.t.limits.memory_max: \"1.5G\" is not a size (a whole number with K, M, G or T: 256M, 2G)",
            ),
            (
                "[limits]\npids_max = 0",
                "tools.t.limits.pids_max: must be greater than zero",
            ),
            (
                "[limits]\ncpu_seconds = -1",
                "tools.t.limits.cpu_seconds: must be greater than zero",
            ),
            (
                "[limits]\nmemory = 1",
                "tools.t.limits.memory: unknown key (known keys: memory_max, pids_max, cpu_seconds, nofile, file_size_max)",
            ),
            (
                "[sandbox]\nconnect_ports = [70000]",
                "tools.t.sandbox.connect_ports: 70000 is not a TCP port (1 to 65535)",
            ),
            (
                "[sandbox]\nread_only = [\"/nonexistent/x\"]",
                "tools.t.sandbox.read_only: /nonexistent/x: No such file or directory (os error 2)",
            ),
            (
                "[sandbox]\nread_write = [\"tmp\"]",
                "tools.t.sandbox.read_write: tmp is not an absolute path",
            ),
            (
                "[sandbox]\nnetwork = \"off\"",
                "tools.t.sandbox.network: must be \"none\" or \"any\"",
            ),
        ];
        for (text, error) in cases {
            assert_eq!(load(text), Err(error.to_owned()), "{text}");
        }
    }

    #[test]
    fn a_tool_key_wins_over_the_default_key_by_key() {
        let defaults: toml::Table = "[limits]\nmemory_max = \"512M\"\npids_max = 128\n"
            .parse()
            .unwrap();
        let defaults = Bounds::default().over(&defaults, "defaults").unwrap();
        let tool: toml::Table = "[limits]\npids_max = 16\n".parse().unwrap();
        let bounds = defaults.over(&tool, "tools.t").unwrap();
        assert_eq!(bounds.confinement.limits.memory_max, Some(512 << 20));
        assert_eq!(bounds.confinement.limits.pids_max, Some(16));
        assert_eq!(bounds.env_allow, None);
    }
}
