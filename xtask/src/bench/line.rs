//! Reads the one line of JSON a `bench-case` prints: an object whose fields
//! depend on the case, each an unsigned integer, a boolean or a string.

use serde::Deserialize;
use serde_json::{Map, Value};

/// The fields of one case's line.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct Fields(Map<String, Value>);

impl Fields {
    /// The number under `key`, if it is an unsigned integer.
    pub fn number(&self, key: &str) -> Option<u64> {
        self.0.get(key)?.as_u64()
    }

    /// The boolean under `key`, if it is one.
    pub fn boolean(&self, key: &str) -> Option<bool> {
        self.0.get(key)?.as_bool()
    }

    /// The string under `key`, if it is one.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.as_str()
    }
}

/// Parses one JSON object; the error is serde_json's, with its column.
pub fn parse(line: &str) -> Result<Fields, String> {
    serde_json::from_str(line).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_line_is_read_back() {
        let fields =
            parse(r#"{"case":"flood-std","wall_us":420258,"ok":false,"error":"a \"b\"\\c\u0001"}"#)
                .unwrap();
        assert_eq!(fields.text("case"), Some("flood-std"));
        assert_eq!(fields.number("wall_us"), Some(420_258));
        assert_eq!(fields.boolean("ok"), Some(false));
        assert_eq!(fields.text("error"), Some("a \"b\"\\c\u{1}"));
        assert_eq!(fields.number("case"), None);
        assert_eq!(fields.number("absent"), None);
    }

    #[test]
    fn a_number_is_an_unsigned_integer() {
        let fields = parse(r#"{"a":18446744073709551615,"b":-1,"c":1.5}"#).unwrap();
        assert_eq!(fields.number("a"), Some(u64::MAX));
        assert_eq!(fields.number("b"), None);
        assert_eq!(fields.number("c"), None);
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert!(parse("").is_err());
        assert!(parse(r#"{"a":1"#).is_err());
        assert!(parse(r#"{"a":1} x"#).is_err());
        assert!(parse(r#"[1]"#).is_err());
        assert_eq!(parse(" {} \n").unwrap().number("a"), None);
    }
}
