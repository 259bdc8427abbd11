//! Reads the one line of JSON a `bench-case` prints: a flat object whose
//! values are unsigned integers, booleans or strings.

use std::collections::BTreeMap;

/// One value of a case's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// An unsigned integer.
    Number(u64),
    /// `true` or `false`.
    Bool(bool),
    /// A string.
    Text(String),
}

/// The fields of one case's line.
#[derive(Debug, Clone, Default)]
pub struct Fields(BTreeMap<String, Value>);

impl Fields {
    /// The number under `key`, if it is one.
    pub fn number(&self, key: &str) -> Option<u64> {
        match self.0.get(key) {
            Some(Value::Number(n)) => Some(*n),
            _ => None,
        }
    }

    /// The boolean under `key`, if it is one.
    pub fn boolean(&self, key: &str) -> Option<bool> {
        match self.0.get(key) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// The string under `key`, if it is one.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.0.get(key) {
            Some(Value::Text(s)) => Some(s),
            _ => None,
        }
    }
}

/// Parses `{"key":value,...}`; the error names what was unexpected.
pub fn parse(line: &str) -> Result<Fields, String> {
    let mut reader = Reader {
        chars: line.trim().chars().peekable(),
    };
    let mut fields = BTreeMap::new();
    reader.expect('{')?;
    if reader.chars.peek() == Some(&'}') {
        reader.chars.next();
    } else {
        loop {
            let key = reader.string()?;
            reader.expect(':')?;
            let value = reader.value()?;
            fields.insert(key, value);
            match reader.chars.next() {
                Some(',') => {}
                Some('}') => break,
                other => return Err(format!("expected , or }} but found {other:?}")),
            }
        }
    }
    match reader.chars.next() {
        None => Ok(Fields(fields)),
        Some(c) => Err(format!("unexpected {c:?} after the object")),
    }
}

struct Reader<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

impl Reader<'_> {
    fn expect(&mut self, wanted: char) -> Result<(), String> {
        match self.chars.next() {
            Some(c) if c == wanted => Ok(()),
            other => Err(format!("expected {wanted:?} but found {other:?}")),
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.chars.peek() {
            Some('"') => self.string().map(Value::Text),
            Some('t' | 'f') => {
                let word: String =
                    std::iter::from_fn(|| self.chars.next_if(|c| c.is_ascii_alphabetic()))
                        .collect();
                match word.as_str() {
                    "true" => Ok(Value::Bool(true)),
                    "false" => Ok(Value::Bool(false)),
                    _ => Err(format!("unexpected word {word:?}")),
                }
            }
            Some(c) if c.is_ascii_digit() => {
                let digits: String =
                    std::iter::from_fn(|| self.chars.next_if(char::is_ascii_digit)).collect();
                digits
                    .parse()
                    .map(Value::Number)
                    .map_err(|_| format!("number out of range: {digits}"))
            }
            other => Err(format!("unexpected value starting with {other:?}")),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.expect('"')?;
        let mut out = String::new();
        loop {
            match self.chars.next() {
                None => return Err("unterminated string".into()),
                Some('"') => return Ok(out),
                Some('\\') => match self.chars.next() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('/') => out.push('/'),
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some('u') => {
                        let hex: String = (0..4).filter_map(|_| self.chars.next()).collect();
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| format!("bad escape \\u{hex}"))?;
                        out.push(c);
                    }
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some(c) => out.push(c),
            }
        }
    }
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
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert!(parse("").is_err());
        assert!(parse(r#"{"a":1"#).is_err());
        assert!(parse(r#"{"a":-1}"#).is_err());
        assert!(parse(r#"{"a":1} x"#).is_err());
        assert_eq!(parse("{}").unwrap().number("a"), None);
    }
}
