//! The one line of JSON a case prints: a flat object of numbers, booleans
//! and strings, in the order the fields were added.

use serde::{Serialize, Serializer};
use serde_json::Value;

/// A flat JSON object under construction.
#[derive(Debug)]
pub struct Line {
    fields: Vec<(&'static str, Value)>,
}

impl Line {
    /// `{"case":"<case>"`, to be continued.
    pub fn new(case: &str) -> Self {
        let mut line = Self { fields: Vec::new() };
        line.string("case", case);
        line
    }

    /// Adds a number field.
    pub fn number(&mut self, key: &'static str, value: u64) -> &mut Self {
        self.fields.push((key, value.into()));
        self
    }

    /// Adds a boolean field.
    pub fn boolean(&mut self, key: &'static str, value: bool) -> &mut Self {
        self.fields.push((key, value.into()));
        self
    }

    /// Adds a string field.
    pub fn string(&mut self, key: &'static str, value: &str) -> &mut Self {
        self.fields.push((key, value.into()));
        self
    }

    /// The finished object, on one line.
    pub fn finish(self) -> String {
        serde_json::to_string(&self).expect("string keys and JSON values always serialize")
    }
}

/// The fields as one object, in the order they were added.
impl Serialize for Line {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.fields.iter().map(|(key, value)| (key, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_written_in_the_order_they_were_added() {
        let mut line = Line::new("flood-std");
        line.number("wall_us", 420_258)
            .boolean("ok", false)
            .string("error", "a \"b\"\\c\u{1}\n");
        assert_eq!(
            line.finish(),
            r#"{"case":"flood-std","wall_us":420258,"ok":false,"error":"a \"b\"\\c\u0001\n"}"#
        );
    }

    #[test]
    fn a_line_reads_back_as_the_values_written() {
        let mut line = Line::new("audit-log");
        line.number("log_bytes", u64::MAX)
            .boolean("group_gone", true);
        let read: serde_json::Map<String, Value> = serde_json::from_str(&line.finish()).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read["case"].as_str(), Some("audit-log"));
        assert_eq!(read["log_bytes"].as_u64(), Some(u64::MAX));
        assert_eq!(read["group_gone"].as_bool(), Some(true));
    }
}
