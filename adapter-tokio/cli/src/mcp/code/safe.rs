//! The safe form a refusal shows: the value passed as an argument the code
//! reads (`"$1"`, `sys.argv[1]`, `process.argv[1]`, `$ARGV[0]`…).

use super::{Piece, Safe, Scan, Word, source};

impl Scan {
    /// The advice of a refusal: the safe form, or why there is none.
    pub(super) fn safe_form(&self, w: &[Word], word: &Word, safe: Safe) -> String {
        let Some(at) = w.iter().position(|x| x.origin == word.origin) else {
            return "a value is not allowed there".into();
        };
        let after = w.len() - at - 1;
        let mut names: Vec<&str> = Vec::new();
        for piece in &word.pieces {
            if let Piece::Param(name) = piece
                && !names.contains(&name.as_str())
            {
                names.push(name);
            }
        }
        let reference = |n: usize| -> Option<(String, bool)> {
            // (the text, whether it is quoted already)
            Some(match safe {
                Safe::Sh => (
                    format!("\"${}\"", if after == 0 { n + 1 } else { after + n }),
                    true,
                ),
                Safe::Fish => (format!("$argv[{}]", after + n + 1), false),
                Safe::Python => (format!("sys.argv[{}]", after + n + 1), false),
                Safe::Node => (format!("process.argv[{}]", after + n + 1), false),
                Safe::Perl => (format!("$ARGV[{}]", after + n), false),
                Safe::Ruby => (format!("ARGV[{}]", after + n), false),
                Safe::Php => (format!("$argv[{}]", after + n + 1), false),
                Safe::Awk => (names[n].to_owned(), false),
                Safe::Pwsh | Safe::None => return None,
            })
        };
        if matches!(safe, Safe::None) {
            return "a value is not allowed there".into();
        }
        if matches!(safe, Safe::Pwsh) {
            let values: Vec<String> = names.iter().map(|n| format!("{{{n}}}")).collect();
            return format!(
                "put the code in a script that reads $args[0], and pass the value after it: {}",
                array(
                    &[
                        &["pwsh".into(), "-File".into(), "SCRIPT.ps1".into()],
                        values.as_slice()
                    ]
                    .concat()
                )
            );
        }
        // The code word, each placeholder replaced by its reference; quotes
        // wrapped around a placeholder are dropped.
        let mut code = String::new();
        let pieces = &word.pieces;
        for (k, piece) in pieces.iter().enumerate() {
            match piece {
                Piece::Text(t) => {
                    let mut t = t.as_str();
                    if let Some(Piece::Param(_)) = pieces.get(k + 1)
                        && let Some(Piece::Text(next)) = pieces.get(k + 2)
                    {
                        for q in ['\'', '"'] {
                            if t.ends_with(q) && next.starts_with(q) {
                                t = &t[..t.len() - 1];
                            }
                        }
                    }
                    if k >= 2
                        && let Some(Piece::Param(_)) = pieces.get(k - 1)
                        && let Some(Piece::Text(prev)) = pieces.get(k - 2)
                    {
                        for q in ['\'', '"'] {
                            if prev.ends_with(q) && t.starts_with(q) {
                                t = &t[1..];
                            }
                        }
                    }
                    code.push_str(&source(&[Piece::Text(t.to_owned())]));
                }
                Piece::Param(name) => {
                    let n = names.iter().position(|x| x == name).unwrap_or(0);
                    if let Some((text, _)) = reference(n) {
                        code.push_str(&text);
                    }
                }
            }
        }
        if safe == Safe::Python && !code.contains("import sys") {
            code = format!("import sys; {code}");
        }
        let mut form: Vec<String> = self.all.iter().map(Word::source).collect();
        form[word.origin] = code;
        let values: Vec<String> = names.iter().map(|n| format!("{{{n}}}")).collect();
        let last = w.last().map_or(word.origin, |x| x.origin);
        let (at_word, inserted): (usize, Vec<String>) = match safe {
            Safe::Sh if after == 0 => (last + 1, [vec!["_".to_owned()], values].concat()),
            Safe::Awk => {
                let program = w.first().map_or(0, |x| x.origin);
                (
                    program + 1,
                    names
                        .iter()
                        .flat_map(|n| ["-v".to_owned(), format!("{n}={{{n}}}")])
                        .collect(),
                )
            }
            _ => (last + 1, values),
        };
        let at_word = at_word.min(form.len());
        form.splice(at_word..at_word, inserted);
        let lead = match safe {
            Safe::Sh | Safe::Fish => "pass it as a positional parameter",
            Safe::Awk => "pass it as a variable",
            _ => "pass it as an argument",
        };
        format!("{lead}: {}", array(&form))
    }
}

/// Words as a TOML array, as the tools file writes them.
fn array(words: &[String]) -> String {
    let quoted: Vec<String> = words
        .iter()
        .map(|w| serde_json::to_string(w).unwrap_or_default())
        .collect();
    format!("[{}]", quoted.join(", "))
}
