//! The one line of JSON a case prints: a flat object of numbers, booleans
//! and strings, in the order the fields were added.

use std::fmt::Write;

/// A flat JSON object under construction.
#[derive(Debug)]
pub struct Line {
    text: String,
}

impl Line {
    /// `{"case":"<case>"`, to be continued.
    pub fn new(case: &str) -> Self {
        let mut line = Self {
            text: String::from("{"),
        };
        line.string("case", case);
        line
    }

    /// Adds a number field.
    pub fn number(&mut self, key: &str, value: u64) -> &mut Self {
        self.key(key);
        let _ = write!(self.text, "{value}");
        self
    }

    /// Adds a boolean field.
    pub fn boolean(&mut self, key: &str, value: bool) -> &mut Self {
        self.key(key);
        self.text.push_str(if value { "true" } else { "false" });
        self
    }

    /// Adds a string field.
    pub fn string(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        quote(&mut self.text, value);
        self
    }

    /// The finished object, on one line.
    pub fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }

    fn key(&mut self, key: &str) {
        if self.text.len() > 1 {
            self.text.push(',');
        }
        quote(&mut self.text, key);
        self.text.push(':');
    }
}

/// Appends `value` as a JSON string.
fn quote(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
