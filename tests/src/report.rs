//! Runs the catalogue on several runtimes and reports: a table with one row
//! per scenario and one column per runtime, the failed expectations, and
//! the differences between runtimes' records.

use std::fmt::Write as _;

use serde::Serialize;
use spillguard_core::CallRecord;

use crate::compare::{Difference, compare};
use crate::drivers::Runtime;
use crate::expect::{Failure, check};
use crate::measure::{Measured, MeasuredCall};
use crate::scenario::{Environment, Scenario};

/// One scenario on one runtime.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// The runtime.
    pub runtime: String,
    /// Failed expectations; empty when the run is correct.
    pub failures: Vec<Failure>,
    /// What was measured.
    pub measured: Measured,
}

/// One scenario on every runtime asked.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    /// Behaviour name.
    pub name: String,
    /// Mission number (`S1`…).
    pub id: String,
    /// One sentence.
    pub summary: String,
    /// One run per runtime, in the order asked.
    pub runs: Vec<Run>,
    /// Record fields that differ between runtimes after normalisation.
    pub differences: Vec<Difference>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The runtimes, in column order.
    pub runtimes: Vec<String>,
    /// Whether records were compared (more than one runtime).
    pub compared: bool,
    /// One entry per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// No failed expectation and no difference.
    pub ok: bool,
}

/// Runs each scenario on each runtime, one run at a time, checks every run
/// and compares the records across runtimes. `progress` is told each run
/// as it starts (`scenario on runtime`).
pub fn run_all(
    scenarios: &[Scenario],
    runtimes: &[Runtime],
    env: &Environment,
    mut progress: impl FnMut(&Scenario, Runtime),
) -> Report {
    let mut reports = Vec::new();
    for scenario in scenarios {
        let mut runs = Vec::new();
        for &runtime in runtimes {
            progress(scenario, runtime);
            let measured = runtime.run(scenario, env);
            runs.push(Run {
                runtime: runtime.name().to_owned(),
                failures: check(scenario, &measured),
                measured,
            });
        }
        let measured: Vec<Measured> = runs.iter().map(|r| r.measured.clone()).collect();
        reports.push(ScenarioReport {
            name: scenario.name.to_owned(),
            id: scenario.id.to_owned(),
            summary: scenario.summary.to_owned(),
            differences: compare(scenario, &measured),
            runs,
        });
    }
    let ok = reports
        .iter()
        .all(|s| s.differences.is_empty() && s.runs.iter().all(|r| r.failures.is_empty()));
    Report {
        runtimes: runtimes.iter().map(|r| r.name().to_owned()).collect(),
        compared: runtimes.len() > 1,
        scenarios: reports,
        ok,
    }
}

impl Report {
    /// The table, then the failures, then the differences, as text.
    pub fn to_text(&self) -> String {
        let mut header = vec!["scenario".to_owned()];
        header.extend(self.runtimes.iter().cloned());
        header.push("audit (S10)".to_owned());
        let rows: Vec<Vec<Vec<String>>> = self
            .scenarios
            .iter()
            .map(|s| {
                let mut name = vec![s.id.clone()];
                name.extend(wrap(&s.name, 34));
                let mut row = vec![name];
                row.extend(s.runs.iter().map(cell));
                row.push(s.runs.iter().map(audit_cell).collect());
                row
            })
            .collect();
        let mut out = table(&header, &rows);
        let capacity = self
            .scenarios
            .iter()
            .flat_map(|s| &s.runs)
            .map(|r| r.measured.pool.capacity)
            .max()
            .unwrap_or(0);
        let times: Vec<String> = self
            .runtimes
            .iter()
            .map(|runtime| {
                let ms: f64 = self
                    .scenarios
                    .iter()
                    .flat_map(|s| &s.runs)
                    .filter(|r| &r.runtime == runtime)
                    .map(|r| r.measured.wall_ms)
                    .sum();
                format!("{runtime} {:.1} s", ms / 1000.0)
            })
            .collect();
        let _ = writeln!(out, "run time (all scenarios): {}", times.join(", "));
        let _ = writeln!(
            out,
            "exit CODE/sig SIGNAL ('-' is null); stderr and pool figures in bytes; \
             pool capacity (stderr_retained_process_bytes) {capacity}"
        );
        let _ = writeln!(
            out,
            "audit (S10): each run's hash-chained log verified against its anchor and \
             compared with every record's lifecycle"
        );
        let failed: Vec<String> = self
            .scenarios
            .iter()
            .flat_map(|s| {
                s.runs.iter().flat_map(move |run| {
                    run.failures
                        .iter()
                        .map(move |f| format!("  {} on {}: {f}", s.id, run.runtime))
                })
            })
            .collect();
        if failed.is_empty() {
            out.push_str("expectations: all held\n");
        } else {
            let _ = writeln!(out, "expectations: {} failed", failed.len());
            out.push_str(&failed.join("\n"));
            out.push('\n');
        }
        let differences: Vec<String> = self
            .scenarios
            .iter()
            .flat_map(|s| s.differences.iter().map(|d| format!("  {d}")))
            .collect();
        if !self.compared {
            out.push_str("records: one runtime only, nothing to compare\n");
        } else if differences.is_empty() {
            let _ = writeln!(
                out,
                "records: identical across {} after normalisation",
                self.runtimes.join(", ")
            );
        } else {
            let _ = writeln!(out, "records: {} difference(s)", differences.len());
            out.push_str(&differences.join("\n"));
            out.push('\n');
        }
        out
    }
}

/// `text` split into lines of at most `width` characters, at `_`.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_inclusive('_') {
        let last = lines.last_mut().map_or(0, |l| l.len());
        if last > 0 && last + word.len() > width {
            lines.push(String::new());
        }
        if let Some(line) = lines.last_mut() {
            line.push_str(word);
        }
    }
    lines
}

/// The measured facts of one run, one fact per line.
fn cell(run: &Run) -> Vec<String> {
    let m = &run.measured;
    let mut lines = Vec::new();
    let mut plans: Vec<(String, Vec<&MeasuredCall>)> = Vec::new();
    for call in &m.calls {
        let label = plan_label(&call.call_id, m);
        match plans.iter_mut().find(|(l, _)| *l == label) {
            Some((_, calls)) => calls.push(call),
            None => plans.push((label, vec![call])),
        }
    }
    for (label, calls) in &plans {
        lines.extend(plan_facts(label, calls));
    }
    let alive = m
        .calls
        .iter()
        .filter(|c| {
            c.group
                .as_ref()
                .is_some_and(|g| g.alive || !g.members_left.is_empty())
        })
        .count();
    lines.push(format!(
        "pool peak {}, sampled max {}",
        m.pool.peak, m.pool.sampled_max
    ));
    lines.push(format!(
        "group alive afterwards: {}",
        if alive == 0 {
            "no".to_owned()
        } else {
            format!("YES ({alive})")
        }
    ));
    lines.push(if run.failures.is_empty() {
        format!("ok in {:.0} ms", m.wall_ms)
    } else {
        format!("FAILED: {} expectation(s)", run.failures.len())
    });
    lines
}

/// One line on a run's audit log: `std: ok, 19 records`, or what failed
/// (the verdict's first words; the whole line is among the failures).
fn audit_cell(run: &Run) -> String {
    let Some(chain) = &run.measured.audit_chain else {
        return format!("{}: not checked", run.runtime);
    };
    if !chain.verified {
        let short = chain.verdict.split(" (").next().unwrap_or_default();
        return format!("{}: {short}", run.runtime);
    }
    if !chain.matches_expected_lifecycle {
        return format!("{}: {} difference(s)", run.runtime, chain.differences.len());
    }
    format!("{}: ok, {} records", run.runtime, chain.records)
}

/// `c_s7_03` → `c_s7` when the run has several copies of it.
fn plan_label(call_id: &str, m: &Measured) -> String {
    match call_id.rsplit_once('_') {
        Some((prefix, n))
            if n.len() == 2
                && n.bytes().all(|b| b.is_ascii_digit())
                && m.calls
                    .iter()
                    .filter(|c| c.call_id.starts_with(prefix))
                    .count()
                    > 1 =>
        {
            prefix.to_owned()
        }
        _ => call_id.to_owned(),
    }
}

fn plan_facts(label: &str, calls: &[&MeasuredCall]) -> Vec<String> {
    let records: Vec<&CallRecord> = calls.iter().filter_map(|c| c.record.as_ref()).collect();
    let Some(first) = records.first() else {
        return vec![format!("{label}: no record")];
    };
    let mut lines = Vec::new();
    let same_state = records.iter().all(|r| r.state == first.state);
    if calls.len() == 1 {
        lines.push(format!("{label}: {}", first.state));
    } else {
        let state = if same_state {
            first.state.as_str()
        } else {
            "mixed states"
        };
        lines.push(format!(
            "{label} x{}: {} records, {state}",
            calls.len(),
            records.len()
        ));
    }
    let show = |v: Option<i32>| v.map_or("-".to_owned(), |v| v.to_string());
    lines.push(format!(
        "  exit {}/sig {}, {}",
        show(first.exit_status),
        show(first.exit_signal),
        first.stream_end_name()
    ));
    if records.len() == 1 {
        lines.push(format!(
            "  stderr seen {}, kept {}",
            first.stderr_bytes_seen, first.stderr_bytes_retained
        ));
    } else {
        let seen: u64 = records.iter().map(|r| r.stderr_bytes_seen).sum();
        let kept: u64 = records.iter().map(|r| r.stderr_bytes_retained).sum();
        lines.push(format!("  stderr seen {seen}, kept {kept} (sums)"));
    }
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    let mut timing = Vec::new();
    if let Some(us) = calls[0].time_to_card_us {
        timing.push(format!("card {}", ms(us)));
    }
    if let Some(us) = calls[0].cancel_to_exit_us {
        timing.push(format!("cancel->exit {}", ms(us)));
    }
    if !timing.is_empty() {
        lines.push(format!("  {}", timing.join(", ")));
    }
    lines
}

/// Names used in the table (the record's serde names).
trait StreamEndName {
    fn stream_end_name(&self) -> String;
}

impl StreamEndName for CallRecord {
    fn stream_end_name(&self) -> String {
        serde_json::to_value(self.stream_end)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// A text table with multi-line cells.
fn table(header: &[String], rows: &[Vec<Vec<String>>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            for line in cell {
                widths[i] = widths[i].max(line.chars().count());
            }
        }
    }
    let rule: String = widths
        .iter()
        .map(|w| "-".repeat(w + 2))
        .collect::<Vec<_>>()
        .join("+");
    let line = |cells: Vec<&str>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!(" {c:<w$} "))
            .collect();
        padded.join("|").trim_end().to_owned()
    };
    let mut out = String::new();
    out.push_str(&line(header.iter().map(String::as_str).collect()));
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    for row in rows {
        let height = row.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..height {
            let cells: Vec<&str> = (0..columns)
                .map(|c| {
                    row.get(c)
                        .and_then(|cell| cell.get(i))
                        .map_or("", String::as_str)
                })
                .collect();
            out.push_str(&line(cells));
            out.push('\n');
        }
        out.push_str(&rule);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_wrap_at_underscores() {
        assert_eq!(wrap("a_bb_ccc", 5), ["a_bb_", "ccc"]);
        assert_eq!(wrap("abc", 1), ["abc"]);
    }

    #[test]
    fn tables_pad_multi_line_cells() {
        let header = vec!["a".to_owned(), "b".to_owned()];
        let rows = vec![vec![
            vec!["x".to_owned()],
            vec!["1".to_owned(), "22".to_owned()],
        ]];
        assert_eq!(
            table(&header, &rows),
            " a | b\n---+----\n x | 1\n   | 22\n---+----\n"
        );
    }
}
