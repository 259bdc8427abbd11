//! `cargo xtask bench --plot [PATH]`: the peak memory of a stderr flood
//! against its volume (16 MiB to 1 GiB), spillguard on each runtime next to
//! `Command::output()`, drawn as an SVG.
//!
//! Each point is a `bench-case` run in its own process, so its peak RSS
//! (`VmHWM`) is that case's alone; with several rounds a point is the
//! highest peak of its rounds. The idle case, which does nothing, is the
//! baseline every process starts from.

use std::path::Path;

use super::svg::{Chart, Series, render};
use super::{Binaries, Options, Results, run_case};

/// Flood volumes plotted, in MiB.
pub const VOLUMES_MIB: [u64; 4] = [16, 64, 256, 1024];

/// The plotted cases: (case, legend, colour, dashed).
const SERIES: [(&str, &str, &str, bool); 5] = [
    (
        "flood-std-output",
        "std Command::output()",
        "#d62728",
        false,
    ),
    ("flood-std", "spillguard-std", "#1f77b4", false),
    ("flood-smol", "spillguard-smol", "#2ca02c", false),
    ("flood-tokio", "spillguard-tokio", "#9467bd", false),
    ("idle", "idle process (baseline)", "#7f7f7f", true),
];

/// The sample key of `case` at `mib` MiB.
fn key(case: &str, mib: u64) -> String {
    format!("{case}@{mib}")
}

/// Runs every plotted case at every volume, rounds interleaved.
pub fn measure(binaries: &Binaries, options: &Options) -> Results {
    let mut results = Results::default();
    for round in 1..=options.rounds {
        for mib in VOLUMES_MIB {
            let bytes = ["--bytes".to_owned(), (mib << 20).to_string()];
            let timeout = std::time::Duration::from_secs(60 + 60 * mib.div_ceil(1024));
            for (case, _, _, _) in SERIES {
                let key = key(case, mib);
                eprint!("bench plot round {round}/{}: {key} ... ", options.rounds);
                let extra: &[String] = if case == "idle" { &[] } else { &bytes };
                let sample = run_case(binaries, case, extra, timeout);
                results.record(&key, round, sample);
            }
        }
    }
    results
}

/// The highest peak RSS of `case` at each volume, in MiB; volumes with no
/// successful run are left out.
fn peaks(results: &Results, case: &str) -> Vec<(u64, f64)> {
    VOLUMES_MIB
        .iter()
        .filter_map(|&mib| {
            let kib = results
                .of(&key(case, mib))
                .iter()
                .filter_map(|f| f.number("vmhwm_kib"))
                .max()?;
            Some((mib, kib as f64 / 1024.0))
        })
        .collect()
}

/// `16 MiB`, `1 GiB`.
fn volume(mib: f64) -> String {
    if mib >= 1024.0 {
        format!("{} GiB", mib / 1024.0)
    } else {
        format!("{mib} MiB")
    }
}

/// `0.5`, `4`, `1024`: MiB without a needless decimal.
fn mebibytes(mib: f64) -> String {
    if mib >= 10.0 || mib.fract() == 0.0 {
        format!("{mib:.0}")
    } else {
        format!("{mib:.1}")
    }
}

/// The chart of `results`.
pub fn chart(results: &Results) -> Chart {
    Chart {
        title: "Peak memory of a stderr flood: spillguard vs Command::output()".into(),
        x_label: "stderr written by the helper (log scale)".into(),
        y_label: "peak RSS of the process, MiB (log scale)".into(),
        x_tick: volume,
        y_tick: mebibytes,
        series: SERIES
            .iter()
            .map(|&(case, name, colour, dashed)| {
                let points: Vec<(f64, f64)> = peaks(results, case)
                    .into_iter()
                    .map(|(mib, peak)| (mib as f64, peak))
                    .collect();
                // The legend gives the figure at the largest flood.
                let name = match points.last() {
                    Some(&(mib, peak)) => {
                        format!("{name}: {} MiB at {}", mebibytes(peak), volume(mib))
                    }
                    None => name.to_owned(),
                };
                Series {
                    name,
                    colour: colour.into(),
                    dashed,
                    points,
                }
            })
            .collect(),
    }
}

/// Prints the figures behind the chart, one row per case.
pub fn print(results: &Results, options: &Options) {
    println!(
        "\n== flood peak RSS (VmHWM of the case's own process, MiB; the highest of {} round(s))",
        options.rounds
    );
    print!("{:<26}", "case");
    for mib in VOLUMES_MIB {
        print!("{:>10}", volume(mib as f64));
    }
    println!();
    for (case, name, _, _) in SERIES {
        print!("{name:<26}");
        let peaks = peaks(results, case);
        for mib in VOLUMES_MIB {
            match peaks.iter().find(|(m, _)| *m == mib) {
                Some((_, peak)) => print!("{peak:>10.1}"),
                None => print!("{:>10}", "-"),
            }
        }
        println!();
    }
}

/// Writes the chart to `path`, creating its directory.
pub fn write(results: &Results, path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
    }
    std::fs::write(path, render(&chart(results)))
        .map_err(|error| format!("cannot write {}: {error}", path.display()))
}
