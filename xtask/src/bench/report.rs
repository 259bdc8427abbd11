//! The tables and ratios `cargo xtask bench` prints.

use super::line::Fields;
use super::{FLOOD_CASES, Options, Results, SHORT_DRAIN_MS, SPAWN_CASES, median};

/// Throughput goal: spillguard at least this fraction of the raw loop's.
const THROUGHPUT_GOAL: f64 = 0.95;
/// Peak RSS goal: at most this many MiB above the idle process.
const RSS_GOAL_MIB: f64 = 4.0;
/// Grandchild goal: the call ends at most this long after the child's exit.
const AFTER_EXIT_GOAL_MS: f64 = 250.0;
/// Spawn goal of a call with the default containment (the tree in a
/// control group of its own wherever one can be made): at most this
/// multiple of a raw spawn.
const SPAWN_GOAL: f64 = 1.5;
/// Spawn goal of a call that opted out of the tree's group.
const UNCONTAINED_SPAWN_GOAL: f64 = 1.15;
/// A spawn with a control group and Landlock, against a raw spawn.
const CONFINED_SPAWN_GOAL: f64 = 1.3;
/// Bounded flood goal: a flood's throughput in a control group with
/// limits at least this fraction of the same flood's without.
const CONFINED_FLOOD_GOAL: f64 = 0.95;

/// Prints every section that was run, then the failed case runs.
pub fn print(results: &Results, options: &Options, helper: &str) {
    if options.flood {
        flood(results, options, helper);
    }
    if options.grandchild {
        grandchild(results, options, helper);
    }
    if options.spawn {
        spawn(results, options);
    }
    let runs = results.all().filter(|f| f.text("case") != Some("idle"));
    let (mut cases, mut reaped, mut groups) = (0, 0, 0);
    for fields in runs {
        cases += 1;
        reaped += fields.number("descendants_reaped").unwrap_or(0);
        groups += u64::from(fields.boolean("group_gone") == Some(true));
    }
    println!(
        "\n== processes: {cases} case runs; the cases reaped {reaped} orphaned descendants \
         (as subreapers) and found {groups} helper groups gone (kill(-pgid, 0) = ESRCH); a \
         process left running would be a failed case below"
    );
    if !results.failures.is_empty() {
        println!("\n== failed case runs");
        for failure in &results.failures {
            println!("  {failure}");
        }
    }
}

/// Median, min and max of one figure over a case's successful samples.
pub(super) struct Spread {
    pub(super) median: u64,
    min: u64,
    max: u64,
}

pub(super) fn spread(
    samples: &[&Fields],
    figure: impl Fn(&Fields) -> Option<u64>,
) -> Option<Spread> {
    let values: Vec<u64> = samples.iter().filter_map(|f| figure(f)).collect();
    Some(Spread {
        min: *values.iter().min()?,
        max: *values.iter().max()?,
        median: median(values)?,
    })
}

/// Per-round ratios and their median.
struct RatioSpread {
    median: f64,
    rounds: Vec<f64>,
}

impl RatioSpread {
    fn of(rounds: Vec<f64>) -> Option<Self> {
        let mut sorted = rounds.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => return None,
            _ => (sorted[(n - 1) / 2] + sorted[n / 2]) / 2.0,
        };
        Some(Self { median, rounds })
    }

    /// The per-round ratios in round order, e.g. `0.71 0.69 0.74`.
    fn listed(&self) -> String {
        let listed: Vec<String> = self.rounds.iter().map(|r| format!("{r:.2}")).collect();
        listed.join(" ")
    }
}

/// The highest of one figure over a case's successful samples.
fn highest(samples: &[&Fields], key: &str) -> Option<u64> {
    samples.iter().filter_map(|f| f.number(key)).max()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub(super) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// `a (b-c)` with `scale` applied and `decimals` shown; the spread only
/// when there was more than one sample.
pub(super) fn with_spread(spread: &Spread, scale: f64, decimals: usize) -> String {
    let median = spread.median as f64 * scale;
    if spread.min == spread.max {
        format!("{median:.decimals$}")
    } else {
        let (min, max) = (spread.min as f64 * scale, spread.max as f64 * scale);
        format!("{median:.decimals$} ({min:.decimals$}-{max:.decimals$})")
    }
}

fn size(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

fn flood(results: &Results, options: &Options, helper: &str) {
    println!(
        "\n== flood: {} of stderr in 64 KiB writes, {} round(s), rounds interleaved",
        size(options.bytes),
        options.rounds
    );
    println!(
        "   helper: {helper} --stderr-bytes {} --chunk 64K",
        options.bytes
    );
    println!(
        "   wall: median (min-max) of the rounds, spawn to reaped exit; GiB/s from the median;"
    );
    println!("   peak: the highest VmHWM of the case's own process over the rounds");
    println!();
    println!(
        "{:<7} {:<26}{:>24}{:>8}{:>10}{:>12}{:>13}{:>10}",
        "runtime", "case", "wall s", "GiB/s", "peak MiB", "above idle", "stderr seen", "retained"
    );
    let idle = highest(&results.of("idle"), "vmhwm_kib");
    if let Some(idle) = idle {
        println!(
            "{:<7} {:<26}{:>24}{:>8}{:>10.1}{:>12.1}{:>13}{:>10}",
            "-",
            "idle (does nothing)",
            "-",
            "-",
            mib(idle),
            0.0,
            "-",
            "-"
        );
    }
    for (case, runtime, what) in FLOOD_CASES {
        let samples = results.of(case);
        let failed = results.failed(case);
        let Some(wall) = spread(&samples, |f| f.number("wall_us")) else {
            println!("{runtime:<7} {what:<26}  no successful run ({failed} failed)");
            continue;
        };
        let gibs = options.bytes as f64 / (1u64 << 30) as f64 / (wall.median as f64 / 1e6);
        let peak = highest(&samples, "vmhwm_kib").unwrap_or(0);
        let above = idle.map_or("-".to_owned(), |idle| {
            format!("{:.1}", mib(peak) - mib(idle))
        });
        let seen = highest(&samples, "seen").map_or("-".into(), |n| n.to_string());
        let retained = highest(&samples, "retained").map_or("-".into(), |n| n.to_string());
        let note = if failed > 0 {
            format!("  ({failed} run(s) FAILED)")
        } else {
            String::new()
        };
        println!(
            "{runtime:<7} {what:<26}{:>24}{gibs:>8.2}{:>10.1}{above:>12}{seen:>13}{retained:>10}{note}",
            with_spread(&wall, 1e-6, 3),
            mib(peak),
        );
    }
    println!("\n== flood ratios: median of the per-round ratios (each pair ran back to back)");
    for runtime in ["std", "smol", "tokio"] {
        let spillguard = format!("flood-{runtime}");
        let raw = format!("flood-{runtime}-raw");
        // Throughput ratio = raw wall time / spillguard wall time.
        if let Some(ratios) = RatioSpread::of(results.paired_ratios(&raw, &spillguard, "wall_us")) {
            println!(
                "{runtime:<7}throughput spillguard/raw        {:>12}   goal >= {THROUGHPUT_GOAL:.2}x  {:<6}  per round: {}",
                format!("{:.2}x", ratios.median),
                verdict(ratios.median >= THROUGHPUT_GOAL),
                ratios.listed(),
            );
        }
        let peak = highest(&results.of(&spillguard), "vmhwm_kib");
        let raw_peak = highest(&results.of(&raw), "vmhwm_kib");
        if let (Some(peak), Some(idle)) = (peak, idle) {
            let above = mib(peak) - mib(idle);
            println!(
                "{runtime:<7}spillguard peak RSS above idle   {:>12}   goal <= {RSS_GOAL_MIB:.0} MiB   {}",
                format!("{above:.1} MiB"),
                verdict(above <= RSS_GOAL_MIB)
            );
            if let Some(raw_peak) = raw_peak {
                println!(
                    "{runtime:<7}  (raw loop above idle           {:>12})",
                    format!("{:.1} MiB", mib(raw_peak) - mib(idle))
                );
            }
        }
    }
    // A flood whose tree is in a control group with limits, against the
    // same flood without: the group must not slow the drain.
    if let Some(ratios) =
        RatioSpread::of(results.paired_ratios("flood-std", "flood-std-confined", "wall_us"))
    {
        println!(
            "std    throughput in a cgroup/without {:>12}   goal >= {CONFINED_FLOOD_GOAL:.2}x  {:<6}  per round: {}",
            format!("{:.2}x", ratios.median),
            verdict(ratios.median >= CONFINED_FLOOD_GOAL),
            ratios.listed(),
        );
    }
    let output = spread(&results.of("flood-std-output"), |f| f.number("wall_us"));
    let raw = spread(&results.of("flood-std-raw"), |f| f.number("wall_us"));
    let output_peak = highest(&results.of("flood-std-output"), "vmhwm_kib");
    if let (Some(output), Some(raw), Some(peak), Some(idle)) = (output, raw, output_peak, idle) {
        println!(
            "std    output()/raw throughput       {:>12}   (reference; {:.1} MiB above idle)",
            format!("{:.2}x", raw.median as f64 / output.median as f64),
            mib(peak) - mib(idle)
        );
    }
}

fn grandchild(results: &Results, options: &Options, helper: &str) {
    println!(
        "\n== grandchild: the helper exits at once, its grandchild holds stderr for {} ms",
        options.hold_ms
    );
    println!(
        "   helper: {helper} --grandchild-hold-ms {}",
        options.hold_ms
    );
    println!("   offsets from the record (µs since `received`): the child's exit observed, the");
    println!("   group's SIGTERM, the terminal state; median (min-max) of the rounds");
    println!();
    println!(
        "{:<30}{:>9}{:>13}{:>13}{:>13}{:>26}{:>11}  goal <= {AFTER_EXIT_GOAL_MS:.0} ms after exit",
        "case",
        "drain ms",
        "exited us",
        "SIGTERM us",
        "terminal us",
        "exit->terminal ms",
        "wall ms"
    );
    for (key, label) in [
        ("grandchild-std", "spillguard-std (default)"),
        ("grandchild-std-short", "spillguard-std (short drain)"),
    ] {
        let samples = results.of(key);
        let figure = |k: &'static str| spread(&samples, move |f| f.number(k));
        let after = spread(&samples, |f| {
            f.number("terminal_offset_us")?
                .checked_sub(f.number("exited_offset_us")?)
        });
        let (Some(exited), Some(term), Some(terminal), Some(after), Some(wall)) = (
            figure("exited_offset_us"),
            figure("term_offset_us"),
            figure("terminal_offset_us"),
            after,
            figure("wall_us"),
        ) else {
            println!(
                "{label:<30}  no successful run ({} failed)",
                results.failed(key)
            );
            continue;
        };
        let drain = highest(&samples, "drain_ms").unwrap_or(0);
        let worst_ms = after.max as f64 / 1e3;
        let goal = if worst_ms <= AFTER_EXIT_GOAL_MS {
            "met".to_owned()
        } else if drain as f64 >= AFTER_EXIT_GOAL_MS {
            // The group is signalled when the window ends: the call cannot
            // end inside a window as long as the goal.
            format!(
                "MISSED by {:.1} ms (window {drain} ms + {:.1} ms to end)",
                worst_ms - AFTER_EXIT_GOAL_MS,
                worst_ms - drain as f64
            )
        } else {
            format!("MISSED by {:.1} ms", worst_ms - AFTER_EXIT_GOAL_MS)
        };
        println!(
            "{label:<30}{drain:>9}{:>13}{:>13}{:>13}{:>26}{:>11.1}  {goal}",
            exited.median,
            term.median,
            terminal.median,
            with_spread(&after, 1e-3, 1),
            wall.median as f64 / 1e3,
        );
    }
    let samples = results.of("grandchild-std-output");
    match spread(&samples, |f| f.number("wall_us")) {
        Some(wall) => println!(
            "{:<30}{:>9}{:>13}{:>13}{:>13}{:>26}{:>11.1}  waits for the grandchild ({} ms hold)",
            "Command::output()",
            "-",
            "-",
            "-",
            "-",
            "-",
            wall.median as f64 / 1e3,
            options.hold_ms
        ),
        None => println!(
            "{:<30}  no successful run ({} failed)",
            "Command::output()",
            results.failed("grandchild-std-output")
        ),
    }
    println!("   (short drain: HostOptions.post_exit_drain = {SHORT_DRAIN_MS} ms)");
}

fn spawn(results: &Results, options: &Options) {
    println!(
        "\n== spawn + supervise `true` x{} ({} unclocked warm-up calls first), {} round(s)",
        options.spawn_count,
        SPAWN_CASES
            .iter()
            .filter_map(|(_, case, _)| highest(&results.of(case), "warmup"))
            .max()
            .unwrap_or(0),
        options.rounds
    );
    println!(
        "   µs per call: median (min-max) of the rounds; ratio: median of the per-round ratios"
    );
    println!();
    println!("   default: the tree in a control group of its own (where one can be made)");
    spawn_rows(results, "runtime", &SPAWN_CASES, SPAWN_GOAL);
    println!();
    println!("   opted out of the tree's group (contain_tree(false)): a process group only");
    spawn_rows(
        results,
        "no group",
        &super::UNCONTAINED_SPAWN_CASES,
        UNCONTAINED_SPAWN_GOAL,
    );
    println!();
    println!(
        "   confined: a control group with memory and process limits, rlimits, Landlock file rules"
    );
    spawn_rows(
        results,
        "confined",
        &super::CONFINED_SPAWN_CASES,
        CONFINED_SPAWN_GOAL,
    );
    println!();
    println!(
        "   calls {} ms apart (std, x{}, the pause not clocked), as a host's calls come: the \
         kernel's group lock is cold again at each",
        super::APART_GAP_MS,
        options.spawn_count.min(super::APART_COUNT),
    );
    spawn_rows(results, "apart", &super::APART_SPAWN_CASES, SPAWN_GOAL);
    spawn_rows(
        results,
        "no group",
        &super::APART_UNCONTAINED_SPAWN_CASES,
        UNCONTAINED_SPAWN_GOAL,
    );
    spawn_rows(
        results,
        "confined",
        &super::APART_CONFINED_SPAWN_CASES,
        CONFINED_SPAWN_GOAL,
    );
}

/// One row per (runtime, spillguard case, raw case): µs per call of each
/// and the median of the per-round ratios, against `goal`.
fn spawn_rows(results: &Results, heading: &str, cases: &[(&str, &str, &str)], goal: f64) {
    println!(
        "{heading:<9}{:>28}{:>28}{:>9}  goal <= {goal:.2}x",
        "spillguard µs/call", "raw spawn+wait µs/call", "ratio"
    );
    for &(runtime, spillguard, raw) in cases {
        let per_call = |case: &str| spread(&results.of(case), |f| f.number("per_call_ns"));
        let ratios = RatioSpread::of(results.paired_ratios(spillguard, raw, "per_call_ns"));
        let (Some(sg), Some(raw), Some(ratios)) = (per_call(spillguard), per_call(raw), ratios)
        else {
            println!("{runtime:<9}  no successful pair of runs");
            continue;
        };
        println!(
            "{runtime:<9}{:>28}{:>28}{:>9}  {:<6}  per round: {}",
            with_spread(&sg, 1e-3, 1),
            with_spread(&raw, 1e-3, 1),
            format!("{:.2}x", ratios.median),
            verdict(ratios.median <= goal),
            ratios.listed(),
        );
    }
}
