//! `nvmos replay --horizon` and `nvmos evaluate --horizon`: wear over a
//! device's lifetime (`nvmos_sim::horizon`). The library runs the study;
//! this parses, shows progress and renders.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nvmos_sim::horizon::{self, HorizonOptions, HorizonRow, Progress, Stop, Study};
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
    let rows = files.len() * (opts.allocators.len() + 1);
    let bar = crate::progress_bar(rows as u64);
    let started = std::time::Instant::now();
    let study = horizon::run(&opts, &mut |p| match p {
        Progress::Trace { name, events } => bar.set_message(format!("{name}: {events} events")),
        Progress::Row { .. } => bar.inc(1),
    })?;
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut json = nvmos_trace::Output::create(dir.join("horizon.json"), &[])?;
        serde_json::to_writer_pretty(&mut json, &study)?;
        json.write_all(b"\n")?;
        json.commit()?;
        let mut csv = nvmos_trace::Output::create(dir.join("horizon.csv"), &[])?;
        csv.write_all(to_csv(&study).as_bytes())?;
        csv.commit()?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&study)?);
    } else {
        print!("{}", table(&study));
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

fn years(y: Option<f64>) -> String {
    y.map_or_else(|| "-".to_owned(), format_value)
}

/// The table as printed.
pub fn table(study: &Study) -> String {
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
        let _ = writeln!(
            s,
            "  {:<20} {:>6} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>7}",
            "allocator",
            "reps",
            "stop",
            "max/rep",
            "% ideal",
            "yrs@1e6",
            "yrs@1e7",
            "yrs@1e8",
            "recycled",
            "secs"
        );
        for row in &t.rows {
            let r = &row.result;
            let _ = writeln!(
                s,
                "  {:<20} {:>6} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>9} {:>7.1}{}",
                row.allocator,
                r.reps,
                match r.stop {
                    Stop::Converged => "converged",
                    Stop::Endurance => "endurance",
                    Stop::MaxReps => "max reps",
                },
                format_value(r.max_per_rep),
                format_value(100.0 * r.fraction_of_ideal),
                years(r.years_to_first_failure[0]),
                years(r.years_to_first_failure[1]),
                years(r.years_to_first_failure[2]),
                r.recycled_frames,
                row.elapsed_ms / 1e3,
                flag(row).map_or_else(String::new, |f| format!("  !! {f}"))
            );
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
    s
}

/// One line per trace and allocator.
pub fn to_csv(study: &Study) -> String {
    let mut s = String::from("trace,allocator,reps,stop,max_per_rep,mean_per_rep,fraction_of_ideal,years_1e6,years_1e7,years_1e8,recycled_frames,refused,outside,events_read,lost_events,frees_before_recording,frees_mismatched_order,partial_frees,allocs_of_live_pfn,time_reversals,flag\n");
    for t in &study.traces {
        for row in &t.rows {
            let r = &row.result;
            let a = &t.accounting;
            let y = |v: Option<f64>| v.map_or_else(String::new, |v| v.to_string());
            s.push_str(&format!(
                "{},{},{},{:?},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                t.trace,
                row.allocator,
                r.reps,
                r.stop,
                r.max_per_rep,
                r.mean_per_rep,
                r.fraction_of_ideal,
                y(r.years_to_first_failure[0]),
                y(r.years_to_first_failure[1]),
                y(r.years_to_first_failure[2]),
                r.recycled_frames,
                row.refused,
                row.outside,
                a.events_read,
                a.lost_events,
                a.frees_before_recording,
                a.frees_mismatched_order,
                a.partial_frees,
                a.allocs_of_live_pfn,
                a.time_reversals,
                flag(row).unwrap_or_default().replace(',', ";")
            ));
        }
    }
    s
}
