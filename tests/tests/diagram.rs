//! The lifecycle diagram in ARCHITECTURE.md is the transition table.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use spillguard_core::{State, TRANSITIONS};

fn diagram_edges() -> BTreeSet<(String, String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("```mermaid").expect("a mermaid block");
    let block = &text[start..];
    let block = &block[..block[3..].find("```").unwrap() + 3];
    block
        .lines()
        .filter_map(|line| {
            let (edge, cause) = line.trim().split_once(" : ")?;
            let (from, to) = edge.split_once(" --> ")?;
            Some((from.to_owned(), cause.to_owned(), to.to_owned()))
        })
        .collect()
}

#[test]
fn the_architecture_diagram_matches_the_transition_table() {
    let table: BTreeSet<(String, String, String)> = TRANSITIONS
        .iter()
        .map(|(from, cause, to)| {
            (
                from.as_str().to_owned(),
                (*cause).to_owned(),
                to.as_str().to_owned(),
            )
        })
        .collect();
    let diagram = diagram_edges();
    let missing: Vec<_> = table.difference(&diagram).collect();
    let extra: Vec<_> = diagram.difference(&table).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing from diagram: {missing:?}\nnot in table: {extra:?}"
    );
    assert_eq!(table.len(), 27);
}

#[test]
fn every_terminal_state_is_reachable_and_none_has_an_exit() {
    for state in State::ALL {
        let enters = TRANSITIONS.iter().any(|(_, _, to)| *to == state);
        let leaves = TRANSITIONS.iter().any(|(from, _, _)| *from == state);
        if state == State::Received {
            assert!(leaves && !enters);
        } else if state.is_terminal() {
            assert!(enters && !leaves, "{state}");
        } else {
            assert!(enters && leaves, "{state}");
        }
    }
}
