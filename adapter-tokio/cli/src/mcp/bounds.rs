//! A tool's bounds: `[tools.NAME.limits]`, `[tools.NAME.sandbox]`,
//! `allow_degraded` and `contain_tree` (`true`: the tree's control group
//! is required; `false`: none; left out: wherever one can be made), over
//! the `[defaults]` table that holds the same keys
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

use spillguard_std::proto::{ConfineError, Confinement, LIMIT_KEYS, SANDBOX_KEYS};

use super::tools::{ToolsError, as_table, check_keys};

/// What a sandboxed tool's helper inherits of the host's environment
/// besides its `env_allow`: the variables a program needs to find
/// programs, a home, a locale, a terminal type and a time zone.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "TMPDIR",
];

/// The keys of `[defaults]`.
pub const DEFAULT_KEYS: &[&str] = &["limits", "sandbox", "allow_degraded", "contain_tree"];

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
    /// `[defaults]`) on top; the keys are read as the library reads them
    /// ([`Confinement::merge_limits`], [`Confinement::merge_sandbox`]),
    /// and each path must exist.
    pub fn over(&self, table: &toml::Table, path: &str) -> Result<Self, ToolsError> {
        let mut bounds = self.clone();
        let wrong = |e: ConfineError| ToolsError::new(e.field, e.reason);
        if let Some(value) = table.get("limits") {
            let at = format!("{path}.limits");
            let limits = as_table(&at, value)?;
            check_keys(&at, limits, LIMIT_KEYS)?;
            bounds
                .confinement
                .merge_limits(limits, &at)
                .map_err(wrong)?;
        }
        if let Some(value) = table.get("sandbox") {
            let at = format!("{path}.sandbox");
            let mut sandbox = as_table(&at, value)?.clone();
            let mut known = SANDBOX_KEYS.to_vec();
            known.push("env_allow");
            check_keys(&at, &sandbox, &known)?;
            let allowed = match sandbox.remove("env_allow") {
                Some(value) => strings(&format!("{at}.env_allow"), &value)?,
                None => bounds.env_allow.take().unwrap_or_default(),
            };
            bounds.env_allow = Some(allowed);
            bounds
                .confinement
                .merge_sandbox(&sandbox, &at)
                .map_err(wrong)?;
            for key in ["read_only", "read_write"] {
                let list = match key {
                    "read_only" => &bounds.confinement.sandbox.read_only,
                    _ => &bounds.confinement.sandbox.read_write,
                };
                if let Some(error) = list.iter().find_map(|p| {
                    std::fs::metadata(p)
                        .err()
                        .map(|e| format!("{}: {e}", p.display()))
                }) {
                    return Err(ToolsError::new(format!("{at}.{key}"), error));
                }
            }
        }
        if let Some(value) = table.get("allow_degraded") {
            bounds.confinement.allow_degraded = value.as_bool().ok_or_else(|| {
                ToolsError::new(format!("{path}.allow_degraded"), "must be true or false")
            })?;
        }
        if let Some(value) = table.get("contain_tree") {
            let contain = value.as_bool().ok_or_else(|| {
                ToolsError::new(format!("{path}.contain_tree"), "must be true or false")
            })?;
            bounds.confinement.contain_tree = Some(contain);
        }
        bounds.confinement.validate().map_err(|e| {
            let table = if LIMIT_KEYS.contains(&e.field.as_str()) {
                "limits."
            } else if SANDBOX_KEYS.contains(&e.field.as_str()) {
                "sandbox."
            } else {
                ""
            };
            ToolsError::new(format!("{path}.{table}{}", e.field), e.reason)
        })?;
        Ok(bounds)
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

#[cfg(test)]
mod tests {
    use super::*;
    use spillguard_std::proto::Network;

    fn load(text: &str) -> Result<Bounds, String> {
        let table: toml::Table = text.parse().unwrap();
        Bounds::default()
            .over(&table, "tools.t")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn contain_tree_is_required_off_or_left_to_the_default() {
        assert_eq!(load("").unwrap().confinement.contain_tree, None);
        let on = load("contain_tree = true\n").unwrap();
        assert_eq!(on.confinement.contain_tree, Some(true));
        let off = load("contain_tree = false\n").unwrap();
        assert_eq!(off.confinement.contain_tree, Some(false));
        assert_eq!(
            load("contain_tree = \"yes\"\n").unwrap_err(),
            "tools.t.contain_tree: must be true or false"
        );
        assert_eq!(
            load("contain_tree = false\n[limits]\nmemory_max = \"64M\"\n").unwrap_err(),
            "tools.t.limits.memory_max: needs the tree's control group, which contain_tree = \
             false turns off"
        );
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
