//! `{param}` placeholders in the command's words and the target.
//!
//! A template is literal text and placeholders: `{name}` stands for the
//! value of the parameter `name` (letters, digits and `_`, not starting
//! with a digit); `{{` and `}}` are a literal brace. Any other brace is an
//! error, so a word such as `{print $1}` cannot be taken for a placeholder
//! by accident.

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Literal text, braces already unescaped.
    Text(String),
    /// The value of the parameter of this name.
    Param(String),
}

/// A parsed template: its pieces in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    pub(crate) pieces: Vec<Piece>,
}

impl Template {
    /// Parses `text`; the error says what is wrong with which brace.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|&(_, c)| c) == Some('{') => {
                    chars.next();
                    literal.push('{');
                }
                '{' => {
                    let rest = &text[at + 1..];
                    let Some(end) = rest.find('}') else {
                        return Err(format!(
                            "unclosed \"{{\" in {text:?} (write {{{{ for a literal brace)"
                        ));
                    };
                    let name = &rest[..end];
                    if !is_param_name(name) {
                        return Err(format!(
                            "\"{{{name}}}\" in {text:?} is not a placeholder: a parameter name is \
                             letters, digits and _ (write {{{{ and }}}} for literal braces)"
                        ));
                    }
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Param(name.to_owned()));
                    for _ in 0..=name.chars().count() {
                        chars.next();
                    }
                }
                '}' if chars.peek().map(|&(_, c)| c) == Some('}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => {
                    return Err(format!(
                        "unmatched \"}}\" in {text:?} (write }}}} for a literal brace)"
                    ));
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() || pieces.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Self { pieces })
    }

    /// The parameters it names, in order (a name used twice is listed twice).
    pub(crate) fn params(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Param(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
    }

    /// Whether the template itself begins with a literal `-` (`--host={host}`,
    /// `-o{opt}`): then a leading dash is the author's, never a value's.
    pub(crate) fn starts_with_dash(&self) -> bool {
        matches!(self.pieces.first(), Some(Piece::Text(text)) if text.starts_with('-'))
    }

    /// The parameters that decide how the word, as assembled, begins: those
    /// of every placeholder up to and including the first piece that renders
    /// as something (`{a}{b}` with `a` empty: both). Empty when the template
    /// begins with literal text.
    pub(crate) fn leading_params<'v>(&self, value: impl Fn(&str) -> Option<&'v str>) -> Vec<&str> {
        let mut names = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) if text.is_empty() => {}
                Piece::Text(_) => break,
                Piece::Param(name) => {
                    names.push(name.as_str());
                    if value(name).is_some_and(|v| !v.is_empty()) {
                        break;
                    }
                }
            }
        }
        names
    }

    /// Every parameter that can begin the word, for some values (a
    /// placeholder counts when all before it may be empty): those whose
    /// leading dash would be refused.
    pub(crate) fn possible_leading_params(&self) -> Vec<&str> {
        let mut names = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) if text.is_empty() => {}
                Piece::Text(_) => break,
                Piece::Param(name) => names.push(name.as_str()),
            }
        }
        names
    }

    /// The text with each placeholder replaced by `value(name)`; `None` when
    /// a value is missing.
    pub(crate) fn render<'v>(&self, value: impl Fn(&str) -> Option<&'v str>) -> Option<String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Param(name) => out.push_str(value(name)?),
            }
        }
        Some(out)
    }
}

/// A parameter name: ASCII letters, digits and `_`, not starting with a
/// digit, at most 64 bytes.
pub(crate) fn is_param_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'))
        && name.len() <= 64
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<Piece> {
        Template::parse(text).unwrap().pieces
    }

    #[test]
    fn placeholders_and_escaped_braces() {
        assert_eq!(pieces("uptime"), vec![Piece::Text("uptime".into())]);
        assert_eq!(pieces(""), vec![Piece::Text(String::new())]);
        assert_eq!(
            pieces("{user}@{host}:22"),
            vec![
                Piece::Param("user".into()),
                Piece::Text("@".into()),
                Piece::Param("host".into()),
                Piece::Text(":22".into()),
            ]
        );
        assert_eq!(
            pieces("awk '{{print $1}}' {{{f}}}"),
            vec![
                Piece::Text("awk '{print $1}' {".into()),
                Piece::Param("f".into()),
                Piece::Text("}".into()),
            ]
        );
    }

    #[test]
    fn a_stray_brace_is_an_error() {
        let err = |text| Template::parse(text).unwrap_err();
        assert_eq!(
            err("{print $1}"),
            r#""{print $1}" in "{print $1}" is not a placeholder: a parameter name is letters, digits and _ (write {{ and }} for literal braces)"#
        );
        assert_eq!(
            err("x{host"),
            r#"unclosed "{" in "x{host" (write {{ for a literal brace)"#
        );
        assert_eq!(
            err("a}b"),
            r#"unmatched "}" in "a}b" (write }} for a literal brace)"#
        );
        assert_eq!(
            err("{}"),
            r#""{}" in "{}" is not a placeholder: a parameter name is letters, digits and _ (write {{ and }} for literal braces)"#
        );
    }

    #[test]
    fn rendering_needs_every_value() {
        let t = Template::parse("{user}@{host}").unwrap();
        assert_eq!(t.params().collect::<Vec<_>>(), ["user", "host"]);
        assert_eq!(t.possible_leading_params(), ["user"]);
        assert_eq!(t.leading_params(|_| Some("x")), ["user"]);
        assert_eq!(t.leading_params(|_| Some("")), ["user"]);
        let adjacent = Template::parse("{a}{b}x").unwrap();
        assert_eq!(adjacent.possible_leading_params(), ["a", "b"]);
        assert_eq!(
            adjacent.leading_params(|n| (n == "b").then_some("-rf")),
            ["a", "b"]
        );
        assert_eq!(adjacent.leading_params(|_| Some("-")), ["a"]);
        assert!(!t.starts_with_dash());
        assert!(Template::parse("--host={host}").unwrap().starts_with_dash());
        assert!(
            Template::parse("--host={host}")
                .unwrap()
                .possible_leading_params()
                .is_empty()
        );
        let both = |name: &str| match name {
            "user" => Some("deploy"),
            "host" => Some("web-3"),
            _ => None,
        };
        assert_eq!(t.render(both).as_deref(), Some("deploy@web-3"));
        assert_eq!(t.render(|n| (n == "user").then_some("u")), None);
        assert!(!is_param_name("1x"));
        assert!(!is_param_name(&"a".repeat(65)));
        assert!(is_param_name(&"a".repeat(64)));
    }
}
