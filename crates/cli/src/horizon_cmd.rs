//! `nvmos replay --horizon` and `nvmos evaluate --horizon`: wear over a
//! device's lifetime (`nvmos_sim::horizon`). The library runs the study;
//! this parses, shows progress and renders.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nvmos_report::columns::{Column, Columns};
use nvmos_sim::horizon::{self, HorizonOptions, HorizonRow, Progress, Stop, Study, TraceHorizon};
use nvmos_sim::{AllocatorKind, WriteModel};

use crate::evaluate_cmd::StudyArgs;
use nvmos_report::format_value;

/// Most repetitions `--horizon-max-reps` accepts.
const MAX_REPS: u32 = 1 << 20;

/// Runs the long-horizon study on `files`; `out`, when given, receives
/// `horizon.json` and `horizon.csv` (written whole or not at all).
pub fn run(files: &[PathBuf], args: &StudyArgs, out: Option<&Path>) -> Result<()> {
    let allocators = if args.allocators.is_empty() {
        AllocatorKind::ALL.to_vec()
    } else {
        args.allocators
            .iter()
            .map(|name| {
                AllocatorKind::parse(name).with_context(|| {
                    let known: Vec<_> = AllocatorKind::ALL.iter().map(|k| k.name()).collect();
                    format!("unknown allocator {name:?}; known: {}", known.join(", "))
                })
            })
            .collect::<Result<_>>()?
    };
    let memory_frames = args
        .memory
        .as_deref()
        .map(|m| crate::units::parse_memory(m).map_err(|e| anyhow::anyhow!("--memory {m:?}: {e}")))
        .transpose()?;
    if args.cpus == Some(0) {
        anyhow::bail!("--cpus 0: an allocator serves at least one CPU");
    }
    anyhow::ensure!(
        (8..=MAX_REPS).contains(&args.horizon_max_reps),
        "--horizon-max-reps {} is not in 8..={MAX_REPS}",
        args.horizon_max_reps
    );
    let opts = horizon::Options {
        traces: files.to_vec(),
        allocators,
        as_recorded: true,
        memory_frames,
        cpus: args.cpus,
        model: WriteModel {
            writes_per_alloc: args.writes_per_alloc,
        },
        horizon: HorizonOptions {
            max_reps: args.horizon_max_reps,
            ..HorizonOptions::default()
        },
        threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
    };
    let bar = crate::progress_bar((files.len() * (opts.allocators.len() + 1)) as u64);
    let started = std::time::Instant::now();
    let study = horizon::run(&opts, &mut |p| match p {
        Progress::Trace { name, events } => bar.set_message(format!("{name}: {events} events")),
        Progress::Row { .. } => bar.inc(1),
    })?;
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    if let Some(dir) = out {
        let dir = nvmos_report::OutputDir::create(dir, &[])?;
        dir.write_json("horizon.json", &study)?;
        dir.write(
            "horizon.csv",
            columns(true).csv(&rows(&study.traces))?.as_bytes(),
        )?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&study)?);
    } else {
        print!("{}", table(&study)?);
        println!("{:.1} s", elapsed.as_secs_f64());
    }
    Ok(())
}

/// A row's warning: refused allocations or writes outside memory make its
/// figures those of a different workload.
pub fn flag(row: &HorizonRow) -> Option<String> {
    let mut what = Vec::new();
    if row.refused > 0 {
        what.push(format!("{} allocations refused", row.refused));
    }
    if row.outside > 0 {
        what.push(format!("{} frames written outside memory", row.outside));
    }
    if row.result.stop == Stop::MaxReps {
        what.push("not converged".to_owned());
    }
    (!what.is_empty()).then(|| what.join(", "))
}

/// A row of the table: the study's row with its trace's name and
/// accounting (one repetition) and its warning.
#[derive(serde::Serialize)]
struct Row<'a> {
    trace: &'a str,
    flag: Option<String>,
    accounting: &'a nvmos_trace::Accounting,
    #[serde(flatten)]
    row: &'a HorizonRow,
}

fn rows(traces: &[TraceHorizon]) -> Vec<Row<'_>> {
    let rows = traces.iter().flat_map(|t| {
        t.rows.iter().map(|row| Row {
            trace: &t.trace,
            flag: flag(row),
            accounting: &t.accounting,
            row,
        })
    });
    rows.collect()
}

/// The table for the terminal and, `csv` given, `horizon.csv` (headed by
/// field names, with the trace, the accounting and more figures).
fn columns(csv: bool) -> Columns {
    let r = |h: &str, f: &str| Column::number(h, format!("result.{f}")).field(f);
    let years = |i: usize, h: &str, f: &str| r(h, &format!("years_to_first_failure.{i}")).field(f);
    let mut c = Columns::new(csv.then(|| Column::text("trace", "trace")));
    c.extend([
        Column::text("allocator", "allocator"),
        r("reps", "reps"),
        Column::text("stop", "result.stop").with(|v| v.as_str().unwrap_or("-").replace('_', " ")),
        r("max/rep", "max_per_rep"),
        r("mean/rep", "mean_per_rep").files_only(),
        r("fraction of ideal", "fraction_of_ideal").files_only(),
        Column::derived("% ideal", |row| {
            row["result"]["fraction_of_ideal"]
                .as_f64()
                .map(|f| 100.0 * f)
                .into()
        })
        .terminal_only(),
        years(0, "yrs@1e6", "years_1e6"),
        years(1, "yrs@1e7", "years_1e7"),
        years(2, "yrs@1e8", "years_1e8"),
        r("recycled", "recycled_frames"),
        // Traces with sampled writes: the write-weighted lifetime over the
        // whole run ("-" for a trace without; the JSON has the rest).
        Column::number("writes % ideal", "writes.wear.lifetime_pct_of_ideal").terminal_only(),
        Column::number("writes yrs@1e7", "writes.wear.lifetime_years.1").terminal_only(),
        Column::number("secs", "elapsed_ms")
            .with(|v| format!("{:.1}", v.as_f64().unwrap_or(f64::NAN) / 1e3))
            .terminal_only(),
        Column::text("", "flag")
            .with(|v| v.as_str().map_or(String::new(), |f| format!("!! {f}")))
            .terminal_only(),
    ]);
    if csv {
        c.extend(["refused", "outside"].map(|f| Column::number(f, f)));
        c.extend(
            [
                "events_read",
                "lost_events",
                "frees_before_recording",
                "frees_mismatched_order",
                "partial_frees",
                "allocs_of_live_pfn",
                "time_reversals",
            ]
            .map(|f| Column::number(f, format!("accounting.{f}")).field(f)),
        );
        c.push(Column::text("flag", "flag").with(|v| v.as_str().unwrap_or("").into()));
    }
    c
}

fn years(y: Option<f64>) -> String {
    y.map_or_else(|| "-".to_owned(), format_value)
}

/// The table as printed.
pub fn table(study: &Study) -> Result<String> {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "long horizon: {}", study.criterion);
    for t in &study.traces {
        let period = t.rows.first().map_or(0.0, |r| r.result.period_s);
        let _ = writeln!(
            s,
            "\n{} — {} events a repetition of {:.2} s, {} frames, {} CPUs{}",
            t.trace,
            t.events,
            period,
            t.memory_frames,
            t.cpus,
            if t.inferred {
                " (inferred from the trace: highest pfn + block, highest CPU + 1)"
            } else {
                ""
            }
        );
        let unusual: Vec<String> = t
            .accounting
            .rows()
            .iter()
            .skip(1)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        let _ = writeln!(
            s,
            "  one repetition: {} events read{}",
            t.accounting.events_read,
            if unusual.is_empty() {
                String::new()
            } else {
                format!("; {}", unusual.join(", "))
            }
        );
        for line in columns(false).text(&rows(std::slice::from_ref(t)))?.lines() {
            let _ = writeln!(s, "  {line}");
        }
        if let Some(r) = t.rows.first() {
            let _ = writeln!(
                s,
                "  ideal (perfectly even): {} / {} / {} years at 10^6 / 10^7 / 10^8 writes",
                years(r.result.ideal_years[0]),
                years(r.result.ideal_years[1]),
                years(r.result.ideal_years[2])
            );
        }
    }
    Ok(s)
}
