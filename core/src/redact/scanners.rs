//! Scanners that find secrets outside the rules' regex set (provider
//! tokens, cookies, encoded credentials, line layouts): each reads the
//! text once and pushes a [`Span`] labelled [`Label::Named`] for every
//! secret it finds. [`scan`] runs them all; `Redactor::spans` merges what
//! they find with the rules' matches (overlaps are joined, a rule's label
//! first).

use super::{Span, cookies, encoded, layouts, providers};

/// Every scanner's spans in `hay`, pushed onto `spans` (unsorted).
pub(crate) fn scan(hay: &[u8], spans: &mut Vec<Span>) {
    providers::scan(hay, spans);
    cookies::scan(hay, spans);
    encoded::scan(hay, spans);
    layouts::scan(hay, spans);
}
