//! The approval card's text: built once, when the card is shown, from the
//! call's redacted spec, with every character that could hide, add or
//! reorder a line escaped ([`visible`], [`card_text`]).
//!
//! **No secret given as an argument reaches the card, the record or the
//! audit log**: the spec is redacted when the call takes it
//! (`redacted_spec`), before any of them is built.
//!
//! The card is shown once per call, and audited as
//! [`AuditKind::CardShown`](super::AuditKind::CardShown) before it is
//! shown, so the log keeps the approver's text byte for byte.

use std::time::Duration;

#[cfg(doc)]
use super::ApprovalCard;
use super::CallSpec;
use crate::redact::Redactor;

/// The spec with its text redacted (action, target, summary): the card,
/// the record and the audit events are built from it. The ids are the
/// host's keys and stay as given.
pub(crate) fn redacted_spec(spec: CallSpec, redactor: &Redactor) -> CallSpec {
    CallSpec {
        action: redactor.redact_text(&spec.action),
        target: redactor.redact_text(&spec.target),
        summary: redactor.redact_text(&spec.summary),
        card_lines: spec
            .card_lines
            .iter()
            .map(|(label, value)| (redactor.redact_text(label), redactor.redact_text(value)))
            .collect(),
        ..spec
    }
}

/// `text` with every character that could hide, add or reorder what a
/// reader sees written as an escape: control characters (`\n`, `\t`,
/// `\u{1b}`), the line and paragraph separators (`\u{2028}`,
/// `\u{2029}`), zero-width and byte-order marks (`\u{200b}`–`\u{200d}`,
/// `\u{2060}`, `\u{feff}`, `\u{00ad}`) and the bidirectional formatting
/// characters (`\u{061c}`, `\u{200e}`, `\u{200f}`, `\u{202a}`–`\u{202e}`,
/// `\u{2066}`–`\u{2069}`). Everything else is kept as it is.
///
/// ```
/// assert_eq!(
///     spillguard_core::visible("web-3\u{2028}target: prod\u{202e}"),
///     "web-3\\u{2028}target: prod\\u{202e}"
/// );
/// ```
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let invisible = matches!(
            c,
            '\u{00ad}'
                | '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
        );
        if invisible {
            out.extend(c.escape_unicode());
        } else if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// The text of an approval card with these `label: value` lines (each
/// made [`visible`]) and its expiry line, as [`ApprovalCard::text`] is
/// built from the call's redacted [`CallSpec::card_lines`].
///
/// ```
/// use std::time::Duration;
/// let lines = [("tool".to_owned(), "restart".to_owned()), ("target".to_owned(), "web-3\nprod".to_owned())];
/// assert_eq!(
///     spillguard_core::card_text(&lines, Duration::from_secs(60)),
///     "tool: restart\ntarget: web-3\\nprod\napproval expires: 60000 ms after it is shown"
/// );
/// ```
pub fn card_text(lines: &[(String, String)], expires_in: Duration) -> String {
    let mut text = String::new();
    for (label, value) in lines {
        text.push_str(&visible(label));
        text.push_str(": ");
        text.push_str(&visible(value));
        text.push('\n');
    }
    text.push_str(&format!(
        "approval expires: {} ms after it is shown",
        expires_in.as_millis()
    ));
    text
}

/// The approval card's text for the call's (redacted) spec.
pub(crate) fn spec_card_text(
    spec: &CallSpec,
    bounds: &[(String, String)],
    expires_in: Duration,
) -> String {
    let mut lines = if spec.card_lines.is_empty() {
        vec![
            ("action".to_owned(), spec.action.clone()),
            ("target".to_owned(), spec.target.clone()),
            ("summary".to_owned(), spec.summary.clone()),
        ]
    } else {
        spec.card_lines.clone()
    };
    // The helper's bounds, so the user approves an action whose reach is
    // stated (unless the caller's own lines already state them).
    for (label, value) in bounds {
        if !lines.iter().any(|(given, _)| given == label) {
            lines.push((label.clone(), value.clone()));
        }
    }
    card_text(&lines, expires_in)
}
